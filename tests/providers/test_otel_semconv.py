"""Chat spans follow the GenAI semantic conventions (issue 21, item 21): ``gen_ai.response.
finish_reasons`` carries the conventions' values (``stop``, ``length``, ``content_filter``,
``tool_call``, ``error``), not prism's stop reasons, and ``gen_ai.response.model`` is the model
the response names. Through the real ``openai`` and ``anthropic`` SDK adapters (an ``httpx``
mock transport answering as the APIs do) and the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import prism
from prism.errors import AgentRunError
from prism.otel import OpenTelemetryTracing

pytest.importorskip("openai")
pytest.importorskip("anthropic")


@prism.tool
def lookup(q: str) -> str:
    """Look a word up."""
    return q.upper()


def _sse(data: Any, event: str | None = None) -> str:
    return (f"event: {event}\n" if event else "") + f"data: {json.dumps(data)}\n\n"


def _openai_turn(finish: str, *, call: bool = False) -> str:
    def chunk(delta: dict[str, Any], reason: str | None = None) -> str:
        return _sse({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-demo-2025-01-01",  # the dated snapshot of the requested "gpt-demo"
            "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
        })

    if call:
        delta = {"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                 "function": {"name": "lookup", "arguments": '{"q": "a"}'}}]}
    else:
        delta = {"content": "A"}
    return chunk({"role": "assistant"}) + chunk(delta) + chunk({}, finish) + "data: [DONE]\n\n"


def _anthropic_turn(stop: str) -> str:
    start = {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-demo-20250101",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1}}}
    return "".join((
        _sse(start, "message_start"),
        _sse({"type": "content_block_start", "index": 0,
              "content_block": {"type": "text", "text": ""}}, "content_block_start"),
        _sse({"type": "content_block_delta", "index": 0,
              "delta": {"type": "text_delta", "text": "A"}}, "content_block_delta"),
        _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        _sse({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
              "usage": {"output_tokens": 2}}, "message_delta"),
        _sse({"type": "message_stop"}, "message_stop"),
    ))


def _client(bodies: list[str | int], http: Any = httpx) -> Any:
    """An HTTP client (of the ``httpx`` family the SDK uses) whose requests get ``bodies`` in
    order: an SSE stream, or a status."""

    def handle(request: Any) -> Any:
        body = bodies.pop(0)
        if isinstance(body, int):
            return http.Response(body, json={"error": {"message": "overloaded", "type": "x"}})
        return http.Response(200, text=body, headers={"content-type": "text/event-stream"})

    return http.AsyncClient(transport=http.MockTransport(handle))


def _chats(exporter: InMemorySpanExporter) -> list[dict[str, Any]]:
    spans: tuple[ReadableSpan, ...] = exporter.get_finished_spans()
    return [dict(s.attributes or {}) for s in spans if s.name.startswith("chat ")]


def _traced() -> tuple[OpenTelemetryTracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OpenTelemetryTracing(tracer_provider=provider), exporter


async def _run(provider: Any, model: dict[str, Any], **options: Any) -> InMemorySpanExporter:
    tracing, exporter = _traced()
    agent = prism.create_agent(
        model=model, provider=provider, tools=[lookup], tracing=tracing, **options
    )
    try:
        await agent.create_session().run("define a")
    except AgentRunError:
        pass
    return exporter


async def test_openai_chat_spans_use_semconv_finish_reasons_and_the_response_model_i21_g() -> None:
    from prism.providers.openai import create_openai_compatible_provider

    build: Callable[[list[str | int]], Any] = lambda bodies: create_openai_compatible_provider(  # noqa: E731
        base_url="http://model.test/v1", auth_style="none", http_client=_client(bodies)
    )
    model = {"provider": "openai-compatible", "model": "gpt-demo"}
    exporter = await _run(
        build([_openai_turn("tool_calls", call=True), _openai_turn("length")]), model
    )
    first, second = _chats(exporter)
    assert first["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert second["gen_ai.response.finish_reasons"] == ("length",)
    for attrs in (first, second):
        assert attrs["gen_ai.request.model"] == "gpt-demo"
        assert attrs["gen_ai.response.model"] == "gpt-demo-2025-01-01"

    exporter = await _run(build([_openai_turn("stop")]), model)
    assert _chats(exporter)[0]["gen_ai.response.finish_reasons"] == ("stop",)

    exporter = await _run(build([_openai_turn("content_filter")]), model)
    assert _chats(exporter)[0]["gen_ai.response.finish_reasons"] == ("content_filter",)

    # a turn that failed (every attempt): "error"
    exporter = await _run(build([503]), model, retry=False)
    (failed,) = _chats(exporter)
    assert failed["gen_ai.response.finish_reasons"] == ("error",)


async def test_anthropic_chat_spans_use_semconv_finish_reasons_and_the_response_model_i21_g() -> None:
    from prism.providers.anthropic import create_anthropic_provider

    model = {"provider": "anthropic", "model": "claude-demo"}
    for stop, expected in (("end_turn", "stop"), ("max_tokens", "length"),
                           ("refusal", "content_filter"), ("stop_sequence", "stop")):
        provider = create_anthropic_provider(
            api_key="sk-ant-test", base_url="http://model.test/v1",
            http_client=_client([_anthropic_turn(stop)], pytest.importorskip("httpx2")),
        )
        (attrs,) = _chats(await _run(provider, model))
        assert attrs["gen_ai.response.finish_reasons"] == (expected,), stop
        assert attrs["gen_ai.request.model"] == "claude-demo"
        assert attrs["gen_ai.response.model"] == "claude-demo-20250101"
