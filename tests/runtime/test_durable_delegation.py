"""Durable delegation (issue 16, item 2): an agent tool's child run records itself in the
calling run's pending call before it starts, suspends the calling run when it waits for an
approval (``ERR_PRISM_DELEGATION_SUSPENDED``), and is continued first when the calling run is
resumed; its approvals are listed and answered on the calling run."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from runtime_support import MODEL, assert_provider_valid, run_collect

from prism.errors import AgentDecisionError, AgentRunError
from prism.events import SubagentEvent
from prism.guardrails import Guardrail, GuardrailDecision, Guardrails
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.redaction import create_secret_redactor
from prism.runtime.agent import Agent, create_agent
from prism.runtime.checkpoints import AGENT_RUN_NAMESPACE, MemoryCheckpointStore
from prism.runtime.durable import RunStateOptions, load_agent_run_state, resume_agent_run
from prism.runtime.turn_policy import Continue, Stop, TurnPolicy
from prism.store import MemorySessionStore, read_branch
from prism.types import RunResult, ToolDefinition, ToolResultContent, message_text


def _turn(*calls: tuple[str, str, dict[str, Any]]) -> list[Any]:
    return [*(provider_tool_call(i, n, a) for i, n, a in calls), provider_done()]


def _text(text: str) -> list[Any]:
    return [provider_text_delta(text), provider_done()]


class Desk:
    """Shared stores, and a log of every tool that ran."""

    def __init__(self) -> None:
        self.checkpoints = MemoryCheckpointStore()
        self.store = MemorySessionStore()
        self.ran: list[tuple[str, Any]] = []

    def tool(self, name: str, *, gated: bool = False) -> ToolDefinition:
        def execute(arguments: dict[str, Any], context: Any) -> Any:
            self.ran.append((name, arguments))
            return f"{name} ok"

        return ToolDefinition(
            name=name,
            execute=execute,
            needs_approval=gated,
            parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
        )

    def child(self, name: str, turns: list[Any], *, durable: bool = False) -> Agent:
        return create_agent(
            name=name,
            model=MODEL,
            provider=create_mock_provider(turns=turns),
            tools=[self.tool("lookup"), self.tool("pay", gated=True)],
            run_state=RunStateOptions(self.checkpoints, "child-v1") if durable else None,
        )

    def lead(self, turns: list[Any], children: list[Agent], **options: Any) -> Agent:
        durable = options.pop("durable", True)
        policy = options.pop("checkpoint_policy", "on-suspend")
        return create_agent(
            name="lead",
            model=MODEL,
            provider=create_mock_provider(turns=turns),
            tools=[c.as_tool() for c in children],
            store=self.store,
            run_state=(
                RunStateOptions(self.checkpoints, "v1", checkpoint_policy=policy)
                if durable else None
            ),
            **options,
        )


async def test_the_child_suspends_the_parent_and_is_approved_through_it() -> None:
    desk = Desk()
    child = desk.child("clerk", [_turn(("k1", "lookup", {"n": 1}), ("k2", "pay", {"n": 7}))])
    lead = desk.lead([_turn(("p1", "clerk", {"input": "pay 7"}))], [child])
    session = lead.create_session()
    first, events = await run_collect(session, "go")
    assert isinstance(first, RunResult) and first.status == "suspended"
    assert desk.ran == [("lookup", {"n": 1})]
    # The parent's pending approvals list the child's, naming the child run and the call.
    assert first.interruption is not None
    (pending,) = first.interruption.pending_decisions
    assert (pending.tool_call_id, pending.tool_name, pending.arguments) == ("k2", "pay", '{"n": 7}')
    assert pending.subagent is not None
    child_run = pending.subagent["run_id"]
    assert pending.subagent == {
        "tool_call_id": "p1",
        "agent": "clerk",
        "session_id": f"{first.run_id}.p1",
        "run_id": child_run,
    }
    # The parent's envelope keeps the child link; the child's envelope is suspended on pay.
    parent_state = (await load_agent_run_state(desk.checkpoints, run_id=first.run_id)).state
    (entry,) = parent_state["pending_calls"]
    assert entry["status"] == "dispatched" and entry["call"]["id"] == "p1"
    assert entry["child"] == {"agent": "clerk", "session_id": f"{first.run_id}.p1", "run_id": child_run}
    child_state = (await load_agent_run_state(desk.checkpoints, run_id=child_run)).state
    assert child_state["status"] == "suspended"
    # The subscriber saw the child suspend, then the parent.
    wrapped = [e.event.type for e in events if isinstance(e, SubagentEvent)]
    assert wrapped[-1] == "agent_suspended" and events[-1].type == "agent_suspended"
    # No row answers the delegated call yet.
    messages = [e.message for e in await session.entries() if e.message is not None]
    assert not any(m.role == "tool" for m in messages)

    # A fresh pair of agents (another worker) approves the child's call on the parent.
    child = desk.child("clerk", [_text("paid 7")])
    lead = desk.lead([_text("all paid")], [child])
    done = await resume_agent_run(
        lead, first.run_id, decisions=[{"approval_id": pending.approval_id, "outcome": "allow_once"}]
    )
    assert done.status == "succeeded" and message_text(done.messages[-1]) == "all paid"
    assert desk.ran == [("lookup", {"n": 1}), ("pay", {"n": 7})]
    row = done.messages[0].content[0]
    assert isinstance(row, ToolResultContent) and row.result == "paid 7"
    for run_id in (first.run_id, child_run):
        state = (await load_agent_run_state(desk.checkpoints, run_id=run_id)).state
        assert state["status"] == "succeeded"
    assert done.leaf_id is not None
    branch = await read_branch(desk.store, session.id, done.leaf_id)
    assert_provider_valid([e.message for e in branch if e.message is not None])
    child_messages = [
        e.message for e in await desk.store.list(f"{first.run_id}.p1") if e.message is not None
    ]
    assert_provider_valid(child_messages)


async def test_partial_decisions_on_the_parent_keep_both_suspended_until_all_are_given() -> None:
    desk = Desk()
    child = desk.child("clerk", [_turn(("k1", "pay", {"n": 1}), ("k2", "pay", {"n": 2}))])
    lead = desk.lead([_turn(("p1", "clerk", {"input": "pay"}))], [child])
    first = await lead.create_session().run("go")
    assert first.interruption is not None
    one, two = first.interruption.pending_decisions
    lead = desk.lead([], [desk.child("clerk", [])])
    again = await resume_agent_run(
        lead, first.run_id, decisions=[{"approval_id": one.approval_id, "outcome": "allow_once"}]
    )
    assert again.status == "suspended" and desk.ran == []
    assert again.interruption is not None
    assert [p.approval_id for p in again.interruption.pending_decisions] == [two.approval_id]
    assert again.interruption.pending_decisions[0].subagent is not None
    # the child's decision was kept on the parent, not yet given to the child
    child_run = one.subagent["run_id"] if one.subagent else ""
    child_state = (await load_agent_run_state(desk.checkpoints, run_id=child_run)).state
    assert child_state["status"] == "suspended"

    lead = desk.lead([_text("done")], [desk.child("clerk", [_text("paid both")])])
    done = await resume_agent_run(
        lead, first.run_id, decisions=[{"approval_id": two.approval_id, "outcome": "reject_once"}]
    )
    assert done.status == "succeeded"
    assert desk.ran == [("pay", {"n": 1})]  # k2 was rejected, k1 ran once


async def test_approve_reaches_the_child_and_a_second_suspension_of_the_child_suspends_again() -> None:
    desk = Desk()
    script = [_turn(("k1", "pay", {"n": 1})), _turn(("k2", "pay", {"n": 2})), _text("paid twice")]
    lead = desk.lead([_turn(("p1", "clerk", {"input": "pay"}))], [desk.child("clerk", script[:1])])
    first = await lead.create_session().run("go")
    assert first.status == "suspended"
    lead = desk.lead([], [desk.child("clerk", script[1:2])])
    second = await resume_agent_run(lead, first.run_id, decision="approve")
    # the child ran pay once, then asked again: the parent suspends again, on the new approval
    assert second.status == "suspended" and desk.ran == [("pay", {"n": 1})]
    assert second.interruption is not None
    (pending,) = second.interruption.pending_decisions
    assert pending.tool_call_id == "k2" and pending.subagent is not None
    lead = desk.lead([_text("done")], [desk.child("clerk", script[2:])])
    done = await resume_agent_run(lead, first.run_id, decision="approve")
    assert done.status == "succeeded"
    assert desk.ran == [("pay", {"n": 1}), ("pay", {"n": 2})]
    row = done.messages[0].content[0]
    assert isinstance(row, ToolResultContent) and row.result == "paid twice"


async def test_two_children_in_parallel_both_suspend_and_both_are_approved() -> None:
    desk = Desk()
    children = [
        desk.child("a", [_turn(("a1", "pay", {"n": 1}))]),
        desk.child("b", [_turn(("b1", "pay", {"n": 2}))]),
    ]
    lead = desk.lead(
        [_turn(("p1", "a", {"input": "x"}), ("p2", "b", {"input": "y"}))],
        children,
        loop={"strategy": "single-shot", "tool_concurrency": 2},
    )
    first = await lead.create_session().run("go")
    assert first.status == "suspended" and first.interruption is not None
    agents = sorted(
        p.subagent["agent"] for p in first.interruption.pending_decisions if p.subagent
    )
    assert agents == ["a", "b"]
    state = (await load_agent_run_state(desk.checkpoints, run_id=first.run_id)).state
    assert sorted(e["call"]["id"] for e in state["pending_calls"]) == ["p1", "p2"]
    children = [desk.child("a", [_text("a paid")]), desk.child("b", [_text("b paid")])]
    lead = desk.lead(
        [_text("both paid")], children, loop={"strategy": "single-shot", "tool_concurrency": 2}
    )
    done = await resume_agent_run(lead, first.run_id, decision="approve")
    assert done.status == "succeeded"
    assert sorted(desk.ran, key=str) == [("pay", {"n": 1}), ("pay", {"n": 2})]
    results = {
        part.tool_call_id: part.result
        for m in done.messages
        for part in m.content
        if isinstance(part, ToolResultContent)
    }
    assert results == {"p1": "a paid", "p2": "b paid"}


async def test_the_child_run_id_is_recorded_before_the_child_writes_anything() -> None:
    desk = Desk()
    writes: list[tuple[str, dict[str, Any]]] = []
    inner = desk.checkpoints

    class Recording:
        async def save_checkpoint(self, **kwargs: Any) -> Any:
            writes.append((kwargs["key"], kwargs["value"]))
            return await inner.save_checkpoint(**kwargs)

        async def load_checkpoint(self, **kwargs: Any) -> Any:
            return await inner.load_checkpoint(**kwargs)

    desk.checkpoints = Recording()  # type: ignore[assignment]
    child = desk.child("clerk", [_turn(("k1", "lookup", {"n": 1})), _text("found")])
    lead = desk.lead(
        [_turn(("p1", "clerk", {"input": "look"})), _text("done")],
        [child],
        checkpoint_policy="every-turn",
    )
    result = await lead.create_session().run("go")
    assert result.status == "succeeded"
    keys = [key for key, _ in writes]
    child_run = next(key for key in keys if key != result.run_id)
    first_child_write = keys.index(child_run)
    parent_before = [value for key, value in writes[:first_child_write] if key == result.run_id]
    entry = parent_before[-1]["pending_calls"][0]
    assert entry["status"] == "dispatched" and entry["child"]["run_id"] == child_run


async def test_a_parent_that_is_not_durable_fails_when_its_child_suspends() -> None:
    desk = Desk()
    child = desk.child("clerk", [_turn(("k1", "pay", {"n": 1}))], durable=True)
    lead = desk.lead([_turn(("p1", "clerk", {"input": "pay"}))], [child], durable=False)
    session = lead.create_session()
    with pytest.raises(AgentRunError) as caught:
        await session.run("go")
    assert caught.value.result.error is not None
    assert caught.value.result.error.code == "ERR_PRISM_DELEGATION_SUSPENDED"
    assert_provider_valid([e.message for e in await session.entries() if e.message is not None])


async def test_a_non_durable_parent_fails_with_the_delegation_code_at_the_top_level() -> None:
    desk = Desk()
    child = desk.child("clerk", [_turn(("k1", "pay", {"n": 1}))], durable=True)
    lead = desk.lead([_turn(("p1", "clerk", {"input": "pay"}))], [child], durable=False)
    with pytest.raises(AgentRunError) as caught:
        await lead.create_session().run("go")
    assert caught.value.code == "ERR_PRISM_DELEGATION_SUSPENDED"
    assert "durable run state" in str(caught.value)


async def test_bad_decisions_for_a_child_change_nothing() -> None:
    desk = Desk()
    lead = desk.lead(
        [_turn(("p1", "clerk", {"input": "pay"}))],
        [desk.child("clerk", [_turn(("k1", "pay", {"n": 1}))])],
    )
    first = await lead.create_session().run("go")
    assert first.interruption is not None
    (pending,) = first.interruption.pending_decisions
    before = await desk.checkpoints.load_checkpoint(
        namespace=AGENT_RUN_NAMESPACE, key=first.run_id
    )
    lead = desk.lead([], [desk.child("clerk", [])])
    with pytest.raises(AgentDecisionError) as modified:
        await resume_agent_run(lead, first.run_id, decisions=[{
            "approval_id": pending.approval_id, "outcome": "allow_once",
            "modified_arguments": {"n": 2},
        }])
    assert modified.value.code == "ERR_PRISM_DECISION_INVALID"
    with pytest.raises(AgentDecisionError) as unknown:
        await resume_agent_run(
            lead, first.run_id, decisions=[{"approval_id": "approval_x", "outcome": "allow_once"}]
        )
    assert unknown.value.code == "ERR_PRISM_DECISION_UNKNOWN"
    after = await desk.checkpoints.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=first.run_id)
    assert before is not None and after is not None and after.version == before.version
    assert desk.ran == []


async def test_denying_the_parent_denies_its_suspended_child_too() -> None:
    desk = Desk()
    lead = desk.lead(
        [_turn(("p1", "clerk", {"input": "pay"}))],
        [desk.child("clerk", [_turn(("k1", "pay", {"n": 1}))])],
    )
    session = lead.create_session()
    first = await session.run("go")
    assert first.interruption is not None
    child = first.interruption.pending_decisions[0].subagent
    assert child is not None
    lead = desk.lead([_text("ok")], [desk.child("clerk", [])])
    denied = await resume_agent_run(lead, first.run_id, decision="deny")
    assert denied.status == "denied" and desk.ran == []
    child_state = (await load_agent_run_state(desk.checkpoints, run_id=child["run_id"])).state
    assert child_state["status"] == "denied"
    for session_id, leaf in ((session.id, denied.leaf_id), (child["session_id"], None)):
        entries = await desk.store.list(session_id)
        branch = await read_branch(desk.store, session_id, leaf or entries[-1].id)
        assert_provider_valid([e.message for e in branch if e.message is not None])


async def test_a_turn_policy_stop_reaches_the_child_and_both_continue() -> None:
    desk = Desk()
    draining = {"on": False}

    def drain(arguments: dict[str, Any], context: Any) -> Any:
        desk.ran.append(("drain", arguments))
        draining["on"] = True  # the host starts draining while the child works
        return "ok"

    def stop(context: Any) -> Any:
        return Stop("worker draining") if draining["on"] else Continue()

    child_script = [_turn(("k1", "drain", {})), _text("child done")]
    providers: list[Any] = []

    def clerk(script: list[Any]) -> Agent:
        providers.append(create_mock_provider(turns=script))
        return create_agent(
            name="clerk", model=MODEL, provider=providers[-1],
            tools=[ToolDefinition(name="drain", execute=drain)],
        )

    lead = desk.lead([_turn(("p1", "clerk", {"input": "work"}))], [clerk(child_script[:1])])
    first = await lead.create_session().run("go", turn_policy=TurnPolicy(stop=stop))
    # The child stopped at its boundary after the drain began; the parent stopped at its own.
    assert first.status == "succeeded" and first.stop_reason == "host_policy"
    assert first.stop_detail == "a child run stopped on the turn policy"
    state = (await load_agent_run_state(desk.checkpoints, run_id=first.run_id)).state
    (entry,) = state["pending_calls"]
    child_state = (await load_agent_run_state(desk.checkpoints, run_id=entry["child"]["run_id"])).state
    assert (child_state["status"], child_state["stop_reason"]) == ("succeeded", "host_policy")

    draining["on"] = False
    lead = desk.lead([_text("all done")], [clerk(child_script[1:])])
    done = await resume_agent_run(lead, first.run_id, decision="continue")
    assert done.status == "succeeded" and message_text(done.messages[-1]) == "all done"
    assert desk.ran == [("drain", {})]
    row = done.messages[0].content[0]
    assert isinstance(row, ToolResultContent) and row.result == "child done"
    assert [p.call_count for p in providers] == [1, 1]  # each child turn requested once


async def test_a_child_waiting_on_its_input_guardrail_is_approved_through_the_parent() -> None:
    desk = Desk()
    verdicts = ["interrupt", "interrupt"]

    def review(context: Any) -> GuardrailDecision:
        action = verdicts.pop(0) if verdicts else "allow"
        return GuardrailDecision(action=action, reason="needs a human")  # type: ignore[arg-type]

    def clerk(script: list[Any]) -> Agent:
        return create_agent(
            name="clerk", model=MODEL, provider=create_mock_provider(turns=script),
            guardrails=Guardrails(input=(Guardrail(name="review", stage="input", evaluate=review),)),
        )

    lead = desk.lead([_turn(("p1", "clerk", {"input": "check this"}))], [clerk([])])
    first = await lead.create_session().run("go")
    assert first.status == "suspended" and first.interruption is not None
    assert first.interruption.kind == "input_guardrail"
    assert first.interruption.pending_decisions == ()
    lead = desk.lead([_text("done")], [clerk([_text("checked")])])
    done = await resume_agent_run(lead, first.run_id, decision="approve")
    assert done.status == "succeeded"
    row = done.messages[0].content[0]
    assert isinstance(row, ToolResultContent) and row.result == "checked"


def test_the_cli_names_the_child_agent_of_a_pending_approval() -> None:
    from prism.cli._approval_prompt import pending_text
    from prism.runtime.durable import DecisionScope, PendingDecision

    own = PendingDecision(
        approval_id="a1", tool_call_id="k1", scope=DecisionScope(tool_name="pay"),
        tool_name="pay", arguments='{"n": 7}',
    )
    child = PendingDecision(
        approval_id="a2", tool_call_id="k2", scope=DecisionScope(tool_name="pay"),
        tool_name="pay", arguments='{"n": 7}',
        subagent={"tool_call_id": "p1", "agent": "clerk", "session_id": "s", "run_id": "r"},
    )
    assert pending_text(own, {}) == 'pay({"n": 7})'
    assert pending_text(child, {}) == 'clerk → pay({"n": 7})'


async def test_the_resumed_child_reports_to_the_parent_and_keeps_the_parents_secrets() -> None:
    secret = "sk-parent-7777777777"
    desk = Desk()

    def lead_agent(turns: list[Any], child_turns: list[Any]) -> Agent:
        return create_agent(
            name="lead", model=MODEL, provider=create_mock_provider(turns=turns),
            tools=[desk.child("clerk", child_turns).as_tool()], store=desk.store,
            run_state=RunStateOptions(desk.checkpoints, "v1"),
            redactor=create_secret_redactor([secret]),
        )

    first = await lead_agent(
        [_turn(("p1", "clerk", {"input": f"pay with {secret}"}))],
        [_turn(("k1", "pay", {"n": 1, "note": secret}))],
    ).create_session().run("go")
    assert first.interruption is not None
    (pending,) = first.interruption.pending_decisions
    assert pending.arguments is not None and secret not in pending.arguments
    for run_id in (first.run_id, pending.subagent["run_id"] if pending.subagent else ""):
        record = await desk.checkpoints.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=run_id)
        assert record is not None and secret not in json.dumps(record.value)

    session = lead_agent([_text("done")], [_text("paid")]).create_session(first.session_id)
    subscription = session.subscribe()
    seen: list[Any] = []

    async def watch() -> None:
        async for event in subscription:
            seen.append(event)

    watcher = asyncio.ensure_future(watch())
    done = await resume_agent_run(
        session, first.run_id,
        decisions=[{"approval_id": pending.approval_id, "outcome": "reject_once"}],
    )
    await asyncio.wait_for(watcher, 5)
    assert done.status == "succeeded" and desk.ran == []
    child_events = [e.event.type for e in seen if isinstance(e, SubagentEvent)]
    assert child_events[:2] == ["agent_started", "agent_resumed"]
    assert child_events[-1] == "agent_finished"
    assert secret not in json.dumps([e.to_dict() for e in seen])


async def test_a_child_with_run_state_of_its_own_is_approved_through_the_parent() -> None:
    desk = Desk()
    lead = desk.lead(
        [_turn(("p1", "clerk", {"input": "pay"}))],
        [desk.child("clerk", [_turn(("k1", "pay", {"n": 3}))], durable=True)],
    )
    first = await lead.create_session().run("go")
    assert first.interruption is not None
    (pending,) = first.interruption.pending_decisions
    assert pending.subagent is not None
    child_state = (await load_agent_run_state(desk.checkpoints, run_id=pending.subagent["run_id"])).state
    assert child_state["definition_revision"] == "child-v1"
    lead = desk.lead([_text("done")], [desk.child("clerk", [_text("paid")], durable=True)])
    done = await resume_agent_run(lead, first.run_id, decision="approve")
    assert done.status == "succeeded" and desk.ran == [("pay", {"n": 3})]
