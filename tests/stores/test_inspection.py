"""The inspector's reads (prism.inspection) on the SQLite and PostgreSQL stores: the conformance
suite, schema migration 3 over a database of schema 2 holding data, the query plans, and a real
run writing its ledger."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from prism.inspection import InspectionReader
from prism.stores import SqliteStore
from prism.stores._inspection_sql import LedgerCursor
from prism.stores._migrations import load_migrations
from prism.stores.postgres import PostgresStore
from prism.testing import run_inspection_conformance
from prism.testing._conformance_inspection import _populate


def new_schema_name() -> str:
    return f"prism_test_{uuid.uuid4().hex[:16]}"


@pytest.fixture
async def pg_schemas(pg_url: str) -> AsyncIterator[list[str]]:
    """Schemas a test creates, dropped after it (skips without PRISM_TEST_POSTGRES_URL)."""
    import psycopg

    schemas: list[str] = []
    try:
        yield schemas
    finally:
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            for schema in schemas:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the suite


async def test_sqlite_store_passes_the_inspection_suite(tmp_path: Path) -> None:
    made: list[int] = []

    async def make() -> SqliteStore:
        made.append(1)
        return await SqliteStore(tmp_path / f"inspect{len(made)}.db").open()

    await run_inspection_conformance(make)
    assert len(made) == 2


async def test_postgres_store_passes_the_inspection_suite(
    pg_url: str, pg_schemas: list[str]
) -> None:
    url = pg_url

    async def make() -> PostgresStore:
        pg_schemas.append(new_schema_name())
        return await PostgresStore.connect(url, schema=pg_schemas[-1], max_size=2)

    await run_inspection_conformance(make)


async def test_sqlite_filtered_pages_read_the_same_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filtered page tests sessions one by one when many runs match (on the suite's small
    world: always, with the threshold at 0); it reads what looking the sessions up reads."""
    from prism.stores import _inspection

    monkeypatch.setattr(_inspection, "LOOKUP_MOST", 0)
    made: list[int] = []

    async def make() -> SqliteStore:
        made.append(1)
        return await SqliteStore(tmp_path / f"scan{len(made)}.db").open()

    await run_inspection_conformance(make)


def test_both_stores_implement_the_reader(tmp_path: Path) -> None:
    assert isinstance(SqliteStore(tmp_path / "x.db"), InspectionReader)


async def test_the_suite_catches_a_store_that_skips_the_deltas_rule(tmp_path: Path) -> None:
    """A store whose ledger reads always include message deltas fails the suite."""

    class Sloppy(SqliteStore):
        __slots__ = ()

        async def read_ledger(self, run_id: str, **kw: Any) -> Any:
            kw["include_deltas"] = True
            return await super().read_ledger(run_id, **kw)

    n = [0]

    async def make() -> SqliteStore:
        n[0] += 1
        return await Sloppy(tmp_path / f"s{n[0]}.db").open()

    with pytest.raises(AssertionError, match="append order"):
        await run_inspection_conformance(make)


# --------------------------------------------------------------------------- migration 3


async def _summaries(store: Any, run_ids: list[str]) -> dict[str, Any]:
    """Everything the reads say about a store's data, keyed so that order does not matter."""
    sessions = (await store.list_session_summaries(limit=1000)).items
    runs = (await store.list_run_summaries(limit=1000)).items
    return {
        "sessions": {s.session_id: s for s in sessions},
        "runs": {r.run_id: r for r in runs},
        "usage": {g: list(await store.usage_report(group_by=g)) for g in ("day", "model", "agent")},
        "ledger": {rid: (await store.read_ledger(rid, include_deltas=True)).rows for rid in run_ids},
    }


def _same_summaries(live: dict[str, Any], migrated: dict[str, Any], durable_session: str) -> None:
    """The backfilled summaries equal the ones kept as the rows were written; a durable run's
    session may show a later activity time (its envelope's last save rather than its last
    status change, which only the live triggers see)."""
    live_d = live["sessions"].pop(durable_session)
    got_d = migrated["sessions"].pop(durable_session)
    assert got_d.updated_at >= live_d.updated_at
    assert {**got_d.to_dict(), "updated_at": None} == {**live_d.to_dict(), "updated_at": None}
    assert migrated == live


