"""Approvals that never let a call through unapproved nor lose one, on the memory, SQLite and
PostgreSQL stores: the approval shows (and binds to) the arguments that will run, a changed agent
tree or an edited pending entry fails the resume before any claim, arguments holding registered
secrets are approved as shown and run with their real values, and corrupt stored fields are
refused before the claim."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

import prism
from prism.errors import AgentRunStateError
from prism.middleware import MiddlewareRegistry
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.redaction import create_secret_redactor
from prism.runtime.agent import Agent, create_agent
from prism.runtime.durable import (
    RunStateOptions,
    load_agent_run_state,
    resume_agent_run,
    save_agent_run_state,
)
from prism.types import ModelConfig, ToolCallContent, ToolDefinition

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


# --------------------------------------------------------------------------- item 6


def _capping(cap: list[int]) -> MiddlewareRegistry:
    """A ``tool_call`` hook capping ``amount`` at ``cap[0]`` (read at each call)."""

    def hook(call: ToolCallContent) -> ToolCallContent:
        amount = call.arguments.get("amount")
        if isinstance(amount, int) and amount > cap[0]:
            return dataclasses.replace(call, arguments={**call.arguments, "amount": cap[0]})
        return call

    return MiddlewareRegistry({"tool_call": hook})


async def test_the_approval_shows_the_arguments_that_run_and_asks_again_when_they_change(
    durable_stores: tuple[Any, Any],
) -> None:
    ran: list[Any] = []
    cap = [50]
    tools = [_pay_tool(ran, needs_approval=True)]

    def agent(turns: list[Any]) -> Agent:
        return _agent(durable_stores, turns, tools, middleware=_capping(cap))

    first = await agent([_call("pay", {"amount": 100})]).create_session().run("pay 100")
    assert first.status == "suspended"
    (pending,) = first.interruption.pending_decisions
    # after the middleware, with the schema's default: what the tool will receive
    assert json.loads(pending.arguments) == {"amount": 50, "currency": "EUR"}
    cap[0] = 30  # the middleware says something else on resume: ask again, run nothing
    again = await resume_agent_run(agent([TEXT]), first.run_id, decision="approve")
    assert again.status == "suspended" and ran == []
    (pending,) = again.interruption.pending_decisions
    assert json.loads(pending.arguments) == {"amount": 30, "currency": "EUR"}
    done = await resume_agent_run(agent([TEXT]), again.run_id, decision="approve")
    assert done.status == "succeeded"
    assert ran == [{"amount": 30, "currency": "EUR"}]  # exactly what was approved


# --------------------------------------------------------------------------- item 7


async def test_needs_approval_decides_from_validated_arguments_with_defaults(
    durable_stores: tuple[Any, Any],
) -> None:
    seen: list[dict[str, Any]] = []

    def large(call: ToolCallContent) -> bool:
        seen.append(dict(call.arguments))
        return bool(call.arguments["amount"] > 1000)

    @prism.tool(needs_approval=large)
    def transfer(amount: int, currency: str = "EUR") -> str:
        """Transfer an amount."""
        sent.append((amount, currency))
        return "sent"

    sent: list[Any] = []
    turns = [
        _call("transfer", {"amount": 5}, "c1"),
        _call("transfer", {"amount": "lots"}, "c2"),  # invalid: an error row, nobody asked
        _call("transfer", {"amount": 5000}, "c3"),
    ]
    first = await _agent(durable_stores, turns, [transfer]).create_session().run("go")
    assert first.status == "suspended"
    assert seen == [{"amount": 5, "currency": "EUR"}, {"amount": 5000, "currency": "EUR"}]
    assert sent == [(5, "EUR")]
    (pending,) = first.interruption.pending_decisions
    assert pending.tool_call_id == "c3"
    assert json.loads(pending.arguments) == {"amount": 5000, "currency": "EUR"}


async def test_a_raising_needs_approval_never_lets_the_call_through(
    durable_stores: tuple[Any, Any],
) -> None:
    ran: list[Any] = []

    def broken(call: ToolCallContent) -> bool:
        raise KeyError("limit")

    tools = [_pay_tool(ran, needs_approval=broken)]
    session = _agent(durable_stores, [_call("pay", {"amount": 5}), TEXT], tools).create_session()
    result = await session.run("pay")
    assert ran == []  # fails closed
    rows = [m for m in result.messages if m.role == "tool"]
    (row,) = rows
    error = row.content[0].error
    assert error is not None and "needs_approval of tool pay raised KeyError" in error.message


# --------------------------------------------------------------------------- item 8


def _child(name: str, turns: list[Any], ran: list[Any], *, with_pay: bool = True) -> Agent:
    tools: list[Any] = [_pay_tool(ran, needs_approval=True)] if with_pay else []
    tools.append(ToolDefinition(name="lookup", execute=lambda a, c: "found"))
    return create_agent(
        name=name, model=MODEL, provider=create_mock_provider(turns=turns), tools=tools
    )


def _lead(stores: tuple[Any, Any], turns: list[Any], child: Agent) -> Agent:
    sessions, checkpoints = stores
    return create_agent(
        name="lead",
        model=MODEL,
        provider=create_mock_provider(turns=turns),
        tools=[child.as_tool(name="clerk")],
        store=sessions,
        run_state=RunStateOptions(checkpoints, "v1"),
    )


@pytest.mark.parametrize("change", ["renamed child agent", "tool removed from the child"])
async def test_a_changed_agent_tree_fails_the_resume_before_the_claim(
    durable_stores: tuple[Any, Any], change: str
) -> None:
    ran: list[Any] = []
    child = _child("clerk", [_call("pay", {"amount": 7}, "k1")], ran)
    first = (
        await _lead(durable_stores, [_call("clerk", {"input": "pay 7"}, "p1")], child)
        .create_session()
        .run("go")
    )
    assert first.status == "suspended"
    checkpoints = durable_stores[1]
    before = await _status(checkpoints, first.run_id)
    changed = (
        _child("clerk-2", [TEXT], ran)
        if change == "renamed child agent"
        else _child("clerk", [TEXT], ran, with_pay=False)
    )
    with pytest.raises(AgentRunStateError, match="child run") as info:
        await resume_agent_run(
            _lead(durable_stores, [TEXT], changed), first.run_id, decision="approve"
        )
    assert info.value.reason == "agent_changed"
    assert await _status(checkpoints, first.run_id) == before  # nothing claimed
    assert ran == []
    # still resumable with the right agent
    done = await resume_agent_run(
        _lead(durable_stores, [TEXT], _child("clerk", [TEXT], ran)),
        first.run_id,
        decision="approve",
    )
    assert done.status == "succeeded" and [r["amount"] for r in ran] == [7]


async def test_an_edited_pending_entry_fails_the_resume_before_the_claim(
    durable_stores: tuple[Any, Any],
) -> None:
    ran: list[Any] = []
    wiped: list[Any] = []
    tools = [
        _pay_tool(ran, needs_approval=True),
        ToolDefinition(name="wipe", execute=lambda a, c: wiped.append(a) or "wiped"),
    ]
    first = (
        await _agent(durable_stores, [_call("pay", {"amount": 5})], tools)
        .create_session()
        .run("pay")
    )
    checkpoints = durable_stores[1]

    def rename(state: dict[str, Any]) -> None:
        state["pending_calls"][0]["call"]["name"] = "wipe"

    saved = await _edit(checkpoints, first.run_id, rename)
    with pytest.raises(AgentRunStateError, match="wipe") as info:
        await resume_agent_run(
            _agent(durable_stores, [TEXT], tools), first.run_id, decision="approve"
        )
    assert info.value.reason == "pending_call_edited"
    assert await _status(checkpoints, first.run_id) == ("suspended", saved.record.version)
    assert ran == [] and wiped == []


# --------------------------------------------------------------------------- item 9

SECRET = "sk-live-4242"


async def test_a_call_holding_a_secret_is_approved_as_shown_and_runs_with_the_real_value(
    durable_stores: tuple[Any, Any],
) -> None:
    ran: list[Any] = []
    tools = [_pay_tool(ran, needs_approval=True)]
    redactor = create_secret_redactor(["other-secret", SECRET])

    def agent(turns: list[Any], **options: Any) -> Agent:
        return _agent(durable_stores, turns, tools, **options)

    call = _call("pay", {"amount": 5, "note": f"key {SECRET}"})
    first = await agent([call], redactor=redactor).create_session().run("pay")
    assert first.status == "suspended"
    (pending,) = first.interruption.pending_decisions
    assert json.loads(pending.arguments)["note"] == "key [REDACTED]"  # what the approver saw
    checkpoints = durable_stores[1]
    loaded = await load_agent_run_state(checkpoints, run_id=first.run_id)
    assert SECRET not in json.dumps(loaded.state)
    before = await _status(checkpoints, first.run_id)
    # the resuming agent cannot restore the secret: refused before the claim
    for other in (None, create_secret_redactor(["not-it"])):
        with pytest.raises(AgentRunStateError) as info:
            await resume_agent_run(agent([TEXT], redactor=other), first.run_id, decision="approve")
        assert info.value.reason == "arguments_not_restorable"
        assert await _status(checkpoints, first.run_id) == before
    done = await resume_agent_run(
        agent([TEXT], redactor=redactor), first.run_id, decision="approve"
    )
    assert done.status == "succeeded"
    assert ran == [{"amount": 5, "currency": "EUR", "note": f"key {SECRET}"}]  # once, real value
    loaded = await load_agent_run_state(checkpoints, run_id=first.run_id)
    assert SECRET not in json.dumps(loaded.state)
