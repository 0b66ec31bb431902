"""The statements of an inspector's reads in a database store, and the cursors they continue
from.

[`InspectionSql`][prism.stores._inspection_sql.InspectionSql] builds each read of ``InspectionReader`` as one
statement (so each sees one snapshot) from the dialect's table prefix, parameter marker,
substring function and planner ([`InspectionMethods`][prism.stores._inspection.InspectionMethods] runs
them):

* a sessions page reads ``prism_sessions`` (one row per session, kept by a trigger on every
  entry append) keyset-paged on ``(updated_at, session_id)``, and joins the page's runs (its
  latest run and its totals) from ``prism_run_summaries``, so a page costs its sessions and
  their runs, whatever the store holds;
* a runs page reads ``prism_run_summaries`` (one row per run, kept by triggers on ledger run,
  usage and ``turn_started`` rows and on a durable envelope's status changes), keyset-paged on
  ``(started_at, run_id)``;
* a ledger read takes the four ledger tables of one run after a [`LedgerCursor`][prism.stores._inspection_sql.LedgerCursor] (one
  sequence number per table), each along its run index;
* an entry read takes a session's entries after an entry's sequence number; the usage report
  sums the provider-turn usage rows in a time range.

Cursors are URL-safe text (base64 of a small JSON array whose first item names the listing); a
cursor that does not decode, or that belongs to another listing, raises ``PrismConfigError``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from prism.errors import PrismConfigError
from prism.inspection import SessionFilter

__all__ = [
    "InspectionSql",
    "LedgerCursor",
    "Statement",
    "decode_cursor",
    "encode_cursor",
    "run_columns",
]

_SESSION_COLUMNS: Final = (
    "s.session_id, s.parent_session_id, s.created_at, s.updated_at, s.entries, s.first_input"
)
RUN_COLUMNS: Final = (
    "run_id, session_id, agent_id, status, model, provider, started_at, finished_at, "
    "stop_reason, error, turns, input_tokens, output_tokens, cost, has_ledger"
)
"""The columns a runs read selects, in order."""


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
        """The opaque form of [`cursor`][prism.inspection.LedgerSlice.cursor]."""
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
            matches ([`candidates()`][prism.stores._inspection_sql.InspectionSql.candidates], ``prism.stores._inspection.LOOKUP_MOST``).
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
        """The clauses and parameters of a [`SessionFilter`][prism.inspection.SessionFilter].

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
        for column, value in run_columns(flt):
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

    def candidates(self, flt: SessionFilter, most: int) -> Statement:
        """How many runs (up to ``most``) match each of the filter's agent, model and status,
        as one row."""
        p, q = self._p, self._q
        columns = run_columns(flt)
        counts = ", ".join(
            f"(SELECT count(*) FROM (SELECT 1 FROM {p}prism_run_summaries "
            f"WHERE {column} = {q} LIMIT {most}) AS c)"
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
            f"SELECT {RUN_COLUMNS} FROM {self._p}prism_run_summaries WHERE {condition} "
            f"ORDER BY started_at DESC, run_id DESC LIMIT {self._q}"
        )
        return Statement(sql, (*params, limit))

    def ledger(
        self,
        run_id: str,
        after: LedgerCursor,
        limit: int,
        include_deltas: bool,
        event_types: tuple[str, ...] | None = None,
    ) -> Statement:
        """Up to ``limit`` rows of each ledger table of ``run_id`` after ``after``, as
        ``(kind, seq, body)``; one statement, so one snapshot of the four tables. With
        ``event_types``, only event rows of those types."""
        p, q = self._p, self._q
        session = f"(SELECT session_id FROM {p}prism_run_summaries WHERE run_id = {q})"
        deltas = "" if include_deltas else " AND type <> 'message_delta'"
        if event_types is not None:
            marks = ", ".join([q] * len(event_types)) or "NULL"
            deltas += f" AND type IN ({marks})"
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
            params.extend((run_id, run_id, seq))
            if kind == "event" and event_types is not None:
                params.extend(event_types)
            params.append(limit)
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


def run_columns(flt: SessionFilter) -> list[tuple[str, str]]:
    """The run columns a session filter matches: ``(column, value)`` of agent, model, status."""
    pairs = (("agent_id", flt.agent_id), ("model", flt.model), ("status", flt.status))
    return [(column, value) for column, value in pairs if value is not None]
