"""Model fallback (``prism.providers.fallback``) through the real ``openai`` SDK on an
``httpx.MockTransport``: a primary that answers 503 past its retry budget hands the turn to the
secondary (recorded in events, the ledger and the trace); a primary that fails mid-stream, a
non-transient 400 and an aborted run never fall back.

Issue 21 with the scripted mock provider (FB-4, FB-5): a stream that opened (a message start)
and failed before its first content, thinking or tool-call delta is retried and falls back, with
one ``message_started`` per turn; after the first delta nothing falls back; when every provider
tried fails, the error lists each one and chains the last failure as its cause. The same through
the real SDK adapters and local HTTP servers: ``tests/providers/test_fallback_http.py``."""

from __future__ import annotations

import asyncio
import json
import traceback
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import prism
from prism.errors import AgentRunError, PrismConfigError, ProviderTurnError
from prism.events import (
    ErrorEvent,
    MessageStartedEvent,
    ProviderTurnFinishedEvent,
    ProviderTurnStartedEvent,
    RetryScheduledEvent,
)
from prism.otel import OpenTelemetryTracing
from prism.providers import FallbackPolicy, fallback
from prism.providers.base import (
    provider_done,
    provider_error,
    provider_message_start,
    provider_text_delta,
    provider_thinking_delta,
    provider_tool_call_delta,
    provider_usage,
)
from prism.providers.mock import create_mock_provider
from prism.providers.openai import create_openai_compatible_provider
from prism.redaction import create_secret_redactor
from prism.retry import RetryOptions
from prism.testing import MemoryRunLedger
from prism.types import ErrorInfo, ModelConfig, TextContent, Usage

PRIMARY_MODEL = ModelConfig(provider="openai-compatible", model="big-model")
BACKUP_MODEL = ModelConfig(provider="openai-compatible", model="small-model")
NO_WAIT = RetryOptions(base_delay_ms=0, jitter=0)  # 3 attempts per provider, no delay


class Server:
    """A scripted chat-completions server; records the model each request asked for."""

    def __init__(self, *responses: Callable[[], httpx.Response]) -> None:
        self.responses = list(responses)
        self.models: list[str] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.models.append(json.loads(request.content)["model"])
        make = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        return make()

    def provider(self, id: str) -> Any:
        return create_openai_compatible_provider(
            base_url="http://llm.test/v1",
            api_key="sk-test",
            id=id,
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(self.handler)),
        )


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> str:
    body: dict[str, Any] = {
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n"


def answer(text: str) -> Callable[[], httpx.Response]:
    body = (
        _chunk({"role": "assistant", "content": ""})
        + _chunk({"content": text})
        + _chunk({}, "stop", {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9})
        + "data: [DONE]\n\n"
    )
    return lambda: httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=body.encode()
    )


def status(code: int, message: str) -> Callable[[], httpx.Response]:
    return lambda: httpx.Response(code, json={"error": {"message": message, "type": "x"}})


def breaks_mid_stream() -> httpx.Response:
    """A 200 stream that sends one text delta, then the connection drops."""

    async def body() -> AsyncIterator[bytes]:
        yield (_chunk({"role": "assistant", "content": ""}) + _chunk({"content": "Par"})).encode()
        raise httpx.ReadError("connection reset by peer")

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())


def agent_with(primary: Any, backup: Any, **options: Any) -> prism.Agent:
    return prism.create_agent(
        model=PRIMARY_MODEL,
        provider=fallback(primary, (backup, BACKUP_MODEL)),
        retry=NO_WAIT,
        **options,
    )


async def run_collect(agent: prism.Agent, text: str = "hi") -> tuple[Any, list[Any]]:
    events: list[Any] = []
    session = agent.create_session(on_event=events.append)
    try:
        result: Any = await session.run(text)
    except AgentRunError as exc:
        result = exc
    return result, events


