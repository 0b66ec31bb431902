"""OpenAI Chat Completions / compatible provider: factory, wire mapping, stream mapping, errors.

Responses here are synthetic (hand-written SSE bodies and status codes); the recorded traffic is
replayed in ``test_openai_fixtures.py``. Every request goes through the real ``openai`` SDK client
with an ``httpx.MockTransport``; nothing reaches the network.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import httpx
import openai
import pytest

from prism.abort import AbortController
from prism.errors import AbortError, PrismConfigError, ProviderTurnError
from prism.providers.base import EMPTY_TOOL_RESULT_TEXT, fold_provider_events
from prism.providers.openai import (
    MAX_REQUEST_BODY_BYTES,
    OpenAICompatibleProvider,
    create_openai_chat_provider,
    create_openai_compatible_provider,
)
from prism.types import (
    ErrorInfo,
    ImageContent,
    Message,
    ModelCapabilities,
    ModelConfig,
    ProviderContentDelta,
    ProviderDone,
    ProviderErrorEvent,
    ProviderEvent,
    ProviderRequest,
    ProviderRequestOptions,
    ProviderToolCall,
    ProviderToolCallDelta,
    ProviderTurnResult,
    ProviderUsage,
    StructuredOutputOptions,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolDefinition,
    ToolResultContent,
    Usage,
    system_message,
    user_message,
)

BASE_URL = "http://llm.test/v1"
KEY = "sk-test-secret-123"

Responder = httpx.Response | Callable[[httpx.Request], httpx.Response] | BaseException


class Server:
    """A scripted HTTP server for ``httpx.MockTransport``; records every request."""

    def __init__(self, *responses: Responder) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        if isinstance(response, BaseException):
            raise response
        if callable(response):
            return response(request)
        return response

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handler))

    def body(self, i: int = -1) -> dict[str, Any]:
        data = json.loads(self.requests[i].content)
        assert isinstance(data, dict)
        return data


def chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    usage: dict[str, Any] | None = None,
    choices: bool = True,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": (
            [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else []
        ),
    }
    if usage is not None:
        out["usage"] = usage
    return out


def sse(*chunks: dict[str, Any] | str, done: bool = True) -> bytes:
    parts = [c if isinstance(c, str) else json.dumps(c) for c in chunks]
    if done:
        parts.append("[DONE]")
    return "".join(f"data: {p}\n\n" for p in parts).encode()


def sse_response(body: bytes, status: int = 200) -> httpx.Response:
    return httpx.Response(status, headers={"content-type": "text/event-stream"}, content=body)


def text_stream(*texts: str, finish: str = "stop") -> httpx.Response:
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": t}) for t in texts]
    chunks.append(chunk({}, finish))
    return sse_response(sse(*chunks))


def model(**caps: Any) -> ModelConfig:
    return ModelConfig(
        provider="openai-compatible",
        model="test-model",
        capabilities=ModelCapabilities(**caps) if caps else None,
    )


def request(
    *messages: Message,
    tools: Sequence[ToolDefinition] | None = None,
    options: ProviderRequestOptions | None = None,
    model_config: ModelConfig | None = None,
    signal: Any = None,
) -> ProviderRequest:
    return ProviderRequest(
        model=model_config or model(),
        messages=messages or (user_message("hi"),),
        tools=tuple(tools) if tools is not None else None,
        options=options,
        signal=signal,
    )


def compatible(server: Server, **kwargs: Any) -> OpenAICompatibleProvider:
    kwargs.setdefault("api_key", KEY)
    return create_openai_compatible_provider(
        base_url=BASE_URL, http_client=server.client(), **kwargs
    )


async def events_of(provider: OpenAICompatibleProvider, req: ProviderRequest) -> list[ProviderEvent]:
    return [event async for event in provider.generate(req)]


async def result_of(provider: OpenAICompatibleProvider, req: ProviderRequest) -> ProviderTurnResult:
    return fold_provider_events(await events_of(provider, req))


async def error_of(provider: OpenAICompatibleProvider, req: ProviderRequest) -> ErrorInfo:
    events = await events_of(provider, req)
    assert isinstance(events[-1], ProviderErrorEvent), events[-1]
    assert sum(isinstance(e, (ProviderErrorEvent, ProviderDone)) for e in events) == 1
    return events[-1].error


def _noop(args: dict[str, Any], ctx: Any) -> None:
    return None


# =========================================================================== OAI-1 factories


def test_compatible_provider_requires_a_key_unless_client_or_no_auth() -> None:
    """OAI-1: api_key is required unless client is given or auth_style='none'."""
    with pytest.raises(PrismConfigError, match="api_key"):
        create_openai_compatible_provider(base_url=BASE_URL)
    with pytest.raises(PrismConfigError, match="api_key"):
        create_openai_compatible_provider(base_url=BASE_URL, auth_style="api-key")
    assert create_openai_compatible_provider(base_url=BASE_URL, auth_style="none").id == (
        "openai-compatible"
    )
    host = openai.AsyncOpenAI(api_key="host-key", base_url=BASE_URL, max_retries=0)
    assert create_openai_compatible_provider(base_url=BASE_URL, client=host, id="x").id == "x"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base_url": ""},
        {"base_url": BASE_URL, "auth_style": "basic", "api_key": KEY},
        {"base_url": BASE_URL, "api_key": ""},
        {"base_url": BASE_URL, "api_key": 123},
        {"base_url": BASE_URL, "api_key": KEY, "client": object()},
        {"base_url": BASE_URL, "api_key": KEY, "transform_body": "nope"},
    ],
)
def test_compatible_provider_rejects_bad_configuration(kwargs: dict[str, Any]) -> None:
    """OAI-1, ARCH-9: invalid factory arguments raise PrismConfigError."""
    with pytest.raises(PrismConfigError):
        create_openai_compatible_provider(**kwargs)


def test_client_and_http_client_are_exclusive() -> None:
    """PROV-0: http_client is only for the SDK client the factory builds."""
    host = openai.AsyncOpenAI(api_key="k", base_url=BASE_URL)
    with pytest.raises(PrismConfigError):
        create_openai_compatible_provider(
            base_url=BASE_URL, client=host, http_client=httpx.AsyncClient()
        )


async def test_compatible_provider_never_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OAI-1: OPENAI_API_KEY (and the org/project ids) are never sent to another server."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-from-env")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-from-env")
    server = Server(text_stream("ok"))
    provider = create_openai_compatible_provider(
        base_url=BASE_URL, auth_style="none", http_client=server.client()
    )
    await events_of(provider, request())
    headers = server.requests[0].headers
    assert "authorization" not in headers
    assert "openai-organization" not in headers
    assert "openai-project" not in headers
    assert not any("from-env" in value for value in headers.values())


async def test_chat_provider_reads_openai_api_key_when_the_factory_is_called(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OAI-1, ARCH-8: the env key is read at factory time, never again."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-1")
    server = Server(text_stream("ok"))
    provider = create_openai_chat_provider(base_url=BASE_URL, http_client=server.client())
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-2")
    await events_of(provider, request())
    assert server.requests[0].headers["authorization"] == "Bearer sk-env-1"
    assert provider.id == "openai"


@pytest.mark.parametrize("value", [None, ""])
def test_chat_provider_without_any_key_names_both_sources(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    """OAI-1: no api_key, no client, OPENAI_API_KEY unset or empty -> PrismConfigError."""
    if value is None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    else:
        monkeypatch.setenv("OPENAI_API_KEY", value)
    with pytest.raises(PrismConfigError) as caught:
        create_openai_chat_provider()
    assert "api_key" in str(caught.value)
    assert "OPENAI_API_KEY" in str(caught.value)


async def test_requests_target_chat_completions_under_the_base_url() -> None:
    """OAI-1: <base_url without trailing slash>/chat/completions, a streaming JSON POST."""
    server = Server(text_stream("ok"))
    provider = create_openai_compatible_provider(
        base_url=BASE_URL + "/", api_key=KEY, http_client=server.client()
    )
    await events_of(provider, request())
    sent = server.requests[0]
    assert sent.method == "POST"
    assert str(sent.url) == BASE_URL + "/chat/completions"
    assert sent.headers["content-type"] == "application/json"


async def test_built_client_has_explicit_timeout_and_no_sdk_retries() -> None:
    """PROV-8: timeout 600 s (connect 10 s) is passed explicitly; max_retries=0."""
    server = Server(httpx.Response(503, json={"error": {"message": "busy"}}))
    provider = compatible(server)
    error = await error_of(provider, request())
    assert error.code == 503
    assert len(server.requests) == 1  # the SDK did not retry
    timeout = server.requests[0].extensions["timeout"]
    assert timeout["connect"] == 10.0
    assert timeout["read"] == 600.0
    assert timeout["write"] == 600.0


async def test_a_host_client_is_used_with_its_own_timeout() -> None:
    """PROV-0, PROV-8: client= is used as given (its own timeout and auth)."""
    server = Server(text_stream("ok"))
    host = openai.AsyncOpenAI(
        api_key="host-key",
        base_url=BASE_URL,
        http_client=server.client(),  # type: ignore[arg-type]  # the SDK accepts httpx clients too
        max_retries=0,
        timeout=5.0,
    )
    provider = create_openai_compatible_provider(base_url="http://unused.test", client=host)
    result = await result_of(provider, request())
    assert result.content == (TextContent(text="ok"),)
    assert server.requests[0].headers["authorization"] == "Bearer host-key"
    assert server.requests[0].extensions["timeout"]["read"] == 5.0


# =========================================================================== OAI-2 headers, PROV-9


async def test_header_precedence_and_provider_owned_keys() -> None:
    """OAI-2: options.headers, then extra_headers, then content-type and auth (not overridable)."""
    server = Server(text_stream("ok"))
    provider = compatible(server, extra_headers={"X-Team": "extra", "X-Both": "extra"})
    options = ProviderRequestOptions(
        headers={
            "X-Both": "options",
            "X-Only-Options": "1",
            "Authorization": "Bearer hijack",
            "Content-Type": "text/plain",
        }
    )
    await events_of(provider, request(options=options))
    headers = server.requests[0].headers
    assert headers["x-team"] == "extra"
    assert headers["x-both"] == "extra"
    assert headers["x-only-options"] == "1"
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["content-type"] == "application/json"


@pytest.mark.parametrize(
    ("auth_style", "present", "absent"),
    [
        ("bearer", {"authorization": f"Bearer {KEY}"}, ["api-key"]),
        ("api-key", {"api-key": KEY}, ["authorization"]),
        ("none", {}, ["authorization", "api-key"]),
    ],
)
async def test_auth_styles(auth_style: str, present: dict[str, str], absent: list[str]) -> None:
    """OAI-1: bearer -> Authorization: Bearer; api-key -> api-key; none -> no auth header."""
    server = Server(text_stream("ok"))
    await events_of(compatible(server, auth_style=auth_style), request())
    headers = server.requests[0].headers
    for name, value in present.items():
        assert headers[name] == value
    for name in absent:
        assert name not in headers


async def test_callable_keys_are_resolved_on_every_request() -> None:
    """PROV-9: api_key may be a sync or async callable, resolved per request."""
    keys = iter(["sk-rot-1", "sk-rot-2"])
    server = Server(text_stream("ok"))
    provider = compatible(server, api_key=lambda: next(keys))
    await events_of(provider, request())
    await events_of(provider, request())
    assert [r.headers["authorization"] for r in server.requests] == [
        "Bearer sk-rot-1",
        "Bearer sk-rot-2",
    ]

    async def async_key() -> str:
        return "sk-async"

    server2 = Server(text_stream("ok"))
    await events_of(compatible(server2, api_key=async_key, auth_style="api-key"), request())
    assert server2.requests[0].headers["api-key"] == "sk-async"


async def test_resolved_keys_are_redacted_from_errors() -> None:
    """PROV-9, PROV-14: a key echoed in an error body is replaced by [REDACTED]."""
    body = {"error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}}
    server = Server(httpx.Response(401, json=body))
    error = await error_of(compatible(server, api_key=lambda: KEY), request())
    assert error.code == 401
    assert KEY not in error.message
    assert "[REDACTED]" in error.message


async def test_a_failing_key_callable_ends_the_attempt_with_an_error_event() -> None:
    """PROV-3: failures before the HTTP call are error events, not exceptions."""

    def broken() -> str:
        raise RuntimeError("vault unavailable")

    server = Server(text_stream("ok"))
    error = await error_of(compatible(server, api_key=broken), request())
    assert "vault unavailable" in error.message
    assert server.requests == []


# =========================================================================== OAI-3 / OAI-4 body


async def test_body_snapshot_for_a_full_history() -> None:
    """OAI-3, OAI-4, PROV-13, PROV-14: system text, user image, assistant call, tool results."""
    messages = (
        system_message("Be brief."),
        Message(
            role="user",
            content=(
                TextContent(text="What is in these?"),
                ImageContent(mime_type="image/png", data="iVBORw0KGgo="),
                ImageContent(url="https://example.test/cat.jpg"),
            ),
        ),
        Message(
            role="assistant",
            content=(
                ThinkingContent(text="I should call tools."),
                ToolCallContent(id="call_1", name="describe", arguments={"n": 1}),
                ToolCallContent(id="call_2", name="describe", arguments={"é": "x"}),
                ToolCallContent(
                    id="srv_1", name="web", arguments={}, authority="provider-hosted"
                ),
            ),
        ),
        Message(role="tool", content=(ToolResultContent(tool_call_id="call_1", name="describe"),)),
        Message(
            role="tool",
            content=(
                ToolResultContent(
                    tool_call_id="call_2",
                    name="describe",
                    error=ErrorInfo(message="denied", code="tool_denied"),
                ),
            ),
        ),
        Message(role="assistant", content=(TextContent(text="A cat."),)),
        user_message("Thanks"),
    )
    tools = [
        ToolDefinition(
            name="describe",
            execute=_noop,
            description="Describe an image",
            parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
        ),
        ToolDefinition(name="bare", execute=_noop),
    ]
    options = ProviderRequestOptions(
        extra={"temperature": 0.5, "seed": 7},
        structured_output=StructuredOutputOptions(
            name="answer", schema={"type": "object"}, strict=True
        ),
    )
    config = ModelConfig(
        provider="openai-compatible",
        model="vision-model",
        capabilities=ModelCapabilities(input=("text", "image")),
        parameters={"temperature": 0.1, "max_tokens": 64},
    )
    server = Server(text_stream("ok"))
    req = ProviderRequest(model=config, messages=messages, tools=tuple(tools), options=options)
    await events_of(compatible(server, tool_call_content=None), req)
    assert server.body() == {
        "model": "vision-model",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in these?"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
                    },
                    {"type": "image_url", "image_url": {"url": "https://example.test/cat.jpg"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "describe", "arguments": '{"n": 1}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "describe", "arguments": '{"\\u00e9": "x"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": EMPTY_TOOL_RESULT_TEXT},
            {
                "role": "tool",
                "tool_call_id": "call_2",
                "content": '{"error": {"message": "denied", "code": "tool_denied"}}',
            },
            {"role": "assistant", "content": "A cat."},
            {"role": "user", "content": "Thanks"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "describe",
                    "description": "Describe an image",
                    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
                },
            },
            {"type": "function", "function": {"name": "bare", "parameters": {"type": "object"}}},
        ],
        "temperature": 0.5,
        "max_tokens": 64,
        "seed": 7,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": True},
        },
    }


async def test_tool_result_payloads_for_values_and_extra_text() -> None:
    """PROV-13: str result as-is, other values compact JSON, else extra text parts."""
    messages = (
        user_message("go"),
        Message(
            role="assistant",
            content=(
                TextContent(text="Calling."),
                ToolCallContent(id="a", name="f", arguments={}),
                ToolCallContent(id="b", name="f", arguments={}),
                ToolCallContent(id="c", name="f", arguments={}),
            ),
        ),
        Message(role="tool", content=(ToolResultContent(tool_call_id="a", name="f", result="x"),)),
        Message(
            role="tool",
            content=(ToolResultContent(tool_call_id="b", name="f", result={"k": [1, "é"]}),),
        ),
        Message(
            role="tool",
            content=(
                ToolResultContent(tool_call_id="c", name="f"),
                TextContent(text="line 1"),
                TextContent(text="line 2"),
            ),
        ),
    )
    server = Server(text_stream("ok"))
    await events_of(compatible(server), request(*messages))
    sent = server.body()["messages"]
    assert sent[1]["content"] == "Calling."
    assert [m["content"] for m in sent[2:]] == ["x", '{"k":[1,"é"]}', "line 1\nline 2"]


async def test_thinking_is_sent_back_only_under_a_configured_reasoning_field() -> None:
    """OAI-4: thinking dropped by default; reasoning_field sends the joined text."""
    history = (
        user_message("q"),
        Message(
            role="assistant",
            content=(
                ThinkingContent(text="step 1; "),
                ThinkingContent(text="step 2"),
                TextContent(text="answer"),
            ),
        ),
        user_message("again"),
    )
    server = Server(text_stream("ok"))
    await events_of(compatible(server), request(*history))
    assert server.body()["messages"][1] == {"role": "assistant", "content": "answer"}
    server2 = Server(text_stream("ok"))
    await events_of(compatible(server2, reasoning_field="reasoning_content"), request(*history))
    assert server2.body()["messages"][1] == {
        "role": "assistant",
        "content": "answer",
        "reasoning_content": "step 1; step 2",
    }


def _tool_call_history() -> tuple[Message, ...]:
    return (
        user_message("2+3?"),
        Message(
            role="assistant",
            content=(ToolCallContent(id="call_1", name="add", arguments={"a": 2, "b": 3}),),
        ),
        Message(
            role="tool",
            content=(ToolResultContent(tool_call_id="call_1", name="add", result=5),),
        ),
    )


async def test_compatible_servers_get_an_empty_string_as_tool_call_content_by_default() -> None:
    """OAI-4 for OpenAI-compatible servers: "" instead of null on an assistant message with tool
    calls and no text (llama-cpp-python's server rejects null with a 500)."""
    server = Server(text_stream("ok"))
    await events_of(compatible(server), request(*_tool_call_history()))
    sent = server.body()["messages"][1]
    assert sent["content"] == "" and sent["tool_calls"][0]["id"] == "call_1"


async def test_tool_call_content_none_sends_null() -> None:
    server = Server(text_stream("ok"))
    await events_of(compatible(server, tool_call_content=None), request(*_tool_call_history()))
    assert server.body()["messages"][1]["content"] is None


async def test_the_openai_chat_provider_keeps_null_tool_call_content() -> None:
    """OAI-4: OpenAI itself gets the documented null."""
    server = Server(text_stream("ok"))
    provider = create_openai_chat_provider(
        api_key=KEY, base_url=BASE_URL, http_client=server.client()
    )
    await events_of(provider, request(*_tool_call_history()))
    assert server.body()["messages"][1]["content"] is None


def test_tool_call_content_must_be_a_string_or_none() -> None:
    with pytest.raises(PrismConfigError, match="tool_call_content"):
        create_openai_compatible_provider(
            base_url=BASE_URL, auth_style="none", tool_call_content=0  # type: ignore[arg-type]
        )


async def test_an_assistant_message_without_text_or_calls_sends_empty_content() -> None:
    """OAI-4: content is None only when there is no text and there are tool calls."""
    history = (user_message("q"), Message(role="assistant", content=()), user_message("again"))
    server = Server(text_stream("ok"))
    await events_of(compatible(server), request(*history))
    assert server.body()["messages"][1] == {"role": "assistant", "content": ""}


async def test_an_image_for_a_text_only_model_is_an_invalid_request() -> None:
    """OAI-4, PROV-12: an image without image input capability -> invalid_request, no HTTP call."""
    image_message = Message(
        role="user", content=(TextContent(text="look"), ImageContent(url="https://x.test/a.png"))
    )
    server = Server(text_stream("ok"))
    error = await error_of(compatible(server), request(image_message))
    assert error.code == "invalid_request"
    assert "image" in error.message
    assert server.requests == []


async def test_transform_body_may_replace_the_body() -> None:
    """OAI-3: transform_body(body, request) -> replacement (sync or async); None keeps it."""
    seen: list[ProviderRequest] = []

    def add_field(body: dict[str, Any], req: ProviderRequest) -> dict[str, Any]:
        seen.append(req)
        return {**body, "chat_template_kwargs": {"enable_thinking": False}}

    server = Server(text_stream("ok"))
    req = request()
    await events_of(compatible(server, transform_body=add_field), req)
    assert server.body()["chat_template_kwargs"] == {"enable_thinking": False}
    assert seen == [req]

    async def drop_stream_options(body: dict[str, Any], req: ProviderRequest) -> dict[str, Any]:
        return {k: v for k, v in body.items() if k != "stream_options"}

    server2 = Server(text_stream("ok"))
    await events_of(compatible(server2, transform_body=drop_stream_options), request())
    assert "stream_options" not in server2.body()

    server3 = Server(text_stream("ok"))
    await events_of(compatible(server3, transform_body=lambda body, req: None), request())
    assert server3.body()["stream_options"] == {"include_usage": True}


async def test_a_body_above_8_mib_fails_before_any_http_call() -> None:
    """PROV-10 (a): the serialised body is measured; above 8 MiB -> invalid_request with size."""
    big = "x" * (MAX_REQUEST_BODY_BYTES + 1)
    server = Server(text_stream("ok"))
    error = await error_of(compatible(server), request(user_message(big)))
    assert error.code == "invalid_request"
    assert re.search(r"\b\d{7,} bytes\b", error.message)
    assert server.requests == []


async def test_a_body_that_is_not_json_is_an_invalid_request() -> None:
    """PROV-12: serialisation failures -> invalid_request."""
    options = ProviderRequestOptions(extra={"bad": {1, 2}})
    server = Server(text_stream("ok"))
    error = await error_of(compatible(server), request(options=options))
    assert error.code == "invalid_request"
    assert server.requests == []


# =========================================================================== OAI-5 stream mapping


async def test_a_text_answer_streams_deltas_usage_and_done() -> None:
    """OAI-5, OAI-7, PROV-14: text deltas, the usage-only final chunk, done(end_turn)."""
    body = sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        chunk({}, "stop"),
        chunk(usage={"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}, choices=False),
    )
    events = await events_of(compatible(Server(sse_response(body))), request())
    usage = Usage(input_tokens=9, output_tokens=2, total_tokens=11)
    assert events == [
        ProviderContentDelta(content=TextContent(text="Hel")),
        ProviderContentDelta(content=TextContent(text="lo")),
        ProviderUsage(usage=usage),
        ProviderDone(usage=usage, stop_reason="end_turn", model="m"),
    ]


async def test_usage_that_never_arrives_leaves_done_usage_empty() -> None:
    """OAI-7: no usage chunk -> done.usage is None."""
    events = await events_of(compatible(Server(text_stream("hi"))), request())
    assert events[-1] == ProviderDone(usage=None, stop_reason="end_turn", model="m")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            {
                "prompt_tokens": 10,
                "completion_tokens": 5,
                "total_tokens": 15,
                "prompt_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 2},
                "completion_tokens_details": {"reasoning_tokens": 3},
            },
            Usage(
                input_tokens=10,
                output_tokens=5,
                total_tokens=15,
                cache_read_tokens=4,
                cache_write_tokens=2,
                reasoning_tokens=3,
            ),
        ),
        (
            {"prompt_tokens": 7, "prompt_cache_hit_tokens": 6, "cache_creation_input_tokens": 1},
            Usage(input_tokens=7, cache_read_tokens=6, cache_write_tokens=1),
        ),
        ({"completion_tokens": 2}, Usage(output_tokens=2)),
    ],
)
async def test_usage_field_mapping(raw: dict[str, Any], expected: Usage) -> None:
    """OAI-7: prompt/completion/total, cached and cache-write tokens, reasoning tokens."""
    body = sse(chunk({"content": "x"}, "stop"), chunk(usage=raw, choices=False))
    events = await events_of(compatible(Server(sse_response(body))), request())
    assert events[-1] == ProviderDone(usage=expected, stop_reason="end_turn", model="m")


