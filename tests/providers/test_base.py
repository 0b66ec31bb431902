"""Provider protocol helpers: constructors, delta reconstruction, argument parsing, folding."""

from __future__ import annotations

import email.utils
import json
from collections.abc import AsyncIterator

import pytest

from prism.errors import ProviderTransportError, ProviderTurnError
from prism.providers.base import (
    EMPTY_TOOL_RESULT_TEXT,
    MAX_TOOL_ARGUMENTS_BYTES,
    AIProvider,
    fold_provider_events,
    provider_content_delta,
    provider_done,
    provider_error,
    provider_message_start,
    provider_text_delta,
    provider_thinking_delta,
    provider_tool_call,
    provider_tool_call_delta,
    provider_usage,
    reconstruct_tool_call_deltas,
    tool_call_content,
    tool_call_from_arguments_text,
)
from prism.providers.mock import create_mock_provider
from prism.providers.wire import retry_after_ms, tool_result_payload_text
from prism.types import (
    ErrorInfo,
    ImageContent,
    Message,
    ProviderContentDelta,
    ProviderDone,
    ProviderErrorEvent,
    ProviderEvent,
    ProviderMessageStart,
    ProviderRequest,
    ProviderToolCallDelta,
    ProviderUsage,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
    Usage,
)

# --------------------------------------------------------------------------- PROV-7 constructors


def test_helper_constructors_build_the_provider_events_of_con17() -> None:
    """PROV-7: every helper returns the matching event with its fields."""
    assert provider_message_start() == ProviderMessageStart(message_id=None)
    assert provider_message_start("msg_1").message_id == "msg_1"
    assert provider_text_delta("hi") == ProviderContentDelta(content=TextContent(text="hi"))
    assert provider_thinking_delta("hm", signature="sig") == ProviderContentDelta(
        content=ThinkingContent(text="hm", signature="sig")
    )
    image = ImageContent(mime_type="image/png", data="AAAA")
    assert provider_content_delta(image).content is image
    assert provider_tool_call_delta(2, id="c", name="f", arguments_text="{") == (
        ProviderToolCallDelta(index=2, id="c", name="f", arguments_text="{", authority=None)
    )
    usage = Usage(input_tokens=1)
    assert provider_usage(usage) == ProviderUsage(usage=usage)
    assert provider_done() == ProviderDone(usage=None, stop_reason=None)
    assert provider_done(usage, "tool_use") == ProviderDone(usage=usage, stop_reason="tool_use")
    assert tool_call_content("c1", "f") == ToolCallContent(id="c1", name="f", arguments={})


def test_provider_tool_call_accepts_a_call_dict_arguments_or_raw_json() -> None:
    """PROV-7: a ToolCallContent, id/name/dict, or id/name/str (through PROV-6)."""
    call = ToolCallContent(id="c1", name="f", arguments={"a": 1})
    assert provider_tool_call(call).call is call
    assert provider_tool_call("c2", "g", {"q": "x"}).call == ToolCallContent(
        id="c2", name="g", arguments={"q": "x"}
    )
    assert provider_tool_call("c3", "h").call.arguments == {}
    assert provider_tool_call("c4", "h", '{"n": 2}').call.arguments == {"n": 2}
    bad = provider_tool_call("c5", "h", "{not json").call
    assert bad.arguments == {}
    assert bad.arguments_error is not None
    assert bad.arguments_error.code == "invalid_json_arguments"


def test_provider_tool_call_requires_a_name_with_an_id() -> None:
    """PROV-7: an id without a name is a caller mistake."""
    with pytest.raises(TypeError):
        provider_tool_call("c1")
    with pytest.raises(TypeError):
        provider_tool_call(ToolCallContent(id="c", name="f", arguments={}), name="g")


