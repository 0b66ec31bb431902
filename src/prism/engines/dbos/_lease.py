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

**A database restart.** The lease keeps one connection; a statement that finds it ended (a
restart, ``pg_terminate_backend``) opens a new one and runs again — every lease statement may
run twice. A take-over is recorded in two steps (``state='dead'`` by one janitor, then
``resumed_at`` once that janitor has put the dead worker's runs back on the queue), so a claim
whose answer was lost with the connection is finished at the claimer's next round. After a
reconnect a janitor takes nothing over for one lease: the other workers, cut off as it was, get
that long to renew theirs.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from prism.errors import EngineVersionError, PrismConfigError

__all__ = ["LiveWorker", "WorkerLease", "is_connection_lost", "live_workers", "version_mismatch"]


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
        ALTER TABLE {table} ADD COLUMN IF NOT EXISTS resumed_at timestamptz;
    """


def is_connection_lost(exc: BaseException, conn: Any) -> bool:
    """Whether ``exc``, raised by a statement on the ``psycopg`` connection ``conn``, means the
    connection is gone (closed or broken: the server ended it or cannot be reached) rather than
    that the statement failed."""
    from psycopg import OperationalError

    return isinstance(exc, OperationalError) and (conn is None or conn.closed or conn.broken)


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

    Raises:
        psycopg.OperationalError: the database cannot be reached (at construction; later
            statements reconnect, see the module docstring).
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
        self.table = _table(schema)
        self.schema = schema
        self.worker_id = worker_id
        self.app_version = app_version
        self.agents = dict(agents)
        self.queue_name = queue_name
        self.concurrency = concurrency
        self.lease_s = lease_s
        self.lease_ms = max(1, int(lease_s * 1000))
        self._conninfo = conninfo
        self._quiet_until = 0.0
        """``time.monotonic()`` before which [`take_over()`][prism.engines.dbos._lease.WorkerLease.take_over] claims nothing (a reconnect)."""
        self.released = False
        """Set once this worker marked its lease ``stopped`` (its janitor stops then)."""
        self._conn: Any = None
        self._connect()

    def _connect(self) -> None:
        import psycopg

        self._conn = psycopg.connect(self._conninfo, autocommit=True)

    def _run(self, statement: Callable[[Any], Any]) -> Any:
        """Run ``statement(connection)``; on a lost connection, reconnect and run it again once.

        Raises:
            psycopg.OperationalError: the database cannot be reached (the next call tries again).
        """
        try:
            return statement(self._conn)
        except Exception as exc:
            if not is_connection_lost(exc, self._conn):
                raise
        self._conn.close()
        self._connect()
        # The others lost the database too: give them one lease to renew before taking over.
        self._quiet_until = time.monotonic() + self.lease_s
        return statement(self._conn)

    def register(self, *, allow_mixed_versions: bool = False) -> None:
        """Create the table if needed, refuse a version mismatch, insert the ``alive`` row.

        A row of this worker id whose lease is over (``dead``, ``stopped``, or not renewed
        within its lease) is taken over by the new process: DBOS, launched with the same
        executor id, continues the runs the row's old process left.

        Raises:
            EngineVersionError: ``ERR_PRISM_ENGINE_VERSION`` — live workers run another
                application version (unless ``allow_mixed_versions``).
            PrismConfigError: ``ERR_PRISM_CONFIG`` — a live worker already has this worker id.
        """
        import os
        import socket

        conn = self._conn
        with conn.transaction():
            conn.execute(_ddl(self.schema))
        others = [w for w in live_workers(conn, self.schema) if w.app_version != self.app_version]
        if others and not allow_mixed_versions:
            raise version_mismatch("this worker", self.app_version, self.agents, others)
        table = self.table
        row = conn.execute(
            f"INSERT INTO {table} AS w (worker_id, app_version, agents, host, pid, queue_name, "
            "concurrency, lease_ms, state) VALUES (%s, %s, %s::jsonb, %s, %s, %s, %s, %s, 'alive') "
            "ON CONFLICT (worker_id) DO UPDATE SET app_version = EXCLUDED.app_version, "
            "agents = EXCLUDED.agents, host = EXCLUDED.host, pid = EXCLUDED.pid, "
            "queue_name = EXCLUDED.queue_name, concurrency = EXCLUDED.concurrency, "
            "lease_ms = EXCLUDED.lease_ms, state = 'alive', started_at = now(), "
            "heartbeat_at = now(), recovered_by = NULL, recovered_at = NULL, resumed_at = NULL "
            "WHERE w.state NOT IN ('alive', 'draining') "
            "OR w.heartbeat_at < now() - w.lease_ms * interval '1 millisecond' "
            "RETURNING worker_id",
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
        ).fetchone()
        if row is None:
            holder = conn.execute(
                f"SELECT host, pid, state, extract(epoch FROM now() - heartbeat_at) "
                f"FROM {table} WHERE worker_id = %s",
                (self.worker_id,),
            ).fetchone()
            where = "" if holder is None else f" (host {holder[0]}, pid {holder[1]}, {holder[2]}, "
            if holder is not None:
                where += f"last heartbeat {float(holder[3]):.1f} s ago)"
            raise PrismConfigError(
                f"worker id {self.worker_id!r} is in use by a live worker{where}: give each "
                "worker its own --worker-id (or leave it out for a fresh one), or stop that "
                "worker first"
            )

    def renew(self) -> bool:
        """Renew the heartbeat; ``False`` when another worker has declared this one dead.
        After this worker released its runs (``stopped``) there is nothing to renew: ``True``."""
        if self.released:
            return True
        row = self._run(
            lambda conn: conn.execute(
                f"UPDATE {self.table} SET heartbeat_at = now() "
                "WHERE worker_id = %s AND state IN ('alive', 'draining') RETURNING worker_id",
                (self.worker_id,),
            ).fetchone()
        )
        return row is not None

    def set_state(self, state: str) -> None:
        """``draining`` (still renewing) or ``stopped`` (released: taken over at once)."""
        self.released = self.released or state == "stopped"
        self._run(
            lambda conn: conn.execute(
                f"UPDATE {self.table} SET state = %s, heartbeat_at = now() "
                "WHERE worker_id = %s AND state IN ('alive', 'draining')",
                (state, self.worker_id),
            )
        )

    def take_over(self) -> list[str]:
        """Declare dead every worker of this version whose lease ran out or who released its
        runs, and return their ids, with the ids this janitor declared dead earlier and whose
        runs it has not yet put back ([`resumed()`][prism.engines.dbos._lease.WorkerLease.resumed]); of several janitors exactly one gets a
        given id. Nothing is declared dead for one lease after a reconnect, nor once this
        worker released its own runs."""
        if self.released or time.monotonic() < self._quiet_until:
            return []
        rows = self._run(
            lambda conn: conn.execute(
                f"WITH claimed AS (UPDATE {self.table} SET state = 'dead', recovered_by = %s, "
                "recovered_at = now(), resumed_at = NULL "
                "WHERE app_version = %s AND worker_id <> %s AND ("
                "state = 'stopped' OR (state IN ('alive', 'draining') "
                "AND heartbeat_at < now() - lease_ms * interval '1 millisecond')) "
                "RETURNING worker_id) "
                f"SELECT worker_id FROM claimed UNION SELECT worker_id FROM {self.table} "
                "WHERE state = 'dead' AND recovered_by = %s AND resumed_at IS NULL",
                (self.worker_id, self.app_version, self.worker_id, self.worker_id),
            ).fetchall()
        )
        return sorted(r[0] for r in rows)

    def resumed(self, dead: str) -> None:
        """Record that the runs of ``dead`` (taken over by this janitor) are back on the queue."""
        self._run(
            lambda conn: conn.execute(
                f"UPDATE {self.table} SET resumed_at = now() "
                "WHERE worker_id = %s AND state = 'dead' AND recovered_by = %s",
                (dead, self.worker_id),
            )
        )

    def close(self) -> None:
        self._conn.close()