async def test_primary_503_after_its_retries_then_the_secondary_serves() -> None:
    primary, backup = Server(status(503, "overloaded")), Server(answer("from the backup"))
    ledger = MemoryRunLedger()
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = agent_with(
        primary.provider("primary-llm"),
        backup.provider("backup-llm"),
        run_ledger=ledger,
        tracing=OpenTelemetryTracing(tracer_provider=tracer_provider),
    )
    assert agent.config.model is PRIMARY_MODEL  # the agent's model is the primary's
    result, events = await run_collect(agent)
    assert result.status == "succeeded" and result.text == "from the backup"
    # the primary got the whole retry budget, the backup was asked for its own model
    assert primary.models == ["big-model"] * 3
    assert backup.models == ["small-model"]
    started = [e.metadata for e in events if isinstance(e, ProviderTurnStartedEvent)]
    assert [(m.provider_id, m.model.model, m.attempt) for m in started] == [
        ("primary-llm", "big-model", 1),
        ("primary-llm", "big-model", 2),
        ("primary-llm", "big-model", 3),
        ("backup-llm", "small-model", 1),
    ]
    assert sum(isinstance(e, RetryScheduledEvent) for e in events) == 2  # the primary's retries
    finished = [e for e in events if isinstance(e, ProviderTurnFinishedEvent)]
    assert [f.error.code if f.error else None for f in finished] == [503, 503, 503, None]
    served = finished[-1]
    assert (served.metadata.provider_id, served.metadata.model.model) == ("backup-llm", "small-model")
    assert served.usage is not None and served.usage.output_tokens == 2
    # the run record: usage rows name the provider and model that produced them
    rows = [r for r in ledger.usage if r.scope == "provider_turn"]
    assert [(r.provider_id, r.model, r.usage.output_tokens) for r in rows] == [
        ("backup-llm", "small-model", 2)
    ]
    stored = [r.event for r in ledger.events if isinstance(r.event, ProviderTurnFinishedEvent)]
    assert stored[-1].metadata.provider_id == "backup-llm"
    # the trace: a failed chat span on the primary (its three attempts as events), then the
    # backup's chat span
    failed, served_span = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    failed_attrs, served_attrs = dict(failed.attributes or {}), dict(served_span.attributes or {})
    assert failed.name == "chat big-model" and served_span.name == "chat small-model"
    assert failed_attrs["gen_ai.provider.name"] == "primary-llm"
    assert failed_attrs["error.type"] == "503" and len(failed.events) == 5  # 3 attempts, 2 retries
    assert served_attrs["gen_ai.provider.name"] == "backup-llm"
    assert served_attrs["gen_ai.request.model"] == "small-model"
    assert served_attrs["gen_ai.response.model"] == "m"  # what the backup's response names
    assert served_attrs["gen_ai.usage.output_tokens"] == 2
    assert "error.type" not in served_attrs


async def test_every_turn_starts_with_the_primary_again() -> None:
    primary = Server(status(503, "down"), status(503, "down"), status(503, "down"), answer("primary back"))
    backup = Server(answer("backup"))
    agent = agent_with(primary.provider("primary-llm"), backup.provider("backup-llm"))
    session = agent.create_session()
    first = await session.run("one")
    second = await session.run("two")
    assert (first.text, second.text) == ("backup", "primary back")
    assert primary.models == ["big-model"] * 4 and backup.models == ["small-model"]


async def test_primary_failing_mid_stream_does_not_fall_back() -> None:
    primary, backup = Server(breaks_mid_stream), Server(answer("never"))
    result, events = await run_collect(agent_with(primary.provider("p"), backup.provider("b")))
    assert isinstance(result, AgentRunError)
    error = result.result.error
    assert error is not None and error.code == "ECONNRESET"  # a code the policy names...
    assert backup.models == []  # ...but a delta was already streamed: the error surfaces
    assert primary.models == ["big-model"]  # and a streamed attempt is not retried either


async def test_non_transient_400_does_not_fall_back() -> None:
    primary, backup = Server(status(400, "unknown parameter")), Server(answer("never"))
    result, _ = await run_collect(agent_with(primary.provider("p"), backup.provider("b")))
    assert isinstance(result, AgentRunError)
    assert result.result.error is not None and result.result.error.code == 400
    assert primary.models == ["big-model"] and backup.models == []


