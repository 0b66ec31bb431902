"""What an ``every-turn`` durable run writes per turn, on SQLite and on PostgreSQL.

The run is the realistic scenario of ``bench_realistic.py`` (N-1 turns with ~200 bytes of text and
two parallel tool calls of ~200-byte arguments and ~1 KB results, then a final text turn) with one
store as the session store and the checkpoint store and ``checkpoint_policy="every-turn"``.
Nothing here is timed: the script counts what the run hands to the database, for N=20 and N=200,
and prints per-turn figures (totals ÷ N, and the marginal figure (total(200) − total(20)) ÷ 180,
which shows whether a turn's writes grow with the history).

SQLite (every statement the store's connection runs, seen by ``set_trace_callback``):

* ``statements`` — all statements, and the writes among them (``INSERT``/``UPDATE``/``DELETE``);
* ``commits`` — transactions that commit a write: autocommit writes plus ``COMMIT``s (and
  ``RELEASE``\\ s of an outermost savepoint);
* ``sql bytes`` — the statement text with its parameters filled in (what the statements carry);
* ``wal bytes`` / ``db bytes`` / ``fsyncs`` — the bytes the process writes to the ``-wal`` file
  and to the database file, and its ``fsync``/``fdatasync`` calls, counted with ``strace`` on a
  second, identical run (skipped when ``strace`` is missing or ``--no-strace``).

PostgreSQL (the libpq protocol trace of the store's one pooled connection):

* ``statements`` / ``writes`` / ``commits`` — from the server's ``CommandComplete`` tags
  (autocommit writes plus ``COMMIT``);
* ``round trips`` — the client's ``Sync`` messages (each waits for the server);
* ``sent bytes`` — protocol bytes the client sent;
* ``wal bytes`` / ``wal syncs`` — ``pg_current_wal_lsn()`` and ``pg_stat_wal.wal_sync`` before and
  after the run; server-wide, so other sessions on the same server add to them.

Usage::

    python benchmarks/bench_checkpoint_writes.py [--n 20 200] [--stores sqlite postgres]
        [--no-strace] [--json PATH|-]

PostgreSQL needs ``$PRISM_TEST_POSTGRES_URL`` (a fresh schema per run, dropped afterwards).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_realistic as scenario
from _prism_api import api

P = scenario.P
_MARK = "/nonexistent/prism-bench-checkpoint-writes"
"""Paths the run ``access()``-es at its start and end, so the ``strace`` log can be cut."""


# --------------------------------------------------------------------------- the run


def _options(store: Any) -> dict[str, Any]:
    unlimited = P.UNLIMITED
    return {
        "id": "bench-realistic",
        "model": {"provider": "mock", "model": "bench-realistic"},
        "instructions": scenario.SYSTEM_PROMPT,
        "tools": scenario.TOOLS,
        "loop": P.SingleShotLoopOptions(tool_concurrency=2),
        "limits": P.RunLimits(
            max_turns=unlimited,
            max_provider_attempts=unlimited,
            max_tool_rounds=unlimited,
            max_tool_calls=unlimited,
            max_wall_time_ms=unlimited,
            max_request_bytes=64 * 2**20,
        ),
        "store": store,
        "run_state": P.RunStateOptions(store, "bench-1", checkpoint_policy="every-turn"),
    }


async def _run(store: Any, n: int, on_start: Any, on_end: Any) -> None:
    provider = P.create_mock_provider(turns=scenario.build_script(n))
    agent = P.create_agent(provider=provider, **_options(store))
    session = agent.create_session()
    await on_start()
    result = await session.run("Where is my tent? Order from last month, customer CUST-100000.")
    await on_end()
    if result.status != "succeeded" or result.text != scenario.FINAL_TEXT:
        raise RuntimeError(f"run did not finish as scripted: {result.status}")
    if provider.call_count != n:
        raise RuntimeError(f"expected {n} provider turns, got {provider.call_count}")


# --------------------------------------------------------------------------- SQLite


class _SqliteCounter:
    """Counts the statements of every connection opened while it is installed."""

    def __init__(self) -> None:
        self.on = False
        self.statements = 0
        self.writes = 0
        self.commits = 0
        self.sql_bytes = 0
        self._depth = 0  # explicit transaction / savepoint nesting
        self._inner_writes = 0

    def trace(self, text: str) -> None:
        if not self.on:
            return
        word = text.lstrip().split(None, 1)[0].upper() if text.strip() else ""
        self.statements += 1
        self.sql_bytes += len(text.encode())
        if word in ("BEGIN", "SAVEPOINT"):
            self._depth += 1
            return
        if word in ("COMMIT", "END"):
            self._depth = 0
            self.commits += self._inner_writes > 0
            self._inner_writes = 0
            return
        if word == "RELEASE":
            self._depth = max(0, self._depth - 1)
            if self._depth == 0:
                self.commits += self._inner_writes > 0
                self._inner_writes = 0
            return
        if word == "ROLLBACK":
            if " TO " not in text.upper():
                self._depth = 0
                self._inner_writes = 0
            return
        if word in ("INSERT", "UPDATE", "DELETE", "REPLACE"):
            self.writes += 1
            if self._depth:
                self._inner_writes += 1
            else:
                self.commits += 1


async def _sqlite_counts(n: int) -> dict[str, int]:
    counter = _SqliteCounter()
    connect = sqlite3.connect

    def traced_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(counter.trace)
        return conn

    with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
        sqlite3.connect = traced_connect  # type: ignore[assignment]
        try:
            store = api("SqliteStore").SqliteStore(os.path.join(tmp, "bench.db"))
            await store.open()
            try:

                async def start() -> None:
                    counter.on = True
                    os.access(_MARK + "-start", os.F_OK)

                async def end() -> None:
                    os.access(_MARK + "-end", os.F_OK)
                    counter.on = False

                await _run(store, n, start, end)
                await store.aclose()  # its last queued work is done before the counts are read
            finally:
                await store.aclose()
        finally:
            sqlite3.connect = connect  # type: ignore[assignment]
    return {
        "statements": counter.statements,
        "writes": counter.writes,
        "commits": counter.commits,
        "sql_bytes": counter.sql_bytes,
    }


_OPENAT = re.compile(r'openat\(.*?"([^"]+)".*\)\s*=\s*(\d+)')
_CALL = re.compile(r"^(?:\d+\s+)?(\w+)\((\d+)?.*\)\s*=\s*(-?\d+)")


def _strace_counts(n: int) -> dict[str, int] | None:
    """Bytes written to the WAL and the database file, and fsyncs, between the run's marks."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    with tempfile.TemporaryDirectory(prefix="prism-bench-strace-") as tmp:
        log = os.path.join(tmp, "trace.log")
        cmd = [
            strace, "-f", "-qq", "-o", log,
            "-e", "trace=openat,pwrite64,write,fsync,fdatasync,access,faccessat,faccessat2",
            sys.executable, os.path.abspath(__file__), "--child-sqlite", str(n),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"strace run failed: {done.stderr[-2000:]}")
        files: dict[str, str] = {}
        counts = {"wal_bytes": 0, "db_bytes": 0, "fsyncs": 0}
        inside = False
        for line in Path(log).read_text().splitlines():
            if _MARK in line:
                inside = _MARK + "-start" in line
                continue
            opened = _OPENAT.search(line)
            if opened is not None:
                files[opened.group(2)] = opened.group(1)
                continue
            if not inside:
                continue
            call = _CALL.match(line)
            if call is None:
                continue
            name, fd, ret = call.group(1), call.group(2), int(call.group(3))
            path = files.get(fd or "", "")
            if name in ("fsync", "fdatasync"):
                counts["fsyncs"] += 1
            elif name in ("pwrite64", "write") and ret > 0 and path.endswith(".db-wal"):
                counts["wal_bytes"] += ret
            elif name in ("pwrite64", "write") and ret > 0 and path.endswith(".db"):
                counts["db_bytes"] += ret
        return counts


