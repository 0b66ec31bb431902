"""Tool approvals: decision validation, gating, sticky decisions, suspension, resume replay
(APR-1..APR-10, DUR-18..DUR-21)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from prism.errors import AgentDecisionError, AgentRunError
from prism.ledger import MemoryRunLedger, project_execution_timeline
from prism.loops.contracts import SingleShotLoopOptions
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.redaction import create_secret_redactor
from prism.runtime.agent import create_agent
from prism.runtime.checkpoints import AGENT_RUN_NAMESPACE, MemoryCheckpointStore
from prism.runtime.durable import (
    DecisionScope,
    DurableRun,
    RunDecision,
    RunStateOptions,
    StickyDecision,
    arguments_hash,
    load_agent_run_state,
    resume_agent_run,
)
from prism.runtime.durable import _approvals as d
from prism.runtime.durable._run_envelope import PendingCall, RunEnvelope
from prism.tools import ToolRegistry
from prism.types import Message, ModelConfig, ToolCallContent, ToolDefinition, tool_result_message

MODEL = ModelConfig(provider="mock", model="demo")


def call(i: int, name: str = "refund", **args: Any) -> ToolCallContent:
    return ToolCallContent(f"c{i}", name, args or {"order": i})


# --------------------------------------------------------------------------- APR-7


def codes(decisions: Any) -> str:
    with pytest.raises(AgentDecisionError) as info:
        d.coerce_decisions(decisions)
    return info.value.code


def test_apr7_valid_batch_and_mapping_form() -> None:
    """APR-7: RunDecision objects or mappings, in order."""
    out = d.coerce_decisions(
        [RunDecision("a1", "allow_once"), {"approval_id": "a2", "outcome": "reject_for_run",
                                            "reason": "no"}]
    )
    assert out == [RunDecision("a1", "allow_once"), RunDecision("a2", "reject_for_run", "no")]


@pytest.mark.parametrize(
    ("decisions", "code"),
    [
        ([], "ERR_PRISM_DECISION_INVALID"),
        ("a1", "ERR_PRISM_DECISION_INVALID"),
        ({"approval_id": "a1"}, "ERR_PRISM_DECISION_INVALID"),
        ([RunDecision("", "allow_once")], "ERR_PRISM_DECISION_INVALID"),
        ([RunDecision("a" * 129, "allow_once")], "ERR_PRISM_DECISION_INVALID"),
        ([RunDecision("a1", "maybe")], "ERR_PRISM_DECISION_INVALID"),  # type: ignore[arg-type]
        ([RunDecision("a1", "allow_once", reason=3)], "ERR_PRISM_DECISION_INVALID"),  # type: ignore[arg-type]
        ([RunDecision("a1", "allow_once", modified_arguments=[1])], "ERR_PRISM_DECISION_INVALID"),  # type: ignore[arg-type]
        ([{"approval_id": "a1", "outcome": "allow_once", "extra": 1}],
         "ERR_PRISM_DECISION_INVALID"),
        ([RunDecision("a1", "allow_once"), RunDecision("a1", "reject_once")],
         "ERR_PRISM_DECISION_DUPLICATE"),
        ([RunDecision(f"a{i}", "allow_once") for i in range(129)], "ERR_PRISM_DECISION_LIMIT"),
        ([RunDecision("a1", "reject_once", reason="é" * 1025)], "ERR_PRISM_DECISION_LIMIT"),
        ([RunDecision("a1", "allow_once", modified_arguments={"x": "y" * 16_400})],
         "ERR_PRISM_DECISION_LIMIT"),
    ],
)
def test_apr7_invalid_batches(decisions: Any, code: str) -> None:
    """APR-7: INVALID / DUPLICATE / LIMIT codes."""
    assert codes(decisions) == code


def test_apr7_limits_are_inclusive() -> None:
    """APR-7: 128 decisions, 2048-byte reasons and 128-char ids are accepted."""
    assert len(d.coerce_decisions([RunDecision(f"a{i}", "allow_once") for i in range(128)])) == 128
    d.coerce_decisions([RunDecision("a" * 128, "reject_once", reason="x" * 2048)])


# --------------------------------------------------------------------------- APR-2 / APR-3 / APR-10


def durable(gating: bool = True) -> DurableRun:
    return DurableRun(
        RunStateOptions(MemoryCheckpointStore(), "v1", interrupt_before_tool=gating),
        config=create_agent(model=MODEL, id="desk").config,
        run_id="run_1",
        session_id="s",
        redactor=None,
        ownership=None,
    )


def gate(run: DurableRun, calls: list[Any]) -> list[Any]:
    """Announce a tool round, then let each call reach the pre-execution step (``hold``): the
    answers (``None``: it runs)."""
    run.gate_round(calls)
    return [run.hold(c) for c in calls]


def test_apr2_gate_round_records_pending_decisions_in_call_order() -> None:
    """APR-2: each call gets ``{call, ready, approval_…}`` and a PendingDecision with the hash."""
    run = durable()
    gate(run, [call(1), call(2)])
    entries = run.open_pending_calls()
    assert [e["call"]["id"] for e in entries] == ["c1", "c2"]
    assert all(e["status"] == "ready" and e["approval_id"].startswith("approval_") for e in entries)
    interruption = run.round_interruption()
    assert interruption.kind == "tool_approval"
    assert interruption.reason == "2 tool side effects require approval"
    assert interruption.tool_call_id is None and interruption.tool_name is None
    first = interruption.pending_decisions[0]
    assert first.kind == "tool_approval" and first.tool_call_id == "c1"
    assert first.reason == "Tool side effect requires approval"
    assert first.scope == DecisionScope(tool_name="refund", arguments_hash=arguments_hash({"order": 1}))


def test_apr5_single_decision_interruption_carries_call_fields() -> None:
    """APR-5: one decision → its reason, tool_call_id and tool_name."""
    run = durable()
    gate(run, [call(1)])
    i = run.round_interruption()
    assert (i.reason, i.tool_call_id, i.tool_name) == (
        "Tool side effect requires approval",
        "c1",
        "refund",
    )


def test_apr2_more_than_32_open_gated_calls_fail() -> None:
    """APR-2: the 33rd open gated call raises ERR_PRISM_DECISION_LIMIT."""
    run = durable()
    gate(run, [call(i) for i in range(32)])
    with pytest.raises(AgentDecisionError) as info:
        run.hold(call(99))
    assert info.value.code == "ERR_PRISM_DECISION_LIMIT"


def test_apr1_no_gating_without_interrupt_before_tool() -> None:
    """APR-1: gating only with ``interrupt_before_tool=True``."""
    run = durable(gating=False)
    assert gate(run, [call(1)]) == [None]
    assert not run.has_open_round and run.before_dispatch(call(1)) is None


def test_apr3_gated_calls_and_sticky_rejections_are_answered_without_dispatch() -> None:
    """APR-3: gated → approval_pending marker; reject_for_run sticky → approval_rejected row."""
    run = durable()
    run.sticky = [
        StickyDecision(scope=DecisionScope(tool_name="wipe"), outcome="reject_for_run",
                       reason="never", decided_at="t"),
    ]
    pending, rejected = gate(run, [call(1), call(2, "wipe")])
    assert pending is not None and pending.metadata == {"approval_pending": True}
    assert run.before_dispatch(call(1)) == pending
    assert rejected is not None and rejected.error is not None
    assert (rejected.error.code, rejected.error.message) == ("approval_rejected", "never")
    assert [e["call"]["id"] for e in run.open_pending_calls()] == ["c1"]
    run.sticky[0] = StickyDecision(scope=DecisionScope(tool_name="wipe"),
                                   outcome="reject_for_run", decided_at="t")
    default = run.hold(call(3, "wipe"))
    assert default is not None and default.error is not None
    assert default.error.message == "Rejected for this run"


def test_apr10_sticky_scope_matching() -> None:
    """APR-10: every set scope field must equal the call's; unset fields match anything."""
    by_hash = StickyDecision(
        scope=DecisionScope(tool_name="refund", arguments_hash=arguments_hash({"order": 1})),
        outcome="allow_for_run",
        decided_at="t",
    )
    by_name = StickyDecision(scope=DecisionScope(tool_name="refund"), outcome="allow_for_run",
                             decided_at="t")
    anything = StickyDecision(scope=DecisionScope(), outcome="allow_for_run", decided_at="t")
    assert d.sticky_match([by_hash], call(1)) is by_hash
    assert d.sticky_match([by_hash], call(2)) is None
    assert d.sticky_match([by_name], call(2)) is by_name
    assert d.sticky_match([by_name], call(2, "other")) is None
    assert d.sticky_match([anything], call(2, "other")) is anything