async def test_a_usage_without_known_fields_is_not_reported() -> None:
    """OAI-7: the mapping returns None when none of the fields exist."""
    body = sse(chunk({"content": "x"}, "stop"), chunk(usage={"queue_time": 0.1}, choices=False))
    events = await events_of(compatible(Server(sse_response(body))), request())
    assert not any(isinstance(e, ProviderUsage) for e in events)
    assert events[-1] == ProviderDone(usage=None, stop_reason="end_turn", model="m")


async def test_a_negative_token_count_fails_the_turn_with_type_error() -> None:
    """CON-11: a provider usage breaking the rules fails the provider turn (TypeError)."""
    body = sse(chunk({"content": "x"}, "stop"), chunk(usage={"prompt_tokens": -1}, choices=False))
    error = await error_of(compatible(Server(sse_response(body))), request())
    assert error.name == "TypeError"


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_fields_become_thinking_deltas(field: str) -> None:
    """OAI-5, PROV-14: delta.reasoning_content / delta.reasoning -> ThinkingContent deltas."""
    body = sse(
        chunk({"role": "assistant", field: "Think"}),
        chunk({field: "ing."}),
        chunk({field: None, "content": "Answer"}),
        chunk({}, "stop"),
    )
    result = await result_of(compatible(Server(sse_response(body))), request())
    assert result.content == (ThinkingContent(text="Thinking."), TextContent(text="Answer"))


