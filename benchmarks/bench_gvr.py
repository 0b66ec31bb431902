"""Overhead of one generate → validate → revise cycle (GVR-4, ARCH-15).

Two measurements, each the median over ``--repeat`` runs, in microseconds per revision cycle:

* ``loop``: the loop alone, driven by a stub ``LoopContext`` whose primitives do nothing (no
  provider, store or redaction work), with an empty and with a 10 000-message live history — the
  two must match (nothing per turn is O(history), ARCH-15);
* ``session``: a full ``session.run(..., loop=...)`` with the mock provider, per revision cycle =
  (median time with ``N`` revisions − median time with 0 revisions) / ``N``, for ``N`` and
  ``4N`` (the run's history grows by two messages per cycle, so equal figures show the per-turn
  cost does not grow with history); each cycle is one
  provider turn through the runtime (assembly, redaction, retry wrapper, mock stream, output
  handling), one draft append, one repair append and five artifact/turn events.

Run: ``.venv/bin/python benchmarks/bench_gvr.py [--cycles 50] [--repeat 30]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any, cast

from prism.abort import AbortController
from prism.loops.contracts import ArtifactContext, ArtifactValidation, LoopContext
from prism.loops.gvr import generate_validate_revise_loop
from prism.types import (
    AgentInput,
    Message,
    ModelConfig,
    ProviderRequest,
    ProviderTurnResult,
    TextContent,
    ToolCallContent,
    ToolResult,
    assistant_message,
)

MODEL = ModelConfig(provider="mock", model="bench")
DRAFT = ProviderTurnResult(content=(TextContent("draft"),), started=True)
REJECT = ArtifactValidation(ok=False, errors=())


def reject(value: Any, ctx: ArtifactContext) -> ArtifactValidation:
    return REJECT


def accept_last(good: str) -> Any:
    def validator(value: Any, ctx: ArtifactContext) -> ArtifactValidation:
        return ArtifactValidation(ok=value == good)

    return validator


class NullContext:
    """A LoopContext whose primitives cost (almost) nothing."""

    def __init__(self, history_len: int) -> None:
        self.session_id = "session_bench"
        self.run_id = "run_bench"
        self.metadata: MappingProxyType[str, Any] = MappingProxyType({})
        self.signal = AbortController().signal
        self.history: list[Message] = [assistant_message("old")] * history_len
        self.input: AgentInput = "make it"
        self.input_messages = (Message("user", (TextContent("make it"),)),)
        self.max_tool_rounds = 0
        self.tool_concurrency = 1
        self.restored_loop_state = None
        self.finish_reason: str | None = None
        self.artifact: Any = None
        self._request = ProviderRequest(model=MODEL, messages=())

    async def assemble(
        self,
        next_input: AgentInput,
        tool_results: Sequence[ToolResult] | None = None,
        turn: int | None = None,
    ) -> ProviderRequest:
        return self._request

    async def generate(self, request: ProviderRequest) -> ProviderTurnResult:
        return DRAFT

    async def dispatch_tool_call(self, call: ToolCallContent) -> ToolResult:  # pragma: no cover
        raise AssertionError("no tools in this benchmark")

    async def append_message(self, message: Message) -> None:
        return None

    def emit(self, event: Any) -> None:
        return None


async def loop_cycle_us(cycles: int, repeat: int, history_len: int) -> float:
    samples = []
    for _ in range(repeat):
        loop = generate_validate_revise_loop(validator=reject, max_revisions=cycles)
        ctx = NullContext(history_len)
        start = time.perf_counter_ns()
        await loop.run(cast(LoopContext, ctx))
        samples.append((time.perf_counter_ns() - start) / 1000 / (cycles + 1))
    return statistics.median(samples)


async def session_cycle_us(cycles: int, repeat: int) -> float | None:
    try:
        from prism.limits import UNLIMITED
        from prism.providers.base import provider_done, provider_text_delta
        from prism.providers.mock import MockScriptItem, create_mock_provider
        from prism.runtime.agent import create_agent
        from prism.runtime.session import AgentSession  # noqa: F401
    except ImportError:  # pragma: no cover - runtime not available
        return None

    async def timed(revisions: int) -> float:
        turns: list[list[MockScriptItem]] = [
            [provider_text_delta(f"d{i}"), provider_done()] for i in range(revisions + 1)
        ]
        agent = create_agent(
            model=MODEL,
            provider=create_mock_provider(turns=turns),
            limits={"max_turns": UNLIMITED, "max_provider_attempts": UNLIMITED},
        )
        session = agent.create_session()
        loop = {
            "strategy": "generate-validate-revise",
            "validator": accept_last(f"d{revisions}"),
            "max_revisions": revisions,
        }
        start = time.perf_counter_ns()
        await session.run("make it", loop=loop)
        return (time.perf_counter_ns() - start) / 1000

    base = statistics.median([await timed(0) for _ in range(repeat)])
    full = statistics.median([await timed(cycles) for _ in range(repeat)])
    return (full - base) / cycles


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cycles", type=int, default=50, help="revisions per run")
    parser.add_argument("--repeat", type=int, default=30, help="runs per measurement")
    args = parser.parse_args()

    empty = await loop_cycle_us(args.cycles, args.repeat, 0)
    long = await loop_cycle_us(args.cycles, args.repeat, 10_000)
    print(f"loop only, empty history:        {empty:8.1f} µs / revision cycle (median)")
    print(f"loop only, 10 000-message history: {long:6.1f} µs / revision cycle (median)")
    for cycles in (args.cycles, 4 * args.cycles):
        session = await session_cycle_us(cycles, args.repeat)
        if session is None:
            print("session: runtime not available")
            break
        print(
            f"session.run with mock provider, {cycles:3d} revisions: "
            f"{session:6.1f} µs / revision cycle (median)"
        )


if __name__ == "__main__":
    asyncio.run(main())
