"""The last appended entry of a session, on every store, and the branches an agent keeps for its
next session objects of the same session id (STORE-5: a new session object continues from the
last stored entry)."""

from __future__ import annotations

from typing import Any

from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.store import LastEntrySessionStore, new_session_entry
from prism.types import Message, ToolDefinition

MODEL = {"provider": "mock", "model": "m"}


async def test_last_entry_id_is_the_last_appended_entry_of_the_session_store_5(
    durable_stores: tuple[Any, Any],
) -> None:
    store = durable_stores[0]
    assert isinstance(store, LastEntrySessionStore)
    assert await store.last_entry_id("s") is None
    root = new_session_entry("message", session_id="s", message=Message("user", "one"))
    await store.append(root)
    child = new_session_entry(
        "message", session_id="s", parent_id=root.id, message=Message("user", "two")
    )
    await store.append(child, expected_parent_id=root.id)
    other = new_session_entry("message", session_id="t", message=Message("user", "other"))
    await store.append(other)
    assert await store.last_entry_id("s") == child.id
    # a fork appended after the tip is the last entry, though the tip has the longer branch
    fork = new_session_entry(
        "message", session_id="s", parent_id=root.id, message=Message("user", "fork")
    )
    await store.append(fork, expected_parent_id=root.id, fork=True)
    assert await store.last_entry_id("s") == fork.id
    assert (await store.list("s"))[-1].id == fork.id
    assert await store.last_entry_id("t") == other.id


class _Counting:
    """A store, counting the reads of its entries."""

    def __init__(self, store: Any, reads: list[str]) -> None:
        self._store = store
        self._reads = reads

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def list(self, session_id: str) -> Any:
        self._reads.append("list")
        return await self._store.list(session_id)

    async def read_branch(self, session_id: str, leaf_id: str) -> Any:
        self._reads.append("read_branch")
        return await self._store.read_branch(session_id, leaf_id)


def _tool_turns(messages: int) -> Any:
    """A mock provider answering each message with one ``lookup`` call, then text."""
    turns: list[list[Any]] = []
    for r in range(messages):
        turns.append([provider_tool_call(f"c{r}", "lookup", {"q": r}), provider_done()])
        turns.append([provider_text_delta(f"answer {r}"), provider_done()])
    return create_mock_provider(turns=[*turns, [provider_text_delta("z"), provider_done()]])


async def _chat_per_message(agent: Any, provider: Any, reads: list[str], messages: int) -> Any:
    """Run ``messages`` messages, each on a new session object of ``"chat"``; from the tenth on
    (the branch held from 32 entries) none reads the store. The last run's first request."""
    before = 0
    for r in range(messages):
        reads.clear()
        before = len(provider.requests)
        outcome = await agent.create_session("chat").run(f"question {r}")
        assert outcome.status == "succeeded"
        if r >= 9:
            assert reads == [], r
    return provider.requests[before].to_dict()


def _lookup() -> ToolDefinition:
    def execute(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"rows": [{"id": arguments.get("q"), "tags": ["x"]}], "note": "ok"}

    return ToolDefinition(name="lookup", execute=execute)


async def test_a_session_object_per_message_reads_no_entries_and_sends_what_a_read_gives_store_5(
    durable_stores: tuple[Any, Any],
) -> None:
    """A host that makes a session object per message: once the branch is long enough to be
    held, the store is asked only for the last entry's id, and each request equals the one a
    session object of an agent that keeps nothing (reading the store) sends from that leaf."""
    reads: list[str] = []
    store = _Counting(durable_stores[0], reads)
    provider = _tool_turns(24)  # 24 messages of 4 entries
    agent = create_agent(model=MODEL, provider=provider, tools=[_lookup()], store=store)
    plain = create_agent(
        model=MODEL, provider=provider, tools=[_lookup()], store=store, session_cache_entries=0
    )
    first = await _chat_per_message(agent, provider, reads, 24)
    leaf = (await store.list("chat"))[-5].id  # the leaf before the last message
    reads.clear()
    await plain.create_session("chat", leaf_id=leaf).run("question 23")
    assert reads == ["read_branch"]
    assert provider.requests[-1].to_dict() == first


async def test_durable_every_turn_runs_of_a_session_object_per_message_read_no_entries_store_5(
    durable_stores: tuple[Any, Any],
) -> None:
    """The same with durable runs checkpointing every turn (their appends written with the
    envelopes): past the held threshold a new session object reads no entry, and the last
    request equals the one an agent that keeps nothing sends from the same leaf."""
    from prism.runtime.durable import RunStateOptions

    reads: list[str] = []
    sessions, checkpoints = durable_stores
    store = _Counting(sessions, reads)
    durable = RunStateOptions(
        checkpoints if checkpoints is not sessions else store, "v1", checkpoint_policy="every-turn"
    )
    provider = _tool_turns(12)
    options: dict[str, Any] = {"model": MODEL, "provider": provider, "tools": [_lookup()]}
    agent = create_agent(**options, id="desk", store=store, run_state=durable)
    first = await _chat_per_message(agent, provider, reads, 12)
    leaf = (await store.list("chat"))[-5].id
    plain = create_agent(**options, store=store, session_cache_entries=0)
    await plain.create_session("chat", leaf_id=leaf).run("question 11")
    assert provider.requests[-1].to_dict() == first
