"""Anthropic Messages provider: factory, request mapping, stream mapping, failures, abort.

Every test drives the real ``anthropic.AsyncAnthropic`` code path: the SDK client gets an
``AsyncClient`` whose transport is a ``MockTransport`` (PROV-0, PROV-8), so nothing reaches the
network. The SDK 2.x line is built on ``httpx2`` and rejects ``httpx`` objects, so the HTTP
module is taken from the SDK itself (the package of the ``AsyncClient`` that
``anthropic.DefaultAsyncHttpxClient`` extends): ``httpx2`` for SDK 2.x,
``httpx`` for older SDKs.

Stream bodies in this module are synthetic (hand-written SSE in the documented Messages
shape); recorded traffic is replayed in ``test_anthropic_fixtures.py``.
"""

from __future__ import annotations

import asyncio
import email.utils
import importlib
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anthropic
import pytest

from prism.abort import AbortController
from prism.errors import AbortError, PrismConfigError
from prism.providers.anthropic import AnthropicProvider, create_anthropic_provider
from prism.providers.base import EMPTY_TOOL_RESULT_TEXT, fold_provider_events
from prism.retry import is_transient_error
from prism.types import (
    ErrorInfo,
    ImageContent,
    Message,
    ModelCapabilities,
    ModelConfig,
    ModelLimits,
    ProviderContentDelta,
    ProviderDone,
    ProviderErrorEvent,
    ProviderEvent,
    ProviderMessageStart,
    ProviderRequest,
    ProviderRequestOptions,
    ProviderToolCall,
    ProviderToolCallDelta,
    ProviderUsage,
    StructuredOutputOptions,
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
KEY = "sk-ant-test-0123456789"
URL = "https://api.anthropic.com/v1/messages"


@pytest.fixture(autouse=True)
def _no_sdk_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK reads a few variables when a client is built; keep tests independent of them."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_CUSTOM_HEADERS"):
        monkeypatch.delenv(name, raising=False)


# --------------------------------------------------------------------------- helpers


def sse(*events: Mapping[str, Any]) -> bytes:
    """Serialise stream events the way the Messages API frames them."""
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def message_start(id: str = "msg_1", usage: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": id,
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": dict(usage or {"input_tokens": 10, "output_tokens": 1}),
        },
    }


def block_start(index: int, block: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": dict(block)}


def block_delta(index: int, delta: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": dict(delta)}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(
    stop_reason: str | None, usage: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": dict(usage or {"output_tokens": 5}),
    }


MESSAGE_STOP: dict[str, Any] = {"type": "message_stop"}


def text_stream(text: str = "Hello", stop: str = "end_turn") -> bytes:
    return sse(
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        block_delta(0, {"type": "text_delta", "text": text}),
        block_stop(0),
        message_delta(stop),
        MESSAGE_STOP,
    )


class Server:
    """A ``MockTransport`` handler replaying queued responses and recording requests."""

    def __init__(self, *responses: Any) -> None:
        self.responses = list(responses)
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        item = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        if isinstance(item, BaseException):
            raise item
        if callable(item):
            return item(request)
        return item

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


def stream_response(body: bytes, status: int = 200) -> Any:
    return HTTP.Response(status, headers={"content-type": "text/event-stream"}, content=body)


def json_response(status: int, body: Any, headers: Mapping[str, str] | None = None) -> Any:
    return HTTP.Response(status, headers=dict(headers or {}), json=body)


def http_client(handler: Callable[[Any], Any]) -> Any:
    return HTTP.AsyncClient(transport=HTTP.MockTransport(handler))


def make_provider(server: Callable[[Any], Any], **kwargs: Any) -> AnthropicProvider:
    kwargs.setdefault("api_key", KEY)
    return create_anthropic_provider(http_client=http_client(server), **kwargs)


def make_request(
    messages: tuple[Message, ...] | None = None,
    *,
    model: ModelConfig | None = None,
    **kwargs: Any,
) -> ProviderRequest:
    return ProviderRequest(
        model=model or ModelConfig(provider="anthropic", model="claude-test"),
        messages=messages or (Message(role="user", content=(TextContent(text="hi"),)),),
        **kwargs,
    )


async def collect(provider: AnthropicProvider, request: ProviderRequest) -> list[ProviderEvent]:
    return [event async for event in provider.generate(request)]


def only_error(events: list[ProviderEvent]) -> ErrorInfo:
    assert isinstance(events[-1], ProviderErrorEvent), events
    assert sum(isinstance(e, (ProviderErrorEvent, ProviderDone)) for e in events) == 1
    return events[-1].error


# --------------------------------------------------------------------------- factory (ANT-1)


def test_factory_builds_sdk_client_with_retries_off_and_explicit_timeout() -> None:
    """PROV-0/PROV-8/ARCH-5: max_retries=0, Timeout(600, connect=10), base_url as given."""
    provider = make_provider(Server(stream_response(text_stream())))
    client = provider._client
    assert isinstance(client, anthropic.AsyncAnthropic)
    assert client.max_retries == 0
    assert client.timeout == anthropic.Timeout(600.0, connect=10.0)
    assert str(client.base_url) == "https://api.anthropic.com/v1/"
    assert provider.id == "anthropic"


async def test_requests_go_to_base_url_messages_with_provider_owned_headers() -> None:
    """ANT-1: POST <base_url>/messages; x-api-key and anthropic-version are sent."""
    server = Server(stream_response(text_stream()))
    provider = make_provider(server, base_url="https://gateway.example/anthropic/v1")
    await collect(provider, make_request())
    sent = server.requests[0]
    assert sent.method == "POST"
    assert str(sent.url) == "https://gateway.example/anthropic/v1/messages"
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["content-type"] == "application/json"
    assert "authorization" not in sent.headers  # one credential on the wire


async def test_env_key_is_read_when_the_factory_is_called(monkeypatch: pytest.MonkeyPatch) -> None:
    """ANT-1/ARCH-8: ANTHROPIC_API_KEY is read at factory time only, then handled as given."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    server = Server(
        json_response(
            401,
            {
                "type": "error",
                "error": {"type": "authentication_error", "message": "bad key sk-ant-from-env"},
            },
        )
    )
    provider = create_anthropic_provider(http_client=http_client(server))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-changed-later")
    info = only_error(await collect(provider, make_request()))
    assert server.requests[0].headers["x-api-key"] == "sk-ant-from-env"
    assert "sk-ant-from-env" not in info.message  # PROV-9: an env key is redacted too
    assert "[REDACTED]" in info.message


def test_missing_key_raises_config_error_naming_api_key_and_env() -> None:
    """ANT-1: no api_key, no client, no ANTHROPIC_API_KEY -> PrismConfigError."""
    with pytest.raises(PrismConfigError) as err:
        create_anthropic_provider()
    assert "api_key" in str(err.value) and "ANTHROPIC_API_KEY" in str(err.value)
    assert err.value.code == "ERR_PRISM_CONFIG"


def test_empty_env_key_counts_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """ANT-1: an empty ANTHROPIC_API_KEY is treated as unset."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    with pytest.raises(PrismConfigError):
        create_anthropic_provider()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"api_key": ""},
        {"api_key": 42},
        {"api_key": KEY, "default_max_tokens": 0},
        {"api_key": KEY, "default_max_tokens": True},
        {"api_key": KEY, "id": ""},
        {"api_key": KEY, "base_url": ""},
        {"api_key": KEY, "anthropic_version": ""},
    ],
)
def test_invalid_factory_arguments_raise_config_error(kwargs: dict[str, Any]) -> None:
    """ARCH-9: invalid option values raise PrismConfigError at the factory."""
    with pytest.raises(PrismConfigError):
        create_anthropic_provider(**kwargs)


