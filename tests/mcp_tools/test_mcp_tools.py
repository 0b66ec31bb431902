"""MCP servers as an agent's tools, against real SDK servers over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from prism.abort import AbortController
from prism.errors import PrismConfigError
from prism.ledger import MemoryRunLedger
from prism.mcp import MCPServerError, MCPServerHTTP, MCPServerStdio
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.types import ImageContent, ModelConfig, RunResult

from .conftest import HttpServer

MODEL = ModelConfig(provider="mock", model="demo")


def call(name: str, arguments: dict[str, Any], call_id: str = "c1") -> list[Any]:
    return [provider_tool_call(call_id, name, arguments), provider_done()]


ANSWER = [provider_text_delta("done"), provider_done()]


async def run_agent(
    tools: Sequence[Any],
    turns: Sequence[Sequence[Any]],
    *,
    signal: Any = None,
    **agent_options: Any,
) -> tuple[RunResult, list[Any], MemoryRunLedger]:
    ledger = MemoryRunLedger()
    events: list[Any] = []
    agent = create_agent(
        model=MODEL,
        provider=create_mock_provider(turns=[list(t) for t in turns]),
        tools=list(tools),
        run_ledger=ledger,
        **agent_options,
    )
    session = agent.create_session(on_event=events.append)
    result = await session.run("go", signal=signal)
    return result, events, ledger


def of_type(events: list[Any], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


# --------------------------------------------------------------------------- listing and calls


async def test_tools_are_listed_with_the_server_schema_and_called(
    stdio_server: Callable[..., MCPServerStdio],
) -> None:
    server = stdio_server()
    async with server:
        names = [t.name for t in server.tools]
        assert names == ["add", "fail", "picture", "read_file", "slow", "crash", "whoami", "grow"]
        add = server.tools[0]
        assert add.description == "Add two integers."
        assert add.parameters is not None and add.parameters["required"] == ["a", "b"]
        assert server.tools[3].metadata == {"mcp_server": repr(server), "mcp_tool": "read.file"}
        result, events, ledger = await run_agent(
            [server], [call("add", {"a": 2, "b": 3}), call("read_file", {"path": "x"}), ANSWER]
        )
    assert result.status == "succeeded"
    finished = of_type(events, "tool_execution_finished")
    assert [e.result.value for e in finished] == [{"result": 5}, {"result": "contents of x"}]
    assert [row.status for row in ledger.tool_calls] == ["started", "finished"] * 2
    assert not server.connected


async def test_arguments_are_validated_against_the_server_schema_before_sending(
    stdio_server: Callable[..., MCPServerStdio], marker: Path
) -> None:
    result, events, ledger = await run_agent(
        [stdio_server()], [call("add", {"a": "two", "b": 3}), ANSWER]
    )
    assert result.status == "succeeded"
    (blocked,) = of_type(events, "tool_execution_blocked")
    assert blocked.reason == "validation_failed" and "'two' is not of type 'integer'" in (
        blocked.error.message
    )
    assert not of_type(events, "tool_execution_started")  # never sent to the server
    assert [row.status for row in ledger.tool_calls] == ["blocked"]


async def test_an_is_error_result_is_a_tool_error_the_model_reads(
    stdio_server: Callable[..., MCPServerStdio],
) -> None:
    result, events, ledger = await run_agent([stdio_server()], [call("fail", {"reason": "no"}), ANSWER])
    assert result.status == "succeeded"
    (error,) = of_type(events, "tool_execution_error")
    assert error.error.code == "ERR_PRISM_MCP_TOOL_ERROR"
    assert "cannot do it: no" in error.error.message
    assert ledger.tool_calls[-1].status == "error"
    tool_message = result.messages[2]
    assert tool_message.content[0].error.code == "ERR_PRISM_MCP_TOOL_ERROR"


async def test_text_and_image_content_map_to_the_result(
    stdio_server: Callable[..., MCPServerStdio],
) -> None:
    result, events, _ = await run_agent([stdio_server()], [call("picture", {}), ANSWER])
    (finished,) = of_type(events, "tool_execution_finished")
    assert finished.result.value == "a red dot"
    assert finished.result.content == (ImageContent(mime_type="image/png", data="iVBORw0KGgo="),)


async def test_progress_notifications_become_tool_progress_events(
    stdio_server: Callable[..., MCPServerStdio],
) -> None:
    server = stdio_server(call_timeout=0.5)
    result, events, ledger = await run_agent([server], [call("slow", {"steps": 2}), ANSWER])
    progress = of_type(events, "tool_execution_progress")
    assert [e.progress for e in progress] == [
        {"progress": 1.0, "total": 2.0, "message": "step 1"},
        {"progress": 2.0, "total": 2.0, "message": "step 2"},
    ]
    (error,) = of_type(events, "tool_execution_error")  # then the call timeout
    assert error.error.code == "ERR_PRISM_MCP_TIMEOUT"
    assert "did not answer within 0.5 s" in error.error.message


async def test_a_call_timeout_sends_a_cancellation(
    stdio_server: Callable[..., MCPServerStdio], marker: Path
) -> None:
    async with stdio_server(call_timeout=0.5) as server:
        result, _, _ = await run_agent([server], [call("slow", {}), ANSWER])
        await wait_for_text(marker, "cancelled")
    assert result.status == "succeeded"


def _holds(path: Path, text: str) -> bool:
    return path.exists() and text in path.read_text()


async def wait_for_text(path: Path, text: str, attempts: int = 400) -> None:
    for _ in range(attempts):
        if _holds(path, text):
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"{text!r} never appeared in {path}")


# --------------------------------------------------------------------------- failures


async def test_a_server_that_crashes_mid_call_is_an_error_row_with_its_stderr_tail(
    stdio_server: Callable[..., MCPServerStdio],
) -> None:
    server = stdio_server(env={"MCP_TEST_TOKEN": "s3cret-token"}, secrets=["s3cret-token"])
    result, events, ledger = await run_agent(
        [server], [call("crash", {}), call("add", {"a": 1, "b": 1}, "c2"), ANSWER]
    )
    assert result.status == "succeeded"  # the model read both errors and answered
    first, second = of_type(events, "tool_execution_error")
    assert first.error.code == "ERR_PRISM_MCP_CLOSED"
    assert "exited with code 3" in first.error.message
    assert "server stderr (last lines):\nfatal: giving up [[REDACTED]]" in first.error.message
    assert "s3cret-token" not in repr(events) and "s3cret-token" not in repr(ledger.tool_calls)
    assert second.error.code == "ERR_PRISM_MCP_CLOSED"  # later calls fail at once
    # the next run reconnects (a new server process)
    result, events, _ = await run_agent([server], [call("add", {"a": 1, "b": 1}), ANSWER])
    assert of_type(events, "tool_execution_finished")[0].result.value == {"result": 2}


async def test_a_server_that_cannot_start_fails_the_run_with_its_stderr() -> None:
    broken = MCPServerStdio(
        sys.executable, ["-c", "import sys; print('no such config', file=sys.stderr); sys.exit(2)"]
    )
    with pytest.raises(MCPServerError) as caught:
        async with broken:
            pass
    assert caught.value.code == "ERR_PRISM_MCP_CONNECT"
    assert "no such config" in str(caught.value)
    from prism.errors import AgentRunError

    with pytest.raises(AgentRunError) as failed:
        await run_agent([broken], [ANSWER])
    assert failed.value.result.error is not None
    assert failed.value.result.error.code == "ERR_PRISM_MCP_CONNECT"


async def test_a_server_that_never_answers_hits_the_connect_timeout() -> None:
    silent = MCPServerStdio(
        sys.executable, ["-c", "import time; time.sleep(60)"], connect_timeout=0.5
    )
    with pytest.raises(MCPServerError, match="no answer within 0.5 s") as caught:
        async with silent:
            pass
    assert caught.value.code == "ERR_PRISM_MCP_CONNECT"


# --------------------------------------------------------------------------- abort


async def test_abort_during_a_call_sends_the_cancellation_to_the_server(
    stdio_server: Callable[..., MCPServerStdio], marker: Path
) -> None:
    controller = AbortController()
    from prism.errors import AgentRunError

    async with stdio_server() as server:
        task = asyncio.create_task(
            run_agent([server], [call("slow", {}), ANSWER], signal=controller.signal)
        )
        await wait_for_text(marker, "started")
        controller.abort("stop")
        with pytest.raises(AgentRunError) as caught:
            await task
        await wait_for_text(marker, "cancelled")
        assert server.connected  # the connection survives an aborted call
    assert caught.value.result.status == "aborted"


# --------------------------------------------------------------------------- list changes


async def test_the_tool_list_is_refreshed_on_list_changed(
    stdio_server: Callable[..., MCPServerStdio],
) -> None:
    async with stdio_server() as server:
        assert "extra" not in [t.name for t in server.tools]
        version = server.tools_version
        result, events, _ = await run_agent(
            [server], [call("grow", {}), call("extra", {"text": "hi"}, "c2"), ANSWER]
        )
        # the leg keeps the tools it started with
        (blocked,) = of_type(events, "tool_execution_blocked")
        assert blocked.reason == "unknown_tool"
        for _ in range(400):
            if server.tools_version > version:
                break
            await asyncio.sleep(0.025)
        assert "extra" in [t.name for t in server.tools]
        # the next run has it
        result, events, _ = await run_agent([server], [call("extra", {"text": "hi"}), ANSWER])
        assert of_type(events, "tool_execution_finished")[0].result.value == {"result": "hi"}


# --------------------------------------------------------------------------- names


async def test_prefix_allow_and_deny(stdio_server: Callable[..., MCPServerStdio]) -> None:
    async with stdio_server(prefix="t", allow=["add", "fail", "read.file"], deny=["fail"]) as s:
        assert [t.name for t in s.tools] == ["t_add", "t_read_file"]
        result, events, _ = await run_agent([s], [call("t_add", {"a": 1, "b": 2}), ANSWER])
    assert of_type(events, "tool_execution_finished")[0].result.value == {"result": 3}


async def test_two_servers_with_the_same_tools_need_a_prefix(
    stdio_server: Callable[..., MCPServerStdio], http_server: HttpServer
) -> None:
    from prism.errors import AgentRunError

    with pytest.raises(AgentRunError, match="tool name collision: 'add'"):
        await run_agent([stdio_server(), http_server.client()], [ANSWER])
    result, events, _ = await run_agent(
        [stdio_server(allow=["add"]), http_server.client(prefix="remote", allow=["add"])],
        [call("add", {"a": 1, "b": 2}), call("remote_add", {"a": 3, "b": 4}, "c2"), ANSWER],
    )
    assert [e.result.value for e in of_type(events, "tool_execution_finished")] == [
        {"result": 3},
        {"result": 7},
    ]


def test_import_prism_and_building_servers_do_not_import_the_sdk() -> None:
    import subprocess

    code = (
        "import sys, prism, prism.mcp; prism.mcp.MCPServerStdio('x'); "
        "prism.mcp.MCPServerHTTP('http://127.0.0.1:1/mcp'); "
        "assert not [m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')]"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_configuration_errors() -> None:
    with pytest.raises(PrismConfigError, match="prefix"):
        MCPServerStdio("x", prefix="a.b")
    with pytest.raises(PrismConfigError, match="allow"):
        MCPServerStdio("x", allow="add")
    with pytest.raises(PrismConfigError, match="call_timeout"):
        MCPServerStdio("x", call_timeout=0)
    with pytest.raises(PrismConfigError, match="url"):
        MCPServerHTTP("ftp://example.com")


# --------------------------------------------------------------------------- HTTP


async def test_streamable_http_server_with_secret_headers(http_server: HttpServer) -> None:
    server = http_server.client(
        headers={"Authorization": "Bearer tok-http", "X-Team": "blue-team"}, prefix="web"
    )
    assert "tok-http" not in repr(server) and "tok-http" not in repr(server.source_identity())
    assert server.source_identity()["headers"] == ["Authorization", "X-Team"]
    async with server:
        result, events, ledger = await run_agent(
            [server],
            [call("web_whoami", {}), call("web_fail", {"reason": "token"}, "c2"), ANSWER],
        )
    finished = of_type(events, "tool_execution_finished")
    assert finished[0].result.value == {"result": "token=[REDACTED]"}
    (error,) = of_type(events, "tool_execution_error")
    assert error.error.code == "ERR_PRISM_MCP_TOOL_ERROR"
    assert error.error.message.endswith("cannot do it: token [REDACTED]")
    assert "tok-http" not in repr(events) and "tok-http" not in repr(ledger.tool_calls)


async def test_an_http_server_killed_mid_call_is_an_error_row(
    http_server: HttpServer, marker: Path
) -> None:
    async with http_server.client() as server:
        task = asyncio.create_task(run_agent([server], [call("slow", {}), ANSWER]))
        await wait_for_text(marker, "started")
        http_server.kill()
        result, events, _ = await task
    assert result.status == "succeeded"
    (error,) = of_type(events, "tool_execution_error")
    assert error.error.code == "ERR_PRISM_MCP_CLOSED"