async def test_an_aborted_run_does_not_fall_back() -> None:
    slow = create_mock_provider(events=[provider_text_delta("slow"), provider_done()], delay_s=5)
    backup = create_mock_provider(events=[provider_text_delta("never"), provider_done()])
    agent = prism.create_agent(
        model={"provider": "mock", "model": "demo"},
        provider=fallback(slow, (backup, {"provider": "mock", "model": "backup"})),
        retry=NO_WAIT,
    )
    controller = prism.AbortController()
    task = asyncio.ensure_future(agent.create_session().run("hi", signal=controller.signal))
    await asyncio.sleep(0.05)
    controller.abort("host stopped it")
    with pytest.raises(AgentRunError) as caught:
        await task
    assert caught.value.result.status == "aborted"
    assert backup.call_count == 0


async def test_a_custom_policy_decides() -> None:
    primary, backup = Server(status(400, "context too long")), Server(answer("backup"))
    policy = FallbackPolicy(when=lambda error: "context" in error.message)
    agent = prism.create_agent(
        model=PRIMARY_MODEL,
        provider=fallback(
            primary.provider("p"), (backup.provider("b"), BACKUP_MODEL), policy=policy
        ),
        retry=NO_WAIT,
    )
    result, _ = await run_collect(agent)
    assert result.text == "backup" and primary.models == ["big-model"]


def test_fallback_configuration_errors() -> None:
    mock = create_mock_provider(events=[provider_done()])
    with pytest.raises(PrismConfigError, match="at least one"):
        fallback(mock)
    with pytest.raises(PrismConfigError, match="provider"):
        fallback(mock, (object(), BACKUP_MODEL))  # type: ignore[arg-type]
    with pytest.raises(PrismConfigError, match="ModelConfig"):
        fallback(mock, (mock, "small-model"))  # type: ignore[arg-type]
    with pytest.raises(PrismConfigError, match="itself a fallback chain"):
        fallback(fallback(mock, (mock, BACKUP_MODEL)), (mock, BACKUP_MODEL))
    chain = fallback(mock, (mock, {"provider": "mock", "model": "b"}))
    assert chain.id == "mock" and chain.fallbacks[0].model.model == "b"
    assert FallbackPolicy().applies(ErrorInfo(code=503, message="x"))
    assert not FallbackPolicy().applies(ErrorInfo(code=400, message="x"))


# --------------------------------------------------------------------------- issue 21, items 4-5
# A stream that opens (a message start: a real provider's first chunk) and fails before any
# content, thinking or tool-call delta is still retried and handed to a fallback; subscribers see
# one ``message_started`` per turn (held until the first delta). When every provider tried fails,
# the error lists each one with its code and message, the last failure as the cause.

MOCK_PRIMARY = ModelConfig(provider="mock", model="big-model")
MOCK_BACKUP = {"provider": "mock", "model": "small-model"}
MOCK_THIRD = {"provider": "mock", "model": "tiny-model"}
SECRET = "sk-live-fallback-0123456789"


def opens_then_fails(message_id: str, code: int | str = 503, message: str = "overloaded") -> list[Any]:
    """A stream that opens (message start, its input usage) and fails before any delta."""
    return [
        provider_message_start(message_id),
        provider_usage(Usage(input_tokens=12)),
        provider_error(ErrorInfo(message=message, code=code, name="ProviderStreamError")),
    ]


def mock_chain(*providers: Any, **options: Any) -> prism.Agent:
    models = (MOCK_BACKUP, MOCK_THIRD)
    return prism.create_agent(
        model=MOCK_PRIMARY,
        provider=fallback(providers[0], *zip(providers[1:], models, strict=False)),
        retry=NO_WAIT,
        **options,
    )


async def run_subscribed(agent: prism.Agent) -> tuple[Any, list[Any], list[Any]]:
    """Run once; return the outcome, the ``on_event`` events and a subscription's events."""
    events: list[Any] = []
    session = agent.create_session(on_event=events.append)
    subscription = session.subscribe()
    try:
        result: Any = await session.run("hi")
    except AgentRunError as exc:
        result = exc
    return result, events, [e async for e in subscription]


def message_started(events: list[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, MessageStartedEvent)]