def test_client_together_with_http_client_is_rejected() -> None:
    """PROV-0: http_client only applies to the client the factory builds."""
    client = anthropic.AsyncAnthropic(api_key=KEY, http_client=http_client(Server()))
    with pytest.raises(PrismConfigError):
        create_anthropic_provider(client=client, http_client=http_client(Server()))


def test_sdk_rejecting_an_argument_becomes_config_error() -> None:
    """PROV-0: an http_client the SDK cannot use is reported as PrismConfigError."""
    with pytest.raises(PrismConfigError, match="anthropic SDK rejected"):
        create_anthropic_provider(api_key=KEY, http_client=object())


async def test_host_client_keeps_its_base_url_and_its_key_is_redacted() -> None:
    """PROV-0/PROV-9: a host-built client is used as is (SDK path /v1/messages); its own key
    is still removed from error messages."""
    server = Server(
        json_response(
            401,
            {
                "type": "error",
                "error": {
                    "type": "authentication_error",
                    "message": "invalid x-api-key host-secret-key",
                },
            },
        )
    )
    client = anthropic.AsyncAnthropic(
        api_key="host-secret-key",
        base_url="https://proxy.example",
        http_client=http_client(server),
        max_retries=0,
    )
    provider = create_anthropic_provider(client=client, id="claude")
    info = only_error(await collect(provider, make_request()))
    assert str(server.requests[0].url) == "https://proxy.example/v1/messages"
    assert provider.id == "claude"
    assert info.code == 401
    assert "host-secret-key" not in info.message and "[REDACTED]" in info.message


async def test_api_key_given_with_a_host_client_replaces_its_credential() -> None:
    """PROV-9: api_key= with client= is sent as x-api-key, the client's bearer header dropped."""
    server = Server(stream_response(text_stream()))
    client = anthropic.AsyncAnthropic(
        api_key="host-secret-key", http_client=http_client(server), max_retries=0
    )
    await collect(create_anthropic_provider(client=client, api_key=KEY), make_request())
    headers = server.requests[0].headers
    assert headers["x-api-key"] == KEY
    assert "authorization" not in headers


def test_missing_sdk_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """ARCH-5: without the SDK the factory raises ImportError naming the extra."""
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ImportError, match=r"prism-runtime\[anthropic\]"):
        create_anthropic_provider(api_key=KEY)


def test_importing_the_module_does_not_import_the_sdk() -> None:
    """ARCH-5/ARCH-8: the SDK is imported when a provider is created, not at import."""
    code = (
        "import sys, prism.providers.anthropic as m; "
        "print('anthropic' in sys.modules, callable(m.create_anthropic_provider))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["False", "True"]


# --------------------------------------------------------------------------- headers, keys (PROV-9)


async def test_host_headers_come_first_and_cannot_override_owned_ones() -> None:
    """ANT-1: options.headers, then content-type, x-api-key, anthropic-version (not overridable)."""
    server = Server(stream_response(text_stream()))
    provider = make_provider(server, anthropic_version="2024-01-01")
    options = ProviderRequestOptions(
        headers={
            "x-trace-id": "t-1",
            "X-Api-Key": "stolen",
            "Anthropic-Version": "1999-01-01",
            "Content-Type": "text/plain",
            "Authorization": "Bearer other",
        }
    )
    await collect(provider, make_request(options=options))
    headers = server.requests[0].headers
    assert headers["x-trace-id"] == "t-1"
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == "2024-01-01"
    assert headers["content-type"] == "application/json"
    assert "authorization" not in headers


async def test_callable_keys_sync_and_async_are_resolved_on_each_request() -> None:
    """PROV-9: the key callable runs per request; each resolved key is redacted."""
    calls: list[str] = []

    def sync_key() -> str:
        calls.append("sync")
        return f"sk-sync-{len(calls)}"

    server = Server(
        stream_response(text_stream()),
        json_response(
            400,
            {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "echo sk-sync-2"},
            },
        ),
    )
    provider = make_provider(server, api_key=sync_key)
    await collect(provider, make_request())
    info = only_error(await collect(provider, make_request()))
    assert [r.headers["x-api-key"] for r in server.requests] == ["sk-sync-1", "sk-sync-2"]
    assert "sk-sync-2" not in info.message and "[REDACTED]" in info.message

    async def async_key() -> str:
        return "sk-async"

    server2 = Server(stream_response(text_stream()))
    await collect(make_provider(server2, api_key=async_key), make_request())
    assert server2.requests[0].headers["x-api-key"] == "sk-async"


