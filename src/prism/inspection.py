"""What an inspector reads from a store: sessions, runs, ledger rows and usage, paged.

The run path writes a store through the session, checkpoint and ledger protocols; tooling that
looks at what runs did (``prism serve``, ``prism runs``, an operator's own scripts) reads it
through ``InspectionReader``, which the SQLite and PostgreSQL stores implement over indexed
summary tables, so that every read costs what its page holds, not what the store holds:

* [`list_session_summaries()`][prism.inspection.InspectionReader.list_session_summaries] — sessions, most recently active first, with
  filters (agent, status, model, time range, text of the first user message) and per-session
  totals (runs, turns, tokens, cost, last activity); a child session (an agent tool's, id
  ``<calling run id>.<tool call id>``) names its parent;
* [`list_run_summaries()`][prism.inspection.InspectionReader.list_run_summaries] — runs across sessions, newest first;
* [`read_ledger()`][prism.inspection.InspectionReader.read_ledger] — one run's ledger rows after a cursor, in append order;
* [`read_entries()`][prism.inspection.InspectionReader.read_entries] — one session's entries after a sequence number;
* [`usage_report()`][prism.inspection.InspectionReader.usage_report] — tokens and cost grouped by day, model or agent.

Every listing returns a [`Page`][prism.inspection.Page] whose ``next_cursor`` is an opaque string (``None`` on the
last page); a cursor from one listing is not valid for another. Nothing here writes.

A store that implements the protocol passes [`prism.testing.run_inspection_conformance()`][prism.testing.run_inspection_conformance].
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeAlias, TypeVar, runtime_checkable

from prism._serde import Serializable
from prism.ledger_records import AgentEventRecord, RunRecord, ToolCallRecord, UsageRecord
from prism.session_entry import SessionEntry
from prism.types import ErrorInfo

__all__ = [
    "InspectionReader",
    "LedgerRow",
    "LedgerRowKind",
    "LedgerSlice",
    "Page",
    "RunSummary",
    "SessionFilter",
    "SessionSummary",
    "StoredEntry",
    "UsageBucket",
    "UsageGrouping",
]

_T = TypeVar("_T")

LedgerRowKind: TypeAlias = Literal["run", "event", "tool_call", "usage"]
"""Which ledger table a [`LedgerRow`][prism.inspection.LedgerRow] comes from."""

UsageGrouping: TypeAlias = Literal["day", "model", "agent"]
"""How [`InspectionReader.usage_report()`][prism.inspection.InspectionReader.usage_report] groups usage."""


@dataclass(frozen=True, slots=True)
class Page(Generic[_T]):
    """One page of a listing."""

    items: tuple[_T, ...]
    """The page's items, in the listing's order."""
    next_cursor: str | None = None
    """Pass it back as ``cursor=`` for the next page; ``None`` on the last page."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionFilter:
    """What [`InspectionReader.list_session_summaries()`][prism.inspection.InspectionReader.list_session_summaries] keeps. Every field narrows; ``None``
    does not filter."""

    agent_id: str | None = None
    """Sessions with a run of this agent (``config.id or config.name``)."""
    status: str | None = None
    """Sessions whose latest run has this status (a ``RunRecordStatus``, or a durable run's
    stored status: ``suspended``, ``ambiguous`` ...)."""
    model: str | None = None
    """Sessions with a run on this model name (``ModelConfig.model``)."""
    since: str | None = None
    """Sessions whose latest activity ([`SessionSummary.updated_at`][prism.inspection.SessionSummary.updated_at]) is at or after this
    ISO-8601 time (a time without an offset is UTC, a date is its midnight)."""
    until: str | None = None
    """Sessions whose latest activity is before this ISO-8601 time."""
    text: str | None = None
    """Case-insensitive substring of the session's first user message (at most 200 characters
    are searched: [`SessionSummary.first_input`][prism.inspection.SessionSummary.first_input])."""
    parent_session_id: str | None = None
    """Only the child sessions of this session."""
    top_level: bool = False
    """Only sessions that are nobody's child (the list view nests children under parents)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummary(Serializable):
    """One session as a listing shows it."""

    session_id: str
    """The session id."""
    parent_session_id: str | None
    """The session of the run whose agent-tool call started this (child) session, else
    ``None``."""
    created_at: str
    """ISO-8601 UTC time of its first entry."""
    updated_at: str
    """ISO-8601 UTC time of its latest activity: an entry, a ledger run row (a run's start or
    finish), or a change of a durable run's status."""
    entries: int
    """Stored entries (all branches)."""
    first_input: str | None
    """The first 200 characters of the text of its first user message, else ``None``."""
    agent_id: str | None
    """Agent of its latest run, when known (a ledger run row or a durable envelope)."""
    model: str | None
    """Model name of its latest run, when known."""
    status: str | None
    """Status of its latest run, when known."""
    last_run_id: str | None
    """Its latest run, when known."""
    runs: int
    """Runs known to the ledger or the run index."""
    turns: int
    """Turns its runs started (their ledger ``turn_started`` events)."""
    input_tokens: int
    """Input tokens of its runs (ledger provider-turn usage rows)."""
    output_tokens: int
    """Output tokens of its runs."""
    cost: float | None
    """Cost in the provider's currency units (USD for the bundled providers), summed over the
    usage that reported one; ``None`` when no usage reported a cost."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary(Serializable):
    """One run as a listing shows it: its latest ledger run row (or durable envelope) with
    its usage totals."""

    run_id: str
    """The run id."""
    session_id: str
    """Its session."""
    agent_id: str | None
    """Its agent, when known."""
    status: str
    """Latest known status: of its latest ledger run row and its durable envelope, the one
    written last; ``"unknown"`` for a run known only from usage rows."""
    model: str | None
    """Model name."""
    provider: str | None
    """Provider id."""
    started_at: str | None
    """ISO-8601 UTC start time."""
    finished_at: str | None
    """ISO-8601 UTC finish time of a finished run."""
    stop_reason: str | None
    """Stop reason of a succeeded run."""
    error: ErrorInfo | None
    """Redacted error of a failed or aborted run."""
    turns: int
    """Turns it started (its ledger ``turn_started`` events)."""
    input_tokens: int
    """Input tokens (its ledger provider-turn usage rows)."""
    output_tokens: int
    """Output tokens."""
    cost: float | None
    """Cost, or ``None`` when no usage row reported one."""
    has_ledger: bool
    """Whether the ledger has rows of this run (else only its envelope is known)."""


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One ledger row of a run, with its position."""

    kind: LedgerRowKind
    """The table it comes from."""
    seq: int
    """Its sequence number in that table (increasing in append order)."""
    record: RunRecord | AgentEventRecord | ToolCallRecord | UsageRecord
    """The decoded record."""


