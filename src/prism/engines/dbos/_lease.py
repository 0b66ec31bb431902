"""Worker leases: heartbeat rows in PostgreSQL, and who declares a worker dead.

Self-hosted DBOS recovers a dead executor's workflows only when a process with the same executor
id starts again, or when recovery is asked for explicitly. prism's workers therefore keep a
lease each — one row in ``<schema>.dbos_workers`` — and watch each other's:

* a worker inserts its row at start (``state='alive'``) and renews ``heartbeat_at`` every
  ``interval`` seconds from a thread of its own (a busy event loop delays no heartbeat);
* a worker whose heartbeat is older than its ``lease`` (``lease_ms``, stated in its row) is dead;
  a worker that shut down cleanly marks its row ``stopped`` (it released its runs) and is taken
  over at once;
* every worker's janitor tries, each interval, to take over such rows with one ``UPDATE …
  RETURNING`` that sets ``state='dead'`` — of several janitors exactly one wins a given row —
  and then has DBOS continue that executor's pending runs (see the worker);
* a worker whose own renewal finds its row no longer ``alive``/``draining`` has been declared
  dead by another (it stalled longer than its lease): it must stop at once, since its runs are
  being continued elsewhere (prism's compare-and-set claims keep a stale write out meanwhile).

All times come from the database clock (``now()``), so machines' clocks need not agree. Only
rows of the same application version are taken over: DBOS continues a run only on a worker of
the version it was submitted under.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from prism.errors import EngineVersionError, PrismConfigError

__all__ = ["LiveWorker", "WorkerLease", "live_workers", "version_mismatch"]

_SCHEMA_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def _table(schema: str) -> str:
    if not _SCHEMA_RE.match(schema):
        raise PrismConfigError(f"engine schema must be a plain SQL identifier, got {schema!r}")
    return f'"{schema}".dbos_workers'


def _ddl(schema: str) -> str:
    table = _table(schema)
    return f"""
        SELECT pg_advisory_xact_lock(hashtext('prism.engines.dbos.workers'));
        CREATE SCHEMA IF NOT EXISTS "{schema}";
        CREATE TABLE IF NOT EXISTS {table} (
            worker_id text PRIMARY KEY,
            app_version text NOT NULL,
            agents jsonb NOT NULL,
            host text NOT NULL,
            pid integer NOT NULL,
            queue_name text NOT NULL,
            concurrency integer NOT NULL,
            lease_ms integer NOT NULL,
            state text NOT NULL,
            started_at timestamptz NOT NULL DEFAULT now(),
            heartbeat_at timestamptz NOT NULL DEFAULT now(),
            recovered_by text,
            recovered_at timestamptz
        );
    """


@dataclass(frozen=True, slots=True)
class LiveWorker:
    """A worker whose lease is current."""

    worker_id: str
    app_version: str
    agents: Mapping[str, str]
    """Agent name → definition revision."""
    queue_name: str


def live_workers(conn: Any, schema: str) -> list[LiveWorker]:
    """The workers whose lease is current (``alive`` or ``draining``, renewed within their
    lease), over an open ``psycopg`` connection (autocommit)."""
    from psycopg.errors import UndefinedTable

    table = _table(schema)
    try:
        rows = conn.execute(
            f"SELECT worker_id, app_version, agents, queue_name FROM {table} "
            "WHERE state IN ('alive', 'draining') "
            "AND heartbeat_at >= now() - lease_ms * interval '1 millisecond'"
        ).fetchall()
    except UndefinedTable:  # no worker ever started
        return []
    return [
        LiveWorker(r[0], r[1], r[2] if isinstance(r[2], dict) else json.loads(r[2]), r[3])
        for r in rows
    ]


def version_mismatch(
    what: str, version: str, agents: Mapping[str, str], others: list[LiveWorker]
) -> EngineVersionError:
    """The error naming ``version`` against the live workers' versions and the revisions that
    differ."""
    theirs = sorted({w.app_version for w in others})
    differing: list[str] = []
    for worker in others:
        for name in sorted(set(agents) | set(worker.agents)):
            mine, their = agents.get(name), worker.agents.get(name)
            if mine != their:
                line = f"{name}: {mine or 'absent'} here, {their or 'absent'} on {worker.worker_id}"
                if line not in differing:
                    differing.append(line)
    detail = "; ".join(differing[:8]) or "prism versions differ"
    return EngineVersionError(
        f"{what} pins application version {version}, but the live workers run "
        f"{', '.join(theirs)} ({detail}). DBOS hands a run only to workers of its version: "
        "deploy the same agents and revisions everywhere (drain the old workers with SIGTERM "
        "first)"
    )


class WorkerLease:
    """This worker's lease row and its janitor's take-overs.

    Args:
        conninfo: PostgreSQL URL of the store's database.
        schema: Schema of the ``dbos_workers`` table.
        worker_id: This worker's id (its DBOS executor id).
        app_version: The application version it serves.
        agents: Agent name → definition revision.
        queue_name: The DBOS queue it dequeues from.
        concurrency: Its per-worker run limit.
        lease_s: Seconds without a renewal after which it counts as dead.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str,
        worker_id: str,
        app_version: str,
        agents: Mapping[str, str],
        queue_name: str,
        concurrency: int,
        lease_s: float,
    ) -> None:
        import psycopg

        self.table = _table(schema)
        self.schema = schema
        self.worker_id = worker_id
        self.app_version = app_version
        self.agents = dict(agents)
        self.queue_name = queue_name
        self.concurrency = concurrency
        self.lease_ms = max(1, int(lease_s * 1000))
        self._conn = psycopg.connect(conninfo, autocommit=True)

    def register(self, *, allow_mixed_versions: bool = False) -> None:
        """Create the table if needed, refuse a version mismatch, insert the ``alive`` row.

        Raises:
            EngineVersionError: ``ERR_PRISM_ENGINE_VERSION`` — live workers run another
                application version (unless ``allow_mixed_versions``).
        """
        import os
        import socket

        conn = self._conn
        with conn.transaction():
            conn.execute(_ddl(self.schema))
        others = [w for w in live_workers(conn, self.schema) if w.app_version != self.app_version]
        if others and not allow_mixed_versions:
            raise version_mismatch("this worker", self.app_version, self.agents, others)
        conn.execute(
            f"INSERT INTO {self.table} (worker_id, app_version, agents, host, pid, queue_name, "
            "concurrency, lease_ms, state) VALUES (%s, %s, %s::jsonb, %s, %s, %s, %s, %s, 'alive')",
            (
                self.worker_id,
                self.app_version,
                json.dumps(self.agents),
                socket.gethostname(),
                os.getpid(),
                self.queue_name,
                self.concurrency,
                self.lease_ms,
            ),
        )

    def renew(self) -> bool:
        """Renew the heartbeat; ``False`` when another worker has declared this one dead."""
        row = self._conn.execute(
            f"UPDATE {self.table} SET heartbeat_at = now() "
            "WHERE worker_id = %s AND state IN ('alive', 'draining') RETURNING worker_id",
            (self.worker_id,),
        ).fetchone()
        return row is not None

    def set_state(self, state: str) -> None:
        """``draining`` (still renewing) or ``stopped`` (released: taken over at once)."""
        self._conn.execute(
            f"UPDATE {self.table} SET state = %s, heartbeat_at = now() "
            "WHERE worker_id = %s AND state IN ('alive', 'draining')",
            (state, self.worker_id),
        )

    def take_over(self) -> list[str]:
        """Declare dead every worker of this version whose lease ran out or who released its
        runs, and return their ids; of several janitors exactly one gets a given id."""
        rows = self._conn.execute(
            f"UPDATE {self.table} SET state = 'dead', recovered_by = %s, recovered_at = now() "
            "WHERE app_version = %s AND worker_id <> %s AND ("
            "state = 'stopped' OR (state IN ('alive', 'draining') "
            "AND heartbeat_at < now() - lease_ms * interval '1 millisecond')) "
            "RETURNING worker_id",
            (self.worker_id, self.app_version, self.worker_id),
        ).fetchall()
        return [r[0] for r in rows]

    def close(self) -> None:
        self._conn.close()
