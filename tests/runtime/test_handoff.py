"""Handoffs: the model hands the run over to another agent (issue 16, part 3)."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_support import MODEL, assert_provider_valid

from prism.errors import PrismConfigError
from prism.loops.handoff import handoff_loop
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.runtime.durable import agent_fingerprint
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
