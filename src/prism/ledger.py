"""Run ledger: records, the ledger protocol, the per-run writer and the timeline projection.

* Records (REC-1..REC-3, REC-8, TOOL-8, CON-31): :class:`RunRecord`, :class:`AgentEventRecord`,
  :class:`ToolCallRecord`, :class:`UsageRecord` — each carrying the ownership fields
  ``tenant_id``/``account_id``/``user_id``.
* :class:`RunLedger` — the write-only sink protocol; :class:`MemoryRunLedger` keeps four lists.
* :class:`LedgerWriter` — one per run (REC-4): a single writer task consuming an
  ``asyncio.Queue`` in emission order, remembering the first failure, skipping later records,
  and raising ``RunLedgerError`` at the next drain point. Free when no ledger is configured.
* :func:`project_execution_timeline` (CON-32) — a pure projection of one run's rows.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, TypeAlias, runtime_checkable

from prism._serde import Serializable
from prism._util import new_id, now_iso
from prism.errors import RunLedgerError
from prism.events import AgentEvent
from prism.redaction import SecretRedactor, redacted_cause
from prism.types import ErrorInfo, JsonValue, ModelConfig, OwnershipScope, ToolResult, Usage

__all__ = [
    "AgentEventRecord",
    "ExecutionTimeline",
    "LedgerRecord",
    "LedgerWriter",
    "MemoryRunLedger",
    "RunLedger",
    "RunRecord",
    "RunRecordStatus",
    "TimelineArtifactAttempt",
    "TimelineStatus",
    "TimelineToolCall",
    "TimelineTurn",
    "ToolCallRecord",
    "ToolCallStatus",
    "UsageRecord",
    "UsageScope",
    "finish_run_record",
    "project_execution_timeline",
    "start_run_record",
]

RunRecordStatus: TypeAlias = Literal[
    "queued", "running", "suspended", "denied", "succeeded", "failed", "aborted"
]
"""Status of a :class:`RunRecord` (CON-31)."""

ToolCallStatus: TypeAlias = Literal["started", "finished", "error", "blocked"]
"""Status of a :class:`ToolCallRecord` row (TOOL-8)."""

UsageScope: TypeAlias = Literal["provider_turn", "run_total"]
"""Scope of a :class:`UsageRecord` (REC-8)."""

TimelineStatus: TypeAlias = RunRecordStatus
"""Status of an :class:`ExecutionTimeline`."""


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord(Serializable):
    """One start or finish row of a run (CON-31, REC-2).

    The start row (``status="running"``) is appended at setup step 4; the finish row repeats its
    fields and adds ``status``, ``finished_at``, ``abort_reason``, ``error`` and — only on a
    ``succeeded`` finish — ``stop_reason``/``stop_detail``. Build them with
    :func:`start_run_record` and :func:`finish_run_record`.
    """

    id: str
    """The run id (``run_…``)."""
    session_id: str
    """Session of the run."""
    status: RunRecordStatus
    """``running`` on the start row; the terminal status on the finish row."""
    started_at: str
    """ISO-8601 UTC start time."""
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
    """Ownership: tenant (REC-8)."""
    account_id: str | None = None
    """Ownership: account (REC-8)."""
    user_id: str | None = None
    """Ownership: user (REC-8)."""
    metadata: Mapping[str, JsonValue] | None = None
    """Merged run metadata."""

    @property
    def run_id(self) -> str:
        """Alias of :attr:`id`."""
        return self.id


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentEventRecord(Serializable):
    """Ledger row of one emitted event (REC-3), written in emission order (REC-4)."""

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
    """True when a redactor was active (EVT-24)."""
    tenant_id: str | None = None
    """Ownership: tenant (REC-8)."""
    account_id: str | None = None
    """Ownership: account (REC-8)."""
    user_id: str | None = None
    """Ownership: user (REC-8)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRecord(Serializable):
    """Ledger row of one tool-call state change (TOOL-8), redacted before writing."""

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
    """Ownership: tenant (REC-8)."""
    account_id: str | None = None
    """Ownership: account (REC-8)."""
    user_id: str | None = None
    """Ownership: user (REC-8)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageRecord(Serializable):
    """Ledger row of usage (REC-8, USAGE-1, USAGE-2)."""

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
    tenant_id: str | None = None
    """Ownership: tenant (REC-8)."""
    account_id: str | None = None
    """Ownership: account (REC-8)."""
    user_id: str | None = None
    """Ownership: user (REC-8)."""


LedgerRecord: TypeAlias = RunRecord | AgentEventRecord | ToolCallRecord | UsageRecord
"""Any ledger record."""


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
) -> RunRecord:
    """Build the start :class:`RunRecord` (REC-2): ``status="running"``, ``provider =
    model.provider``, ownership copied, ``started_at`` defaulting to now."""
    return RunRecord(
        id=run_id,
        session_id=session_id,
        status="running",
        started_at=started_at if started_at is not None else now_iso(),
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
    """Build the finish :class:`RunRecord` from the start one (REC-2).

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


