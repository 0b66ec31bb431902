"""Finding every run to resume: ``prism.list_agent_runs`` over the stores' run index (memory,
SQLite, PostgreSQL) — a run killed after its first checkpoint but before its input was stored
included, though its session holds no entry of it — and a clear configuration error for a
checkpoint store without the index."""

from __future__ import annotations

from typing import Any

import pytest

import prism
from prism.errors import PrismConfigError
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import Agent, create_agent
from prism.runtime.checkpoints import AgentRunIndex, MemoryCheckpointStore
from prism.runtime.durable import RunStateOptions, list_agent_runs, resume_agent_run
from prism.testing import run_checkpoint_store_conformance
from prism.types import ModelConfig, ToolDefinition

MODEL = ModelConfig(provider="mock", model="index")
TEXT = [provider_text_delta("hi"), provider_done()]
CALL = [provider_tool_call("c1", "pay", {"amount": 1}), provider_done()]


class Killed(Exception):
    """The process died."""


class DiesOnFirstAppend:
    """The stores of a process that dies at its first session append (the run's input):
    that append and every later write raise."""

    def __init__(self, sessions: Any, checkpoints: Any) -> None:
        self.sessions, self.checkpoints, self.dead = sessions, checkpoints, False

    async def append(self, entry: Any, **kw: Any) -> None:
        self.dead = True
        raise Killed("killed before the input was stored")

    async def list(self, session_id: str) -> Any:
        return await self.sessions.list(session_id)

    async def save_checkpoint(self, **kw: Any) -> Any:
        if self.dead:
            raise Killed("gone")
        return await self.checkpoints.save_checkpoint(**kw)

    async def load_checkpoint(self, **kw: Any) -> Any:
        return await self.checkpoints.load_checkpoint(**kw)


def _agent(stores: tuple[Any, Any], turns: list[Any], *, policy: str = "on-suspend") -> Agent:
    store, checkpoints = stores
    return create_agent(
        id="desk",
        model=MODEL,
        provider=create_mock_provider(turns=turns),
        tools=[ToolDefinition(name="pay", execute=lambda a, c: a)],
        store=store,
        run_state=RunStateOptions(
            checkpoints, "v1", interrupt_before_tool=True, checkpoint_policy=policy  # type: ignore[arg-type]
        ),
    )


async def test_every_resumable_run_is_listed_even_one_whose_input_was_never_stored(
    durable_stores: tuple[Any, Any],
) -> None:
    sessions, checkpoints = durable_stores
    assert isinstance(checkpoints, AgentRunIndex)
    # a run killed after its first checkpoint, before its input was appended
    dying = DiesOnFirstAppend(sessions, checkpoints)
    killed = _agent((dying, dying), [TEXT], policy="every-turn").create_session()
    with pytest.raises(Exception, match="killed before the input"):
        await killed.run("remember me")
    assert await sessions.list(killed.id) == []  # no entry names the run
    # a suspended run and a finished one in another session
    waiting = _agent(durable_stores, [CALL]).create_session()
    suspended = await waiting.run("pay 1")
    done_session = _agent(durable_stores, [CALL]).create_session()
    first = await done_session.run("pay 1")
    await resume_agent_run(_agent(durable_stores, [TEXT]), first.run_state, decision="approve")

    runs = await prism.list_agent_runs(checkpoints, session_id=killed.id)
    assert [(r.session_id, r.status) for r in runs] == [(killed.id, "running")]
    every = {r.run_id: r for r in await list_agent_runs(checkpoints)}
    assert runs[0].run_id in every and suspended.run_id in every
    assert first.run_id not in every  # finished: not resumable
    assert every[suspended.run_id].interruption is not None
    assert every[suspended.run_id].version == suspended.run_state.version
    finished = await list_agent_runs(checkpoints, session_id=done_session.id, status=None)
    assert [(r.run_id, r.status) for r in finished] == [(first.run_id, "succeeded")]
    only = await list_agent_runs(checkpoints, status="suspended", limit=500)
    assert suspended.run_id in {r.run_id for r in only}
    assert all(r.status == "suspended" for r in only)

    # what a worker does with the listing: resume the run that never stored its input
    resumed = await resume_agent_run(_agent(durable_stores, [TEXT], policy="every-turn"),
                                     runs[0])
    assert resumed.status == "succeeded" and resumed.text == "hi"
    assert [m.role for e in await sessions.list(killed.id) if (m := e.message)] == [
        "user", "assistant"
    ]
    assert await list_agent_runs(checkpoints, session_id=killed.id) == []


