"""Shared helpers for the runtime tests: scripted sessions, event collection, transcript checks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from prism.errors import AgentRunError
from prism.providers.mock import MockProvider, MockScriptItem, create_mock_provider
from prism.runtime.agent import create_agent
from prism.runtime.session import AgentSession
from prism.types import (
    Message,
    ModelConfig,
    RunResult,
    ToolCallContent,
    ToolDefinition,
    ToolResultContent,
)

MODEL = ModelConfig(provider="mock", model="demo")


def make_session(
    turns: Sequence[Sequence[MockScriptItem]] | None = None,
    *,
    events: Sequence[MockScriptItem] | None = None,
    tools: Sequence[ToolDefinition] = (),
    delay_s: float = 0.0,
    session_options: dict[str, Any] | None = None,
    **agent_options: Any,
) -> tuple[AgentSession, MockProvider]:
    provider = create_mock_provider(
        events=events, turns=None if turns is None else [list(t) for t in turns], delay_s=delay_s
    )
    agent = create_agent(
        model=agent_options.pop("model", MODEL),
        provider=agent_options.pop("provider", provider),
        tools=list(tools),
        **agent_options,
    )
    return agent.create_session(**(session_options or {})), provider


def echo_tool(name: str = "lookup", *, exclusive: bool = False) -> ToolDefinition:
    def execute(arguments: dict[str, Any], context: Any) -> Any:
        return {"tool": name, "args": arguments}

    return ToolDefinition(name=name, execute=execute, exclusive=exclusive)


def async_tool(
    name: str, execute: Callable[[dict[str, Any], Any], Any], *, exclusive: bool = False
) -> ToolDefinition:
    return ToolDefinition(name=name, execute=execute, exclusive=exclusive)


async def run_collect(
    session: AgentSession, input: Any = "hello", **run_options: Any
) -> tuple[RunResult | AgentRunError, list[Any]]:
    """Run while a subscriber collects every event; failures are returned, not raised."""
    subscription = session.subscribe(max_queued_events=100_000)
    events: list[Any] = []

    async def consume() -> None:
        async for event in subscription:
            events.append(event)

    consumer = asyncio.ensure_future(consume())
    outcome: RunResult | AgentRunError
    try:
        outcome = await session.run(input, **run_options)
    except AgentRunError as exc:
        outcome = exc
    await asyncio.wait_for(consumer, timeout=5)
    return outcome, events


def types_of(events: Sequence[Any]) -> list[str]:
    return [e.type for e in events]


def assert_provider_valid(messages: Sequence[Message]) -> None:
    """Every host tool call has exactly one result, after its call; no result without a call."""
    open_calls: dict[str, int] = {}
    answered: dict[str, int] = {}
    for message in messages:
        for part in message.content:
            if isinstance(part, ToolCallContent) and part.authority != "provider-hosted":
                assert part.id not in open_calls and part.id not in answered, part.id
                open_calls[part.id] = 1
            elif isinstance(part, ToolResultContent):
                assert part.tool_call_id in open_calls, f"result without call: {part.tool_call_id}"
                del open_calls[part.tool_call_id]
                answered[part.tool_call_id] = answered.get(part.tool_call_id, 0) + 1
    assert not open_calls, f"calls without a result: {sorted(open_calls)}"
    assert all(count == 1 for count in answered.values())


async def stored_messages(session: AgentSession) -> list[Message]:
    return [e.message for e in await session.entries() if e.message is not None]


def result_rows(messages: Sequence[Message]) -> list[ToolResultContent]:
    return [
        part
        for message in messages
        for part in message.content
        if isinstance(part, ToolResultContent)
    ]
