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

from collections.abc import Sequence
from typing import Final

from prism.store import SessionEntry, copy_entry

__all__ = ["MIN_ENTRIES", "BranchCache"]

MIN_ENTRIES: Final = 32
"""The shortest branch a session keeps between its runs."""


class BranchCache:
    """The entries root → leaf of the branch a session continues.

    Args:
        entries: The branch as a store read returned it (the cache keeps these objects).
    """

    __slots__ = ("_entries", "_shared", "leaf_id")

    def __init__(self, entries: Sequence[SessionEntry]) -> None:
        self._entries: list[SessionEntry] = list(entries)
        self._shared = bytearray(len(self._entries))
        """``1`` for an entry found to hold no mutable container (handed out as it is)."""
        self.leaf_id: str | None = self._entries[-1].id if self._entries else None
        """The id of the last entry (``None``: the branch is empty, a new conversation)."""

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, entry: SessionEntry, owned: bool, /) -> None:
        """Add ``entry``, just appended under the last one. ``owned``: nothing else holds its
        mutable containers (the runtime's own copies); else the cache keeps a copy."""
        self._entries.append(entry if owned else copy_entry(entry))
        self._shared.append(0)
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
            copy = copy_entry(entry)
            if copy is entry:
                shared[index] = 1
            keep(copy)
        return out
