"""End-to-end generate-validate-revise runs through ``session.run(..., loop=...)`` with the mock
provider (RUN-17, GVR-2, GVR-3, GVR-6, GVR-8, EVT-14, EVT-17, EVT-18, ERR-3)."""

from __future__ import annotations

import asyncio
import re
from typing import Any, Literal

import pytest

from prism.artifacts import json_schema_artifact
from prism.errors import AgentRunError
from prism.loops.contracts import (
    ArtifactContext,
    ArtifactError,
    ArtifactValidation,
    GenerateValidateReviseLoopOptions,
)
from prism.loops.gvr import generate_validate_revise_loop
from prism.providers.base import (
    provider_done,
    provider_text_delta,
    provider_thinking_delta,
    provider_tool_call,
)
from prism.providers.mock import MockProvider, MockScriptItem, create_mock_provider
from prism.runtime.agent import create_agent
from prism.runtime.session import AgentSession
from prism.types import (
    Message,
    ModelCapabilities,
    ModelConfig,
    RunResult,
    StructuredOutputOptions,
    ToolDefinition,
    ToolResultContent,
)

MODEL = ModelConfig(provider="mock", model="demo")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["title", "body"],
    "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
}
GOOD = '{"title": "ok", "body": "rev2"}'
BAD = '{"title": "ok"}'


def text_turn(text: str) -> list[MockScriptItem]:
    return [provider_text_delta(text), provider_done()]


def session_with(
    turns: list[list[MockScriptItem]], **agent_options: Any
) -> tuple[AgentSession, MockProvider]:
    provider = create_mock_provider(turns=turns)
    agent = create_agent(model=agent_options.pop("model", MODEL), provider=provider, **agent_options)
    return agent.create_session(), provider


async def run_collect(
    session: AgentSession, text: str, **run_options: Any
) -> tuple[RunResult | AgentRunError, list[Any]]:
    subscription = session.subscribe(max_queued_events=4096)
    events: list[Any] = []

    async def consume() -> None:
        async for event in subscription:
            events.append(event)

    consumer = asyncio.create_task(consume())
    outcome: RunResult | AgentRunError
    try:
        outcome = await session.run(text, **run_options)
    except AgentRunError as exc:
        outcome = exc
    await asyncio.wait_for(consumer, timeout=5)
    return outcome, events


def kinds(events: list[Any]) -> list[str]:
    return [e.type for e in events]


def artifact_kinds(events: list[Any]) -> list[str]:
    return [f"{e.type}({e.turn},{e.attempt})" for e in events if e.type.startswith("artifact_")]


# ----------------------------------------------------------------------------- success


async def test_run17_success_sets_artifact_after_a_revision() -> None:
    session, provider = session_with([text_turn(BAD), text_turn(GOOD)])
    loop = GenerateValidateReviseLoopOptions(**json_schema_artifact(SCHEMA), max_revisions=2)

    result, events = await run_collect(session, "Produce the JSON doc.", loop=loop)

    assert isinstance(result, RunResult)
    assert result.status == "succeeded"
    assert result.artifact == {"title": "ok", "body": "rev2"}
    assert result.text == GOOD
    assert provider.call_count == 2
    assert artifact_kinds(events) == [
        "artifact_validation_started(1,1)",
        "artifact_validation_finished(1,1)",
        "artifact_revision_started(1,1)",
        "artifact_validation_started(2,2)",
        "artifact_validation_finished(2,2)",
        "artifact_finished(2,2)",
    ]
    assert kinds(events)[-1] == "agent_finished"
    assert "error" not in kinds(events)  # EVT-17: the revision is not an error
    # EVT-14: validation follows turn_finished of the same turn
    order = kinds(events)
    assert order.index("artifact_validation_started") == order.index("turn_finished") + 1


