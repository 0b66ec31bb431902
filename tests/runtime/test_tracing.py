"""OpenTelemetry GenAI tracing of runs, asserted on the SDK's in-memory span exporter: the span
tree and attributes of a 3-turn tool run, a failed run, an artifact-loop run with a revision and a
suspended-and-resumed durable run; content capture and its redaction; tracing off does nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import prism
from prism.artifacts import json_schema_artifact
from prism.errors import AgentRunError, PrismConfigError
from prism.otel import OpenTelemetryTracing, instrument, uninstrument
from prism.providers.base import (
    provider_done,
    provider_error,
    provider_text_delta,
    provider_tool_call,
)
from prism.providers.mock import create_mock_provider
from prism.redaction import create_secret_redactor
from prism.retry import RetryOptions
from prism.testing import MemoryCheckpointStore, MemorySessionStore
from prism.tracing import TracedRun, default_tracer, set_default_tracer
from prism.types import ErrorInfo, Usage

MODEL = {"provider": "mock", "model": "demo-1", "parameters": {"temperature": 0.2}}


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    HOST.append(provider)
    yield provider, exporter
    HOST.remove(provider)
    provider.shutdown()


def by_name(finished: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in finished if s.name == name]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


HOST: list[TracerProvider] = []
"""The tracer provider of the running test, for the tools' own spans."""


@prism.tool
async def lookup(q: str) -> str:
    """Look a word up."""
    # the tool's own spans nest under its execute_tool span
    current = trace.get_current_span()
    assert getattr(current, "name", None) == "execute_tool lookup"
    with HOST[-1].get_tracer("host-http").start_as_current_span("GET /dictionary"):
        return q.upper()


def three_turns() -> list[list[Any]]:
    return [
        [provider_tool_call("c1", "lookup", {"q": "a"}), provider_done(Usage(input_tokens=10, output_tokens=3), "tool_use")],
        [provider_tool_call("c2", "lookup", {"q": "b"}), provider_done(Usage(input_tokens=20, output_tokens=4), "tool_use")],
        [provider_text_delta("A and B"), provider_done(Usage(input_tokens=30, output_tokens=5), "end_turn")],
    ]


