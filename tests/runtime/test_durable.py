"""Durable runs through ``session.run`` and ``resume_agent_run`` (DUR-1..DUR-24, RUN-19,
EVT-7, TP-8, TP-10).

Provider-call and tool-execution counts are exact across suspend/resume legs: a completed provider
turn is never requested again, and a tool approved once runs once.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from prism.errors import (
    AgentDecisionError,
    AgentLoopStateError,
    AgentRunError,
    AgentRunStateError,
    AgentSessionBusyError,
    CheckpointConflictError,
    PrismConfigError,
)
from prism.events import (
    AgentDeniedEvent,
    AgentResumedEvent,
    AgentStartedEvent,
    AgentSuspendedEvent,
    ErrorEvent,
)
from prism.guardrails import Guardrail, GuardrailDecision, Guardrails
from prism.loops.contracts import GenerateValidateReviseLoopOptions
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import MockProvider, MockScriptItem, create_mock_provider
from prism.runtime.agent import Agent, create_agent
from prism.runtime.checkpoints import MemoryCheckpointStore
from prism.runtime.durable import (
    AgentRunState,
    RunStateOptions,
    agent_fingerprint,
    load_agent_run_state,
    resume_agent_run,
    save_agent_run_state,
)
from prism.runtime.turn_policy import Stop, TurnPolicy
from prism.store import MemorySessionStore
from prism.types import AgentRunRef, Message, ModelConfig, ToolDefinition

MODEL = ModelConfig(provider="mock", model="demo")


def tool_turn(*ids: str, name: str = "refund") -> list[MockScriptItem]:
    return [*(provider_tool_call(i, name, {"order": n}) for n, i in enumerate(ids, 1)),
            provider_done()]


def text_turn(text: str) -> list[MockScriptItem]:
    return [provider_text_delta(text), provider_done()]


@dataclass
class World:
    """Shared stores plus counters; ``agent()`` builds a fresh agent over them."""

    checkpoints: MemoryCheckpointStore = field(default_factory=MemoryCheckpointStore)
    store: MemorySessionStore = field(default_factory=MemorySessionStore)
    executed: list[dict[str, Any]] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    providers: list[MockProvider] = field(default_factory=list)

    def refund(self, args: dict[str, Any], ctx: Any) -> Any:
        self.executed.append(dict(args))
        return {"refunded": args.get("order")}

    def tools(self) -> list[ToolDefinition]:
        return [
            ToolDefinition(
                name="refund",
                execute=self.refund,
                parameters={"type": "object", "properties": {"order": {"type": "integer"}}},
            )
        ]

    def options(self, **kw: Any) -> RunStateOptions:
        return RunStateOptions(self.checkpoints, "v1", **kw)

    def agent(self, turns: list[list[MockScriptItem]], *, run_state: Any = "default",
              **kw: Any) -> Agent:
        provider = create_mock_provider(turns=turns)
        self.providers.append(provider)
        kw.setdefault("id", "desk")
        kw.setdefault("tools", self.tools())
        if run_state == "default":
            run_state = self.options(interrupt_before_tool=True)
        return create_agent(model=MODEL, provider=provider, store=self.store,
                            run_state=run_state, **kw)

    def session(self, agent: Agent, session_id: str | None = None) -> Any:
        return agent.create_session(session_id, on_event=self.events.append)

    @property
    def provider_calls(self) -> int:
        return sum(p.call_count for p in self.providers)


def roles(messages: Any) -> list[str]:
    return [m.role for m in messages]


def kinds(events: list[Any]) -> list[str]:
    return [e.type for e in events]


async def stored(world: World, session: Any) -> list[Message]:
    return [e.message for e in await session.entries() if e.message is not None]


def strip_ids(messages: Any) -> list[Any]:
    out = []
    for m in messages:
        data = m.to_dict()
        data.pop("id", None)
        out.append(data)
    return out


# --------------------------------------------------------------------------- approvals, end to end


async def test_apr5_approval_suspends_before_the_next_provider_request() -> None:
    """APR-1/APR-5/DUR-8: a gated call suspends at the next boundary; nothing executes."""
    w = World()
    session = w.session(w.agent([tool_turn("c1"), text_turn("done")]))
    result = await session.run("refund order 1")
    assert result.status == "suspended"
    assert w.provider_calls == 1 and w.executed == []
    assert roles(await stored(w, session)) == ["user", "assistant"]
    interruption = result.interruption
    assert interruption.kind == "tool_approval"
    assert (interruption.tool_call_id, interruption.tool_name) == ("c1", "refund")
    assert interruption.reason == "Tool side effect requires approval"
    state = result.run_state
    assert isinstance(state, AgentRunState)
    assert (state.status, state.version, state.leaf_id) == ("suspended", 1, session.leaf_id)
    # RUN-19 / EVT-7: agent_suspended is the terminal event; no error, no agent_finished
    assert kinds(w.events)[-1] == "agent_suspended"
    assert "error" not in kinds(w.events) and "agent_finished" not in kinds(w.events)
    suspended = w.events[-1]
    assert isinstance(suspended, AgentSuspendedEvent) and suspended.version == 1
    loaded = await load_agent_run_state(w.checkpoints, run_id=result.run_id)
    assert [e["call"]["id"] for e in loaded.state["pending_calls"]] == ["c1"]
    assert loaded.state["counters"]["turns"] == 1
    assert loaded.state["counters"]["tool_calls"] == 0
    assert "loop_state" not in loaded.state  # single-shot has no snapshot (DUR-11)


async def test_apr9_approve_replays_once_and_continues_without_repeating_turns() -> None:
    """APR-9/DUR-17/DUR-19: approve → claim, replay once, one more provider turn."""
    w = World()
    session = w.session(w.agent([tool_turn("c1"), text_turn("done")]))
    first = await session.run("refund order 1")
    w.events.clear()
    result = await resume_agent_run(session, first.run_state, decision="approve")
    assert result.status == "succeeded" and result.text == "done"
    assert w.provider_calls == 2 and w.executed == [{"order": 1}]
    assert roles(await stored(w, session)) == ["user", "assistant", "tool", "assistant"]
    assert roles(result.messages) == ["tool", "assistant"]
    assert kinds(w.events)[:2] == ["agent_started", "agent_resumed"]
    resumed = w.events[1]
    assert isinstance(resumed, AgentResumedEvent) and resumed.version == 2
    assert kinds(w.events)[-1] == "agent_finished"
    # suspend v1, claim v2, dispatch marking v3, terminal v4 (DUR-7)
    loaded = await load_agent_run_state(w.checkpoints, run_id=first.run_id)
    assert loaded.record.version == 4
    assert loaded.state["status"] == "succeeded"
    assert loaded.state["pending_calls"] == [] and loaded.state["sticky_decisions"] == []
    assert "interruption" not in loaded.state and "loop_state" not in loaded.state
    assert loaded.state["counters"]["turns"] == 2
    assert loaded.state["counters"]["tool_calls"] == 1
    assert result.run_state.version == 4 and result.run_state.status == "succeeded"


async def test_resume_after_json_round_trip_with_a_new_agent_matches_an_unsuspended_run() -> None:
    """Acceptance: suspend, serialise to JSON text, rebuild agent and session, resume, same
    history (and same second request) as a run that never suspended."""
    script = [tool_turn("c1"), text_turn("refunded")]
    # the reference run: no gating
    ref = World()
    ref_session = ref.session(ref.agent(script, run_state=None))
    reference = await ref_session.run("refund order 1")
    assert reference.status == "succeeded"
    # the durable run
    w = World()
    agent = w.agent(script[:1])
    session = w.session(agent)
    suspended = await session.run("refund order 1")
    assert suspended.status == "suspended"
    text = json.dumps(suspended.run_state.to_dict())
    session_id = session.id
    del agent, session
    # a new agent and a new session, built from scratch over the same stores
    fresh_agent = w.agent(script[1:])
    fresh_session = w.session(fresh_agent, session_id)
    state = AgentRunState.from_dict(json.loads(text))
    result = await resume_agent_run(fresh_session, state, decision="approve")
    assert result.status == "succeeded"
    assert w.provider_calls == 2 == ref.provider_calls
    assert len(w.executed) == 1 == len(ref.executed)
    assert strip_ids(await stored(w, fresh_session)) == strip_ids(await stored(ref, ref_session))
    assert strip_ids(w.providers[1].requests[0].messages) == strip_ids(
        ref.providers[0].requests[1].messages
    )


async def test_dur16_resume_with_an_agent_creates_the_session() -> None:
    """DUR-16: with an ``Agent`` a session with the stored id over ``config.store`` is used;
    a run id string plus ``expected_version`` is enough."""
    w = World()
    session = w.session(w.agent([tool_turn("c1")]))
    first = await session.run("go")
    agent = w.agent([text_turn("done")])
    result = await resume_agent_run(agent, first.run_id, decision="approve", expected_version=1)
    assert result.status == "succeeded" and result.session_id == session.id
    fresh_view = agent.create_session(session.id)
    assert roles(await stored(w, fresh_view)) == ["user", "assistant", "tool", "assistant"]
    with pytest.raises(CheckpointConflictError, match="already finished .succeeded.; nothing to"):
        await resume_agent_run(agent, AgentRunRef(first.run_id, session.id), expected_version=1)


async def test_apr8_partial_decisions_resuspend_then_complete() -> None:
    """APR-8: a strict subset re-suspends (agent_suspended only); the rest completes it."""
    w = World()
    session = w.session(w.agent([tool_turn("c1", "c2"), text_turn("done")]))
    first = await session.run("go")
    decisions = first.interruption.pending_decisions
    assert [p.tool_call_id for p in decisions] == ["c1", "c2"]
    assert first.interruption.reason == "2 tool side effects require approval"
    w.events.clear()
    partial = await resume_agent_run(
        session, first.run_state, decisions=[{"approval_id": decisions[0].approval_id,
                                              "outcome": "reject_once", "reason": "no"}]
    )
    assert partial.status == "suspended"
    assert partial.interruption.reason == "1 approval request(s) remain"
    assert [p.approval_id for p in partial.interruption.pending_decisions] == [
        decisions[1].approval_id
    ]
    assert kinds(w.events) == ["agent_suspended"]
    assert w.provider_calls == 1 and w.executed == []
    result = await resume_agent_run(
        session, partial.run_state, decisions=[{"approval_id": decisions[1].approval_id,
                                                "outcome": "allow_once"}]
    )
    assert result.status == "succeeded"
    assert w.provider_calls == 2 and w.executed == [{"order": 2}]
    rows = [m.content[0] for m in await stored(w, session) if m.role == "tool"]
    assert [r.tool_call_id for r in rows] == ["c1", "c2"]
    assert rows[0].error is not None
    assert (rows[0].error.code, rows[0].error.message) == ("approval_rejected", "no")
    assert rows[1].error is None


async def test_apr9_rejection_row_and_modified_arguments() -> None:
    """APR-9: reject → ``approval_rejected`` row (reason or "Approval rejected"); an allowed call
    with modified arguments runs with them."""
    w = World()
    session = w.session(w.agent([tool_turn("c1", "c2"), text_turn("done")]))
    first = await session.run("go")
    a, b = first.interruption.pending_decisions
    result = await resume_agent_run(
        session,
        first.run_state,
        decisions=[
            {"approval_id": a.approval_id, "outcome": "reject_once"},
            {"approval_id": b.approval_id, "outcome": "allow_once",
             "modified_arguments": {"order": 42}},
        ],
    )
    assert result.status == "succeeded"
    assert w.executed == [{"order": 42}]
    tool_rows = [m for m in result.messages if m.role == "tool"]
    first_row = tool_rows[0].content[0]
    assert first_row.tool_call_id == "c1"
    assert first_row.error is not None
    assert (first_row.error.code, first_row.error.message) == ("approval_rejected",
                                                               "Approval rejected")


async def test_apr10_sticky_decisions_apply_for_the_rest_of_the_run() -> None:
    """APR-10: allow_for_run lets later matching calls through without a new suspension;
    reject_for_run answers them with approval_rejected rows."""
    w = World()
    script = [tool_turn("c1"), tool_turn("c2"), text_turn("done")]
    session = w.session(w.agent(script))
    first = await session.run("go")
    (only,) = first.interruption.pending_decisions
    result = await resume_agent_run(
        session, first.run_state,
        decisions=[{"approval_id": only.approval_id, "outcome": "allow_for_run"}],
    )
    # c2 has other arguments ({"order": 1} both: same hash) → allowed without suspension
    assert result.status == "succeeded"
    assert w.provider_calls == 3 and w.executed == [{"order": 1}, {"order": 1}]

    w2 = World()
    session2 = w2.session(w2.agent(script))
    first2 = await session2.run("go")
    (only2,) = first2.interruption.pending_decisions
    result2 = await resume_agent_run(
        session2, first2.run_state,
        decisions=[{"approval_id": only2.approval_id, "outcome": "reject_for_run",
                    "reason": "never refunds"}],
    )
    assert result2.status == "succeeded" and w2.executed == []
    rows = [m.content[0] for m in result2.messages if m.role == "tool"]
    assert [(r.tool_call_id, r.error.code, r.error.message) for r in rows] == [
        ("c1", "approval_rejected", "never refunds"),
        ("c2", "approval_rejected", "never refunds"),
    ]
    # no tool event for the sticky rejection (APR-3)
    assert not any(k.startswith("tool_execution") for k in kinds(w2.events))


async def test_dur21_deny_writes_denied_and_calls_nothing() -> None:
    """DUR-21/EVT-7: deny → ``denied``, ``agent_denied`` only, no tool, no provider call."""
    w = World()
    session = w.session(w.agent([tool_turn("c1"), text_turn("never")]))
    first = await session.run("go")
    w.events.clear()
    result = await resume_agent_run(session, first.run_state, decision="deny")
    assert result.status == "denied"
    assert result.interruption == first.interruption
    assert kinds(w.events) == ["agent_denied"]
    denied = w.events[0]
    assert isinstance(denied, AgentDeniedEvent) and denied.version == 2
    assert w.provider_calls == 1 and w.executed == []
    loaded = await load_agent_run_state(w.checkpoints, run_id=first.run_id)
    assert loaded.state["status"] == "denied"
    assert loaded.state["pending_calls"] == [] and loaded.state["sticky_decisions"] == []
    assert "loop_state" not in loaded.state
    # DUR-15: denied is final
    with pytest.raises(AgentRunStateError, match="is denied and cannot be resumed"):
        await resume_agent_run(session, result.run_state, decision="approve")


# --------------------------------------------------------------------------- DUR-18 table


async def _suspended(w: World, turns: list[list[MockScriptItem]] | None = None) -> Any:
    session = w.session(w.agent(turns or [tool_turn("c1"), text_turn("done")]))
    return session, await session.run("go")


async def test_dur18_suspended_continue_is_not_continuable() -> None:
    """DUR-18: suspended + continue → AgentRunStateError; nothing written."""
    w = World()
    session, first = await _suspended(w)
    with pytest.raises(AgentRunStateError, match="not continuable"):
        await resume_agent_run(session, first.run_state)
    assert (await load_agent_run_state(w.checkpoints, run_id=first.run_id)).record.version == 1


async def test_dur18_running_takes_continue_only() -> None:
    """DUR-18: running + approve/deny/decisions → ERR_PRISM_DECISION_INVALID."""
    w = World()
    agent = w.agent([tool_turn("c1"), text_turn("done")],
                    run_state=w.options(checkpoint_policy="every-turn"))
    session = w.session(agent)
    await session.run("go")
    loaded = await load_agent_run_state(w.checkpoints, run_id=session_run_id(w))
    running = dict(loaded.state)
    running["status"] = "running"
    saved = await save_agent_run_state(checkpoints=w.checkpoints, state=running,
                                       expected_version=loaded.record.version)
    for kwargs in ({"decision": "approve"}, {"decision": "deny"},
                   {"decisions": [{"approval_id": "a", "outcome": "allow_once"}]}):
        with pytest.raises(AgentDecisionError) as info:
            await resume_agent_run(session, saved.state["run_id"],
                                   expected_version=saved.record.version, **kwargs)
        assert info.value.code == "ERR_PRISM_DECISION_INVALID"


def session_run_id(w: World) -> str:
    starts = [e for e in w.events if isinstance(e, AgentStartedEvent)]
    return starts[-1].run_id


async def test_dur18_finished_runs_are_not_resumable() -> None:
    """DUR-15/DUR-18: a succeeded state without host_policy is final."""
    w = World()
    session, first = await _suspended(w)
    done = await resume_agent_run(session, first.run_state, decision="approve")
    with pytest.raises(AgentRunStateError, match="already finished .succeeded.; nothing to resume"):
        await resume_agent_run(session, done.run_state)


async def test_dur16_input_validation_happens_before_any_read() -> None:
    """DUR-16/APR-7: bad decision values, decisions with a non-default decision, bad versions."""
    w = World()
    session, first = await _suspended(w)
    bad_calls: list[dict[str, Any]] = [
        {"decision": "maybe"},
        {"decision": "approve", "decisions": [{"approval_id": "a", "outcome": "allow_once"}]},
        {"decisions": []},
        {"expected_version": 0},
        {"expected_version": True},
    ]
    for kwargs in bad_calls:
        with pytest.raises(AgentDecisionError) as info:
            await resume_agent_run(session, first.run_state, **kwargs)
        assert info.value.code == "ERR_PRISM_DECISION_INVALID", kwargs
    assert (await load_agent_run_state(w.checkpoints, run_id=first.run_id)).record.version == 1


async def test_dur16_configuration_and_session_mismatches() -> None:
    """DUR-16: explicit values differing from the agent's, another session, a missing run."""
    w = World()
    session, first = await _suspended(w)
    with pytest.raises(AgentRunStateError):
        await resume_agent_run(session, first.run_state, decision="approve",
                               checkpoints=MemoryCheckpointStore())
    with pytest.raises(AgentRunStateError):
        await resume_agent_run(session, first.run_state, decision="approve",
                               definition_revision="v2")
    other = w.session(w.agent([]))
    with pytest.raises(AgentRunStateError, match="another session"):
        await resume_agent_run(other, first.run_state, decision="approve")
    with pytest.raises(AgentRunStateError, match="no run state"):
        await resume_agent_run(session, "run_missing", expected_version=1)


