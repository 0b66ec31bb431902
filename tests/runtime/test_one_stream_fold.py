"""The runtime's provider attempt and ``fold_provider_events`` are one fold (CON-18, RUN-15,
PROV-5): the assistant message a run appends is what the public fold gives for the same stream."""

from __future__ import annotations

import pytest
from runtime_support import echo_tool, make_session, run_collect

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
from prism.providers.mock import MockScriptItem
from prism.providers.stream_fold import fold_provider_events
from prism.types import ImageContent, RunResult, ThinkingContent, Usage

TEXT = [provider_text_delta("done"), provider_done()]

STREAMS: dict[str, list[MockScriptItem]] = {
    "text, thinking, signature, redacted, image": [
        provider_message_start("msg_1"),
        provider_thinking_delta("think "),
        provider_thinking_delta("more", signature="sig"),
        provider_thinking_delta("again"),
        provider_content_delta(ThinkingContent(text="", redacted_data="opaque")),
        provider_text_delta("Hel"),
        provider_text_delta("lo"),
        provider_content_delta(ImageContent(mime_type="image/png", data="AAAA")),
        provider_text_delta("!"),
        provider_usage(Usage(input_tokens=3)),
        provider_done(Usage(input_tokens=4, output_tokens=2), stop_reason="end_turn"),
    ],
    "fragments, final calls and text between": [
        provider_text_delta("let me look"),
        provider_tool_call_delta(1, id="b", name="lookup", arguments_text='{"q": '),
        provider_tool_call_delta(0, id="a", name="lookup", arguments_text="{}"),
        provider_tool_call("f", "lookup", {"q": "final"}),
        provider_tool_call_delta(1, arguments_text='"x"}'),
        provider_tool_call_delta(0, id="c", name="lookup"),
        provider_text_delta("and more"),
        provider_tool_call_delta(2, id="d", name="lookup", arguments_text='{"q": "frag"}'),
        provider_tool_call("d", "lookup", {"q": "wins"}),
        provider_done(stop_reason="tool_use"),
    ],
    "a message start after content keeps no id": [
        provider_text_delta("a"),
        provider_message_start("late"),
        provider_text_delta("b"),
        provider_done(),
    ],
}


@pytest.mark.parametrize("stream", list(STREAMS.values()), ids=list(STREAMS))
async def test_the_run_appends_what_fold_provider_events_gives_con_18(
    stream: list[MockScriptItem],
) -> None:
    expected = fold_provider_events(stream)  # type: ignore[arg-type]
    session, _ = make_session([stream, TEXT], tools=[echo_tool()])
    result, events = await run_collect(session)
    assert isinstance(result, RunResult)
    assistant = result.messages[1]
    assert assistant.content == expected.content
    if expected.message_id is not None:
        assert assistant.id == expected.message_id
    else:
        assert assistant.id != "late"
    started = [e for e in events if e.type == "message_started"]
    assert started[0].message.id == expected.message_id
    rebuilt = [c for c in expected.calls if c.id in ("a", "b", "c")]
    deltas = [e.content for e in events if e.type == "message_delta"]
    assert deltas[len(deltas) - len(rebuilt) - 1 : -1] == rebuilt
