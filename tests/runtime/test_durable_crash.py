"""Crash safety of ``every-turn`` durable runs without approval gating, with the memory stores
(DB-10, DUR-7, DUR-20, DUR-22).

A crash is simulated by stores that *die*: from a chosen point on, every session append and
checkpoint save raises, so nothing the dying leg does afterwards (its failure path included)
reaches the stores — they hold exactly what a process killed at that point leaves behind. A new
agent over the same (revived) stores then recovers the run with ``resume_agent_run``.

What must hold:

* the first ``running`` envelope is written before the input is appended, with the input, so a
  crash right after the append resumes and the input ends up on the branch exactly once;
* each host tool dispatch is recorded as ``dispatched`` before its side effect, so a crash inside
  a tool is reported (DUR-20) and never silently re-run, and the round's provider turn is not
  requested again;
* a dispatched call whose result row is stored is adopted on resume (not ambiguous);
* ``on-suspend`` and non-durable runs write nothing for a tool call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from prism.errors import AgentRunError, AgentRunStateError
from prism.loops.contracts import SingleShotLoopOptions
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import MockProvider, MockScriptItem, create_mock_provider
from prism.runtime.agent import Agent, create_agent
from prism.runtime.checkpoints import MemoryCheckpointStore
from prism.runtime.durable import (
    RunStateOptions,
    load_agent_run_state,
    resume_agent_run,
    save_agent_run_state,
)
from prism.store import MemorySessionStore, SessionEntry, new_session_entry
from prism.types import (
    Message,
    ModelConfig,
    TextContent,
    ToolCallContent,
    ToolDefinition,
    ToolResultContent,
)

MODEL = ModelConfig(provider="mock", model="demo")
AMBIGUOUS = "Ambiguous dispatched tool requires operator resolution"


class Crash(Exception):
    """What a dead store raises."""


@dataclass
class Power:
    """Shared by the stores of one world: ``dead`` makes every write raise."""

    dead: bool = False
    die_after: Callable[[SessionEntry], bool] | None = None
    """Die right after a session append this returns True for."""


class DyingSessionStore(MemorySessionStore):
    def __init__(self, power: Power) -> None:
        super().__init__()
        self.power = power

    async def append(self, entry: SessionEntry, **kw: Any) -> None:
        if self.power.dead:
            raise Crash("session store is gone")
        await super().append(entry, **kw)
        if self.power.die_after is not None and self.power.die_after(entry):
            self.power.dead = True


class DyingCheckpoints(MemoryCheckpointStore):
    def __init__(self, power: Power) -> None:
        super().__init__()
        self.power = power
        self.saves: list[dict[str, Any]] = []

    async def save_checkpoint(self, **kw: Any) -> Any:
        if self.power.dead:
            raise Crash("checkpoint store is gone")
        record = await super().save_checkpoint(**kw)
        self.saves.append(json.loads(json.dumps(kw["value"])))
        return record


def tool_turn(*ids: str) -> list[MockScriptItem]:
    return [*(provider_tool_call(i, "record", {"key": i}) for i in ids), provider_done()]


def text_turn(text: str) -> list[MockScriptItem]:
    return [provider_text_delta(text), provider_done()]


@dataclass
class World:
    """Stores that can die, the tool's side-effect log, the providers of every process."""

    power: Power = field(default_factory=Power)
    effects: list[str] = field(default_factory=list)
    providers: list[MockProvider] = field(default_factory=list)
    die_in_tool: str | None = None
    """Die inside this call's tool: ``"<call id>:before"`` or ``"<call id>:after"`` its effect."""
    store: DyingSessionStore = field(init=False)
    checkpoints: DyingCheckpoints = field(init=False)

    def __post_init__(self) -> None:
        self.store = DyingSessionStore(self.power)
        self.checkpoints = DyingCheckpoints(self.power)

    def record(self, args: dict[str, Any], ctx: Any) -> Any:
        if self.die_in_tool == f"{ctx.tool_call_id}:before":
            self.power.dead = True
            raise Crash("killed before the side effect")
        self.effects.append(ctx.tool_call_id)
        if self.die_in_tool == f"{ctx.tool_call_id}:after":
            self.power.dead = True
            raise Crash("killed after the side effect")
        return {"recorded": args["key"]}

    def agent(self, turns: list[list[MockScriptItem]], **kw: Any) -> Agent:
        provider = create_mock_provider(turns=turns)
        self.providers.append(provider)
        kw.setdefault(
            "run_state", RunStateOptions(self.checkpoints, "v1", checkpoint_policy="every-turn")
        )
        return create_agent(
            model=MODEL,
            id="desk",
            provider=provider,
            store=self.store,
            tools=[
                ToolDefinition(
                    name="record",
                    execute=self.record,
                    parameters={"type": "object", "properties": {"key": {"type": "string"}}},
                )
            ],
            **kw,
        )

    def revive(self) -> None:
        """A new process: the stores answer again, nothing dies any more."""
        self.power.dead = False
        self.power.die_after = None
        self.die_in_tool = None

    async def crash(self, session_id: str, turns: list[list[MockScriptItem]]) -> str:
        """Run until the stores die; return the run id."""
        session = self.agent(turns).create_session(session_id)
        with pytest.raises((AgentRunError, Crash)):
            await session.run("go")
        self.revive()
        return run_of(await self.store.list(session_id))


