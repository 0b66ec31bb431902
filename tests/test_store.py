"""Session store, branch rebuild and compaction (STORE-1..STORE-9)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import pytest

from prism.abort import AbortController
from prism.errors import PrismConfigError, SessionAppendConflictError
from prism.middleware import MiddlewareRegistry
from prism.store import (
    NO_OLDER_ENTRIES_SUMMARY,
    BranchReadingSessionStore,
    CompactionInput,
    CompactionOptions,
    CompactionResult,
    MemorySessionStore,
    SessionEntry,
    SessionStore,
    compaction_entry,
    compaction_strategy_name,
    compute_compaction,
    current_model,
    default_compaction_strategy,
    drop_trailing_input,
    history_from_branch,
    new_session_entry,
    read_branch,
    rebuild_history,
    resolve_compaction_options,
    should_auto_compact,
    validate_compaction_options,
    walk_branch,
)
from prism.types import (
    ImageContent,
    Message,
    ModelConfig,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResult,
    assistant_message,
    tool_result_message,
    user_message,
)

SID = "session_1"


def msg_entry(message: Message, parent: SessionEntry | None = None, **kw: Any) -> SessionEntry:
    return new_session_entry(
        "message", session_id=SID, parent_id=parent.id if parent else None, message=message, **kw
    )


def chain(*items: Message | SessionEntry) -> list[SessionEntry]:
    """Build a linear branch; Messages become message entries."""
    out: list[SessionEntry] = []
    for item in items:
        parent = out[-1].id if out else None
        if isinstance(item, Message):
            out.append(new_session_entry("message", session_id=SID, parent_id=parent, message=item))
        else:
            out.append(SessionEntry(item.id, SID, item.kind, item.timestamp, parent, item.run_id,
                                    item.message, item.model, item.previous_model, item.summary,
                                    item.data, item.metadata))
    return out


def call_msg(*names: str) -> Message:
    return Message(
        "assistant", tuple(ToolCallContent(f"c_{n}", n, {"q": n}) for n in names)
    )


def result_msg(name: str) -> Message:
    return tool_result_message(ToolResult(f"c_{name}", name, value={"ok": True}))


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


# --------------------------------------------------------------------------- STORE-7


def run_default(branch: Sequence[SessionEntry], **options: Any) -> CompactionResult:
    return default_compaction_strategy(
        CompactionInput(session_id=SID, entries=tuple(branch), options=CompactionOptions(**options))
    )


def test_store7_option_defaults() -> None:
    """STORE-7: CompactionOptions defaults."""
    o = CompactionOptions()
    assert (o.threshold_entries, o.keep_recent_entries, o.max_summary_chars, o.strategy,
            o.secrets) == (None, 8, 4000, None, ())


def test_store7_lines_for_every_entry_kind() -> None:
    """STORE-7: one line per older entry with the exact formats."""
    branch = chain(
        user_message("hello"),
        Message("assistant", (ThinkingContent("hidden"), TextContent("let me look"),
                              ToolCallContent("c1", "search", {"q": "x"}))),
        tool_result_message(ToolResult("c1", "search", value=1)),
        Message("user", (TextContent("see"), ImageContent(url="http://img"))),
        new_session_entry("summary", session_id=SID, summary="old stuff"),
        new_session_entry("model_change", session_id=SID, model=ModelConfig("openai", "gpt-x")),
        new_session_entry("custom", session_id=SID, data={"k": 1}),
        user_message("recent"),
    )
    result = run_default(branch, keep_recent_entries=1)
    assert result.summary == "\n".join(
        [
            "user: hello",
            "assistant: let me look [tool_call search]",
            "tool: [tool_result search]",
            "user: see [image]",
            "summary: old stuff",
            "model changed to openai/gpt-x",
        ]
    )
    assert result.through_entry_id == branch[-2].id
    assert result.keep_entry_ids == (branch[-1].id,)


def test_store7_tool_results_are_never_kept_without_their_call() -> None:
    """STORE-7: the kept window extends backwards over tool results to their call."""
    branch = chain(
        user_message("q"),
        call_msg("a", "b"),
        result_msg("a"),
        result_msg("b"),
        assistant_message("done"),
    )
    result = run_default(branch, keep_recent_entries=2)  # would start at result b
    assert result.keep_entry_ids == tuple(e.id for e in branch[1:])
    assert result.through_entry_id == branch[0].id
    assert result.summary == "user: q"
    history, _ = history_from_branch(chain(*branch, compaction_entry(
        result, session_id=SID, options=CompactionOptions(), trigger="auto")))
    assert [m.role for m in history] == ["assistant", "tool", "tool", "assistant"]


def test_store7_no_older_entries() -> None:
    """STORE-7: with nothing older the summary is the fixed sentence."""
    branch = chain(user_message("a"), assistant_message("b"))
    result = run_default(branch)
    assert result == CompactionResult(
        NO_OLDER_ENTRIES_SUMMARY, None, tuple(e.id for e in branch)
    )
    assert NO_OLDER_ENTRIES_SUMMARY == "No older session entries to summarize."


def test_store7_keep_zero_summarises_everything() -> None:
    """STORE-7: keep_recent_entries=0 keeps nothing; through is the last branch entry."""
    branch = chain(user_message("a"), assistant_message("b"))
    result = run_default(branch, keep_recent_entries=0)
    assert result.summary == "user: a\nassistant: b"
    assert result.through_entry_id == branch[-1].id
    assert result.keep_entry_ids == ()


def test_store7_secrets_replaced_then_truncated_with_ellipsis() -> None:
    """STORE-7: secrets replaced, text cut to max_summary_chars ending with `…`."""
    branch = chain(user_message("token sk-123 here " + "x" * 50), user_message("keep"))
    result = run_default(branch, keep_recent_entries=1, secrets=("sk-123",), max_summary_chars=20)
    assert len(result.summary) == 20
    assert result.summary.endswith("…")
    assert result.summary == "user: token [REDACT…"
    full = run_default(branch, keep_recent_entries=1, secrets=("sk-123",))
    assert "sk-123" not in full.summary and "[REDACTED]" in full.summary


def test_store7_second_compaction_folds_the_previous_summary() -> None:
    """STORE-7: entries summarised by an earlier compaction appear as its summary line."""
    base = chain(user_message("a"), user_message("b"), user_message("c"))
    first = run_default(base, keep_recent_entries=1)
    c1 = compaction_entry(first, session_id=SID, options=CompactionOptions(), trigger="manual")
    branch = chain(*base, c1, user_message("d"), user_message("e"))
    second = run_default(branch, keep_recent_entries=1)
    assert second.summary == "summary: user: a\nuser: b\nuser: c\nuser: d"
    assert second.keep_entry_ids == (branch[-1].id,)
    assert second.through_entry_id == branch[-2].id


def test_store7_compaction_entry_data() -> None:
    """STORE-7/STORE-9: data holds through_entry_id, keep_entry_ids, strategy, trigger."""
    result = CompactionResult("S", "entry_a", ("entry_b",))
    e = compaction_entry(result, session_id=SID, options=CompactionOptions(), trigger="auto",
                         parent_id="entry_b", run_id="run_1")
    assert e.kind == "compaction" and e.summary == "S"
    assert e.parent_id == "entry_b" and e.run_id == "run_1"
    assert dict(e.data or {}) == {
        "through_entry_id": "entry_a",
        "keep_entry_ids": ["entry_b"],
        "strategy": "default",
        "trigger": "auto",
    }


# --------------------------------------------------------------------------- STORE-8


def test_store8_auto_compaction_conditions() -> None:
    """STORE-8: threshold set, more entries than it, last entry not a compaction."""
    branch = chain(user_message("a"), user_message("b"), user_message("c"))
    assert should_auto_compact(CompactionOptions(threshold_entries=2), branch)
    assert not should_auto_compact(CompactionOptions(threshold_entries=3), branch)
    assert not should_auto_compact(CompactionOptions(), branch)
    assert not should_auto_compact(None, branch)
    comp = new_session_entry("compaction", session_id=SID, summary="s", data={})
    assert not should_auto_compact(CompactionOptions(threshold_entries=1), chain(*branch, comp))


def test_store8_drop_trailing_input() -> None:
    """STORE-8: remove from the history's end the messages equal to the input messages."""
    inputs = [user_message("i1"), user_message("i2")]
    history = [user_message("old"), user_message("i1"), user_message("i2")]
    assert drop_trailing_input(history, inputs) == 2
    assert [m.text for m in history] == ["old"]
    partial = [user_message("old"), user_message("i2")]  # i1 was summarised away
    assert drop_trailing_input(partial, inputs) == 1
    assert [m.text for m in partial] == ["old"]
    unrelated = [user_message("x")]
    assert drop_trailing_input(unrelated, inputs) == 0
    assert len(unrelated) == 1


