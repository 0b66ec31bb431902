"""The inspector's view basics and its transcript: what a page shows of stored entries, and how
numbers, times and errors are written.

* the formatting helpers the templates use: tokens, cost (``—`` where the provider reported
  none), durations, relative times, pretty JSON, the tone of a status badge;
* [`ErrorView`][prism.serve._views.ErrorView] — an error as shown: its code, name and (already redacted) message;
* [`project_transcript()`][prism.serve._views.project_transcript] — a run's (or a session's) stored entries as transcript items:
  messages with their text, collapsed thinking, tool calls with their arguments and tool results
  (pretty JSON), handoff switches labelled with the agent that answers from then on, model
  changes and compaction summaries;
* [`session_branches()`][prism.serve._views.session_branches] — a session's entries split into
  the branch a new session object continues (the one ending at the last stored entry) and the
  other branches, each from the entry it forks from.

Everything here is pure (no I/O, no clock but the ``now`` it is given). Strings from runs are
kept as they are: escaping them is the templates' job (they autoescape).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from markupsafe import Markup, escape

from prism.inspection import StoredEntry
from prism.types import ErrorInfo

__all__ = [
    "FINAL_STATUSES",
    "LONG_TEXT",
    "ErrorView",
    "SideBranch",
    "TranscriptBlock",
    "TranscriptItem",
    "badge",
    "field_of",
    "format_cost",
    "format_duration",
    "format_tokens",
    "ms_between",
    "parse_time",
    "pretty_json",
    "project_transcript",
    "relative_time",
    "session_branches",
    "status_tone",
    "when",
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


def ms_between(start: str | None, end: str | None) -> float | None:
    """Milliseconds from ``start`` to ``end`` (ISO-8601; ≥ 0), or ``None`` when one is missing."""
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
    """``0 ms``, ``2.5 ms``, ``850 ms``, ``1.24 s``, ``2 min 03 s``, ``1 h 04 min``; ``—`` for
    ``None``."""
    if ms is None:
        return _EM_DASH
    if ms == 0:
        return "0 ms"
    if ms < 10:
        return f"{ms:.1f} ms"
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


def badge(status: str | None, label: str | None = None) -> Markup:
    """The status badge of the pages: the status as text (``label`` instead when given; the
    colour only repeats it), its tone a class ([`status_tone()`][prism.serve._views.status_tone]); escaped."""
    text = escape(label if label else (status or "unknown"))
    return Markup(
        f'<span class="badge tone-{status_tone(status)}"><span class="dot" aria-hidden="true">'
        f"</span>{text}</span>"
    )


def when(value: str | None, now: datetime) -> Markup:
    """A ``<time>`` of an ISO time showing [`relative_time()`][prism.serve._views.relative_time] (the page's script keeps it
    current) with the time itself as its title; ``—`` for ``None``; escaped."""
    if not value:
        return Markup(_EM_DASH)
    at = escape(value)
    return Markup(f'<time datetime="{at}" title="{at}" data-rel>{relative_time(value, now)}</time>')


_COMPACT: Final = json.JSONEncoder(ensure_ascii=False, default=str).encode
"""JSON text of a value without indentation: the C encoder (``indent`` would select the
pure-Python one, several times slower)."""


def pretty_json(value: Any) -> str:
    """Indented JSON text of a JSON value (strings stay as they are: escaping is the
    template's), as ``json.dumps(value, indent=2, ensure_ascii=False, default=str)`` writes it.

    The containers are laid out here and every scalar is written by the C encoder: a run page
    shows thousands of arguments and results, and ``indent`` alone makes ``json`` use its
    pure-Python encoder."""
    try:
        return _pretty(value, "\n")
    except (TypeError, ValueError, RecursionError):
        try:
            return json.dumps(value, indent=2, ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):
            return repr(value)


def _pretty(value: Any, newline: str) -> str:
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = newline + "  "
        parts = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError("a key that is not a string: json.dumps converts it")
            parts.append(_COMPACT(key) + ": " + _pretty(item, inner))
        return "{" + inner + ("," + inner).join(parts) + newline + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        inner = newline + "  "
        return (
            "[" + inner + ("," + inner).join(_pretty(item, inner) for item in value) + newline + "]"
        )
    return _COMPACT(value)


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


def field_of(value: Any, name: str) -> Any:
    """``value[name]`` of a mapping (a record read back as a dict), else ``value.name``; ``None``
    when absent."""
    if type(value) is dict:  # the common cases first: a page reads thousands of fields
        return value.get(name)
    if value is None:
        return None
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

    def key(self) -> tuple[str | None, str]:
        """What makes two errors the same one (its code and message)."""
        return self.code, self.message

    @classmethod
    def of(cls, error: ErrorInfo | Mapping[str, Any] | None) -> ErrorView | None:
        """The view of an [`ErrorInfo`][prism.types.ErrorInfo] (or its dict form), else ``None``."""
        if error is None:
            return None
        code = field_of(error, "code")
        name = field_of(error, "name")
        message = field_of(error, "message")
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
    kind = field_of(part, "type")
    if kind == "text":
        return TranscriptBlock(kind="text", text=str(field_of(part, "text") or ""))
    if kind == "thinking":
        text = str(field_of(part, "text") or "")
        if not text and field_of(part, "redacted_data"):
            text = "(encrypted reasoning, not readable)"
        return TranscriptBlock(kind="thinking", text=text, long=True)
    if kind == "tool_call":
        body = pretty_json(field_of(part, "arguments"))
        return TranscriptBlock(
            kind="tool_call",
            name=str(field_of(part, "name")),
            call_id=str(field_of(part, "id")),
            body=body,
            error=ErrorView.of(field_of(part, "arguments_error")),
            long=len(body) > LONG_TEXT,
        )
    if kind == "tool_result":
        body = pretty_json(field_of(part, "result"))
        return TranscriptBlock(
            kind="tool_result",
            name=str(field_of(part, "name")),
            call_id=str(field_of(part, "tool_call_id")),
            body=body,
            error=ErrorView.of(field_of(part, "error")),
            long=len(body) > LONG_TEXT,
        )
    if kind == "image":
        mime = field_of(part, "mime_type") or "image"
        where = "inline data" if field_of(part, "data") else "a URL"
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


# --------------------------------------------------------------------------- branches


@dataclass(frozen=True, slots=True)
class SideBranch:
    """A branch of a session other than the one its last stored entry ends."""

    fork_id: str | None
    """The entry the branch continues from (``None``: a separate start of the conversation)."""
    fork_text: str
    """The first line of that entry's text, shortened (``""`` when it has none)."""
    items: list[TranscriptItem]
    """The branch's own entries, after the fork, in append order."""
    last_at: str
    """The time of its last entry."""


_FORK_TEXT: Final = 80


def _first_line(stored: StoredEntry | None) -> str:
    message = stored.entry.message if stored is not None else None
    text = message.text.strip() if message is not None else ""
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= _FORK_TEXT else line[: _FORK_TEXT - 1] + "…"


def session_branches(
    entries: list[StoredEntry],
) -> tuple[list[TranscriptItem], list[SideBranch]]:
    """A session's entries as its current branch and its other branches.

    The current branch is the one a new session object continues: root → the last stored entry.
    Every other leaf (an entry without children) ends a side branch, whose own entries are
    those after the first entry it shares with an earlier branch (the fork). Side branches come
    newest first. An entry whose parent is not among ``entries`` starts a chain of its own.

    Returns:
        ``(current branch transcript, side branches)``; ``([], [])`` without entries.
    """
    if not entries:
        return [], []
    by_id = {stored.entry.id: stored for stored in entries}
    parents = {stored.entry.parent_id for stored in entries}
    shown: set[str] = set()

    def chain(leaf: StoredEntry) -> list[StoredEntry]:
        """``leaf`` and its ancestors not shown yet, root first."""
        out: list[StoredEntry] = []
        node: StoredEntry | None = leaf
        while node is not None and node.entry.id not in shown:
            shown.add(node.entry.id)
            out.append(node)
            parent = node.entry.parent_id
            node = by_id.get(parent) if parent is not None else None
        out.reverse()
        return out

    current = project_transcript(chain(entries[-1]))
    sides: list[SideBranch] = []
    for stored in reversed(entries[:-1]):
        if stored.entry.id in parents or stored.entry.id in shown:
            continue
        own = chain(stored)
        fork_id = own[0].entry.parent_id
        fork = by_id.get(fork_id) if fork_id is not None else None
        sides.append(
            SideBranch(
                fork_id=fork_id if fork is not None else None,
                fork_text=_first_line(fork),
                items=project_transcript(own),
                last_at=stored.entry.timestamp,
            )
        )
    return current, sides