async def test_three_turn_tool_run_span_tree_and_attributes(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tp, exporter = spans
    agent = prism.create_agent(
        model=MODEL,
        name="lexicon",
        id="lexicon-1",
        provider=create_mock_provider(turns=three_turns()),
        tools=[lookup],
        tracing=OpenTelemetryTracing(tracer_provider=tp),
    )
    session = agent.create_session()
    with tp.get_tracer("host").start_as_current_span("POST /ask") as host:
        result = await session.run("define a and b")
    assert result.status == "succeeded"
    finished = exporter.get_finished_spans()

    (invoke,) = by_name(finished, "invoke_agent lexicon")
    chats = by_name(finished, "chat demo-1")
    tools = by_name(finished, "execute_tool lookup")
    assert len(chats) == 3 and len(tools) == 2
    # the tree: host → invoke_agent → chat ×3 and execute_tool ×2 (in turn order)
    assert parent_of(invoke) == host.get_span_context().span_id
    assert {parent_of(s) for s in chats + tools} == {invoke.context.span_id}
    assert {s.context.trace_id for s in finished} == {host.get_span_context().trace_id}
    order = sorted(chats + tools, key=lambda s: s.start_time or 0)
    assert [s.name.split()[0] for s in order] == ["chat", "execute_tool", "chat", "execute_tool", "chat"]

    assert invoke.kind is trace.SpanKind.INTERNAL
    assert dict(invoke.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "mock",
        "gen_ai.request.model": "demo-1",
        "gen_ai.conversation.id": session.id,
        "gen_ai.agent.name": "lexicon",
        "gen_ai.agent.id": "lexicon-1",
        "prism.run_id": result.run_id,
        "prism.loop.name": "single-shot",
        "prism.run.status": "succeeded",
        "prism.stop_reason": "completed",
        "prism.revision_count": 0,
        "gen_ai.usage.input_tokens": 60,
        "gen_ai.usage.output_tokens": 12,
    }
    first = chats[0]
    assert first.kind is trace.SpanKind.CLIENT
    attrs = dict(first.attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "mock"
    assert attrs["gen_ai.request.model"] == attrs["gen_ai.response.model"] == "demo-1"
    assert attrs["gen_ai.request.temperature"] == 0.2
    assert attrs["gen_ai.usage.input_tokens"] == 10 and attrs["gen_ai.usage.output_tokens"] == 3
    assert attrs["gen_ai.response.finish_reasons"] == ("tool_call",)  # the conventions' value
    assert attrs["gen_ai.conversation.id"] == session.id and attrs["prism.turn"] == 1
    assert dict(chats[2].attributes or {})["gen_ai.response.finish_reasons"] == ("stop",)
    assert [e.name for e in first.events] == ["prism.provider_attempt"]

    tool_attrs = dict(tools[0].attributes or {})
    assert tool_attrs["gen_ai.operation.name"] == "execute_tool"
    assert tool_attrs["gen_ai.tool.name"] == "lookup" and tool_attrs["gen_ai.tool.call.id"] == "c1"
    assert tool_attrs["gen_ai.tool.type"] == "function"
    assert tool_attrs["prism.tool.status"] == "finished"
    assert tools[0].status.status_code is StatusCode.UNSET
    # the tool's own span is a child of its execute_tool span
    http = by_name(finished, "GET /dictionary")
    assert [parent_of(s) for s in http] == [t.context.span_id for t in tools]
    # content is off by default
    for span in finished:
        keys = set(span.attributes or {})
        assert not keys & {"gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}


async def test_content_capture_is_redacted(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    tp, exporter = spans
    turns = [
        [provider_tool_call("c1", "lookup", {"q": "sk-SECRET"}), provider_done(None, "tool_use")],
        [provider_text_delta("the key sk-SECRET is "), provider_text_delta("fine"), provider_done()],
    ]
    agent = prism.create_agent(
        model=MODEL,
        provider=create_mock_provider(turns=turns),
        tools=[lookup],
        redactor=create_secret_redactor(["sk-SECRET"]),
        tracing=OpenTelemetryTracing(
            tracer_provider=tp, capture_content=True, redactor=create_secret_redactor(["fine"])
        ),
    )
    await agent.create_session().run("go")
    finished = exporter.get_finished_spans()
    chats = by_name(finished, "chat demo-1")
    (tool,) = by_name(finished, "execute_tool lookup")
    text = json.dumps([dict(s.attributes or {}) for s in finished])
    assert "sk-SECRET" not in text and "fine" not in text
    output = json.loads(str(dict(chats[1].attributes or {})["gen_ai.output.messages"]))
    assert output[0]["role"] == "assistant" and output[0]["parts"][0]["type"] == "text"
    assert "[REDACTED]" in output[0]["parts"][0]["content"]
    first = json.loads(str(dict(chats[0].attributes or {})["gen_ai.output.messages"]))
    assert first[0]["parts"][0]["type"] == "tool_call" and first[0]["finish_reason"] == "tool_call"
    assert "gen_ai.tool.call.arguments" in dict(tool.attributes or {})
    assert "gen_ai.tool.call.result" in dict(tool.attributes or {})


async def test_failed_run_sets_error_status(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    tp, exporter = spans
    turns = [
        [provider_error(ErrorInfo(code=503, message="unavailable"))],
        [provider_error(ErrorInfo(code=400, message="bad request: no such model"))],
    ]
    agent = prism.create_agent(
        model=MODEL,
        provider=create_mock_provider(turns=turns),
        retry=RetryOptions(base_delay_ms=0, jitter=0),
        tracing=OpenTelemetryTracing(tracer_provider=tp),
    )
    with pytest.raises(AgentRunError):
        await agent.create_session().run("go")
    finished = exporter.get_finished_spans()
    (invoke,) = by_name(finished, "invoke_agent")
    (chat,) = by_name(finished, "chat demo-1")
    assert invoke.status.status_code is StatusCode.ERROR
    assert invoke.status.description == "bad request: no such model"
    attrs = dict(invoke.attributes or {})
    assert attrs["error.type"] == "400" and attrs["prism.run.status"] == "failed"
    assert attrs["prism.stop_reason"] == "400"
    assert chat.status.status_code is StatusCode.ERROR
    assert dict(chat.attributes or {})["error.type"] == "400"
    # the two attempts and the retry between them are events of the one chat span
    assert [e.name for e in chat.events] == [
        "prism.provider_attempt", "prism.retry_scheduled", "prism.provider_attempt"
    ]
    first, _, second = chat.events
    assert dict(first.attributes or {})["error.type"] == "503"
    assert dict(first.attributes or {})["http.response.status_code"] == 503
    assert dict(second.attributes or {})["prism.attempt"] == 2


async def test_a_retried_turn_that_succeeds_is_one_ok_chat_span(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tp, exporter = spans
    turns = [
        [provider_error(ErrorInfo(code=429, message="slow down"))],
        [provider_text_delta("ok"), provider_done(Usage(input_tokens=1, output_tokens=1))],
    ]
    agent = prism.create_agent(
        model=MODEL,
        provider=create_mock_provider(turns=turns),
        retry=RetryOptions(base_delay_ms=0, jitter=0),
        tracing=OpenTelemetryTracing(tracer_provider=tp),
    )
    await agent.create_session().run("go")
    (chat,) = by_name(exporter.get_finished_spans(), "chat demo-1")
    assert chat.status.status_code is StatusCode.UNSET
    assert dict(chat.attributes or {})["prism.attempts"] == 2
    assert "error.type" not in dict(chat.attributes or {})
    assert [dict(e.attributes or {}).get("error.type") for e in chat.events] == ["429", "429", None]


async def test_tool_error_sets_the_tool_span_status(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tp, exporter = spans

    @prism.tool
    def explode() -> str:
        """Fail."""
        raise RuntimeError("tool broke")

    turns = [
        [provider_tool_call("c1", "explode", {}), provider_tool_call("c2", "missing", {}), provider_done()],
        [provider_text_delta("sorry"), provider_done()],
    ]
    agent = prism.create_agent(
        model=MODEL,
        provider=create_mock_provider(turns=turns),
        tools=[explode],
        tracing=OpenTelemetryTracing(tracer_provider=tp),
    )
    await agent.create_session().run("go")
    finished = exporter.get_finished_spans()
    (failed,) = by_name(finished, "execute_tool explode")
    (blocked,) = by_name(finished, "execute_tool missing")
    assert failed.status.status_code is StatusCode.ERROR
    assert dict(failed.attributes or {})["prism.tool.status"] == "error"
    assert blocked.status.status_code is StatusCode.ERROR
    assert dict(blocked.attributes or {})["prism.tool.blocked_reason"] == "unknown_tool"


SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["title", "body"],
    "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
}


async def test_artifact_loop_with_one_revision(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tp, exporter = spans
    turns = [
        [provider_text_delta('{"title": "draft"}'), provider_done()],
        [provider_text_delta('{"title": "t", "body": "b"}'), provider_done()],
    ]
    agent = prism.create_agent(
        model=MODEL,
        name="writer",
        provider=create_mock_provider(turns=turns),
        loop={"strategy": "generate-validate-revise", **json_schema_artifact(SCHEMA), "max_revisions": 2},
        tracing=OpenTelemetryTracing(tracer_provider=tp),
    )
    result = await agent.create_session().run("write")
    assert result.status == "succeeded" and result.artifact == {"title": "t", "body": "b"}
    finished = exporter.get_finished_spans()
    (invoke,) = by_name(finished, "invoke_agent writer")
    chats = by_name(finished, "chat demo-1")
    assert len(chats) == 2 and {parent_of(c) for c in chats} == {invoke.context.span_id}
    attrs = dict(invoke.attributes or {})
    assert attrs["prism.loop.name"] == "generate-validate-revise"
    assert attrs["prism.revision_count"] == 1
    assert attrs["prism.run.status"] == "succeeded"
    assert [e.name for e in invoke.events] == ["prism.artifact_revision"]
    # the revision starts after the first candidate's chat span ended
    assert (chats[0].end_time or 0) <= (invoke.events[0].timestamp or 0)


async def test_suspended_and_resumed_durable_run_are_linked_traces(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tp, exporter = spans
    checkpoints = MemoryCheckpointStore()
    sessions = MemorySessionStore()
    refunds: list[int] = []

    def refund(arguments: dict[str, Any], context: prism.ToolExecutionContext) -> dict[str, int]:
        refunds.append(arguments["order"])
        return {"refunded": arguments["order"]}

    def build(turns: list[list[Any]]) -> prism.Agent:
        return prism.create_agent(
            id="refund-desk",
            model=MODEL,
            provider=create_mock_provider(turns=turns),
            tools=[prism.ToolDefinition(
                name="refund",
                execute=refund,
                parameters={"type": "object", "properties": {"order": {"type": "integer"}}},
            )],
            store=sessions,
            run_state=prism.RunStateOptions(checkpoints, "v1", interrupt_before_tool=True),
            tracing=OpenTelemetryTracing(tracer_provider=tp),
        )

    tracer = tp.get_tracer("host")
    with tracer.start_as_current_span("worker 1"):
        first = await build([[provider_tool_call("c1", "refund", {"order": 42}), provider_done()]]).create_session().run("refund 42")
    assert first.status == "suspended" and first.run_state is not None
    pending = first.interruption.pending_decisions[0]  # type: ignore[union-attr]
    with tracer.start_as_current_span("worker 2"):
        agent = build([[provider_text_delta("refunded"), provider_done()]])
        done = await prism.resume_agent_run(
            agent.create_session(first.session_id),
            first.run_state,
            decisions=[{"approval_id": pending.approval_id, "outcome": "allow_once"}],
        )
    assert done.status == "succeeded" and refunds == [42]

    finished = exporter.get_finished_spans()
    suspended, resumed = by_name(finished, "invoke_agent")
    (worker1,) = by_name(finished, "worker 1")
    (worker2,) = by_name(finished, "worker 2")
    # two traces, one per worker, each leg under its worker's span
    assert suspended.context.trace_id == worker1.context.trace_id
    assert resumed.context.trace_id == worker2.context.trace_id != worker1.context.trace_id
    assert parent_of(suspended) == worker1.context.span_id
    assert parent_of(resumed) == worker2.context.span_id
    # linked: the resumed leg's span links to the suspended leg's span
    (link,) = resumed.links
    assert link.context.trace_id == suspended.context.trace_id
    assert link.context.span_id == suspended.context.span_id
    assert dict(link.attributes or {}) == {"prism.link": "resumed_from"}
    s_attrs, r_attrs = dict(suspended.attributes or {}), dict(resumed.attributes or {})
    assert s_attrs["prism.run.status"] == "suspended" and s_attrs["prism.stop_reason"] == "suspended"
    assert r_attrs["prism.run.status"] == "succeeded"
    assert s_attrs["prism.run_id"] == r_attrs["prism.run_id"] == done.run_id
    # as in agent_resumed: the version the resume claimed (the claim writes the next one)
    assert r_attrs["prism.resumed_from_version"] == first.run_state.version + 1
    # the approved call executes in the resumed leg, under its invoke_agent span
    (tool,) = by_name(finished, "execute_tool refund")
    assert parent_of(tool) == resumed.context.span_id


class CountingTracer:
    def __init__(self) -> None:
        self.runs: list[TracedRun] = []

    def start_run(self, run: TracedRun) -> None:
        self.runs.append(run)
        return None


async def test_default_tracer_and_tracing_off() -> None:
    counting = CountingTracer()
    previous = set_default_tracer(counting)
    try:
        on = prism.create_agent(model=MODEL, provider=create_mock_provider(turns=[[provider_done()]]))
        off = prism.create_agent(
            model=MODEL, provider=create_mock_provider(turns=[[provider_done()]]), tracing=False
        )
        await on.create_session().run("a")
        await off.create_session().run("b")
    finally:
        set_default_tracer(previous)
    assert [r.loop for r in counting.runs] == ["single-shot"]
    assert default_tracer() is previous
    with pytest.raises(PrismConfigError):
        prism.create_agent(model=MODEL, tracing=object())  # type: ignore[arg-type]


async def test_instrument_sets_the_default(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    tp, exporter = spans
    tracing = instrument(tracer_provider=tp)
    try:
        assert default_tracer() is tracing
        agent = prism.create_agent(model=MODEL, provider=create_mock_provider(turns=[[provider_done()]]))
        await agent.create_session().run("a")
    finally:
        uninstrument()
    assert default_tracer() is None
    assert [s.name for s in exporter.get_finished_spans()] == ["chat demo-1", "invoke_agent"]


async def test_untraced_run_builds_no_trace() -> None:
    """Tracing off: the leg's trace stays None, so the event path and the tool hook do nothing."""
    seen: list[Any] = []
    agent = prism.create_agent(
        model=MODEL,
        provider=create_mock_provider(
            turns=[[provider_tool_call("c1", "lookup_plain", {}), provider_done()], [provider_done()]]
        ),
        tools=[prism.ToolDefinition(
            name="lookup_plain",
            execute=lambda arguments, context: seen.append(trace.get_current_span()) or "ok",
            parameters={"type": "object", "properties": {}},
        )],
    )
    session = agent.create_session()
    await session.run("go")
    assert seen == [trace.INVALID_SPAN]
    assert session.id  # nothing was traced, and the run needed no tracer


async def test_parallel_sync_tools_run_in_their_own_tool_span(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """A parallel round runs sync tools in worker threads: each still sees its own span."""
    tp, exporter = spans
    seen: dict[str, str] = {}

    def probe(arguments: dict[str, Any], context: prism.ToolExecutionContext) -> str:
        span = trace.get_current_span()
        seen[context.tool_call_id] = f"{getattr(span, 'name', '')}/{span.get_span_context().span_id}"
        return "ok"

    turns = [
        [provider_tool_call("p1", "probe", {}), provider_tool_call("p2", "probe", {}), provider_done()],
        [provider_text_delta("done"), provider_done()],
    ]
    agent = prism.create_agent(
        model=MODEL,
        provider=create_mock_provider(turns=turns),
        tools=[prism.ToolDefinition(name="probe", execute=probe, parameters={"type": "object"})],
        loop=prism.SingleShotLoopOptions(tool_concurrency=2),
        tracing=OpenTelemetryTracing(tracer_provider=tp),
    )
    await agent.create_session().run("go")
    spans_by_call = {
        dict(s.attributes or {})["gen_ai.tool.call.id"]: s
        for s in by_name(exporter.get_finished_spans(), "execute_tool probe")
    }
    assert seen == {
        call: f"execute_tool probe/{span.context.span_id}" for call, span in spans_by_call.items()
    }