async def test_callable_key_returning_nothing_raises_config_error() -> None:
    """PROV-9: a key callable must return a non-empty string."""
    server = Server(stream_response(text_stream()))
    provider = make_provider(server, api_key=lambda: "")
    with pytest.raises(PrismConfigError):
        await collect(provider, make_request())
    assert server.requests == []


# --------------------------------------------------------------------------- body (ANT-2, ANT-3)


def _history() -> tuple[Message, ...]:
    return (
        Message(role="system", content=(TextContent(text="You are terse."),)),
        Message(role="system", content=(TextContent(text="Context:\nfacts"),)),
        Message(
            role="user",
            content=(
                TextContent(text="Look at these"),
                ImageContent(mime_type="image/png", data="aGVsbG8="),
                ImageContent(url="https://example.com/cat.jpg"),
            ),
        ),
        Message(
            role="assistant",
            content=(
                ThinkingContent(text="plan", signature="sig-1"),
                ThinkingContent(text="", redacted_data="opaque=="),
                ThinkingContent(text="unsigned thoughts"),
                TextContent(text="Checking."),
                ToolCallContent(id="toolu_1", name="lookup", arguments={"q": "x"}),
                ToolCallContent(id="toolu_2", name="lookup", arguments={}),
                ToolCallContent(
                    id="srv_1", name="web_search", arguments={}, authority="provider-hosted"
                ),
            ),
        ),
        Message(
            role="tool",
            content=(ToolResultContent(tool_call_id="toolu_1", name="lookup", result={"n": 1}),),
        ),
        Message(
            role="tool",
            content=(
                ToolResultContent(
                    tool_call_id="toolu_2",
                    name="lookup",
                    error=ErrorInfo(message="boom", code="tool_failed"),
                ),
            ),
        ),
        Message(role="user", content=(TextContent(text="and?"),)),
        Message(
            role="assistant",
            content=(ToolCallContent(id="toolu_3", name="noop", arguments={}),),
        ),
        Message(
            role="tool",
            content=(ToolResultContent(tool_call_id="toolu_3", name="noop"),),
        ),
        Message(
            role="tool",
            content=(ToolResultContent(tool_call_id="toolu_4", name="echo", result="plain text"),),
        ),
    )


async def test_request_body_snapshot_for_a_full_history() -> None:
    """PROV-14 snapshot (ANT-2/ANT-3/PROV-13): system text, user image, assistant thinking and
    tool calls, tool results (incl. the empty-output constant and an error), merging."""
    server = Server(stream_response(text_stream()))
    model = ModelConfig(
        provider="anthropic",
        model="claude-sonnet-4-5",
        capabilities=ModelCapabilities(input=("text", "image")),
        parameters={"temperature": 0.2, "max_tokens": 1024},
        compat={"thinking": {"type": "enabled", "budget_tokens": 2048}},
    )
    tools = (
        ToolDefinition(
            name="lookup",
            execute=lambda args, ctx: None,
            description="Find things",
            parameters={"type": "object", "properties": {"q": {"type": "string"}}},
        ),
        ToolDefinition(name="noop", execute=lambda args, ctx: None),
    )
    options = ProviderRequestOptions(extra={"metadata": {"user_id": "u-1"}})
    request = make_request(_history(), model=model, tools=tools, options=options)
    await collect(make_provider(server), request)
    assert server.bodies[0] == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "stream": True,
        "system": "You are terse.\n\nContext:\nfacts",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look at these"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="},
                    },
                    {
                        "type": "image",
                        "source": {"type": "url", "url": "https://example.com/cat.jpg"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "plan", "signature": "sig-1"},
                    {"type": "redacted_thinking", "data": "opaque=="},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "lookup", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"n":1}'},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": '{"error": {"message": "boom", "code": "tool_failed"}}',
                        "is_error": True,
                    },
                    {"type": "text", "text": "and?"},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_3", "name": "noop", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_3",
                        "content": EMPTY_TOOL_RESULT_TEXT,
                    },
                    {"type": "tool_result", "tool_use_id": "toolu_4", "content": "plain text"},
                ],
            },
        ],
        "tools": [
            {
                "name": "lookup",
                "description": "Find things",
                "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
            },
            {"name": "noop", "input_schema": {"type": "object"}},
        ],
        "temperature": 0.2,
        "metadata": {"user_id": "u-1"},
        "thinking": {"type": "enabled", "budget_tokens": 2048},
    }


async def test_tool_results_come_first_in_a_merged_user_message() -> None:
    """ANT-3: a user message merged with following tool results puts tool_result blocks first."""
    server = Server(stream_response(text_stream()))
    messages = (
        Message(role="assistant", content=(ToolCallContent(id="t1", name="f", arguments={}),)),
        Message(role="user", content=(TextContent(text="interjection"),)),
        Message(role="tool", content=(ToolResultContent(tool_call_id="t1", name="f", result="r"),)),
    )
    await collect(make_provider(server), make_request(messages))
    assert server.bodies[0]["messages"][1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "r"},
            {"type": "text", "text": "interjection"},
        ],
    }


