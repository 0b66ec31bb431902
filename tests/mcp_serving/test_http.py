"""``prism mcp serve --http`` as a subprocess on 127.0.0.1, driven by the official ``mcp``
client over streamable HTTP: calls, cancellation, conversations scoped to their client, bearer
tokens, DNS rebinding protection and redaction."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import httpx2
import pytest

from prism.runtime.durable import load_agent_run_state
from prism.stores import open_store

from .conftest import GUARD_S, HttpServer, Progress, Workspace, http_session, text_of
from .test_stdio import Elicit

_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
_POST_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}


async def _post(url: str, **headers: str) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=30.0) as client:
        return await client.post(url, json=_INIT, headers={**_POST_HEADERS, **headers})


async def test_a_call_over_http_answers_with_text_and_an_artifact(
    workspace: Workspace, http_servers: list[HttpServer]
) -> None:
    server = HttpServer(workspace)
    http_servers.append(server)
    async with http_session(server.url) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        echoed = await session.call_tool("echo", {"input": "over http"})
        written = await session.call_tool("writer", {"input": "four words right here"})
    assert {"echo", "echo_result", "writer"} <= names
    assert text_of(echoed) == "echo: over http"
    assert written.structured_content == {"title": "Four Words Right Here", "words": 4}


async def test_a_cancelled_http_call_aborts_its_stored_run(
    workspace: Workspace, http_servers: list[HttpServer]
) -> None:
    server = HttpServer(workspace)
    http_servers.append(server)
    progress = Progress()
    async with http_session(server.url) as session:
        call = asyncio.ensure_future(
            session.call_tool("slow", {"input": "wait"}, progress_callback=progress)
        )
        started = await progress.wait_for("started")
        await progress.wait_for("turn 1")
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    run_id = started.split()[1]
    store = await open_store(workspace.store_url)
    try:
        status = "running"
        for _ in range(int(GUARD_S / 0.05)):
            status = (await load_agent_run_state(store, run_id=run_id)).state["status"]
            if status != "running":
                break
            await asyncio.sleep(0.05)
    finally:
        await store.aclose()
    assert status == "aborted"


async def test_a_conversation_is_its_mcp_sessions_alone(
    workspace: Workspace, http_servers: list[HttpServer]
) -> None:
    server = HttpServer(workspace)
    http_servers.append(server)
    async with http_session(server.url) as owner, http_session(server.url) as other:
        first = await owner.call_tool("chat", {"input": "one"})
        meta = first.meta or {}
        session_id, run_id = meta["prism/session_id"], meta["prism/run_id"]
        second = await owner.call_tool("chat", {"input": "two", "session_id": session_id})
        collected = await owner.call_tool("chat_result", {"run_id": run_id})
        stolen = await other.call_tool("chat", {"input": "mine?", "session_id": session_id})
        peeked = await other.call_tool("chat_result", {"run_id": run_id})
    assert (text_of(first), text_of(second), text_of(collected)) == (
        "turns: 1",
        "turns: 2",
        "turns: 1",
    )
    assert stolen.is_error and peeked.is_error
    assert (
        text_of(stolen)
        == f"ERR_PRISM_MCP_REFUSED: no session {session_id} that this client may use"
    )
    assert text_of(peeked) == f"ERR_PRISM_MCP_REFUSED: no run {run_id} that this client may use"


async def test_with_tokens_every_request_needs_one_and_each_token_is_its_own_client(
    workspace: Workspace, http_servers: list[HttpServer]
) -> None:
    server = HttpServer(workspace, PRISM_MCP_TOKEN="tok-alice, tok-bob")
    http_servers.append(server)
    assert (await _post(server.url)).status_code == 401
    refused = await _post(server.url, Authorization="Bearer tok-mallory")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert (await _post(server.url, Authorization="Bearer tok-alice")).status_code == 200

    async with http_session(server.url, token="tok-alice") as alice:
        first = await alice.call_tool("chat", {"input": "one"})
        # the token's own secret never comes back: tokens are redacted from results
        echoed = await alice.call_tool("echo", {"input": "my token is tok-alice"})
    session_id = (first.meta or {})["prism/session_id"]
    async with http_session(server.url, token="tok-alice") as alice_again:  # a new MCP session
        second = await alice_again.call_tool("chat", {"input": "two", "session_id": session_id})
    async with http_session(server.url, token="tok-bob") as bob:
        stolen = await bob.call_tool("chat", {"input": "x", "session_id": session_id})
    assert text_of(second) == "turns: 2"
    assert stolen.is_error and text_of(stolen).startswith("ERR_PRISM_MCP_REFUSED")
    assert text_of(echoed) == "echo: my token is [REDACTED]"
    assert "tok-alice" not in server.log.read_text("utf-8")


async def test_dns_rebinding_is_refused(
    workspace: Workspace, http_servers: list[HttpServer]
) -> None:
    server = HttpServer(workspace)
    http_servers.append(server)
    assert (await _post(server.url, Host="evil.example")).status_code == 421
    assert (await _post(server.url, Origin="http://evil.example")).status_code == 403
    allowed = await _post(server.url, Origin=f"http://127.0.0.1:{server.port}")
    assert allowed.status_code == 200


def _serve(workspace: Workspace, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *workspace.argv("--http", *extra)],
        env={**os.environ, **workspace.env(**env)},
        cwd=workspace.dir,
        capture_output=True,
        text=True,
        timeout=GUARD_S,
        stdin=subprocess.DEVNULL,
    )


def test_beyond_loopback_a_token_is_required(workspace: Workspace) -> None:
    done = _serve(workspace, "--host", "0.0.0.0", "--allowed-host", "prism.example")
    assert done.returncode == 2
    assert "needs a bearer token" in done.stderr
    wildcard = _serve(workspace, "--host", "0.0.0.0", PRISM_MCP_TOKEN="t0k")
    assert wildcard.returncode == 2 and "--allowed-host" in wildcard.stderr


async def test_beyond_loopback_with_a_token_it_serves_and_warns_without_tls(
    workspace: Workspace, http_servers: list[HttpServer]
) -> None:
    server = HttpServer(
        workspace, "--host", "0.0.0.0", "--allowed-host", "127.0.0.1", PRISM_MCP_TOKEN="t0k-lan"
    )
    http_servers.append(server)
    assert (await _post(server.url)).status_code == 401
    async with http_session(server.url, token="t0k-lan") as session:
        result = await session.call_tool("echo", {"input": "lan"})
    assert text_of(result) == "echo: lan"
    logged = server.log.read_text("utf-8")
    assert "without TLS" in logged and "t0k-lan" not in logged


async def test_an_elicitation_over_http_allows_the_call(
    workspace: Workspace, http_servers: list[HttpServer]
) -> None:
    server = HttpServer(workspace)
    http_servers.append(server)
    elicit = Elicit("accept")
    async with http_session(server.url, elicitation=elicit) as session:
        result = await session.call_tool("desk", {"input": "rent"})
    assert text_of(result) == "paid" and len(elicit.messages) == 1
    assert [e["tool"] for e in workspace.entries()] == ["pay"]


async def test_a_2026_client_over_http_is_asked_in_an_input_required_result(
    workspace: Workspace, http_servers: list[HttpServer]
) -> None:
    from mcp import Client

    server = HttpServer(workspace)
    http_servers.append(server)
    elicit = Elicit("accept")
    async with Client(server.url, elicitation_callback=elicit) as client:  # discovers 2026-07-28
        result = await client.call_tool("desk", {"input": "rent"})
    assert text_of(result) == "paid" and len(elicit.messages) == 1
    assert [e["tool"] for e in workspace.entries()] == ["pay"]
