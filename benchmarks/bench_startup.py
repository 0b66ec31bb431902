"""Start-up cost of prism in a fresh interpreter, in milliseconds.

Two probes, each run in ``--runs`` fresh interpreters (``python -c``, after one untimed run that
warms the OS file cache and writes the bytecode caches); the median of each is printed:

* ``import``: ``import prism`` alone — target ≤ 10 ms wall time (the namespace binds each name on
  first use, so this loads ``prism`` and ``prism._moved`` only);
* ``first use``: ``import prism``, then ``create_agent`` with one ``@prism.tool`` and one
  ``session.run`` on the scripted mock provider to completion (a tool turn, then a text turn) —
  so that lazy loading cannot hide import cost. Target ≤ 150 ms CPU time.

Each probe times itself with ``time.perf_counter`` from just before ``import prism`` (so the
interpreter's own start-up is not counted), as wall time and as the process's CPU time (which a
busy machine inflates less); the whole process's wall time as seen from this script (interpreter
start-up included) is reported alongside. The interpreter is this one
(``sys.executable``) and ``PYTHONPATH`` is passed through, so ``PYTHONPATH=src`` selects the tree.

Usage::

    python benchmarks/bench_startup.py [--runs 7] [--json PATH|-]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent

_PROBE = """
import sys, time, json
sys.path.insert(0, {here!r})
c0, t0 = time.process_time(), time.perf_counter()
import prism
t1 = time.perf_counter()
{after}
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({{"import_s": t1 - t0, "total_s": t2 - t0, "cpu_s": c2 - c0,
                   "modules": len(sys.modules), "prism_file": prism.__file__}}))
"""

_FIRST_USE = """
import asyncio
from _prism_api import api

P = api("create_mock_provider", "provider_done", "provider_text_delta", "provider_tool_call")


@prism.tool
def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b


async def first_use():
    provider = P.create_mock_provider(turns=[
        [P.provider_tool_call("c1", "add", {"a": 1, "b": 2}), P.provider_done()],
        [P.provider_text_delta("3"), P.provider_done()],
    ])
    agent = prism.create_agent(
        model={"provider": "mock", "model": "m"}, provider=provider, tools=[add]
    )
    result = await agent.create_session().run("1 + 2?")
    assert result.text == "3", result


asyncio.run(first_use())
"""

PROBES = {"import": "", "first use": _FIRST_USE}

# probe → (the figure the target bounds, the target in ms)
TARGETS = {"import": ("median_ms", 10.0), "first use": ("median_cpu_ms", 150.0)}


def _run_probe(code: str) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measure with bytecode caches, as installed
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    process_s = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"probe failed ({proc.returncode}):\n{proc.stderr}")
    parsed: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    parsed["process_s"] = process_s
    return parsed


def measure(runs: int) -> dict[str, Any]:
    """Median milliseconds of each probe over ``runs`` fresh interpreters."""
    out: dict[str, Any] = {}
    for name, after in PROBES.items():
        code = _PROBE.format(here=str(_HERE), after=after)
        _run_probe(code)  # warm the OS file cache and write the bytecode caches
        samples = [_run_probe(code) for _ in range(runs)]
        out[name] = {
            "median_ms": statistics.median(s["total_s"] for s in samples) * 1000,
            "median_cpu_ms": statistics.median(s["cpu_s"] for s in samples) * 1000,
            "median_import_ms": statistics.median(s["import_s"] for s in samples) * 1000,
            "median_process_ms": statistics.median(s["process_s"] for s in samples) * 1000,
            "min_ms": min(s["total_s"] for s in samples) * 1000,
            "modules_loaded": samples[-1]["modules"],
            "prism_file": samples[-1]["prism_file"],
            "runs": runs,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=7, help="fresh interpreters per probe")
    parser.add_argument(
        "--json", default=None, help="write the results as JSON to PATH (- : stdout)"
    )
    args = parser.parse_args()
    results = measure(args.runs)
    if args.json != "-":
        print(f"median of {args.runs} fresh interpreters ({results['import']['prism_file']}):")
        for name, cell in results.items():
            print(
                f"  {name:<10} {cell['median_ms']:7.1f} ms in-process"
                f" ({cell['median_cpu_ms']:.1f} ms CPU)"
                f"   {cell['median_process_ms']:7.1f} ms whole process"
                f"   ({cell['modules_loaded']} modules in sys.modules)"
            )
        for name, (figure, target) in TARGETS.items():
            kind = "CPU" if "cpu" in figure else "wall"
            value = results[name][figure]
            verdict = "met" if value <= target else "NOT met"
            print(f"  target {name}: {kind} ≤ {target:.0f} ms — {value:.1f} ms, {verdict}")
    if args.json is not None:
        text = json.dumps({"scenario": "startup", "results": results}, indent=2, sort_keys=True)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
