"""The PostgreSQL store's session entries: the statements and the atomic append.

An append calls the schema's ``prism_append_entry`` function, which locks the expected parent
row (``FOR UPDATE``) before checking that it has no child, then inserts with ``ON CONFLICT DO
NOTHING`` over the unique keys ``(session_id, id)`` and ``(session_id, idempotency_key,
expected_parent_id)`` — one round trip, and of two appends racing for one tip on any machines
exactly one wins. The branch query follows the one-column [`entry_key()`][prism.stores._postgres_sessions.entry_key] of each entry and
its parent. [`PostgresSessions`][prism.stores._postgres_sessions.PostgresSessions] gives these and the listings to
[`SessionMethods`][prism.stores._sessions.SessionMethods].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prism._serde import to_json_text
from prism.store import SessionEntry
from prism.stores._postgres_connection import PostgresConnection, jsonb_text
from prism.stores._sessions import SessionMethods, SessionSql

__all__ = ["PostgresSessionSql", "PostgresSessions", "append_params", "entry_key"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresSessionSql(SessionSql):
    """The session statements of one schema."""

    append: str
    """The call of ``prism_append_entry`` ([`append_params()`][prism.stores._postgres_sessions.append_params]) → ``(outcome,)``."""

    @classmethod
    def build(cls, s: str) -> PostgresSessionSql:
        """The statements over the quoted schema ``s``."""
        return cls(
            append=(
                f"SELECT {s}.prism_append_entry(%s::text, %s::text, %s::text, %s::text, %s::text, "
                "%s::text, %s::text, %s::text, %s::text, %s::jsonb, %s::text, %s::text, %s::boolean)"
            ),
            list=f"SELECT body FROM {s}.prism_session_entries WHERE session_id = %s ORDER BY seq",
            last_entry=(
                f"SELECT id FROM {s}.prism_session_entries WHERE session_id = %s "
                "ORDER BY seq DESC LIMIT 1"
            ),
            read_branch=f"""
WITH RECURSIVE chain(entry_key, parent_key) AS (
    SELECT entry_key, parent_key FROM {s}.prism_session_entries WHERE entry_key = %s
    UNION
    SELECT e.entry_key, e.parent_key
      FROM {s}.prism_session_entries e JOIN chain c ON e.entry_key = c.parent_key
)
SELECT e.id, e.parent_id, e.body
  FROM chain c JOIN {s}.prism_session_entries e ON e.entry_key = c.entry_key
""",
            list_sessions=f"""
SELECT s.session_id, s.n, s.first_ts, s.last_ts, e.id
  FROM (SELECT session_id, count(*) AS n, min("timestamp") AS first_ts,
               max("timestamp") AS last_ts, max(seq) AS last_seq
          FROM {s}.prism_session_entries GROUP BY session_id) s
  JOIN {s}.prism_session_entries e ON e.session_id = s.session_id AND e.seq = s.last_seq
 ORDER BY s.last_seq DESC
 LIMIT %s
""",
        )


def entry_key(session_id: str, entry_id: str) -> str:
    """The one-column key of ``(session_id, entry_id)``: ``"<len>:<session_id>/<entry_id>"``.

    The length prefix makes the encoding injective whatever characters the ids contain.
    """
    return f"{len(session_id)}:{session_id}/{entry_id}"


def append_params(
    entry: SessionEntry, expected_parent_id: str | None, idempotency_key: str | None, fork: bool
) -> tuple[Any, ...]:
    """The arguments of ``prism_append_entry`` for one append."""
    sid = entry.session_id
    return (
        entry_key(sid, entry.id),
        entry_key(sid, entry.parent_id) if entry.parent_id is not None else None,
        entry_key(sid, expected_parent_id) if expected_parent_id is not None else None,
        sid,
        entry.id,
        entry.parent_id,
        entry.kind,
        entry.run_id,
        entry.timestamp,
        jsonb_text(entry, to_json_text(entry)),
        expected_parent_id,
        idempotency_key,
        bool(fork),
    )


class PostgresSessions(SessionMethods, PostgresConnection):
    """Session entries over the store's pool."""

    __slots__ = ()

    _session_sql: PostgresSessionSql
    _append_params = staticmethod(append_params)

    async def _append_entry(self, params: tuple[Any, ...]) -> str:
        rows = await self._fetch(self._session_sql.append, params, one=True)
        outcome: str = rows[0][0]
        return outcome

    @staticmethod
    def _branch_params(session_id: str, leaf_id: str) -> tuple[str, ...]:
        return (entry_key(session_id, leaf_id),)
