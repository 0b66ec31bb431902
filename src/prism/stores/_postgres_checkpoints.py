"""The PostgreSQL store's checkpoints: the compare-and-set statements, and appends with a
checkpoint save in one transaction.

A checkpoint save is ``INSERT ... ON CONFLICT DO NOTHING`` (first version) or ``UPDATE ... WHERE
version = expected AND`` the fencing condition: of N workers claiming one run with the same
expected version exactly one gets a row back. The run-index columns of schema migration 2 are
generated columns of the row, so a save writes nothing else.

* [`checkpoint_params()`][prism.stores._postgres_checkpoints.checkpoint_params] — the parameters of the save statements;
* [`save_with_entries()`][prism.stores._postgres_checkpoints.save_with_entries] — the appends and the save in ONE transaction on one pooled
  connection, in pipeline mode: ``BEGIN``, every append and the save go out together and come
  back in one round trip, then ``COMMIT`` (or ``ROLLBACK`` when anything was refused) — two round
  trips and one commit (one WAL flush with ``synchronous_commit=on``) whatever the number of
  entries.

Measured (``benchmarks/bench_checkpoint_writes.py``, per turn of the realistic scenario): with
``conn.transaction()`` around the pipelined statements psycopg syncs at ``BEGIN``, before and
after ``COMMIT`` too — five round trips per write; the explicit ``BEGIN``/``COMMIT`` make it two.

A write whose parameters are larger than [`PIPELINE_MAX_BYTES`][prism.stores._postgres_checkpoints.PIPELINE_MAX_BYTES] is not pipelined: psycopg's
pipeline mode stops sending a large message part-way and waits for results that never come (a
tool result of 16 MB or more hung the write, and the run, for good — psycopg issue 685); such a
write runs its statements one by one inside ``conn.transaction()`` (three round trips more,
nothing next to sending megabytes).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from prism.checkpoints import SessionAppend
from prism.stores._checkpoints import (
    CheckpointMethods,
    CheckpointSql,
    CheckpointWrite,
    checkpoint_conflict,
)
from prism.stores._postgres_connection import PostgresConnection
from prism.stores._postgres_sessions import PostgresSessionSql, append_params
from prism.stores._sessions import Appends, append_error

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncCursor

__all__ = [
    "PIPELINE_MAX_BYTES",
    "PostgresCheckpointSql",
    "PostgresCheckpoints",
    "checkpoint_params",
    "save_with_entries",
]

PIPELINE_MAX_BYTES: Final = 1 << 20
"""Most characters of text parameters (entries and envelope) a pipelined write sends."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresCheckpointSql(CheckpointSql):
    """The checkpoint statements of one schema."""

    insert: str
    """The first version (``expected_version == 0``) → ``(created_at,)`` when stored."""
    update: str
    """A later version → ``(created_at,)`` when stored."""

    @classmethod
    def build(cls, s: str) -> PostgresCheckpointSql:
        """The statements over the quoted schema ``s``."""
        return cls(
            insert=f"""
INSERT INTO {s}.prism_checkpoints (
    namespace, key, version, value, created_at, updated_at, fencing_token,
    tenant_id, account_id, user_id
) VALUES (%s, %s, %s, %s::jsonb, %s, %s, %s::bigint, %s, %s, %s)
ON CONFLICT (namespace, key) DO NOTHING
RETURNING created_at
""",
            update=f"""
UPDATE {s}.prism_checkpoints
   SET version = %(version)s, value = %(value)s::jsonb, updated_at = %(now)s,
       fencing_token = %(token)s::bigint,
       tenant_id = %(tenant)s, account_id = %(account)s, user_id = %(user)s
 WHERE namespace = %(ns)s AND key = %(key)s AND version = %(expected)s
   AND (fencing_token IS NULL OR fencing_token <= %(token)s::bigint)
RETURNING created_at
""",
            load=(
                "SELECT version, value, created_at, updated_at, fencing_token "
                f"FROM {s}.prism_checkpoints WHERE namespace = %s AND key = %s"
            ),
            table=f"{s}.prism_checkpoints",
            placeholder="%s",
            resumable_test="run_resumable",
            index_hints=False,
        )


def checkpoint_params(write: CheckpointWrite) -> tuple[Any, ...] | dict[str, Any]:
    """The parameters of ``insert`` (``expected_version == 0``) or ``update``."""
    tenant, account, user = write.owner
    if write.expected_version == 0:
        return (
            write.namespace,
            write.key,
            write.version,
            write.text,
            write.now,
            write.now,
            write.fencing_token,
            tenant,
            account,
            user,
        )
    return {
        "version": write.version,
        "value": write.text,
        "now": write.now,
        "token": write.fencing_token,
        "tenant": tenant,
        "account": account,
        "user": user,
        "ns": write.namespace,
        "key": write.key,
        "expected": write.expected_version,
    }