async def test_a_streamed_tool_call_is_assembled_by_index() -> None:
    """OAI-5, OAI-6, PROV-14: fragments, then one final tool_call, then done(tool_use)."""
    body = sse(
        chunk(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "lookup", "arguments": ""},
                    }
                ],
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "x"}'}}]}),
        chunk({}, "tool_calls"),
    )
    events = await events_of(compatible(Server(sse_response(body))), request())
    call = ToolCallContent(id="call_a", name="lookup", arguments={"q": "x"})
    assert events == [
        ProviderToolCallDelta(index=0, id="call_a", name="lookup"),
        ProviderToolCallDelta(index=0, arguments_text='{"q":'),
        ProviderToolCallDelta(index=0, arguments_text=' "x"}'),
        ProviderToolCall(call=call),
        ProviderDone(stop_reason="tool_use", model="m"),
    ]
    assert fold_provider_events(events).calls == (call,)


async def test_parallel_calls_under_one_index_are_never_glued() -> None:
    """OAI-5: a new non-empty id at an index starts a new call there (PROV-5 grouping)."""
    body = sse(
        chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "a", "arguments": "{}"}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "c2", "function": {"name": "b", "arguments": '{"k"'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ": 2}"}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "c3", "function": {"name": "c", "arguments": "{}"}}]}),
        chunk({}, "tool_calls"),
    )
    result = await result_of(compatible(Server(sse_response(body))), request())
    assert result.calls == (
        ToolCallContent(id="c1", name="a", arguments={}),
        ToolCallContent(id="c2", name="b", arguments={"k": 2}),
        ToolCallContent(id="c3", name="c", arguments={}),
    )


