"""Session store and branch rebuild (STORE-1..STORE-5)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import pytest

from prism.errors import SessionAppendConflictError
from prism.store import (
    BranchReadingSessionStore,
    MemorySessionStore,
    SessionEntry,
    SessionStore,
    current_model,
    history_from_branch,
    new_session_entry,
    read_branch,
    rebuild_history,
    walk_branch,
)
from prism.types import (
    Message,
    ModelConfig,
    TextContent,
    ToolCallContent,
    assistant_message,
    user_message,
)
from store_support import SID, chain, msg_entry


async def append_all(store: MemorySessionStore, entries: Sequence[SessionEntry]) -> None:
    for e in entries:
        await store.append(e, expected_parent_id=e.parent_id)


# --------------------------------------------------------------------------- STORE-1


def test_store1_entry_fields_and_round_trip() -> None:
    """STORE-1: SessionEntry(id, session_id, kind, timestamp, parent_id, run_id, message, ...)."""
    model = ModelConfig("mock", "m1")
    e = SessionEntry(
        "entry_1",
        SID,
        "model_change",
        "2024-01-01T00:00:00.000Z",
        parent_id="entry_0",
        run_id="run_1",
        model=model,
        previous_model=ModelConfig("mock", "m0"),
        metadata={"k": 1},
    )
    data = e.to_dict()
    assert data["kind"] == "model_change"
    assert "message" not in data and "summary" not in data
    assert SessionEntry.from_dict(data) == e
    m = msg_entry(Message("assistant", (TextContent("x"), ToolCallContent("c", "t", {"a": [1]}))))
    assert SessionEntry.from_dict(m.to_dict()) == m


def test_store4_new_entry_ids_and_timestamps() -> None:
    """ARCH-13/STORE-4: generated entry ids and timestamps have the documented shape."""
    e = new_session_entry("summary", session_id=SID, summary="s", run_id="run_x")
    assert re.fullmatch(r"entry_[0-9a-f]{32}", e.id)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", e.timestamp)
    assert e.run_id == "run_x" and e.parent_id is None


# --------------------------------------------------------------------------- STORE-2


def test_store2_memory_store_satisfies_both_protocols() -> None:
    """STORE-2: append/list, plus the optional read_branch."""
    store = MemorySessionStore()
    assert isinstance(store, SessionStore)
    assert isinstance(store, BranchReadingSessionStore)


class ListOnlyStore:
    """A store without read_branch, counting list() calls."""

    def __init__(self) -> None:
        self.inner = MemorySessionStore()
        self.list_calls = 0

    async def append(self, entry: SessionEntry, *, expected_parent_id: str | None = None,
                     idempotency_key: str | None = None, fork: bool = False) -> None:
        await self.inner.append(entry, expected_parent_id=expected_parent_id,
                                idempotency_key=idempotency_key, fork=fork)

    async def list(self, session_id: str) -> Sequence[SessionEntry]:
        self.list_calls += 1
        return await self.inner.list(session_id)


async def test_store2_read_branch_falls_back_to_list_and_walk() -> None:
    """STORE-2: without read_branch the runtime uses list plus an in-memory parent walk."""
    store = ListOnlyStore()
    assert not isinstance(store, BranchReadingSessionStore)
    entries = chain(user_message("a"), assistant_message("b"))
    await append_all(store.inner, entries)
    branch = await read_branch(store, SID, entries[-1].id)
    assert [e.id for e in branch] == [e.id for e in entries]
    assert store.list_calls == 1
    assert await read_branch(store, SID, None) == []


async def test_store2_read_branch_prefers_the_store_method() -> None:
    """STORE-2: read_branch is used when the store has it."""
    store = MemorySessionStore()
    calls: list[tuple[str, str]] = []
    original = store.read_branch

    class Spy:
        async def append(self, *a: Any, **k: Any) -> None:
            await store.append(*a, **k)

        async def list(self, session_id: str) -> Sequence[SessionEntry]:
            raise AssertionError("list must not be used")

        async def read_branch(self, session_id: str, leaf_id: str) -> Sequence[SessionEntry]:
            calls.append((session_id, leaf_id))
            return await original(session_id, leaf_id)

    entries = chain(user_message("a"))
    await append_all(store, entries)
    branch = await read_branch(Spy(), SID, entries[0].id)
    assert [e.id for e in branch] == [entries[0].id]
    assert calls == [(SID, entries[0].id)]


# --------------------------------------------------------------------------- STORE-3


async def test_store3_duplicate_id_raises_value_error() -> None:
    """STORE-3: a duplicate entry id is rejected with ValueError."""
    store = MemorySessionStore()
    e = msg_entry(user_message("a"))
    await store.append(e)
    with pytest.raises(ValueError, match="Duplicate"):
        await store.append(e)
    assert len(await store.list(SID)) == 1


async def test_store3_expected_parent_must_exist_in_the_same_session() -> None:
    """STORE-3: a missing or foreign expected parent is a conflict; nothing is stored."""
    store = MemorySessionStore()
    root = msg_entry(user_message("a"))
    await store.append(root)
    orphan = msg_entry(user_message("b"), parent=root)
    with pytest.raises(SessionAppendConflictError) as info:
        await store.append(orphan, expected_parent_id="entry_missing")
    assert info.value.code == "ERR_PRISM_SESSION_APPEND_CONFLICT"
    other = new_session_entry("message", session_id="other", parent_id=root.id,
                              message=user_message("c"))
    with pytest.raises(SessionAppendConflictError):
        await store.append(other, expected_parent_id=root.id)
    assert [e.id for e in await store.list(SID)] == [root.id]
    assert await store.list("other") == []


async def test_store3_tip_compare_and_set() -> None:
    """STORE-3: an append under a parent that already has a child fails without fork."""
    store = MemorySessionStore()
    root = msg_entry(user_message("a"))
    await store.append(root)
    first = msg_entry(assistant_message("b"), parent=root)
    await store.append(first, expected_parent_id=root.id)
    second = msg_entry(assistant_message("c"), parent=root)
    with pytest.raises(SessionAppendConflictError, match="branch tip"):
        await store.append(second, expected_parent_id=root.id)
    assert len(await store.list(SID)) == 2
    await store.append(second, expected_parent_id=root.id, fork=True)
    assert len(await store.list(SID)) == 3


async def test_store3_fork_requires_expected_parent() -> None:
    """STORE-3: fork=True without expected_parent_id raises ValueError."""
    store = MemorySessionStore()
    with pytest.raises(ValueError, match="fork"):
        await store.append(msg_entry(user_message("a")), fork=True)
    assert await store.list(SID) == []


async def test_store3_fork_still_requires_an_existing_parent() -> None:
    """STORE-3: with fork=True the parent must still exist."""
    store = MemorySessionStore()
    with pytest.raises(SessionAppendConflictError):
        await store.append(msg_entry(user_message("a")), expected_parent_id="entry_x", fork=True)


async def test_store3_concurrent_appends_to_one_tip_exactly_one_wins() -> None:
    """STORE-3: of two appends racing to one tip, exactly one wins."""
    store = MemorySessionStore()
    root = msg_entry(user_message("a"))
    await store.append(root)
    racers = [msg_entry(assistant_message(str(i)), parent=root) for i in range(5)]
    results = await asyncio.gather(
        *(store.append(r, expected_parent_id=root.id) for r in racers), return_exceptions=True
    )
    wins = [r for r in results if r is None]
    conflicts = [r for r in results if isinstance(r, SessionAppendConflictError)]
    assert len(wins) == 1 and len(conflicts) == 4
    assert len(await store.list(SID)) == 2


async def test_store3_idempotency_key_conflict() -> None:
    """STORE-3: the same (session, key, expected parent) twice is a conflict."""
    store = MemorySessionStore()
    root = msg_entry(user_message("a"))
    await store.append(root, idempotency_key="k1")
    with pytest.raises(SessionAppendConflictError, match="idempotent"):
        await store.append(msg_entry(user_message("b")), idempotency_key="k1")
    child = msg_entry(assistant_message("c"), parent=root)
    await store.append(child, expected_parent_id=root.id, idempotency_key="k1")  # other parent
    again = msg_entry(assistant_message("d"), parent=root)
    with pytest.raises(SessionAppendConflictError):
        await store.append(again, expected_parent_id=root.id, idempotency_key="k1", fork=True)
    other_session = new_session_entry("message", session_id="s2", message=user_message("x"))
    await store.append(other_session, idempotency_key="k1")  # other session
    assert len(await store.list(SID)) == 2


async def test_store3_returns_copies() -> None:
    """STORE-3: the store copies entries in and out; callers never hold internal objects."""
    store = MemorySessionStore()
    data: dict[str, Any] = {"nested": {"x": [1]}}
    args: dict[str, Any] = {"q": ["a"]}
    e = new_session_entry(
        "custom", session_id=SID, data=data,
        message=Message("assistant", (ToolCallContent("c", "t", args),)),
    )
    await store.append(e)
    data["nested"]["x"].append(2)  # mutate the caller's object after append
    args["q"].append("b")
    listed = await store.list(SID)
    assert listed[0] is not e
    assert listed[0].data == {"nested": {"x": [1]}}
    call = listed[0].message.content[0] if listed[0].message else None
    assert isinstance(call, ToolCallContent) and call.arguments == {"q": ["a"]}
    listed[0].data["nested"]["x"].append(3)  # type: ignore[index]
    call.arguments["q"].append("z")  # type: ignore[union-attr]
    again = await store.list(SID)
    assert again[0].data == {"nested": {"x": [1]}}
    branch = await store.read_branch(SID, e.id)
    assert branch[0] is not again[0]
    assert branch[0] == again[0]


# --------------------------------------------------------------------------- STORE-5


async def test_store5_rebuild_without_compaction() -> None:
    """STORE-5: messages are the message entries in order; summaries the summary entries."""
    entries = chain(
        user_message("a"),
        new_session_entry("summary", session_id=SID, summary="earlier"),
        new_session_entry("model_change", session_id=SID, model=ModelConfig("p", "m")),
        assistant_message("b"),
    )
    messages, summaries = rebuild_history(entries, entries[-1].id)
    assert [m.text for m in messages] == ["a", "b"]
    assert summaries == ["earlier"]
    assert rebuild_history(entries, None) == ([], [])


async def test_store5_rebuild_follows_only_the_selected_branch() -> None:
    """STORE-5: siblings of the branch are not part of the history."""
    store = MemorySessionStore()
    root = msg_entry(user_message("root"))
    left = msg_entry(assistant_message("left"), parent=root)
    right = msg_entry(assistant_message("right"), parent=root)
    await store.append(root)
    await store.append(left, expected_parent_id=root.id)
    await store.append(right, expected_parent_id=root.id, fork=True)
    all_entries = await store.list(SID)
    assert [m.text for m in rebuild_history(all_entries, right.id)[0]] == ["root", "right"]
    assert [m.text for m in rebuild_history(all_entries, left.id)[0]] == ["root", "left"]
    branch = await store.read_branch(SID, right.id)
    assert [e.id for e in branch] == [root.id, right.id]


def test_store5_unknown_leaf_and_missing_parent() -> None:
    """STORE-5: `Unknown session leaf` / `Missing session parent` raise ValueError."""
    entries = chain(user_message("a"), assistant_message("b"))
    with pytest.raises(ValueError, match="Unknown session leaf: entry_nope"):
        rebuild_history(entries, "entry_nope")
    with pytest.raises(ValueError, match=f"Missing session parent: {entries[0].id}"):
        walk_branch(entries[1:], entries[1].id)


async def test_store5_memory_read_branch_errors() -> None:
    """STORE-5: read_branch raises the same errors."""
    store = MemorySessionStore()
    with pytest.raises(ValueError, match="Unknown session leaf"):
        await store.read_branch(SID, "entry_x")
    orphan = msg_entry(user_message("a"))
    orphan = SessionEntry(orphan.id, SID, "message", orphan.timestamp, parent_id="entry_gone",
                          message=orphan.message)
    await store.append(orphan)
    with pytest.raises(ValueError, match="Missing session parent: entry_gone"):
        await store.read_branch(SID, orphan.id)


def test_store5_rebuild_with_compaction() -> None:
    """STORE-5: messages after through_entry_id plus kept ones; compaction summary first."""
    entries = chain(
        user_message("m1"),
        user_message("m2"),
        new_session_entry("summary", session_id=SID, summary="before"),
        user_message("m3"),
        user_message("m4"),
    )
    comp = new_session_entry(
        "compaction",
        session_id=SID,
        summary="SUMMARY",
        data={"through_entry_id": entries[3].id, "keep_entry_ids": [entries[0].id],
              "strategy": "default", "trigger": "manual"},
    )
    later = new_session_entry("summary", session_id=SID, summary="after")
    branch = chain(*entries, comp, later, user_message("m5"))
    messages, summaries = history_from_branch(branch)
    assert [m.text for m in messages] == ["m1", "m4", "m5"]
    assert summaries == ["SUMMARY", "after"]


def test_store5_latest_compaction_wins() -> None:
    """STORE-5: the latest compaction entry on the branch defines the window."""
    base = chain(user_message("a"), user_message("b"), user_message("c"))
    c1 = new_session_entry("compaction", session_id=SID, summary="S1",
                           data={"through_entry_id": base[0].id, "keep_entry_ids": []})
    c2 = new_session_entry("compaction", session_id=SID, summary="S2",
                           data={"through_entry_id": base[1].id, "keep_entry_ids": []})
    branch = chain(*base, c1, c2)
    messages, summaries = history_from_branch(branch)
    assert [m.text for m in messages] == ["c"]
    assert summaries == ["S2"]


def test_current_model_is_the_last_model_change() -> None:
    """RUN-11 step 7: the current model is the last model_change entry's model."""
    m1, m2 = ModelConfig("p", "one"), ModelConfig("p", "two")
    branch = chain(
        new_session_entry("model_change", session_id=SID, model=m1),
        user_message("x"),
        new_session_entry("model_change", session_id=SID, model=m2, previous_model=m1),
    )
    assert current_model(branch) == m2
    assert current_model(branch[1:2]) is None


def test_moved_names_stay_importable_from_prism_store() -> None:
    """Entries and compaction moved to their own modules; prism.store re-exports them."""
    import prism.compaction
    import prism.session_entry
    import prism.store

    for name in prism.compaction.__all__:
        if name in prism.store.__all__:
            assert getattr(prism.store, name) is getattr(prism.compaction, name)
    for name in prism.session_entry.__all__:
        assert getattr(prism.store, name) is getattr(prism.session_entry, name)
