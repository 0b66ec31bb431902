"""Turn writes: a durable ``every-turn`` leg's session entries and envelope in one transaction.

When a durable leg checkpoints at every turn, marks each tool dispatch before its side effect
(no approvals), and its session store is its checkpoint store with
[`EntryCheckpointStore`][prism.checkpoints.EntryCheckpointStore] (the SQLite and PostgreSQL stores;
checked once per leg), the leg holds its session appends from its first turn boundary on and
hands them to the store with its next envelope write, which stores both in ONE transaction.
A tool turn (text, two parallel tool calls, their two result rows) then writes:

* at the dispatch of its calls, before any side effect: the assistant message and the envelope
  marking the round's calls ``dispatched`` — one transaction (the calls that start together
  join one marking write, see ``DurableDriver``);
* at the next turn boundary: the result rows and the ``running`` envelope — one transaction.

Two commits instead of six (three appends and three envelope saves, each its own transaction).
(A round of N parallel calls makes N marking writes, one per call, each before its call runs.)
Measured with ``benchmarks/bench_checkpoint_writes.py`` (the realistic scenario, N = 20 and 200
turns, figures per turn and the same at both N): SQLite 6 → 2 commits and ~127 KB → ~75 KB
written to the WAL; PostgreSQL 6 → 2 commits (each a WAL flush with the default
``synchronous_commit=on``) and 6 → 4 round trips. A write carrying appends is shielded from
cancellation (a task per write, ~16 µs) so that the held appends never disagree with the store.

Encoded once: the envelope's JSON text, which [`DurableRun.write()`][prism.runtime.durable._durable_run.DurableRun.write] made to measure the
envelope, is handed to a store that takes it ([`JsonEntryCheckpointStore`][prism.runtime.durable._turn_writes.JsonEntryCheckpointStore], the SQLite and
PostgreSQL stores, through a private method beside their public protocol), so the store does
not encode the envelope again; each held entry is encoded once, in one walk, where the write
runs (SQLite makes a turn write on the caller's thread while the store is idle, see
``prism.stores._fast_sqlite_writes``, else on its worker thread). A write with appends waits for the
store's future through a cancellation instead of running in a task of its own.

What a crash (a killed process) leaves is what the envelope says, never more, never less: held
entries are stored only with the envelope that covers them. An assistant message whose tool
calls never reached dispatch, or a turn's final text, is not stored until the next write (the
marking, or the run's terminal envelope): a crash before it re-requests that provider turn (it
was never stored), as a crash between an append and the next write does on the other path.
Result rows are stored with the next boundary, so a crash after a tool ran but before that
boundary leaves the call ``dispatched`` without a row, and a resume reports it (operator
resolution) instead of running it again. Entries are never visible in the store before the
envelope that covers them, and an envelope is never stored without them.

A held append is refused when its envelope write is (a lost compare-and-set, a branch tip
another writer took, the store down): the write raises, the appends stay held for the next
write, and at the end of a failed leg the ones never written are forgotten and the session's
leaf goes back to the last stored entry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Protocol

from prism.checkpoints import (
    AGENT_RUN_NAMESPACE,
    EntryCheckpointStore,
    SessionAppend,
)
from prism.errors import AgentRunStateError
from prism.runtime.durable._run_state import RunStateOptions
from prism.runtime.run._shield import finished
from prism.runtime.run.state import SessionState
from prism.types import JsonValue, OwnershipScope

__all__ = ["JsonEntryCheckpointStore", "TurnWrites", "turn_writes_for"]

class JsonEntryCheckpointStore(Protocol):
    """A store whose turn writes take the envelope's JSON text as made by the durable run (the
    database stores; not a public protocol: the public one is
    [`EntryCheckpointStore`][prism.checkpoints.EntryCheckpointStore])."""

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
        """``save_checkpoint_with_entries`` with ``value``'s compact JSON ``text``; the
        awaitable of the record's ``created_at``."""
        ...


