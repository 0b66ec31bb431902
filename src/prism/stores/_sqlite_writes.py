"""The SQLite store's writes, as functions of the connection that its worker thread runs.

* :func:`append_params` / :func:`append_outcome` — one session append (the single
  ``INSERT ... SELECT ... WHERE`` of :data:`~prism.stores._sqlite_sql.APPEND`) and, when it is
  refused, why;
* :func:`save_row` — one checkpoint compare-and-set (``INSERT OR IGNORE`` or
  ``UPDATE ... RETURNING``);
* :func:`save_with_entries` — appends and a checkpoint save in ONE transaction (what
  ``SqliteStore.save_checkpoint_with_entries`` runs): its own ``BEGIN IMMEDIATE`` ... ``COMMIT``,
  or, inside the worker's group-commit batch, the batch's savepoint; any refusal raises, which
  rolls the whole call back.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from prism.checkpoints import SessionAppend
from prism.store import SessionEntry
from prism.stores import _sqlite_sql as sql
from prism.stores._common import append_error, checkpoint_conflict, dumps

__all__ = ["CheckpointRow", "append_outcome", "append_params", "save_row", "save_with_entries"]

CheckpointRow = tuple[Any, ...]
"""``(namespace, key, version, expected_version, text, now, fencing_token, tenant_id,
account_id, user_id, run_session_id, run_status, run_resumable)`` of one save."""


def append_params(
    entry: SessionEntry, expected_parent_id: str | None, idempotency_key: str | None, fork: bool
) -> tuple[Any, ...]:
    """The parameters of :data:`~prism.stores._sqlite_sql.APPEND` (the entry encoded once)."""
    return (
        entry.session_id,
        entry.id,
        entry.parent_id,
        entry.kind,
        entry.run_id,
        entry.timestamp,
        idempotency_key,
        expected_parent_id,
        dumps(entry.to_dict()),
        bool(fork),
    )


def append_outcome(conn: sqlite3.Connection, params: tuple[Any, ...]) -> str:
    """Run one append: ``"ok"``, or why it was refused (``missing_parent``, ``not_tip``,
    ``duplicate_idempotent``, ``duplicate_id``)."""
    if conn.execute(sql.APPEND, params).rowcount == 1:
        return "ok"
    session_id, entry_id, expected, idem, fork = (
        params[0],
        params[1],
        params[7],
        params[6],
        params[9],
    )
    parent_ok, has_child, idem_used, id_used = conn.execute(
        sql.APPEND_DIAGNOSE, (session_id, entry_id, expected, idem)
    ).fetchone()
    if not parent_ok:
        return "missing_parent"
    if has_child and not fork:
        return "not_tip"
    if idem_used:
        return "duplicate_idempotent"
    if id_used:
        return "duplicate_id"
    raise RuntimeError("session append refused for no recorded reason")


def save_row(
    conn: sqlite3.Connection, row: CheckpointRow
) -> tuple[str | None, tuple[int, int | None] | None]:
    """One checkpoint compare-and-set: ``(created_at, None)`` when it was stored, else
    ``(None, (stored version, stored token))`` (``(None, None)``: no such key)."""
    (namespace, key, version, expected, text, now, token, tenant, account, user, *index) = row
    if expected == 0:
        cur = conn.execute(
            sql.CP_INSERT,
            (namespace, key, version, text, now, now, token, tenant, account, user, *index),
        )
        if cur.rowcount == 1:
            return now, None
    else:
        own = not conn.in_transaction
        if own:  # the update and the run-index columns in one transaction
            conn.execute("BEGIN IMMEDIATE")
        try:
            # fetchall() steps the statement to its end
            updated = conn.execute(
                sql.CP_UPDATE,
                (version, text, now, token, tenant, account, user, namespace, key, expected),
            ).fetchall()
            if updated:
                conn.execute(sql.CP_INDEX, (namespace, key, *index))
            if own:
                conn.execute("COMMIT")
        except BaseException:
            if own and conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if updated:
            return updated[0][0], None
    stored = conn.execute(sql.CP_LOAD, (namespace, key)).fetchone()
    return None, ((stored[0], stored[4]) if stored is not None else None)


def save_with_entries(
    conn: sqlite3.Connection,
    appends: Sequence[SessionAppend],
    params: Sequence[tuple[Any, ...]],
    row: CheckpointRow,
) -> str:
    """Append ``appends`` (their ``params``), then save ``row``, in one transaction.

    Returns:
        The record's ``created_at``.

    Raises:
        SessionAppendConflictError, ValueError: an append was refused (as ``append`` raises).
        CheckpointConflictError: the save was refused. Nothing of the call is stored.
    """
    own = not conn.in_transaction  # inside a group-commit batch the savepoint is ours
    if own:
        conn.execute("BEGIN IMMEDIATE")
    try:
        for append, values in zip(appends, params, strict=True):
            outcome = append_outcome(conn, values)
            if outcome != "ok":
                raise append_error(
                    outcome, append.entry, append.expected_parent_id, append.idempotency_key
                )
        created_at, current = save_row(conn, row)
        if created_at is None:
            raise checkpoint_conflict(row[0], row[1], row[3], row[6], current)
        if own:
            conn.execute("COMMIT")
        return created_at
    except BaseException:
        if own and conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
