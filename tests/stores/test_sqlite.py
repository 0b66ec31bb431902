"""Tests for prism.stores.sqlite and prism.stores.open_store (DB-1..DB-9)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from prism.errors import PrismConfigError
from prism.ledger import RunLedger, start_run_record
from prism.runtime.checkpoints import CheckpointStore
from prism.store import BranchReadingSessionStore, SessionStore, new_session_entry
from prism.stores import SessionInfo, SqliteStore, open_store
from prism.testing._conformance import (
    run_checkpoint_store_conformance,
    run_ledger_conformance,
    run_session_store_conformance,
)
from prism.types import Message, TextContent


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(tmp_path / "prism.db") as s:
        yield s


def _entry(session_id: str, parent_id: str | None = None, text: str = "hi") -> object:
    return new_session_entry(
        "message",
        session_id=session_id,
        parent_id=parent_id,
        message=Message(role="user", content=(TextContent(text=text),)),
    )


# --------------------------------------------------------------------------- DB-9 conformance


async def test_db9_sqlite_session_store_conformance(store: SqliteStore) -> None:
    """DB-9/DB-5: SqliteStore passes the session-store suite (tip CAS, fork, idempotency)."""
    await run_session_store_conformance(store)


async def test_db9_sqlite_checkpoint_store_conformance(store: SqliteStore) -> None:
    """DB-9/DB-6: SqliteStore passes the checkpoint-store suite (CAS, fencing)."""
    await run_checkpoint_store_conformance(store)


async def test_db9_sqlite_ledger_conformance(store: SqliteStore) -> None:
    """DB-9/DB-7: SqliteStore passes the ledger suite (four tables, append order)."""
    await run_ledger_conformance(store)


async def test_db9_sqlite_memory_database_conformance() -> None:
    """DB-2/DB-9: a ``:memory:`` SqliteStore passes all three suites."""
    async with SqliteStore(":memory:") as s:
        await run_session_store_conformance(s)
        await run_checkpoint_store_conformance(s)
        await run_ledger_conformance(s)


def test_db1_sqlite_store_implements_the_three_protocols(tmp_path: Path) -> None:
    """DB-1: one object implements SessionStore (with read_branch), CheckpointStore, RunLedger."""
    s = SqliteStore(tmp_path / "x.db")
    assert isinstance(s, SessionStore)
    assert isinstance(s, BranchReadingSessionStore)
    assert isinstance(s, CheckpointStore)
    assert isinstance(s, RunLedger)


# --------------------------------------------------------------------------- DB-3 configuration


async def test_db3_wal_synchronous_normal_foreign_keys_and_busy_timeout(tmp_path: Path) -> None:
    """DB-3: WAL journal, synchronous=NORMAL, foreign keys on, the configured busy timeout."""
    async with SqliteStore(tmp_path / "p.db", busy_timeout_s=2.5) as s:
        pragmas = await s._call(
            lambda conn: tuple(
                conn.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
            )
        )
    assert pragmas == ("wal", 1, 1, 2500)


async def test_db3_blocking_work_runs_on_one_worker_thread(store: SqliteStore) -> None:
    """DB-3: every database call runs on the store's single worker thread, never the loop's."""
    loop_thread = threading.get_ident()
    idents = await asyncio.gather(*(store._call(lambda c: threading.get_ident()) for _ in range(5)))
    assert len(set(idents)) == 1
    assert idents[0] != loop_thread


async def test_db3_event_loop_stays_free_while_a_write_waits_for_the_lock(
    tmp_path: Path,
) -> None:
    """DB-3: an append blocked on another connection's lock does not block the event loop."""
    path = tmp_path / "locked.db"
    async with SqliteStore(path, busy_timeout_s=30) as s:
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # hold the write lock
        try:
            append = asyncio.create_task(s.append(_entry("session_lock")))  # type: ignore[arg-type]
            ticks = 0
            for _ in range(20):  # the loop keeps running other work meanwhile
                await asyncio.sleep(0)
                ticks += 1
            assert ticks == 20
            assert not append.done()  # still waiting for the lock, off the loop
        finally:
            blocker.execute("COMMIT")
            blocker.close()
        await append
        assert len(await s.list("session_lock")) == 1


async def test_db3_invalid_busy_timeout_is_refused(tmp_path: Path) -> None:
    """DB-1: busy_timeout_s must be a finite number >= 0."""
    with pytest.raises(ValueError):
        SqliteStore(tmp_path / "x.db", busy_timeout_s=-1)
    with pytest.raises(ValueError):
        SqliteStore(tmp_path / "x.db", busy_timeout_s=float("inf"))


# --------------------------------------------------------------------------- lifecycle


async def test_db1_data_survives_closing_and_reopening(tmp_path: Path) -> None:
    """DB-1/DB-8: entries, checkpoints and run rows are there after a new store opens the file."""
    path = tmp_path / "persist.db"
    root = _entry("session_p")
    run = start_run_record(run_id="run_p", session_id="session_p", branch_id=None, model=None)
    async with SqliteStore(path) as s:
        await s.append(root)  # type: ignore[arg-type]
        await s.save_checkpoint(
            namespace="prism.agent-run", key="run_p", value={"status": "running"},
            version=1, expected_version=0,
        )
        await s.append_run(run)
    async with SqliteStore(str(path)) as s2:
        assert await s2.list("session_p") == [root]
        record = await s2.load_checkpoint(namespace="prism.agent-run", key="run_p")
        assert record is not None and record.value == {"status": "running"}
        assert await s2.list_runs(run_id="run_p") == [run]


