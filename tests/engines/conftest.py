"""Fixtures of the DBOS engine tests: a fresh PostgreSQL database per test, and real worker
processes (``python -m prism worker``) started, signalled and stopped by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ENGINE_DIR = Path(__file__).resolve().parent
SRC = ENGINE_DIR.parents[1] / "src"
PG_ENV = "PRISM_TEST_POSTGRES_URL"


def _database_url(url: str, name: str) -> str:
    return urlsplit(url)._replace(path=f"/{name}").geturl()


@pytest.fixture
def dbos_db() -> Iterator[str]:
    """The URL of a database created for this test (dropped after it); skips without
    ``PRISM_TEST_POSTGRES_URL`` or the ``dbos`` extra."""
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(
            f"DBOS worker tests need {PG_ENV} (e.g. postgresql://postgres@127.0.0.1:5432/test)"
        )
    pytest.importorskip("dbos", reason="DBOS worker tests need the `dbos` extra")
    import psycopg

    name = f"prism_dbos_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _database_url(url, name)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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
        wait: bool = True,
    ) -> Worker:
        log = self.tmp / f"worker-{name}.log"
        handle = log.open("wb")
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "prism", "worker", "--engine", "dbos",
                "--store", self.url, "--agents", "dbos_agents:REGISTRY",
                "--concurrency", str(concurrency), "--lease", "2", "--heartbeat", "0.4",
                "--poll", "0.1", "--decision-wait", "1", "--drain-timeout", "30",
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


@pytest.fixture
def fleet(dbos_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fleet]:
    """Worker processes over ``dbos_db``; this process sees the same logs (for the client's
    registry import)."""
    fleet = Fleet(dbos_db, tmp_path)
    monkeypatch.setenv("PRISM_TEST_EFFECTS_LOG", str(fleet.effects_log))
    monkeypatch.setenv("PRISM_TEST_REQUESTS_LOG", str(fleet.requests_log))
    monkeypatch.syspath_prepend(str(ENGINE_DIR))
    try:
        yield fleet
    finally:
        fleet.stop_all()


def read_log(path: Path) -> list[list[str]]:
    """The lines of a test log, split on spaces (empty when it does not exist)."""
    if not path.exists():
        return []
    return [line.split() for line in path.read_text(encoding="utf-8").splitlines() if line]
