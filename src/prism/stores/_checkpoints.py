"""Checkpoints in a database store: the ``CheckpointStore`` methods both stores share.

[`CheckpointMethods`][prism.stores._checkpoints.CheckpointMethods] implements ``save_checkpoint``, ``save_checkpoint_with_entries``
(entries and an envelope in ONE transaction), ``load_checkpoint`` and ``list_run_checkpoints``
(the run index of schema migration 2) over [`DatabaseAccess`][prism.stores._common.DatabaseAccess], with
the checks and the errors of the memory store. A dialect gives it its statements
([`CheckpointSql`][prism.stores._checkpoints.CheckpointSql]) and the two compare-and-set writes (``_sqlite_checkpoints``,
``_postgres_checkpoints``), which take one [`CheckpointWrite`][prism.stores._checkpoints.CheckpointWrite].
"""

from __future__ import annotations

import builtins
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from prism._util import now_iso
from prism.checkpoints import (
    AGENT_RUN_NAMESPACE,
    CheckpointRecord,
    SessionAppend,
    check_checkpoint_write,
    check_run_listing,
    clone_json,
    is_resumable,
)
from prism.errors import CheckpointConflictError
from prism.stores._common import DatabaseAccess, decoded
from prism.stores._sessions import Appends, check_append, check_appends
from prism.types import JsonValue, OwnershipScope