async def test_fallback_before_first_delta_after_a_message_start_fb_4() -> None:
    primary = create_mock_provider(id="primary-llm", events=opens_then_fails("msg_primary"))
    backup = create_mock_provider(
        id="backup-llm",
        events=[
            provider_message_start("msg_backup"),
            provider_text_delta("from the backup"),
            provider_done(Usage(input_tokens=7, output_tokens=3)),
        ],
    )
    ledger = MemoryRunLedger()
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = mock_chain(
        primary,
        backup,
        run_ledger=ledger,
        tracing=OpenTelemetryTracing(tracer_provider=tracer_provider),
    )
    result, events, subscribed = await run_subscribed(agent)
    assert isinstance(result, prism.RunResult) and result.text == "from the backup"
    # the opened primary was retried (its whole budget), then the backup served
    assert (primary.call_count, backup.call_count) == (3, 1)
    finished = [e for e in events if isinstance(e, ProviderTurnFinishedEvent)]
    assert [(f.metadata.provider_id, f.error.code if f.error else None) for f in finished] == [
        ("primary-llm", 503), ("primary-llm", 503), ("primary-llm", 503), ("backup-llm", None)
    ]
    # one message_started for the turn, the backup's, ahead of its delta; no partial message
    for seen in (events, subscribed):
        starts = message_started(seen)
        assert [s.message.id for s in starts] == ["msg_backup"]
        kinds = [e.type for e in seen]
        assert kinds.index("message_started") > kinds.index("provider_turn_started")
        assert kinds.index("message_started") < kinds.index("message_delta")
    assistant = [m for m in result.messages if m.role == "assistant"]
    assert [(m.id, m.content) for m in assistant] == [("msg_backup", (TextContent("from the backup"),))]
    # the failed attempts are recorded as attempts: usage rows on the primary, their events
    rows = [r for r in ledger.usage if r.scope == "provider_turn"]
    assert [(r.provider_id, r.model, r.attempt, r.usage.input_tokens) for r in rows] == [
        ("primary-llm", "big-model", 1, 12),
        ("primary-llm", "big-model", 2, 12),
        ("primary-llm", "big-model", 3, 12),
        ("backup-llm", "small-model", 1, 7),
    ]
    assert result.usage.input_tokens == 3 * 12 + 7
    stored = [r.event for r in ledger.events]
    assert [s.message.id for s in message_started(stored)] == ["msg_backup"]
    # the trace: the primary's failed chat span carries no response id of its failed message
    failed, served = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    failed_attrs, served_attrs = dict(failed.attributes or {}), dict(served.attributes or {})
    assert failed_attrs["gen_ai.provider.name"] == "primary-llm"
    assert failed_attrs["error.type"] == "503"
    assert "gen_ai.response.id" not in failed_attrs
    assert len([e for e in failed.events if e.name == "prism.provider_attempt"]) == 3
    assert served_attrs["gen_ai.response.id"] == "msg_backup"


@pytest.mark.parametrize("answer_has_delta", [True, False], ids=["text", "no-delta"])
async def test_retry_before_first_delta_after_a_message_start_fb_4(answer_has_delta: bool) -> None:
    answer = [provider_message_start("msg_2")]
    if answer_has_delta:
        answer.append(provider_text_delta("second try"))
    provider = create_mock_provider(turns=[opens_then_fails("msg_1"), [*answer, provider_done()]])
    agent = prism.create_agent(model=MOCK_PRIMARY, provider=provider, retry=NO_WAIT)
    result, events, subscribed = await run_subscribed(agent)
    assert isinstance(result, prism.RunResult) and provider.call_count == 2
    assert result.text == ("second try" if answer_has_delta else "")
    for seen in (events, subscribed):
        assert [s.message.id for s in message_started(seen)] == ["msg_2"]  # held to its end
        kinds = [e.type for e in seen]
        assert kinds.count("message_finished") == 1
        assert kinds.index("message_started") < kinds.index("message_finished")
    assert sum(isinstance(e, RetryScheduledEvent) for e in events) == 1
    assert [m.id for m in result.messages if m.role == "assistant"] == ["msg_2"]


