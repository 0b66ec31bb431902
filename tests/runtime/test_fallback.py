"""Model fallback (``prism.providers.fallback``) through the real ``openai`` SDK on an
``httpx.MockTransport``: a primary that answers 503 past its retry budget hands the turn to the
secondary (recorded in events, the ledger and the trace); a primary that fails mid-stream, a
non-transient 400 and an aborted run never fall back."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import prism
from prism.errors import AgentRunError, PrismConfigError
from prism.events import ProviderTurnFinishedEvent, ProviderTurnStartedEvent, RetryScheduledEvent
from prism.otel import OpenTelemetryTracing
from prism.providers import FallbackPolicy, fallback
from prism.providers.base import provider_done, provider_text_delta
from prism.providers.mock import create_mock_provider
from prism.providers.openai import create_openai_compatible_provider
from prism.retry import RetryOptions
from prism.testing import MemoryRunLedger
from prism.types import ErrorInfo, ModelConfig

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
    assert served_attrs["gen_ai.response.model"] == "small-model"
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
