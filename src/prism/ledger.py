"""Run ledger: the ledger protocol, the memory ledger and the per-run writer.

* ``RunLedger`` — the write-only sink protocol; [`MemoryRunLedger`][prism.ledger.MemoryRunLedger] keeps four lists
  (and the request rows);
* ``RequestLedger`` — the optional fifth method, ``append_request``: a ledger that has it
  gets a [`RequestRecord`][prism.ledger_records.RequestRecord] per provider attempt; one without it keeps
  working and gets none.
* [`LedgerWriter`][prism.ledger.LedgerWriter] — one per run: a single writer task consuming an ``asyncio.Queue`` in
  emission order, remembering the first failure, skipping later records, and raising
  ``RunLedgerError`` at the next drain point. Free when no ledger is configured.

The records live in [`prism.ledger_records`][prism.ledger_records] and the timeline projection in
[`prism.timeline`][prism.timeline]; their names are re-exported here (the timeline's on first access: a run
never projects one, so its start-up does not load it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeAlias, runtime_checkable

from prism._util import new_id, now_iso
from prism.errors import RunLedgerError
from prism.events import AgentEvent
from prism.ledger_records import AgentEventRecord as AgentEventRecord
from prism.ledger_records import LedgerRecord as LedgerRecord
from prism.ledger_records import RequestRecord as RequestRecord
from prism.ledger_records import RunRecord as RunRecord
from prism.ledger_records import RunRecordStatus as RunRecordStatus
from prism.ledger_records import ToolCallRecord as ToolCallRecord
from prism.ledger_records import ToolCallStatus as ToolCallStatus
from prism.ledger_records import UsageRecord as UsageRecord
from prism.ledger_records import UsageScope as UsageScope
from prism.ledger_records import finish_run_record as finish_run_record
from prism.ledger_records import start_run_record as start_run_record
from prism.redaction import SecretRedactor, redacted_cause
from prism.types import OwnershipScope, Usage

if TYPE_CHECKING:
    from prism.timeline import ExecutionTimeline as ExecutionTimeline
    from prism.timeline import TimelineArtifactAttempt as TimelineArtifactAttempt
    from prism.timeline import TimelineStatus as TimelineStatus
    from prism.timeline import TimelineToolCall as TimelineToolCall
    from prism.timeline import TimelineTurn as TimelineTurn
    from prism.timeline import project_execution_timeline as project_execution_timeline

__all__ = [
    "AgentEventRecord",
    "ExecutionTimeline",
    "LedgerRecord",
    "LedgerWriter",
    "MemoryRunLedger",
    "RequestLedger",
    "RequestRecord",
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


def __getattr__(name: str) -> Any:
    """Bind a name of [`prism.timeline`][prism.timeline] on first access (the names of ``__all__`` not bound
    at import)."""
    if name in __all__:
        from prism import timeline

        value = getattr(timeline, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}", name=name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


# --------------------------------------------------------------------------- protocol


@runtime_checkable
class RunLedger(Protocol):
    """Write-only sink for run records. Each method may be sync or async."""

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


@runtime_checkable
class RequestLedger(Protocol):
    """The optional method of a ``RunLedger`` that stores request rows.

    A run whose ledger has ``append_request`` appends one [`RequestRecord`][prism.ledger.RequestRecord] per provider
    attempt, when the attempt starts; its ``head`` is set on the run's first row with a given
    ``head_hash`` and ``None`` on later ones, so a store keeps one head per distinct hash.
    """

    def append_request(self, record: RequestRecord, /) -> Awaitable[None] | None:
        """Store a request row (and its head, when it carries one)."""
        ...


class MemoryRunLedger:
    """In-memory ``RunLedger`` (and ``RequestLedger``) keeping append-only lists.

    Attributes:
        runs: Run rows in append order.
        events: Event rows in append (= emission) order.
        tool_calls: Tool-call rows in append order.
        usage: Usage rows in append order.
        requests: Request rows in append order (their ``head`` moved to ``request_heads``).
        request_heads: Each distinct request head by its hash.
    """

    __slots__ = ("events", "request_heads", "requests", "runs", "tool_calls", "usage")

    def __init__(self) -> None:
        self.runs: list[RunRecord] = []
        self.events: list[AgentEventRecord] = []
        self.tool_calls: list[ToolCallRecord] = []
        self.usage: list[UsageRecord] = []
        self.requests: list[RequestRecord] = []
        self.request_heads: dict[str, Mapping[str, Any]] = {}

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

    async def append_request(self, record: RequestRecord, /) -> None:
        """Append a request row; its head goes to ``request_heads`` (once per hash)."""
        head = record.head
        if head is not None:
            self.request_heads.setdefault(record.head_hash, head)
            record = dataclasses.replace(record, head=None)
        self.requests.append(record)

    def run_requests(self, run_id: str) -> list[RequestRecord]:
        """The request rows of one run, in order."""
        return [r for r in self.requests if r.run_id == run_id]

    def run_events(self, run_id: str) -> list[AgentEventRecord]:
        """The event rows of one run, in order (input for ``project_execution_timeline()``)."""
        return [r for r in self.events if r.run_id == run_id]

    def run_records(self, run_id: str) -> list[RunRecord]:
        """The run rows of one run, in order."""
        return [r for r in self.runs if r.id == run_id]


# --------------------------------------------------------------------------- writer

_Kind: TypeAlias = Literal["run", "event", "tool_call", "usage", "request"]
_METHODS: Final[Mapping[str, str]] = {
    "run": "append_run",
    "event": "append_event",
    "tool_call": "append_tool_call",
    "usage": "append_usage",
    "request": "append_request",
}


class LedgerWriter:
    """The per-run ledger writer.

    Records are queued synchronously (``append_*``/``record_*`` never block and never raise for
    write failures) and written by a single writer task, strictly in submission order — events in
    emission order. The task consumes an ``asyncio.Queue``, exits when the queue is empty and is
    restarted by the next submission, so it never outlives the run's work. The ledger's methods may
    be sync or async. The first write failure is remembered and every later record is skipped;
    [`drain()`][prism.ledger.LedgerWriter.drain] raises it once as ``RunLedgerError`` (``ERR_PRISM_LEDGER``) at the next drain
    point.

    Before writing, every record gets the run's ownership fields (when it carries none) and is
    redacted with the active redactor — except event records built by
    [`record_event()`][prism.ledger.LedgerWriter.record_event] (their event is already redacted) and tool-call rows already
    marked ``redacted``. With ``ledger=None`` every method returns at once and nothing is
    allocated. The writer itself satisfies ``RunLedger``, so it can be handed to the tool
    dispatcher as its ``ledger``.

    Args:
        ledger: The run's ledger, or ``None``.
        session_id: Session of the run (fills events without one).
        run_id: Run id (fills events without one).
        redactor: The active redactor, or ``None``.
        ownership: The run's ownership scope, copied into every record.
    """

    __slots__ = (
        "_failure",
        "_heads",
        "_ledger",
        "_ownership",
        "_queue",
        "_redactor",
        "_reported",
        "_task",
        "records_requests",
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
        self.records_requests = callable(getattr(ledger, "append_request", None))
        """Whether the ledger stores request rows (it has ``append_request``)."""
        self._heads: set[str] = set()
        """The head hashes whose head this writer already sent."""

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
        """Queue a run row."""
        self._submit("run", record, False)

    def append_event(self, record: AgentEventRecord, /) -> None:
        """Queue an event row (it is redacted before writing)."""
        self._submit("event", record, False)

    def append_tool_call(self, record: ToolCallRecord, /) -> None:
        """Queue a tool-call row (redacted before writing unless marked ``redacted``)."""
        self._submit("tool_call", record, False)

    def append_usage(self, record: UsageRecord, /) -> None:
        """Queue a usage row."""
        self._submit("usage", record, False)

    def record_event(self, event: AgentEvent, /) -> None:
        """Queue the [`AgentEventRecord`][prism.ledger.AgentEventRecord] of an emitted, already redacted event.

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
        provider_id: str | None = None,
        model: str | None = None,
    ) -> None:
        """Queue a [`UsageRecord`][prism.ledger.UsageRecord] with a new ``usage_…`` id.

        ``turn``/``attempt`` and the serving ``provider_id``/``model`` are kept only for
        ``provider_turn`` rows.
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
            provider_id=provider_id if per_turn else None,
            model=model if per_turn else None,
        )
        self._submit("usage", record, False)

    def record_request(
        self,
        *,
        turn: int,
        attempt: int,
        provider_id: str,
        model: str,
        request_hash: str,
        head_hash: str,
        messages: int,
        head: Mapping[str, Any],
    ) -> None:
        """Queue a [`RequestRecord`][prism.ledger.RequestRecord] with a new ``request_…`` id and the current time; the
        row carries ``head`` only the first time this writer sees ``head_hash``. Nothing happens
        when the ledger has no ``append_request``."""
        if not self.records_requests or self._failure is not None:
            return
        heads = self._heads
        if head_hash in heads:
            shown: Mapping[str, Any] | None = None
        else:
            heads.add(head_hash)
            shown = head
        record = RequestRecord(
            id=new_id("request"),
            session_id=self.session_id,
            run_id=self.run_id,
            turn=turn,
            attempt=attempt,
            provider_id=provider_id,
            model=model,
            request_hash=request_hash,
            head_hash=head_hash,
            messages=messages,
            timestamp=now_iso(),
            head=shown,
        )
        self._submit("request", record, False)

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
                continue  # after a failure, later records are skipped
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
        """Wait until every queued record was written or skipped (a drain point).

        Cancelling the caller does not cancel the writer task.

        Raises:
            RunLedgerError: ``ERR_PRISM_LEDGER`` — a write failed since the previous drain; it is
                raised once (later drains return normally). Its message is redacted and its
                ``__cause__`` is the failure (or a ``RedactedError`` stand-in).
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
