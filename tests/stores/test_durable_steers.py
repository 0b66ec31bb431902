"""Steers never land inside an open tool round: a steered message waits until every call of the
round has its stored result — across an approval suspension too (the envelope holds it and the
resumed leg appends it after the round's last result), on the memory, SQLite and PostgreSQL
stores, and in a run that is not durable at all."""

from __future__ import annotations

from typing import Any

from prism.events import AgentEvent
from prism.loops.dispatch import dispatch_tool_calls_in_order, dispatchable_tool_calls
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.runtime.durable import RunStateOptions, load_agent_run_state, resume_agent_run
from prism.store import read_branch
from prism.types import Message, ModelConfig, TextContent, ToolCallContent, ToolDefinition

MODEL = ModelConfig(provider="mock", model="steer")


def _shape(messages: list[Message]) -> list[str]:
    """``user:text``, ``assistant:call ids`` / ``assistant:text``, ``tool:call id``."""
    out: list[str] = []
    for m in messages:
        calls = [p.id for p in m.content if isinstance(p, ToolCallContent)]
        if m.role == "tool":
            out.append("tool:" + m.content[0].tool_call_id)  # type: ignore[union-attr]
        elif calls:
            out.append("assistant:" + ",".join(calls))
        else:
            text = "".join(p.text for p in m.content if isinstance(p, TextContent))
            out.append(f"{m.role}:{text}")
    return out


def _no_message_inside_a_round(shape: list[str]) -> None:
    """Every assistant call is followed directly by its result rows."""
    for i, item in enumerate(shape):
        if item.startswith("assistant:c"):
            calls = item.split(":", 1)[1].split(",")
            assert shape[i + 1 : i + 1 + len(calls)] == [f"tool:{c}" for c in calls], shape


async def _branch(store: Any, session_id: str, leaf: str | None) -> list[Message]:
    assert leaf is not None
    return [e.message for e in await read_branch(store, session_id, leaf) if e.message]


async def test_a_steer_sent_while_a_call_waits_for_approval_follows_its_result(
    durable_stores: tuple[Any, Any],
) -> None:
    """A gated round suspends with a steer queued: the stored transcript ends at the open call,
    the envelope holds the steer, and the resumed leg appends it after the call's result."""
    sessions, checkpoints = durable_stores
    ran: list[dict[str, Any]] = []

    def refund(arguments: dict[str, Any], context: Any) -> Any:
        ran.append(arguments)
        return {"refunded": arguments["order"]}

    provider = create_mock_provider(
        turns=[
            [provider_tool_call("c1", "refund", {"order": 42}), provider_done()],
            [provider_text_delta("refunded, and noted"), provider_done()],
        ]
    )
    agent = create_agent(
        id="desk",
        model=MODEL,
        provider=provider,
        tools=[ToolDefinition(name="refund", execute=refund)],
        store=sessions,
        run_state=RunStateOptions(checkpoints, "v1", interrupt_before_tool=True),
    )
    box: list[Any] = []

    def on_event(event: AgentEvent) -> None:
        if event.type == "message_finished" and provider.call_count == 1:
            box[0].steer("also email the customer")

    session = agent.create_session(on_event=on_event)
    box.append(session)
    first = await session.run("refund order 42")
    assert first.status == "suspended" and ran == []
    stored = _shape(await _branch(sessions, session.id, first.leaf_id))
    assert stored == ["user:refund order 42", "assistant:c1"]
    loaded = await load_agent_run_state(checkpoints, run_id=first.run_id)
    assert [m["content"][0]["text"] for m in loaded.state["steers"]] == ["also email the customer"]

    done = await resume_agent_run(session, first.run_state, decision="approve")
    assert done.status == "succeeded" and ran == [{"order": 42}]
    final = _shape(await _branch(sessions, session.id, done.leaf_id))
    assert final == [
        "user:refund order 42",
        "assistant:c1",
        "tool:c1",
        "user:also email the customer",
        "assistant:refunded, and noted",
    ]
    _no_message_inside_a_round(final)
    assert _shape(list(provider.requests[1].messages)) == final[:-1]
    after = await load_agent_run_state(checkpoints, run_id=first.run_id)
    assert "steers" not in after.state  # appended once, then dropped from the envelope


