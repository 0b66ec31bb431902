"""Redaction that holds across chunk boundaries: a streamed channel never leaks a split secret.

Events are redacted one by one, so a secret a provider streams in two deltas (``"sk-li"``,
``"ve-key"``) would pass through in halves. A [`HeldChannel`][prism.runtime.run._stream_redaction.HeldChannel] sits in front of one
streamed channel (the text part, the thinking part, one tool call's argument text) and cuts the
stream only where no secret can span the cut: it holds back the tail of what it was given that
could still become a secret ([`held_length()`][prism.runtime.run._stream_redaction.held_length]; normally at most the longest secret's length
minus one character) and releases it with the next chunk or when the channel is flushed (the
part closes, the stream ends, the attempt fails or is aborted).

What it releases is still raw text; the event it goes into is redacted as every event is. Because
no occurrence of a secret spans a cut, the redacted pieces join to exactly the redacted whole:
the concatenated deltas equal the stored text. (This holds for secrets without ``[`` or ``]``; a
secret that contains one could match across the ``[REDACTED]`` marker of another.)

[`StreamRedaction`][prism.runtime.run._stream_redaction.StreamRedaction] keeps the channels of one provider attempt and follows the fold's
parts: a text delta closes the thinking part and a thinking delta the text part, a signature
closes its thinking part, and any other part (an image, redacted thinking, a final tool call)
closes both — a closed part's held text goes out first, so each stored part equals the join of
its deltas. Each streamed tool call (fragments grouped by index and id, as they are rebuilt) has
its own argument channel.

Cost: a few ``str.find`` calls per secret over the held text plus the chunk; nothing at all
when no secret is registered (the attempt then creates no channel).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prism.types import TextContent, ThinkingContent, ToolCallDeltaContent

__all__ = ["HeldChannel", "StreamRedaction", "held_length"]


def held_length(text: str, secrets: Iterable[str]) -> int:
    """How many characters at the end of ``text`` to hold back so that no secret can be split.

    Redaction replaces each secret's occurrences left to right without overlap
    (``str.replace``), one secret after another. ``text`` is cut before the earliest tail that
    could still become an occurrence — a tail that is a proper prefix of a secret and does not
    overlap an occurrence of that secret already complete (a complete whole secret that is also a
    proper prefix of a longer one is held too) — and never inside a complete occurrence. So at
    most the longest secret's length minus one is held, unless occurrences of two different
    secrets overlap. ``0`` when nothing needs holding. O(len(text) × number of secrets).
    """
    size = len(text)
    cut = size
    spans: list[tuple[int, int]] = []
    for secret in secrets:
        length = len(secret)
        if length < 2:
            continue
        end = 0
        at = text.find(secret)
        while at >= 0:
            end = at + length
            spans.append((at, end))
            at = text.find(secret, end)
        first = secret[0]
        start = max(end, size - length + 1)
        while start < cut:
            at = text.find(first, start, cut)
            if at < 0:
                break
            if secret.startswith(text[at:]):
                cut = at  # the earliest start is the longest tail
                break
            start = at + 1
    moved = cut < size
    while moved:
        moved = False
        for begin, end in spans:
            if begin < cut < end:
                cut = begin
                moved = True
    return size - cut


class HeldChannel:
    """One streamed channel's held-back text.

    Args:
        secrets: The secrets to hold back prefixes of (non-empty strings).
    """

    __slots__ = ("_held", "_secrets")

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self._secrets = secrets
        self._held = ""

    @property
    def held(self) -> str:
        """The text held back so far (raw)."""
        return self._held

    def push(self, chunk: str) -> str:
        """Take the next chunk; return the raw text that is safe to emit now (maybe ``""``).

        What is returned joined with the held text is always the held text before plus
        ``chunk``.
        """
        text = self._held + chunk if self._held else chunk
        keep = held_length(text, self._secrets)
        if keep:
            self._held = text[-keep:]
            return text[:-keep]
        self._held = ""
        return text

    def flush(self) -> str:
        """Return the held text (raw) and hold nothing."""
        held = self._held
        self._held = ""
        return held


class StreamRedaction:
    """The held channels of one provider attempt: text, thinking, each tool call's arguments.

    Args:
        secrets: The active redactor's secrets (each at least two characters long).
    """

    __slots__ = ("_calls", "_secrets", "_text", "_thinking")

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self._secrets = secrets
        self._text = HeldChannel(secrets)
        self._thinking = HeldChannel(secrets)
        self._calls: dict[int, tuple[list[str | None], HeldChannel]] = {}

    def deltas(self, content: Any) -> list[Any]:
        """The delta contents to emit for the streamed ``content``, in order (raw, to be
        redacted as events are): held text of a part ``content`` closes, then what of
        ``content`` is safe now. A delta whose text is held back entirely is left out, unless
        it carries a signature, a tool call's id, name or authority."""
        kind = type(content)
        if kind is TextContent:
            out = self._close(self._thinking, _thinking_piece)
            piece = self._text.push(content.text)
            if piece is content.text:
                out.append(content)
            elif piece:
                out.append(TextContent(piece))
            return out
        if kind is ThinkingContent and content.redacted_data is None:
            out = self._close(self._text, TextContent)
            piece = self._thinking.push(content.text)
            if content.signature is not None:
                piece += self._thinking.flush()
            if piece == content.text:
                out.append(content)
            elif piece or content.signature is not None:
                out.append(ThinkingContent(piece, signature=content.signature))
            return out
        if kind is ToolCallDeltaContent:
            return self._call_delta(content)
        out = self._close(self._text, TextContent)
        out.extend(self._close(self._thinking, _thinking_piece))
        out.append(content)
        return out

    def flush(self) -> list[Any]:
        """The delta contents of everything still held (the stream ended, failed or stopped)."""
        out = self._close(self._text, TextContent)
        out.extend(self._close(self._thinking, _thinking_piece))
        for index, (_, channel) in self._calls.items():
            held = channel.flush()
            if held:
                out.append(ToolCallDeltaContent(index=index, arguments_text=held))
        return out

    @staticmethod
    def _close(channel: HeldChannel, make: Any) -> list[Any]:
        held = channel.flush() if channel.held else ""
        return [make(held)] if held else []

    def _call_delta(self, content: ToolCallDeltaContent) -> list[Any]:
        out: list[Any] = []
        index = content.index
        entry = self._calls.get(index)
        if entry is None or (content.id and entry[0][0] is not None and content.id != entry[0][0]):
            if entry is not None:  # a new call at this index: the previous one is complete
                held = entry[1].flush()
                if held:
                    out.append(ToolCallDeltaContent(index=index, arguments_text=held))
            entry = ([content.id or None], HeldChannel(self._secrets))
            self._calls[index] = entry
        elif content.id and entry[0][0] is None:
            entry[0][0] = content.id
        text = content.arguments_text
        if not text:
            out.append(content)
            return out
        piece = entry[1].push(text)
        if piece is text:
            out.append(content)
        elif piece or content.id or content.name or content.authority is not None:
            out.append(
                ToolCallDeltaContent(
                    index=index,
                    id=content.id,
                    name=content.name,
                    arguments_text=piece,
                    authority=content.authority,
                )
            )
        return out


def _thinking_piece(text: str) -> ThinkingContent:
    return ThinkingContent(text)
