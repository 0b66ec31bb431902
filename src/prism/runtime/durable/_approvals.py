"""Approvals: operator decisions, their validation and application, sticky matching.

Private module behind ``prism.runtime.durable``. The per-leg durable machine that gates calls
and writes envelopes is [`DurableRun`][prism.runtime.durable._durable_run.DurableRun].
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from prism._util import now_iso
from prism.errors import AgentDecisionError, AgentRunStateError
from prism.redaction import REDACTED
from prism.runtime.durable._envelope import (
    arguments_hash,
)
from prism.runtime.durable._run_envelope import PendingCall, RunEnvelope
from prism.runtime.durable._run_state import (
    ALLOWING,
    MAX_APPROVAL_ID,
    MAX_BY,
    MAX_DECISIONS,
    MAX_MODIFIED_BYTES,
    MAX_REASON_BYTES,
    MAX_SHOWN_ARGUMENTS_BYTES,
    MAX_STICKY,
    OUTCOMES,
    AgentRunInterruption,
    DecidedApproval,
    DecisionScope,
    PendingDecision,
    RunDecision,
    StickyDecision,
)
from prism.types import (
    ErrorInfo,
    ToolCallContent,
    ToolResult,
    canonical_json,
    is_json_value,
)

if TYPE_CHECKING:
    from prism.redaction import SecretRedactor
    from prism.tools import ToolRegistry

__all__ = [
    "apply_decisions",
    "check_by",
    "open_approvals",
    "restore_arguments",
    "check_bound_arguments",
    "coerce_decisions",
    "decision_error",
    "pending_decision",
    "rejection_result",
    "round_interruption",
    "sticky_match",
]


# --------------------------------------------------------------------------- approvals (APR-*)


def sticky_match(
    stickies: Sequence[StickyDecision], call: ToolCallContent, digest: str | None = None
) -> StickyDecision | None:
    """The first sticky decision whose set scope fields equal the call's (``digest``: the hash
    of its arguments as an approval shows them, else computed from ``call``)."""
    if not stickies:
        return None
    for sticky in stickies:
        scope = sticky.scope
        if scope.tool_name is not None and scope.tool_name != call.name:
            continue
        if scope.arguments_hash is not None:
            if digest is None:
                try:
                    digest = arguments_hash(call.arguments)
                except (TypeError, ValueError):
                    digest = ""
            if scope.arguments_hash != digest:
                continue
        return sticky
    return None


def decision_error(code: str, message: str) -> AgentDecisionError:
    return AgentDecisionError(code, message)


def coerce_decisions(decisions: Any) -> list[RunDecision]:
    """Shape, sizes and duplicates of a decision batch (before any read or write)."""
    invalid = "ERR_PRISM_DECISION_INVALID"
    if isinstance(decisions, (str, bytes, Mapping)) or not isinstance(decisions, Sequence):
        raise decision_error(invalid, "decisions must be a sequence of RunDecision")
    if not decisions:
        raise decision_error(invalid, "decisions must not be empty")
    if len(decisions) > MAX_DECISIONS:
        raise decision_error(
            "ERR_PRISM_DECISION_LIMIT", f"at most {MAX_DECISIONS} decisions per resume"
        )
    out: list[RunDecision] = []
    seen: set[str] = set()
    for item in decisions:
        if isinstance(item, Mapping):
            try:
                item = RunDecision.from_dict(item)
            except Exception as exc:
                raise decision_error(invalid, f"malformed decision: {exc}") from exc
        if not isinstance(item, RunDecision):
            raise decision_error(invalid, "decisions must be RunDecision objects")
        approval_id = item.approval_id
        if not isinstance(approval_id, str) or not approval_id:
            raise decision_error(invalid, "approval_id must be a non-empty string")
        if len(approval_id) > MAX_APPROVAL_ID:
            raise decision_error(invalid, f"approval_id is longer than {MAX_APPROVAL_ID}")
        if item.outcome not in OUTCOMES:
            raise decision_error(invalid, f"unknown decision outcome: {item.outcome!r}")
        reason = item.reason
        if reason is not None:
            if not isinstance(reason, str):
                raise decision_error(invalid, "decision reason must be a string")
            if len(reason.encode("utf-8")) > MAX_REASON_BYTES:
                raise decision_error(
                    "ERR_PRISM_DECISION_LIMIT",
                    f"decision reason is longer than {MAX_REASON_BYTES} bytes",
                )
        check_by(item.by)
        modified = item.modified_arguments
        if modified is not None:
            if not isinstance(modified, dict) or not is_json_value(modified):
                raise decision_error(invalid, "modified_arguments must be a JSON object")
            if len(canonical_json(modified).encode("utf-8")) > MAX_MODIFIED_BYTES:
                raise decision_error(
                    "ERR_PRISM_DECISION_LIMIT",
                    f"modified_arguments are larger than {MAX_MODIFIED_BYTES} bytes",
                )
        if approval_id in seen:
            raise decision_error(
                "ERR_PRISM_DECISION_DUPLICATE", f"approval_id {approval_id} appears twice"
            )
        seen.add(approval_id)
        out.append(item)
    return out


def check_by(by: object) -> None:
    """``RunDecision.by`` (or a ``by=`` argument): ``None`` or 1–256 characters.

    Raises:
        AgentDecisionError: ``ERR_PRISM_DECISION_INVALID``.
    """
    if by is None:
        return
    if not isinstance(by, str) or not by:
        raise decision_error(
            "ERR_PRISM_DECISION_INVALID", f"decision by must be a non-empty string, got {by!r}"
        )
    if len(by) > MAX_BY:
        raise decision_error(
            "ERR_PRISM_DECISION_INVALID", f"decision by is longer than {MAX_BY} characters"
        )


def _validate_modified(registry: ToolRegistry, name: str, arguments: dict[str, Any]) -> None:
    """Modified arguments must match the tool's parameter schema (checked by the tool validator)."""
    from prism.abort import AbortController
    from prism.tools import json_schema_tool_validator
    from prism.types import ToolExecutionContext

    tool = registry.get(name)
    if tool is None:
        raise decision_error(
            "ERR_PRISM_DECISION_INVALID", f"modified_arguments for unknown tool {name}"
        )
    context = ToolExecutionContext(
        session_id="", run_id="", tool_call_id="", signal=AbortController().signal
    )
    problem = json_schema_tool_validator()(tool, arguments, context)
    if problem is not None:
        raise decision_error(
            "ERR_PRISM_DECISION_INVALID", f"modified_arguments do not match {name}: {problem}"
        )


