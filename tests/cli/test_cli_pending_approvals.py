"""``prism runs`` and ``prism sessions show`` show the approvals a run waits for — ids and
arguments, a child run's call with the agent-tool call leading to it — and ``prism runs resolve``
on a run started from Python names what continues it (``prism.resume_agent_run``), not a ``prism
resume`` the command would refuse (issue 21, item 21). Through the real command in a subprocess,
on a SQLite file and on a PostgreSQL database of its own."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import prism
from prism.loops.contracts import SingleShotLoopOptions
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.stores import open_store

MODEL = prism.ModelConfig(provider="mock", model="ops")
PG_ENV = "PRISM_TEST_POSTGRES_URL"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, _private_store: Path,
              monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The store every ``prism`` command of the test uses (``PRISM_STORE``): the conftest's
    SQLite file, or a PostgreSQL database created for the test and dropped after it."""
    if request.param == "sqlite":
        yield f"sqlite:///{_private_store}"
        return
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"PostgreSQL tests need {PG_ENV}")
    import psycopg

    name = f"prism_cli_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = base.rsplit("/", 1)[0] + f"/{name}"
    monkeypatch.setenv("PRISM_STORE", url)
    try:
        yield url
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _prism(*argv: str) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "prism", *argv],
        capture_output=True, text=True, timeout=120, check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


@prism.tool(needs_approval=True)
def refund(order: int, reason: str = "damaged") -> str:
    """Refund an order."""
    return f"refunded {order}"


def _lead(store: Any, lead_turns: list[Any], child_turns: list[Any]) -> prism.Agent:
    child = prism.create_agent(
        model=MODEL, name="refunder", tools=[refund],
        provider=create_mock_provider(turns=child_turns),
        run_state=prism.RunStateOptions(store, "v1"),
    )
    return prism.create_agent(
        model=MODEL, name="lead", store=store, tools=[child.as_tool()],
        provider=create_mock_provider(turns=lead_turns),
        run_state=prism.RunStateOptions(store, "v1"),
    )


async def _python_child_waiting(url: str) -> tuple[str, str]:
    """A Python-started lead run whose agent-tool child waits to refund order 42."""
    store = await open_store(url)
    try:
        lead = _lead(
            store,
            [[provider_tool_call("c1", "refunder", {"input": "refund 42"}), provider_done()]],
            [[provider_tool_call("r1", "refund", {"order": 42}), provider_done()]],
        )
        session = lead.create_session()
        result = await session.run("Refund order 42")
        assert result.status == "suspended"
        return session.id, result.run_id
    finally:
        await store.aclose()


def test_prism_runs_and_sessions_show_list_pending_approvals_i21_a(
    tmp_path: Path, store_url: str
) -> None:
    session_id, lead = asyncio.run(_python_child_waiting(store_url))
    # a run the command started, waiting for its calculator call
    script = tmp_path / "script.json"
    calc = [provider_tool_call("k1", "calculator", {"expression": "6*7"}), provider_done()]
    script.write_text(json.dumps({"turns": [[e.to_dict() for e in calc]]}), "utf-8")
    code, _, err = _prism("run", "6*7?", "--model", f"mock:{script}", "--tool", "calculator",
                          "--approve-tools")
    assert code == 3, err
    own_run = next(x for x in reversed(err.splitlines()) if x.startswith("session ")).split()[4]

    code, out, err = _prism("runs")
    assert code == 0, err
    lines = out.splitlines()
    own = lines.index(next(x for x in lines if x.startswith(own_run)))
    assert lines[own + 1].startswith(
        '  waits for approval: calculator {"expression": "6*7"} (call k1, approval approval_'
    )
    head = lines.index(next(x for x in lines if x.startswith(lead)))
    approval = lines[head + 1]
    assert approval.startswith(
        '  waits for approval: refund {"order": 42, "reason": "damaged"} (call r1 in run run_'
    )
    assert " of agent refunder, through agent-tool call c1 (refunder), approval approval_" in approval
    assert sum("refund {" in x for x in lines) == 1  # the child's approval is listed once

    code, out, err = _prism("runs", "--json")
    items = {item["run_id"]: item for item in map(json.loads, out.splitlines())}
    (pending,) = items[lead]["pending"]
    assert (pending["tool_name"], pending["tool_call_id"], pending["agent_id"]) == (
        "refund", "r1", "lead"
    )
    assert json.loads(pending["arguments"]) == {"order": 42, "reason": "damaged"}
    (link,) = pending["chain"]
    assert (link["tool_call_id"], link["agent"]) == ("c1", "refunder")
    assert pending["waiting_since"].endswith("Z")
    assert approval.endswith(f"approval {pending['approval_id']})")

    code, out, err = _prism("sessions", "show", session_id)
    assert code == 0, err
    assert out.splitlines()[-1] == approval
    code, out, err = _prism("sessions", "show", session_id, "--json")
    (run,) = [x for x in map(json.loads, out.splitlines()) if x.get("type") == "run"]
    assert run["pending"] == [pending]