async def test_a_call_without_id_gets_a_synthesized_id_that_reconstruction_pairs() -> None:
    """OAI-6: missing id -> call_<32 hex>, announced by a delta before the final call."""
    body = sse(
        chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": '{"a":'}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "", "function": {"arguments": " 1}"}}]}),
        chunk({}, "tool_calls"),
    )
    events = await events_of(compatible(Server(sse_response(body))), request())
    final = [e for e in events if isinstance(e, ProviderToolCall)]
    assert len(final) == 1
    call_id = final[0].call.id
    assert re.fullmatch(r"call_[0-9a-f]{32}", call_id)
    announce = events.index(ProviderToolCallDelta(index=0, id=call_id))
    assert announce < events.index(final[0])
    result = fold_provider_events(events)
    assert result.calls == (ToolCallContent(id=call_id, name="f", arguments={"a": 1}),)
    # The runtime pairs the id-less fragments with the final call, so nothing is rebuilt twice.
    only_deltas = [e for e in events if not isinstance(e, ProviderToolCall)]
    assert fold_provider_events(only_deltas).calls == result.calls


async def test_a_call_without_a_name_is_an_incomplete_delta() -> None:
    """OAI-6: an accumulated call lacking a name -> error incomplete_delta."""
    body = sse(chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"arguments": "{}"}}]}), chunk({}, "tool_calls"))
    error = await error_of(compatible(Server(sse_response(body))), request())
    assert error.code == "incomplete_delta"


