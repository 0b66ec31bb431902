"""``agent.to_mcp_server()`` and ``prism.mcp.serving.create_mcp_server`` in process: the official
``mcp.Client`` connected to the server object (the handshake protocol revision, and the
sessionless 2026 one), and the configuration errors a host gets before anything is served."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

import prism
from prism.mcp.serving import create_mcp_server, served_agent
from prism.testing import MemoryCheckpointStore, create_mock_provider

from .serve_agents import ARTICLE, MODEL, Scripted, _chat, _echo


def _echo_agent(**options: Any) -> prism.Agent:
    return prism.create_agent(name="echo", model=MODEL, provider=Scripted(_echo), **options)


def _text(result: types.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return first.text


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_to_mcp_server_serves_the_agent_in_process(mode: str) -> None:
    server = _echo_agent().to_mcp_server(description="Echoes.")
    async with Client(server, mode=mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool("echo", {"input": "hi"})
    assert set(tools) == {"echo", "echo_result"} and tools["echo"].description == "Echoes."
    assert _text(result) == "echo: hi"


async def test_a_conversation_of_an_agent_without_a_store_continues_in_the_server() -> None:
    agent = prism.create_agent(name="chat", model=MODEL, provider=Scripted(_chat))
    async with Client(agent.to_mcp_server(), mode="legacy") as client:
        first = await client.call_tool("chat", {"input": "one"})
        session_id = (first.meta or {})["prism/session_id"]
        second = await client.call_tool("chat", {"input": "two", "session_id": session_id})
        collected = await client.call_tool(
            "chat_result", {"run_id": (second.meta or {})["prism/run_id"]}
        )
    assert [_text(r) for r in (first, second, collected)] == ["turns: 1", "turns: 2", "turns: 2"]


async def test_a_custom_input_schema_reaches_the_agent_as_json_text() -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    }
    tool = _echo_agent().as_tool(name="trip", description="Plan a trip.", input=schema)
    async with Client(create_mcp_server(tool), mode="legacy") as client:
        listed = (await client.list_tools()).tools[0]
        result = await client.call_tool("trip", {"city": "Oslo", "days": 2})
        refused = await client.call_tool("trip", {"days": "two"})
    assert listed.name == "trip" and listed.description == "Plan a trip."
    assert set(listed.input_schema["properties"]) == {"city", "days", "session_id"}
    assert _text(result) == "echo: " + json.dumps(
        {"city": "Oslo", "days": 2}, separators=(",", ":")
    )
    assert refused.is_error and _text(refused).startswith("ERR_PRISM_MCP_ARGUMENTS")
    assert "'city' is a required property" in _text(refused)


async def test_an_artifact_that_is_not_an_object_is_wrapped() -> None:
    from prism.artifacts import json_schema_artifact

    async def numbers(request: Any) -> Any:
        from prism.providers import provider_done, provider_text_delta

        yield provider_text_delta("[1, 2, 3]")
        yield provider_done()

    agent = prism.create_agent(
        name="numbers",
        model=MODEL,
        provider=Scripted(numbers),
        loop=prism.GenerateValidateReviseLoopOptions(
            **json_schema_artifact({"type": "array", "items": {"type": "integer"}})
        ),
    )
    served = served_agent(agent)
    assert served.output_schema == {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"type": "integer"}}},
        "required": ["result"],
    }
    async with Client(agent.to_mcp_server(), mode="legacy") as client:
        result = await client.call_tool("numbers", {"input": "count"})
    assert result.structured_content == {"result": [1, 2, 3]}
    assert served_agent(_echo_agent()).output_schema is None
    writer = prism.create_agent(
        name="w",
        model=MODEL,
        provider=create_mock_provider(),
        loop=prism.GenerateValidateReviseLoopOptions(**json_schema_artifact(ARTICLE)),
    )
    assert served_agent(writer).output_schema == ARTICLE


def test_what_cannot_be_served_is_a_config_error() -> None:
    agent = _echo_agent()
    with pytest.raises(prism.PrismConfigError, match="1-64 characters"):
        served_agent(agent, name="no spaces allowed")
    with pytest.raises(prism.PrismConfigError, match="session_id"):
        served_agent(
            agent, input={"type": "object", "properties": {"session_id": {"type": "string"}}}
        )
    with pytest.raises(prism.PrismConfigError, match="must describe an object"):
        served_agent(agent, input={"type": "string"})
    plain = prism.ToolDefinition(name="plain", execute=lambda args, ctx: "x")
    with pytest.raises(prism.PrismConfigError, match="not an agent tool"):
        served_agent(plain)
    with pytest.raises(prism.PrismConfigError, match="two served tools are named 'echo'"):
        create_mcp_server([agent, agent])
    clash = _echo_agent().as_tool(name="echo_result")
    with pytest.raises(prism.PrismConfigError, match="'echo_result'"):
        create_mcp_server([agent, clash])
    with pytest.raises(prism.PrismConfigError, match="at least one agent"):
        create_mcp_server([])
    with pytest.raises(prism.PrismConfigError, match="approval_wait_s"):
        create_mcp_server(agent, approval_wait_s=-1)


async def test_an_unknown_tool_is_a_protocol_error() -> None:
    from mcp.shared.exceptions import MCPError

    async with Client(_echo_agent().to_mcp_server(), mode="legacy") as client:
        with pytest.raises(MCPError, match="Unknown tool: nope"):
            await client.call_tool("nope", {})


async def test_a_run_denied_from_python_is_collected_as_denied() -> None:
    from .serve_agents import PAY, _desk

    store = MemoryCheckpointStore()
    agent = prism.create_agent(
        id="desk",
        model=MODEL,
        provider=Scripted(_desk),
        tools=[PAY],
        run_state=prism.RunStateOptions(store, "v1"),
    )
    async with Client(agent.to_mcp_server(name="desk"), mode="legacy") as client:
        waiting = await client.call_tool("desk", {"input": "rent"})
        run_id = (waiting.meta or {})["prism/run_id"]
        (pending,) = await prism.list_pending_decisions(store, run_id=run_id)
        await prism.resume_agent_run(agent, run_id, decision="deny")
        denied = await client.call_tool("desk_result", {"run_id": run_id})
    assert (waiting.meta or {})["prism/status"] == "waiting_for_approval"
    assert pending.tool_name == "pay"
    assert denied.is_error and _text(denied).startswith("ERR_PRISM_MCP_DENIED")


def test_importing_prism_and_creating_agents_does_not_load_the_sdk() -> None:
    code = (
        "import sys, prism\n"
        "prism.create_agent(name='a', model={'provider': 'p', 'model': 'm'})\n"
        "print(any(m == 'mcp' or m.startswith(('mcp.', 'prism.mcp')) for m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


class _Answer:
    """An elicitation callback answering ``action``; keeps the messages it was shown."""

    def __init__(self, action: str) -> None:
        self.action = action
        self.messages: list[str] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.messages.append(params.message)
        content = {"reason": "fine"} if self.action == "accept" else None
        return types.ElicitResult(action=self.action, content=content)


@pytest.mark.parametrize(
    ("action", "status"),
    [("accept", "succeeded"), ("decline", "succeeded"), ("cancel", "waiting_for_approval")],
)
async def test_on_the_2026_revision_approvals_are_asked_in_an_input_required_result(
    action: str, status: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .serve_agents import PAY, _desk

    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("MCP_SERVE_LEDGER", str(ledger))
    store = MemoryCheckpointStore()
    agent = prism.create_agent(
        id="desk",
        model=MODEL,
        provider=Scripted(_desk),
        tools=[PAY],
        run_state=prism.RunStateOptions(store, "v1"),
    )
    answer = _Answer(action)
    # mode "auto" in process: the sessionless 2026 revision, without requests from the server
    async with Client(agent.to_mcp_server(name="desk"), elicitation_callback=answer) as client:
        result = await client.call_tool("desk", {"input": "rent"})
        forged = await client.session.call_tool(
            "desk", {"input": "rent"}, request_state="run_x|session_y||0000", input_responses={}
        )
    assert (result.meta or {})["prism/status"] == status
    assert len(answer.messages) == 1 and "the tool pay" in answer.messages[0]
    if action == "accept":
        assert _text(result) == "paid" and len(ledger.read_text().splitlines()) == 1
    elif action == "decline":
        assert _text(result) == "refused" and not ledger.exists()
    assert isinstance(forged, types.CallToolResult) and forged.is_error
    assert _text(forged).startswith("ERR_PRISM_MCP_REFUSED: this call's request_state")
