"""Scenario 4: 8 parallel tool calls of 50 ms each, in one process.

One model turn requests 8 calls of a 50 ms tool, the next answers in text; the fake model returns
instantly. Reported: median wall time of the whole run (agent construction excluded) against the
50 ms floor — the overhead in ms and in percent of 50 ms. prism runs with
``SingleShotLoopOptions(tool_concurrency=8)``; the other frameworks with their defaults (each runs
a turn's tool calls concurrently). Two tools:

* ``sleep50`` — ``async def``, ``await asyncio.sleep(0.05)`` (the headline figure);
* ``sleep50_sync`` — plain ``def``, ``time.sleep(0.05)``; the framework must move it off the event
  loop (threads) to run the 8 calls in parallel.

Usage::

    python benchmarks/compare_parallel.py [--repeat 15] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from _common import Cell, Counter, emit_json, machine, parallel_script, timed, versions
from _frameworks import BUILDERS, OTHERS, available

CALLS = 8
FLOOR_MS = 50.0
TOOLS = ("sleep50", "sleep50_sync")
FRAMEWORKS = ("bare", "prism(tool_concurrency=8)", *OTHERS)


async def measure(frameworks: list[str], repeat: int) -> dict[str, dict[str, Cell]]:
    cells = {fw: {t: Cell() for t in TOOLS} for fw in frameworks}
    for r in range(repeat):
        for tool in TOOLS:
            script = parallel_script(CALLS, tool)
            for fw in frameworks:

                def make(counter: Counter, fw: str = fw, script: Any = script) -> Any:
                    return BUILDERS[fw](script, counter)

                cells[fw][tool].samples.append(await timed(make, warmups=1))
        print(f"  round {r + 1}/{repeat}", file=sys.stderr, end="\r", flush=True)
    print(file=sys.stderr)
    return cells


def summarise(cells: dict[str, dict[str, Cell]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fw, by_tool in cells.items():
        out[fw] = {}
        for tool, cell in by_tool.items():
            us = cell.median_us()
            ms = us / 1000 if us is not None else None
            out[fw][tool] = {
                "median_ms": ms,
                "overhead_ms": ms - FLOOR_MS if ms is not None else None,
                "overhead_pct": (ms - FLOOR_MS) / FLOOR_MS * 100 if ms is not None else None,
                "runs": len(cell.samples),
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--frameworks", nargs="+", default=list(FRAMEWORKS))
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    frameworks = [fw for fw in args.frameworks if available(fw)]
    cells = asyncio.run(measure(frameworks, args.repeat))
    payload = {
        "section": "parallel",
        "scenario": f"{CALLS} tool calls of {FLOOR_MS:.0f} ms in one turn, then text",
        "calls": CALLS,
        "floor_ms": FLOOR_MS,
        "missing_frameworks": [fw for fw in args.frameworks if fw not in frameworks],
        "machine": machine(),
        "versions": versions("prism-runtime", "pydantic-ai-slim", "openai-agents", "langgraph"),
        "results": summarise(cells),
    }
    if args.json is None:
        print(json.dumps(payload["results"], indent=2))
    else:
        emit_json(payload, args.json)


if __name__ == "__main__":
    main()