# --------------------------------------------------------------------------- protocol (REC-1)


@runtime_checkable
class RunLedger(Protocol):
    """Write-only sink for run records (REC-1). Each method may be sync or async."""

    def append_run(self, record: RunRecord, /) -> Awaitable[None] | None:
        """Store a start or finish run row."""
        ...

    def append_event(self, record: AgentEventRecord, /) -> Awaitable[None] | None:
        """Store an event row."""
        ...

    def append_tool_call(self, record: ToolCallRecord, /) -> Awaitable[None] | None:
        """Store a tool-call row."""
        ...

    def append_usage(self, record: UsageRecord, /) -> Awaitable[None] | None:
        """Store a usage row."""
        ...


class MemoryRunLedger:
    """In-memory :class:`RunLedger` keeping four append-only lists (REC-1).

    Attributes:
        runs: Run rows in append order.
        events: Event rows in append (= emission) order.
        tool_calls: Tool-call rows in append order.
        usage: Usage rows in append order.
    """

    __slots__ = ("events", "runs", "tool_calls", "usage")

    def __init__(self) -> None:
        self.runs: list[RunRecord] = []
        self.events: list[AgentEventRecord] = []
        self.tool_calls: list[ToolCallRecord] = []
        self.usage: list[UsageRecord] = []

    async def append_run(self, record: RunRecord, /) -> None:
        """Append a run row."""
        self.runs.append(record)

    async def append_event(self, record: AgentEventRecord, /) -> None:
        """Append an event row."""
        self.events.append(record)

    async def append_tool_call(self, record: ToolCallRecord, /) -> None:
        """Append a tool-call row."""
        self.tool_calls.append(record)

    async def append_usage(self, record: UsageRecord, /) -> None:
        """Append a usage row."""
        self.usage.append(record)

    def run_events(self, run_id: str) -> list[AgentEventRecord]:
        """The event rows of one run, in order (input for :func:`project_execution_timeline`)."""
        return [r for r in self.events if r.run_id == run_id]

    def run_records(self, run_id: str) -> list[RunRecord]:
        """The run rows of one run, in order."""
        return [r for r in self.runs if r.id == run_id]


# --------------------------------------------------------------------------- writer (REC-4)

_Kind: TypeAlias = Literal["run", "event", "tool_call", "usage"]
_METHODS: Final[Mapping[str, str]] = {
    "run": "append_run",
    "event": "append_event",
    "tool_call": "append_tool_call",
    "usage": "append_usage",
}