__all__ = [
    "CheckpointMethods",
    "CheckpointSql",
    "CheckpointWrite",
    "checkpoint_conflict",
    "run_index_columns",
    "run_listing",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointSql:
    """A dialect's checkpoint reads."""

    load: str
    """``(namespace, key)`` → ``(version, value, created_at, updated_at, fencing_token)``."""
    table: str
    """The (qualified) checkpoint table, for [`run_listing()`][prism.stores._checkpoints.run_listing]."""
    placeholder: str
    """The driver's parameter marker (``?`` or ``%s``)."""
    resumable_test: str
    """The dialect's condition on ``run_resumable``."""
    index_hints: bool
    """Whether a run listing names the index to search (SQLite's ``INDEXED BY``)."""


@dataclass(frozen=True, slots=True)
class CheckpointWrite:
    """One compare-and-set of ``(namespace, key)``, its value encoded once."""

    namespace: str
    key: str
    value: JsonValue
    """The value itself (SQLite derives its run-index columns from it)."""
    text: str
    """The stored JSON text of ``value``."""
    version: int
    expected_version: int
    fencing_token: int | None
    now: str
    """``updated_at`` (and ``created_at`` of a first version)."""
    owner: tuple[str | None, str | None, str | None]
    """``(tenant_id, account_id, user_id)``."""


class CheckpointMethods(DatabaseAccess):
    """The ``CheckpointStore``, ``EntryCheckpointStore`` and ``AgentRunIndex`` methods."""

    __slots__ = ()

    _checkpoint_sql: CheckpointSql
    """The dialect's checkpoint reads."""

    @abstractmethod
    async def _save(self, write: CheckpointWrite) -> tuple[str | None, tuple[int, Any] | None]:
        """One compare-and-set: ``(created_at, None)`` when it was stored, else ``(None,
        (stored version, stored token))`` (``(None, None)``: no such key)."""

    @abstractmethod
    async def _save_with_entries(self, appends: Appends, write: CheckpointWrite) -> str:
        """Append ``appends`` (the entries and their parameters), then save ``write``, in ONE
        transaction; the record's ``created_at``. Any refusal raises, and nothing of the call
        is stored."""

    @abstractmethod
    def _submit_with_entries(
        self, entries: tuple[SessionAppend, ...], write: CheckpointWrite
    ) -> Awaitable[str]:
        """What [`_save_with_entries()`][prism.stores._checkpoints.CheckpointMethods._save_with_entries] does for the (checked) ``entries``, which the
        dialect encodes where it runs the write; the awaitable of the record's ``created_at``."""

    async def save_checkpoint(
        self,
        *,
        namespace: str,
        key: str,
        value: JsonValue,
        version: int,
        expected_version: int,
        fencing_token: int | None = None,
        ownership: OwnershipScope | None = None,
    ) -> CheckpointRecord:
        """Compare-and-set ``(namespace, key)`` in one transaction.

        ``expected_version == 0`` inserts (fails when the key exists); otherwise the update
        holds ``WHERE version = expected_version AND`` the fencing condition.
        ``ownership`` is recorded in the row's ``tenant_id``/``account_id``/``user_id``.

        Returns:
            The new record (its ``value`` is a copy of ``value``).

        Raises:
            CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — stale
                ``expected_version``, ``version`` not greater, or a smaller/missing token.
            TypeError, ValueError: malformed arguments, or ``value`` is not JSON-compatible.
        """
        check_checkpoint_write(
            namespace=namespace,
            key=key,
            version=version,
            expected_version=expected_version,
            fencing_token=fencing_token,
        )
        write = self._write(
            namespace, key, value, version, expected_version, fencing_token, ownership
        )
        created_at, current = await self._save(write)
        if created_at is None:
            raise checkpoint_conflict(namespace, key, expected_version, fencing_token, current)
        return CheckpointRecord(
            namespace=namespace,
            key=key,
            version=version,
            value=clone_json(value),
            created_at=created_at,
            updated_at=write.now,
            fencing_token=fencing_token,
        )

    async def save_checkpoint_with_entries(
        self,
        *,
        entries: Sequence[SessionAppend],
        namespace: str,
        key: str,
        value: JsonValue,
        version: int,
        expected_version: int,
        fencing_token: int | None = None,
        ownership: OwnershipScope | None = None,
    ) -> CheckpointRecord:
        """Append ``entries`` in order, then compare-and-set the checkpoint: ONE transaction
        with one commit (see [`EntryCheckpointStore`][prism.checkpoints.EntryCheckpointStore]). Each
        append and the save are the statements ``append`` and ``save_checkpoint`` run, so the
        checks are theirs.

        Returns:
            The new record; its ``value`` is ``value`` itself (not a copy).

        Raises:
            SessionAppendConflictError: ``ERR_PRISM_SESSION_APPEND_CONFLICT`` — an append was
                refused; nothing is stored.
            ValueError: an entry id already exists in its session; nothing is stored.
            CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — the save was refused;
                no entry is stored.
            TypeError, ValueError: malformed arguments, or a value that is not JSON-compatible.
        """
        check_checkpoint_write(
            namespace=namespace,
            key=key,
            version=version,
            expected_version=expected_version,
            fencing_token=fencing_token,
        )
        appends = check_appends(entries, self._append_params)
        write = self._write(
            namespace, key, value, version, expected_version, fencing_token, ownership
        )
        created_at = await self._save_with_entries(appends, write)
        return CheckpointRecord(
            namespace=namespace,
            key=key,
            version=version,
            value=value,
            created_at=created_at,
            updated_at=write.now,
            fencing_token=fencing_token,
        )

    def _save_json_with_entries(
        self,
        *,
        entries: Sequence[SessionAppend],
        namespace: str,
        key: str,
        value: JsonValue,
        text: str,
        version: int,
        expected_version: int,
        fencing_token: int | None,
        ownership: OwnershipScope | None,
    ) -> Awaitable[str]:
        """[`save_checkpoint_with_entries()`][prism.stores._checkpoints.CheckpointMethods.save_checkpoint_with_entries] for a caller that has the value's JSON text
        already: a durable run's turn writes, which measured the envelope's size on that text.
        Not part of any store protocol; the same checks, statements and transaction.

        Args:
            entries: The appends, as ``save_checkpoint_with_entries`` takes them.
            namespace: The checkpoint namespace.
            key: The checkpoint key.
            value: The value (its run-index columns are read from it).
            text: ``value``'s compact JSON text (``ensure_ascii=False``, ``separators=(",",
                ":")``, keys in insertion order), exactly what the store would write for it.
            version: The new version.
            expected_version: The stored version being replaced (0: a first save).
            fencing_token: The writer's token.
            ownership: Recorded with the row.

        Returns:
            The awaitable of the record's ``created_at``; when it is a future, the write runs to
            its end even if the future is cancelled. The checks of the arguments raise at once.

        Raises:
            TypeError, ValueError, CheckpointConflictError: malformed arguments (at once).
            SessionAppendConflictError, ValueError, CheckpointConflictError: from the awaitable,
                as ``save_checkpoint_with_entries`` raises them; nothing is stored.
        """
        check_checkpoint_write(
            namespace=namespace,
            key=key,
            version=version,
            expected_version=expected_version,
            fencing_token=fencing_token,
        )
        appends = tuple(entries)
        for append in appends:
            check_append(append.entry, append.expected_parent_id, append.fork)
        owner = (
            (None, None, None)
            if ownership is None
            else (ownership.tenant_id, ownership.account_id, ownership.user_id)
        )
        write = CheckpointWrite(
            namespace,
            key,
            value,
            self._stored_text(value, text),
            version,
            expected_version,
            fencing_token,
            now_iso(),
            owner,
        )
        return self._submit_with_entries(appends, write)

    async def load_checkpoint(
        self, *, namespace: str, key: str, ownership: OwnershipScope | None = None
    ) -> CheckpointRecord | None:
        """The stored record of ``(namespace, key)``, or ``None``; ``ownership`` is not used."""
        decode = self._decode

        def finish(rows: builtins.list[Any]) -> CheckpointRecord | None:
            return checkpoint_record(namespace, key, rows[0], decode) if rows else None

        return await self._query(self._checkpoint_sql.load, (namespace, key), finish)

    async def list_run_checkpoints(
        self,
        *,
        session_id: str | None = None,
        statuses: Collection[str] | None = None,
        resumable: bool = False,
        limit: int = 100,
    ) -> builtins.list[CheckpointRecord]:
        """The stored run-state records, newest first (see
        ``AgentRunIndex``): one indexed query over the run
        index columns (schema migration 2) that every save fills.

        Raises:
            ValueError: ``limit`` smaller than 1.
            StoreError: ``ERR_PRISM_STORE_UNDECODABLE`` — a listed value does not decode.
        """
        wanted = check_run_listing(limit, statuses)
        if wanted == ():
            return []
        sql = self._checkpoint_sql
        query, params = run_listing(
            sql.table,
            sql.placeholder,
            session_id=session_id,
            statuses=wanted,
            resumable=resumable,
            limit=limit,
            resumable_test=sql.resumable_test,
            index_hints=sql.index_hints,
        )
        decode = self._decode

        def finish(rows: builtins.list[Any]) -> builtins.list[CheckpointRecord]:
            return [checkpoint_record(AGENT_RUN_NAMESPACE, row[0], row[1:], decode) for row in rows]

        return await self._query(query, params, finish)

    def _write(
        self,
        namespace: str,
        key: str,
        value: JsonValue,
        version: int,
        expected_version: int,
        fencing_token: int | None,
        ownership: OwnershipScope | None,
    ) -> CheckpointWrite:
        owner = (
            (None, None, None)
            if ownership is None
            else (ownership.tenant_id, ownership.account_id, ownership.user_id)
        )
        return CheckpointWrite(
            namespace,
            key,
            value,
            self._encode(value),
            version,
            expected_version,
            fencing_token,
            now_iso(),
            owner,
        )


def checkpoint_record(
    namespace: str, key: str, row: Sequence[Any], decode: Callable[[Any], Any]
) -> CheckpointRecord:
    """Decode a ``(version, value, created_at, updated_at, fencing_token)`` checkpoint row
    (``decode`` turns the stored ``value`` column into the JSON value).

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
    current: tuple[int, Any] | None,
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
