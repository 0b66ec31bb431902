"""Per-turn runtime overhead with the mock provider (ARCH-15), in CPU microseconds.

Runs an agent whose mock provider asks for one tool call per turn for N turns and then answers
with text, and reports the median microseconds per turn over several repetitions. The tool is a
no-op, so the figure is the runtime's own work: assembly, incremental redaction and byte counting,
limits, events, store appends and dispatch. The per-turn cost must stay flat as N grows.

Usage::

    python benchmarks/bench_turns.py [--turns 10 100 1000] [--repeat 5] [--observed] [--redactor]
        [--traced]

``--traced`` traces every run with ``prism.otel`` into an OpenTelemetry SDK ``TracerProvider``
whose span processor hands each ended span to an exporter that drops it (the cost of building,
ending and handing over the spans; needs ``opentelemetry-sdk``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from prism.limits import UNLIMITED, RunLimits
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import MockScriptItem, create_mock_provider
from prism.redaction import create_secret_redactor
from prism.runtime.agent import create_agent
from prism.types import ModelConfig, ToolDefinition


def _noop(arguments: dict[str, Any], context: Any) -> Any:
    return {"ok": True}


class _NullStore:
    """A store that keeps nothing: isolates the runtime's own cost from the store's copying."""

    async def append(
        self,
        entry: Any,
        *,
        expected_parent_id: str | None = None,
        idempotency_key: str | None = None,
        fork: bool = False,
    ) -> None:
        return None

    async def list(self, session_id: str) -> list[Any]:
        return []


def _tracing() -> Any:
    """``prism.otel`` tracing into an SDK provider whose exporter drops every span."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    from prism.otel import OpenTelemetryTracing

    class _Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_Drop()))
    return OpenTelemetryTracing(tracer_provider=provider)


async def _run_once(
    turns: int, *, observed: bool, redactor: bool, null_store: bool = False, traced: Any = None
) -> float:
    script: list[list[MockScriptItem]] = [
        [provider_tool_call(f"c{i}", "noop", {"i": i}), provider_done()] for i in range(turns - 1)
    ]
    script.append([provider_text_delta("done"), provider_done()])
    provider = create_mock_provider(turns=script)
    agent = create_agent(
        model=ModelConfig(provider="mock", model="bench"),
        provider=provider,
        tools=[ToolDefinition(name="noop", execute=_noop)],
        limits=RunLimits(
            max_turns=UNLIMITED,
            max_provider_attempts=UNLIMITED,
            max_tool_rounds=UNLIMITED,
            max_tool_calls=UNLIMITED,
        ),
        redactor=create_secret_redactor(["sk-secret"]) if redactor else None,
        tool_validator=False,
        store=_NullStore() if null_store else None,
        **({} if traced is None else {"tracing": traced}),
    )
    session = agent.create_session()
    drained: list[Any] = []
    consumer = None
    if observed:
        sub = session.subscribe(max_queued_events=1 << 20)

        async def consume() -> None:
            async for event in sub:
                drained.append(event)

        consumer = asyncio.ensure_future(consume())
    # CPU time of this process: the runtime's own work, robust to other load on the machine.
    start = time.process_time()
    await session.run("go")
    elapsed = time.process_time() - start
    if consumer is not None:
        await consumer
    return elapsed / turns * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--observed", action="store_true", help="attach a subscriber")
    parser.add_argument("--redactor", action="store_true", help="use a secret redactor")
    parser.add_argument(
        "--null-store", action="store_true", help="a store that keeps nothing (runtime cost only)"
    )
    parser.add_argument(
        "--traced", action="store_true", help="trace with prism.otel (spans built, then dropped)"
    )
    args = parser.parse_args()
    options: dict[str, Any] = {
        "observed": args.observed,
        "redactor": args.redactor,
        "null_store": args.null_store,
        "traced": _tracing() if args.traced else None,
    }
    await _run_once(20, **options)  # warm-up
    for turns in args.turns:
        samples = [await _run_once(turns, **options) for _ in range(args.repeat)]
        print(f"{turns:>6} turns: median {statistics.median(samples):8.1f} us/turn")


if __name__ == "__main__":
    asyncio.run(main())
