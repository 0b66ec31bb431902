"""What a resume says when it cannot continue a stored run, on the memory, SQLite and PostgreSQL
stores: one conflict error for a resumer that lost to another (at load or at the
compare-and-set), the command's wording for finished, failed and unknown runs, a run id alone
for an approval-waiting run, and checks that come before any write (a run whose leaf the
session store does not hold is reported, never claimed and failed)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from prism.errors import AgentRunError, AgentRunStateError, CheckpointConflictError
from prism.providers.base import (
    provider_done,
    provider_error,
    provider_text_delta,
    provider_tool_call,
)
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import Agent, create_agent
from prism.runtime.durable import (
    RunStateOptions,
    load_agent_run_state,
    resume_agent_run,
    save_agent_run_state,
)
from prism.types import ErrorInfo, ModelConfig, ToolDefinition

MODEL = ModelConfig(provider="mock", model="resume")
CALL = [provider_tool_call("c1", "pay", {"amount": 5}), provider_done()]
TEXT = [provider_text_delta("paid"), provider_done()]


def _agent(stores: tuple[Any, Any], turns: list[Any], paid: list[Any], **options: Any) -> Agent:
    sessions, checkpoints = stores

    def pay(arguments: dict[str, Any], context: Any) -> Any:
        if arguments.get("amount") == "boom":
            raise RuntimeError("card declined")
        paid.append(arguments)
        return {"paid": arguments["amount"]}

    return create_agent(
        id="desk",
        model=MODEL,
        provider=create_mock_provider(turns=turns),
        tools=[ToolDefinition(name="pay", execute=pay)],
        store=sessions,
        run_state=RunStateOptions(checkpoints, "v1", interrupt_before_tool=True, **options),
    )


async def test_a_resumer_that_loses_gets_checkpoint_conflict_at_load_and_at_the_claim(
    durable_stores: tuple[Any, Any],
) -> None:
    """Loser at the compare-and-set (both loaded the same version) and loser at load (it read
    the envelope after the winner moved it): ``CheckpointConflictError`` both times."""
    paid: list[Any] = []
    session = _agent(durable_stores, [CALL], paid).create_session()
    first = await session.run("pay 5")
    assert first.status == "suspended"

    class Gate:
        """Lets two resumers load before either writes its claim."""

        def __init__(self, inner: Any, loaded: asyncio.Barrier) -> None:
            self.inner, self.loaded = inner, loaded

        async def load_checkpoint(self, **kw: Any) -> Any:
            record = await self.inner.load_checkpoint(**kw)
            await self.loaded.wait()
            return record

        async def save_checkpoint(self, **kw: Any) -> Any:
            return await self.inner.save_checkpoint(**kw)

    barrier = asyncio.Barrier(2)
    sessions, checkpoints = durable_stores
    gated = Gate(checkpoints, barrier)
    racers = [_agent((sessions, gated), [TEXT], paid) for _ in range(2)]
    outcomes = await asyncio.gather(
        *(resume_agent_run(a, first.run_state, decision="approve") for a in racers),
        return_exceptions=True,
    )
    winners = [o for o in outcomes if not isinstance(o, BaseException)]
    losers = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(winners) == 1 and winners[0].status == "succeeded", outcomes
    assert [type(e) for e in losers] == [CheckpointConflictError], losers
    assert paid == [{"amount": 5}]
    # a late resumer holding the old version loses at load, with the same error
    late = _agent(durable_stores, [TEXT], paid)
    with pytest.raises(CheckpointConflictError) as info:
        await resume_agent_run(late, first.run_state, decision="approve")
    assert info.value.code == "ERR_PRISM_CHECKPOINT_CONFLICT"
    assert "already finished (succeeded); nothing to resume" in str(info.value)
    assert paid == [{"amount": 5}]


async def test_finished_failed_and_unknown_runs_say_what_the_command_says(
    durable_stores: tuple[Any, Any],
) -> None:
    """The Python wording equals ``prism resume``'s: finished, failed, unknown."""
    paid: list[Any] = []
    session = _agent(durable_stores, [CALL], paid).create_session()
    first = await session.run("pay 5")
    done = await resume_agent_run(
        _agent(durable_stores, [TEXT], paid), first.run_id, decision="approve"
    )
    assert done.status == "succeeded"
    agent = _agent(durable_stores, [TEXT], paid)
    with pytest.raises(AgentRunStateError) as info:
        await resume_agent_run(agent, done.run_state)
    assert str(info.value) == f"run {first.run_id} already finished (succeeded); nothing to resume"
    with pytest.raises(AgentRunStateError) as info:
        await resume_agent_run(agent, "run_nobody")
    assert str(info.value).startswith("no run run_nobody in this store")

    failing = _agent(durable_stores, [[provider_tool_call("c9", "pay", {"amount": "boom"}),
                                       provider_done()]], paid).create_session()
    suspended = await failing.run("pay boom")
    failing_agent = _agent(
        durable_stores,
        [[provider_error(ErrorInfo(message="provider down", code="unavailable"))]],
        paid,
    )
    with pytest.raises(AgentRunError):
        await resume_agent_run(failing_agent, suspended.run_id, decision="approve")
    loaded = await load_agent_run_state(durable_stores[1], run_id=suspended.run_id)
    assert loaded.state["status"] == "failed"
    with pytest.raises(AgentRunStateError) as info:
        await resume_agent_run(failing_agent, suspended.run_id)
    assert str(info.value).startswith(f"run {suspended.run_id} is failed and cannot be resumed")


async def test_a_run_id_alone_resumes_an_approval_waiting_run(
    durable_stores: tuple[Any, Any],
) -> None:
    """No ``expected_version``: the stored version is resumed (the claim compares it)."""
    paid: list[Any] = []
    session = _agent(durable_stores, [CALL], paid).create_session()
    first = await session.run("pay 5")
    result = await resume_agent_run(
        _agent(durable_stores, [TEXT], paid), first.run_id, decision="approve"
    )
    assert result.status == "succeeded" and paid == [{"amount": 5}]


async def test_a_run_whose_leaf_is_missing_is_reported_before_anything_is_written(
    durable_stores: tuple[Any, Any],
) -> None:
    """A checkpoint whose leaf (or session) the session store does not hold: the resume raises
    before the claim; the stored envelope keeps its status and version."""
    paid: list[Any] = []
    sessions, checkpoints = durable_stores
    session = _agent(durable_stores, [CALL], paid).create_session()
    first = await session.run("pay 5")
    loaded = await load_agent_run_state(checkpoints, run_id=first.run_id)
    for edit in ({"leaf_id": "entry_gone"}, {"session_id": "session_gone"}):
        current = await load_agent_run_state(checkpoints, run_id=first.run_id)
        saved = await save_agent_run_state(
            checkpoints=checkpoints,
            state={**loaded.state, **edit},
            expected_version=current.record.version,
        )
        with pytest.raises(AgentRunStateError, match="is not in session") as info:
            await resume_agent_run(
                _agent(durable_stores, [TEXT], paid), saved, decision="approve"
            )
        assert info.value.code == "ERR_PRISM_AGENT_RUN_STATE"
        after = await load_agent_run_state(checkpoints, run_id=first.run_id)
        assert after.record.version == saved.record.version
        assert after.state["status"] == "suspended"
    assert paid == []
