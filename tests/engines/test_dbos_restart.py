"""A PostgreSQL restart during a worker fleet's life (issue 21, item 14), with real worker
processes (``python -m prism worker``) and a real loss of every database connection.

The shared test cluster is never restarted: a restart is simulated by ending every session of
the test's own database with ``pg_terminate_backend`` (SQLSTATE 57P01, ``AdminShutdown``, what
a fast shutdown sends), and one test restarts a private cluster of its own (``pg_ctl``).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from engine_support import Fleet, PrivateCluster, lease_rows, read_log, terminate_backends

pytestmark = [pytest.mark.postgres, pytest.mark.dbos]


async def _client(fleet: Fleet) -> Any:
    import dbos_agents

    from prism.engines.dbos import RunClient

    return await RunClient.connect(fleet.url, agents=dbos_agents.REGISTRY)


async def _until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def _stored_status(client: Any, run_id: str) -> str:
    """The status prism's store holds for ``run_id`` (what ``prism runs`` shows)."""
    from prism.runtime.durable import load_agent_run_state

    loaded = await load_agent_run_state(client.store, run_id=run_id)
    return str(loaded.state["status"])


async def _warm(client: Any, prefix: str, n: int) -> None:
    """``n`` runs at once, so that the workers' and the client's pools hold connections."""
    handles = [await client.submit("tools", f"{prefix}-{i}") for i in range(n)]
    assert [(await h.wait(timeout_s=60)).status for h in handles] == ["succeeded"] * n


async def test_a_worker_killed_after_every_connection_dropped_is_declared_dead_i21_14a(
    fleet: Fleet,
) -> None:
    """After every connection of the database was ended, a worker SIGKILLed is declared dead
    by the survivor's janitor, which reconnected; the survivor's own lease stays alive."""
    victim, survivor = fleet.start("a"), fleet.start("b")
    assert terminate_backends(fleet.url) > 0
    victim.kill()
    await _until(
        lambda: lease_rows(fleet.url)[victim.worker_id][0] == "dead",
        60,
        "the killed worker declared dead",
    )
    state, silent_s = lease_rows(fleet.url)[survivor.worker_id]
    assert state == "alive" and silent_s < 5
    assert "lease round failed" not in survivor.text()
    survivor.terminate()
    assert survivor.proc.wait(60) == 0, survivor.text()


async def test_runs_submitted_after_every_connection_dropped_succeed_i21_14c(
    fleet: Fleet,
) -> None:
    """The worker's store connections were all ended while idle: runs submitted afterwards run
    on fresh connections at their first attempt and succeed, and prism's store says so."""
    fleet.env["PRISM_TEST_TOOL_SLEEP"] = "0.2"
    worker = fleet.start("a", concurrency=3)
    client = await _client(fleet)
    try:
        await _warm(client, "warm", 6)  # the worker's pool now holds several connections
    finally:
        await client.aclose()
    assert terminate_backends(fleet.url) > 0
    client = await _client(fleet)
    try:
        handles = [await client.submit("tools", f"after-{i}") for i in range(2)]
        outcomes = [await h.wait(timeout_s=60) for h in handles]
        assert [o.status for o in outcomes] == ["succeeded", "succeeded"], outcomes
        for handle in handles:
            assert await _stored_status(client, handle.run_id) == "succeeded"
    finally:
        await client.aclose()
    # No leg ran into a dead connection: none needed a second attempt. DBOS's own background
    # threads (its queue poller and its notification listener) may meet a killed connection
    # and log it before they reconnect by themselves; what they log is not a leg's.
    legs_text = _without_dbos_background(worker.text())
    assert "AdminShutdown" not in legs_text, worker.text()
    assert "Step being automatically retried" not in worker.text(), worker.text()
    worker.terminate()
    assert worker.proc.wait(60) == 0, worker.text()


async def test_a_client_opened_before_a_real_restart_submits_after_it_i21_14b(
    private_fleet: Fleet, private_postgres: PrivateCluster
) -> None:
    """A real restart (``pg_ctl restart -m fast``) of a cluster under a worker and a client:
    the client opened before it submits afterwards; the run submitted then succeeds; a run
    in flight across the restart ends, and prism's store agrees with DBOS about it; the
    worker's lease is renewed again."""
    fleet = private_fleet
    fleet.env["PRISM_TEST_TOOL_SLEEP"] = "0.5"
    worker = fleet.start("a")
    client = await _client(fleet)
    try:
        await _warm(client, "before", 2)
        in_flight = await client.submit("tools", "across-0")
        await _until(
            lambda: any(e[2] == "across-0" for e in read_log(fleet.effects_log)),
            60,
            "the in-flight run inside its tool",
        )
        private_postgres.restart()
        after = await client.submit("tools", "after-0")
        done = await after.wait(timeout_s=90)
        assert done.status == "succeeded", done
        assert await _stored_status(client, after.run_id) == "succeeded"
        crossed = await in_flight.wait(timeout_s=90)
        # Cut inside its tool, the call is ambiguous (never dispatched again); else it finished.
        assert crossed.status in ("succeeded", "ambiguous"), crossed
        stored = await _stored_status(client, in_flight.run_id)
        assert stored == ("succeeded" if crossed.status == "succeeded" else "running")
        await _until(
            lambda: lease_rows(fleet.url)[worker.worker_id][1] < 2,
            30,
            "the worker's lease renewed after the restart",
        )
        assert lease_rows(fleet.url)[worker.worker_id][0] == "alive"
    finally:
        await client.aclose()
    worker.terminate()
    assert worker.proc.wait(60) == 0, worker.text()


