"""The comparison suite's per-turn scenarios, counted in CPU instructions instead of timed.

Time ratios between frameworks move with the machine: on the same tree, prism's realistic turn
measured 11.5× to 23.6× cheaper than LangGraph's on different days, because the frameworks
slow down differently when the machine's caches, memory or neighbours change. The number of
instructions a run executes does not depend on any of that. This script runs the scenarios of
``compare_turns.py``, ``compare_realistic.py`` and ``compare_gvr.py`` (their own builders,
imported, not copied) under ``valgrind --tool=cachegrind`` and reports instructions per turn
(per revision for the revise loop) and each framework's ratio to prism.

Method. Each cell runs two child interpreters under cachegrind (``PYTHONHASHSEED=0``, so
string hashing and therefore dict layouts are the same in every run); both import the
framework, build it and make the same warm run, then one makes the measured run at the small
size and the other at the large size. The difference of their instruction counts, divided by
the difference in turns, is the cost of one more turn in a warm process: construction, imports
and the warm run cancel out. The scripts themselves are built in the children (a few thousand
instructions per turn, the same for every framework). Instructions count every thread (the
SQLite worker threads included) but not the kernel: system calls (the SQLite rows' writes)
count only their user-space side. An instruction is not a unit of time — a cache miss costs
more than an addition — so these ratios are a steadier view beside the timed ones, not a
replacement for them.

Sections and cells:

* ``turns`` — one ``noop`` call a turn (``compare_turns.py``): N = 20 and 120;
* ``realistic`` — ``compare_realistic.py``'s scenario, with and without SQLite: N = 20 and 200;
* ``gvr`` — ``compare_gvr.py``: k = 0 and 3 invalid drafts, 10 runs each; per revision.

Needs ``valgrind`` on the ``PATH`` (Debian: ``apt-get install valgrind``) and the benchmark
venv (``bash benchmarks/setup.sh``). Takes about 4–5 minutes on 2 cores (two children at a time;
LangGraph's imports and its 200-turn runs dominate under valgrind).

Usage::

    benchmarks/.venv-compare/bin/python benchmarks/compare_instructions.py
        [--only turns realistic gvr] [--frameworks prism langgraph ...] [--json PATH]

``--frameworks`` keeps the rows whose name, or whose name before ``+``, is given (``prism``
keeps ``prism+sqlite`` too); an unknown name is an error.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

CELLS: dict[str, dict[str, Any]] = {
    "turns": {
        "frameworks": ("bare", "bare+records", "prism", "langgraph", "pydantic-ai"),
        "sizes": (20, 120),
        "unit": "turn",
    },
    "realistic": {
        "frameworks": ("prism", "langgraph", "prism+sqlite", "langgraph+sqlite"),
        "sizes": (20, 200),
        "unit": "turn",
    },
    "gvr": {
        "frameworks": ("bare", "prism", "instructor", "pydantic-ai"),
        "sizes": (0, 3),
        "unit": "revision",
    },
}
GVR_RUNS = 10
"""Runs of each k in a ``gvr`` child (each a newly built agent, as ``compare_gvr.py`` does)."""
RATIO_TO = {"langgraph+sqlite": "prism+sqlite"}
"""Rows compared with another prism row than plain ``prism`` (like for like)."""


# --------------------------------------------------------------------------- the child


async def _child(section: str, framework: str, size: int) -> None:
    """Import, build and warm ``framework``, then make the measured run(s) of ``size``."""
    sys.path.insert(0, str(HERE))
    if section == "turns":
        from _common import Counter, tool_turns_script
        from _frameworks import BUILDERS

        build = BUILDERS[framework]
        await build(tool_turns_script(10), Counter())()
        counter = Counter()
        await build(tool_turns_script(size), counter)()
        if counter.turns != size:
            raise SystemExit(f"{framework}: {counter.turns} model turns, not {size}")
    elif section == "realistic":
        import compare_realistic

        await compare_realistic.run_once(framework, 4)
        await compare_realistic.run_once(framework, size)
    elif section == "gvr":
        import compare_gvr
        from _common import Counter

        build = compare_gvr.BUILDERS[framework]
        for k in (0, 3):
            await build(k, Counter())()
        for _ in range(GVR_RUNS):
            counter = Counter()
            await build(size, counter)()
            if counter.turns != size + 1:
                raise SystemExit(f"{framework}: {counter.turns} model calls, not {size + 1}")
    else:
        raise SystemExit(f"unknown section {section!r}")


# --------------------------------------------------------------------------- the parent

_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def count(section: str, framework: str, size: int) -> int:
    """Instructions of one child run under cachegrind."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory(prefix="prism-icount-") as tmp:
        proc = subprocess.run(
            [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                f"--cachegrind-out-file={os.path.join(tmp, 'out')}",
                sys.executable,
                str(Path(__file__).resolve()),
                "--child",
                section,
                framework,
                str(size),
            ],
            env=env,
            cwd=tmp,
            capture_output=True,
            text=True,
            check=False,
        )
    found = _REFS.findall(proc.stderr)
    if proc.returncode != 0 or not found:
        tail = "\n".join(proc.stderr.splitlines()[-15:])
        raise RuntimeError(f"{section}/{framework}/{size} failed ({proc.returncode}):\n{tail}")
    return int(found[-1].replace(",", ""))


