"""Session store: entries, the store protocol, the memory store, branch rebuild and compaction.

* :class:`SessionEntry` (STORE-1) and the :class:`SessionStore` protocol (STORE-2), with the
  optional :class:`BranchReadingSessionStore` refinement;
* :class:`MemorySessionStore` (STORE-3): branch-tip compare-and-set, explicit forks, idempotent
  appends; O(1) appends, O(branch) ``read_branch``;
* :func:`read_branch`, :func:`walk_branch`, :func:`rebuild_history` (STORE-5) and
  :func:`current_model` — what the runtime needs to rebuild the live history once per leg;
* compaction (STORE-7..9): :class:`CompactionOptions`, :class:`CompactionInput`,
  :class:`CompactionResult`, :func:`default_compaction_strategy`, :func:`compute_compaction`,
  :func:`compaction_entry` and :func:`should_auto_compact`. Event emission around compaction is
  the runtime's (``compaction_started`` / ``compaction_finished``).
"""

from __future__ import annotations

import builtins
import copy
import dataclasses
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, TypeAlias, runtime_checkable

from prism._serde import Serializable
from prism._util import maybe_await, new_id, now_iso
from prism.abort import AbortSignal
from prism.errors import PrismConfigError, SessionAppendConflictError
from prism.middleware import MiddlewareRegistry
from prism.types import (
    ImageContent,
    JsonValue,
    Message,
    ModelConfig,
    TextContent,
    ToolCallContent,
    ToolResultContent,
    _Options,
)

