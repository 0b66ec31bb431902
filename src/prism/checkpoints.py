"""Checkpoint store: the record type, the protocol and the in-memory store.

A durable run keeps its run-state envelope in a [`CheckpointStore`][prism.checkpoints.CheckpointStore] under
``namespace="prism.agent-run"`` and ``key=run_id``. Every write is a compare-and-set on the stored
version, optionally fenced by a monotonically increasing token, so that of several processes racing
to claim or advance the same run at most one succeeds.

* [`CheckpointRecord`][prism.checkpoints.CheckpointRecord] — one stored value with its version and timestamps;
* [`CheckpointStore`][prism.checkpoints.CheckpointStore] — the protocol (``save_checkpoint`` / ``load_checkpoint``);
* [`MemoryCheckpointStore`][prism.checkpoints.MemoryCheckpointStore] — the in-memory reference implementation whose semantics the
  SQLite and PostgreSQL stores (``prism.stores``) repeat exactly;
* ``check_checkpoint_write()`` — the argument checks every implementation shares;
* ``AgentRunIndex`` — the optional capability of listing the stored runs (what a worker or an
  operator resumes), which the memory, SQLite and PostgreSQL stores implement;
* [`EntryCheckpointStore`][prism.checkpoints.EntryCheckpointStore] and [`SessionAppend`][prism.checkpoints.SessionAppend] — the optional capability of a store
  that holds the sessions *and* the checkpoints (SQLite, PostgreSQL): session appends and a
  checkpoint save in one transaction, which an ``every-turn`` durable run uses to write a turn's
  entries and its envelope together.
"""

from __future__ import annotations

import builtins
import copy
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from prism._serde import Serializable
from prism._util import now_iso
from prism.errors import CheckpointConflictError
from prism.session_entry import SessionEntry
from prism.types import JsonValue, OwnershipScope

__all__ = [
    "AGENT_RUN_NAMESPACE",
    "RESUMABLE",
    "AgentRunIndex",
    "CheckpointRecord",
    "CheckpointStore",
    "EntryCheckpointStore",
    "MemoryCheckpointStore",
    "SessionAppend",
    "check_checkpoint_write",
    "check_run_listing",
    "clone_json",
    "is_resumable",
]

AGENT_RUN_NAMESPACE: Final = "prism.agent-run"
"""Namespace under which durable runs store their envelope (``key`` = run id)."""
DECISION_NAMESPACE: Final = "prism.decision"
"""Namespace of the decisions recorded for another process to apply (``key`` = run id; see
``prism.runtime.durable.record_decisions``). Importable from here, outside ``__all__``."""


@dataclass(frozen=True, slots=True)
class CheckpointRecord(Serializable):
    """One stored checkpoint.

    Versions start at 1 (the first save must use ``expected_version=0``) and only grow.
    """

    namespace: str
    """Grouping of keys, e.g. ``"prism.agent-run"``."""
    key: str
    """Key within the namespace, e.g. the run id."""
    version: int
    """Version of this value (>= 1); the next save must pass it as ``expected_version``."""
    value: JsonValue
    """The stored JSON value (a copy: mutating it never changes the store)."""
    created_at: str
    """ISO-8601 UTC time of the first save of this key (ms precision, ``Z``)."""
    updated_at: str
    """ISO-8601 UTC time of the latest save."""
    fencing_token: int | None = None
    """Fencing token of the latest save; ``None`` when it carried none."""


@runtime_checkable
class CheckpointStore(Protocol):
    """Versioned, fenced key-value store for run-state envelopes.

    Semantics every implementation MUST follow (checked by
    ``prism.testing.run_checkpoint_store_conformance``):

    * ``save_checkpoint`` succeeds only when ``expected_version`` equals the stored version (0 when
      the key is absent), ``version`` is greater than it, and — when a fencing token is stored —
      ``fencing_token`` is an int not smaller than the stored one; otherwise it raises
      ``CheckpointConflictError`` (``ERR_PRISM_CHECKPOINT_CONFLICT``) and stores nothing. The
      check and the write are atomic, so of two writers with the same ``expected_version`` at most
      one wins.
    * ``created_at`` is kept from the first save; ``updated_at`` is the time of the latest one.
    * Values are copied on save and on load.
    * ``ownership`` is recorded where the store has a place for it and is never used to filter
      or reject (ownership enforcement is out of scope).
    """

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
        """Compare-and-set ``(namespace, key)`` to ``value`` at ``version``.

        Raises:
            CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — stale
                ``expected_version``, ``version`` not greater, or a smaller/missing fencing token.
        """
        ...

    async def load_checkpoint(
        self, *, namespace: str, key: str, ownership: OwnershipScope | None = None
    ) -> CheckpointRecord | None:
        """The stored record of ``(namespace, key)``, or ``None`` when absent."""
        ...