async def test_messages_with_empty_mapped_content_are_dropped_before_merging() -> None:
    """ANT-3: an assistant turn holding only unsigned thinking is dropped; the users around it
    merge into one message; empty system text adds no system key."""
    server = Server(stream_response(text_stream()))
    messages = (
        Message(role="system", content=(TextContent(text=""),)),
        Message(role="user", content=(TextContent(text="one"),)),
        Message(role="assistant", content=(ThinkingContent(text="unsigned"),)),
        Message(role="user", content=(TextContent(text="two"),)),
    )
    await collect(make_provider(server), make_request(messages))
    body = server.bodies[0]
    assert "system" not in body
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        }
    ]


@pytest.mark.parametrize("where", ["options", "model"])
async def test_preserve_thinking_false_drops_signed_thinking(where: str) -> None:
    """ANT-3: compat["preserve_thinking"] is False (options, else model) drops thinking blocks."""
    server = Server(stream_response(text_stream()))
    compat = {"preserve_thinking": False}
    model = ModelConfig(
        provider="anthropic", model="m", compat=compat if where == "model" else None
    )
    options = ProviderRequestOptions(compat=compat) if where == "options" else None
    messages = (
        Message(role="user", content=(TextContent(text="q"),)),
        Message(
            role="assistant",
            content=(
                ThinkingContent(text="t", signature="s"),
                ThinkingContent(text="", redacted_data="r"),
                TextContent(text="a"),
            ),
        ),
    )
    await collect(make_provider(server), make_request(messages, model=model, options=options))
    assert server.bodies[0]["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "a"}],
    }


async def test_max_tokens_precedence_parameters_then_limits_then_default() -> None:
    """ANT-2: parameters["max_tokens"], else limits.max_output_tokens, else default_max_tokens."""
    server = Server(stream_response(text_stream()))
    provider = make_provider(server, default_max_tokens=777)
    limits = ModelLimits(max_output_tokens=333)
    await collect(
        provider,
        make_request(
            model=ModelConfig(
                provider="anthropic", model="m", parameters={"max_tokens": 55}, limits=limits
            )
        ),
    )
    await collect(
        provider, make_request(model=ModelConfig(provider="anthropic", model="m", limits=limits))
    )
    await collect(provider, make_request(model=ModelConfig(provider="anthropic", model="m")))
    assert [b["max_tokens"] for b in server.bodies] == [55, 333, 777]


async def test_thinking_compat_options_win_and_false_disables() -> None:
    """ANT-2: thinking from options.compat, else model.compat; False -> {"type": "disabled"}."""
    server = Server(stream_response(text_stream()))
    provider = make_provider(server)
    model = ModelConfig(
        provider="anthropic",
        model="m",
        compat={"thinking": {"type": "enabled", "budget_tokens": 1024}},
    )
    await collect(provider, make_request(model=model))
    await collect(
        provider,
        make_request(model=model, options=ProviderRequestOptions(compat={"thinking": False})),
    )
    await collect(provider, make_request())
    bodies = server.bodies
    assert bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert bodies[1]["thinking"] == {"type": "disabled"}
    assert "thinking" not in bodies[2]


async def test_invalid_thinking_compat_is_invalid_request_without_http() -> None:
    """ANT-2/PROV-12: a thinking value that is neither a mapping nor False -> invalid_request."""
    server = Server(stream_response(text_stream()))
    model = ModelConfig(provider="anthropic", model="m", compat={"thinking": "yes"})
    info = only_error(await collect(make_provider(server), make_request(model=model)))
    assert info.code == "invalid_request"
    assert server.requests == []
    assert not is_transient_error(info)


async def test_stream_stays_true_even_if_parameters_say_otherwise() -> None:
    """PROV-8: the adapter speaks the streaming protocol only."""
    server = Server(stream_response(text_stream()))
    model = ModelConfig(provider="anthropic", model="m", parameters={"stream": False})
    await collect(make_provider(server), make_request(model=model))
    assert server.bodies[0]["stream"] is True


@pytest.mark.parametrize(
    "capabilities", [None, ModelCapabilities(input=("text",))], ids=["undeclared", "text-only"]
)
async def test_image_for_a_model_without_image_input_is_invalid_request(
    capabilities: ModelCapabilities | None,
) -> None:
    """PROV-12: an image the model cannot take fails before any HTTP call."""
    server = Server(stream_response(text_stream()))
    model = ModelConfig(provider="anthropic", model="m", capabilities=capabilities)
    messages = (Message(role="user", content=(ImageContent(mime_type="image/png", data="AA=="),)),)
    info = only_error(await collect(make_provider(server), make_request(messages, model=model)))
    assert info.code == "invalid_request"
    assert "image" in info.message
    assert server.requests == []


async def test_structured_output_fails_before_any_http_call() -> None:
    """ANT-2: options.structured_output -> error unsupported_structured_output, no HTTP."""
    server = Server(stream_response(text_stream()))
    options = ProviderRequestOptions(
        structured_output=StructuredOutputOptions(name="out", schema={"type": "object"})
    )
    events = await collect(make_provider(server), make_request(options=options))
    assert len(events) == 1
    info = only_error(events)
    assert info.code == "unsupported_structured_output"
    assert "artifact" in info.message
    assert server.requests == []


async def test_request_body_above_8_mib_fails_with_its_size() -> None:
    """PROV-10(a): a body above 8 MiB ends the attempt before HTTP, message gives the size."""
    server = Server(stream_response(text_stream()))
    big = "x" * (8 * 1024 * 1024)
    info = only_error(
        await collect(
            make_provider(server),
            make_request((Message(role="user", content=(TextContent(text=big),)),)),
        )
    )
    assert info.code == "invalid_request"
    size = len(json.dumps({"x": big}))  # lower bound of the real body size
    assert "bytes" in info.message and any(
        int(tok) >= size for tok in info.message.split() if tok.isdigit()
    )
    assert server.requests == []


