"""Durable delegation on SQLite and PostgreSQL (issue 16, item 2): a child agent run suspends for
an approval, the calling run suspends with it, and a new process approves through the calling run
and resumes it; both finish, every tool ran once and no provider turn was requested twice.

The two processes are real interpreters (``_delegation_worker.py``) sharing only the store.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from prism.runtime.checkpoints import AGENT_RUN_NAMESPACE
from prism.stores import open_store
from prism.stores.postgres import PostgresStore
from prism.types import ToolResultContent

WORKER = Path(__file__).with_name("_delegation_worker.py")
_IO_GUARD_S = 120.0  # a hang guard only; nothing asserts on time


async def _phase(url: str, schema: str | None, directory: Path, *args: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(WORKER), url, schema or "-", str(directory), *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), _IO_GUARD_S)
    assert proc.returncode == 0, err.decode(errors="replace")
    answer: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    answer["pid"] = proc.pid
    return answer


async def _approve_in_a_new_process(url: str, schema: str | None, directory: Path) -> None:
    first = await _phase(url, schema, directory, "start", "sess_delegation")
    # The clerk waits for the approval of pay; the lead suspends with it, and its interruption
    # names the clerk's run. The lead's note and the clerk's lookup ran; pay did not.
    assert first["status"] == "suspended", first
    (pending,) = first["pending"]
    assert pending["tool_name"] == "pay"
    child = pending["subagent"]
    assert child["agent"] == "clerk" and child["tool_call_id"] == "l2"
    effects = directory / "effects.log"
    assert Counter(line.split()[0] for line in effects.read_text().splitlines()) == Counter(
        {"note": 1, "lookup": 1}
    )
    options: dict[str, Any] = {} if schema is None else {"schema": schema, "max_size": 2}
    store = await open_store(url, **options)
    try:
        record = await store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=first["run_id"])
        assert record is not None and isinstance(record.value, dict)
        (entry,) = record.value["pending_calls"]
        assert entry["child"] == {
            "agent": "clerk", "session_id": child["session_id"], "run_id": child["run_id"]
        }
        child_record = await store.load_checkpoint(
            namespace=AGENT_RUN_NAMESPACE, key=child["run_id"]
        )
        assert child_record is not None and isinstance(child_record.value, dict)
        assert child_record.value["status"] == "suspended"

        done = await _phase(url, schema, directory, "approve", first["run_id"])
        assert done["pid"] != first["pid"]
        assert done["status"] == "succeeded" and done["text"] == "The clerk paid invoice 7.", done

        # Every tool ran once, across both agents and both processes.
        lines = [line.split() for line in effects.read_text().splitlines()]
        assert Counter(name for name, _ in lines) == Counter({"note": 1, "lookup": 1, "pay": 1})
        assert [name for name, pid in lines if pid == str(done["pid"])] == ["pay"]
        # No provider turn of either agent was requested twice.
        turns = [tuple(line.split()[:2]) for line in (directory / "turns.log").read_text().splitlines()]
        assert sorted(turns) == [("clerk", "t1"), ("clerk", "t2"), ("lead", "t1"), ("lead", "t2")]

        # Both envelopes are final; the lead's row names the clerk's run and carries its answer.
        for run_id in (first["run_id"], child["run_id"]):
            final = await store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=run_id)
            assert final is not None and isinstance(final.value, dict)
            assert final.value["status"] == "succeeded" and final.value["pending_calls"] == []
        rows = [
            (e.message, part)
            for e in await store.list("sess_delegation")
            if e.message is not None
            for part in e.message.content
            if isinstance(part, ToolResultContent) and part.tool_call_id == "l2"
        ]
        ((message, row),) = rows
        assert row.result == "Invoice 7 is paid."
        assert message.metadata is not None
        assert message.metadata["subagent"]["run_id"] == child["run_id"]
        child_rows = [
            part.tool_call_id
            for e in await store.list(child["session_id"])
            if e.message is not None
            for part in e.message.content
            if isinstance(part, ToolResultContent)
        ]
        assert sorted(child_rows) == ["k1", "k2"]
    finally:
        await store.aclose()


async def test_child_approval_through_the_parent_in_a_new_process_sqlite(tmp_path: Path) -> None:
    await _approve_in_a_new_process(f"sqlite:///{tmp_path}/store.db", None, tmp_path)


async def test_child_approval_through_the_parent_in_a_new_process_postgres(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    store = await PostgresStore.connect(pg_url, schema=pg_schema, max_size=1)
    await store.aclose()  # migrated before the workers start
    await _approve_in_a_new_process(pg_url, pg_schema, tmp_path)