async def test_malformed_streamed_arguments_give_arguments_error() -> None:
    """PROV-14, PROV-6: malformed tool-call JSON -> arguments_error, no exception."""
    body = sse(
        chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": '{"a": tru'}}]}),
        chunk({}, "tool_calls"),
    )
    result = await result_of(compatible(Server(sse_response(body))), request())
    call = result.calls[0]
    assert call.arguments == {}
    assert call.arguments_error is not None
    assert call.arguments_error.code == "invalid_json_arguments"


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("stop", "end_turn"),
        ("tool_calls", "tool_use"),
        ("function_call", "tool_use"),
        ("length", "max_tokens"),
        ("content_filter", "content_filter"),
        ("eos", "other"),
    ],
)
async def test_finish_reasons_are_normalised(finish: str, stop: str) -> None:
    """OAI-6: finish_reason -> ProviderStopReason."""
    events = await events_of(compatible(Server(text_stream("x", finish=finish))), request())
    assert events[-1] == ProviderDone(stop_reason=stop, model="m")  # type: ignore[arg-type]


async def test_missing_done_marker_fails_closed() -> None:
    """OAI-6, PROV-2, PROV-14: a truncated stream (no [DONE]) ends with incomplete_stream."""
    body = sse(chunk({"content": "partial"}), chunk({}, "stop"), done=False)
    events = await events_of(compatible(Server(sse_response(body))), request())
    assert events[0] == ProviderContentDelta(content=TextContent(text="partial"))
    assert isinstance(events[-1], ProviderErrorEvent)
    assert events[-1].error.code == "incomplete_stream"
    assert "[DONE]" in events[-1].error.message
    assert not any(isinstance(e, ProviderDone) for e in events)