async def test_body_that_is_not_json_is_invalid_request() -> None:
    """PROV-12: request serialisation failures -> invalid_request."""
    server = Server(stream_response(text_stream()))
    options = ProviderRequestOptions(extra={"bad": {1, 2}})
    info = only_error(await collect(make_provider(server), make_request(options=options)))
    assert info.code == "invalid_request"
    assert server.requests == []


# --------------------------------------------------------------------------- stream (ANT-4..6)


async def test_text_answer_deltas_usage_and_done() -> None:
    """PROV-14 text answer: message_start, usage, text deltas, usage, done(end_turn)."""
    body = sse(
        message_start(
            "msg_a",
            {
                "input_tokens": 12,
                "output_tokens": 1,
                "cache_read_input_tokens": 4,
                "cache_creation_input_tokens": 3,
            },
        ),
        block_start(0, {"type": "text", "text": ""}),
        {"type": "ping"},
        block_delta(0, {"type": "text_delta", "text": "Hel"}),
        block_delta(0, {"type": "text_delta", "text": "lo"}),
        block_stop(0),
        message_delta("end_turn", {"output_tokens": 9}),
        MESSAGE_STOP,
    )
    events = await collect(make_provider(Server(stream_response(body))), make_request())
    first_usage = Usage(input_tokens=12, output_tokens=1, cache_read_tokens=4, cache_write_tokens=3)
    final_usage = Usage(input_tokens=12, output_tokens=9, cache_read_tokens=4, cache_write_tokens=3)
    assert events == [
        ProviderMessageStart(message_id="msg_a"),
        ProviderUsage(usage=first_usage),
        ProviderContentDelta(content=TextContent(text="Hel")),
        ProviderContentDelta(content=TextContent(text="lo")),
        ProviderUsage(usage=final_usage),
        ProviderDone(usage=final_usage, stop_reason="end_turn", model="claude-test"),
    ]
    assert final_usage.total_tokens is None  # ANT-5: left to the accumulator


async def test_streamed_tool_call_fragments_then_final_call() -> None:
    """PROV-14 streamed tool call (ANT-4/ANT-6): tool_call_delta fragments keyed by index, then
    one final tool_call per block, then done(tool_use); folding gives each call once."""
    body = sse(
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        block_delta(0, {"type": "text_delta", "text": "Let me look."}),
        block_stop(0),
        block_start(1, {"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": {}}),
        block_delta(1, {"type": "input_json_delta", "partial_json": ""}),
        block_delta(1, {"type": "input_json_delta", "partial_json": '{"q": "pel'}),
        block_delta(1, {"type": "input_json_delta", "partial_json": 'ican"}'}),
        block_stop(1),
        block_start(2, {"type": "tool_use", "id": "toolu_b", "name": "count", "input": {}}),
        block_delta(2, {"type": "input_json_delta", "partial_json": '{"n": 2}'}),
        block_stop(2),
        message_delta("tool_use"),
        MESSAGE_STOP,
    )
    events = await collect(make_provider(Server(stream_response(body))), make_request())
    deltas = [e for e in events if isinstance(e, ProviderToolCallDelta)]
    assert deltas == [
        ProviderToolCallDelta(index=1, id="toolu_a", name="lookup"),
        ProviderToolCallDelta(index=1, arguments_text='{"q": "pel'),
        ProviderToolCallDelta(index=1, arguments_text='ican"}'),
        ProviderToolCallDelta(index=2, id="toolu_b", name="count"),
        ProviderToolCallDelta(index=2, arguments_text='{"n": 2}'),
    ]
    calls = [
        ToolCallContent(id="toolu_a", name="lookup", arguments={"q": "pelican"}),
        ToolCallContent(id="toolu_b", name="count", arguments={"n": 2}),
    ]
    assert [e for e in events if isinstance(e, ProviderToolCall)] == [
        ProviderToolCall(call=c) for c in calls
    ]
    assert events[-1] == ProviderDone(
        usage=Usage(input_tokens=10, output_tokens=5), stop_reason="tool_use", model="claude-test"
    )
    result = fold_provider_events(events)
    assert result.content == (TextContent(text="Let me look."), *calls)
    assert result.calls == tuple(calls)


async def test_malformed_tool_json_gives_arguments_error_not_an_exception() -> None:
    """PROV-14/PROV-6: invalid argument JSON -> a call with arguments_error, stream still done."""
    body = sse(
        message_start(),
        block_start(0, {"type": "tool_use", "id": "toolu_x", "name": "lookup", "input": {}}),
        block_delta(0, {"type": "input_json_delta", "partial_json": '{"q": '}),
        block_stop(0),
        message_delta("tool_use"),
        MESSAGE_STOP,
    )
    events = await collect(make_provider(Server(stream_response(body))), make_request())
    call = next(e.call for e in events if isinstance(e, ProviderToolCall))
    assert call.arguments == {}
    assert call.arguments_error is not None
    assert call.arguments_error.code == "invalid_json_arguments"
    assert isinstance(events[-1], ProviderDone)


