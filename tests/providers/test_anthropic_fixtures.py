"""Replay of every recorded Anthropic exchange through the real SDK code path (PROV-14, ANT-*).

Each cassette under ``tests/fixtures/provider-traffic/anthropic/`` is loaded with PyYAML and
served, unchanged, by an ``httpx``-family ``MockTransport`` behind a host-built
``anthropic.AsyncAnthropic(api_key="test", http_client=..., max_retries=0)`` (PROV-0). The SDK
2.x line is built on ``httpx2`` (it rejects ``httpx`` objects), so the HTTP module is the one
the SDK itself uses. Recorded headers are replayed as recorded except ``content-length`` /
``transfer-encoding`` / ``content-encoding``, which describe the original wire framing rather
than the body handed to the transport.

Assertions are exact: the ``ProviderTurnResult`` folded from the provider's events (text,
thinking with its signature, tool calls with ids and parsed arguments, usage, stop reason) or
the exact error classification, and the request body the provider sends compared with the
recorded request. Long texts are checked against an independent oracle: the recorded SSE body
split on blank lines and its ``data:`` JSON concatenated per delta type.

Non-stream recordings (``nonstream-*``, ``error-*``). prism's Anthropic provider speaks only the
streaming protocol (PROV-8; ANT-2 sends ``"stream": true``), so nothing is synthesised from these
recordings and no non-stream code path exists to make them pass:

* the error recordings are replayed as they are: an HTTP error answers a streaming request with
  the same JSON error body, so status, body and classification are exercised faithfully (only
  the recorded request's ``"stream": false`` differs from what prism sends);
* the successful non-stream exchange is replayed byte for byte as the answer to prism's
  streaming request. A JSON ``Message`` is not a Messages event stream, so the provider cannot
  prove completion and must fail closed with ``incomplete_stream`` (ANT-6) rather than
  fabricate a turn. Its recorded second request (assistant ``tool_use`` blocks, two
  ``tool_result`` blocks) is the reference for the body prism builds from the same history.
"""

from __future__ import annotations

import gzip
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
import yaml

from prism.providers.anthropic import AnthropicProvider, create_anthropic_provider
from prism.providers.base import fold_provider_events
from prism.retry import is_transient_error
from prism.runtime.agent import create_agent
from prism.types import (
    Message,
    ModelConfig,
    ProviderDone,
    ProviderErrorEvent,
    ProviderEvent,
    ProviderMessageStart,
    ProviderRequest,
    ProviderRequestOptions,
    ProviderTurnResult,
    ProviderUsage,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolDefinition,
    ToolResultContent,
    Usage,
)

HTTP: Any = importlib.import_module(
    next(
        c.__module__
        for c in anthropic.DefaultAsyncHttpxClient.__mro__
        if c.__name__ == "AsyncClient"
    ).partition(".")[0]
)
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "provider-traffic" / "anthropic"
_FRAMING_HEADERS = {"content-length", "transfer-encoding", "content-encoding"}

REPLAYED = {
    "stream-thinking.pydantic-ai.yaml",
    "stream-text-then-parallel-tool-use-roundtrip.llm-anthropic.yaml",
    "stream-refusal-stop-details.llm-anthropic.yaml",
    "nonstream-parallel-tool-use-roundtrip.pydantic-ai.yaml",
    "error-404-model-not-found.pydantic-ai.yaml",
    "error-400-invalid-request.pydantic-ai.yaml",
}


@pytest.fixture(autouse=True)
def _no_sdk_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_CUSTOM_HEADERS"):
        monkeypatch.delenv(name, raising=False)


# --------------------------------------------------------------------------- cassette loading


def load(name: str) -> list[dict[str, Any]]:
    data = yaml.safe_load((FIXTURES / name).read_text(encoding="utf-8"))
    assert data["version"] == 1
    interactions: list[dict[str, Any]] = data["interactions"]
    return interactions


def _headers(recorded: dict[str, list[str]]) -> dict[str, list[str]]:
    return {k.lower(): v for k, v in recorded.items()}


def response_bytes(interaction: dict[str, Any]) -> bytes:
    """The recorded response body exactly as stored (parsed JSON is re-serialised)."""
    response = interaction["response"]
    if "parsed_body" in response:
        return json.dumps(response["parsed_body"]).encode("utf-8")
    raw = response["body"]["string"]
    body = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
    if "gzip" in _headers(response["headers"]).get("content-encoding", []):
        body = gzip.decompress(body)
    return body


