"""The PostgreSQL store's connection: the pool, the schema migration, the store's lifecycle and
the ``jsonb`` encoding.

[`PostgresConnection`][prism.stores._postgres_connection.PostgresConnection] is the store's connection layer: [`connect()`][prism.stores._postgres_connection.PostgresConnection.connect]
(a pool of its own) or a host pool, ``open``/``aclose``, and the
[`DatabaseAccess`][prism.stores._common.DatabaseAccess] of the concept mixins — each statement on a pooled
connection. Migrations are applied on open in one transaction holding
``pg_advisory_xact_lock`` on [`lock_key()`][prism.stores._postgres_connection.lock_key] of the schema, so concurrent openers on any
machine serialise and apply them once. [`jsonb()`][prism.stores._postgres_connection.jsonb] / [`unwrap()`][prism.stores._postgres_connection.unwrap] turn JSON values into
``jsonb`` parameters and back, keeping values with NUL characters storable. ``psycopg`` and
``psycopg_pool`` are imported only when a store is created (the ``postgres`` extra).

**Dead connections.** A database restart (or ``pg_terminate_backend``) ends every session the
pool holds; the pool learns of it only when a connection is used. A store made by
[`PostgresConnection.connect()`][prism.stores._postgres_connection.PostgresConnection.connect] checks each connection the pool hands out
([`PooledConnectionCheck`][prism.stores._postgres_connection.PooledConnectionCheck]): an idle connection whose socket has something to read — the
server's goodbye, or the end of the stream — is tried with one round trip and, dead, discarded
together with every other dead idle connection of the pool, so the statement runs on a fresh
connection. A quiet socket costs one ``select`` call, no round trip.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import select
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal, Self, TypeAlias, TypeVar, get_args

from prism._util import now_iso
from prism.errors import StoreSchemaError
from prism.stores._common import DatabaseAccess, dumps
from prism.stores._migrations import MIGRATIONS_TABLE, load_migrations, plan_migrations

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = [
    "PooledConnectionCheck",
    "PostgresConnection",
    "SynchronousCommit",
    "jsonb",
    "lock_key",
    "unwrap",
]

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


_WRAP: Final = "$prism_json"


def jsonb(value: Any) -> str:
    """JSON text for a ``jsonb`` column, keeping strings with NUL characters storable.

    ``jsonb`` cannot hold ``\\u0000``. A value whose JSON text contains one — or which is itself
    a one-key ``{"$prism_json": …}`` object, so that the mapping stays injective — is stored as
    ``{"$prism_json": "<its JSON text>"}`` (the escape is then plain characters of a string);
    [`unwrap()`][prism.stores._postgres_connection.unwrap] reverses it. Other values are stored as they are. O(len(text)).
    """
    return jsonb_text(value, dumps(value))


def jsonb_text(value: Any, text: str) -> str:
    """[`jsonb()`][prism.stores._postgres_connection.jsonb] of ``value`` given ``text`` = ``dumps(value)``. O(len(text))."""
    if "\\u0000" in text or (type(value) is dict and len(value) == 1 and _WRAP in value):
        return dumps({_WRAP: text})
    return text


def unwrap(value: Any) -> Any:
    """The stored value of a ``jsonb`` column, undoing [`jsonb()`][prism.stores._postgres_connection.jsonb]'s wrapping."""
    if type(value) is dict and len(value) == 1 and _WRAP in value:
        return json.loads(value[_WRAP])
    return value