def test_provider_error_converts_exceptions_and_redacts_secrets() -> None:
    """PROV-7, PROV-3: exceptions go through error_to_error_info; secrets become [REDACTED]."""
    event = provider_error(ProviderTransportError("incomplete_delta", "bad sk-123"), ["sk-123"])
    assert isinstance(event, ProviderErrorEvent)
    assert event.error.code == "incomplete_delta"
    assert event.error.name == "ProviderTransportError"
    assert "sk-123" not in event.error.message
    assert "[REDACTED]" in event.error.message
    info = ErrorInfo(message="key sk-9 leaked", code=401, cause="sk-9")
    redacted = provider_error(info, secrets=("sk-9",)).error
    assert redacted == ErrorInfo(message="key [REDACTED] leaked", code=401, cause="[REDACTED]")
    assert provider_error(info).error is info


# --------------------------------------------------------------------------- PROV-6


def test_blank_arguments_text_gives_an_empty_object() -> None:
    """PROV-6: blank text (and None, as streamed by some servers) means {}."""
    for text in ("", "   ", "\n", None):
        call = tool_call_from_arguments_text("c", "f", text)
        assert call == ToolCallContent(id="c", name="f", arguments={})


def test_valid_object_arguments_are_parsed() -> None:
    """PROV-6: a JSON object becomes the arguments."""
    call = tool_call_from_arguments_text("c", "f", '{"city": "Paris", "n": [1, 2]}')
    assert call.arguments == {"city": "Paris", "n": [1, 2]}
    assert call.arguments_error is None


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("{bad", "Expecting property name"),
        ("[1, 2]", "expected a JSON object, got array"),
        ('"x"', "expected a JSON object, got string"),
        ("3", "expected a JSON object, got number"),
        ("null", "expected a JSON object, got null"),
        ('{"x": NaN}', "non-finite"),
    ],
)
def test_invalid_arguments_never_raise_and_carry_arguments_error(text: str, detail: str) -> None:
    """PROV-6: invalid JSON / non-object -> arguments {} plus invalid_json_arguments."""
    call = tool_call_from_arguments_text("c1", "lookup", text)
    assert call.arguments == {}
    error = call.arguments_error
    assert error is not None
    assert error.name == "ProviderTransportError"
    assert error.code == "invalid_json_arguments"
    assert error.message.startswith("Invalid JSON arguments for tool lookup: ")
    assert detail in error.message


def test_invalid_arguments_error_shows_the_text_the_model_sent() -> None:
    """PROV-6: the error quotes the argument text (the parser's position points into it), cut
    to its first 512 UTF-8 bytes on a character boundary, saying so."""
    call = tool_call_from_arguments_text("c1", "lookup", '{"q": tru')
    assert call.arguments_error is not None
    message = call.arguments_error.message
    assert message.startswith("Invalid JSON arguments for tool lookup: Expecting value")
    assert message.endswith('; arguments text: {"q": tru')
    long_text = '{"q": "' + "é" * 400 + '"'  # 808 bytes, unterminated object
    error = tool_call_from_arguments_text("c1", "lookup", long_text).arguments_error
    assert error is not None
    head, _, shown = error.message.partition(
        f"; arguments text (first 512 of {len(long_text.encode())} bytes): "
    )
    assert head.startswith("Invalid JSON arguments for tool lookup: ") and shown
    assert long_text.startswith(shown) and len(shown.encode()) in (511, 512)
    assert "arguments text: [1, 2]" in (
        tool_call_from_arguments_text("c", "f", "[1, 2]").arguments_error.message  # type: ignore[union-attr]
    )


