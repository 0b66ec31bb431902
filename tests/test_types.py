"""Tests for prism.types (01-contracts.md)."""

from __future__ import annotations

import dataclasses
import json
import math
from types import MappingProxyType
from typing import Any

import pytest

from prism.abort import AbortController
from prism.errors import PrismConfigError
from prism.types import (
    AgentRunRef,
    ContextBlock,
    ErrorInfo,
    GuardrailRecord,
    ImageContent,
    Message,
    ModelCapabilities,
    ModelConfig,
    ModelLimits,
    OwnershipScope,
    ProviderContentDelta,
    ProviderDone,
    ProviderErrorEvent,
    ProviderEvent,
    ProviderMessageStart,
    ProviderRequest,
    ProviderRequestOptions,
    ProviderToolCall,
    ProviderToolCallDelta,
    ProviderTurnResult,
    ProviderUsage,
    RunLimitBreach,
    RunResult,
    StructuredOutputOptions,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolCallDeltaContent,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    ToolResultContent,
    Usage,
    assistant_message,
    canonical_json,
    is_json_value,
    merge_provider_options,
    message_text,
    provider_event_from_dict,
    system_message,
    to_messages,
    tool_result_message,
    user_message,
)

# --------------------------------------------------------------------------- CON-1 / CON-2


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [None, True, 0, -3, 1.5, "s", [], {}, (1, 2), {"a": [1, {"b": None}]}, _nested(32)],
)
def test_con1_json_compatible_values(value: Any) -> None:
    """CON-1/CON-2: JSON types, tuples as lists and depth 32 are accepted."""
    assert is_json_value(value)


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        b"x",
        math.nan,
        math.inf,
        -math.inf,
        {1: "a"},
        object(),
        ErrorInfo("x"),
        _nested(33),
        {"a": [math.nan]},
        frozenset(),
    ],
)
def test_con1_not_json_compatible(value: Any) -> None:
    """CON-1/CON-2: sets, bytes, non-finite floats, non-str keys, objects, depth > 32 rejected."""
    assert not is_json_value(value)


def test_con2_is_json_value_max_depth_and_cycles_never_raise() -> None:
    """CON-2: ``max_depth`` is honoured and a cyclic value returns False without raising."""
    assert is_json_value(_nested(3), max_depth=3)
    assert not is_json_value(_nested(4), max_depth=3)
    assert is_json_value(5, max_depth=0)
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert is_json_value(cyclic) is False


def test_con2_canonical_json() -> None:
    """CON-2: sorted keys, compact separators, no ASCII escaping, NaN rejected."""
    assert canonical_json({"b": 1, "a": [1, "é"]}) == '{"a":[1,"é"],"b":1}'
    assert canonical_json((1, 2)) == "[1,2]"
    with pytest.raises(ValueError):
        canonical_json({"x": math.nan})


# --------------------------------------------------------------------------- CON-3


ROUND_TRIP_VALUES: list[Any] = [
    ErrorInfo("boom", name="ValueError", code=429, retry_after_ms=10.0, cause="c"),
    TextContent("t"),
    ThinkingContent("", redacted_data="opaque"),
    ThinkingContent("why", signature="sig"),
    ImageContent(mime_type="image/png", data="AAAA"),
    ImageContent(url="https://example.test/x.png"),
    ToolCallDeltaContent(0, id="c1", name="n", arguments_text='{"a', authority="host"),
    ToolCallContent("c1", "n", {"a": [1, {"b": None}]}, arguments_error=ErrorInfo("bad")),
    ToolCallContent("c2", "web", {}, authority="provider-hosted"),
    ToolResultContent("c1", "n", result={"ok": True}),
    ToolResultContent("c1", "n", error=ErrorInfo("x", code="unknown_tool")),
    Message("user", "hi", id="m1", metadata={"k": [1, 2]}),
    Message(
        "assistant",
        (TextContent("a"), ThinkingContent("b"), ToolCallContent("c", "t", {"x": 1})),
    ),
    Usage(input_tokens=1, output_tokens=2, total_tokens=3, cost=0.5, currency="USD"),
    ModelConfig(
        "openai",
        "gpt",
        capabilities=ModelCapabilities(input=("text", "image"), structured_output="json_schema"),
        limits=ModelLimits(context_window=10, max_output_tokens=5),
        parameters={"temperature": 0.2},
    ),
    StructuredOutputOptions("out", {"type": "object"}, strict=True),
    ProviderRequestOptions(
        session_id="s",
        headers={"h": "v"},
        structured_output=StructuredOutputOptions("o", {"type": "object"}),
    ),
    ProviderMessageStart("msg_1"),
    ProviderContentDelta(ThinkingContent("x", signature="s")),
    ProviderToolCallDelta(1, arguments_text="{}"),
    ProviderToolCall(ToolCallContent("c", "t", {})),
    ProviderUsage(Usage(output_tokens=3)),
    ProviderDone(Usage(input_tokens=1), "tool_use"),
    ProviderErrorEvent(ErrorInfo("e", code="timeout")),
    ProviderTurnResult(
        content=(TextContent("a"), ToolCallContent("c", "t", {})),
        calls=(ToolCallContent("c", "t", {}),),
        message_id="m",
        started=True,
        usage=Usage(total_tokens=1),
        stop_reason="tool_use",
    ),
    ToolResult("c", "t", value=[1, "x"], content=(TextContent("extra"),), metadata={"m": 1}),
    ContextBlock("ctx", title="T"),
    ContextBlock((TextContent("a"), ThinkingContent("b")), id="cb"),
    AgentRunRef("run_1", "session_1"),
    OwnershipScope(tenant_id="t"),
    RunLimitBreach("max_cost", 1.0, 1.5, currency="USD"),
    GuardrailRecord("g", "tool_input", "block", reason="no", metadata={"a": 1}),
    RunResult(
        run_id="r",
        session_id="s",
        status="succeeded",
        stop_reason="host_policy",
        stop_detail="d",
        usage=Usage(input_tokens=1),
        messages=(user_message("q"), assistant_message("a")),
        error=None,
        leaf_id="entry_1",
        limit=RunLimitBreach("max_turns", 2, 3),
    ),
]