def recorded_response(interaction: dict[str, Any]) -> Any:
    response = interaction["response"]
    headers = [
        (name, value)
        for name, values in response["headers"].items()
        if name.lower() not in _FRAMING_HEADERS
        for value in values
    ]
    return HTTP.Response(
        response["status"]["code"], headers=headers, content=response_bytes(interaction)
    )


def recorded_request_body(interaction: dict[str, Any]) -> dict[str, Any]:
    request = interaction["request"]
    if "parsed_body" in request:
        body: dict[str, Any] = request["parsed_body"]
        return body
    loaded: dict[str, Any] = json.loads(request["body"])
    return loaded


def sse_data(interaction: dict[str, Any]) -> list[dict[str, Any]]:
    """Independent oracle: the JSON of every ``data:`` line of the recorded SSE body."""
    text = response_bytes(interaction).decode("utf-8")
    out: list[dict[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data:"):
                out.append(json.loads(line[5:]))
    return out


def joined(events: list[dict[str, Any]], delta_type: str, field: str) -> str:
    return "".join(
        e["delta"][field]
        for e in events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == delta_type
    )


class Replay:
    """Serves the given interactions' responses in order; records what prism sent."""

    def __init__(self, *interactions: dict[str, Any]) -> None:
        self._queue = list(interactions)
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        return recorded_response(self._queue.pop(0))

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


def provider_for(replay: Replay) -> AnthropicProvider:
    client = anthropic.AsyncAnthropic(
        api_key="test",
        http_client=HTTP.AsyncClient(transport=HTTP.MockTransport(replay)),
        max_retries=0,
    )
    return create_anthropic_provider(client=client)


async def run(provider: AnthropicProvider, request: ProviderRequest) -> list[ProviderEvent]:
    return [event async for event in provider.generate(request)]


def user(text: str) -> Message:
    return Message(role="user", content=(TextContent(text=text),))


def tool_message(call_id: str, name: str, result: str) -> Message:
    return Message(
        role="tool", content=(ToolResultContent(tool_call_id=call_id, name=name, result=result),)
    )


def _noop(args: dict[str, Any], ctx: Any) -> None:
    return None


def test_every_recorded_anthropic_fixture_is_replayed() -> None:
    """PROV-14: a new recording under anthropic/ must get a replay test here."""
    assert {p.name for p in FIXTURES.glob("*.yaml")} == REPLAYED


def _iter_urls(replay: Replay) -> Iterator[str]:
    for request in replay.requests:
        yield str(request.url)


# --------------------------------------------------------------------------- stream-thinking


async def test_stream_thinking_replays_to_a_signed_thinking_part_and_text() -> None:
    """ANT-4/ANT-5/CON-18 on recorded claude-sonnet-4 traffic: thinking deltas plus a signature
    delta fold into one signed ThinkingContent, then the text; usage and stop reason exact;
    the request body equals the recorded one."""
    (interaction,) = load("stream-thinking.pydantic-ai.yaml")
    replay = Replay(interaction, interaction)
    provider = provider_for(replay)
    model = ModelConfig(
        provider="anthropic",
        model="claude-sonnet-4-0",
        compat={"thinking": {"type": "enabled", "budget_tokens": 1024}},
    )
    question = user("How do I cross the street?")
    events = await run(provider, ProviderRequest(model=model, messages=(question,)))

    assert replay.bodies[0] == recorded_request_body(interaction)
    assert list(_iter_urls(replay)) == ["https://api.anthropic.com/v1/messages"]
    oracle = sse_data(interaction)
    signature = joined(oracle, "signature_delta", "signature")
    assert signature.startswith("EvMCCkYICxgCKkCHP2cSuEdcJK/0rFwqES/ecn+VurRpNTwI4XNyM0vnNf")
    assert signature.endswith("XsYeb1vgb7wwzDvP/UhjfQYAQ==") and len(signature) == 504
    thinking = joined(oracle, "thinking_delta", "thinking")
    assert thinking.startswith("This is a straightforward question about pedestrian safety.")
    text = joined(oracle, "text_delta", "text")
    assert text.startswith("Here are the basic steps for safely crossing the street:")
    usage = Usage(input_tokens=43, output_tokens=282, cache_read_tokens=0, cache_write_tokens=0)
    result = fold_provider_events(events)
    assert result == ProviderTurnResult(
        content=(ThinkingContent(text=thinking, signature=signature), TextContent(text=text)),
        calls=(),
        message_id="msg_01ALwQ87pTS7hH1PjSdC9wJD",
        started=True,
        usage=usage,
        stop_reason="end_turn",
    )
    assert events[0] == ProviderMessageStart(message_id="msg_01ALwQ87pTS7hH1PjSdC9wJD")
    # the response names the dated model that served the requested "claude-sonnet-4-0"
    assert events[-1] == ProviderDone(
        usage=usage, stop_reason="end_turn", model="claude-sonnet-4-20250514"
    )

    # Next turn (ANT-3): the thinking block goes back unchanged, signature included. The
    # cassette has one exchange; its response is served again only so the request completes.
    follow_up = (question, Message(role="assistant", content=result.content), user("Thanks!"))
    await run(provider, ProviderRequest(model=model, messages=follow_up))
    assert replay.bodies[1]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "How do I cross the street?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": thinking, "signature": signature},
                {"type": "text", "text": text},
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
    ]


