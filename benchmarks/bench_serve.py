"""What ``prism serve`` costs on SQLite, every target side by side in one run.

Fills a SQLite store (a WAL file in a temporary directory) through the public store API as
``bench_inspection.py`` does: ``--sessions`` sessions (default 10,000, each with one finished run;
every 50th has a child session) and one run of ``--turns`` turns (default 1,000: per turn a tool
call and its result as entries, ten events, two tool-call rows, a usage row). A second store holds
``--small`` sessions (default 200) and the same long run: "a store with some data". Then, as the
median of ``--repeat`` samples:

* ``first page`` — a new app (``create_app``, templates not yet compiled) and its first
  ``GET /sessions``, on the small store and on the full one;
* ``run page`` — ``GET /runs/{id}`` of the 1,000-turn run (transcript, timeline, waterfall), and
  ``GET /runs/{id}/panels``, what a live page fetches on each update;
* ``sessions list`` — ``GET /sessions`` over the 10,000 sessions (warm app), also filtered by
  agent and by status, and ``GET /runs``;
* ``live`` — the app under uvicorn on 127.0.0.1 (default poll 0.25 s); a client follows a
  running run's ``/runs/{id}/stream``; after a random part of a poll interval a writer (another
  connection to the file) appends a ledger row; the time until the stream delivers its
  ``update``, and until the panels fetched then hold it (what the page shows);
* ``start-up`` — ``prism serve --store sqlite:///… --port 0`` as a subprocess, from its start to
  the first ``200`` of ``GET /sessions``.

Server times are measured in-process through the ASGI app (``httpx.ASGITransport``): the time
of the request, without a network, with the garbage collector tuned as ``prism serve`` tunes its
process (``prism.cli._serve.tune_gc``; one more line gives the run page with the default
thresholds, as a host application that mounts ``create_app`` may leave them). Targets: first page < 300 ms, the 1,000-turn run page
< 500 ms, the sessions list over 10,000 sessions < 300 ms, a live event on the page < 1 s,
start-up < 1.5 s.

Usage::

    python benchmarks/bench_serve.py [--sessions 10000] [--small 200] [--turns 1000]
        [--repeat 11] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from bench_inspection import CHUNK, _event, _long_run, _session

import prism
from prism.cli._serve import tune_gc
from prism.events import TurnStartedEvent
from prism.ledger import start_run_record
from prism.limits import UNLIMITED, RunLimits
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.serve import create_app
from prism.stores import SqliteStore
from prism.types import ModelConfig, Usage

BASE = "http://127.0.0.1:8765"
HTML = {"accept": "text/html"}
POLL_S = 0.25
SRC = str(Path(prism.__file__).resolve().parent.parent)
TARGETS_MS = {
    "first page": 300.0,
    "run page": 500.0,
    "sessions list": 300.0,
    "live": 1000.0,
    "start-up": 1500.0,
}


def _client(app: Any) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
    return httpx.AsyncClient(transport=transport, base_url=BASE, timeout=60)


@prism.tool
def lookup(query: str) -> dict[str, Any]:
    """Look a query up (a fixed answer of about 300 characters)."""
    return {"query": query, "hits": ["a matching passage of text " * 3] * 3}


async def _runtime_run(store: SqliteStore, turns: int) -> str:
    """A run of ``turns`` turns made by the runtime: the scripted mock provider asks for
    ``lookup`` on every turn but the last, which answers; usage with cost; the store is the
    ledger. Returns its run id."""
    script: list[Any] = [
        [
            provider_text_delta("Let me look that up. "),
            provider_tool_call(f"call_{i}", "lookup", {"query": f"question {i}"}),
            provider_done(Usage(input_tokens=400 + 30 * i, output_tokens=25, cost=0.0003)),
        ]
        for i in range(turns - 1)
    ]
    script.append([provider_text_delta("Here is what I found."), provider_done()])
    unlimited = RunLimits(max_turns=UNLIMITED, max_provider_attempts=UNLIMITED,
                          max_tool_rounds=UNLIMITED, max_tool_calls=UNLIMITED)
    agent = prism.create_agent(
        name="long-runner", model={"provider": "mock", "model": "bench"},
        provider=create_mock_provider(turns=script), tools=[lookup], limits=unlimited,
        store=store, run_ledger=store,
    )
    result = await agent.create_session().run("Research this for me")
    assert result.status == "succeeded", result.status
    return str(result.run_id)


async def _fill(path: Path, sessions: int, turns: int) -> tuple[dict[str, str], float]:
    """Fill the store; the long runs' ids (``runtime``, ``synthetic``) and the seconds it took."""
    began = time.perf_counter()
    async with SqliteStore(path) as store:
        for start in range(0, sessions, CHUNK):
            count = min(CHUNK, sessions - start)
            await asyncio.gather(*(_session(store, 2 * (start + k)) for k in range(count)))
        _, synthetic = await _long_run(store, turns, 4 * sessions + 10)
        runtime = await _runtime_run(store, turns)
    return {"runtime": runtime, "synthetic": synthetic}, time.perf_counter() - began