@dataclass(slots=True)
class _Applied:
    """The outcome of applying a decision batch to a suspended envelope."""

    pending_calls: tuple[PendingCall, ...]
    sticky: tuple[Mapping[str, Any], ...]
    remaining: list[PendingDecision]
    decided: tuple[DecidedApproval, ...]
    """What the batch decided, for the envelope's ``decided``."""


def open_approvals(state: RunEnvelope) -> dict[str, PendingDecision]:
    """The approvals a decision may answer now, by id: the undecided ``ready`` calls of a
    suspended run and its suspended child runs' open approvals (empty for another status)."""
    if state.status != "suspended":
        return {}
    entries = state.calls
    interruption = state.interruption_view()
    pending_by_id = (
        {} if interruption is None else {p.approval_id: p for p in interruption.pending_decisions}
    )
    out = {
        e.approval_id: pending_by_id.get(e.approval_id) or _pending_for(e)
        for e in entries
        if e.decision is None and e.status == "ready"
    }
    out.update(_ChildDecisions(entries, pending_by_id).open)
    return out


def _decided(
    run_id: str,
    item: RunDecision,
    pending: PendingDecision | None,
    applied_at: str,
    recorded: Mapping[str, str] | None,
) -> DecidedApproval:
    """The envelope's record of ``item``, applied at ``applied_at`` (decided when it was
    recorded, for a recorded decision)."""
    return DecidedApproval(
        run_id=run_id,
        approval_id=item.approval_id,
        outcome=item.outcome,
        by=item.by,
        reason=item.reason,
        decided_at=(recorded or {}).get(item.approval_id, applied_at),
        applied_at=applied_at,
        modified=item.modified_arguments is not None and item.outcome in ALLOWING,
        tool_name=None if pending is None else pending.tool_name or pending.scope.tool_name,
        tool_call_id=None if pending is None else pending.tool_call_id,
    )