async def test_gvr6_store_and_requests_through_the_runtime() -> None:
    session, provider = session_with([text_turn(BAD), text_turn(GOOD)])
    loop = {"strategy": "generate-validate-revise", **json_schema_artifact(SCHEMA)}
    result, _ = await run_collect(session, "Produce the JSON doc.", loop=loop)
    assert isinstance(result, RunResult)
    # input, draft, repair, draft — each stored once
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]
    repair = result.messages[2]
    assert repair.text == "'body' is a required property"
    assert re.fullmatch(r"msg_[0-9a-f]{32}", repair.id or "")
    second = [m.text for m in provider.requests[1].messages if m.role != "system"]
    assert second == ["Produce the JSON doc.", BAD, repair.text]
    entries = await session.entries()
    stored = [e.message for e in entries if getattr(e, "message", None) is not None]
    assert [m.text for m in stored if isinstance(m, Message)].count(repair.text) == 1


# ----------------------------------------------------------------------------- failures


async def test_run17_evt18_empty_drafts_fail_with_parse_error() -> None:
    session, provider = session_with(
        [
            [provider_thinking_delta("thinking only"), provider_done()],
            text_turn("   "),
        ]
    )
    loop = {"strategy": "generate-validate-revise", "validator": lambda v, c: {"ok": True},
            "max_revisions": 1}

    error, events = await run_collect(session, "Write a release note.", loop=loop)

    assert isinstance(error, AgentRunError)
    assert error.code == "parse_error"  # ERR-3
    assert str(error) == "no artifact text in model output"
    assert error.result.status == "failed"
    assert error.result.error is not None and error.result.error.code == "parse_error"
    assert error.result.artifact is None
    assert provider.call_count == 2
    # EVT-18: artifact_failed -> error, and no agent_finished
    assert kinds(events)[-2:] == ["artifact_failed", "error"]
    assert "agent_finished" not in kinds(events)
    assert events[-1].error.code == "parse_error"


async def test_run17_host_reason_becomes_the_error_code() -> None:
    def validator(value: Any, ctx: ArtifactContext) -> ArtifactValidation:
        return ArtifactValidation(
            ok=False,
            errors=(ArtifactError("title too long", path="/title"),),
            metadata={"reason": "release_note_invalid"},
        )

    session, _ = session_with([text_turn("a"), text_turn("b")])
    error, events = await run_collect(
        session, "x", loop=generate_validate_revise_loop(validator=validator, max_revisions=1)
    )
    assert isinstance(error, AgentRunError)
    assert error.code == "release_note_invalid"
    assert str(error) == "title too long"
    assert artifact_kinds(events)[-1] == "artifact_failed(2,2)"


async def test_run17_failure_without_reason_is_artifact_failed() -> None:
    session, _ = session_with([text_turn("a")])
    error, _ = await run_collect(
        session,
        "x",
        loop={"strategy": "generate-validate-revise", "validator": lambda v, c: {"ok": False},
              "max_revisions": 0},
    )
    assert isinstance(error, AgentRunError)
    assert error.code == "artifact_failed"


# ----------------------------------------------------------------------------- tools