@pytest.mark.parametrize("value", ROUND_TRIP_VALUES, ids=lambda v: type(v).__name__)
def test_con3_round_trip(value: Any) -> None:
    """CON-3: ``from_dict(x.to_dict()) == x`` and the dict is JSON-safe."""
    data = value.to_dict()
    assert is_json_value(data)
    json.dumps(data)
    assert type(value).from_dict(data) == value
    assert type(value).from_dict(json.loads(json.dumps(data))) == value


def test_con3_none_omitted_and_type_last_not_init() -> None:
    """CON-3: None fields omitted; ``type`` key present, declared last, not an init parameter."""
    assert ErrorInfo("m").to_dict() == {"message": "m"}
    assert TextContent("x").to_dict() == {"text": "x", "type": "text"}
    for cls in (TextContent, ThinkingContent, ImageContent, ToolCallDeltaContent,
                ToolCallContent, ToolResultContent, ProviderMessageStart, ProviderDone):
        last = dataclasses.fields(cls)[-1]
        assert last.name == "type" and last.init is False
    with pytest.raises(TypeError):
        TextContent("x", type="image")  # type: ignore[call-arg]


def test_con3_unknown_keys_named() -> None:
    """CON-3/ARCH-9: ``from_dict`` of values and options raises PrismConfigError (a ValueError)
    naming every unknown key."""
    with pytest.raises(PrismConfigError) as info:
        ErrorInfo.from_dict({"message": "m", "zeta": 1, "alpha": 2})
    assert "zeta" in str(info.value) and "alpha" in str(info.value)
    with pytest.raises(PrismConfigError, match="bogus"):
        ProviderRequestOptions.from_dict({"bogus": 1})
    with pytest.raises(PrismConfigError, match="session_id"):
        ProviderRequestOptions.coerce({"sessionId": "s"})


def test_con3_callables_and_signals_left_out() -> None:
    """CON-3/CON-19/CON-16: ``execute`` and ``signal`` are not serialised."""

    def run(args: dict[str, Any], ctx: ToolExecutionContext) -> int:
        return 1

    tool = ToolDefinition("t", run, description="d", parameters={"type": "object"})
    assert tool.to_dict() == {
        "name": "t",
        "description": "d",
        "parameters": {"type": "object"},
        "exclusive": False,
    }
    request = ProviderRequest(
        ModelConfig("mock", "m"),
        [user_message("hi")],
        tools=[tool],
        signal=AbortController().signal,
    )
    data = request.to_dict()
    assert "signal" not in data
    assert data["tools"] == [tool.to_dict()]
    assert isinstance(request.messages, tuple) and isinstance(request.tools, tuple)
    json.dumps(data)


