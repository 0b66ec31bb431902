"""Per-tool approval: ``needs_approval=True`` or a callable deciding from the call, on a
``ToolDefinition`` and on ``@prism.tool(...)``, beside the agent-wide ``interrupt_before_tool``;
it needs durable run state and joins the agent fingerprint."""

from __future__ import annotations

from typing import Any

import pytest

import prism
from prism.errors import PrismConfigError
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.runtime.checkpoints import MemoryCheckpointStore
from prism.runtime.durable import RunStateOptions, agent_fingerprint, resume_agent_run
from prism.store import MemorySessionStore
from prism.types import ModelConfig, ToolCallContent, ToolDefinition

MODEL = ModelConfig(provider="mock", model="per-tool")
DONE = [provider_text_delta("done"), provider_done()]


def _turn(*calls: tuple[str, str, dict[str, Any]]) -> list[Any]:
    return [*(provider_tool_call(i, n, a) for i, n, a in calls), provider_done()]


class Desk:
    def __init__(self) -> None:
        self.ran: list[tuple[str, Any]] = []
        self.checkpoints = MemoryCheckpointStore()
        self.store = MemorySessionStore()

    def plain(self, name: str, **kw: Any) -> ToolDefinition:
        def execute(arguments: dict[str, Any], context: Any) -> Any:
            self.ran.append((name, arguments))
            return "ok"

        return ToolDefinition(name=name, execute=execute, **kw)

    def agent(self, turns: list[Any], tools: list[Any], *, durable: bool = True) -> Any:
        return create_agent(
            id="desk", model=MODEL, provider=create_mock_provider(turns=turns), tools=tools,
            store=self.store,
            run_state=RunStateOptions(self.checkpoints, "v1") if durable else None,
        )


async def test_only_the_tool_that_needs_approval_waits() -> None:
    desk = Desk()
    tools = [desk.plain("lookup"), desk.plain("refund", needs_approval=True)]
    turns = [_turn(("c1", "lookup", {"q": 1}), ("c2", "refund", {"order": 7})), DONE]
    session = desk.agent(turns, tools).create_session()
    first = await session.run("refund 7")
    assert first.status == "suspended"
    assert desk.ran == [("lookup", {"q": 1})]  # the other call of the round ran
    (pending,) = first.interruption.pending_decisions
    assert (pending.tool_call_id, pending.tool_name, pending.arguments) == (
        "c2", "refund", '{"order": 7}'
    )
    done = await resume_agent_run(session, first.run_state, decision="approve")
    assert done.status == "succeeded" and desk.ran[-1] == ("refund", {"order": 7})


async def test_a_callable_decides_from_the_call_on_a_decorated_tool() -> None:
    desk = Desk()
    paid: list[int] = []

    def large(call: ToolCallContent) -> bool:
        return bool(call.arguments["amount"] > 100)

    @prism.tool(needs_approval=large)
    def pay(amount: int) -> str:
        """Pay an amount."""
        paid.append(amount)
        return f"paid {amount}"

    assert pay(5) == "paid 5" and paid == [5]  # still the function
    paid.clear()
    turns = [_turn(("c1", "pay", {"amount": 5})), _turn(("c2", "pay", {"amount": 500})), DONE]
    session = desk.agent(turns, [pay]).create_session()
    first = await session.run("pay 5 then 500")
    assert first.status == "suspended" and paid == [5]
    assert first.interruption.tool_call_id == "c2"
    done = await resume_agent_run(session, first.run_id, decision="approve")
    assert done.status == "succeeded" and paid == [5, 500]


async def test_per_tool_approval_needs_durable_run_state() -> None:
    desk = Desk()
    provider_turns = [_turn(("c1", "refund", {}))]
    agent = desk.agent(provider_turns, [desk.plain("refund", needs_approval=True)],
                       durable=False)
    with pytest.raises(PrismConfigError, match="refund needs approval .*run_state"):
        await agent.create_session().run("go")
    # durable on the run instead of the agent: fine
    result = await agent.create_session().run(
        "go", run_state=RunStateOptions(desk.checkpoints, "v1")
    )
    assert result.status == "suspended"


async def test_bad_needs_approval_values_are_configuration_errors() -> None:
    desk = Desk()
    with pytest.raises(PrismConfigError, match="needs_approval must be a bool or a sync callable"):
        desk.agent([], [desk.plain("refund", needs_approval="yes")])

    async def deciding(call: ToolCallContent) -> bool:
        return True

    with pytest.raises(PrismConfigError, match="sync callable"):
        desk.agent([], [desk.plain("refund", needs_approval=deciding)])

    def not_a_bool(call: ToolCallContent) -> Any:
        return "yes"

    agent = desk.agent([_turn(("c1", "refund", {}))],
                       [desk.plain("refund", needs_approval=not_a_bool)])
    with pytest.raises(prism.AgentRunError) as info:
        await agent.create_session().run("go")
    assert "must return a bool" in str(info.value)
    assert desk.ran == []


def test_needs_approval_joins_the_fingerprint() -> None:
    desk = Desk()

    def gate(call: ToolCallContent) -> bool:
        return True

    plain = agent_fingerprint(desk.agent([], [desk.plain("refund")]), "v1")
    gated = agent_fingerprint(desk.agent([], [desk.plain("refund", needs_approval=True)]), "v1")
    by_callable = agent_fingerprint(
        desk.agent([], [desk.plain("refund", needs_approval=gate)]), "v1"
    )
    assert len({plain, gated, by_callable}) == 3
    assert plain == agent_fingerprint(desk.agent([], [desk.plain("refund")]), "v1")