async def test_db1_closed_store_refuses_calls_and_aclose_is_idempotent(tmp_path: Path) -> None:
    """DB-1: after aclose() calls raise RuntimeError; aclose() may be called again."""
    s = SqliteStore(tmp_path / "c.db")
    await s.list("session_x")
    await s.aclose()
    await s.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await s.list("session_x")
    never_opened = SqliteStore(tmp_path / "never.db")
    await never_opened.aclose()
    assert not (tmp_path / "never.db").exists()


async def test_db3_cancelled_caller_leaves_the_store_usable(store: SqliteStore) -> None:
    """DB-3: cancelling a caller mid-call neither breaks the worker nor half-writes."""
    root = _entry("session_cancel")
    task = asyncio.create_task(store.append(root))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The queued write completes as one statement, or not at all; the store keeps working.
    listed = await store.list("session_cancel")
    assert listed in ([], [root])
    await store.append(_entry("session_cancel2"))  # type: ignore[arg-type]
    assert len(await store.list("session_cancel2")) == 1


async def test_db5_list_sessions_most_recent_first(store: SqliteStore) -> None:
    """list_sessions (tooling): one row per session, newest first, with the last entry id."""
    a1 = _entry("session_a")
    await store.append(a1)  # type: ignore[arg-type]
    b1 = _entry("session_b")
    await store.append(b1)  # type: ignore[arg-type]
    a2 = _entry("session_a", a1.id)  # type: ignore[attr-defined]
    await store.append(a2, expected_parent_id=a1.id)  # type: ignore[arg-type,attr-defined]
    infos = await store.list_sessions()
    assert [i.session_id for i in infos] == ["session_a", "session_b"]
    assert infos[0] == SessionInfo(
        session_id="session_a", entries=2, created_at=a1.timestamp,  # type: ignore[attr-defined]
        updated_at=a2.timestamp, last_entry_id=a2.id,  # type: ignore[attr-defined]
    )
    assert [i.session_id for i in await store.list_sessions(limit=1)] == ["session_a"]
    with pytest.raises(ValueError):
        await store.list_sessions(limit=0)


async def test_db7_ledger_reads_need_a_filter(store: SqliteStore) -> None:
    """DB-7: list_runs needs a session or a run id."""
    with pytest.raises(ValueError):
        await store.list_runs()


# --------------------------------------------------------------------------- DB-5 query plans


async def test_db5_read_branch_and_append_use_indexes_not_scans(store: SqliteStore) -> None:
    """DB-5/ARCH-15: the branch query and the append's checks search indexes (no table scan)."""
    from prism.stores import _sqlite_sessions as mod

    def plans(conn: sqlite3.Connection) -> list[str]:
        out = []
        for sql, params in (
            (mod.READ_BRANCH, ("s", "e")),
            (mod.APPEND, ("s", "e", "p", "message", None, "t", "k", "p", "{}", 0)),
            (mod.APPEND_DIAGNOSE, ("s", "e", "p", "k")),
            (mod.LIST, ("s",)),
        ):
            out += [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
        return out

    details = await store._call(plans)
    scans = [d for d in details if d.startswith("SCAN") and "prism_session_entries" in d
             and "chain" not in d]
    assert not scans, details


# --------------------------------------------------------------------------- DB-2 open_store


async def test_db2_open_store_maps_sqlite_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DB-2: sqlite:///relative.db, sqlite:////abs/path.db and sqlite://:memory:."""
    monkeypatch.chdir(tmp_path)
    rel = await open_store("sqlite:///relative.db")
    try:
        assert isinstance(rel, SqliteStore) and rel.path == "relative.db"
        assert (tmp_path / "relative.db").exists()
    finally:
        await rel.aclose()
    absolute = tmp_path / "sub" / "abs.db"
    absolute.parent.mkdir()
    abs_store = await open_store(f"sqlite:///{absolute}")
    try:
        assert isinstance(abs_store, SqliteStore) and abs_store.path == str(absolute)
        assert absolute.exists()
    finally:
        await abs_store.aclose()
    mem = await open_store("sqlite://:memory:", busy_timeout_s=1)
    try:
        assert isinstance(mem, SqliteStore) and mem.path == ":memory:"
        await mem.append(_entry("session_m"))  # type: ignore[arg-type]
        assert len(await mem.list("session_m")) == 1
    finally:
        await mem.aclose()


@pytest.mark.parametrize(
    "url", ["sqlite://relative.db", "sqlite://", "mysql://x/y", "relative.db", "sqlite:///"]
)
async def test_db2_open_store_refuses_other_urls(url: str) -> None:
    """DB-2: anything else raises PrismConfigError (ERR_PRISM_CONFIG)."""
    with pytest.raises(PrismConfigError) as info:
        await open_store(url)
    assert info.value.code == "ERR_PRISM_CONFIG"


def _use_store_in_child(store: SqliteStore) -> None:
    async def main() -> None:
        await store.append(_entry("session_child"))  # type: ignore[arg-type]
        assert len(await store.list("session_parent")) == 1
        await store.aclose()

    asyncio.run(main())


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork with threads (3.12+)
async def test_db3_a_forked_child_opens_its_own_worker(tmp_path: Path) -> None:
    """DB-3: a store used before ``fork()`` works in the child (a new worker thread and
    connection there), and the parent's keeps working."""
    import multiprocessing

    store = SqliteStore(tmp_path / "fork.db")
    await store.append(_entry("session_parent"))  # type: ignore[arg-type]
    child = multiprocessing.get_context("fork").Process(target=_use_store_in_child, args=(store,))
    child.start()
    await asyncio.to_thread(child.join, 30)  # a hang guard; a broken store never answers
    if child.is_alive():
        child.kill()
        child.join()
    assert child.exitcode == 0
    assert len(await store.list("session_child")) == 1
    await store.aclose()
