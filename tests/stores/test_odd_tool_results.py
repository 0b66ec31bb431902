"""Large and odd tool results on every store (issue 21, items 11 and 12): a durable
``every-turn`` run whose tool returns a result of many megabytes ends with the size-limit error
(PostgreSQL with one store object hung for good from 16 MB on: psycopg's pipeline mode stalls on
a large message); a tool result holding a lone surrogate reaches the model with ``U+FFFD`` in
its place; a model's tool call holding one (a decoded ``\\ud800`` escape) cannot be stored and
fails the run with a typed error. Each time the stored run is finished (not left ``running``)
and the session's next run sends the provider a history in which every call is answered.
Memory, SQLite and PostgreSQL (one store object for sessions and checkpoints: each turn's
entries are written with the envelope)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from prism.errors import AgentRunError, AgentRunLimitError, AgentRunStateError
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.runtime.checkpoints import AGENT_RUN_NAMESPACE
from prism.runtime.durable import RunStateOptions
from prism.types import Message, ModelConfig, ToolCallContent, ToolDefinition, ToolResultContent

MODEL = ModelConfig(provider="mock", model="odd")
_GUARD_S = 300.0  # a hang guard only (PostgreSQL hung for good before the fix)


def assert_provider_valid(messages: list[Message] | tuple[Message, ...]) -> None:
    """Every tool call has exactly one result, after it; no result without a call."""
    open_calls: set[str] = set()
    for message in messages:
        for part in message.content:
            if isinstance(part, ToolCallContent):
                open_calls.add(part.id)
            elif isinstance(part, ToolResultContent):
                assert part.tool_call_id in open_calls, part.tool_call_id
                open_calls.remove(part.tool_call_id)
    assert not open_calls, f"calls without a result: {sorted(open_calls)}"


def _agent(stores: tuple[Any, Any], turns: list[Any], execute: Any) -> tuple[Any, Any]:
    sessions, checkpoints = stores
    provider = create_mock_provider(turns=turns)
    agent = create_agent(
        id="desk",
        model=MODEL,
        provider=provider,
        tools=[ToolDefinition(name="fetch", execute=execute)],
        store=sessions,
        run_state=RunStateOptions(checkpoints, "v1", checkpoint_policy="every-turn"),
    )
    return agent, provider


async def _stored_status(checkpoints: Any, run_id: str) -> str:
    record = await checkpoints.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=run_id)
    assert record is not None
    return str(record.value["status"])


CALL = [provider_tool_call("c1", "fetch", {}), provider_done()]
TEXT = [provider_text_delta("done"), provider_done()]


@pytest.mark.parametrize("megabytes", [17, 40])
async def test_a_large_tool_result_ends_with_the_size_limit_error_i21_11(
    durable_stores: tuple[Any, Any], megabytes: int
) -> None:
    """17 and 40 MB from a tool: the run fails with the request size limit (it never hangs; on
    PostgreSQL the pipelined turn write hung, at 40 MB every time), the stored run is
    ``failed``, and the stored branch answers every call."""
    big = "x" * (megabytes * 1024 * 1024)
    agent, provider = _agent(durable_stores, [CALL, TEXT], lambda a, c: big)
    session = agent.create_session("s-big")
    with pytest.raises(AgentRunLimitError) as info:
        await asyncio.wait_for(session.run("go"), _GUARD_S)
    assert info.value.result.limit is not None
    assert info.value.result.limit.limit == "max_request_bytes"
    assert await _stored_status(durable_stores[1], info.value.result.run_id) == "failed"
    entries = await durable_stores[0].list(session.id)
    assert_provider_valid([e.message for e in entries if e.message is not None])


async def test_a_lone_surrogate_in_a_tool_result_is_replaced_i21_12(
    durable_stores: tuple[Any, Any],
) -> None:
    """A tool result with lone surrogates (in a string, a key, a nested list): the model reads
    it with ``U+FFFD`` in their place, the run succeeds and stores the same; the next run too."""

    def odd(arguments: dict[str, Any], context: Any) -> Any:
        return {"text": "bad \ud800 char", "k\udfff": ["ok", "\udc80"]}

    agent, provider = _agent(durable_stores, [CALL, TEXT, TEXT], odd)
    session = agent.create_session("s-odd")
    result = await asyncio.wait_for(session.run("go"), _GUARD_S)
    assert result.status == "succeeded"
    expected = {"text": "bad \ufffd char", "k\ufffd": ["ok", "\ufffd"]}
    seen = [
        p.result
        for m in provider.requests[1].messages
        for p in m.content
        if isinstance(p, ToolResultContent)
    ]
    assert seen == [expected]
    stored = [
        p.result
        for e in await durable_stores[0].list(session.id)
        if e.message is not None
        for p in e.message.content
        if isinstance(p, ToolResultContent)
    ]
    assert stored == [expected]
    assert await _stored_status(durable_stores[1], result.run_id) == "succeeded"
    again = await asyncio.wait_for(session.run("again"), _GUARD_S)
    assert again.status == "succeeded"
    assert_provider_valid(provider.requests[-1].messages)


async def test_a_plain_string_result_with_a_lone_surrogate_is_replaced_i21_12(
    durable_stores: tuple[Any, Any],
) -> None:
    """The same for a tool returning a plain string (it failed the run with a raw
    ``UnicodeEncodeError`` and left the stored run ``running``)."""
    agent, provider = _agent(durable_stores, [CALL, TEXT, TEXT], lambda a, c: "bad \ud800")
    session = agent.create_session("s-str")
    result = await asyncio.wait_for(session.run("go"), _GUARD_S)
    assert result.status == "succeeded"
    assert await _stored_status(durable_stores[1], result.run_id) == "succeeded"
    again = await asyncio.wait_for(session.run("again"), _GUARD_S)
    assert again.status == "succeeded"
    assert_provider_valid(provider.requests[-1].messages)
    rows = [
        p.result
        for m in provider.requests[-1].messages
        for p in m.content
        if isinstance(p, ToolResultContent)
    ]
    assert rows == ["bad \ufffd"]


async def test_an_unstorable_row_fails_typed_and_leaves_the_run_answered_i21_12(
    durable_stores: tuple[Any, Any],
) -> None:
    """A tool whose error message holds a lone surrogate, on a store that writes a turn's rows
    with its envelope: the boundary write cannot store the row. The run fails with a typed
    error, the stored run is ``failed`` (not ``running``), the call is answered by a
    ``tool_call_interrupted`` row, and the next run's history is provider-acceptable."""
    sessions, checkpoints = durable_stores
    if sessions is not checkpoints:
        pytest.skip("the memory store keeps Python strings: the row is stored as it is")

    def failing(arguments: dict[str, Any], context: Any) -> Any:
        raise RuntimeError("cannot read \udc80 file")

    agent, provider = _agent(durable_stores, [CALL, TEXT, TEXT], failing)
    session = agent.create_session("s-row")
    with pytest.raises(AgentRunError) as info:
        await asyncio.wait_for(session.run("go"), _GUARD_S)
    assert isinstance(info.value.__cause__, AgentRunStateError), repr(info.value.__cause__)
    run_id = info.value.result.run_id
    assert await _stored_status(checkpoints, run_id) == "failed"
    entries = await sessions.list(session.id)
    codes = [
        p.error.code if p.error is not None else None
        for e in entries
        if e.message is not None
        for p in e.message.content
        if isinstance(p, ToolResultContent)
    ]
    assert codes == ["tool_call_interrupted"]
    again = await asyncio.wait_for(session.run("again"), _GUARD_S)
    assert again.status == "succeeded"
    assert_provider_valid(provider.requests[-1].messages)


