"""Fast canonical JSON sizes equal the full computation (ARCH-15, RUN-15, LIM-4)."""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any

import pytest

from prism._serde import to_json_value
from prism.events import MessageFinishedEvent, ProviderTurnMetadata, ProviderTurnStartedEvent
from prism.limits import UNLIMITED, RunLimits
from prism.runtime._json_size import canonical_size
from prism.types import (
    ContextBlock,
    ErrorInfo,
    ImageContent,
    Message,
    ModelCapabilities,
    ModelConfig,
    ProviderRequest,
    ProviderRequestOptions,
    StructuredOutputOptions,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolDefinition,
    ToolResult,
    Usage,
    canonical_json,
    tool_result_message,
)

MODEL = ModelConfig(
    provider="p",
    model="m",
    capabilities=ModelCapabilities(tools=True),
    parameters={"temperature": 0.5, "stop": ["\n", "ü"]},
)

VALUES: list[Any] = [
    "plain",
    "ünïcødé \"quoted\" \\ \n\t\u2028",
    "",
    0,
    -3,
    2.5,
    1e100,
    True,
    None,
    [],
    {},
    (),
    [1, "a", None, [2, {"b": 3}]],
    {"z": 1, "a": {"y": [1, 2], "b": None}},
    MappingProxyType({"k": "v"}),
    {"nested": Usage(input_tokens=1)},
    TextContent("hello"),
    ThinkingContent(text="t", signature="s"),
    ImageContent(data="AAAA"),
    ToolCallContent(id="c", name="n", arguments={"b": [1, 2.0], "a": "é"}),
    ToolCallContent(id="c", name="n", arguments={}, authority="provider-hosted",
                    arguments_error=ErrorInfo(message="bad", code="invalid_json_arguments")),
    tool_result_message(ToolResult(tool_call_id="c", name="n", value={"ok": [True, None]})),
    tool_result_message(ToolResult(tool_call_id="c", name="n", error=ErrorInfo(message="x", code=500))),
    Message("assistant", (TextContent("a"), ToolCallContent(id="c", name="n", arguments={"q": 1})), id="m1",
            metadata={"k": [1, {"x": "y"}]}),
    Message("user", ()),
    Usage(),
    Usage(input_tokens=1, cost=0.25, currency="USD"),
    ProviderRequest(
        model=MODEL,
        messages=(Message("user", "hi"),),
        tools=(ToolDefinition(name="t", execute=lambda a, c: None, parameters={"type": "object"}),),
        context=(ContextBlock(content="ctx", title="T"),),
        options=ProviderRequestOptions(
            headers={"h": "v"},
            structured_output=StructuredOutputOptions(name="s", schema={"type": "object"}),
        ),
        metadata={"run": "meta"},
    ),
    ProviderTurnStartedEvent(session_id="s", run_id="r", turn=1, metadata=ProviderTurnMetadata(provider_id="p", model=MODEL, attempt=1)),
    MessageFinishedEvent(session_id="s", run_id="r", message=Message("assistant", "x")),
    RunLimits(max_turns=UNLIMITED, max_tool_calls=3),
]


@pytest.mark.parametrize("value", VALUES, ids=[type(v).__name__ + str(i) for i, v in enumerate(VALUES)])
def test_canonical_size_equals_the_full_computation_arch_15(value: Any) -> None:
    assert canonical_size(value) == len(canonical_json(to_json_value(value)).encode())


@pytest.mark.parametrize("bad", [math.nan, math.inf, {"x": math.inf}, [object()], {1: "a", "b": 2}])
def test_non_json_values_raise_like_the_full_computation_arch_15(bad: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        canonical_json(to_json_value(bad))
    with pytest.raises((TypeError, ValueError)):
        canonical_size(bad)
