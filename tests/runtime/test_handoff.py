"""Handoffs: the model hands the run over to another agent (issue 16, part 3)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from runtime_support import MODEL, assert_provider_valid

from prism.errors import PrismConfigError
from prism.loops.handoff import handoff_loop
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.runtime.checkpoints import MemoryCheckpointStore
from prism.runtime.durable import RunStateOptions, agent_fingerprint, resume_agent_run
from prism.store import MemorySessionStore
from prism.types import ModelConfig, ToolDefinition, message_text


def billing_agent(provider: Any, *, instructions: str = "You handle billing.") -> Any:
    refund = ToolDefinition(name="refund", execute=lambda arguments, context: {"refunded": True})
    return create_agent(
        model=ModelConfig(provider="mock", model="billing-model"),
        provider=provider,
        name="billing",
        instructions=instructions,
        tools=[refund],
    )


async def test_turn_one_by_a_hands_off_and_turns_two_and_three_are_bs() -> None:
    b_provider = create_mock_provider(
        turns=[
            [provider_tool_call("r1", "refund", {}), provider_done()],
            [provider_text_delta("refund issued"), provider_done()],
        ]
    )
    billing = billing_agent(b_provider)
    a_provider = create_mock_provider(
        turns=[[provider_tool_call("t1", "transfer_to_billing", {}), provider_done()]]
    )
    triage = create_agent(
        model=MODEL,
        provider=a_provider,
        name="triage",
        instructions="You route requests.",
        tools=[ToolDefinition(name="faq", execute=lambda arguments, context: "faq")],
        loop=handoff_loop(billing),
    )
    session = triage.create_session()
    result = await session.run("I want a refund")
    assert result.status == "succeeded"
    assert message_text(result.messages[-1]) == "refund issued"

    # Turn 1 went to A with A's tools plus the transfer tool; turns 2-3 to B with B's.
    assert a_provider.call_count == 1 and b_provider.call_count == 2
    a_request = a_provider.requests[0]
    assert {t.name for t in a_request.tools or ()} == {"faq", "transfer_to_billing"}
    assert a_request.model.model == "demo"
    for request in b_provider.requests:
        assert {t.name for t in request.tools or ()} == {"refund"}
        assert request.model.model == "billing-model"
        system = " ".join(message_text(m) for m in request.messages if m.role == "system")
        assert "You handle billing." in system and "You route requests." not in system
    # B sees the whole conversation, the transfer answered.
    assert any(
        getattr(part, "result", None) == {"transferred_to": "billing"}
        for m in b_provider.requests[0].messages
        for part in m.content
    )

    # The stored session shows who answered each turn.
    entries = await session.entries()
    answered = [
        e.message.metadata["agent"]
        for e in entries
        if e.message is not None and e.message.role == "assistant"
    ]
    assert answered == ["triage", "billing", "billing"]
    assert any(e.kind == "model_change" for e in entries)
    assert_provider_valid([e.message for e in entries if e.message is not None])


def test_handoff_targets_join_the_fingerprint() -> None:
    provider = create_mock_provider()

    def triage(target: Any) -> Any:
        return create_agent(model=MODEL, provider=provider, name="triage", loop=handoff_loop(target))

    one = agent_fingerprint(triage(billing_agent(provider)), "1")
    same = agent_fingerprint(triage(billing_agent(provider)), "1")
    other = agent_fingerprint(triage(billing_agent(provider, instructions="Other.")), "1")
    assert one == same != other


def test_handoff_loop_rejects_bad_targets() -> None:
    provider = create_mock_provider()
    with pytest.raises(PrismConfigError):
        handoff_loop()
    with pytest.raises(PrismConfigError, match="names must match"):
        handoff_loop(create_agent(model=MODEL, provider=provider))
    with pytest.raises(PrismConfigError, match="duplicate"):
        handoff_loop(billing_agent(provider), billing_agent(provider))


def durable_desk(
    store: Any, checkpoints: Any, effects: list[str], triage_turns: list[Any], billing_turns: list[Any]
) -> tuple[Any, Any, Any]:
    """``(triage, its provider, billing's provider)``; billing's refund needs an approval."""

    def refund(arguments: dict[str, Any], context: Any) -> Any:
        effects.append(context.tool_call_id)
        return {"refunded": True}

    b_provider = create_mock_provider(turns=billing_turns)
    billing = create_agent(
        model=ModelConfig(provider="mock", model="billing-model"),
        provider=b_provider,
        name="billing",
        instructions="You handle billing.",
        tools=[ToolDefinition(name="refund", execute=refund, needs_approval=True)],
    )
    a_provider = create_mock_provider(turns=triage_turns)
    triage = create_agent(
        model=MODEL,
        provider=a_provider,
        name="triage",
        loop=handoff_loop(billing),
        store=store,
        run_state=RunStateOptions(checkpoints, "v1"),
    )
    return triage, a_provider, b_provider


async def test_issue16_a_targets_approval_suspends_and_the_resume_continues_with_the_target() -> None:
    """B's tool needs an approval: the run suspends in B's turn; a new agent object (another
    process would build the same) approves and resumes; B goes on, the tool runs once."""
    store, checkpoints, effects = MemorySessionStore(), MemoryCheckpointStore(), []
    triage, _, _ = durable_desk(
        store, checkpoints, effects,
        [[provider_tool_call("t1", "transfer_to_billing", {}), provider_done()]],
        [[provider_tool_call("r1", "refund", {}), provider_done()]],
    )
    session = triage.create_session()
    suspended = await session.run("Refund me")
    assert suspended.status == "suspended" and effects == []
    assert suspended.run_state is not None

    again, a_provider, b_provider = durable_desk(
        store, checkpoints, effects, [], [[provider_text_delta("refund issued"), provider_done()]]
    )
    result = await resume_agent_run(again, suspended.run_state, decision="approve")
    assert result.status == "succeeded" and message_text(result.messages[-1]) == "refund issued"
    assert effects == ["r1"]
    assert a_provider.call_count == 0 and b_provider.call_count == 1
    request = b_provider.requests[0]
    assert {t.name for t in request.tools or ()} == {"refund"}
    assert request.model.model == "billing-model"
    entries = await store.list(session.id)
    answered = [
        e.message.metadata["agent"]
        for e in entries
        if e.message is not None and e.message.role == "assistant"
    ]
    assert answered == ["triage", "billing", "billing"]
    # one switch and one model change, none back to triage's model on resume
    assert [e.kind for e in entries if e.kind != "message"] == ["custom", "model_change"]


async def test_issue16_each_run_starts_with_the_sessions_agent() -> None:
    """A later run of the session that suspends before any switch resumes with the session's
    agent, not the target an earlier run handed over to."""
    store, checkpoints, effects = MemorySessionStore(), MemoryCheckpointStore(), []
    triage, _, _ = durable_desk(
        store, checkpoints, effects,
        [
            [provider_tool_call("t1", "transfer_to_billing", {}), provider_done()],
            [provider_tool_call("t2", "transfer_to_billing", {}), provider_done()],
        ],
        [
            [provider_text_delta("nothing to refund"), provider_done()],
            [provider_tool_call("r1", "refund", {}), provider_done()],
        ],
    )
    session = triage.create_session()
    assert (await session.run("Question")).status == "succeeded"
    suspended = await session.run("Refund me")  # triage hands over again, billing is gated
    assert suspended.status == "suspended" and suspended.run_state is not None
    again, a_provider, b_provider = durable_desk(
        store, checkpoints, effects, [], [[provider_text_delta("done"), provider_done()]]
    )
    result = await resume_agent_run(again, suspended.run_state, decision="approve")
    assert result.status == "succeeded" and effects == ["r1"]
    assert a_provider.call_count == 0 and b_provider.call_count == 1


def test_issue16_a_targets_gated_tool_needs_a_durable_run() -> None:
    billing = create_agent(
        model=MODEL,
        provider=create_mock_provider(),
        name="billing",
        tools=[ToolDefinition(name="refund", execute=lambda a, c: None, needs_approval=True)],
    )
    triage = create_agent(
        model=MODEL, provider=create_mock_provider(), name="triage", loop=handoff_loop(billing)
    )
    with pytest.raises(PrismConfigError, match="tool refund needs approval"):
        asyncio.run(triage.create_session().run("Refund me"))


def capped_desk(
    *,
    triage_rounds: Any,
    billing_rounds: Any,
    triage_turns: list[Any],
    billing_turns: list[Any],
    effects: list[str],
) -> tuple[Any, Any, Any]:
    """``(triage, its provider, billing's provider)`` with a tool-round cap on each agent."""

    def refund(arguments: dict[str, Any], context: Any) -> Any:
        effects.append(context.tool_call_id)
        return {"refunded": True}

    b_provider = create_mock_provider(turns=billing_turns)
    billing = create_agent(
        model=ModelConfig(provider="mock", model="billing-model"),
        provider=b_provider,
        name="billing",
        tools=[ToolDefinition(name="refund", execute=refund)],
        answer_after_tool_rounds=billing_rounds,
    )
    a_provider = create_mock_provider(turns=triage_turns)
    triage = create_agent(
        model=MODEL,
        provider=a_provider,
        name="triage",
        tools=[ToolDefinition(name="faq", execute=lambda arguments, context: "faq")],
        loop=handoff_loop(billing),
        answer_after_tool_rounds=triage_rounds,
    )
    return triage, a_provider, b_provider


def _choices(provider: Any) -> list[Any]:
    return [r.options.tool_choice if r.options else None for r in provider.requests]


async def test_handoff_under_a_round_cap_answers_with_text_i21_15() -> None:
    """Both agents capped at one round (the embedded model's default): the transfer does not
    spend the target's round; the target uses its tool once, is then asked for the answer and
    gives it; the run succeeds with that text."""
    effects: list[str] = []
    triage, a_provider, b_provider = capped_desk(
        triage_rounds=1,
        billing_rounds=1,
        triage_turns=[[provider_tool_call("t1", "transfer_to_billing", {}), provider_done()]],
        billing_turns=[
            [provider_tool_call("r1", "refund", {}), provider_done()],
            [provider_text_delta("refund issued"), provider_done()],
        ],
        effects=effects,
    )
    result = await triage.create_session().run("I want a refund")
    assert result.status == "succeeded" and result.stop_reason is None
    assert message_text(result.messages[-1]) == "refund issued"
    assert effects == ["r1"]
    assert _choices(a_provider) == [None]
    assert _choices(b_provider) == [None, "none"]


async def test_handoff_target_s_own_round_cap_applies_after_the_switch_i21_15() -> None:
    """Triage never forces an answer, billing after one round: billing's cap governs its
    turns; and the other way round, billing without a cap is never forced."""
    triage, _, b_provider = capped_desk(
        triage_rounds=False,
        billing_rounds=1,
        triage_turns=[
            [provider_tool_call("f1", "faq", {}), provider_done()],
            [provider_tool_call("t1", "transfer_to_billing", {}), provider_done()],
        ],
        billing_turns=[
            [provider_tool_call("r1", "refund", {}), provider_done()],
            [provider_text_delta("refund issued"), provider_done()],
        ],
        effects=[],
    )
    result = await triage.create_session().run("I want a refund")
    assert result.status == "succeeded" and result.stop_reason is None
    assert _choices(b_provider) == [None, "none"]

    effects: list[str] = []
    triage, _, b_provider = capped_desk(
        triage_rounds=2,
        billing_rounds=False,
        triage_turns=[
            [provider_tool_call("f1", "faq", {}), provider_done()],
            [provider_tool_call("t1", "transfer_to_billing", {}), provider_done()],
        ],
        billing_turns=[
            [provider_tool_call("r1", "refund", {}), provider_done()],
            [provider_tool_call("r2", "refund", {}), provider_done()],
            [provider_text_delta("two refunds"), provider_done()],
        ],
        effects=effects,
    )
    result = await triage.create_session().run("Two refunds")
    assert result.status == "succeeded" and result.stop_reason is None
    assert effects == ["r1", "r2"]
    assert _choices(b_provider) == [None, None, None]


async def test_handoff_round_cap_stop_reasons_match_single_shot_i21_15() -> None:
    """A call made anyway after the cap is answered 'not dispatched' and the run stops with
    ``tool_round_limit``; so does an empty answer after the cap."""
    effects: list[str] = []
    triage, _, b_provider = capped_desk(
        triage_rounds=1,
        billing_rounds=1,
        triage_turns=[[provider_tool_call("t1", "transfer_to_billing", {}), provider_done()]],
        billing_turns=[
            [provider_tool_call("r1", "refund", {}), provider_done()],
            [provider_tool_call("r2", "refund", {}), provider_done()],
        ],
        effects=effects,
    )
    result = await triage.create_session().run("I want a refund")
    assert result.stop_reason == "tool_round_limit"
    assert effects == ["r1"]

    triage, _, b_provider = capped_desk(
        triage_rounds=1,
        billing_rounds=1,
        triage_turns=[[provider_tool_call("t1", "transfer_to_billing", {}), provider_done()]],
        billing_turns=[
            [provider_tool_call("r1", "refund", {}), provider_done()],
            [provider_text_delta("  "), provider_done()],
        ],
        effects=[],
    )
    result = await triage.create_session().run("I want a refund")
    assert result.stop_reason == "tool_round_limit"