# --------------------------------------------------------------------------- STORE-9


async def test_store9_custom_sync_and_async_strategies() -> None:
    """STORE-9: a strategy may be sync or async and receives CompactionInput."""
    received: list[CompactionInput] = []
    branch = chain(user_message("a"))
    signal = AbortController().signal

    def sync_strategy(inp: CompactionInput) -> CompactionResult:
        received.append(inp)
        return CompactionResult("sync", None, ())

    async def async_strategy(inp: CompactionInput) -> CompactionResult:
        received.append(inp)
        return CompactionResult("async", branch[0].id, ())

    r1 = await compute_compaction(session_id=SID, entries=branch,
                                  options=CompactionOptions(strategy=sync_strategy))
    r2 = await compute_compaction(session_id=SID, entries=branch, signal=signal,
                                  options=CompactionOptions(strategy=async_strategy))
    assert (r1.summary, r2.summary) == ("sync", "async")
    assert received[0].signal is None and received[1].signal is signal
    assert received[0].entries == tuple(branch)
    assert received[0].session_id == SID


async def test_store9_default_strategy_when_none() -> None:
    """STORE-9: no strategy means the default one."""
    branch = chain(user_message("a"), user_message("b"))
    r = await compute_compaction(session_id=SID, entries=branch,
                                 options=CompactionOptions(keep_recent_entries=1))
    assert r.summary == "user: a"


