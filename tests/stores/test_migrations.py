"""Tests for the versioned, checksummed store migrations (DB-4)."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from importlib import resources
from pathlib import Path

import pytest

from prism.errors import StoreSchemaError
from prism.stores import SqliteStore
from prism.stores._migrations import Migration, load_migrations, plan_migrations
from prism.stores.postgres import PostgresStore


def _m(version: int, checksum: str | None = None) -> Migration:
    return Migration(version=version, name=f"m{version}", sql="", checksum=checksum or f"c{version}")


# --------------------------------------------------------------------------- planning


def test_db4_plan_applies_missing_migrations_in_order() -> None:
    """DB-4: a fresh database gets every migration; a partial one gets the rest, in order."""
    shipped = [_m(1), _m(2), _m(3)]
    assert plan_migrations(shipped, [], where="db") == shipped
    assert plan_migrations(shipped, [(1, "c1")], where="db") == shipped[1:]
    assert plan_migrations(shipped, [(1, "c1"), (2, "c2"), (3, "c3")], where="db") == []


@pytest.mark.parametrize(
    ("recorded", "needle"),
    [
        ([(1, "c1"), (2, "c2"), (3, "c3"), (4, "c4")], "newer than this package"),
        ([(1, "c1"), (2, "XX")], "was altered"),
        ([(0, "c0"), (1, "c1")], "unknown migration 0"),
        ([(1, "c1"), (3, "c3")], "gap"),
    ],
)
def test_db4_plan_refuses_newer_altered_unknown_or_gapped(
    recorded: list[tuple[int, str]], needle: str
) -> None:
    """DB-4: newer, altered, unknown or gapped records raise StoreSchemaError."""
    with pytest.raises(StoreSchemaError, match=needle) as info:
        plan_migrations([_m(1), _m(2), _m(3)], recorded, where="db")
    assert info.value.code == "ERR_PRISM_STORE_SCHEMA"


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_db4_migrations_ship_in_the_package_with_sha256_checksums(dialect: str) -> None:
    """DB-4: the package carries numbered .sql files; the checksum is the file's SHA-256."""
    migrations = load_migrations(dialect)  # type: ignore[arg-type]
    assert [m.version for m in migrations] == list(range(1, len(migrations) + 1))
    assert migrations[0].name == "initial"
    folder = resources.files("prism.stores").joinpath("migrations", dialect)
    data = folder.joinpath("0001_initial.sql").read_bytes()
    assert migrations[0].checksum == hashlib.sha256(data).hexdigest()


def test_db4_sqlite_statement_splitting_keeps_every_statement() -> None:
    """DB-4: the SQLite migration splits into complete statements (no comment-only pieces)."""
    statements = load_migrations("sqlite")[0].statements()
    assert all(sqlite3.complete_statement(s + ";") or sqlite3.complete_statement(s)
               for s in statements)
    assert sum(s.upper().startswith("CREATE TABLE") for s in statements) == 6


# --------------------------------------------------------------------------- SQLite