async def test_thinking_with_signature_and_redacted_thinking() -> None:
    """PROV-14 thinking (ANT-4, CON-18): thinking deltas then a signature delta close one part;
    redacted_thinking is a part of its own carrying its data unchanged."""
    body = sse(
        message_start(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        block_delta(0, {"type": "thinking_delta", "thinking": "Step one. "}),
        block_delta(0, {"type": "thinking_delta", "thinking": "Step two."}),
        block_delta(0, {"type": "signature_delta", "signature": "Sig/AAA=="}),
        block_stop(0),
        block_start(1, {"type": "redacted_thinking", "data": "EnCrYpTeD=="}),
        block_stop(1),
        block_start(2, {"type": "text", "text": ""}),
        block_delta(2, {"type": "text_delta", "text": "Answer."}),
        block_stop(2),
        message_delta("end_turn"),
        MESSAGE_STOP,
    )
    events = await collect(make_provider(Server(stream_response(body))), make_request())
    assert [e.content for e in events if isinstance(e, ProviderContentDelta)] == [
        ThinkingContent(text="Step one. "),
        ThinkingContent(text="Step two."),
        ThinkingContent(text="", signature="Sig/AAA=="),
        ThinkingContent(text="", redacted_data="EnCrYpTeD=="),
        TextContent(text="Answer."),
    ]
    assert fold_provider_events(events).content == (
        ThinkingContent(text="Step one. Step two.", signature="Sig/AAA=="),
        ThinkingContent(text="", redacted_data="EnCrYpTeD=="),
        TextContent(text="Answer."),
    )


async def test_signature_given_only_at_block_start_still_closes_the_part() -> None:
    """ANT-4/CON-18: a signature present on content_block_start is emitted at block stop."""
    body = sse(
        message_start(),
        block_start(0, {"type": "thinking", "thinking": "Whole thought.", "signature": "S1"}),
        block_stop(0),
        message_delta("end_turn"),
        MESSAGE_STOP,
    )
    events = await collect(make_provider(Server(stream_response(body))), make_request())
    assert fold_provider_events(events).content == (
        ThinkingContent(text="Whole thought.", signature="S1"),
    )
    # A signature_delta supersedes the start signature: exactly one signature is emitted.
    body = sse(
        message_start(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": "S0"}),
        block_delta(0, {"type": "thinking_delta", "thinking": "T"}),
        block_delta(0, {"type": "signature_delta", "signature": "S1"}),
        block_stop(0),
        message_delta("end_turn"),
        MESSAGE_STOP,
    )
    events = await collect(make_provider(Server(stream_response(body))), make_request())
    signatures = [
        e.content.signature
        for e in events
        if isinstance(e, ProviderContentDelta)
        and isinstance(e.content, ThinkingContent)
        and e.content.signature
    ]
    assert signatures == ["S1"]


async def test_truncated_stream_fails_closed_with_incomplete_stream() -> None:
    """PROV-14/ANT-6/PROV-2: no message_stop -> error incomplete_stream, never done."""
    body = sse(
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        block_delta(0, {"type": "text_delta", "text": "partial"}),
    )
    events = await collect(make_provider(Server(stream_response(body))), make_request())
    info = only_error(events)
    assert info.code == "incomplete_stream"
    assert not any(isinstance(e, ProviderDone) for e in events)
    assert not is_transient_error(info)


@pytest.mark.parametrize(
    ("start", "stop", "why"),
    [
        ({"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}, False, "never completed"),
        ({"type": "tool_use", "id": "", "name": "f", "input": {}}, True, "no id"),
        ({"type": "tool_use", "id": "toolu_1", "name": "", "input": {}}, True, "no name"),
    ],
)
async def test_incomplete_tool_blocks_fail_closed(
    start: dict[str, Any], stop: bool, why: str
) -> None:
    """ANT-6: a tool block lacking id/name or never completed -> incomplete_stream."""
    events_in: list[dict[str, Any]] = [
        message_start(),
        block_start(0, start),
        block_delta(0, {"type": "input_json_delta", "partial_json": "{}"}),
    ]
    if stop:
        events_in.append(block_stop(0))
    events_in += [message_delta("tool_use"), MESSAGE_STOP]
    events = await collect(make_provider(Server(stream_response(sse(*events_in)))), make_request())
    info = only_error(events)
    assert info.code == "incomplete_stream"
    assert why in info.message


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("end_turn", "end_turn"),
        ("tool_use", "tool_use"),
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "stop_sequence"),
        ("refusal", "refusal"),
        ("pause_turn", "pause_turn"),
        ("model_context_window_exceeded", "other"),
        (None, "other"),
    ],
)
async def test_stop_reason_mapping(wire: str | None, expected: str) -> None:
    """ANT-6: known stop reasons map to themselves, anything else to other."""
    events = await collect(
        make_provider(Server(stream_response(text_stream(stop=wire)))),  # type: ignore[arg-type]
        make_request(),
    )
    assert isinstance(events[-1], ProviderDone)
    assert events[-1].stop_reason == expected


async def test_unknown_events_and_blocks_are_ignored_and_nothing_follows_message_stop() -> None:
    """ANT-4/PROV-2: ping, unknown events/blocks are skipped; events after message_stop are not
    mapped and done is the last event."""
    body = sse(
        message_start(),
        {"type": "future_event", "x": 1},
        block_start(
            0, {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}
        ),
        block_delta(0, {"type": "input_json_delta", "partial_json": '{"query": "x"}'}),
        block_stop(0),
        block_start(1, {"type": "text", "text": ""}),
        block_delta(1, {"type": "citations_delta", "citation": {"type": "char_location"}}),
        block_delta(1, {"type": "text_delta", "text": "ok"}),
        block_stop(1),
        message_delta("end_turn"),
        MESSAGE_STOP,
        block_start(2, {"type": "text", "text": ""}),
        block_delta(2, {"type": "text_delta", "text": "late"}),
    )
    events = await collect(make_provider(Server(stream_response(body))), make_request())
    assert fold_provider_events(events).content == (TextContent(text="ok"),)
    assert isinstance(events[-1], ProviderDone)


async def test_invalid_usage_from_the_provider_raises_type_error() -> None:
    """CON-11: a provider usage that breaks the rules fails the turn with TypeError."""
    body = sse(message_start(usage={"input_tokens": -1, "output_tokens": 0}), MESSAGE_STOP)
    with pytest.raises((TypeError, ValueError)):
        await collect(make_provider(Server(stream_response(body))), make_request())


async def test_in_stream_error_event_maps_type_and_message() -> None:
    """ANT-4 (synthetic: no recorded in-stream error exists): event: error -> one error event,
    code = error.type, message = error.message; retryable per RETRY-5."""
    body = sse(message_start()) + (
        b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
        b'"message": "Overloaded"}}\n\n'
    )
    events = await collect(make_provider(Server(stream_response(body))), make_request())
    assert events[0] == ProviderMessageStart(message_id="msg_1")
    info = only_error(events)
    assert info.code == "overloaded_error"
    assert info.message == "Overloaded"
    assert is_transient_error(info)


async def test_in_stream_error_that_is_not_json_is_invalid_stream_chunk() -> None:
    """ANT-4: an error event whose data has no error.type cannot be classified."""
    body = sse(message_start()) + b"event: error\ndata: upstream exploded\n\n"
    info = only_error(await collect(make_provider(Server(stream_response(body))), make_request()))
    assert info.code == "invalid_stream_chunk"


async def test_non_json_data_line_is_invalid_stream_chunk() -> None:
    """A data line that is not JSON ends the attempt with invalid_stream_chunk."""
    body = sse(message_start()) + b"event: content_block_delta\ndata: {not json\n\n"
    info = only_error(await collect(make_provider(Server(stream_response(body))), make_request()))
    assert info.code == "invalid_stream_chunk"
    assert not is_transient_error(info)


async def test_stream_event_above_262144_bytes_overflows() -> None:
    """PROV-10(b): an SDK event whose JSON form exceeds 262 144 bytes -> sse_event_overflow;
    a large event under the bound passes."""
    ok = sse(
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        block_delta(0, {"type": "text_delta", "text": "a" * 200_000}),
        block_stop(0),
        message_delta("end_turn"),
        MESSAGE_STOP,
    )
    events = await collect(make_provider(Server(stream_response(ok))), make_request())
    assert isinstance(events[-1], ProviderDone)
    too_big = sse(
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        block_delta(0, {"type": "text_delta", "text": "\u00e9" * 140_000}),  # 280 000 bytes
    )
    info = only_error(
        await collect(make_provider(Server(stream_response(too_big))), make_request())
    )
    assert info.code == "sse_event_overflow"


# --------------------------------------------------------------------------- HTTP errors (PROV-11)


async def test_http_429_with_retry_after_seconds() -> None:
    """PROV-14/PROV-11: 429 -> code 429 (int), retry_after_ms from Retry-After, prefix, body."""
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    server = Server(json_response(429, body, {"retry-after": "7"}))
    info = only_error(await collect(make_provider(server), make_request()))
    assert info.code == 429
    assert info.retry_after_ms == 7000.0
    assert info.message.startswith("Anthropic request failed: 429 ")
    assert "rate_limit_error" in info.message
    assert is_transient_error(info)
    assert len(server.requests) == 1  # SDK retries are off


async def test_retry_after_http_date_is_converted_and_never_negative() -> None:
    """PROV-11: an HTTP-date Retry-After becomes ms from now, clamped at 0."""
    past = email.utils.formatdate(time.time() - 3600, usegmt=True)
    future = email.utils.formatdate(time.time() + 3600, usegmt=True)
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "x"}}
    server = Server(
        json_response(429, body, {"retry-after": past}),
        json_response(429, body, {"retry-after": future}),
    )
    provider = make_provider(server)
    first = only_error(await collect(provider, make_request()))
    second = only_error(await collect(provider, make_request()))
    assert first.retry_after_ms == 0.0
    assert second.retry_after_ms is not None and second.retry_after_ms > 0


