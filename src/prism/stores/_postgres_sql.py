"""The PostgreSQL store's statements, keys and ``jsonb`` encoding.

* :class:`Statements` — every statement of the store with the quoted schema name filled in
  (built once per store);
* :func:`entry_key` — the one-column key of ``(session_id, entry_id)`` the branch query follows;
* :func:`lock_key` — the advisory-lock key that serialises migrations of one schema;
* :func:`jsonb` / :func:`unwrap` — JSON text for a ``jsonb`` column and back, keeping values with
  NUL characters storable.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from prism.stores._common import dumps

__all__ = ["Statements", "entry_key", "jsonb", "lock_key", "unwrap"]


class Statements:
    """The store's statements with the quoted schema name filled in (built once per store).

    Args:
        schema: The schema name (a plain identifier, already checked).
    """

    __slots__ = (
        "append",
        "cp_insert",
        "cp_load",
        "cp_update",
        "insert_event",
        "insert_run",
        "insert_tool_call",
        "insert_usage",
        "list",
        "list_sessions",
        "read_branch",
        "schema",
    )

    def __init__(self, schema: str) -> None:
        s = f'"{schema}"'
        self.schema = s
        self.append = (
            f"SELECT {s}.prism_append_entry(%s::text, %s::text, %s::text, %s::text, %s::text, "
            "%s::text, %s::text, %s::text, %s::text, %s::jsonb, %s::text, %s::text, %s::boolean)"
        )
        self.list = f"SELECT body FROM {s}.prism_session_entries WHERE session_id = %s ORDER BY seq"
        self.read_branch = f"""
WITH RECURSIVE chain(entry_key, parent_key) AS (
    SELECT entry_key, parent_key FROM {s}.prism_session_entries WHERE entry_key = %s
    UNION
    SELECT e.entry_key, e.parent_key
      FROM {s}.prism_session_entries e JOIN chain c ON e.entry_key = c.parent_key
)
SELECT e.id, e.parent_id, e.body
  FROM chain c JOIN {s}.prism_session_entries e ON e.entry_key = c.entry_key
"""
        self.list_sessions = f"""
SELECT s.session_id, s.n, s.first_ts, s.last_ts, e.id
  FROM (SELECT session_id, count(*) AS n, min("timestamp") AS first_ts,
               max("timestamp") AS last_ts, max(seq) AS last_seq
          FROM {s}.prism_session_entries GROUP BY session_id) s
  JOIN {s}.prism_session_entries e ON e.session_id = s.session_id AND e.seq = s.last_seq
 ORDER BY s.last_seq DESC
 LIMIT %s
"""
        self.cp_insert = f"""
INSERT INTO {s}.prism_checkpoints (
    namespace, key, version, value, created_at, updated_at, fencing_token,
    tenant_id, account_id, user_id
) VALUES (%s, %s, %s, %s::jsonb, %s, %s, %s::bigint, %s, %s, %s)
ON CONFLICT (namespace, key) DO NOTHING
RETURNING created_at
"""
        self.cp_update = f"""
UPDATE {s}.prism_checkpoints
   SET version = %(version)s, value = %(value)s::jsonb, updated_at = %(now)s,
       fencing_token = %(token)s::bigint,
       tenant_id = %(tenant)s, account_id = %(account)s, user_id = %(user)s
 WHERE namespace = %(ns)s AND key = %(key)s AND version = %(expected)s
   AND (fencing_token IS NULL OR fencing_token <= %(token)s::bigint)
RETURNING created_at
"""
        self.cp_load = (
            "SELECT version, value, created_at, updated_at, fencing_token "
            f"FROM {s}.prism_checkpoints WHERE namespace = %s AND key = %s"
        )
        self.insert_run = (
            f"INSERT INTO {s}.prism_runs (id, session_id, status, body) "
            "VALUES (%s, %s, %s, %s::jsonb)"
        )
        self.insert_event = (
            f"INSERT INTO {s}.prism_run_events (id, session_id, run_id, type, body) "
            "VALUES (%s, %s, %s, %s, %s::jsonb)"
        )
        self.insert_tool_call = (
            f"INSERT INTO {s}.prism_tool_calls "
            "(id, session_id, run_id, tool_call_id, status, body) "
            "VALUES (%s, %s, %s, %s, %s, %s::jsonb)"
        )
        self.insert_usage = (
            f"INSERT INTO {s}.prism_usage (id, session_id, run_id, scope, body) "
            "VALUES (%s, %s, %s, %s, %s::jsonb)"
        )


_WRAP: Final = "$prism_json"


def jsonb(value: Any) -> str:
    """JSON text for a ``jsonb`` column, keeping strings with NUL characters storable.

    ``jsonb`` cannot hold ``\\u0000``. A value whose JSON text contains one — or which is itself
    a one-key ``{"$prism_json": …}`` object, so that the mapping stays injective — is stored as
    ``{"$prism_json": "<its JSON text>"}`` (the escape is then plain characters of a string);
    :func:`unwrap` reverses it. Other values are stored as they are. O(len(text)).
    """
    text = dumps(value)
    if "\\u0000" in text or (type(value) is dict and len(value) == 1 and _WRAP in value):
        return dumps({_WRAP: text})
    return text


def unwrap(value: Any) -> Any:
    """The stored value of a ``jsonb`` column, undoing :func:`jsonb`'s wrapping."""
    if type(value) is dict and len(value) == 1 and _WRAP in value:
        return json.loads(value[_WRAP])
    return value


def entry_key(session_id: str, entry_id: str) -> str:
    """The one-column key of ``(session_id, entry_id)``: ``"<len>:<session_id>/<entry_id>"``.

    The length prefix makes the encoding injective whatever characters the ids contain.
    """
    return f"{len(session_id)}:{session_id}/{entry_id}"


def lock_key(schema: str) -> int:
    """The advisory-lock key (signed 64-bit) that serialises migrations of ``schema``."""
    digest = hashlib.sha256(f"prism.stores.migrate:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
