"""The helpers of the DBOS engine tests: real worker processes (``python -m prism worker``)
started, signalled and stopped by PID, and the logs the test agents write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ENGINE_DIR = Path(__file__).resolve().parent
SRC = ENGINE_DIR.parents[1] / "src"


@dataclass
class Worker:
    """One worker process."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    worker_id: str = ""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def wait_ready(self, timeout: float = 60.0) -> Worker:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.text().splitlines():
                if " ready: version " in line:
                    self.worker_id = line.split()[2]
                    return self
            if self.proc.poll() is not None:
                raise AssertionError(f"worker {self.name} exited early:\n{self.text()}")
            time.sleep(0.05)
        raise AssertionError(f"worker {self.name} not ready after {timeout} s:\n{self.text()}")

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self) -> None:
        os.kill(self.pid, signal.SIGTERM)


@dataclass
class Fleet:
    """The worker processes of one test, all sharing its logs; killed by PID at the end."""

    url: str
    tmp: Path
    env: dict[str, str] = field(default_factory=dict)
    workers: list[Worker] = field(default_factory=list)

    @property
    def effects_log(self) -> Path:
        return self.tmp / "effects.log"

    @property
    def requests_log(self) -> Path:
        return self.tmp / "requests.log"

    def environment(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "PYTHONPATH": os.pathsep.join([str(SRC), str(ENGINE_DIR)]),
                "PRISM_TEST_EFFECTS_LOG": str(self.effects_log),
                "PRISM_TEST_REQUESTS_LOG": str(self.requests_log),
            }
        )
        env.update(self.env)
        env.update(extra or {})
        return env

    def start(
        self,
        name: str,
        *,
        concurrency: int = 3,
        extra_env: dict[str, str] | None = None,
        extra_args: tuple[str, ...] = (),
        wait: bool = True,
    ) -> Worker:
        log = self.tmp / f"worker-{name}.log"
        handle = log.open("wb")
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "prism", "worker", "--engine", "dbos",
                "--store", self.url, "--agents", "dbos_agents:REGISTRY",
                "--concurrency", str(concurrency),
                # A lease long enough that a heartbeat thread starved on a loaded test machine
                # is not mistaken for a dead worker; short enough to keep recovery quick.
                "--lease", "6", "--heartbeat", "0.5",
                "--poll", "0.1", "--decision-wait", "1", "--drain-timeout", "30",
                *extra_args,
            ],
            cwd=ENGINE_DIR,
            env=self.environment(extra_env),
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        handle.close()
        worker = Worker(name, proc, log)
        self.workers.append(worker)
        return worker.wait_ready() if wait else worker

    def stop_all(self) -> None:
        for worker in self.workers:
            if worker.proc.poll() is None:
                os.kill(worker.pid, signal.SIGKILL)
                worker.proc.wait(10)


def read_log(path: Path) -> list[list[str]]:
    """The lines of a test log, split on spaces (empty when it does not exist)."""
    if not path.exists():
        return []
    return [line.split() for line in path.read_text(encoding="utf-8").splitlines() if line]


@dataclass
class PrivateCluster:
    """A PostgreSQL cluster of this test alone, on a free loopback port."""

    url: str
    """``postgresql://postgres@127.0.0.1:PORT/postgres`` (trust authentication)."""
    pg_ctl: list[str]
    """``pg_ctl -D DATA`` (run as the ``postgres`` user when this process is root)."""

    def restart(self) -> None:
        """Stop the server (fast: every session is ended) and start it again; returns once it
        accepts connections."""
        subprocess.run([*self.pg_ctl, "restart", "-m", "fast", "-w", "-t", "60"], check=True,
                       capture_output=True)


def terminate_backends(url: str) -> int:
    """End every other session on the database of ``url`` as a restart does
    (``pg_terminate_backend``: SQLSTATE 57P01, ``AdminShutdown``); return how many."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            # The 5 s timeout: return once each session has ended, not when it was signalled.
            "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0]) if row else 0


def lease_rows(url: str) -> dict[str, tuple[str, float]]:
    """Worker id → (lease state, seconds since its last heartbeat), by the database's clock."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT worker_id, state, extract(epoch FROM now() - heartbeat_at) "
            "FROM prism_engine.dbos_workers"
        ).fetchall()
    return {r[0]: (r[1], float(r[2])) for r in rows}
