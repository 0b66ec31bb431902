"""Durable turns that cost little (DUR-3, DUR-7, DB-6, DB-10): an ``every-turn`` run whose
session store is its checkpoint store (SQLite, PostgreSQL) writes each turn's entries and its
envelope in one transaction.

Counted, never timed: the statements and commits a turn costs do not grow with the history; a
refused envelope write stores none of the turn's entries; what a load returns is what each write
handed over; the session's leaf goes back to the last stored entry when held entries could not
be written.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from prism.errors import AgentRunError, CheckpointConflictError
from prism.limits import UNLIMITED, RunLimits
from prism.loops.contracts import SingleShotLoopOptions
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.runtime.checkpoints import AGENT_RUN_NAMESPACE, SessionAppend
from prism.runtime.durable import RunStateOptions
from prism.store import MemorySessionStore
from prism.stores import SqliteStore
from prism.stores.postgres import PostgresStore
from prism.types import ModelConfig, ToolDefinition

MODEL = ModelConfig(provider="mock", model="turn-writes")
LIMITS = RunLimits(
    max_turns=UNLIMITED, max_provider_attempts=UNLIMITED, max_tool_rounds=UNLIMITED,
    max_tool_calls=UNLIMITED,
)


def _lookup(arguments: dict[str, Any], context: Any) -> Any:
    return {"rows": [{"id": f"{arguments['q']}-{i}", "status": "shipped"} for i in range(8)]}


def _script(n: int) -> list[list[Any]]:
    """N-1 turns of text and two tool calls, then a final text turn."""
    turns: list[list[Any]] = [
        [
            provider_text_delta(f"turn {t}: looking both up"),
            provider_tool_call(f"c{t}a", "lookup", {"q": f"a{t}"}),
            provider_tool_call(f"c{t}b", "lookup", {"q": f"b{t}"}),
            provider_done(),
        ]
        for t in range(n - 1)
    ]
    return [*turns, [provider_text_delta("done"), provider_done()]]


def _agent(store: Any, n: int, checkpoints: Any = None, tool: Any = _lookup) -> Any:
    return create_agent(
        id="turns", model=MODEL, store=store, limits=LIMITS,
        provider=create_mock_provider(turns=_script(n)),
        tools=[ToolDefinition(name="lookup", execute=tool, parameters={"type": "object"})],
        loop=SingleShotLoopOptions(tool_concurrency=2),
        run_state=RunStateOptions(
            store if checkpoints is None else checkpoints, "v1", checkpoint_policy="every-turn"
        ),
    )


class _Counter:
    """Statements and committed write transactions of the connections it traces."""

    def __init__(self) -> None:
        self.statements = 0
        self.commits = 0
        self._open = False
        self._wrote = False
        self._last = ""

    def __call__(self, text: str) -> None:
        if text == self._last:
            # sqlite3 reports each trigger program a statement runs (the summaries of schema
            # migration 3) with that statement's text again: part of the statement, not another
            return
        self._last = text
        word = text.split(None, 1)[0].upper()
        self.statements += 1
        if word == "BEGIN":
            self._open, self._wrote = True, False
        elif word == "COMMIT":
            self.commits += self._wrote
            self._open = False
        elif word == "ROLLBACK":
            self._open = False
        elif word in ("INSERT", "UPDATE", "DELETE"):
            if self._open:
                self._wrote = True
            else:
                self.commits += 1


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Counter]:
    counter = _Counter()
    connect = sqlite3.connect

    def traced_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(counter)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced_connect)
    yield counter


async def _counted_run(path: Path, n: int, counter: _Counter) -> tuple[int, int]:
    async with SqliteStore(path) as store:
        await store.list("warm-up")  # opened and migrated before counting
        before = (counter.statements, counter.commits)
        result = await _agent(store, n).create_session().run("go")
        assert result.status == "succeeded"
        return counter.statements - before[0], counter.commits - before[1]


async def test_db10_sqlite_turn_writes_are_constant_in_the_history(
    tmp_path: Path, traced: _Counter
) -> None:
    """An every-turn run on SQLite: the statements and commits of a tool turn are the same at
    N=20 and N=200 (counted), three commits per tool turn of two parallel calls (each call's
    own dispatch marking right before its ``execute``, the first with the assistant message;
    the boundary with the result rows) — one more than one marking for the round
    (issue 21, item 13)."""
    short = await _counted_run(tmp_path / "short.db", 20, traced)
    long = await _counted_run(tmp_path / "long.db", 200, traced)
    per_turn = ((long[0] - short[0]) / 180, (long[1] - short[1]) / 180)
    assert per_turn[1] == 3
    assert per_turn[0] == int(per_turn[0])  # exactly the same statements every turn
    assert per_turn[0] <= 16
    # the short run's turns cost the same: only the run's setup and end differ
    assert short[1] - 19 * 3 <= 6


async def test_db6_refused_envelope_write_stores_none_of_the_turns_entries(
    tmp_path: Path,
) -> None:
    """A lost compare-and-set at a turn boundary (another writer took the run) fails the run;
    the result rows that write carried are not stored, and the session's leaf is the last
    stored entry."""
    async with SqliteStore(tmp_path / "s.db") as store:
        calls = 0
        run_ids: list[str] = []

        async def intruder(arguments: dict[str, Any], context: Any) -> Any:
            nonlocal calls
            calls += 1
            run_ids.append(context.run_id)
            if calls == 4:  # the second round: another writer moves the envelope on
                record = await store.load_checkpoint(
                    namespace=AGENT_RUN_NAMESPACE, key=context.run_id
                )
                assert record is not None
                await store.save_checkpoint(
                    namespace=AGENT_RUN_NAMESPACE, key=context.run_id, value=record.value,
                    version=record.version + 1, expected_version=record.version,
                )
            return {"ok": calls}

        session = _agent(store, 5, tool=intruder).create_session()
        with pytest.raises(AgentRunError) as info:
            await session.run("go")
        assert isinstance(info.value.__cause__, CheckpointConflictError)
        stored = await store.list(session.id)
        answered = [
            p.tool_call_id
            for e in stored if e.message is not None
            for p in e.message.content if getattr(p, "tool_call_id", None)
        ]
        assert answered == ["c0a", "c0b"]  # the second round's rows went with the lost write
        assert info.value.result.leaf_id == stored[-1].id
        assert session.leaf_id == stored[-1].id


class _Checked:
    """One SQLite store as session store and checkpoint store; after each combined write it
    loads the checkpoint and the session back and compares them with what it was handed."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner
        self.writes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def save_checkpoint_with_entries(
        self, *, entries: list[SessionAppend], **kwargs: Any
    ) -> Any:
        record = await self.inner.save_checkpoint_with_entries(entries=entries, **kwargs)
        self.writes += 1
        loaded = await self.inner.load_checkpoint(
            namespace=kwargs["namespace"], key=kwargs["key"]
        )
        assert loaded is not None and loaded.value == kwargs["value"]
        assert loaded.version == record.version == kwargs["version"]
        if entries:
            session_id = entries[0].entry.session_id
            stored = await self.inner.read_branch(session_id, entries[-1].entry.id)
            assert stored[-len(entries):] == [a.entry for a in entries]
        return record


