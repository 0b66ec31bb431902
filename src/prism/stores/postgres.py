"""PostgreSQL store: sessions, checkpoints and the run ledger shared by many workers.

:class:`PostgresStore` implements :class:`~prism.store.SessionStore` (with ``read_branch``),
:class:`~prism.checkpoints.CheckpointStore` and :class:`~prism.ledger.RunLedger` with the
semantics of the memory stores, over ``psycopg`` 3 (async) and ``psycopg_pool``. Both come with the
``postgres`` extra: ``pip install 'prism-runtime[postgres]'``.

Every write is one statement, hence one transaction (a save with entries: one transaction), and
holds under concurrent writers on different machines:

* a session append calls the schema's ``prism_append_entry`` function, which locks the expected
  parent row (``FOR UPDATE``) before checking that it has no child, then inserts with ``ON
  CONFLICT DO NOTHING`` over the unique keys ``(session_id, id)`` and ``(session_id,
  idempotency_key, expected_parent_id)`` — one round trip;
* a checkpoint save is ``INSERT ... ON CONFLICT DO NOTHING`` (first version) or ``UPDATE ... WHERE
  version = expected AND`` the fencing condition: of N workers claiming one run with the
  same expected version exactly one gets a row back;
* ledger rows are single inserts into four append-only tables;
* ``save_checkpoint_with_entries``: appends and a save in ONE transaction (two round trips,
  one commit), how an ``every-turn`` run writes a turn's entries with its envelope.

Durability is the server's: with ``synchronous_commit=on`` (its default) a returned write
survives any crash and a power loss; see :meth:`PostgresStore.connect` for ``"off"``.

Tables live in one schema (default ``prism``); migrations are applied on open under a
transaction-scoped advisory lock, so concurrent openers serialise. Values are ``jsonb``; since
``jsonb`` cannot hold a NUL character, a value containing one is stored wrapped as
``{"$prism_json": "<its JSON text>"}`` and unwrapped on read, so every JSON value round-trips.
A pool's connections must not cross ``fork()``: open the store in each worker process.
"""

from __future__ import annotations

import asyncio
import builtins
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypeVar, get_args

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
from prism.errors import StoreSchemaError
from prism.ledger import AgentEventRecord, RunLedger, RunRecord, ToolCallRecord, UsageRecord
from prism.store import BranchReadingSessionStore, SessionEntry
from prism.stores._common import (
    SessionInfo,
    append_error,
    check_append,
    check_appends,
    check_limit,
    checkpoint_conflict,
    checkpoint_record,
    decoded,
    event_row,
    ledger_where,
    owner_columns,
    run_listing,
    run_row,
    session_infos,
    tool_call_row,
    usage_row,
    walk_rows,
)
from prism.stores._migrations import MIGRATIONS_TABLE, load_migrations, plan_migrations
from prism.stores._postgres_sql import Statements, entry_key, jsonb, lock_key, unwrap
from prism.stores._postgres_writes import append_params, checkpoint_params, save_with_entries
from prism.types import JsonValue, OwnershipScope

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresStore"]

_T = TypeVar("_T")

_EXTRA_HINT: Final = (
    "PostgresStore needs psycopg 3 and psycopg_pool: pip install 'prism-runtime[postgres]'"
)
_SCHEMA_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


SynchronousCommit: TypeAlias = Literal["on", "off", "local", "remote_write", "remote_apply"]
"""The values of PostgreSQL's ``synchronous_commit`` setting."""
_SYNCHRONOUS_COMMIT: Final = frozenset(get_args(SynchronousCommit))


