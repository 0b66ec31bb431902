"""Session store: the store protocol, the memory store and branch reading.

* [`SessionStore`][prism.store.SessionStore] — the append-only source of truth for a session's entries, with the
  optional [`BranchReadingSessionStore`][prism.store.BranchReadingSessionStore] and
  [`LastEntrySessionStore`][prism.store.LastEntrySessionStore] refinements;
* [`MemorySessionStore`][prism.store.MemorySessionStore] — branch-tip compare-and-set, explicit forks, idempotent appends;
  O(1) appends, O(branch) ``read_branch``;
* [`read_branch()`][prism.store.read_branch], [`walk_branch()`][prism.store.walk_branch], [`history_from_branch()`][prism.store.history_from_branch],
  [`rebuild_history()`][prism.store.rebuild_history], [`current_model()`][prism.store.current_model] and [`drop_trailing_input()`][prism.store.drop_trailing_input] — what the
  runtime needs to rebuild the live history once per leg.

The entries themselves live in [`prism.session_entry`][prism.session_entry] and compaction in
[`prism.compaction`][prism.compaction]; their names are re-exported here so that ``prism.store`` keeps offering
everything a store user needs.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Protocol, runtime_checkable

from prism._fast_entry_copy import clone, rebuild_dataclass
from prism._util import maybe_await
from prism.compaction import NO_OLDER_ENTRIES_SUMMARY as NO_OLDER_ENTRIES_SUMMARY
from prism.compaction import CompactionInput as CompactionInput
from prism.compaction import CompactionOptions as CompactionOptions
from prism.compaction import CompactionResult as CompactionResult
from prism.compaction import CompactionStrategy as CompactionStrategy
from prism.compaction import CompactionTrigger as CompactionTrigger
from prism.compaction import compaction_entry as compaction_entry
from prism.compaction import compaction_strategy_name as compaction_strategy_name
from prism.compaction import compaction_window, latest_compaction_index
from prism.compaction import compute_compaction as compute_compaction
from prism.compaction import default_compaction_strategy as default_compaction_strategy
from prism.compaction import resolve_compaction_options as resolve_compaction_options
from prism.compaction import should_auto_compact as should_auto_compact
from prism.compaction import validate_compaction_options as validate_compaction_options
from prism.errors import SessionAppendConflictError
from prism.session_entry import SessionEntry as SessionEntry
from prism.session_entry import SessionEntryKind as SessionEntryKind
from prism.session_entry import new_session_entry as new_session_entry
from prism.types import Message, ModelConfig

__all__ = [
    "NO_OLDER_ENTRIES_SUMMARY",
    "BranchReadingSessionStore",
    "LastEntrySessionStore",
    "CompactionInput",
    "CompactionOptions",
    "CompactionResult",
    "CompactionStrategy",
    "CompactionTrigger",
    "MemorySessionStore",
    "SessionEntry",
    "SessionEntryKind",
    "SessionStore",
    "compaction_entry",
    "compaction_strategy_name",
    "compute_compaction",
    "current_model",
    "default_compaction_strategy",
    "drop_trailing_input",
    "history_from_branch",
    "new_session_entry",
    "read_branch",
    "rebuild_history",
    "resolve_compaction_options",
    "should_auto_compact",
    "validate_compaction_options",
    "walk_branch",
]


# --------------------------------------------------------------------------- protocol


@runtime_checkable
class SessionStore(Protocol):
    """The append-only source of truth for transcript entries.

    ``append`` options are keyword-only. With ``expected_parent_id`` the append is a
    compare-and-set on the branch tip; ``fork=True`` lets that parent already have children;
    ``idempotency_key`` makes a repeated ``(session_id, idempotency_key, expected_parent_id)``
    append fail. Conflicts raise ``SessionAppendConflictError``
    (``ERR_PRISM_SESSION_APPEND_CONFLICT``), a duplicate entry id ``ValueError``.
    """

    async def append(
        self,
        entry: SessionEntry,
        *,
        expected_parent_id: str | None = None,
        idempotency_key: str | None = None,
        fork: bool = False,
    ) -> None:
        """Append ``entry`` atomically."""
        ...

    async def list(self, session_id: str) -> Sequence[SessionEntry]:
        """All entries of ``session_id`` in append order."""
        ...


@runtime_checkable
class BranchReadingSessionStore(SessionStore, Protocol):
    """A store that can also read one branch directly (an optional, faster capability)."""

    async def read_branch(self, session_id: str, leaf_id: str) -> Sequence[SessionEntry]:
        """The entries from the root to ``leaf_id``, root first.

        Raises:
            ValueError: ``Unknown session leaf: <id>`` / ``Missing session parent: <id>``.
        """
        ...


@runtime_checkable
class LastEntrySessionStore(SessionStore, Protocol):
    """A store that can also tell a session's last appended entry without reading the others
    (an optional, faster capability: a new session object of an agent that kept the session's
    branch then continues without reading it)."""

    async def last_entry_id(self, session_id: str) -> str | None:
        """The id of the entry ``list(session_id)`` returns last; ``None`` when it returns
        none."""
        ...


# --------------------------------------------------------------------------- copying


_MUTABLE_ENTRY_FIELDS: Final = ("message", "model", "previous_model", "data", "metadata")
"""The fields of an entry that may hold mutable values; the others are strings."""


def copy_entry(entry: SessionEntry) -> SessionEntry:
    """``entry`` with its mutable contents copied (equal to ``copy.deepcopy``): a new
    ``SessionEntry`` when it holds a dict or a list anywhere, else ``entry`` itself (a frozen
    value with nothing mutable in it is shared, not copied)."""
    changed: dict[str, Any] | None = None
    for name in _MUTABLE_ENTRY_FIELDS:
        old = getattr(entry, name)
        if old is not None:
            new = clone(old)
            if new is not old:
                if changed is None:
                    changed = {}
                changed[name] = new
    return entry if changed is None else rebuild_dataclass(entry, changed)


# --------------------------------------------------------------------------- memory store


def _check_append(entry: SessionEntry, expected_parent_id: str | None, fork: bool) -> None:
    """The argument checks of an append (before anything is copied or stored)."""
    if not isinstance(entry, SessionEntry):
        raise TypeError(f"append expects a SessionEntry, got {type(entry).__name__}")
    if fork and expected_parent_id is None:
        raise ValueError("fork=True requires expected_parent_id")


class _SessionData:
    __slots__ = ("by_id", "entries", "idempotency", "parents")

    def __init__(self) -> None:
        self.entries: list[SessionEntry] = []
        self.by_id: dict[str, SessionEntry] = {}
        self.parents: set[str] = set()
        """Ids of entries that have at least one child."""
        self.idempotency: set[tuple[str, str | None]] = set()


class MemorySessionStore:
    """In-memory [`SessionStore`][prism.store.SessionStore] for tests and single-process hosts.

    * a duplicate entry id within a session raises ``ValueError``;
    * with ``expected_parent_id`` the append succeeds only when that entry exists in the same
      session and has no child yet (a branch tip) — else ``SessionAppendConflictError`` and nothing
      is stored; with ``fork=True`` the parent must exist but may have children; ``fork=True``
      without ``expected_parent_id`` raises ``ValueError``;
    * a second append with the same ``(session_id, idempotency_key, expected_parent_id)`` raises
      ``SessionAppendConflictError``;
    * the check and the insert are atomic (no await between them, and a lock for callers on
      other threads); entries are copied on the way in and out, so callers never hold internal
      objects (frozen values without mutable contents are shared, not copied); only
      [`append_owned()`][prism.store.MemorySessionStore.append_owned] keeps what it is handed.

    Costs: ``append`` O(1) (plus copying the entry's mutable contents), ``list`` O(entries),
    ``read_branch`` O(branch length), ``last_entry_id`` O(1).
    """

    __slots__ = ("_lock", "_sessions")

    def __init__(self) -> None:
        self._sessions: dict[str, _SessionData] = {}
        self._lock = threading.Lock()

    async def append(
        self,
        entry: SessionEntry,
        *,
        expected_parent_id: str | None = None,
        idempotency_key: str | None = None,
        fork: bool = False,
    ) -> None:
        """Append ``entry``.

        Raises:
            ValueError: ``fork=True`` without ``expected_parent_id``, or the entry id already
                exists in the session.
            TypeError: ``entry`` is not a ``SessionEntry``.
            SessionAppendConflictError: ``ERR_PRISM_SESSION_APPEND_CONFLICT`` — the expected
                parent is missing from the session, is not a branch tip (without ``fork``), or
                the idempotent append was already made.
        """
        _check_append(entry, expected_parent_id, fork)
        self._insert(
            copy_entry(entry),
            expected_parent_id=expected_parent_id,
            idempotency_key=idempotency_key,
            fork=fork,
        )

    async def append_owned(
        self,
        entry: SessionEntry,
        *,
        expected_parent_id: str | None = None,
        idempotency_key: str | None = None,
        fork: bool = False,
    ) -> None:
        """Append ``entry`` as it is, without copying it: the caller hands it over.

        For a caller that holds the only references to the entry's mutable containers (the
        runtime, for an entry built from its own private copies of tool arguments and results):
        the store keeps the object itself. Options, checks and errors are those of
        [`append()`][prism.store.MemorySessionStore.append]; a subclass that overrides ``append``
        receives the entry through it instead.
        """
        if type(self).append is not MemorySessionStore.append:
            await self.append(
                entry,
                expected_parent_id=expected_parent_id,
                idempotency_key=idempotency_key,
                fork=fork,
            )
            return
        _check_append(entry, expected_parent_id, fork)
        self._insert(
            entry,
            expected_parent_id=expected_parent_id,
            idempotency_key=idempotency_key,
            fork=fork,
        )

    def _insert(
        self,
        stored: SessionEntry,
        *,
        expected_parent_id: str | None,
        idempotency_key: str | None,
        fork: bool,
    ) -> None:
        """The compare-and-set and the insert of ``stored``, atomic under the lock."""
        sid = stored.session_id
        with self._lock:
            data = self._sessions.get(sid)
            if expected_parent_id is not None:
                if data is None or expected_parent_id not in data.by_id:
                    raise SessionAppendConflictError(
                        f"Session append conflict: expected parent {expected_parent_id} does not "
                        f"exist in session {sid}"
                    )
                if not fork and expected_parent_id in data.parents:
                    raise SessionAppendConflictError(
                        f"Session append conflict: expected parent {expected_parent_id} is not a "
                        "branch tip"
                    )
            key: tuple[str, str | None] | None = None
            if idempotency_key is not None:
                key = (idempotency_key, expected_parent_id)
                if data is not None and key in data.idempotency:
                    raise SessionAppendConflictError(
                        f"Session append conflict: duplicate idempotent append ({idempotency_key})"
                    )
            if data is not None and stored.id in data.by_id:
                raise ValueError(f"Duplicate session entry id: {stored.id}")
            if data is None:
                data = self._sessions[sid] = _SessionData()
            data.entries.append(stored)
            data.by_id[stored.id] = stored
            if stored.parent_id is not None:
                data.parents.add(stored.parent_id)
            if key is not None:
                data.idempotency.add(key)

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        """Copies of every entry of ``session_id``, in append order (``[]`` when unknown)."""
        with self._lock:
            data = self._sessions.get(session_id)
            entries = tuple(data.entries) if data is not None else ()
        return [copy_entry(e) for e in entries]

    async def last_entry_id(self, session_id: str) -> str | None:
        """The id of the entry of ``session_id`` appended last (the leaf a new session object
        continues from); ``None`` when the session has no entry. O(1)."""
        with self._lock:
            data = self._sessions.get(session_id)
            return data.entries[-1].id if data is not None and data.entries else None

    async def read_branch(self, session_id: str, leaf_id: str) -> builtins.list[SessionEntry]:
        """Copies of the entries from the root to ``leaf_id``, root first; O(branch).

        Raises:
            ValueError: ``Unknown session leaf: <id>`` or ``Missing session parent: <id>``.
        """
        with self._lock:
            data = self._sessions.get(session_id)
            by_id: Mapping[str, SessionEntry] = data.by_id if data is not None else {}
            branch = _walk(by_id, leaf_id)
        return [copy_entry(e) for e in branch]


# --------------------------------------------------------------------------- branches


def _walk(by_id: Mapping[str, SessionEntry], leaf_id: str) -> list[SessionEntry]:
    entry = by_id.get(leaf_id)
    if entry is None:
        raise ValueError(f"Unknown session leaf: {leaf_id}")
    out = [entry]
    limit = len(by_id)
    while entry.parent_id is not None:
        parent = by_id.get(entry.parent_id)
        if parent is None:
            raise ValueError(f"Missing session parent: {entry.parent_id}")
        out.append(parent)
        if len(out) > limit:
            raise ValueError(f"Session branch has a cycle at entry {parent.id}")
        entry = parent
    out.reverse()
    return out


def walk_branch(entries: Iterable[SessionEntry], leaf_id: str) -> list[SessionEntry]:
    """Return the branch ending at ``leaf_id``, root first, by walking parents.

    Args:
        entries: Entries of one session (``store.list()`` or a branch); O(len(entries)).
        leaf_id: The branch's last entry.

    Raises:
        ValueError: ``Unknown session leaf: <id>`` when ``leaf_id`` is not among ``entries``;
            ``Missing session parent: <id>`` when a parent is missing.
    """
    return _walk({e.id: e for e in entries}, leaf_id)


async def read_branch(
    store: SessionStore, session_id: str, leaf_id: str | None
) -> list[SessionEntry]:
    """Read the branch ending at ``leaf_id`` from ``store``.

    Uses the store's ``read_branch`` when it has one, else ``list`` plus an in-memory walk.

    Returns:
        The entries root→leaf; ``[]`` when ``leaf_id`` is ``None`` (a new conversation).

    Raises:
        ValueError: ``Unknown session leaf: <id>`` / ``Missing session parent: <id>``.
    """
    if leaf_id is None:
        return []
    reader = getattr(store, "read_branch", None)
    if callable(reader):
        return list(await maybe_await(reader(session_id, leaf_id)))
    return walk_branch(await store.list(session_id), leaf_id)


def history_from_branch(branch: Sequence[SessionEntry]) -> tuple[list[Message], list[str]]:
    """Messages and summaries of a branch, root first.

    Without a compaction entry: messages are the ``message`` entries in order and summaries the
    ``summary`` entries. With one, the latest compaction entry rules: messages are the message
    entries after its ``through_entry_id`` plus those whose id is in its ``keep_entry_ids``;
    summaries are its summary followed by the ``summary`` entries after it.

    Args:
        branch: Entries root→leaf ([`read_branch()`][prism.store.read_branch]). O(len(branch)).

    Returns:
        ``(messages, summaries)``.
    """
    ci = latest_compaction_index(branch)
    messages: list[Message] = []
    summaries: list[str] = []
    if ci < 0:
        for e in branch:
            if e.kind == "message" and e.message is not None:
                messages.append(e.message)
            elif e.kind == "summary" and e.summary is not None:
                summaries.append(e.summary)
        return messages, summaries
    through_idx, keep = compaction_window(branch, ci)
    compaction = branch[ci]
    if compaction.summary is not None:
        summaries.append(compaction.summary)
    for i, e in enumerate(branch):
        if e.kind == "message":
            if e.message is not None and (i > through_idx or e.id in keep):
                messages.append(e.message)
        elif e.kind == "summary" and i > ci and e.summary is not None:
            summaries.append(e.summary)
    return messages, summaries


def rebuild_history(
    entries: Iterable[SessionEntry], leaf_id: str | None
) -> tuple[list[Message], list[str]]:
    """Rebuild the live history at ``leaf_id``, as a run leg does before its first turn.

    Args:
        entries: The session's entries (``store.list()``) or the branch itself.
        leaf_id: The session's leaf; ``None`` gives empty history.

    Returns:
        ``(messages, summaries)`` per [`history_from_branch()`][prism.store.history_from_branch].

    Raises:
        ValueError: ``Unknown session leaf: <id>`` / ``Missing session parent: <id>``.
    """
    if leaf_id is None:
        return [], []
    return history_from_branch(walk_branch(entries, leaf_id))


def current_model(branch: Sequence[SessionEntry]) -> ModelConfig | None:
    """The ``model`` of the last ``model_change`` entry on ``branch``, or ``None``.

    A run leg prefers it over the agent's configured model (the session changed model).
    """
    for e in reversed(branch):
        if e.kind == "model_change" and e.model is not None:
            return e.model
    return None


def drop_trailing_input(history: list[Message], inputs: Sequence[Message]) -> int:
    """Remove from the end of ``history`` the messages equal (by ``to_dict()``) to the inputs.

    After auto-compaction rebuilt the history, the run's input messages — already in
    the store — may be at its end; removing them makes the first turn send the input exactly
    once. Removes the longest suffix of ``history`` that equals a suffix of ``inputs``.

    Args:
        history: The rebuilt live history (modified in place).
        inputs: The run's (redacted) input messages.

    Returns:
        How many messages were removed.
    """
    removed = 0
    h = len(history)
    k = len(inputs)
    while removed < k and removed < h:
        if history[h - 1 - removed].to_dict() != inputs[k - 1 - removed].to_dict():
            break
        removed += 1
    if removed:
        del history[h - removed :]
    return removed
