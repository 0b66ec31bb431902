"""``prism worker``: serve a registry's agents as a worker of a durable-execution engine.

::

    prism worker --engine dbos --store postgresql://app@db/app --agents myagents:REGISTRY \\
        --concurrency 8

The worker runs until SIGTERM or SIGINT, then drains: running legs finish their current turn,
their runs are released to the other workers, and it exits with 0 (75 when the drain timed out).
A registry, an agent or a version it cannot serve exits with 2 and says why. The engine's module
(``prism.engines.dbos``, extra ``prism-runtime[dbos]``) is imported only by this command.
"""

from __future__ import annotations

import argparse
import os
from typing import IO, Any, Final

from prism.cli._store import STORE_ENV
from prism.errors import PrismError

__all__ = ["EXIT_WORKER_CONFIG", "add_worker_parser", "run_worker"]

EXIT_WORKER_CONFIG: Final = 2
"""Exit code of a worker that cannot start (command line, registry, agent, store, version)."""


def add_worker_parser(commands: Any) -> argparse.ArgumentParser:
    """Register ``prism worker`` on the ``commands`` subparsers and return its parser."""
    worker: argparse.ArgumentParser = commands.add_parser(
        "worker",
        help="serve agents as a worker of a durable-execution engine (DBOS)",
        description="Run queued prism runs of the registry's agents until SIGTERM/SIGINT, then "
        "drain (finish the current turns, release the runs to the other workers) and exit 0. "
        "Exit 2: the registry, an agent, the store or the version cannot be served; exit 75: "
        "the drain timed out.",
    )
    worker.add_argument("--engine", choices=("dbos",), default="dbos", help="the engine (dbos)")
    worker.add_argument(
        "--store",
        metavar="URL",
        help=f"PostgreSQL URL of the shared database (default ${STORE_ENV})",
    )
    worker.add_argument(
        "--agents",
        required=True,
        metavar="MODULE:REGISTRY",
        help="import path of the mapping of agent names to factory functions (factory(store))",
    )
    worker.add_argument(
        "--concurrency", type=int, default=4, metavar="N", help="most runs at once (default 4)"
    )
    worker.add_argument("--queue", default="prism.runs", help="the queue (default prism.runs)")
    worker.add_argument("--app-name", default="prism", help="the DBOS application name")

    def seconds(option: str, default: float, help: str) -> None:
        worker.add_argument(option, type=float, default=default, metavar="SECONDS", help=help)

    seconds("--lease", 10.0, "a worker silent this long is dead and its runs move on (default 10)")
    seconds("--heartbeat", 1.0, "lease renewal period")
    seconds(
        "--decision-wait", 60.0, "one receive round of a run waiting for an approval (default 60)"
    )
    seconds(
        "--drain-timeout",
        120.0,
        "most time a SIGTERM drain waits for the current turns (default 120)",
    )
    seconds("--poll", 0.2, "queue polling period")
    worker.add_argument("--worker-id", help="this worker's id (default HOST-PID-RANDOM)")
    worker.add_argument(
        "--allow-mixed-versions",
        action="store_true",
        help="start although live workers serve another application version",
    )
    return worker


async def run_worker(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """The ``prism worker`` command; returns its exit code."""
    store = args.store or os.environ.get(STORE_ENV)
    if not store or not store.startswith(("postgresql://", "postgres://")):
        err.write(
            f"prism worker: --store (or ${STORE_ENV}) must be a postgresql:// URL: the "
            "workers share one PostgreSQL database\n"
        )
        return EXIT_WORKER_CONFIG
    try:
        from prism.engines.dbos import WorkerOptions, serve
    except ImportError as exc:
        err.write(f"prism worker: {exc}\n")
        return EXIT_WORKER_CONFIG

    def ready(worker_id: str, version: str) -> None:
        err.write(
            f"prism worker {worker_id} ready: version {version}, queue {args.queue}, "
            f"concurrency {args.concurrency}\n"
        )
        err.flush()

    try:
        options = WorkerOptions(
            store=store,
            agents=args.agents,
            concurrency=args.concurrency,
            queue=args.queue,
            app_name=args.app_name,
            lease_s=args.lease,
            heartbeat_s=args.heartbeat,
            decision_wait_s=args.decision_wait,
            drain_timeout_s=args.drain_timeout,
            poll_s=args.poll,
            worker_id=args.worker_id,
            allow_mixed_versions=args.allow_mixed_versions,
        )
        code = await serve(options, ready=ready)
    except PrismError as exc:
        err.write(f"prism worker: {exc} ({exc.code})\n")
        return EXIT_WORKER_CONFIG
    err.write("prism worker: drained\n" if code == 0 else f"prism worker: exit {code}\n")
    return code