def _require_psycopg() -> None:
    """Import ``psycopg`` and ``psycopg_pool``, or raise an ImportError naming the extra."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise ImportError(_EXTRA_HINT) from exc


class PostgresStore:
    """Sessions, checkpoints and run records in PostgreSQL, for many workers.

    Implements :class:`~prism.store.SessionStore` (``append``, ``list``, ``read_branch``),
    :class:`~prism.checkpoints.CheckpointStore` and :class:`~prism.ledger.RunLedger`,
    plus read methods for tooling (``list_sessions``, ``list_runs``, ``list_events``,
    ``list_tool_calls``, ``list_usage``). Semantics are those of the memory stores.

    Create it with :meth:`connect` (the store owns its pool), or over a host pool with
    ``PostgresStore(pool=...)`` (the host opens and closes that pool; its connections may be in
    autocommit mode or not). The schema is migrated by :meth:`open`, ``async with``, or lazily
    on first use.

    Example::

        async with await PostgresStore.connect("postgresql://app@db/app") as store:
            agent = create_agent(..., store=store)

    Args:
        pool: An open or openable ``psycopg_pool.AsyncConnectionPool``.
        schema: Schema holding the tables (created when missing); letters, digits and ``_``.
        owns_pool: Whether :meth:`aclose` also closes ``pool`` (what :meth:`connect` sets);
            by default the host keeps the pool open and closes it itself.

    Raises:
        ValueError: ``schema`` is not a plain identifier.
        ImportError: ``psycopg``/``psycopg_pool`` are not installed (names the extra).
    """

    __slots__ = ("_open_lock", "_owns_pool", "_pool", "_ready", "_schema", "_sql")

    def __init__(
        self, *, pool: AsyncConnectionPool[Any], schema: str = "prism", owns_pool: bool = False
    ) -> None:
        _require_psycopg()
        if not isinstance(schema, str) or not _SCHEMA_RE.match(schema):
            raise ValueError(f"schema must be a plain SQL identifier, got {schema!r}")
        self._pool = pool
        self._schema = schema
        self._sql = Statements(schema)
        self._owns_pool = owns_pool
        self._ready = False
        self._open_lock = asyncio.Lock()

    @classmethod
    async def connect(
        cls,
        conninfo: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        schema: str = "prism",
        synchronous_commit: SynchronousCommit | None = None,
    ) -> PostgresStore:
        """Open a pool on ``conninfo``, migrate the schema and return the store.

        Args:
            conninfo: libpq connection string or ``postgresql://`` URL.
            min_size: Connections kept open.
            max_size: Most connections open at once.
            schema: Schema holding the tables.
            synchronous_commit: PostgreSQL's ``synchronous_commit`` for the pool's sessions;
                ``None`` keeps the server's setting (``"on"`` by default: a write returns once
                its commit is flushed to disk — it survives a server crash or a power loss,
                and every write waits for one disk flush). ``"off"``: a write returns before
                the flush, so a server crash or power loss can lose the last writes (up to
                about three times ``wal_writer_delay``, 0.6 s by default) — whole transactions
                only, never a part of one, and a crash of the application process loses
                nothing that returned; an every-turn durable run then resumes from an earlier
                turn boundary. ``"local"``/``"remote_write"``/``"remote_apply"`` are the
                replication levels of the same setting.

        Raises:
            ValueError: ``synchronous_commit`` is not one of the values above.
            ImportError: the ``postgres`` extra is missing.
            StoreSchemaError: ``ERR_PRISM_STORE_SCHEMA`` — unknown, newer or altered schema.
            psycopg.OperationalError: the server cannot be reached.
        """
        if synchronous_commit is not None and synchronous_commit not in _SYNCHRONOUS_COMMIT:
            raise ValueError(
                f"synchronous_commit must be one of {sorted(_SYNCHRONOUS_COMMIT)} or None, "
                f"got {synchronous_commit!r}"
            )
        _require_psycopg()
        from psycopg_pool import AsyncConnectionPool

        kwargs: dict[str, Any] = {"autocommit": True}
        if synchronous_commit is not None:
            kwargs["options"] = f"-c synchronous_commit={synchronous_commit}"
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            open=False,
            kwargs=kwargs,
            name=f"prism-store-{schema}",
        )
        await pool.open(wait=True)
        try:
            store = cls(pool=pool, schema=schema, owns_pool=True)
            await store.open()
        except BaseException:
            await pool.close()
            raise
        return store

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self._schema!r})"

    @property
    def schema(self) -> str:
        """The schema holding the store's tables."""
        return self._schema

    @property
    def pool(self) -> AsyncConnectionPool[Any]:
        """The connection pool the store uses."""
        return self._pool

    # ----------------------------------------------------------------- lifecycle

    async def open(self) -> PostgresStore:
        """Create the schema and apply missing migrations (once; later calls return at once).

        Migrations run in one transaction holding ``pg_advisory_xact_lock`` on a key derived
        from the schema name, so concurrent openers on any machine apply them once.

        Returns:
            The store itself.

        Raises:
            StoreSchemaError: ``ERR_PRISM_STORE_SCHEMA`` — a recorded migration is unknown,
                newer than this package, or altered.
        """
        if self._ready:
            return self
        async with self._open_lock:
            if not self._ready:
                await self._migrate()
                self._ready = True
        return self

    async def aclose(self) -> None:
        """Close the pool when the store created it (:meth:`connect`); a host pool stays open."""
        if self._owns_pool:
            await self._pool.close()

    async def __aenter__(self) -> PostgresStore:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _migrate(self) -> None:
        shipped = load_migrations("postgres")
        q = self._sql.schema
        where = f"schema {self._schema}"
        table = f"{q}.{MIGRATIONS_TABLE}"
        async with self._pool.connection() as conn:
            recorded = await self._recorded(conn)
            if recorded is not None and not plan_migrations(shipped, recorded, where=where):
                return  # up to date: no lock, no write
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(self._schema),))
                cur = await conn.execute(
                    "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self._schema,)
                )
                if await cur.fetchone() is None:
                    await conn.execute(f"CREATE SCHEMA {q}")
                await conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {table} (version INTEGER PRIMARY KEY, "
                    "name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)"
                )
                recorded = await self._recorded(conn) or []
                for migration in plan_migrations(shipped, recorded, where=where):
                    sql = migration.sql.replace("{schema}", q)
                    try:
                        async with conn.transaction():  # savepoint: report a clear error
                            await conn.execute(sql)
                    except Exception as exc:
                        if isinstance(exc, StoreSchemaError):
                            raise
                        raise StoreSchemaError(
                            f"Store schema of {where}: migration {migration.version} "
                            f"({migration.name}) failed: {exc}"
                        ) from exc
                    await conn.execute(
                        f"INSERT INTO {table} (version, name, checksum, applied_at) "
                        "VALUES (%s, %s, %s, %s)",
                        (migration.version, migration.name, migration.checksum, now_iso()),
                    )

    async def _recorded(self, conn: AsyncConnection[Any]) -> builtins.list[tuple[int, str]] | None:
        """The recorded ``(version, checksum)`` rows, or ``None`` when there is no table yet."""
        cur = await conn.execute(
            "SELECT to_regclass(%s)", (f"{self._sql.schema}.{MIGRATIONS_TABLE}",)
        )
        row = await cur.fetchone()
        if row is None or row[0] is None:
            return None
        cur = await conn.execute(
            f"SELECT version, checksum FROM {self._sql.schema}.{MIGRATIONS_TABLE}"
        )
        return [(int(v), str(c)) for v, c in await cur.fetchall()]

    async def _fetch(self, sql: str, params: Any, *, one: bool = False) -> builtins.list[Any]:
        if not self._ready:
            await self.open()
        async with self._pool.connection() as conn:
            cur = await conn.execute(sql, params)
            if one:
                row = await cur.fetchone()
                return [row] if row is not None else []
            rows: builtins.list[Any] = await cur.fetchall()
            return rows

    async def _execute(self, sql: str, params: Any) -> None:
        if not self._ready:
            await self.open()
        async with self._pool.connection() as conn:
            await conn.execute(sql, params)

    # ----------------------------------------------------------------- SessionStore

    async def append(
        self,
        entry: SessionEntry,
        *,
        expected_parent_id: str | None = None,
        idempotency_key: str | None = None,
        fork: bool = False,
    ) -> None:
        """Append ``entry`` atomically in one round trip.

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
        rows = await self._fetch(self._sql.append, params, one=True)
        outcome = rows[0][0]
        if outcome != "ok":
            raise append_error(outcome, entry, expected_parent_id, idempotency_key)

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        """Every entry of ``session_id`` in append order (``[]`` when unknown). O(entries)."""
        rows = await self._fetch(self._sql.list, (session_id,))
        return [_entry(body) for (body,) in rows]

    async def read_branch(self, session_id: str, leaf_id: str) -> builtins.list[SessionEntry]:
        """The entries from the root to ``leaf_id``, root first: one recursive query, O(branch).

        Raises:
            ValueError: ``Unknown session leaf: <id>`` or ``Missing session parent: <id>``.
        """
        rows = await self._fetch(self._sql.read_branch, (entry_key(session_id, leaf_id),))
        return walk_rows(rows, leaf_id, _entry)

    async def list_sessions(self, *, limit: int = 100) -> builtins.list[SessionInfo]:
        """The stored sessions, most recently appended first (for tooling such as a CLI).

        Args:
            limit: Most sessions returned (>= 1). Cost O(all entries).
        """
        check_limit(limit)
        return session_infos(await self._fetch(self._sql.list_sessions, (limit,)))

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
        """Compare-and-set ``(namespace, key)`` in one statement.

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
        now = now_iso()
        save = checkpoint_params(
            namespace=namespace,
            key=key,
            text=jsonb(value),
            version=version,
            expected_version=expected_version,
            fencing_token=fencing_token,
            now=now,
            owner=owner_columns(ownership),
        )
        statement = self._sql.cp_insert if expected_version == 0 else self._sql.cp_update
        rows = await self._fetch(statement, save, one=True)
        if not rows:
            current = await self._fetch(self._sql.cp_load, (namespace, key), one=True)
            state = (int(current[0][0]), current[0][4]) if current else None
            raise checkpoint_conflict(namespace, key, expected_version, fencing_token, state)
        return CheckpointRecord(
            namespace=namespace,
            key=key,
            version=version,
            value=clone_json(value),
            created_at=rows[0][0],
            updated_at=now,
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
        (two round trips, one commit; see :class:`~prism.checkpoints.EntryCheckpointStore`)
        of the statements ``append`` and ``save_checkpoint`` run.

        Returns:
            The new record; its ``value`` is ``value`` itself (not a copy).

        Raises:
            SessionAppendConflictError: ``ERR_PRISM_SESSION_APPEND_CONFLICT`` — an append was
                refused; nothing is stored.
            ValueError: an entry id exists in its session, or malformed arguments; nothing stored.
            CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — the save was refused.
        """
        check_checkpoint_write(
            namespace=namespace,
            key=key,
            version=version,
            expected_version=expected_version,
            fencing_token=fencing_token,
        )
        appends, params = check_appends(entries, append_params)
        now = now_iso()
        save = checkpoint_params(
            namespace=namespace,
            key=key,
            text=jsonb(value),
            version=version,
            expected_version=expected_version,
            fencing_token=fencing_token,
            now=now,
            owner=owner_columns(ownership),
        )
        if not self._ready:
            await self.open()
        async with self._pool.connection() as conn:
            created_at = await save_with_entries(
                conn,
                self._sql,
                appends,
                params,
                save,
                namespace=namespace,
                key=key,
                expected_version=expected_version,
                fencing_token=fencing_token,
            )
        return CheckpointRecord(
            namespace=namespace,
            key=key,
            version=version,
            value=value,
            created_at=created_at,
            updated_at=now,
            fencing_token=fencing_token,
        )

    async def load_checkpoint(
        self, *, namespace: str, key: str, ownership: OwnershipScope | None = None
    ) -> CheckpointRecord | None:
        """The stored record of ``(namespace, key)``, or ``None``; ``ownership`` is not used."""
        rows = await self._fetch(self._sql.cp_load, (namespace, key), one=True)
        if not rows:
            return None
        return checkpoint_record(namespace, key, rows[0], unwrap)

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
        index (schema migration 2).

        Raises:
            ValueError: ``limit`` smaller than 1.
            StoreError: ``ERR_PRISM_STORE_UNDECODABLE`` — a listed value does not decode.
        """
        wanted = check_run_listing(limit, statuses)
        if wanted == ():
            return []
        query, params = run_listing(
            f"{self._sql.schema}.prism_checkpoints",
            "%s",
            session_id=session_id,
            statuses=wanted,
            resumable=resumable,
            limit=limit,
            resumable_test="run_resumable",
        )
        return [
            checkpoint_record(AGENT_RUN_NAMESPACE, row[0], row[1:], unwrap)
            for row in await self._fetch(query, params)
        ]

    # ----------------------------------------------------------------- RunLedger

    async def append_run(self, record: RunRecord, /) -> None:
        """Append a start or finish run row."""
        await self._execute(self._sql.insert_run, run_row(record, jsonb))

    async def append_event(self, record: AgentEventRecord, /) -> None:
        """Append an event row; rows keep append (= emission) order."""
        await self._execute(self._sql.insert_event, event_row(record, jsonb))

    async def append_tool_call(self, record: ToolCallRecord, /) -> None:
        """Append a tool-call row."""
        await self._execute(self._sql.insert_tool_call, tool_call_row(record, jsonb))

    async def append_usage(self, record: UsageRecord, /) -> None:
        """Append a usage row."""
        await self._execute(self._sql.insert_usage, usage_row(record, jsonb))

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
        where, params = ledger_where(run_column, session_id, run_id, "%s")
        sql = f"SELECT body FROM {self._sql.schema}.{table} WHERE {where} ORDER BY seq"
        return [
            decoded(lambda b: decode(unwrap(b)), body, "ledger row")
            for (body,) in await self._fetch(sql, params)
        ]


if TYPE_CHECKING:  # static proof that one object implements the three protocols

    def _implements(
        s: PostgresStore,
    ) -> tuple[
        BranchReadingSessionStore, CheckpointStore, AgentRunIndex, EntryCheckpointStore, RunLedger
    ]:
        return (s, s, s, s, s)


def _entry(body: Any) -> SessionEntry:
    return decoded(lambda b: SessionEntry.from_dict(unwrap(b)), body, "session entry")