async def test_dur17_revision_fingerprint_and_version_checks() -> None:
    """DUR-17 steps 3-4: definition revision / fingerprint drift and stale versions fail closed."""
    w = World()
    session, first = await _suspended(w)
    changed = create_agent(model=MODEL, id="desk", provider=create_mock_provider(),
                           store=w.store, tools=w.tools(), instructions="be careful",
                           run_state=w.options(interrupt_before_tool=True))
    with pytest.raises(AgentRunStateError, match="fingerprint mismatch") as caught:
        await resume_agent_run(changed, first.run_state, decision="approve")
    assert caught.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert "instructions" in str(caught.value) and "a changed agent needs a new run" in str(
        caught.value
    )
    bumped = create_agent(model=MODEL, id="desk", provider=create_mock_provider(),
                          store=w.store, tools=w.tools(),
                          run_state=RunStateOptions(w.checkpoints, "v2"))
    with pytest.raises(
        AgentRunStateError,
        match="definition revision mismatch: the run was started with definition_revision 'v1', "
        "the agent has 'v2'",
    ):
        await resume_agent_run(bumped, first.run_state, decision="approve")
    with pytest.raises(CheckpointConflictError, match="stored version 1, expected 2"):
        await resume_agent_run(session, first.run_state, decision="approve", expected_version=2)
    assert w.executed == []


