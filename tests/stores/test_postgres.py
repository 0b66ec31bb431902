"""Tests for prism.stores.postgres (DB-1..DB-9, DB-12).

They need ``PRISM_TEST_POSTGRES_URL`` (``.ci/run`` sets it) and skip with a message naming it when
it is unset. Each test works in its own schema, dropped afterwards.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from prism.ledger import RunLedger
from prism.runtime.checkpoints import CheckpointStore
from prism.store import BranchReadingSessionStore, SessionStore, new_session_entry
from prism.stores import open_store
from prism.stores._migrations import load_migrations
from prism.stores.postgres import PostgresStore
from prism.testing._conformance import (
    run_checkpoint_store_conformance,
    run_ledger_conformance,
    run_session_store_conformance,
)
from prism.types import Message, TextContent

pytestmark = pytest.mark.postgres


def _entry(session_id: str, parent_id: str | None = None, id: str | None = None) -> Any:
    return new_session_entry(
        "message",
        session_id=session_id,
        parent_id=parent_id,
        id=id,
        message=Message(role="user", content=(TextContent(text="hi"),)),
    )


async def test_db9_postgres_session_store_conformance(pg_store: PostgresStore) -> None:
    """DB-9/DB-5: PostgresStore passes the session-store suite (row-locked tip CAS, fork, keys)."""
    await run_session_store_conformance(pg_store)


async def test_db9_postgres_checkpoint_store_conformance(pg_store: PostgresStore) -> None:
    """DB-9/DB-6: PostgresStore passes the checkpoint-store suite (CAS, fencing)."""
    await run_checkpoint_store_conformance(pg_store)


async def test_db9_postgres_ledger_conformance(pg_store: PostgresStore) -> None:
    """DB-9/DB-7: PostgresStore passes the ledger suite (jsonb rows, append order)."""
    await run_ledger_conformance(pg_store)


async def test_db1_postgres_store_implements_the_three_protocols(pg_store: PostgresStore) -> None:
    """DB-1: one object implements SessionStore (with read_branch), CheckpointStore, RunLedger."""
    assert isinstance(pg_store, SessionStore)
    assert isinstance(pg_store, BranchReadingSessionStore)
    assert isinstance(pg_store, CheckpointStore)
    assert isinstance(pg_store, RunLedger)


async def test_db1_host_pool_without_autocommit(pg_url: str, pg_schema: str) -> None:
    """DB-1: PostgresStore(pool=...) over a host pool (not autocommit) migrates lazily, passes
    the suites, and leaves the host's pool open on aclose()."""
    from psycopg_pool import AsyncConnectionPool

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        pg_url, min_size=1, max_size=10, open=False
    )
    await pool.open(wait=True)
    try:
        store = PostgresStore(pool=pool, schema=pg_schema)
        await run_session_store_conformance(store)  # first call migrates
        await run_checkpoint_store_conformance(store)
        await store.aclose()
        assert not pool.closed
        async with pool.connection() as conn:
            cur = await conn.execute(
                f'SELECT count(*) FROM "{pg_schema}".prism_schema_migrations'
            )
            assert (await cur.fetchone()) == (len(load_migrations("postgres")),)
    finally:
        await pool.close()


async def test_db5_concurrent_duplicate_ids_one_wins(pg_store: PostgresStore) -> None:
    """DB-5: concurrent appends of one entry id (different connections): one stored, the rest
    ValueError — whether the function's check or the unique key catches them."""
    entry = _entry("session_dup")
    outcomes = await asyncio.gather(
        *(pg_store.append(entry) for _ in range(8)), return_exceptions=True
    )
    assert outcomes.count(None) == 1
    assert all(isinstance(o, ValueError) for o in outcomes if o is not None)
    assert await pg_store.list("session_dup") == [entry]


