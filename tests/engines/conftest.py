"""Fixtures of the DBOS engine tests: a fresh PostgreSQL database per test, a fleet of real
worker processes (``engine_support``), and a private PostgreSQL cluster a test may restart."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from engine_support import ENGINE_DIR, Fleet, PrivateCluster

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


@pytest.fixture
def fleet(dbos_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fleet]:
    """Worker processes over ``dbos_db``; this process sees the same logs (for the client's
    registry import)."""
    yield from _fleet_over(dbos_db, tmp_path, monkeypatch)


def _fleet_over(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fleet]:
    fleet = Fleet(url, tmp_path)
    monkeypatch.setenv("PRISM_TEST_EFFECTS_LOG", str(fleet.effects_log))
    monkeypatch.setenv("PRISM_TEST_REQUESTS_LOG", str(fleet.requests_log))
    monkeypatch.syspath_prepend(str(ENGINE_DIR))
    try:
        yield fleet
    finally:
        fleet.stop_all()


def _server_binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    initdb = found[-1] if found else shutil.which("initdb")
    if initdb is None or not Path(initdb).with_name("pg_ctl").exists():
        return None
    return Path(initdb).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def private_postgres() -> Iterator[PrivateCluster]:
    """A fresh PostgreSQL cluster (``initdb``, ``pg_ctl``) that the test may restart; stopped and
    removed after it. Skips when PostgreSQL's server binaries are absent; as root (CI) the
    server runs as the ``postgres`` user, since ``initdb`` refuses root."""
    pytest.importorskip("dbos", reason="DBOS worker tests need the `dbos` extra")
    bindir = _server_binaries()
    if bindir is None:
        pytest.skip(
            "a real PostgreSQL restart needs the server binaries (initdb, pg_ctl; the Debian "
            "package postgresql)"
        )
    as_owner: list[str] = []
    owner: tuple[int, int] | None = None
    if os.geteuid() == 0:
        import pwd

        try:
            entry = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root, a private PostgreSQL cluster needs a `postgres` user")
        as_owner = ["runuser", "-u", "postgres", "--"]
        owner = (entry.pw_uid, entry.pw_gid)
    root = Path(tempfile.mkdtemp(prefix="prism-pg-"))
    if owner is not None:
        os.chown(root, *owner)
    data = root / "data"
    port = _free_port()
    pg_ctl = [*as_owner, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log")]
    try:
        subprocess.run(
            [*as_owner, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
             "-E", "UTF8", "--no-sync"],
            check=True, capture_output=True,
        )
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run([*pg_ctl, "-o", options, "-w", "-t", "60", "start"], check=True,
                       capture_output=True)
        yield PrivateCluster(f"postgresql://postgres@127.0.0.1:{port}/postgres", pg_ctl)
    finally:
        subprocess.run([*pg_ctl, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def private_fleet(
    private_postgres: PrivateCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Fleet]:
    """Worker processes over the private cluster's ``postgres`` database."""
    yield from _fleet_over(private_postgres.url, tmp_path, monkeypatch)
