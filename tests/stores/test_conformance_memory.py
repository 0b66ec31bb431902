"""The store conformance suites against the memory stores, and against broken stores (DB-9)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from prism.ledger import MemoryRunLedger
from prism.runtime.checkpoints import (
    CheckpointRecord,
    CheckpointStore,
    MemoryCheckpointStore,
)
from prism.store import MemorySessionStore, SessionEntry, SessionStore
from prism.testing._conformance import (
    run_checkpoint_store_conformance,
    run_ledger_conformance,
    run_run_ledger_conformance,
    run_session_store_conformance,
)
from prism.types import JsonValue, OwnershipScope


async def test_db9_memory_session_store_passes() -> None:
    """DB-9: MemorySessionStore passes the session-store suite."""
    await run_session_store_conformance(MemorySessionStore())


async def test_db9_memory_checkpoint_store_passes() -> None:
    """DB-9/DUR-3: MemoryCheckpointStore passes the checkpoint-store suite."""
    store = MemoryCheckpointStore()
    assert isinstance(store, CheckpointStore)
    await run_checkpoint_store_conformance(store)


async def test_db9_memory_ledger_passes() -> None:
    """DB-9/REC-1: MemoryRunLedger passes the ledger suite (read back through its lists)."""
    await run_ledger_conformance(MemoryRunLedger())
    assert run_run_ledger_conformance is run_ledger_conformance


# --------------------------------------------------------------------------- the suites can fail


class _NoTipCheckStore(MemorySessionStore):
    """Ignores expected_parent_id's tip check: a second child is accepted."""

    async def append(
        self,
        entry: SessionEntry,
        *,
        expected_parent_id: str | None = None,
        idempotency_key: str | None = None,
        fork: bool = False,
    ) -> None:
        await super().append(
            entry,
            expected_parent_id=expected_parent_id,
            idempotency_key=idempotency_key,
            fork=expected_parent_id is not None,
        )


class _RacyStore(MemorySessionStore):
    """Checks the tip, yields to the loop, then inserts: two racing appends both win."""

    async def append(
        self,
        entry: SessionEntry,
        *,
        expected_parent_id: str | None = None,
        idempotency_key: str | None = None,
        fork: bool = False,
    ) -> None:
        if expected_parent_id is not None and not fork:
            children = [e for e in await self.list(entry.session_id)
                        if e.parent_id == expected_parent_id]
            await asyncio.sleep(0)
            if children:
                await super().append(entry, expected_parent_id=expected_parent_id)
                return
            await super().append(entry, expected_parent_id=expected_parent_id, fork=True,
                                 idempotency_key=idempotency_key)
            return
        await super().append(entry, expected_parent_id=expected_parent_id,
                             idempotency_key=idempotency_key, fork=fork)


class _NoFencingStore(MemoryCheckpointStore):
    """Drops fencing tokens."""

    async def save_checkpoint(
        self,
        *,
        namespace: str,
        key: str,
        value: JsonValue,
        version: int,
        expected_version: int,
        fencing_token: int | None = None,
        ownership: OwnershipScope | None = None,
    ) -> CheckpointRecord:
        return await super().save_checkpoint(
            namespace=namespace, key=key, value=value, version=version,
            expected_version=expected_version,
        )


class _DroppingLedger(MemoryRunLedger):
    """Loses every second event."""

    def __init__(self) -> None:
        super().__init__()
        self._n = 0

    async def append_event(self, record: Any, /) -> None:
        self._n += 1
        if self._n % 2:
            await super().append_event(record)


@pytest.mark.parametrize(
    ("store", "needle"),
    [
        (_NoTipCheckStore(), "already has a child"),
        (_RacyStore(), "exactly one must win"),
    ],
)
async def test_db9_session_suite_detects_broken_stores(store: SessionStore, needle: str) -> None:
    """DB-9: the session suite fails a store without the tip check and a racy one."""
    with pytest.raises(AssertionError, match=needle):
        await run_session_store_conformance(store)


async def test_db9_checkpoint_suite_detects_missing_fencing() -> None:
    """DB-9/DUR-3: the checkpoint suite fails a store that ignores fencing tokens."""
    with pytest.raises(AssertionError, match="fencing token"):
        await run_checkpoint_store_conformance(_NoFencingStore())


async def test_db9_ledger_suite_detects_lost_rows() -> None:
    """DB-9/DB-7: the ledger suite fails a ledger that loses rows."""
    with pytest.raises(AssertionError, match="event rows"):
        await run_ledger_conformance(_DroppingLedger())


async def test_db9_ledger_suite_needs_a_read_api() -> None:
    """DB-9: a write-only ledger cannot be checked; the suite says why."""

    class WriteOnly:
        async def append_run(self, record: Any, /) -> None: ...
        async def append_event(self, record: Any, /) -> None: ...
        async def append_tool_call(self, record: Any, /) -> None: ...
        async def append_usage(self, record: Any, /) -> None: ...

    with pytest.raises(AssertionError, match="read records back"):
        await run_ledger_conformance(WriteOnly())
