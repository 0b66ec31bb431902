"""prism on DBOS workers: throughput, engine overhead per run, recovery time after SIGKILL.

Real worker processes (``python -m prism worker``) over a throw-away PostgreSQL database, the
agents of ``tests/engines/dbos_agents.py`` with an instant scripted provider (two tool turns and
an answer per run, the tool returns at once):

* ``throughput`` — runs per second through 1, 2 and 3 workers (``--concurrency`` runs each):
  ``--runs`` runs submitted at once, timed from the first submit to the last result; median of
  ``--repeat`` batches;
* ``overhead``   — one run at a time, submit to result, on one worker, against the same agent
  run in-process by prism alone over the same PostgreSQL store (every-turn checkpoints): wall
  ms per run, and CPU ms per run of the process that runs the agent (the worker's, read from
  ``/proc``, against this process's for prism alone); medians;
* ``recovery``   — a run waiting for an approval on worker A; A is SIGKILLed and the approval
  sent at once; the time until the run has finished on worker B (lease 2 s, heartbeat 0.4 s,
  queue poll 0.1 s); median of 5.

Usage::

    python benchmarks/bench_dbos.py [--url URL] [--runs 60] [--repeat 3] [--concurrency 8]

``--url`` defaults to ``PRISM_TEST_POSTGRES_URL``. Wall-clock numbers on a shared 2-core machine
are noisy: read the medians, and the CPU figures for the overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
AGENTS_DIR = ROOT / "tests" / "engines"
sys.path[:0] = [str(ROOT / "src"), str(AGENTS_DIR)]

LEASE = ["--lease", "2", "--heartbeat", "0.4", "--poll", "0.1", "--decision-wait", "1"]


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Database:
    def __init__(self, url: str) -> None:
        import psycopg

        self.admin = url
        self.name = f"prism_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        self.url = urlsplit(url)._replace(path=f"/{self.name}").geturl()

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


class Workers:
    def __init__(self, url: str, tmp: Path, concurrency: int) -> None:
        self.url, self.tmp, self.concurrency = url, tmp, concurrency
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(self, *, wait: bool = True) -> tuple[subprocess.Popen[bytes], str]:
        log = self.tmp / f"worker-{len(self.procs)}.log"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(AGENTS_DIR)]))
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "prism", "worker", "--store", self.url,
                 "--agents", "dbos_agents:REGISTRY", "--concurrency", str(self.concurrency), *LEASE],
                cwd=AGENTS_DIR, env=env, stdout=out, stderr=subprocess.STDOUT,
            )
        self.procs.append((proc, log))
        deadline = time.monotonic() + 60
        while True:
            text = log.read_text(errors="replace")
            for line in text.splitlines():
                if " ready: version " in line:
                    return proc, line.split()[2]
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start:\n{text}")
            time.sleep(0.05)

    def stop(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _ in self.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()


async def _client(url: str) -> Any:
    import dbos_agents

    from prism.engines.dbos import RunClient

    return await RunClient.connect(url, agents=dbos_agents.REGISTRY)


async def throughput(args: argparse.Namespace, tmp: Path) -> dict[int, float]:
    out: dict[int, float] = {}
    for n_workers in (1, 2, 3):
        db = Database(args.url)
        workers = Workers(db.url, tmp, args.concurrency)
        try:
            for _ in range(n_workers):
                workers.start()
            client = await _client(db.url)
            rates = []
            for batch in range(args.repeat + 1):
                start = time.perf_counter()
                handles = [await client.submit("tools", f"b{batch}-{i}") for i in range(args.runs)]
                outcomes = await asyncio.gather(*(h.wait(poll_s=0.05) for h in handles))
                elapsed = time.perf_counter() - start
                assert all(o.status == "succeeded" for o in outcomes)
                if batch:  # the first batch warms the workers up
                    rates.append(args.runs / elapsed)
            out[n_workers] = statistics.median(rates)
            await client.aclose()
        finally:
            workers.stop()
            db.drop()
        print(f"  {n_workers} worker(s): {out[n_workers]:.1f} runs/s", flush=True)
    return out


async def overhead(args: argparse.Namespace, tmp: Path) -> dict[str, float]:
    import dbos_agents

    import prism
    from prism.stores.postgres import PostgresStore

    db = Database(args.url)
    workers = Workers(db.url, tmp, 1)
    try:
        proc, _ = workers.start()
        client = await _client(db.url)
        n = args.overhead_runs
        for i in range(5):
            await (await client.submit("tools", f"warm-{i}")).wait(poll_s=0.01)
        walls, cpu0 = [], _cpu_s(proc.pid)
        for i in range(n):
            start = time.perf_counter()
            await (await client.submit("tools", f"o-{i}")).wait(poll_s=0.01)
            walls.append(time.perf_counter() - start)
        engine_cpu = (_cpu_s(proc.pid) - cpu0) / n
        await client.aclose()
        store = await PostgresStore.connect(db.url, schema="prism")
        agent = dbos_agents.tools_agent(store)
        for i in range(5):
            await agent.create_session().run(f"warm-{i}")
        alone_walls, cpu0 = [], time.process_time()
        for i in range(n):
            start = time.perf_counter()
            result = await agent.create_session().run(f"p-{i}")
            alone_walls.append(time.perf_counter() - start)
            assert result.status == "succeeded"
        alone_cpu = (time.process_time() - cpu0) / n
        await store.aclose()
        _ = prism
    finally:
        workers.stop()
        db.drop()
    return {
        "engine_wall_ms": statistics.median(walls) * 1000,
        "alone_wall_ms": statistics.median(alone_walls) * 1000,
        "engine_cpu_ms": engine_cpu * 1000,
        "alone_cpu_ms": alone_cpu * 1000,
    }


async def recovery(args: argparse.Namespace, tmp: Path) -> list[float]:
    db = Database(args.url)
    workers = Workers(db.url, tmp, 4)
    times: list[float] = []
    os.environ["PRISM_TEST_TOOL_TURNS"] = "1"
    try:
        live = {wid: proc for proc, wid in (workers.start(), workers.start())}
        client = await _client(db.url)
        for i in range(args.recoveries):
            handle = await client.submit("approval", f"rec-{i}")
            waiting = await handle.wait(poll_s=0.02)
            assert waiting.status == "suspended" and waiting.worker in live
            victim = live.pop(waiting.worker)
            victim.kill()
            victim.wait()
            killed = time.perf_counter()
            await handle.decide(decision="approve")
            done = await handle.wait(poll_s=0.02)
            times.append(time.perf_counter() - killed)
            assert done.status == "succeeded" and done.worker in live, done
            print(f"  recovery {i + 1}: {times[-1]:.2f} s", flush=True)
            proc, wid = workers.start()
            live[wid] = proc
        await client.aclose()
    finally:
        workers.stop()
        db.drop()
    return times


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("PRISM_TEST_POSTGRES_URL"))
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--overhead-runs", type=int, default=40)
    parser.add_argument("--recoveries", type=int, default=5)
    parser.add_argument("--only", nargs="*", default=["throughput", "overhead", "recovery"])
    args = parser.parse_args()
    if not args.url:
        raise SystemExit("bench_dbos needs --url or PRISM_TEST_POSTGRES_URL")
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        os.environ.setdefault("PRISM_TEST_TOOL_SLEEP", "0")
        if "throughput" in args.only:
            print(f"throughput ({args.runs} runs per batch, concurrency {args.concurrency}):")
            rates = await throughput(args, tmp)
            print("| workers | runs/s | vs 1 worker |\n| --- | --- | --- |")
            for k, v in rates.items():
                print(f"| {k} | {v:.1f} | {v / rates[1]:.2f}× |")
        if "overhead" in args.only:
            o = await overhead(args, tmp)
            print("| one run at a time (median) | wall ms | CPU ms (agent's process) |")
            print("| --- | --- | --- |")
            print(f"| prism alone (PostgreSQL, every-turn) | {o['alone_wall_ms']:.1f} | {o['alone_cpu_ms']:.1f} |")
            print(f"| through a DBOS worker | {o['engine_wall_ms']:.1f} | {o['engine_cpu_ms']:.1f} |")
            print(
                f"| engine overhead per run | {o['engine_wall_ms'] - o['alone_wall_ms']:.1f} | "
                f"{o['engine_cpu_ms'] - o['alone_cpu_ms']:.1f} |"
            )
        if "recovery" in args.only:
            times = await recovery(args, tmp)
            print(
                f"recovery after SIGKILL (lease 2 s): median {statistics.median(times):.2f} s "
                f"of {len(times)} (min {min(times):.2f}, max {max(times):.2f})"
            )


if __name__ == "__main__":
    asyncio.run(main())
