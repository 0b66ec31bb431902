"""Bounded incremental Server-Sent Events reader.

Bytes are decoded incrementally as UTF-8, line by line (a multi-byte character split across chunks
is kept whole, since line ends are ASCII). Events are separated by a blank line (``\\n\\n``,
``\\r\\n\\r\\n`` or ``\\r\\r``); the ``data:`` lines of one event are joined with ``"\\n"``;
``event:`` is kept; lines starting with ``:`` are comments. An event larger than
[`MAX_SSE_EVENT_BYTES`][prism.providers._sse.MAX_SSE_EVENT_BYTES] raises ``ProviderTransportError("sse_event_overflow")``; more than
[`MAX_SSE_BUFFER_BYTES`][prism.providers._sse.MAX_SSE_BUFFER_BYTES] buffered without an event boundary raises
``ProviderTransportError("sse_buffer_overflow")``. A trailing event without a final blank line is
still delivered.

Work per chunk is proportional to the chunk, so a stream costs O(bytes).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

from prism.errors import ProviderTransportError

__all__ = [
    "MAX_SSE_BUFFER_BYTES",
    "MAX_SSE_EVENT_BYTES",
    "SSEDecoder",
    "SSEEvent",
    "aiter_sse_events",
]

MAX_SSE_EVENT_BYTES = 262_144
"""Largest accepted event, in UTF-8 bytes of its raw lines."""

MAX_SSE_BUFFER_BYTES = 524_288
"""Most bytes buffered without an event boundary."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One decoded event."""

    data: str
    """The ``data:`` lines joined with ``"\\n"`` (``""`` when there were none)."""
    event: str | None = None
    """The ``event:`` field, or ``None``."""
    id: str | None = None
    """The ``id:`` field, or ``None``."""


class SSEDecoder:
    """Incremental, bounded decoder: feed bytes, get complete events.

    Lines end at ``\\r\\n``, ``\\n`` or ``\\r`` (a CRLF split across two chunks counts once); a
    blank line ends an event. Bytes are buffered only until their event ends, so memory stays
    below ``max_buffer_bytes``.

    Args:
        max_event_bytes: Event size limit in bytes (default 262 144).
        max_buffer_bytes: Limit on bytes buffered without an event boundary (default 524 288).
    """

    __slots__ = (
        "_data",
        "_event",
        "_event_bytes",
        "_id",
        "_max_buffer",
        "_max_event",
        "_partial",
        "_skip_lf",
    )

    def __init__(
        self,
        *,
        max_event_bytes: int = MAX_SSE_EVENT_BYTES,
        max_buffer_bytes: int = MAX_SSE_BUFFER_BYTES,
    ) -> None:
        self._max_event = max_event_bytes
        self._max_buffer = max_buffer_bytes
        self._partial = bytearray()
        self._skip_lf = False
        self._reset_event()

    def _reset_event(self) -> None:
        self._data: list[str] = []
        self._event: str | None = None
        self._id: str | None = None
        self._event_bytes = 0

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume ``chunk`` and return the events it completed, in order.

        Raises:
            ProviderTransportError: ``sse_event_overflow`` or ``sse_buffer_overflow``.
            UnicodeDecodeError: a line is not valid UTF-8.
        """
        events: list[SSEEvent] = []
        start = 0
        size = len(chunk)
        if self._skip_lf and size and chunk[0] == 0x0A:
            start = 1
        self._skip_lf = False
        while start < size:
            cr = chunk.find(b"\r", start)
            lf = chunk.find(b"\n", start)
            if cr < 0 and lf < 0:
                self._partial += chunk[start:]
                break
            end = lf if cr < 0 or (0 <= lf < cr) else cr
            self._partial += chunk[start:end]
            line = bytes(self._partial)
            self._partial.clear()
            start = end + 1
            if chunk[end] == 0x0D:
                if start < size:
                    if chunk[start] == 0x0A:
                        start += 1
                else:
                    self._skip_lf = True
            event = self._line(line)
            if event is not None:
                events.append(event)
        if self._event_bytes + len(self._partial) > self._max_buffer:
            raise ProviderTransportError(
                "sse_buffer_overflow",
                f"SSE buffer exceeded {self._max_buffer} bytes without an event boundary",
            )
        return events

    def finish(self) -> list[SSEEvent]:
        """End of stream: return a trailing event that had no final blank line, if any."""
        events: list[SSEEvent] = []
        if self._partial:
            line = bytes(self._partial)
            self._partial.clear()
            event = self._line(line)
            if event is not None:
                events.append(event)
        event = self._dispatch()
        if event is not None:
            events.append(event)
        self._skip_lf = False
        return events

    def _line(self, line: bytes) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        self._event_bytes += len(line) + 1
        if self._event_bytes > self._max_buffer:
            raise ProviderTransportError(
                "sse_buffer_overflow",
                f"SSE buffer exceeded {self._max_buffer} bytes without an event boundary",
            )
        if line[0] == 0x3A:  # ":" comment
            return None
        text = line.decode("utf-8")
        name, _, value = text.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            self._id = value
        return None

    def _dispatch(self) -> SSEEvent | None:
        size = self._event_bytes
        data, event, event_id = self._data, self._event, self._id
        self._reset_event()
        if size > self._max_event:
            raise ProviderTransportError(
                "sse_event_overflow", f"SSE event of {size} bytes exceeds {self._max_event} bytes"
            )
        if not data and event is None and event_id is None:
            return None
        return SSEEvent(data="\n".join(data), event=event, id=event_id)


async def aiter_sse_events(
    chunks: AsyncIterable[bytes],
    *,
    max_event_bytes: int = MAX_SSE_EVENT_BYTES,
    max_buffer_bytes: int = MAX_SSE_BUFFER_BYTES,
) -> AsyncIterator[SSEEvent]:
    """Yield the events of an async byte stream.

    Args:
        chunks: Raw response bytes, e.g. ``response.aiter_bytes()``.
        max_event_bytes: Event size limit in bytes.
        max_buffer_bytes: Limit on bytes buffered without an event boundary.

    Raises:
        ProviderTransportError: ``sse_event_overflow`` or ``sse_buffer_overflow``.
    """
    decoder = SSEDecoder(max_event_bytes=max_event_bytes, max_buffer_bytes=max_buffer_bytes)
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.finish():
        yield event