async def test_http_529_overloaded_is_retryable() -> None:
    """PROV-11/RETRY-5: 529 -> code 529, transient."""
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    info = only_error(
        await collect(make_provider(Server(json_response(529, body))), make_request())
    )
    assert info.code == 529
    assert is_transient_error(info)


async def test_http_400_redacts_the_key_from_the_body() -> None:
    """PROV-14/PROV-9: 400 -> code 400, the key echoed in the body is [REDACTED]."""
    body = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": f"key {KEY} is malformed"},
    }
    info = only_error(
        await collect(make_provider(Server(json_response(400, body))), make_request())
    )
    assert info.code == 400
    assert KEY not in info.message
    assert "key [REDACTED] is malformed" in info.message
    assert not is_transient_error(info)


async def test_error_body_is_read_up_to_64_kib() -> None:
    """PROV-10/PROV-11: at most 65 536 bytes of an error body reach the message."""
    server = Server(HTTP.Response(500, content=b"x" * 100_000))
    info = only_error(await collect(make_provider(server), make_request()))
    assert info.code == 500
    assert info.message == "Anthropic request failed: 500 " + "x" * 65_536


# --------------------------------------------------------------------------- transport (PROV-12)


class _FailingStream(HTTP.AsyncByteStream):  # type: ignore[misc, name-defined]
    def __init__(self, first: bytes, error: BaseException) -> None:
        self.first = first
        self.error = error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.first
        raise self.error


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (HTTP.ConnectError("refused"), "ECONNREFUSED"),
        (HTTP.ConnectTimeout("slow connect"), "timeout"),
        (HTTP.ReadTimeout("slow read"), "timeout"),
        (HTTP.RemoteProtocolError("peer closed"), "ECONNRESET"),
    ],
)
async def test_transport_failures_before_the_response(exc: Exception, code: str) -> None:
    """PROV-12: timeout / refused / other transport errors -> timeout, ECONNREFUSED, ECONNRESET."""
    info = only_error(await collect(make_provider(Server(exc)), make_request()))
    assert info.code == code
    assert is_transient_error(info)


