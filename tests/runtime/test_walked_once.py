"""A tool result is walked once per turn: one walk checks, copies and measures it (ARCH-15)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from prism._json import copy_json
from prism.middleware import MiddlewareRegistry
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.redaction import create_secret_redactor
from prism.runtime.agent import create_agent
from prism.runtime.attempts import ProviderAttempts
from prism.store import MemorySessionStore
from prism.types import (
    ModelConfig,
    ProviderRequest,
    ToolCallContent,
    ToolDefinition,
    ToolResult,
    canonical_json,
    is_json_value,
)

MODEL = ModelConfig(provider="mock", model="demo")


class _Name(str):
    pass


def _big(key: str) -> dict[str, Any]:
    return {
        "key": key,
        "rows": [
            {"id": f"{key}-{i}", "amount": {"value": 1.5 + i, "currency": "EUR"}, "note": "ü \"q\""}
            for i in range(6)
        ],
        "empty": {},
        "none": None,
        "flags": [True, False, None, 3, -0.0],
    }


DEEP: list[Any] = []
_level = DEEP
for _ in range(32):
    _level.append([])
    _level = _level[0]

CASES: list[Any] = [
    None, True, 0, -7, 2**80, 1.25, 1e300, "", "ünï \"q\" \\ \n\u2028", [], {}, {"a": []},
    _big("k"), {"é": ["ü", {"x": None}]},
    # outside the decoded-JSON types: the general path decides
    float("nan"), math.inf, {"k": -math.inf}, {1: "a"}, (1, 2), {"t": (1,)}, _Name("n"),
    {"s": _Name("n")}, {"x": {1, 2}}, object(), DEEP,
]


@pytest.mark.parametrize("value", CASES, ids=lambda v: repr(v)[:30])
def test_one_walk_checks_copies_and_measures_like_the_full_computation_arch_15(value: Any) -> None:
    walked = copy_json(value)
    if walked is None:
        return  # the general path (is_json_value) decides; nothing was claimed
    copy, size = walked
    assert is_json_value(value)
    assert copy == value
    assert size == len(canonical_json(value).encode())
    if isinstance(value, (dict, list)) and value:
        assert copy is not value


def test_the_walk_declines_exactly_the_values_outside_the_decoded_json_types_arch_15() -> None:
    declined = [v for v in CASES if copy_json(v) is None]
    assert declined == CASES[14:]


def _tool(result: Any) -> ToolDefinition:
    return ToolDefinition(name="lookup", execute=lambda arguments, context: result)


async def _run(result: Any, **options: Any) -> tuple[Any, MemorySessionStore, list[int], list[ProviderRequest]]:
    store = MemorySessionStore()
    provider = create_mock_provider(
        turns=[
            [provider_tool_call("c1", "lookup", {"q": 1}), provider_done()],
            [provider_tool_call("c2", "lookup", {"q": 2}), provider_done()],
            [provider_text_delta("done"), provider_done()],
        ]
    )
    sizes: list[int] = []
    run = ProviderAttempts.run

    async def counting(self: ProviderAttempts, request: ProviderRequest, **kwargs: Any) -> Any:
        sizes.append(kwargs["request_bytes"])
        return await run(self, request, **kwargs)

    agent = create_agent(model=MODEL, provider=provider, tools=[_tool(result)], store=store, **options)
    session = agent.create_session()
    ProviderAttempts.run = counting  # type: ignore[method-assign]
    try:
        outcome = await session.run("go")
    finally:
        ProviderAttempts.run = run  # type: ignore[method-assign]
    return outcome, store, sizes, provider.requests


def _stored_results(store: MemorySessionStore) -> list[Any]:
    entries = [e for data in store._sessions.values() for e in data.entries]
    return [
        e.message.content[0].result
        for e in entries
        if e.message is not None and e.message.role == "tool"
    ]


async def test_the_store_keeps_a_private_copy_and_request_sizes_stay_exact_arch_15() -> None:
    shared = _big("shared")  # the same object returned by every call, as a cached result is
    outcome, store, sizes, requests = await _run(shared)
    assert outcome.status == "succeeded"
    assert sizes == [len(canonical_json(r.to_dict()).encode()) for r in requests]
    stored = _stored_results(store)
    assert len(stored) == 2 and all(v == shared and v is not shared for v in stored)
    assert stored[0] is not stored[1]
    history = [m.content[0].result for m in outcome.messages if m.role == "tool"]
    assert all(v is shared for v in history)  # the run keeps what the tool returned
    shared["rows"].clear()  # the tool changes its object later: the store is unaffected
    assert all(len(v["rows"]) == 6 for v in _stored_results(store))


@pytest.mark.parametrize("kind", ["redactor", "tool_result hook", "tool result"])
async def test_a_result_something_can_change_takes_the_general_path_arch_15(kind: str) -> None:
    options: dict[str, Any] = {}
    result: Any = _big("r")
    if kind == "redactor":
        options["redactor"] = create_secret_redactor(["sk-none"])
    elif kind == "tool_result hook":
        middleware = MiddlewareRegistry()
        middleware.use("tool_result", lambda r: None)
        options["middleware"] = middleware
    else:
        result = ToolResult(tool_call_id="x", name="x", value=_big("r"))
    outcome, store, sizes, requests = await _run(result, **options)
    assert outcome.status == "succeeded"
    assert sizes == [len(canonical_json(r.to_dict()).encode()) for r in requests]
    assert all(v == _big("r") for v in _stored_results(store))


@pytest.mark.parametrize(
    "arguments",
    [{}, {"q": 1}, {"query": _big("a")}, {"x": [1.5, "ü", None, {"y": True}]}],
    ids=["empty", "small", "big", "mixed"],
)
def test_a_call_is_measured_by_the_walk_over_its_arguments_exactly_arch_15(
    arguments: dict[str, Any],
) -> None:
    from prism.runtime.run._carry import PayloadCarry
    from prism.runtime.run._json_size import canonical_size
    from prism.runtime.run._request_codec import LiveHistory, RequestCodec
    from prism.types import ProviderToolCall

    event = ProviderToolCall(call=ToolCallContent(id="c", name="t", arguments=arguments))
    carry = PayloadCarry(RequestCodec(None, LiveHistory()))
    assert carry.call_size(event) == canonical_size(event)


async def test_the_store_keeps_a_private_copy_of_large_call_arguments_arch_15() -> None:
    store = MemorySessionStore()
    arguments = {"query": _big("q")}
    provider = create_mock_provider(
        turns=[
            [provider_tool_call("c1", "lookup", arguments), provider_done()],
            [provider_text_delta("done"), provider_done()],
        ]
    )
    agent = create_agent(model=MODEL, provider=provider, tools=[_tool({"ok": True})], store=store)
    outcome = await agent.create_session().run("go")
    assert outcome.status == "succeeded"
    entries = [e for data in store._sessions.values() for e in data.entries]
    stored = [
        part.arguments
        for e in entries
        if e.message is not None
        for part in e.message.content
        if isinstance(part, ToolCallContent)
    ]
    history = [
        part.arguments
        for m in outcome.messages
        for part in m.content
        if isinstance(part, ToolCallContent)
    ]
    assert stored == history == [arguments]
    assert stored[0] is not history[0]
    second = provider.requests[1]
    assert second.messages[-2].content[0].arguments is history[0]


@pytest.mark.parametrize(
    "value",
    [["é" * 3, {"ü": "\n\t\"\\"}], {"": ""}, {"x": ["", "\u2028", "日本"]}, ["a", "\x00\x1f"]],
    ids=["accents", "empty", "unicode", "control"],
)
def test_strings_measured_together_give_each_strings_own_size_arch_15(value: Any) -> None:
    walked = copy_json(value)
    assert walked is not None
    assert walked[1] == len(canonical_json(value).encode())


def test_a_lone_surrogate_anywhere_takes_the_general_path_arch_15() -> None:
    assert copy_json({"a": "\ud800"}) is None
    assert copy_json(["ok", {"\udfff": 1}]) is None


def test_a_carried_call_is_not_measured_again_inside_its_message_arch_15() -> None:
    """The size the stream event's walk measured is the call's size in the assistant message."""
    from prism.runtime.run._carry import PayloadCarry
    from prism.runtime.run._request_codec import LiveHistory, RequestCodec
    from prism.types import Message, ProviderToolCall, TextContent

    codec = RequestCodec(None, LiveHistory())
    carry = PayloadCarry(codec)
    call = ToolCallContent(id="c", name="t", arguments={"q": _big("é")})
    message = Message("assistant", (TextContent("x"), call))
    assert carry.call_size(ProviderToolCall(call=call)) == len(
        canonical_json(ProviderToolCall(call=call).to_dict()).encode()
    )
    assert codec.message(message)[1] == len(canonical_json(message.to_dict()).encode())
    assert not codec._known  # taken once
