"""Mistakes in an agent's configuration are refused by ``create_agent``, with a message that says
what to do (issue 21, item 21)."""

from __future__ import annotations

import pytest

import prism
from prism.errors import AgentRunStateError, PrismConfigError
from prism.runtime.checkpoints import MemoryCheckpointStore
from prism.testing import create_mock_provider, provider_done, provider_text_delta

MODEL = prism.ModelConfig(provider="mock", model="demo")


def refund(order: int) -> str:
    """Refund an order."""
    return f"refunded {order}"


def test_a_plain_function_in_tools_says_to_decorate_it_i21_d() -> None:
    with pytest.raises(PrismConfigError) as info:
        prism.create_agent(model=MODEL, tools=[refund])  # type: ignore[list-item]
    message = str(info.value)
    assert "refund" in message and "decorate it with @prism.tool" in message
    assert info.value.code == "ERR_PRISM_CONFIG"
    # decorated, it is accepted
    agent = prism.create_agent(model=MODEL, tools=[prism.tool(refund)])
    assert [t.name for t in agent.config.tools] == ["refund"]


def test_a_non_callable_tool_keeps_the_plain_message_i21_d() -> None:
    with pytest.raises(PrismConfigError, match="got int$"):
        prism.create_agent(model=MODEL, tools=[3])  # type: ignore[list-item]


def test_a_durable_agent_without_id_or_name_fails_at_create_agent_i21_e() -> None:
    """The error ``run()`` raised (``AgentRunStateError``, ``ERR_PRISM_AGENT_RUN_STATE``), now at
    configuration time, before a session or a run exists."""
    options = prism.RunStateOptions(MemoryCheckpointStore(), "v1")
    with pytest.raises(AgentRunStateError, match="id or a name") as info:
        prism.create_agent(model=MODEL, run_state=options)
    assert info.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    with pytest.raises(AgentRunStateError, match="id or a name"):
        prism.create_agent(model=MODEL, run_state={"checkpoints": MemoryCheckpointStore(),
                                                   "definition_revision": "v1"})


async def test_a_named_durable_agent_still_runs_i21_e() -> None:
    options = prism.RunStateOptions(MemoryCheckpointStore(), "v1")
    for named in ({"id": "desk"}, {"name": "desk"}):
        agent = prism.create_agent(
            model=MODEL,
            provider=create_mock_provider(turns=[[provider_text_delta("hi"), provider_done()]]),
            run_state=options,
            **named,  # type: ignore[arg-type]
        )
        result = await agent.create_session().run("hello")
        assert result.status == "succeeded" and result.text == "hi"
