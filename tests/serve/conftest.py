"""Fixtures of the inspector's tests: a SQLite store filled by real runs (``_seed``), opened per
test, and the app over it behind an httpx ASGI client that connects from loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _seed import Seeded, seed
from browser_support import CHROMIUM, CHROMIUM_ARGS, require_browser
from serve_support import client_for

from prism.serve import create_app
from prism.stores import SqliteStore


def _seed_file(path: Path) -> Seeded:
    async def fill() -> Seeded:
        store = await SqliteStore(str(path)).open()
        try:
            return await seed(store)
        finally:
            await store.aclose()

    return asyncio.run(fill())


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Seeded]:
    """A store file filled once per test module (the tests that decide approvals make their own)."""
    path = tmp_path_factory.mktemp("serve") / "prism.db"
    return path, _seed_file(path)


@pytest.fixture
def fresh_seeded(tmp_path: Path) -> tuple[Path, Seeded]:
    """A store file filled for one test (it may change it)."""
    path = tmp_path / "prism.db"
    return path, _seed_file(path)


@pytest.fixture
async def store(seeded: tuple[Path, Seeded]) -> AsyncIterator[SqliteStore]:
    opened = await SqliteStore(str(seeded[0])).open()
    try:
        yield opened
    finally:
        await opened.aclose()


@pytest.fixture
async def client(store: SqliteStore) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(create_app(store)) as c:
        yield c


@pytest.fixture
async def chromium() -> AsyncIterator[Any]:
    """Debian's headless Chromium, launched for one test (each test runs on its own event loop);
    skips or fails as :func:`browser_support.require_browser` says."""
    require_browser()
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        launched = await p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()
