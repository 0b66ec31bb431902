"""The run ledger in a database store: its append-only tables and their listings, the same in
both stores.

[`LedgerMethods`][prism.stores._ledger.LedgerMethods] implements ``RunLedger`` (``append_run``,
``append_event``, ``append_tool_call``, ``append_usage``), ``RequestLedger``
(``append_request``: request rows, their heads kept once per hash, since schema migration 4)
and the ledger reads for tooling (``list_runs``, ``list_events``, ``list_tool_calls``,
``list_usage``, ``list_requests``, ``load_request_heads``) over
[`DatabaseAccess`][prism.stores._common.DatabaseAccess]. Every append is one insert; a row's ``body`` is
the record's ``to_dict()``. The statements differ between the dialects only in the table prefix,
the parameter marker and the cast of ``body``, so [`LedgerSql`][prism.stores._ledger.LedgerSql] builds both. The summaries
an inspector reads ([`prism.stores._inspection`][prism.stores._inspection]) are kept by the schema's triggers, in the
transaction of each insert.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from prism.ledger import AgentEventRecord, RequestRecord, RunRecord, ToolCallRecord, UsageRecord
from prism.stores._common import DatabaseAccess, decoded

__all__ = ["LedgerMethods", "LedgerSql"]

_T = TypeVar("_T")

_TABLES = {
    "runs": ("prism_runs", ("id", "session_id", "status")),
    "events": ("prism_run_events", ("id", "session_id", "run_id", "type")),
    "tool_calls": ("prism_tool_calls", ("id", "session_id", "run_id", "tool_call_id", "status")),
    "usage": (
        "prism_usage",
        (
            "id",
            "session_id",
            "run_id",
            "scope",
            '"timestamp"',
            "model",
            "input_tokens",
            "output_tokens",
            "cost",
        ),
    ),
    "requests": (
        "prism_requests",
        ("id", "session_id", "run_id", "request_hash", "head_hash"),
    ),
}
"""Each ledger table and its columns before ``body`` (a usage row's timestamp, model, tokens
and cost are columns since schema migration 3, for the usage report)."""


class LedgerSql:
    """A dialect's ledger statements (built once per dialect and schema).

    Args:
        prefix: What goes before a table name (``""``, or the quoted schema and a dot).
        placeholder: The driver's parameter marker (``?`` or ``%s``).
        body_cast: What follows the ``body`` parameter (``""`` or ``::jsonb``).
    """

    __slots__ = (
        "insert_event",
        "insert_head",
        "insert_request",
        "insert_run",
        "insert_tool_call",
        "insert_usage",
        "placeholder",
        "prefix",
    )

    def __init__(self, prefix: str, placeholder: str, body_cast: str) -> None:
        self.prefix = prefix
        self.placeholder = placeholder

        def insert(name: str) -> str:
            table, columns = _TABLES[name]
            marks = ", ".join([placeholder] * len(columns))
            return (
                f"INSERT INTO {prefix}{table} ({', '.join(columns)}, body) "
                f"VALUES ({marks}, {placeholder}{body_cast})"
            )

        self.insert_run = insert("runs")
        self.insert_event = insert("events")
        self.insert_tool_call = insert("tool_calls")
        self.insert_usage = insert("usage")
        self.insert_request = insert("requests")
        self.insert_head = (
            f"INSERT INTO {prefix}prism_request_heads (head_hash, created_at, body) "
            f"VALUES ({placeholder}, {placeholder}, {placeholder}{body_cast}) "
            "ON CONFLICT (head_hash) DO NOTHING"
        )

    def heads(self, count: int) -> str:
        """The query of ``count`` request heads by hash."""
        marks = ", ".join([self.placeholder] * count)
        return (
            f"SELECT head_hash, body FROM {self.prefix}prism_request_heads "
            f"WHERE head_hash IN ({marks})"
        )

    def listing(
        self, table: str, run_column: str, session_id: str | None, run_id: str | None
    ) -> tuple[str, tuple[str, ...]]:
        """The query of a ledger listing, filtered by session and/or run, in append order.

        Args:
            table: The ledger table (unqualified).
            run_column: The column holding the run id (``id`` for runs, else ``run_id``).
            session_id: Filter by session, or ``None``.
            run_id: Filter by run, or ``None``.

        Raises:
            ValueError: neither ``session_id`` nor ``run_id`` given.
        """
        clauses: list[str] = []
        params: list[str] = []
        if session_id is not None:
            clauses.append(f"session_id = {self.placeholder}")
            params.append(session_id)
        if run_id is not None:
            clauses.append(f"{run_column} = {self.placeholder}")
            params.append(run_id)
        if not clauses:
            raise ValueError("give a session_id or a run_id")
        where = " AND ".join(clauses)
        return f"SELECT body FROM {self.prefix}{table} WHERE {where} ORDER BY seq", tuple(params)


class LedgerMethods(DatabaseAccess):
    """The ``RunLedger`` appends and the ledger listings."""

    __slots__ = ()

    _ledger_sql: LedgerSql
    """The dialect's ledger statements."""

    async def append_run(self, record: RunRecord, /) -> None:
        """Append a start or finish run row."""
        params = (record.id, record.session_id, record.status, self._encode(record.to_dict()))
        await self._execute(self._ledger_sql.insert_run, params)

    async def append_event(self, record: AgentEventRecord, /) -> None:
        """Append an event row; rows keep append (= emission) order."""
        params = (
            record.id,
            record.session_id,
            record.run_id,
            record.type,
            self._encode(record.to_dict()),
        )
        await self._execute(self._ledger_sql.insert_event, params)

    async def append_tool_call(self, record: ToolCallRecord, /) -> None:
        """Append a tool-call row."""
        params = (
            record.id,
            record.session_id,
            record.run_id,
            record.tool_call_id,
            record.status,
            self._encode(record.to_dict()),
        )
        await self._execute(self._ledger_sql.insert_tool_call, params)

    async def append_usage(self, record: UsageRecord, /) -> None:
        """Append a usage row."""
        usage = record.usage
        params = (
            record.id,
            record.session_id,
            record.run_id,
            record.scope,
            record.timestamp,
            record.model,
            usage.input_tokens,
            usage.output_tokens,
            usage.cost,
            self._encode(record.to_dict()),
        )
        await self._execute(self._ledger_sql.insert_usage, params)

    async def append_request(self, record: RequestRecord, /) -> None:
        """Append a request row; a row carrying its head stores the head first, once per
        ``head_hash`` (a head already stored is kept)."""
        sql = self._ledger_sql
        body = record.to_dict()
        head = body.pop("head", None)
        if head is not None:
            await self._execute(
                sql.insert_head, (record.head_hash, record.timestamp, self._encode(head))
            )
        params = (
            record.id,
            record.session_id,
            record.run_id,
            record.request_hash,
            record.head_hash,
            self._encode(body),
        )
        await self._execute(sql.insert_request, params)

    async def list_requests(
        self, session_id: str | None = None, *, run_id: str | None = None
    ) -> builtins.list[RequestRecord]:
        """Request rows in append order (without their heads: [`load_request_heads()`][prism.stores._ledger.LedgerMethods.load_request_heads]),
        filtered by session and/or run (at least one).

        Raises:
            ValueError: neither ``session_id`` nor ``run_id`` given.
        """
        return await self._list_ledger(
            "prism_requests", "run_id", session_id, run_id, RequestRecord.from_dict
        )

    async def load_request_heads(
        self, head_hashes: Iterable[str]
    ) -> builtins.dict[str, Mapping[str, Any]]:
        """The stored request heads of ``head_hashes``, by hash (unknown hashes are left out).

        Raises:
            StoreError: ``ERR_PRISM_STORE_UNDECODABLE`` — a stored head does not decode.
        """
        wanted = sorted(set(head_hashes))
        if not wanted:
            return {}
        load = self._decode

        def finish(rows: builtins.list[Any]) -> builtins.dict[str, Mapping[str, Any]]:
            return {key: decoded(load, body, f"request head {key}") for key, body in rows}

        return await self._query(self._ledger_sql.heads(len(wanted)), tuple(wanted), finish)

    async def list_runs(
        self, session_id: str | None = None, *, run_id: str | None = None
    ) -> builtins.list[RunRecord]:
        """Run rows in append order, filtered by session and/or run (at least one).

        Raises:
            ValueError: neither ``session_id`` nor ``run_id`` given.
        """
        return await self._list_ledger("prism_runs", "id", session_id, run_id, RunRecord.from_dict)

    async def list_events(
        self, session_id: str, *, run_id: str | None = None
    ) -> builtins.list[AgentEventRecord]:
        """Event rows of a session (or of one of its runs) in emission order."""
        return await self._list_ledger(
            "prism_run_events", "run_id", session_id, run_id, AgentEventRecord.from_dict
        )

    async def list_tool_calls(
        self, session_id: str, *, run_id: str | None = None
    ) -> builtins.list[ToolCallRecord]:
        """Tool-call rows of a session (or of one of its runs) in append order."""
        return await self._list_ledger(
            "prism_tool_calls", "run_id", session_id, run_id, ToolCallRecord.from_dict
        )

    async def list_usage(
        self, session_id: str, *, run_id: str | None = None
    ) -> builtins.list[UsageRecord]:
        """Usage rows of a session (or of one of its runs) in append order."""
        return await self._list_ledger(
            "prism_usage", "run_id", session_id, run_id, UsageRecord.from_dict
        )

    async def _list_ledger(
        self,
        table: str,
        run_column: str,
        session_id: str | None,
        run_id: str | None,
        decode: Callable[[Mapping[str, Any]], _T],
    ) -> builtins.list[_T]:
        sql, params = self._ledger_sql.listing(table, run_column, session_id, run_id)
        load = self._decode

        def finish(rows: builtins.list[Any]) -> builtins.list[_T]:
            return [decoded(lambda b: decode(load(b)), body, "ledger row") for (body,) in rows]

        return await self._query(sql, params, finish)
