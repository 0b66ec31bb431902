"""The tool-round policy ``answer_after_tool_rounds``: tools for the first N rounds of a run, then
the model must answer in text; a provider-declared default that explicit options override; and
``stop_reason="tool_round_limit"`` when the rounds ran out without a text answer."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from runtime_support import MODEL, echo_tool, make_session

import prism
from prism.errors import PrismConfigError
from prism.providers import ProviderDefaults
from prism.providers._anthropic_wire import build_body
from prism.providers._openai_wire import build_request_body
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.llama_cpp._wire import completion_kwargs
from prism.providers.mock import MockProvider, create_mock_provider
from prism.types import (
    Message,
    ModelConfig,
    ProviderEvent,
    ProviderRequest,
    ProviderRequestOptions,
    TextContent,
    ToolCallContent,
    ToolResultContent,
)

CALL = [provider_tool_call("c1", "lookup", {"q": 1}), provider_done(None, "tool_use")]
CALL2 = [provider_tool_call("c2", "lookup", {"q": 2}), provider_done(None, "tool_use")]
ANSWER = [provider_text_delta("the answer"), provider_done(None, "end_turn")]


def choices(provider: MockProvider) -> list[str | None]:
    return [r.options.tool_choice if r.options else None for r in provider.requests]


class SmallModelProvider:
    """A scripted provider that declares a tool-round default, as the embedded one does."""

    def __init__(self, turns: list[list[Any]], rounds: int | None = 1) -> None:
        self.inner = create_mock_provider(turns=turns)
        self.id = "small"
        self.defaults = ProviderDefaults(
            model=ModelConfig(provider="small", model="m"), answer_after_tool_rounds=rounds
        )

    def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        return self.inner.generate(request)


async def test_after_n_rounds_requests_carry_tool_choice_none() -> None:
    session, provider = make_session([CALL, ANSWER], tools=[echo_tool()], answer_after_tool_rounds=1)
    result = await session.run("q")
    assert choices(provider) == [None, "none"]
    assert (result.text, result.stop_reason, result.provider_stop_reason) == (
        "the answer", None, "end_turn"
    )


async def test_the_providers_default_applies_and_explicit_options_override_it() -> None:
    provider = SmallModelProvider([CALL, ANSWER])
    agent = prism.create_agent(provider=provider, tools=[echo_tool()])
    await agent.create_session().run("q")
    assert choices(provider.inner) == [None, "none"]
    # the agent's False never forces the answer
    provider = SmallModelProvider([CALL, CALL2, ANSWER])
    agent = prism.create_agent(provider=provider, tools=[echo_tool()], answer_after_tool_rounds=False)
    result = await agent.create_session().run("q")
    assert choices(provider.inner) == [None, None, None] and result.text == "the answer"
    # the run's value wins over the agent's
    provider = SmallModelProvider([CALL, CALL2, ANSWER])
    agent = prism.create_agent(provider=provider, tools=[echo_tool()], answer_after_tool_rounds=False)
    await agent.create_session().run("q", answer_after_tool_rounds=2)
    assert choices(provider.inner) == [None, None, "none"]


async def test_zero_rounds_offers_the_tools_but_forbids_calling_them() -> None:
    session, provider = make_session([ANSWER], tools=[echo_tool()], answer_after_tool_rounds=0)
    await session.run("q")
    assert choices(provider) == ["none"]


async def test_calls_beyond_the_allowed_rounds_are_not_dispatched_and_stop_the_run() -> None:
    # the model ignores tool_choice="none" and calls again
    session, provider = make_session([CALL, CALL2, ANSWER], tools=[echo_tool()],
                                     answer_after_tool_rounds=1)
    result = await session.run("q")
    assert provider.call_count == 2
    assert (result.status, result.stop_reason, result.provider_stop_reason) == (
        "succeeded", "tool_round_limit", "tool_use"
    )
    rows = [p for m in result.messages if m.role == "tool" for p in m.content]
    assert [r.error.code if isinstance(r, ToolResultContent) and r.error else None
            for r in rows] == [None, "tool_call_not_dispatched"]


async def test_an_empty_forced_answer_is_a_tool_round_limit_not_an_empty_success() -> None:
    session, _ = make_session([CALL, [provider_done(None, "end_turn")]], tools=[echo_tool()],
                              answer_after_tool_rounds=1)
    result = await session.run("q")
    assert (result.status, result.text, result.stop_reason) == ("succeeded", "", "tool_round_limit")


async def test_a_text_answer_without_tool_rounds_is_a_plain_success() -> None:
    session, _ = make_session([[provider_done(None, "end_turn")]], tools=[echo_tool()],
                              answer_after_tool_rounds=1)
    result = await session.run("q")
    assert result.stop_reason is None


@pytest.mark.parametrize("bad", [-1, True, "1", 1.0])
async def test_invalid_values_are_config_errors(bad: Any) -> None:
    with pytest.raises(PrismConfigError, match="answer_after_tool_rounds must be"):
        prism.create_agent(model=MODEL, answer_after_tool_rounds=bad)
    session, provider = make_session([ANSWER])
    with pytest.raises(PrismConfigError, match="answer_after_tool_rounds must be"):
        await session.run("q", answer_after_tool_rounds=bad)
    assert provider.call_count == 0


def test_every_wire_maps_tool_choice() -> None:
    request = ProviderRequest(
        model=ModelConfig(provider="p", model="m"),
        messages=(Message("user", (TextContent("hi"),)),),
        tools=(echo_tool(),),
        options=ProviderRequestOptions(tool_choice="none"),
    )
    assert build_request_body(request)["tool_choice"] == "none"
    assert build_body(request)["tool_choice"] == {"type": "none"}
    kwargs, _ = completion_kwargs(request, chat_format="chatml", default_max_tokens=16)
    assert kwargs["tool_choice"] == "none"
    required = ProviderRequest(
        model=request.model, messages=request.messages, tools=request.tools,
        options=ProviderRequestOptions(tool_choice="required"),
    )
    assert build_body(required)["tool_choice"] == {"type": "any"}
    no_tools = ProviderRequest(model=request.model, messages=request.messages,
                               options=request.options)
    assert "tool_choice" not in build_request_body(no_tools)
    assert "tool_choice" not in build_body(no_tools)


def test_the_embedded_models_answer_turn_shows_no_call_syntax() -> None:
    """With ``chatml-function-calling``, a turn that may not call tools (the answer after the
    tool rounds) is sent without the tools and without the earlier calls: that template would
    show them as ``functions.NAME:`` text, which a small model copies as its answer. The results
    stay, as user text."""
    call = ToolCallContent(id="c1", name="lookup", arguments={"q": 1})
    result = ToolResultContent(tool_call_id="c1", name="lookup", result={"found": 7})
    messages = (
        Message("user", (TextContent("how many?"),)),
        Message("assistant", (call,)),
        Message("tool", (result,)),
    )
    model = ModelConfig(provider="p", model="m")
    answer_turn = ProviderRequest(
        model=model, messages=messages, tools=(echo_tool(),),
        options=ProviderRequestOptions(tool_choice="none"),
    )
    kwargs, _ = completion_kwargs(
        answer_turn, chat_format="chatml-function-calling", default_max_tokens=16
    )
    assert "tools" not in kwargs and "tool_choice" not in kwargs
    sent = kwargs["messages"]
    assert not any(m.get("tool_calls") for m in sent)
    assert "functions." not in json.dumps(sent)
    assert sent[-1]["role"] == "user" and "Result of lookup" in sent[-1]["content"]
    assert sent[0]["role"] == "system"  # the default system prompt of a request with tools
    tool_turn = ProviderRequest(model=model, messages=messages, tools=(echo_tool(),))
    kwargs, _ = completion_kwargs(
        tool_turn, chat_format="chatml-function-calling", default_max_tokens=16
    )
    assert kwargs["tools"] and any(m.get("tool_calls") for m in kwargs["messages"])