def apply_decisions(
    state: RunEnvelope,
    decisions: list[RunDecision] | None,
    registry: ToolRegistry,
    recorded: Mapping[str, str] | None = None,
) -> _Applied:
    """Resolve decisions against the stored pending set, on copies, all or nothing: any
    violation rejects the whole batch.

    ``decisions=None`` means ``decision="approve"``: every undecided entry becomes ``allow_once``.
    ``recorded``: approval id → when a recorded decision of the batch was recorded.
    """
    entries = list(state.calls)
    interruption = state.interruption_view()
    pending_by_id: dict[str, PendingDecision] = {}
    if interruption is not None:
        for decision in interruption.pending_decisions:
            pending_by_id[decision.approval_id] = decision
    undecided = {
        e.approval_id: index
        for index, e in enumerate(entries)
        if e.decision is None and e.status == "ready"
    }
    forward = _ChildDecisions(entries, pending_by_id)
    sticky: list[Mapping[str, Any]] = list(state.sticky_decisions or ())
    decided_at = now_iso()

    def traced(items: Sequence[RunDecision]) -> tuple[DecidedApproval, ...]:
        out = []
        for item in items:
            pending = pending_by_id.get(item.approval_id)
            if pending is None and item.approval_id in undecided:
                pending = _pending_for(entries[undecided[item.approval_id]])
            out.append(_decided(state.run_id, item, pending, decided_at, recorded))
        return tuple(out)

    if decisions is None:
        trace = traced(
            [RunDecision(approval_id, "allow_once") for approval_id in (*undecided, *forward.open)]
        )
        for index in undecided.values():
            entry = entries[index]
            decided = RunDecision(entry.approval_id, "allow_once").to_dict()
            entries[index] = replace(entry, decision=decided)
        forward.approve_all()
        return _Applied(forward.applied(entries), tuple(sticky), [], trace)
    for item in decisions:
        if item.approval_id not in undecided and not forward.pending(item.approval_id):
            raise decision_error(
                "ERR_PRISM_DECISION_UNKNOWN", f"approval_id {item.approval_id} is not pending"
            )
    trace = traced(decisions)
    for item in decisions:
        if forward.pending(item.approval_id):
            forward.add(item)  # a child run's approval: forwarded to the child's resume
            continue
        index = undecided[item.approval_id]
        call = entries[index].tool_call()
        modified = item.modified_arguments if item.outcome in ALLOWING else None
        if modified is not None:
            _validate_modified(registry, call.name, modified)
        if item.outcome in ("allow_for_run", "reject_for_run"):
            stored_scope = pending_by_id.get(item.approval_id)
            scope_hash = stored_scope.scope.arguments_hash if stored_scope is not None else None
            if scope_hash is None:
                try:
                    scope_hash = arguments_hash(call.arguments)
                except (TypeError, ValueError):
                    scope_hash = None
            scope = DecisionScope(
                tool_name=call.name, arguments_hash=None if modified is not None else scope_hash
            )
            sticky.append(
                StickyDecision(
                    scope=scope,
                    outcome=item.outcome,
                    reason=item.reason,
                    decided_at=decided_at,
                ).to_dict()
            )
        if len(sticky) > MAX_STICKY:
            raise decision_error(
                "ERR_PRISM_DECISION_LIMIT", f"more than {MAX_STICKY} sticky decisions"
            )
        entries[index] = replace(entries[index], decision=item.to_dict())
    remaining = [
        pending_by_id.get(e.approval_id) or _pending_for(e)
        for e in entries
        if e.decision is None and e.status == "ready"
    ]
    return _Applied(forward.applied(entries), tuple(sticky), remaining + forward.remaining(), trace)


