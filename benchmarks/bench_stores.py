"""Store costs: session appends, every-turn checkpoints and sustained append throughput.

Measured through the public store API exactly as the runtime calls it, on SQLite (a WAL file in a
temporary directory) and on PostgreSQL (a throw-away schema, dropped afterwards):

* ``append``      — median µs of one session append at the branch tip (a ~200-character message
  entry, ``expected_parent_id`` = the previous entry: the tip compare-and-set of STORE-4);
* ``checkpoint``  — median µs of one ``every-turn`` checkpoint save (a ~1 KiB DUR-4 envelope,
  ``version = n + 1``, ``expected_version = n``: the compare-and-set of DUR-3/DB-6);
* ``sustained``   — appends per second with 8 sessions appending concurrently (one task each,
  each appending at its own tip), over the whole batch;
* SQLite only, ``to_thread`` — the same append through ``asyncio.to_thread`` and a locked shared
  connection instead of the store's dedicated worker thread, to justify that design (DB-3).

Usage::

    python benchmarks/bench_stores.py [--n 2000] [--postgres URL] [--json]

``--postgres`` defaults to ``PRISM_TEST_POSTGRES_URL``; without either, PostgreSQL is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from prism._util import new_id
from prism.checkpoints import AGENT_RUN_NAMESPACE
from prism.store import SessionEntry, new_session_entry
from prism.stores import SqliteStore
from prism.stores._sqlite_connection import migrate as _migrate
from prism.types import Message, ModelConfig, TextContent

_T = TypeVar("_T")

TEXT = ("The quick brown fox jumps over the lazy dog. " * 5)[:200]
SESSIONS = 8


def _entry(session_id: str, parent: str | None) -> SessionEntry:
    return new_session_entry(
        "message",
        session_id=session_id,
        parent_id=parent,
        run_id="run_bench",
        message=Message(role="assistant", content=(TextContent(text=TEXT),)),
    )


def _envelope(run_id: str, session_id: str, leaf_id: str, turn: int) -> dict[str, Any]:
    """A representative DUR-4 envelope of a running single-shot run (~1 KiB)."""
    return {
        "schema_version": 1,
        "agent_id": "support-agent",
        "definition_revision": "2024-06-01",
        "fingerprint": uuid.uuid4().hex * 2,
        "run_id": run_id,
        "session_id": session_id,
        "leaf_id": leaf_id,
        "model": ModelConfig(
            provider="openai", model="gpt-4o-mini", parameters={"temperature": 0.2}
        ).to_dict(),
        "status": "running",
        "pending_calls": [],
        "sticky_decisions": [],
        "interrupt_before_tool": False,
        "checkpoint_policy": "every-turn",
        "counters": {
            "turns": turn, "provider_attempts": turn, "tool_rounds": turn, "tool_calls": turn,
            "wall_time_ms": 1234 * turn, "request_bytes": 40_000 * turn,
            "response_bytes": 2_000 * turn, "input_tokens": 9_000 * turn,
            "output_tokens": 300 * turn, "total_tokens": 9_300 * turn, "cost": 0.0012 * turn,
        },
        "deadline_at": "2024-06-01T12:00:00.000Z",
        "loop_state": {"name": "single-shot", "revision": "1", "snapshot": None},
        "notes": "x" * 300,
    }


async def _timed(n: int, op: Callable[[int], Any]) -> list[float]:
    samples: list[float] = []
    for i in range(n):
        start = time.perf_counter()
        await op(i)
        samples.append((time.perf_counter() - start) * 1e6)
    return samples


async def measure(store: Any, n: int) -> dict[str, float]:
    """Median append and checkpoint µs, and sustained appends/s over 8 concurrent sessions."""
    warm = max(50, n // 10)
    sid = new_id("session")
    chain: list[SessionEntry] = []
    for _ in range(warm + n):  # built before timing: only store.append is measured
        chain.append(_entry(sid, chain[-1].id if chain else None))
    leaf: list[str | None] = [None]

    async def append(i: int) -> None:
        entry = chain[i]
        await store.append(entry, expected_parent_id=entry.parent_id)
        leaf[0] = entry.id

    await _timed(warm, append)
    append_us = statistics.median(await _timed(n, lambda i: append(warm + i)))

    run_id = new_id("run")
    version = [0]
    envelopes = [_envelope(run_id, sid, leaf[0] or "", i) for i in range(warm + n)]

    async def checkpoint(i: int) -> None:
        await store.save_checkpoint(
            namespace=AGENT_RUN_NAMESPACE, key=run_id, value=envelopes[i],
            version=version[0] + 1, expected_version=version[0],
        )
        version[0] += 1

    await _timed(warm, checkpoint)
    checkpoint_us = statistics.median(await _timed(n, lambda i: checkpoint(warm + i)))
    envelope_bytes = len(json.dumps(_envelope(run_id, sid, "entry_" + "0" * 32, 1)))

    per_session = max(1, n // SESSIONS)

    async def session_worker() -> None:
        s = new_id("session")
        parent: str | None = None
        for _ in range(per_session):
            entry = _entry(s, parent)
            await store.append(entry, expected_parent_id=parent)
            parent = entry.id

    start = time.perf_counter()
    await asyncio.gather(*(session_worker() for _ in range(SESSIONS)))
    sustained = SESSIONS * per_session / (time.perf_counter() - start)
    return {
        "append_median_us": round(append_us, 1),
        "checkpoint_median_us": round(checkpoint_us, 1),
        "checkpoint_envelope_bytes": envelope_bytes,
        "sustained_appends_per_s_8_sessions": round(sustained),
    }


class ToThreadSqliteStore(SqliteStore):
    """The rejected design: ``asyncio.to_thread`` per call over one locked shared connection."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._conn: sqlite3.Connection | None = None
        self._conn_lock = threading.Lock()

    async def _call(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        def run() -> _T:
            with self._conn_lock:
                if self._conn is None:
                    conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.execute("PRAGMA synchronous = NORMAL")
                    _migrate(conn, self.path)
                    self._conn = conn
                return fn(self._conn)

        return await asyncio.to_thread(run)

    async def aclose(self) -> None:
        if self._conn is not None:
            self._conn.close()


async def bench_sqlite(n: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        async with SqliteStore(Path(tmp) / "bench.db") as store:
            worker = await measure(store, n)
        alt = ToThreadSqliteStore(str(Path(tmp) / "bench_to_thread.db"))
        try:
            to_thread = await measure(alt, n)
        finally:
            await alt.aclose()
    return {"worker_thread": worker, "to_thread": to_thread}


async def bench_postgres(url: str, n: int) -> dict[str, Any]:
    """The server's default durable commit, and ``synchronous_commit=off`` (set through the
    connection string) which leaves out the WAL flush and so shows the store's own cost."""
    import psycopg

    from prism.stores.postgres import PostgresStore

    schema = f"prism_bench_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in url else "?"
    async_url = f"{url}{sep}options=-csynchronous_commit%3Doff"
    try:
        out: dict[str, Any] = {}
        for name, conninfo in (("durable_commit", url), ("synchronous_commit_off", async_url)):
            async with await PostgresStore.connect(
                conninfo, schema=schema, max_size=SESSIONS
            ) as store:
                out[name] = await measure(store, n)
        return out
    finally:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="timed operations per measurement")
    parser.add_argument("--postgres", default=os.environ.get("PRISM_TEST_POSTGRES_URL"))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    results: dict[str, Any] = {"n": args.n, "sqlite": await bench_sqlite(args.n)}
    if args.postgres:
        results["postgres"] = await bench_postgres(args.postgres, args.n)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, n={args.n}")
    rows = [("sqlite (worker thread)", results["sqlite"]["worker_thread"]),
            ("sqlite (to_thread, rejected)", results["sqlite"]["to_thread"])]
    if "postgres" in results:
        rows.append(("postgresql (durable commit)", results["postgres"]["durable_commit"]))
        rows.append(
            ("postgresql (sync commit off)", results["postgres"]["synchronous_commit_off"])
        )
    print(f"{'store':30} {'append µs':>10} {'checkpoint µs':>14} {'appends/s (8 sessions)':>23}")
    for name, r in rows:
        print(
            f"{name:30} {r['append_median_us']:>10} {r['checkpoint_median_us']:>14} "
            f"{r['sustained_appends_per_s_8_sessions']:>23}"
        )
    print(f"checkpoint envelope: {rows[0][1]['checkpoint_envelope_bytes']} bytes")
    if "postgres" not in results:
        print("postgresql: skipped (pass --postgres URL or set PRISM_TEST_POSTGRES_URL)")


if __name__ == "__main__":
    asyncio.run(main())
