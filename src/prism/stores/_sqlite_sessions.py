"""The SQLite store's session entries: the statements and the atomic append.

An append's existence and tip checks on the expected parent, its idempotency check and the insert
are the single ``INSERT ... SELECT ... WHERE`` of [`APPEND`][prism.stores._sqlite_sessions.APPEND] (of two appends racing for one
tip, in any process, exactly one wins); when it inserts nothing, [`APPEND_DIAGNOSE`][prism.stores._sqlite_sessions.APPEND_DIAGNOSE] says why
([`append_outcome()`][prism.stores._sqlite_sessions.append_outcome]). [`SqliteSessions`][prism.stores._sqlite_sessions.SqliteSessions] gives these, the branch query and the listings
to [`SessionMethods`][prism.stores._sessions.SessionMethods].
"""

from __future__ import annotations

import sqlite3
from typing import Any, Final

from prism._serde import to_json_text
from prism.store import SessionEntry
from prism.stores._sessions import SessionMethods, SessionSql
from prism.stores._sqlite_connection import SqliteConnection

__all__ = [
    "APPEND",
    "APPEND_DIAGNOSE",
    "LAST_ENTRY",
    "LIST",
    "LIST_SESSIONS",
    "READ_BRANCH",
    "SqliteSessions",
    "append_outcome",
    "append_params",
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

LAST_ENTRY: Final = "SELECT last_entry_id FROM prism_sessions WHERE session_id = ?"
"""The per-session row the entries' insert trigger keeps (one primary-key lookup)."""

LIST_SESSIONS: Final = """
SELECT s.session_id, s.n, s.first_ts, s.last_ts, e.id
  FROM (SELECT session_id, count(*) AS n, min("timestamp") AS first_ts,
               max("timestamp") AS last_ts, max(seq) AS last_seq
          FROM prism_session_entries GROUP BY session_id) s
  JOIN prism_session_entries e ON e.seq = s.last_seq
 ORDER BY s.last_seq DESC
 LIMIT ?
"""


def append_params(
    entry: SessionEntry, expected_parent_id: str | None, idempotency_key: str | None, fork: bool
) -> tuple[Any, ...]:
    """The parameters of [`APPEND`][prism.stores._sqlite_sessions.APPEND] (the entry encoded once)."""
    return (
        entry.session_id,
        entry.id,
        entry.parent_id,
        entry.kind,
        entry.run_id,
        entry.timestamp,
        idempotency_key,
        expected_parent_id,
        to_json_text(entry),
        bool(fork),
    )


def append_outcome(conn: sqlite3.Connection, params: tuple[Any, ...]) -> str:
    """Run one append: ``"ok"``, or why it was refused (``missing_parent``, ``not_tip``,
    ``duplicate_idempotent``, ``duplicate_id``)."""
    if conn.execute(APPEND, params).rowcount == 1:
        return "ok"
    session_id, entry_id, expected, idem, fork = (
        params[0],
        params[1],
        params[7],
        params[6],
        params[9],
    )
    parent_ok, has_child, idem_used, id_used = conn.execute(
        APPEND_DIAGNOSE, (session_id, entry_id, expected, idem)
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


class SqliteSessions(SessionMethods, SqliteConnection):
    """Session entries over the store's worker thread."""

    __slots__ = ()

    _session_sql = SessionSql(
        list=LIST, read_branch=READ_BRANCH, list_sessions=LIST_SESSIONS, last_entry=LAST_ENTRY
    )
    _append_params = staticmethod(append_params)

    async def _append_entry(self, params: tuple[Any, ...]) -> str:
        return await self._call(lambda conn: append_outcome(conn, params))

    @staticmethod
    def _branch_params(session_id: str, leaf_id: str) -> tuple[str, ...]:
        return (session_id, leaf_id)