class LedgerWriter:
    """The per-run ledger writer (REC-4).

    Records are queued synchronously (``append_*``/``record_*`` never block and never raise for
    write failures) and written by a single writer task, strictly in submission order — events in
    emission order. The task consumes an ``asyncio.Queue``, exits when the queue is empty and is
    restarted by the next submission, so it never outlives the run's work. The ledger's methods may
    be sync or async. The first write failure is remembered and every later record is skipped;
    :meth:`drain` raises it once as ``RunLedgerError`` (``ERR_PRISM_LEDGER``) at the next drain
    point (RUN-18, RUN-22).

    Before writing, every record gets the run's ownership fields (when it carries none) and is
    redacted with the active redactor (REC-1) — except event records built by
    :meth:`record_event` (their event is already redacted, EVT-21) and tool-call rows already
    marked ``redacted``. With ``ledger=None`` every method returns at once and nothing is
    allocated. The writer itself satisfies :class:`RunLedger`, so it can be handed to the tool
    dispatcher as its ``ledger``.

    Args:
        ledger: The run's ledger, or ``None``.
        session_id: Session of the run (fills events without one).
        run_id: Run id (fills events without one).
        redactor: The active redactor, or ``None``.
        ownership: The run's ownership scope, copied into every record (REC-8).
    """

    __slots__ = (
        "_failure",
        "_ledger",
        "_ownership",
        "_queue",
        "_redactor",
        "_reported",
        "_task",
        "run_id",
        "session_id",
    )

    def __init__(
        self,
        ledger: RunLedger | None,
        *,
        session_id: str,
        run_id: str,
        redactor: SecretRedactor | None = None,
        ownership: OwnershipScope | None = None,
    ) -> None:
        self._ledger = ledger
        self.session_id = session_id
        self.run_id = run_id
        self._redactor = redactor
        has_owner = ownership is not None and (
            ownership.tenant_id is not None
            or ownership.account_id is not None
            or ownership.user_id is not None
        )
        self._ownership = ownership if has_owner else None
        self._queue: asyncio.Queue[tuple[str, Any, bool]] | None = None
        self._task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._reported = False

    @property
    def enabled(self) -> bool:
        """True when a ledger is configured."""
        return self._ledger is not None

    @property
    def failure(self) -> BaseException | None:
        """The first write failure, or ``None``."""
        return self._failure

    # ----------------------------------------------------------------- submission

    def _submit(self, kind: str, record: Any, prepared: bool) -> None:
        if self._ledger is None or self._failure is not None:
            return
        queue = self._queue
        if queue is None:
            queue = self._queue = asyncio.Queue()
        queue.put_nowait((kind, record, prepared))
        task = self._task
        if task is None or task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(queue))

    def append_run(self, record: RunRecord, /) -> None:
        """Queue a run row (REC-2)."""
        self._submit("run", record, False)

    def append_event(self, record: AgentEventRecord, /) -> None:
        """Queue an event row (it is redacted before writing)."""
        self._submit("event", record, False)

    def append_tool_call(self, record: ToolCallRecord, /) -> None:
        """Queue a tool-call row (redacted before writing unless marked ``redacted``)."""
        self._submit("tool_call", record, False)

    def append_usage(self, record: UsageRecord, /) -> None:
        """Queue a usage row (REC-8)."""
        self._submit("usage", record, False)

    def record_event(self, event: AgentEvent, /) -> None:
        """Queue the :class:`AgentEventRecord` of an emitted, already redacted event (REC-3).

        The record gets a new ``event_…`` id, the emission time, the event's ids (the writer's
        when empty), ``redacted = redactor is not None`` and the ownership fields. O(1).
        """
        if self._ledger is None or self._failure is not None:
            return
        owner = self._ownership
        record = AgentEventRecord(
            id=new_id("event"),
            session_id=getattr(event, "session_id", None) or self.session_id,
            run_id=getattr(event, "run_id", None) or self.run_id,
            type=event.type,
            timestamp=now_iso(),
            event=event,
            redacted=self._redactor is not None,
            tenant_id=owner.tenant_id if owner is not None else None,
            account_id=owner.account_id if owner is not None else None,
            user_id=owner.user_id if owner is not None else None,
        )
        self._submit("event", record, True)

    def record_usage(
        self,
        scope: UsageScope,
        usage: Usage,
        *,
        turn: int | None = None,
        attempt: int | None = None,
    ) -> None:
        """Queue a :class:`UsageRecord` with a new ``usage_…`` id (USAGE-1, USAGE-2, REC-8).

        ``turn``/``attempt`` are kept only for ``provider_turn`` rows.
        """
        if self._ledger is None or self._failure is not None:
            return
        per_turn = scope == "provider_turn"
        record = UsageRecord(
            id=new_id("usage"),
            session_id=self.session_id,
            run_id=self.run_id,
            scope=scope,
            usage=usage,
            timestamp=now_iso(),
            turn=turn if per_turn else None,
            attempt=attempt if per_turn else None,
        )
        self._submit("usage", record, False)

    # ----------------------------------------------------------------- writing

    def _prepare(self, kind: str, record: Any) -> Any:
        owner = self._ownership
        if owner is not None and (
            record.tenant_id is None and record.account_id is None and record.user_id is None
        ):
            record = dataclasses.replace(
                record,
                tenant_id=owner.tenant_id,
                account_id=owner.account_id,
                user_id=owner.user_id,
            )
        redactor = self._redactor
        if redactor is not None:
            if kind == "tool_call":
                if not record.redacted:
                    record = dataclasses.replace(redactor.redact(record), redacted=True)
            elif kind == "event":
                record = redactor.redact(record)
                if not record.redacted:
                    record = dataclasses.replace(record, redacted=True)
            else:
                record = redactor.redact(record)
        return record

    async def _run(self, queue: asyncio.Queue[tuple[str, Any, bool]]) -> None:
        ledger = self._ledger
        assert ledger is not None
        while True:
            try:
                kind, record, prepared = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            if self._failure is not None:
                continue  # REC-4: records after a failure are skipped
            try:
                if not prepared:
                    record = self._prepare(kind, record)
                out = getattr(ledger, _METHODS[kind])(record)
                if inspect.isawaitable(out):
                    await out
            except asyncio.CancelledError:
                self._failure = RunLedgerError("Run ledger writer was cancelled")
                raise
            except Exception as exc:
                self._failure = exc

    async def drain(self) -> None:
        """Wait until every queued record was written or skipped (a drain point, REC-4).

        Cancelling the caller does not cancel the writer task.

        Raises:
            RunLedgerError: ``ERR_PRISM_LEDGER`` — a write failed since the previous drain; it is
                raised once (later drains return normally). Its message is redacted and its
                ``__cause__`` is the failure (or a ``RedactedError`` stand-in, EVT-26).
        """
        while True:
            task = self._task
            if task is None or task.done():
                break
            await asyncio.wait((task,))
        queue = self._queue
        if queue is not None and not queue.empty() and self._failure is None:
            # Submitted while no task was running (e.g. the task was cancelled): write them now.
            await self._run(queue)
        failure = self._failure
        if failure is None or self._reported:
            return
        self._reported = True
        if isinstance(failure, RunLedgerError) and failure.__cause__ is None:
            raise failure
        detail = f"{type(failure).__name__}: {failure}"
        if self._redactor is not None:
            detail = self._redactor.redact(detail)
        raise RunLedgerError(f"Run ledger write failed: {detail}") from redacted_cause(
            failure, self._redactor
        )