@dataclass(frozen=True, slots=True)
class SessionAppend:
    """One session append, held to be written together with a checkpoint: the arguments of
    [`append()`][prism.store.SessionStore.append]."""

    entry: SessionEntry
    """The entry to append (already redacted)."""
    expected_parent_id: str | None = None
    """The branch tip the entry must attach to (``None``: no tip check)."""
    idempotency_key: str | None = None
    """The append's idempotency key, if any."""
    fork: bool = False
    """Start a sibling branch under ``expected_parent_id``."""


@runtime_checkable
class EntryCheckpointStore(Protocol):
    """Optional capability of a store that is the session store *and* the checkpoint store:
    append session entries and compare-and-set a checkpoint in ONE transaction.

    A durable run with ``checkpoint_policy="every-turn"`` whose session store and checkpoint
    store are the same object with this method (checked once per run leg) holds its session
    appends and writes them with its next envelope: a turn's entries and its checkpoint are
    stored together or not at all. Semantics every implementation MUST follow (checked by
    ``prism.testing.run_checkpoint_store_conformance`` when the store has this method):

    * the appends are made in order, each exactly as ``append(entry,
      expected_parent_id=..., idempotency_key=..., fork=...)`` would make it (an entry may attach
      to one appended before it in the same call), then the checkpoint is saved exactly as
      ``save_checkpoint`` would save it;
    * all or nothing: when any append or the save is refused, or the store fails, nothing of the
      call is stored and the error is the one that append or save raises;
    * a later ``load_checkpoint`` returns what ``save_checkpoint(value=value, ...)`` would have
      stored, and the entries read back as ``append`` would have stored them.
    """

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
        """Append ``entries`` in order, then compare-and-set ``(namespace, key)`` to ``value``.

        Args:
            entries: The appends, in order (may be empty).
            namespace, key, value, version, expected_version, fencing_token, ownership: As for
                [`CheckpointStore.save_checkpoint()`][prism.checkpoints.CheckpointStore.save_checkpoint].

        Returns:
            The new record. Its ``value`` is ``value`` itself, not a copy: the caller hands the
            value over and does not change it afterwards.

        Raises:
            SessionAppendConflictError: ``ERR_PRISM_SESSION_APPEND_CONFLICT`` — an append was
                refused (missing or non-tip parent, repeated idempotent append).
            ValueError: an entry id already exists in its session.
            CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — the save was refused.
            TypeError, ValueError: malformed arguments.
        """
        ...


RESUMABLE: Final = "resumable"
"""The pseudo-status of a listing: ``running``, ``suspended``, or ``succeeded`` with
``stop_reason="host_policy"`` (a turn-policy stop) — the runs a resume can continue."""


@runtime_checkable
class AgentRunIndex(Protocol):
    """Optional capability of a checkpoint store: list the stored run-state envelopes.

    What ``prism.list_agent_runs`` needs. Semantics every implementation MUST follow (checked by
    ``prism.testing.run_checkpoint_store_conformance`` when the store has this method):

    * only records of ``namespace="prism.agent-run"`` whose value is a JSON object are listed;
    * ``session_id`` keeps those whose value's ``session_id`` equals it; ``statuses`` those whose
      ``status`` is one of them; ``resumable`` those [`is_resumable()`][prism.checkpoints.is_resumable] accepts;
    * most recently updated first (``updated_at`` descending, then ``key`` descending), at most
      ``limit``; values are copies.
    """

    async def list_run_checkpoints(
        self,
        *,
        session_id: str | None = None,
        statuses: Collection[str] | None = None,
        resumable: bool = False,
        limit: int = 100,
    ) -> list[CheckpointRecord]:
        """The matching run-state records, newest first.

        Raises:
            ValueError: ``limit`` smaller than 1.
        """
        ...