async def test_dur19_two_resumers_one_wins() -> None:
    """DUR-19: concurrent claims on one version: exactly one leg runs."""


    class Yielding(MemoryCheckpointStore):
        async def save_checkpoint(self, **kw: Any) -> Any:
            await asyncio.sleep(0)  # a real store awaits I/O here
            return await MemoryCheckpointStore.save_checkpoint(self, **kw)

    w = World(checkpoints=Yielding())
    session, first = await _suspended(w, [tool_turn("c1"), text_turn("a"), text_turn("b")])
    other_agent = w.agent([text_turn("b")])
    outcomes = await asyncio.gather(
        resume_agent_run(session, first.run_state, decision="approve"),
        resume_agent_run(other_agent, first.run_state, decision="approve"),
        return_exceptions=True,
    )
    wins = [o for o in outcomes if not isinstance(o, BaseException)]
    losses = [o for o in outcomes if isinstance(o, CheckpointConflictError)]
    assert len(wins) == 1 and len(losses) == 1
    assert w.executed == [{"order": 1}]


async def test_dur20_a_dispatched_call_is_ambiguous() -> None:
    """DUR-20: a pending call marked ``dispatched`` is never replayed silently."""
    w = World()
    session, first = await _suspended(w)
    loaded = await load_agent_run_state(w.checkpoints, run_id=first.run_id)
    edited = json.loads(json.dumps(loaded.state))
    edited["pending_calls"][0]["status"] = "dispatched"
    saved = await save_agent_run_state(checkpoints=w.checkpoints, state=edited, expected_version=1)
    with pytest.raises(AgentRunStateError,
                       match="Ambiguous dispatched tool requires operator resolution"):
        await resume_agent_run(session, first.run_id, decision="approve",
                               expected_version=saved.record.version)
    assert w.executed == [] and w.provider_calls == 1


