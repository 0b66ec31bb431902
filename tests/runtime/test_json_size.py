"""Fast canonical JSON sizes equal the full computation (ARCH-15, RUN-15, LIM-4)."""

from __future__ import annotations

import enum
import math
from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import pytest

from prism._serde import to_json_value
from prism.events import MessageFinishedEvent, ProviderTurnMetadata, ProviderTurnStartedEvent
from prism.limits import UNLIMITED, RunLimits
from prism.runtime.run._json_size import canonical_size
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


class _Colour(enum.StrEnum):
    RED = "red"


class _Level(enum.IntEnum):
    HIGH = 3


class _Name(str):
    pass


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
    _Colour.RED,
    _Level.HIGH,
    _Name("sub"),
    OrderedDict([("b", 1), ("a", 2)]),
    {"a": _Level.HIGH, "b": _Name("x"), "c": OrderedDict(z=1)},
    [TextContent("x"), {"k": (1, 2)}, (None, False)],
    {"deep": [[[[{"x": [1.5, -0.0, 1e-7]}]]]]},
    -0.0,
    10**40,
    "\U0001f600 emoji",
    {"é": "ü", "\u2028": ["\x00"]},
    {f"k{i}": i for i in range(12)},
    {"ключ": "значение", "n": None, "b": False, "t": True, "i": -7, "q": "\"\\"},
    {"f": 0.1, "s": "x"},
    {"s": "x", "nested": {"a": [1]}},
    {1: "int key"},
]


@pytest.mark.parametrize("value", VALUES, ids=[type(v).__name__ + str(i) for i, v in enumerate(VALUES)])
def test_canonical_size_equals_the_full_computation_arch_15(value: Any) -> None:
    assert canonical_size(value) == len(canonical_json(to_json_value(value)).encode())


@pytest.mark.parametrize(
    "bad",
    [math.nan, math.inf, {"x": math.inf}, [object()], {1: "a", "b": 2}, {"a": 1, "b": object()},
     {"a": "x", 1: "y"}, ToolCallContent(id="c", name="n", arguments={"x": math.nan})],
)
def test_non_json_values_raise_like_the_full_computation_arch_15(bad: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        canonical_json(to_json_value(bad))
    with pytest.raises((TypeError, ValueError)):
        canonical_size(bad)


def _circular_dict() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value["self"] = value
    return value


def _circular_list() -> list[Any]:
    value: list[Any] = []
    value.append({"inner": value})
    return value


@pytest.mark.parametrize("make", [_circular_dict, _circular_list])
def test_circular_values_raise_value_error_like_the_full_computation_arch_15(make: Any) -> None:
    with pytest.raises(ValueError):
        canonical_json(make())
    with pytest.raises(ValueError):
        canonical_size(make())


def test_sizes_stay_exact_after_a_rejected_value_arch_15() -> None:
    """A failed measurement leaves no state behind that changes later results."""
    nested: dict[str, Any] = {"a": {"b": [1, 2]}}
    with pytest.raises(TypeError):
        canonical_size({"a": {"b": [object()]}})
    with pytest.raises(ValueError):
        canonical_size(_circular_dict())
    assert canonical_size(nested) == len(canonical_json(nested).encode())


def test_tool_call_sizes_are_exact_alone_and_inside_a_message_arch_15() -> None:
    """A call is measured as a stream event and again inside the assistant message."""
    calls = [ToolCallContent(id=f"c{i}", name="n", arguments={"i": i, "s": "é" * i}) for i in range(300)]
    for call in calls:
        assert canonical_size(call) == len(canonical_json(to_json_value(call)).encode())
        message = Message("assistant", (TextContent("x"), call))
        assert canonical_size(message) == len(canonical_json(to_json_value(message)).encode())
    twin = ToolCallContent(id="c1", name="n", arguments={"i": 1, "s": "é"})
    assert canonical_size(twin) == canonical_size(calls[1])


def test_a_type_tag_that_is_not_the_default_object_is_measured_exactly_arch_15() -> None:
    """The generated sizers add a tag's size computed once while the tag is the class's own
    default object; an equal copy (as unpickling makes) or another value is measured."""
    for tag in ("".join(["te", "xt"]), "other", "é"):
        part = TextContent("hi")
        object.__setattr__(part, "type", tag)
        assert canonical_size(part) == len(canonical_json(to_json_value(part)).encode())
    bare = ToolCallContent(id="", name="", arguments={})
    object.__setattr__(bare, "type", None)
    assert canonical_size(bare) == len(canonical_json(to_json_value(bare)).encode())


@pytest.mark.parametrize(
    "usage",
    [Usage(), Usage(input_tokens=0), Usage(input_tokens=12, output_tokens=3, cost=0.5)],
    ids=["empty", "zero", "mixed"],
)
def test_int_fields_are_measured_exactly_arch_15(usage: Usage) -> None:
    assert canonical_size(usage) == len(canonical_json(to_json_value(usage)).encode())
    flagged = Usage(input_tokens=1)
    object.__setattr__(flagged, "input_tokens", True)  # not an int: the general path
    assert canonical_size(flagged) == len(canonical_json(to_json_value(flagged)).encode())


def test_text_deltas_are_measured_exactly_arch_15() -> None:
    from prism.types import ProviderContentDelta

    events = [
        ProviderContentDelta(TextContent(text))
        for text in ("", "plain", 'ünï "q" \\ \n\u2028', "\U0001f600" * 3)
    ]
    events.append(ProviderContentDelta(ThinkingContent("t", signature="s")))
    odd = ProviderContentDelta(TextContent("x"))
    object.__setattr__(odd.content, "type", "".join(["te", "xt"]))
    events.append(odd)
    odd = ProviderContentDelta(TextContent("x"))
    object.__setattr__(odd, "type", "other")
    events.append(odd)
    for event in events:
        assert canonical_size(event) == len(canonical_json(to_json_value(event)).encode())
