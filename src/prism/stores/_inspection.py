"""What an inspector reads from a database store: :class:`~prism.inspection.InspectionReader`
over the summary tables of schema migration 3, the same in both stores.

:class:`InspectionMethods` implements the protocol over
:class:`~prism.stores._common.DatabaseAccess`; :class:`InspectionSql` builds each read as one
statement (so each sees one snapshot) from the dialect's table prefix, parameter marker and
substring function:

* sessions come from ``prism_sessions`` (one row per session, kept by a trigger on every entry
  append), keyset-paged on ``(updated_at, session_id)``; the page's runs (its latest run and
  its totals) are joined from ``prism_run_summaries``, so a page costs its sessions and their
  runs, whatever the store holds;
* runs come from ``prism_run_summaries`` (one row per run, kept by triggers on ledger run and
  usage rows and on a durable envelope's status changes), keyset-paged on
  ``(started_at, run_id)``;
* a run's ledger is the four ledger tables read after a cursor that holds one sequence number
  per table (:class:`LedgerCursor`) and merged in append order;
* entries are read after an entry's sequence number; the usage report sums the provider-turn
  usage rows in a time range.

Cursors are URL-safe text (base64 of a small JSON array whose first item names the listing); a
cursor that does not decode, or that belongs to another listing, raises ``PrismConfigError``.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import heapq
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from prism.errors import PrismConfigError
from prism.inspection import (
    LedgerRow,
    LedgerRowKind,
    LedgerSlice,
    Page,
    RunSummary,
    SessionFilter,
    SessionSummary,
    StoredEntry,
    UsageBucket,
    UsageGrouping,
)
from prism.ledger_records import AgentEventRecord, RunRecord, ToolCallRecord, UsageRecord
from prism.session_entry import SessionEntry
from prism.stores._common import DatabaseAccess, decoded
from prism.types import ErrorInfo

__all__ = [
    "InspectionMethods",
    "InspectionSql",
    "LedgerCursor",
    "decode_cursor",
    "encode_cursor",
    "iso_bound",
    "merge_ledger",
]

MAX_PAGE: Final = 1000
"""Most items of one listing page."""
MAX_READ: Final = 10_000
"""Most rows of one ledger or entry read."""
UNKNOWN_KEY: Final = "—"
"""The usage-report key of usage whose day, model or agent is not known."""
UNKNOWN_STATUS: Final = "unknown"
"""The status of a run known only from usage rows (no run row, no envelope)."""

LOOKUP_MOST: Final = 1000
"""On SQLite a sessions page filtered by agent, model or status looks up the sessions of the
runs that match the most selective of them when fewer runs than this do, else tests the most
recent sessions one by one. Measured on 10,000 sessions (``benchmarks/bench_inspection.py``):
always looking up cost 23 ms for a status 60 % of the runs have (testing: 0.4 ms); always
testing cost 39 ms for an agent no run has (looking up: 0.01 ms)."""

_GROUPINGS: Final = frozenset(("day", "model", "agent"))
_LEDGER_KINDS: Final[tuple[LedgerRowKind, ...]] = ("run", "event", "tool_call", "usage")

_SESSION_COLUMNS: Final = (
    "s.session_id, s.parent_session_id, s.created_at, s.updated_at, s.entries, s.first_input"
)
_RUN_COLUMNS: Final = (
    "run_id, session_id, agent_id, status, model, provider, started_at, finished_at, "
    "stop_reason, error, turns, input_tokens, output_tokens, cost, has_ledger"
)


# --------------------------------------------------------------------------- cursors


def encode_cursor(tag: str, *values: str | int) -> str:
    """The opaque cursor of listing ``tag`` positioned at ``values``."""
    raw = json.dumps([tag, *values], separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii").rstrip("=")


def decode_cursor(cursor: object, tag: str, kinds: tuple[type, ...]) -> list[Any]:
    """The values of a cursor of listing ``tag``, one of each type of ``kinds``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — not a cursor of this listing.
    """
    try:
        if not isinstance(cursor, str) or not cursor.isascii():
            raise ValueError("not a string")
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw.decode("utf-8"))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        value = None
    if (
        not isinstance(value, list)
        or len(value) != len(kinds) + 1
        or value[0] != tag
        or not all(type(v) is k for v, k in zip(value[1:], kinds, strict=True))
    ):
        raise PrismConfigError(f"malformed cursor for this listing: {str(cursor)[:80]!r}")
    return value[1:]


@dataclass(frozen=True, slots=True)
class LedgerCursor:
    """Where a ledger read stopped: the last sequence number read from each ledger table."""

    run: int = 0
    event: int = 0
    tool_call: int = 0
    usage: int = 0

    def encode(self) -> str:
        """The opaque form of :attr:`~prism.inspection.LedgerSlice.cursor`."""
        return encode_cursor("ledger", self.run, self.event, self.tool_call, self.usage)

    @classmethod
    def decode(cls, cursor: str | None) -> LedgerCursor:
        """The cursor of ``cursor`` (``None``: the start).

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — not a ledger cursor.
        """
        if cursor is None:
            return cls()
        run, event, tool_call, usage = decode_cursor(cursor, "ledger", (int, int, int, int))
        if min(run, event, tool_call, usage) < 0:
            raise PrismConfigError(f"malformed cursor for this listing: {cursor[:80]!r}")
        return cls(run, event, tool_call, usage)


def check_limit(limit: object, most: int) -> int:
    """``limit`` when it is an ``int`` in ``1..most``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — otherwise.
    """
    if type(limit) is not int or not 1 <= limit <= most:
        raise PrismConfigError(f"limit must be an int in 1..{most}, got {limit!r}")
    return limit


def iso_bound(value: object, name: str) -> str | None:
    """An ISO-8601 time as the stores write times (``YYYY-MM-DDTHH:MM:SS.mmmZ``, UTC); a time
    without an offset is taken as UTC, a date as its midnight.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — not an ISO-8601 time.
    """
    if value is None:
        return None
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise PrismConfigError(f"{name} must be an ISO-8601 time, got {value!r}") from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


# --------------------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True)
class Statement:
    """One read and its parameters."""

    sql: str
    params: tuple[Any, ...]


class InspectionSql:
    """A dialect's inspection reads (built once per dialect and schema).

    Args:
        prefix: What goes before a table name (``""``, or the quoted schema and a dot).
        placeholder: The driver's parameter marker (``?`` or ``%s``).
        substring: The dialect's ``position of needle in haystack`` function taking
            ``(haystack, needle)`` (``instr`` or ``strpos``).
        text_cast: What follows a text parameter given to a function (``""`` or ``::text``).
        statistics: The database plans with table statistics (PostgreSQL). Then a page's runs
            are joined with ``LATERAL`` subqueries (else its planner may hash every run to join
            the fifty of a page) and "the latest run has this status" is a semi-join with an
            anti-join, which it estimates well. Without (SQLite), a session's runs are searched
            with a named index (``INDEXED BY``: else an agent's or a model's runs are searched
            for each session) and a filtered page's plan is chosen by how many runs the filter
            matches (:meth:`candidates`, :data:`LOOKUP_MOST`).
    """

    __slots__ = (
        "_p",
        "_q",
        "_session_runs",
        "_statistics",
        "_substring",
        "_text",
        "placeholder",
        "plan_by_count",
    )

    def __init__(
        self,
        prefix: str,
        placeholder: str,
        substring: str,
        *,
        text_cast: str = "",
        statistics: bool = False,
    ) -> None:
        self._statistics = statistics
        self._p = prefix
        self._q = self.placeholder = placeholder
        self._substring = substring
        self._text = placeholder + text_cast
        hint = "" if statistics else " INDEXED BY prism_run_summaries_session"
        self._session_runs = f"{prefix}prism_run_summaries r{hint}"
        self.plan_by_count = not statistics

    def _latest_run(self, session: str) -> str:
        """The id of the latest run (by start) of the session in column ``session``."""
        return (
            f"(SELECT r.run_id FROM {self._session_runs} "
            f"WHERE r.session_id = {session} ORDER BY r.started_at DESC, r.run_id DESC LIMIT 1)"
        )

    def sessions(
        self,
        where: Sequence[str],
        params: Sequence[Any],
        limit: int,
    ) -> Statement:
        """Session summaries matching ``where`` (clauses on ``prism_sessions s``), most recently
        active first, at most ``limit``, each with its latest run and its run totals."""
        p, q = self._p, self._q
        condition = " AND ".join(where) if where else "1 = 1"
        totals = (
            "count(r.run_id) AS runs, sum(r.turns) AS turns, sum(r.input_tokens) AS "
            "input_tokens, sum(r.output_tokens) AS output_tokens, sum(r.cost) AS cost"
        )
        if self._statistics:  # a nested loop over the page's rows, whatever the estimates
            runs = f"""
  LEFT JOIN LATERAL (
       SELECT r.run_id, r.agent_id, r.model, r.status FROM {p}prism_run_summaries r
        WHERE r.session_id = s.session_id
        ORDER BY r.started_at DESC, r.run_id DESC LIMIT 1
  ) l ON true
  CROSS JOIN LATERAL (
       SELECT {totals} FROM {p}prism_run_summaries r WHERE r.session_id = s.session_id
  ) a"""
        else:
            runs = f"""
  LEFT JOIN {p}prism_run_summaries l ON l.run_id = {self._latest_run("s.session_id")}
  LEFT JOIN (
       SELECT g.session_id, {totals}
         FROM page g LEFT JOIN {self._session_runs} ON r.session_id = g.session_id
        GROUP BY g.session_id
  ) a ON a.session_id = s.session_id"""
        sql = f"""
