"""A session keeps the branch it continues between runs (STORE-3 as revised, STORE-5, ARCH-15):
its next run starts from it without reading the store again, sees exactly what a read of the
store would give, whatever anything changed in place meanwhile, and counts request bytes exactly.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from runtime_support import MODEL

import prism.runtime.run._request_codec as codec_module
import prism.runtime.run.state as state_module
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.store import MemorySessionStore, SessionEntry
from prism.stores import SqliteStore
from prism.types import (
    Message,
    ProviderRequest,
    ToolCallContent,
    ToolDefinition,
    ToolResultContent,
    canonical_json,
)


@pytest.fixture(autouse=True)
def hold_short_branches(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """These tests use short sessions: a session holds every branch, an empty one too
    (except in the test of the real threshold)."""
    if "threshold" not in request.node.name:
        monkeypatch.setattr(state_module, "MIN_ENTRIES", 0)


class CountingStore(MemorySessionStore):
    """The memory store, counting the reads a session makes."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    async def list(self, session_id: str) -> list[SessionEntry]:
        self.reads.append("list")
        return await super().list(session_id)

    async def read_branch(self, session_id: str, leaf_id: str) -> list[SessionEntry]:
        self.reads.append("read_branch")
        return await super().read_branch(session_id, leaf_id)


def _scribble(value: Any) -> None:
    """Change every dict and list inside ``value`` in place."""
    if isinstance(value, dict):
        for item in list(value.values()):
            _scribble(item)
        value["scribbled"] = True
    elif isinstance(value, list):
        for item in value:
            _scribble(item)
        value.append("scribbled")


def _scribble_messages(messages: Sequence[Message]) -> None:
    for message in messages:
        _scribble(message.metadata)
        for part in message.content:
            if isinstance(part, ToolCallContent):
                _scribble(part.arguments)
            elif isinstance(part, ToolResultContent):
                _scribble(part.result)