def test_apr4_backstop_applies_only_to_unannounced_unallowed_calls() -> None:
    """APR-4: a call held outside an announced round suspends at once (the backstop) unless an
    allow_for_run sticky matches."""
    run = durable()
    assert run.hold(call(1)) is not None and not run.announced(call(1))
    gate(run, [call(2)])
    assert run.announced(call(2))
    run.sticky = [StickyDecision(scope=DecisionScope(tool_name="refund"),
                                 outcome="allow_for_run", decided_at="t")]
    assert run.hold(call(3)) is None
    assert gate(run, [call(4)]) == [None]  # matches the sticky: not gated
    assert [e["call"]["id"] for e in run.open_pending_calls()] == ["c1", "c2"]


# --------------------------------------------------------------------------- APR-8


REGISTRY = ToolRegistry(
    [
        ToolDefinition(
            name="refund",
            execute=lambda a, c: a,
            parameters={
                "type": "object",
                "properties": {"order": {"type": "integer"}},
                "required": ["order"],
            },
        )
    ]
)


def suspended_state(n: int = 2) -> dict[str, Any]:
    run = durable()
    gate(run, [call(i) for i in range(1, n + 1)])
    return {
        "pending_calls": run.open_pending_calls(),
        "sticky_decisions": [],
        "interruption": run.round_interruption().to_dict(),
    }


