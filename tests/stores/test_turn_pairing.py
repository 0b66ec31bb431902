"""Every ``turn_started`` a subscriber sees is closed by its ``turn_finished`` (issue 21, item 20).

A turn starts once its boundary has passed (the approval suspension, the turn policy,
``max_turns``): a leg that suspends or stops at a boundary emits no ``turn_started`` for the turn
it never began. Durable legs on the memory, SQLite and PostgreSQL stores; the ledger's stored
events pair the same way.
"""

from __future__ import annotations

import asyncio
from typing import Any

import prism
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.durable import RunStateOptions, resume_agent_run
from prism.runtime.turn_policy import Continue, Stop
from prism.types import ModelConfig, ToolDefinition

MODEL = ModelConfig(provider="mock", model="m")


async def _collect(session: Any, run: Any) -> tuple[Any, list[Any]]:
    subscription = session.subscribe(max_queued_events=4096)
    events: list[Any] = []

    async def consume() -> None:
        async for event in subscription:
            events.append(event)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)
    result = await run
    await asyncio.wait_for(task, timeout=30)
    return result, events


def _assert_paired(events: list[Any]) -> None:
    open_turn: int | None = None
    for event in events:
        if event.type == "turn_started":
            assert open_turn is None, f"turn {open_turn} never finished"
            open_turn = event.turn
        elif event.type == "turn_finished":
            assert open_turn == event.turn
            open_turn = None
    assert open_turn is None, f"turn {open_turn} started and never finished"


async def test_a_suspended_leg_closes_every_turn_it_started_i21_20(
    durable_stores: tuple[Any, Any],
) -> None:
    store, checkpoints = durable_stores
    refund = ToolDefinition(name="refund", execute=lambda arguments, context: 1, needs_approval=True)

    def agent(turns: list[Any]) -> Any:
        return prism.create_agent(
            id="desk",
            model=MODEL,
            provider=create_mock_provider(turns=turns),
            tools=[refund],
            store=store,
            run_state=RunStateOptions(checkpoints, "v1"),
        )

    first = agent([[provider_tool_call("c1", "refund", {}), provider_done()]])
    session = first.create_session()
    suspended, events = await _collect(session, session.run("Refund me"))
    assert suspended.status == "suspended" and events[-1].type == "agent_suspended"
    _assert_paired(events)
    assert [e.turn for e in events if e.type == "turn_started"] == [1]

    # the resumed leg suspends again on a second gated call: also paired
    second = agent([[provider_tool_call("c2", "refund", {}), provider_done()]])
    again = second.create_session(session_id=session.id)
    resuspended, events = await _collect(
        again, resume_agent_run(again, suspended.run_state, decision="approve")
    )
    assert resuspended.status == "suspended"
    _assert_paired(events)
    assert [e.turn for e in events if e.type == "turn_started"] == [1]

    third = agent([[provider_text_delta("done"), provider_done()]])
    last = third.create_session(session_id=session.id)
    finished, events = await _collect(
        last, resume_agent_run(last, resuspended.run_state, decision="approve")
    )
    assert finished.status == "succeeded"
    _assert_paired(events)


async def test_a_turn_policy_stop_at_a_boundary_starts_no_turn_i21_20() -> None:
    """Also in the ledger's stored events."""
    from prism.ledger import MemoryRunLedger

    ledger = MemoryRunLedger()
    session = prism.create_agent(
        model=MODEL,
        run_ledger=ledger,
        provider=create_mock_provider(
            turns=[[provider_tool_call("c1", "echo", {}), provider_done()]]
        ),
        tools=[ToolDefinition(name="echo", execute=lambda arguments, context: 1)],
    ).create_session()
    result, events = await _collect(
        session,
        session.run(
            "go", turn_policy={"stop": lambda c: Stop("enough") if c.turns else Continue()}
        ),
    )
    assert result.stop_reason == "host_policy"
    _assert_paired(events)
    assert [e.turn for e in events if e.type == "turn_started"] == [1]
    stored = [record.event for record in ledger.run_events(result.run_id)]
    assert [e.type for e in stored] == [e.type for e in events]
    _assert_paired(stored)
