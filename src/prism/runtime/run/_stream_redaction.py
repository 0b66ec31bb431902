"""Redaction that holds across chunk boundaries: a streamed channel never leaks a split secret.

Events are redacted one by one, so a secret a provider streams in two deltas (``"sk-li"``,
``"ve-key"``) would pass through in halves. A [`HeldChannel`][prism.runtime.run._stream_redaction.HeldChannel] sits in front of one
streamed channel (the text part, the thinking part, one tool call's argument text) and cuts the
stream only where no secret can span the cut: it holds back the tail of what it was given that
could still become a secret ([`held_length()`][prism.runtime.run._stream_redaction.held_length]; normally at most the longest secret's length
minus one character) and releases it with the next chunk or when the channel is flushed (the
part closes, the stream ends, the attempt fails or is aborted).

The redactor applies the secrets one after another, each to the previous one's result, so a
later secret's occurrences are not those it has in the raw text: with ``["GH", "HH"]``, ``"GHHH"``
becomes ``"[REDACTED]HH"`` and then ``"[REDACTED][REDACTED]"`` — ``"HH"`` is replaced at 2..4,
not at 1..3. ``held_length()`` therefore follows the passes as the redactor runs them, on the
runs of raw text between the markers of earlier passes, and never cuts inside an occurrence of
any pass nor where a tail of any pass's text could still become one.

What it releases is still raw text; the event it goes into is redacted as every event is. Because
no occurrence of any pass spans a cut, whatever follows, the redacted pieces join to exactly the
redacted whole: the concatenated deltas equal the stored text. (This holds for secrets without
``[`` or ``]``; a secret that contains one could match across the ``[REDACTED]`` marker of
another.)

[`StreamRedaction`][prism.runtime.run._stream_redaction.StreamRedaction] keeps the channels of one provider attempt and follows the fold's
parts: a text delta closes the thinking part and a thinking delta the text part, a signature
closes its thinking part, and any other part (an image, redacted thinking, a final tool call)
closes both — a closed part's held text goes out first, so each stored part equals the join of
its deltas. Each streamed tool call (fragments grouped by index and id, as they are rebuilt) has
its own argument channel.

Cost: a few ``str.find`` calls per secret over the held text plus the chunk; nothing at all
when no secret is registered (the attempt then creates no channel). One-character secrets are
passed too when a longer one is (they are never split, but their markers change what later
passes see).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prism.types import TextContent, ThinkingContent, ToolCallDeltaContent

__all__ = ["HeldChannel", "StreamRedaction", "held_length"]


def held_length(text: str, secrets: Iterable[str]) -> int:
    """How many characters at the end of ``text`` to hold back so that no secret can be split.

    ``text`` is cut where, whatever text follows, no occurrence that redaction replaces spans the
    cut, so the part before it redacts alone exactly as within the whole. Redaction applies the
    secrets one after another, each with ``str.replace`` (left to right, without overlap) on the
    previous one's result; every pass is modelled as the redactor runs it:

    - A pass sees runs of raw text between the markers of earlier passes (an occurrence never
      touches a marker: secrets hold no ``[`` or ``]``), so each occurrence it replaces is a
      contiguous raw span. The cut is never inside one.
    - Text before the *settled* point is redacted by every pass so far the same whatever
      follows. A pass's occurrences complete before that point are final; a tail of its last
      run that ends at that point and is a proper prefix of its secret (after its last
      occurrence) could still become an occurrence, so the settled point moves to the earliest
      such tail, and later passes only look at the text before it.
    - As well, a raw tail that is a proper prefix of a secret and starts after that secret's
      last occurrence is held even when an earlier secret's occurrence covers it (``"xabc"``
      with ``["abc", "abcdef"]`` holds ``"abc"``): more than needed, never less.

    The cut is the earliest of these points, moved to the start of an occurrence it falls in.
    With one secret this holds only a tail that is a proper prefix of it (at most its length
    minus one); secrets whose occurrences overlap or touch can hold more. ``0`` when nothing
    needs holding. O(len(text) × number of secrets).
    """
    size = len(text)
    settled = size
    runs = [(0, size)]  # the raw spans the next pass sees between markers, before ``settled``
    spans: list[tuple[int, int]] = []  # the occurrences of all passes (disjoint raw spans)
    cut = size
    for secret in secrets:
        length = len(secret)
        if not length:
            continue
        last = 0  # the end of this pass's last occurrence
        next_runs: list[tuple[int, int]] = []
        for begin, end in runs:
            at = text.find(secret, begin, end)
            while at >= 0:
                if at > begin:
                    next_runs.append((begin, at))
                begin = last = at + length
                spans.append((at, last))
                at = text.find(secret, begin, end)
            if begin < end:
                next_runs.append((begin, end))
        runs = next_runs
        start = _tail_start(text, secret, last, size)  # the raw tail, even across markers
        if start < cut:
            cut = start
        if runs and runs[-1][1] == settled:  # the tail of the last run, when it is settled
            begin = runs[-1][0]
            start = _tail_start(text, secret, begin, settled)
            if start < settled:
                settled = start
                if start > begin:
                    runs[-1] = (begin, start)
                else:
                    runs.pop()
    if settled < cut:
        cut = settled
    for begin, end in spans:
        if begin < cut < end:
            cut = begin  # spans are disjoint: one move is enough
    return size - cut


def _tail_start(text: str, secret: str, begin: int, end: int) -> int:
    """The earliest ``start`` in ``[begin, end)`` with ``text[start:end]`` a proper prefix of
    ``secret``, else ``end``."""
    first = secret[0]
    start = max(begin, end - len(secret) + 1)
    while start < end:
        at = text.find(first, start, end)
        if at < 0:
            break
        if secret.startswith(text[at:end]):
            return at  # the earliest start is the longest tail
        start = at + 1
    return end


class HeldChannel:
    """One streamed channel's held-back text.

    Args:
        secrets: The secrets, in the order the redactor applies them (empty ones are ignored).
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
        secrets: The active redactor's secrets, in application order (at least one of them
            two characters long or more).
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
