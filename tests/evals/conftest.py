"""The store the capture and replay tests record into: SQLite, and PostgreSQL when
``PRISM_TEST_POSTGRES_URL`` names a server (skipped, saying so, without it)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from prism.stores import PostgresStore, SqliteStore

PG_ENV = "PRISM_TEST_POSTGRES_URL"


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """A migrated SQLite or PostgreSQL store (PostgreSQL skips without its URL)."""
    if request.param == "sqlite":
        sqlite = SqliteStore(str(tmp_path / "runs.db"))
        await sqlite.open()
        try:
            yield sqlite
        finally:
            await sqlite.aclose()
        return
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"PostgreSQL tests need {PG_ENV}")
    schema = f"prism_test_{uuid.uuid4().hex[:16]}"
    postgres = await PostgresStore.connect(url, schema=schema, max_size=4)
    try:
        yield postgres
    finally:
        await postgres.aclose()
        import psycopg

        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
