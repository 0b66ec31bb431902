"""Bad stored data gets typed prism errors (``StoreError`` with a ``code``), never a driver's or a
decoder's own exception: a damaged SQLite file or one that is not a database
(``ERR_PRISM_STORE_CORRUPT``), a stored value that does not decode
(``ERR_PRISM_STORE_UNDECODABLE``) — through the store and through ``load_agent_run_state`` /
``resume_agent_run``. Approvals bind to the approved arguments: a pending call's arguments
edited in the stored envelope are refused and the tool never runs with them (memory, SQLite and
PostgreSQL)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from prism.errors import AgentRunStateError, PrismError, StoreError, StoreSchemaError
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.runtime.checkpoints import AGENT_RUN_NAMESPACE
from prism.runtime.durable import (
    RunStateOptions,
    load_agent_run_state,
    resume_agent_run,
    save_agent_run_state,
)
from prism.stores.postgres import PostgresStore
from prism.stores.sqlite import SqliteStore
from prism.types import ModelConfig, ToolDefinition

MODEL = ModelConfig(provider="mock", model="errors")


def _agent(sessions: Any, checkpoints: Any, turns: list[Any], ran: list[Any]) -> Any:
    def refund(arguments: dict[str, Any], context: Any) -> Any:
        ran.append(arguments)
        return "refunded"

    return create_agent(
        id="desk",
        model=MODEL,
        provider=create_mock_provider(turns=turns),
        tools=[ToolDefinition(name="refund", execute=refund)],
        store=sessions,
        run_state=RunStateOptions(checkpoints, "v1", interrupt_before_tool=True),
    )


CALL = [provider_tool_call("c1", "refund", {"order": 42, "amount": 10}), provider_done()]
TEXT = [provider_text_delta("done"), provider_done()]


def test_store_error_is_one_class_with_a_code() -> None:
    """Schema, corruption and decoding failures are all ``StoreError`` (with their codes)."""
    assert issubclass(StoreSchemaError, StoreError) and issubclass(StoreError, PrismError)
    assert StoreSchemaError("x").code == "ERR_PRISM_STORE_SCHEMA"
    assert StoreError("ERR_PRISM_STORE_CORRUPT", "x").code == "ERR_PRISM_STORE_CORRUPT"


async def test_a_file_that_is_not_a_database_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    store = SqliteStore(path)
    with pytest.raises(StoreError) as info:
        await store.open()
    await store.aclose()
    assert info.value.code == "ERR_PRISM_STORE_CORRUPT"
    assert not isinstance(info.value, sqlite3.DatabaseError)
    assert isinstance(info.value.__cause__, sqlite3.DatabaseError)


async def test_a_damaged_database_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    ran: list[Any] = []
    async with SqliteStore(path) as store:
        for i in range(40):
            session = _agent(store, store, [TEXT], ran).create_session(f"s{i}")
            await session.run("x" * 2000)
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
    data = bytearray(path.read_bytes())
    page = 4096
    for offset in range(page * 2, len(data), page):
        data[offset : offset + 200] = b"\xff" * 200
    path.write_bytes(bytes(data))
    damaged = SqliteStore(path)
    with pytest.raises(StoreError) as info:  # at open or at the first read that meets it
        await damaged.open()
        await damaged.list("s7")
    await damaged.aclose()
    assert info.value.code == "ERR_PRISM_STORE_CORRUPT"


async def test_an_undecodable_checkpoint_value_is_a_typed_error_on_sqlite(tmp_path: Path) -> None:
    """A checkpoint whose stored value is not JSON: ``load_agent_run_state`` and
    ``resume_agent_run`` raise ``StoreError`` (not ``json.JSONDecodeError``); a session entry
    that does not decode likewise."""
    ran: list[Any] = []
    path = tmp_path / "store.db"
    async with SqliteStore(path) as store:
        session = _agent(store, store, [CALL], ran).create_session()
        first = await session.run("refund 42")
        conn = sqlite3.connect(path)
        with conn:
            conn.execute(
                "UPDATE prism_checkpoints SET value = ? WHERE namespace = ? AND key = ?",
                ('{"status": "suspended", ', AGENT_RUN_NAMESPACE, first.run_id),
            )
            conn.execute(
                "UPDATE prism_session_entries SET body = ? WHERE session_id = ?",
                ("not json", session.id),
            )
        conn.close()
        with pytest.raises(StoreError) as info:
            await load_agent_run_state(store, run_id=first.run_id)
        assert info.value.code == "ERR_PRISM_STORE_UNDECODABLE"
        assert not isinstance(info.value, json.JSONDecodeError)
        assert first.run_id in str(info.value)
        with pytest.raises(StoreError) as info:
            await resume_agent_run(_agent(store, store, [TEXT], ran), first.run_state,
                                   decision="approve")
        assert info.value.code == "ERR_PRISM_STORE_UNDECODABLE"
        with pytest.raises(StoreError) as info:
            await store.list(session.id)
        assert info.value.code == "ERR_PRISM_STORE_UNDECODABLE"
    assert ran == []


async def test_a_session_entry_that_does_not_decode_is_a_typed_error_on_postgres(
    pg_store: PostgresStore, pg_url: str, pg_schema: str
) -> None:
    """``jsonb`` holds only valid JSON, but a row that is not an entry is just as undecodable."""
    import psycopg

    ran: list[Any] = []
    session = _agent(pg_store, pg_store, [TEXT], ran).create_session()
    await session.run("hello")
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute(
            f'UPDATE "{pg_schema}".prism_session_entries SET body = %s::jsonb '
            "WHERE session_id = %s",
            ('{"kind": 7}', session.id),
        )
    with pytest.raises(StoreError) as info:
        await pg_store.list(session.id)
    assert info.value.code == "ERR_PRISM_STORE_UNDECODABLE"


async def test_an_approval_never_runs_arguments_edited_in_the_stored_row(
    durable_stores: tuple[Any, Any],
) -> None:
    """The approval binds to the hash of the arguments it was asked for: edited arguments are
    refused before anything is written, and the tool does not run."""
    sessions, checkpoints = durable_stores
    ran: list[Any] = []
    session = _agent(sessions, checkpoints, [CALL], ran).create_session()
    first = await session.run("refund 42")
    loaded = await load_agent_run_state(checkpoints, run_id=first.run_id)
    edited = json.loads(json.dumps(loaded.state))
    edited["pending_calls"][0]["call"]["arguments"]["amount"] = 10_000
    saved = await save_agent_run_state(
        checkpoints=checkpoints, state=edited, expected_version=loaded.record.version
    )
    with pytest.raises(AgentRunStateError, match="not the ones its approval was asked for|the stored entry was edited") as info:
        await resume_agent_run(_agent(sessions, checkpoints, [TEXT], ran), saved, decision="approve")
    assert "c1" in str(info.value) and "refund" in str(info.value)
    assert ran == []
    after = await load_agent_run_state(checkpoints, run_id=first.run_id)
    assert after.record.version == saved.record.version
    assert after.state["status"] == "suspended"
    # put back as approved: the approval runs the approved arguments
    restored = await save_agent_run_state(
        checkpoints=checkpoints, state=loaded.state, expected_version=after.record.version
    )
    done = await resume_agent_run(
        _agent(sessions, checkpoints, [TEXT], ran), restored, decision="approve"
    )
    assert done.status == "succeeded" and ran == [{"order": 42, "amount": 10}]