def _records(path: Path) -> list[tuple[int, str, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT version, name, checksum FROM prism_schema_migrations ORDER BY version"
        ).fetchall()


def _tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return sorted(
            r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        )


async def test_db4_sqlite_records_applied_migrations(tmp_path: Path) -> None:
    """DB-4: opening a new database applies and records each migration with its checksum;
    reopening changes nothing."""
    path = tmp_path / "m.db"
    async with SqliteStore(path):
        pass
    expected = [(m.version, m.name, m.checksum) for m in load_migrations("sqlite")]
    assert _records(path) == expected
    async with SqliteStore(path) as again:
        await again.list("session_x")
    assert _records(path) == expected


@pytest.mark.parametrize(
    ("sql", "needle"),
    [
        ("UPDATE prism_schema_migrations SET checksum = 'deadbeef' WHERE version = 1",
         "was altered"),
        ("INSERT INTO prism_schema_migrations VALUES (99, 'future', 'abc', 'now')",
         "newer than this package"),
        ("INSERT INTO prism_schema_migrations VALUES (0, 'odd', 'abc', 'now')",
         "unknown migration"),
    ],
)
async def test_db4_sqlite_refuses_altered_newer_or_unknown_schema(
    tmp_path: Path, sql: str, needle: str
) -> None:
    """DB-4: an altered checksum, a newer or an unknown version is refused with
    ERR_PRISM_STORE_SCHEMA, on open and on every later call, and the database is not touched."""
    path = tmp_path / "m.db"
    async with SqliteStore(path):
        pass
    with sqlite3.connect(path) as conn:
        conn.execute(sql)
    before = (_records(path), _tables(path))
    store = SqliteStore(path)
    try:
        with pytest.raises(StoreSchemaError, match=needle) as info:
            await store.open()
        assert info.value.code == "ERR_PRISM_STORE_SCHEMA"
        with pytest.raises(StoreSchemaError):
            await store.list("session_x")
    finally:
        await store.aclose()
    assert (_records(path), _tables(path)) == before


async def test_db4_sqlite_failed_migration_is_refused_and_rolled_back(tmp_path: Path) -> None:
    """DB-4: a database whose tables clash with a migration is refused; nothing is recorded."""
    path = tmp_path / "clash.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE prism_checkpoints (x INTEGER)")
    store = SqliteStore(path)
    try:
        with pytest.raises(StoreSchemaError, match="migration 1 .* failed"):
            await store.open()
    finally:
        await store.aclose()
    # The whole opening transaction rolled back: not even the record table was created.
    assert _tables(path) == ["prism_checkpoints"]


async def test_db4_sqlite_concurrent_openers_migrate_once(tmp_path: Path) -> None:
    """DB-4: several stores opening one new file at once apply the migrations once."""
    path = tmp_path / "race.db"
    stores = [SqliteStore(path, busy_timeout_s=30) for _ in range(6)]
    try:
        await asyncio.gather(*(s.open() for s in stores))
    finally:
        for s in stores:
            await s.aclose()
    assert len(_records(path)) == len(load_migrations("sqlite"))


# --------------------------------------------------------------------------- PostgreSQL


async def _pg_records(url: str, schema: str) -> list[tuple[int, str, str]]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            f'SELECT version, name, checksum FROM "{schema}".prism_schema_migrations '
            "ORDER BY version"
        )
        return [(int(v), str(n), str(c)) for v, n, c in await cur.fetchall()]


async def _pg_execute(url: str, sql: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(sql)  # type: ignore[arg-type]


@pytest.mark.postgres
async def test_db4_postgres_concurrent_openers_serialise_on_the_advisory_lock(
    pg_url: str, pg_schema: str
) -> None:
    """DB-4: 8 stores opening one new schema at once (each with its own pool) all succeed and
    the migrations are applied exactly once."""
    stores = await asyncio.gather(
        *(PostgresStore.connect(pg_url, schema=pg_schema, max_size=1) for _ in range(8))
    )
    try:
        expected = [(m.version, m.name, m.checksum) for m in load_migrations("postgres")]
        assert await _pg_records(pg_url, pg_schema) == expected
    finally:
        for s in stores:
            await s.aclose()


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("sql", "needle"),
    [
        ("UPDATE {s}.prism_schema_migrations SET checksum = 'deadbeef' WHERE version = 1",
         "was altered"),
        ("INSERT INTO {s}.prism_schema_migrations VALUES (99, 'future', 'abc', 'now')",
         "newer than this package"),
    ],
)
async def test_db4_postgres_refuses_altered_or_newer_schema(
    pg_url: str, pg_schema: str, sql: str, needle: str
) -> None:
    """DB-4: an altered checksum or a newer version recorded in PostgreSQL is refused with
    ERR_PRISM_STORE_SCHEMA and nothing is changed."""
    store = await PostgresStore.connect(pg_url, schema=pg_schema, max_size=1)
    await store.aclose()
    await _pg_execute(pg_url, sql.replace("{s}", f'"{pg_schema}"'))
    before = await _pg_records(pg_url, pg_schema)
    with pytest.raises(StoreSchemaError, match=needle) as info:
        await PostgresStore.connect(pg_url, schema=pg_schema, max_size=1)
    assert info.value.code == "ERR_PRISM_STORE_SCHEMA"
    assert await _pg_records(pg_url, pg_schema) == before