def run_of(entries: Any) -> str:
    run_ids = [e.run_id for e in entries if e.run_id is not None]
    assert run_ids, "the run stored nothing"
    return str(run_ids[-1])


def shape(entries: Any) -> list[str]:
    """``role[text or call ids or answered call id]`` of each message entry."""
    out = []
    for entry in entries:
        m: Message | None = entry.message
        if m is None:
            continue
        calls = [p.id for p in m.content if isinstance(p, ToolCallContent)]
        results = [p.tool_call_id for p in m.content if isinstance(p, ToolResultContent)]
        text = "".join(p.text for p in m.content if isinstance(p, TextContent))
        out.append(f"{m.role}[{','.join(calls or results) or text}]")
    return out


def pending(state: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["call"]["id"], e["status"]) for e in state.get("pending_calls", [])]


async def seed(store: MemorySessionStore, session_id: str) -> str:
    entry = new_session_entry(
        "message",
        session_id=session_id,
        parent_id=None,
        message=Message(role="user", content=(TextContent(text="hello"),)),
    )
    await store.append(entry)
    return entry.id


# --------------------------------------------------------------------------- the marking


async def test_db10_every_turn_records_each_dispatch_before_its_side_effect() -> None:
    """DB-10/DUR-20: before a tool runs, the envelope lists it ``dispatched``, the rest of its
    round ``ready``, calls whose rows are stored not at all, and the leaf inside the round."""
    w = World()
    seen: list[tuple[list[tuple[str, str]], str | None, list[str]]] = []

    async def spy(args: dict[str, Any], ctx: Any) -> Any:
        loaded = await load_agent_run_state(w.checkpoints, run_id=ctx.run_id)
        state = loaded.state
        assert state["status"] == "running"
        branch = await w.store.read_branch(ctx.session_id, state["leaf_id"])
        seen.append((pending(state), state.get("leaf_id"), shape(branch)))
        return {}

    agent = create_agent(
        model=MODEL, id="desk", store=w.store,
        provider=create_mock_provider(turns=[tool_turn("c1", "c2"), text_turn("done")]),
        tools=[ToolDefinition(name="record", execute=spy)],
        run_state=RunStateOptions(w.checkpoints, "v1", checkpoint_policy="every-turn"),
    )
    result = await agent.create_session().run("go")
    assert result.status == "succeeded"
    assert [s[0] for s in seen] == [
        [("c1", "dispatched"), ("c2", "ready")],
        [("c2", "dispatched")],
    ]
    assert [s[2] for s in seen] == [
        ["user[go]", "assistant[c1,c2]"],
        ["user[go]", "assistant[c1,c2]", "tool[c1]"],
    ]
    # the boundary after the round clears the list; the terminal write too
    statuses = [(s["status"], pending(s)) for s in w.checkpoints.saves]
    assert statuses == [
        ("running", []),  # before the input is appended (with the input)
        ("running", []),  # boundary 1
        ("running", [("c1", "dispatched"), ("c2", "ready")]),
        ("running", [("c2", "dispatched")]),
        ("running", []),  # boundary 2
        ("succeeded", []),
    ]
    assert "input" in w.checkpoints.saves[0] and "input" not in w.checkpoints.saves[1]


