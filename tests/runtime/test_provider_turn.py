"""One provider attempt inside a run: folding, deltas, buffering, guardrails (RUN-15, RUN-16, CON-18,
PROV-5, GRD-5, GRD-6, EVT-10)."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_support import echo_tool, make_session, run_collect, types_of

from prism.errors import AgentRunError, AgentRunLimitError
from prism.guardrails import Guardrail, GuardrailDecision, Guardrails
from prism.providers.base import (
    provider_content_delta,
    provider_done,
    provider_message_start,
    provider_text_delta,
    provider_thinking_delta,
    provider_tool_call,
    provider_tool_call_delta,
    provider_usage,
)
from prism.types import (
    ErrorInfo,
    ImageContent,
    ProviderErrorEvent,
    RunResult,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolCallDeltaContent,
    Usage,
    canonical_json,
)

TEXT = [provider_text_delta("done"), provider_done()]


async def test_adjacent_text_and_thinking_deltas_are_coalesced_con_18() -> None:
    image = ImageContent(mime_type="image/png", data="AAAA")
    session, _ = make_session([[
        provider_thinking_delta("think "),
        provider_thinking_delta("more", signature="sig1"),
        provider_thinking_delta("again"),
        provider_content_delta(ThinkingContent(text="", redacted_data="opaque")),
        provider_text_delta("Hel"),
        provider_text_delta("lo"),
        provider_content_delta(image),
        provider_text_delta("!"),
        provider_done(),
    ]])
    result = await session.run("x")
    assert result.message is not None
    assert result.message.content == (
        ThinkingContent(text="think more", signature="sig1"),
        ThinkingContent(text="again"),
        ThinkingContent(text="", redacted_data="opaque"),
        TextContent("Hello"),
        image,
        TextContent("!"),
    )
    assert result.text == "Hello!"


async def test_streamed_tool_call_fragments_are_rebuilt_after_the_stream_prov_5_run_15() -> None:
    session, provider = make_session(
        [[
            provider_text_delta("let me look"),
            provider_tool_call_delta(0, id="c1", name="lookup", arguments_text='{"q": '),
            provider_tool_call_delta(0, arguments_text='"x"}'),
            provider_done(),
        ], TEXT],
        tools=[echo_tool()],
    )
    result, events = await run_collect(session)
    assert isinstance(result, RunResult)
    assistant = result.messages[1]
    assert assistant.content == (
        TextContent("let me look"),
        ToolCallContent(id="c1", name="lookup", arguments={"q": "x"}),
    )
    deltas = [e.content for e in events if e.type == "message_delta"]
    assert isinstance(deltas[1], ToolCallDeltaContent) and deltas[1].index == 0
    assert deltas[-2] == ToolCallContent(id="c1", name="lookup", arguments={"q": "x"})
    assert provider.call_count == 2


async def test_a_final_tool_call_wins_over_its_fragments_prov_5() -> None:
    session, _ = make_session(
        [[
            provider_tool_call_delta(0, id="c1", name="lookup", arguments_text='{"q": "frag"}'),
            provider_tool_call("c1", "lookup", {"q": "final"}),
            provider_done(),
        ], TEXT],
        tools=[echo_tool()],
    )
    result = await session.run("x")
    calls = [p for p in result.messages[1].content if isinstance(p, ToolCallContent)]
    assert calls == [ToolCallContent(id="c1", name="lookup", arguments={"q": "final"})]


async def test_an_incomplete_fragment_fails_the_attempt_observably_run_15() -> None:
    session, provider = make_session(
        [[provider_tool_call_delta(0, arguments_text="{}"), provider_done()], TEXT]
    )
    result, _ = await run_collect(session)
    assert isinstance(result, AgentRunError)
    assert result.result.error is not None and result.result.error.code == "incomplete_delta"
    assert provider.call_count == 1  # observable: not retried


async def test_usage_done_wins_over_earlier_usage_events_con_18() -> None:
    session, _ = make_session([[
        provider_usage(Usage(input_tokens=1)),
        provider_usage(Usage(input_tokens=2)),
        provider_text_delta("x"),
        provider_done(Usage(input_tokens=3, output_tokens=1), stop_reason="end_turn"),
    ]])
    result, events = await run_collect(session)
    assert isinstance(result, RunResult)
    assert result.usage == Usage(input_tokens=3, output_tokens=1, total_tokens=4)
    finished = [e for e in events if e.type == "provider_turn_finished"][0]
    assert finished.usage == Usage(input_tokens=3, output_tokens=1)


async def test_a_stream_without_output_appends_nothing_con_18() -> None:
    session, _ = make_session([[provider_done()]])
    result, events = await run_collect(session)
    assert isinstance(result, RunResult)
    assert [m.role for m in result.messages] == ["user"]
    assert "message_started" not in types_of(events) and "message_finished" not in types_of(events)


async def test_events_after_done_are_not_read_run_15() -> None:
    session, _ = make_session([[provider_text_delta("a"), provider_done(), provider_text_delta("ignored")]])
    result = await session.run("x")
    assert result.text == "a"


async def test_message_started_is_emitted_at_most_once_per_attempt_evt_10() -> None:
    session, _ = make_session([[provider_text_delta("a"), provider_message_start("late"), provider_text_delta("b"), provider_done()]])
    result, events = await run_collect(session)
    assert types_of(events).count("message_started") == 1
    assert isinstance(result, RunResult) and result.message is not None and result.message.id is None


def allow_all(ctx: Any) -> GuardrailDecision:
    return GuardrailDecision(action="allow")


async def test_output_guardrails_buffer_message_events_until_they_pass_run_16_evt_10() -> None:
    guard = Guardrail(name="ok", stage="output", evaluate=allow_all)
    session, _ = make_session([[provider_text_delta("a"), provider_text_delta("b"), provider_done()]], guardrails=Guardrails(output=(guard,)))
    result, events = await run_collect(session)
    assert isinstance(result, RunResult)
    kinds = types_of(events)
    assert kinds[kinds.index("provider_turn_started") :][:6] == [
        "provider_turn_started",
        "guardrail_decision",
        "message_started",
        "message_delta",
        "message_delta",
        "provider_turn_finished",
    ]


async def test_an_output_guardrail_block_fails_the_run_and_discards_the_draft_grd_5() -> None:
    guard = Guardrail(name="no", stage="output", evaluate=lambda ctx: GuardrailDecision(action="block", reason="bad"))
    session, provider = make_session([[provider_text_delta("secret plan"), provider_done()], TEXT], guardrails=Guardrails(output=(guard,)))
    result, events = await run_collect(session)
    assert isinstance(result, AgentRunError)
    assert result.result.error is not None and result.result.error.code == "ERR_PRISM_GUARDRAIL_BLOCKED"
    kinds = types_of(events)
    assert "message_started" not in kinds and "message_delta" not in kinds
    assert [m.role for m in result.result.messages] == ["user"]
    assert provider.call_count == 1  # guardrail errors are never retried


async def test_output_guardrails_see_the_completed_turn_result_grd_2() -> None:
    seen: list[Any] = []

    def look(ctx: Any) -> GuardrailDecision:
        seen.append(ctx.value)
        return GuardrailDecision(action="allow")

    session, _ = make_session([[provider_text_delta("hi"), provider_done()]], guardrails={"output": [Guardrail(name="look", stage="output", evaluate=look)]})
    await session.run("x")
    assert seen[0].content == (TextContent("hi"),) and seen[0].started


async def test_finite_output_budgets_turn_buffering_on_run_16() -> None:
    session, _ = make_session([[provider_text_delta("x"), provider_done()]], limits={"max_total_tokens": 1000})
    _, buffered = await run_collect(session)
    kinds = types_of(buffered)
    assert kinds.index("message_delta") < kinds.index("provider_turn_finished")
    session, _ = make_session([[provider_text_delta("x"), provider_done(Usage(output_tokens=5000))]], limits={"max_total_tokens": 1000})
    result, events = await run_collect(session)
    assert isinstance(result, AgentRunError)
    assert "message_delta" not in types_of(events)


@pytest.mark.parametrize(
    "event",
    [
        provider_text_delta("héllo \"q\" \n ✓"),
        provider_text_delta(""),
        provider_done(),
        provider_done(Usage(input_tokens=3), stop_reason="end_turn"),
        provider_tool_call("c", "t", {"b": [1, 2.5, None], "a": "ü"}),
        provider_thinking_delta("t", signature="s"),
        provider_tool_call_delta(1, id="x", arguments_text="{"),
        provider_message_start("m"),
        provider_usage(Usage(output_tokens=2, cost=0.5, currency="USD")),
        ProviderErrorEvent(error=ErrorInfo(message="boom", code=500)),
    ],
)
async def test_each_event_is_charged_its_canonical_size_run_15(event: Any) -> None:
    session, _ = make_session([[event, provider_done()]], limits={"max_response_bytes": 1})
    result, _ = await run_collect(session)
    assert isinstance(result, AgentRunLimitError)
    assert result.breach is not None and result.breach.limit == "max_response_bytes"
    assert result.breach.observed == len(canonical_json(event.to_dict()).encode())


class _RawProvider:
    """Yields raw stream items (not necessarily provider events) for each call in turn."""

    id = "raw"

    def __init__(self, *turns: list[Any]) -> None:
        self.turns = list(turns)
        self.call_count = 0

    async def generate(self, request: Any) -> Any:
        items = self.turns[min(self.call_count, len(self.turns) - 1)]
        self.call_count += 1
        for item in items:
            yield item


@pytest.mark.parametrize(
    ("item", "type_name"), [({"type": "done"}, "dict"), ("hello", "str"), (None, "NoneType")]
)
async def test_a_stream_item_that_is_not_a_provider_event_fails_the_attempt_run_15(
    item: Any, type_name: str
) -> None:
    """RUN-15 step 4: a non-event item is a provider bug — coded, named, not retried."""
    provider = _RawProvider([provider_text_delta("partial"), item, provider_done()], TEXT)
    session, _ = make_session(provider=provider, retry={"max_attempts": 3})
    result, events = await run_collect(session)
    assert isinstance(result, AgentRunError)
    error = result.result.error
    assert error is not None and error.code == "invalid_stream_chunk"
    assert type_name in error.message
    assert provider.call_count == 1
    finished = [e for e in events if e.type == "provider_turn_finished"]
    assert finished[-1].error is not None and finished[-1].error.code == "invalid_stream_chunk"


async def test_an_invalid_first_item_is_not_retried_either_run_15() -> None:
    """RUN-15 step 4: even before the message started, an invalid chunk is not retried."""
    provider = _RawProvider([{"text": "hi"}], TEXT)
    session, _ = make_session(provider=provider, retry={"max_attempts": 3})
    result, _ = await run_collect(session)
    assert isinstance(result, AgentRunError)
    assert result.result.error is not None and result.result.error.code == "invalid_stream_chunk"
    assert provider.call_count == 1


async def test_exhaustion_without_done_and_items_after_done_still_work_run_15() -> None:
    """RUN-15: exhaustion ends the stream; nothing after ``done`` is read (not even junk)."""
    session, _ = make_session(provider=_RawProvider([provider_text_delta("a")]))
    assert (await session.run("x")).text == "a"
    session, _ = make_session(provider=_RawProvider([provider_text_delta("b"), provider_done(), "junk"]))
    assert (await session.run("x")).text == "b"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1, 2}])
async def test_non_json_tool_arguments_become_an_arguments_error_prov_6(bad: Any) -> None:
    """PROV-6: non-JSON values inside a provider's argument dict are treated like malformed
    argument text — the call is blocked with a tool error and the run goes on."""
    call = ToolCallContent(id="c1", name="lookup", arguments={"x": bad})
    session, provider = make_session(
        [[provider_tool_call(call), provider_done()], TEXT], tools=[echo_tool()]
    )
    result, events = await run_collect(session)
    assert isinstance(result, RunResult), result
    assert result.text == "done"
    stored = [p for p in result.messages[1].content if isinstance(p, ToolCallContent)]
    assert stored[0].arguments == {}
    assert stored[0].arguments_error is not None
    assert stored[0].arguments_error.code == "invalid_json_arguments"
    assert stored[0].arguments_error.name == "ProviderTransportError"
    answer = result.messages[2].content[0]
    assert answer.error is not None  # type: ignore[union-attr]
    assert provider.call_count == 2


SECRET = "sk-live-0123456789abcdef"


@pytest.mark.parametrize(
    ("prefix_len", "whole"),
    [(10, True), (503, False)],  # the secret inside the excerpt / cut by the 512-byte cap
)
async def test_invalid_streamed_arguments_show_the_redacted_text_to_the_model_prov_6(
    prefix_len: int, whole: bool
) -> None:
    """PROV-6: the tool error the model gets quotes the malformed argument text — redacted, at
    most 512 bytes, and never a piece of a secret the cap cut in two."""
    from prism.redaction import create_secret_redactor

    text = '{"q": "' + "x" * (prefix_len - 7) + SECRET + '", "n": tru'
    assert text.index(SECRET) == prefix_len
    session, provider = make_session(
        [[
            provider_tool_call_delta(0, id="c1", name="lookup", arguments_text=text[:300]),
            provider_tool_call_delta(0, arguments_text=text[300:]),
            provider_done(),
        ], TEXT],
        tools=[echo_tool()],
        redactor=create_secret_redactor([SECRET]),
    )
    result, events = await run_collect(session)
    assert isinstance(result, RunResult), result
    answer = result.messages[2].content[0]
    error = answer.error  # type: ignore[union-attr]
    assert error is not None and error.code == "invalid_json_arguments"
    assert "Expecting value" in error.message and '{"q": "xxx' in error.message
    if whole:
        assert error.message.endswith('[REDACTED]", "n": tru')
    else:
        assert "(first 512 of" in error.message
        assert error.message.endswith("x")  # the cut piece of the secret is gone
    request = provider.requests[1]
    sent = canonical_json(request.to_dict())
    for n in range(4, len(SECRET) + 1):
        piece = SECRET[:n]
        assert piece not in sent
        assert piece not in canonical_json([e.to_dict() for e in events])
        assert piece not in canonical_json([m.to_dict() for m in result.messages])
