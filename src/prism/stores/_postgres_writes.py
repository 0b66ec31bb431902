"""The PostgreSQL store's writes: the parameters of an append and of a checkpoint save, and
appends with a checkpoint save in one transaction.

* :func:`append_params` — the arguments of the schema's ``prism_append_entry`` function (the
  entry encoded once);
* :func:`checkpoint_params` — the parameters of the save statements
  (:class:`~prism.stores._postgres_sql.Statements` ``cp_insert`` / ``cp_update``);
* :func:`save_with_entries` — the appends and the save in ONE transaction on one pooled
  connection, in pipeline mode: ``BEGIN``, every append and the save go out together and come
  back in one round trip, then ``COMMIT`` (or ``ROLLBACK`` when anything was refused) — two round
  trips and one commit (one WAL flush with ``synchronous_commit=on``) whatever the number of
  entries.

Measured (``benchmarks/bench_checkpoint_writes.py``, per turn of the realistic scenario): with
``conn.transaction()`` around the pipelined statements psycopg syncs at ``BEGIN``, before and
after ``COMMIT`` too — five round trips per write; the explicit ``BEGIN``/``COMMIT`` make it two.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prism.checkpoints import SessionAppend
from prism.store import SessionEntry
from prism.stores._common import append_error, checkpoint_conflict
from prism.stores._postgres_sql import Statements, entry_key, jsonb

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncCursor

__all__ = ["append_params", "checkpoint_params", "save_with_entries"]


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
        jsonb(entry.to_dict()),
        expected_parent_id,
        idempotency_key,
        bool(fork),
    )


def checkpoint_params(
    *,
    namespace: str,
    key: str,
    text: str,
    version: int,
    expected_version: int,
    fencing_token: int | None,
    now: str,
    owner: tuple[str | None, str | None, str | None],
) -> tuple[Any, ...] | dict[str, Any]:
    """The parameters of ``cp_insert`` (``expected_version == 0``) or ``cp_update``."""
    tenant, account, user = owner
    if expected_version == 0:
        return (namespace, key, version, text, now, now, fencing_token, tenant, account, user)
    return {
        "version": version,
        "value": text,
        "now": now,
        "token": fencing_token,
        "tenant": tenant,
        "account": account,
        "user": user,
        "ns": namespace,
        "key": key,
        "expected": expected_version,
    }


async def save_with_entries(
    conn: AsyncConnection[Any],
    sql: Statements,
    appends: Sequence[SessionAppend],
    params: Sequence[tuple[Any, ...]],
    save: tuple[Any, ...] | dict[str, Any],
    *,
    namespace: str,
    key: str,
    expected_version: int,
    fencing_token: int | None,
) -> str:
    """Append ``appends`` (their ``params``) and run the save (``save``: its parameters) in
    one transaction on ``conn``.

    On an autocommit connection (the store's own pool) the statements are pipelined:
    ``BEGIN``, the appends and the save in one round trip, then ``COMMIT`` or ``ROLLBACK``
    in a second. A host pool's connection outside autocommit runs them one by one inside
    ``conn.transaction()``.

    Returns:
        The record's ``created_at``.

    Raises:
        SessionAppendConflictError, ValueError: the first refused append (as ``append``
            raises); nothing is stored.
        CheckpointConflictError: the save was refused; nothing is stored.
    """
    statement = sql.cp_insert if expected_version == 0 else sql.cp_update
    if not conn.autocommit:
        async with conn.transaction():
            cursors = [await conn.execute(sql.append, values) for values in params]
            saved = await conn.execute(statement, save)
            return await _outcome(
                conn, sql, appends, cursors, saved, namespace, key, expected_version, fencing_token
            )
    async with conn.pipeline() as pipeline:
        await conn.execute("BEGIN")
        try:
            cursors = [await conn.execute(sql.append, values) for values in params]
            saved = await conn.execute(statement, save)
            await pipeline.sync()  # every result, still inside the transaction
            created_at = await _outcome(
                conn, sql, appends, cursors, saved, namespace, key, expected_version, fencing_token
            )
        except BaseException:
            await conn.execute("ROLLBACK")
            raise
        await conn.execute("COMMIT")  # sent, and its result read, when the pipeline closes
    return created_at


async def _outcome(
    conn: AsyncConnection[Any],
    sql: Statements,
    appends: Sequence[SessionAppend],
    cursors: Sequence[AsyncCursor[Any]],
    saved: AsyncCursor[Any],
    namespace: str,
    key: str,
    expected_version: int,
    fencing_token: int | None,
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
        cur = await conn.execute(sql.cp_load, (namespace, key))
        stored = await cur.fetchone()
        current = (int(stored[0]), stored[4]) if stored is not None else None
        raise checkpoint_conflict(namespace, key, expected_version, fencing_token, current)
    created_at: str = created[0]
    return created_at
