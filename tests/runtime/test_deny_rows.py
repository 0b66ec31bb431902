"""A denied run leaves a transcript a provider accepts (DUR-21, EVT-7, APR-3, RUN-24).

DUR-21 stores no rows for the gated calls; the project rule that an aborted, failed or denied run
leaves a history a provider accepts on the next turn adds one ``approval_rejected`` row per open
call of the gated round, written before the ``denied`` envelope.
"""

from __future__ import annotations

from typing import Any

import pytest

from prism.errors import AgentRunStateError
from prism.events import AgentDeniedEvent
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import MockProvider, MockScriptItem, create_mock_provider
from prism.redaction import create_secret_redactor
from prism.runtime.agent import Agent, create_agent
from prism.runtime.checkpoints import CheckpointRecord, MemoryCheckpointStore
from prism.runtime.durable import (
    DENIED_MESSAGE,
    RunStateOptions,
    load_agent_run_state,
    resume_agent_run,
)
from prism.runtime.durable._resume_writes import open_round_calls
from prism.store import MemorySessionStore, SessionEntry, new_session_entry
from prism.types import (
    ErrorInfo,
    Message,
    ModelConfig,
    ProviderRequest,
    ToolCallContent,
    ToolDefinition,
    ToolResult,
    ToolResultContent,
    tool_result_message,
)

MODEL = ModelConfig(provider="mock", model="demo")


def tool_turn(*ids: str) -> list[MockScriptItem]:
    return [*(provider_tool_call(i, "refund", {"order": n}) for n, i in enumerate(ids, 1)),
            provider_done()]


def text_turn(text: str) -> list[MockScriptItem]:
    return [provider_text_delta(text), provider_done()]


class FlakyCheckpoints(MemoryCheckpointStore):
    """Fails the next ``failures`` saves (after the suspension was stored)."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0

    async def save_checkpoint(self, **kwargs: Any) -> CheckpointRecord:
        if self.failures:
            self.failures -= 1
            raise OSError("checkpoint store unavailable")
        return await super().save_checkpoint(**kwargs)


class World:
    def __init__(self, *, redactor: Any = None) -> None:
        self.checkpoints = FlakyCheckpoints()
        self.store = MemorySessionStore()
        self.executed: list[Any] = []
        self.events: list[Any] = []
        self.redactor = redactor

    def refund(self, args: dict[str, Any], ctx: Any) -> Any:
        self.executed.append(args)
        return {"ok": True}

    def agent(self, provider: MockProvider) -> Agent:
        return create_agent(
            model=MODEL,
            provider=provider,
            id="desk",
            store=self.store,
            tools=[ToolDefinition(name="refund", execute=self.refund)],
            run_state=RunStateOptions(self.checkpoints, "v1", interrupt_before_tool=True),
            redactor=self.redactor,
        )


def assert_every_call_answered_once(request: ProviderRequest) -> None:
    """What strict providers check: each assistant tool call has exactly one tool result."""
    calls = [
        part.id
        for m in request.messages
        if m.role == "assistant"
        for part in m.content
        if isinstance(part, ToolCallContent)
    ]
    results = [
        part.tool_call_id
        for m in request.messages
        if m.role == "tool"
        for part in m.content
        if isinstance(part, ToolResultContent)
    ]
    assert calls, "the request should carry the denied round"
    assert sorted(results) == sorted(calls)


async def _denied_world(*ids: str, redactor: Any = None) -> tuple[World, Any, Any, MockProvider]:
    world = World(redactor=redactor)
    provider = create_mock_provider(turns=[tool_turn(*ids), text_turn("after")])
    session = world.agent(provider).create_session(on_event=world.events.append)
    first = await session.run("go")
    assert first.status == "suspended"
    return world, session, first, provider


async def test_deny_answers_every_gated_call_in_call_order_dur_21() -> None:
    """Beyond DUR-21 (spec silent): one ``approval_rejected`` row per gated call, in call order,
    under the denied run; ``RunResult.messages`` and ``leaf_id`` reflect them."""
    world, session, first, provider = await _denied_world("c1", "c2")
    result = await resume_agent_run(session, first.run_state, decision="deny")
    assert result.status == "denied"
    entries = await session.entries()
    rows = entries[-2:]
    assert [e.run_id for e in rows] == [first.run_id, first.run_id]
    parts = [e.message.content[0] for e in rows if e.message is not None]
    assert [(p.tool_call_id, p.error.code, p.error.message) for p in parts] == [
        ("c1", "approval_rejected", DENIED_MESSAGE),
        ("c2", "approval_rejected", DENIED_MESSAGE),
    ]
    assert rows[0].parent_id == first.leaf_id and rows[1].parent_id == rows[0].id
    assert result.leaf_id == rows[1].id == session.leaf_id
    assert [m.content[0].tool_call_id for m in result.messages] == ["c1", "c2"]
    loaded = await load_agent_run_state(world.checkpoints, run_id=first.run_id)
    assert loaded.state["status"] == "denied" and loaded.state["leaf_id"] == rows[1].id
    assert world.executed == [] and provider.call_count == 1


async def test_deny_emits_only_agent_denied_dur_21_evt_7() -> None:
    world, session, first, provider = await _denied_world("c1", "c2")
    world.events.clear()
    await resume_agent_run(session, first.run_state, decision="deny")
    assert [e.type for e in world.events] == ["agent_denied"]
    assert isinstance(world.events[0], AgentDeniedEvent)


async def test_next_run_on_the_same_session_sends_a_valid_transcript_dur_21() -> None:
    """After a deny, the session's next request answers every tool call exactly once."""
    world, session, first, provider = await _denied_world("c1", "c2")
    await resume_agent_run(session, first.run_state, decision="deny")
    second = await session.run("and now?")
    assert second.status == "succeeded"
    request = provider.requests[-1]
    assert_every_call_answered_once(request)
    assert [m.role for m in request.messages] == ["user", "assistant", "tool", "tool", "user"]
    assert world.executed == []