@pytest.mark.parametrize(
    ("exc", "code"),
    [(HTTP.ReadError("reset by peer"), "ECONNRESET"), (HTTP.ReadTimeout("stalled"), "timeout")],
)
async def test_transport_failure_mid_stream_after_output(exc: Exception, code: str) -> None:
    """PROV-12: a read failure after output is still one error event (observable)."""
    stream = _FailingStream(sse(message_start()), exc)
    server = Server(
        HTTP.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)
    )
    events = await collect(make_provider(server), make_request())
    assert events[0] == ProviderMessageStart(message_id="msg_1")
    assert only_error(events).code == code


async def test_read_failure_after_message_stop_keeps_the_completed_turn() -> None:
    """ANT-6: once message_stop proved completion, a reset while draining the body is ignored."""
    stream = _FailingStream(text_stream("done"), HTTP.ReadError("reset after the last event"))
    server = Server(
        HTTP.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)
    )
    events = await collect(make_provider(server), make_request())
    assert isinstance(events[-1], ProviderDone)
    assert not any(isinstance(e, ProviderErrorEvent) for e in events)
    assert fold_provider_events(events).content == (TextContent(text="done"),)


# --------------------------------------------------------------------------- abort (PROV-4)


class _HangingStream(HTTP.AsyncByteStream):  # type: ignore[misc, name-defined]
    """Sends ``first``, then waits forever; records whether the response closed it."""

    def __init__(self, first: bytes) -> None:
        self.first = first
        self.sent = asyncio.Event()
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.first
        self.sent.set()
        await asyncio.Event().wait()
        yield b""  # pragma: no cover

    async def aclose(self) -> None:
        self.closed = True


async def test_aborted_signal_before_start_raises_without_http() -> None:
    """PROV-4: an already-aborted signal raises its abort error, no request is sent."""
    server = Server(stream_response(text_stream()))
    controller = AbortController()
    controller.abort()
    with pytest.raises(AbortError):
        await collect(make_provider(server), make_request(signal=controller.signal))
    assert server.requests == []


async def test_abort_while_waiting_for_the_response_raises_abort_error() -> None:
    """PROV-4: an abort during the HTTP call interrupts it and raises the signal's reason."""
    entered = asyncio.Event()

    async def handler(request: Any) -> Any:
        entered.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")  # pragma: no cover

    provider = create_anthropic_provider(api_key=KEY, http_client=http_client(handler))
    controller = AbortController()
    reason = RuntimeError("user pressed stop")

    async def abort_soon() -> None:
        await entered.wait()
        controller.abort(reason)

    async with asyncio.timeout(10), asyncio.TaskGroup() as group:  # hang guard only
        group.create_task(abort_soon())
        with pytest.raises(RuntimeError) as err:
            await collect(provider, make_request(signal=controller.signal))
    assert err.value is reason


async def test_abort_while_reading_closes_the_response() -> None:
    """PROV-4: an abort mid-stream stops reading, closes the HTTP response, raises AbortError;
    events before the abort were delivered."""
    stream = _HangingStream(sse(message_start("msg_h")))
    server = Server(
        HTTP.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)
    )
    controller = AbortController()
    seen: list[ProviderEvent] = []

    async def consume() -> None:
        async for event in make_provider(server).generate(make_request(signal=controller.signal)):
            seen.append(event)

    task = asyncio.create_task(consume())
    await stream.sent.wait()
    await asyncio.sleep(0)
    controller.abort()
    with pytest.raises(AbortError):
        async with asyncio.timeout(10):  # hang guard only
            await task
    assert stream.closed
    assert seen[0] == ProviderMessageStart(message_id="msg_h")
    assert not any(isinstance(e, (ProviderDone, ProviderErrorEvent)) for e in seen)


async def test_abort_from_inside_the_transport_leaves_no_stray_cancellation() -> None:
    """PROV-4: an abort raised synchronously inside the awaited call is honoured once the call
    returns, and the task carries no pending cancellation afterwards."""
    controller = AbortController()

    def handler(request: Any) -> Any:
        controller.abort()
        return stream_response(text_stream())

    provider = create_anthropic_provider(api_key=KEY, http_client=http_client(handler))
    with pytest.raises(AbortError):
        await collect(provider, make_request(signal=controller.signal))
    await asyncio.sleep(0)  # a leaked cancel request would raise CancelledError here
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0


async def test_external_cancellation_is_not_turned_into_an_abort() -> None:
    """PROV-4: a task cancellation that did not come from the signal propagates unchanged."""
    entered = asyncio.Event()

    async def handler(request: Any) -> Any:
        entered.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")  # pragma: no cover

    provider = create_anthropic_provider(api_key=KEY, http_client=http_client(handler))
    controller = AbortController()
    task = asyncio.create_task(collect(provider, make_request(signal=controller.signal)))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(10):  # hang guard only
            await task
    assert not controller.aborted


async def test_external_cancellation_wins_over_a_simultaneous_abort() -> None:
    """PROV-4: when the task is cancelled and the signal aborts at once, the cancellation is
    not swallowed (only the provider's own cancel request is taken back)."""
    entered = asyncio.Event()

    async def handler(request: Any) -> Any:
        entered.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")  # pragma: no cover

    provider = create_anthropic_provider(api_key=KEY, http_client=http_client(handler))
    controller = AbortController()
    task = asyncio.create_task(collect(provider, make_request(signal=controller.signal)))
    await entered.wait()
    task.cancel()
    controller.abort()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(10):  # hang guard only
            await task


async def test_consumer_closing_the_iterator_closes_the_response() -> None:
    """RUN-15: aclose() on the provider's iterator releases the HTTP response at once."""
    stream = _HangingStream(sse(message_start()))
    server = Server(
        HTTP.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)
    )
    iterator = make_provider(server).generate(make_request())
    assert isinstance(await iterator.__anext__(), ProviderMessageStart)
    await iterator.aclose()  # type: ignore[attr-defined]
    assert stream.closed
