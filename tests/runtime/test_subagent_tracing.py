"""Tracing of agent tools (issue 16): a child run's spans nest under the calling run's
``execute_tool`` span, in the same trace, asserted on the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import prism
from prism.otel import OpenTelemetryTracing
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.tracing import default_tracer

MODEL = prism.ModelConfig(provider="mock", model="demo")


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    assert default_tracer() is None  # the children get a tracer only from the calling run
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def one(finished: tuple[ReadableSpan, ...], name: str, **attributes: Any) -> ReadableSpan:
    found = [
        s for s in finished
        if s.name == name and all((s.attributes or {}).get(k) == v for k, v in attributes.items())
    ]
    assert len(found) == 1, [s.name for s in finished]
    return found[0]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def lead_agent(tracer: TracerProvider, child: Any) -> Any:
    return prism.create_agent(
        model=MODEL,
        name="lead",
        tools=[child.as_tool(description="Ask the researcher.")],
        loop=prism.SingleShotLoopOptions(tool_concurrency=2),
        tracing=OpenTelemetryTracing(tracer_provider=tracer),
        provider=create_mock_provider(
            turns=[
                [
                    provider_tool_call("c1", "researcher", {"input": "Paris?"}),
                    provider_tool_call("c2", "researcher", {"input": "Rome?"}),
                    provider_done(),
                ],
                [provider_text_delta("Both found."), provider_done()],
            ]
        ),
    )


def researcher(tracing: Any = None) -> Any:
    return prism.create_agent(
        model=MODEL,
        name="researcher",
        tracing=tracing,
        provider=create_mock_provider(
            turns=[[provider_text_delta("a fact"), provider_done()]] * 2
        ),
    )


async def test_issue16_child_runs_nest_under_the_calling_tool_span(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tp, exporter = spans
    # the child agent sets no tracer of its own: it inherits the calling run's
    session = lead_agent(tp, researcher()).create_session()
    with tp.get_tracer("host").start_as_current_span("POST /ask") as host:
        result = await session.run("Populations?")
    assert result.status == "succeeded"
    finished = exporter.get_finished_spans()
    trace_id = host.get_span_context().trace_id
    assert {s.context.trace_id for s in finished} == {trace_id}

    parent = one(finished, "invoke_agent lead")
    assert parent_id(parent) == host.get_span_context().span_id
    for call_id in ("c1", "c2"):
        tool = one(finished, "execute_tool researcher", **{"gen_ai.tool.call.id": call_id})
        assert parent_id(tool) == parent.context.span_id
        child_session = f"{result.run_id}.{call_id}"
        child = one(
            finished, "invoke_agent researcher", **{"gen_ai.conversation.id": child_session}
        )
        # the child's run span is a child of the tool span that started it
        assert parent_id(child) == tool.context.span_id
        assert child.context.trace_id == trace_id
        chat = one(finished, "chat demo", **{"gen_ai.conversation.id": child_session})
        assert parent_id(chat) == child.context.span_id
        # the child's spans lie within the tool call's
        assert tool.start_time is not None and tool.end_time is not None
        assert child.start_time is not None and child.end_time is not None
        assert tool.start_time <= child.start_time <= child.end_time <= tool.end_time


async def test_issue16_a_child_with_tracing_false_stays_untraced(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tp, exporter = spans
    session = lead_agent(tp, researcher(tracing=False)).create_session()
    result = await session.run("Populations?")
    assert result.status == "succeeded"
    names = sorted(s.name for s in exporter.get_finished_spans())
    assert names == [
        "chat demo", "chat demo", "execute_tool researcher", "execute_tool researcher",
        "invoke_agent lead",
    ]


async def test_issue16_the_tracer_is_lent_only_inside_the_tool_call(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tp, exporter = spans
    await lead_agent(tp, researcher()).create_session().run("Populations?")
    count = len(exporter.get_finished_spans())
    # a run of an untraced agent after the traced run, outside any tool call: not traced
    plain = researcher()
    assert (await plain.create_session().run("Anything?")).status == "succeeded"
    assert len(exporter.get_finished_spans()) == count
