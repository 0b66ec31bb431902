"""The inspector's view models: what a page shows, projected from what the store holds.

Every function here is pure (no I/O, no clock but the ``now`` it is given), so the pages'
content is tested without a browser:

* :func:`project_transcript` — a run's (or a session's) stored entries as transcript items:
  messages with their text, collapsed thinking, tool calls with their arguments and tool results
  (pretty JSON), handoff switches labelled with the agent that answers from then on, model
  changes and compaction summaries;
* :func:`project_timeline` — a run's ledger rows as turns: every provider attempt (provider and
  model that served it — a fallback marked —, tokens, cost, duration, retries and their errors,
  stop reason), every tool call (duration, status, approval, error) with the child runs its
  agent tool started, and the run's notable events (suspensions, resumptions, limits,
  guardrails, errors);
* :func:`project_waterfall` — the same run as bars on a time axis (attempts, tool calls side by
  side when they ran in parallel, child runs, waits for approval), positions in 0..1000;
* the formatting helpers the templates use (tokens, cost, durations, relative times).

Errors are shown with their code and their message as stored — the run redacted it before it
was written. Cost is shown only where the provider reported ``Usage.cost``; elsewhere ``—``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from prism.inspection import LedgerRow, RunSummary, SessionSummary, StoredEntry
from prism.ledger_records import AgentEventRecord, RunRecord, ToolCallRecord, UsageRecord
from prism.types import ErrorInfo

__all__ = [
    "FINAL_STATUSES",
    "AttemptView",
    "ChildRun",
    "ErrorView",
    "Note",
    "RetryView",
    "TimelineView",
    "ToolCallView",
    "TranscriptBlock",
    "TranscriptItem",
    "TurnView",
    "WaterfallBar",
    "WaterfallView",
    "format_cost",
    "format_duration",
    "format_tokens",
    "parse_time",
    "pretty_json",
    "project_timeline",
    "project_transcript",
    "project_waterfall",
    "relative_time",
    "status_tone",
]

FINAL_STATUSES: Final = frozenset({"succeeded", "failed", "aborted", "denied"})
"""Statuses after which a run's ledger no longer grows (a suspended run may still resume)."""
LONG_TEXT: Final = 600
"""Characters after which a tool result or argument block is collapsed."""
_EM_DASH: Final = "—"


# --------------------------------------------------------------------------- formatting


