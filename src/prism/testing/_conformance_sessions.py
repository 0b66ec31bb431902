"""Session store conformance suite: one behaviour for every SessionStore.

[`run_session_store_conformance()`][prism.testing._conformance_sessions.run_session_store_conformance] checks append order, round trips, copies, duplicate ids,
the branch-tip compare-and-set (a second child under a tip fails, the same append with
``fork=True`` succeeds), idempotency keys, ``read_branch`` and concurrent appends to one tip
(exactly one wins). It creates its own session ids, so it can run against a shared, non-empty
database and leaves only its own rows behind.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from prism._util import new_id
from prism.errors import SessionAppendConflictError
from prism.store import SessionEntry, SessionStore, new_session_entry, read_branch
from prism.testing._conformance_checks import CONCURRENT_WRITERS, check, expect
from prism.types import (
    Message,
    ModelConfig,
    TextContent,
    ToolCallContent,
    ToolResultContent,
)

__all__ = ["run_session_store_conformance"]


def _message_entry(
    session_id: str, parent: SessionEntry | str | None, text: str, **extra: Any
) -> SessionEntry:
    return new_session_entry(
        "message",
        session_id=session_id,
        parent_id=parent.id if isinstance(parent, SessionEntry) else parent,
        message=Message(role="user", content=(TextContent(text=text),)),
        **extra,
    )


async def _ids(store: SessionStore, session_id: str) -> builtins.list[str]:
    return [e.id for e in await store.list(session_id)]


async def run_session_store_conformance(store: SessionStore) -> None:
    """Check that ``store`` behaves as the memory session store does (see the module docstring).

    Args:
        store: A [`SessionStore`][prism.store.SessionStore]; ``read_branch`` is checked when present.

    Raises:
        AssertionError: the first deviation, with a message naming the requirement.
    """
    await _session_round_trip(store)
    await _session_copies(store)
    await _session_duplicate_ids(store)
    await _session_tip_compare_and_set(store)
    await _session_missing_parent(store)
    await _session_idempotency(store)
    await _session_branches(store)
    await _session_concurrent_tip(store)
    await _session_concurrent_idempotent(store)


async def _session_round_trip(store: SessionStore) -> None:
    sid = new_id("session")
    model = ModelConfig(provider="mock", model="m-1", parameters={"temperature": 0.5})
    root = new_session_entry(
        "message",
        session_id=sid,
        run_id=new_id("run"),
        message=Message(
            role="assistant",
            content=(
                TextContent(text="héllo ✓ \U0001f600 nul:\x00 backslash:\\u0000"),
                ToolCallContent(id="call_1", name="lookup", arguments={"q": [1, 2.5, None]}),
            ),
        ),
        data={"nested": {"list": [1, "two", True, None], "float": 1.25}},
        metadata={"source": "conformance"},
    )
    change = new_session_entry(
        "model_change",
        session_id=sid,
        parent_id=root.id,
        model=model,
        previous_model=ModelConfig(provider="mock", model="m-0"),
    )
    tool = new_session_entry(
        "message",
        session_id=sid,
        parent_id=change.id,
        message=Message(
            role="tool",
            content=(ToolResultContent(tool_call_id="call_1", name="lookup", result={"ok": 1}),),
        ),
    )
    summary = new_session_entry("summary", session_id=sid, parent_id=tool.id, summary="s")
    custom = new_session_entry("custom", session_id=sid, parent_id=summary.id, data={"k": "v"})
    written = [root, change, tool, summary, custom]
    await store.append(root)
    previous = root
    for entry in written[1:]:
        await store.append(entry, expected_parent_id=previous.id)
        previous = entry
    listed = builtins.list(await store.list(sid))
    check(
        [e.id for e in listed] == [e.id for e in written],
        "list() must return entries in append order",
    )
    for got, want in zip(listed, written, strict=True):
        check(got == want, f"entry {want.kind} did not round-trip: {got!r} != {want!r}")
        check(type(got) is SessionEntry, "list() must return SessionEntry objects")
    check(
        builtins.list(await store.list(new_id("session"))) == [],
        "list() of an unknown session must be empty",
    )


async def _session_copies(store: SessionStore) -> None:
    sid = new_id("session")
    data: dict[str, Any] = {"items": [1, 2]}
    entry = _message_entry(sid, None, "copy", data=data)
    await store.append(entry)
    data["items"].append(3)
    data["extra"] = True
    first = (await store.list(sid))[0]
    check(
        first.data == {"items": [1, 2]},
        "the store must keep a copy, not the caller's objects",
    )
    got = first.data
    if isinstance(got, dict) and isinstance(got.get("items"), builtins.list):
        got["items"].append(99)
    again = (await store.list(sid))[0]
    check(
        again.data == {"items": [1, 2]},
        "entries returned by list() must be copies of the stored ones",
    )


async def _session_duplicate_ids(store: SessionStore) -> None:
    sid = new_id("session")
    entry = _message_entry(sid, None, "a")
    await store.append(entry)
    await expect(ValueError, store.append(entry), "duplicate entry id")
    clash = _message_entry(sid, None, "b", id=entry.id)
    await expect(ValueError, store.append(clash), "duplicate entry id (other content)")
    check(await _ids(store, sid) == [entry.id], "a refused append must store nothing")
    other = new_id("session")
    await store.append(_message_entry(other, None, "c", id=entry.id))
    check(
        await _ids(store, other) == [entry.id],
        "entry ids are keyed by (session_id, id); another session may reuse an id",
    )


async def _session_tip_compare_and_set(store: SessionStore) -> None:
    sid = new_id("session")
    root = _message_entry(sid, None, "root")
    await store.append(root)
    first = _message_entry(sid, root, "first child")
    await store.append(first, expected_parent_id=root.id)
    second = _message_entry(sid, root, "second child")
    exc = await expect(
        SessionAppendConflictError,
        store.append(second, expected_parent_id=root.id),
        "an append under a parent that already has a child",
    )
    check(
        getattr(exc, "code", None) == "ERR_PRISM_SESSION_APPEND_CONFLICT",
        "SessionAppendConflictError.code must be ERR_PRISM_SESSION_APPEND_CONFLICT",
    )
    check(
        await _ids(store, sid) == [root.id, first.id],
        "a conflicting append must store nothing",
    )
    await store.append(second, expected_parent_id=root.id, fork=True)
    check(
        await _ids(store, sid) == [root.id, first.id, second.id],
        "the same append with fork=True must succeed",
    )
    # The new tip accepts a child; the forked-over parent still refuses one without fork.
    grandchild = _message_entry(sid, second, "grandchild")
    await store.append(grandchild, expected_parent_id=second.id)
    await expect(
        SessionAppendConflictError,
        store.append(_message_entry(sid, root, "third"), expected_parent_id=root.id),
        "a parent with children is not a tip",
    )
    await expect(
        ValueError,
        store.append(_message_entry(sid, root, "x"), fork=True),
        "fork=True without expected_parent_id",
    )
    # Conflict checks come before the duplicate-id check.
    await expect(
        SessionAppendConflictError,
        store.append(first, expected_parent_id=root.id),
        "a tip conflict is reported before a duplicate id",
    )


async def _session_missing_parent(store: SessionStore) -> None:
    sid = new_id("session")
    other = new_id("session")
    root = _message_entry(sid, None, "root")
    await store.append(root)
    foreign = _message_entry(other, None, "foreign root")
    await store.append(foreign)
    orphan = _message_entry(sid, "entry_missing", "orphan")
    await expect(
        SessionAppendConflictError,
        store.append(orphan, expected_parent_id="entry_missing"),
        "an expected parent missing from the session",
    )
    stray = _message_entry(sid, foreign, "stray")
    await expect(
        SessionAppendConflictError,
        store.append(stray, expected_parent_id=foreign.id),
        "an expected parent that belongs to another session",
    )
    await expect(
        SessionAppendConflictError,
        store.append(stray, expected_parent_id=foreign.id, fork=True),
        "fork=True still needs the parent to exist in the session",
    )
    await expect(
        SessionAppendConflictError,
        store.append(
            _message_entry(sid, None, "dup", id=root.id), expected_parent_id="entry_missing"
        ),
        "a missing parent is reported before a duplicate id",
    )
    check(await _ids(store, sid) == [root.id], "refused appends must store nothing")


async def _session_idempotency(store: SessionStore) -> None:
    sid = new_id("session")
    root = _message_entry(sid, None, "root")
    await store.append(root, idempotency_key="k1")
    exc = await expect(
        SessionAppendConflictError,
        store.append(_message_entry(sid, None, "root again"), idempotency_key="k1"),
        "a repeated (session, idempotency_key, no expected parent) append",
    )
    check(
        getattr(exc, "code", None) == "ERR_PRISM_SESSION_APPEND_CONFLICT",
        "a duplicate idempotent append raises ERR_PRISM_SESSION_APPEND_CONFLICT",
    )
    child = _message_entry(sid, root, "child")
    await store.append(child, expected_parent_id=root.id, idempotency_key="k1")
    await expect(
        SessionAppendConflictError,
        store.append(
            _message_entry(sid, root, "child again"),
            expected_parent_id=root.id,
            idempotency_key="k1",
            fork=True,
        ),
        "a repeated (session, idempotency_key, expected parent) append, even with fork",
    )
    sibling = _message_entry(sid, root, "sibling")
    await store.append(sibling, expected_parent_id=root.id, idempotency_key="k2", fork=True)
    await expect(
        SessionAppendConflictError,
        store.append(_message_entry(sid, None, "dup id", id=root.id), idempotency_key="k1"),
        "a duplicate idempotent append is reported before a duplicate id",
    )
    check(
        await _ids(store, sid) == [root.id, child.id, sibling.id],
        "refused idempotent appends must store nothing",
    )
    other = new_id("session")
    await store.append(_message_entry(other, None, "other"), idempotency_key="k1")
    check(len(await _ids(store, other)) == 1, "idempotency keys are per session")


async def _session_branches(store: SessionStore) -> None:
    sid = new_id("session")
    root = _message_entry(sid, None, "root")
    a1 = _message_entry(sid, root, "a1")
    a2 = _message_entry(sid, a1, "a2")
    b1 = _message_entry(sid, root, "b1")
    b2 = _message_entry(sid, b1, "b2")
    await store.append(root)
    await store.append(a1, expected_parent_id=root.id)
    await store.append(a2, expected_parent_id=a1.id)
    await store.append(b1, expected_parent_id=root.id, fork=True)
    await store.append(b2, expected_parent_id=b1.id)
    check(
        await _ids(store, sid) == [root.id, a1.id, a2.id, b1.id, b2.id],
        "list() returns every branch in append order",
    )
    check(
        [e.id for e in await read_branch(store, sid, a2.id)] == [root.id, a1.id, a2.id],
        "the branch of a2 is root→a1→a2",
    )
    check(
        await read_branch(store, sid, b2.id) == [root, b1, b2],
        "the branch of b2 is root→b1→b2 and round-trips",
    )
    check(
        [e.id for e in await read_branch(store, sid, root.id)] == [root.id],
        "the branch of a root is the root",
    )
    if not callable(getattr(store, "read_branch", None)):
        return
    reader: Callable[[str, str], Awaitable[Sequence[SessionEntry]]] = store.read_branch  # type: ignore[attr-defined]
    direct = builtins.list(await reader(sid, b2.id))
    check(direct == [root, b1, b2], "read_branch returns root→leaf")
    exc = await expect(ValueError, reader(sid, "entry_unknown"), "read_branch of an unknown leaf")
    check(
        "Unknown session leaf" in str(exc),
        f"message must say 'Unknown session leaf', got {exc}",
    )
    await expect(
        ValueError,
        reader(new_id("session"), root.id),
        "read_branch of a leaf of another session",
    )
    orphan = _message_entry(sid, "entry_gone", "orphan")
    await store.append(orphan)
    exc = await expect(ValueError, reader(sid, orphan.id), "read_branch over a missing parent")
    check(
        "Missing session parent" in str(exc),
        f"message must say 'Missing session parent', got {exc}",
    )


async def _session_concurrent_tip(store: SessionStore) -> None:
    sid = new_id("session")
    root = _message_entry(sid, None, "root")
    await store.append(root)
    contenders = [_message_entry(sid, root, f"c{i}") for i in range(CONCURRENT_WRITERS)]
    outcomes = await asyncio.gather(
        *(store.append(c, expected_parent_id=root.id) for c in contenders),
        return_exceptions=True,
    )
    wins = [o for o in outcomes if o is None]
    losses = [o for o in outcomes if isinstance(o, SessionAppendConflictError)]
    check(
        len(wins) == 1 and len(losses) == CONCURRENT_WRITERS - 1,
        f"of {CONCURRENT_WRITERS} concurrent appends to one tip exactly one must win, "
        f"got {outcomes!r}",
    )
    check(
        len(await _ids(store, sid)) == 2,
        "exactly one child may be stored under a contested tip",
    )


async def _session_concurrent_idempotent(store: SessionStore) -> None:
    sid = new_id("session")
    contenders = [_message_entry(sid, None, f"r{i}") for i in range(CONCURRENT_WRITERS)]
    outcomes = await asyncio.gather(
        *(store.append(c, idempotency_key="same") for c in contenders),
        return_exceptions=True,
    )
    wins = [o for o in outcomes if o is None]
    check(
        len(wins) == 1
        and all(isinstance(o, SessionAppendConflictError) for o in outcomes if o is not None),
        f"of concurrent appends with one idempotency key exactly one must win, got {outcomes!r}",
    )