class PooledConnectionCheck:
    """The ``check`` callback of the store's pool: keeps connections the server ended out of use.

    Called by the pool before it hands a connection out. A connection already closed, or whose
    socket is readable while it is idle (the server said goodbye: a restart, an administrator's
    ``pg_terminate_backend``, an idle timeout), gets one round trip; when that fails, every
    other idle connection of the pool is checked too (they most likely died together) and the
    pool opens new ones, then the error makes the pool discard this one and hand out another.
    A quiet socket costs one ``select`` call and no round trip.

    Set [`pool`][prism.stores._postgres_connection.PooledConnectionCheck.pool] to the pool it checks (the callback is given to the pool's constructor).
    """

    __slots__ = ("_sweeping", "pool")

    def __init__(self) -> None:
        self.pool: AsyncConnectionPool[Any] | None = None
        self._sweeping = False

    async def __call__(self, conn: AsyncConnection[Any]) -> None:
        from psycopg import OperationalError
        from psycopg_pool import AsyncConnectionPool

        if conn.closed:
            raise OperationalError("the connection is closed")
        try:
            readable, _, _ = select.select([conn.fileno()], [], [], 0)
        except (OSError, ValueError):
            readable = [True]
        if not readable:
            return
        try:
            await AsyncConnectionPool.check_connection(conn)
        except Exception:
            await self._sweep()
            raise

    async def _sweep(self) -> None:
        """Check every idle connection of the pool, replacing the dead ones (one sweep at a
        time)."""
        if self.pool is None or self._sweeping:
            return
        self._sweeping = True
        try:
            await self.pool.check()
        finally:
            self._sweeping = False


class PostgresConnection(DatabaseAccess):
    """The store's connection layer: the pool, ``open``/``aclose`` and the database access of
    the concept mixins (see [`PostgresStore`][prism.stores.postgres.PostgresStore])."""

    __slots__ = ("_open_lock", "_owns_pool", "_pool", "_quoted", "_ready", "_schema")

    def __init__(
        self, *, pool: AsyncConnectionPool[Any], schema: str = "prism", owns_pool: bool = False
    ) -> None:
        _require_psycopg()
        if not isinstance(schema, str) or not _SCHEMA_RE.match(schema):
            raise ValueError(f"schema must be a plain SQL identifier, got {schema!r}")
        self._pool = pool
        self._schema = schema
        self._quoted = f'"{schema}"'
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
    ) -> Self:
        """Open a pool on ``conninfo``, migrate the schema and return the store.

        The pool replaces connections the server ended (a restart) before they are used
        ([`PooledConnectionCheck`][prism.stores._postgres_connection.PooledConnectionCheck]).

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
        check = PooledConnectionCheck()
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            open=False,
            kwargs=kwargs,
            name=f"prism-store-{schema}",
            check=check,
        )
        check.pool = pool
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

    async def open(self) -> Self:
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
        """Close the pool when the store created it ([`connect()`][prism.stores._postgres_connection.PostgresConnection.connect]); a host pool stays open."""
        if self._owns_pool:
            await self._pool.close()

    async def _migrate(self) -> None:
        shipped = load_migrations("postgres")
        q = self._quoted
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

    async def _recorded(self, conn: AsyncConnection[Any]) -> list[tuple[int, str]] | None:
        """The recorded ``(version, checksum)`` rows, or ``None`` when there is no table yet."""
        cur = await conn.execute("SELECT to_regclass(%s)", (f"{self._quoted}.{MIGRATIONS_TABLE}",))
        row = await cur.fetchone()
        if row is None or row[0] is None:
            return None
        cur = await conn.execute(f"SELECT version, checksum FROM {self._quoted}.{MIGRATIONS_TABLE}")
        return [(int(v), str(c)) for v, c in await cur.fetchall()]

    async def _fetch(self, sql: str, params: Any, *, one: bool = False) -> list[Any]:
        if not self._ready:
            await self.open()
        async with self._pool.connection() as conn:
            cur = await conn.execute(sql, params)
            if one:
                row = await cur.fetchone()
                return [row] if row is not None else []
            rows: list[Any] = await cur.fetchall()
            return rows

    async def _execute(self, sql: str, params: Any) -> None:
        if not self._ready:
            await self.open()
        async with self._pool.connection() as conn:
            await conn.execute(sql, params)

    async def _query(self, sql: str, params: Any, finish: Callable[[list[Any]], _T]) -> _T:
        return finish(await self._fetch(sql, params))

    _encode = staticmethod(jsonb)
    _stored_text = staticmethod(jsonb_text)
    _decode = staticmethod(unwrap)


def lock_key(schema: str) -> int:
    """The advisory-lock key (signed 64-bit) that serialises migrations of ``schema``."""
    digest = hashlib.sha256(f"prism.stores.migrate:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