class TurnWrites:
    """The held session appends of one durable leg and the store that writes them.

    Args:
        store: The leg's session and checkpoint store.
        state: The session state whose appends are held.
        fencing_token: The leg's fencing token (every save carries it).
    """

    __slots__ = ("_json_store", "_state", "_store", "_token", "held")

    def __init__(
        self, store: EntryCheckpointStore, state: SessionState, fencing_token: int | None
    ) -> None:
        self._store = store
        self._json_store = _json_store(store)
        self._state = state
        self._token = fencing_token
        self.held: list[SessionAppend] | None = None
        """The held appends (``None`` until [`hold()`][prism.runtime.durable._turn_writes.TurnWrites.hold]); each write empties it."""

    def hold(self) -> None:
        """Hold the session's appends from now on (idempotent)."""
        if self.held is None:
            self.held = self._state.hold_appends()

    async def save(
        self,
        key: str,
        value: JsonValue,
        text: str,
        version: int,
        ownership: OwnershipScope | None,
    ) -> int:
        """Save ``value`` (its compact JSON ``text``) as version ``version + 1`` of run ``key``
        with the held appends; the stored version.

        A write with appends runs to completion even when the leg is cancelled meanwhile, so
        that the held appends and the caller's version always say what the store holds.

        Raises:
            CheckpointConflictError, SessionAppendConflictError, ValueError: the store refused
                the save or an append; nothing is stored and the appends stay held.
            AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — an entry holds a string with
                no UTF-8 form (a lone surrogate); nothing is stored and the appends stay held.
        """
        held = self.held
        appends = tuple(held) if held else ()
        if not appends:
            await self._write((), key, value, text, version, ownership)
            return version + 1
        try:
            await finished(self._write(appends, key, value, text, version, ownership))
        except UnicodeEncodeError as exc:
            raise AgentRunStateError(f"a session entry is not storable: {exc}") from exc
        assert held is not None
        del held[: len(appends)]
        return version + 1

    def _write(
        self,
        appends: tuple[SessionAppend, ...],
        key: str,
        value: JsonValue,
        text: str,
        version: int,
        ownership: OwnershipScope | None,
    ) -> Awaitable[object]:
        json_store = self._json_store
        if json_store is not None:
            return json_store._save_json_with_entries(
                entries=appends,
                namespace=AGENT_RUN_NAMESPACE,
                key=key,
                value=value,
                text=text,
                version=version + 1,
                expected_version=version,
                fencing_token=self._token,
                ownership=ownership,
            )
        return self._store.save_checkpoint_with_entries(
            entries=appends,
            namespace=AGENT_RUN_NAMESPACE,
            key=key,
            value=value,
            version=version + 1,
            expected_version=version,
            fencing_token=self._token,
            ownership=ownership,
        )

    def release(self) -> None:
        """Stop holding (idempotent). Appends no write took are forgotten; the session's leaf
        goes back to the last stored entry."""
        if self.held is not None:
            self.held = None
            self._state.release_appends()


def _json_store(store: EntryCheckpointStore) -> JsonEntryCheckpointStore | None:
    """``store`` when its class writes the envelope's text with ``_save_json_with_entries``
    beside the ``save_checkpoint_with_entries`` it defines in the same class (a subclass or a
    wrapper that changes ``save_checkpoint_with_entries`` is called through it), else ``None``."""
    owners: dict[str, type] = {}
    for klass in type(store).__mro__:
        for name in ("save_checkpoint_with_entries", "_save_json_with_entries"):
            if name in vars(klass):
                owners.setdefault(name, klass)
    if owners.get("_save_json_with_entries") is not owners.get(
        "save_checkpoint_with_entries", False
    ):
        return None
    return store  # type: ignore[return-value]  # it has the method (checked above)


def turn_writes_for(options: RunStateOptions, state: SessionState) -> TurnWrites | None:
    """The turn writes of a leg whose checkpoint store is its session store and writes entries
    and envelopes together ([`EntryCheckpointStore`][prism.checkpoints.EntryCheckpointStore]), else
    ``None`` (each append and each envelope is its own write)."""
    store = options.checkpoints
    session_store: object = state.store
    if store is not session_store or not isinstance(store, EntryCheckpointStore):
        return None
    return TurnWrites(store, state, options.fencing_token)
