"""Many short runs of one agent at once: wall time, CPU time and peak RSS.

The scenario: one agent (two ``async def`` tools, ``SingleShotLoopOptions(tool_concurrency=2)``,
the default memory store) and ``--sessions`` sessions (default 10,000). Each session runs once,
two turns: the first answers with two parallel tool calls (small JSON arguments), the second
with text. The provider is a small local object that answers from the request (a request whose
last message holds tool results gets the text), so one provider serves every session, as one
real client would.

Two modes, each in a fresh interpreter (so that peak RSS is its own):

* ``concurrent`` — every session's run started at once with ``asyncio.gather``;
* ``sequential`` — the same runs awaited one by one.

``--store sqlite`` keeps the sessions in one ``prism.stores.SqliteStore`` on a temporary file
instead of the memory store (every append a write to the database).

Printed per mode: wall seconds, process CPU seconds, peak RSS (``ru_maxrss``) in MB, CPU µs
per run, and the cyclic garbage collector's share: CPU seconds spent in collections and the
number of full (generation 2) collections; then the concurrent/sequential ratios of wall time
and of CPU per run. Sessions are created before the clock starts; the agent is built once.

The collector is Python's default unless ``--gc-threshold`` sets ``gc.set_threshold(...)`` in the
measured process, the way a host would: with many runs alive at once, each full collection walks
every live run's objects, so the collector's share grows with the number of runs in flight
(``benchmarks/README.md`` says what a host can do about it).

Usage::

    python benchmarks/bench_concurrency.py [--sessions 10000] [--mode concurrent sequential]
        [--store memory|sqlite] [--gc-threshold G0 [G1 [G2]]] [--provider-wait] [--json PATH|-]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from _prism_api import api

P = api(
    "create_agent",
    "tool",
    "provider_done",
    "provider_text_delta",
    "provider_tool_call",
    "Usage",
    "SingleShotLoopOptions",
)

CALLS = [0]
PROVIDER_WAITS = [False]
"""``--provider-wait``: the provider gives up the event loop once before each turn's stream, as a
network client waiting for its response does, so that every run is really in flight at once."""


@P.tool
async def lookup_order(order_id: str, include_items: bool = False) -> dict[str, Any]:
    """Look up an order.

    Args:
        order_id: The order number.
        include_items: Whether to list the items.
    """
    CALLS[0] += 1
    return {"order_id": order_id, "status": "shipped", "items": 2 if include_items else None}


@P.tool
async def lookup_customer(customer_id: str) -> dict[str, Any]:
    """Look up a customer.

    Args:
        customer_id: The customer number.
    """
    CALLS[0] += 1
    return {"customer_id": customer_id, "tier": "gold"}


class TwoTurnProvider:
    """Turn 1: two tool calls; turn 2 (the request ends with tool results): text."""

    id = "bench-two-turn"

    def generate(self, request: Any) -> AsyncIterator[Any]:
        return self._answer(request.messages[-1].role == "tool")

    async def _answer(self, after_tools: bool) -> AsyncIterator[Any]:
        if PROVIDER_WAITS[0]:
            await asyncio.sleep(0)
        if after_tools:
            yield P.provider_text_delta("Your order has shipped.")
            yield P.provider_done(P.Usage(input_tokens=120, output_tokens=8))
            return
        yield P.provider_tool_call("call_a", "lookup_order", {"order_id": "A-1", "include_items": True})
        yield P.provider_tool_call("call_b", "lookup_customer", {"customer_id": "C-7"})
        yield P.provider_done(P.Usage(input_tokens=100, output_tokens=20))


class _GcClock:
    """CPU seconds spent in the cyclic collector, and the collections per generation."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started
            self.collections[info["generation"]] += 1


