"""Redaction across chunk boundaries (EVT-21, EVT-25): a registered secret a provider streams in
pieces — in text, thinking or tool-call argument deltas — never reaches an event, the store or
the run result, and the concatenated deltas of each part equal its stored (redacted) text.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_support import echo_tool, make_session, run_collect

from prism.abort import AbortController
from prism.errors import AgentRunError
from prism.providers.base import (
    provider_done,
    provider_text_delta,
    provider_thinking_delta,
    provider_tool_call_delta,
)
from prism.providers.mock import MockScriptItem
from prism.redaction import create_secret_redactor
from prism.runtime.run._stream_redaction import HeldChannel, held_length
from prism.types import (
    Message,
    ProviderEvent,
    ProviderRequest,
    RunResult,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolCallDeltaContent,
)

# Secrets use characters JSON leaves alone (a secret inside a tool argument's string value is
# the same text in the argument text and in the parsed value) and that no id, field name, event
# type or "[REDACTED]" marker contains; fillers share them (partial matches everywhere) and add
# a space.
SECRET_CHARS = "GHJKXYZ-"
secret_lists = st.lists(
    st.text(alphabet=SECRET_CHARS, min_size=2, max_size=12), min_size=1, max_size=3, unique=True
)
fillers = st.text(alphabet=SECRET_CHARS + " ", max_size=12)


def split(text: str, cuts: Sequence[int]) -> list[str]:
    """``text`` cut at ``cuts`` (positions taken modulo its length + 1); no empty chunk."""
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in zip(points, points[1:], strict=False) if b > a] or [text]


@st.composite
def secret_texts(draw: st.DrawFn, secrets: list[str]) -> str:
    """Fillers around one or more of ``secrets``."""
    parts = [draw(fillers)]
    for _ in range(draw(st.integers(1, 3))):
        parts.append(draw(st.sampled_from(secrets)))
        parts.append(draw(fillers))
    return "".join(parts)


# --------------------------------------------------------------------------- one channel


@settings(max_examples=400, deadline=None)
@given(
    secrets=secret_lists,
    text=st.text(alphabet=SECRET_CHARS + " ", max_size=40),
    cuts=st.lists(st.integers(0, 64), max_size=12),
)
def test_a_channel_cut_anywhere_redacts_like_the_whole(
    secrets: list[str], text: str, cuts: list[int]
) -> None:
    """EVT-21: the pieces a channel releases, each redacted, join to the redacted whole; with
    one secret, at most its length minus one character is ever held."""
    redactor = create_secret_redactor(secrets)
    channel = HeldChannel(tuple(secrets))
    pieces: list[str] = []
    for chunk in split(text, cuts):
        pieces.append(channel.push(chunk))
        if len(secrets) == 1:
            assert len(channel.held) <= len(secrets[0]) - 1
    pieces.append(channel.flush())
    assert "".join(pieces) == text
    assert "".join(redactor.redact(piece) for piece in pieces) == redactor.redact(text)


def test_held_length_examples() -> None:
    """The tail that could still become a secret is held; a complete one is not cut."""
    assert held_length("my key is sk-li", ["sk-live"]) == 5
    assert held_length("my key is sk-live", ["sk-live"]) == 0
    assert held_length("aba", ["aba"]) == 0  # complete: redacted whole, nothing held
    assert held_length("abab", ["aba"]) == 0  # "ab" overlaps the occurrence already complete
    assert held_length("xabc", ["abc", "abcdef"]) == 3  # the longer secret may still come
    assert held_length("plain text", ["sk-live"]) == 0
    assert held_length("s", ["s"]) == 0  # one-character secrets are never split


def _redacted_pieces(secrets: Sequence[str], chunks: Sequence[str]) -> str:
    """The chunks through one channel, each released piece redacted as its event is, joined."""
    redact = create_secret_redactor(secrets).redact
    channel = HeldChannel(tuple(secrets))
    pieces = [channel.push(chunk) for chunk in chunks]
    pieces.append(channel.flush())
    return "".join(redact(piece) for piece in pieces)


def test_an_occurrence_a_later_secret_finds_after_an_earlier_one_is_not_cut() -> None:
    """EVT-21: secrets apply one after another, so "HH" is found in "GHHH" after "GH" became a
    marker — at 2..4, not at 1..3 where it is in the raw text — and that one is not cut."""
    secrets = ["GH", "HH"]
    assert held_length("GHH", secrets) == 1  # "H" may still become "HH" once "GH" is replaced
    assert held_length("GHHH", secrets) == 0
    whole = create_secret_redactor(secrets).redact("GHHH")
    assert whole == "[REDACTED][REDACTED]"
    assert _redacted_pieces(secrets, ["GHHH"]) == whole
    assert _redacted_pieces(secrets, ["GHH", "H"]) == whole
    assert _redacted_pieces(secrets, ["G", "HH", "H"]) == whole


def test_every_small_case_redacts_like_the_whole() -> None:
    """EVT-21, exhaustively on a small alphabet: every list of one to three secrets of two or
    three characters over "GH", every text of up to six characters cut once, and of up to five
    characters cut twice. Swapping "G" and "H" maps every case onto another, so only lists
    whose first secret starts with "G" are checked."""
    words = ["".join(w) for size in (2, 3) for w in itertools.product("GH", repeat=size)]
    texts = ["".join(w) for size in range(7) for w in itertools.product("GH", repeat=size)]
    cases: list[tuple[str, list[str]]] = []
    for text in texts:
        size = len(text)
        cut_sets = [(cut,) for cut in range(1, size)]
        if size <= 5:
            cut_sets += itertools.combinations(range(1, size), 2)
        for cuts in cut_sets:
            points = (0, *cuts, size)
            cases.append((text, [text[a:b] for a, b in zip(points, points[1:], strict=False)]))
    for count in (1, 2, 3):
        for secrets in itertools.permutations(words, count):
            if secrets[0][0] != "G":
                continue
            redact = create_secret_redactor(secrets).redact
            redacted = {text: redact(text) for text in texts}  # every piece is one of them
            for text, chunks in cases:
                channel = HeldChannel(secrets)
                pieces = [channel.push(chunk) for chunk in chunks]
                pieces.append(channel.flush())
                joined = "".join(redacted[piece] for piece in pieces)
                assert joined == redacted[text], (secrets, chunks, pieces)


# --------------------------------------------------------------------------- a run


def _script(
    thinking: list[str], text: list[str], arguments: list[str], order: list[bool]
) -> list[list[MockScriptItem]]:
    """Thinking chunks, then text and argument chunks interleaved by ``order`` (a tool-call
    fragment does not close the text part), then the answer after the tool result."""
    first: list[MockScriptItem] = [provider_thinking_delta(chunk) for chunk in thinking]
    texts, args = list(text), list(arguments)
    opened = False
    choices = iter(order)
    while texts or args:
        take_text = bool(texts) and (not args or next(choices, True))
        if take_text:
            first.append(provider_text_delta(texts.pop(0)))
        else:
            chunk = args.pop(0)
            if opened:
                first.append(provider_tool_call_delta(0, arguments_text=chunk))
            else:
                first.append(
                    provider_tool_call_delta(0, id="c1", name="lookup", arguments_text=chunk)
                )
                opened = True
    first.append(provider_done())
    return [first, [provider_text_delta("done"), provider_done()]]


def _delta_text(events: Sequence[Any], kind: type) -> str:
    out = []
    for event in events:
        if event.type != "message_delta" or type(event.content) is not kind:
            continue
        content = event.content
        out.append(content.arguments_text or "" if kind is ToolCallDeltaContent else content.text)
    return "".join(out)


def _stored_text(messages: Sequence[Message], kind: type) -> str:
    return "".join(
        part.text
        for message in messages
        if message.role == "assistant"
        for part in message.content
        if type(part) is kind
    )


@settings(max_examples=60, deadline=None)
@given(data=st.data(), secrets=secret_lists)
def test_a_secret_split_across_streamed_chunks_never_leaves_the_run(
    data: st.DataObject, secrets: list[str]
) -> None:
    """EVT-21/EVT-25: any registered secret, split at any chunk boundaries in thinking, text and
    tool-argument deltas, is absent from the joined deltas, every event's JSON, the store and
    the result; each channel's joined deltas equal the stored, redacted text."""
    thinking = data.draw(secret_texts(secrets), "thinking")
    text = data.draw(secret_texts(secrets), "text")
    value = data.draw(secret_texts(secrets), "argument")
    arguments = json.dumps({"q": value})
    cuts = st.lists(st.integers(0, 200), max_size=10)
    script = _script(
        split(thinking, data.draw(cuts, "thinking cuts")),
        split(text, data.draw(cuts, "text cuts")),
        split(arguments, data.draw(cuts, "argument cuts")),
        data.draw(st.lists(st.booleans(), max_size=20), "order"),
    )
    redactor = create_secret_redactor(secrets)

    async def scenario() -> tuple[Any, list[Any], list[Any]]:
        session, _ = make_session(script, tools=[echo_tool()], redactor=redactor)
        result, events = await run_collect(session)
        return result, events, await session.entries()

    result, events, entries = asyncio.run(scenario())
    assert isinstance(result, RunResult), result
    stored = [entry.message for entry in entries if entry.message is not None]
    places = {
        "text deltas": _delta_text(events, TextContent),
        "thinking deltas": _delta_text(events, ThinkingContent),
        "argument deltas": _delta_text(events, ToolCallDeltaContent),
        "events": "\n".join(json.dumps(event.to_dict()) for event in events),
        "store": "\n".join(json.dumps(entry.to_dict()) for entry in entries),
        "result": json.dumps(result.to_dict()),
    }
    for secret in secrets:
        for place, shown in places.items():
            assert secret not in shown, (place, secret)
    assert places["text deltas"] == _stored_text(stored, TextContent) == (
        redactor.redact(text) + "done"
    )
    assert places["thinking deltas"] == _stored_text(stored, ThinkingContent) == (
        redactor.redact(thinking)
    )
    assert places["argument deltas"] == redactor.redact(arguments)
    calls = [p for m in stored for p in m.content if type(p) is ToolCallContent]
    assert [call.arguments for call in calls] == [json.loads(places["argument deltas"])]