async def test_db10_parallel_round_dispatches_each_call_by_its_own_write_i21_13() -> None:
    """DB-10, issue 21 item 13: in a parallel round each call is ``dispatched`` in the stored
    envelope before it runs, by a write of its own made right before its ``execute``; a call
    still waiting for its write is ``ready`` (a crash then re-dispatches it instead of
    reporting it ambiguous)."""
    w = World()
    executing: list[tuple[str, list[tuple[str, str]]]] = []

    class Slow(MemoryCheckpointStore):
        writes = 0

        async def save_checkpoint(self, **kw: Any) -> Any:
            import asyncio

            Slow.writes += 1
            await asyncio.sleep(0)  # let the other workers reach their marking meanwhile
            await asyncio.sleep(0)
            return await super().save_checkpoint(**kw)

    checkpoints = Slow()

    async def spy(args: dict[str, Any], ctx: Any) -> Any:
        loaded = await load_agent_run_state(checkpoints, run_id=ctx.run_id)
        executing.append((ctx.tool_call_id, pending(loaded.state)))
        return {}

    agent = create_agent(
        model=MODEL, id="desk", store=w.store,
        provider=create_mock_provider(turns=[tool_turn("c1", "c2", "c3"), text_turn("done")]),
        tools=[ToolDefinition(name="record", execute=spy)],
        loop=SingleShotLoopOptions(tool_concurrency=3),
        run_state=RunStateOptions(checkpoints, "v1", checkpoint_policy="every-turn"),
    )
    result = await agent.create_session().run("go")
    assert result.status == "succeeded"
    assert sorted(c for c, _ in executing) == ["c1", "c2", "c3"]
    for call_id, listed in executing:
        assert (call_id, "dispatched") in listed
        assert [c for c, _ in listed] == ["c1", "c2", "c3"]
    # the envelope seen by the first call to execute: itself dispatched, the others (waiting
    # for their own marking writes) ready
    first, listed = executing[0]
    assert [status for c, status in listed if c != first] == ["ready", "ready"]
    # input, boundary 1, one marking per call, boundary 2, terminal
    assert Slow.writes == 2 + 3 + 2


async def test_db10_on_suspend_and_non_durable_runs_write_nothing_per_tool_call() -> None:
    """DB-10: only ``every-turn`` runs mark dispatches; the default policy writes nothing."""
    for run_state in (None, "on-suspend"):
        w = World()
        options = None if run_state is None else RunStateOptions(w.checkpoints, "v1")
        agent = w.agent([tool_turn("c1", "c2"), text_turn("done")], run_state=options)
        result = await agent.create_session().run("go")
        assert result.status == "succeeded" and w.effects == ["c1", "c2"]
        assert w.checkpoints.saves == []


# --------------------------------------------------------------------------- crash recovery


async def test_db10_crash_inside_a_tool_after_its_effect_is_reported_never_rerun() -> None:
    """DB-10/DUR-20/DUR-24: a crash after the side effect, before the row, is ambiguous; the
    operator answers it; the effect happened once and turn 1 is not requested again."""
    w = World(die_in_tool="c1:after")
    sid = "sess_after"
    run_id = await w.crash(sid, [tool_turn("c1", "c2"), text_turn("never")])
    assert w.effects == ["c1"]
    loaded = await load_agent_run_state(w.checkpoints, run_id=run_id)
    assert loaded.state["status"] == "running"
    assert pending(loaded.state) == [("c1", "dispatched"), ("c2", "ready")]
    agent = w.agent([text_turn("all done")])
    with pytest.raises(AgentRunStateError, match=AMBIGUOUS):
        await resume_agent_run(agent, run_id, expected_version=loaded.record.version)
    assert w.effects == ["c1"] and w.providers[-1].call_count == 0
    # the operator: the effect happened, its result is lost → answer it (DUR-24)
    state = json.loads(json.dumps(loaded.state))
    entry = state["pending_calls"][0]
    entry["status"] = "ready"
    entry["decision"] = {"approval_id": entry["approval_id"], "outcome": "reject_once",
                         "reason": "ran before a crash; result lost"}
    saved = await save_agent_run_state(checkpoints=w.checkpoints, state=state,
                                       expected_version=loaded.record.version)
    result = await resume_agent_run(agent, run_id, expected_version=saved.record.version)
    assert result.status == "succeeded" and result.text == "all done"
    assert w.effects == ["c1", "c2"]  # c1 once, c2 (never started) dispatched by the resume
    assert w.providers[-1].call_count == 1  # only the turn after the round
    branch = await w.store.read_branch(sid, result.leaf_id)
    assert shape(branch) == ["user[go]", "assistant[c1,c2]", "tool[c1]", "tool[c2]",
                             "assistant[all done]"]
    row = branch[2].message
    assert row is not None and isinstance(row.content[0], ToolResultContent)
    assert row.content[0].error is not None
    assert row.content[0].error.code == "approval_rejected"


