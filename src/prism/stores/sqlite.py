"""SQLite store: sessions, checkpoints and the run ledger in one embedded database.

:class:`SqliteStore` implements :class:`~prism.store.SessionStore` (with ``read_branch``),
:class:`~prism.checkpoints.CheckpointStore` and :class:`~prism.ledger.RunLedger` with the
semantics of the memory stores, over the standard library's :mod:`sqlite3`:

* WAL journal, ``synchronous=NORMAL`` (a commit survives a process crash; after a power loss the
  last commits may be lost, never half of one), foreign keys on, a busy timeout;
* every blocking call runs on one dedicated worker thread per store that owns the connection and
  takes jobs from a queue — never on the event loop;
* every write is ONE transaction: an append's tip check, idempotency check and insert are a
  single ``INSERT ... SELECT ... WHERE``; a checkpoint save is a single conditional
  ``INSERT OR IGNORE``, or a conditional ``UPDATE ... RETURNING`` followed by an update of the
  run-index columns that writes only when they change (so their index pages are not rewritten
  on every save); a save with entries is those statements between ``BEGIN IMMEDIATE`` and
  ``COMMIT`` — or, when several
  writes are queued at once, inside one savepoint of a shared transaction (group commit: one
  commit for the batch, see ``_sqlite_worker``) — so a process killed at any point leaves each
  write whole or absent, no caller is told of a write before its commit, and concurrent writers
  in other processes serialise on the database lock;
* ``save_checkpoint_with_entries`` appends session entries and saves a checkpoint in ONE
  transaction; an ``every-turn`` durable run whose session store is this store writes each
  turn's entries with its envelope through it. Per tool turn of the realistic scenario (two
  parallel calls, ~1 KB results; ``benchmarks/bench_checkpoint_writes.py``): three entry rows
  and two checkpoint saves in two commits (before: six), 11 statements, ~12 KB of statement
  text, ~75 KB written to the WAL (before: ~127 KB), 0.05 fsyncs; the same at N=20 and N=200;
* durability: a returned write survives a crash or kill of the process; after a power loss or
  an operating-system crash the last writes may be lost (``synchronous=NORMAL`` syncs the WAL
  only when it is checkpointed into the database, every ~1,000 pages), never part of one, so an
  every-turn run resumes from an earlier envelope together with its entries;
* the schema comes from the package's checksummed migrations.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import math
import os
import sqlite3
import threading
from collections.abc import Callable, Collection, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, TypeVar

from prism._util import now_iso
from prism.checkpoints import (
    AGENT_RUN_NAMESPACE,
    AgentRunIndex,
    CheckpointRecord,
    CheckpointStore,
    EntryCheckpointStore,
    SessionAppend,
    check_checkpoint_write,
    check_run_listing,
    clone_json,
)
from prism.errors import ERR_PRISM_STORE_CORRUPT, StoreError
from prism.ledger import AgentEventRecord, RunLedger, RunRecord, ToolCallRecord, UsageRecord
from prism.store import BranchReadingSessionStore, SessionEntry
from prism.stores import _sqlite_sql as sql
from prism.stores._common import (
    SessionInfo,
    append_error,
    check_append,
    check_appends,
    check_limit,
    checkpoint_conflict,
    checkpoint_record,
    decoded,
    dumps,
    event_row,
    ledger_where,
    owner_columns,
    run_index_columns,
    run_listing,
    run_row,
    session_infos,
    tool_call_row,
    usage_row,
    walk_rows,
)
from prism.stores._sqlite_worker import Worker
from prism.stores._sqlite_writes import (
    CheckpointRow,
    append_outcome,
    append_params,
    save_row,
    save_with_entries,
)
from prism.types import JsonValue, OwnershipScope

__all__ = ["SqliteStore"]

_T = TypeVar("_T")


# --------------------------------------------------------------------------- store


class SqliteStore:
    """Sessions, checkpoints and run records in one SQLite database.

    Implements :class:`~prism.store.SessionStore` (``append``, ``list``, ``read_branch``),
    :class:`~prism.checkpoints.CheckpointStore` and :class:`~prism.ledger.RunLedger`,
    plus read methods for tooling (``list_sessions``, ``list_runs``, ``list_events``,
    ``list_tool_calls``, ``list_usage``). Semantics are those of the memory stores.

    The database is opened, configured and migrated lazily on the first call (or by
    :meth:`open` / ``async with``), on the store's worker thread. Any number of processes may
    open the same file; their writes serialise on SQLite's lock (waiting up to
    ``busy_timeout_s``).

    Example::

        async with SqliteStore("prism.db") as store:
            agent = create_agent(..., store=store)

    Args:
        path_or_uri: A file path, ``":memory:"`` (a private in-memory database), or a
            ``file:`` URI (passed with ``uri=True``).
        busy_timeout_s: Seconds a write waits for another connection's lock before failing
            with ``sqlite3.OperationalError: database is locked``.

    Raises:
        ValueError: ``busy_timeout_s`` is negative or not finite.
    """

    __slots__ = ("_busy_timeout_s", "_closed", "_lock", "_pid", "_target", "_uri", "_worker")

    def __init__(self, path_or_uri: str | os.PathLike[str], *, busy_timeout_s: float = 5.0) -> None:
        timeout = float(busy_timeout_s)
        if not math.isfinite(timeout) or timeout < 0:
            raise ValueError(f"busy_timeout_s must be a finite number >= 0, got {busy_timeout_s!r}")
        self._target = os.fspath(path_or_uri)
        self._uri = self._target.startswith("file:")
        self._busy_timeout_s = timeout
        self._worker: Worker | None = None
        self._pid = os.getpid()
        self._closed = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SqliteStore({self._target!r})"

    @property
    def path(self) -> str:
        """The path, ``":memory:"`` or URI the store was created with."""
        return self._target

    # ----------------------------------------------------------------- lifecycle

    async def open(self) -> SqliteStore:
        """Open, configure and migrate the database now (otherwise done on first use).

        Returns:
            The store itself.

        Raises:
            StoreSchemaError: ``ERR_PRISM_STORE_SCHEMA`` — the database records a migration
                that is unknown, newer than this package, or altered.
            StoreError: ``ERR_PRISM_STORE_CORRUPT`` — the file is not a SQLite database or is
                damaged (also from any later call that meets the damage).
            sqlite3.Error: the file cannot be opened.
        """
        await self._call(_noop)
        return self

    async def aclose(self) -> None:
        """Finish queued work, close the connection and stop the worker thread. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            worker = self._worker
        if worker is None:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        worker.jobs.put((_noop, fut, loop))  # runs after every queued job
        worker.jobs.put(None)
        try:
            await fut
        except Exception:
            pass  # an open failure was already reported to the callers

    async def __aenter__(self) -> SqliteStore:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._target,
            timeout=self._busy_timeout_s,
            isolation_level=None,  # autocommit: each statement is its own transaction
            uri=self._uri,
            cached_statements=64,
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            sql.migrate(conn, self._target)
        except BaseException:
            conn.close()
            raise
        return conn

    async def _call(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[_T] = loop.create_future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self!r} is closed")
            worker = self._worker
            if worker is None or self._pid != os.getpid():
                # First use, or first use in a forked child: the parent's thread and connection
                # did not survive the fork, so this process opens its own.
                self._pid = os.getpid()
                worker = self._worker = Worker(self._connect, name=f"prism-sqlite:{self._target}")
                worker.start()
            worker.jobs.put((fn, fut, loop))
        try:
            return await fut
        except sqlite3.DatabaseError as exc:
            corrupt = _corrupt(exc, self._target)
            if corrupt is None:
                raise
            raise corrupt from exc

    # ----------------------------------------------------------------- SessionStore

    async def append(
        self,
        entry: SessionEntry,
        *,
        expected_parent_id: str | None = None,
        idempotency_key: str | None = None,
        fork: bool = False,
    ) -> None:
        """Append ``entry`` atomically.

        The existence and tip checks on ``expected_parent_id``, the idempotency check and the
        insert are one ``INSERT ... SELECT ... WHERE`` statement, so of two appends racing for
        one tip (in any process) exactly one wins.

        Raises:
            TypeError: ``entry`` is not a :class:`~prism.store.SessionEntry`.
            ValueError: ``fork=True`` without ``expected_parent_id``; the entry id already
                exists in the session.
            SessionAppendConflictError: ``ERR_PRISM_SESSION_APPEND_CONFLICT`` — the expected
                parent is missing from the session, is not a branch tip (without ``fork``), or
                the idempotent append was already made.
        """
        check_append(entry, expected_parent_id, fork)
        params = append_params(entry, expected_parent_id, idempotency_key, fork)
        outcome = await self._call(lambda conn: append_outcome(conn, params))
        if outcome != "ok":
            raise append_error(outcome, entry, expected_parent_id, idempotency_key)

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        """Every entry of ``session_id`` in append order (``[]`` when unknown). O(entries)."""

        def job(conn: sqlite3.Connection) -> builtins.list[SessionEntry]:
            rows = conn.execute(sql.LIST, (session_id,)).fetchall()
            return [_entry(body) for (body,) in rows]

        return await self._call(job)

    async def read_branch(self, session_id: str, leaf_id: str) -> builtins.list[SessionEntry]:
        """The entries from the root to ``leaf_id``, root first: one recursive query, O(branch).

        Raises:
            ValueError: ``Unknown session leaf: <id>`` or ``Missing session parent: <id>``.
        """

        def job(conn: sqlite3.Connection) -> builtins.list[SessionEntry]:
            rows = conn.execute(sql.READ_BRANCH, (session_id, leaf_id)).fetchall()
            return walk_rows(rows, leaf_id, _entry)

        return await self._call(job)

    async def list_sessions(self, *, limit: int = 100) -> builtins.list[SessionInfo]:
        """The stored sessions, most recently appended first (for tooling such as a CLI).

        Args:
            limit: Most sessions returned (>= 1). Cost O(all entries).
        """
        check_limit(limit)

        def job(conn: sqlite3.Connection) -> builtins.list[SessionInfo]:
            return session_infos(conn.execute(sql.LIST_SESSIONS, (limit,)))

        return await self._call(job)

    # ----------------------------------------------------------------- CheckpointStore

    async def save_checkpoint(
        self,
        *,
        namespace: str,
        key: str,
        value: JsonValue,
        version: int,
        expected_version: int,
        fencing_token: int | None = None,
        ownership: OwnershipScope | None = None,
    ) -> CheckpointRecord:
        """Compare-and-set ``(namespace, key)`` in one transaction.

        ``expected_version == 0`` is an ``INSERT OR IGNORE`` (fails when the key exists);
        otherwise an ``UPDATE ... WHERE version = expected_version AND`` the fencing condition
        ``RETURNING created_at`` (a successful save reads nothing else), then the run-index
        columns where they change.
        ``ownership`` is recorded in the row's ``tenant_id``/``account_id``/``user_id``.

        Returns:
            The new record (its ``value`` is a copy of ``value``).

        Raises:
            CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — stale
                ``expected_version``, ``version`` not greater, or a smaller/missing token.
            TypeError, ValueError: malformed arguments, or ``value`` is not JSON-compatible.
        """
        check_checkpoint_write(
            namespace=namespace,
            key=key,
            version=version,
            expected_version=expected_version,
            fencing_token=fencing_token,
        )
        row = _checkpoint_row(
            namespace, key, value, version, expected_version, fencing_token, ownership
        )
        created_at, current = await self._call(lambda conn: save_row(conn, row))
        if created_at is None:
            raise checkpoint_conflict(namespace, key, expected_version, fencing_token, current)
        return CheckpointRecord(
            namespace=namespace,
            key=key,
            version=version,
            value=clone_json(value),
            created_at=created_at,
            updated_at=row[5],
            fencing_token=fencing_token,
        )

    async def save_checkpoint_with_entries(
        self,
        *,
        entries: Sequence[SessionAppend],
        namespace: str,
        key: str,
        value: JsonValue,
        version: int,
        expected_version: int,
        fencing_token: int | None = None,
        ownership: OwnershipScope | None = None,
    ) -> CheckpointRecord:
        """Append ``entries`` in order, then compare-and-set the checkpoint: ONE transaction
        (``BEGIN IMMEDIATE`` ... ``COMMIT``, or one savepoint of a group-commit batch), one
        commit for the whole call (see
        :class:`~prism.checkpoints.EntryCheckpointStore`). Each append and the save are
        the statements ``append`` and ``save_checkpoint`` run, so the checks are theirs.

        Returns:
            The new record; its ``value`` is ``value`` itself (not a copy).

        Raises:
            SessionAppendConflictError: ``ERR_PRISM_SESSION_APPEND_CONFLICT`` — an append was
                refused; nothing is stored.
            ValueError: an entry id already exists in its session; nothing is stored.
            CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — the save was refused;
                no entry is stored.
            TypeError, ValueError: malformed arguments, or a value that is not JSON-compatible.
        """
        check_checkpoint_write(
            namespace=namespace,
            key=key,
            version=version,
            expected_version=expected_version,
            fencing_token=fencing_token,
        )
        appends, params = check_appends(entries, append_params)
        row = _checkpoint_row(
            namespace, key, value, version, expected_version, fencing_token, ownership
        )
        created_at = await self._call(lambda conn: save_with_entries(conn, appends, params, row))
        return CheckpointRecord(
            namespace=namespace,
            key=key,
            version=version,
            value=value,
            created_at=created_at,
            updated_at=row[5],
            fencing_token=fencing_token,
        )

    async def load_checkpoint(
        self, *, namespace: str, key: str, ownership: OwnershipScope | None = None
    ) -> CheckpointRecord | None:
        """The stored record of ``(namespace, key)``, or ``None``; ``ownership`` is not used."""

        def job(conn: sqlite3.Connection) -> CheckpointRecord | None:
            row = conn.execute(sql.CP_LOAD, (namespace, key)).fetchone()
            if row is None:
                return None
            return checkpoint_record(namespace, key, row, json.loads)

        return await self._call(job)

    async def list_run_checkpoints(
        self,
        *,
        session_id: str | None = None,
        statuses: Collection[str] | None = None,
        resumable: bool = False,
        limit: int = 100,
    ) -> builtins.list[CheckpointRecord]:
        """The stored run-state records, newest first (see
        :class:`~prism.checkpoints.AgentRunIndex`): one indexed query over the run
        index columns (schema migration 2) that every save fills.

        Raises:
            ValueError: ``limit`` smaller than 1.
            StoreError: ``ERR_PRISM_STORE_UNDECODABLE`` — a listed value does not decode.
        """
        wanted = check_run_listing(limit, statuses)
        if wanted == ():
            return []
        query, params = run_listing(
            "prism_checkpoints",
            "?",
            session_id=session_id,
            statuses=wanted,
            resumable=resumable,
            limit=limit,
            resumable_test="run_resumable = 1",
            index_hints=True,
        )

        def job(conn: sqlite3.Connection) -> builtins.list[CheckpointRecord]:
            return [
                checkpoint_record(AGENT_RUN_NAMESPACE, row[0], row[1:], json.loads)
                for row in conn.execute(query, params)
            ]

        return await self._call(job)

    # ----------------------------------------------------------------- RunLedger

    async def append_run(self, record: RunRecord, /) -> None:
        """Append a start or finish run row."""
        params = run_row(record, dumps)
        await self._call(lambda conn: conn.execute(sql.INSERT_RUN, params))

    async def append_event(self, record: AgentEventRecord, /) -> None:
        """Append an event row; rows keep append (= emission) order."""
        params = event_row(record, dumps)
        await self._call(lambda conn: conn.execute(sql.INSERT_EVENT, params))

    async def append_tool_call(self, record: ToolCallRecord, /) -> None:
        """Append a tool-call row."""
        params = tool_call_row(record, dumps)
        await self._call(lambda conn: conn.execute(sql.INSERT_TOOL_CALL, params))

    async def append_usage(self, record: UsageRecord, /) -> None:
        """Append a usage row."""
        params = usage_row(record, dumps)
        await self._call(lambda conn: conn.execute(sql.INSERT_USAGE, params))

    async def list_runs(
        self, session_id: str | None = None, *, run_id: str | None = None
    ) -> builtins.list[RunRecord]:
        """Run rows in append order, filtered by session and/or run (at least one).

        Raises:
            ValueError: neither ``session_id`` nor ``run_id`` given.
        """
        sql, params = _ledger_query("prism_runs", "id", session_id, run_id)
        return await self._call(lambda conn: _decode_rows(conn, sql, params, RunRecord.from_dict))

    async def list_events(
        self, session_id: str, *, run_id: str | None = None
    ) -> builtins.list[AgentEventRecord]:
        """Event rows of a session (or of one of its runs) in emission order."""
        sql, params = _ledger_query("prism_run_events", "run_id", session_id, run_id)
        return await self._call(
            lambda conn: _decode_rows(conn, sql, params, AgentEventRecord.from_dict)
        )

    async def list_tool_calls(
        self, session_id: str, *, run_id: str | None = None
    ) -> builtins.list[ToolCallRecord]:
        """Tool-call rows of a session (or of one of its runs) in append order."""
        sql, params = _ledger_query("prism_tool_calls", "run_id", session_id, run_id)
        return await self._call(
            lambda conn: _decode_rows(conn, sql, params, ToolCallRecord.from_dict)
        )

    async def list_usage(
        self, session_id: str, *, run_id: str | None = None
    ) -> builtins.list[UsageRecord]:
        """Usage rows of a session (or of one of its runs) in append order."""
        sql, params = _ledger_query("prism_usage", "run_id", session_id, run_id)
        return await self._call(lambda conn: _decode_rows(conn, sql, params, UsageRecord.from_dict))


