"""What the SQLite and PostgreSQL stores share: JSON codec, checks, errors and row conversion.

Both stores keep values as the JSON text of the runtime's own ``to_dict()`` and raise the
same errors, with the same messages, as the memory stores, so the conformance
suite holds for all of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias, TypeVar

from prism._serde import Serializable
from prism.checkpoints import (
    AGENT_RUN_NAMESPACE,
    CheckpointRecord,
    SessionAppend,
    is_resumable,
)
from prism.errors import (
    ERR_PRISM_STORE_UNDECODABLE,
    CheckpointConflictError,
    SessionAppendConflictError,
    StoreError,
)
from prism.ledger import AgentEventRecord, RunRecord, ToolCallRecord, UsageRecord
from prism.store import SessionEntry
from prism.types import OwnershipScope

__all__ = [
    "AppendOutcome",
    "SessionInfo",
    "append_error",
    "check_append",
    "check_appends",
    "check_limit",
    "checkpoint_conflict",
    "checkpoint_record",
    "decoded",
    "dumps",
    "event_row",
    "ledger_where",
    "owner_columns",
    "run_index_columns",
    "run_listing",
    "run_row",
    "session_infos",
    "tool_call_row",
    "usage_row",
    "walk_rows",
]

AppendOutcome: TypeAlias = Literal[
    "ok", "missing_parent", "not_tip", "duplicate_idempotent", "duplicate_id"
]
"""Result of the atomic append statement of a database store."""

_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` (UTF-8 characters kept, NaN/inf refused).

    Raises:
        TypeError: a value that is not JSON-compatible.
        ValueError: ``NaN`` or an infinity.
    """
    return _ENCODER.encode(value)


_T = TypeVar("_T")


def decoded(decode: Callable[[Any], _T], raw: Any, what: str) -> _T:
    """``decode(raw)`` for a stored value; a value that does not decode is a typed error.

    Args:
        decode: Turns the stored column into the value (``json.loads``, ``from_dict``, …).
        raw: The stored column.
        what: The row, for the message (e.g. ``"checkpoint prism.agent-run/run_1"``).

    Raises:
        StoreError: ``ERR_PRISM_STORE_UNDECODABLE`` — not valid JSON, or not the record the row
            should hold (the decoding error is its ``__cause__``).
    """
    try:
        return decode(raw)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise StoreError(
            ERR_PRISM_STORE_UNDECODABLE,
            f"{what}: the stored value cannot be decoded ({type(exc).__name__}: {exc})",
        ) from exc


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


def check_limit(limit: int) -> None:
    """The argument check of ``list_sessions``.

    Raises:
        ValueError: ``limit`` is smaller than 1.
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")


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


# --------------------------------------------------------------------------- session appends


def check_append(entry: object, expected_parent_id: str | None, fork: bool) -> None:
    """The argument checks of ``append`` that precede any I/O.

    Raises:
        TypeError: ``entry`` is not a :class:`~prism.store.SessionEntry`.
        ValueError: ``fork=True`` without ``expected_parent_id``.
    """
    if not isinstance(entry, SessionEntry):
        raise TypeError(f"append expects a SessionEntry, got {type(entry).__name__}")
    if fork and expected_parent_id is None:
        raise ValueError("fork=True requires expected_parent_id")


def check_appends(
    entries: Sequence[SessionAppend],
    params: Callable[[SessionEntry, str | None, str | None, bool], tuple[Any, ...]],
) -> tuple[tuple[SessionAppend, ...], list[tuple[Any, ...]]]:
    """The appends of ``save_checkpoint_with_entries``, each checked as ``append`` checks it,
    with their statement parameters (``params(entry, expected_parent_id, idempotency_key,
    fork)``).

    Raises:
        TypeError: an entry is not a :class:`~prism.store.SessionEntry`.
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
        outcome: One of :data:`AppendOutcome` other than ``"ok"``.
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
        decode: Turns a stored body into a :class:`~prism.store.SessionEntry`.

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


# --------------------------------------------------------------------------- checkpoints


def owner_columns(
    ownership: OwnershipScope | None,
) -> tuple[str | None, str | None, str | None]:
    """The ``(tenant_id, account_id, user_id)`` columns recorded with a checkpoint."""
    if ownership is None:
        return (None, None, None)
    return (ownership.tenant_id, ownership.account_id, ownership.user_id)


def checkpoint_record(
    namespace: str, key: str, row: tuple[Any, ...], decode: Callable[[Any], Any]
) -> CheckpointRecord:
    """Decode a ``(version, value, created_at, updated_at, fencing_token)`` checkpoint row.

    Args:
        namespace: The checkpoint namespace.
        key: The checkpoint key.
        row: The stored columns, in that order.
        decode: Turns the stored ``value`` column into the JSON value.

    Raises:
        StoreError: ``ERR_PRISM_STORE_UNDECODABLE`` — the value is not valid JSON.
    """
    version, value, created_at, updated_at, token = row
    return CheckpointRecord(
        namespace=namespace,
        key=key,
        version=int(version),
        value=decoded(decode, value, f"checkpoint {namespace}/{key}"),
        created_at=created_at,
        updated_at=updated_at,
        fencing_token=token,
    )


