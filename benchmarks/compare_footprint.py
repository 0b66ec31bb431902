"""Scenario 5: import time, RSS after import, and memory per session.

* ``import``: for each target, ``--imports`` fresh interpreters (``python -c``) each time one
  statement (``import prism``; the others' usual entry points) with ``time.perf_counter`` around
  it and read their RSS from ``/proc/self/statm`` afterwards; median of each. A bare ``python -c
  pass`` gives the interpreter's own RSS. For prism also ``import prism`` followed by the first real
  use in the same interpreter — build an agent with one ``@prism.tool`` and finish a one-turn
  ``session.run`` with the mock provider — so lazy loading cannot hide import cost.
* ``sessions``: in one fresh interpreter holding 10 000 sessions of one agent: RSS growth per
  idle session (``agent.create_session()``), then per session after each of them completed a
  10-turn run (9 tool rounds of a trivial tool, then text: 20 stored messages per session), all
  sessions kept alive. ``gc.collect()`` before each reading.

Usage::

    python benchmarks/compare_footprint.py [--imports 10] [--sessions 10000] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

from _common import emit_json, machine, versions

_PROBE = """
import time, os, json
t0 = time.perf_counter()
{stmt}
t1 = time.perf_counter()
{after}
t2 = time.perf_counter()
with open("/proc/self/statm") as f:
    rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
print(json.dumps({{"import_s": t1 - t0, "total_s": t2 - t0, "rss": rss}}))
"""

_FIRST_USE = """
import asyncio
from prism.testing import create_mock_provider, provider_done, provider_text_delta, provider_tool_call

@prism.tool
def add(a: int, b: int) -> int:
    \"\"\"Add.\"\"\"
    return a + b

async def _first_use():
    provider = create_mock_provider(turns=[
        [provider_tool_call("c1", "add", {"a": 1, "b": 2}), provider_done()],
        [provider_text_delta("3"), provider_done()],
    ])
    agent = prism.create_agent(model={"provider": "mock", "model": "m"}, provider=provider, tools=[add])
    result = await agent.create_session().run("1 + 2?")
    assert result.text == "3", result

asyncio.run(_first_use())
"""

IMPORT_TARGETS: dict[str, tuple[str, str, str | None]] = {
    # name: (statement, after, module that must be importable)
    "python (no import)": ("pass", "", None),
    "prism": ("import prism", "", "prism"),
    "prism + first use": ("import prism", _FIRST_USE, "prism"),
    "pydantic-ai": ("import pydantic_ai", "", "pydantic_ai"),
    "openai-agents": ("import agents", "", "agents"),
    "langgraph (langchain.agents)": ("import langchain.agents", "", "langchain"),
    "instructor": ("import instructor", "", "instructor"),
    "instructor (from_openai, lazy)": ("import instructor\ninstructor.from_openai", "", "instructor"),
}

_SESSIONS = """
import asyncio, gc, json, os, sys
import prism
from prism.testing import provider_done, provider_text_delta, provider_tool_call

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

TURNS = 10

class Stateless:
    # turn = number of assistant messages so far + 1 (the history is the session's own)
    id = "scripted"
    def generate(self, request):
        return self._replay(sum(1 for m in request.messages if m.role == "assistant") + 1)
    async def _replay(self, turn):
        if turn < TURNS:
            yield provider_tool_call(f"call_{{turn}}", "noop", {{"i": turn}})
        else:
            yield provider_text_delta("done")
        yield provider_done(prism.Usage(input_tokens=1, output_tokens=1))

@prism.tool
def noop(i: int) -> dict:
    \"\"\"Do nothing.\"\"\"
    return {{"ok": True}}

agent = prism.create_agent(model={{"provider": "scripted", "model": "bench"}},
                           provider=Stateless(), tools=[noop],
                           limits={{"max_turns": TURNS, "max_tool_rounds": TURNS}})

async def main(n):
    warm = agent.create_session()
    await warm.run("go")  # first-use caches are not per-session memory
    del warm
    gc.collect(); base = rss()
    sessions = [agent.create_session() for _ in range(n)]
    gc.collect(); idle = rss()
    for s in sessions:
        r = await s.run("go")
        assert r.text == "done" and len(r.messages) == 2 * TURNS, r
    gc.collect(); done = rss()
    print(json.dumps({{"n": n, "base": base, "idle": idle, "done": done}}))

asyncio.run(main({n}))
"""


def _run_probe(code: str) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measure with bytecode caches, as installed
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout
    parsed: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return parsed


def measure_imports(repeat: int) -> dict[str, Any]:
    import importlib.util

    results: dict[str, Any] = {}
    for name, (stmt, after, module) in IMPORT_TARGETS.items():
        if module is not None and importlib.util.find_spec(module) is None:
            results[name] = None
            continue
        code = _PROBE.format(stmt=stmt, after=after)
        _run_probe(code)  # warm the OS file cache and the bytecode caches
        runs = [_run_probe(code) for _ in range(repeat)]
        results[name] = {
            "median_import_ms": statistics.median(r["import_s"] for r in runs) * 1000,
            "median_total_ms": statistics.median(r["total_s"] for r in runs) * 1000,
            "median_rss_mb": statistics.median(r["rss"] for r in runs) / 2**20,
            "runs": repeat,
        }
    return results


def measure_sessions(n: int) -> dict[str, Any]:
    r = _run_probe(_SESSIONS.format(n=n))
    return {
        "sessions": n,
        "bytes_per_idle_session": (r["idle"] - r["base"]) / n,
        "bytes_per_completed_10_turn_session": (r["done"] - r["base"]) / n,
        "rss_mb_with_completed_sessions": r["done"] / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--imports", type=int, default=10, help="interpreters per target")
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    imports = measure_imports(args.imports)
    sessions = measure_sessions(args.sessions)
    payload = {
        "section": "footprint",
        "machine": machine(),
        "versions": versions(
            "prism-runtime", "pydantic-ai-slim", "openai-agents", "langgraph", "langchain",
            "instructor",
        ),
        "imports": imports,
        "memory": sessions,
    }
    if args.json is None:
        print(json.dumps({"imports": imports, "memory": sessions}, indent=2))
    else:
        emit_json(payload, args.json)


if __name__ == "__main__":
    main()