if TYPE_CHECKING:  # static proof that one object implements the three protocols

    def _implements(
        s: SqliteStore,
    ) -> tuple[
        BranchReadingSessionStore, CheckpointStore, AgentRunIndex, EntryCheckpointStore, RunLedger
    ]:
        return (s, s, s, s, s)


# --------------------------------------------------------------------------- helpers


def _noop(conn: sqlite3.Connection) -> None:
    return None


def _checkpoint_row(
    namespace: str,
    key: str,
    value: JsonValue,
    version: int,
    expected_version: int,
    fencing_token: int | None,
    ownership: OwnershipScope | None,
) -> CheckpointRow:
    """The columns of one save (the value encoded once, the run-index columns derived)."""
    return (
        namespace,
        key,
        version,
        expected_version,
        dumps(value),
        now_iso(),
        fencing_token,
        *owner_columns(ownership),
        *run_index_columns(namespace, value),
    )


def _entry(body: str) -> SessionEntry:
    return decoded(_decode_entry, body, "session entry")


def _decode_entry(body: str) -> SessionEntry:
    return SessionEntry.from_dict(json.loads(body))


_CORRUPT_CODES: Final = frozenset((11, 26))
"""SQLite's primary result codes ``SQLITE_CORRUPT`` and ``SQLITE_NOTADB``."""


def _corrupt(exc: sqlite3.DatabaseError, target: str) -> StoreError | None:
    """The typed error of a damaged database or a file that is not one, else ``None``."""
    code = getattr(exc, "sqlite_errorcode", None)
    text = str(exc)
    if (isinstance(code, int) and code & 0xFF in _CORRUPT_CODES) or (
        code is None and ("not a database" in text or "malformed" in text)
    ):
        return StoreError(
            ERR_PRISM_STORE_CORRUPT,
            f"SQLite store {target} is damaged or not a database ({text})",
        )
    return None


def _ledger_query(
    table: str, run_column: str, session_id: str | None, run_id: str | None
) -> tuple[str, tuple[str, ...]]:
    where, params = ledger_where(run_column, session_id, run_id, "?")
    return f"SELECT body FROM {table} WHERE {where} ORDER BY seq", params


def _decode_rows(
    conn: sqlite3.Connection,
    sql: str,
    params: tuple[str, ...],
    decode: Callable[[Any], _T],
) -> builtins.list[_T]:
    return [
        decoded(lambda b: decode(json.loads(b)), body, "ledger row")
        for (body,) in conn.execute(sql, params)
    ]
