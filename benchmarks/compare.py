"""The comparison suite: prism vs a bare asyncio loop, pydantic-ai, openai-agents, LangGraph/LangChain
and instructor — one process per comparison, a table, and a JSON result file.

Sections (each runs in its own fresh interpreter, all frameworks of a section side by side in it):

* ``turns``     — per-turn runtime overhead for N = 10, 100, 1000 (``compare_turns.py``);
* ``gvr``       — validate-and-revise with k = 0..3 invalid drafts (``compare_gvr.py``);
* ``parallel``  — 8 parallel 50 ms tool calls (``compare_parallel.py``);
* ``footprint`` — import time, RSS, memory per session (``compare_footprint.py``);
* ``realistic`` — per-turn cost with realistic payloads, N = 20, 200, each framework with and
  without its own SQLite persistence (``compare_realistic.py``);
* ``concurrency`` — 10,000 concurrent two-turn sessions: wall, CPU, peak RSS
  (``compare_concurrency.py``).

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
SECTIONS = ("turns", "gvr", "parallel", "footprint", "realistic", "concurrency")

TARGETS = {
    "per_turn_vs_fastest_other": 50.0,  # prism at least this many times cheaper per turn
    "per_turn_vs_bare": 3.0,  # prism at most this many times the bare loop
    "flatness": 1.3,  # prism per-turn cost at N=1000 over N=10
    "parallel_overhead_pct": 10.0,  # 8 × 50 ms tools within this % of 50 ms
    "import_ms": 100.0,  # `import prism`
    "realistic_us_per_turn": 250.0,  # prism, memory store, N=200, CPU
    "realistic_vs_langgraph": 20.0,  # prism at least this many times cheaper, N=200
    "realistic_sqlite_wall_us": 1000.0,  # prism, SQLite every-turn checkpoints, N=200, wall
    "realistic_sqlite_flatness": 1.3,  # prism SQLite CPU per turn, N=200 over N=20
    "concurrent_wall_s": 4.0,  # 10,000 concurrent two-turn sessions
    "concurrent_over_sequential": 1.2,  # wall, the same runs done one by one
    "turns_vs_langgraph": 20.0,  # prism at least this many times cheaper per tiny turn, each N
    "realistic_sqlite_vs_langgraph": 5.0,  # prism+sqlite against LangGraph without persistence
    "realistic_sqlite_vs_langgraph_sqlite": 15.0,  # … against LangGraph with its SQLite saver
    "gvr_us_per_revision": 50.0,  # prism, CPU µs per revision cycle
    "gvr_vs_instructor": 4.0,  # prism's revision at least this many times below instructor's
    "completed_session_bytes": 17054.0,  # memory per completed 10-turn session (issue 26's base)
}


def _at_least(
    target: str, value: float, goal: float, detail: str | None = None
) -> dict[str, Any]:
    """A check that ``value`` (a ratio) is at least ``goal``."""
    return {"target": target, "value": value, "detail": detail, "met": value >= goal}


def _section_args(section: str, quick: bool) -> list[str]:
    if not quick:
        return []
    return {
        "turns": ["--quick", "--max-run-s", "20"],
        "gvr": ["--repeat", "11"],
        "parallel": ["--repeat", "5"],
        "footprint": ["--imports", "5", "--sessions", "2000"],
        "realistic": ["--quick"],
        "concurrency": ["--other-sessions", "500"],
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
        for n in sizes:
            ratio = turns["ratio_to_prism"].get("langgraph", {}).get(n)
            if ratio:
                goal = TARGETS["turns_vs_langgraph"]
                checks.append(
                    _at_least(f"per-turn ≥ {goal:.0f}× cheaper than LangGraph (N={n})", ratio, goal)
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
    if footprint and footprint.get("memory"):
        completed = footprint["memory"]["bytes_per_completed_10_turn_session"]
        checks.append(
            {
                "target": "memory per completed 10-turn session ≤ "
                f"{TARGETS['completed_session_bytes']:,.0f} B (issue 26's base commit)",
                "value": completed,
                "met": completed <= TARGETS["completed_session_bytes"],
            }
        )
    checks.extend(_gvr_checks(results.get("gvr")))
    checks.extend(_realistic_checks(results.get("realistic")))
    checks.extend(_concurrency_checks(results.get("concurrency")))
    return checks


def _gvr_checks(gvr: dict[str, Any] | None) -> list[dict[str, Any]]:
    results = (gvr or {}).get("results", {})
    prism = results.get("prism", {}).get("us_per_revision")
    if not prism:
        return []
    checks: list[dict[str, Any]] = [
        {
            "target": f"per revision ≤ {TARGETS['gvr_us_per_revision']:.0f} µs",
            "value": prism,
            "met": prism <= TARGETS["gvr_us_per_revision"],
        }
    ]
    instructor = results.get("instructor", {}).get("us_per_revision")
    if instructor:
        goal = TARGETS["gvr_vs_instructor"]
        checks.append(
            _at_least(
                f"per revision ≥ {goal:.0f}× below instructor",
                instructor / prism,
                goal,
                f"instructor {instructor:.0f} µs/revision",
            )
        )
    return checks


def _realistic_checks(realistic: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not realistic:
        return []
    checks: list[dict[str, Any]] = []
    res, hi, lo = realistic["results"], str(max(realistic["sizes"])), str(min(realistic["sizes"]))
    prism = res.get("prism", {}).get(hi)
    if prism:
        us = prism["median_cpu_us_per_turn"]
        checks.append(
            {
                "target": f"realistic: prism ≤ {TARGETS['realistic_us_per_turn']:.0f} µs/turn "
                f"(CPU, memory store, N={hi})",
                "value": us,
                "detail": f"wall {prism['median_wall_us_per_turn']:.0f} µs/turn",
                "met": us <= TARGETS["realistic_us_per_turn"],
            }
        )
    ratio = realistic["ratio_to_prism"].get("langgraph", {}).get(hi)
    if ratio:
        goal = TARGETS["realistic_vs_langgraph"]
        checks.append(
            _at_least(
                f"realistic: ≥ {goal:.0f}× cheaper than LangGraph (CPU, N={hi})",
                ratio,
                goal,
                f"LangGraph {res['langgraph'][hi]['median_cpu_us_per_turn']:.0f} µs/turn",
            )
        )
    durable = res.get("prism+sqlite", {})
    for other, key in (
        ("langgraph", "realistic_sqlite_vs_langgraph"),
        ("langgraph+sqlite", "realistic_sqlite_vs_langgraph_sqlite"),
    ):
        if hi in durable and hi in res.get(other, {}):
            theirs = res[other][hi]["median_cpu_us_per_turn"]
            checks.append(
                _at_least(
                    f"realistic: SQLite every turn ≥ {TARGETS[key]:.0f}× cheaper than {other} "
                    f"(CPU, N={hi})",
                    theirs / durable[hi]["median_cpu_us_per_turn"],
                    TARGETS[key],
                    f"{other} {theirs:.0f} µs/turn",
                )
            )
    if hi in durable:
        wall = durable[hi]["median_wall_us_per_turn"]
        checks.append(
            {
                "target": f"realistic: SQLite every-turn checkpoints ≤ "
                f"{TARGETS['realistic_sqlite_wall_us']:.0f} µs/turn (wall, N={hi})",
                "value": wall,
                "detail": f"CPU {durable[hi]['median_cpu_us_per_turn']:.0f} µs/turn",
                "met": wall <= TARGETS["realistic_sqlite_wall_us"],
            }
        )
    if hi in durable and lo in durable and hi != lo:
        flat = realistic["flatness_nmax_over_nmin"]["prism+sqlite"]
        wall_flat = durable[hi]["median_wall_us_per_turn"] / durable[lo]["median_wall_us_per_turn"]
        checks.append(
            {
                "target": f"realistic: SQLite every-turn flat, N={hi} CPU/turn ≤ "
                f"{TARGETS['realistic_sqlite_flatness']}× N={lo}",
                "value": flat,
                "detail": f"wall N={hi}/N={lo}: {wall_flat:.2f}",
                "met": flat <= TARGETS["realistic_sqlite_flatness"],
            }
        )
    return checks


def _concurrency_checks(concurrency: dict[str, Any] | None) -> list[dict[str, Any]]:
    prism = (concurrency or {}).get("results", {}).get("prism")
    if not prism:
        return []
    checks: list[dict[str, Any]] = []
    c = prism.get("concurrent")
    if c:
        ratio = prism.get("concurrent_over_sequential_wall")
        checks.append(
            {
                "target": f"{c['sessions']:,} concurrent two-turn sessions ≤ "
                f"{TARGETS['concurrent_wall_s']:.0f} s wall (target set for 10,000)",
                "value": c["wall_s"],
                "detail": f"CPU {c['cpu_s']:.2f} s, peak RSS {c['peak_rss_mb']:.0f} MB",
                "met": c["wall_s"] <= TARGETS["concurrent_wall_s"],
            }
        )
        if ratio is not None:
            checks.append(
                {
                    "target": "concurrent runs within "
                    f"{(TARGETS['concurrent_over_sequential'] - 1) * 100:.0f} % of sequential (wall)",
                    "value": ratio,
                    "detail": f"CPU ratio {prism['concurrent_over_sequential_cpu']:.2f}",
                    "met": ratio <= TARGETS["concurrent_over_sequential"],
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
    "bare", "bare+records", "prism", "prism+events", "prism(tool_concurrency=8)", "prism+sqlite",
    "pydantic-ai", "pydantic-ai+sqlite", "openai-agents", "openai-agents+sqlite", "langgraph",
    "langgraph+sqlite", "instructor",
)


def _ordered(names: Any) -> list[str]:
    """Frameworks in the table order (baselines, prism, then the others)."""
    known = [n for n in _ORDER if n in names]
    return known + sorted(n for n in names if n not in _ORDER)


_TEXT = ("persistence",)
"""Table columns of words (left-aligned, not wrapped), besides the first."""


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
    if results.get("realistic"):
        out.append(_realistic_table(results["realistic"]))
    if results.get("concurrency"):
        out.append(_concurrency_table(results["concurrency"]))
    return out


def _realistic_table(r: dict[str, Any]) -> tuple[str, list[str], list[list[str]], str]:
    sizes = [str(n) for n in r["sizes"]]
    lo, hi = sizes[0], sizes[-1]
    head = ["framework", "persistence", *[f"N={n} CPU µs/turn" for n in sizes],
            f"N={hi}/N={lo}", *[f"N={n} wall µs/turn" for n in sizes],
            *[f"×prism N={n}" for n in sizes]]
    rows = []
    for config in _ordered([*r["results"], *r["persistence"]]):
        persistence = r["persistence"].get(config, "")
        by_n = r["results"].get(config)
        if by_n is None:  # a framework without persistence of its own
            rows.append([config, persistence, *["n/a"] * (len(head) - 2)])
            continue
        rows.append(
            [config, persistence,
             *[_fmt(by_n[n]["median_cpu_us_per_turn"], ",.0f") for n in sizes],
             _fmt(r["flatness_nmax_over_nmin"].get(config), ".2f"),
             *[_fmt(by_n[n]["median_wall_us_per_turn"], ",.0f") for n in sizes],
             *[_fmt(r["ratio_to_prism"][config].get(n), ".1f", "×") for n in sizes]]
        )
    p = r["payload_sizes"]
    args, res = p["tool_argument_bytes"], p["tool_result_bytes"]
    note = (
        f"median process CPU (and wall) time of one run ÷ N; payloads: system prompt "
        f"{p['system_prompt_bytes']} B, {p['assistant_text_bytes_per_turn']} B of text and "
        f"{p['tool_calls_per_turn']} parallel typed tool calls per turn, arguments "
        f"{args['min']}–{args['max']} B, results {res['min']}–{res['max']} B; ×prism is like for "
        "like: rows without persistence against prism, SQLite rows against prism+sqlite"
        + _load_note(r)
    )
    return ("Realistic payloads, per turn", head, rows, note)


def _concurrency_table(c: dict[str, Any]) -> tuple[str, list[str], list[list[str]], str]:
    modes = c["modes"]
    head = ["framework", "sessions"]
    for mode in modes:
        head += [f"{mode} wall s", "CPU s", "CPU µs/run", "peak RSS MB"]
    if len(modes) == 2:
        head.append("conc./seq. wall")
    rows = []
    for fw in _ordered(c["results"]):
        by_mode = c["results"][fw]
        row = [fw, f"{c['sessions'][fw]:,}"]
        for mode in modes:
            m = by_mode[mode]
            row += [_fmt(m["wall_s"], ".2f"), _fmt(m["cpu_s"], ".2f"),
                    _fmt(m["cpu_us_per_run"], ",.0f"), _fmt(m["peak_rss_mb"], ".0f")]
        if len(modes) == 2:
            row.append(_fmt(by_mode.get("concurrent_over_sequential_wall"), ".2f"))
        rows.append(row)
    note = (
        "two-turn runs of one agent (two parallel tool calls, then text), all started at once "
        "(asyncio.gather) or one by one; each cell a fresh interpreter; the other frameworks at "
        "a smaller session count (their runs cost more)" + _load_note(c)
    )
    return ("Concurrent short runs", head, rows, note)


def markdown(results: dict[str, Any], checks: list[dict[str, Any]]) -> str:
    """The tables and targets as GitHub Markdown (for closing notes and RESULTS.md)."""
    out: list[str] = []
    for title, head, rows, note in tables(results):
        out.append(f"**{title}** — {note}\n")
        out.append("| " + " | ".join(head) + " |")
        out.append(
            "| " + " | ".join("---" if i == 0 or h in _TEXT else "---:" for i, h in enumerate(head))
            + " |"
        )
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
            table.add_column(h, justify="left" if i == 0 or h in _TEXT else "right",
                             no_wrap=i == 0 or h in _TEXT)
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
