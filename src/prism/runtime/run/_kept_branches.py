"""Branches an agent keeps for the session objects it creates next for the same session id.

A host that serves a conversation per request (a web handler) creates a new session object for
the same session id each time: ``agent.create_session(session_id=...)``. Such an object holds no
branch yet (see [`prism.runtime.run._branch_cache`][prism.runtime.run._branch_cache]), so its
first run would read, decode and copy the whole stored history again.

[`KeptBranches`][prism.runtime.run._kept_branches.KeptBranches] is the agent's memory of the
branches its sessions ended their runs on, by store and session id. A new session object asks
the store only which entry was appended last (``last_entry_id``, one indexed lookup). When that
is the leaf of a kept branch, the branch is exactly the kept entries: entries are append-only
and never change once stored, and a branch is fixed by its leaf. Any other leaf (another
process appended, a ``checkout`` forked) is a miss, and the store is read as before.

Bounded by the number of entries kept (the agent's ``session_cache_entries``): the least
recently used session's branch goes first. Thread-safe (one lock around each step).

Measured worth (``benchmarks/bench_session_history.py``, the "reopened" rows): see that
benchmark's figures in ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Final

from prism.runtime.run._branch_cache import BranchCache
from prism.store import SessionStore

__all__ = ["DEFAULT_SESSION_CACHE_ENTRIES", "KeptBranches"]

DEFAULT_SESSION_CACHE_ENTRIES: Final = 20_000
"""Entries an agent keeps by default across its sessions' branches."""


class _Kept:
    """One kept branch: the first ``length`` entries of ``cache``, ending at ``leaf_id``."""

    __slots__ = ("cache", "leaf_id", "length", "store")

    def __init__(self, store: SessionStore, cache: BranchCache, length: int, leaf_id: str):
        self.store = store
        self.cache = cache
        self.length = length
        self.leaf_id = leaf_id


class KeptBranches:
    """The branches of an agent's sessions, kept between session objects (LRU by session).

    Args:
        max_entries: Most entries kept over all branches (a branch longer than this is not
            kept).
    """

    __slots__ = ("_by_session", "_entries", "_lock", "max_entries")

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._by_session: OrderedDict[tuple[int, str], _Kept] = OrderedDict()
        self._entries = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_session)

    @property
    def entries(self) -> int:
        """Entries kept now, over all branches."""
        return self._entries

    def keep(self, store: SessionStore, session_id: str, cache: BranchCache) -> None:
        """Keep ``cache`` (as it is now: its length and leaf) as the branch of ``session_id`` in
        ``store``, replacing the one kept before; then drop the least recently used branches
        past ``max_entries``. O(1) (plus the drops)."""
        length = cache.length
        leaf_id = cache.leaf_id
        key = (id(store), session_id)
        with self._lock:
            old = self._by_session.pop(key, None)
            if old is not None:
                self._entries -= old.length
            if leaf_id is None or length > self.max_entries:
                return
            self._by_session[key] = _Kept(store, cache, length, leaf_id)
            self._entries += length
            while self._entries > self.max_entries:
                _, dropped = self._by_session.popitem(last=False)
                self._entries -= dropped.length

    def holds(self, store: SessionStore, session_id: str) -> bool:
        """Whether a branch of ``session_id`` in ``store`` is kept (a hint: it may be dropped
        before [`take()`][prism.runtime.run._kept_branches.KeptBranches.take])."""
        kept = self._by_session.get((id(store), session_id))
        return kept is not None and kept.store is store

    def take(self, store: SessionStore, session_id: str, leaf_id: str | None) -> BranchCache | None:
        """A new cache of the kept branch of ``session_id`` in ``store`` when it ends at
        ``leaf_id``, else ``None``. O(branch) copies of references."""
        if leaf_id is None:
            return None
        key = (id(store), session_id)
        with self._lock:
            kept = self._by_session.get(key)
            # the kept entry holds its store, so the id cannot belong to another store
            if kept is None or kept.store is not store or kept.leaf_id != leaf_id:
                return None
            self._by_session.move_to_end(key)
            return kept.cache.prefix(kept.length, leaf_id)