@pytest.mark.postgres
async def test_db4_postgres_failed_migration_is_refused_and_rolled_back(
    pg_url: str, pg_schema: str
) -> None:
    """DB-4: a schema whose tables clash with a migration is refused; nothing is recorded."""
    await _pg_execute(
        pg_url,
        f'CREATE SCHEMA "{pg_schema}"; CREATE TABLE "{pg_schema}".prism_checkpoints (x int)',
    )
    with pytest.raises(StoreSchemaError, match="migration 1 .* failed"):
        await PostgresStore.connect(pg_url, schema=pg_schema, max_size=1)
    # The whole opening transaction rolled back: no record table was left behind.
    import psycopg

    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT to_regclass(%s)", (f'"{pg_schema}".prism_schema_migrations',)
        )
        assert (await cur.fetchone()) == (None,)


async def test_sqlite_migration_5_keeps_checkpoint_rows_indexes_and_triggers(
    tmp_path: Path,
) -> None:
    """Migration 5 rebuilds prism_checkpoints as a rowid table (an envelope is stored in its
    row, not on an overflow page): same rows, columns, indexes and triggers as before, and a
    save afterwards keeps the run summaries as the triggers of version 3 do."""
    path = tmp_path / "v4.db"
    shipped = load_migrations("sqlite")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "CREATE TABLE prism_schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
        "checksum TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    for migration in shipped[:4]:
        for statement in migration.statements():
            conn.execute(statement)
        conn.execute(
            "INSERT INTO prism_schema_migrations VALUES (?, ?, ?, 'then')",
            (migration.version, migration.name, migration.checksum),
        )
    then = "2020-01-01T00:00:00.000Z"
    value = '{"session_id":"s1","status":"running","agent_id":"a1","filler":"' + "x" * 3000 + '"}'
    rows = [
        ("prism.agent-run", "run_1", 3, value, then, then, 7, "te", "ac", "us", "s1", "running", 1),
        ("other", "k", 1, "[1]", then, then, None, None, None, None, None, None, None),
    ]
    conn.executemany(f"INSERT INTO prism_checkpoints VALUES ({', '.join('?' * 13)})", rows)

    def schema() -> list[tuple[str, str]]:
        return sorted(
            conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE tbl_name = 'prism_checkpoints' "
                "AND type IN ('index', 'trigger') AND sql IS NOT NULL"
            ).fetchall()
        )

    before = schema()
    conn.close()

    store = SqliteStore(path)
    async with store:
        listed = await store.list_run_checkpoints(session_id="s1")
        assert [(r.key, r.version) for r in listed] == [("run_1", 3)]
        await store.save_checkpoint(
            namespace="prism.agent-run",
            key="run_1",
            value={"session_id": "s1", "status": "succeeded", "agent_id": "a1"},
            version=4,
            expected_version=3,
            fencing_token=7,
        )

    conn = sqlite3.connect(path)
    try:
        assert schema() == before
        (table_sql,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'prism_checkpoints'"
        ).fetchone()
        assert "WITHOUT ROWID" not in table_sql.upper()
        stored = conn.execute("SELECT * FROM prism_checkpoints ORDER BY namespace").fetchall()
        assert stored[0] == rows[1]
        assert stored[1][:3] == ("prism.agent-run", "run_1", 4)
        assert stored[1][6:] == (7, None, None, None, "s1", "succeeded", 0)
        assert conn.execute(
            "SELECT run_id, status FROM prism_run_summaries"
        ).fetchall() == [("run_1", "succeeded")]
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