class PostgresCheckpoints(CheckpointMethods, PostgresConnection):
    """Checkpoints and the run index over the store's pool."""

    __slots__ = ()

    _checkpoint_sql: PostgresCheckpointSql
    _session_sql: PostgresSessionSql

    async def _save(self, write: CheckpointWrite) -> tuple[str | None, tuple[int, Any] | None]:
        sql = self._checkpoint_sql
        statement = sql.insert if write.expected_version == 0 else sql.update
        rows = await self._fetch(statement, checkpoint_params(write), one=True)
        if rows:
            created_at: str = rows[0][0]
            return created_at, None
        current = await self._fetch(sql.load, (write.namespace, write.key), one=True)
        return None, ((int(current[0][0]), current[0][4]) if current else None)

    def _submit_with_entries(
        self, entries: tuple[SessionAppend, ...], write: CheckpointWrite
    ) -> Awaitable[str]:
        params = [
            append_params(a.entry, a.expected_parent_id, a.idempotency_key, a.fork)
            for a in entries
        ]
        return self._save_with_entries((entries, params), write)

    async def _save_with_entries(self, appends: Appends, write: CheckpointWrite) -> str:
        save = checkpoint_params(write)
        if not self._ready:
            await self.open()
        async with self._pool.connection() as conn:
            return await save_with_entries(
                conn, self._session_sql.append, self._checkpoint_sql, *appends, save, write
            )


async def save_with_entries(
    conn: AsyncConnection[Any],
    append: str,
    sql: PostgresCheckpointSql,
    appends: Sequence[SessionAppend],
    params: Sequence[tuple[Any, ...]],
    save: tuple[Any, ...] | dict[str, Any],
    write: CheckpointWrite,
) -> str:
    """Append ``appends`` (``append`` with their ``params``) and run the save of ``write``
    (``save``: its parameters) in one transaction on ``conn``.

    On an autocommit connection (the store's own pool) the statements are pipelined:
    ``BEGIN``, the appends and the save in one round trip, then ``COMMIT`` or ``ROLLBACK``
    in a second. A host pool's connection outside autocommit, or a write larger than
    [`PIPELINE_MAX_BYTES`][prism.stores._postgres_checkpoints.PIPELINE_MAX_BYTES], runs them one by one inside ``conn.transaction()``.

    Returns:
        The record's ``created_at``.

    Raises:
        SessionAppendConflictError, ValueError: the first refused append (as ``append``
            raises); nothing is stored.
        CheckpointConflictError: the save was refused; nothing is stored.
    """
    statement = sql.insert if write.expected_version == 0 else sql.update
    if not conn.autocommit or _text_size(params, write) > PIPELINE_MAX_BYTES:
        async with conn.transaction():
            cursors = [await conn.execute(append, values) for values in params]
            saved = await conn.execute(statement, save)
            return await _outcome(conn, sql, appends, cursors, saved, write)
    async with conn.pipeline() as pipeline:
        await conn.execute("BEGIN")
        try:
            cursors = [await conn.execute(append, values) for values in params]
            saved = await conn.execute(statement, save)
            await pipeline.sync()  # every result, still inside the transaction
            created_at = await _outcome(conn, sql, appends, cursors, saved, write)
        except BaseException:
            await conn.execute("ROLLBACK")
            raise
        await conn.execute("COMMIT")  # sent, and its result read, when the pipeline closes
    return created_at


def _text_size(params: Sequence[tuple[Any, ...]], write: CheckpointWrite) -> int:
    """Characters of the write's text parameters (the encoded entries and envelope). O(params)."""
    size = len(write.text)
    for values in params:
        for value in values:
            if type(value) is str:
                size += len(value)
    return size


async def _outcome(
    conn: AsyncConnection[Any],
    sql: PostgresCheckpointSql,
    appends: Sequence[SessionAppend],
    cursors: Sequence[AsyncCursor[Any]],
    saved: AsyncCursor[Any],
    write: CheckpointWrite,
) -> str:
    """``created_at`` of the save, or the error of the first refused append or of the save."""
    for append, cursor in zip(appends, cursors, strict=True):
        row = await cursor.fetchone()
        outcome = row[0] if row is not None else None
        if outcome != "ok":
            raise append_error(
                str(outcome), append.entry, append.expected_parent_id, append.idempotency_key
            )
    created = await saved.fetchone()
    if created is None:
        cur = await conn.execute(sql.load, (write.namespace, write.key))
        stored = await cur.fetchone()
        current = (int(stored[0]), stored[4]) if stored is not None else None
        raise checkpoint_conflict(
            write.namespace, write.key, write.expected_version, write.fencing_token, current
        )
    created_at: str = created[0]
    return created_at
