"""``prism runs`` (the runs to resume), ``prism sessions show`` with a run that never stored its
prompt, and ``prism runs resolve`` (the operator's repair of an ambiguous call)."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prism.cli import main
from prism.loops.contracts import SingleShotLoopOptions
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.runtime.durable import RunStateOptions, load_agent_run_state, resume_agent_run
from prism.stores.sqlite import SqliteStore
from prism.types import ModelConfig, ProviderEvent, ToolDefinition

CALC = [provider_tool_call("c1", "calculator", {"expression": "6*7"}), provider_done()]
ANSWER = [provider_text_delta("It is 42."), provider_done()]
MODEL = ModelConfig(provider="mock", model="ops")


def _script(tmp_path: Path, turns: Sequence[Sequence[ProviderEvent]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": [[e.to_dict() for e in t] for t in turns]}), "utf-8")
    return f"mock:{path}"


def _run(argv: Sequence[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err, stdin=io.StringIO())
    return code, out.getvalue(), err.getvalue()


def _ids(err: str) -> tuple[str, str]:
    line = next(x for x in reversed(err.splitlines()) if x.startswith("session "))
    parts = line.split()
    return parts[1], parts[4]


def test_prism_runs_lists_what_prism_resume_continues(tmp_path: Path) -> None:
    model = _script(tmp_path, [CALC])
    code, _, err = _run(["run", "6*7?", "--model", model, "--tool", "calculator",
                         "--approve-tools"])
    assert code == 3, err
    session_id, run_id = _ids(err)
    code, out, err = _run(["runs"])
    assert code == 0, err
    head, approval = out.splitlines()
    assert head == (
        f"{run_id}  session {session_id}  suspended (waiting for approval) — prism resume "
        f"{run_id} --approve (or --deny)"
    )
    assert approval.startswith(
        '  waits for approval: calculator {"expression": "6*7"} (call c1, approval approval_'
    )
    code, out, _ = _run(["runs", "--json", "--session", session_id])
    (item,) = [json.loads(line) for line in out.splitlines()]
    assert item["run_id"] == run_id and item["status"] == "suspended" and item["resumable"]
    (pending,) = item["pending"]
    assert (pending["tool_name"], pending["tool_call_id"]) == ("calculator", "c1")
    _script(tmp_path, [ANSWER])
    assert _run(["resume", run_id, "--approve"])[0] == 0
    code, out, err = _run(["runs"])
    assert code == 0 and out == "" and "no runs to resume" in err
    code, out, _ = _run(["runs", "--all"])
    assert out.startswith(f"{run_id}  session {session_id}  succeeded")
    assert _run(["runs", "--limit", "0"])[0] == 2


class _Killed(Exception):
    pass


class _DiesAtFirstAppend:
    """The stores of a process that dies when it appends the prompt."""

    def __init__(self, store: SqliteStore) -> None:
        self.store, self.dead = store, False

    async def append(self, entry: Any, **kw: Any) -> None:
        self.dead = True
        raise _Killed("killed")

    async def list(self, session_id: str) -> Any:
        return await self.store.list(session_id)

    async def save_checkpoint(self, **kw: Any) -> Any:
        if self.dead:
            raise _Killed("gone")
        return await self.store.save_checkpoint(**kw)

    async def load_checkpoint(self, **kw: Any) -> Any:
        return await self.store.load_checkpoint(**kw)


def test_a_run_that_never_stored_its_prompt_is_shown_and_listed(_private_store: Path) -> None:
    async def crash() -> tuple[str, str]:
        async with SqliteStore(_private_store) as store:
            dying = _DiesAtFirstAppend(store)
            agent = create_agent(
                id="desk", model=MODEL, provider=create_mock_provider(turns=[ANSWER]),
                store=dying,
                run_state=RunStateOptions(dying, "v1", checkpoint_policy="every-turn"),
            )
            session = agent.create_session()
            try:
                await session.run("remember me")
            except Exception:
                pass
            loaded = await store.list_run_checkpoints(session_id=session.id)
            return session.id, loaded[0].key

    session_id, run_id = asyncio.run(crash())
    code, out, err = _run(["sessions", "show", session_id])
    assert code == 0, err
    # started from Python: the Python call continues it, not prism resume
    assert (
        f"run {run_id}: interrupted (running when its process ended) — started from Python; "
        f'continue it from Python with prism.resume_agent_run(agent, "{run_id}") and the same '
        "agent definition"
    ) in out
    code, out, _ = _run(["runs"])
    assert run_id in out and session_id in out


def test_prism_runs_resolve_refuses_to_reject_a_call_that_ran(_private_store: Path) -> None:
    """The parallel round of two calls: both ran, the process died after c1's row. Rejecting c1
    is refused (its result is stored); c2 is resolved as succeeded; the run then finishes."""
    power: list[bool] = []

    class Dying:
        def __init__(self, store: SqliteStore) -> None:
            self.store = store

        async def append(self, entry: Any, **kw: Any) -> None:
            if power:
                raise _Killed("gone")
            await self.store.append(entry, **kw)
            m = entry.message
            if m is not None and m.role == "tool" and m.content[0].tool_call_id == "c1":
                power.append(True)

        async def list(self, session_id: str) -> Any:
            return await self.store.list(session_id)

        async def read_branch(self, session_id: str, leaf_id: str) -> Any:
            return await self.store.read_branch(session_id, leaf_id)

        async def save_checkpoint(self, **kw: Any) -> Any:
            if power:
                raise _Killed("gone")
            return await self.store.save_checkpoint(**kw)

        async def load_checkpoint(self, **kw: Any) -> Any:
            return await self.store.load_checkpoint(**kw)

    def agent(stores: Any, turns: list[Any]) -> Any:
        return create_agent(
            id="desk", model=MODEL, provider=create_mock_provider(turns=turns), store=stores,
            tools=[ToolDefinition(name="book", execute=lambda a, c: {"booked": c.tool_call_id})],
            loop=SingleShotLoopOptions(tool_concurrency=2),
            run_state=RunStateOptions(stores, "v1", checkpoint_policy="every-turn"),
        )

    round_ = [provider_tool_call("c1", "book", {}), provider_tool_call("c2", "book", {}),
              provider_done()]

    async def crash() -> str:
        async with SqliteStore(_private_store) as store:
            session = agent(Dying(store), [round_]).create_session()
            try:
                await session.run("book both")
            except Exception:
                pass
            return (await store.list_run_checkpoints(session_id=session.id))[0].key

    run_id = asyncio.run(crash())
    code, _, err = _run(["runs", "resolve", run_id, "c1", "--rejected"])
    assert code == 2 and "has a stored result" in err
    code, _, err = _run(["runs", "resolve", run_id, "c2", "--succeeded", "--result",
                         '{"booked": "c2"}'])
    assert code == 0, err
    # started from Python: the hint is the Python call, not a prism resume it would refuse
    assert "prism resume" not in err
    assert f'prism.resume_agent_run(agent, "{run_id}")' in err
    assert _run(["runs", "resolve", run_id, "c2", "--rejected", "--result", "1"])[0] == 2

    async def finish() -> Any:
        async with SqliteStore(_private_store) as store:
            loaded = await load_agent_run_state(store, run_id=run_id)
            assert [e["status"] for e in loaded.state["pending_calls"]] == ["dispatched", "ready"]
            await _run_async(["runs", "resolve", run_id, "c1", "--succeeded"])
            return await resume_agent_run(agent(store, [ANSWER]), run_id)

    result = asyncio.run(finish())
    assert result.status == "succeeded" and result.text == "It is 42."


async def _run_async(argv: Sequence[str]) -> tuple[int, str, str]:
    return await asyncio.to_thread(_run, argv)


def test_prism_resume_shows_the_calls_it_waits_for_with_their_arguments(tmp_path: Path) -> None:
    model = _script(tmp_path, [CALC])
    code, _, err = _run(["run", "6*7?", "--model", model, "--tool", "calculator",
                         "--approve-tools"])
    assert code == 3, err
    _, run_id = _ids(err)
    code, _, err = _run(["resume", run_id])  # no decision, no terminal
    assert code == 2
    assert "pass --approve or --deny" in err
    assert '⏸ calculator({"expression": "6*7"})  call c1' in err
