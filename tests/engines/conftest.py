"""Fixtures of the DBOS engine tests: a fresh PostgreSQL database per test, and a fleet of
real worker processes (``engine_support``)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from engine_support import ENGINE_DIR, Fleet

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
    fleet = Fleet(dbos_db, tmp_path)
    monkeypatch.setenv("PRISM_TEST_EFFECTS_LOG", str(fleet.effects_log))
    monkeypatch.setenv("PRISM_TEST_REQUESTS_LOG", str(fleet.requests_log))
    monkeypatch.syspath_prepend(str(ENGINE_DIR))
    try:
        yield fleet
    finally:
        fleet.stop_all()