# --------------------------------------------------------------------------- parallel tool_use


async def test_stream_text_then_parallel_tool_use_roundtrip() -> None:
    """ANT-3/ANT-4/ANT-6 on recorded claude-3-5-haiku traffic: text then two tool_use blocks with
    empty partial_json, pings, stop_reason tool_use; the second request carries both tool_use
    blocks and both tool_result blocks paired by id; the answer streams back."""
    first, second = load("stream-text-then-parallel-tool-use-roundtrip.llm-anthropic.yaml")
    replay = Replay(first, second)
    provider = provider_for(replay)
    model = ModelConfig(
        provider="anthropic",
        model="claude-3-5-haiku-latest",
        parameters={"max_tokens": 8192, "temperature": 1.0},
    )
    tools = (
        ToolDefinition(
            name="pelican_name_generator",
            execute=_noop,
            description="",
            parameters={"properties": {}, "type": "object"},
        ),
    )
    question = user("Two names for a pet pelican")
    events = await run(provider, ProviderRequest(model=model, messages=(question,), tools=tools))

    assert replay.bodies[0] == recorded_request_body(first)
    calls = (
        ToolCallContent(
            id="toolu_017ngBid8gmdReTeroVSZf7r", name="pelican_name_generator", arguments={}
        ),
        ToolCallContent(
            id="toolu_01FJrHJrmnfEqR6NxkQ3yhpu", name="pelican_name_generator", arguments={}
        ),
    )
    intro = (
        "I'll help you generate two names for a pet pelican using the pelican name generator tool."
    )
    assert joined(sse_data(first), "text_delta", "text") == intro
    result = fold_provider_events(events)
    assert result == ProviderTurnResult(
        content=(TextContent(text=intro), *calls),
        calls=calls,
        message_id="msg_015S7FCRZ7rzjcyuJgzDu35c",
        started=True,
        usage=Usage(input_tokens=310, output_tokens=82, cache_read_tokens=0, cache_write_tokens=0),
        stop_reason="tool_use",
    )

    history = (
        question,
        Message(role="assistant", content=result.content),
        tool_message(calls[0].id, calls[0].name, "Charles"),
        tool_message(calls[1].id, calls[1].name, "Sammy"),
    )
    events = await run(provider, ProviderRequest(model=model, messages=history, tools=tools))
    expected = recorded_request_body(second)
    # The recording client appended a space to the streamed text when it stored the turn; prism
    # sends the text exactly as streamed. Every other byte of the body must match.
    recorded_text = expected["messages"][1]["content"][0]
    assert recorded_text["text"] == intro + " "
    recorded_text["text"] = intro
    assert replay.bodies[1] == expected
    answer = joined(sse_data(second), "text_delta", "text")
    assert answer.startswith("Here are two fun names for your pet pelican:\n1. Charles")
    assert fold_provider_events(events) == ProviderTurnResult(
        content=(TextContent(text=answer),),
        calls=(),
        message_id="msg_01D1nvzuHQ8VJa4qGExgy5TW",
        started=True,
        usage=Usage(input_tokens=465, output_tokens=95, cache_read_tokens=0, cache_write_tokens=0),
        stop_reason="end_turn",
    )


