"""A/B comparison of two prism source trees, interleaved, in fresh processes.

Used to decide whether a change (removing a speed trick, a restructuring) is worth keeping: give
the ``src`` folder of each tree (or the tree's root, when it has ``src/prism``), and this script
runs the chosen benchmark scenarios once per round in a fresh interpreter per tree, with
``PYTHONPATH`` set to that tree only, interleaving the trees round by round (A, B, A, B, …; with
``--abba`` every other round runs B first, which also cancels a steady drift of the machine).
The benchmark scripts are always the ones next to this file, so both trees run the same
scenario code.

Scenarios (``--scenarios``, default ``turns:1000 realistic:1000``):

* ``turns:N`` — ``bench_turns.py --turns N`` (one no-op tool call per turn), CPU µs per turn;
* ``realistic:N`` — ``bench_realistic.py --n N`` with the memory store, CPU µs per turn;
* ``realistic-sqlite:N`` — the same with SQLite and every-turn durable checkpoints;
* ``realistic-durable:N`` — every-turn durable checkpoints over the memory checkpoint store;
* ``realistic-ledger:N`` / ``realistic-sqlite-ledger:N`` — ``realistic`` with a memory run
  ledger / ``realistic-sqlite`` with the store as the run ledger (what request rows cost);
* ``concurrent:N`` / ``sequential:N`` — ``bench_concurrency.py``: N two-turn runs of one agent
  started at once / one by one, CPU µs per run (one sample per process; ``--repeat`` unused);
* ``startup`` / ``first-use`` — ``bench_startup.py``: CPU ms of ``import prism`` / of import +
  ``create_agent`` + one run, in a fresh interpreter;
* ``gvr:N`` / ``gvr-loop:N`` — ``bench_gvr.py --cycles N``: wall µs per revision cycle of a
  generate → validate → revise session run with the mock provider (N revisions) / of the loop
  alone with a stub context (empty history); each process measures ``--repeat`` × 10 runs.

Each process takes ``--repeat`` samples after its warm-up and reports their median; a scenario's
figure is then the median over the rounds. Printed per scenario: the two medians, B − A, B / A,
and the median of the per-round ratios (robust when the machine's speed drifts during the run).
A ratio below 1 means B is faster.

Usage::

    python benchmarks/ablate.py --a BEFORE/src --b AFTER/src [--labels before after]
        [--scenarios turns:1000 realistic:1000] [--rounds 11] [--repeat 3] [--abba] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_TURNS_LINE = re.compile(r"^\s*(\d+) turns: median\s+([0-9.]+) us/turn", re.MULTILINE)
_GVR_SESSION_LINE = re.compile(
    r"^session\.run with mock provider,\s+(\d+) revisions:\s+([0-9.]+) µs", re.MULTILINE
)
_GVR_LOOP_LINE = re.compile(r"^loop only, empty history:\s+([0-9.]+) µs", re.MULTILINE)


@dataclass(frozen=True)
class Scenario:
    """One benchmark invocation and how to read its single figure from the output."""

    name: str
    unit: str
    argv: list[str]
    read: Callable[[str], float]


def _read_turns(n: int) -> Callable[[str], float]:
    def read(stdout: str) -> float:
        for match in _TURNS_LINE.finditer(stdout):
            if int(match.group(1)) == n:
                return float(match.group(2))
        raise ValueError(f"no 'N turns: median' line for N={n} in:\n{stdout}")

    return read


def _read_gvr_session(n: int) -> Callable[[str], float]:
    def read(stdout: str) -> float:
        for match in _GVR_SESSION_LINE.finditer(stdout):
            if int(match.group(1)) == n:
                return float(match.group(2))
        raise ValueError(f"no 'session.run ..., N revisions' line for N={n} in:\n{stdout}")

    return read


def _read_gvr_loop(stdout: str) -> float:
    match = _GVR_LOOP_LINE.search(stdout)
    if match is None:
        raise ValueError(f"no 'loop only, empty history' line in:\n{stdout}")
    return float(match.group(1))


def _read_json(*path: str) -> Callable[[str], float]:
    def read(stdout: str) -> float:
        start = stdout.index("{")
        value: Any = json.loads(stdout[start:])
        for key in path:
            value = value[key]
        return float(value)

    return read


def scenario(spec: str, repeat: int) -> Scenario:
    """Parse ``name[:N]`` into a :class:`Scenario`.

    Raises:
        ValueError: an unknown scenario name or a missing N.
    """
    name, _, size = spec.partition(":")
    if name in ("startup", "first-use"):
        key = "import" if name == "startup" else "first use"
        return Scenario(
            spec,
            "ms CPU",
            ["bench_startup.py", "--runs", str(repeat), "--json", "-"],
            _read_json("results", key, "median_cpu_ms"),
        )
    if not size.isdigit():
        raise ValueError(f"scenario {spec!r}: expected NAME:N, e.g. turns:1000")
    n = int(size)
    if name == "turns":
        return Scenario(
            spec,
            "µs/turn",
            ["bench_turns.py", "--turns", str(n), "--repeat", str(repeat)],
            _read_turns(n),
        )
    stores = {"realistic": "memory", "realistic-sqlite": "sqlite"}
    stores["realistic-durable"] = "memory-durable"
    stores["realistic-ledger"] = "memory-ledger"
    stores["realistic-sqlite-ledger"] = "sqlite-ledger"
    if name in stores:
        store = stores[name]
        return Scenario(
            spec,
            "µs/turn",
            [
                "bench_realistic.py",
                *("--n", str(n), "--runs", str(repeat), "--stores", store, "--json", "-"),
            ],
            _read_json("results", store, str(n), "median_cpu_us_per_turn"),
        )
    if name in ("concurrent", "sequential"):
        return Scenario(
            spec,
            "µs/run",
            [
                "bench_concurrency.py",
                *("--child", "--mode", name, "--sessions", str(n)),
            ],
            _read_json("cpu_us_per_run"),
        )
    if name in ("gvr", "gvr-loop"):
        return Scenario(
            spec,
            "µs/rev",
            ["bench_gvr.py", "--cycles", str(n), "--repeat", str(10 * repeat)],
            _read_gvr_session(n) if name == "gvr" else _read_gvr_loop,
        )
    raise ValueError(f"unknown scenario {name!r}")


def _tree(path: str) -> str:
    """The folder to put on ``PYTHONPATH``: ``path`` itself, or ``path/src`` for a tree root."""
    p = Path(path).resolve()
    if not (p / "prism").is_dir() and (p / "src" / "prism").is_dir():
        p = p / "src"
    if not (p / "prism" / "__init__.py").is_file():
        raise SystemExit(f"{path}: no prism package here (expected PATH/prism or PATH/src/prism)")
    return str(p)


def _env(tree: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = tree
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # both trees run from their bytecode caches
    return env


def _check_tree(python: str, tree: str) -> None:
    """Fail early if the interpreter would import prism from somewhere else."""
    out = subprocess.run(
        [python, "-c", "import prism, os; print(os.path.realpath(prism.__file__))"],
        capture_output=True,
        text=True,
        env=_env(tree),
        check=True,
    ).stdout.strip()
    if not out.startswith(os.path.realpath(tree) + os.sep):
        raise SystemExit(f"PYTHONPATH={tree} imports prism from {out}; refusing to compare")


def _run(python: str, tree: str, sc: Scenario) -> float:
    proc = subprocess.run(
        [python, str(_HERE / sc.argv[0]), *sc.argv[1:]],
        capture_output=True,
        text=True,
        env=_env(tree),
        cwd=str(_HERE.parent),
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{sc.name} failed under {tree}:\n{proc.stderr[-4000:]}")
    return sc.read(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--a", required=True, help="source tree A (PATH/src or the tree root)")
    parser.add_argument("--b", required=True, help="source tree B (PATH/src or the tree root)")
    parser.add_argument("--labels", nargs=2, default=["A", "B"], metavar=("LABEL_A", "LABEL_B"))
    parser.add_argument(
        "--scenarios",
        nargs="+",
        default=["turns:1000", "realistic:1000"],
        help=(
            "turns:N, realistic:N, realistic-sqlite:N, realistic-durable:N, realistic-ledger:N, "
            "realistic-sqlite-ledger:N, concurrent:N, sequential:N, startup, first-use, "
            "gvr:N, gvr-loop:N"
        ),
    )
    parser.add_argument("--rounds", type=int, default=11, help="A/B rounds per scenario (≥ 11)")
    parser.add_argument("--repeat", type=int, default=3, help="samples per process (median)")
    parser.add_argument("--abba", action="store_true", help="run B first in every other round")
    parser.add_argument("--python", default=sys.executable, help="interpreter for both trees")
    parser.add_argument("--json", default=None, help="also write all samples as JSON to PATH")
    args = parser.parse_args()
    trees = [_tree(args.a), _tree(args.b)]
    labels = list(args.labels)
    scenarios = [scenario(s, args.repeat) for s in args.scenarios]
    for tree in trees:
        _check_tree(args.python, tree)

    samples: dict[str, list[list[float]]] = {sc.name: [[], []] for sc in scenarios}
    started = time.perf_counter()
    for round_index in range(args.rounds):
        order = [1, 0] if args.abba and round_index % 2 else [0, 1]
        for sc in scenarios:
            for side in order:
                samples[sc.name][side].append(_run(args.python, trees[side], sc))
        elapsed = time.perf_counter() - started
        print(f"round {round_index + 1}/{args.rounds} done ({elapsed:.0f} s)", file=sys.stderr)

    la, lb = labels
    print(f"A = {la}: {trees[0]}\nB = {lb}: {trees[1]}")
    print(f"{args.rounds} interleaved rounds, {args.repeat} samples per process; medians")
    header = f"{'scenario':<22} {'unit':<8} {la:>10} {lb:>10} {'B-A':>9} {'B/A':>7} {'paired':>7}"
    print(header)
    print("-" * len(header))
    report: dict[str, Any] = {}
    for sc in scenarios:
        a, b = samples[sc.name]
        ma, mb = statistics.median(a), statistics.median(b)
        paired = statistics.median(y / x for x, y in zip(a, b, strict=True))
        print(
            f"{sc.name:<22} {sc.unit:<8} {ma:10.1f} {mb:10.1f} {mb - ma:+9.1f} "
            f"{mb / ma:7.3f} {paired:7.3f}"
        )
        report[sc.name] = {
            "unit": sc.unit,
            "median_a": ma,
            "median_b": mb,
            "ratio_b_over_a": mb / ma,
            "paired_ratio_median": paired,
            "samples_a": a,
            "samples_b": b,
        }
    if args.json is not None:
        payload = {
            "a": {"label": la, "tree": trees[0]},
            "b": {"label": lb, "tree": trees[1]},
            "rounds": args.rounds,
            "repeat": args.repeat,
            "abba": args.abba,
            "scenarios": report,
        }
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