async def test_migration_3_summarises_a_sqlite_database_of_schema_2(tmp_path: Path) -> None:
    """A schema-2 database holding sessions, ledger rows and envelopes reads the same after
    migration 3 as a database that kept its summaries while the rows were written."""
    live_path, old_path = tmp_path / "live.db", tmp_path / "old.db"
    async with SqliteStore(live_path) as live:
        world = await _populate(live)
        run_ids = [world.ids[n] for n in ("a1", "a2", "b1", "c1", "d1")]
        want = await _summaries(live, run_ids)
    conn = sqlite3.connect(old_path)
    conn.execute("CREATE TABLE prism_schema_migrations (version INTEGER PRIMARY KEY, "
                 "name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)")
    for migration in load_migrations("sqlite")[:2]:
        for statement in migration.statements():
            conn.execute(statement)
        conn.execute("INSERT INTO prism_schema_migrations VALUES (?, ?, ?, 'then')",
                     (migration.version, migration.name, migration.checksum))
    conn.execute("ATTACH DATABASE ? AS live", (str(live_path),))
    for table in ("prism_session_entries", "prism_checkpoints", "prism_runs", "prism_run_events",
                  "prism_tool_calls"):
        conn.execute(f"INSERT INTO {table} SELECT * FROM live.{table}")
    conn.execute("INSERT INTO prism_usage SELECT seq, id, session_id, run_id, scope, body "
                 "FROM live.prism_usage")
    conn.commit()
    conn.execute("DETACH DATABASE live")
    assert conn.execute("SELECT count(*) FROM prism_usage").fetchone()[0] > 0
    conn.close()
    async with SqliteStore(old_path) as migrated:
        got = await _summaries(migrated, run_ids)
    _same_summaries(want, got, world.ids["D"])