async def test_apr9_dispatch_marking_makes_a_crash_ambiguous() -> None:
    """APR-9/DUR-20: the pre-execution step saves ``dispatched`` before the tool runs."""
    w = World()
    seen: list[Any] = []

    async def spy(args: dict[str, Any], ctx: Any) -> Any:
        loaded = await load_agent_run_state(w.checkpoints, run_id=ctx.run_id)
        seen.append([e["status"] for e in loaded.state["pending_calls"]])
        seen.append(loaded.state["status"])
        return {"ok": True}

    agent = w.agent([tool_turn("c1"), text_turn("done")],
                    tools=[ToolDefinition(name="refund", execute=spy)])
    session = w.session(agent)
    first = await session.run("go")
    await resume_agent_run(session, first.run_state, decision="approve")
    assert seen == [["dispatched"], "running"]


# --------------------------------------------------------------------------- DUR-2 via run()


async def test_dur2_preflight_raises_before_any_side_effect() -> None:
    """DUR-2/RUN-7 step 4: durable preflight errors are raised directly; nothing happens."""

    class Hookless:
        name = "hookless"

        async def run(self, ctx: Any) -> None:
            await ctx.generate(await ctx.assemble([]))

    w = World()
    cases: list[tuple[dict[str, Any], dict[str, Any], type[Exception]]] = [
        # a nameless agent: refused by create_agent when it has run_state (issue 21), by the
        # run when the run brings it
        ({"id": None, "run_state": None}, {"run_state": w.options()}, AgentRunStateError),
        ({"loop": Hookless()}, {}, AgentLoopStateError),
        ({}, {"loop": Hookless()}, AgentLoopStateError),
        ({}, {"model": MODEL}, AgentRunStateError),
        ({}, {"run_state": RunStateOptions(w.checkpoints, "other")}, AgentRunStateError),
        ({"run_state": None}, {"run_state": {"checkpoints": w.checkpoints,
                                              "definition_revision": " "}}, AgentRunStateError),
        ({"run_state": None}, {"run_state": {"checkpoints": w.checkpoints,
                                              "definitionRevision": "v"}}, PrismConfigError),
    ]
    for agent_kw, run_kw, error in cases:
        agent = w.agent([text_turn("x")], **agent_kw)
        session = w.session(agent)
        w.events.clear()
        with pytest.raises(error):
            await session.run("go", **run_kw)
        assert w.events == [] and await session.entries() == []
    assert w.provider_calls == 0
    assert w.checkpoints._records == {}
    with pytest.raises(AgentRunStateError, match="id or a name"):
        w.agent([text_turn("x")], id=None)


