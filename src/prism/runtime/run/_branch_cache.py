"""The session's current branch kept between runs, so that a run does not read it again.

A run starts from the entries of its session's branch, root → leaf. Session entries are
append-only and never change once stored, and the branch a session continues is the one that
ends at *its* leaf (another writer's later entries are on another branch). So while the leaf is
the one the session last read or appended, the branch is exactly the entries the session already
holds. [`BranchCache`][prism.runtime.run._branch_cache.BranchCache] keeps them: the first read
of a session object fills it from the store, and every append the session makes extends it. A
run then starts in O(branch) list work instead of reading, decoding and copying every stored
entry again (one SQL query and one JSON decode per entry for a database store).

Only a branch of at least ``MIN_ENTRIES`` entries is kept: a shorter one costs little to read,
and a session that holds none takes no more memory than before (a completed ten-turn session
stores twenty entries).

The cache is keyed by the leaf: it answers only while its last entry is the session's leaf. A
leaf moved any other way (``checkout``, a durable resume, held appends given up) misses, and
the branch is read from the store again.

What a reader gets is what a store read gives: entries it may keep and change without changing
what the session holds. An entry holding a mutable container (tool arguments, a result,
metadata, custom data) is copied for every reader; an entry with none (a text message) is
shared, as the stores share frozen values. The cache holds copies nobody else references: an
entry the runtime hands over (built from its own private copies of the payloads) as it is, any
other entry copied when it is added.

Measured worth (``benchmarks/bench_session_history.py``, one more run on a session of N stored
entries, process CPU time): see that benchmark's figures in ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from prism.store import SessionEntry, copy_entry
from prism.types import Message, TextContent

__all__ = ["MIN_ENTRIES", "BranchCache"]

MIN_ENTRIES: Final = 32
"""The shortest branch a session keeps between its runs."""


_Sized = tuple[Message, Message, int]
"""``(message, redacted message, canonical size)``, as the request codec keeps them."""


def _only_text(entry: SessionEntry) -> bool:
    """Whether ``entry`` is a message of plain text parts only, without metadata: nothing in it
    can change (the common case, told without a walk over it)."""
    message = entry.message
    if (
        message is None
        or message.metadata is not None
        or entry.data is not None
        or entry.metadata is not None
        or entry.model is not None
        or entry.previous_model is not None
    ):
        return False
    content = message.content
    if type(content) is not tuple:
        return False
    for part in content:
        if type(part) is not TextContent or type(part.text) is not str:
            return False
    return True


class BranchCache:
    """The entries root → leaf of the branch a session continues, with the byte sizes of their
    messages once a run measured them.

    Args:
        entries: The branch as a store read returned it (the cache keeps these objects).
    """

    __slots__ = ("_entries", "_handed", "_shared", "_sized_for", "_sizes", "leaf_id")

    def __init__(self, entries: Sequence[SessionEntry]) -> None:
        self._entries: list[SessionEntry] = list(entries)
        self._shared = bytearray(len(self._entries))
        """``1`` for an entry found to hold no mutable container (handed out as it is)."""
        self._sizes: list[tuple[Message | None, int] | None] = [None] * len(self._entries)
        """Per entry, once measured: its message's redacted form (kept for a shared entry
        only) and canonical size, under the redactor ``_sized_for``."""
        self._sized_for: object = None
        self._handed: list[Message | None] = []
        """Per entry, the message the last run was handed when its size was not known yet."""
        self.leaf_id: str | None = self._entries[-1].id if self._entries else None
        """The id of the last entry (``None``: the branch is empty, a new conversation)."""

    @property
    def length(self) -> int:
        """The number of entries held."""
        return len(self._entries)

    def prefix(self, length: int, leaf_id: str, /) -> BranchCache | None:
        """A new cache of the first ``length`` entries, with what was measured of them, when
        the last of them is ``leaf_id``; else ``None``.

        Entries are only ever added at the end, so the first ``length`` entries of a cache
        stay the branch that ended at its leaf when it had ``length`` entries, whatever the
        session that holds it appended since. O(length) copies of references."""
        entries = self._entries
        if length < 1 or length > len(entries) or entries[length - 1].id != leaf_id:
            return None
        cache = BranchCache(entries[:length])
        cache._shared = self._shared[:length]
        cache._sizes = self._sizes[:length]
        cache._sized_for = self._sized_for
        return cache

    def add(self, entry: SessionEntry, owned: bool, /) -> None:
        """Add ``entry``, just appended under the last one. ``owned``: nothing else holds its
        mutable containers (the runtime's own copies); else the cache keeps a copy."""
        self._entries.append(entry if owned else copy_entry(entry))
        self._shared.append(0)
        self._sizes.append(None)
        self.leaf_id = entry.id

    def read(self) -> list[SessionEntry]:
        """The branch root → leaf, as a store read gives it: a new list, each entry with a
        mutable container copied, the others shared. O(branch), plus the copies."""
        entries = self._entries
        shared = self._shared
        out: list[SessionEntry] = []
        keep = out.append
        for index, entry in enumerate(entries):
            if shared[index]:
                keep(entry)
                continue
            if _only_text(entry):
                shared[index] = 1
                keep(entry)
                continue
            copy = copy_entry(entry)
            if copy is entry:
                shared[index] = 1
            keep(copy)
        return out

    def read_for_run(self, redactor: object) -> tuple[list[SessionEntry], dict[int, _Sized]]:
        """[`read()`][prism.runtime.run._branch_cache.BranchCache.read], for a run redacting with ``redactor``, and the sizes earlier runs
        measured of the messages handed out, by message id. A shared message's size and
        redacted form are taken as they are (nothing can change it); a copy's size is taken
        without a redactor (the copy equals what was measured, and is its own redacted form).
        [`record()`][prism.runtime.run._branch_cache.BranchCache.record] keeps what this run measures."""
        out = self.read()
        if redactor is not self._sized_for:
            self._sizes = [None] * len(self._entries)
            self._sized_for = redactor
        sizes = self._sizes
        shared = self._shared
        handed: list[Message | None] = []
        note = handed.append
        known: dict[int, _Sized] = {}
        for index, entry in enumerate(out):
            message = entry.message
            sized = sizes[index]
            if sized is None or message is None:
                note(message)
                continue
            note(None)
            if shared[index]:
                red = sized[0]
                known[id(message)] = (message, message if red is None else red, sized[1])
            elif redactor is None:
                known[id(message)] = (message, message, sized[1])
        self._handed = handed
        return out, known

    def record(self, redactor: object, measured: Mapping[int, _Sized]) -> None:
        """Keep the sizes a run measured (``measured``: the request codec's, by message id) of
        the messages [`read_for_run()`][prism.runtime.run._branch_cache.BranchCache.read_for_run] handed it."""
        handed, self._handed = self._handed, []
        if redactor is not self._sized_for:
            return
        sizes = self._sizes
        shared = self._shared
        for index, message in enumerate(handed):
            if message is None:
                continue
            hit = measured.get(id(message))
            if hit is None or hit[0] is not message:
                continue
            if shared[index]:
                sizes[index] = (None if hit[1] is message else hit[1], hit[2])
            elif redactor is None:
                sizes[index] = (None, hit[2])