@pytest.mark.parametrize(
    ("secrets", "chunks"),
    [
        (["GH", "HH"], ["GHHH"]),  # "HH" is replaced at 2..4 once "GH" is a marker
        (["G", "GH", "HH"], ["GHH"]),  # the one-character secret changes what "HH" sees
        (["G", "GH", "HH"], ["G", "HH"]),
    ],
)
async def test_the_deltas_of_secrets_applied_one_after_another_join_to_the_stored_text(
    secrets: list[str], chunks: list[str]
) -> None:
    """EVT-21: a run's text deltas, each redacted, join to the stored text when a later
    secret's occurrences are found in the text an earlier one already redacted."""
    redactor = create_secret_redactor(secrets)
    session, _ = make_session(
        [[*(provider_text_delta(chunk) for chunk in chunks), provider_done()]], redactor=redactor
    )
    result, events = await run_collect(session)
    assert isinstance(result, RunResult)
    whole = redactor.redact("".join(chunks))
    assert _delta_text(events, TextContent) == result.text == whole
    stored = [entry.message for entry in await session.entries() if entry.message is not None]
    assert _stored_text(stored, TextContent) == whole


# --------------------------------------------------------------------------- flush points

SECRET = "sk-live-0123456789"


class _Stream:
    """Streams ``items``, then raises ``error`` or waits for the abort."""

    id = "stream"

    def __init__(self, items: list[ProviderEvent], error: BaseException | None) -> None:
        self.items = items
        self.error = error
        self.reached_end = asyncio.Event()

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        for item in self.items:
            yield item
        self.reached_end.set()
        if self.error is not None:
            raise self.error
        await asyncio.sleep(30)


