"""Model fallback through the real ``anthropic`` and ``openai`` SDK adapters against local HTTP
servers (issue 21, items 4 and 5).

Each server is a plain HTTP/1.1 listener on ``127.0.0.1`` answering with scripted status lines
and Server-Sent-Event bodies written chunk by chunk, so the SDKs read a real socket: an Anthropic
stream that opens (``message_start``, as the real API's first event) and then sends
``event: error`` / ``overloaded_error``; an OpenAI-compatible stream whose first chunk carries
the role and some content and whose next chunk is an ``error`` object; plain ``503`` responses.

* FB-4: a provider whose stream opened and failed before any content delta is retried and then
  handed to the next provider; subscribers see exactly one ``message_started`` for the turn; the
  failed attempts are recorded (usage rows, ``provider_turn_finished`` events, the chat span)
  and leave no partial assistant message. After the first content delta nothing falls back.
* FB-5: when every provider tried fails, the error lists each one (provider id, model, status
  or error code, redacted message) and chains the last failure as its cause.
"""

from __future__ import annotations

import asyncio
import json
import traceback
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import prism
from prism.errors import AgentRunError, ProviderTurnError
from prism.events import MessageStartedEvent, ProviderTurnFinishedEvent
from prism.otel import OpenTelemetryTracing
from prism.providers import fallback
from prism.providers.anthropic import create_anthropic_provider
from prism.providers.openai import create_openai_compatible_provider
from prism.redaction import create_secret_redactor
from prism.retry import RetryOptions
from prism.testing import MemoryRunLedger
from prism.types import ModelConfig

pytest.importorskip("anthropic")
pytest.importorskip("openai")

CLAUDE = ModelConfig(provider="claude", model="claude-primary")
COMPATIBLE = ModelConfig(provider="backup", model="compatible-backup")
COMPATIBLE_THIRD = ModelConfig(provider="third", model="compatible-third")
TWO_TRIES = RetryOptions(max_attempts=2, base_delay_ms=0, jitter=0)
SECRET = "sk-live-fallback-http-0123456789"

_REASONS = {200: "OK", 400: "Bad Request", 503: "Service Unavailable"}


# --------------------------------------------------------------------------- the local server


@dataclass
class Reply:
    """One scripted HTTP response: status, content type and the body's chunks (each written
    and flushed on its own)."""

    status: int
    content_type: str
    chunks: tuple[bytes, ...]