WITH page AS (
    SELECT {_SESSION_COLUMNS}
      FROM {p}prism_sessions s
     WHERE {condition}
     ORDER BY s.updated_at DESC, s.session_id DESC
     LIMIT {q}
)
SELECT s.session_id, s.parent_session_id, s.created_at, s.updated_at, s.entries, s.first_input,
       l.run_id, l.agent_id, l.model, l.status,
       a.runs, a.turns, a.input_tokens, a.output_tokens, a.cost
  FROM page s{runs}
 ORDER BY s.updated_at DESC, s.session_id DESC
"""
        return Statement(sql, (*params, limit))

    def session_filter(
        self,
        flt: SessionFilter,
        since: str | None,
        until: str | None,
        *,
        lookup: str | None = None,
    ) -> tuple[list[str], list[Any]]:
        """The clauses and parameters of a :class:`~prism.inspection.SessionFilter`.

        ``lookup``: the run column (``agent_id``, ``model`` or ``status``) whose matching runs'
        sessions are looked up through its index (a page then costs every such session); the
        filter's other run columns are tested session by session, most recent first, until
        the page is full (a page then costs the sessions passed over: few when many match)."""
        q = self._q
        where: list[str] = []
        params: list[Any] = []
        if since is not None:
            where.append(f"s.updated_at >= {q}")
            params.append(since)
        if until is not None:
            where.append(f"s.updated_at < {q}")
            params.append(until)
        if flt.parent_session_id is not None:
            where.append(f"s.parent_session_id = {q}")
            params.append(flt.parent_session_id)
        if flt.top_level:
            where.append("s.parent_session_id IS NULL")
        if flt.text is not None:
            where.append(f"{self._substring}(lower(s.first_input), lower({self._text})) > 0")
            params.append(flt.text)
        for column, value in _run_columns(flt):
            if column == lookup:
                where.append(
                    f"s.session_id IN (SELECT r.session_id FROM {self._p}prism_run_summaries r "
                    f"WHERE r.{column} = {q})"
                )
            elif column != "status":  # the latest run's status is checked below
                where.append(
                    f"EXISTS (SELECT 1 FROM {self._session_runs} "
                    f"WHERE r.session_id = s.session_id AND r.{column} = {q})"
                )
            else:
                continue
            params.append(value)
        if flt.status is not None and self._statistics:
            where.append(
                f"EXISTS (SELECT 1 FROM {self._p}prism_run_summaries r "
                f"WHERE r.session_id = s.session_id AND r.status = {q} AND NOT EXISTS ("
                f"SELECT 1 FROM {self._p}prism_run_summaries n WHERE n.session_id = r.session_id "
                f"AND (n.started_at, n.run_id) > (r.started_at, r.run_id)))"
            )
            params.append(flt.status)
        elif flt.status is not None:
            where.append(
                f"(SELECT r.status FROM {self._session_runs} "
                f"WHERE r.session_id = s.session_id "
                f"ORDER BY r.started_at DESC, r.run_id DESC LIMIT 1) = {q}"
            )
            params.append(flt.status)
        return where, params

    def candidates(self, flt: SessionFilter) -> Statement:
        """How many runs (up to :data:`LOOKUP_MOST`) match each of the filter's agent, model
        and status, as one row."""
        p, q = self._p, self._q
        columns = _run_columns(flt)
        counts = ", ".join(
            f"(SELECT count(*) FROM (SELECT 1 FROM {p}prism_run_summaries "
            f"WHERE {column} = {q} LIMIT {LOOKUP_MOST}) AS c)"
            for column, _ in columns
        )
        return Statement(f"SELECT {counts}", tuple(value for _, value in columns))

    def after_session(self) -> str:
        """The keyset clause of a sessions page: ``(updated_at, session_id)`` before the
        cursor's."""
        q = self._q
        return f"(s.updated_at, s.session_id) < ({q}, {q})"

    def runs(self, where: Sequence[str], params: Sequence[Any], limit: int) -> Statement:
        """Run summaries matching ``where``, newest start first, at most ``limit``."""
        condition = " AND ".join(where) if where else "1 = 1"
        sql = (
            f"SELECT {_RUN_COLUMNS} FROM {self._p}prism_run_summaries WHERE {condition} "
            f"ORDER BY started_at DESC, run_id DESC LIMIT {self._q}"
        )
        return Statement(sql, (*params, limit))

    def ledger(
        self, run_id: str, after: LedgerCursor, limit: int, include_deltas: bool
    ) -> Statement:
        """Up to ``limit`` rows of each ledger table of ``run_id`` after ``after``, as
        ``(kind, seq, body)``; one statement, so one snapshot of the four tables."""
        p, q = self._p, self._q
        session = f"(SELECT session_id FROM {p}prism_run_summaries WHERE run_id = {q})"
        deltas = "" if include_deltas else " AND type <> 'message_delta'"
        members = [
            f"SELECT * FROM (SELECT 'run' AS kind, seq, body FROM {p}prism_runs "
            f"WHERE id = {q} AND seq > {q} ORDER BY seq LIMIT {q}) AS t_run"
        ]
        params: list[Any] = [run_id, after.run, limit]
        for kind, table, extra, seq in (
            ("event", "prism_run_events", deltas, after.event),
            ("tool_call", "prism_tool_calls", "", after.tool_call),
            ("usage", "prism_usage", "", after.usage),
        ):
            members.append(
                f"SELECT * FROM (SELECT '{kind}' AS kind, seq, body FROM {p}{table} "
                f"WHERE session_id = {session} AND run_id = {q} AND seq > {q}{extra} "
                f"ORDER BY seq LIMIT {q}) AS t_{kind}"
            )
            params.extend((run_id, run_id, seq, limit))
        return Statement(" UNION ALL ".join(members), tuple(params))

    def entries(self, session_id: str, after_seq: int, limit: int) -> Statement:
        """Entries of a session after ``after_seq``, in append order, as ``(seq, body)``."""
        q = self._q
        sql = (
            f"SELECT seq, body FROM {self._p}prism_session_entries "
            f"WHERE session_id = {q} AND seq > {q} ORDER BY seq LIMIT {q}"
        )
        return Statement(sql, (session_id, after_seq, limit))

    def usage(self, group_by: str, since: str | None, until: str | None) -> Statement:
        """Provider-turn usage in ``[since, until)`` grouped, as ``(key, turns, input_tokens,
        output_tokens, cost)``."""
        p, q = self._p, self._q
        key = {
            "day": 'substr(u."timestamp", 1, 10)',
            "model": "u.model",
            "agent": "r.agent_id",
        }[group_by]
        join = (
            f" LEFT JOIN {p}prism_run_summaries r ON r.run_id = u.run_id"
            if group_by == "agent"
            else ""
        )
        where = ["u.scope = 'provider_turn'"]
        params: list[Any] = []
        if since is not None:
            where.append(f'u."timestamp" >= {q}')
            params.append(since)
        if until is not None:
            where.append(f'u."timestamp" < {q}')
            params.append(until)
        sql = (
            f"SELECT {key} AS k, count(*), sum(u.input_tokens), sum(u.output_tokens), "
            f"sum(u.cost) FROM {p}prism_usage u{join} WHERE {' AND '.join(where)} GROUP BY {key}"
        )
        return Statement(sql, tuple(params))


