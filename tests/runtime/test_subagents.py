"""Agent tools: a child agent run inside a tool call of its parent run (issue 16, part 1)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from runtime_support import MODEL, assert_provider_valid, run_collect

from prism.errors import AgentRunError, AgentRunLimitError, PrismConfigError
from prism.events import SubagentEvent
from prism.providers.base import (
    provider_done,
    provider_text_delta,
    provider_tool_call,
    provider_usage,
)
from prism.providers.mock import create_mock_provider
from prism.redaction import create_secret_redactor
from prism.runtime.agent import create_agent
from prism.store import MemorySessionStore
from prism.types import ToolDefinition, Usage, message_text

SECRET = "sk-parent-0123456789"


def usage(n: int) -> Any:
    return provider_usage(Usage(input_tokens=n, output_tokens=n, total_tokens=2 * n))


def child_agent(name: str, turns: list[list[Any]], **options: Any) -> Any:
    provider = create_mock_provider(turns=turns, delay_s=options.pop("delay_s", 0.0))
    return create_agent(model=MODEL, provider=provider, name=name, **options), provider


async def test_two_agent_tools_in_parallel_share_events_usage_and_secrets() -> None:
    store = MemorySessionStore()
    # Each child echoes the secret it was given (its input) and uses a tool once.
    seen: list[str] = []

    def lookup(arguments: dict[str, Any], context: Any) -> Any:
        seen.append(context.session_id)
        return {"found": f"value with {SECRET}"}

    lookup_tool = ToolDefinition(name="lookup", execute=lookup)
    a, a_provider = child_agent(
        "researcher",
        [
            [provider_tool_call("a1", "lookup", {}), usage(3), provider_done()],
            [provider_text_delta(f"research done {SECRET}"), usage(5), provider_done()],
        ],
        tools=[lookup_tool],
        delay_s=0.001,
    )
    b, b_provider = child_agent(
        "writer",
        [[provider_text_delta("draft "), provider_text_delta("written"), usage(7), provider_done()]],
        delay_s=0.001,
    )
    parent_provider = create_mock_provider(
        turns=[
            [
                provider_tool_call("p1", "researcher", {"input": f"find {SECRET}"}),
                provider_tool_call("p2", "writer", {"input": "write"}),
                usage(11),
                provider_done(),
            ],
            [provider_text_delta("all done"), usage(13), provider_done()],
        ]
    )
    parent = create_agent(
        model=MODEL,
        provider=parent_provider,
        name="lead",
        store=store,
        tools=[a.as_tool(), b.as_tool(name="writer", description="Writes.")],
        redactor=create_secret_redactor([SECRET]),
        loop={"strategy": "single-shot", "tool_concurrency": 2},
    )
    session = parent.create_session()
    result, events = await run_collect(session, "go")
    assert not isinstance(result, AgentRunError), result
    assert result.status == "succeeded"
    assert message_text(result.messages[-1]) == "all done"

    # Usage adds up exactly: the parent's two turns and the children's three.
    assert result.usage is not None
    assert result.usage.input_tokens == 11 + 13 + 3 + 5 + 7
    assert result.usage.total_tokens == 2 * (11 + 13 + 3 + 5 + 7)

    # Both children's events reach the parent subscriber, wrapped, each child in order.
    wrapped = [e for e in events if isinstance(e, SubagentEvent)]
    by_call: dict[str, list[str]] = {}
    for event in wrapped:
        assert event.session_id == session.id and event.run_id == result.run_id
        by_call.setdefault(event.tool_call_id, []).append(event.event.type)
    assert set(by_call) == {"p1", "p2"}
    for kinds in by_call.values():
        assert kinds[0] == "agent_started" and kinds[-1] == "agent_finished"
        assert kinds.index("turn_started") < kinds.index("turn_finished")
    assert "tool_execution_finished" in by_call["p1"]
    agents = {e.tool_call_id: e.agent for e in wrapped}
    assert agents == {"p1": "researcher", "p2": "writer"}
    # The two children ran concurrently: their events interleave.
    order = [e.tool_call_id for e in wrapped]
    first_p2 = order.index("p2")
    assert "p1" in order[first_p2:], "the children did not overlap"

    # The secret registered on the parent never appears in a child's stored session or events.
    child_ids = {e.child_session_id for e in wrapped}
    assert len(child_ids) == 2
    for child_id in child_ids:
        entries = await store.list(child_id)
        assert entries, child_id
        text = json.dumps([e.to_dict() for e in entries])
        assert SECRET not in text
        assert "[REDACTED]" in text or child_id.endswith("p2")
        assert_provider_valid([e.message for e in entries if e.message is not None])
        # The child's stored input links it to the parent call.
        first = entries[0].message
        assert first is not None and first.metadata is not None
        link = first.metadata["parent_run"]
        assert link["session_id"] == session.id and link["run_id"] == result.run_id
        assert link["tool_call_id"] in {"p1", "p2"}
    assert SECRET not in json.dumps([e.to_dict() for e in events])
    assert SECRET not in json.dumps([r.to_dict() for r in a_provider.requests[1:]])
    # The parent's rows name the child runs.
    rows = [m for m in result.messages if m.role == "tool"]
    linked = {m.metadata["subagent"]["session_id"] for m in rows if m.metadata}
    assert linked == child_ids
    assert_provider_valid(result.messages)


async def test_aborting_the_parent_aborts_both_children_and_keeps_histories_valid() -> None:
    store = MemorySessionStore()
    started = asyncio.Event()
    running = 0

    async def slow(arguments: dict[str, Any], context: Any) -> Any:
        nonlocal running
        running += 1
        if running == 2:
            started.set()
        await asyncio.sleep(30)
        return "never"

    slow_tool = ToolDefinition(name="slow", execute=slow)
    children = [
        child_agent(
            name,
            [[provider_tool_call(f"{name}-c", "slow", {}), provider_done()],
             [provider_text_delta("ok"), provider_done()]],
            tools=[slow_tool],
            tool_abort_grace_ms=0,
        )[0]
        for name in ("one", "two")
    ]
    parent_provider = create_mock_provider(
        turns=[
            [
                provider_tool_call("p1", "one", {"input": "x"}),
                provider_tool_call("p2", "two", {"input": "y"}),
                provider_done(),
            ],
            [provider_text_delta("after"), provider_done()],
            [provider_text_delta("again"), provider_done()],
        ]
    )
    parent = create_agent(
        model=MODEL,
        provider=parent_provider,
        store=store,
        tools=[c.as_tool() for c in children],
        loop={"strategy": "single-shot", "tool_concurrency": 2},
        tool_abort_grace_ms=1000,
    )
    session = parent.create_session()
    task = asyncio.ensure_future(run_collect(session, "go"))
    await asyncio.wait_for(started.wait(), 5)
    session.abort()
    outcome, events = await asyncio.wait_for(task, 10)
    assert isinstance(outcome, AgentRunError) and outcome.code == "ERR_PRISM_RUN_ABORTED"
    wrapped = [e for e in events if isinstance(e, SubagentEvent)]
    child_ids = {e.child_session_id for e in wrapped}
    assert len(child_ids) == 2
    for event in wrapped:
        if event.event.type == "error":
            assert event.event.error.code == "ERR_PRISM_ABORTED"
    assert sum(1 for e in wrapped if e.event.type == "error") == 2
    for child_id in child_ids:
        messages = [e.message for e in await store.list(child_id) if e.message is not None]
        assert_provider_valid(messages)
    assert_provider_valid([e.message for e in await session.entries() if e.message is not None])
    # The next run of the parent continues from a valid history.
    result = await session.run("again")
    assert result.status == "succeeded"
    assert_provider_valid([e.message for e in await session.entries() if e.message is not None])


async def test_a_child_past_the_parents_remaining_turns_stops_with_the_parents_limit() -> None:
    loop_turns = [[provider_tool_call(f"k{i}", "noop", {}), provider_done()] for i in range(5)]
    noop = ToolDefinition(name="noop", execute=lambda arguments, context: "ok")
    child, child_provider = child_agent("looper", loop_turns, tools=[noop])
    parent_provider = create_mock_provider(
        turns=[
            [provider_tool_call("p1", "looper", {"input": "spin"}), provider_done()],
            [provider_text_delta("never"), provider_done()],
        ]
    )
    parent = create_agent(
        model=MODEL, provider=parent_provider, tools=[child.as_tool()], limits={"max_turns": 3}
    )
    session = parent.create_session()
    outcome, events = await run_collect(session, "go")
    # The parent used 1 turn; the child got the remaining 2 and breached on its third.
    assert child_provider.call_count == 2
    assert isinstance(outcome, AgentRunLimitError)
    assert outcome.breach is not None and outcome.breach.limit == "max_turns"
    assert outcome.breach.maximum == 3
    wrapped = [e for e in events if isinstance(e, SubagentEvent)]
    child_errors = [e.event for e in wrapped if e.event.type == "error"]
    assert len(child_errors) == 1 and child_errors[0].error.code == "ERR_PRISM_RUN_LIMIT"
    child_breach = [e.event for e in wrapped if e.event.type == "run_limit_exceeded"]
    assert child_breach and child_breach[0].breach == outcome.breach
    assert_provider_valid([e.message for e in await session.entries() if e.message is not None])


def _gated_tool() -> ToolDefinition:
    return ToolDefinition(
        name="pay",
        execute=lambda arguments, context: "paid",
        needs_approval=True,
        parameters={"type": "object", "properties": {}},
    )


async def test_a_child_needing_durable_state_fails_a_non_durable_parent_before_its_first_turn() -> None:
    child, _ = child_agent("clerk", [[provider_text_delta("x"), provider_done()]], tools=[_gated_tool()])
    parent_provider = create_mock_provider(turns=[[provider_text_delta("never"), provider_done()]])
    lead = create_agent(model=MODEL, provider=parent_provider, name="lead", tools=[child.as_tool()])
    session = lead.create_session()
    with pytest.raises(PrismConfigError) as caught:
        await session.run("go")
    assert caught.value.code == "ERR_PRISM_CONFIG"
    assert "agent tool clerk" in str(caught.value) and "needs approval" in str(caught.value)
    assert await session.entries() == []  # failed in preflight: nothing stored, no turn taken
    # the same tool on a top-level agent raises the same way
    with pytest.raises(PrismConfigError):
        await child.create_session().run("go")


async def test_a_child_runs_configuration_error_fails_the_parent_instead_of_the_call() -> None:
    child, _ = child_agent("clerk", [[provider_text_delta("x"), provider_done()]], tools=[_gated_tool()])

    async def ask(arguments: dict[str, Any], context: Any) -> str:
        result = await child.create_session().run("go", parent=context)  # not an agent tool
        return message_text(result.messages[-1])

    lead, _ = child_agent(
        "lead",
        [
            [provider_tool_call("c1", "ask", {}), provider_done()],
            [provider_text_delta("the model must not see the error"), provider_done()],
        ],
        tools=[ToolDefinition(name="ask", execute=ask, parameters={"type": "object"})],
    )
    session = lead.create_session()
    with pytest.raises(AgentRunError) as caught:
        await session.run("go")
    assert caught.value.code == "ERR_PRISM_CONFIG"
    assert isinstance(caught.value.__cause__, PrismConfigError)
    assert "needs durable run state" in str(caught.value)
    messages = [e.message for e in await session.entries() if e.message is not None]
    assert_provider_valid(messages)
    assert not any(m.role == "assistant" and "must not" in message_text(m) for m in messages)
