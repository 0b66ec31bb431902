"""Scenarios 1, 2 and 6: per-turn runtime overhead, side by side, in one process.

An agent run of N turns (N = 10, 100, 1000): turns 1..N-1 each request one call of the trivial
async tool ``noop(i: int)``, turn N answers in text; the fake model returns instantly. The time of
``run`` (agent construction excluded) divided by N is the per-turn cost, which here is all
framework overhead. The headline is process CPU time (``time.process_time``: all threads of the
process, so a framework's worker threads count too) — on a shared machine it is not inflated by
other processes taking the core, as wall time is; both are in the JSON. Frameworks and sizes are interleaved round by round so that machine noise
hits them alike; each cell reports the median over its runs (wall clock, and process CPU time).

A run that exceeds ``--max-run-s`` is cancelled and reported as *capped*, with the per-turn cost
over the turns it completed.

Usage::

    python benchmarks/compare_turns.py [--sizes 10 100 1000] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from _common import Cell, Counter, emit_json, machine, timed, tool_turns_script, versions
from _frameworks import BUILDERS, FRAMEWORKS, OTHERS, available

# runs per cell: (fast frameworks, other frameworks) by N
_REPS = {10: (61, 15), 100: (21, 5), 1000: (7, 1)}
_QUICK_REPS = {10: (21, 5), 100: (7, 3), 1000: (3, 1)}
_FAST = ("bare", "bare+records", "prism", "prism+events")
WARMUPS = 3
WARM_SCRIPT = tool_turns_script(10)


def _reps(quick: bool, fw: str, n: int) -> int:
    table = _QUICK_REPS if quick else _REPS
    fast, other = table.get(n, (5, 1))
    return fast if fw in _FAST else other


async def measure(
    frameworks: list[str], sizes: list[int], *, quick: bool, max_run_s: float
) -> dict[str, dict[int, Cell]]:
    cells: dict[str, dict[int, Cell]] = {fw: {n: Cell() for n in sizes} for fw in frameworks}
    for fw in frameworks:  # warm-up: imports, caches, first-call paths
        counter = Counter()
        await BUILDERS[fw](tool_turns_script(20), counter)()
    rounds = max(_reps(quick, fw, n) for fw in frameworks for n in sizes)
    for r in range(rounds):
        for n in sizes:
            for fw in frameworks:
                cell = cells[fw][n]
                if r >= _reps(quick, fw, n) or cell.capped:
                    continue
                script = tool_turns_script(n)

                def make(counter: Counter, fw: str = fw, script: Any = script) -> Any:
                    return BUILDERS[fw](script, counter)

                def warm(counter: Counter, fw: str = fw) -> Any:
                    return BUILDERS[fw](WARM_SCRIPT, counter)

                sample = await timed(make, warm=warm, warmups=WARMUPS, timeout_s=max_run_s)
                cell.samples.append(sample)
        print(f"  round {r + 1}/{rounds}", file=sys.stderr, end="\r", flush=True)
    print(file=sys.stderr)
    return cells


def summarise(
    cells: dict[str, dict[int, Cell]], sizes: list[int], metric: str = "cpu"
) -> dict[str, Any]:
    """Per-cell medians; ``median_us_per_turn`` (and every ratio) uses ``metric``."""
    results: dict[str, Any] = {}
    for fw, by_n in cells.items():
        results[fw] = {}
        for n, cell in by_n.items():
            capped = cell.capped
            wall = cell.median_us_per_turn()
            cpu = cell.median_cpu_us_per_turn()
            results[fw][str(n)] = {
                "median_us_per_turn": cpu if metric == "cpu" else wall,
                "median_wall_us_per_turn": wall,
                "min_wall_us_per_turn": cell.min_us_per_turn(),
                "median_cpu_us_per_turn": cpu,
                "runs": len(cell.samples),
                "capped": capped,
                "turns_completed": (
                    max(s.turns_done for s in cell.samples) if cell.samples else 0
                ),
            }
    lo, hi = min(sizes), max(sizes)
    flat = {}
    for fw in cells:
        a = results[fw][str(lo)]["median_us_per_turn"]
        b = results[fw][str(hi)]["median_us_per_turn"]
        flat[fw] = b / a if a and b and not results[fw][str(hi)]["capped"] else None
    ratios: dict[str, dict[str, float | None]] = {}
    prism = results.get("prism", {})
    for fw in cells:
        ratios[fw] = {}
        for n in sizes:
            p = prism.get(str(n), {}).get("median_us_per_turn")
            v = results[fw][str(n)]["median_us_per_turn"]
            ratios[fw][str(n)] = v / p if p and v else None
    fastest_other: dict[str, Any] = {}
    for n in sizes:
        best = None
        for fw in OTHERS:
            if fw in results:
                v = results[fw][str(n)]["median_us_per_turn"]
                if v and (best is None or v < best[1]):
                    best = (fw, v)
        p = prism.get(str(n), {}).get("median_us_per_turn")
        fastest_other[str(n)] = (
            {"framework": best[0], "us_per_turn": best[1], "times_prism": best[1] / p}
            if best and p
            else None
        )
    bare = results.get("bare", {})
    prism_vs_bare = {
        str(n): (
            prism[str(n)]["median_us_per_turn"] / bare[str(n)]["median_us_per_turn"]
            if prism and bare
            else None
        )
        for n in sizes
    }
    return {
        "results": results,
        "flatness_nmax_over_nmin": flat,
        "ratio_to_prism": ratios,
        "fastest_other": fastest_other,
        "prism_over_bare": prism_vs_bare,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--frameworks", nargs="+", default=list(FRAMEWORKS))
    parser.add_argument("--quick", action="store_true", help="fewer runs per cell")
    parser.add_argument("--max-run-s", type=float, default=90.0, help="cap for one run")
    parser.add_argument(
        "--metric", choices=("cpu", "wall"), default="cpu",
        help="headline: process CPU time (default; robust to other load) or wall time",
    )
    parser.add_argument("--json", default=None, help="write the result JSON here (- = stdout)")
    args = parser.parse_args()
    frameworks = [fw for fw in args.frameworks if available(fw)]
    missing = [fw for fw in args.frameworks if fw not in frameworks]
    cells = asyncio.run(
        measure(frameworks, args.sizes, quick=args.quick, max_run_s=args.max_run_s)
    )
    payload = {
        "section": "turns",
        "scenario": "N turns, one noop tool call per turn, text on the last; instant fake model",
        "sizes": args.sizes,
        "max_run_s": args.max_run_s,
        "metric": args.metric,
        "missing_frameworks": missing,
        "machine": machine(),
        "versions": versions(
            "prism-runtime", "pydantic-ai-slim", "openai-agents", "langgraph", "langchain",
            "langchain-core",
        ),
        **summarise(cells, args.sizes, args.metric),
    }
    if args.json is None:
        for fw, by_n in payload["results"].items():
            row = "  ".join(
                f"N={n}: {v['median_us_per_turn']:9.1f} us/turn" + (" (capped)" if v["capped"] else "")
                for n, v in by_n.items()
                if v["median_us_per_turn"] is not None
            )
            print(f"{fw:>14}  {row}")
    else:
        emit_json(payload, args.json)


if __name__ == "__main__":
    main()