async def measure_mode(
    mode: str, sessions: int, store_kind: str, gc_threshold: list[int] | None = None
) -> dict[str, Any]:
    options: dict[str, Any] = {}
    store: Any = None
    tmp = tempfile.TemporaryDirectory(prefix="prism-bench-")
    if store_kind == "sqlite":
        store = api("SqliteStore").SqliteStore(os.path.join(tmp.name, "bench.db"))
        await store.open()
        options["store"] = store
    agent = P.create_agent(
        model={"provider": "bench", "model": "two-turn"},
        provider=TwoTurnProvider(),
        tools=[lookup_order, lookup_customer],
        loop=P.SingleShotLoopOptions(tool_concurrency=2),
        **options,
    )
    # warm-up: first-use imports and caches
    for _ in range(20):
        await agent.create_session().run("warm up")
    all_sessions = [agent.create_session() for _ in range(sessions)]
    CALLS[0] = 0
    gc.collect()
    if gc_threshold:
        gc.set_threshold(*gc_threshold)
    clock = _GcClock()
    gc.callbacks.append(clock)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if mode == "concurrent":
        results = await asyncio.gather(*(s.run("Where is order A-1?") for s in all_sessions))
    else:
        results = [await s.run("Where is order A-1?") for s in all_sessions]
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    gc.callbacks.remove(clock)
    bad = [r for r in results if r.status != "succeeded"]
    if bad or CALLS[0] != 2 * sessions:
        raise RuntimeError(f"{len(bad)} runs failed; {CALLS[0]} tool calls: {bad[:1]!r}")
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if store is not None:
        await store.aclose()
    tmp.cleanup()
    return {
        "mode": mode,
        "store": store_kind,
        "sessions": sessions,
        "wall_s": wall,
        "cpu_s": cpu,
        "cpu_us_per_run": cpu / sessions * 1e6,
        "peak_rss_mb": rss_mb,
        "gc_s": clock.seconds,
        "gc_full_collections": clock.collections[2],
        "gc_threshold": list(gc.get_threshold()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument(
        "--mode", nargs="+", choices=("concurrent", "sequential"),
        default=["concurrent", "sequential"],
    )
    parser.add_argument("--store", choices=("memory", "sqlite"), default="memory")
    parser.add_argument(
        "--gc-threshold", type=int, nargs="+", default=None, metavar="G",
        help="gc.set_threshold(...) in the measured process (default: Python's)",
    )
    parser.add_argument(
        "--provider-wait", action="store_true",
        help="the provider yields to the event loop before each turn (every run in flight at once)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", default=None, help="write the results as JSON to PATH (- : stdout)")
    args = parser.parse_args()
    PROVIDER_WAITS[0] = args.provider_wait
    if args.child:
        result = measure_mode(args.mode[0], args.sessions, args.store, args.gc_threshold)
        print(json.dumps(asyncio.run(result)))
        return
    out: dict[str, Any] = {}
    for mode in args.mode:
        proc = subprocess.run(
            [
                sys.executable, __file__, "--child", "--mode", mode,
                "--sessions", str(args.sessions), "--store", args.store,
                *(["--provider-wait"] if args.provider_wait else []),
                *(["--gc-threshold", *map(str, args.gc_threshold)] if args.gc_threshold else []),
            ],
            capture_output=True, text=True, check=True, env=dict(os.environ),
        )
        out[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    if "concurrent" in out and "sequential" in out:
        out["concurrent_over_sequential_wall"] = out["concurrent"]["wall_s"] / out["sequential"]["wall_s"]
        out["concurrent_over_sequential_cpu"] = (
            out["concurrent"]["cpu_us_per_run"] / out["sequential"]["cpu_us_per_run"]
        )
    if args.json != "-":
        for mode in args.mode:
            r = out[mode]
            print(
                f"{mode:<11} {r['sessions']} two-turn runs: wall {r['wall_s']:.2f} s  "
                f"cpu {r['cpu_s']:.2f} s  ({r['cpu_us_per_run']:.0f} µs/run)  "
                f"peak RSS {r['peak_rss_mb']:.0f} MB  gc {r['gc_s']:.2f} s "
                f"({r['gc_full_collections']} full)"
            )
        if "concurrent_over_sequential_wall" in out:
            print(
                f"concurrent / sequential: wall {out['concurrent_over_sequential_wall']:.2f}, "
                f"CPU per run {out['concurrent_over_sequential_cpu']:.2f}"
            )
    if args.json is not None:
        text = json.dumps(out, indent=2, sort_keys=True)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
