"""Many workers resume one suspended run (DB-11, DUR-19) — at the runtime level.

A durable run suspends on a tool approval; then eight worker processes (``_resume_worker.py``)
each build the agent and call ``resume_agent_run(..., decision="approve")`` on that one run at
once. Exactly one of them claims it and finishes it; the tool runs once; every other worker gets
``CheckpointConflictError`` — whether it lost at the compare-and-set of its claim or loaded the
envelope only after the winner's claim (a stale version at load is the same conflict, on every
store). With the barrier, every worker has loaded and checked the envelope before any of them
writes its claim, so the compare-and-set alone decides; without it, some losers lose at load.

PostgreSQL (workers on many machines) and SQLite (worker processes on one machine) alike.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from _resume_worker import FIRST_TURN, build_agent

from prism.runtime.durable import load_agent_run_state
from prism.stores import open_store

WORKERS = 8
_WORKER = Path(__file__).with_name("_resume_worker.py")
_IO_GUARD_S = 120.0  # a hang guard only; nothing asserts on time


async def _suspended_run(url: str, options: dict[str, Any], effects: Path) -> tuple[str, int, str]:
    """Start the run and let it suspend on the ``pay`` approval; return run id, version, session."""
    store = await open_store(url, **options)
    try:
        agent = build_agent(store, store, effects, [FIRST_TURN])
        session = agent.create_session()
        result = await session.run("pay 5")
        assert result.status == "suspended" and result.run_state is not None
        return result.run_id, result.run_state.version, session.id
    finally:
        await store.aclose()


def _forget(effects: Path) -> None:
    effects.unlink(missing_ok=True)


def _effect_calls(effects: Path) -> list[str]:
    """The call ids of the ``pay`` side effects so far, in order."""
    return [line.split()[0] for line in effects.read_text().splitlines()]


async def _readline(proc: asyncio.subprocess.Process) -> str:
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), _IO_GUARD_S)
    if not line:
        err = await proc.stderr.read() if proc.stderr is not None else b""
        raise AssertionError(f"worker exited: {err.decode(errors='replace')}")
    return line.decode().strip()


async def _broadcast(procs: list[asyncio.subprocess.Process], line: str) -> None:
    for proc in procs:  # every worker is blocked on stdin: they all start together
        assert proc.stdin is not None
        proc.stdin.write((line + "\n").encode())
    await asyncio.gather(*(p.stdin.drain() for p in procs if p.stdin is not None))


async def _race(url: str, schema: str | None, tmp_path: Path) -> None:
    effects = tmp_path / "effects.log"
    options = {} if schema is None else {"schema": schema, "max_size": 2}
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, str(_WORKER), url, schema or "-", str(effects),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(WORKERS)
    ]
    try:
        for proc in procs:
            assert await _readline(proc) == "ready"
        for barrier in (True, False):
            await _round(procs, url, options, effects, barrier=barrier)
    finally:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in procs:
            try:
                await asyncio.wait_for(proc.wait(), _IO_GUARD_S)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def _round(
    procs: list[asyncio.subprocess.Process],
    url: str,
    options: dict[str, Any],
    effects: Path,
    *,
    barrier: bool,
) -> None:
    _forget(effects)
    run_id, version, session_id = await _suspended_run(url, options, effects)
    await _broadcast(procs, f"go {run_id} {version} {int(barrier)}")
    if barrier:
        for proc in procs:  # every worker passed load + checks and waits to write its claim
            assert await _readline(proc) == "claiming"
        await _broadcast(procs, "claim")
    outcomes = [json.loads(await _readline(proc)) for proc in procs]
    winners = [o for o in outcomes if o["ok"]]
    losers = Counter((o["code"], o["error"]) for o in outcomes if not o["ok"])
    assert len(winners) == 1 and winners[0]["status"] == "succeeded", outcomes
    # one conflict error for every loser, at load or at the compare-and-set, on every store
    assert losers == {
        ("ERR_PRISM_CHECKPOINT_CONFLICT", "CheckpointConflictError"): WORKERS - 1
    }, outcomes
    # the approved call ran exactly once, and its result is stored once
    assert _effect_calls(effects) == ["call_pay"]
    store = await open_store(url, **options)
    try:
        loaded = await load_agent_run_state(store, run_id=run_id)
        assert loaded.state["status"] == "succeeded"
        entries = await store.list(session_id)
        tool_rows = [e for e in entries if e.message is not None and e.message.role == "tool"]
        assert len(tool_rows) == 1
    finally:
        await store.aclose()


async def test_db11_eight_processes_resume_one_run_on_postgres(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    """DB-11/DUR-19 on PostgreSQL: one of eight resumers wins; the tool runs once. Two rounds:
    claims released together (the compare-and-set decides), then a free-for-all."""
    await _race(pg_url, pg_schema, tmp_path)


async def test_db11_eight_processes_resume_one_run_on_sqlite(tmp_path: Path) -> None:
    """DB-11/DUR-19 on SQLite (one machine, many processes): one of eight resumers wins."""
    await _race(f"sqlite:///{tmp_path}/store.db", None, tmp_path)