async def test_steers_held_across_a_partial_decision_are_appended_once(
    durable_stores: tuple[Any, Any],
) -> None:
    """Two gated calls, decided one at a time: the steer stays held through the re-suspension
    and lands once, after both results."""
    sessions, checkpoints = durable_stores
    provider = create_mock_provider(
        turns=[
            [
                provider_tool_call("c1", "lookup", {"q": 1}),
                provider_tool_call("c2", "lookup", {"q": 2}),
                provider_done(),
            ],
            [provider_text_delta("both looked up"), provider_done()],
        ]
    )
    agent = create_agent(
        id="desk",
        model=MODEL,
        provider=provider,
        tools=[ToolDefinition(name="lookup", execute=lambda a, c: a)],
        store=sessions,
        run_state=RunStateOptions(checkpoints, "v1", interrupt_before_tool=True),
    )
    box: list[Any] = []

    def on_event(event: AgentEvent) -> None:
        if event.type == "message_finished" and provider.call_count == 1:
            box[0].steer("and be brief")

    session = agent.create_session(on_event=on_event)
    box.append(session)
    first = await session.run("look both up")
    one, two = first.interruption.pending_decisions
    middle = await resume_agent_run(
        session, first.run_state, decisions=[{"approval_id": one.approval_id, "outcome": "allow_once"}]
    )
    assert middle.status == "suspended"
    done = await resume_agent_run(session, middle.run_state, decision="approve")
    final = _shape(await _branch(sessions, session.id, done.leaf_id))
    assert final == [
        "user:look both up",
        "assistant:c1,c2",
        "tool:c1",
        "tool:c2",
        "user:and be brief",
        "assistant:both looked up",
    ]


class _DrainingLoop:
    """A custom loop that asks to drain the steer queue between a call and its result."""

    name = "draining"
    revision = "1"
    session: Any = None

    async def run(self, ctx: Any, /) -> None:
        request = await ctx.assemble(ctx.input, None, 1)
        result = await ctx.generate(request)
        ctx.history.extend(ctx.input_messages)
        message = Message(role="assistant", content=result.content, id=result.message_id)
        ctx.history.append(message)
        await ctx.append_message(message)
        self.session.steer("one more thing")
        assert await ctx.apply_pending_steers() is False  # the round is open: kept
        await dispatch_tool_calls_in_order(dispatchable_tool_calls(result.calls), ctx)
        assert await ctx.apply_pending_steers() is True  # after the results
        request = await ctx.assemble([], None, 2)
        result = await ctx.generate(request)
        final = Message(role="assistant", content=result.content, id=result.message_id)
        ctx.history.append(final)
        await ctx.append_message(final)


async def test_a_loop_cannot_drain_steers_into_an_open_round_without_durable_state() -> None:
    """Not durable, no approvals: ``apply_pending_steers`` keeps the queue while a stored call
    has no stored result."""
    provider = create_mock_provider(
        turns=[
            [provider_tool_call("c1", "lookup", {"q": 1}), provider_done()],
            [provider_text_delta("ok"), provider_done()],
        ]
    )
    loop = _DrainingLoop()
    agent = create_agent(
        model=MODEL,
        provider=provider,
        tools=[ToolDefinition(name="lookup", execute=lambda a, c: a)],
        loop=loop,
    )
    session = agent.create_session()
    loop.session = session
    result = await session.run("look it up")
    shape = _shape(await _branch(session.store, session.id, result.leaf_id))
    assert shape == [
        "user:look it up",
        "assistant:c1",
        "tool:c1",
        "user:one more thing",
        "assistant:ok",
    ]