async def test_a_run_whose_leg_runs_out_of_retries_is_failed_in_the_store_too_i21_14d(
    fleet: Fleet,
) -> None:
    """The store refuses the run's writes for longer than its leg's retries (its checkpoint
    table is away): the engine gives up, and once the store takes writes again the stored run
    says ``failed`` too, as DBOS and the submitter do."""
    import psycopg

    fleet.env.update({"PRISM_TEST_TOOL_SLEEP": "1.0", "PRISM_TEST_TOOL_TURNS": "1"})
    worker = fleet.start("a")
    client = await _client(fleet)
    try:
        handle = await client.submit("tools", "doomed-0")
        await _until(
            lambda: any(e[2] == "doomed-0" for e in read_log(fleet.effects_log)),
            60,
            "the run inside its tool",
        )
        assert await _stored_status(client, handle.run_id) == "running"
        with psycopg.connect(fleet.url, autocommit=True) as conn:
            conn.execute("ALTER TABLE prism.prism_checkpoints RENAME TO prism_checkpoints_away")
            try:

                def leg_ended() -> bool:
                    row = conn.execute(
                        "SELECT count(*) FROM dbos.operation_outputs WHERE workflow_uuid = %s "
                        "AND function_name = 'prism.leg'",
                        (handle.run_id,),
                    ).fetchone()
                    return bool(row and row[0])

                # The leg's step records its end once it returns, or runs out of attempts.
                await _until(leg_ended, 60, "the leg's step to end")
            finally:
                conn.execute("ALTER TABLE prism.prism_checkpoints_away RENAME TO prism_checkpoints")
        outcome = await handle.wait(timeout_s=120)
        assert outcome.status == "failed", outcome
        assert await _stored_status(client, handle.run_id) == "failed"
        listed = {r.run_id: r.status for r in await client.list_runs()}
        assert listed[handle.run_id] == "failed"
        assert outcome.note is not None and "gave up" in outcome.note
        assert outcome.result is not None and outcome.result.error is not None
        assert outcome.result.error.code == "ERR_PRISM_RUN_FAILED"
    finally:
        await client.aclose()
    worker.terminate()
    assert worker.proc.wait(60) == 0, worker.text()


async def test_a_second_worker_with_a_live_workers_id_exits_with_a_typed_error_i21_14e(
    fleet: Fleet,
) -> None:
    """A worker started with the id of a live worker exits 2 with a typed error naming the id
    and the live worker, without a traceback; the live worker is untouched."""
    first = fleet.start("a", extra_args=("--worker-id", "worker-7"))
    assert first.worker_id == "worker-7"
    second = fleet.start("b", extra_args=("--worker-id", "worker-7"), wait=False)
    assert second.proc.wait(60) == 2, second.text()
    text = second.text()
    assert "Traceback" not in text and "psycopg" not in text, text
    assert "ERR_PRISM_CONFIG" in text and "'worker-7' is in use by a live worker" in text
    assert lease_rows(fleet.url)["worker-7"][0] == "alive"
    first.terminate()
    assert first.proc.wait(60) == 0, first.text()


async def test_a_run_submitted_while_a_worker_creates_the_engine_tables_waits_i21_14f(
    fleet: Fleet,
) -> None:
    """On a database no worker has used, a submit says so with a typed, retryable error; a
    submit made while the first worker is still creating DBOS's tables waits for them, and
    the run succeeds."""
    from prism.errors import EngineNotReadyError

    client = await _client(fleet)
    try:
        with pytest.raises(EngineNotReadyError) as raised:
            await client.submit("tools", "early-0")
        assert raised.value.code == "ERR_PRISM_ENGINE_NOT_READY"
        assert "no worker has started" in str(raised.value)

        def lease_taken() -> bool:
            try:
                return bool(lease_rows(fleet.url))
            except Exception:  # the lease table is not there yet
                return False

        worker = fleet.start("a", wait=False)
        await _until(lease_taken, 60, "the starting worker's lease")
        handle = await client.submit("tools", "early-1")  # DBOS's tables are being created
        done = await handle.wait(timeout_s=60)
        assert done.status == "succeeded", done
    finally:
        await client.aclose()
    worker.wait_ready()
    worker.terminate()
    assert worker.proc.wait(60) == 0, worker.text()


_LOG_RECORD = re.compile(r"^\d\d:\d\d:\d\d \[", re.M)
_DBOS_BACKGROUND = ("(dbos:_queue.py:", "(dbos:_sys_db_postgres.py:")


def _without_dbos_background(text: str) -> str:
    """A worker's output without the log records of DBOS's background threads (a record runs
    from its ``HH:MM:SS [LEVEL]`` header to the next one) and the connection pool's notes on
    the broken connections it discarded."""
    starts = [m.start() for m in _LOG_RECORD.finditer(text)] + [len(text)]
    kept = [text[: starts[0]]]
    for begin, end in zip(starts, starts[1:], strict=False):
        record = text[begin:end]
        header = record.split("\n", 1)[0]
        if not any(marker in header for marker in _DBOS_BACKGROUND):
            kept.append(record)
    return "\n".join(
        line for line in "".join(kept).splitlines() if "discarding broken connection" not in line
    )