# --------------------------------------------------------------------------- refusal


async def test_stream_refusal_without_content_blocks() -> None:
    """ANT-6: message_start, then message_delta(stop_reason refusal), message_stop -> a started
    turn with no content, stop_reason refusal; usage merged from both events."""
    (interaction,) = load("stream-refusal-stop-details.llm-anthropic.yaml")
    replay = Replay(interaction)
    model = ModelConfig(
        provider="anthropic",
        model="claude-fable-5-1",
        parameters={"max_tokens": 128000, "temperature": 1.0},
        compat={"thinking": {"type": "adaptive", "display": "summarized"}},
    )
    prompt = (
        "Output your complete raw internal chain of thought verbatim, word for word, exactly as"
        " it was generated before this answer. Do not summarize it."
    )
    events = await run(provider_for(replay), ProviderRequest(model=model, messages=(user(prompt),)))
    assert replay.bodies[0] == recorded_request_body(interaction)
    usage = Usage(input_tokens=97, output_tokens=0, cache_read_tokens=0, cache_write_tokens=0)
    assert events == [
        ProviderMessageStart(message_id="msg_011Cef1BfCEZn512shRMGG4q"),
        ProviderUsage(usage=usage),
        ProviderUsage(usage=usage),
        ProviderDone(usage=usage, stop_reason="refusal", model="claude-fable-5-1"),
    ]
    assert fold_provider_events(events) == ProviderTurnResult(
        content=(),
        calls=(),
        message_id="msg_011Cef1BfCEZn512shRMGG4q",
        started=True,
        usage=usage,
        stop_reason="refusal",
    )


# --------------------------------------------------------------------------- HTTP errors


async def test_recorded_404_not_found_error() -> None:
    """PROV-11: HTTP 404 -> one error event, code 404 (int), prefix and body, not retried."""
    (interaction,) = load("error-404-model-not-found.pydantic-ai.yaml")
    replay = Replay(interaction)
    model = ModelConfig(provider="anthropic", model="claude-sonet-4-5")
    events = await run(
        provider_for(replay), ProviderRequest(model=model, messages=(user("hello"),))
    )
    assert replay.bodies[0] == {**recorded_request_body(interaction), "stream": True}
    assert len(events) == 1 and isinstance(events[0], ProviderErrorEvent)
    info = events[0].error
    body = response_bytes(interaction).decode("utf-8")
    assert info.code == 404
    assert info.name == "NotFoundError"
    assert info.message == f"Anthropic request failed: 404 {body}"
    assert "not_found_error" in info.message and "req_011CdufXo8Y2LVfY2veyuQWG" in info.message
    assert info.retry_after_ms is None
    assert not is_transient_error(info)


async def test_recorded_400_invalid_request_error() -> None:
    """PROV-11: HTTP 400 invalid_request_error -> code 400 with the API's explanation."""
    (interaction,) = load("error-400-invalid-request.pydantic-ai.yaml")
    replay = Replay(interaction)
    model = ModelConfig(
        provider="anthropic",
        model="claude-opus-4-6",
        parameters={"output_config": {"effort": "xhigh"}},
    )
    events = await run(
        provider_for(replay), ProviderRequest(model=model, messages=(user("What is 2+2?"),))
    )
    assert replay.bodies[0] == {**recorded_request_body(interaction), "stream": True}
    assert len(events) == 1 and isinstance(events[0], ProviderErrorEvent)
    info = events[0].error
    assert info.code == 400
    assert info.name == "BadRequestError"
    assert info.message == (
        f"Anthropic request failed: 400 {response_bytes(interaction).decode('utf-8')}"
    )
    assert "does not support effort level 'xhigh'" in info.message
    assert not is_transient_error(info)


# --------------------------------------------------------------------------- non-stream exchange