class _ChildDecisions:
    """The pending decisions of suspended child runs (``subagent`` set) and the decisions an
    operator gave for them, kept in the calling run's entry of the call that started the child
    (``child.decisions``, each child approval decided once) and forwarded to the child's
    resume, which checks them against the child's own tools."""

    def __init__(
        self, entries: Sequence[PendingCall], pending_by_id: Mapping[str, PendingDecision]
    ) -> None:
        self.decisions: dict[str, list[Mapping[str, Any]]] = {}
        """Call id → the decisions forwarded to its child run (those stored, then new ones)."""
        self.approve_input: set[str] = set()
        """Call ids whose child's input is approved (a child waiting on its input guardrail)."""
        for entry in entries:
            if entry.child is not None:
                self.decisions[entry.call_id] = list(entry.child.decisions or ())
        decided = {d["approval_id"] for ds in self.decisions.values() for d in ds}
        self.open: dict[str, PendingDecision] = {
            approval_id: pending
            for approval_id, pending in pending_by_id.items()
            if pending.subagent is not None
            and pending.subagent.get("tool_call_id") in self.decisions
            and approval_id not in decided
        }

    def pending(self, approval_id: str) -> bool:
        return approval_id in self.open

    def add(self, item: RunDecision) -> None:
        if item.modified_arguments is not None:
            raise decision_error(
                "ERR_PRISM_DECISION_INVALID",
                f"approval {item.approval_id} is a child run's: modified_arguments are not "
                "forwarded to a child run (decide it on the child run itself)",
            )
        pending = self.open.pop(item.approval_id)
        assert pending.subagent is not None
        self.decisions[pending.subagent["tool_call_id"]].append(item.to_dict())

    def approve_all(self) -> None:
        for approval_id in list(self.open):
            self.add(RunDecision(approval_id, "allow_once"))
        for call_id, forwarded in self.decisions.items():
            if not forwarded:  # a child waiting on its input guardrail
                self.approve_input.add(call_id)

    def applied(self, entries: Sequence[PendingCall]) -> tuple[PendingCall, ...]:
        """``entries`` with each child run's forwarded decisions recorded."""
        out: list[PendingCall] = []
        for entry in entries:
            child = entry.child
            if child is not None:
                decision = "approve" if entry.call_id in self.approve_input else child.decision
                child = replace(
                    child, decisions=tuple(self.decisions[entry.call_id]), decision=decision
                )
                entry = replace(entry, child=child)
            out.append(entry)
        return tuple(out)

    def remaining(self) -> list[PendingDecision]:
        return list(self.open.values())


def check_bound_arguments(state: RunEnvelope) -> None:
    """An approval binds to the arguments it was asked for.

    Every ``ready`` call an allowing decision covers must still carry arguments whose hash is
    the one recorded when its approval was asked (the entry's ``arguments_hash``, or for an
    envelope written before it had one, the pending decision's scope hash). Arguments edited in
    the stored row — or not stored as given, because redaction replaced a secret in them — are
    refused: the tool never runs with arguments nobody approved. An operator who wants other
    arguments decides with ``modified_arguments``. O(pending calls).

    Raises:
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — names the call and its tool;
            nothing is written.
    """
    scopes: dict[str, str | None] = {}
    interruption = state.interruption_view()
    if interruption is not None:
        for pending in interruption.pending_decisions:
            scopes[pending.approval_id] = pending.scope.arguments_hash
    for entry in state.calls:
        if entry.status != "ready" or not entry.allowing_unmodified:
            continue
        bound = entry.arguments_hash or scopes.get(entry.approval_id)
        if bound is None:
            continue
        call = entry.tool_call()
        try:
            digest = arguments_hash(call.arguments)
        except (TypeError, ValueError):
            digest = ""
        if digest != bound:
            raise AgentRunStateError(
                f"the stored arguments of call {call.id} ({call.name}) are not the ones its "
                "approval was asked for (edited, or redacted when stored); the call was not "
                "run — decide with modified_arguments to run it with other arguments"
            )


def _pending_for(entry: PendingCall) -> PendingDecision:
    call = entry.tool_call()
    try:
        digest: str | None = arguments_hash(call.arguments)
    except (TypeError, ValueError):
        digest = None
    return pending_decision(entry.approval_id, call, entry.arguments_hash or digest, None)


