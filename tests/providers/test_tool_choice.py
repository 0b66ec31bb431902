"""The public ``tool_choice`` option (issue 21, item 17): ``create_agent(tool_choice=...)`` and
``run(tool_choice=...)``, mapped by each adapter to its own wire form, and the tool calls of a
result (``RunResult.tool_calls``).

The OpenAI-compatible and Anthropic providers talk to a scripted HTTP server
(``httpx.MockTransport``; nothing reaches the network) and the test reads the request bodies they
sent; the in-process llama.cpp provider gets a stand-in model that records its arguments.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import prism
from prism.providers.llama_cpp import create_local_provider
from prism.providers.openai import create_openai_compatible_provider
from prism.types import ModelConfig, ToolCallContent, ToolDefinition, ToolResultContent

# --------------------------------------------------------------------------- tools


def _tool(name: str = "add") -> ToolDefinition:
    def execute(arguments: dict[str, Any], context: Any) -> int:
        return int(arguments.get("a", 0)) + int(arguments.get("b", 0))

    return ToolDefinition(
        name=name,
        execute=execute,
        description="Add two integers",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    )


CALL_ARGS = '{"a": 2, "b": 3}'


# --------------------------------------------------------------------------- OpenAI wire


class ChatServer:
    """A Chat Completions server: answers each request from ``script`` (``"call"``: a streamed
    call of ``add``; ``"text"``: a streamed text answer) and keeps the request bodies."""

    def __init__(self, *script: str) -> None:
        self.script = list(script)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        kind = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if kind == "call":
            call = {
                "index": 0,
                "id": f"call_{len(self.bodies)}",
                "type": "function",
                "function": {"name": "add", "arguments": CALL_ARGS},
            }
            chunks = [
                {"role": "assistant", "content": None, "tool_calls": [call]},
            ]
            finish = "tool_calls"
        else:
            chunks = [{"role": "assistant", "content": "Five."}]
            finish = "stop"
        events = [_chat_chunk(delta, None) for delta in chunks] + [_chat_chunk({}, finish)]
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def _chat_chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _openai(server: ChatServer) -> Any:
    return create_openai_compatible_provider(
        base_url="http://llm.test/v1",
        auth_style="none",
        model="m",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(server)),
    )


# --------------------------------------------------------------------------- Anthropic wire

anthropic = pytest.importorskip("anthropic")
_HTTP: Any = importlib.import_module(
    next(
        c.__module__
        for c in anthropic.DefaultAsyncHttpxClient.__mro__
        if c.__name__ == "AsyncClient"
    ).partition(".")[0]
)


class MessagesServer:
    """A Messages API server answering each request with a text reply; keeps the bodies."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        self.bodies.append(json.loads(request.content))
        events: list[dict[str, Any]] = [
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-test",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Five."}},
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 2},
            },
            {"type": "message_stop"},
        ]
        body = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
        return _HTTP.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def _anthropic(server: MessagesServer) -> Any:
    from prism.providers.anthropic import create_anthropic_provider

    return create_anthropic_provider(
        api_key="sk-ant-test-0123456789",
        http_client=_HTTP.AsyncClient(transport=_HTTP.MockTransport(server)),
    )


ANTHROPIC_MODEL = ModelConfig(provider="anthropic", model="claude-test")


# --------------------------------------------------------------------------- llama.cpp in-process


