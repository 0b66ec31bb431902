"""Entry-checkpoint conformance: the optional ``save_checkpoint_with_entries`` of a store.

[`check_entry_checkpoints()`][prism.testing._conformance_entry_checkpoints.check_entry_checkpoints] runs as part of ``run_checkpoint_store_conformance`` for a store
that has the [`EntryCheckpointStore`][prism.checkpoints.EntryCheckpointStore] method and is a session
store too. It checks that the appends and the save are one transaction: everything is stored when
everything is accepted; nothing when an append or the save is refused (also when a later append
of the same call is the refused one); what a load returns equals what ``save_checkpoint`` stores
for the same value; and of concurrent calls with one expected version exactly one stores its
entries. It uses session ids and keys of its own.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final, Protocol

from prism._util import new_id
from prism.checkpoints import (
    CheckpointRecord,
    CheckpointStore,
    EntryCheckpointStore,
    SessionAppend,
)
from prism.errors import CheckpointConflictError, SessionAppendConflictError
from prism.store import SessionEntry, SessionStore, new_session_entry
from prism.testing._conformance_checks import CONCURRENT_WRITERS, check, expect
from prism.types import JsonValue, Message, TextContent, ToolCallContent

__all__ = ["EntryStore", "check_entry_checkpoints"]

_NAMESPACE: Final = "prism.conformance"


class EntryStore(CheckpointStore, EntryCheckpointStore, SessionStore, Protocol):
    """A store that holds sessions and checkpoints and writes both in one transaction."""


def _entry(session_id: str, parent: SessionEntry | None, text: str) -> SessionEntry:
    content: Any = (
        TextContent(text=text),
        ToolCallContent(id=new_id("call"), name="t", arguments={"q": text}),
    )
    return new_session_entry(
        "message",
        session_id=session_id,
        parent_id=None if parent is None else parent.id,
        message=Message(role="assistant", content=content),
    )


async def _save(
    store: EntryStore,
    key: str,
    entries: list[SessionAppend],
    value: JsonValue,
    version: int,
) -> CheckpointRecord:
    return await store.save_checkpoint_with_entries(
        entries=entries,
        namespace=_NAMESPACE,
        key=key,
        value=value,
        version=version,
        expected_version=version - 1,
    )


async def check_entry_checkpoints(store: EntryStore) -> None:
    """Check ``store.save_checkpoint_with_entries`` (see
    [`EntryCheckpointStore`][prism.checkpoints.EntryCheckpointStore]).

    Raises:
        AssertionError: the first deviation.
    """
    session = new_id("session")
    key = new_id("run")
    value: dict[str, Any] = {"status": "running", "leaf": 1, "nested": {"list": [1, "two", None]}}
    e1 = _entry(session, None, "one")
    e2 = _entry(session, e1, "two")
    record = await _save(
        store, key, [SessionAppend(e1), SessionAppend(e2, e1.id, "idem-1")], value, 1
    )
    check(record.version == 1 and record.value == value, "entry checkpoint: the saved record")
    check(await store.list(session) == [e1, e2], "entry checkpoint: entries stored in order")
    loaded = await store.load_checkpoint(namespace=_NAMESPACE, key=key)
    check(loaded is not None and loaded.value == value, "entry checkpoint: value round trip")
    other = new_id("run")
    await store.save_checkpoint(
        namespace=_NAMESPACE, key=other, value=value, version=1, expected_version=0
    )
    whole = await store.load_checkpoint(namespace=_NAMESPACE, key=other)
    check(
        whole is not None and loaded is not None and whole.value == loaded.value,
        "entry checkpoint: a load returns what a whole-value save stores",
    )

    # a refused save stores none of the entries
    e3 = _entry(session, e2, "three")
    await expect(
        CheckpointConflictError,
        store.save_checkpoint_with_entries(
            entries=[SessionAppend(e3, e2.id)],
            namespace=_NAMESPACE,
            key=key,
            value={"status": "x"},
            version=2,
            expected_version=0,
        ),
        "entry checkpoint: stale expected version",
    )
    check(await store.list(session) == [e1, e2], "entry checkpoint: refused save, no entry")

    # a refused append (first or later in the call) stores nothing, the checkpoint included
    not_tip = _entry(session, e1, "not a tip")
    await expect(
        SessionAppendConflictError,
        _save(store, key, [SessionAppend(not_tip, e1.id)], {"status": "y"}, 2),
        "entry checkpoint: append under a parent that is not a tip",
    )
    e4 = _entry(session, e2, "four")
    duplicate = new_session_entry(
        "message",
        id=e1.id,
        session_id=session,
        parent_id=e4.id,
        message=Message(role="user", content=(TextContent(text="dup"),)),
    )
    await expect(
        ValueError,
        _save(
            store,
            key,
            [SessionAppend(e4, e2.id), SessionAppend(duplicate, e4.id)],
            {"status": "z"},
            2,
        ),
        "entry checkpoint: a later append with a duplicate id",
    )
    again = _entry(session, e1, "again")
    await expect(
        SessionAppendConflictError,
        _save(
            store,
            key,
            [SessionAppend(e4, e2.id), SessionAppend(again, e1.id, "idem-1", True)],
            {"status": "z"},
            2,
        ),
        "entry checkpoint: a later append repeating an idempotent one",
    )
    check(await store.list(session) == [e1, e2], "entry checkpoint: refused append, no entry")
    loaded = await store.load_checkpoint(namespace=_NAMESPACE, key=key)
    check(
        loaded is not None and loaded.version == 1 and loaded.value == value,
        "entry checkpoint: refused append, checkpoint unchanged",
    )

    # a fork and no entries at all
    fork = _entry(session, e1, "fork")
    await _save(store, key, [SessionAppend(fork, e1.id, None, True)], {"status": "forked"}, 2)
    await _save(store, key, [], {"status": "empty"}, 3)
    check(
        [e.id for e in await store.list(session)] == [e1.id, e2.id, fork.id],
        "entry checkpoint: fork stored",
    )

    # concurrent calls with one expected version: exactly one stores its entries
    racers = [_entry(session, e2, f"racer {i}") for i in range(CONCURRENT_WRITERS)]
    outcomes = await asyncio.gather(
        *(
            store.save_checkpoint_with_entries(
                entries=[SessionAppend(entry, e2.id, None, True)],
                namespace=_NAMESPACE,
                key=key,
                value={"status": f"racer {i}"},
                version=4,
                expected_version=3,
            )
            for i, entry in enumerate(racers)
        ),
        return_exceptions=True,
    )
    winners = [i for i, o in enumerate(outcomes) if isinstance(o, CheckpointRecord)]
    check(len(winners) == 1, f"entry checkpoint: one concurrent call wins, got {outcomes!r}")
    losers = [o for i, o in enumerate(outcomes) if i not in winners]
    check(
        all(isinstance(o, CheckpointConflictError) for o in losers),
        "entry checkpoint: the others lose the compare-and-set",
    )
    stored = {e.id for e in await store.list(session)}
    check(
        [i for i, entry in enumerate(racers) if entry.id in stored] == winners,
        "entry checkpoint: only the winner's entries are stored",
    )