# --------------------------------------------------------------------------- timeline (CON-32)


@dataclass(frozen=True, slots=True)
class TimelineToolCall(Serializable):
    """A tool call of a turn, from its terminal tool event (CON-32)."""

    tool_call_id: str
    """The call id."""
    name: str
    """Tool name."""
    outcome: Literal["finished", "error", "blocked"]
    """Terminal event: ``tool_execution_finished`` / ``_error`` / ``_blocked``."""


@dataclass(frozen=True, slots=True)
class TimelineArtifactAttempt(Serializable):
    """An artifact candidate of a turn (CON-32)."""

    attempt: int
    """1-based candidate number of the leg (EVT-4)."""
    outcome: Literal["finished", "revised", "failed"]
    """``artifact_finished``, ``artifact_revision_started`` or ``artifact_failed``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineTurn(Serializable):
    """Events from one ``turn_started`` up to the next one (CON-32)."""

    turn: int
    """The turn number (a resumed leg starts again at 1)."""
    provider_attempts: int = 0
    """``provider_turn_started`` events of the turn."""
    assistant_message: bool = False
    """Whether a ``message_finished`` event was emitted."""
    tool_calls: tuple[TimelineToolCall, ...] = ()
    """Dispatched calls, in terminal-event order."""
    artifact_attempts: tuple[TimelineArtifactAttempt, ...] = ()
    """Artifact candidates judged in the turn."""

    def __post_init__(self) -> None:
        for name in ("tool_calls", "artifact_attempts"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionTimeline(Serializable):
    """A pure projection of one run's ledger rows (CON-32)."""

    run_id: str | None = None
    """The run id (``None`` when no row was given)."""
    session_id: str | None = None
    """The session id."""
    status: TimelineStatus = "running"
    """Status of the last run record, else derived from the last terminal event."""
    stop_reason: str | None = None
    """From the last ``agent_finished`` (``finish_reason``), else from the last run record."""
    stop_detail: str | None = None
    """From the last ``agent_finished``, else from the last run record."""
    usage: Usage | None = None
    """From the last ``agent_finished``."""
    turns: tuple[TimelineTurn, ...] = ()
    """One per ``turn_started`` event, in event order."""
    legs: int = 0
    """Number of ``agent_started`` events (1 + resumed legs)."""

    def __post_init__(self) -> None:
        if not isinstance(self.turns, tuple):
            object.__setattr__(self, "turns", tuple(self.turns))


_TERMINAL_STATUS: Final[Mapping[str, TimelineStatus]] = {
    "agent_finished": "succeeded",
    "agent_suspended": "suspended",
    "agent_denied": "denied",
    "error": "failed",
}


