"""What an inspector reads from a database store: ``InspectionReader``
over the summary tables of schema migration 3, the same in both stores.

[`InspectionMethods`][prism.stores._inspection.InspectionMethods] implements the protocol over
[`DatabaseAccess`][prism.stores._common.DatabaseAccess]: it checks the arguments (typed errors for a bad
cursor, limit, time or grouping), runs the dialect's statement
([`InspectionSql`][prism.stores._inspection_sql.InspectionSql]) and turns its rows into the protocol's
values. A run's ledger rows, read from four tables, are merged in append order here
([`merge_ledger()`][prism.stores._inspection.merge_ledger]).
"""

from __future__ import annotations

import builtins
import heapq
from collections.abc import Callable, Collection, Iterator, Sequence
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
from prism.stores._inspection_sql import (
    InspectionSql,
    LedgerCursor,
    decode_cursor,
    encode_cursor,
    run_columns,
)
from prism.types import ErrorInfo

__all__ = ["LOOKUP_MOST", "InspectionMethods", "check_limit", "iso_bound", "merge_ledger"]

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


# --------------------------------------------------------------------------- the reads


class InspectionMethods(DatabaseAccess):
    """The ``InspectionReader`` methods."""

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
        columns = run_columns(flt)
        if sql.plan_by_count and columns:
            count = sql.candidates(flt, LOOKUP_MOST)
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
        event_types: Collection[str] | None = None,
    ) -> LedgerSlice:
        """One run's ledger rows after ``after``, at most ``limit`` (1..10000), merged in
        append order ([`merge_ledger()`][prism.stores._inspection.merge_ledger]); one query.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — a malformed cursor or ``limit``, or
                ``event_types`` not a collection of strings.
            StoreError: ``ERR_PRISM_STORE_UNDECODABLE`` — a row does not decode.
        """
        check_limit(limit, MAX_READ)
        start = LedgerCursor.decode(after)
        types: tuple[str, ...] | None = None
        if event_types is not None:
            if isinstance(event_types, str) or not all(isinstance(t, str) for t in event_types):
                raise PrismConfigError("event_types must be a collection of event type strings")
            types = tuple(sorted(set(event_types)))
        statement = self._inspection_sql.ledger(
            run_id, start, limit + 1, bool(include_deltas), types
        )
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


# --------------------------------------------------------------------------- rows


def _cost(value: Any) -> float | None:
    return None if value is None else float(value)


def session_summary(row: Sequence[Any]) -> SessionSummary:
    """The summary of one row of [`InspectionSql.sessions()`][prism.stores._inspection.InspectionSql.sessions]."""
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
    """The summary of one ``prism_run_summaries`` row (its columns in ``RUN_COLUMNS`` order).

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
