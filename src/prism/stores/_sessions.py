"""Session entries in a database store: the ``SessionStore`` methods both stores share.

[`SessionMethods`][prism.stores._sessions.SessionMethods] implements ``append``, ``list``, ``read_branch`` and ``list_sessions``
over [`DatabaseAccess`][prism.stores._common.DatabaseAccess], with the checks and the errors of the memory
store; a dialect gives it its statements ([`SessionSql`][prism.stores._sessions.SessionSql]), the parameters of an append and
the atomic append itself (``_sqlite_sessions``, ``_postgres_sessions``).
"""

from __future__ import annotations

import builtins
from abc import abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from prism._serde import Serializable
from prism.checkpoints import SessionAppend
from prism.errors import SessionAppendConflictError
from prism.store import SessionEntry
from prism.stores._common import DatabaseAccess, decoded

__all__ = [
    "AppendOutcome",
    "Appends",
    "SessionInfo",
    "SessionMethods",
    "SessionSql",
    "append_error",
    "check_append",
    "check_appends",
]

AppendOutcome: TypeAlias = Literal[
    "ok", "missing_parent", "not_tip", "duplicate_idempotent", "duplicate_id"
]
"""Result of the atomic append statement of a database store."""

Appends: TypeAlias = tuple[tuple[SessionAppend, ...], list[tuple[Any, ...]]]
"""The checked appends of ``save_checkpoint_with_entries`` and their statement parameters."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo(Serializable):
    """One session of a database store, as listed by ``list_sessions()``."""

    session_id: str
    """The session id."""
    entries: int
    """Number of stored entries (all branches)."""
    created_at: str
    """Earliest entry timestamp (ISO-8601 UTC)."""
    updated_at: str
    """Latest entry timestamp (ISO-8601 UTC)."""
    last_entry_id: str
    """Id of the most recently appended entry — the usual leaf to continue from."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSql:
    """A dialect's session reads."""

    list: str
    """``(session_id)`` → ``(body,)`` rows in append order."""
    read_branch: str
    """The ``_branch_params`` → ``(id, parent_id, body)`` of a leaf and its ancestors."""
    list_sessions: str
    """``(limit)`` → ``(session_id, entries, created_at, updated_at, last_entry_id)``,
    most recently appended first."""
    last_entry: str
    """``(session_id)`` → at most one ``(id,)`` row: the entry appended last."""


class SessionMethods(DatabaseAccess):
    """The ``SessionStore`` methods (with ``read_branch``) and ``list_sessions``."""

    __slots__ = ()

    _session_sql: SessionSql
    """The dialect's session reads."""

    @abstractmethod
    async def _append_entry(self, params: tuple[Any, ...]) -> str:
        """Run one atomic append (``params``: [`_append_params()`][prism.stores._sessions.DatabaseAccess._append_params]); ``"ok"`` or why it was
        refused ([`AppendOutcome`][prism.stores._sessions.AppendOutcome])."""

    @staticmethod
    @abstractmethod
    def _branch_params(session_id: str, leaf_id: str) -> tuple[str, ...]:
        """The parameters of [`SessionSql.read_branch`][prism.stores._sessions.SessionSql.read_branch]."""

    async def append(
        self,
        entry: SessionEntry,
        *,
        expected_parent_id: str | None = None,
        idempotency_key: str | None = None,
        fork: bool = False,
    ) -> None:
        """Append ``entry`` atomically: the existence and tip checks on ``expected_parent_id``,
        the idempotency check and the insert are one statement, so of two appends racing for
        one tip (in any process, on any machine) exactly one wins.

        Raises:
            TypeError: ``entry`` is not a ``SessionEntry``.
            ValueError: ``fork=True`` without ``expected_parent_id``; the entry id already
                exists in the session.
            SessionAppendConflictError: ``ERR_PRISM_SESSION_APPEND_CONFLICT`` — the expected
                parent is missing from the session, is not a branch tip (without ``fork``), or
                the idempotent append was already made.
        """
        check_append(entry, expected_parent_id, fork)
        params = self._append_params(entry, expected_parent_id, idempotency_key, fork)
        outcome = await self._append_entry(params)
        if outcome != "ok":
            raise append_error(outcome, entry, expected_parent_id, idempotency_key)

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        """Every entry of ``session_id`` in append order (``[]`` when unknown). O(entries)."""
        entry = self._entry

        def finish(rows: builtins.list[Any]) -> builtins.list[SessionEntry]:
            return [entry(body) for (body,) in rows]

        return await self._query(self._session_sql.list, (session_id,), finish)

    async def read_branch(self, session_id: str, leaf_id: str) -> builtins.list[SessionEntry]:
        """The entries from the root to ``leaf_id``, root first: one recursive query, O(branch).

        Raises:
            ValueError: ``Unknown session leaf: <id>`` or ``Missing session parent: <id>``.
        """
        entry = self._entry

        def finish(rows: builtins.list[Any]) -> builtins.list[SessionEntry]:
            return walk_rows(rows, leaf_id, entry)

        params = self._branch_params(session_id, leaf_id)
        return await self._query(self._session_sql.read_branch, params, finish)

    async def last_entry_id(self, session_id: str) -> str | None:
        """The id of the entry of ``session_id`` appended last (the leaf a new session object
        continues from); ``None`` when the session has no entry. One indexed lookup."""

        def finish(rows: builtins.list[Any]) -> str | None:
            return str(rows[0][0]) if rows else None

        return await self._query(self._session_sql.last_entry, (session_id,), finish)

    async def list_sessions(self, *, limit: int = 100) -> builtins.list[SessionInfo]:
        """The stored sessions, most recently appended first (for tooling such as a CLI).

        Args:
            limit: Most sessions returned (>= 1). Cost O(all entries).

        Raises:
            ValueError: ``limit`` is smaller than 1.
        """
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        return await self._query(self._session_sql.list_sessions, (limit,), session_infos)

    def _entry(self, body: Any) -> SessionEntry:
        decode = self._decode
        return decoded(lambda b: SessionEntry.from_dict(decode(b)), body, "session entry")