async def test_a_store_without_the_run_index_gets_a_config_error() -> None:
    class Plain:
        async def save_checkpoint(self, **kw: Any) -> Any: ...

        async def load_checkpoint(self, **kw: Any) -> Any: ...

    with pytest.raises(PrismConfigError, match="cannot list runs"):
        await list_agent_runs(Plain())  # type: ignore[arg-type]
    store = MemoryCheckpointStore()
    with pytest.raises(PrismConfigError, match="unknown run status"):
        await list_agent_runs(store, status="paused")  # type: ignore[arg-type]
    with pytest.raises(PrismConfigError, match="limit"):
        await list_agent_runs(store, limit=0)


async def test_the_conformance_suite_checks_the_run_index() -> None:
    """A store whose index ignores the session filter fails the suite."""

    class Sloppy(MemoryCheckpointStore):
        async def list_run_checkpoints(self, **kw: Any) -> Any:
            kw.pop("session_id", None)
            return await super().list_run_checkpoints(**kw)

    await run_checkpoint_store_conformance(MemoryCheckpointStore())
    with pytest.raises(AssertionError, match="a session's runs"):
        await run_checkpoint_store_conformance(Sloppy())


async def test_a_sqlite_database_of_schema_1_gets_its_runs_indexed(tmp_path: Any) -> None:
    """Migration 2 fills the run-index columns of the runs stored before it (and leaves a value
    that is not JSON alone)."""
    import json
    import sqlite3

    from prism._util import now_iso
    from prism.stores._migrations import load_migrations
    from prism.stores.sqlite import SqliteStore

    path = tmp_path / "old.db"
    first = load_migrations("sqlite")[0]
    conn = sqlite3.connect(path)
    for statement in first.statements():
        conn.execute(statement)
    conn.execute("CREATE TABLE prism_schema_migrations (version INTEGER PRIMARY KEY, "
                 "name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at TEXT NOT NULL)")
    conn.execute("INSERT INTO prism_schema_migrations VALUES (1, ?, ?, ?)",
                 (first.name, first.checksum, now_iso()))
    rows = [
        ("run_old", {"session_id": "s_old", "status": "suspended"}),
        ("run_done", {"session_id": "s_old", "status": "succeeded"}),
    ]
    for key, value in rows:
        conn.execute("INSERT INTO prism_checkpoints (namespace, key, version, value, created_at, "
                     "updated_at) VALUES ('prism.agent-run', ?, 1, ?, ?, ?)",
                     (key, json.dumps(value), now_iso(), now_iso()))
    conn.execute("INSERT INTO prism_checkpoints (namespace, key, version, value, created_at, "
                 "updated_at) VALUES ('prism.agent-run', 'run_bad', 1, 'not json', 'x', 'x')")
    conn.commit()
    conn.close()
    async with SqliteStore(path) as store:
        resumable = await store.list_run_checkpoints(resumable=True)
        assert [r.key for r in resumable] == ["run_old"]
        every = await store.list_run_checkpoints(session_id="s_old")
        assert sorted(r.key for r in every) == ["run_done", "run_old"]


async def test_sqlite_listings_search_the_run_index(tmp_path: Any) -> None:
    """A session's runs and the resumable runs are index searches, not namespace scans."""
    import sqlite3

    from prism.stores._checkpoints import run_listing
    from prism.stores.sqlite import SqliteStore

    path = tmp_path / "plan.db"
    async with SqliteStore(path):
        pass
    conn = sqlite3.connect(path)
    for kw, index in (
        ({"session_id": "s", "resumable": False}, "prism_checkpoints_run_session"),
        ({"session_id": "s", "resumable": True}, "prism_checkpoints_run_session"),
        ({"session_id": None, "resumable": True}, "prism_checkpoints_run_resumable"),
    ):
        query, params = run_listing(
            "prism_checkpoints", "?", statuses=("running",), limit=5,
            resumable_test="run_resumable = 1", index_hints=True, **kw,  # type: ignore[arg-type]
        )
        plan = " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + query, params))
        assert f"USING INDEX {index}" in plan, plan
    conn.close()