async def test_dur1_run_level_run_state_makes_the_run_durable() -> None:
    """DUR-1: ``run_state=`` on the run alone is enough."""
    w = World()
    session = w.session(w.agent([tool_turn("c1"), text_turn("done")], run_state=None))
    result = await session.run("go", run_state=w.options(interrupt_before_tool=True))
    assert result.status == "suspended"
    agent = w.agent([text_turn("done")], run_state=None)
    resumed = await resume_agent_run(
        agent, result.run_state, decision="approve",
        checkpoints=w.checkpoints, definition_revision="v1",
    )
    assert resumed.status == "succeeded" and w.executed == [{"order": 1}]


# --------------------------------------------------------------------------- DUR-7 writes


async def test_dur7_default_policy_without_suspension_writes_nothing() -> None:
    """DUR-7: on-suspend + no suspension + no policy stop → no envelope at all."""
    w = World()
    session = w.session(w.agent([tool_turn("c1"), text_turn("done")],
                                run_state=w.options()))
    result = await session.run("go")
    assert result.status == "succeeded" and result.run_state is None
    assert w.checkpoints._records == {}


async def test_dur7_every_turn_writes_running_at_each_boundary_then_terminal() -> None:
    """DUR-7/TP-4 step 4/DB-10: running before the input is appended, at each boundary (after
    the charge) and before each tool's side effect, then terminal."""
    w = World()
    versions: list[tuple[int, str, int]] = []

    async def spy(args: dict[str, Any], ctx: Any) -> Any:
        loaded = await load_agent_run_state(w.checkpoints, run_id=ctx.run_id)
        versions.append((loaded.record.version, str(loaded.state["status"]),
                         int(loaded.state["counters"]["turns"])))
        return {}

    agent = w.agent([tool_turn("c1"), tool_turn("c2"), text_turn("done")],
                    run_state=w.options(checkpoint_policy="every-turn"),
                    tools=[ToolDefinition(name="refund", execute=spy)])
    session = w.session(agent)
    result = await session.run("go")
    # input (v1), boundary 1 (v2), c1 dispatched (v3), boundary 2 (v4), c2 dispatched (v5),
    # boundary 3 (v6), terminal (v7)
    assert versions == [(3, "running", 1), (5, "running", 2)]
    loaded = await load_agent_run_state(w.checkpoints, run_id=result.run_id)
    assert loaded.record.version == 7
    assert loaded.state["status"] == "succeeded" and "stop_reason" not in loaded.state
    assert result.run_state.version == 7


async def test_dur15_failed_and_aborted_runs_finalise_an_existing_envelope() -> None:
    """DUR-7/DUR-15: failed → ``failed`` (loop state etc. cleared), not resumable."""
    w = World()
    agent = w.agent([tool_turn("c1")], run_state=w.options(checkpoint_policy="every-turn"))
    session = w.session(agent)
    with pytest.raises(AgentRunError) as info:
        await session.run("go")  # the second turn is not scripted: provider error
    result = info.value.result
    loaded = await load_agent_run_state(w.checkpoints, run_id=result.run_id)
    assert loaded.state["status"] == "failed"
    assert result.run_state is not None and result.run_state.status == "failed"
    with pytest.raises(AgentRunStateError, match="cannot be resumed"):
        await resume_agent_run(session, result.run_state)


async def test_dur15_terminal_write_failure_on_the_failure_path_chains_both_errors() -> None:
    """DUR-15: cause = the write's exception, whose context is the original failure; the
    stored envelope keeps its previous (resumable) content."""
    w = World()

    class Flaky(MemoryCheckpointStore):
        async def save_checkpoint(self, **kw: Any) -> Any:
            if kw["value"]["status"] in ("failed", "aborted"):
                raise ConnectionError("checkpoint store unavailable")
            return await MemoryCheckpointStore.save_checkpoint(self, **kw)

    store = Flaky()
    agent = w.agent([tool_turn("c1")],
                    run_state=RunStateOptions(store, "v1", checkpoint_policy="every-turn"))
    session = w.session(agent)
    with pytest.raises(AgentRunError) as info:
        await session.run("go")  # turn 2 is not scripted: the provider fails
    err = info.value
    assert isinstance(err.__cause__, ConnectionError)
    assert str(err.__cause__) == "checkpoint store unavailable"
    original = err.__cause__.__context__
    assert original is not None and "mock_script_exhausted" in repr(
        getattr(original, "info", original)
    )
    assert err.result.status == "failed"
    assert err.result.error is not None and err.result.error.code == "mock_script_exhausted"
    assert kinds(w.events).count("error") == 1
    loaded = await load_agent_run_state(store, run_id=err.result.run_id)
    assert loaded.state["status"] == "running" and loaded.record.version == 4  # boundary 2


async def test_dur15_terminal_write_failure_on_success_fails_the_run() -> None:
    """DUR-15/RUN-18: a failing terminal write on the success path is a run failure."""
    w = World()

    class Flaky(MemoryCheckpointStore):
        calls = 0

        async def save_checkpoint(self, **kw: Any) -> Any:
            self.calls += 1
            if self.calls > 1:
                raise ConnectionError("down")
            return await MemoryCheckpointStore.save_checkpoint(self, **kw)

    store = Flaky()
    agent = w.agent([text_turn("done")],
                    run_state=RunStateOptions(store, "v1", checkpoint_policy="every-turn"))
    session = w.session(agent)
    with pytest.raises(AgentRunError) as info:
        await session.run("go")
    assert info.value.result.status == "failed"
    loaded = await load_agent_run_state(store, run_id=info.value.result.run_id)
    assert loaded.state["status"] == "running" and loaded.record.version == 1