__all__ = [
    "NO_OLDER_ENTRIES_SUMMARY",
    "BranchReadingSessionStore",
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

SessionEntryKind: TypeAlias = Literal["message", "model_change", "compaction", "summary", "custom"]
"""What a session entry records (STORE-1)."""

CompactionTrigger: TypeAlias = Literal["auto", "manual"]
"""Why a compaction ran: setup step 11 (``auto``) or ``session.compact()`` (``manual``)."""

NO_OLDER_ENTRIES_SUMMARY: Final = "No older session entries to summarize."
"""Summary of the default strategy when nothing is older than the kept messages (STORE-7)."""

_REDACTED: Final = "[REDACTED]"
_ELLIPSIS: Final = "…"


# --------------------------------------------------------------------------- entries (STORE-1)


@dataclass(frozen=True, slots=True)
class SessionEntry(Serializable):
    """One append-only record of a session transcript (STORE-1).

    Entries form a tree through ``parent_id``; a branch is the path from a root to a leaf.
    """

    id: str
    """Entry id, ``entry_<32 hex>`` when generated (ARCH-13)."""
    session_id: str
    """Owning session."""
    kind: SessionEntryKind
    """``message``, ``model_change``, ``compaction``, ``summary`` or ``custom``."""
    timestamp: str
    """ISO-8601 UTC time of creation with milliseconds and ``Z``."""
    parent_id: str | None = None
    """Previous entry on the branch; ``None`` for a root."""
    run_id: str | None = None
    """Run that appended the entry (``None`` outside a run)."""
    message: Message | None = None
    """The message of a ``message`` entry."""
    model: ModelConfig | None = None
    """The new model of a ``model_change`` entry."""
    previous_model: ModelConfig | None = None
    """The model in effect before a ``model_change`` entry."""
    summary: str | None = None
    """The summary text of a ``compaction`` or ``summary`` entry."""
    data: Mapping[str, JsonValue] | None = None
    """Kind-specific data; for ``compaction``: ``through_entry_id``, ``keep_entry_ids``,
    ``strategy`` and ``trigger`` (STORE-7, STORE-9)."""
    metadata: Mapping[str, JsonValue] | None = None
    """Host metadata."""


def new_session_entry(
    kind: SessionEntryKind,
    *,
    session_id: str,
    parent_id: str | None = None,
    run_id: str | None = None,
    message: Message | None = None,
    model: ModelConfig | None = None,
    previous_model: ModelConfig | None = None,
    summary: str | None = None,
    data: Mapping[str, JsonValue] | None = None,
    metadata: Mapping[str, JsonValue] | None = None,
    id: str | None = None,
    timestamp: str | None = None,
) -> SessionEntry:
    """Build an entry with a generated ``entry_…`` id and the current timestamp (STORE-4).

    Args:
        kind: The entry kind.
        session_id: Owning session.
        parent_id: The session's current leaf (``None`` makes a root).
        run_id: The appending run, if any.
        message: For ``message`` entries.
        model: For ``model_change`` entries.
        previous_model: For ``model_change`` entries.
        summary: For ``compaction``/``summary`` entries.
        data: Kind-specific data.
        metadata: Host metadata.
        id: Explicit id (default ``new_id("entry")``).
        timestamp: Explicit timestamp (default ``now_iso()``).
    """
    return SessionEntry(
        id=id if id is not None else new_id("entry"),
        session_id=session_id,
        kind=kind,
        timestamp=timestamp if timestamp is not None else now_iso(),
        parent_id=parent_id,
        run_id=run_id,
        message=message,
        model=model,
        previous_model=previous_model,
        summary=summary,
        data=data,
        metadata=metadata,
    )


# --------------------------------------------------------------------------- protocol (STORE-2)


@runtime_checkable
class SessionStore(Protocol):
    """The append-only source of truth for transcript entries (STORE-2).

    ``append`` options are keyword-only. With ``expected_parent_id`` the append is a
    compare-and-set on the branch tip; ``fork=True`` lets that parent already have children;
    ``idempotency_key`` makes a repeated ``(session_id, idempotency_key, expected_parent_id)``
    append fail. Conflicts raise ``SessionAppendConflictError``
    (``ERR_PRISM_SESSION_APPEND_CONFLICT``), a duplicate entry id ``ValueError`` (STORE-3).
    """

    async def append(
        self,
        entry: SessionEntry,
        *,
        expected_parent_id: str | None = None,
        idempotency_key: str | None = None,
        fork: bool = False,
    ) -> None:
        """Append ``entry`` atomically (STORE-3)."""
        ...

    async def list(self, session_id: str) -> Sequence[SessionEntry]:
        """All entries of ``session_id`` in append order."""
        ...


@runtime_checkable
class BranchReadingSessionStore(SessionStore, Protocol):
    """A store that can read one branch directly (the optional member of STORE-2)."""

    async def read_branch(self, session_id: str, leaf_id: str) -> Sequence[SessionEntry]:
        """The entries from the root to ``leaf_id``, root first.

        Raises:
            ValueError: ``Unknown session leaf: <id>`` / ``Missing session parent: <id>``.
        """
        ...


# --------------------------------------------------------------------------- copying


_ATOMIC: Final = frozenset({str, int, float, bool, type(None)})
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_CLONERS: dict[type, Callable[[Any], Any]] = {}
"""Per-type clone functions, decided once per type (the decision depends only on the type)."""


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _clone(value: Any) -> Any:
    """Deep-copy the mutable parts of ``value``; frozen parts without mutable content are shared.

    Atomic values and subclasses of ``str``/``int``/``float`` are returned as they are; dicts and
    lists are copied; a tuple or dataclass instance is rebuilt only when one of its items changed;
    anything else is ``copy.deepcopy``-ed. O(size of the value).
    """
    cloner = _CLONERS.get(type(value))
    if cloner is None:
        cloner = _cloner_for(type(value))
    return cloner(value)


def _same(value: Any) -> Any:
    return value


def _clone_dict(value: dict[Any, Any]) -> dict[Any, Any]:
    atomic = _ATOMIC
    return {k: v if type(v) in atomic else _clone(v) for k, v in value.items()}


def _clone_list(value: list[Any]) -> list[Any]:
    atomic = _ATOMIC
    return [v if type(v) in atomic else _clone(v) for v in value]


def _clone_tuple(value: tuple[Any, ...]) -> tuple[Any, ...]:
    atomic = _ATOMIC
    items: list[Any] | None = None
    for index, item in enumerate(value):
        if type(item) in atomic:
            if items is not None:
                items.append(item)
            continue
        new = _clone(item)
        if items is None:
            if new is item:
                continue
            items = list(value[:index])
        items.append(new)
    return value if items is None else tuple(items)


def _dataclass_cloner(cls: type) -> Callable[[Any], Any]:
    names = _field_names(cls)
    atomic = _ATOMIC

    def clone_dataclass(value: Any) -> Any:
        changed: dict[str, Any] | None = None
        for name in names:
            old = getattr(value, name)
            if type(old) in atomic:
                continue
            new = _clone(old)
            if new is not old:
                if changed is None:
                    changed = {}
                changed[name] = new
        if changed is None:
            return value
        return _rebuild_dataclass(value, changed)

    return clone_dataclass


def _cloner_for(cls: type) -> Callable[[Any], Any]:
    cloner: Callable[[Any], Any]
    if cls in _ATOMIC or issubclass(cls, (str, int, float)):
        cloner = _same  # subclasses (enums, ...) are immutable too
    elif cls is dict:
        cloner = _clone_dict
    elif cls is list:
        cloner = _clone_list
    elif cls is tuple:
        cloner = _clone_tuple
    elif dataclasses.is_dataclass(cls) and not issubclass(cls, type):
        cloner = _dataclass_cloner(cls)
    else:
        cloner = copy.deepcopy
    _CLONERS[cls] = cloner
    return cloner


def _rebuild_dataclass(value: Any, changed: Mapping[str, Any]) -> Any:
    """A new instance of ``type(value)`` with the fields in ``changed`` replaced (no ``__init__``)."""
    cls = type(value)
    rebuild = _REBUILDERS.get(cls)
    if rebuild is None:
        rebuild = _REBUILDERS[cls] = _make_rebuilder(cls)
    return rebuild(value, changed)


_REBUILDERS: dict[type, Callable[[Any, Mapping[str, Any]], Any]] = {}


def _make_rebuilder(cls: type) -> Callable[[Any, Mapping[str, Any]], Any]:
    """Compile, once per class, a straight-line copy of its fields (frozen classes included)."""
    names = _field_names(cls)
    if not all(name.isidentifier() for name in names):  # pragma: no cover - dataclass fields are
        return _rebuild_generic
    lines = ["def rebuild(value, changed):", "    out = _new(_cls)"]
    for name in names:
        lines.append(
            f"    _set(out, {name!r}, changed[{name!r}] if {name!r} in changed else value.{name})"
        )
    lines.append("    return out")
    namespace: dict[str, Any] = {"_new": object.__new__, "_set": object.__setattr__, "_cls": cls}
    exec("\n".join(lines), namespace)  # field names are identifiers
    rebuild: Callable[[Any, Mapping[str, Any]], Any] = namespace["rebuild"]
    return rebuild


def _rebuild_generic(value: Any, changed: Mapping[str, Any]) -> Any:  # pragma: no cover
    out = object.__new__(type(value))
    for name in _field_names(type(value)):
        object.__setattr__(out, name, changed[name] if name in changed else getattr(value, name))
    return out


def _copy_entry(entry: SessionEntry) -> SessionEntry:
    """A new ``SessionEntry`` object whose mutable contents are copied (STORE-3)."""
    changed: dict[str, Any] = {}
    for name in ("message", "model", "previous_model", "data", "metadata"):
        old = getattr(entry, name)
        if old is not None:
            new = _clone(old)
            if new is not old:
                changed[name] = new
    result: SessionEntry = _rebuild_dataclass(entry, changed)
    return result


# --------------------------------------------------------------------------- memory store (STORE-3)


class _SessionData:
    __slots__ = ("by_id", "entries", "idempotency", "parents")

    def __init__(self) -> None:
        self.entries: list[SessionEntry] = []
        self.by_id: dict[str, SessionEntry] = {}
        self.parents: set[str] = set()
        """Ids of entries that have at least one child."""
        self.idempotency: set[tuple[str, str | None]] = set()


class MemorySessionStore:
    """In-memory :class:`SessionStore` for tests and single-process hosts (STORE-3).

    * a duplicate entry id within a session raises ``ValueError``;
    * with ``expected_parent_id`` the append succeeds only when that entry exists in the same
      session and has no child yet (a branch tip) — else ``SessionAppendConflictError`` and nothing
      is stored; with ``fork=True`` the parent must exist but may have children; ``fork=True``
      without ``expected_parent_id`` raises ``ValueError``;
    * a second append with the same ``(session_id, idempotency_key, expected_parent_id)`` raises
      ``SessionAppendConflictError``;
    * the check and the insert are atomic (no await between them, and a lock for callers on
      other threads); entries are copied on the way in and out, so callers never hold internal
      objects.

    Costs: ``append`` O(1) (plus copying the entry's mutable contents), ``list`` O(entries),
    ``read_branch`` O(branch length).
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
        """Append ``entry`` (STORE-3).

        Raises:
            ValueError: ``fork=True`` without ``expected_parent_id``, or the entry id already
                exists in the session.
            TypeError: ``entry`` is not a :class:`SessionEntry`.
            SessionAppendConflictError: ``ERR_PRISM_SESSION_APPEND_CONFLICT`` — the expected
                parent is missing from the session, is not a branch tip (without ``fork``), or
                the idempotent append was already made.
        """
        if not isinstance(entry, SessionEntry):
            raise TypeError(f"append expects a SessionEntry, got {type(entry).__name__}")
        if fork and expected_parent_id is None:
            raise ValueError("fork=True requires expected_parent_id")
        stored = _copy_entry(entry)
        sid = entry.session_id
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
                        f"Session append conflict: duplicate idempotent append "
                        f"({idempotency_key})"
                    )
            if data is not None and entry.id in data.by_id:
                raise ValueError(f"Duplicate session entry id: {entry.id}")
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
        return [_copy_entry(e) for e in entries]

    async def read_branch(
        self, session_id: str, leaf_id: str
    ) -> builtins.list[SessionEntry]:
        """Copies of the entries from the root to ``leaf_id``, root first; O(branch).

        Raises:
            ValueError: ``Unknown session leaf: <id>`` or ``Missing session parent: <id>``.
        """
        with self._lock:
            data = self._sessions.get(session_id)
            by_id: Mapping[str, SessionEntry] = data.by_id if data is not None else {}
            branch = _walk(by_id, leaf_id)
        return [_copy_entry(e) for e in branch]


# --------------------------------------------------------------------------- branches (STORE-5)


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
    """Return the branch ending at ``leaf_id``, root first, by walking parents (STORE-5).

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
    """Read the branch ending at ``leaf_id`` from ``store`` (STORE-2, STORE-5).

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


def _latest_compaction(branch: Sequence[SessionEntry]) -> int:
    for i in range(len(branch) - 1, -1, -1):
        if branch[i].kind == "compaction":
            return i
    return -1


def _compaction_window(
    branch: Sequence[SessionEntry], ci: int
) -> tuple[int, frozenset[str]]:
    """``(index of through_entry_id, keep ids)`` of the compaction entry at ``ci``.

    A missing ``through_entry_id`` (nothing summarised) gives -1; one not found on the branch
    falls back to the compaction entry itself.
    """
    data = branch[ci].data or {}
    through = data.get("through_entry_id")
    keep_raw = data.get("keep_entry_ids") or ()
    keep = frozenset(k for k in keep_raw if isinstance(k, str)) if isinstance(
        keep_raw, (list, tuple)
    ) else frozenset()
    if not isinstance(through, str):
        return -1, keep
    for i in range(ci, -1, -1):
        if branch[i].id == through:
            return i, keep
    return ci, keep


def history_from_branch(branch: Sequence[SessionEntry]) -> tuple[list[Message], list[str]]:
    """Messages and summaries of a branch, root first (STORE-5).

    Without a compaction entry: messages are the ``message`` entries in order and summaries the
    ``summary`` entries. With one, the latest compaction entry rules: messages are the message
    entries after its ``through_entry_id`` plus those whose id is in its ``keep_entry_ids``;
    summaries are its summary followed by the ``summary`` entries after it.

    Args:
        branch: Entries root→leaf (:func:`read_branch`). O(len(branch)).

    Returns:
        ``(messages, summaries)``.
    """
    ci = _latest_compaction(branch)
    messages: list[Message] = []
    summaries: list[str] = []
    if ci < 0:
        for e in branch:
            if e.kind == "message" and e.message is not None:
                messages.append(e.message)
            elif e.kind == "summary" and e.summary is not None:
                summaries.append(e.summary)
        return messages, summaries
    through_idx, keep = _compaction_window(branch, ci)
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
    """Rebuild the live history at ``leaf_id`` (STORE-5, RUN-11 step 5).

    Args:
        entries: The session's entries (``store.list()``) or the branch itself.
        leaf_id: The session's leaf; ``None`` gives empty history.

    Returns:
        ``(messages, summaries)`` per :func:`history_from_branch`.

    Raises:
        ValueError: ``Unknown session leaf: <id>`` / ``Missing session parent: <id>``.
    """
    if leaf_id is None:
        return [], []
    return history_from_branch(walk_branch(entries, leaf_id))


def current_model(branch: Sequence[SessionEntry]) -> ModelConfig | None:
    """The ``model`` of the last ``model_change`` entry on ``branch``, or ``None`` (RUN-11 step 7)."""
    for e in reversed(branch):
        if e.kind == "model_change" and e.model is not None:
            return e.model
    return None


def drop_trailing_input(history: list[Message], inputs: Sequence[Message]) -> int:
    """Remove from the end of ``history`` the messages equal (by ``to_dict()``) to the inputs.

    After auto-compaction rebuilt the history (STORE-8), the run's input messages — already in
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


# --------------------------------------------------------------------------- compaction options


@dataclass(frozen=True, slots=True)
class CompactionResult(_Options):
    """The outcome of a compaction strategy (STORE-9)."""

    summary: str
    """Summary text stored in the ``compaction`` entry."""
    through_entry_id: str | None = None
    """Last summarised branch entry; ``None`` when nothing was summarised."""
    keep_entry_ids: tuple[str, ...] = ()
    """Ids of message entries kept verbatim."""

    def __post_init__(self) -> None:
        if not isinstance(self.keep_entry_ids, tuple):
            object.__setattr__(self, "keep_entry_ids", tuple(self.keep_entry_ids))


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionOptions(_Options):
    """Compaction settings of an agent, a run or ``session.compact()`` (STORE-7).

    Validated where used (:func:`validate_compaction_options`).
    """

    threshold_entries: int | None = None
    """Auto-compact at run setup when the branch has more entries than this; ``None`` disables
    auto-compaction (``session.compact()`` still works)."""
    keep_recent_entries: int = 8
    """Message entries kept verbatim by the default strategy (≥ 0)."""
    max_summary_chars: int = 4000
    """Longest default summary in characters (≥ 1); longer ones are cut and end with ``…``."""
    strategy: CompactionStrategy | None = field(default=None, metadata={"serialize": False})
    """Custom strategy (sync or async); ``None`` means :func:`default_compaction_strategy`.
    Not serialised."""
    secrets: tuple[str, ...] = ()
    """Strings replaced by ``[REDACTED]`` in the default summary."""

    def __post_init__(self) -> None:
        if isinstance(self.secrets, list):
            object.__setattr__(self, "secrets", tuple(self.secrets))

    @classmethod
    def coerce(cls, value: CompactionOptions | Mapping[str, Any]) -> CompactionOptions:
        """Return ``value`` itself, or the options built from a snake_case mapping (ARCH-9).

        The mapping may carry ``strategy`` (a host callable, never serialised). Values are not
        validated here (:func:`validate_compaction_options` does).

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — not a mapping, or an unknown key (a
                camelCase key is reported with its snake_case name).
        """
        if isinstance(value, CompactionOptions):
            return value
        if not isinstance(value, Mapping):
            raise PrismConfigError(
                "CompactionOptions expects a CompactionOptions or a mapping, "
                f"got {type(value).__name__}"
            )
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = [str(k) for k in value if k not in names]
        if unknown:
            raise cls._unknown_keys_error(unknown)
        return cls(**{str(k): v for k, v in value.items()})


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionInput(_Options):
    """What a compaction strategy receives (STORE-9)."""

    session_id: str
    """The session being compacted."""
    entries: tuple[SessionEntry, ...]
    """The branch, root→leaf."""
    options: CompactionOptions
    """The effective compaction options."""
    signal: AbortSignal | None = field(default=None, metadata={"serialize": False})
    """The run signal; ``None`` outside a run (``session.compact()``)."""

    def __post_init__(self) -> None:
        if not isinstance(self.entries, tuple):
            object.__setattr__(self, "entries", tuple(self.entries))


CompactionStrategy: TypeAlias = Callable[
    [CompactionInput], "CompactionResult | Awaitable[CompactionResult]"
]
"""``strategy(input) -> CompactionResult`` (sync or async, STORE-9). A custom strategy must keep
a tool call and its results on the same side of the boundary. Its stored name is its ``name``
attribute, else its ``__name__``."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_compaction_options(
    value: CompactionOptions | Mapping[str, Any], *, label: str = "compaction"
) -> CompactionOptions:
    """Coerce and check compaction options.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown key; ``threshold_entries`` not
            ``None`` or an ``int`` ≥ 1; ``keep_recent_entries`` not an ``int`` ≥ 0;
            ``max_summary_chars`` not an ``int`` ≥ 1; ``strategy`` not ``None`` or callable;
            ``secrets`` not a sequence of ``str``.
    """
    options = CompactionOptions.coerce(value)
    threshold: Any = options.threshold_entries
    if threshold is not None and (not _is_int(threshold) or threshold < 1):
        raise PrismConfigError(
            f"{label}.threshold_entries must be None or an int >= 1, got {threshold!r}"
        )
    keep: Any = options.keep_recent_entries
    if not _is_int(keep) or keep < 0:
        raise PrismConfigError(f"{label}.keep_recent_entries must be an int >= 0, got {keep!r}")
    chars: Any = options.max_summary_chars
    if not _is_int(chars) or chars < 1:
        raise PrismConfigError(f"{label}.max_summary_chars must be an int >= 1, got {chars!r}")
    if options.strategy is not None and not callable(options.strategy):
        raise PrismConfigError(f"{label}.strategy must be None or callable")
    secrets: Any = options.secrets
    if isinstance(secrets, (str, bytes)) or not isinstance(secrets, Iterable) or not all(
        isinstance(s, str) for s in secrets
    ):
        raise PrismConfigError(f"{label}.secrets must be a sequence of str")
    if not isinstance(secrets, tuple):
        options = dataclasses.replace(options, secrets=tuple(secrets))
    return options


def resolve_compaction_options(
    agent: CompactionOptions | Mapping[str, Any] | Literal[False] | None,
    run: CompactionOptions | Mapping[str, Any] | Literal[False] | None = None,
) -> CompactionOptions | None:
    """Resolve the effective compaction options from the agent and run layers (RUN-6).

    Run ``False`` disables compaction; a run :class:`CompactionOptions` replaces the agent value;
    a run mapping overrides only the keys it names on top of the agent value (or of the defaults
    when the agent sets none or ``False``); run ``None`` takes the agent value. When neither layer
    sets compaction the result is ``None`` (no compaction). ``session.compact(**options)`` passes
    its keyword arguments as the run mapping.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — a layer is invalid or of another type.
    """
    base: CompactionOptions | None
    if agent is None or agent is False:
        base = None
    elif isinstance(agent, (CompactionOptions, Mapping)):
        base = validate_compaction_options(agent)
    else:
        raise PrismConfigError(
            "compaction must be a CompactionOptions, a mapping, False or None, "
            f"got {type(agent).__name__}"
        )
    if run is None:
        return base
    if run is False:
        return None
    if isinstance(run, CompactionOptions):
        return validate_compaction_options(run)
    if isinstance(run, Mapping):
        overlay = validate_compaction_options(run)  # reports unknown keys first
        start = base if base is not None else CompactionOptions()
        changes = {k: getattr(overlay, k) for k in run}
        return validate_compaction_options(dataclasses.replace(start, **changes))
    raise PrismConfigError(
        "compaction must be a CompactionOptions, a mapping, False or None, "
        f"got {type(run).__name__}"
    )


# --------------------------------------------------------------------------- default strategy


def _render_message(message: Message) -> str:
    segments: list[str] = []
    text_run: list[str] = []
    for part in message.content:
        if isinstance(part, TextContent):
            text_run.append(part.text)
            continue
        marker: str | None
        if isinstance(part, ToolCallContent):
            marker = f"[tool_call {part.name}]"
        elif isinstance(part, ToolResultContent):
            marker = f"[tool_result {part.name}]"
        elif isinstance(part, ImageContent):
            marker = "[image]"
        else:
            marker = None  # thinking parts are not part of a message's text (CON-10)
        if marker is None:
            continue
        if text_run:
            segments.append("".join(text_run))
            text_run = []
        segments.append(marker)
    if text_run:
        segments.append("".join(text_run))
    return f"{message.role}: {' '.join(s for s in segments if s)}"


def _render_entry(entry: SessionEntry) -> str | None:
    kind = entry.kind
    if kind == "message":
        return _render_message(entry.message) if entry.message is not None else None
    if kind in ("summary", "compaction"):
        return f"summary: {entry.summary or ''}"
    if kind == "model_change":
        model = entry.model
        return f"model changed to {model.provider}/{model.model}" if model is not None else None
    return None  # custom entries are host-private


def _finish_summary(lines: Sequence[str], options: CompactionOptions) -> str:
    if not lines:
        return NO_OLDER_ENTRIES_SUMMARY
    text = "\n".join(lines)
    for secret in options.secrets:
        if secret:
            text = text.replace(secret, _REDACTED)
    limit = options.max_summary_chars
    if len(text) > limit:
        text = text[: max(0, limit - 1)] + _ELLIPSIS
    return text


def default_compaction_strategy(input: CompactionInput) -> CompactionResult:
    """The built-in compaction strategy (STORE-7).

    Keeps the last ``keep_recent_entries`` message entries of the live view, extended backwards
    while the first kept message is a tool-result message (so a result is never kept without the
    assistant message holding its call, nor a call without its results). Every older branch
    entry becomes one line: ``"<role>: <text>"`` for messages (tool calls render as
    ``[tool_call <name>]``, tool results as ``[tool_result <name>]``, images as ``[image]``;
    thinking is left out), ``"summary: …"`` for summary entries, ``"model changed to
    <provider>/<model>"`` for model changes (custom entries are skipped). Lines are joined by
    ``"\\n"``, ``options.secrets`` are replaced by ``[REDACTED]`` and the text is cut to
    ``max_summary_chars`` characters ending with ``…``. With nothing older the summary is
    ``"No older session entries to summarize."`` and ``through_entry_id`` is ``None``.

    When the branch already holds a compaction, the entries that compaction summarised are
    represented by one ``"summary: <its summary>"`` line (first) instead of being listed again.

    Returns:
        ``CompactionResult(summary, through_entry_id, keep_entry_ids)`` where
        ``through_entry_id`` is the branch entry just before the first kept message (the last
        entry when nothing is kept) and ``keep_entry_ids`` the ids of the kept messages.
    """
    branch = input.entries
    options = input.options
    ci = _latest_compaction(branch)
    covered_until = -1
    prior_keep: frozenset[str] = frozenset()
    if ci >= 0:
        covered_until, prior_keep = _compaction_window(branch, ci)

    def visible(i: int, e: SessionEntry) -> bool:
        if i == ci:
            return False  # represented by its own summary line
        if i <= covered_until:
            return e.kind == "message" and e.id in prior_keep
        return True

    view = [(i, e) for i, e in enumerate(branch) if visible(i, e)]
    messages = [(i, e) for i, e in view if e.kind == "message" and e.message is not None]
    keep_n = options.keep_recent_entries
    if keep_n > 0 and messages:
        start = max(0, len(messages) - keep_n)
        while start > 0:
            msg = messages[start][1].message
            if msg is None or msg.role != "tool":
                break
            start -= 1
        kept = messages[start:]
    else:
        kept = []
    first_kept = kept[0][0] if kept else len(branch)

    lines: list[str] = []
    if ci >= 0:
        lines.append(f"summary: {branch[ci].summary or ''}")
    for i, e in view:
        if i < first_kept or (e.kind == "summary" and i > first_kept):
            line = _render_entry(e)
            if line is not None:
                lines.append(line)
    through = branch[first_kept - 1].id if first_kept > 0 else None
    return CompactionResult(
        summary=_finish_summary(lines, options),
        through_entry_id=through,
        keep_entry_ids=tuple(e.id for _, e in kept),
    )


def compaction_strategy_name(strategy: object | None) -> str:
    """The stored ``data["strategy"]`` of a compaction (STORE-9): ``"default"`` for the built-in
    strategy, else the strategy's ``name`` attribute, else its ``__name__``, else its type name."""
    if strategy is None or strategy is default_compaction_strategy:
        return "default"
    name = getattr(strategy, "name", None)
    if isinstance(name, str) and name:
        return name
    dunder = getattr(strategy, "__name__", None)
    if isinstance(dunder, str) and dunder:
        return dunder
    return type(strategy).__name__


def should_auto_compact(
    options: CompactionOptions | None, branch: Sequence[SessionEntry]
) -> bool:
    """Whether setup step 11 compacts (STORE-8): ``threshold_entries`` is set, the branch has
    more entries than it, and the last entry is not a compaction. O(1)."""
    if options is None or options.threshold_entries is None:
        return False
    if len(branch) <= options.threshold_entries:
        return False
    return branch[-1].kind != "compaction"


def _coerce_result(value: object, where: str) -> CompactionResult:
    if isinstance(value, CompactionResult):
        return value
    if isinstance(value, Mapping):
        return CompactionResult.coerce(value)
    raise TypeError(f"{where} must return a CompactionResult, got {type(value).__name__}")


async def compute_compaction(
    *,
    session_id: str,
    entries: Sequence[SessionEntry],
    options: CompactionOptions,
    signal: AbortSignal | None = None,
    middleware: MiddlewareRegistry | None = None,
) -> CompactionResult:
    """Run the compaction strategy and the ``compaction`` middleware hook (STORE-8, STORE-9).

    The caller emits ``compaction_started`` before and, after appending
    :func:`compaction_entry`, ``compaction_finished(summary)``; then rebuilds the history and
    applies :func:`drop_trailing_input` on an auto compaction.

    Args:
        session_id: The session.
        entries: The branch root→leaf.
        options: The effective options (:func:`resolve_compaction_options`).
        signal: The run signal, ``None`` outside a run.
        middleware: The agent's registry; its ``compaction`` hook may replace the result.

    Returns:
        The final :class:`CompactionResult` (a mapping result is converted).

    Raises:
        TypeError: the strategy or a handler returned something other than a result.
        Exception: whatever the strategy or a middleware handler raises.
    """
    strategy = options.strategy or default_compaction_strategy
    data = CompactionInput(
        session_id=session_id, entries=tuple(entries), options=options, signal=signal
    )
    result = _coerce_result(await maybe_await(strategy(data)), "compaction strategy")
    if middleware is not None and middleware.has("compaction"):
        result = _coerce_result(
            await middleware.run("compaction", result), "compaction middleware"
        )
    return result


def compaction_entry(
    result: CompactionResult,
    *,
    session_id: str,
    options: CompactionOptions,
    trigger: CompactionTrigger,
    parent_id: str | None = None,
    run_id: str | None = None,
) -> SessionEntry:
    """Build the ``compaction`` entry for ``result`` (STORE-7, STORE-9).

    ``data`` is ``{"through_entry_id", "keep_entry_ids", "strategy", "trigger"}``.

    Args:
        result: The (middleware-processed) result.
        session_id: The session.
        options: The options whose strategy produced ``result`` (names ``data["strategy"]``).
        trigger: ``"auto"`` (setup step 11) or ``"manual"`` (``session.compact()``).
        parent_id: The session's leaf.
        run_id: The run, when inside one.
    """
    data: dict[str, JsonValue] = {
        "through_entry_id": result.through_entry_id,
        "keep_entry_ids": list(result.keep_entry_ids),
        "strategy": compaction_strategy_name(options.strategy),
        "trigger": trigger,
    }
    return new_session_entry(
        "compaction",
        session_id=session_id,
        parent_id=parent_id,
        run_id=run_id,
        summary=result.summary,
        data=data,
    )

