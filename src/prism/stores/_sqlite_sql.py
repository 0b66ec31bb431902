"""The SQLite store's statements and its schema migration.

Every write is one transaction: an append's tip check, idempotency check and insert are the
single ``INSERT ... SELECT ... WHERE`` of :data:`APPEND`; a checkpoint
save is one conditional ``UPDATE ... RETURNING created_at`` (:data:`CP_UPDATE`) or
``INSERT OR IGNORE`` (:data:`CP_INSERT`, which also writes the run-index columns,
:func:`~prism.stores._common.run_index_columns`); after an update, :data:`CP_INDEX` sets the
run-index columns only when they change (both in one transaction).
:func:`migrate` checks the recorded migrations and applies the missing ones.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from prism._util import now_iso
from prism.errors import StoreSchemaError
from prism.stores._migrations import MIGRATIONS_TABLE, load_migrations, plan_migrations

__all__ = [
    "APPEND",
    "APPEND_DIAGNOSE",
    "CP_INDEX",
    "CP_INSERT",
    "CP_LOAD",
    "CP_UPDATE",
    "INSERT_EVENT",
    "INSERT_RUN",
    "INSERT_TOOL_CALL",
    "INSERT_USAGE",
    "LIST",
    "LIST_SESSIONS",
    "READ_BRANCH",
    "migrate",
]

APPEND: Final = """
INSERT INTO prism_session_entries (
    session_id, id, parent_id, kind, run_id, "timestamp", idempotency_key, expected_parent_id, body
)
SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9
WHERE (?8 IS NULL OR EXISTS (
        SELECT 1 FROM prism_session_entries WHERE session_id = ?1 AND id = ?8))
  AND (?8 IS NULL OR ?10 OR NOT EXISTS (
        SELECT 1 FROM prism_session_entries WHERE session_id = ?1 AND parent_id = ?8))
  AND (?7 IS NULL OR NOT EXISTS (
        SELECT 1 FROM prism_session_entries
         WHERE session_id = ?1 AND idempotency_key = ?7
           AND coalesce(expected_parent_id, '') = coalesce(?8, '')
           AND (expected_parent_id IS NULL) = (?8 IS NULL)))
  AND NOT EXISTS (SELECT 1 FROM prism_session_entries WHERE session_id = ?1 AND id = ?2)
"""

APPEND_DIAGNOSE: Final = """
SELECT
    ?3 IS NULL OR EXISTS (
        SELECT 1 FROM prism_session_entries WHERE session_id = ?1 AND id = ?3),
    ?3 IS NOT NULL AND EXISTS (
        SELECT 1 FROM prism_session_entries WHERE session_id = ?1 AND parent_id = ?3),
    ?4 IS NOT NULL AND EXISTS (
        SELECT 1 FROM prism_session_entries
         WHERE session_id = ?1 AND idempotency_key = ?4
           AND coalesce(expected_parent_id, '') = coalesce(?3, '')
           AND (expected_parent_id IS NULL) = (?3 IS NULL)),
    EXISTS (SELECT 1 FROM prism_session_entries WHERE session_id = ?1 AND id = ?2)
"""

LIST: Final = "SELECT body FROM prism_session_entries WHERE session_id = ? ORDER BY seq"

READ_BRANCH: Final = """
WITH RECURSIVE chain(id, parent_id) AS (
    SELECT id, parent_id FROM prism_session_entries WHERE session_id = ?1 AND id = ?2
    UNION
    SELECT e.id, e.parent_id
      FROM prism_session_entries e JOIN chain c ON e.session_id = ?1 AND e.id = c.parent_id
)
SELECT e.id, e.parent_id, e.body
  FROM chain c JOIN prism_session_entries e ON e.session_id = ?1 AND e.id = c.id
"""

LIST_SESSIONS: Final = """
SELECT s.session_id, s.n, s.first_ts, s.last_ts, e.id
  FROM (SELECT session_id, count(*) AS n, min("timestamp") AS first_ts,
               max("timestamp") AS last_ts, max(seq) AS last_seq
          FROM prism_session_entries GROUP BY session_id) s
  JOIN prism_session_entries e ON e.seq = s.last_seq
 ORDER BY s.last_seq DESC
 LIMIT ?
"""

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
RETURNING created_at
"""

CP_INDEX: Final = """
UPDATE prism_checkpoints
   SET run_session_id = ?3, run_status = ?4, run_resumable = ?5
 WHERE namespace = ?1 AND key = ?2
   AND (run_session_id IS NOT ?3 OR run_status IS NOT ?4 OR run_resumable IS NOT ?5)
"""
"""The run-index columns of a saved row, written only when one of them changes: SQLite
rewrites an index entry whenever its column is assigned, so a save that always assigned them
wrote both run-index pages on every save (two of the ~10 pages an every-turn write commits)."""

CP_LOAD: Final = """
SELECT version, value, created_at, updated_at, fencing_token
  FROM prism_checkpoints WHERE namespace = ? AND key = ?
"""

INSERT_RUN: Final = "INSERT INTO prism_runs (id, session_id, status, body) VALUES (?, ?, ?, ?)"
INSERT_EVENT: Final = (
    "INSERT INTO prism_run_events (id, session_id, run_id, type, body) VALUES (?, ?, ?, ?, ?)"
)
INSERT_TOOL_CALL: Final = (
    "INSERT INTO prism_tool_calls (id, session_id, run_id, tool_call_id, status, body) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
INSERT_USAGE: Final = (
    "INSERT INTO prism_usage (id, session_id, run_id, scope, body) VALUES (?, ?, ?, ?, ?)"
)


def migrate(conn: sqlite3.Connection, where: str) -> None:
    """Check the recorded migrations and apply the missing ones in one transaction."""
    shipped = load_migrations("sqlite")
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (MIGRATIONS_TABLE,)
    ).fetchone()
    if exists is not None:
        recorded = conn.execute(f"SELECT version, checksum FROM {MIGRATIONS_TABLE}").fetchall()
        if not plan_migrations(shipped, recorded, where=where):
            return  # up to date: no write lock needed
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
            "version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, "
            "applied_at TEXT NOT NULL)"
        )
        recorded = conn.execute(f"SELECT version, checksum FROM {MIGRATIONS_TABLE}").fetchall()
        for migration in plan_migrations(shipped, recorded, where=where):
            try:
                for statement in migration.statements():
                    conn.execute(statement)
            except sqlite3.Error as exc:
                raise StoreSchemaError(
                    f"Store schema of {where}: migration {migration.version} "
                    f"({migration.name}) failed: {exc}"
                ) from exc
            conn.execute(
                f"INSERT INTO {MIGRATIONS_TABLE} (version, name, checksum, applied_at) "
                "VALUES (?, ?, ?, ?)",
                (migration.version, migration.name, migration.checksum, now_iso()),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
