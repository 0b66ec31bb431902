"""A durable run outlives its server: killed (SIGKILL) or stopped (SIGTERM) mid-run, the run is
finished by the server started next on the store — one of two restarted at once — and its
client collects the answer with ``<name>_result``. The model turn the server was killed in is
asked again; the tool call it made before is not run again."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import mcp_types as types
import pytest
from mcp import ClientSession

from prism.runtime.durable import load_agent_run_state
from prism.stores import open_store

from .conftest import (
    GUARD_S,
    HttpServer,
    Progress,
    Workspace,
    http_session,
    stdio_session,
    text_of,
)


def _read_pid(marker: Path) -> int | None:
    """The pid in ``marker``, or ``None`` while it is missing or not fully written yet."""
    try:
        text = marker.read_text("utf-8")
    except FileNotFoundError:
        return None
    return int(text) if text.strip().isdigit() else None


async def _waiting_pid(workspace: Workspace) -> int:
    """The pid of the server whose run waits on the hold file (it writes ``hold.waiting``)."""
    marker = Path(str(workspace.hold) + ".waiting")
    for _ in range(int(GUARD_S / 0.02)):
        found = _read_pid(marker)
        if found is not None:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError("the run never reached its held turn")


async def _collect(session: ClientSession, run_id: str) -> types.CallToolResult:
    """Call ``crashy_result`` until the run has finished."""
    for _ in range(int(GUARD_S / 0.1)):
        result = await session.call_tool("crashy_result", {"run_id": run_id})
        if (result.meta or {}).get("prism/status") != "running":
            return result
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {run_id} did not finish")


async def _status(workspace: Workspace, run_id: str) -> str:
    store = await open_store(workspace.store_url)
    try:
        return str((await load_agent_run_state(store, run_id=run_id)).state["status"])
    finally:
        await store.aclose()


async def test_a_killed_servers_run_is_finished_by_one_of_two_restarted_servers(
    workspace: Workspace,
) -> None:
    workspace.hold.write_text("hold", encoding="utf-8")
    progress = Progress()
    async with stdio_session(workspace) as session:
        call = asyncio.ensure_future(
            session.call_tool("crashy", {"input": "remember"}, progress_callback=progress)
        )
        run_id = (await progress.wait_for("started")).split()[1]
        killed = await _waiting_pid(workspace)
        os.kill(killed, signal.SIGKILL)
        with pytest.raises(Exception):  # noqa: B017 - the connection is gone, whatever the error
            await call
    assert await _status(workspace, run_id) == "running"
    workspace.hold.unlink()

    async with stdio_session(workspace) as first, stdio_session(workspace) as second:
        answers = await asyncio.gather(_collect(first, run_id), _collect(second, run_id))
    assert [text_of(a) for a in answers] == ["finished", "finished"]
    assert await _status(workspace, run_id) == "succeeded"
    notes = [e for e in workspace.entries() if e["tool"] == "note"]
    assert [e["pid"] for e in notes] == [killed]  # the tool ran once, before the kill


async def test_a_run_left_at_shutdown_is_resumed_by_the_next_server(
    workspace: Workspace, http_servers: list[HttpServer]
) -> None:
    workspace.hold.write_text("hold", encoding="utf-8")
    server = HttpServer(workspace, PRISM_MCP_TOKEN="tok-restart")
    progress = Progress()
    async with http_session(server.url, token="tok-restart") as session:
        call = asyncio.ensure_future(
            session.call_tool("crashy", {"input": "remember"}, progress_callback=progress)
        )
        run_id = (await progress.wait_for("started")).split()[1]
        await _waiting_pid(workspace)
        assert await asyncio.to_thread(server.stop) == 0  # SIGTERM: the held turn outlasts it
        call.cancel()
        with pytest.raises(BaseException):  # noqa: B017 - cancelled, or the connection is gone
            await call
    assert await _status(workspace, run_id) == "running"  # left for the next server, not aborted
    workspace.hold.unlink()

    restarted = HttpServer(workspace, PRISM_MCP_TOKEN="tok-restart")
    http_servers.append(restarted)
    async with http_session(restarted.url, token="tok-restart") as session:
        answer = await _collect(session, run_id)
    assert text_of(answer) == "finished"
    assert len([e for e in workspace.entries() if e["tool"] == "note"]) == 1