async def _median_ms(
    repeat: int, call: Callable[[], Awaitable[Any]], *, warm: bool = True
) -> tuple[float, float]:
    """Median wall and process-CPU milliseconds of ``call`` (the CPU time counts the store's
    thread too; unlike the wall time, other processes on the machine do not inflate it)."""
    if warm:
        await call()
    walls, cpus = [], []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        await call()
        walls.append((time.perf_counter() - start) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
    return statistics.median(walls), statistics.median(cpus)


async def _get(client: httpx.AsyncClient, path: str) -> httpx.Response:
    response = await client.get(path, headers=HTML)
    if response.status_code != 200:
        raise RuntimeError(f"GET {path}: {response.status_code} {response.text[:300]}")
    return response


Row = dict[str, Any]


def _row(measure: str, wall_cpu: tuple[float, float | None], target: str | None = None) -> Row:
    """One line of the table; ``target`` names the target it is checked against."""
    wall, cpu = wall_cpu
    limit = TARGETS_MS[target] if target else None
    return {
        "measure": measure,
        "wall_ms": round(wall, 1),
        "cpu_ms": None if cpu is None else round(cpu, 1),
        "target_ms": limit,
        "met": None if limit is None else wall < limit,
    }


async def bench_pages(
    small: Path, full: Path, runs: dict[str, str], repeat: int, sessions: int, turns: int
) -> list[Row]:
    out: list[Row] = []
    for label, path in (("small store", small), (f"{sessions:,} sessions", full)):
        async with SqliteStore(path) as store:

            async def first_page() -> None:
                async with _client(create_app(store)) as client:
                    await _get(client, "/sessions")

            out.append(_row(f"first page: new app, first GET /sessions ({label})",
                            await _median_ms(repeat, first_page, warm=False), "first page"))
    async with SqliteStore(full) as store, _client(create_app(store)) as client:
        for kind, run_id in runs.items():
            page = await _get(client, f"/runs/{run_id}")
            rows = page.text.split('class="muted small">', 2)[-1].split(" ledger rows")[0]
            size = f"{rows.split('>')[-1]} rows, {len(page.content) / 1e6:.1f} MB"
            out.append(_row(f"run page: GET /runs/{{id}} ({turns:,} turns, {kind}: {size})",
                            await _median_ms(repeat, partial(_get, client, f"/runs/{run_id}")),
                            "run page"))
            panels = partial(_get, client, f"/runs/{run_id}/panels")
            out.append(_row(f"run page: GET /runs/{{id}}/panels ({kind}; a live update's fetch)",
                            await _median_ms(repeat, panels)))
        out.append(_row(f"sessions list: GET /sessions, {sessions:,} sessions",
                        await _median_ms(repeat, lambda: _get(client, "/sessions")),
                        "sessions list"))
        for path in ("/sessions?agent=billing", "/sessions?status=failed", "/runs"):
            out.append(_row(f"sessions list: GET {path}",
                            await _median_ms(repeat, partial(_get, client, path))))
    return out


async def bench_host_gc(full: Path, run_id: str, repeat: int) -> list[Row]:
    """The runtime run's page with the collector as a host process leaves it (``create_app``
    mounted in another app), before ``prism serve``'s tuning is applied."""
    async with SqliteStore(full) as store, _client(create_app(store)) as client:
        timed = await _median_ms(repeat, partial(_get, client, f"/runs/{run_id}"))
    return [_row("run page: GET /runs/{id} (runtime), default gc thresholds (a host app)", timed)]


async def _events(response: httpx.Response, queue: asyncio.Queue[tuple[str, float]]) -> None:
    """Put each server-sent event's name on ``queue`` with the time it arrived."""
    name = None
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            name = line.split(":", 1)[1].strip()
        elif line == "" and name is not None:
            await queue.put((name, time.perf_counter()))
            name = None


async def bench_live(path: Path, repeat: int) -> list[Row]:
    """A ledger row appended by a writer, until the stream delivers it and until the panels
    hold it."""
    import uvicorn

    reader = await SqliteStore(path).open()
    writer = await SqliteStore(path).open()
    sid, rid = "session_live_bench", "run_live_bench"
    start = start_run_record(run_id=rid, session_id=sid, branch_id=None, agent_id="live",
                             model=ModelConfig(provider="openai", model="gpt-4o-mini"))
    await writer.append_run(start)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    started = asyncio.Event()

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            started.set()

    server = Server(uvicorn.Config(create_app(reader, poll_interval=POLL_S),
                                   log_level="warning", access_log=False))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    stream_ms: list[float] = []
    page_ms: list[float] = []
    try:
        await asyncio.wait_for(started.wait(), 30)
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            queue: asyncio.Queue[tuple[str, float]] = asyncio.Queue()
            async with client.stream("GET", f"/runs/{rid}/stream") as response:
                listening = asyncio.create_task(_events(response, queue))
                name, _ = await asyncio.wait_for(queue.get(), 10)  # everything so far
                assert name == "update", name
                rng = random.Random(7)
                for turn in range(1, repeat + 2):
                    await asyncio.sleep(POLL_S * (1 + rng.random()))  # any phase of a poll
                    began = time.perf_counter()
                    await writer.append_event(_event(sid, rid, "2025-03-01T00:00:00.000Z",
                                                     TurnStartedEvent(turn=turn)))
                    name, arrived = await asyncio.wait_for(queue.get(), 10)
                    assert name == "update", name
                    panels = await client.get(f"/runs/{rid}/panels", headers=HTML)
                    shown = time.perf_counter()
                    assert f"Turn {turn}" in panels.text
                    if turn > 1:  # the first is a warm-up
                        stream_ms.append((arrived - began) * 1000)
                        page_ms.append((shown - began) * 1000)
                listening.cancel()
    finally:
        server.should_exit = True
        await serving
        await writer.aclose()
        await reader.aclose()
    return [
        _row("live: ledger row → stream update (poll 0.25 s)",
             (statistics.median(stream_ms), None)),
        _row("live: ledger row → panels fetched (on the page)",
             (statistics.median(page_ms), None), "live"),
        _row("live: the slowest sample, on the page", (max(page_ms), None)),
    ]


def bench_startup(path: Path, repeat: int) -> list[Row]:
    """``prism serve`` from process start to the first 200."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "prism", "serve", "--store", f"sqlite:///{path}", "--port", "0"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("prism serve: http://"):
                raise RuntimeError(f"prism serve did not start: {line!r} {proc.stderr.read()}")
            base = line.split()[2].rstrip("/")
            with httpx.Client(base_url=base, timeout=30) as client:
                while client.get("/sessions", headers=HTML).status_code != 200:
                    time.sleep(0.005)
            samples.append((time.perf_counter() - began) * 1000)
        finally:
            proc.terminate()
            proc.communicate(timeout=30)
    return [_row("start-up: prism serve to the first 200 of GET /sessions",
                 (statistics.median(samples), None), "start-up")]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=200, help="sessions of the small store")
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=11, help="samples per measurement")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        full, small = Path(tmp) / "full.db", Path(tmp) / "small.db"
        runs, fill_s = await _fill(full, args.sessions, args.turns)
        await _fill(small, args.small, 10)
        rows = await bench_host_gc(full, runs["runtime"], args.repeat)
        tune_gc()  # from here on, the process is tuned as prism serve tunes its own
        rows = await bench_pages(small, full, runs, args.repeat, args.sessions, args.turns) + rows
        rows += await bench_live(full, args.repeat)
        rows += bench_startup(full, max(5, args.repeat // 2))
    if args.json:
        print(json.dumps({"sessions": args.sessions, "turns": args.turns, "fill_s": fill_s,
                          "rows": rows}, indent=2))
        return
    print(f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}; {args.sessions:,} "
          f"sessions and two {args.turns:,}-turn runs (filled in {fill_s:.0f} s); median of "
          f"{args.repeat}; cpu: process CPU time (the store's thread included)")
    print(f"\n{'measure':78} {'wall ms':>8} {'cpu ms':>7} {'target':>7}  met")
    for row in rows:
        target = f"< {row['target_ms']:.0f}" if row["target_ms"] else ""
        met = "" if row["met"] is None else ("yes" if row["met"] else "NO")
        cpu = "" if row["cpu_ms"] is None else f"{row['cpu_ms']:.1f}"
        print(f"{row['measure']:78} {row['wall_ms']:>8.1f} {cpu:>7} {target:>7}  {met}")

if __name__ == "__main__":
    asyncio.run(main())
