"""Incremental request redaction and byte counting.

Every provider request must be redacted with the active redactor and measured as
``len(canonical_json(request.to_dict()).encode())``. Doing either over the whole request each turn
would make a turn cost O(history). Messages are frozen, so [`RequestCodec`][prism.runtime.run._request_codec.RequestCodec] keeps, for the
run, each message's redacted form and byte size, and for the live history a running prefix of
redacted messages and cumulative sizes. A turn then costs O(new messages) plus copying message
references into the redacted request.

Exactness: the result equals the full computation.

* Bytes: ``canonical_json`` of a dict is the concatenation of its sorted members, so the size is
  ``size(request with messages=()) + sum(size(message)) + (n - 1)`` commas.
* Redaction: the redactor is assumed to be a pure function of its input. Each message is
  redacted wrapped as ``([message],)`` so that it sits at the same container depth (2) as inside
  ``request.messages``; the built-in walk's depth cap (``[MaxDepth]``) therefore applies at the
  same place.

[`RequestCodec.fingerprint()`][prism.runtime.run._request_codec.RequestCodec.fingerprint] hashes a redacted request the way
[`prism.request_hash.fingerprint_request()`][prism.request_hash.fingerprint_request] does, for the request rows of a ledger
([`RequestRecord`][prism.ledger_records.RequestRecord]), at the same O(new messages): each message's
digest is kept for the run, the conversation's live-history part is one running hash that a turn
copies and extends with its tail, and the head is hashed once while its parts are the same
objects. Only a run whose ledger stores request rows turns this on (``hashing``).

[`LiveHistory`][prism.runtime.run._request_codec.LiveHistory] is the ``list`` subclass shared as ``ctx.history``: appends and extends are
plain list operations; every other mutation bumps [`LiveHistory.mutations`][prism.runtime.run._request_codec.LiveHistory.mutations], which tells the
codec that its prefix is stale.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, SupportsIndex

from prism.redaction import SecretRedactor
from prism.request_hash import (
    RunningHash,
    combine_hashes,
    head_hash,
    leading_system_count,
    message_digest,
    new_hash,
    request_head,
)
from prism.runtime.run._json_size import canonical_size, canonical_size_known
from prism.types import JsonValue, Message, ProviderRequest

__all__ = ["HeadMemo", "LiveHistory", "RequestCodec"]


class LiveHistory(list[Message]):
    """The live transcript list with a counter of non-append mutations.

    ``append``, ``extend`` and ``+=`` keep existing elements in place and do not count; every
    other mutating operation increments [`mutations`][prism.runtime.run._request_codec.LiveHistory.mutations].
    """

    __slots__ = ("mutations",)

    def __init__(self, items: Iterable[Message] = ()) -> None:
        super().__init__(items)
        self.mutations = 0
        """Number of non-append mutations so far."""

    def __setitem__(self, index: Any, value: Any) -> None:
        self.mutations += 1
        super().__setitem__(index, value)

    def __delitem__(self, index: SupportsIndex | slice) -> None:
        self.mutations += 1
        super().__delitem__(index)

    def __imul__(self, count: SupportsIndex) -> LiveHistory:
        self.mutations += 1
        super().__imul__(count)
        return self

    def insert(self, index: SupportsIndex, value: Message) -> None:
        self.mutations += 1
        super().insert(index, value)

    def pop(self, index: SupportsIndex = -1) -> Message:
        self.mutations += 1
        return super().pop(index)

    def remove(self, value: Message) -> None:
        self.mutations += 1
        super().remove(value)

    def clear(self) -> None:
        self.mutations += 1
        super().clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self.mutations += 1
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        self.mutations += 1
        super().reverse()


class RequestCodec:
    """Per-run cache that redacts and measures provider requests incrementally.

    Args:
        redactor: The active redactor, or ``None`` (requests are then only measured).
        history: The run's live history.
    """

    __slots__ = (
        "_cache",
        "_chain",
        "_digests",
        "_fingerprint",
        "_head_fp",
        "_known",
        "_h_cum",
        "_h_red",
        "_h_version",
        "_head",
        "_history",
        "_last",
        "_memo",
        "_previous",
        "_redactor",
        "hashing",
    )

    def __init__(
        self,
        redactor: SecretRedactor | None,
        history: LiveHistory,
        memo: HeadMemo | None = None,
    ) -> None:
        self._redactor = redactor
        self._memo = memo
        self._previous: dict[int, tuple[Message, Message, int]] | None = None
        self._history = history
        self._cache: dict[int, tuple[Message, Message, int]] = {}
        self._known: dict[int, tuple[Any, int]] = {}
        self._h_red: list[Message] = []
        self._h_cum: list[int] = [0]
        self._h_version = history.mutations
        self._head: _Head | None = None
        self.hashing = False
        """Whether [`encode()`][prism.runtime.run._request_codec.RequestCodec.encode] keeps what [`fingerprint()`][prism.runtime.run._request_codec.RequestCodec.fingerprint] needs (request rows are on)."""
        self._digests: dict[int, tuple[Message, bytes]] = {}
        self._chain: tuple[int, int, RunningHash] | None = None
        self._last: tuple[tuple[Message, ...], int, int] | None = None
        self._head_fp: tuple[tuple[Any, ...], dict[str, JsonValue], str] | None = None
        self._fingerprint: tuple[ProviderRequest, tuple[str, str, int, dict[str, JsonValue]]] | None
        self._fingerprint = None

    # ----------------------------------------------------------------- per message

    def carry_size(self, value: object, size: int) -> None:
        """Take ``size`` as the canonical size of ``value`` — a dict, or a content part — when a
        message holding it is measured (the walk that checked a tool result, or the provider's
        tool call, measured it; ``value`` is frozen from now on, as messages are)."""
        self._known[id(value)] = (value, size)

    def message(self, message: Message) -> tuple[Message, int]:
        """Return ``(redacted message, canonical UTF-8 size)``, cached for the run."""
        entry = self._cache.get(id(message))
        if entry is None and self._previous is not None:
            entry = self._previous.get(id(message))
        if entry is not None and entry[0] is message:
            return entry[1], entry[2]
        redactor = self._redactor
        if redactor is None:
            red = message
        else:
            red = redactor.redact(([message],))[0][0]
        known = self._known
        size = canonical_size_known(red, known) if known else canonical_size(red)
        self._cache[id(message)] = (message, red, size)
        return red, size

    def take_sizes(self, known: dict[int, tuple[Message, Message, int]]) -> None:
        """Take ``known`` — ``(message, redacted, size)`` by message id, what earlier runs of
        the session measured of the history it was handed
        ([`prism.runtime.run._branch_cache`][prism.runtime.run._branch_cache]) — instead of measuring those messages again."""
        self._previous = known or None

    @property
    def measured(self) -> dict[int, tuple[Message, Message, int]]:
        """What this run measured: ``(message, redacted, size)`` by message id."""
        return self._cache

    # ----------------------------------------------------------------- history prefix

    def _sync(self, upto: int) -> bool:
        """Bring the cached history prefix up to ``upto`` messages; False if it cannot."""
        history = self._history
        cum = self._h_cum
        if history.mutations != self._h_version:
            self._h_red.clear()
            del cum[1:]
            self._h_version = history.mutations
        done = len(cum) - 1
        if upto > len(history):
            return False
        if upto > done:
            total = cum[-1]
            if self._redactor is None:  # sizes only; the request keeps the messages as they are
                cache = self._cache
                known = self._known
                previous = self._previous
                for item in history[done:upto]:
                    entry = cache.get(id(item))
                    if entry is None and previous is not None:
                        entry = previous.get(id(item))
                    if entry is not None and entry[0] is item:
                        size = entry[2]
                    else:
                        size = canonical_size_known(item, known) if known else canonical_size(item)
                        cache[id(item)] = (item, item, size)
                    total += size
                    cum.append(total)
            else:
                red_list = self._h_red
                message = self.message
                for item in history[done:upto]:
                    red, size = message(item)
                    red_list.append(red)
                    total += size
                    cum.append(total)
        return True

    # ----------------------------------------------------------------- whole request

    def _head_of(self, request: ProviderRequest) -> tuple[ProviderRequest, int]:
        """The redacted request without messages and its size, kept while the request's
        model, tools, context, options and metadata are the same objects; the agent's memo
        ([`HeadMemo`][prism.runtime.run._request_codec.HeadMemo]) shares it with the agent's other runs."""
        entry = self._head
        if entry is None or not _same_head(entry[0], request, self._redactor):
            memo = self._memo
            entry = memo.entry if memo is not None else None
            if entry is None or not _same_head(entry[0], request, self._redactor):
                entry = self._measure_head(request)
                if memo is not None:
                    memo.entry = entry
            self._head = entry
        return entry[1]

    def _measure_head(self, request: ProviderRequest) -> _Head:
        key = (
            request.model,
            request.tools,
            request.context,
            request.options,
            request.metadata,
            self._redactor,
        )
        bare = dataclasses.replace(request, messages=(), signal=None)
        red = bare if self._redactor is None else self._redactor.redact(bare)
        return key, (red, canonical_size(red))

    def encode(
        self,
        request: ProviderRequest,
        *,
        prefix_len: int | None = None,
        history_len: int = 0,
        history_version: int | None = None,
    ) -> tuple[ProviderRequest, int]:
        """Redact and measure ``request``.

        Args:
            request: The request after policies and middleware.
            prefix_len: When ``request.messages[prefix_len : prefix_len + history_len]`` are the
                first ``history_len`` live-history messages (as assembled), their cached results
                are reused. ``None``: no layout is known; every message goes through the cache.
            history_len: History messages included after the prefix.
            history_version: [`LiveHistory.mutations`][prism.runtime.run._request_codec.LiveHistory.mutations] when the request was assembled; a
                different current value disables the layout.

        Returns:
            ``(redacted request, UTF-8 size of canonical_json(redacted.to_dict()))``; without a
            redactor the request itself is returned.
        """
        messages = request.messages
        head, size = self._head_of(request)
        count = len(messages)
        if count:
            size += count - 1
        redactor = self._redactor
        message = self.message
        red_messages: tuple[Message, ...]
        if (
            prefix_len is not None
            and history_version == self._history.mutations
            and self._sync(history_len)
        ):
            end = prefix_len + history_len
            if self.hashing:
                self._last = (messages, prefix_len, history_len)
            size += self._h_cum[history_len]
            prefix_red: list[Message] = []
            tail_red: list[Message] = []
            for item in messages[:prefix_len]:
                red, n = message(item)
                prefix_red.append(red)
                size += n
            for item in messages[end:]:
                red, n = message(item)
                tail_red.append(red)
                size += n
            if redactor is None:
                return request, size
            hred = self._h_red
            part = hred if len(hred) == history_len else hred[:history_len]
            red_messages = (*prefix_red, *part, *tail_red)
            if self.hashing:
                self._last = (red_messages, prefix_len, history_len)
        else:
            self._last = None
            red_list: list[Message] = []
            for item in messages:
                red, n = message(item)
                red_list.append(red)
                size += n
            if redactor is None:
                return request, size
            red_messages = tuple(red_list)
        return dataclasses.replace(head, messages=red_messages, signal=request.signal), size

    # ----------------------------------------------------------------- request hashes

    def _digest(self, message: Message) -> bytes:
        entry = self._digests.get(id(message))
        if entry is not None and entry[0] is message:
            return entry[1]
        digest = message_digest(message)
        self._digests[id(message)] = (message, digest)
        return digest

    def _history_chain(self, count: int) -> RunningHash:
        """The running SHA-256 over the digests of the first ``count`` (redacted) live-history
        messages; rebuilt after a non-append mutation of the history."""
        version = self._history.mutations
        chain = self._chain
        if chain is None or chain[0] != version or chain[1] > count:
            chain = (version, 0, new_hash())
        done, hasher = chain[1], chain[2]
        if done < count:
            items = self._h_red if self._redactor is not None else self._history
            digest = self._digest
            for item in items[done:count]:
                hasher.update(digest(item))
            chain = (version, count, hasher)
        self._chain = chain
        return hasher

    def fingerprint(self, request: ProviderRequest) -> tuple[str, str, int, dict[str, JsonValue]]:
        """``(request_hash, head_hash, conversation messages, head)`` of a redacted request, as
        [`prism.request_hash.fingerprint_request()`][prism.request_hash.fingerprint_request] computes them; the request [`encode()`][prism.runtime.run._request_codec.RequestCodec.encode]
        returned last costs O(its new messages), a repeated call for the same request object
        (a retried attempt) nothing."""
        cached = self._fingerprint
        if cached is not None and cached[0] is request:
            return cached[1]
        messages = request.messages
        skip = leading_system_count(messages)
        last = self._last
        digest = self._digest
        if (
            last is not None
            and last[0] is messages
            and last[1] == skip
            and self._history.mutations == self._h_version
        ):
            history_len = last[2]
            hasher = self._history_chain(history_len).copy()
            for item in messages[skip + history_len :]:
                hasher.update(digest(item))
        else:
            hasher = new_hash()
            for item in messages[skip:]:
                hasher.update(digest(item))
        head, head_digest = self._head_fingerprint(request, messages[:skip])
        result = (
            combine_hashes(head_digest, hasher.digest()),
            head_digest,
            len(messages) - skip,
            head,
        )
        self._fingerprint = (request, result)
        return result

    def _head_fingerprint(
        self, request: ProviderRequest, system: tuple[Message, ...]
    ) -> tuple[dict[str, JsonValue], str]:
        """The request's head and its hash, kept while its parts are the same objects."""
        key = (request.model, request.tools, request.context, request.options, *system)
        entry = self._head_fp
        if entry is not None:
            old = entry[0]
            if len(old) == len(key) and all(a is b for a, b in zip(old, key, strict=True)):
                return entry[1], entry[2]
        head = request_head(request)
        digest = head_hash(head)
        self._head_fp = (key, head, digest)
        return head, digest


_Head = tuple[tuple[Any, ...], tuple[ProviderRequest, int]]
"""``(key, (redacted bare request, size))``: the key is the request's model, tools, context,
options and metadata and the redactor, compared by identity."""


def _same_head(key: tuple[Any, ...], request: ProviderRequest, redactor: object) -> bool:
    return (
        key[0] is request.model
        and key[1] is request.tools
        and key[2] is request.context
        and key[3] is request.options
        and key[4] is request.metadata
        and key[5] is redactor
    )


class HeadMemo:
    """The request head an agent's runs measured last, shared by them: its model, tool
    schemas, options and metadata are the agent's own objects from run to run, so a run whose
    request has those same objects (and the same redactor) reuses the size instead of walking
    the tool schemas again. The frozen parts are never mutated, which is what makes the
    identity key enough (as it is within one run). One entry, replaced as a whole (a single
    attribute write, safe between threads)."""

    __slots__ = ("entry",)

    def __init__(self) -> None:
        self.entry: _Head | None = None
