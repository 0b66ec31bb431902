"""Checkpoint store: the record type, the protocol and the in-memory store.

A durable run keeps its run-state envelope in a :class:`CheckpointStore` under
``namespace="prism.agent-run"`` and ``key=run_id``. Every write is a compare-and-set on the stored
version, optionally fenced by a monotonically increasing token, so that of several processes racing
to claim or advance the same run at most one succeeds.

* :class:`CheckpointRecord` — one stored value with its version and timestamps;
* :class:`CheckpointStore` — the protocol (``save_checkpoint`` / ``load_checkpoint``);
* :class:`MemoryCheckpointStore` — the in-memory reference implementation whose semantics the
  SQLite and PostgreSQL stores (``prism.stores``) repeat exactly;
* :func:`check_checkpoint_write` — the argument checks every implementation shares.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from prism._serde import Serializable
from prism._util import now_iso
from prism.errors import CheckpointConflictError
from prism.types import JsonValue, OwnershipScope

__all__ = [
    "AGENT_RUN_NAMESPACE",
    "CheckpointRecord",
    "CheckpointStore",
    "MemoryCheckpointStore",
    "check_checkpoint_write",
    "clone_json",
]

AGENT_RUN_NAMESPACE: Final = "prism.agent-run"
"""Namespace under which durable runs store their envelope (``key`` = run id)."""


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
    """In-memory :class:`CheckpointStore` for tests and single-process hosts.

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
            TypeError, ValueError: malformed arguments (:func:`check_checkpoint_write`).
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