def parse_time(value: str | None) -> datetime | None:
    """An ISO-8601 time as an aware UTC datetime, or ``None`` (missing or unparsable)."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _ms_between(start: str | None, end: str | None) -> float | None:
    a, b = parse_time(start), parse_time(end)
    if a is None or b is None:
        return None
    return max(0.0, (b - a).total_seconds() * 1000.0)


def format_tokens(value: int | None) -> str:
    """``12,345``; ``—`` for ``None``."""
    return _EM_DASH if value is None else f"{value:,}"


def format_cost(value: float | None, currency: str | None = None) -> str:
    """``$0.0123`` (USD), ``0.0123 EUR``, or ``—`` when no cost was reported."""
    if value is None:
        return _EM_DASH
    digits = 2 if value >= 100 else 4 if value >= 0.01 else 6
    text = f"{value:,.{digits}f}"
    if "." in text:
        whole, frac = text.split(".")
        frac = frac.rstrip("0").ljust(2, "0")
        text = f"{whole}.{frac}"
    if currency is None or currency.upper() == "USD":
        return "$" + text
    return f"{text} {currency}"


def format_duration(ms: float | None) -> str:
    """``850 ms``, ``1.24 s``, ``2 min 03 s``, ``1 h 04 min``; ``—`` for ``None``."""
    if ms is None:
        return _EM_DASH
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"
    minutes, sec = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def relative_time(value: str | None, now: datetime) -> str:
    """``just now``, ``3 min ago``, ``5 h ago``, ``2 d ago`` or the date; ``—`` for ``None``."""
    when = parse_time(value)
    if when is None:
        return _EM_DASH
    seconds = (now - when).total_seconds()
    if seconds < 0:
        return "just now" if seconds > -60 else when.strftime("%Y-%m-%d %H:%M")
    if seconds < 45:
        return "just now"
    if seconds < 3600:
        return f"{max(1, round(seconds / 60))} min ago"
    if seconds < 86400:
        return f"{round(seconds / 3600)} h ago"
    if seconds < 86400 * 30:
        return f"{round(seconds / 86400)} d ago"
    return when.strftime("%Y-%m-%d")


def pretty_json(value: Any) -> str:
    """Indented JSON text of a JSON value (strings stay as they are: escaping is the
    template's)."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def status_tone(status: str | None) -> str:
    """The badge tone of a status: ``ok``, ``bad``, ``wait``, ``live`` or ``idle``."""
    if status in ("succeeded", "finished", "allowed"):
        return "ok"
    if status in ("failed", "aborted", "denied", "error", "blocked", "rejected", "ambiguous"):
        return "bad"
    if status in ("suspended", "waiting", "queued"):
        return "wait"
    if status in ("running", "started"):
        return "live"
    return "idle"


def _get(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


# --------------------------------------------------------------------------- errors


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorView:
    """An error as shown: its code, exception name and (already redacted) message."""

    code: str | None
    name: str | None
    message: str

    @classmethod
    def of(cls, error: ErrorInfo | Mapping[str, Any] | None) -> ErrorView | None:
        """The view of an :class:`~prism.types.ErrorInfo` (or its dict form), else ``None``."""
        if error is None:
            return None
        code = _get(error, "code")
        name = _get(error, "name")
        message = _get(error, "message")
        return cls(
            code=None if code is None else str(code),
            name=None if name is None else str(name),
            message="" if message is None else str(message),
        )


# --------------------------------------------------------------------------- transcript


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptBlock:
    """One content part of a transcript message."""

    kind: Literal["text", "thinking", "tool_call", "tool_result", "image", "other"]
    text: str = ""
    """Text of a ``text`` or ``thinking`` part; a short description of an image."""
    name: str | None = None
    """Tool name of a tool call or result."""
    call_id: str | None = None
    """Tool call id of a tool call or result."""
    body: str | None = None
    """Pretty JSON of a call's arguments or a result's value."""
    error: ErrorView | None = None
    """The error of an error result, or why a call's arguments could not be parsed."""
    long: bool = False
    """Collapse it (long text, any thinking)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptItem:
    """One stored entry as the transcript shows it."""

    entry_id: str
    kind: Literal["message", "handoff", "model_change", "compaction", "summary", "custom"]
    timestamp: str
    run_id: str | None
    role: str | None = None
    """Message role."""
    agent: str | None = None
    """The agent answering at this point (set after a handoff switch)."""
    blocks: tuple[TranscriptBlock, ...] = ()
    title: str = ""
    """What a non-message entry is (``Handed off to billing``, ``Model changed``…)."""
    text: str = ""
    """A summary's or compaction's text, a custom entry's data."""


def _block(part: Any) -> TranscriptBlock:
    kind = _get(part, "type")
    if kind == "text":
        return TranscriptBlock(kind="text", text=str(_get(part, "text") or ""))
    if kind == "thinking":
        text = str(_get(part, "text") or "")
        if not text and _get(part, "redacted_data"):
            text = "(encrypted reasoning, not readable)"
        return TranscriptBlock(kind="thinking", text=text, long=True)
    if kind == "tool_call":
        body = pretty_json(_get(part, "arguments"))
        return TranscriptBlock(
            kind="tool_call",
            name=str(_get(part, "name")),
            call_id=str(_get(part, "id")),
            body=body,
            error=ErrorView.of(_get(part, "arguments_error")),
            long=len(body) > LONG_TEXT,
        )
    if kind == "tool_result":
        body = pretty_json(_get(part, "result"))
        return TranscriptBlock(
            kind="tool_result",
            name=str(_get(part, "name")),
            call_id=str(_get(part, "tool_call_id")),
            body=body,
            error=ErrorView.of(_get(part, "error")),
            long=len(body) > LONG_TEXT,
        )
    if kind == "image":
        mime = _get(part, "mime_type") or "image"
        where = "inline data" if _get(part, "data") else "a URL"
        return TranscriptBlock(kind="image", text=f"{mime} ({where}, not shown)")
    return TranscriptBlock(kind="other", text=pretty_json(part), long=True)


@dataclass(frozen=True, slots=True)
class _Base:
    entry_id: str
    timestamp: str
    run_id: str | None

    def fields(self) -> dict[str, Any]:
        return {"entry_id": self.entry_id, "timestamp": self.timestamp, "run_id": self.run_id}


def project_transcript(
    entries: Iterable[StoredEntry], *, run_id: str | None = None
) -> list[TranscriptItem]:
    """The transcript of stored entries in append order; with ``run_id`` only that run's.

    A ``custom`` entry whose data is a handoff switch becomes a ``handoff`` item (``title``
    names the agent) and labels every later message with that agent; ``compaction`` and
    ``summary`` entries carry their summary text; other ``custom`` entries their data as JSON.
    """
    items: list[TranscriptItem] = []
    agent: str | None = None
    for stored in entries:
        entry = stored.entry
        if run_id is not None and entry.run_id != run_id:
            continue
        base = _Base(entry.id, entry.timestamp, entry.run_id)
        data = entry.data or {}
        if entry.kind == "message" and entry.message is not None:
            message = entry.message
            items.append(
                TranscriptItem(
                    kind="message",
                    role=message.role,
                    agent=agent if message.role == "assistant" else None,
                    blocks=tuple(_block(part) for part in message.content),
                    **base.fields(),
                )
            )
        elif entry.kind == "custom" and data.get("type") == "handoff":
            target = data.get("agent")
            agent = str(target) if target is not None else agent
            previous = data.get("previous_agent")
            title = f"Handed off to {agent}" + (f" (from {previous})" if previous else "")
            items.append(TranscriptItem(kind="handoff", agent=agent, title=title, **base.fields()))
        elif entry.kind == "model_change":
            new = entry.model.model if entry.model is not None else "?"
            old = entry.previous_model.model if entry.previous_model is not None else None
            title = f"Model changed to {new}" + (f" (was {old})" if old else "")
            items.append(TranscriptItem(kind="model_change", title=title, **base.fields()))
        elif entry.kind in ("compaction", "summary"):
            title = "History compacted" if entry.kind == "compaction" else "Summary"
            strategy = data.get("strategy")
            if strategy:
                title += f" ({strategy})"
            items.append(
                TranscriptItem(
                    kind=entry.kind, title=title, text=entry.summary or "", **base.fields()
                )
            )
        else:
            label = data.get("type") if isinstance(data.get("type"), str) else entry.kind
            items.append(
                TranscriptItem(
                    kind="custom",
                    title=f"Entry: {label}",
                    text=pretty_json(dict(data)),
                    **base.fields(),
                )
            )
    return items


# --------------------------------------------------------------------------- timeline


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
    """``waited for approval``, then ``allowed`` or ``rejected``; ``None`` when not gated."""
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
    name = _get(model, "model")
    return str(name) if name else "?"


def project_timeline(
    rows: Sequence[LedgerRow],
    *,
    run: RunSummary | None = None,
    children: Mapping[str, Sequence[ChildRun]] | None = None,
) -> TimelineView:
    """Project one run's ledger rows (in ledger order) into turns.

    Args:
        rows: The run's rows from :meth:`~prism.inspection.InspectionReader.read_ledger`.
        run: The run's summary (its start time when the rows hold no run row).
        children: Child runs by the tool call id that started them.

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
    leg = 0
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
                if record.status in ("failed", "aborted") and record.error is not None:
                    loose.append(
                        Note(
                            timestamp=record.finished_at or record.started_at,
                            title=f"Run {record.status}",
                            tone="bad",
                            error=ErrorView.of(record.error),
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
            note(Note(timestamp=ts, title=f"Resumed from version {_get(event, 'version')}"))
        elif kind == "turn_started":
            number = _get(event, "turn")
            current = _Turn(number if isinstance(number, int) else len(turns) + 1, max(leg, 1))
            turns.append(current)
        elif kind == "provider_turn_started":
            meta = _get(event, "metadata")
            attempt = _Attempt(
                turn=current.number if current is not None else 0,
                attempt=int(_get(meta, "attempt") or 1),
                provider=str(_get(meta, "provider_id") or "?"),
                model=_model_name(_get(meta, "model")),
                started_at=ts,
            )
            if current is None:
                current = _Turn(0, max(leg, 1))
                turns.append(current)
            current.attempts.append(attempt)
        elif kind == "provider_turn_finished":
            meta = _get(event, "metadata")
            number = int(_get(meta, "attempt") or 1)
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
                    provider=str(_get(meta, "provider_id") or "?"),
                    model=_model_name(_get(meta, "model")),
                )
                if current is None:
                    current = _Turn(0, max(leg, 1))
                    turns.append(current)
                current.attempts.append(target)
            target.done = True
            target.finished_at = ts
            latency = _get(meta, "latency_ms")
            target.latency_ms = float(latency) if isinstance(latency, (int, float)) else None
            target.usage = _get(event, "usage")
            target.error = ErrorView.of(_get(event, "error"))
            stop = _get(event, "stop_reason")
            target.stop_reason = str(stop) if stop else None
            response_model = _get(event, "response_model")
            target.response_model = str(response_model) if response_model else None
            last_failed = target if target.error is not None else None
        elif kind == "retry_scheduled":
            delay = _get(event, "delay_ms")
            retry = RetryView(
                delay_ms=float(delay) if isinstance(delay, (int, float)) else 0.0,
                error=ErrorView.of(_get(event, "error")),
            )
            if last_failed is not None:
                last_failed.retry = retry
            else:
                note(Note(timestamp=ts, title="Retry scheduled", tone="wait", error=retry.error))
        elif kind == "tool_execution_started":
            call_part = _get(event, "call")
            call = call_of(str(_get(call_part, "id")), str(_get(call_part, "name")))
            call.started_at = call.started_at or ts
            if call.arguments is None:
                call.arguments = _get(call_part, "arguments")
        elif kind in ("tool_execution_finished", "tool_execution_error", "tool_execution_blocked"):
            if kind == "tool_execution_finished":
                result = _get(event, "result")
                call_id, name = str(_get(result, "tool_call_id")), str(_get(result, "name"))
            elif kind == "tool_execution_error":
                call_part = _get(event, "call")
                call_id, name = str(_get(call_part, "id")), str(_get(call_part, "name"))
            else:
                call_id, name = str(_get(event, "tool_call_id")), str(_get(event, "name"))
            call = call_of(call_id, name)
            meta = _get(event, "metadata")
            duration = _get(meta, "duration_ms")
            if isinstance(duration, (int, float)):
                call.duration_ms = float(duration)
            call.finished_at = call.finished_at or ts
            call.status = kind.rsplit("_", 1)[1]
            if kind == "tool_execution_finished":
                result = _get(event, "result")
                if not call.has_result and _get(result, "value") is not None:
                    call.result = _get(result, "value")
                    call.has_result = True
                call.error = call.error or ErrorView.of(_get(result, "error"))
            else:
                call.error = call.error or ErrorView.of(_get(event, "error"))
                reason = _get(event, "reason")
                if reason:
                    call.reason = str(reason)
        elif kind in ("agent_suspended", "agent_denied"):
            interruption = _get(event, "interruption")
            pending = _get(interruption, "pending_decisions") or ()
            names = []
            for item in pending:
                call_id = str(_get(item, "tool_call_id"))
                name = str(_get(item, "tool_name") or "?")
                names.append(name)
                if _get(item, "subagent") is not None:
                    continue  # a child run's call: shown on the child's page
                gated.add(call_id)
                found = calls.get(call_id)
                if found is None:  # gated before it ran: known from the suspension only
                    found = call_of(call_id, name)
                    found.arguments = _parse_json(_get(item, "arguments"))
                if found.status == "running":
                    found.status = "waiting" if kind == "agent_suspended" else "blocked"
            if kind == "agent_suspended":
                title = "Suspended: waiting for approval" if names else "Suspended"
                tone = "wait"
            else:
                title, tone = "Denied", "bad"
            reason = _get(interruption, "reason")
            detail = ", ".join(names) if names else (str(reason) if reason else "")
            note(Note(timestamp=ts, title=title, detail=detail, tone=tone))
        elif kind == "run_limit_exceeded":
            breach = _get(event, "breach")
            note(
                Note(
                    timestamp=ts,
                    title=f"Limit reached: {_get(breach, 'limit')}",
                    detail=f"{_get(breach, 'observed')} > {_get(breach, 'maximum')}",
                    tone="bad",
                )
            )
        elif kind == "guardrail_decision":
            guard = _get(event, "record")
            action = _get(guard, "action")
            if action != "allow":
                note(
                    Note(
                        timestamp=ts,
                        title=f"Guardrail {_get(guard, 'name') or ''}: {action}".replace("  ", " "),
                        detail=str(_get(guard, "reason") or ""),
                        tone="bad" if action in ("block", "tripwire") else "wait",
                    )
                )
        elif kind == "compaction_finished":
            note(Note(timestamp=ts, title="History compacted"))
        elif kind == "error":
            note(
                Note(
                    timestamp=ts,
                    title="Error",
                    tone="bad",
                    error=ErrorView.of(_get(event, "error")),
                )
            )
        elif kind == "agent_finished":
            reason = _get(event, "finish_reason")
            note(Note(timestamp=ts, title="Finished", detail=str(reason or ""), tone="ok"))

    for call_id, call in calls.items():
        if call_id in gated:
            call.approval = (
                "rejected"
                if call.status == "blocked"
                else "waiting"
                if call.status in ("waiting", "running")
                else "allowed"
            )
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
        cost = _get(usage, "cost")
        duration = (
            a.latency_ms if a.latency_ms is not None else _ms_between(a.started_at, a.finished_at)
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
                input_tokens=_get(usage, "input_tokens"),
                output_tokens=_get(usage, "output_tokens"),
                cost=float(cost) if isinstance(cost, (int, float)) else None,
                currency=_get(usage, "currency"),
                stop_reason=a.stop_reason,
                error=a.error,
                retry=a.retry,
                status="running" if not a.done else "error" if a.error is not None else "finished",
                offset_ms=_ms_between(origin, a.started_at),
            )
        )
    calls = []
    for c in turn.calls.values():
        duration = c.duration_ms
        if duration is None:
            duration = _ms_between(c.started_at, c.finished_at)
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
                error=c.error,
                reason=c.reason,
                result=result,
                long=len(arguments) > LONG_TEXT or (result is not None and len(result) > LONG_TEXT),
                children=tuple(children.get(c.call_id, ())),
                offset_ms=_ms_between(origin, c.started_at),
            )
        )
    return TurnView(
        number=turn.number,
        leg=turn.leg,
        attempts=tuple(attempts),
        tool_calls=tuple(calls),
        notes=tuple(turn.notes),
    )


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


# --------------------------------------------------------------------------- waterfall


@dataclass(frozen=True, slots=True, kw_only=True)
class WaterfallBar:
    """One bar: positions in 0..1000 of the run's time span."""

    label: str
    detail: str
    kind: Literal["provider", "tool", "child", "wait"]
    status: str
    x: float
    width: float
    depth: int
    """0 for attempts, 1 for tool calls and waits, 2 for child runs."""
    duration_ms: float | None
    href: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WaterfallView:
    """A run as bars on a time axis."""

    total_ms: float
    bars: tuple[WaterfallBar, ...]
    ticks: tuple[str, ...]
    """Labels of the 0 %, 25 %, 50 %, 75 % and 100 % marks."""


_MIN_WIDTH: Final = 4.0


def project_waterfall(
    timeline: TimelineView, *, started_at: str | None, finished_at: str | None, now: datetime
) -> WaterfallView | None:
    """The waterfall of a projected timeline, or ``None`` when nothing has a time.

    The axis runs from the run's start (else its first timed item) to its finish (else the last
    timed item, or ``now`` while it runs). Attempts are depth 0, tool calls depth 1 (parallel
    calls overlap on the axis, each on its own row), child runs depth 2 under their call, and a
    wait for approval is a bar from the suspension to the next leg.
    """
    spans: list[tuple[datetime, datetime | None, dict[str, Any]]] = []
    for turn in timeline.turns:
        for a in turn.attempts:
            start = parse_time(a.started_at) or parse_time(a.finished_at)
            if start is None:
                continue
            detail = f"{a.provider} · {a.model}" + (" · fallback" if a.fallback else "")
            spans.append(
                (
                    start,
                    parse_time(a.finished_at),
                    {
                        "label": f"Turn {turn.number} · attempt {a.attempt}",
                        "detail": detail,
                        "kind": "provider",
                        "status": a.status,
                        "depth": 0,
                        "duration_ms": a.duration_ms,
                    },
                )
            )
        for c in turn.tool_calls:
            start = parse_time(c.started_at)
            if start is None:
                continue
            spans.append(
                (
                    start,
                    parse_time(c.finished_at),
                    {
                        "label": c.name,
                        "detail": c.call_id,
                        "kind": "tool",
                        "status": c.status,
                        "depth": 1,
                        "duration_ms": c.duration_ms,
                    },
                )
            )
            for child in c.children:
                child_start = parse_time(child.started_at)
                if child_start is None:
                    continue
                spans.append(
                    (
                        child_start,
                        parse_time(child.finished_at),
                        {
                            "label": f"child run · {child.agent or '?'}",
                            "detail": child.run_id or child.session_id,
                            "kind": "child",
                            "status": child.status or "running",
                            "depth": 2,
                            "duration_ms": _ms_between(child.started_at, child.finished_at),
                            "href": f"/runs/{child.run_id}" if child.run_id else None,
                        },
                    )
                )
    # waits for approval: from a suspension to the next timed item after it
    waits: list[tuple[datetime, dict[str, Any]]] = []
    for turn in timeline.turns:
        for n in turn.notes:
            if n.title.startswith("Suspended"):
                when = parse_time(n.timestamp)
                if when is not None:
                    waits.append(
                        (
                            when,
                            {
                                "label": "waiting for approval",
                                "detail": n.detail,
                                "kind": "wait",
                                "status": "waiting",
                                "depth": 1,
                            },
                        )
                    )
    if not spans and not waits:
        return None
    begin = parse_time(started_at)
    starts = [s for s, _, _ in spans] + [w for w, _ in waits]
    first = min(starts)
    if begin is None or begin > first:
        begin = first
    ends = [e for _, e, _ in spans if e is not None]
    end = parse_time(finished_at)
    latest = max([*ends, *starts])
    if end is None:
        end = max(latest, now) if any(e is None for _, e, _ in spans) else latest
    end = max(end, latest)
    for when, info in waits:
        # a wait that still lasts ends the axis (a run waiting for days would squash the rest);
        # its label still says how long it has waited
        later = sorted(s for s in starts if s > when)
        done = later[0] if later else end
        info["duration_ms"] = ((done if later else max(now, when)) - when).total_seconds() * 1000
        spans.append((when, done, info))
    total = max((end - begin).total_seconds() * 1000, 1.0)
    bars = []
    for start, stop, info in sorted(spans, key=lambda s: (s[0], s[2]["depth"])):
        finish = stop if stop is not None else end
        x = (start - begin).total_seconds() * 1000 / total * 1000
        width = max((finish - start).total_seconds() * 1000 / total * 1000, _MIN_WIDTH)
        x = min(max(x, 0.0), 1000.0 - _MIN_WIDTH)
        width = min(width, 1000.0 - x)
        status = info["status"] if stop is not None else "running"
        bars.append(
            WaterfallBar(
                label=info["label"],
                detail=info["detail"],
                kind=info["kind"],
                status=status,
                x=round(x, 2),
                width=round(width, 2),
                depth=info["depth"],
                duration_ms=info.get("duration_ms"),
                href=info.get("href"),
            )
        )
    ticks = tuple(format_duration(total * i / 4) if i else "0" for i in range(5))
    return WaterfallView(total_ms=total, bars=tuple(bars), ticks=ticks)


def run_duration_ms(run: RunSummary | None, now: datetime) -> float | None:
    """How long a run took (or has been running)."""
    if run is None or run.started_at is None:
        return None
    if run.finished_at is not None:
        return _ms_between(run.started_at, run.finished_at)
    if run.status in FINAL_STATUSES:
        return None
    start = parse_time(run.started_at)
    return None if start is None else max(0.0, (now - start).total_seconds() * 1000)


def bar_scale(values: Sequence[float]) -> float:
    """The largest value, at least 1 (a chart's full-scale value)."""
    top = max((v for v in values if math.isfinite(v)), default=0.0)
    return top if top > 0 else 1.0