def apply_(state: dict[str, Any], decisions: Any, registry: ToolRegistry) -> SimpleNamespace:
    """``apply_decisions`` on an envelope holding ``state``'s calls, sticky decisions and
    interruption; the outcome's calls and sticky decisions as JSON."""
    envelope = RunEnvelope(
        agent_id="desk",
        definition_revision="v1",
        fingerprint="f",
        run_id="run_1",
        session_id="s",
        model={},
        interrupt_before_tool=True,
        checkpoint_policy="on-suspend",
        status="suspended",
        counters={},
        pending_calls=tuple(PendingCall.from_json(e) for e in state["pending_calls"]),
        sticky_decisions=tuple(state["sticky_decisions"]),
        interruption=state["interruption"],
    )
    applied = d.apply_decisions(envelope, decisions, registry)
    return SimpleNamespace(
        pending_calls=[e.to_json() for e in applied.pending_calls],
        sticky=list(applied.sticky),
        remaining=applied.remaining,
    )


def ids(state: dict[str, Any]) -> list[str]:
    return [e["approval_id"] for e in state["pending_calls"]]


def test_apr8_approve_resolves_everything_as_allow_once() -> None:
    """DUR-18: ``approve`` → every pending decision ``allow_once``."""
    state = suspended_state()
    applied = apply_(state, None, REGISTRY)
    assert applied.remaining == []
    assert [e["decision"]["outcome"] for e in applied.pending_calls] == ["allow_once"] * 2
    assert "decision" not in state["pending_calls"][0]  # the input is not mutated


def test_apr8_partial_batch_leaves_remaining_decisions() -> None:
    """APR-8: a strict subset decides some; the rest remain pending."""
    state = suspended_state()
    first, second = ids(state)
    applied = apply_(state, [RunDecision(first, "reject_once", "nope")], REGISTRY)
    assert [p.approval_id for p in applied.remaining] == [second]
    assert applied.pending_calls[0]["decision"] == {
        "approval_id": first, "outcome": "reject_once", "reason": "nope"
    }


def test_apr8_unknown_approval_id_rejects_the_whole_batch() -> None:
    """APR-8: any unknown id → ERR_PRISM_DECISION_UNKNOWN; nothing applied."""
    state = suspended_state()
    first, _ = ids(state)
    with pytest.raises(AgentDecisionError) as info:
        apply_(
            state, [RunDecision(first, "allow_once"), RunDecision("approval_x", "allow_once")],
            REGISTRY,
        )
    assert info.value.code == "ERR_PRISM_DECISION_UNKNOWN"
    assert all("decision" not in e for e in state["pending_calls"])