def _dicts(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [copy.deepcopy(m.to_dict()) for m in messages]


def _lookup(kept: list[Any]) -> ToolDefinition:
    def execute(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
        value = {"rows": [{"id": arguments.get("q"), "tags": ["x"]}], "note": "ok"}
        kept.extend((value, arguments))  # the tool keeps what it returned and was given
        return value

    return ToolDefinition(name="lookup", execute=execute)


def _script(runs: int) -> list[list[Any]]:
    turns: list[list[Any]] = []
    for r in range(runs):
        turns.append(
            [provider_tool_call(f"c{r}", "lookup", {"q": r, "deep": {"a": [r]}}), provider_done()]
        )
        turns.append([provider_text_delta(f"answer {r}"), provider_done()])
    return turns


async def test_next_run_sees_a_store_read_whatever_changed_in_place_store_3() -> None:
    store = CountingStore()
    kept: list[Any] = []
    provider = create_mock_provider(
        turns=[*_script(3), *[[provider_text_delta("last"), provider_done()]] * 2]
    )
    events: list[Any] = []
    agent = create_agent(model=MODEL, provider=provider, tools=[_lookup(kept)], store=store)
    session = agent.create_session(on_event=events.append)
    for r in range(3):
        outcome = await session.run(f"question {r}")
        assert outcome.status == "succeeded"
        # Everything handed out is changed in place: what the tool kept, the result's messages,
        # the events' messages, what the provider was sent and what entries() returned.
        for value in kept:
            _scribble(value)
        _scribble_messages(outcome.messages)
        _scribble_messages(
            [e.message for e in events if isinstance(getattr(e, "message", None), Message)]
        )
        for request in provider.requests:
            _scribble_messages(request.messages)
        for entry in await session.entries():
            if entry.message is not None:
                _scribble_messages([entry.message])
    stored = [
        e.message for e in await MemorySessionStore.list(store, session.id) if e.message is not None
    ]
    assert all("scribbled" not in canonical_json(m.to_dict()) for m in stored)

    # A fresh session object at the same leaf reads the store; both runs send the same request.
    store.reads.clear()
    await session.run("once more")
    assert store.reads == []  # the session continued from the branch it holds
    cached_request = provider.requests[-1]
    fresh = agent.create_session(
        session.id, leaf_id=stored_leaf(await MemorySessionStore.list(store, session.id), 2)
    )
    await fresh.run("once more")
    assert store.reads == ["read_branch"]
    assert _dicts(cached_request.messages) == _dicts(provider.requests[-1].messages)
    assert "scribbled" not in canonical_json(cached_request.to_dict())


def stored_leaf(entries: Sequence[SessionEntry], back: int) -> str:
    """The id of the entry ``back`` entries before the last (the leaf before the last run)."""
    return entries[-1 - back].id


async def test_a_moved_leaf_reads_the_store_again_store_5() -> None:
    store = CountingStore()
    provider = create_mock_provider(
        turns=[[provider_text_delta(f"a{i}"), provider_done()] for i in range(4)]
    )
    session = create_agent(model=MODEL, provider=provider, store=store).create_session()
    await session.run("one")
    first_leaf = session.leaf_id
    await session.run("two")
    assert store.reads == ["list"]  # the first run looked up the (new) session's leaf once
    assert first_leaf is not None
    await session.checkout(first_leaf)
    await session.run("three")
    assert store.reads == ["list", "read_branch"]
    texts = [m.text for m in provider.requests[-1].messages]
    assert texts == ["one", "a0", "three"]  # the branch of the leaf checked out, not the last run's
    await session.run("four")
    assert store.reads == ["list", "read_branch"]


async def test_a_reopened_session_reads_the_store_once_store_5() -> None:
    store = CountingStore()
    provider = create_mock_provider(
        turns=[[provider_text_delta(f"a{i}"), provider_done()] for i in range(3)]
    )
    agent = create_agent(model=MODEL, provider=provider, store=store, session_cache_entries=0)
    assert agent.kept_branches is None
    await agent.create_session("s1").run("one")
    store.reads.clear()
    again = agent.create_session("s1")
    await again.run("two")
    await again.run("three")
    assert store.reads == ["list"]  # the leaf's lookup gives the branch too
    assert [m.text for m in provider.requests[-1].messages] == ["one", "a0", "two", "a1", "three"]


# ----------------------------------------------------------------- kept between session objects


class LeafCountingStore(CountingStore):
    """Also counts the lookups of the last entry."""

    async def last_entry_id(self, session_id: str) -> str | None:
        self.reads.append("last_entry_id")
        return await super().last_entry_id(session_id)


async def test_a_new_session_object_continues_the_kept_branch_without_reading_it_store_5() -> None:
    store = LeafCountingStore()
    kept: list[Any] = []
    provider = create_mock_provider(turns=[*_script(4), [provider_text_delta("z"), provider_done()]])
    agent = create_agent(model=MODEL, provider=provider, tools=[_lookup(kept)], store=store)
    events: list[Any] = []
    first = agent.create_session("chat", on_event=events.append)
    assert (await first.run("q0")).status == "succeeded"
    store.reads.clear()
    for r in range(1, 4):  # one session object per message, as a web handler makes them
        session = agent.create_session("chat", on_event=events.append)
        before = len(provider.requests)
        outcome = await session.run(f"q{r}")
        assert outcome.status == "succeeded"
        cached = _dicts(provider.requests[before].messages)  # the run's first request
        # what the run handed out, changed in place, changes nothing kept
        for value in kept:
            _scribble(value)
        _scribble_messages(outcome.messages)
        for request in provider.requests:
            _scribble_messages(request.messages)
    assert store.reads == ["last_entry_id"] * 3  # never a read of the entries
    # an agent that keeps nothing reads the store and sends the same request
    plain = create_agent(
        model=MODEL, provider=provider, tools=[_lookup(kept)], store=store, session_cache_entries=0
    )
    stored = await MemorySessionStore.list(store, "chat")
    await plain.create_session("chat", leaf_id=stored_leaf(stored, 4)).run("q3")
    assert cached == _dicts(provider.requests[-1].messages)
    assert "scribbled" not in canonical_json(cached)


async def test_a_leaf_another_writer_moved_reads_the_store_store_5() -> None:
    store = LeafCountingStore()
    provider = create_mock_provider(
        turns=[[provider_text_delta(f"a{i}"), provider_done()] for i in range(5)]
    )
    agent = create_agent(model=MODEL, provider=provider, store=store)
    await agent.create_session("chat").run("one")
    # another agent (another process, say) continues the conversation
    other = create_agent(model=MODEL, provider=provider, store=store)
    await other.create_session("chat").run("two")
    store.reads.clear()
    await agent.create_session("chat").run("three")
    assert store.reads == ["last_entry_id", "list"]
    assert [m.text for m in provider.requests[-1].messages] == [
        "one", "a0", "two", "a1", "three"
    ]
    # a fork made by another session object: the last entry is on the new branch
    entries = await MemorySessionStore.list(store, "chat")
    forked = other.create_session("chat", leaf_id=entries[1].id)
    await forked.run("fork")
    store.reads.clear()
    await agent.create_session("chat").run("four")
    assert store.reads == ["last_entry_id", "list"]
    assert [m.text for m in provider.requests[-1].messages] == ["one", "a0", "fork", "a3", "four"]


async def test_kept_branches_stay_within_session_cache_entries_store_5() -> None:
    store = LeafCountingStore()
    provider = create_mock_provider(
        turns=[[provider_text_delta(f"a{i}"), provider_done()] for i in range(8)]
    )
    agent = create_agent(model=MODEL, provider=provider, store=store, session_cache_entries=5)
    kept = agent.kept_branches
    assert kept is not None
    for name in ("a", "b", "c"):
        await agent.create_session(name).run("hi")  # two entries each
    assert len(kept) == 2 and kept.entries == 4  # the least recently used session went first
    store.reads.clear()
    await agent.create_session("c").run("again")  # kept: not read
    assert store.reads == ["last_entry_id"]
    assert len(kept) == 1 and kept.entries == 4  # c's four entries pushed b out
    await agent.create_session("a").run("again")  # dropped: read from the store
    assert store.reads == ["last_entry_id", "list"]
    assert len(kept) == 1 and kept.entries == 4  # a's four entries pushed c out
    await agent.create_session("c").run("more")  # read again; six entries: too long to keep
    assert store.reads == ["last_entry_id", "list", "list"]
    assert len(kept) == 1 and kept.entries == 4
    assert [m.text for m in provider.requests[-1].messages] == [
        "hi", "a2", "again", "a3", "more"
    ]


@pytest.mark.parametrize("bad", [-1, True, 1.5, "10", None])
def test_session_cache_entries_must_be_an_int_of_zero_or_more_config(bad: Any) -> None:
    from prism.errors import PrismConfigError

    with pytest.raises(PrismConfigError, match="session_cache_entries"):
        create_agent(model=MODEL, provider=create_mock_provider(turns=[]), session_cache_entries=bad)


async def test_request_bytes_stay_exact_and_a_run_measures_only_what_is_new_arch_15(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[str, int]] = []
    measured: list[Any] = []
    real_encode = codec_module.RequestCodec.encode
    real_size = codec_module.canonical_size

    def encode(self: Any, request: ProviderRequest, **kwargs: Any) -> tuple[ProviderRequest, int]:
        out = real_encode(self, request, **kwargs)
        seen.append((canonical_json(out[0].to_dict()), out[1]))
        return out

    def counting(value: Any) -> int:
        if isinstance(value, Message):
            measured.append(value)
        return real_size(value)

    monkeypatch.setattr(codec_module.RequestCodec, "encode", encode)
    monkeypatch.setattr(codec_module, "canonical_size", counting)
    kept: list[Any] = []
    provider = create_mock_provider(turns=_script(4))
    session = create_agent(model=MODEL, provider=provider, tools=[_lookup(kept)]).create_session()
    counts = []
    for r in range(4):
        before = len(measured)
        await session.run(f"question {r} " * 20)
        counts.append(len(measured) - before)
    for text, size in seen:
        assert size == len(text.encode())
    # What a run measures does not grow with the history: its input, and the previous run's
    # four messages as the branch first hands them out (the first run's tool call and result
    # came with their sizes); everything older comes with the sizes an earlier run measured.
    assert counts == [1, 5, 5, 5]


async def test_a_sqlite_sessions_runs_read_the_database_once_store_5(tmp_path: Path) -> None:
    reads: list[str] = []

    class CountingSqlite(SqliteStore):
        async def read_branch(self, session_id: str, leaf_id: str) -> Any:
            reads.append(leaf_id)
            return await super().read_branch(session_id, leaf_id)

    store = CountingSqlite(str(tmp_path / "s.db"))
    await store.open()
    real = super(CountingSqlite, store).read_branch
    try:
        kept: list[Any] = []
        provider = create_mock_provider(turns=_script(3))
        agent = create_agent(model=MODEL, provider=provider, tools=[_lookup(kept)], store=store)
        session = agent.create_session()
        for r in range(3):
            assert (await session.run(f"q{r}")).status == "succeeded"
            for value in kept:
                _scribble(value)
        assert reads == []
        fresh = await real(session.id, session.leaf_id or "")
        assert [e.to_dict() for e in await session.entries()] == [e.to_dict() for e in fresh]
        assert "scribbled" not in canonical_json([e.to_dict() for e in fresh])
    finally:
        await store.aclose()


async def test_a_session_holds_a_branch_only_from_the_threshold_on_store_5() -> None:
    store = CountingStore()
    runs = state_module.MIN_ENTRIES // 2 + 3
    provider = create_mock_provider(
        turns=[[provider_text_delta(f"a{i}"), provider_done()] for i in range(runs)]
    )
    session = create_agent(model=MODEL, provider=provider, store=store).create_session()
    stored = []
    for i in range(runs):
        await session.run(f"q{i}")
        stored.append(store.reads.count("read_branch"))
    # Each run starts from the branch before its input: a short one is read every time, one of
    # MIN_ENTRIES entries once, then held.
    first_held = state_module.MIN_ENTRIES // 2
    assert stored[first_held - 1] == first_held - 1
    assert stored[first_held:] == [first_held] * (runs - first_held)


async def test_with_a_redactor_requests_stay_redacted_and_exact_across_runs_arch_15(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from prism.redaction import create_secret_redactor

    seen: list[tuple[str, int]] = []  # what each encoded request was, when it was encoded
    real_encode = codec_module.RequestCodec.encode

    def encode(self: Any, request: ProviderRequest, **kwargs: Any) -> tuple[ProviderRequest, int]:
        out = real_encode(self, request, **kwargs)
        seen.append((canonical_json(out[0].to_dict()), out[1]))
        return out

    monkeypatch.setattr(codec_module.RequestCodec, "encode", encode)
    kept: list[Any] = []
    turns: list[list[Any]] = []
    for r in range(4):
        turns.append([provider_tool_call(f"c{r}", "lookup", {"q": f"sk-abc {r}"}), provider_done()])
        turns.append([provider_text_delta(f"answer {r} sk-abc"), provider_done()])
    provider = create_mock_provider(turns=turns)
    agent = create_agent(
        model=MODEL,
        provider=provider,
        tools=[_lookup(kept)],
        redactor=create_secret_redactor(["sk-abc"]),
    )
    session = agent.create_session()
    for r in range(4):
        assert (await session.run(f"question {r} sk-abc")).status == "succeeded"
        for value in kept:
            _scribble(value)
    assert len(seen) == len(provider.requests) == 8
    for text, size in seen:
        assert size == len(text.encode())
        assert "sk-abc" not in text
        assert "scribbled" not in text  # earlier runs' changes never reach a later request


def test_the_branch_shares_plain_text_and_copies_every_mutable_container_store_3() -> None:
    from prism.runtime.run._branch_cache import BranchCache
    from prism.store import new_session_entry
    from prism.types import TextContent

    text = new_session_entry("message", session_id="s", message=Message("user", "hi"))
    odd: Any = TextContent(["not", "a", "string"])  # type: ignore[arg-type]
    listed = new_session_entry("message", session_id="s", message=Message("user", (odd,)))
    tagged = new_session_entry(
        "message", session_id="s", message=Message("user", "hi", metadata={"k": [1]})
    )
    result = Message("tool", (ToolResultContent(tool_call_id="c", name="t", result={"a": [1]}),))
    row = new_session_entry("message", session_id="s", message=result)
    cache = BranchCache([text, listed, tagged, row])
    for _ in range(2):
        out = cache.read()
        assert out == [text, listed, tagged, row]
        assert out[0] is text
        assert all(a is not b for a, b in zip(out[1:], [listed, tagged, row], strict=True))
        assert out[1].message is not None and out[1].message.content[0].text is not odd.text  # type: ignore[union-attr]
