"""``prism mcp serve`` over stdio, driven by the official ``mcp`` client (``stdio_client`` starts
the server as a subprocess; its runs go to a real SQLite store)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import mcp_types as types
import pytest

import prism
from prism.runtime.durable import list_pending_decisions, load_agent_run_state, record_decisions
from prism.stores import open_store

from . import serve_agents
from .conftest import GUARD_S, Progress, Workspace, stdio_session, text_of


async def _stored_status(workspace: Workspace, run_id: str) -> str:
    store = await open_store(workspace.store_url)
    try:
        loaded = await load_agent_run_state(store, run_id=run_id)
        return str(loaded.state["status"])
    finally:
        await store.aclose()


async def test_each_agent_is_a_tool_with_its_schemas_and_a_result_tool(
    workspace: Workspace,
) -> None:
    async with stdio_session(workspace) as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert {"echo", "echo_result", "desk", "desk_result", "writer", "writer_result"} <= set(listed)
    echo = listed["echo"]
    assert echo.description == "Ask the echo agent."
    assert echo.input_schema["required"] == ["input"]
    assert set(echo.input_schema["properties"]) == {"input", "session_id"}
    assert echo.output_schema is None
    assert listed["desk"].description == "The payment desk: pays what you ask."  # as_tool's
    assert listed["writer"].output_schema == serve_agents.ARTICLE
    assert listed["echo_result"].input_schema["required"] == ["run_id"]


async def test_a_call_answers_with_the_redacted_text_usage_and_the_ids(
    workspace: Workspace,
) -> None:
    async with stdio_session(workspace) as session:
        result = await session.call_tool("echo", {"input": f"my password is {serve_agents.SECRET}"})
    assert not result.is_error
    assert text_of(result) == "echo: my password is [REDACTED]"
    assert serve_agents.SECRET not in json.dumps(result.model_dump(mode="json"))
    meta = result.meta or {}
    assert meta["prism/status"] == "succeeded"
    assert meta["prism/usage"] == {
        "input_tokens": 3,
        "output_tokens": 2,
        "total_tokens": 5,
        "cost": 0.001,
        "currency": "USD",
    }
    assert meta["prism/run_id"].startswith("run_")
    assert meta["prism/session_id"] in text_of_note(result)


def text_of_note(result: types.CallToolResult) -> str:
    note = result.content[-1]
    assert isinstance(note, types.TextContent)
    return note.text


async def test_an_artifact_comes_back_as_structured_content(workspace: Workspace) -> None:
    async with stdio_session(workspace) as session:
        result = await session.call_tool("writer", {"input": "three little words"})
    assert not result.is_error
    assert result.structured_content == {"title": "Three Little Words", "words": 3}
    assert json.loads(text_of(result)) == result.structured_content


async def test_a_failing_run_is_an_error_result_and_the_server_goes_on(
    workspace: Workspace,
) -> None:
    async with stdio_session(workspace) as session:
        failed = await session.call_tool("failing", {"input": "anything"})
        after = await session.call_tool("echo", {"input": "still here"})
    assert failed.is_error
    assert text_of(failed) == "ERR_PRISM_RUN_FAILED: the model is down"
    meta = failed.meta or {}
    assert meta["prism/status"] == "failed"
    assert meta["prism/error"] == {"code": "ERR_PRISM_RUN_FAILED", "message": "the model is down"}
    assert text_of(after) == "echo: still here"


async def test_arguments_that_do_not_fit_the_schema_are_refused(workspace: Workspace) -> None:
    async with stdio_session(workspace) as session:
        result = await session.call_tool("echo", {"text": "no input"})
    assert result.is_error
    assert text_of(result).startswith("ERR_PRISM_MCP_ARGUMENTS: the arguments do not fit")


async def test_progress_notifications_follow_the_run_and_only_grow(workspace: Workspace) -> None:
    progress = Progress()
    async with stdio_session(workspace) as session:
        result = await session.call_tool(
            "crashy", {"input": "remember"}, progress_callback=progress
        )
    assert text_of(result) == "finished"
    values = [value for value, _, _ in progress.seen]
    assert values == sorted(values) and len(set(values)) == len(values)
    run_id = (result.meta or {})["prism/run_id"]
    assert progress.messages == [
        f"run {run_id} started (session {(result.meta or {})['prism/session_id']})",
        "turn 1",
        "calling note",
        "note finished",
        "turn 2",
    ]


async def test_a_cancelled_call_aborts_its_stored_run(workspace: Workspace) -> None:
    progress = Progress()
    async with stdio_session(workspace) as session:
        call = asyncio.ensure_future(
            session.call_tool("slow", {"input": "take your time"}, progress_callback=progress)
        )
        started = await progress.wait_for("started")
        await progress.wait_for("turn 1")
        call.cancel()  # the client sends notifications/cancelled
        with pytest.raises(asyncio.CancelledError):
            await call
        run_id = started.split()[1]
        status = "running"
        for _ in range(int(GUARD_S / 0.05)):
            status = await _stored_status(workspace, run_id)
            if status != "running":
                break
            await asyncio.sleep(0.05)
        assert status == "aborted"
        assert text_of(await session.call_tool("echo", {"input": "after"})) == "echo: after"


async def test_a_conversation_continues_with_the_session_id_it_returned(
    workspace: Workspace,
) -> None:
    async with stdio_session(workspace) as session:
        first = await session.call_tool("chat", {"input": "one"})
        session_id = (first.meta or {})["prism/session_id"]
        second = await session.call_tool("chat", {"input": "two", "session_id": session_id})
        fresh = await session.call_tool("chat", {"input": "new"})
        unknown = await session.call_tool("chat", {"input": "x", "session_id": "session_nope"})
        other_tool = await session.call_tool("echo", {"input": "x", "session_id": session_id})
    assert (text_of(first), text_of(second), text_of(fresh)) == ("turns: 1", "turns: 2", "turns: 1")
    assert (second.meta or {})["prism/session_id"] == session_id
    for refused in (unknown, other_tool):
        assert refused.is_error
        assert text_of(refused).startswith("ERR_PRISM_MCP_REFUSED: no session ")


class Elicit:
    """An elicitation callback that answers ``action`` and keeps the messages it was shown."""

    def __init__(self, action: str, content: dict[str, Any] | None = None) -> None:
        self.action = action
        self.content = content
        self.messages: list[str] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.messages.append(params.message)
        return types.ElicitResult(
            action=self.action, content=self.content if self.action == "accept" else None
        )


async def test_an_accepted_elicitation_allows_the_call_once(workspace: Workspace) -> None:
    elicit = Elicit("accept", {"reason": "looks right"})
    progress = Progress()
    async with stdio_session(workspace, elicitation=elicit) as session:
        result = await session.call_tool(
            "desk", {"input": f"rent {serve_agents.SECRET}"}, progress_callback=progress
        )
    assert text_of(result) == "paid"
    assert "waiting for approval" in progress.messages and "calling pay" in progress.messages
    assert serve_agents.SECRET not in json.dumps(progress.seen)
    (message,) = elicit.messages
    assert "The agent desk wants to call the tool pay" in message
    assert '"amount": 5' in message and "[REDACTED]" in message
    assert serve_agents.SECRET not in message  # the arguments as the approval shows them
    assert [e["tool"] for e in workspace.entries()] == ["pay"]


async def test_a_declined_elicitation_rejects_the_call(workspace: Workspace) -> None:
    elicit = Elicit("decline")
    async with stdio_session(workspace, elicitation=elicit) as session:
        result = await session.call_tool("desk", {"input": "rent"})
    assert text_of(result) == "refused"
    assert len(elicit.messages) == 1 and workspace.entries() == []


async def test_a_cancelled_elicitation_leaves_the_run_waiting_for_approval(
    workspace: Workspace,
) -> None:
    async with stdio_session(workspace, elicitation=Elicit("cancel")) as session:
        result = await session.call_tool("desk", {"input": "rent"})
    meta = result.meta or {}
    assert meta["prism/status"] == "waiting_for_approval" and not result.is_error
    assert text_of(result).startswith(f"Waiting for approval: the run {meta['prism/run_id']} ")
    assert workspace.entries() == []


async def test_without_elicitation_a_run_waits_then_recorded_decisions_are_collected(
    workspace: Workspace,
) -> None:
    async with stdio_session(workspace) as session:
        result = await session.call_tool("desk", {"input": "rent"})
        meta = result.meta or {}
        run_id = meta["prism/run_id"]
        assert meta["prism/status"] == "waiting_for_approval"
        (pending,) = meta["prism/pending"]
        assert pending["tool"] == "pay" and json.loads(pending["arguments"])["amount"] == 5
        still = await session.call_tool("desk_result", {"run_id": run_id})
        assert (still.meta or {})["prism/status"] == "waiting_for_approval"

        store = await open_store(workspace.store_url)
        try:
            (waiting,) = await list_pending_decisions(store, run_id=run_id)
            await record_decisions(
                store, run_id, [prism.RunDecision(waiting.approval_id, "allow_once")], by="ops"
            )
        finally:
            await store.aclose()
        collected = await session.call_tool("desk_result", {"run_id": run_id})
        again = await session.call_tool("desk_result", {"run_id": run_id})
    assert text_of(collected) == text_of(again) == "paid"
    assert [e["tool"] for e in workspace.entries()] == ["pay"]


async def test_a_run_resumed_from_python_is_collected_with_its_answer(
    workspace: Workspace,
) -> None:
    async with stdio_session(workspace) as session:
        result = await session.call_tool("desk", {"input": "rent"})
        run_id = (result.meta or {})["prism/run_id"]
        store = await open_store(workspace.store_url)
        try:
            desk = _agent_of(serve_agents.desk(store))  # the registry gives its agent tool
            resumed = await prism.resume_agent_run(desk, run_id, decision="approve")
            assert resumed.status == "succeeded"
        finally:
            await store.aclose()
        collected = await session.call_tool("desk_result", {"run_id": run_id})
    assert not collected.is_error and text_of(collected) == "paid"
    assert (collected.meta or {})["prism/status"] == "succeeded"


def _agent_of(tool: prism.ToolDefinition) -> prism.Agent:
    from prism.runtime.run._delegation import child_agent

    agent = child_agent(tool)
    assert isinstance(agent, prism.Agent)
    return agent


async def test_an_unknown_run_is_refused(workspace: Workspace) -> None:
    async with stdio_session(workspace) as session:
        result = await session.call_tool("echo_result", {"run_id": "run_unknown"})
    assert result.is_error
    assert text_of(result) == "ERR_PRISM_MCP_REFUSED: no run run_unknown that this client may use"


async def test_only_json_rpc_reaches_standard_output(workspace: Workspace) -> None:
    async with stdio_session(workspace) as session:
        result = await session.call_tool("noisy", {"input": "shh"})
    assert text_of(result) == "quiet"
    logged = workspace.stderr()
    for noise in ("noise from print", "noise from file descriptor 1", "noise from a child process"):
        assert noise in logged