def test_apr8_modified_arguments_are_validated_against_the_schema() -> None:
    """APR-8: modified arguments must match the tool's parameters."""
    state = suspended_state(1)
    (only,) = ids(state)
    with pytest.raises(AgentDecisionError) as info:
        apply_(
            state, [RunDecision(only, "allow_once", modified_arguments={"order": "x"})], REGISTRY
        )
    assert info.value.code == "ERR_PRISM_DECISION_INVALID"
    ok = apply_(
        state, [RunDecision(only, "allow_once", modified_arguments={"order": 9})], REGISTRY
    )
    assert ok.pending_calls[0]["decision"]["modified_arguments"] == {"order": 9}


def test_apr8_for_run_outcomes_add_sticky_decisions() -> None:
    """APR-8: *_for_run adds a sticky; scope drops the hash when arguments were modified."""
    state = suspended_state()
    first, second = ids(state)
    applied = apply_(
        state,
        [
            RunDecision(first, "allow_for_run"),
            RunDecision(second, "reject_for_run", "no", modified_arguments={"order": 1}),
        ],
        REGISTRY,
    )
    scopes = [s["scope"] for s in applied.sticky]
    assert scopes == [
        {"tool_name": "refund", "arguments_hash": arguments_hash({"order": 1})},
        {"tool_name": "refund", "arguments_hash": arguments_hash({"order": 2})},
    ]
    assert [s["outcome"] for s in applied.sticky] == ["allow_for_run", "reject_for_run"]
    assert applied.sticky[1]["reason"] == "no"


def test_apr8_modified_allow_for_run_scope_has_no_hash() -> None:
    """APR-8: ``allow_for_run`` with modified arguments → scope by tool name only."""
    state = suspended_state(1)
    (only,) = ids(state)
    applied = apply_(
        state, [RunDecision(only, "allow_for_run", modified_arguments={"order": 5})], REGISTRY
    )
    assert applied.sticky[0]["scope"] == {"tool_name": "refund"}


def test_apr8_more_than_64_stickies_fail() -> None:
    """APR-8: over 64 sticky decisions → ERR_PRISM_DECISION_LIMIT."""
    state = suspended_state(1)
    (only,) = ids(state)
    state["sticky_decisions"] = [
        StickyDecision(scope=DecisionScope(tool_name=f"t{i}"), outcome="allow_for_run",
                       decided_at="t").to_dict()
        for i in range(64)
    ]
    with pytest.raises(AgentDecisionError) as info:
        apply_(state, [RunDecision(only, "allow_for_run")], REGISTRY)
    assert info.value.code == "ERR_PRISM_DECISION_LIMIT"
    apply_(state, [RunDecision(only, "allow_once")], REGISTRY)


# --------------------------------------------------------------------------- through session.run

class Desk:
    """A gated agent over shared stores with execution counters."""

    def __init__(self) -> None:
        self.checkpoints = MemoryCheckpointStore()
        self.executed: list[tuple[str, dict[str, Any]]] = []
        self.in_flight = 0
        self.max_in_flight = 0

    def tool(self, name: str) -> ToolDefinition:
        async def execute(args: dict[str, Any], ctx: Any) -> Any:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.executed.append((name, dict(args)))
            self.in_flight -= 1
            return {"done": name}

        return ToolDefinition(name=name, execute=execute)

    def agent(self, turns: list[Any], **kw: Any) -> Any:
        kw.setdefault("tools", [self.tool("refund"), self.tool("lookup")])
        provider = create_mock_provider(turns=turns)
        self.provider = provider
        return create_agent(model=MODEL, id="desk", provider=provider,
                            run_state=RunStateOptions(self.checkpoints, "v1",
                                                      interrupt_before_tool=True), **kw)


def calls_turn(*calls: tuple[str, str, dict[str, Any]]) -> list[Any]:
    return [*(provider_tool_call(i, n, a) for i, n, a in calls), provider_done()]


def text_turn(text: str) -> list[Any]:
    return [provider_text_delta(text), provider_done()]