def _get(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


class _TurnBuilder:
    __slots__ = ("artifacts", "attempts", "message", "tools", "turn")

    def __init__(self, turn: int) -> None:
        self.turn = turn
        self.attempts = 0
        self.message = False
        self.tools: list[TimelineToolCall] = []
        self.artifacts: list[TimelineArtifactAttempt] = []

    def build(self) -> TimelineTurn:
        return TimelineTurn(
            turn=self.turn,
            provider_attempts=self.attempts,
            assistant_message=self.message,
            tool_calls=tuple(self.tools),
            artifact_attempts=tuple(self.artifacts),
        )


def project_execution_timeline(
    events: Iterable[AgentEventRecord], run_records: Iterable[RunRecord] = ()
) -> ExecutionTimeline:
    """Project one run's ledger rows into an :class:`ExecutionTimeline` (CON-32).

    Events are taken in the order given (ledger order; timestamps are not re-sorted). Each
    ``turn_started`` opens a :class:`TimelineTurn` that gathers the events up to the next
    ``turn_started``: ``provider_turn_started`` counts attempts, ``message_finished`` sets
    ``assistant_message``, terminal tool events give :class:`TimelineToolCall` and
    ``artifact_finished`` / ``artifact_revision_started`` / ``artifact_failed`` give
    :class:`TimelineArtifactAttempt`. ``status`` is the last run record's status, else derived
    from the last terminal event (``agent_finished`` → ``succeeded``, ``agent_suspended`` →
    ``suspended``, ``agent_denied`` → ``denied``, ``error`` → ``failed``, none → ``running``).

    Args:
        events: The run's :class:`AgentEventRecord` rows (events as objects or dicts).
        run_records: The run's :class:`RunRecord` rows.

    Raises:
        ValueError: the rows belong to more than one run.
    """
    records = list(events)
    runs = list(run_records)
    run_ids = {r.run_id for r in records} | {r.id for r in runs}
    if len(run_ids) > 1:
        raise ValueError(
            "project_execution_timeline expects the rows of one run, got run ids: "
            + ", ".join(sorted(run_ids))
        )
    run_id = next(iter(run_ids)) if run_ids else None
    session_id: str | None = None
    for r in records:
        if r.session_id:
            session_id = r.session_id
            break
    if session_id is None:
        for rr in runs:
            if rr.session_id:
                session_id = rr.session_id
                break

    turns: list[TimelineTurn] = []
    current: _TurnBuilder | None = None
    legs = 0
    last_terminal: str | None = None
    finished: Any = None
    for rec in records:
        kind = rec.type
        ev: Any = rec.event
        if kind == "turn_started":
            if current is not None:
                turns.append(current.build())
            turn = _get(ev, "turn")
            current = _TurnBuilder(turn if isinstance(turn, int) else len(turns) + 1)
            continue
        if kind == "agent_started":
            legs += 1
        if kind in _TERMINAL_STATUS:
            last_terminal = kind
            if kind == "agent_finished":
                finished = ev
        if current is None:
            continue
        if kind == "provider_turn_started":
            current.attempts += 1
        elif kind == "message_finished":
            current.message = True
        elif kind == "tool_execution_finished":
            result = _get(ev, "result")
            current.tools.append(
                TimelineToolCall(
                    str(_get(result, "tool_call_id")), str(_get(result, "name")), "finished"
                )
            )
        elif kind == "tool_execution_error":
            call = _get(ev, "call")
            current.tools.append(
                TimelineToolCall(str(_get(call, "id")), str(_get(call, "name")), "error")
            )
        elif kind == "tool_execution_blocked":
            current.tools.append(
                TimelineToolCall(
                    str(_get(ev, "tool_call_id")), str(_get(ev, "name")), "blocked"
                )
            )
        elif kind in ("artifact_finished", "artifact_revision_started", "artifact_failed"):
            outcome: Literal["finished", "revised", "failed"] = (
                "finished"
                if kind == "artifact_finished"
                else "revised"
                if kind == "artifact_revision_started"
                else "failed"
            )
            attempt = _get(ev, "attempt")
            current.artifacts.append(
                TimelineArtifactAttempt(attempt if isinstance(attempt, int) else 0, outcome)
            )
    if current is not None:
        turns.append(current.build())

    last_run = runs[-1] if runs else None
    status: TimelineStatus
    if last_run is not None:
        status = last_run.status
    elif last_terminal is not None:
        status = _TERMINAL_STATUS[last_terminal]
    else:
        status = "running"

    usage: Usage | None = None
    if finished is not None:
        stop_reason = _get(finished, "finish_reason")
        stop_detail = _get(finished, "stop_detail")
        raw_usage = _get(finished, "usage")
        usage = Usage.from_dict(raw_usage) if isinstance(raw_usage, Mapping) else raw_usage
    elif last_run is not None:
        stop_reason = last_run.stop_reason
        stop_detail = last_run.stop_detail
    else:
        stop_reason = stop_detail = None
    return ExecutionTimeline(
        run_id=run_id,
        session_id=session_id,
        status=status,
        stop_reason=stop_reason,
        stop_detail=stop_detail,
        usage=usage,
        turns=tuple(turns),
        legs=legs,
    )