class RecordingLlama:
    """Stands in for ``llama_cpp.Llama``: records each call, answers with a streamed text."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def create_chat_completion(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.calls.append(kwargs)
        for delta, finish in (({"role": "assistant"}, None), ({"content": "Five."}, None), ({}, "stop")):
            yield {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "local",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }


# --------------------------------------------------------------------------- mapping per adapter

NAMED = {"name": "add"}


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (NAMED, {"type": "function", "function": {"name": "add"}}),
    ],
)
async def test_openai_wire_gets_each_tool_choice_i21_17(choice: Any, wire: Any) -> None:
    """OpenAI and OpenAI-compatible servers: the Chat Completions ``tool_choice`` forms."""
    server = ChatServer("text")
    agent = prism.create_agent(provider=_openai(server), tools=[_tool()], tool_choice=choice)
    result = await agent.create_session().run("What is 2 plus 3?")
    assert result.status == "succeeded", result.error
    assert server.bodies[0]["tool_choice"] == wire


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        (NAMED, {"type": "tool", "name": "add"}),
    ],
)
async def test_anthropic_wire_gets_each_tool_choice_i21_17(choice: Any, wire: Any) -> None:
    """Anthropic Messages: ``auto``/``none``/``any``/``tool`` (the installed SDK has
    ``ToolChoiceNoneParam``, so ``"none"`` is sent as such, with the tools)."""
    assert hasattr(anthropic.types, "ToolChoiceNoneParam")
    server = MessagesServer()
    agent = prism.create_agent(
        provider=_anthropic(server), model=ANTHROPIC_MODEL, tools=[_tool()], tool_choice=choice
    )
    result = await agent.create_session().run("What is 2 plus 3?")
    assert result.status == "succeeded", result.error
    assert server.bodies[0]["tool_choice"] == wire
    assert [tool["name"] for tool in server.bodies[0]["tools"]] == ["add"]


@pytest.mark.parametrize(
    ("choice", "tools", "wire"),
    [
        ("auto", ["add"], "auto"),
        ("none", ["add"], None),  # the turn is sent without tools (and without earlier calls)
        ("required", ["add"], {"type": "function", "function": {"name": "add"}}),
        ("required", ["add", "sub"], "required"),  # prism's chat handler makes the model pick
        (NAMED, ["add", "sub"], {"type": "function", "function": {"name": "add"}}),
    ],
)
async def test_local_provider_gets_each_tool_choice_i21_17(
    choice: Any, tools: list[str], wire: Any
) -> None:
    """The in-process llama.cpp provider: the ``create_chat_completion`` forms."""
    llama = RecordingLlama()
    agent = prism.create_agent(
        provider=create_local_provider(llama=llama),
        tools=[_tool(name) for name in tools],
        tool_choice=choice,
    )
    result = await agent.create_session().run("What is 2 plus 3?")
    assert result.status == "succeeded", result.error
    sent = llama.calls[0]
    assert sent.get("tool_choice") == wire
    assert ("tools" in sent) == (wire is not None)


# --------------------------------------------------------------------------- run semantics


async def test_a_run_tool_choice_wins_over_the_agents_i21_17() -> None:
    server = ChatServer("text")
    agent = prism.create_agent(provider=_openai(server), tools=[_tool()], tool_choice="none")
    session = agent.create_session()
    await session.run("What is 2 plus 3?")
    await session.run("And 4 plus 5?", tool_choice=NAMED)
    assert server.bodies[0]["tool_choice"] == "none"
    assert server.bodies[1]["tool_choice"] == {"type": "function", "function": {"name": "add"}}


async def test_a_forced_choice_applies_until_the_first_tool_round_i21_17() -> None:
    """A named (or required) choice forces the first call; the request after the tool round is
    the provider's default, so the model can answer with the result."""
    server = ChatServer("call", "text")
    agent = prism.create_agent(
        provider=_openai(server), tools=[_tool()], answer_after_tool_rounds=False
    )
    result = await agent.create_session().run("What is 2 plus 3?", tool_choice=NAMED)
    assert result.status == "succeeded", result.error
    assert server.bodies[0]["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert "tool_choice" not in server.bodies[1]
    assert result.text == "Five."


@pytest.mark.parametrize("choice", ["auto", "required", NAMED])
async def test_the_forced_answer_of_answer_after_tool_rounds_wins_i21_17(choice: Any) -> None:
    server = ChatServer("call", "text")
    agent = prism.create_agent(
        provider=_openai(server), tools=[_tool()], tool_choice=choice, answer_after_tool_rounds=1
    )
    result = await agent.create_session().run("What is 2 plus 3?")
    assert result.status == "succeeded", result.error
    assert server.bodies[1]["tool_choice"] == "none"


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("always", "'always'"),
        ({"type": "function", "function": {"name": "add"}}, "'function'"),
        ({"name": ""}, "{'name': ''}"),
        (3, "3"),
    ],
)
def test_a_bad_tool_choice_is_a_config_error_naming_it_i21_17(value: Any, named: str) -> None:
    with pytest.raises(prism.PrismConfigError) as caught:
        prism.create_agent(provider=_openai(ChatServer("text")), tools=[_tool()], tool_choice=value)
    assert caught.value.code == "ERR_PRISM_CONFIG"
    assert "tool_choice" in str(caught.value) and named in str(caught.value)


async def test_an_unknown_tool_name_is_a_config_error_before_any_request_i21_17() -> None:
    server = ChatServer("text")
    with pytest.raises(prism.PrismConfigError, match="'nope'.*known: add"):
        prism.create_agent(provider=_openai(server), tools=[_tool()], tool_choice={"name": "nope"})
    agent = prism.create_agent(provider=_openai(server), tools=[_tool()])
    with pytest.raises(prism.PrismConfigError, match="'nope'.*known: add"):
        await agent.create_session().run("hi", tool_choice={"name": "nope"})
    assert server.bodies == []


# --------------------------------------------------------------------------- reading tool calls


async def test_a_results_tool_calls_and_results_i21_17() -> None:
    server = ChatServer("call", "text")
    agent = prism.create_agent(provider=_openai(server), tools=[_tool()], tool_choice=NAMED)
    result = await agent.create_session().run("What is 2 plus 3?")
    (call,) = result.tool_calls
    assert isinstance(call, ToolCallContent)
    assert (call.name, call.arguments) == ("add", {"a": 2, "b": 3})
    (row,) = result.tool_results
    assert isinstance(row, ToolResultContent)
    assert row.tool_call_id == call.id and row.result == 5

