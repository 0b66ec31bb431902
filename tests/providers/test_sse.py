"""Bounded incremental SSE reader (PROV-10)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from prism.errors import ProviderTransportError
from prism.providers._sse import (
    MAX_SSE_BUFFER_BYTES,
    MAX_SSE_EVENT_BYTES,
    SSEDecoder,
    SSEEvent,
    aiter_sse_events,
)


def _decode_all(chunks: list[bytes], **limits: int) -> list[SSEEvent]:
    decoder = SSEDecoder(**limits)
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.finish())
    return events


def test_events_are_split_on_lf_and_crlf_blank_lines() -> None:
    """PROV-10: events separated by \\n\\n or \\r\\n\\r\\n."""
    body = b"data: one\n\ndata: two\r\n\r\ndata: three\r\rdata: four\n\n"
    assert [e.data for e in _decode_all([body])] == ["one", "two", "three", "four"]


def test_multiple_data_lines_are_joined_with_newline_and_event_is_kept() -> None:
    """PROV-10: data lines joined by \\n; event: kept; one leading space stripped."""
    body = b"event: message_delta\ndata: {\"a\":\ndata:  1}\nid: 7\n\n"
    assert _decode_all([body]) == [SSEEvent(data='{"a":\n 1}', event="message_delta", id="7")]


def test_comments_are_ignored() -> None:
    """PROV-10: lines starting with ':' are comments."""
    body = b": keep-alive\n\n: another\ndata: x\n\n"
    assert _decode_all([body]) == [SSEEvent(data="x")]


def test_every_split_point_gives_the_same_events() -> None:
    """PROV-10: incremental decoding, including CRLF and multi-byte UTF-8 split across chunks."""
    body = "data: héllo 🌊\r\n\r\nevent: e\ndata: [DONE]\r\n\r\n".encode()
    expected = [SSEEvent(data="héllo 🌊"), SSEEvent(data="[DONE]", event="e")]
    for cut in range(len(body) + 1):
        assert _decode_all([body[:cut], body[cut:]]) == expected, cut
    assert _decode_all([bytes([b]) for b in body]) == expected


def test_a_trailing_event_without_a_blank_line_is_delivered() -> None:
    """PROV-10: the last event is delivered at end of stream even without a final blank line."""
    assert _decode_all([b"data: a\n\ndata: tail"]) == [SSEEvent(data="a"), SSEEvent(data="tail")]
    assert _decode_all([b"data: a\n\ndata: tail\n"]) == [SSEEvent(data="a"), SSEEvent(data="tail")]


def test_an_event_above_the_event_limit_overflows() -> None:
    """PROV-10: an event larger than 262 144 bytes -> sse_event_overflow."""
    big = b"data: " + b"x" * MAX_SSE_EVENT_BYTES + b"\n\n"
    with pytest.raises(ProviderTransportError) as caught:
        _decode_all([big])
    assert caught.value.code == "sse_event_overflow"
    fits = b"data: " + b"x" * (MAX_SSE_EVENT_BYTES - 100) + b"\n\n"
    assert len(_decode_all([fits])[0].data) == MAX_SSE_EVENT_BYTES - 100


def test_too_many_bytes_without_a_boundary_overflow_the_buffer() -> None:
    """PROV-10: more than 524 288 bytes buffered without an event boundary -> sse_buffer_overflow."""
    decoder = SSEDecoder()
    piece = b"x" * 65_536
    decoder.feed(b"data: ")
    with pytest.raises(ProviderTransportError) as caught:
        for _ in range(MAX_SSE_BUFFER_BYTES // len(piece) + 1):
            decoder.feed(piece)
    assert caught.value.code == "sse_buffer_overflow"


def test_many_lines_without_a_blank_line_overflow_the_buffer() -> None:
    """PROV-10: the buffer bound counts complete lines of an unfinished event too."""
    decoder = SSEDecoder(max_event_bytes=100, max_buffer_bytes=200)
    with pytest.raises(ProviderTransportError) as caught:
        for _ in range(50):
            decoder.feed(b"data: 0123456789\n")
    assert caught.value.code == "sse_buffer_overflow"


async def test_async_iteration_over_byte_chunks() -> None:
    """PROV-10: aiter_sse_events reads an async byte stream."""

    async def chunks() -> AsyncIterator[bytes]:
        yield b"data: {\"x\""
        yield b": 1}\n"
        yield b"\ndata: [DONE]\n\n"

    events = [e async for e in aiter_sse_events(chunks())]
    assert events == [SSEEvent(data='{"x": 1}'), SSEEvent(data="[DONE]")]


def test_invalid_utf8_raises() -> None:
    """PROV-10: bytes are decoded as UTF-8 (strict)."""
    with pytest.raises(UnicodeDecodeError):
        _decode_all([b"data: \xff\xfe\n\n"])