async def test_postgres_writes_many_megabytes_with_an_envelope_i21_11(
    pg_url: str, pg_schema: str
) -> None:
    """The cause of item 11: an entry and an envelope of many megabytes each in one
    ``save_checkpoint_with_entries`` (a turn write) — pipelined, psycopg stalled part-way through
    sending and the write never returned; they are stored, and read back whole."""
    from prism.checkpoints import SessionAppend
    from prism.store import new_session_entry
    from prism.stores.postgres import PostgresStore
    from prism.types import Message, TextContent

    store = await PostgresStore.connect(pg_url, schema=pg_schema, max_size=2)
    try:
        # the stall depends on timing: at 17 MB about every other write, at 40 MB every time
        for index, megabytes in enumerate((17, 40, 40)):
            text = "x" * (megabytes << 20)
            session = f"s{index}"
            entry = new_session_entry(
                "message",
                session_id=session,
                parent_id=None,
                message=Message(role="user", content=(TextContent(text=text),)),
            )
            write = store.save_checkpoint_with_entries(
                entries=[SessionAppend(entry, None)],
                namespace="n",
                key=session,
                value={"big": text},
                version=1,
                expected_version=0,
            )
            record = await asyncio.wait_for(write, 120.0)  # a hang guard only
            assert record.version == 1
            loaded = await store.load_checkpoint(namespace="n", key=session)
            assert loaded is not None and loaded.value == {"big": text}
            stored = await store.list(session)
            assert stored[0].message is not None
            assert stored[0].message.content[0] == TextContent(text=text)
    finally:
        await store.aclose()
