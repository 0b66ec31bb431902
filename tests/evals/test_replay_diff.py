"""The sentences a replay fails with: the first differing field of a request head, a tool
schema, the messages, a call's arguments or a real tool's result; and event streams compared
ignoring ids and times, parallel calls per call."""

from __future__ import annotations

from typing import Any

import pytest

from prism.evals import event_stream_diff
from prism.evals._diff import (
    arguments_diff,
    head_diff,
    messages_diff,
    path_matches,
    result_diff,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "filter": {"type": "object", "properties": {"status": {"type": "string"}}},
    },
    "required": ["query"],
}


def head(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model": {"provider": "openai", "model": "gpt-4o-mini", "parameters": {"temperature": 0}},
        "system": [[{"type": "text", "text": "Be brief.\nQuote order numbers."}]],
        "tools": [
            {"name": "search", "description": "Search.", "parameters": SCHEMA},
            {"name": "status", "description": "Status.", "parameters": {"type": "object"}},
        ],
    }
    base.update(changes)
    return base


def schema(**changes: Any) -> dict[str, Any]:
    tools = head()["tools"]
    return head(tools=[{**tools[0], "parameters": {**SCHEMA, **changes}}, tools[1]])


@pytest.mark.parametrize(
    ("current", "sentence"),
    [
        (head(), None),
        (
            head(model={"provider": "openai", "model": "gpt-4o", "parameters": {"temperature": 0}}),
            "model `model` changed: 'gpt-4o-mini' → 'gpt-4o'",
        ),
        (
            head(model={"provider": "openai", "model": "gpt-4o-mini", "parameters": {"temperature": 1}}),
            "model parameter `temperature` changed: 0 → 1",
        ),
        (
            head(system=[[{"type": "text", "text": "Be brief.\nQuote order ids."}]]),
            "system prompt changed at line 2: 'Quote order numbers.' → 'Quote order ids.'",
        ),
        (
            head(system=[*head()["system"], [{"type": "text", "text": "Context: x"}]]),
            "system message 2 added: 'Context: x'",
        ),
        (head(tools=head()["tools"][:1]), "tool `status` removed"),
        (head(tools=head()["tools"][::-1]), "tools reordered: search, status → status, search"),
        (
            schema(properties={"query": {"type": "string"}}),
            "tool `search` schema changed: property `filter` removed",
        ),
        (
            schema(required=["query", "filter"]),
            "tool `search` schema changed: property `filter` became required",
        ),
        (
            schema(properties={**SCHEMA["properties"], "query": {"type": "integer"}}),
            "tool `search` schema changed: property `query`: `type` changed: 'string' → 'integer'",
        ),
        (
            schema(
                properties={
                    **SCHEMA["properties"],
                    "filter": {
                        "type": "object",
                        "properties": {"status": {"type": "string"}, "since": {"type": "string"}},
                    },
                }
            ),
            "tool `search` schema changed: property `filter.since` added",
        ),
        (
            head(options={"tool_choice": "required"}),
            "option `tool_choice` added: 'required'",
        ),
    ],
)
def test_a_changed_head_is_named_by_its_first_differing_field(
    current: dict[str, Any], sentence: str | None
) -> None:
    assert head_diff(head(), current) == sentence


def test_messages_arguments_and_results_are_named_by_their_path() -> None:
    recorded = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "tool",
            "content": [
                {"type": "tool_result", "tool_call_id": "c1", "name": "search", "result": {"n": 1}}
            ],
        },
    ]
    changed = [recorded[0], {**recorded[1], "content": [{**recorded[1]["content"][0], "result": {"n": 2}}]}]
    assert messages_diff(recorded, changed) == (
        "message 2 (tool), the result of `search` (call c1): `content[0].result.n` changed: 1 → 2"
    )
    assert messages_diff(recorded, recorded[:1]) == (
        "the request has 1 messages, the recorded one 2: message 2 (tool), the result of "
        "`search` (call c1) is missing"
    )
    assert arguments_diff("search", "c1", {"q": "a", "limit": 5}, {"q": "a"}) == (
        "tool `search` (call c1): argument `limit` removed (was 5)"
    )
    assert arguments_diff("search", "c1", {"q": "a"}, {"q": "a", "flag": True}) == (
        "tool `search` (call c1): argument `flag` added: true"
    )
    rows = {"rows": [{"id": 1, "at": "t1"}, {"id": 2, "at": "t2"}], "at": "t0"}
    later = {"rows": [{"id": 1, "at": "t3"}, {"id": 2, "at": "t4"}], "at": "t5"}
    assert result_diff("search", "c1", rows, later, ["rows.*.at", "at"]) is None
    assert result_diff("search", "c1", rows, later, ["rows[*].at"]) == (
        "tool `search` (call c1): result `at` changed: 't0' → 't5'"
    )
    assert path_matches("rows", "rows[3].at") and not path_matches("rows.*.id", "rows[0].at")


def test_event_streams_compare_without_ids_and_times_and_parallel_calls_per_call() -> None:
    def ev(kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "session_id": "s", "run_id": "r", **fields}

    recorded = [
        ev("agent_started"),
        ev("tool_execution_started", tool_call_id="a"),
        ev("tool_execution_started", tool_call_id="b"),
        ev("tool_execution_finished", tool_call_id="a", metadata={"duration_ms": 3}),
        ev("tool_execution_finished", tool_call_id="b", metadata={"duration_ms": 1}),
        ev("agent_finished", usage={"input_tokens": 5}),
    ]
    replayed = [
        {**recorded[0], "session_id": "s2", "run_id": "r2"},
        recorded[2],
        recorded[4],
        recorded[1],
        {**recorded[3], "metadata": {"duration_ms": 9}},
        recorded[5],
    ]
    assert event_stream_diff(recorded, replayed) is None
    assert event_stream_diff(recorded, [*replayed[:-1], ev("agent_finished", usage={"input_tokens": 6})]) == (
        "event 2 (agent_finished) `usage.input_tokens` changed: 5 → 6"
    )
    assert event_stream_diff(recorded, replayed[:-1]) == (
        'event 2 (agent_finished) removed (was {"type":"agent_finished","usage":{"input_tokens":5}})'
    )
