"""A run's timeline, projected from its ledger rows: turns, provider attempts, tool calls and
the child runs they started.

[`project_timeline()`][prism.serve._timeline.project_timeline] reads a run's ledger rows (in ledger order) and returns a
[`TimelineView`][prism.serve._timeline.TimelineView]: per turn every provider attempt (the provider and model that served it —
an attempt another provider or model served than the turn's first is a fallback —, tokens, cost
where reported, duration, the retry after a failure and its error, the stop reason), every tool
call (duration, status, whether it waited for an approval and how that was decided, its error
row, the child runs its agent tool started) and the run's notable events (legs, suspensions,
limits, guardrails, errors). Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from prism.inspection import LedgerRow, RunSummary, SessionSummary, StoredEntry
from prism.ledger_records import AgentEventRecord, RunRecord, ToolCallRecord, UsageRecord
from prism.serve._views import (
    FINAL_STATUSES,
    LONG_TEXT,
    ErrorView,
    field_of,
    ms_between,
    parse_time,
    pretty_json,
)

__all__ = [
    "AttemptView",
    "TIMELINE_EVENT_TYPES",
    "ChildRun",
    "Note",
    "RetryView",
    "TimelineView",
    "ToolCallView",
    "TurnView",
    "child_runs_by_call",
    "project_timeline",
    "rejected_calls",
    "run_duration_ms",
]

TIMELINE_EVENT_TYPES: Final = frozenset(
    (
        "agent_started",
        "agent_resumed",
        "agent_finished",
        "agent_suspended",
        "agent_denied",
        "turn_started",
        "provider_turn_started",
        "provider_turn_finished",
        "retry_scheduled",
        "tool_execution_started",
        "tool_execution_finished",
        "tool_execution_error",
        "tool_execution_blocked",
        "run_limit_exceeded",
        "guardrail_decision",
        "compaction_finished",
        "error",
    )
)
"""The event types [`project_timeline()`][prism.serve._timeline.project_timeline] reads; a run page asks the store for only these
(``read_ledger(event_types=...)``), so the message and turn-end events of a long run — a
quarter of its rows — are never decoded."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryView:
    """A failed attempt's retry: after how long, and why."""

    delay_ms: float
    error: ErrorView | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptView:
    """One provider attempt of a turn."""

    turn: int
    attempt: int
    provider: str
    model: str
    fallback: bool
    """Served by another provider or model than the run's own (a fallback chain moved on)."""
    response_model: str | None
    started_at: str | None
    finished_at: str | None
    duration_ms: float | None
    input_tokens: int | None
    output_tokens: int | None
    cost: float | None
    currency: str | None
    stop_reason: str | None
    error: ErrorView | None
    retry: RetryView | None
    status: str
    """``finished``, ``error`` or ``running``."""
    offset_ms: float | None = None
    """When it started, after the run's start."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildRun:
    """A child run an agent-tool call started (its own page is ``/runs/<run_id>``)."""

    run_id: str | None
    session_id: str
    agent: str | None
    status: str | None
    started_at: str | None
    finished_at: str | None
    turns: int
    input_tokens: int
    output_tokens: int
    cost: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallView:
    """One tool call of a turn."""

    call_id: str
    name: str
    arguments: str
    """Pretty JSON of the arguments the tool ran with (redacted)."""
    status: str
    """``running``, ``finished``, ``error``, ``blocked`` or ``waiting`` (for approval)."""
    started_at: str | None
    finished_at: str | None
    duration_ms: float | None
    approval: str | None
    """``waiting`` (for an approval), then ``allowed`` or ``rejected``; ``None`` when not gated."""
    decided: str | None = None
    """Who decided the approval and when (``allow_once by alice at …``), when the run's envelope
    keeps the decision."""
    error: ErrorView | None
    reason: str | None
    result: str | None
    """Pretty JSON of the result value."""
    long: bool
    children: tuple[ChildRun, ...] = ()
    offset_ms: float | None = None
    """When it started, after the run's start."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Note:
    """A notable run event on the timeline (leg started, suspended, limit hit, guardrail…)."""

    timestamp: str
    title: str
    detail: str = ""
    tone: str = "idle"
    error: ErrorView | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnView:
    """One turn: its provider attempts, its tool calls and the notes within it."""

    number: int
    leg: int
    attempts: tuple[AttemptView, ...]
    tool_calls: tuple[ToolCallView, ...]
    notes: tuple[Note, ...] = ()
    items: tuple[tuple[str, AttemptView | ToolCallView | Note], ...] = ()
    """Every attempt (``"attempt"``), tool call (``"call"``) and note (``"note"``) in time order:
    a call that waited for an approval runs after the suspension and the resumption noted
    before it. An item without a time keeps its place after the one before it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineView:
    """A run's ledger, projected."""

    has_ledger: bool
    turns: tuple[TurnView, ...] = ()
    notes: tuple[Note, ...] = ()
    """Notes outside any turn (before the first, after the last)."""
    started_at: str | None = None
    finished_at: str | None = None
    rows: int = 0