async def test_db5_two_stores_racing_for_one_tip(pg_url: str, pg_schema: str) -> None:
    """DB-5/DB-11: two stores (separate pools, as on two machines) racing for one tip: one wins."""
    async with await PostgresStore.connect(pg_url, schema=pg_schema) as a, \
            await PostgresStore.connect(pg_url, schema=pg_schema) as b:
        for round_ in range(10):
            sid = f"session_race_{round_}"
            root = _entry(sid)
            await a.append(root)
            outcomes = await asyncio.gather(
                a.append(_entry(sid, root.id), expected_parent_id=root.id),
                b.append(_entry(sid, root.id), expected_parent_id=root.id),
                return_exceptions=True,
            )
            assert outcomes.count(None) == 1, outcomes
            assert len(await b.list(sid)) == 2


async def test_db2_open_store_maps_postgres_urls(pg_url: str, pg_schema: str) -> None:
    """DB-2: postgresql:// (and postgres://) URLs open a migrated PostgresStore."""
    store = await open_store(pg_url, schema=pg_schema, max_size=2)
    try:
        assert isinstance(store, PostgresStore) and store.schema == pg_schema
        await store.append(_entry("session_u"))
        assert len(await store.list("session_u")) == 1
    finally:
        await store.aclose()
    alias = "postgres://" + pg_url.split("://", 1)[1]
    store2 = await open_store(alias, schema=pg_schema, max_size=1)
    try:
        assert len(await store2.list("session_u")) == 1
    finally:
        await store2.aclose()


async def test_db5_list_sessions(pg_store: PostgresStore) -> None:
    """list_sessions (tooling): newest first, with counts and the last entry id."""
    a = _entry("session_a")
    await pg_store.append(a)
    b = _entry("session_b")
    await pg_store.append(b)
    infos = await pg_store.list_sessions()
    assert [(i.session_id, i.entries, i.last_entry_id) for i in infos] == [
        ("session_b", 1, b.id),
        ("session_a", 1, a.id),
    ]


def test_db1_schema_must_be_an_identifier() -> None:
    """DB-1: the schema name is validated (it is interpolated into SQL)."""

    class FakePool:
        pass

    with pytest.raises(ValueError):
        PostgresStore(pool=FakePool(), schema='x"; DROP TABLE y; --')  # type: ignore[arg-type]


def test_db3_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """DB-3/ARCH-5: without psycopg the error names the ``postgres`` extra (no server needed)."""
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ImportError, match=r"prism-runtime\[postgres\]"):
        PostgresStore(pool=object(), schema="prism")  # type: ignore[arg-type]
    with pytest.raises(ImportError, match=r"prism-runtime\[postgres\]"):
        asyncio.run(PostgresStore.connect("postgresql://localhost/x"))


async def test_db5_postgres_append_plans_are_index_lookups(
    pg_url: str, pg_store: PostgresStore
) -> None:
    """DB-5/ARCH-15: on a fresh table (no statistics yet) every statement of the append
    function is a single-row index lookup — never a scan of the session — also once the
    function's plans are cached as generic plans (after 5 calls on one connection)."""
    import psycopg

    from prism.stores._postgres_sessions import PostgresSessionSql
    from prism.stores._postgres_sessions import entry_key as _key

    sid = "session_plans"
    parent: str | None = None
    for i in range(200):  # grow one session first, as a long conversation would
        e = _entry(sid, parent, id=f"e{i}")
        await pg_store.append(e, expected_parent_id=parent)
        parent = e.id
    notices: list[str] = []
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        try:
            await conn.execute("LOAD 'auto_explain'")
        except psycopg.Error:
            pytest.skip("auto_explain is not available on this server")
        await conn.execute("SET auto_explain.log_min_duration = 0")
        await conn.execute("SET auto_explain.log_nested_statements = on")
        await conn.execute("SET client_min_messages = log")
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        for i in range(8):  # past the 5 custom plans: generic plans are in use
            notices.clear()
            eid = f"x{i}"
            cur = await conn.execute(
                PostgresSessionSql.build(f'"{pg_store.schema}"').append,
                (_key(sid, eid), _key(sid, parent), _key(sid, parent), sid, eid, parent,
                 "message", None, "t", "{}", parent, "k", False),
            )
            assert (await cur.fetchone()) == ("ok",)
            parent = eid
    plans = "\n".join(notices)
    assert "Seq Scan" not in plans, plans
    assert "Bitmap" not in plans, plans
    assert "Filter:" not in plans, plans  # every lookup is fully answered by its index
    assert "prism_session_entries_seq" not in plans, plans  # the per-session index
    assert "Index Scan using prism_session_entries_pkey" in plans, plans
    assert "prism_session_entries_children" in plans, plans