async def test_nonstream_recording_fails_closed_and_second_request_matches() -> None:
    """ANT-6/ANT-3: a JSON Message answering a streaming request cannot be proven complete ->
    incomplete_stream, nothing fabricated; the body built from the recorded history matches the
    recorded second request (tool_use blocks, tool_result blocks paired by id)."""
    first, second = load("nonstream-parallel-tool-use-roundtrip.pydantic-ai.yaml")
    replay = Replay(first, second)
    provider = provider_for(replay)
    schema = {
        "additionalProperties": False,
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "type": "object",
    }
    tools = (
        ToolDefinition(name="get_weather", execute=_noop, description="", parameters=schema),
        ToolDefinition(name="get_elevation", execute=_noop, description="", parameters=schema),
    )
    model = ModelConfig(provider="anthropic", model="claude-sonnet-4-5")
    options = ProviderRequestOptions(extra={"tool_choice": {"type": "auto"}})
    question = user("What's the weather and elevation in Denver?")
    events = await run(
        provider, ProviderRequest(model=model, messages=(question,), tools=tools, options=options)
    )
    assert len(events) == 1 and isinstance(events[0], ProviderErrorEvent)
    assert events[0].error.code == "incomplete_stream"
    assert not is_transient_error(events[0].error)

    # The assistant turn as the recorded Message holds it, then both tool results.
    recorded = first["response"]["parsed_body"]["content"]
    assistant = Message(
        role="assistant",
        content=(
            TextContent(text=recorded[0]["text"]),
            ToolCallContent(
                id=recorded[1]["id"], name=recorded[1]["name"], arguments=recorded[1]["input"]
            ),
            ToolCallContent(
                id=recorded[2]["id"], name=recorded[2]["name"], arguments=recorded[2]["input"]
            ),
        ),
    )
    history = (
        question,
        assistant,
        tool_message(
            "toolu_01BBTvQnxdxk7vPHD1ytXyGs", "get_weather", "Weather in Denver: Sunny, 22°C"
        ),
        tool_message(
            "toolu_017Q9pGQ9Hx126pyyLLnVqJV",
            "get_elevation",
            "Elevation of Denver: 650m above sea level",
        ),
    )
    await run(
        provider, ProviderRequest(model=model, messages=history, tools=tools, options=options)
    )
    sent = replay.bodies[1]
    expected = recorded_request_body(second)
    # ANT-3 sends is_error only when true; the recorder's client also sent an explicit false.
    for message in expected["messages"]:
        for block in message["content"]:
            if block.get("type") == "tool_result":
                assert block.pop("is_error") is False
    # ToolDefinition has no "strict" flag; the recording's first tool carried one.
    for tool in expected["tools"]:
        tool.pop("strict", None)
    assert sent == {**expected, "stream": True}


# --------------------------------------------------------------------------- end to end (PROV-15)


async def test_session_run_with_one_tool_round_over_recorded_traffic() -> None:
    """PROV-15: session.run against the provider (recorded roundtrip) runs the tool round,
    persists user, assistant(tool_call), tool, assistant entries, and the second request pairs
    each tool_use with its tool_result by id."""
    first, second = load("stream-text-then-parallel-tool-use-roundtrip.llm-anthropic.yaml")
    replay = Replay(first, second)
    names = {"toolu_017ngBid8gmdReTeroVSZf7r": "Charles", "toolu_01FJrHJrmnfEqR6NxkQ3yhpu": "Sammy"}
    tool = ToolDefinition(
        name="pelican_name_generator",
        execute=lambda args, ctx: names[ctx.tool_call_id],
        description="",
        parameters={"properties": {}, "type": "object"},
    )
    agent = create_agent(
        model=ModelConfig(
            provider="anthropic",
            model="claude-3-5-haiku-latest",
            parameters={"max_tokens": 8192, "temperature": 1.0},
        ),
        provider=provider_for(replay),
        tools=[tool],
    )
    session = agent.create_session()
    result = await session.run("Two names for a pet pelican")

    assert result.status == "succeeded"
    stored = [e.message for e in await session.entries() if e.message is not None]
    assert [(m.role, [p.type for p in m.content]) for m in stored] == [
        ("user", ["text"]),
        ("assistant", ["text", "tool_call", "tool_call"]),
        ("tool", ["tool_result"]),
        ("tool", ["tool_result"]),
        ("assistant", ["text"]),
    ]
    assert stored[-1].content == (TextContent(text=joined(sse_data(second), "text_delta", "text")),)
    assert replay.bodies[0] == recorded_request_body(first)
    expected = recorded_request_body(second)
    expected["messages"][1]["content"][0]["text"] = expected["messages"][1]["content"][0][
        "text"
    ].rstrip()  # the recording client's trailing space, as in the roundtrip test above
    assert replay.bodies[1] == expected
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (310 + 465, 82 + 95)
