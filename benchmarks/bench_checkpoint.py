"""Cost of an ``every-turn`` checkpoint with the memory checkpoint store (DUR-7, ARCH-15).

Two figures, both medians of CPU time over several repetitions:

* **per write** — one ``DurableRun.write("running", ...)`` of a typical envelope (identity,
  fingerprint, model, counters, leaf, sticky decisions) into a ``MemoryCheckpointStore``:
  redaction walk, shape check, canonical JSON size check, compare-and-set and the store's copy;
* **per turn, end to end** — an N-turn run (one no-op tool call per turn, then text) with
  ``run_state=RunStateOptions(..., checkpoint_policy="every-turn")`` minus the same run without
  ``run_state``, divided by N. The envelope does not hold the history, so the figure stays flat
  as N grows. (It includes the dispatch marking of each turn's tool call and, once per run, the
  envelope written before the input is appended — DB-10.)
* **dispatch marking, per tool call** (DB-10) — what recording each host tool dispatch as
  ``dispatched`` before its side effect adds: the same every-turn run with the marking switched
  off (the runtime before DB-10) subtracted from the run with it, divided by the number of tool
  calls; with the memory stores (CPU time) and with one SQLite store holding the sessions and
  the checkpoints (wall time: the write waits for the store's commit). Runs with the default
  ``on-suspend`` policy and non-durable runs never mark a dispatch.

Usage::

    python benchmarks/bench_checkpoint.py [--turns 10 100 1000] [--repeat 7] [--writes 2000]
        [--calls 50] [--no-sqlite]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from prism.limits import UNLIMITED, RunLimits
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.runtime.checkpoints import MemoryCheckpointStore
from prism.runtime.durable import DurableRun, RunStateOptions, _durable_leg
from prism.types import ModelConfig, ToolDefinition

MODEL = ModelConfig(provider="mock", model="bench")
LIMITS = RunLimits(
    max_turns=UNLIMITED,
    max_provider_attempts=UNLIMITED,
    max_tool_rounds=UNLIMITED,
    max_tool_calls=UNLIMITED,
)
COUNTERS = {
    "turns": 12, "provider_attempts": 12, "tool_rounds": 11, "tool_calls": 11,
    "wall_time_ms": 1234, "request_bytes": 4096, "response_bytes": 512, "input_tokens": 0,
    "output_tokens": 0, "total_tokens": 0, "cost": 0,
}


def _noop(arguments: dict[str, Any], context: Any) -> Any:
    return {"ok": True}


def _tools() -> list[ToolDefinition]:
    return [
        ToolDefinition(
            name="noop",
            execute=_noop,
            parameters={"type": "object", "properties": {"i": {"type": "integer"}}},
        )
    ]


async def per_write(writes: int) -> float:
    """Median µs of one ``running`` envelope write (batches of 100)."""
    config = create_agent(model=MODEL, id="bench", tools=_tools()).config
    durable = DurableRun(
        RunStateOptions(MemoryCheckpointStore(), "v1", checkpoint_policy="every-turn"),
        config=config,
        run_id="run_bench",
        session_id="session_bench",
        redactor=None,
        ownership=None,
    )
    samples: list[float] = []
    batch = 100
    for _ in range(max(1, writes // batch)):
        start = time.process_time()
        for _ in range(batch):
            await durable.write(
                "running",
                leaf_id="entry_0123456789abcdef0123456789abcdef",
                counters=COUNTERS,
                deadline_at="2030-01-01T00:00:00.000Z",
                loop_state=None,
            )
        samples.append((time.process_time() - start) / batch * 1e6)
    return statistics.median(samples)


async def _run(turns: int, *, durable: bool) -> float:
    script = [
        [provider_tool_call(f"c{i}", "noop", {"i": i}), provider_done()] for i in range(turns - 1)
    ]
    script.append([provider_text_delta("done"), provider_done()])
    agent = create_agent(
        model=MODEL,
        id="bench",
        provider=create_mock_provider(turns=script),
        tools=_tools(),
        limits=LIMITS,
        tool_validator=False,
        run_state=(
            RunStateOptions(MemoryCheckpointStore(), "v1", checkpoint_policy="every-turn")
            if durable
            else None
        ),
    )
    session = agent.create_session()
    # CPU time of this process: the runtime's own work, robust to other load on the machine.
    start = time.process_time()
    await session.run("go")
    return (time.process_time() - start) / turns * 1e6


@contextlib.contextmanager
def _marking(enabled: bool) -> Iterator[None]:
    """Switch the DB-10 dispatch marking off (``enabled=False``) for the runs inside."""
    if enabled:
        yield
        return
    original = _durable_leg.DurableDriver.__init__

    def without_marks(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.marks = False

    _durable_leg.DurableDriver.__init__ = without_marks  # type: ignore[method-assign]
    try:
        yield
    finally:
        _durable_leg.DurableDriver.__init__ = original  # type: ignore[method-assign]


async def _tool_run(calls: int, stores: Any, clock: Callable[[], float]) -> float:
    """µs per tool call of one every-turn run: ``calls`` turns of one no-op call, then text."""
    session_store, checkpoints = stores
    script = [
        [provider_tool_call(f"c{i}", "noop", {"i": i}), provider_done()] for i in range(calls)
    ]
    script.append([provider_text_delta("done"), provider_done()])
    agent = create_agent(
        model=MODEL,
        id="bench",
        provider=create_mock_provider(turns=script),
        tools=_tools(),
        limits=LIMITS,
        tool_validator=False,
        store=session_store,
        run_state=RunStateOptions(checkpoints, "v1", checkpoint_policy="every-turn"),
    )
    session = agent.create_session()
    start = clock()
    await session.run("go")
    return (clock() - start) / calls * 1e6


async def marking_cost(
    label: str, stores: Any, clock: Callable[[], float], calls: int, repeat: int
) -> None:
    """Print the median µs per tool call with and without the dispatch marking, and the
    difference (DB-10)."""
    for enabled in (True, False):  # warm-up
        with _marking(enabled):
            await _tool_run(min(calls, 10), stores, clock)
    on: list[float] = []
    off: list[float] = []
    for _ in range(repeat):  # interleaved, so drift affects both alike
        with _marking(True):
            on.append(await _tool_run(calls, stores, clock))
        with _marking(False):
            off.append(await _tool_run(calls, stores, clock))
    marked, unmarked = statistics.median(on), statistics.median(off)
    print(
        f"{label:>7}: every-turn {marked:8.1f} us/call, without the marking {unmarked:8.1f}"
        f" us/call, dispatch marking {marked - unmarked:7.1f} us per tool call"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=50, help="tool calls per marking run")
    parser.add_argument("--no-sqlite", action="store_true", help="skip the SQLite figures")
    args = parser.parse_args()
    print(f"per write (memory store): median {await per_write(args.writes):7.1f} us")
    print("dispatch marking (DB-10), one no-op tool call per turn:")
    from prism.store import MemorySessionStore

    await marking_cost(
        "memory",
        (MemorySessionStore(), MemoryCheckpointStore()),
        time.process_time,
        args.calls,
        args.repeat,
    )
    if not args.no_sqlite:
        from prism.stores import SqliteStore

        with tempfile.TemporaryDirectory() as directory:
            store = SqliteStore(Path(directory) / "bench.db")
            try:
                await marking_cost(
                    "sqlite", (store, store), time.perf_counter, args.calls, args.repeat
                )
            finally:
                await store.aclose()
    await _run(20, durable=True)  # warm-up
    await _run(20, durable=False)
    for turns in args.turns:
        plain: list[float] = []
        durable: list[float] = []
        for _ in range(args.repeat):  # interleaved, so drift affects both alike
            plain.append(await _run(turns, durable=False))
            durable.append(await _run(turns, durable=True))
        base = statistics.median(plain)
        with_cp = statistics.median(durable)
        print(
            f"{turns:>6} turns: plain {base:7.1f} us/turn, every-turn {with_cp:7.1f} us/turn, "
            f"checkpoint cost {with_cp - base:6.1f} us/turn"
        )


if __name__ == "__main__":
    asyncio.run(main())