async def test_the_interruption_shows_the_arguments_redacted_and_capped() -> None:
    """Each pending decision carries the call id, the tool name and the arguments an approver
    reads — registered secrets redacted, at most 4 KB — while the approval binds to the full
    arguments' hash."""
    desk = Desk()
    args = {"card": "4111-1111", "token": "sk-1", "note": "é" * 3000}
    agent = desk.agent([calls_turn(("c1", "refund", args))],
                       redactor=create_secret_redactor(["sk-1"]))
    result = await agent.create_session().run("go")
    assert result.status == "suspended"
    (pending,) = result.interruption.pending_decisions
    assert (pending.tool_call_id, pending.tool_name) == ("c1", "refund")
    assert pending.arguments is not None and pending.arguments.startswith('{"card": "4111-1111"')
    assert "sk-1" not in pending.arguments and '"token": "[REDACTED]"' in pending.arguments
    assert len(pending.arguments.encode()) <= 4096 and pending.arguments_truncated
    assert pending.arguments.endswith("…")
    # the full arguments, as shown (redacted): what the approval binds to
    assert pending.scope.arguments_hash == arguments_hash({**args, "token": "[REDACTED]"})
    assert "sk-1" not in json.dumps(result.run_state.to_dict())
    stored = json.dumps((await load_agent_run_state(desk.checkpoints, run_id=result.run_id)).state)
    assert "sk-1" not in stored
    # DUR-3: namespace and key
    assert list(desk.checkpoints._records) == [(AGENT_RUN_NAMESPACE, result.run_id)]


async def test_pool8_parallel_round_executes_no_gated_call() -> None:
    """POOL-8/APR-5: with concurrency 2 and gating, no worker executes a gated call."""
    desk = Desk()
    agent = desk.agent(
        [calls_turn(("c1", "refund", {"o": 1}), ("c2", "lookup", {"o": 2})), text_turn("ok")],
        loop=SingleShotLoopOptions(tool_concurrency=2),
    )
    session = agent.create_session()
    result = await session.run("go")
    assert result.status == "suspended" and desk.executed == []
    assert len(result.interruption.pending_decisions) == 2
    done = await resume_agent_run(session, result.run_state, decision="approve")
    assert done.status == "succeeded"
    assert desk.executed == [("refund", {"o": 1}), ("lookup", {"o": 2})]
    assert desk.provider.call_count == 2


async def test_apr5_ungated_calls_of_the_round_run_before_the_suspension() -> None:
    """APR-5/APR-10: a sticky-allowed call in a round runs and stores its row; the other call
    suspends the run at the next boundary."""
    desk = Desk()
    agent = desk.agent([
        calls_turn(("c1", "lookup", {"q": 1})),
        calls_turn(("c2", "lookup", {"q": 1}), ("c3", "refund", {"o": 3})),
        text_turn("done"),
    ])
    session = agent.create_session()
    first = await session.run("go")
    (pending,) = first.interruption.pending_decisions
    second = await resume_agent_run(
        session, first.run_state,
        decisions=[{"approval_id": pending.approval_id, "outcome": "allow_for_run"}],
    )
    assert second.status == "suspended"
    assert second.interruption.tool_call_id == "c3"
    assert desk.executed == [("lookup", {"q": 1}), ("lookup", {"q": 1})]
    assert [m.role for m in second.messages] == ["tool", "assistant", "tool"]
    assert second.messages[-1].content[0].tool_call_id == "c2"
    loaded = await load_agent_run_state(desk.checkpoints, run_id=first.run_id)
    assert [s["outcome"] for s in loaded.state["sticky_decisions"]] == ["allow_for_run"]
    third = await resume_agent_run(session, second.run_state, decision="approve")
    assert third.status == "succeeded"
    assert desk.executed[-1] == ("refund", {"o": 3})
    assert desk.provider.call_count == 3


async def test_apr2_more_than_32_gated_calls_fail_the_run() -> None:
    """APR-2: a round opening a 33rd gated call fails the run with ERR_PRISM_DECISION_LIMIT."""
    desk = Desk()
    calls = [(f"c{i}", "refund", {"o": i}) for i in range(33)]
    session = desk.agent([calls_turn(*calls)], limits={"max_tool_calls": 64}).create_session()
    with pytest.raises(AgentRunError) as info:
        await session.run("go")
    assert info.value.result.error is not None
    assert info.value.result.error.code == "ERR_PRISM_DECISION_LIMIT"
    assert desk.executed == []
    rows = [m for m in info.value.result.messages if m.role == "tool"]
    assert len(rows) == 33  # every call answered (POOL-1)