def is_resumable(value: object) -> bool:
    """A run-state envelope a resume can continue: ``running``, ``suspended``, or a
    ``succeeded`` one with ``stop_reason="host_policy"``."""
    if not isinstance(value, dict):
        return False
    status = value.get("status")
    return status in ("running", "suspended") or (
        status == "succeeded" and value.get("stop_reason") == "host_policy"
    )


def check_run_listing(limit: object, statuses: object) -> tuple[str, ...] | None:
    """The argument checks of ``list_run_checkpoints``; returns ``statuses`` as a tuple.

    Raises:
        TypeError: ``limit`` not an int, ``statuses`` a string or not strings.
        ValueError: ``limit`` smaller than 1.
    """
    if not _is_int(limit):
        raise TypeError("list_run_checkpoints: limit must be an int")
    assert isinstance(limit, int)
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    if statuses is None:
        return None
    if isinstance(statuses, str) or not isinstance(statuses, Collection):
        raise TypeError("list_run_checkpoints: statuses must be a collection of str")
    out = tuple(statuses)
    if not all(isinstance(s, str) for s in out):
        raise TypeError("list_run_checkpoints: statuses must be a collection of str")
    return out


# --------------------------------------------------------------------------- shared checks


_INT64_MAX: Final = 2**63 - 1
"""Versions and fencing tokens are stored as signed 64-bit integers by the database stores."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_checkpoint_write(
    *,
    namespace: object,
    key: object,
    version: object,
    expected_version: object,
    fencing_token: object,
) -> None:
    """Validate the arguments of ``save_checkpoint`` before touching any state.

    The version ordering (``version > expected_version``) is checked here, so a store only needs
    to compare ``expected_version`` and the fencing token with what it holds.

    Raises:
        TypeError: ``namespace``/``key`` not ``str``; ``version``/``expected_version`` not
            ``int``; ``fencing_token`` neither ``int`` nor ``None``.
        ValueError: ``expected_version`` negative, or ``version``/``fencing_token`` outside the
            signed 64-bit range the database stores use.
        CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — ``version`` is not greater
            than ``expected_version`` (the stored version after a successful compare).
    """
    if not isinstance(namespace, str) or not isinstance(key, str):
        raise TypeError("save_checkpoint: namespace and key must be str")
    if not _is_int(version) or not _is_int(expected_version):
        raise TypeError("save_checkpoint: version and expected_version must be int")
    if fencing_token is not None and not _is_int(fencing_token):
        raise TypeError("save_checkpoint: fencing_token must be an int or None")
    assert isinstance(version, int) and isinstance(expected_version, int)
    assert fencing_token is None or isinstance(fencing_token, int)
    if expected_version < 0:
        raise ValueError(f"save_checkpoint: expected_version must be >= 0, got {expected_version}")
    if version > _INT64_MAX:
        raise ValueError(f"save_checkpoint: version must be < 2**63, got {version}")
    if fencing_token is not None and not -_INT64_MAX - 1 <= fencing_token <= _INT64_MAX:
        raise ValueError("save_checkpoint: fencing_token must fit in a signed 64-bit integer")
    if version <= expected_version:
        raise CheckpointConflictError(
            f"Checkpoint version conflict: new version {version} is not greater than "
            f"{expected_version} ({namespace}/{key})"
        )


def clone_json(value: Any) -> Any:
    """Deep-copy a JSON value (dicts, lists, tuples, scalars); other objects via ``deepcopy``.

    Faster than ``copy.deepcopy`` for the plain JSON envelopes checkpoints hold. O(size).
    """
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    t = type(value)
    if t is dict:
        return {k: clone_json(v) for k, v in value.items()}
    if t is list:
        return [clone_json(v) for v in value]
    if t is tuple:
        return tuple(clone_json(v) for v in value)
    return copy.deepcopy(value)


# --------------------------------------------------------------------------- memory store


class MemoryCheckpointStore:
    """In-memory [`CheckpointStore`][prism.checkpoints.CheckpointStore] for tests and single-process hosts.

    ``save_checkpoint`` is a compare-and-set on ``(namespace, key)``: ``expected_version`` must
    equal the stored version (0 when absent), ``version`` must be greater, and a stored fencing
    token may only be met by an equal or larger token (a save without a token is refused once a
    token is stored); otherwise ``CheckpointConflictError``. Values are deep-copied on save and on
    load. ``ownership`` is accepted and ignored. Safe to share between threads; O(value size) per
    call.
    """

    __slots__ = ("_lock", "_records")

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], CheckpointRecord] = {}
        self._lock = threading.Lock()

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
        """Compare-and-set ``(namespace, key)``.

        Args:
            namespace: Key namespace, e.g. ``"prism.agent-run"``.
            key: Key, e.g. the run id.
            value: JSON value to store (copied).
            version: New version; must be greater than ``expected_version``.
            expected_version: The version the caller last saw; 0 when the key must be absent.
            fencing_token: Writer's fencing token; must be >= a stored token.
            ownership: Ignored by this store.

        Returns:
            The new record (its ``value`` is a copy).

        Raises:
            CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — stale
                ``expected_version``, ``version`` not greater, or a smaller/missing token.
            TypeError, ValueError: malformed arguments (``check_checkpoint_write()``).
        """
        check_checkpoint_write(
            namespace=namespace,
            key=key,
            version=version,
            expected_version=expected_version,
            fencing_token=fencing_token,
        )
        stored_value = clone_json(value)
        now = now_iso()
        with self._lock:
            current = self._records.get((namespace, key))
            current_version = current.version if current is not None else 0
            if current_version != expected_version:
                raise CheckpointConflictError(
                    f"Checkpoint version conflict: expected version {expected_version}, stored "
                    f"version is {current_version} ({namespace}/{key})"
                )
            stored_token = current.fencing_token if current is not None else None
            if stored_token is not None and (fencing_token is None or fencing_token < stored_token):
                raise CheckpointConflictError(
                    f"Checkpoint fencing conflict: token {fencing_token} is older than the stored "
                    f"token {stored_token} ({namespace}/{key})"
                )
            record = CheckpointRecord(
                namespace=namespace,
                key=key,
                version=version,
                value=stored_value,
                created_at=current.created_at if current is not None else now,
                updated_at=now,
                fencing_token=fencing_token,
            )
            self._records[(namespace, key)] = record
        return _copy_record(record)

    async def load_checkpoint(
        self, *, namespace: str, key: str, ownership: OwnershipScope | None = None
    ) -> CheckpointRecord | None:
        """A copy of the stored record, or ``None`` when ``(namespace, key)`` is absent.

        ``ownership`` is ignored.
        """
        with self._lock:
            record = self._records.get((namespace, key))
        return _copy_record(record) if record is not None else None

    async def list_run_checkpoints(
        self,
        *,
        session_id: str | None = None,
        statuses: Collection[str] | None = None,
        resumable: bool = False,
        limit: int = 100,
    ) -> builtins.list[CheckpointRecord]:
        """The stored run-state records, newest first (see ``AgentRunIndex``).
        O(records)."""
        wanted = check_run_listing(limit, statuses)
        with self._lock:
            records = [
                r
                for (namespace, _), r in self._records.items()
                if namespace == AGENT_RUN_NAMESPACE and isinstance(r.value, dict)
            ]
        out = []
        for record in records:
            value = record.value
            assert isinstance(value, dict)
            if session_id is not None and value.get("session_id") != session_id:
                continue
            if wanted is not None and value.get("status") not in wanted:
                continue
            if resumable and not is_resumable(value):
                continue
            out.append(record)
        out.sort(key=lambda r: (r.updated_at, r.key), reverse=True)
        return [_copy_record(r) for r in out[:limit]]


def _copy_record(record: CheckpointRecord) -> CheckpointRecord:
    return CheckpointRecord(
        namespace=record.namespace,
        key=record.key,
        version=record.version,
        value=clone_json(record.value),
        created_at=record.created_at,
        updated_at=record.updated_at,
        fencing_token=record.fencing_token,
    )