@dataclass(frozen=True, slots=True)
class LedgerSlice:
    """Ledger rows of one run after a cursor, and the cursor to continue from."""

    rows: tuple[LedgerRow, ...]
    """Rows in append order: each table's rows by ``seq``; of the tables' next rows the one
    with the earliest record time first, rows of the same millisecond in the order run start
    row, events, tool calls, usage, run finish row. Reading on from [`cursor`][prism.inspection.LedgerSlice.cursor] continues
    exactly where a longer read would have."""
    cursor: str
    """Opaque; pass it as ``after=`` to read only rows appended since. A slice with no rows
    returns the cursor it was given."""
    has_more: bool = False
    """The ``limit`` cut the slice; read again with ``cursor`` at once."""


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """A session entry with its append sequence number."""

    seq: int
    """Increasing in append order within the store."""
    entry: SessionEntry
    """The entry."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageBucket(Serializable):
    """Usage of one group of [`InspectionReader.usage_report()`][prism.inspection.InspectionReader.usage_report]."""

    key: str
    """The day (``YYYY-MM-DD``, UTC), the model name or the agent id; ``"—"`` when unknown."""
    turns: int
    """Provider attempts that reported usage (provider-turn usage rows)."""
    input_tokens: int
    """Input tokens."""
    output_tokens: int
    """Output tokens."""
    cost: float | None
    """Summed cost, or ``None`` when none of the usage reported one."""


@runtime_checkable
class InspectionReader(Protocol):
    """The reads of an inspector; implemented by ``SqliteStore`` and ``PostgresStore`` (over
    the summary tables of their schema migration 3), not by the memory stores.

    Errors: a malformed cursor raises ``PrismConfigError`` (``ERR_PRISM_CONFIG``), as do a
    ``limit`` outside its range (1..1000 for a listing, 1..10000 for a read), a negative
    ``after_seq``, a ``since``/``until`` that is not an ISO-8601 time and an unknown grouping;
    a stored row that does not decode raises ``StoreError`` (``ERR_PRISM_STORE_UNDECODABLE``).
    """

    async def list_session_summaries(
        self,
        *,
        filter: SessionFilter | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[SessionSummary]:
        """Sessions, most recently active first (ties by session id), ``limit`` per page."""
        ...

    async def get_session_summary(self, session_id: str) -> SessionSummary | None:
        """One session's summary, or ``None`` when the store has no such session."""
        ...

    async def list_run_summaries(
        self,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        status: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[RunSummary]:
        """Runs (ledger runs and durable runs), newest start first."""
        ...

    async def get_run_summary(self, run_id: str) -> RunSummary | None:
        """One run's summary, or ``None`` when neither the ledger nor the run index knows it."""
        ...

    async def read_ledger(
        self,
        run_id: str,
        *,
        after: str | None = None,
        limit: int = 1000,
        include_deltas: bool = False,
        event_types: Collection[str] | None = None,
    ) -> LedgerSlice:
        """One run's ledger rows after ``after`` (``None``: from the start), at most ``limit``
        (1..10000). ``message_delta`` event rows are left out unless ``include_deltas``;
        with ``event_types``, only the event rows of those types come (the rows of the other
        tables all do), so a reader that projects a few event types decodes no others."""
        ...

    async def read_entries(
        self, session_id: str, *, after_seq: int = 0, limit: int = 1000
    ) -> Sequence[StoredEntry]:
        """One session's entries (all branches) appended after ``after_seq``, in append
        order, at most ``limit`` (1..10000)."""
        ...

    async def usage_report(
        self,
        *,
        group_by: UsageGrouping,
        since: str | None = None,
        until: str | None = None,
    ) -> Sequence[UsageBucket]:
        """Provider-turn usage between ``since`` (inclusive) and ``until`` (exclusive),
        grouped; days ascending, models and agents by total tokens descending."""
        ...