async def test_db10_crash_inside_a_tool_before_its_effect_is_reported_then_rerun() -> None:
    """DB-10: a crash before the effect is ambiguous too (the runtime cannot tell); released
    by the operator, the call runs once."""
    w = World(die_in_tool="c2:before")
    sid = "sess_before"
    run_id = await w.crash(sid, [tool_turn("c1"), tool_turn("c2"), text_turn("never")])
    assert w.effects == ["c1"]
    loaded = await load_agent_run_state(w.checkpoints, run_id=run_id)
    assert pending(loaded.state) == [("c2", "dispatched")]
    agent = w.agent([text_turn("all done")])
    with pytest.raises(AgentRunStateError, match=AMBIGUOUS):
        await resume_agent_run(agent, run_id, expected_version=loaded.record.version)
    state = json.loads(json.dumps(loaded.state))
    state["pending_calls"][0]["status"] = "ready"  # the operator: it never ran, run it
    saved = await save_agent_run_state(checkpoints=w.checkpoints, state=state,
                                       expected_version=loaded.record.version)
    result = await resume_agent_run(agent, run_id, expected_version=saved.record.version)
    assert result.status == "succeeded" and w.effects == ["c1", "c2"]
    assert w.providers[-1].call_count == 1
    branch = await w.store.read_branch(sid, result.leaf_id)
    assert shape(branch) == ["user[go]", "assistant[c1]", "tool[c1]", "assistant[c2]",
                             "tool[c2]", "assistant[all done]"]


async def test_db10_a_stored_result_row_is_adopted_not_ambiguous() -> None:
    """DB-10/DUR-20: dispatched, row stored, crash before the next write → the resume adopts
    the row, dispatches the rest of the round, and requests no turn again."""
    w = World()
    w.power.die_after = lambda e: shape([e]) == ["tool[c1]"]
    sid = "sess_adopt"
    run_id = await w.crash(sid, [tool_turn("c1", "c2"), text_turn("never")])
    assert w.effects == ["c1"]
    loaded = await load_agent_run_state(w.checkpoints, run_id=run_id)
    assert pending(loaded.state) == [("c1", "dispatched"), ("c2", "ready")]
    agent = w.agent([text_turn("all done")])
    result = await resume_agent_run(agent, run_id, expected_version=loaded.record.version)
    assert result.status == "succeeded" and w.effects == ["c1", "c2"]
    assert w.providers[-1].call_count == 1
    branch = await w.store.read_branch(sid, result.leaf_id)
    assert shape(branch) == ["user[go]", "assistant[c1,c2]", "tool[c1]", "tool[c2]",
                             "assistant[all done]"]


async def test_db10_last_row_of_a_round_adopted_then_the_next_turn() -> None:
    """DB-10: the round's last row stored, crash before the boundary → nothing pending; the
    resumed leg requests the next turn only."""
    w = World()
    w.power.die_after = lambda e: shape([e]) == ["tool[c1]"]
    run_id = await w.crash("sess_last", [tool_turn("c1"), text_turn("never")])
    loaded = await load_agent_run_state(w.checkpoints, run_id=run_id)
    agent = w.agent([text_turn("all done")])
    result = await resume_agent_run(agent, run_id, expected_version=loaded.record.version)
    assert result.status == "succeeded" and w.effects == ["c1"]
    assert w.providers[-1].call_count == 1
    branch = await w.store.read_branch("sess_last", result.leaf_id)
    assert shape(branch) == ["user[go]", "assistant[c1]", "tool[c1]", "assistant[all done]"]
    claimed = w.checkpoints.saves[-3]  # the claim, then boundary 1 and the terminal write
    assert pending(claimed) == [] and claimed["leaf_id"] == branch[2].id