def test_arguments_above_the_byte_limit_are_rejected_by_utf8_size() -> None:
    """PROV-6: more than 262 144 UTF-8 bytes -> invalid_json_arguments (measured in bytes)."""
    # 2-byte characters: fewer than the limit in characters, more in bytes.
    value = "é" * (MAX_TOOL_ARGUMENTS_BYTES // 2)
    text = json.dumps({"v": value}, ensure_ascii=False)
    assert len(text) < MAX_TOOL_ARGUMENTS_BYTES < len(text.encode("utf-8"))
    call = tool_call_from_arguments_text("c", "f", text)
    assert call.arguments == {}
    assert call.arguments_error is not None
    assert call.arguments_error.code == "invalid_json_arguments"
    small = tool_call_from_arguments_text("c", "f", json.dumps({"v": "é" * 10}))
    assert small.arguments == {"v": "é" * 10}


# --------------------------------------------------------------------------- PROV-5


def test_fragments_are_grouped_by_index_and_concatenated() -> None:
    """PROV-5: id/name take the last value; arguments_text is concatenated."""
    events: list[ProviderEvent] = [
        provider_tool_call_delta(0, id="a", name="f", arguments_text='{"x"'),
        provider_tool_call_delta(1, id="b", name="g"),
        provider_tool_call_delta(0, arguments_text=": 1}"),
        provider_tool_call_delta(1, arguments_text="{}"),
    ]
    assert reconstruct_tool_call_deltas(events) == [
        ToolCallContent(id="a", name="f", arguments={"x": 1}),
        ToolCallContent(id="b", name="g", arguments={}),
    ]


def test_groups_are_returned_in_ascending_index_order() -> None:
    """PROV-5: ascending index, whatever order the groups opened in."""
    events: list[ProviderEvent] = [
        provider_tool_call_delta(3, id="late", name="f"),
        provider_tool_call_delta(1, id="early", name="g"),
    ]
    assert [c.id for c in reconstruct_tool_call_deltas(events)] == ["early", "late"]


def test_parallel_calls_sharing_an_index_are_never_glued() -> None:
    """PROV-5: a different id at an index starts a new group there, kept in opening order."""
    events: list[ProviderEvent] = [
        provider_tool_call_delta(0, id="c1", name="read", arguments_text='{"p": '),
        provider_tool_call_delta(0, arguments_text='"a"}'),
        provider_tool_call_delta(0, id="c2", name="write", arguments_text='{"p": "b"}'),
        provider_tool_call_delta(0, id="c2", arguments_text=""),
    ]
    assert reconstruct_tool_call_deltas(events) == [
        ToolCallContent(id="c1", name="read", arguments={"p": "a"}),
        ToolCallContent(id="c2", name="write", arguments={"p": "b"}),
    ]


def test_a_group_without_an_id_adopts_the_first_id_it_receives() -> None:
    """PROV-5 with OAI-6: id-less fragments pair with a later id at their index."""
    events: list[ProviderEvent] = [
        provider_tool_call_delta(0, name="f", arguments_text='{"a": 1}'),
        provider_tool_call_delta(0, id="call_synth"),
    ]
    assert reconstruct_tool_call_deltas(events) == [
        ToolCallContent(id="call_synth", name="f", arguments={"a": 1})
    ]


def test_groups_whose_id_arrived_as_a_final_call_are_skipped() -> None:
    """PROV-5: only groups whose id did not also arrive as a final tool_call are returned."""
    events: list[ProviderEvent] = [
        provider_tool_call_delta(0, id="a", name="f", arguments_text="{}"),
        provider_tool_call_delta(1, id="b", name="g", arguments_text="{}"),
        provider_tool_call("a", "f", {"final": True}),
    ]
    assert [c.id for c in reconstruct_tool_call_deltas(events)] == ["b"]


@pytest.mark.parametrize(
    "delta",
    [
        provider_tool_call_delta(0, id="a", arguments_text="{}"),
        provider_tool_call_delta(0, name="f", arguments_text="{}"),
    ],
)
def test_a_group_without_id_or_name_raises_incomplete_delta(delta: ProviderEvent) -> None:
    """PROV-5: a group lacking id or name -> ProviderTransportError('incomplete_delta')."""
    with pytest.raises(ProviderTransportError) as info:
        reconstruct_tool_call_deltas([delta])
    assert info.value.code == "incomplete_delta"


def test_reconstructed_malformed_arguments_do_not_raise() -> None:
    """PROV-5/PROV-6: bad JSON in fragments -> a call with arguments_error."""
    calls = reconstruct_tool_call_deltas(
        [provider_tool_call_delta(0, id="a", name="f", arguments_text='{"x": ')]
    )
    assert calls[0].arguments == {}
    assert calls[0].arguments_error is not None


def test_reconstruction_keeps_the_authority_of_fragments() -> None:
    """PROV-5: a provider-hosted fragment group stays provider-hosted (CON-6)."""
    calls = reconstruct_tool_call_deltas(
        [provider_tool_call_delta(0, id="a", name="web", authority="provider-hosted")]
    )
    assert calls[0].authority == "provider-hosted"


# --------------------------------------------------------------------------- CON-18 fold


def test_fold_coalesces_adjacent_text_and_thinking_deltas() -> None:
    """CON-18: adjacent text deltas -> one TextContent; thinking closes at its signature."""
    result = fold_provider_events(
        [
            provider_message_start("msg_1"),
            provider_thinking_delta("Let me "),
            provider_thinking_delta("think."),
            provider_thinking_delta("", signature="sig1"),
            provider_thinking_delta("More."),
            provider_text_delta("Hello, "),
            provider_text_delta("world"),
            provider_done(stop_reason="end_turn"),
        ]
    )
    assert result.content == (
        ThinkingContent(text="Let me think.", signature="sig1"),
        ThinkingContent(text="More."),
        TextContent(text="Hello, world"),
    )
    assert result.message_id == "msg_1"
    assert result.started is True
    assert result.stop_reason == "end_turn"
    assert result.calls == ()


def test_fold_keeps_redacted_thinking_as_its_own_part() -> None:
    """CON-18: a redacted_data delta is never merged with neighbouring thinking."""
    redacted = ThinkingContent(text="", redacted_data="opaque")
    result = fold_provider_events(
        [
            provider_thinking_delta("a"),
            provider_content_delta(redacted),
            provider_thinking_delta("b"),
            provider_done(),
        ]
    )
    assert result.content == (ThinkingContent(text="a"), redacted, ThinkingContent(text="b"))


def test_fold_places_tool_calls_where_they_completed_then_reconstructed_ones() -> None:
    """CON-18 + RUN-15 step 5: final calls in place; delta-built calls appended after the stream."""
    result = fold_provider_events(
        [
            provider_text_delta("Looking up."),
            provider_tool_call_delta(0, id="d1", name="g", arguments_text='{"k": 1}'),
            provider_tool_call("c1", "f", {"q": "x"}),
            provider_text_delta("Done."),
            provider_done(stop_reason="tool_use"),
        ]
    )
    c1 = ToolCallContent(id="c1", name="f", arguments={"q": "x"})
    d1 = ToolCallContent(id="d1", name="g", arguments={"k": 1})
    assert result.content == (TextContent(text="Looking up."), c1, TextContent(text="Done."), d1)
    assert result.calls == (c1, d1)


def test_fold_usage_is_the_last_reported_and_done_usage_wins() -> None:
    """CON-18: the last usage event, overridden by done.usage when present."""
    first, second, final = Usage(input_tokens=1), Usage(input_tokens=2), Usage(input_tokens=3)
    events: list[ProviderEvent] = [provider_usage(first), provider_usage(second)]
    assert fold_provider_events([*events, provider_done()]).usage == second
    assert fold_provider_events([*events, provider_done(final)]).usage == final


def test_fold_of_a_bare_done_is_not_started() -> None:
    """CON-18: no message start/content/call -> started false, empty content."""
    result = fold_provider_events([provider_usage(Usage(input_tokens=4)), provider_done()])
    assert result.started is False
    assert result.content == ()
    assert result.usage == Usage(input_tokens=4)


def test_fold_raises_the_error_event_and_stops_at_done() -> None:
    """PROV-2: an error ends the attempt; nothing after done is read."""
    info = ErrorInfo(message="boom", code=500)
    with pytest.raises(ProviderTurnError) as caught:
        fold_provider_events([provider_text_delta("x"), ProviderErrorEvent(error=info)])
    assert caught.value.info == info
    result = fold_provider_events([provider_done(), provider_text_delta("ignored")])
    assert result.content == ()


def test_fold_raises_incomplete_delta_for_a_nameless_group() -> None:
    """RUN-15 step 5: an incomplete fragment fails the attempt."""
    with pytest.raises(ProviderTransportError) as caught:
        fold_provider_events([provider_tool_call_delta(0, id="x"), provider_done()])
    assert caught.value.code == "incomplete_delta"


# --------------------------------------------------------------------------- PROV-1


async def test_a_plain_async_generator_object_satisfies_the_protocol() -> None:
    """PROV-1: AIProvider is a Protocol with id and generate(request) -> AsyncIterator."""

    class Echo:
        id = "echo"

        async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
            yield provider_text_delta("hi")
            yield provider_done()

    provider: AIProvider = Echo()
    assert isinstance(provider, AIProvider)
    assert isinstance(create_mock_provider(), AIProvider)
    assert not isinstance(object(), AIProvider)


# --------------------------------------------------------------------------- PROV-13


def _tool_message(*parts: object) -> Message:
    return Message(role="tool", content=tuple(parts))  # type: ignore[arg-type]


def test_tool_result_payload_text_rules() -> None:
    """PROV-13: error JSON, str itself, compact JSON, extra text, else the constant."""
    error = ToolResultContent(
        tool_call_id="c", name="f", error=ErrorInfo(message="nope", code="tool_denied")
    )
    assert tool_result_payload_text(_tool_message(error)) == json.dumps(
        {"error": {"message": "nope", "code": "tool_denied"}}
    )
    no_code = ToolResultContent(tool_call_id="c", name="f", error=ErrorInfo(message="nope"))
    assert tool_result_payload_text(_tool_message(no_code)) == '{"error": {"message": "nope"}}'
    text = ToolResultContent(tool_call_id="c", name="f", result="plain")
    assert tool_result_payload_text(_tool_message(text)) == "plain"
    value = ToolResultContent(tool_call_id="c", name="f", result={"é": [1, 2]})
    assert tool_result_payload_text(_tool_message(value)) == '{"é":[1,2]}'
    extra = ToolResultContent(tool_call_id="c", name="f")
    assert (
        tool_result_payload_text(
            _tool_message(extra, TextContent(text="a"), TextContent(text="b"))
        )
        == "a\nb"
    )
    assert tool_result_payload_text(_tool_message(extra)) == EMPTY_TOOL_RESULT_TEXT
    assert EMPTY_TOOL_RESULT_TEXT == "(tool completed with no output)"
    empty = ToolResultContent(tool_call_id="c", name="f", result="")
    assert tool_result_payload_text(_tool_message(empty)) == EMPTY_TOOL_RESULT_TEXT
    falsy = ToolResultContent(tool_call_id="c", name="f", result=0)
    assert tool_result_payload_text(_tool_message(falsy)) == "0"


# --------------------------------------------------------------------------- PROV-11


def test_retry_after_header_parsing() -> None:
    """PROV-11: delay seconds or an HTTP date, in ms from now, never negative."""
    assert retry_after_ms("2") == 2000.0
    assert retry_after_ms(" 1.5 ") == 1500.0
    assert retry_after_ms("-3") == 0.0
    assert retry_after_ms(None) is None
    assert retry_after_ms("") is None
    assert retry_after_ms("soon") is None
    now = 1_700_000_000.0
    later = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after_ms(later, now=now) == 30_000.0
    earlier = email.utils.formatdate(now - 30, usegmt=True)
    assert retry_after_ms(earlier, now=now) == 0.0