async def test_migration_3_summarises_a_postgres_schema_of_version_2(
    pg_url: str, pg_schemas: list[str]
) -> None:
    """The same over a PostgreSQL schema of version 2."""
    import psycopg

    url = pg_url
    live_schema, old_schema = new_schema_name(), new_schema_name()
    pg_schemas.extend((live_schema, old_schema))
    async with await PostgresStore.connect(url, schema=live_schema, max_size=2) as live:
        world = await _populate(live)
        run_ids = [world.ids[n] for n in ("a1", "a2", "b1", "c1", "d1")]
        want = await _summaries(live, run_ids)
    old, src = f'"{old_schema}"', f'"{live_schema}"'
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f"CREATE SCHEMA {old}")  # type: ignore[arg-type]
        await conn.execute(  # type: ignore[arg-type]
            f"CREATE TABLE {old}.prism_schema_migrations (version INTEGER PRIMARY KEY, "
            "name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        for migration in load_migrations("postgres")[:2]:
            await conn.execute(migration.sql.replace("{schema}", old))  # type: ignore[arg-type]
            await conn.execute(  # type: ignore[arg-type]
                f"INSERT INTO {old}.prism_schema_migrations VALUES (%s, %s, %s, 'then')",
                (migration.version, migration.name, migration.checksum),
            )
        copies = {
            "prism_session_entries": "seq, entry_key, parent_key, session_id, id, parent_id, "
            'kind, run_id, "timestamp", idempotency_key, expected_parent_id, body',
            "prism_checkpoints": "namespace, key, version, value, created_at, updated_at, "
            "fencing_token, tenant_id, account_id, user_id",
            "prism_runs": "seq, id, session_id, status, body",
            "prism_run_events": "seq, id, session_id, run_id, type, body",
            "prism_tool_calls": "seq, id, session_id, run_id, tool_call_id, status, body",
            "prism_usage": "seq, id, session_id, run_id, scope, body",
        }
        for table, columns in copies.items():
            overriding = "" if table == "prism_checkpoints" else " OVERRIDING SYSTEM VALUE"
            await conn.execute(  # type: ignore[arg-type]
                f"INSERT INTO {old}.{table} ({columns}){overriding} "
                f"SELECT {columns} FROM {src}.{table}"
            )
    async with await PostgresStore.connect(url, schema=old_schema, max_size=2) as migrated:
        got = await _summaries(migrated, run_ids)
    _same_summaries(want, got, world.ids["D"])


# --------------------------------------------------------------------------- plans


async def test_sqlite_reads_search_indexes_not_tables(tmp_path: Path) -> None:
    """Every inspection read is an index search (a page costs its rows, not the store)."""
    from prism.inspection import SessionFilter

    path = tmp_path / "plan.db"
    async with SqliteStore(path) as store:
        sql = store._inspection_sql
    statements = []
    where, params = sql.session_filter(SessionFilter(), None, None)
    statements.append(sql.sessions([*where, sql.after_session()], [*params, "t", "s"], 51))
    for flt in (SessionFilter(agent_id="a", model="m", status="s", text="x"),
                SessionFilter(parent_session_id="p")):
        for lookup in (None, "agent_id", "model", "status"):
            where, params = sql.session_filter(flt, "2020", "2030", lookup=lookup)
            statements.append(sql.sessions(where, params, 51))
    statements.append(sql.candidates(SessionFilter(agent_id="a", model="m", status="s"), 1000))
    statements.append(sql.runs(["(started_at, run_id) < (?, ?)"], ["t", "r"], 51))
    statements.append(sql.runs(["agent_id = ?"], ["a"], 51))
    statements.append(sql.ledger("run_1", LedgerCursor(1, 2, 3, 4), 1001, False))
    statements.append(sql.entries("s", 5, 100))
    statements.append(sql.usage("agent", "2020", "2030"))
    conn = sqlite3.connect(path)
    for statement in statements:
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + statement.sql,
                                               statement.params)]
        # a SCAN of a table (not of a page of rows already found, not along an index)
        scans = [step for step in plan if step.split(" ")[0] == "SCAN"
                 and (step.split(" ")[1].startswith("prism_") or step.split(" ")[1] in "rlue")
                 and " INDEX " not in step]
        assert scans == [], (statement.sql, plan)
    conn.close()


# --------------------------------------------------------------------------- a real run


async def test_a_run_with_the_store_as_its_ledger_is_summarised(tmp_path: Path) -> None:
    """A real run writes its agent id in its run row; the inspector reads its run, its
    session and its timeline."""
    import prism
    from prism.testing import create_mock_provider, provider_done, provider_text_delta
    from prism.types import ModelConfig

    async with SqliteStore(tmp_path / "run.db") as store:
        provider = create_mock_provider(turns=[[provider_text_delta("hi there"), provider_done()]])
        agent = prism.create_agent(
            id="greeter",
            model=ModelConfig(provider="mock", model="mock-1"),
            provider=provider,
            store=store,
            run_ledger=store,
        )
        session = agent.create_session(session_id="session_real")
        result = await session.run("Say hi")
        run = await store.get_run_summary(result.run_id)
        assert run is not None
        assert (run.agent_id, run.status, run.model, run.has_ledger) == (
            "greeter", "succeeded", "mock-1", True)
        assert run.turns == 1  # one turn_started event
        runs = await store.list_runs(run_id=result.run_id)
        assert {r.agent_id for r in runs} == {"greeter"}
        summary = await store.get_session_summary("session_real")
        assert summary is not None
        assert (summary.first_input, summary.agent_id, summary.last_run_id) == (
            "Say hi", "greeter", result.run_id)
        rows = (await store.read_ledger(result.run_id)).rows
        kinds = [r.kind for r in rows]
        assert kinds.count("run") == 2 and kinds[-1] == "run"  # the finish row last
        assert all(r.record.type != "message_delta" for r in rows if r.kind == "event")