@dataclass(slots=True)
class _Attempt:
    turn: int
    attempt: int
    provider: str = "?"
    model: str = "?"
    started_at: str | None = None
    finished_at: str | None = None
    latency_ms: float | None = None
    usage: Any = None
    stop_reason: str | None = None
    error: ErrorView | None = None
    retry: RetryView | None = None
    response_model: str | None = None
    done: bool = False


@dataclass(slots=True)
class _Call:
    call_id: str
    name: str
    arguments: Any = None
    status: str = "running"
    started_at: str | None = None
    finished_at: str | None = None
    duration_ms: float | None = None
    approval: str | None = None
    decided: str | None = None
    error: ErrorView | None = None
    reason: str | None = None
    result: Any = None
    has_result: bool = False


@dataclass(slots=True)
class _Turn:
    number: int
    leg: int
    attempts: list[_Attempt] = field(default_factory=list)
    calls: dict[str, _Call] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)


def _parse_json(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _model_name(model: Any) -> str:
    name = field_of(model, "model")
    return str(name) if name else "?"


def project_timeline(
    rows: Sequence[LedgerRow],
    *,
    run: RunSummary | None = None,
    children: Mapping[str, Sequence[ChildRun]] | None = None,
    decided: Iterable[Any] = (),
    rejected: Mapping[str, str] | None = None,
) -> TimelineView:
    """Project one run's ledger rows (in ledger order) into turns.

    Args:
        rows: The run's rows from [`read_ledger()`][prism.inspection.InspectionReader.read_ledger].
        run: The run's summary (its start time when the rows hold no run row).
        children: Child runs by the tool call id that started them.
        decided: The run's decided approvals (``list_decided_approvals``): who decided each
            gated call, how and when.
        rejected: The run's gated calls answered by a rejection, with its reason
            ([`rejected_calls()`][prism.serve._timeline.rejected_calls] of the session's entries): the ledger has no row of a call
            that never ran, so a rejected call would otherwise look as if it still waited.

    Returns:
        ``has_ledger=False`` (and nothing else) when ``rows`` is empty.
    """
    if not rows:
        return TimelineView(has_ledger=False)
    children = children or {}
    turns: list[_Turn] = []
    loose: list[Note] = []
    calls: dict[str, _Call] = {}
    call_turn: dict[str, _Turn] = {}
    gated: set[str] = set()
    shown: set[tuple[str | None, str]] = set()  # errors already on the timeline
    leg = 0
    suspended = False  # a suspension came before: a resumption follows a decision
    current: _Turn | None = None
    started_at: str | None = None
    finished_at: str | None = None
    last_failed: _Attempt | None = None

    def note(item: Note) -> None:
        (current.notes if current is not None else loose).append(item)

    def call_of(call_id: str, name: str) -> _Call:
        found = calls.get(call_id)
        if found is None:
            found = calls[call_id] = _Call(call_id, name)
            if current is not None:
                current.calls[call_id] = found
                call_turn[call_id] = current
            else:  # a call resumed before its leg's first turn
                holder = _Turn(0, leg)
                turns.append(holder)
                holder.calls[call_id] = found
        return found

    for row in rows:
        record = row.record
        if isinstance(record, RunRecord):
            if started_at is None:
                started_at = record.started_at
            if record.status != "running":
                finished_at = record.finished_at
                if record.status in ("failed", "aborted"):
                    error = ErrorView.of(record.error)
                    loose.append(
                        Note(
                            timestamp=record.finished_at or record.started_at,
                            title=f"Run {record.status}",
                            detail=record.abort_reason or "",
                            tone="bad",
                            error=error if error is None or error.key() not in shown else None,
                        )
                    )
            continue
        if isinstance(record, ToolCallRecord):
            call = call_of(record.tool_call_id, record.name)
            call.arguments = record.arguments
            call.started_at = call.started_at or record.started_at
            if record.status == "started":
                continue
            call.status = record.status
            call.finished_at = record.finished_at
            if record.result is not None:
                call.result = record.result.value
                call.has_result = record.result.value is not None
                call.error = ErrorView.of(record.result.error) or call.error
            if record.reason:
                call.reason = record.reason
            continue
        if isinstance(record, UsageRecord):
            continue  # the attempts' finish events carry the same usage
        assert isinstance(record, AgentEventRecord)
        event: Any = record.event
        kind = record.type
        ts = record.timestamp
        if kind == "agent_started":
            leg += 1
            if leg > 1:
                note(Note(timestamp=ts, title=f"Leg {leg} started", tone="live"))
        elif kind == "agent_resumed":
            version = field_of(event, "version")
            title = "Resumed after the decision" if suspended else "Resumed"
            detail = f"checkpoint version {version}" if version is not None else ""
            note(Note(timestamp=ts, title=title, detail=detail))
        elif kind == "turn_started":
            number = field_of(event, "turn")
            current = _Turn(number if isinstance(number, int) else len(turns) + 1, max(leg, 1))
            turns.append(current)
        elif kind == "provider_turn_started":
            meta = field_of(event, "metadata")
            attempt = _Attempt(
                turn=current.number if current is not None else 0,
                attempt=int(field_of(meta, "attempt") or 1),
                provider=str(field_of(meta, "provider_id") or "?"),
                model=_model_name(field_of(meta, "model")),
                started_at=ts,
            )
            if current is None:
                current = _Turn(0, max(leg, 1))
                turns.append(current)
            current.attempts.append(attempt)
        elif kind == "provider_turn_finished":
            meta = field_of(event, "metadata")
            number = int(field_of(meta, "attempt") or 1)
            target = None
            if current is not None:
                for candidate in reversed(current.attempts):
                    if candidate.attempt == number and not candidate.done:
                        target = candidate
                        break
            if target is None:
                target = _Attempt(
                    turn=current.number if current is not None else 0,
                    attempt=number,
                    provider=str(field_of(meta, "provider_id") or "?"),
                    model=_model_name(field_of(meta, "model")),
                )
                if current is None:
                    current = _Turn(0, max(leg, 1))
                    turns.append(current)
                current.attempts.append(target)
            target.done = True
            target.finished_at = ts
            latency = field_of(meta, "latency_ms")
            target.latency_ms = float(latency) if isinstance(latency, (int, float)) else None
            target.usage = field_of(event, "usage")
            target.error = ErrorView.of(field_of(event, "error"))
            if target.error is not None:
                shown.add(target.error.key())
            stop = field_of(event, "stop_reason")
            target.stop_reason = str(stop) if stop else None
            response_model = field_of(event, "response_model")
            target.response_model = str(response_model) if response_model else None
            last_failed = target if target.error is not None else None
        elif kind == "retry_scheduled":
            delay = field_of(event, "delay_ms")
            retry = RetryView(
                delay_ms=float(delay) if isinstance(delay, (int, float)) else 0.0,
                error=ErrorView.of(field_of(event, "error")),
            )
            if last_failed is not None:
                last_failed.retry = retry
            else:
                note(Note(timestamp=ts, title="Retry scheduled", tone="wait", error=retry.error))
        elif kind == "tool_execution_started":
            call_part = field_of(event, "call")
            call = call_of(str(field_of(call_part, "id")), str(field_of(call_part, "name")))
            call.started_at = call.started_at or ts
            if call.arguments is None:
                call.arguments = field_of(call_part, "arguments")
        elif kind in ("tool_execution_finished", "tool_execution_error", "tool_execution_blocked"):
            if kind == "tool_execution_finished":
                result = field_of(event, "result")
                call_id, name = str(field_of(result, "tool_call_id")), str(field_of(result, "name"))
            elif kind == "tool_execution_error":
                call_part = field_of(event, "call")
                call_id, name = str(field_of(call_part, "id")), str(field_of(call_part, "name"))
            else:
                call_id, name = str(field_of(event, "tool_call_id")), str(field_of(event, "name"))
            call = call_of(call_id, name)
            meta = field_of(event, "metadata")
            duration = field_of(meta, "duration_ms")
            if isinstance(duration, (int, float)):
                call.duration_ms = float(duration)
            call.finished_at = call.finished_at or ts
            call.status = kind.rsplit("_", 1)[1]
            if kind == "tool_execution_finished":
                result = field_of(event, "result")
                if not call.has_result and field_of(result, "value") is not None:
                    call.result = field_of(result, "value")
                    call.has_result = True
                call.error = call.error or ErrorView.of(field_of(result, "error"))
            else:
                call.error = call.error or ErrorView.of(field_of(event, "error"))
                reason = field_of(event, "reason")
                if reason:
                    call.reason = str(reason)
        elif kind in ("agent_suspended", "agent_denied"):
            interruption = field_of(event, "interruption")
            pending = field_of(interruption, "pending_decisions") or ()
            names = []
            for item in pending:
                call_id = str(field_of(item, "tool_call_id"))
                name = str(field_of(item, "tool_name") or "?")
                names.append(name)
                if field_of(item, "subagent") is not None:
                    continue  # a child run's call: shown on the child's page
                gated.add(call_id)
                found = calls.get(call_id)
                if found is None:  # gated before it ran: known from the suspension only
                    found = call_of(call_id, name)
                    found.arguments = _parse_json(field_of(item, "arguments"))
                if found.status == "running":
                    found.status = "waiting" if kind == "agent_suspended" else "blocked"
            if kind == "agent_suspended":
                suspended = True
                title = "Suspended: waiting for approval" if names else "Suspended"
                tone = "wait"
            else:
                title, tone = "Denied", "bad"
            reason = field_of(interruption, "reason")
            detail = ", ".join(names) if names else (str(reason) if reason else "")
            note(Note(timestamp=ts, title=title, detail=detail, tone=tone))
        elif kind == "run_limit_exceeded":
            breach = field_of(event, "breach")
            note(
                Note(
                    timestamp=ts,
                    title=f"Limit reached: {field_of(breach, 'limit')}",
                    detail=f"{field_of(breach, 'observed')} > {field_of(breach, 'maximum')}",
                    tone="bad",
                )
            )
        elif kind == "guardrail_decision":
            guard = field_of(event, "record")
            action = field_of(guard, "action")
            if action != "allow":
                note(
                    Note(
                        timestamp=ts,
                        title=f"Guardrail {field_of(guard, 'name') or ''}: {action}".replace(
                            "  ", " "
                        ),
                        detail=str(field_of(guard, "reason") or ""),
                        tone="bad" if action in ("block", "tripwire") else "wait",
                    )
                )
        elif kind == "compaction_finished":
            note(Note(timestamp=ts, title="History compacted"))
        elif kind == "error":
            error = ErrorView.of(field_of(event, "error"))
            if error is not None and error.key() not in shown:  # else already on its attempt
                shown.add(error.key())
                note(Note(timestamp=ts, title="Error", tone="bad", error=error))
        elif kind == "agent_finished":
            reason = field_of(event, "finish_reason")
            note(Note(timestamp=ts, title="Finished", detail=str(reason or ""), tone="ok"))

    for call_id, reason in (rejected or {}).items():
        found = calls.get(call_id)
        if found is not None and found.status in ("waiting", "running"):
            found.status = "blocked"
            found.reason = found.reason or reason
            gated.add(call_id)
    decisions = {
        str(field_of(d, "tool_call_id")): d for d in decided if field_of(d, "tool_call_id")
    }
    for call_id, call in calls.items():
        decision = decisions.get(call_id)
        if call_id in gated or decision is not None:
            call.approval = (
                "rejected"
                if call.status == "blocked"
                else "waiting"
                if call.status in ("waiting", "running")
                else "allowed"
            )
        if decision is not None:
            outcome = str(field_of(decision, "outcome"))
            by = field_of(decision, "by")
            when = field_of(decision, "applied_at") or field_of(decision, "decided_at")
            call.decided = outcome.replace("_", " ") + (f" by {by}" if by else "")
            call.decided += f" at {when}" if when else ""
            if field_of(decision, "applied_at") is None:
                call.decided += " (recorded, not applied yet)"
    origin = started_at or (run.started_at if run is not None else None)
    if origin is None:
        first = rows[0].record
        origin = (
            first.started_at if isinstance(first, (RunRecord, ToolCallRecord)) else first.timestamp
        )
    return TimelineView(
        has_ledger=True,
        turns=tuple(_turn_view(t, children, origin) for t in turns),
        notes=tuple(loose),
        started_at=started_at,
        finished_at=finished_at,
        rows=len(rows),
    )


def _turn_view(
    turn: _Turn,
    children: Mapping[str, Sequence[ChildRun]],
    origin: str | None,
) -> TurnView:
    attempts = []
    for a in turn.attempts:
        usage = a.usage
        cost = field_of(usage, "cost")
        duration = (
            a.latency_ms if a.latency_ms is not None else ms_between(a.started_at, a.finished_at)
        )
        # every turn starts on the chain's primary: an attempt served by another provider or
        # model than the turn's first one is a fallback (a handoff changes the first one too)
        first = turn.attempts[0]
        fallback = (a.provider, a.model) != (first.provider, first.model)
        attempts.append(
            AttemptView(
                turn=turn.number,
                attempt=a.attempt,
                provider=a.provider,
                model=a.model,
                fallback=fallback,
                response_model=a.response_model,
                started_at=a.started_at,
                finished_at=a.finished_at,
                duration_ms=duration,
                input_tokens=field_of(usage, "input_tokens"),
                output_tokens=field_of(usage, "output_tokens"),
                cost=float(cost) if isinstance(cost, (int, float)) else None,
                currency=field_of(usage, "currency"),
                stop_reason=a.stop_reason,
                error=a.error,
                retry=a.retry,
                status="running" if not a.done else "error" if a.error is not None else "finished",
                offset_ms=ms_between(origin, a.started_at),
            )
        )
    calls = []
    for c in turn.calls.values():
        duration = c.duration_ms
        if duration is None:
            duration = ms_between(c.started_at, c.finished_at)
        result = pretty_json(c.result) if c.has_result else None
        arguments = pretty_json(c.arguments if c.arguments is not None else {})
        calls.append(
            ToolCallView(
                call_id=c.call_id,
                name=c.name,
                arguments=arguments,
                status=c.status,
                started_at=c.started_at,
                finished_at=c.finished_at,
                duration_ms=duration,
                approval=c.approval,
                decided=c.decided,
                error=c.error,
                reason=c.reason,
                result=result,
                long=len(arguments) > LONG_TEXT or (result is not None and len(result) > LONG_TEXT),
                children=tuple(children.get(c.call_id, ())),
                offset_ms=ms_between(origin, c.started_at),
            )
        )
    return TurnView(
        number=turn.number,
        leg=turn.leg,
        attempts=tuple(attempts),
        tool_calls=tuple(calls),
        notes=tuple(turn.notes),
        items=_in_time_order(
            [("attempt", a, a.started_at) for a in attempts]
            + [("call", c, c.started_at) for c in calls]
            + [("note", n, n.timestamp) for n in turn.notes]
        ),
    )


def _in_time_order(
    items: list[tuple[str, Any, str | None]],
) -> tuple[tuple[str, Any], ...]:
    keyed: list[tuple[float, int, str, Any]] = []
    last = float("-inf")
    for index, (kind, item, at) in enumerate(items):
        when = parse_time(at)
        if when is not None:
            last = when.timestamp()
        keyed.append((last, index, kind, item))
    keyed.sort(key=lambda k: (k[0], k[1]))
    return tuple((kind, item) for _, _, kind, item in keyed)


def rejected_calls(entries: Iterable[StoredEntry], run_id: str) -> dict[str, str]:
    """The calls of ``run_id`` that a rejected approval answered (the ``approval_rejected``
    tool results among the session's ``entries``): tool call id → the rejection's message."""
    out: dict[str, str] = {}
    for stored in entries:
        message = stored.entry.message
        if stored.entry.run_id != run_id or message is None or message.role != "tool":
            continue
        for part in message.content:
            error = field_of(part, "error")
            if field_of(part, "type") == "tool_result" and field_of(error, "code") == (
                "approval_rejected"
            ):
                out[str(field_of(part, "tool_call_id"))] = str(field_of(error, "message") or "")
    return out


def child_runs_by_call(
    run_id: str, sessions: Iterable[SessionSummary], runs: Mapping[str, RunSummary]
) -> dict[str, list[ChildRun]]:
    """Child runs of ``run_id`` by the tool call that started them: its child sessions are
    ``<run_id>.<tool call id>``; ``runs`` maps a child session's latest run id to its summary."""
    out: dict[str, list[ChildRun]] = {}
    prefix = run_id + "."
    for session in sessions:
        if not session.session_id.startswith(prefix):
            continue
        call_id = session.session_id[len(prefix) :]
        summary = runs.get(session.last_run_id or "")
        out.setdefault(call_id, []).append(
            ChildRun(
                run_id=session.last_run_id,
                session_id=session.session_id,
                agent=(summary.agent_id if summary else None) or session.agent_id,
                status=(summary.status if summary else None) or session.status,
                started_at=summary.started_at if summary else session.created_at,
                finished_at=summary.finished_at if summary else None,
                turns=summary.turns if summary else session.turns,
                input_tokens=summary.input_tokens if summary else session.input_tokens,
                output_tokens=summary.output_tokens if summary else session.output_tokens,
                cost=summary.cost if summary else session.cost,
            )
        )
    return out


def run_duration_ms(run: RunSummary | None, now: datetime) -> float | None:
    """How long a run took (or has been running); a suspended run's time runs on while it
    waits for a decision."""
    if run is None or run.started_at is None:
        return None
    if run.finished_at is not None and run.status != "suspended":
        return ms_between(run.started_at, run.finished_at)
    if run.status in FINAL_STATUSES:
        return None
    start = parse_time(run.started_at)
    return None if start is None else max(0.0, (now - start).total_seconds() * 1000)