async def test_dur6_oversized_state_fails_the_run() -> None:
    """DUR-6: an envelope over ``max_state_bytes`` fails the run with ERR_PRISM_AGENT_RUN_STATE."""
    w = World()
    agent = w.agent([tool_turn("c1")], run_state=w.options(interrupt_before_tool=True,
                                                           max_state_bytes=200))
    session = w.session(agent)
    with pytest.raises(AgentRunError) as info:
        await session.run("go")
    assert info.value.result.error is not None
    assert info.value.result.error.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert w.checkpoints._records == {}


# --------------------------------------------------------------------------- DUR-9 input guardrail


def interrupting_guard(decisions: list[str]) -> Guardrail:
    def evaluate(ctx: Any) -> GuardrailDecision:
        action = decisions.pop(0) if decisions else "allow"
        return GuardrailDecision(action=action, reason="needs a human")  # type: ignore[arg-type]

    return Guardrail(name="review", stage="input", evaluate=evaluate)


async def test_dur9_input_guardrail_interrupt_suspends_without_storing_the_input() -> None:
    """DUR-9: interrupt on a fresh durable leg → suspended with the input in the envelope; an
    approve resume runs setup again and a second interrupt counts as approved."""
    w = World()
    agent = w.agent([text_turn("hello")], run_state=w.options(),
                    guardrails=Guardrails(input=(interrupting_guard(["interrupt", "interrupt"]),)))
    session = w.session(agent)
    first = await session.run("hi there")
    assert first.status == "suspended"
    assert first.interruption.kind == "input_guardrail"
    assert first.interruption.pending_decisions == ()
    assert await session.entries() == [] and w.provider_calls == 0
    loaded = await load_agent_run_state(w.checkpoints, run_id=first.run_id)
    assert [m["role"] for m in loaded.state["input"]] == ["user"]
    assert "loop_state" not in loaded.state
    result = await resume_agent_run(session, first.run_state, decision="approve")
    assert result.status == "succeeded" and result.text == "hello"
    assert roles(await stored(w, session)) == ["user", "assistant"]
    assert w.provider_calls == 1


async def test_dur9_block_after_approval_still_fails() -> None:
    """DUR-9: block/tripwire on the resumed setup still fail the run."""
    w = World()
    agent = w.agent([text_turn("hello")], run_state=w.options(),
                    guardrails=Guardrails(input=(interrupting_guard(["interrupt", "block"]),)))
    session = w.session(agent)
    first = await session.run("hi")
    with pytest.raises(AgentRunError):
        await resume_agent_run(session, first.run_state, decision="approve")
    assert w.provider_calls == 0


async def test_dur9_interrupt_without_durability_is_unavailable() -> None:
    """GRD/ERR table: an interrupt on a non-durable run fails with INTERRUPT_UNAVAILABLE."""
    w = World()
    agent = w.agent([text_turn("hello")], run_state=None,
                    guardrails=Guardrails(input=(interrupting_guard(["interrupt"]),)))
    with pytest.raises(AgentRunError) as info:
        await w.session(agent).run("hi")
    assert info.value.result.error is not None
    assert info.value.result.error.code == "ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE"


# --------------------------------------------------------------------------- loop state


class Counting:
    """A durable custom loop: one provider turn per run, state = number of runs."""

    name = "counting"

    def __init__(self, revision: str = "1", fail_restore: bool = False,
                 snap: Any = None) -> None:
        self.revision = revision
        self.runs = 0
        self.restored: list[Any] = []
        self.seen_restored: list[Any] = []
        self.fail_restore = fail_restore
        self.snap = snap

    async def run(self, ctx: Any) -> None:
        self.seen_restored.append(ctx.restored_loop_state)
        self.runs += 1
        request = await ctx.assemble(ctx.input if not self.restored else [])
        result = await ctx.generate(request)
        ctx.history.extend(ctx.input_messages)
        if result.started:
            message = Message(role="assistant", content=result.content)
            ctx.history.append(message)
            await ctx.append_message(message)
        await ctx.assemble([])  # a second boundary: suspends / stops here if asked
        return None

    def snapshot(self) -> Any:
        return self.snap if self.snap is not None else {"runs": self.runs}

    def restore(self, snapshot: Any) -> None:
        if self.fail_restore:
            raise ValueError("drift")
        self.restored.append(snapshot)


async def test_dur10_non_json_snapshot_fails_the_run() -> None:
    """DUR-10: a non-JSON snapshot fails the run (ERR_PRISM_LOOP_SNAPSHOT); it never suspends."""
    w = World()
    loop = Counting(snap={"bad": object()})
    agent = w.agent([text_turn("a"), text_turn("b")], loop=loop,
                    run_state=w.options(checkpoint_policy="every-turn"))
    with pytest.raises(AgentRunError) as info:
        await w.session(agent).run("go")
    assert info.value.result.status == "failed"
    assert info.value.result.error is not None
    assert info.value.result.error.code == "ERR_PRISM_LOOP_SNAPSHOT"
    assert info.value.code == "ERR_PRISM_LOOP_SNAPSHOT"  # the top-level code, not RUN_FAILED
    assert isinstance(info.value.__cause__, AgentLoopStateError)


async def test_dur13_restore_once_and_restored_loop_state() -> None:
    """DUR-13/TP-8: a policy-stopped custom loop resumes with restore() called once."""
    w = World()
    loop = Counting()
    agent = w.agent([text_turn("a"), text_turn("b")], loop=loop)
    session = w.session(agent)
    stopped = await session.run("go", turn_policy=TurnPolicy(stop=_stop_after_one))
    assert (stopped.status, stopped.stop_reason) == ("succeeded", "host_policy")
    loaded = await load_agent_run_state(w.checkpoints, run_id=stopped.run_id)
    assert loaded.state["loop_state"] == {"name": "counting", "revision": "1",
                                          "snapshot": {"runs": 1}}
    assert loaded.state["status"] == "succeeded"
    assert loaded.state["stop_reason"] == "host_policy"
    result = await resume_agent_run(session, stopped.run_state)
    assert result.status == "succeeded"
    assert loop.restored == [{"runs": 1}]
    assert loop.seen_restored == [None, {"runs": 1}]
    assert w.provider_calls == 2


