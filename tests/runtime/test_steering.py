"""Steering: the queue, its caps, draining at turn starts, soft interrupts (STEER-1..STEER-8, EVT-16)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from runtime_support import MODEL, make_session, run_collect, stored_messages, types_of

from prism.errors import SteerError
from prism.events import AgentEvent
from prism.guardrails import Guardrail, GuardrailDecision, Guardrails
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.redaction import create_secret_redactor
from prism.runtime.agent import create_agent
from prism.types import Message, TextContent, ToolDefinition, user_message

TEXT = [provider_text_delta("done"), provider_done()]


def texts(messages: Any) -> list[str]:
    return [m.content[0].text for m in messages if m.content and isinstance(m.content[0], TextContent)]


def test_steer_without_an_active_run_is_rejected_steer_1() -> None:
    session, _ = make_session([TEXT])
    with pytest.raises(SteerError) as info:
        session.steer("hi")
    assert info.value.code == "ERR_PRISM_STEER_NO_RUN"


def steering_tool(session_box: list[Any], payload: Any, **kw: Any) -> ToolDefinition:
    def execute(arguments: dict[str, Any], context: Any) -> Any:
        session_box[0].steer(payload, **kw)
        return "steered"

    return ToolDefinition(name="steer", execute=execute)


async def test_a_steer_sent_mid_run_reaches_the_next_turn_exactly_once_steer_4() -> None:
    box: list[Any] = []
    session, provider = make_session(
        [[provider_tool_call("c1", "steer", {}), provider_done()], TEXT, TEXT],
        tools=[steering_tool(box, "also check B")],
    )
    box.append(session)
    result, events = await run_collect(session)
    second = provider.requests[1].messages
    assert texts(second).count("also check B") == 1
    assert [m.role for m in second][-1] == "user"  # after the tool result, before turn 2
    assert provider.call_count == 2
    assert texts(await stored_messages(session)).count("also check B") == 1
    kinds = types_of(events)
    assert kinds.count("queue_updated") == 2
    sizes = [e.size for e in events if e.type == "queue_updated"]
    assert sizes == [1, 0]
    # The drain happens before turn 2 starts (STEER-5).
    assert kinds.index("queue_updated", kinds.index("tool_execution_finished")) < kinds.index("turn_started", 2)


async def test_a_steer_during_the_last_turn_keeps_the_run_going_steer_5_ssl_4() -> None:
    provider = create_mock_provider(turns=[TEXT, TEXT])
    holder: list[Any] = []

    def on_event(event: AgentEvent) -> None:
        if event.type == "message_finished" and provider.call_count == 1:
            holder[0].steer("one more thing")

    session = create_agent(model=MODEL, provider=provider).create_session(on_event=on_event)
    holder.append(session)
    result = await session.run("go")
    assert provider.call_count == 2
    assert texts(provider.requests[1].messages) == ["go", "done", "one more thing"]
    assert result.status == "succeeded"


async def test_steers_before_the_first_turn_returns_wait_for_turn_two_steer_8() -> None:
    provider = create_mock_provider(turns=[TEXT, TEXT])
    agent = create_agent(model=MODEL, provider=provider)
    holder: list[Any] = []

    def on_event(event: AgentEvent) -> None:
        if event.type == "agent_started":
            holder[0].steer("early steer")

    session = agent.create_session(on_event=on_event)
    holder.append(session)
    result = await session.run("the input")
    first, second = provider.requests[0].messages, provider.requests[1].messages
    assert texts(first) == ["the input"]
    assert texts(second) == ["the input", "done", "early steer"]
    stored = texts(await stored_messages(session))
    assert stored == ["the input", "done", "early steer", "done"]
    assert result.status == "succeeded"


async def test_empty_steer_input_is_rejected_steer_1() -> None:
    box: list[Any] = []
    errors: list[str] = []

    def execute(arguments: dict[str, Any], context: Any) -> Any:
        try:
            box[0].steer([])
        except SteerError as exc:
            errors.append(exc.code)
        return "ok"

    session, _ = make_session(
        [[provider_tool_call("c1", "s", {}), provider_done()], TEXT],
        tools=[ToolDefinition(name="s", execute=execute)],
    )
    box.append(session)
    await session.run("go")
    assert errors == ["ERR_PRISM_STEER_EMPTY"]


async def test_the_queue_caps_messages_and_bytes_and_queues_nothing_on_overflow_steer_2() -> None:
    box: list[Any] = []
    outcome: dict[str, Any] = {}

    def execute(arguments: dict[str, Any], context: Any) -> Any:
        session = box[0]
        session.steer([user_message(str(i)) for i in range(7)])
        try:
            session.steer([user_message("a"), user_message("b")])
        except SteerError as exc:
            outcome["count"] = exc.code
        session.steer("eighth")
        return "ok"

    session, provider = make_session(
        [[provider_tool_call("c1", "s", {}), provider_done()], TEXT],
        tools=[ToolDefinition(name="s", execute=execute)],
    )
    box.append(session)
    await session.run("go")
    assert outcome["count"] == "ERR_PRISM_STEER_LIMIT"
    assert texts(provider.requests[1].messages)[-8:] == [*map(str, range(7)), "eighth"]

    big = "x" * 65_536

    def execute_bytes(arguments: dict[str, Any], context: Any) -> Any:
        session = box[1]
        session.steer(big)
        try:
            session.steer("y")
        except SteerError as exc:
            outcome["bytes"] = exc.code
        return "ok"

    session2, provider2 = make_session(
        [[provider_tool_call("c1", "s", {}), provider_done()], TEXT],
        tools=[ToolDefinition(name="s", execute=execute_bytes)],
    )
    box.append(session2)
    await session2.run("go")
    assert outcome["bytes"] == "ERR_PRISM_STEER_LIMIT"
    assert texts(provider2.requests[1].messages).count(big) == 1
    assert "y" not in texts(provider2.requests[1].messages)


async def test_steered_messages_are_redacted_steer_1() -> None:
    box: list[Any] = []
    session, provider = make_session(
        [[provider_tool_call("c1", "steer", {}), provider_done()], TEXT],
        tools=[steering_tool(box, "token sk-123")],
        redactor=create_secret_redactor(["sk-123"]),
    )
    box.append(session)
    await session.run("go")
    assert "token [REDACTED]" in texts(provider.requests[1].messages)
    assert "token [REDACTED]" in texts(await stored_messages(session))


async def test_a_blocked_steer_is_dropped_with_steer_rejected_steer_4_evt_16() -> None:
    def evaluate(ctx: Any) -> GuardrailDecision:
        text = "".join(p.text for m in ctx.value for p in m.content if isinstance(p, TextContent))
        return GuardrailDecision(action="block" if "forbidden" in text else "allow")

    box: list[Any] = []
    session, provider = make_session(
        [[provider_tool_call("c1", "steer", {}), provider_done()], TEXT, TEXT],
        tools=[steering_tool(box, "forbidden words")],
        guardrails=Guardrails(input=(Guardrail(name="g", stage="input", evaluate=evaluate),)),
    )
    box.append(session)
    result, events = await run_collect(session)
    kinds = types_of(events)
    assert kinds.index("queue_updated", kinds.index("tool_execution_finished")) < kinds.index("steer_rejected")
    assert "forbidden words" not in texts(await stored_messages(session))
    assert all("forbidden words" not in texts(r.messages) for r in provider.requests)
    # The drain returned True, so the run went on for one more turn anyway (STEER-4).
    assert provider.call_count == 2


async def test_steer_soft_interrupt_ends_the_streaming_attempt_with_an_empty_result_steer_6() -> None:
    box: list[Any] = []
    entered = asyncio.Event()

    provider = create_mock_provider(
        turns=[
            [provider_tool_call("c1", "go", {}), provider_done()],
            [provider_text_delta("partial"), provider_text_delta("never"), provider_done()],
            TEXT,
        ],
        delay_s=0.01,
        on_request=lambda r: entered.set(),
    )

    def execute(arguments: dict[str, Any], context: Any) -> Any:
        return "ok"

    agent = create_agent(model=MODEL, provider=provider, tools=[ToolDefinition(name="go", execute=execute)])
    session = agent.create_session()
    box.append(session)
    sub = session.subscribe()
    task = asyncio.ensure_future(session.run("start"))
    collected: list[Any] = []
    async for event in sub:
        collected.append(event)
        if event.type == "message_delta" and getattr(event.content, "text", None) == "partial":
            session.steer("change course", soft_interrupt=True)
    result = await task
    kinds = types_of(collected)
    second_turn = collected[kinds.index("turn_started", 1 + kinds.index("turn_started")) :]
    second_kinds = types_of(second_turn)
    finished = [e for e in second_turn if e.type == "provider_turn_finished"][0]
    assert finished.error is None
    # No message_finished for the interrupted attempt; the steer reaches the next request.
    assert second_kinds.index("turn_finished") < second_kinds.index("turn_started", 1)
    assert "message_finished" not in second_kinds[: second_kinds.index("turn_finished")]
    assert provider.call_count == 3
    assert texts(provider.requests[2].messages)[-1] == "change course"
    assert result.status == "succeeded"
    assert "partial" not in texts(await stored_messages(session))


async def test_a_pending_soft_interrupt_is_cleared_by_draining_steer_6() -> None:
    box: list[Any] = []
    session, provider = make_session(
        [[provider_tool_call("c1", "steer", {}), provider_done()], TEXT, TEXT],
        tools=[steering_tool(box, "later", soft_interrupt=True)],
    )
    box.append(session)
    result = await session.run("go")
    # The drain at the start of turn 2 cleared the flag, so turn 2 streamed normally.
    assert result.text == "done"
    assert provider.call_count == 2


async def test_steers_never_leak_into_a_later_run_steer_7() -> None:
    provider = create_mock_provider(turns=[TEXT, TEXT])
    holder: list[Any] = []

    def on_event(event: AgentEvent) -> None:
        if event.type == "agent_finished" and provider.call_count == 1:
            holder[0].steer("leak?")  # queued after the last drain of run one

    session = create_agent(model=MODEL, provider=provider).create_session(on_event=on_event)
    holder.append(session)
    await session.run("one")
    await session.run("two")
    assert texts(provider.requests[1].messages) == ["one", "done", "two"]
    assert "leak?" not in texts(await stored_messages(session))


def test_steer_messages_keep_their_ids_con_7() -> None:
    message = Message("user", "hi", id="mine")
    assert message.id == "mine"