def _types_around_flush(events: list[Any]) -> list[str]:
    return [
        e.type if e.type != "message_delta" else f"delta:{e.content.text}"
        for e in events
        if e.type in ("message_delta", "provider_turn_finished", "message_finished")
    ]


@pytest.mark.parametrize("ending", ["error", "abort"])
async def test_held_text_is_flushed_when_the_attempt_fails_or_is_aborted(ending: str) -> None:
    """EVT-21: text held back at a possible secret start goes out (redacted per event) before
    ``provider_turn_finished`` when the provider fails or the run is aborted mid-stream."""
    items: list[ProviderEvent] = [provider_text_delta("key sk-"), provider_text_delta("li")]
    provider = _Stream(items, RuntimeError("connection reset") if ending == "error" else None)
    session, _ = make_session(provider=provider, redactor=create_secret_redactor([SECRET]))
    controller = AbortController()

    async def abort_at_end() -> None:
        await provider.reached_end.wait()
        controller.abort()

    aborter = asyncio.ensure_future(abort_at_end()) if ending == "abort" else None
    result, events = await run_collect(session, signal=controller.signal)
    if aborter is not None:
        await aborter
    assert isinstance(result, AgentRunError)
    assert _types_around_flush(events) == ["delta:key ", "delta:sk-li", "provider_turn_finished"]


async def test_held_text_goes_out_before_message_finished() -> None:
    """EVT-21: a stream ending on a possible secret start releases it before the part closes:
    the last delta precedes ``message_finished`` and the text is whole."""
    session, _ = make_session(
        [[provider_text_delta("ends with sk-"), provider_text_delta("l"), provider_done()]],
        redactor=create_secret_redactor([SECRET]),
    )
    result, events = await run_collect(session)
    assert isinstance(result, RunResult) and result.text == "ends with sk-l"
    assert _types_around_flush(events) == [
        "delta:ends with ",
        "delta:sk-l",
        "provider_turn_finished",
        "message_finished",
    ]