async def test_dur13_edited_loop_revision_fails_closed_before_any_call() -> None:
    """DUR-13/DUR-24: a ``loop_state.revision`` rewritten to "0" fails with LOOP_REVISION."""
    w = World()
    loop = Counting()
    session = w.session(w.agent([text_turn("a"), text_turn("b")], loop=loop))
    stopped = await session.run("go", turn_policy=TurnPolicy(stop=_stop_after_one))
    loaded = await load_agent_run_state(w.checkpoints, run_id=stopped.run_id)
    edited = json.loads(json.dumps(loaded.state))
    edited["loop_state"]["revision"] = "0"
    saved = await save_agent_run_state(checkpoints=w.checkpoints, state=edited,
                                       expected_version=loaded.record.version)
    with pytest.raises(AgentRunError) as info:
        await resume_agent_run(session, stopped.run_id, expected_version=saved.record.version)
    assert info.value.result.error is not None
    assert info.value.result.error.code == "ERR_PRISM_LOOP_REVISION"
    assert info.value.code == "ERR_PRISM_LOOP_REVISION"
    assert loop.restored == [] and w.provider_calls == 1


def _stop_after_one(c: Any) -> Any:
    from prism.runtime.turn_policy import Continue

    return Stop("pause") if c.turns >= 1 else Continue()


async def test_dur12_restore_raising_fails_the_run() -> None:
    """DUR-12/DUR-13: an exception from restore fails the resumed leg."""
    w = World()
    loop = Counting()
    session = w.session(w.agent([text_turn("a"), text_turn("b")], loop=loop))
    stopped = await session.run("go", turn_policy=TurnPolicy(stop=_stop_after_one))
    loop.fail_restore = True
    with pytest.raises(AgentRunError):
        await resume_agent_run(session, stopped.run_state)
    assert w.provider_calls == 1


async def test_dur14_gvr_snapshot_is_stored_and_restored() -> None:
    """DUR-11/DUR-14/GVR-9: a suspended generate-validate-revise run keeps its attempts."""
    w = World()
    validations: list[Any] = []

    def validator(value: Any, ctx: Any) -> Any:
        validations.append(value)
        return {"ok": value == "good"}

    options = GenerateValidateReviseLoopOptions(validator=validator, tool_calls="bounded",
                                                max_revisions=3)
    script = [text_turn("bad"), tool_turn("c1"), text_turn("good")]
    session = w.session(w.agent(script, loop=options))
    first = await session.run("write")
    assert first.status == "suspended" and validations == ["bad"]
    loaded = await load_agent_run_state(w.checkpoints, run_id=first.run_id)
    loop_state = loaded.state["loop_state"]
    assert loop_state["name"] == "generate-validate-revise" and loop_state["revision"] == "1"
    assert loop_state["snapshot"]["attempts"] == 1
    result = await resume_agent_run(session, first.run_state, decision="approve")
    assert result.status == "succeeded" and result.artifact == "good"
    assert validations == ["bad", "good"]
    assert w.provider_calls == 3 and w.executed == [{"order": 1}]


# --------------------------------------------------------------------------- DUR-22 / DUR-23


# DUR-22 crash recovery (fork, adoption, ambiguity): tests/runtime/test_durable_crash.py


async def test_dur23_policy_stop_resumes_at_the_boundary_with_steers_once() -> None:
    """DUR-23/TP-8/TP-10/TP-13: a host_policy stop keeps the frontier; continue resumes without
    the policy; a steer queued during turn 1 is in the store, absent from the stopped leg's
    requests, and present exactly once in the first request of the resumed leg."""
    w = World()
    session_box: list[Any] = []

    def steering(args: dict[str, Any], ctx: Any) -> Any:
        session_box[0].steer("also check order 2")
        return {"ok": True}

    agent = w.agent([tool_turn("c1"), text_turn("done")], run_state=w.options(),
                    tools=[ToolDefinition(name="refund", execute=steering)])
    session = w.session(agent)
    session_box.append(session)
    stopped = await session.run("go", turn_policy=TurnPolicy(stop=_stop_after_one))
    assert (stopped.status, stopped.stop_reason, stopped.stop_detail) == (
        "succeeded", "host_policy", "pause")
    assert stopped.run_state.status == "succeeded"
    assert stopped.run_state.stop_reason == "host_policy"
    texts = [m.text for m in await stored(w, session)]
    assert texts.count("also check order 2") == 1
    stopped_requests = w.providers[0].requests
    assert all("also check order 2" not in json.dumps(r.to_dict()) for r in stopped_requests)
    result = await resume_agent_run(session, stopped.run_state)
    assert result.status == "succeeded" and result.stop_reason is None
    second = w.providers[0].requests[1]
    assert json.dumps(second.to_dict()).count("also check order 2") == 1
    assert w.provider_calls == 2


async def test_tp8_turn_limit_stop_is_not_continuable() -> None:
    """TP-8/DUR-15: a ``turn_limit`` stop finalises the envelope; it cannot be continued."""
    w = World()
    agent = w.agent([tool_turn("c1"), text_turn("x")],
                    run_state=w.options(checkpoint_policy="every-turn"))
    session = w.session(agent)
    result = await session.run("go", turn_policy=TurnPolicy(max_turns=1))
    assert result.stop_reason == "turn_limit"
    loaded = await load_agent_run_state(w.checkpoints, run_id=result.run_id)
    assert loaded.state["status"] == "succeeded"
    assert loaded.state["stop_reason"] == "turn_limit"
    with pytest.raises(AgentRunStateError):
        await resume_agent_run(session, result.run_state)