def _lookup_tool(calls: list[dict[str, Any]]) -> ToolDefinition:
    def execute(arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
        calls.append(arguments)
        return {"answer": 42}

    return ToolDefinition(
        name="lookup",
        execute=execute,
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
    )


async def test_gvr4_bounded_tools_through_the_runtime() -> None:
    executed: list[dict[str, Any]] = []
    session, provider = session_with(
        [
            [provider_tool_call("c1", "lookup", {"q": "facts"}), provider_done()],
            text_turn("final"),
        ],
        tools=[_lookup_tool(executed)],
        limits={"max_tool_rounds": 2},
    )
    result, events = await run_collect(
        session,
        "x",
        loop={"strategy": "generate-validate-revise", "validator": lambda v, c: {"ok": True},
              "tool_calls": "bounded"},
    )
    assert isinstance(result, RunResult) and result.artifact == "final"
    assert executed == [{"q": "facts"}]
    assert provider.call_count == 2
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    tool_events = [k for k in kinds(events) if k.startswith("tool_execution")]
    assert tool_events == ["tool_execution_started", "tool_execution_finished"]
    assert artifact_kinds(events) == [
        "artifact_validation_started(2,1)",
        "artifact_validation_finished(2,1)",
        "artifact_finished(2,1)",
    ]


async def test_gvr8_tool_round_limit_fails_the_run() -> None:
    executed: list[dict[str, Any]] = []
    session, provider = session_with(
        [
            [provider_tool_call("c1", "lookup", {"q": "a"}), provider_done()],
            [provider_tool_call("c2", "lookup", {"q": "b"}), provider_done()],
            text_turn("never"),
        ],
        tools=[_lookup_tool(executed)],
        limits={"max_tool_rounds": 1},
    )
    error, events = await run_collect(
        session,
        "x",
        loop={"strategy": "generate-validate-revise", "validator": lambda v, c: {"ok": True},
              "tool_calls": "bounded"},
    )
    assert isinstance(error, AgentRunError)
    assert error.code == "tool_round_limit"
    assert str(error) == "maximum tool rounds exceeded"
    assert provider.call_count == 2
    assert executed == [{"q": "a"}]
    assert kinds(events)[-2:] == ["artifact_failed", "error"]
    rows = [m for m in error.result.messages if m.role == "tool"]
    last = rows[-1].content[0]
    assert isinstance(last, ToolResultContent) and last.tool_call_id == "c2"
    assert last.error is not None and last.error.code == "tool_call_not_dispatched"


async def test_gvr4_disabled_tools_answer_calls_without_executing() -> None:
    executed: list[dict[str, Any]] = []
    session, _ = session_with(
        [[provider_text_delta("draft"), provider_tool_call("c1", "lookup", {"q": "a"}),
          provider_done()]],
        tools=[_lookup_tool(executed)],
    )
    result, events = await run_collect(
        session, "x", loop={"strategy": "generate-validate-revise",
                            "validator": lambda v, c: {"ok": True}}
    )
    assert isinstance(result, RunResult) and result.artifact == "draft"
    assert executed == []
    assert not [k for k in kinds(events) if k.startswith("tool_execution")]
    assert [m.role for m in result.messages] == ["user", "assistant", "tool"]


# ----------------------------------------------------------------------------- reuse, native SO


async def test_gvr3_strategy_object_reused_across_session_runs() -> None:
    loop = generate_validate_revise_loop(
        validator=lambda v, c: {"ok": v == "good"}, max_revisions=1
    )
    session, _ = session_with([text_turn("bad"), text_turn("good"),
                               text_turn("bad"), text_turn("good")])
    first, _ = await run_collect(session, "one", loop=loop)
    second, events = await run_collect(session, "two", loop=loop)
    assert isinstance(first, RunResult) and isinstance(second, RunResult)
    assert second.artifact == "good"
    assert [e.attempt for e in events if e.type == "artifact_validation_started"] == [1, 2]


@pytest.mark.parametrize(("mode", "sent"), [(None, True), ("artifact-loop", False)])
async def test_gvr2_so3_native_schema_reaches_the_provider(
    mode: Literal["artifact-loop"] | None, sent: bool
) -> None:
    model = ModelConfig(
        provider="mock", model="demo", capabilities=ModelCapabilities(structured_output=True)
    )
    session, provider = session_with([text_turn(GOOD)], model=model)
    schema = StructuredOutputOptions(name="doc", schema=SCHEMA)
    loop = GenerateValidateReviseLoopOptions(
        **json_schema_artifact(SCHEMA, structured_output_name="doc"), structured_output_mode=mode
    )
    result, _ = await run_collect(session, "x", loop=loop)
    assert isinstance(result, RunResult) and result.status == "succeeded"
    options = provider.requests[0].options
    got = options.structured_output if options is not None else None
    assert (got == schema) if sent else (got is None)