def test_con3_options_coerce() -> None:
    """ARCH-9: a mapping converts to the options dataclass; the instance passes through."""
    opts = ProviderRequestOptions.coerce(
        {"session_id": "s", "structured_output": {"name": "n", "schema": {}}}
    )
    assert opts.structured_output == StructuredOutputOptions("n", {})
    assert ProviderRequestOptions.coerce(opts) is opts
    with pytest.raises(PrismConfigError):
        ProviderRequestOptions.coerce(3)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- CON-5..10


def test_con5_image_needs_data_or_url() -> None:
    """CON-5: ImageContent requires at least one of data/url."""
    with pytest.raises(ValueError):
        ImageContent(mime_type="image/png")


def test_con7_message_str_content_and_roles() -> None:
    """CON-7: str content becomes one TextContent; lists become tuples; bad roles rejected."""
    msg = Message("user", "hello")
    assert msg.content == (TextContent("hello"),)
    listed = Message("assistant", [TextContent("a")])
    assert listed.content == (TextContent("a"),)
    with pytest.raises(ValueError):
        Message("robot", "x")  # type: ignore[arg-type]
    assert user_message("u") == Message("user", (TextContent("u"),))
    assert system_message("s").role == "system"
    assert assistant_message("a").role == "assistant"
    assert user_message("u").id is None


def test_con7_metadata_mapping_kept_as_given() -> None:
    """01 preamble: mappings inside frozen values are neither copied nor wrapped."""
    meta = {"a": 1}
    assert Message("user", "x", metadata=meta).metadata is meta


def test_con8_tool_result_message() -> None:
    """CON-8: tool-result message content and metadata."""
    result = ToolResult(
        "c1", "t", value={"v": 1}, content=[TextContent("more")], metadata={"m": True}
    )
    msg = tool_result_message(result)
    assert msg.role == "tool"
    assert msg.content == (ToolResultContent("c1", "t", result={"v": 1}), TextContent("more"))
    assert msg.metadata == {"m": True}
    err = ToolResult("c2", "t", error=ErrorInfo("bad", code="unknown_tool"))
    assert err.is_error
    head = tool_result_message(err).content[0]
    assert isinstance(head, ToolResultContent) and head.error == ErrorInfo("bad", code="unknown_tool")