# --------------------------------------------------------------------------- the reads


class InspectionMethods(DatabaseAccess):
    """The :class:`~prism.inspection.InspectionReader` methods."""

    __slots__ = ()

    _inspection_sql: InspectionSql
    """The dialect's inspection reads."""

    async def list_session_summaries(
        self,
        *,
        filter: SessionFilter | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[SessionSummary]:
        """Sessions, most recently active first (ties by session id), ``limit`` per page
        (1..1000); one indexed query per page.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — a malformed cursor, ``limit`` or filter.
        """
        check_limit(limit, MAX_PAGE)
        flt = SessionFilter() if filter is None else filter
        if not isinstance(flt, SessionFilter):
            raise PrismConfigError(f"filter must be a SessionFilter, got {type(flt).__name__}")
        sql = self._inspection_sql
        since, until = iso_bound(flt.since, "since"), iso_bound(flt.until, "until")
        lookup = None
        columns = _run_columns(flt)
        if sql.plan_by_count and columns:
            count = sql.candidates(flt)
            counts = await self._query(count.sql, count.params, lambda rows: tuple(rows[0]))
            fewest, column = min(zip(counts, (c for c, _ in columns), strict=True))
            lookup = column if fewest < LOOKUP_MOST else None
        where, params = sql.session_filter(flt, since, until, lookup=lookup)
        if cursor is not None:
            updated_at, session_id = decode_cursor(cursor, "sessions", (str, str))
            where.append(sql.after_session())
            params.extend((updated_at, session_id))
        statement = sql.sessions(where, params, limit + 1)

        def finish(rows: builtins.list[Any]) -> Page[SessionSummary]:
            items = tuple(session_summary(row) for row in rows[:limit])
            more = len(rows) > limit
            last = items[-1] if items else None
            token = encode_cursor("sessions", last.updated_at, last.session_id) if last else None
            return Page(items, token if more else None)

        return await self._query(statement.sql, statement.params, finish)

    async def get_session_summary(self, session_id: str) -> SessionSummary | None:
        """One session's summary, or ``None`` when the store has no entry of it."""
        sql = self._inspection_sql
        statement = sql.sessions([f"s.session_id = {sql.placeholder}"], [session_id], 1)

        def finish(rows: builtins.list[Any]) -> SessionSummary | None:
            return session_summary(rows[0]) if rows else None

        return await self._query(statement.sql, statement.params, finish)

    async def list_run_summaries(
        self,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        status: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[RunSummary]:
        """Runs (ledger runs and durable runs), newest start first (ties by run id),
        ``limit`` per page (1..1000).

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — a malformed cursor or ``limit``.
        """
        check_limit(limit, MAX_PAGE)
        q = self._inspection_sql.placeholder
        where: list[str] = []
        params: list[Any] = []
        for column, value in (("session_id", session_id), ("agent_id", agent_id)):
            if value is not None:
                where.append(f"{column} = {q}")
                params.append(value)
        if status == UNKNOWN_STATUS:
            where.append("status IS NULL")
        elif status is not None:
            where.append(f"status = {q}")
            params.append(status)
        if cursor is not None:
            started_at, run_id = decode_cursor(cursor, "runs", (str, str))
            where.append(f"(started_at, run_id) < ({q}, {q})")
            params.extend((started_at, run_id))
        statement = self._inspection_sql.runs(where, params, limit + 1)
        decode = self._decode

        def finish(rows: builtins.list[Any]) -> Page[RunSummary]:
            items = tuple(run_summary(row, decode) for row in rows[:limit])
            more = len(rows) > limit
            last = items[-1] if items else None
            token = encode_cursor("runs", last.started_at or "", last.run_id) if last else None
            return Page(items, token if more else None)

        return await self._query(statement.sql, statement.params, finish)

    async def get_run_summary(self, run_id: str) -> RunSummary | None:
        """One run's summary, or ``None`` when neither the ledger nor the run index knows it."""
        sql = self._inspection_sql
        statement = sql.runs([f"run_id = {sql.placeholder}"], [run_id], 1)
        decode = self._decode

        def finish(rows: builtins.list[Any]) -> RunSummary | None:
            return run_summary(rows[0], decode) if rows else None

        return await self._query(statement.sql, statement.params, finish)

    async def read_ledger(
        self,
        run_id: str,
        *,
        after: str | None = None,
        limit: int = 1000,
        include_deltas: bool = False,
    ) -> LedgerSlice:
        """One run's ledger rows after ``after``, at most ``limit`` (1..10000), merged in
        append order (:func:`merge_ledger`); one query.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — a malformed cursor or ``limit``.
            StoreError: ``ERR_PRISM_STORE_UNDECODABLE`` — a row does not decode.
        """
        check_limit(limit, MAX_READ)
        start = LedgerCursor.decode(after)
        statement = self._inspection_sql.ledger(run_id, start, limit + 1, bool(include_deltas))
        load = self._decode

        def finish(rows: builtins.list[Any]) -> LedgerSlice:
            by_kind: dict[str, builtins.list[tuple[int, Any]]] = {k: [] for k in _LEDGER_KINDS}
            for kind, seq, body in rows:
                by_kind[kind].append((int(seq), body))
            return merge_ledger(by_kind, start, limit, load, after)

        return await self._query(statement.sql, statement.params, finish)

    async def read_entries(
        self, session_id: str, *, after_seq: int = 0, limit: int = 1000
    ) -> Sequence[StoredEntry]:
        """One session's entries appended after ``after_seq``, in append order, at most
        ``limit`` (1..10000).

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — ``limit`` or ``after_seq`` out of range.
            StoreError: ``ERR_PRISM_STORE_UNDECODABLE`` — an entry does not decode.
        """
        check_limit(limit, MAX_READ)
        if type(after_seq) is not int or after_seq < 0:
            raise PrismConfigError(f"after_seq must be an int >= 0, got {after_seq!r}")
        statement = self._inspection_sql.entries(session_id, after_seq, limit)
        load = self._decode

        def entry(body: Any) -> SessionEntry:
            return SessionEntry.from_dict(load(body))

        def finish(rows: builtins.list[Any]) -> builtins.list[StoredEntry]:
            return [
                StoredEntry(int(seq), decoded(entry, body, "session entry")) for seq, body in rows
            ]

        return await self._query(statement.sql, statement.params, finish)

    async def usage_report(
        self,
        *,
        group_by: UsageGrouping,
        since: str | None = None,
        until: str | None = None,
    ) -> Sequence[UsageBucket]:
        """Provider-turn usage in ``[since, until)``, grouped: days ascending, models and
        agents by total tokens descending (ties by key). O(usage rows in the range).

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown grouping or a bad time.
        """
        if group_by not in _GROUPINGS:
            raise PrismConfigError(
                f"group_by must be one of {sorted(_GROUPINGS)}, got {group_by!r}"
            )
        statement = self._inspection_sql.usage(
            group_by, iso_bound(since, "since"), iso_bound(until, "until")
        )

        def finish(rows: builtins.list[Any]) -> builtins.list[UsageBucket]:
            return usage_buckets(rows, group_by)

        return await self._query(statement.sql, statement.params, finish)


def _run_columns(flt: SessionFilter) -> list[tuple[str, str]]:
    """The run columns a session filter matches: ``(column, value)`` of agent, model, status."""
    pairs = (("agent_id", flt.agent_id), ("model", flt.model), ("status", flt.status))
    return [(column, value) for column, value in pairs if value is not None]


# --------------------------------------------------------------------------- rows


def _cost(value: Any) -> float | None:
    return None if value is None else float(value)


def session_summary(row: Sequence[Any]) -> SessionSummary:
    """The summary of one row of :meth:`InspectionSql.sessions`."""
    (sid, parent, created, updated, entries, first_input, run_id, agent, model, status) = row[:10]
    runs, turns, tokens_in, tokens_out, cost = row[10:]
    return SessionSummary(
        session_id=sid,
        parent_session_id=parent,
        created_at=created,
        updated_at=updated,
        entries=int(entries),
        first_input=first_input,
        agent_id=agent,
        model=model,
        status=status,
        last_run_id=run_id,
        runs=int(runs or 0),
        turns=int(turns or 0),
        input_tokens=int(tokens_in or 0),
        output_tokens=int(tokens_out or 0),
        cost=_cost(cost),
    )


def run_summary(row: Sequence[Any], decode: Callable[[Any], Any]) -> RunSummary:
    """The summary of one ``prism_run_summaries`` row (its columns in ``_RUN_COLUMNS`` order).

    Raises:
        StoreError: ``ERR_PRISM_STORE_UNDECODABLE`` — the stored error does not decode.
    """
    (run_id, sid, agent, status, model, provider, started, finished, stop, error) = row[:10]
    turns, tokens_in, tokens_out, cost, has_ledger = row[10:]
    info = None
    if error is not None:
        info = decoded(lambda e: ErrorInfo.from_dict(decode(e)), error, f"run {run_id} error")
    return RunSummary(
        run_id=run_id,
        session_id=sid,
        agent_id=agent,
        status=status if status is not None else UNKNOWN_STATUS,
        model=model,
        provider=provider,
        started_at=started or None,
        finished_at=finished,
        stop_reason=stop,
        error=info,
        turns=int(turns),
        input_tokens=int(tokens_in),
        output_tokens=int(tokens_out),
        cost=_cost(cost),
        has_ledger=bool(has_ledger),
    )


def usage_buckets(rows: Sequence[Sequence[Any]], group_by: str) -> list[UsageBucket]:
    """Buckets of ``(key, turns, input_tokens, output_tokens, cost)`` rows, in report order."""
    buckets = [
        UsageBucket(
            key=key if key else UNKNOWN_KEY,
            turns=int(turns),
            input_tokens=int(tokens_in or 0),
            output_tokens=int(tokens_out or 0),
            cost=_cost(cost),
        )
        for key, turns, tokens_in, tokens_out, cost in rows
    ]
    merged: dict[str, UsageBucket] = {}
    for b in buckets:  # a NULL key and an empty one are both unknown
        seen = merged.get(b.key)
        merged[b.key] = b if seen is None else _add(seen, b)
    out = list(merged.values())
    if group_by == "day":
        out.sort(key=lambda b: b.key)
    else:
        out.sort(key=lambda b: (-(b.input_tokens + b.output_tokens), b.key))
    return out


def _add(a: UsageBucket, b: UsageBucket) -> UsageBucket:
    cost = None if a.cost is None and b.cost is None else (a.cost or 0.0) + (b.cost or 0.0)
    return UsageBucket(
        key=a.key,
        turns=a.turns + b.turns,
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cost=cost,
    )


# --------------------------------------------------------------------------- ledger merge

_DECODERS: Final[dict[str, Callable[[Any], Any]]] = {
    "run": RunRecord.from_dict,
    "event": AgentEventRecord.from_dict,
    "tool_call": ToolCallRecord.from_dict,
    "usage": UsageRecord.from_dict,
}


def _position(kind: str, record: Any) -> tuple[str, int]:
    """``(timestamp, rank)`` of a record in the merged order: a run's start row before the
    other rows of its millisecond, its finish row after them."""
    if kind == "run":
        if record.status == "running" or record.finished_at is None:
            return record.started_at, 0
        return record.finished_at, 9
    if kind == "tool_call":
        return record.finished_at or record.progress_at or record.started_at, 2
    return record.timestamp, 1 if kind == "event" else 3


def merge_ledger(
    by_kind: dict[str, list[tuple[int, Any]]],
    start: LedgerCursor,
    limit: int,
    load: Callable[[Any], Any],
    given: str | None,
) -> LedgerSlice:
    """Merge the rows read from each ledger table (each in ``seq`` order) into append order.

    Each table's rows keep their own order; of the tables' next rows the earliest by record
    time (then by kind: run start, event, tool call, usage, run finish; then ``seq``) comes
    first. The order depends only on the rows, so reading on from the returned cursor gives
    the rows a longer read would have given. O(rows · log 4).

    Args:
        by_kind: ``(seq, body)`` of at most ``limit + 1`` rows of each table after ``start``.
        start: Where the read started.
        limit: Most rows returned.
        load: Turns a stored body into its JSON value.
        given: The cursor the read was given (returned when no row is).

    Raises:
        StoreError: ``ERR_PRISM_STORE_UNDECODABLE`` — a row does not decode.
    """

    def stream(kind: str) -> Iterator[tuple[str, int, int, str, Any]]:
        decode = _DECODERS[kind]
        for seq, body in sorted(by_kind[kind], key=lambda r: r[0]):
            record = decoded(lambda b: decode(load(b)), body, f"ledger {kind} row {seq}")
            ts, rank = _position(kind, record)
            yield ts, rank, seq, kind, record

    merged = heapq.merge(*(stream(k) for k in _LEDGER_KINDS), key=lambda r: r[:3])
    rows: list[LedgerRow] = []
    last = {"run": start.run, "event": start.event, "tool_call": start.tool_call}
    last["usage"] = start.usage
    for _, _, seq, kind, record in merged:
        if len(rows) == limit:
            break
        rows.append(LedgerRow(kind, seq, record))  # type: ignore[arg-type]
        last[kind] = seq
    total = sum(len(v) for v in by_kind.values())
    if not rows:
        return LedgerSlice((), given if given is not None else start.encode(), False)
    cursor = LedgerCursor(last["run"], last["event"], last["tool_call"], last["usage"])
    return LedgerSlice(tuple(rows), cursor.encode(), total > len(rows))
