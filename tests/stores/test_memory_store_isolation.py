"""The memory store shares frozen values and keeps its own copy of every mutable container
(STORE-3 as revised): nothing a caller, a tool, an observer or a reader changes in place reaches a
stored entry."""

from __future__ import annotations

import copy
from typing import Any

from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.store import MemorySessionStore, SessionEntry, new_session_entry
from prism.types import (
    Message,
    ModelConfig,
    TextContent,
    ToolCallContent,
    ToolDefinition,
    ToolResultContent,
)

MODEL = ModelConfig(provider="mock", model="demo")


def _snapshot(entries: list[SessionEntry]) -> list[dict[str, Any]]:
    return [copy.deepcopy(e.to_dict()) for e in entries]


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


def _containers(entry: SessionEntry) -> list[Any]:
    found: list[Any] = [entry.data, entry.metadata]
    message = entry.message
    if message is not None:
        found.append(message.metadata)
        for part in message.content:
            if isinstance(part, ToolCallContent):
                found.append(part.arguments)
            elif isinstance(part, ToolResultContent):
                found.append(part.result)
    return [c for c in found if c is not None]


async def test_containers_changed_in_place_leave_the_stored_entry_store_3() -> None:
    store = MemorySessionStore()
    arguments = {"q": "tent", "filters": {"size": [2, 3]}}
    result = {"rows": [{"id": 1, "tags": ["a"]}]}
    data = {"note": {"k": [1]}}
    metadata = {"trace": ["x"]}
    call = Message(
        "assistant",
        (TextContent("looking"), ToolCallContent(id="c1", name="find", arguments=arguments)),
        metadata={"m": {"n": 1}},
    )
    answer = Message("tool", (ToolResultContent(tool_call_id="c1", name="find", result=result),))
    first = new_session_entry("message", session_id="s", message=call, data=data, metadata=metadata)
    second = new_session_entry("message", session_id="s", parent_id=first.id, message=answer)
    await store.append(first)
    await store.append(second, expected_parent_id=first.id)
    expected = _snapshot([first, second])

    for appended in (first, second):  # what the caller handed in
        for container in _containers(appended):
            _scribble(container)
    assert _snapshot(await store.list("s")) == expected

    read = await store.list("s")  # what a read returned
    for entry in read:
        for container in _containers(entry):
            _scribble(container)
    read.clear()
    branch = await store.read_branch("s", second.id)
    for container in _containers(branch[0]):
        _scribble(container)
    branch.pop()
    assert _snapshot(await store.list("s")) == expected
    assert _snapshot(await store.read_branch("s", second.id)) == expected


async def test_a_runs_entries_stay_as_stored_whatever_it_handed_out_changes_store_3() -> None:
    store = MemorySessionStore()
    kept: list[dict[str, Any]] = []

    def lookup(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
        value = {"rows": [{"id": arguments["q"], "tags": ["x"]}], "note": "ok"}
        kept.append(value)  # the tool keeps its result and the arguments it was given
        kept.append(arguments)
        return value

    provider = create_mock_provider(
        turns=[
            [provider_tool_call("c1", "lookup", {"q": 1, "deep": {"a": [1]}}), provider_done()],
            [
                provider_tool_call("c2", "lookup", {"q": 2}),
                provider_tool_call("c3", "lookup", {"q": 3, "long": "y" * 300}),
                provider_done(),
            ],
            [provider_text_delta("done"), provider_done()],
        ]
    )
    agent = create_agent(
        model=MODEL,
        provider=provider,
        tools=[ToolDefinition(name="lookup", execute=lookup)],
        store=store,
    )
    events: list[Any] = []
    session = agent.create_session(on_event=events.append)
    outcome = await session.run("go")
    assert outcome.status == "succeeded"
    stored = await store.list(session.id)
    expected = _snapshot(stored)

    for value in kept:  # the tool changes what it returned and what it was given
        _scribble(value)
    observed = [e.message for e in events if isinstance(getattr(e, "message", None), Message)]
    assert observed
    for message in [*outcome.messages, *observed]:  # the host changes the messages it saw
        for part in message.content:
            if isinstance(part, ToolCallContent):
                _scribble(part.arguments)
            elif isinstance(part, ToolResultContent):
                _scribble(part.result)
    for request in provider.requests:  # ... and what the provider was sent
        for message in request.messages:
            for part in message.content:
                if isinstance(part, (ToolCallContent, ToolResultContent)):
                    _scribble(part.arguments if isinstance(part, ToolCallContent) else part.result)
    for entry in stored:  # ... and what a read returned
        for container in _containers(entry):
            _scribble(container)
    assert _snapshot(await store.list(session.id)) == expected