def _keep(framework: str, frameworks: list[str] | None) -> bool:
    return frameworks is None or framework in frameworks or framework.split("+")[0] in frameworks


def measure(sections: list[str], frameworks: list[str] | None) -> dict[str, Any]:
    """Count every cell (two children at a time) and return per-unit instructions."""
    jobs: list[tuple[str, str, int]] = []
    for section in sections:
        spec = CELLS[section]
        for fw in spec["frameworks"]:
            if _keep(fw, frameworks):
                jobs.extend((section, fw, size) for size in spec["sizes"])
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        counts = dict(zip(jobs, pool.map(lambda job: count(*job), jobs), strict=True))
    results: dict[str, Any] = {}
    for section in sections:
        spec = CELLS[section]
        small, large = spec["sizes"]
        rows: dict[str, Any] = {}
        for fw in spec["frameworks"]:
            if (section, fw, small) not in counts:
                continue
            units = (large - small) * (GVR_RUNS if section == "gvr" else 1)
            delta = counts[(section, fw, large)] - counts[(section, fw, small)]
            rows[fw] = {
                "instructions_per_unit": delta / units,
                "counts": {
                    str(small): counts[(section, fw, small)],
                    str(large): counts[(section, fw, large)],
                },
            }
        for fw, row in rows.items():
            base = rows.get(RATIO_TO.get(fw, "prism"))
            row["x_prism"] = (
                row["instructions_per_unit"] / base["instructions_per_unit"] if base else None
            )
        results[section] = {"unit": spec["unit"], "sizes": [small, large], "rows": rows}
    return results


def render(results: dict[str, Any]) -> str:
    """The results as Markdown tables."""
    lines: list[str] = []
    for section, data in results.items():
        unit = data["unit"]
        small, large = data["sizes"]
        lines.append(f"**{section}** (instructions per {unit}; sizes {small} and {large})")
        lines.append("")
        lines.append(f"| framework | instructions per {unit} | × prism |")
        lines.append("| --- | ---: | ---: |")
        for fw, row in data["rows"].items():
            ratio = row["x_prism"]
            shown = "—" if ratio is None else f"{ratio:.2f}×" if ratio < 1 else f"{ratio:.1f}×"
            lines.append(f"| {fw} | {row['instructions_per_unit'] / 1000:,.1f} k | {shown} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0]
        + " Needs valgrind and the benchmark venv (bash benchmarks/setup.sh); see the module's"
        " docstring for the method."
    )
    names = sorted({fw for spec in CELLS.values() for fw in spec["frameworks"]})
    parser.add_argument(
        "--only", nargs="+", choices=list(CELLS), default=list(CELLS), help="sections to run"
    )
    parser.add_argument(
        "--frameworks",
        nargs="+",
        default=None,
        help=f"rows to keep (a name or its part before '+'): {', '.join(names)}",
    )
    parser.add_argument("--json", default=None, help="write the results here ('-': stdout)")
    parser.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        section, framework, size = args.child
        asyncio.run(_child(section, framework, int(size)))
        return
    if args.frameworks is not None:
        known = {part for name in names for part in (name, name.split("+")[0])}
        unknown = sorted(set(args.frameworks) - known)
        if unknown:
            parser.error(f"unknown framework(s) {', '.join(unknown)}; known: {', '.join(names)}")
        rows = [fw for section in args.only for fw in CELLS[section]["frameworks"]]
        if not any(_keep(fw, args.frameworks) for fw in rows):
            parser.error("none of --frameworks has a row in the sections of --only")
    if shutil.which("valgrind") is None:
        raise SystemExit("compare_instructions.py needs valgrind (apt-get install valgrind)")
    results = measure(args.only, args.frameworks)
    print(render(results))
    if args.json is not None:
        import json

        text = json.dumps(results, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