def test_con9_to_messages() -> None:
    """CON-9: str, Message and sequences normalise to a new list; others raise TypeError."""
    assert to_messages("hi") == [user_message("hi")]
    msg = assistant_message("a")
    assert to_messages(msg) == [msg]
    source = [msg, user_message("b")]
    out = to_messages(source)
    assert out == source and out is not source
    assert to_messages(()) == []
    with pytest.raises(TypeError):
        to_messages([msg, "x"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        to_messages(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        to_messages({"role": "user"})  # type: ignore[arg-type]


def test_con10_message_text_only_text_parts() -> None:
    """CON-10: concatenation of TextContent only, in order, no separator."""
    msg = Message(
        "assistant",
        (
            TextContent("a"),
            ThinkingContent("hidden"),
            ToolCallContent("c", "t", {}),
            TextContent("b"),
        ),
    )
    assert message_text(msg) == "ab"
    assert message_text(msg.content) == "ab"
    assert msg.text == "ab"


# --------------------------------------------------------------------------- CON-11


@pytest.mark.parametrize(
    "kwargs",
    [
        {"input_tokens": -1},
        {"output_tokens": True},
        {"total_tokens": 1.0},
        {"reasoning_tokens": "3"},
        {"cost": -0.1},
        {"cost": math.inf},
        {"cost": math.nan},
        {"cost": False},
    ],
)
def test_con11_usage_validation(kwargs: dict[str, Any]) -> None:
    """CON-11: token counts non-negative ints (bool rejected); cost finite >= 0 -> TypeError."""
    with pytest.raises(TypeError):
        Usage(**kwargs)


def test_con11_usage_valid() -> None:
    """CON-11: valid usages construct."""
    assert Usage(input_tokens=0, cost=0, reasoning_tokens=4).cost == 0
    assert Usage().to_dict() == {}


# --------------------------------------------------------------------------- CON-13..16


def test_con13_model_defaults() -> None:
    """CON-13: capability defaults; list modalities become tuples."""
    caps = ModelCapabilities(input=["text", "image"])
    assert caps.input == ("text", "image") and caps.output == ("text",)
    assert caps.streaming is True and caps.tools is False and caps.structured_output is False


def test_con15_merge_provider_options() -> None:
    """CON-15: patch wins; headers/compat/extra merge key by key; None returns the other."""
    so1 = StructuredOutputOptions("a", {})
    so2 = StructuredOutputOptions("b", {})
    base = ProviderRequestOptions(
        session_id="s1", headers={"a": "1", "b": "1"}, compat={"x": 1}, structured_output=so1
    )
    patch = ProviderRequestOptions(headers={"b": "2", "c": "2"}, extra={"e": 1})
    merged = merge_provider_options(base, patch)
    assert merged == ProviderRequestOptions(
        session_id="s1",
        headers={"a": "1", "b": "2", "c": "2"},
        compat={"x": 1},
        extra={"e": 1},
        structured_output=so1,
    )
    override = merge_provider_options(
        base, ProviderRequestOptions(session_id="s2", structured_output=so2)
    )
    assert override is not None
    assert override.session_id == "s2" and override.structured_output is so2
    assert merge_provider_options(None, patch) is patch
    assert merge_provider_options(base, None) is base
    assert merge_provider_options(None, None) is None


def test_con16_replace_derives_request() -> None:
    """CON-16: dataclasses.replace derives a modified request."""
    request = ProviderRequest(ModelConfig("mock", "m"), (user_message("a"),))
    derived = dataclasses.replace(request, messages=[*request.messages, user_message("b")])  # type: ignore[arg-type]
    assert len(derived.messages) == 2 and isinstance(derived.messages, tuple)
    assert request.context == () and request.tools is None


# --------------------------------------------------------------------------- CON-17/18


def test_con17_provider_event_from_dict() -> None:
    """CON-17: provider events rebuild by their type; unknown types raise ValueError."""
    events: list[ProviderEvent] = [
        ProviderMessageStart(),
        ProviderContentDelta(TextContent("x")),
        ProviderToolCallDelta(0, id="c"),
        ProviderToolCall(ToolCallContent("c", "t", {})),
        ProviderUsage(Usage(input_tokens=1)),
        ProviderDone(stop_reason="end_turn"),
        ProviderErrorEvent(ErrorInfo("e")),
    ]
    assert {e.type for e in events} == {
        "message_start", "content_delta", "tool_call_delta", "tool_call", "usage", "done", "error"
    }
    for event in events:
        assert provider_event_from_dict(event.to_dict()) == event
    with pytest.raises(ValueError):
        provider_event_from_dict({"type": "nope"})


def test_con18_turn_result_defaults() -> None:
    """CON-18: an empty (not started) result has no content or calls."""
    empty = ProviderTurnResult()
    assert empty.started is False and empty.content == () and empty.calls == ()
    assert ProviderTurnResult(content=[TextContent("a")]).text == "a"


# --------------------------------------------------------------------------- CON-19..21


async def test_con20_tool_execution_context_defaults() -> None:
    """CON-20: metadata defaults to a read-only empty mapping; progress awaitable."""
    ctx = ToolExecutionContext("s", "r", "c", AbortController().signal)
    assert isinstance(ctx.metadata, MappingProxyType) and dict(ctx.metadata) == {}
    await ctx.progress({"p": 1})
    assert ctx.to_dict() == {"session_id": "s", "run_id": "r", "tool_call_id": "c", "metadata": {}}


# --------------------------------------------------------------------------- CON-30, CON-34


def test_con30_run_result_message_and_text() -> None:
    """CON-30: ``message`` is the last assistant message; ``text`` its text; not in to_dict."""
    first = assistant_message("one")
    last = Message("assistant", (ThinkingContent("t"), TextContent("two")))
    result = RunResult(
        run_id="r",
        session_id="s",
        status="succeeded",
        messages=[user_message("q"), first, last, tool_result_message(ToolResult("c", "t"))],
    )
    assert result.message is last and result.text == "two"
    assert "message" not in result.to_dict() and "text" not in result.to_dict()
    bare = RunResult(run_id="r", session_id="s", status="failed")
    assert bare.message is None and bare.text == ""


def test_con30_run_result_artifact_passed_through() -> None:
    """CON-30/CON-3: ``artifact`` is passed through unchanged by to_dict."""

    @dataclasses.dataclass
    class Host:
        x: int

    artifact = Host(1)
    data = RunResult(run_id="r", session_id="s", status="succeeded", artifact=artifact).to_dict()
    assert data["artifact"] is artifact


def test_con34_context_block_text() -> None:
    """CON-34: text is content itself or text/thinking parts joined by ''."""
    assert ContextBlock("plain").text == "plain"
    block = ContextBlock(
        [TextContent("a"), ThinkingContent("b"), ToolCallContent("c", "t", {})]
    )
    assert block.text == "ab" and isinstance(block.content, tuple)


def test_values_are_frozen() -> None:
    """01 preamble: value types are frozen."""
    msg = user_message("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        msg.role = "assistant"  # type: ignore[misc]
