"""The SQLite store's checkpoints: the compare-and-set statements, the run index, and appends
with a checkpoint save in one transaction.

A checkpoint save is a single conditional ``INSERT OR IGNORE`` ([`CP_INSERT`][prism.stores._sqlite_checkpoints.CP_INSERT], which also
writes the run-index columns of schema migration 2,
[`run_index_columns()`][prism.stores._checkpoints.run_index_columns]), or a conditional ``UPDATE ... RETURNING``
([`CP_UPDATE`][prism.stores._sqlite_checkpoints.CP_UPDATE]: ``created_at`` and the stored run-index columns; a successful save reads
nothing else) followed, when those columns change, by [`CP_INDEX`][prism.stores._sqlite_checkpoints.CP_INDEX], which writes them
(so their index pages are not rewritten on every save) — both in one transaction ([`save_row()`][prism.stores._sqlite_checkpoints.save_row]).
Since schema migration 5 the table is a rowid table (its primary key kept by its own unique
index, which a save does not change), so a run's envelope of up to ~4,000 bytes is stored in its
row: a save rewrites that one page, where the ``WITHOUT ROWID`` table of version 1 put an
envelope over ~1,000 bytes on an overflow page that every save freed and took again (four pages,
the database header among them). Measured on the realistic scenario: an ``every-turn`` write
commits 6.7 pages instead of 8.6, a dispatch marking 1 instead of 4.

[`save_with_entries()`][prism.stores._sqlite_checkpoints.save_with_entries] appends session entries and saves a checkpoint in ONE transaction (what
``save_checkpoint_with_entries`` runs): its own ``BEGIN IMMEDIATE`` ... ``COMMIT``, or, inside the
worker's group-commit batch, the batch's savepoint; any refusal raises, which rolls the whole
call back. An ``every-turn`` durable run whose session store is this store writes each turn's
entries with its envelope through it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from prism.checkpoints import SessionAppend
from prism.stores._checkpoints import (
    CheckpointMethods,
    CheckpointSql,
    CheckpointWrite,
    checkpoint_conflict,
    run_index_columns,
)
from prism.stores._sessions import Appends, append_error
from prism.stores._sqlite_connection import SqliteConnection
from prism.stores._sqlite_sessions import append_outcome, append_params

__all__ = [
    "CP_INDEX",
    "CP_INSERT",
    "CP_LOAD",
    "CP_UPDATE",
    "CheckpointRow",
    "SqliteCheckpoints",
    "save_row",
    "save_with_entries",
]

CP_INSERT: Final = """
INSERT OR IGNORE INTO prism_checkpoints (
    namespace, key, version, value, created_at, updated_at, fencing_token,
    tenant_id, account_id, user_id, run_session_id, run_status, run_resumable
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""

CP_UPDATE: Final = """
UPDATE prism_checkpoints
   SET version = ?1, value = ?2, updated_at = ?3, fencing_token = ?4,
       tenant_id = ?5, account_id = ?6, user_id = ?7
 WHERE namespace = ?8 AND key = ?9 AND version = ?10
   AND (fencing_token IS NULL OR fencing_token <= ?4)
RETURNING created_at, run_session_id, run_status, run_resumable
"""

CP_INDEX: Final = """
UPDATE prism_checkpoints
   SET run_session_id = ?3, run_status = ?4, run_resumable = ?5
 WHERE namespace = ?1 AND key = ?2
   AND (run_session_id IS NOT ?3 OR run_status IS NOT ?4 OR run_resumable IS NOT ?5)
"""
"""The run-index columns of a saved row, written only when one of them changes: SQLite
rewrites an index entry whenever its column is assigned, so a save that always assigned them
wrote both run-index pages on every save (two of the ~10 pages an every-turn write commits).
Run only when the columns [`CP_UPDATE`][prism.stores._sqlite_checkpoints.CP_UPDATE] returns (which it does not assign: the stored
ones) differ from the save's, which is seldom (a run's status or session changes)."""

CP_LOAD: Final = """
SELECT version, value, created_at, updated_at, fencing_token
  FROM prism_checkpoints WHERE namespace = ? AND key = ?
"""

CheckpointRow = tuple[Any, ...]
"""``(namespace, key, version, expected_version, text, now, fencing_token, tenant_id,
account_id, user_id, run_session_id, run_status, run_resumable)`` of one save."""


def checkpoint_row(write: CheckpointWrite) -> CheckpointRow:
    """The columns of one save (the run-index columns derived from the value)."""
    return (
        write.namespace,
        write.key,
        write.version,
        write.expected_version,
        write.text,
        write.now,
        write.fencing_token,
        *write.owner,
        *run_index_columns(write.namespace, write.value),
    )


def save_row(
    conn: sqlite3.Connection, row: CheckpointRow
) -> tuple[str | None, tuple[int, int | None] | None]:
    """One checkpoint compare-and-set: ``(created_at, None)`` when it was stored, else
    ``(None, (stored version, stored token))`` (``(None, None)``: no such key)."""
    (namespace, key, version, expected, text, now, token, tenant, account, user, *index) = row
    if expected == 0:
        cur = conn.execute(
            CP_INSERT,
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
                CP_UPDATE,
                (version, text, now, token, tenant, account, user, namespace, key, expected),
            ).fetchall()
            if updated and updated[0][1:] != tuple(index):
                conn.execute(CP_INDEX, (namespace, key, *index))
            if own:
                conn.execute("COMMIT")
        except BaseException:
            if own and conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if updated:
            return updated[0][0], None
    stored = conn.execute(CP_LOAD, (namespace, key)).fetchone()
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


class SqliteCheckpoints(CheckpointMethods, SqliteConnection):
    """Checkpoints and the run index over the store's worker thread."""

    __slots__ = ()

    _checkpoint_sql = CheckpointSql(
        load=CP_LOAD,
        table="prism_checkpoints",
        placeholder="?",
        resumable_test="run_resumable = 1",
        index_hints=True,
    )

    async def _save(self, write: CheckpointWrite) -> tuple[str | None, tuple[int, Any] | None]:
        row = checkpoint_row(write)
        return await self._call(lambda conn: save_row(conn, row))

    async def _save_with_entries(self, appends: Appends, write: CheckpointWrite) -> str:
        row = checkpoint_row(write)
        entries, params = appends
        return await self._call(lambda conn: save_with_entries(conn, entries, params, row))

    def _submit_with_entries(
        self, entries: tuple[SessionAppend, ...], write: CheckpointWrite
    ) -> asyncio.Future[str]:
        row = checkpoint_row(write)

        def job(conn: sqlite3.Connection) -> str:
            # the entries are encoded where the write runs (on the worker thread when queued)
            params = [
                append_params(a.entry, a.expected_parent_id, a.idempotency_key, a.fork)
                for a in entries
            ]
            return save_with_entries(conn, entries, params, row)

        return self._submit_write(job)
