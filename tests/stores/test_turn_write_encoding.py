"""Durable turn writes on SQLite encode once and hand over nothing twice (DB-10, DUR-3).

* an entry's stored body is ``dumps(entry.to_dict())`` character for character, made in one
  walk ([`prism._serde.to_json_text()`][prism._serde.to_json_text]);
* the envelope a turn write stores is the text the durable run measured;
* a turn write made on the caller's thread (the store idle) waits for nothing: with the write
  lock held by another connection it goes to the worker thread, which waits for the lock; an
  in-memory database, which a second connection cannot share, writes through the worker;
* the WAL is still checkpointed (its size stays bounded) when the writes are made inline.
"""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from prism._serde import to_json_text, to_json_value
from prism.checkpoints import AGENT_RUN_NAMESPACE, SessionAppend
from prism.limits import UNLIMITED, RunLimits
from prism.loops.contracts import SingleShotLoopOptions
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.runtime.durable import RunStateOptions
from prism.session_entry import new_session_entry
from prism.stores import SqliteStore
from prism.types import (
    ErrorInfo,
    Message,
    ModelConfig,
    TextContent,
    ToolCallContent,
    ToolDefinition,
    ToolResultContent,
)

MODEL = ModelConfig(provider="mock", model="turn-write-encoding")
LIMITS = RunLimits(
    max_turns=UNLIMITED, max_provider_attempts=UNLIMITED, max_tool_rounds=UNLIMITED,
    max_tool_calls=UNLIMITED,
)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _entries() -> list[Any]:
    result = {
        "rows": [{"id": f"R-{i}", "amount": 1.5 + i, "ok": i % 2 == 0, "note": None} for i in range(4)],
        "tuple": (1, "two", [3.0]),
        "unicode": "Grüße — ✓",
        "view": MappingProxyType({"k": "v"}),
    }
    return [
        new_session_entry(
            "message", session_id="s", run_id="r",
            message=Message(role="user", content=(TextContent(text="héllo"),)),
        ),
        new_session_entry(
            "message", session_id="s", parent_id="p",
            message=Message(
                role="assistant",
                content=(
                    TextContent(text="calling"),
                    ToolCallContent(id="c1", name="lookup", arguments={"q": ["a", 1, None]}),
                ),
            ),
            metadata={"tags": ("x", "y"), "n": 3},
        ),
        new_session_entry(
            "message", session_id="s", parent_id="p",
            message=Message(
                role="tool",
                content=(
                    ToolResultContent(tool_call_id="c1", name="lookup", result=result),
                    ToolResultContent(
                        tool_call_id="c2", name="lookup",
                        error=ErrorInfo(code="E_TOOL", message="failed"),
                    ),
                ),
            ),
        ),
        new_session_entry("model_change", session_id="s", model=MODEL, previous_model=MODEL),
        new_session_entry("custom", session_id="s", data={"nested": {"deep": [{"a": {}}]}}),
    ]


@pytest.mark.parametrize("index", range(5))
def test_db10_an_entry_is_encoded_in_one_walk_as_its_dict_is(index: int) -> None:
    """The stored body of an entry is the text of its ``to_dict()``, character for character."""
    entry = _entries()[index]
    assert to_json_text(entry) == _dumps(entry.to_dict()) == _dumps(to_json_value(entry))


def test_db10_one_walk_encoding_refuses_what_the_dict_encoding_refuses() -> None:
    """Values that are not JSON are refused as ``json.dumps`` refuses them."""
    with pytest.raises(TypeError):
        to_json_text(new_session_entry("custom", session_id="s", data={"x": object()}))
    with pytest.raises(ValueError):
        to_json_text(new_session_entry("custom", session_id="s", data={"x": math.nan}))


def _script(n: int) -> list[list[Any]]:
    turns: list[list[Any]] = [
        [
            provider_text_delta(f"turn {t}"),
            provider_tool_call(f"c{t}a", "lookup", {"q": f"a{t}"}),
            provider_tool_call(f"c{t}b", "lookup", {"q": f"b{t}"}),
            provider_done(),
        ]
        for t in range(n - 1)
    ]
    return [*turns, [provider_text_delta("done"), provider_done()]]


def _agent(store: Any, n: int) -> Any:
    return create_agent(
        id="turns", model=MODEL, store=store, limits=LIMITS,
        provider=create_mock_provider(turns=_script(n)),
        tools=[
            ToolDefinition(
                name="lookup", parameters={"type": "object"},
                execute=lambda arguments, context: {"rows": [arguments["q"]] * 4},
            )
        ],
        loop=SingleShotLoopOptions(tool_concurrency=2),
        run_state=RunStateOptions(store, "v1", checkpoint_policy="every-turn"),
    )


async def test_dur3_the_stored_envelope_is_the_text_that_was_measured(tmp_path: Path) -> None:
    """What a turn write stores loads back as the envelope, and its text is the compact text of
    the envelope as the run built it (keys in the run's order)."""
    async with SqliteStore(tmp_path / "s.db") as store:
        result = await _agent(store, 4).create_session().run("go")
        assert result.status == "succeeded"
        record = await store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=result.run_id)
        assert record is not None and record.value["status"] == "succeeded"
    with sqlite3.connect(tmp_path / "s.db") as conn:
        (text,) = conn.execute(
            "SELECT value FROM prism_checkpoints WHERE key = ?", (result.run_id,)
        ).fetchone()
    assert text == _dumps(json.loads(text))
    assert list(json.loads(text))[:2] == ["schema_version", "agent_id"]


async def test_db10_a_turn_write_waits_for_a_lock_held_by_another_connection(
    tmp_path: Path,
) -> None:
    """With another connection holding the write lock, a turn write is not refused: it waits
    (on the worker thread) and is stored once the lock is released."""
    path = tmp_path / "s.db"
    async with SqliteStore(path) as store:
        await store.list("warm-up")
        entry = new_session_entry("message", session_id="s", message=Message(role="user", content=(TextContent(text="hi"),)))
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        write = asyncio.ensure_future(
            store._save_json_with_entries(
                entries=[SessionAppend(entry)], namespace="ns", key="k", value={"a": 1},
                text='{"a":1}', version=1, expected_version=0, fencing_token=None,
                ownership=None,
            )
        )
        await asyncio.sleep(0.2)
        assert not write.done()
        other.execute("COMMIT")
        other.close()
        await write
        record = await store.load_checkpoint(namespace="ns", key="k")
        assert record is not None and record.value == {"a": 1} and record.version == 1
        assert [e.id for e in await store.list("s")] == [entry.id]


async def test_db10_turn_writes_on_an_in_memory_database() -> None:
    """An in-memory database (not shareable by a second connection) writes every turn through
    its worker thread, with the same outcome."""
    async with SqliteStore(":memory:") as store:
        session = _agent(store, 5).create_session()
        result = await session.run("go")
        assert result.status == "succeeded"
        assert len(await store.list(session.id)) == 1 + 4 * 3 + 1


async def test_db10_inline_turn_writes_keep_the_wal_checkpointed(tmp_path: Path) -> None:
    """Writes made on the caller's thread never checkpoint, but the worker's share of them
    does: after ~600 turn writes the WAL is within a small multiple of SQLite's 1,000 pages."""
    path = tmp_path / "s.db"
    async with SqliteStore(path) as store:
        result = await _agent(store, 200).create_session().run("go")
        assert result.status == "succeeded"
        pages = (path.parent / (path.name + "-wal")).stat().st_size // 4096
    assert pages < 2000