def _child_sqlite(n: int) -> None:
    asyncio.run(_sqlite_counts(n))


# --------------------------------------------------------------------------- PostgreSQL


def _postgres_url() -> str:
    url = os.environ.get("PRISM_TEST_POSTGRES_URL")
    if not url:
        raise SystemExit("--stores postgres needs PRISM_TEST_POSTGRES_URL")
    return url


_TAG = re.compile(r'"([A-Z]+)')
_QUOTED = re.compile(r'"([^"]*)"')


async def _server_wal(url: str) -> tuple[int, int]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, wal_sync FROM pg_stat_wal"
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0]), int(row[1])


async def _postgres_counts(n: int) -> dict[str, int]:
    import psycopg
    from psycopg import pq
    from psycopg_pool import AsyncConnectionPool

    url = _postgres_url()
    schema = f"bench_writes_{os.getpid()}_{time.monotonic_ns()}"
    with tempfile.TemporaryDirectory(prefix="prism-bench-pg-") as tmp:
        log_path = os.path.join(tmp, "libpq.trace")
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:

            async def configure(conn: Any) -> None:
                conn.pgconn.trace(fd)
                conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)

            pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                url, min_size=1, max_size=1, open=False, kwargs={"autocommit": True},
                configure=configure,
            )
            await pool.open(wait=True)
            store = api("PostgresStore").PostgresStore(pool=pool, schema=schema)
            await store.open()

            async def mark(which: str) -> None:
                async with pool.connection() as conn:
                    await conn.execute(f"SELECT '{_MARK}-{which}'")

            wal0 = await _server_wal(url)
            try:
                await _run(store, n, lambda: mark("start"), lambda: mark("end"))
            finally:
                wal1 = await _server_wal(url)
                await pool.close()
        finally:
            os.close(fd)
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        counts = _parse_libpq_trace(_read_between_marks(log_path))
    counts["wal_bytes_server"] = wal1[0] - wal0[0]
    counts["wal_syncs_server"] = wal1[1] - wal0[1]
    return counts


