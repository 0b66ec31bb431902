"""Fixtures for the store tests: a PostgreSQL URL from the environment and isolated schemas (DB-12)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest

from prism.stores.postgres import PostgresStore

PG_ENV = "PRISM_TEST_POSTGRES_URL"
"""Environment variable holding the test database's connection string (DB-12)."""


def postgres_url_or_skip() -> str:
    """The PostgreSQL test URL, or skip the test naming ``PRISM_TEST_POSTGRES_URL`` (DB-12)."""
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"PostgreSQL store tests need {PG_ENV} (e.g. postgresql://postgres@127.0.0.1:5432/test)")
    return url


def new_schema_name() -> str:
    """A schema name unique to one test, so runs never see each other's rows."""
    return f"prism_test_{uuid.uuid4().hex[:16]}"


async def drop_schema(url: str, schema: str) -> None:
    """Drop a test schema and everything in it."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def pg_url() -> str:
    """The PostgreSQL URL (skips without ``PRISM_TEST_POSTGRES_URL``)."""
    return postgres_url_or_skip()


@pytest.fixture
async def pg_schema(pg_url: str) -> AsyncIterator[str]:
    """A fresh schema name, dropped after the test."""
    schema = new_schema_name()
    try:
        yield schema
    finally:
        await drop_schema(pg_url, schema)


@pytest.fixture
async def pg_store(pg_url: str, pg_schema: str) -> AsyncIterator[PostgresStore]:
    """A migrated PostgresStore on its own schema."""
    store = await PostgresStore.connect(pg_url, schema=pg_schema, max_size=10)
    try:
        yield store
    finally:
        await store.aclose()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def durable_stores(
    request: pytest.FixtureRequest, tmp_path: object
) -> AsyncIterator[tuple[object, object]]:
    """``(session store, checkpoint store)`` of each kind: the memory pair, one SQLite database,
    one PostgreSQL schema (skipped without ``PRISM_TEST_POSTGRES_URL``)."""
    from pathlib import Path

    from prism.runtime.checkpoints import MemoryCheckpointStore
    from prism.store import MemorySessionStore
    from prism.stores.sqlite import SqliteStore

    kind = request.param
    if kind == "memory":
        yield MemorySessionStore(), MemoryCheckpointStore()
        return
    if kind == "sqlite":
        assert isinstance(tmp_path, Path)
        sqlite = await SqliteStore(tmp_path / "store.db").open()
        try:
            yield sqlite, sqlite
        finally:
            await sqlite.aclose()
        return
    url = postgres_url_or_skip()
    schema = new_schema_name()
    pg = await PostgresStore.connect(url, schema=schema, max_size=4)
    try:
        yield pg, pg
    finally:
        await pg.aclose()
        await drop_schema(url, schema)