@pytest.mark.parametrize(
    "first_delta",
    [
        provider_text_delta("Par"),
        provider_thinking_delta("let me think"),
        provider_tool_call_delta(0, id="call_1", name="lookup", arguments_text='{"q":'),
    ],
    ids=["content", "thinking", "tool-call"],
)
async def test_no_fallback_after_the_first_delta_fb_4(first_delta: Any) -> None:
    primary = create_mock_provider(id="primary-llm", events=opens_then_fails("msg_primary"))
    backup = create_mock_provider(
        id="backup-llm",
        events=[
            provider_message_start("msg_backup"),
            first_delta,
            provider_error(ErrorInfo(message="overloaded mid-answer", code=503)),
        ],
    )
    third = create_mock_provider(id="third-llm", events=[provider_text_delta("never"), provider_done()])
    result, events, subscribed = await run_subscribed(mock_chain(primary, backup, third))
    assert isinstance(result, AgentRunError)
    # the primary fell back before its first delta; the backup streamed one: no retry, no third
    assert (primary.call_count, backup.call_count, third.call_count) == (3, 1, 0)
    error = result.result.error
    assert error is not None and error.code == 503 and "overloaded mid-answer" in error.message
    for seen in (events, subscribed):
        assert [s.message.id for s in message_started(seen)] == ["msg_backup"]


async def test_all_failed_error_lists_every_provider_fb_5() -> None:
    from prism.types import ProviderFailure  # new with FB-5

    primary = create_mock_provider(
        id="primary-llm", events=[provider_error(ErrorInfo(message="overloaded", code=503))]
    )
    backup = create_mock_provider(
        id="backup-llm", events=opens_then_fails("msg_b", 429, f"rate limited for key {SECRET}")
    )
    third = create_mock_provider(
        id="third-llm",
        events=[provider_error(ErrorInfo(message="upstream timed out", code="timeout", name="TimeoutError"))],
    )
    agent = mock_chain(primary, backup, third, redactor=create_secret_redactor([SECRET]))
    result, events, _ = await run_subscribed(agent)
    assert isinstance(result, AgentRunError)
    error = result.result.error
    assert error is not None
    assert error.providers == (
        ProviderFailure("primary-llm", "big-model", "overloaded", 503, attempts=3),
        ProviderFailure("backup-llm", "small-model", "rate limited for key [REDACTED]", 429, attempts=3),
        ProviderFailure("third-llm", "tiny-model", "upstream timed out", "timeout", attempts=3),
    )
    # the last failure names the error; the message names every provider with its code
    assert (error.code, error.name) == ("timeout", "TimeoutError")
    for text in (
        "primary-llm (big-model) 503: overloaded",
        "backup-llm (small-model) 429: rate limited for key [REDACTED]",
        "third-llm (tiny-model) timeout: upstream timed out",
    ):
        assert text in error.message and text in str(result)
    # the cause chain: the run error, the all-failed provider error, the last failure
    cause = result.__cause__
    assert isinstance(cause, ProviderTurnError) and cause.failures == error.providers
    last = cause.__cause__
    assert isinstance(last, ProviderTurnError) and not last.failures
    assert (last.info.code, last.info.message) == ("timeout", "upstream timed out")
    # redacted everywhere: the raised chain, the emitted error, the stored form
    assert SECRET not in "".join(traceback.format_exception(result))
    emitted = [e for e in events if isinstance(e, ErrorEvent)]
    assert [e.error for e in emitted] == [error]
    assert SECRET not in json.dumps(error.to_dict())
    assert ErrorInfo.from_dict(error.to_dict()) == error


async def test_a_single_provider_failure_lists_no_providers_fb_5() -> None:
    """Without a fallback the error stays the provider's own (nothing else was tried)."""
    primary = create_mock_provider(events=[provider_error(ErrorInfo(message="bad", code=400))])
    backup = create_mock_provider(events=[provider_text_delta("never"), provider_done()])
    result, _, _ = await run_subscribed(mock_chain(primary, backup))
    assert isinstance(result, AgentRunError)
    assert result.result.error == ErrorInfo(message="bad", code=400)
    assert isinstance(result.__cause__, ProviderTurnError) and result.__cause__.failures == ()