class _Killed(Exception):
    pass


class _DiesAfterFirstResult:
    """The stores of a process that dies right after the first tool result is stored."""

    def __init__(self, store: Any) -> None:
        self.store, self.dead = store, False

    async def append(self, entry: Any, **kw: Any) -> None:
        if self.dead:
            raise _Killed("gone")
        await self.store.append(entry, **kw)
        if entry.message is not None and entry.message.role == "tool":
            self.dead = True

    async def list(self, session_id: str) -> Any:
        return await self.store.list(session_id)

    async def read_branch(self, session_id: str, leaf_id: str) -> Any:
        return await self.store.read_branch(session_id, leaf_id)

    async def save_checkpoint(self, **kw: Any) -> Any:
        if self.dead:
            raise _Killed("gone")
        return await self.store.save_checkpoint(**kw)

    async def load_checkpoint(self, **kw: Any) -> Any:
        return await self.store.load_checkpoint(**kw)


def _desk(stores: Any, turns: list[Any]) -> prism.Agent:
    return prism.create_agent(
        id="desk", model=MODEL, store=stores, provider=create_mock_provider(turns=turns),
        tools=[prism.ToolDefinition(name="book", execute=lambda a, c: {"booked": c.tool_call_id})],
        loop=SingleShotLoopOptions(tool_concurrency=2),
        run_state=prism.RunStateOptions(stores, "v1", checkpoint_policy="every-turn"),
    )


def test_runs_resolve_on_a_python_run_names_resume_agent_run_i21_b(store_url: str) -> None:
    round_ = [provider_tool_call("c1", "book", {}), provider_tool_call("c2", "book", {}),
              provider_done()]

    async def crash() -> str:
        store = await open_store(store_url)
        try:
            session = _desk(_DiesAfterFirstResult(store), [round_]).create_session()
            with pytest.raises(Exception, match="gone"):  # the process "dies"
                await session.run("book both")
            return (await store.list_run_checkpoints(session_id=session.id))[0].key
        finally:
            await store.aclose()

    run_id = asyncio.run(crash())
    code, _, err = _prism("runs", "resolve", run_id, "c2", "--succeeded", "--result",
                          '{"booked": "c2"}')
    assert code == 0, err
    assert "prism resume" not in err
    assert err.strip().endswith(
        f'started from Python; continue it from Python with prism.resume_agent_run(agent, '
        f'"{run_id}") and the same agent definition'
    )
    # the command indeed refuses it, and what the hint says works
    code, _, err = _prism("resume", run_id)
    assert code == 2 and "not started by the prism command" in err

    async def follow_the_hint() -> Any:
        store = await open_store(store_url)
        try:
            return await prism.resume_agent_run(
                _desk(store, [[provider_text_delta("both booked"), provider_done()]]), run_id
            )
        finally:
            await store.aclose()

    result = asyncio.run(follow_the_hint())
    assert result.status == "succeeded" and result.text == "both booked"