@pytest.mark.parametrize("seeded", [True, False], ids=["seeded", "empty"])
async def test_db10_kill_right_after_the_input_append_resumes_cleanly(seeded: bool) -> None:
    """DB-10/DUR-7/DUR-22: the first envelope (leaf before the input, the input) is written
    before the input is appended; a crash right after the append resumes, and the input is on
    the continued branch exactly once (the orphan stays on an abandoned sibling)."""
    w = World()
    sid = "sess_input"
    root = await seed(w.store, sid) if seeded else None
    w.power.die_after = lambda e: e.run_id is not None and shape([e]) == ["user[go]"]
    run_id = await w.crash(sid, [text_turn("never")])
    assert w.providers[-1].call_count == 0
    loaded = await load_agent_run_state(w.checkpoints, run_id=run_id)
    state = loaded.state
    assert state["status"] == "running" and state.get("leaf_id") == root
    assert [m["role"] for m in state["input"]] == ["user"]
    agent = w.agent([text_turn("hi")])
    result = await resume_agent_run(agent, run_id, expected_version=loaded.record.version)
    assert result.status == "succeeded" and result.text == "hi"
    branch = await w.store.read_branch(sid, result.leaf_id)
    head = ["user[hello]"] if seeded else []
    assert shape(branch) == [*head, "user[go]", "assistant[hi]"]
    everything = await w.store.list(sid)
    inputs = [e for e in everything if shape([e]) == ["user[go]"]]
    assert len(inputs) == 2 and {e.parent_id for e in inputs} == {root}
    final = await load_agent_run_state(w.checkpoints, run_id=run_id)
    assert "input" not in final.state and final.state["status"] == "succeeded"


async def test_dur22_crash_after_a_turn_before_any_dispatch_reruns_the_turn_on_a_fork() -> None:
    """DUR-22: the assistant answer stored after the last boundary, crash before any dispatch
    was recorded: the resumed leg re-requests that turn on a sibling branch (STORE-4); nothing
    ran, so nothing is ambiguous."""
    w = World()
    w.power.die_after = lambda e: shape([e]) == ["assistant[c1]"]
    sid = "sess_fork"
    run_id = await w.crash(sid, [tool_turn("c1"), text_turn("never")])
    assert w.effects == []
    loaded = await load_agent_run_state(w.checkpoints, run_id=run_id)
    leaf = loaded.state["leaf_id"]
    agent = w.agent([tool_turn("c9"), text_turn("recovered")])
    result = await resume_agent_run(agent, run_id, expected_version=loaded.record.version)
    assert result.status == "succeeded" and result.text == "recovered"
    assert w.effects == ["c9"]
    branch = await w.store.read_branch(sid, result.leaf_id)
    assert shape(branch) == ["user[go]", "assistant[c9]", "tool[c9]", "assistant[recovered]"]
    siblings = [e.id for e in await w.store.list(sid) if e.parent_id == leaf]
    assert len(siblings) == 2 and branch[1].id in siblings


async def test_db10_a_dispatch_that_cannot_be_recorded_does_not_run() -> None:
    """DB-10: when the marking write fails, the tool does not run (at most once even then); its
    call is answered with an ``execution_denied`` row (TOOL-3 step 9) and the run goes on."""
    w = World()

    class Refusing(DyingCheckpoints):
        async def save_checkpoint(self, **kw: Any) -> Any:
            if kw["value"]["pending_calls"]:
                raise ConnectionError("checkpoint store unavailable")
            return await super().save_checkpoint(**kw)

    checkpoints = Refusing(w.power)
    agent = w.agent([tool_turn("c1"), text_turn("done")],
                    run_state=RunStateOptions(checkpoints, "v1", checkpoint_policy="every-turn"))
    session = agent.create_session("sess_refused")
    result = await session.run("go")
    assert w.effects == []
    branch = await w.store.read_branch("sess_refused", result.leaf_id)
    row = branch[2].message
    assert row is not None and isinstance(row.content[0], ToolResultContent)
    assert row.content[0].error is not None
    assert row.content[0].error.code == "execution_denied"
    assert result.status == "succeeded" and result.text == "done"