async def test_an_incomplete_stream_names_the_status_and_the_events_received() -> None:
    """OAI-6: the incomplete_stream message says what arrived (HTTP status, data events)."""
    body = sse(chunk({"content": "partial"}), done=False)
    error = await error_of(compatible(Server(sse_response(body))), request())
    assert error.code == "incomplete_stream"
    assert "stream ended without [DONE] and finish_reason (HTTP 200, 1 data event received)" in (
        error.message
    )


async def test_an_empty_stream_says_the_server_failed_after_its_headers() -> None:
    """A server that fails after sending 200 and its headers closes an empty stream: the
    message names the status and where the cause is, not only the missing evidence."""
    error = await error_of(compatible(Server(sse_response(b""))), request())
    assert error.code == "incomplete_stream"
    assert "HTTP 200, no data event received, empty body" in error.message
    assert "failed after sending its headers" in error.message


async def test_a_non_sse_stream_body_is_quoted_bounded_and_redacted() -> None:
    """A stream whose body is not SSE (a proxy's error page) is quoted: at most 1 KiB, with
    the API key redacted."""
    page = f"upstream error: bad gateway for key {KEY}\n" + "x" * 5000
    error = await error_of(compatible(Server(sse_response(page.encode()))), request())
    assert error.code == "incomplete_stream"
    assert "no data event received, body began: upstream error: bad gateway" in error.message
    assert KEY not in error.message and "[REDACTED]" in error.message
    assert error.message.count("x") <= 1024


async def test_missing_finish_reason_fails_closed() -> None:
    """OAI-6: [DONE] without any finish_reason -> incomplete_stream naming finish_reason."""
    body = sse(chunk({"content": "partial"}))
    error = await error_of(compatible(Server(sse_response(body))), request())
    assert error.code == "incomplete_stream"
    assert "finish_reason" in error.message
    assert "[DONE]" not in error.message


async def test_a_truncated_tool_call_is_never_completed() -> None:
    """OAI-6: the connection drops mid-arguments -> error, no final tool_call."""
    body = sse(chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": '{"a"'}}]}), done=False)
    events = await events_of(compatible(Server(sse_response(body))), request())
    assert not any(isinstance(e, ProviderToolCall) for e in events)
    assert isinstance(events[-1], ProviderErrorEvent)
    assert events[-1].error.code == "incomplete_stream"


async def test_without_strict_completion_a_truncated_stream_still_completes() -> None:
    """OAI-6: strict_completion=False -> final calls and done even without the evidence."""
    body = sse(chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}]}), done=False)
    events = await events_of(compatible(Server(sse_response(body)), strict_completion=False), request())
    assert events[-2:] == [
        ProviderToolCall(call=ToolCallContent(id="c", name="f", arguments={})),
        ProviderDone(stop_reason=None, model="m"),
    ]


async def test_non_json_data_is_an_invalid_stream_chunk() -> None:
    """OAI-5: non-JSON data -> error invalid_stream_chunk."""
    body = sse(chunk({"content": "a"}), "{not json")
    error = await error_of(compatible(Server(sse_response(body))), request())
    assert error.code == "invalid_stream_chunk"
    body2 = sse(chunk({"content": "a"}), "[1, 2]")
    error2 = await error_of(compatible(Server(sse_response(body2))), request())
    assert error2.code == "invalid_stream_chunk"


async def test_an_error_object_inside_a_200_stream_ends_the_attempt() -> None:
    """OAI-5: a chunk with an "error" object -> error with its message and code/type."""
    body = sse(
        chunk({"content": "a"}),
        {"error": {"message": "Upstream overloaded", "type": "server_error", "code": 502}},
    )
    events = await events_of(compatible(Server(sse_response(body))), request())
    assert isinstance(events[-1], ProviderErrorEvent)
    assert events[-1].error.code == 502
    assert events[-1].error.message == "Upstream overloaded"
    body2 = sse({"error": {"message": "Bad things", "type": "invalid_request_error"}})
    error2 = await error_of(compatible(Server(sse_response(body2))), request())
    assert error2.code == "invalid_request_error"
    assert error2.message == "Bad things"


async def test_an_oversized_stream_event_overflows() -> None:
    """PROV-10 (b): a stream event above 262 144 bytes -> sse_event_overflow."""
    body = sse(chunk({"content": "x" * 270_000}), chunk({}, "stop"))
    error = await error_of(compatible(Server(sse_response(body))), request())
    assert error.code == "sse_event_overflow"


# =========================================================================== non-stream models