@dataclass
class LocalServer:
    """An HTTP/1.1 server on ``127.0.0.1``: replies in order (the last one repeats) and records
    each request's path and JSON body. Every reply closes its connection."""

    replies: list[Reply]
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    url: str = ""
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> LocalServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def close(self) -> None:
        """Stop listening and let the replies still being written finish."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        if self._handlers:
            await asyncio.wait(self._handlers, timeout=5)

    @property
    def models(self) -> list[str]:
        return [body.get("model", "") for _, body in self.requests]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            path = head[0].split(" ")[1]
            headers = dict(
                (name.strip().lower(), value.strip())
                for name, value in (line.split(":", 1) for line in head[1:] if ":" in line)
            )
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.requests.append((path, json.loads(body or b"{}")))
            reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
            status_line = f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}\r\n"
            writer.write(
                (
                    status_line
                    + f"content-type: {reply.content_type}\r\n"
                    + "cache-control: no-cache\r\nconnection: close\r\n\r\n"
                ).encode()
            )
            for chunk in reply.chunks:
                writer.write(chunk)
                await writer.drain()
                await asyncio.sleep(0.005)  # each chunk reaches the client on its own
        except ConnectionError:
            pass  # the client stopped reading (a failed stream is closed at once)
        finally:
            writer.close()


def sse(event: str | None, data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    return ((f"event: {event}\n" if event else "") + f"data: {text}\n\n").encode()


def anthropic_opens_then_overloaded(message_id: str, message: str = "Overloaded") -> Reply:
    """The real API's shape of an overload after the stream opened: ``message_start`` (with the
    input usage), then ``event: error`` with ``overloaded_error``."""
    start = {
        "type": "message_start",
        "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": "claude-primary",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 21, "output_tokens": 1},
        },
    }
    error = {"type": "error", "error": {"type": "overloaded_error", "message": message}}
    return Reply(200, "text/event-stream", (sse("message_start", start), sse("error", error)))


def compatible_answer(text: str) -> Reply:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        body = {
            "id": "chatcmpl-backup", "object": "chat.completion.chunk", "created": 1,
            "model": "compatible-backup",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra,
        }
        return sse(None, body)

    return Reply(
        200,
        "text/event-stream",
        (
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": text}),
            chunk({}, "stop", usage={"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}),
            sse(None, "[DONE]"),
        ),
    )


def compatible_content_then_error(content: str) -> Reply:
    """A 200 stream whose first chunk carries the role and some content, then an error object."""
    first = {
        "id": "chatcmpl-partial", "object": "chat.completion.chunk", "created": 1,
        "model": "compatible-backup",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": content}, "finish_reason": None}],
    }
    error = {"error": {"message": "upstream overloaded", "type": "server_error", "code": 503}}
    return Reply(200, "text/event-stream", (sse(None, first), sse(None, error)))


def status_503(message: str) -> Reply:
    body = json.dumps({"error": {"message": message, "type": "server_error"}}).encode()
    return Reply(503, "application/json", (body,))


def anthropic(server: LocalServer, id: str) -> Any:
    return create_anthropic_provider(api_key="sk-ant-test", base_url=server.url, id=id)


def compatible(server: LocalServer, id: str) -> Any:
    return create_openai_compatible_provider(base_url=server.url, api_key="sk-test", id=id)


@asynccontextmanager
async def servers(*replies: list[Reply]) -> AsyncIterator[list[LocalServer]]:
    started = [await LocalServer(list(r)).start() for r in replies]
    try:
        yield started
    finally:
        for server in started:
            await server.close()


async def run_subscribed(agent: prism.Agent) -> tuple[Any, list[Any], list[Any]]:
    events: list[Any] = []
    session = agent.create_session(on_event=events.append)
    subscription = session.subscribe()
    try:
        result: Any = await session.run("hi")
    except AgentRunError as exc:
        result = exc
    return result, events, [e async for e in subscription]


def starts(events: list[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, MessageStartedEvent)]


# --------------------------------------------------------------------------- FB-4


async def test_fallback_before_first_delta_anthropic_stream_opened_then_overloaded_fb_4() -> None:
    async with servers(
        [anthropic_opens_then_overloaded("msg_primary")], [compatible_answer("from the backup")]
    ) as (primary, backup):
        ledger = MemoryRunLedger()
        exporter = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
        agent = prism.create_agent(
            model=CLAUDE,
            provider=fallback(anthropic(primary, "claude"), (compatible(backup, "backup"), COMPATIBLE)),
            retry=TWO_TRIES,
            run_ledger=ledger,
            tracing=OpenTelemetryTracing(tracer_provider=tracer_provider),
        )
        result, events, subscribed = await run_subscribed(agent)
        assert isinstance(result, prism.RunResult), result
        assert result.text == "from the backup"
        # the opened stream was retried, then the backup was asked for its own model
        assert [path for path, _ in primary.requests] == ["/v1/messages"] * 2
        assert primary.models == ["claude-primary"] * 2 and backup.models == ["compatible-backup"]
        finished = [e for e in events if isinstance(e, ProviderTurnFinishedEvent)]
        assert [(f.metadata.provider_id, f.error.code if f.error else None) for f in finished] == [
            ("claude", "overloaded_error"), ("claude", "overloaded_error"), ("backup", None)
        ]
        # exactly one message_started for the turn reaches on_event and a subscription
        for seen in (events, subscribed):
            assert len(starts(seen)) == 1 and starts(seen)[0].message.id != "msg_primary"
        assistant = [m for m in result.messages if m.role == "assistant"]
        assert len(assistant) == 1 and assistant[0].id != "msg_primary"
        # the failed attempts are recorded: their input usage on the primary's rows
        rows = [r for r in ledger.usage if r.scope == "provider_turn"]
        assert [(r.provider_id, r.model, r.attempt, r.usage.input_tokens) for r in rows] == [
            ("claude", "claude-primary", 1, 21),
            ("claude", "claude-primary", 2, 21),
            ("backup", "compatible-backup", 1, 9),
        ]
        assert not [e for e in starts([r.event for r in ledger.events]) if e.message.id == "msg_primary"]
        failed, served = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
        failed_attrs = dict(failed.attributes or {})
        assert failed.name == "chat claude-primary" and failed_attrs["error.type"] == "overloaded_error"
        assert "gen_ai.response.id" not in failed_attrs  # no id of a message that never came
        assert dict(served.attributes or {})["gen_ai.provider.name"] == "backup"


async def test_no_fallback_after_the_first_content_delta_http_fb_4() -> None:
    async with servers(
        [anthropic_opens_then_overloaded("msg_primary")],
        [compatible_content_then_error("Par")],
        [compatible_answer("never")],
    ) as (primary, backup, third):
        agent = prism.create_agent(
            model=CLAUDE,
            provider=fallback(
                anthropic(primary, "claude"),
                (compatible(backup, "backup"), COMPATIBLE),
                (compatible(third, "third"), COMPATIBLE_THIRD),
            ),
            retry=TWO_TRIES,
        )
        result, events, subscribed = await run_subscribed(agent)
        assert isinstance(result, AgentRunError)
        # the primary fell back before any delta; the backup streamed "Par": no retry, no third
        assert (len(primary.requests), len(backup.requests), len(third.requests)) == (2, 1, 0)
        error = result.result.error
        assert error is not None and error.code == 503 and "upstream overloaded" in error.message
        for seen in (events, subscribed):
            assert len(starts(seen)) == 1
            assert [e.content.text for e in seen if e.type == "message_delta"] == ["Par"]


# --------------------------------------------------------------------------- FB-5


async def test_all_failed_error_lists_every_provider_http_fb_5() -> None:
    from prism.types import ProviderFailure  # new with FB-5

    async with servers(
        [status_503(f"no capacity (key {SECRET})")],
        [anthropic_opens_then_overloaded("msg_b", f"Overloaded for {SECRET}")],
    ) as (primary, backup):
        agent = prism.create_agent(
            model=COMPATIBLE,
            provider=fallback(compatible(primary, "backup"), (anthropic(backup, "claude"), CLAUDE)),
            retry=TWO_TRIES,
            redactor=create_secret_redactor([SECRET]),
        )
        result, _, _ = await run_subscribed(agent)
        assert isinstance(result, AgentRunError)
        error = result.result.error
        assert error is not None and error.providers is not None
        assert [(p.provider_id, p.model, p.code, p.attempts) for p in error.providers] == [
            ("backup", "compatible-backup", 503, 2),
            ("claude", "claude-primary", "overloaded_error", 2),
        ]
        first, last = error.providers
        assert "no capacity (key [REDACTED])" in first.message
        assert last == ProviderFailure(
            "claude", "claude-primary", "Overloaded for [REDACTED]", "overloaded_error", attempts=2
        )
        assert error.code == "overloaded_error"
        assert "backup (compatible-backup) 503: " in error.message
        assert "claude (claude-primary) overloaded_error: Overloaded for [REDACTED]" in error.message
        cause = result.__cause__
        assert isinstance(cause, ProviderTurnError) and cause.failures == error.providers
        assert isinstance(cause.__cause__, ProviderTurnError)
        assert cause.__cause__.info.code == "overloaded_error"
        assert SECRET not in "".join(traceback.format_exception(result))
