"""The comparison suite: prism vs a bare asyncio loop, pydantic-ai, openai-agents, LangGraph/LangChain
and instructor — one process per comparison, a table, and a JSON result file.

Sections (each runs in its own fresh interpreter, all frameworks of a section side by side in it):

* ``turns``     — per-turn runtime overhead for N = 10, 100, 1000 (``compare_turns.py``);
* ``gvr``       — validate-and-revise with k = 0..3 invalid drafts (``compare_gvr.py``);
* ``parallel``  — 8 parallel 50 ms tool calls (``compare_parallel.py``);
* ``footprint`` — import time, RSS, memory per session (``compare_footprint.py``).

Run it through ``bash benchmarks/run.sh`` (which creates the benchmark venv first), or directly
with the benchmark venv's interpreter::

    benchmarks/.venv-compare/bin/python benchmarks/compare.py [--quick] [--only turns gvr]

The result goes to ``benchmarks/results/compare-<UTC time>.json`` (git-ignored) and is copied to
``benchmarks/results/latest.json``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SECTIONS = ("turns", "gvr", "parallel", "footprint")

TARGETS = {
    "per_turn_vs_fastest_other": 50.0,  # prism at least this many times cheaper per turn
    "per_turn_vs_bare": 3.0,  # prism at most this many times the bare loop
    "flatness": 1.3,  # prism per-turn cost at N=1000 over N=10
    "parallel_overhead_pct": 10.0,  # 8 × 50 ms tools within this % of 50 ms
    "import_ms": 100.0,  # `import prism`
}


def _section_args(section: str, quick: bool) -> list[str]:
    if not quick:
        return []
    return {
        "turns": ["--quick", "--max-run-s", "20"],
        "gvr": ["--repeat", "11"],
        "parallel": ["--repeat", "5"],
        "footprint": ["--imports", "5", "--sessions", "2000"],
    }[section]


def run_section(section: str, quick: bool) -> dict[str, Any]:
    script = HERE / f"compare_{section}.py"
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        out = tmp.name
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # imports are measured with bytecode caches
    print(f"[{section}] {script.name} …", file=sys.stderr, flush=True)
    try:
        subprocess.run(
            [sys.executable, str(script), "--json", out, *_section_args(section, quick)],
            check=True,
            env=env,
            cwd=HERE,
        )
        with open(out, encoding="utf-8") as f:
            data: dict[str, Any] = json.load(f)
        return data
    finally:
        os.unlink(out)


# --------------------------------------------------------------------------- targets


def evaluate(results: dict[str, Any]) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []
    turns = results.get("turns")
    if turns:
        sizes = [str(n) for n in turns["sizes"]]
        for n in sizes:
            fastest = turns["fastest_other"].get(n)
            if fastest:
                checks.append(
                    {
                        "target": f"per-turn ≥ {TARGETS['per_turn_vs_fastest_other']:.0f}× "
                        f"cheaper than the fastest other framework (N={n})",
                        "value": fastest["times_prism"],
                        "detail": f"{fastest['framework']} {fastest['us_per_turn']:.0f} µs/turn",
                        "met": fastest["times_prism"] >= TARGETS["per_turn_vs_fastest_other"],
                    }
                )
        for n in sizes:
            ratio = turns["prism_over_bare"].get(n)
            if ratio is not None:
                checks.append(
                    {
                        "target": f"per-turn within {TARGETS['per_turn_vs_bare']:.0f}× of the "
                        f"bare loop (N={n})",
                        "value": ratio,
                        "met": ratio <= TARGETS["per_turn_vs_bare"],
                    }
                )
        flat = turns["flatness_nmax_over_nmin"].get("prism")
        if flat is not None:
            checks.append(
                {
                    "target": f"flat in N: N={sizes[-1]} cost ≤ {TARGETS['flatness']}× N={sizes[0]}",
                    "value": flat,
                    "met": flat <= TARGETS["flatness"],
                }
            )
    parallel = results.get("parallel")
    if parallel:
        p = parallel["results"].get("prism(tool_concurrency=8)", {}).get("sleep50")
        if p:
            checks.append(
                {
                    "target": f"8 parallel 50 ms tools within {TARGETS['parallel_overhead_pct']:.0f}"
                    "% of 50 ms",
                    "value": p["overhead_pct"],
                    "detail": f"{p['median_ms']:.1f} ms",
                    "met": p["overhead_pct"] <= TARGETS["parallel_overhead_pct"],
                }
            )
    footprint = results.get("footprint")
    if footprint and footprint["imports"].get("prism"):
        ms = footprint["imports"]["prism"]["median_import_ms"]
        first = footprint["imports"].get("prism + first use")
        checks.append(
            {
                "target": f"`import prism` under {TARGETS['import_ms']:.0f} ms",
                "value": ms,
                "detail": (
                    f"import + first use {first['median_total_ms']:.0f} ms" if first else None
                ),
                "met": ms < TARGETS["import_ms"],
            }
        )
    return checks


# --------------------------------------------------------------------------- table


_METRIC = {"cpu": "process CPU time", "wall": "wall time"}


def _load_note(section: dict[str, Any]) -> str:
    """A warning when other work loaded the machine while the section ran."""
    m = section.get("machine") or {}
    load, cpus = m.get("load_average_1m"), m.get("cpus") or 1
    if load is not None and load > 0.75 * cpus:
        return f" — NOTE: load average {load:.1f} on {cpus} CPUs at the start (noisy)"
    return ""


_ORDER = (
    "bare", "bare+records", "prism", "prism+events", "prism(tool_concurrency=8)", "pydantic-ai",
    "openai-agents", "langgraph", "instructor",
)


def _ordered(names: Any) -> list[str]:
    """Frameworks in the table order (baselines, prism, then the others)."""
    known = [n for n in _ORDER if n in names]
    return known + sorted(n for n in names if n not in _ORDER)


def _fmt(v: Any, spec: str = ".1f", suffix: str = "") -> str:
    if v is None:
        return "—"
    if suffix == "×" and abs(v) < 1:
        return f"{v:.2f}×"
    return f"{v:{spec}}{suffix}"


def tables(results: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]], str]]:
    out: list[tuple[str, list[str], list[list[str]], str]] = []
    turns = results.get("turns")
    if turns:
        sizes = [str(n) for n in turns["sizes"]]
        head = ["framework", *[f"N={n} µs/turn" for n in sizes], f"N={sizes[-1]}/N={sizes[0]}",
                *[f"×prism N={n}" for n in sizes]]
        rows = []
        for fw in _ordered(turns["results"]):
            by_n = turns["results"][fw]
            cells = []
            for n in sizes:
                v = by_n[n]
                text = _fmt(v["median_us_per_turn"])
                if v["capped"]:
                    text += f" (capped: {v['turns_completed']} turns)"
                cells.append(text)
            rows.append(
                [fw, *cells, _fmt(turns["flatness_nmax_over_nmin"].get(fw), ".2f"),
                 *[_fmt(turns["ratio_to_prism"][fw].get(n), ".1f", "×") for n in sizes]]
            )
        note = (
            f"median {_METRIC.get(turns.get('metric', 'wall'))} of one run ÷ N; N-1 turns each call "
            "the async noop tool, the last answers in text; instant fake model; steady state "
            f"(3 warm runs before each sample); runs capped at {turns['max_run_s']:.0f} s"
            + _load_note(turns)
        )
        out.append(("Per-turn runtime overhead", head, rows, note))
    gvr = results.get("gvr")
    if gvr:
        ks = [str(k) for k in gvr["ks"]]
        head = ["framework", *[f"k={k} µs" for k in ks], "µs/revision", *[f"×prism k={k}" for k in ks]]
        rows = [
            [fw, *[_fmt(r["median_us_per_run"][k], ".0f") for k in ks],
             _fmt(r["us_per_revision"], ".0f"),
             *[_fmt(gvr["ratio_to_prism"][fw][k], ".1f", "×") for k in ks]]
            for fw, r in ((f, gvr["results"][f]) for f in _ordered(gvr["results"]))
        ]
        out.append(("Validate and revise (k invalid drafts, then a valid one)", head, rows,
                    f"median {_METRIC.get(gvr.get('metric', 'wall'))} µs per run; revision budget 3;"
                    " Person(name: str, age: int)" + _load_note(gvr)))
    parallel = results.get("parallel")
    if parallel:
        head = ["framework", "async tools ms", "overhead", "sync tools ms", "overhead"]
        rows = []
        for fw in _ordered(parallel["results"]):
            r = parallel["results"][fw]
            a, s = r.get("sleep50", {}), r.get("sleep50_sync", {})
            rows.append([fw, _fmt(a.get("median_ms")), _fmt(a.get("overhead_pct"), "+.1f", "%"),
                         _fmt(s.get("median_ms")), _fmt(s.get("overhead_pct"), "+.1f", "%")])
        out.append((f"{parallel['calls']} parallel tool calls of 50 ms", head, rows,
                    "median wall ms of the whole run; floor 50 ms" + _load_note(parallel)))
    footprint = results.get("footprint")
    if footprint:
        head = ["import", "import ms", "total ms", "RSS MB"]
        rows = [
            [name, _fmt(r["median_import_ms"]), _fmt(r["median_total_ms"]),
             _fmt(r["median_rss_mb"])]
            for name, r in footprint["imports"].items()
            if r is not None
        ]
        out.append(("Import (fresh interpreter, median)", head, rows,
                    "total = import + what follows it in the same interpreter (first use)"))
        m = footprint["memory"]
        out.append(
            (f"Memory, {m['sessions']} sessions in one process", ["measure", "bytes/session"],
             [["idle session", _fmt(m["bytes_per_idle_session"], ",.0f")],
              ["completed 10-turn session", _fmt(m["bytes_per_completed_10_turn_session"], ",.0f")]],
             "RSS growth ÷ sessions, all sessions kept alive")
        )
    return out


def markdown(results: dict[str, Any], checks: list[dict[str, Any]]) -> str:
    """The tables and targets as GitHub Markdown (for closing notes and RESULTS.md)."""
    out: list[str] = []
    for title, head, rows, note in tables(results):
        out.append(f"**{title}** — {note}\n")
        out.append("| " + " | ".join(head) + " |")
        out.append("| " + " | ".join(["---"] + ["---:"] * (len(head) - 1)) + " |")
        for row in rows:
            out.append("| " + " | ".join(str(c) for c in row) + " |")
        out.append("")
    out.append("**Targets**\n")
    out.append("| target | value | met | detail |")
    out.append("| --- | ---: | --- | --- |")
    for c in checks:
        out.append(
            f"| {c['target']} | {c['value']:.2f} | {'yes' if c['met'] else '**no**'} | "
            f"{c.get('detail') or ''} |"
        )
    return "\n".join(out) + "\n"


def render(results: dict[str, Any], checks: list[dict[str, Any]]) -> None:
    blocks = tables(results)
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # plain text
        for title, head, rows, note in blocks:
            print(f"\n{title}\n  ({note})")
            widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
            for row in [head, *rows]:
                print("  " + "  ".join(str(c).rjust(w) for c, w in zip(row, widths, strict=True)))
        print("\nTargets")
        for c in checks:
            mark = "met " if c["met"] else "MISS"
            print(f"  [{mark}] {c['target']}: {c['value']:.2f}  {c.get('detail') or ''}")
        return
    console = Console(width=max(140, shutil.get_terminal_size((140, 40)).columns))
    for title, head, rows, note in blocks:
        table = Table(title=title, caption=note)
        for i, h in enumerate(head):
            table.add_column(h, justify="left" if i == 0 else "right")
        for row in rows:
            table.add_row(*row)
        console.print(table)
    table = Table(title="Targets")
    for h in ("target", "value", "", "detail"):
        table.add_column(h)
    for c in checks:
        table.add_row(c["target"], f"{c['value']:.2f}", "met" if c["met"] else "[red]MISSED[/red]",
                      c.get("detail") or "")
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer runs (a few minutes)")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--out", default=None, help="result file (default results/compare-*.json)")
    parser.add_argument("--render", default=None, help="only print the table of a result file")
    parser.add_argument("--markdown", action="store_true", help="with --render: Markdown tables")
    args = parser.parse_args()
    if args.render:
        with open(args.render, encoding="utf-8") as f:
            payload = json.load(f)
        if args.markdown:
            print(markdown(payload["sections"], payload["targets"]), end="")
        else:
            render(payload["sections"], payload["targets"])
        return
    results = {section: run_section(section, args.quick) for section in args.only}
    checks = evaluate(results)
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    payload = {"created": stamp, "quick": args.quick, "sections": results, "targets": checks}
    out = Path(args.out) if args.out else HERE / "results" / f"compare-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if not args.out:
        shutil.copyfile(out, out.parent / "latest.json")
    render(results, checks)
    print(f"\nresults: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