async def test_models_without_streaming_get_a_plain_completion() -> None:
    """CON-13 capabilities.streaming=False: no stream keys; the JSON completion is mapped."""
    completion = {
        "id": "chatcmpl-9",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Sunny.",
                    "reasoning_content": "Check weather.",
                    "tool_calls": [
                        {"id": "c9", "type": "function", "function": {"name": "w", "arguments": '{"c":"P"}'}}
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }
    server = Server(httpx.Response(200, json=completion))
    req = request(model_config=model(streaming=False))
    result = await result_of(compatible(server), req)
    assert "stream" not in server.body()
    assert "stream_options" not in server.body()
    assert result == ProviderTurnResult(
        content=(
            ThinkingContent(text="Check weather."),
            TextContent(text="Sunny."),
            ToolCallContent(id="c9", name="w", arguments={"c": "P"}),
        ),
        calls=(ToolCallContent(id="c9", name="w", arguments={"c": "P"}),),
        message_id=None,
        started=True,
        usage=Usage(input_tokens=3, output_tokens=4, total_tokens=7),
        stop_reason="tool_use",
    )


async def test_a_json_answer_to_a_streaming_request_is_mapped_as_a_completion() -> None:
    """OAI-5: servers that ignore stream=true still give a complete, mapped answer."""
    completion = {"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}
    result = await result_of(compatible(Server(httpx.Response(200, json=completion))), request())
    assert result.content == (TextContent(text="hi"),)
    assert result.stop_reason == "end_turn"


async def test_a_json_error_body_with_status_200_is_an_error() -> None:
    """OAI-5: an "error" object in a 200 JSON body -> error event."""
    server = Server(httpx.Response(200, json={"error": {"message": "nope", "code": "bad"}}))
    error = await error_of(compatible(server), request())
    assert error.code == "bad"


# =========================================================================== PROV-11 HTTP errors


async def test_http_429_carries_status_code_and_retry_after_seconds() -> None:
    """PROV-11, PROV-14: 429 -> code 429, retry_after_ms from Retry-After seconds, prefixed body."""
    body = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
    raw = json.dumps(body)
    server = Server(
        httpx.Response(
            429, headers={"retry-after": "2", "content-type": "application/json"}, content=raw
        )
    )
    error = await error_of(compatible(server), request())
    assert error.code == 429
    assert error.retry_after_ms == 2000.0
    assert error.message == "OpenAI-compatible request failed: 429 " + raw
    assert error.name == "RateLimitError"


async def test_retry_after_http_dates_are_converted_to_milliseconds_from_now() -> None:
    """PROV-11: an HTTP date -> ms from now, never negative."""
    future = email.utils.formatdate(time.time() + 120, usegmt=True)
    server = Server(httpx.Response(503, headers={"retry-after": future}, text="busy"))
    error = await error_of(compatible(server), request())
    assert error.code == 503
    assert error.retry_after_ms is not None
    assert 100_000 <= error.retry_after_ms <= 120_000
    past = email.utils.formatdate(time.time() - 120, usegmt=True)
    server2 = Server(httpx.Response(503, headers={"retry-after": past}, text="busy"))
    assert (await error_of(compatible(server2), request())).retry_after_ms == 0.0


async def test_http_400_is_reported_with_the_chat_prefix_and_the_key_redacted() -> None:
    """PROV-11, PROV-14: 400 -> code 400; the key in the body is redacted; OpenAI prefix."""
    body = {"error": {"message": f"bad request for key {KEY}", "type": "invalid_request_error"}}
    server = Server(httpx.Response(400, json=body))
    provider = create_openai_chat_provider(api_key=KEY, base_url=BASE_URL, http_client=server.client())
    error = await error_of(provider, request())
    assert error.code == 400
    assert error.message.startswith("OpenAI request failed: 400 ")
    assert KEY not in error.message
    assert "bad request for key [REDACTED]" in error.message
    assert error.retry_after_ms is None


async def test_the_request_failed_prefix_is_configurable() -> None:
    """PROV-11: request_failed_prefix replaces the compatible prefix."""
    server = Server(httpx.Response(404, text="no such model"))
    error = await error_of(compatible(server, request_failed_prefix="Local server failed"), request())
    assert error.message == "Local server failed: 404 no such model"


async def test_error_bodies_are_cut_at_64_kib() -> None:
    """PROV-11: at most 65 536 bytes of the body are used."""
    server = Server(httpx.Response(500, text="e" * 100_000))
    error = await error_of(compatible(server), request())
    prefix = "OpenAI-compatible request failed: 500 "
    assert error.message == prefix + "e" * 65_536


# =========================================================================== PROV-12 transport


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (httpx.ConnectError("refused"), "ECONNREFUSED"),
        (httpx.ConnectTimeout("slow connect"), "timeout"),
        (httpx.ReadTimeout("slow read"), "timeout"),
        (httpx.RemoteProtocolError("peer closed"), "ECONNRESET"),
        (httpx.ReadError("reset"), "ECONNRESET"),
    ],
)
async def test_transport_exceptions_become_error_events(exc: Exception, code: str) -> None:
    """PROV-12: timeouts, refused and reset connections map to retryable codes."""
    error = await error_of(compatible(Server(exc)), request())
    assert error.code == code
    assert error.message.startswith("OpenAI-compatible request failed: ")


class ScriptedStream(httpx.AsyncByteStream):
    """Response body that yields scripted chunks, may fail or hang, and records closing."""

    def __init__(self, *parts: bytes | BaseException, hang: bool = False) -> None:
        self.parts = parts
        self.hang = hang
        self.closed = False
        self.waiting = asyncio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            if isinstance(part, BaseException):
                raise part
            yield part
        if self.hang:
            self.waiting.set()
            await asyncio.Event().wait()

    async def aclose(self) -> None:
        self.closed = True


def streamed(stream: ScriptedStream) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)


async def test_a_read_error_mid_stream_ends_with_econnreset_after_the_content() -> None:
    """PROV-12: a read error after output -> error ECONNRESET (observable for the runtime)."""
    stream = ScriptedStream(sse(chunk({"content": "par"}), done=False), httpx.ReadError("reset"))
    events = await events_of(compatible(Server(streamed(stream))), request())
    assert events[0] == ProviderContentDelta(content=TextContent(text="par"))
    assert isinstance(events[-1], ProviderErrorEvent)
    assert events[-1].error.code == "ECONNRESET"
    assert stream.closed


# =========================================================================== PROV-4 abort, closing


async def test_abort_during_a_stalled_read_closes_the_response_and_raises() -> None:
    """PROV-4: abort stops reading, closes the HTTP response and raises the abort error."""
    stream = ScriptedStream(sse(chunk({"content": "a"}), done=False), hang=True)
    controller = AbortController()
    provider = compatible(Server(streamed(stream)))
    events = provider.generate(request(signal=controller.signal))
    assert await anext(events) == ProviderContentDelta(content=TextContent(text="a"))
    pending = asyncio.ensure_future(anext(events))
    await stream.waiting.wait()
    controller.abort(AbortError("user stop"))
    with pytest.raises(AbortError, match="user stop"):
        await asyncio.wait_for(pending, timeout=30)
    assert stream.closed
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0