def session_infos(rows: Iterable[tuple[str, Any, str, str, str]]) -> list[SessionInfo]:
    """Decode ``(session_id, entries, created_at, updated_at, last_entry_id)`` rows. O(rows)."""
    return [
        SessionInfo(
            session_id=sid,
            entries=int(n),
            created_at=first,
            updated_at=last,
            last_entry_id=last_id,
        )
        for sid, n, first, last, last_id in rows
    ]


def check_append(entry: object, expected_parent_id: str | None, fork: bool) -> None:
    """The argument checks of ``append`` that precede any I/O.

    Raises:
        TypeError: ``entry`` is not a ``SessionEntry``.
        ValueError: ``fork=True`` without ``expected_parent_id``.
    """
    if not isinstance(entry, SessionEntry):
        raise TypeError(f"append expects a SessionEntry, got {type(entry).__name__}")
    if fork and expected_parent_id is None:
        raise ValueError("fork=True requires expected_parent_id")


def check_appends(
    entries: Sequence[SessionAppend],
    params: Callable[[SessionEntry, str | None, str | None, bool], tuple[Any, ...]],
) -> Appends:
    """The appends of ``save_checkpoint_with_entries``, each checked as ``append`` checks it,
    with their statement parameters (``params(entry, expected_parent_id, idempotency_key,
    fork)``).

    Raises:
        TypeError: an entry is not a ``SessionEntry``.
        ValueError: ``fork=True`` without ``expected_parent_id``.
    """
    appends = tuple(entries)
    rows = []
    for a in appends:
        check_append(a.entry, a.expected_parent_id, a.fork)
        rows.append(params(a.entry, a.expected_parent_id, a.idempotency_key, a.fork))
    return appends, rows


def append_error(
    outcome: str,
    entry: SessionEntry,
    expected_parent_id: str | None,
    idempotency_key: str | None,
) -> Exception:
    """The exception for a refused append, worded as the memory store words it.

    Args:
        outcome: One of [`AppendOutcome`][prism.stores._sessions.AppendOutcome] other than ``"ok"``.
        entry: The refused entry.
        expected_parent_id: The append's expected parent.
        idempotency_key: The append's idempotency key.

    Returns:
        ``SessionAppendConflictError`` (``ERR_PRISM_SESSION_APPEND_CONFLICT``) for a missing
        parent, a parent that is not a branch tip, or a repeated idempotent append;
        ``ValueError`` for a duplicate entry id.
    """
    sid = entry.session_id
    if outcome == "missing_parent":
        return SessionAppendConflictError(
            f"Session append conflict: expected parent {expected_parent_id} does not exist in "
            f"session {sid}"
        )
    if outcome == "not_tip":
        return SessionAppendConflictError(
            f"Session append conflict: expected parent {expected_parent_id} is not a branch tip"
        )
    if outcome == "duplicate_idempotent":
        return SessionAppendConflictError(
            f"Session append conflict: duplicate idempotent append ({idempotency_key})"
        )
    if outcome == "duplicate_id":
        return ValueError(f"Duplicate session entry id: {entry.id}")
    return RuntimeError(f"unexpected append outcome {outcome!r}")


def walk_rows(
    rows: Iterable[tuple[str, str | None, Any]],
    leaf_id: str,
    decode: Callable[[Any], SessionEntry],
) -> list[SessionEntry]:
    """Order the ancestor rows of ``leaf_id`` root→leaf and decode them.

    Args:
        rows: ``(id, parent_id, body)`` of the leaf and its ancestors, in any order (what the
            recursive branch query returns). O(len(rows)).
        leaf_id: The branch's last entry.
        decode: Turns a stored body into a ``SessionEntry``.

    Raises:
        ValueError: ``Unknown session leaf: <id>``, ``Missing session parent: <id>`` or a cycle.
    """
    by_id = {row[0]: row for row in rows}
    row = by_id.get(leaf_id)
    if row is None:
        raise ValueError(f"Unknown session leaf: {leaf_id}")
    chain = [row]
    while row[1] is not None:
        parent = by_id.get(row[1])
        if parent is None:
            raise ValueError(f"Missing session parent: {row[1]}")
        chain.append(parent)
        if len(chain) > len(by_id):
            raise ValueError(f"Session branch has a cycle at entry {parent[0]}")
        row = parent
    chain.reverse()
    return [decode(r[2]) for r in chain]
