"""Many workers (DB-11): real processes race for one run claim and for one branch tip.

Eight worker processes (``_race_worker.py``) open the same store. For each round the test sends
all of them the same command at once — claim one suspended run that every one of them has just
loaded at the same version, or append under one branch tip with ``expected_parent_id`` — and checks
that exactly one wins and every other one gets the conflict error.
PostgreSQL (many machines) and SQLite (one machine, many processes) alike.

Crash safety with SIGKILL (DB-10) needs durable runs and is tested with them; every store write
is a single statement (one transaction), which is what makes those kills safe.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from prism._util import new_id
from prism.runtime.checkpoints import AGENT_RUN_NAMESPACE
from prism.store import new_session_entry
from prism.stores import SqliteStore
from prism.stores.postgres import PostgresStore

WORKERS = 8
ROUNDS = 5
_WORKER = Path(__file__).with_name("_race_worker.py")
_IO_GUARD_S = 120.0  # a hang guard only; nothing asserts on time


class _Workers:
    def __init__(self, procs: Sequence[asyncio.subprocess.Process]) -> None:
        self.procs = list(procs)

    async def broadcast(self, command: dict[str, Any]) -> list[dict[str, Any]]:
        line = (json.dumps(command) + "\n").encode()
        for p in self.procs:  # every worker is blocked on stdin: they all start together
            assert p.stdin is not None
            p.stdin.write(line)
        await asyncio.gather(*(p.stdin.drain() for p in self.procs if p.stdin is not None))
        return [json.loads(await self._readline(p)) for p in self.procs]

    @staticmethod
    async def _readline(p: asyncio.subprocess.Process) -> bytes:
        assert p.stdout is not None
        line = await asyncio.wait_for(p.stdout.readline(), _IO_GUARD_S)
        if not line:
            err = await p.stderr.read() if p.stderr is not None else b""
            raise AssertionError(f"worker exited: {err.decode(errors='replace')}")
        return line


@asynccontextmanager
async def _spawn(args: list[str]) -> AsyncIterator[_Workers]:
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, str(_WORKER), *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(WORKERS)
    ]
    workers = _Workers(procs)
    try:
        for p in procs:
            assert (await workers._readline(p)).strip() == b"ready"
        yield workers
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
        for p in procs:
            try:
                await asyncio.wait_for(p.wait(), _IO_GUARD_S)
            except TimeoutError:
                p.kill()
                await p.wait()


async def _race_claims(store: Any, workers: _Workers) -> None:
    """DB-11/DUR-19: one suspended run, N claimers that all loaded version 1 and all claim it
    with expected_version=1: the compare-and-set lets exactly one through."""
    for _ in range(ROUNDS):
        run_id = new_id("run")
        await store.save_checkpoint(
            namespace=AGENT_RUN_NAMESPACE, key=run_id,
            value={"status": "suspended", "run_id": run_id}, version=1, expected_version=0,
        )
        loads = await workers.broadcast({"op": "load", "key": run_id})
        assert [r["version"] for r in loads] == [1] * WORKERS  # all passed the version check
        results = await workers.broadcast({"op": "claim", "key": run_id, "expected": 1})
        winners = [r for r in results if r["ok"]]
        losers = [r["code"] for r in results if not r["ok"]]
        assert len(winners) == 1, results
        assert losers == ["ERR_PRISM_CHECKPOINT_CONFLICT"] * (WORKERS - 1), results
        record = await store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=run_id)
        assert record is not None and record.version == 2
        assert record.value["status"] == "running"


async def _race_appends(store: Any, workers: _Workers) -> None:
    """DB-11/STORE-4: N processes append under one tip with expected_parent_id: one wins."""
    for _ in range(ROUNDS):
        sid = new_id("session")
        root = new_session_entry("custom", session_id=sid, data={"root": True})
        await store.append(root)
        results = await _append_round(workers, sid, root.id)
        winners = [r for r in results if r["ok"]]
        losers = [r["code"] for r in results if not r["ok"]]
        assert len(winners) == 1, results
        assert set(losers) == {"ERR_PRISM_SESSION_APPEND_CONFLICT"}
        entries = await store.list(sid)
        assert len(entries) == 2 and entries[1].parent_id == root.id


async def _append_round(workers: _Workers, sid: str, parent: str) -> list[dict[str, Any]]:
    # Each worker appends its own entry id; they all name the same expected parent.
    lines = [
        (json.dumps({"op": "append", "session": sid, "parent": parent, "id": new_id("entry")})
         + "\n").encode()
        for _ in workers.procs
    ]
    for p, line in zip(workers.procs, lines, strict=True):
        assert p.stdin is not None
        p.stdin.write(line)
    await asyncio.gather(*(p.stdin.drain() for p in workers.procs if p.stdin is not None))
    return [json.loads(await workers._readline(p)) for p in workers.procs]


@pytest.mark.postgres
async def test_db11_postgres_processes_race_for_one_claim_and_one_tip(
    pg_url: str, pg_schema: str
) -> None:
    """DB-11: on PostgreSQL, of 8 processes claiming one suspended run with one expected version
    exactly one wins (the others get CheckpointConflictError), and of
    8 processes appending under one tip with expected_parent_id exactly one wins (the others get
    SessionAppendConflictError)."""
    async with await PostgresStore.connect(pg_url, schema=pg_schema, max_size=2) as store:
        async with _spawn([pg_url, pg_schema]) as workers:
            await _race_claims(store, workers)
            await _race_appends(store, workers)


async def test_db11_sqlite_processes_race_for_one_claim_and_one_tip(tmp_path: Path) -> None:
    """DB-11 on SQLite: the same races between 8 processes sharing one database file."""
    path = tmp_path / "shared.db"
    async with SqliteStore(path) as store:
        async with _spawn([f"sqlite:///{path}"]) as workers:
            await _race_claims(store, workers)
            await _race_appends(store, workers)