async def test_abort_while_waiting_for_response_headers_raises_the_abort_error() -> None:
    """PROV-4: an abort during the HTTP request itself ends the attempt at once."""
    arrived = asyncio.Event()

    async def slow_handler(http_request: httpx.Request) -> httpx.Response:
        arrived.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")  # pragma: no cover

    controller = AbortController()
    provider = create_openai_compatible_provider(
        base_url=BASE_URL,
        api_key=KEY,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(slow_handler)),
    )
    pending = asyncio.ensure_future(events_of(provider, request(signal=controller.signal)))
    await arrived.wait()
    controller.abort()
    with pytest.raises(AbortError):
        await asyncio.wait_for(pending, timeout=30)


async def test_abort_from_inside_the_transport_leaves_no_stray_cancellation() -> None:
    """PROV-4: an abort raised synchronously inside the awaited call is honoured once the call
    returns, and the task carries no pending cancellation afterwards."""
    controller = AbortController()
    server = Server(text_stream("ok"))

    def handler(http_request: httpx.Request) -> httpx.Response:
        controller.abort()
        return server.handler(http_request)

    provider = create_openai_compatible_provider(
        base_url=BASE_URL,
        api_key=KEY,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
    )
    with pytest.raises(AbortError):
        await events_of(provider, request(signal=controller.signal))
    await asyncio.sleep(0)  # a leaked cancel request would raise CancelledError here
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0


async def test_an_already_aborted_signal_makes_no_http_call() -> None:
    """PROV-4: an aborted request raises before any HTTP call."""
    controller = AbortController()
    controller.abort()
    server = Server(text_stream("ok"))
    with pytest.raises(AbortError):
        await events_of(compatible(server), request(signal=controller.signal))
    assert server.requests == []


async def test_external_cancellation_is_not_turned_into_an_abort() -> None:
    """PROV-4: a task cancellation that did not come from the signal propagates unchanged."""
    stream = ScriptedStream(hang=True)
    controller = AbortController()
    provider = compatible(Server(streamed(stream)))

    async def consume() -> list[ProviderEvent]:
        return await events_of(provider, request(signal=controller.signal))

    task = asyncio.ensure_future(consume())
    await stream.waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert stream.closed


async def test_closing_the_event_iterator_releases_the_http_response() -> None:
    """RUN-15: aclose() on the provider's iterator closes the HTTP response at once."""
    stream = ScriptedStream(sse(chunk({"content": "a"}), chunk({"content": "b"}), done=False), hang=True)
    events = compatible(Server(streamed(stream))).generate(request())
    assert await anext(events) == ProviderContentDelta(content=TextContent(text="a"))
    await events.aclose()  # type: ignore[attr-defined]
    assert stream.closed


async def test_fold_of_an_error_stream_raises_the_provider_error() -> None:
    """CON-18 helper: an attempt ending in error raises ProviderTurnError with its info."""
    server = Server(httpx.Response(500, text="boom"))
    with pytest.raises(ProviderTurnError) as caught:
        await result_of(compatible(server), request())
    assert caught.value.info.code == 500


# =========================================================================== PROV-15 end to end


def _tool_round_server() -> Server:
    tool_turn = sse(
        chunk(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_w1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": '},
                    }
                ],
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
        chunk({}, "tool_calls"),
        chunk(usage={"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}, choices=False),
    )
    answer = sse(
        chunk({"content": "Sunny in Paris."}),
        chunk({}, "stop"),
        chunk(usage={"prompt_tokens": 40, "completion_tokens": 4, "total_tokens": 44}, choices=False),
    )
    return Server(sse_response(tool_turn), sse_response(answer))


async def test_a_session_run_with_one_tool_round_through_the_provider() -> None:
    """PROV-15: user, assistant(tool_call), tool, assistant persisted; results paired by id."""
    from prism.runtime.agent import create_agent

    seen: list[dict[str, Any]] = []

    def weather(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.append(arguments)
        return {"sky": "sunny"}

    server = _tool_round_server()
    agent = create_agent(
        model=ModelConfig(provider="openai-compatible", model="test-model"),
        provider=compatible(server),
        tools=[ToolDefinition(name="weather", execute=weather, parameters={"type": "object"})],
    )
    session = agent.create_session()
    result = await session.run("Weather in Paris?")
    assert result.status == "succeeded"
    assert seen == [{"city": "Paris"}]
    messages = [entry.message for entry in await session.entries() if entry.message is not None]
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1].content == (
        ToolCallContent(id="call_w1", name="weather", arguments={"city": "Paris"}),
    )
    assert messages[3].content == (TextContent(text="Sunny in Paris."),)
    second = server.body(1)["messages"]
    assert second[-2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_w1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    assert second[-1] == {"role": "tool", "tool_call_id": "call_w1", "content": '{"sky":"sunny"}'}
    assert result.usage is not None
    assert result.usage.total_tokens == 69


async def test_the_runtime_retries_a_429_before_any_output() -> None:
    """PROV-11, PROV-12, RETRY-1, RETRY-5: code 429 is transient; SDK retries stay off."""
    from prism.runtime.agent import create_agent

    busy = httpx.Response(429, headers={"retry-after": "0"}, json={"error": {"message": "slow"}})
    server = Server(busy, text_stream("Recovered."))
    agent = create_agent(
        model=ModelConfig(provider="openai-compatible", model="test-model"),
        provider=compatible(server),
    )
    result = await agent.create_session().run("hi")
    assert result.status == "succeeded"
    assert len(server.requests) == 2
    assert result.messages[-1].content == (TextContent(text="Recovered."),)


async def test_the_runtime_does_not_retry_a_400() -> None:
    """PROV-12, RETRY-5: 400 is not retried; the run error keeps code 400."""
    from prism.errors import AgentRunError
    from prism.runtime.agent import create_agent

    server = Server(httpx.Response(400, json={"error": {"message": "bad"}}))
    agent = create_agent(
        model=ModelConfig(provider="openai-compatible", model="test-model"),
        provider=compatible(server),
    )
    with pytest.raises(AgentRunError) as caught:
        await agent.create_session().run("hi")
    assert len(server.requests) == 1
    error = caught.value.result.error
    assert error is not None and error.code == 400