class DirectLoop:
    """A durable custom loop that dispatches without ``charge_tool_round`` (hits APR-4)."""

    name = "direct"

    def __init__(self) -> None:
        self.phase = "start"

    def snapshot(self) -> Any:
        return {"phase": self.phase}

    def restore(self, snapshot: Any) -> None:
        self.phase = snapshot["phase"]

    async def _turn(self, ctx: Any, next_input: Any) -> Any:
        result = await ctx.generate(await ctx.assemble(next_input))
        if self.phase == "start":
            ctx.history.extend(ctx.input_messages)
        message = Message(role="assistant", content=result.content)
        ctx.history.append(message)
        await ctx.append_message(message)
        return result

    async def run(self, ctx: Any) -> None:
        if self.phase == "start":
            result = await self._turn(ctx, ctx.input)
            self.phase = "dispatching"
            for call in result.calls:
                outcome = await ctx.dispatch_tool_call(call)
                row = tool_result_message(outcome)
                ctx.history.append(row)
                await ctx.append_message(row)
        await self._turn(ctx, [])
        self.phase = "done"
        return None


async def test_apr4_backstop_suspends_a_direct_dispatch() -> None:
    """APR-4: a call reaching execution ungated suspends on that call from inside dispatch."""
    desk = Desk()
    loop = DirectLoop()
    agent = desk.agent([calls_turn(("c1", "refund", {"o": 1})), text_turn("done")], loop=loop)
    session = agent.create_session()
    first = await session.run("go")
    assert first.status == "suspended"
    assert first.interruption.tool_call_id == "c1" and desk.executed == []
    loaded = await load_agent_run_state(desk.checkpoints, run_id=first.run_id)
    assert [e["call"]["id"] for e in loaded.state["pending_calls"]] == ["c1"]
    assert loaded.state["loop_state"]["snapshot"] == {"phase": "dispatching"}
    done = await resume_agent_run(session, first.run_state, decision="approve")
    assert done.status == "succeeded" and done.text == "done"
    assert desk.executed == [("refund", {"o": 1})]
    assert desk.provider.call_count == 2


async def test_run19_suspension_records_and_timeline() -> None:
    """RUN-19/REC-2/CON-32: the finish record of a suspended leg says ``suspended``; the
    timeline counts both legs."""
    desk = Desk()
    ledger = MemoryRunLedger()
    session = desk.agent([calls_turn(("c1", "refund", {"o": 1})), text_turn("ok")],
                         run_ledger=ledger).create_session()
    first = await session.run("go")
    assert [r.status for r in ledger.runs] == ["running", "suspended"]
    await resume_agent_run(session, first.run_state, decision="approve")
    assert [r.status for r in ledger.runs] == ["running", "suspended", "running", "succeeded"]
    timeline = project_execution_timeline(ledger.events, ledger.runs)
    assert timeline.legs == 2 and timeline.status == "succeeded"
    kinds = [e.type for e in ledger.events]
    assert kinds.count("agent_suspended") == 1 and kinds.count("agent_resumed") == 1


async def test_dur6_operator_decisions_are_redacted_when_stored() -> None:
    """DUR-6: a decision's reason joins the envelope redacted (the row text is redacted too)."""
    from prism.redaction import create_secret_redactor

    desk = Desk()
    agent = desk.agent(
        [calls_turn(("c1", "refund", {"o": 1}), ("c2", "refund", {"o": 2})), text_turn("ok")],
        redactor=create_secret_redactor(["sk-1"]),
    )
    session = agent.create_session()
    first = await session.run("go")
    a, b = first.interruption.pending_decisions
    partial = await resume_agent_run(
        session, first.run_state,
        decisions=[{"approval_id": a.approval_id, "outcome": "reject_once",
                    "reason": "key sk-1 leaked"}],
    )
    loaded = await load_agent_run_state(desk.checkpoints, run_id=first.run_id)
    assert "sk-1" not in json.dumps(loaded.state)
    assert loaded.state["pending_calls"][0]["decision"]["reason"] == "key [REDACTED] leaked"
    done = await resume_agent_run(session, partial.run_state, decision="approve")
    row = done.messages[0].content[0]
    assert row.error is not None and row.error.message == "key [REDACTED] leaked"