async def test_dur3_every_write_loads_back_as_handed_over(tmp_path: Path) -> None:
    """Each combined write loads back exactly as a whole-value save stores it: the envelope
    equal to the value handed over, the entries equal to the appended ones."""
    async with SqliteStore(tmp_path / "s.db") as inner:
        store = _Checked(inner)
        result = await _agent(store, 6).create_session().run("go")
        assert result.status == "succeeded"
        assert store.writes >= 2 * 5


async def test_dur7_separate_stores_keep_separate_writes(tmp_path: Path) -> None:
    """A session store that is not the checkpoint store: appends go to it at once (nothing is
    held), and the run still succeeds."""
    sessions = MemorySessionStore()
    async with SqliteStore(tmp_path / "s.db") as checkpoints:
        session = _agent(sessions, 4, checkpoints=checkpoints).create_session()
        result = await session.run("go")
        assert result.status == "succeeded"
        assert len(await sessions.list(session.id)) == 1 + 3 * 3 + 1


async def test_db10_postgres_turn_writes_two_commits_per_turn(pg_url: str, pg_schema: str) -> None:
    """The same run on PostgreSQL: the run succeeds and the stored branch is complete."""
    store = await PostgresStore.connect(pg_url, schema=pg_schema, max_size=2)
    try:
        session = _agent(store, 6).create_session()
        result = await asyncio.wait_for(session.run("go"), 60)
        assert result.status == "succeeded"
        branch = await store.read_branch(session.id, result.leaf_id or "")
        assert len(branch) == 1 + 5 * 3 + 1
        loaded = await store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=result.run_id)
        assert loaded is not None and loaded.value["leaf_id"] == result.leaf_id
    finally:
        await store.aclose()
