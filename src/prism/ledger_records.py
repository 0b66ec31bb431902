"""Run ledger records: the rows a run writes to its ledger, and the builders of run rows.

* [`RunRecord`][prism.ledger_records.RunRecord] — the start and finish rows of a run (built with [`start_run_record()`][prism.ledger_records.start_run_record]
  and [`finish_run_record()`][prism.ledger_records.finish_run_record]);
* [`AgentEventRecord`][prism.ledger_records.AgentEventRecord] — one emitted event;
* [`ToolCallRecord`][prism.ledger_records.ToolCallRecord] — one tool-call state change;
* [`UsageRecord`][prism.ledger_records.UsageRecord] — token and cost usage of one provider attempt or of the whole run;
* [`RequestRecord`][prism.ledger_records.RequestRecord] — the hash of what one provider attempt asked the model
  ([`prism.request_hash`][prism.request_hash]), with the request's head on the first row of a run that carries
  it.

Every record carries the ownership fields ``tenant_id``/``account_id``/``user_id``. This module
sits below the ledger protocol and writer ([`prism.ledger`][prism.ledger]) and the timeline projection
([`prism.timeline`][prism.timeline]).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias

from prism._serde import Serializable
from prism._util import now_iso
from prism.events import AgentEvent
from prism.types import ErrorInfo, JsonValue, ModelConfig, OwnershipScope, ToolResult, Usage

__all__ = [
    "AgentEventRecord",
    "LedgerRecord",
    "RequestRecord",
    "RunRecord",
    "RunRecordStatus",
    "ToolCallRecord",
    "ToolCallStatus",
    "UsageRecord",
    "UsageScope",
    "finish_run_record",
    "start_run_record",
]

RunRecordStatus: TypeAlias = Literal[
    "queued", "running", "suspended", "denied", "succeeded", "failed", "aborted"
]
"""Status of a [`RunRecord`][prism.ledger_records.RunRecord]."""

ToolCallStatus: TypeAlias = Literal["started", "finished", "error", "blocked"]
"""Status of a [`ToolCallRecord`][prism.ledger_records.ToolCallRecord] row."""

UsageScope: TypeAlias = Literal["provider_turn", "run_total"]
"""Scope of a [`UsageRecord`][prism.ledger_records.UsageRecord]."""


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord(Serializable):
    """One start or finish row of a run.

    The start row (``status="running"``) is appended while the run is set up; the finish row
    repeats its fields and adds ``status``, ``finished_at``, ``abort_reason``, ``error`` and — only on a
    ``succeeded`` finish — ``stop_reason``/``stop_detail``. Build them with
    [`start_run_record()`][prism.ledger_records.start_run_record] and [`finish_run_record()`][prism.ledger_records.finish_run_record].
    """

    id: str
    """The run id (``run_…``)."""
    session_id: str
    """Session of the run."""
    status: RunRecordStatus
    """``running`` on the start row; the terminal status on the finish row."""
    started_at: str
    """ISO-8601 UTC start time."""
    agent_id: str | None = None
    """The running agent's ``config.id or config.name`` (``None`` for an agent with neither,
    and on rows written before the field existed)."""
    branch_id: str | None = None
    """The session leaf when the run started."""
    model: ModelConfig | None = None
    """Effective model of the run."""
    provider: str | None = None
    """``model.provider``."""
    idempotency_key: str | None = None
    """The run's idempotency key."""
    finished_at: str | None = None
    """ISO-8601 UTC finish time (finish row only)."""
    abort_reason: str | None = None
    """``str(signal.reason)`` when the run signal was aborted."""
    error: ErrorInfo | None = None
    """Failure description (redacted) of a failed/aborted run."""
    stop_reason: str | None = None
    """Turn-policy or loop stop reason; only on a ``succeeded`` finish row."""
    stop_detail: str | None = None
    """Turn-policy stop detail; only on a ``succeeded`` finish row."""
    tenant_id: str | None = None
    """Ownership: tenant."""
    account_id: str | None = None
    """Ownership: account."""
    user_id: str | None = None
    """Ownership: user."""
    metadata: Mapping[str, JsonValue] | None = None
    """Merged run metadata."""

    @property
    def run_id(self) -> str:
        """Alias of [`id`][prism.ledger_records.RunRecord.id]."""
        return self.id


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentEventRecord(Serializable):
    """Ledger row of one emitted event, written in emission order."""

    id: str
    """Record id (``event_…``)."""
    session_id: str
    """Session of the event."""
    run_id: str
    """Run of the event."""
    type: str
    """The event's ``type`` literal."""
    timestamp: str
    """ISO-8601 UTC emission time."""
    event: AgentEvent
    """The (redacted) event."""
    redacted: bool = False
    """True when a redactor was active."""
    tenant_id: str | None = None
    """Ownership: tenant."""
    account_id: str | None = None
    """Ownership: account."""
    user_id: str | None = None
    """Ownership: user."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRecord(Serializable):
    """Ledger row of one tool-call state change, redacted before writing."""

    id: str
    """Record id (``toolcall_…``)."""
    session_id: str
    """Session of the run."""
    run_id: str
    """Run of the call."""
    tool_call_id: str
    """The call's id."""
    name: str
    """Tool name."""
    arguments: JsonValue
    """The call's arguments (after the ``tool_call`` hook)."""
    status: ToolCallStatus
    """``started`` (also for progress rows), ``finished``, ``error`` or ``blocked``."""
    started_at: str
    """ISO-8601 UTC time the dispatch started."""
    finished_at: str | None = None
    """ISO-8601 UTC time of the terminal row."""
    result: ToolResult | None = None
    """The result of a terminal row."""
    reason: str | None = None
    """Blocked reason of a ``blocked`` row."""
    progress: JsonValue | None = None
    """Progress value of a progress row."""
    progress_metadata: Mapping[str, JsonValue] | None = None
    """Progress metadata of a progress row."""
    progress_at: str | None = None
    """ISO-8601 UTC time of the progress report."""
    redacted: bool = False
    """True when a redactor was active."""
    tenant_id: str | None = None
    """Ownership: tenant."""
    account_id: str | None = None
    """Ownership: account."""
    user_id: str | None = None
    """Ownership: user."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageRecord(Serializable):
    """Ledger row of usage."""

    id: str
    """Record id (``usage_…``)."""
    session_id: str
    """Session of the run."""
    run_id: str
    """Run id."""
    scope: UsageScope
    """``provider_turn`` (one attempt) or ``run_total``."""
    usage: Usage
    """The usage."""
    timestamp: str
    """ISO-8601 UTC time of the row."""
    turn: int | None = None
    """Turn of a ``provider_turn`` row."""
    attempt: int | None = None
    """Attempt of a ``provider_turn`` row."""
    provider_id: str | None = None
    """Provider that served a ``provider_turn`` row's attempt (a fallback's when one did)."""
    model: str | None = None
    """Model name that served a ``provider_turn`` row's attempt."""
    tenant_id: str | None = None
    """Ownership: tenant."""
    account_id: str | None = None
    """Ownership: account."""
    user_id: str | None = None
    """Ownership: user."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestRecord(Serializable):
    """Ledger row of one provider attempt's request: the canonical hash of what the model was
    asked ([`prism.request_hash.fingerprint_request()`][prism.request_hash.fingerprint_request]), the hash of its head (system
    prompt, tool schemas, model and options) and, on the first row of a run with that head, the
    head itself (a store keeps one head per distinct hash). Written when the attempt starts, by
    ledgers that have ``append_request`` (``prism.ledger.RequestLedger``).
    """

    id: str
    """Record id (``request_…``)."""
    session_id: str
    """Session of the run."""
    run_id: str
    """Run id."""
    turn: int
    """The provider turn (1-based)."""
    attempt: int
    """The attempt of that turn (1-based; a fallback's first attempt is 1 again)."""
    provider_id: str
    """Provider asked (a fallback's when one took over)."""
    model: str
    """Model name asked."""
    request_hash: str
    """SHA-256 hex of the request as the model sees it ([`prism.request_hash`][prism.request_hash])."""
    head_hash: str
    """SHA-256 hex of the request's head."""
    messages: int
    """Messages of the conversation after the leading system messages."""
    timestamp: str
    """ISO-8601 UTC time the attempt started."""
    head: Mapping[str, JsonValue] | None = None
    """The head (``prism.request_hash.request_head``), on the run's first row with
    ``head_hash``; ``None`` on later ones."""
    hash_version: int = 1
    """Version of the hash definition (``prism.request_hash.REQUEST_HASH_VERSION``)."""
    tenant_id: str | None = None
    """Ownership: tenant."""
    account_id: str | None = None
    """Ownership: account."""
    user_id: str | None = None
    """Ownership: user."""


LedgerRecord: TypeAlias = RunRecord | AgentEventRecord | ToolCallRecord | UsageRecord
"""Any record of the four ledger tables every ledger has (request rows are optional:
[`RequestRecord`][prism.ledger_records.RequestRecord])."""


def start_run_record(
    *,
    run_id: str,
    session_id: str,
    branch_id: str | None,
    model: ModelConfig | None,
    idempotency_key: str | None = None,
    metadata: Mapping[str, JsonValue] | None = None,
    ownership: OwnershipScope | None = None,
    started_at: str | None = None,
    agent_id: str | None = None,
) -> RunRecord:
    """Build the start [`RunRecord`][prism.ledger_records.RunRecord]: ``status="running"``, ``provider =
    model.provider``, ownership copied, ``started_at`` defaulting to now, ``agent_id`` the
    running agent's ``config.id or config.name``."""
    return RunRecord(
        id=run_id,
        session_id=session_id,
        status="running",
        started_at=started_at if started_at is not None else now_iso(),
        agent_id=agent_id,
        branch_id=branch_id,
        model=model,
        provider=model.provider if model is not None else None,
        idempotency_key=idempotency_key,
        tenant_id=ownership.tenant_id if ownership is not None else None,
        account_id=ownership.account_id if ownership is not None else None,
        user_id=ownership.user_id if ownership is not None else None,
        metadata=metadata,
    )


def finish_run_record(
    start: RunRecord,
    *,
    status: RunRecordStatus,
    abort_reason: str | None = None,
    error: ErrorInfo | None = None,
    stop_reason: str | None = None,
    stop_detail: str | None = None,
    finished_at: str | None = None,
) -> RunRecord:
    """Build the finish [`RunRecord`][prism.ledger_records.RunRecord] from the start one.

    ``stop_reason``/``stop_detail`` are kept only when ``status == "succeeded"``.
    """
    succeeded = status == "succeeded"
    return dataclasses.replace(
        start,
        status=status,
        finished_at=finished_at if finished_at is not None else now_iso(),
        abort_reason=abort_reason,
        error=error,
        stop_reason=stop_reason if succeeded else None,
        stop_detail=stop_detail if succeeded else None,
    )