async def test_store9_middleware_hook_may_replace_the_result() -> None:
    """STORE-9: the `compaction` middleware hook receives and may replace the result."""
    middleware = MiddlewareRegistry()
    seen: list[CompactionResult] = []

    def hook(result: CompactionResult) -> CompactionResult:
        seen.append(result)
        return CompactionResult("replaced", result.through_entry_id, result.keep_entry_ids)

    middleware.use("compaction", hook)
    branch = chain(user_message("a"), user_message("b"))
    r = await compute_compaction(session_id=SID, entries=branch, middleware=middleware,
                                 options=CompactionOptions(keep_recent_entries=1))
    assert seen[0].summary == "user: a"
    assert r.summary == "replaced"


async def test_store9_strategy_must_return_a_result() -> None:
    """STORE-9: a mapping result is converted; anything else is a TypeError."""
    branch = chain(user_message("a"))
    r = await compute_compaction(
        session_id=SID, entries=branch,
        options=CompactionOptions(strategy=lambda _i: {"summary": "m", "keep_entry_ids": ["x"]}),
    )
    assert r == CompactionResult("m", None, ("x",))
    with pytest.raises(TypeError):
        await compute_compaction(session_id=SID, entries=branch,
                                 options=CompactionOptions(strategy=lambda _i: "nope"))


def test_store9_strategy_names() -> None:
    """STORE-9: "default", else the `name` attribute, else `__name__`."""

    class Named:
        name = "my-strategy"

        def __call__(self, inp: CompactionInput) -> CompactionResult:
            return CompactionResult("x")

    def plain(inp: CompactionInput) -> CompactionResult:
        return CompactionResult("x")

    assert compaction_strategy_name(None) == "default"
    assert compaction_strategy_name(default_compaction_strategy) == "default"
    assert compaction_strategy_name(Named()) == "my-strategy"
    assert compaction_strategy_name(plain) == "plain"
    e = compaction_entry(CompactionResult("x"), session_id=SID,
                         options=CompactionOptions(strategy=plain), trigger="manual")
    assert (e.data or {})["strategy"] == "plain"
    assert (e.data or {})["trigger"] == "manual"


# --------------------------------------------------------------------------- options / RUN-6


@pytest.mark.parametrize(
    "overrides",
    [
        {"threshold_entries": 0},
        {"threshold_entries": True},
        {"keep_recent_entries": -1},
        {"keep_recent_entries": 1.5},
        {"max_summary_chars": 0},
        {"strategy": "default"},
        {"secrets": "sk"},
        {"secrets": [1]},
    ],
)
def test_compaction_options_validation(overrides: dict[str, Any]) -> None:
    """ARCH-9: invalid compaction options raise PrismConfigError."""
    with pytest.raises(PrismConfigError):
        validate_compaction_options(overrides)


def test_compaction_options_mapping_and_unknown_keys() -> None:
    """RUN-7: mappings convert; camelCase keys are reported with their snake_case name."""
    def strategy(inp: CompactionInput) -> CompactionResult:
        return CompactionResult("x")

    o = validate_compaction_options({"threshold_entries": 3, "strategy": strategy,
                                     "secrets": ["a"]})
    assert o == CompactionOptions(threshold_entries=3, strategy=strategy, secrets=("a",))
    with pytest.raises(PrismConfigError) as info:
        validate_compaction_options({"keepRecentEntries": 2})
    assert "keep_recent_entries" in str(info.value)


def test_run6_compaction_resolution() -> None:
    """RUN-6: False disables, dataclass replaces, mapping overlays, none -> no compaction."""
    agent = CompactionOptions(threshold_entries=10, keep_recent_entries=4)
    assert resolve_compaction_options(None, None) is None
    assert resolve_compaction_options(agent, None) == agent
    assert resolve_compaction_options(agent, False) is None
    assert resolve_compaction_options(agent, CompactionOptions()) == CompactionOptions()
    assert resolve_compaction_options(agent, {"keep_recent_entries": 1}) == CompactionOptions(
        threshold_entries=10, keep_recent_entries=1
    )
    assert resolve_compaction_options(False, {"keep_recent_entries": 1}) == CompactionOptions(
        keep_recent_entries=1
    )
    with pytest.raises(PrismConfigError):
        resolve_compaction_options(agent, {"bogus": 1})
