"""Redaction that holds across chunk boundaries: a streamed channel never leaks a split secret.

Events are redacted one by one, so a secret a provider streams in two deltas (``"sk-li"``,
``"ve-key"``) would pass through in halves. A :class:`HeldChannel` sits in front of one
streamed channel (the text part, the thinking part, one tool call's argument text) and cuts the
stream only where no secret can span the cut: it holds back the longest tail of what it was
given that is a proper prefix of a secret — never more than the longest secret's length minus
one character — and releases it with the next chunk or when the channel is flushed (the part
closes, the stream ends, the attempt fails or is aborted).

What it releases is still raw text; the event it goes into is redacted as every event is. Because
no occurrence of a secret spans a cut, the redacted pieces join to exactly the redacted whole:
the concatenated deltas equal the stored text. (This holds for secrets without ``[`` or ``]``; a
secret that contains one could match across the ``[REDACTED]`` marker of another.)

Cost: one ``str.find`` of each secret's first character in the chunk's last characters per
chunk; nothing at all when no secret is registered (the attempt then creates no channel).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["HeldChannel", "held_length"]


def held_length(text: str, secrets: Iterable[str]) -> int:
    """Length of the longest tail of ``text`` that is a proper prefix of one of ``secrets``.

    ``0`` when no tail can start a secret. A tail that is a whole secret but also a proper
    prefix of a longer one is held too (the longer secret, once complete, is the one redacted).
    O(number of secrets × longest secret) character comparisons at most.
    """
    best = 0
    size = len(text)
    for secret in secrets:
        longest = min(len(secret) - 1, size)
        if longest <= best:
            continue
        first = secret[0]
        start = size - longest
        while True:
            at = text.find(first, start, size - best)
            if at < 0:
                break
            if secret.startswith(text[at:]):
                best = size - at  # the earliest start is the longest tail
                break
            start = at + 1
    return best


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