async def test_db5_postgres_read_branch_walks_the_key_index(
    pg_url: str, pg_store: PostgresStore
) -> None:
    """DB-5: read_branch is one recursive query; on a table of realistic size (with
    statistics) each step is a primary-key lookup, so its cost follows the branch, not the
    table."""
    import psycopg

    from prism.stores._postgres_sessions import PostgresSessionSql
    from prism.stores._postgres_sessions import entry_key as _key

    table = f'"{pg_store.schema}".prism_session_entries'
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        # 50 000 rows in 500 other sessions, then one 20-entry branch.
        await conn.execute(
            f"""INSERT INTO {table} (entry_key, parent_key, session_id, id, kind, "timestamp",
                body)
            SELECT length(s) || ':' || s || '/e' || i, NULL, s, 'e' || i, 'custom', 't', '{{}}'
              FROM (SELECT 'other_' || (g % 500) AS s, g AS i
                      FROM generate_series(1, 50000) AS g) AS rows"""  # type: ignore[arg-type]
        )
        await conn.execute(f"ANALYZE {table}")  # type: ignore[arg-type]
    parent: str | None = None
    for i in range(20):
        e = _entry("session_branch", parent, id=f"b{i}")
        await pg_store.append(e, expected_parent_id=parent)
        parent = e.id
    assert parent is not None
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        cur = await conn.execute(
            ("EXPLAIN " + PostgresSessionSql.build(f'"{pg_store.schema}"').read_branch),  # type: ignore[arg-type]
            (_key("session_branch", parent),),
        )
        plan = "\n".join(r[0] for r in await cur.fetchall())
    assert "Seq Scan on prism_session_entries" not in plan, plan
    assert "Index Scan using prism_session_entries_pkey" in plan, plan
    branch = await pg_store.read_branch("session_branch", parent)
    assert [e.id for e in branch] == [f"b{i}" for i in range(20)]


async def test_db1_synchronous_commit_is_set_on_the_pool_sessions(
    pg_url: str, pg_schema: str
) -> None:
    """``synchronous_commit="off"`` reaches every pooled session; the store still round-trips."""
    store = await PostgresStore.connect(pg_url, schema=pg_schema, synchronous_commit="off")
    try:
        await store.append(_entry("s", id="a"))
        assert [e.id for e in await store.list("s")] == ["a"]
        rows = await store._fetch("SHOW synchronous_commit", (), one=True)
        assert [tuple(r) for r in rows] == [("off",)]
    finally:
        await store.aclose()


async def test_db1_synchronous_commit_must_be_a_setting_value(pg_url: str) -> None:
    with pytest.raises(ValueError, match="synchronous_commit"):
        await PostgresStore.connect(pg_url, synchronous_commit="sometimes")  # type: ignore[arg-type]


async def test_a_store_whose_connections_the_server_ended_uses_fresh_ones_i21_14c(
    pg_store: PostgresStore, pg_url: str
) -> None:
    """Every pooled connection of the store is ended by the server while idle (as a database
    restart does: ``pg_terminate_backend``, SQLSTATE 57P01): the next statements run on new
    connections instead of failing with ``AdminShutdown``."""
    import psycopg

    await pg_store.append(_entry("s", id="a"))
    pool = pg_store.pool
    held = [await pool.getconn() for _ in range(4)]  # the pool now keeps four connections
    pids = [conn.info.backend_pid for conn in held]
    for conn in held:
        await pool.putconn(conn)
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
        for pid in pids:  # this store's sessions only: the database is shared
            await admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
    for _ in range(6):
        assert [e.id for e in await pg_store.list("s")] == ["a"]
    await pg_store.append(_entry("s", parent_id="a", id="b"))
    assert [e.id for e in await pg_store.list("s")] == ["a", "b"]