async def test_a_fresh_session_over_the_store_continues_after_the_rows_dur_21() -> None:
    """Deny through the agent (a new session object), then continue in yet another one."""
    world, session, first, provider = await _denied_world("c1")
    agent = world.agent(provider)
    result = await resume_agent_run(agent, first.run_state, decision="deny")
    assert result.status == "denied"
    later = agent.create_session(session.id)
    await later.run("continue")
    assert_every_call_answered_once(provider.requests[-1])


async def test_rows_are_redacted_dur_21_dur_6() -> None:
    world, session, first, _ = await _denied_world(
        "c1", redactor=create_secret_redactor(["operator"])
    )
    result = await resume_agent_run(session, first.run_state, decision="deny")
    stored = (await session.entries())[-1]
    assert stored.message is not None
    error = stored.message.content[0].error
    assert error is not None and "operator" not in error.message and "[REDACTED]" in error.message
    assert result.messages[0] == stored.message


async def test_a_failed_envelope_write_keeps_the_run_resumable_and_a_retry_adds_no_rows_dur_21(
) -> None:
    """Rows first, envelope second: when the ``denied`` write fails the run stays ``suspended``
    with its calls answered; denying again stores the envelope without a second row."""
    world, session, first, provider = await _denied_world("c1", "c2")
    world.checkpoints.failures = 1
    with pytest.raises(OSError):
        await resume_agent_run(session, first.run_state, decision="deny")
    loaded = await load_agent_run_state(world.checkpoints, run_id=first.run_id)
    assert loaded.state["status"] == "suspended"
    assert len([e for e in await session.entries() if e.message and e.message.role == "tool"]) == 2
    result = await resume_agent_run(session, first.run_state, decision="deny")
    assert result.status == "denied"
    tool_rows = [e for e in await session.entries() if e.message and e.message.role == "tool"]
    assert [e.message.content[0].tool_call_id for e in tool_rows if e.message] == ["c1", "c2"]
    assert [m.content[0].tool_call_id for m in result.messages] == ["c1", "c2"]
    await session.run("next")
    assert_every_call_answered_once(provider.requests[-1])
    with pytest.raises(AgentRunStateError, match="is denied and cannot be resumed"):
        await resume_agent_run(session, result.run_state, decision="deny")


async def test_a_retry_after_a_partial_append_adds_only_the_missing_rows_dur_21() -> None:
    world, session, first, provider = await _denied_world("c1", "c2")
    # an earlier denial stored the first row, then stopped
    row = tool_result_message(
        ToolResult(
            tool_call_id="c1",
            name="refund",
            error=ErrorInfo(code="approval_rejected", message=DENIED_MESSAGE),
        )
    )
    entry = new_session_entry(
        "message", session_id=session.id, parent_id=first.leaf_id, run_id=first.run_id,
        message=row,
    )
    await world.store.append(entry, expected_parent_id=first.leaf_id)
    result = await resume_agent_run(world.agent(provider), first.run_state, decision="deny")
    tool_rows = [e for e in await world.store.list(session.id) if e.message and e.message.role == "tool"]
    assert [e.message.content[0].tool_call_id for e in tool_rows if e.message] == ["c1", "c2"]
    assert tool_rows[1].parent_id == entry.id
    assert result.leaf_id == tool_rows[1].id


def _message_entry(message: Message, parent: str | None, n: int) -> SessionEntry:
    return SessionEntry(id=f"e{n}", session_id="s", kind="message", timestamp="t",
                        parent_id=parent, run_id="r", message=message)


def test_open_calls_are_those_of_the_last_round_without_rows_dur_21() -> None:
    hosted = ToolCallContent(id="h", name="search", arguments={}, authority="provider-hosted")
    a = ToolCallContent(id="a", name="refund", arguments={})
    b = ToolCallContent(id="b", name="refund", arguments={})
    c = ToolCallContent(id="c", name="refund", arguments={})
    old = ToolCallContent(id="old", name="refund", arguments={})
    messages = [
        Message("user", "go"),
        Message("assistant", (old,)),
        Message("assistant", (hosted, a, b, c)),
        tool_result_message(ToolResult(tool_call_id="b", name="refund", value=1)),
        Message("user", "steer"),
    ]
    branch = [_message_entry(m, f"e{i - 1}" if i else None, i) for i, m in enumerate(messages)]
    assert [call.id for call in open_round_calls(branch)] == ["a", "c"]
    assert open_round_calls(branch[:2]) == [old]
    answered = [*branch[:2], _message_entry(
        tool_result_message(ToolResult(tool_call_id="old", name="refund", value=1)), "e1", 9)]
    assert open_round_calls(answered) == []
    assert open_round_calls(branch[:1]) == []
    assert open_round_calls([]) == []