def run_index_columns(namespace: str, value: Any) -> tuple[str | None, str | None, int | None]:
    """``(run_session_id, run_status, run_resumable)`` of a checkpoint row: the run-index
    columns a run-state envelope fills (all ``None`` for other rows). O(1)."""
    if namespace != AGENT_RUN_NAMESPACE or type(value) is not dict:
        return (None, None, None)
    session_id = value.get("session_id")
    status = value.get("status")
    return (
        session_id if isinstance(session_id, str) else None,
        status if isinstance(status, str) else None,
        int(is_resumable(value)),
    )


def run_listing(
    table: str,
    placeholder: str,
    *,
    session_id: str | None,
    statuses: tuple[str, ...] | None,
    resumable: bool,
    limit: int,
    resumable_test: str,
    index_hints: bool = False,
) -> tuple[str, tuple[Any, ...]]:
    """The query of ``list_run_checkpoints`` over the run-index columns of migration 2.

    Args:
        table: The (qualified) checkpoint table.
        placeholder: The driver's parameter marker (``?`` or ``%s``).
        session_id: Filter on ``run_session_id``, or ``None``.
        statuses: Filter on ``run_status`` (non-empty), or ``None``.
        resumable: Keep only resumable runs.
        limit: Most rows.
        resumable_test: The dialect's condition on ``run_resumable``.
        index_hints: Name the run index to search (SQLite's ``INDEXED BY``): without
            statistics its planner would rather scan the namespace in ``updated_at`` order.

    Returns:
        The statement, selecting ``(key, version, value, created_at, updated_at,
        fencing_token)`` newest first, and its parameters.
    """
    clauses = [f"namespace = {placeholder}"]
    params: list[Any] = [AGENT_RUN_NAMESPACE]
    if session_id is not None:
        clauses.append(f"run_session_id = {placeholder}")
        params.append(session_id)
    if statuses is not None:
        clauses.append(f"run_status IN ({', '.join([placeholder] * len(statuses))})")
        params.extend(statuses)
    if resumable:
        clauses.append(resumable_test)
    params.append(limit)
    hint = ""
    if index_hints and session_id is not None:
        hint = " INDEXED BY prism_checkpoints_run_session"
    elif index_hints and resumable:
        hint = " INDEXED BY prism_checkpoints_run_resumable"
    sql = (
        "SELECT key, version, value, created_at, updated_at, fencing_token "
        f"FROM {table}{hint} WHERE {' AND '.join(clauses)} "
        f"ORDER BY updated_at DESC, key DESC LIMIT {placeholder}"
    )
    return sql, tuple(params)


def checkpoint_conflict(
    namespace: str,
    key: str,
    expected_version: int,
    fencing_token: int | None,
    current: tuple[int, int | None] | None,
) -> CheckpointConflictError:
    """The error of a refused compare-and-set, worded as the memory store words it.

    Args:
        namespace: The checkpoint namespace.
        key: The checkpoint key.
        expected_version: The caller's expected version.
        fencing_token: The caller's token.
        current: ``(version, fencing_token)`` stored now, ``None`` when absent.
    """
    current_version = current[0] if current is not None else 0
    if current_version != expected_version or current is None:
        return CheckpointConflictError(
            f"Checkpoint version conflict: expected version {expected_version}, stored version "
            f"is {current_version} ({namespace}/{key})"
        )
    return CheckpointConflictError(
        f"Checkpoint fencing conflict: token {fencing_token} is older than the stored token "
        f"{current[1]} ({namespace}/{key})"
    )


# --------------------------------------------------------------------------- run ledger


def run_row(record: RunRecord, encode: Callable[[Any], Any]) -> tuple[Any, ...]:
    """``(id, session_id, status, body)`` of a run row; ``encode`` turns the dict into ``body``."""
    return (record.id, record.session_id, record.status, encode(record.to_dict()))


def event_row(record: AgentEventRecord, encode: Callable[[Any], Any]) -> tuple[Any, ...]:
    """``(id, session_id, run_id, type, body)`` of an event row."""
    return (record.id, record.session_id, record.run_id, record.type, encode(record.to_dict()))


def tool_call_row(record: ToolCallRecord, encode: Callable[[Any], Any]) -> tuple[Any, ...]:
    """``(id, session_id, run_id, tool_call_id, status, body)`` of a tool-call row."""
    return (
        record.id,
        record.session_id,
        record.run_id,
        record.tool_call_id,
        record.status,
        encode(record.to_dict()),
    )


def usage_row(record: UsageRecord, encode: Callable[[Any], Any]) -> tuple[Any, ...]:
    """``(id, session_id, run_id, scope, body)`` of a usage row."""
    return (record.id, record.session_id, record.run_id, record.scope, encode(record.to_dict()))


def ledger_where(
    run_column: str, session_id: str | None, run_id: str | None, placeholder: str
) -> tuple[str, tuple[str, ...]]:
    """The ``WHERE`` condition and parameters of a ledger listing.

    Args:
        run_column: The column holding the run id (``id`` for runs, else ``run_id``).
        session_id: Filter by session, or ``None``.
        run_id: Filter by run, or ``None``.
        placeholder: The driver's parameter marker (``?`` or ``%s``).

    Raises:
        ValueError: neither ``session_id`` nor ``run_id`` given.
    """
    clauses: list[str] = []
    params: list[str] = []
    if session_id is not None:
        clauses.append(f"session_id = {placeholder}")
        params.append(session_id)
    if run_id is not None:
        clauses.append(f"{run_column} = {placeholder}")
        params.append(run_id)
    if not clauses:
        raise ValueError("give a session_id or a run_id")
    return " AND ".join(clauses), tuple(params)