def _read_between_marks(path: str) -> list[str]:
    lines = Path(path).read_text(errors="replace").splitlines()
    start = next(i for i, line in enumerate(lines) if f"{_MARK}-start" in line)
    start = next(i for i in range(start, len(lines)) if "\tReadyForQuery" in lines[i])
    end = next(i for i, line in enumerate(lines) if f"{_MARK}-end" in line)
    return lines[start + 1 : end]


def _parse_libpq_trace(lines: list[str]) -> dict[str, int]:
    """Statements, writes, commits, round trips and bytes sent, from libpq trace lines."""
    counts = {"statements": 0, "writes": 0, "commits": 0, "round_trips": 0, "sent_bytes": 0}
    prepared: dict[str, str] = {}
    bound: list[str] = []  # statements sent and not yet completed (pipelines send several)
    depth = 0
    pending_writes = 0
    for line in lines:
        parts = line.split("\t", 3)
        if len(parts) < 3:
            continue
        direction, size, kind = parts[0], parts[1], parts[2]
        rest = parts[3] if len(parts) > 3 else ""
        if direction == "F":
            counts["sent_bytes"] += int(size) + 1
            counts["round_trips"] += kind in ("Sync", "Query")
            names = _QUOTED.findall(rest)
            if kind == "Parse" and names:
                prepared[names[0]] = rest  # the name, then the statement text
            elif kind == "Bind" and len(names) >= 2:
                bound.append(prepared.get(names[1], ""))
            elif kind == "Query":
                bound.append(rest)
            continue
        if kind == "ErrorResponse" and bound:
            bound.pop(0)
        tag = _TAG.search(rest) if kind == "CommandComplete" else None
        if tag is None:
            continue
        current = bound.pop(0) if bound else ""
        word = tag.group(1)
        counts["statements"] += 1
        if word == "BEGIN":
            depth = 1
        elif word in ("COMMIT", "ROLLBACK"):
            counts["commits"] += word == "COMMIT" and pending_writes > 0
            depth = 0
            pending_writes = 0
        elif word in ("INSERT", "UPDATE", "DELETE") or "prism_append_entry" in current:
            counts["writes"] += 1
            if depth:
                pending_writes += 1
            else:
                counts["commits"] += 1
    return counts


# --------------------------------------------------------------------------- report


def _per_turn(by_n: dict[int, dict[str, int]]) -> dict[str, dict[str, float]]:
    ns = sorted(by_n)
    out: dict[str, dict[str, float]] = {}
    for key in by_n[ns[0]]:
        row = {f"N={n}": by_n[n][key] / n for n in ns}
        if len(ns) > 1:
            lo, hi = ns[0], ns[-1]
            row["marginal"] = (by_n[hi][key] - by_n[lo][key]) / (hi - lo)
        out[key] = row
    return out


async def measure(ns: list[int], stores: list[str], use_strace: bool) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for store in stores:
        by_n: dict[int, dict[str, int]] = {}
        for n in ns:
            if store == "sqlite":
                counts = await _sqlite_counts(n)
                io = _strace_counts(n) if use_strace else None
                if io is not None:
                    counts.update(io)
            else:
                counts = await _postgres_counts(n)
            by_n[n] = counts
        results[store] = {"totals": {str(n): c for n, c in by_n.items()}, "per_turn": _per_turn(by_n)}
    return results


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child-sqlite":
        _child_sqlite(int(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, nargs="+", default=[20, 200], help="turns per run")
    parser.add_argument(
        "--stores", nargs="+", choices=("sqlite", "postgres"), default=["sqlite", "postgres"]
    )
    parser.add_argument("--no-strace", action="store_true", help="skip the strace I/O counts")
    parser.add_argument("--json", default=None, help="write the results as JSON to PATH (- : stdout)")
    args = parser.parse_args()
    if any(n < 2 for n in args.n):
        parser.error("--n: at least 2 turns")
    results = asyncio.run(measure(sorted(args.n), args.stores, not args.no_strace))
    if args.json != "-":
        print("per turn (total ÷ N; marginal = growth per added turn):")
        for store, data in results.items():
            table = data["per_turn"]
            columns = list(next(iter(table.values())))
            print(f"  {store}: " + "".join(f"{c:>12}" for c in columns))
            for key, row in table.items():
                print(f"    {key:<18}" + "".join(f"{row[c]:12.2f}" for c in columns))
    if args.json is not None:
        text = json.dumps(results, indent=2, sort_keys=True)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