async def test_tp11_policy_failure_finalises_an_existing_envelope_as_failed() -> None:
    """TP-11: no every-turn write at the failing boundary; the envelope becomes ``failed``."""
    w = World()
    agent = w.agent([tool_turn("c1"), text_turn("x")],
                    run_state=w.options(checkpoint_policy="every-turn"))
    session = w.session(agent)

    def stop(c: Any) -> Any:
        from prism.runtime.turn_policy import Continue

        if c.turns >= 1:
            raise RuntimeError("bad policy")
        return Continue()

    with pytest.raises(AgentRunError) as info:
        await session.run("go", turn_policy=TurnPolicy(stop=stop))
    loaded = await load_agent_run_state(w.checkpoints, run_id=info.value.result.run_id)
    assert loaded.state["status"] == "failed"
    assert loaded.record.version == 4  # input, boundary 1, c1 dispatched, then failed
    assert info.value.result.error is not None
    assert info.value.result.error.code == "ERR_PRISM_TURN_POLICY"


# --------------------------------------------------------------------------- DUR-17 limits


async def test_dur17_counters_are_restored_and_cumulative() -> None:
    """DUR-17: limit counters continue across legs (a turn cap counts both legs)."""
    w = World()
    agent = w.agent([tool_turn("c1"), text_turn("done")], limits={"max_turns": 1})
    session = w.session(agent)
    first = await session.run("go")
    assert first.status == "suspended"
    with pytest.raises(AgentRunError) as info:
        await resume_agent_run(session, first.run_state, decision="approve")
    assert info.value.result.limit is not None
    assert info.value.result.limit.limit == "max_turns"
    assert w.executed == [{"order": 1}]


async def test_dur17_wall_time_counts_active_time_only() -> None:
    """DUR-17/LIM-6: the resumed deadline is ``max - stored wall time``; suspended time is free."""
    w = World()
    agent = w.agent([tool_turn("c1"), text_turn("done")],
                    limits={"max_wall_time_ms": 60_000})
    session = w.session(agent)
    first = await session.run("go")
    loaded = await load_agent_run_state(w.checkpoints, run_id=first.run_id)
    assert loaded.state["counters"]["wall_time_ms"] < 60_000
    # an almost exhausted budget: the resumed leg breaches max_wall_time_ms
    edited = json.loads(json.dumps(loaded.state))
    edited["counters"]["wall_time_ms"] = 59_999
    saved = await save_agent_run_state(checkpoints=w.checkpoints, state=edited,
                                       expected_version=1)
    slow = w.agent([[provider_text_delta("x"), provider_done()]],
                   limits={"max_wall_time_ms": 60_000})
    slow_provider = w.providers[-1]
    slow_provider._delay_s = 0.05
    with pytest.raises(AgentRunError) as info:
        await resume_agent_run(slow, first.run_id, decision="approve",
                               expected_version=saved.record.version)
    assert info.value.result.limit is not None
    assert info.value.result.limit.limit == "max_wall_time_ms"


async def test_dur16_busy_session_is_rejected() -> None:
    """DUR-16: the session must not be running."""
    w = World()
    session, first = await _suspended(w)
    gate = asyncio.Event()
    started = asyncio.Event()

    async def slow(args: dict[str, Any], ctx: Any) -> Any:
        started.set()
        await gate.wait()
        return {}

    busy_agent = w.agent([tool_turn("x1"), text_turn("ok")], run_state=None,
                         tools=[ToolDefinition(name="refund", execute=slow)])
    busy = busy_agent.create_session("session_busy")
    task = asyncio.create_task(busy.run("block"))
    await started.wait()
    with pytest.raises(AgentSessionBusyError):
        await resume_agent_run(busy, first.run_state, decision="approve")
    gate.set()
    assert (await task).status == "succeeded"
    assert (await load_agent_run_state(w.checkpoints, run_id=first.run_id)).record.version == 1


def test_dur5_fingerprint_of_agent_and_config_agree() -> None:
    """DUR-5: ``agent_fingerprint`` accepts the agent or its config."""
    w = World()
    agent = w.agent([])
    assert agent_fingerprint(agent, "v1") == agent_fingerprint(agent.config, "v1")


async def test_evt7_error_is_the_only_terminal_event_of_a_failed_resumed_leg() -> None:
    """EVT-7: a failed resumed leg ends with one ``error`` event."""
    w = World()
    session, first = await _suspended(w, [tool_turn("c1")])
    w.events.clear()
    with pytest.raises(AgentRunError):
        await resume_agent_run(session, first.run_state, decision="approve")
    assert isinstance(w.events[-1], ErrorEvent)
    assert kinds(w.events).count("error") == 1


# --------------------------------------------------------------------------- docs


@pytest.mark.parametrize("doc", ["durable-runs.md", "turn-policy.md"])
def test_docs_examples_run(doc: str) -> None:
    """The runnable examples in ``docs/`` execute as written (STYLE §8)."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "guides" / doc).read_text("utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S)
              if "asyncio.run(main())" in b]
    assert blocks
    for block in blocks:
        done = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0, done.stderr


async def test_a_run_id_alone_resumes_the_stored_version() -> None:
    """A run id (no ``expected_version``) resumes an approval-waiting run at its stored version;
    the claim is still a compare-and-set. A LoadedRunState is accepted as is, and an
    unsupported value names the accepted types."""
    w = World()
    session, first = await _suspended(w)
    by_id = await resume_agent_run(session, first.run_id, decision="approve")
    assert by_id.status == "succeeded"
    with pytest.raises(AgentRunStateError, match="already finished .succeeded.; nothing to resume"):
        await resume_agent_run(session, first.run_id, decision="approve")
    session, first = await _suspended(w)
    with pytest.raises(AgentRunStateError, match="AgentRunState .*LoadedRunState"):
        await resume_agent_run(session, 42, decision="approve")  # type: ignore[arg-type]
    loaded = await load_agent_run_state(w.checkpoints, run_id=first.run_id)
    result = await resume_agent_run(session, loaded, decision="approve")
    assert result.status == "succeeded"
