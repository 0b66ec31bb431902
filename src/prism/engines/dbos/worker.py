"""A DBOS worker process: ``prism worker --engine dbos``, or [`serve()`][prism.engines.dbos.worker.serve] from Python.

A worker opens the PostgreSQL store, builds its registry's agents over it, pins the application
version ([`application_version()`][prism.engines.dbos._registry.application_version]), takes a lease
([`_lease`][prism.engines.dbos._lease]), launches DBOS on the same database and dequeues runs from
the queue with at most ``concurrency`` runs at a time — recovered runs included, since a dead
worker's runs are put back on the same queue. Then, until SIGTERM or SIGINT:

* every ``heartbeat_s`` its lease thread renews the lease and takes over the runs of workers
  whose lease ran out (``lease_s``) or who released their runs, by putting their pending
  workflows back on the queue (``DBOS.resume_workflow``);
* on SIGTERM it drains: it stops dequeuing, lets every running leg finish its current turn
  (the turn policy stops it at the next boundary, the envelope records the release), parks every
  workflow, marks its lease ``stopped`` — the other workers take its runs over at their next
  janitor round — and exits with 0. A drain that takes longer than ``drain_timeout_s`` ends the
  process at once with 75 (cancelling a leg would abort its run for good), leaving the
  unfinished legs to recovery as after a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from prism.errors import PrismConfigError

from ._lease import WorkerLease, is_connection_lost
from ._legs import LegContext
from ._registry import (
    AgentFactory,
    application_version,
    build_agents,
    check_registry,
    load_registry,
)
from ._workflow import WORKFLOW_NAME, WorkerRuntime, install

__all__ = ["EXIT_DRAIN_TIMEOUT", "EXIT_FENCED", "WorkerOptions", "serve"]

_log = logging.getLogger("prism.engines.dbos")

EXIT_DRAIN_TIMEOUT: Final = 75
"""Exit code of a drain that did not finish within ``drain_timeout_s``."""
EXIT_FENCED: Final = 70
"""Exit code of a worker that found itself declared dead (it stalled past its lease)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerOptions:
    """Everything a worker needs; ``prism worker`` builds it from its command line."""

    store: str
    """PostgreSQL URL of the database holding the prism store and DBOS's tables."""
    agents: Mapping[str, AgentFactory] | str
    """The registry, or its ``MODULE:ATTR`` import path."""
    concurrency: int = 4
    """Most runs this worker runs at once (DBOS's per-worker queue limit; the queue keeps one
    value for the fleet: the latest worker to start sets it for all)."""
    queue: str = "prism.runs"
    """The DBOS queue runs are submitted to."""
    app_name: str = "prism"
    """The DBOS application name (submitters use the same)."""
    lease_s: float = 10.0
    """Seconds without a heartbeat after which the other workers take this one's runs over."""
    heartbeat_s: float = 1.0
    """Seconds between lease renewals and janitor rounds."""
    decision_wait_s: float = 60.0
    """Seconds of one DBOS receive round while a run waits for a decision."""
    drain_timeout_s: float = 120.0
    """Most seconds a SIGTERM drain waits for the running legs' current turns."""
    poll_s: float = 0.2
    """Seconds between the queue's dequeue polls."""
    store_schema: str = "prism"
    """Schema of the prism store's tables."""
    system_schema: str = "dbos"
    """Schema of DBOS's tables."""
    engine_schema: str = "prism_engine"
    """Schema of the lease table."""
    worker_id: str | None = None
    """This worker's id (its DBOS executor id); default ``<host>-<pid>-<random>``."""
    allow_mixed_versions: bool = False
    """Start even while live workers run another application version (a rolling deploy)."""

    def __post_init__(self) -> None:
        if not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise PrismConfigError(f"concurrency must be an int >= 1, got {self.concurrency!r}")
        for name in ("lease_s", "heartbeat_s", "decision_wait_s", "drain_timeout_s", "poll_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise PrismConfigError(f"{name} must be a number > 0, got {value!r}")
        if self.heartbeat_s * 2 > self.lease_s:
            raise PrismConfigError(
                f"lease_s ({self.lease_s}) must be at least twice heartbeat_s ({self.heartbeat_s})"
            )


def _new_worker_id() -> str:
    import socket

    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


async def serve(
    options: WorkerOptions,
    *,
    ready: Callable[[str, str], None] | None = None,
    stop: asyncio.Event | None = None,
) -> int:
    """Run a worker until SIGTERM/SIGINT (or ``stop``), then drain; return the exit code.

    Args:
        options: The worker's options.
        ready: Called with ``(worker id, application version)`` once it dequeues.
        stop: Set it to drain as on SIGTERM (signal handlers are installed when ``None``).

    Returns:
        0 after a clean drain. A drain that times out ends the process with
        ``EXIT_DRAIN_TIMEOUT`` (``os._exit``); a worker declared dead by another ends it with
        ``EXIT_FENCED``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — a registry or agent that cannot be served,
            or a worker id a live worker already has.
        EngineVersionError: ``ERR_PRISM_ENGINE_VERSION`` — live workers run another version.
        ImportError: the ``dbos`` or ``postgres`` extra is missing.
    """
    from dbos import DBOS, DBOSConfig

    import prism
    from prism.stores.postgres import PostgresStore

    registry = (
        load_registry(options.agents)
        if isinstance(options.agents, str)
        else check_registry(options.agents)
    )
    store = await PostgresStore.connect(
        options.store, schema=options.store_schema, max_size=options.concurrency + 4
    )
    lease: WorkerLease | None = None
    janitor: threading.Thread | None = None
    stop_janitor = threading.Event()
    try:
        served = build_agents(registry, store)
        revisions = {name: s.definition_revision for name, s in served.items()}
        version = application_version(prism.__version__, revisions)
        worker_id = options.worker_id or _new_worker_id()
        lease = await asyncio.to_thread(
            WorkerLease,
            options.store,
            schema=options.engine_schema,
            worker_id=worker_id,
            app_version=version,
            agents=revisions,
            queue_name=options.queue,
            concurrency=options.concurrency,
            lease_s=options.lease_s,
        )
        await asyncio.to_thread(lease.register, allow_mixed_versions=options.allow_mixed_versions)
        lease_lock = threading.Lock()
        active_lease = lease

        def renew() -> bool:
            with lease_lock:
                return active_lease.renew()

        async def lease_ok() -> bool:
            return await asyncio.to_thread(renew)

        runtime = WorkerRuntime(
            LegContext(
                agents=served,
                store=store,
                worker_id=worker_id,
                draining=lambda: runtime.draining.is_set(),
            ),
            decision_wait_s=options.decision_wait_s,
            lease_ok=lease_ok,
        )
        install(runtime)
        config: DBOSConfig = {
            "name": options.app_name,
            "system_database_url": options.store,
            "application_version": version,
            "executor_id": worker_id,
            "dbos_system_schema": options.system_schema,
            "log_level": "WARNING",
        }
        dbos = DBOS(config=config)
        DBOS.launch()
        await DBOS.register_queue_async(
            options.queue,
            worker_concurrency=options.concurrency,
            polling_interval_sec=options.poll_s,
            on_conflict="always_update",
        )

        def take_over(dead: str) -> None:
            """Put the pending runs of the dead worker ``dead`` back on the queue."""
            pending = DBOS.list_workflows(
                status="PENDING",
                executor_id=dead,
                name=WORKFLOW_NAME,
                app_version=version,
                load_input=False,
                load_output=False,
            )
            for status in pending:
                DBOS.resume_workflow(status.workflow_id, queue_name=options.queue)
            _log.warning(
                "worker %s took over %d run(s) of worker %s", worker_id, len(pending), dead
            )

        def lease_loop() -> None:
            unreachable = False
            while not stop_janitor.wait(options.heartbeat_s):
                try:
                    if not renew():
                        _log.error(
                            "worker %s was declared dead by another worker: exiting", worker_id
                        )
                        os._exit(EXIT_FENCED)
                    if unreachable:
                        _log.warning("worker %s: the database answers again", worker_id)
                        unreachable = False
                    with lease_lock:
                        dead_workers = active_lease.take_over()
                    for dead in dead_workers:
                        take_over(dead)
                        with lease_lock:
                            active_lease.resumed(dead)
                except Exception as exc:
                    if not is_connection_lost(exc, None):
                        _log.exception("worker %s: lease round failed", worker_id)
                    elif not unreachable:  # said once per outage; every round retries
                        _log.warning("worker %s: the database is unreachable: %s", worker_id, exc)
                        unreachable = True

        janitor = threading.Thread(target=lease_loop, name="prism-lease", daemon=True)
        janitor.start()
        if stop is None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
        if ready is not None:
            ready(worker_id, version)
        await stop.wait()
        return await _drain(options, runtime, dbos, active_lease, lease_lock)
    finally:
        stop_janitor.set()
        if janitor is not None:
            janitor.join(timeout=options.heartbeat_s + 5)
        install(None)
        try:
            from dbos import DBOS as _DBOS

            _DBOS.destroy(workflow_completion_timeout_sec=0)
        except Exception:
            _log.exception("DBOS shutdown failed")
        if lease is not None:
            lease.close()
        await store.aclose()


async def _drain(
    options: WorkerOptions,
    runtime: WorkerRuntime,
    dbos: Any,
    lease: WorkerLease,
    lease_lock: threading.Lock,
) -> int:
    """Stop dequeuing, let the running legs reach a turn boundary, park every workflow, then
    release the lease (the other workers take the runs over at once)."""
    runtime.draining.set()
    for event in dbos.background_thread_stop_events:  # the queue threads stop dequeuing
        event.set()
    with lease_lock:
        await asyncio.to_thread(lease.set_state, "draining")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + options.drain_timeout_s
    while runtime.in_leg and loop.time() < deadline:
        runtime.leg_ended.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(runtime.leg_ended.wait(), deadline - loop.time())
    if runtime.in_leg:
        _log.error(
            "drain timed out with %d run(s) mid-turn; they continue elsewhere as after a crash",
            len(runtime.in_leg),
        )
        with lease_lock:
            await asyncio.to_thread(lease.set_state, "stopped")
        # Leave at once: cancelling the legs would abort their runs for good.
        logging.shutdown()
        os._exit(EXIT_DRAIN_TIMEOUT)
    tasks = list(runtime.tasks.values())
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    with lease_lock:
        await asyncio.to_thread(lease.set_state, "stopped")
    return 0
