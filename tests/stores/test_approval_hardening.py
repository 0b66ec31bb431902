"""Approvals that never let a call through unapproved nor lose one, on the memory, SQLite and
PostgreSQL stores: the approval shows (and binds to) the arguments that will run, a changed agent
tree or an edited pending entry fails the resume before any claim, arguments holding registered
secrets are approved as shown and run with their real values, and corrupt stored fields are
refused before the claim."""

from __future__ import annotations

import json
from typing import Any

import pytest

from prism.errors import AgentRunStateError
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import Agent, create_agent
from prism.runtime.durable import (
    RunStateOptions,
    load_agent_run_state,
    resume_agent_run,
    save_agent_run_state,
)
from prism.types import ModelConfig, ToolDefinition

MODEL = ModelConfig(provider="mock", model="approvals")
TEXT = [provider_text_delta("done"), provider_done()]


def _call(name: str, arguments: dict[str, Any], call_id: str = "c1") -> list[Any]:
    return [provider_tool_call(call_id, name, arguments), provider_done()]


def _pay_tool(ran: list[Any], **options: Any) -> ToolDefinition:
    def pay(arguments: dict[str, Any], context: Any) -> Any:
        ran.append(dict(arguments))
        return {"paid": arguments.get("amount")}

    return ToolDefinition(
        name="pay",
        execute=pay,
        parameters={
            "type": "object",
            "properties": {
                "amount": {"type": "integer"},
                "currency": {"type": "string", "default": "EUR"},
                "note": {"type": "string"},
            },
            "required": ["amount"],
        },
        **options,
    )


def _agent(
    stores: tuple[Any, Any],
    turns: list[Any],
    tools: list[Any],
    *,
    agent_id: str = "desk",
    **options: Any,
) -> Agent:
    sessions, checkpoints = stores
    return create_agent(
        id=agent_id,
        model=MODEL,
        provider=create_mock_provider(turns=turns),
        tools=tools,
        store=sessions,
        run_state=RunStateOptions(checkpoints, "v1"),
        **options,
    )


async def _edit(checkpoints: Any, run_id: str, change: Any) -> Any:
    loaded = await load_agent_run_state(checkpoints, run_id=run_id)
    state = json.loads(json.dumps(loaded.state))
    change(state)
    return await save_agent_run_state(
        checkpoints=checkpoints, state=state, expected_version=loaded.record.version
    )


async def _status(checkpoints: Any, run_id: str) -> tuple[str, int]:
    loaded = await load_agent_run_state(checkpoints, run_id=run_id)
    return str(loaded.state["status"]), loaded.record.version


# --------------------------------------------------------------------------- item 10


async def test_corrupt_counters_fail_the_approval_before_the_claim(
    durable_stores: tuple[Any, Any],
) -> None:
    ran: list[Any] = []
    tools = [_pay_tool(ran, needs_approval=True)]
    first = (
        await _agent(durable_stores, [_call("pay", {"amount": 5})], tools)
        .create_session()
        .run("pay")
    )
    assert first.status == "suspended"
    checkpoints = durable_stores[1]

    def corrupt(state: dict[str, Any]) -> None:
        state["counters"]["turns"] = -3

    saved = await _edit(checkpoints, first.run_id, corrupt)
    with pytest.raises(AgentRunStateError, match="counters") as info:
        await resume_agent_run(
            _agent(durable_stores, [TEXT], tools), first.run_id, decision="approve"
        )
    assert (info.value.reason, info.value.field) == ("invalid_field", "counters")
    assert await _status(checkpoints, first.run_id) == ("suspended", saved.record.version)
    assert ran == []

    def repair(state: dict[str, Any]) -> None:
        state["counters"]["turns"] = 1

    await _edit(checkpoints, first.run_id, repair)  # the approval is still pending
    done = await resume_agent_run(
        _agent(durable_stores, [TEXT], tools), first.run_id, decision="approve"
    )
    assert done.status == "succeeded" and [r["amount"] for r in ran] == [5]