def pending_decision(
    approval_id: str,
    call: ToolCallContent,
    digest: str | None,
    redactor: SecretRedactor | None,
) -> PendingDecision:
    """The approval an operator is asked for ``call``: its id, tool, arguments hash and the
    arguments to read (redacted with ``redactor``, cut at 4096 UTF-8 bytes)."""
    shown = redactor.redact(call.arguments) if redactor is not None else call.arguments
    try:
        text = json.dumps(shown, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(shown)
    data = text.encode("utf-8")
    truncated = len(data) > MAX_SHOWN_ARGUMENTS_BYTES
    if truncated:  # "…" is 3 bytes; never split a character
        text = data[: MAX_SHOWN_ARGUMENTS_BYTES - 3].decode("utf-8", errors="ignore") + "…"
    return PendingDecision(
        approval_id=approval_id,
        tool_call_id=call.id,
        scope=DecisionScope(tool_name=call.name, arguments_hash=digest),
        tool_name=call.name,
        arguments=text,
        arguments_truncated=truncated,
    )


def round_interruption(
    decisions: Sequence[PendingDecision],
    names: Mapping[str, str],
    reason: str | None = None,
) -> AgentRunInterruption:
    """The interruption of an open gated round (or of the decisions a partial batch left open)."""
    if len(decisions) == 1:
        only = decisions[0]
        return AgentRunInterruption(
            kind="tool_approval",
            reason=reason or only.reason,
            tool_call_id=only.tool_call_id,
            tool_name=names.get(only.tool_call_id) or only.scope.tool_name,
            pending_decisions=tuple(decisions),
        )
    return AgentRunInterruption(
        kind="tool_approval",
        reason=reason or f"{len(decisions)} tool side effects require approval",
        pending_decisions=tuple(decisions),
    )


def rejection_result(call: ToolCallContent, reason: str | None, default: str) -> ToolResult:
    """The ``approval_rejected`` row of a rejected call."""
    return ToolResult(
        tool_call_id=call.id,
        name=call.name,
        error=ErrorInfo(message=reason or default, code="approval_rejected"),
    )


# --------------------------------------------------------------------------- secrets (item 9)

MAX_RESTORE_CANDIDATES = 4096
"""At most this many ways to fill a call's redaction placeholders are tried."""


def _placeholders(value: Any) -> int:
    if isinstance(value, str):
        return value.count(REDACTED)
    if isinstance(value, dict):
        return sum(_placeholders(k) + _placeholders(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_placeholders(v) for v in value)
    return 0


def _fill(value: Any, fills: Iterator[str]) -> Any:
    if isinstance(value, str):
        if REDACTED not in value:
            return value
        parts = value.split(REDACTED)
        out = parts[0]
        for part in parts[1:]:
            out += next(fills) + part
        return out
    if isinstance(value, dict):
        return {_fill(k, fills): _fill(v, fills) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, fills) for v in value]
    return value


def restore_secrets(
    arguments: dict[str, Any], secrets: Sequence[str], digest: str
) -> dict[str, Any] | None:
    """The arguments whose redaction placeholders, filled with registered ``secrets`` (or kept
    where the text itself said ``[REDACTED]``), hash to ``digest`` — the hash of the arguments
    before redaction — else ``None`` (other secrets, or too many ways to fill them)."""
    slots = _placeholders(arguments)
    choices = (*dict.fromkeys(secrets), REDACTED)
    if slots == 0 or len(choices) ** slots > MAX_RESTORE_CANDIDATES:
        return None
    for combo in itertools.product(choices, repeat=slots):
        candidate = _fill(arguments, iter(combo))
        try:
            if arguments_hash(candidate) == digest:
                return cast(dict[str, Any], candidate)
        except (TypeError, ValueError):
            return None
    return None


def restore_arguments(state: RunEnvelope, redactor: SecretRedactor | None) -> RunEnvelope:
    """The envelope with the registered secrets of its approved calls restored.

    A gated call whose arguments held a registered secret is stored redacted (``[REDACTED]``
    placeholders) with ``restore_hash``, the hash of the arguments before redaction. The
    approval was compared with the redacted arguments the approver saw; the tool must run with
    the real values: each placeholder is filled with one of the resuming agent's registered
    secrets, the one way that gives ``restore_hash``. Only in memory: every write redacts again.

    Raises:
        AgentRunStateError: ``reason="arguments_not_restorable"`` — the agent has no redactor, or
            not the secrets the arguments held; nothing was written (the run stays as stored;
            resume with the agent's secrets registered, or decide with ``modified_arguments``).
    """
    calls = list(state.calls)
    changed = False
    for index, entry in enumerate(calls):
        if entry.status != "ready" or entry.restore_hash is None or not entry.allowing_unmodified:
            continue
        call = entry.tool_call()
        secrets = redactor.secrets if redactor is not None else ()
        restored = restore_secrets(call.arguments, secrets, entry.restore_hash) if secrets else None
        if restored is None:
            error = AgentRunStateError(
                f"run {state.run_id} cannot be resumed: the approved call {call.id} "
                f"({call.name}) has arguments holding registered secrets, stored redacted, and "
                + (
                    "the resuming agent has no redactor"
                    if not secrets
                    else "the resuming agent's redactor does not hold those secrets"
                )
                + " to restore them; nothing was written, the run stays suspended — resume with "
                "the agent's secrets registered, or decide with modified_arguments"
            )
            error.reason = "arguments_not_restorable"
            error.run_id = state.run_id
            raise error
        calls[index] = replace(entry, call={**entry.call, "arguments": restored})
        changed = True
    return replace(state, pending_calls=tuple(calls)) if changed else state
