"""The turn boundary: once per provider turn, hook order, sticky outcomes (TP-4, TP-5, LIM-4, LOOP-8)."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_support import echo_tool, make_session, run_collect, types_of

from prism.errors import AgentRunError, RunLimitExceeded
from prism.limits import RunLimits, RunLimitTracker, resolve_run_limits
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.runtime.run.context import TurnBoundary
from prism.runtime.turn_policy import Continue, Stop, TurnPolicy

TEXT = [provider_text_delta("done"), provider_done()]


def tracker(max_turns: int = 16) -> RunLimitTracker:
    return RunLimitTracker(resolve_run_limits(RunLimits(max_turns=max_turns)))


async def test_the_boundary_runs_once_per_turn_and_charges_max_turns_tp_4() -> None:
    log: list[str] = []

    async def before(turn: int) -> None:
        log.append(f"before {turn}")

    async def after(turn: int) -> None:
        log.append(f"after {turn}")

    limits = tracker()
    boundary = TurnBoundary(limits, before_charge=[before], after_charge=[after])
    assert await boundary.enter() == 1
    assert await boundary.enter() == 1  # assemble then generate of the same turn
    boundary.completed += 1
    assert await boundary.enter() == 2
    assert log == ["before 1", "after 1", "before 2", "after 2"]
    assert limits.counters.turns == 2


async def test_the_policy_is_evaluated_before_max_turns_is_charged_tp_4_tp_12() -> None:
    order: list[str] = []
    limits = tracker(max_turns=1)

    async def policy(turn: int) -> None:
        order.append(f"policy sees {limits.counters.turns} charged")

    boundary = TurnBoundary(limits, before_charge=[policy])
    await boundary.enter()
    assert order == ["policy sees 0 charged"]


async def test_a_boundary_failure_is_sticky_loop_8() -> None:
    boundary = TurnBoundary(tracker(max_turns=1))
    await boundary.enter()
    boundary.completed += 1
    with pytest.raises(RunLimitExceeded) as first:
        await boundary.enter()
    with pytest.raises(RunLimitExceeded) as again:
        await boundary.enter()
    assert again.value is first.value
    assert boundary.failure is first.value


async def test_equal_policy_and_limit_caps_stop_cleanly_tp_12() -> None:
    session, provider = make_session(
        [[provider_tool_call(f"c{i}", "lookup", {}), provider_done()] for i in range(3)] + [TEXT],
        tools=[echo_tool()],
        limits={"max_turns": 2},
    )
    result, events = await run_collect(session, turn_policy=TurnPolicy(max_turns=2))
    assert not isinstance(result, AgentRunError)
    assert (result.status, result.stop_reason, result.stop_detail) == ("succeeded", "turn_limit", "max_turns")
    assert provider.call_count == 2
    assert "run_limit_exceeded" not in types_of(events)
    # the stopped turn 3 never starts (issue 21, item 20: every turn_started is closed)
    kinds = types_of(events)
    assert kinds.count("turn_started") == kinds.count("turn_finished") == 2
    assert kinds[-1] == "agent_finished"


async def test_a_policy_stop_swallowed_by_a_custom_loop_still_ends_the_run_cleanly_loop_8() -> None:
    class Stubborn:
        name = "stubborn"

        async def run(self, ctx: Any) -> None:
            for _ in range(3):
                try:
                    await ctx.generate(await ctx.assemble(ctx.input))
                except Exception:
                    continue

    def stop(ctx: Any) -> Stop | Continue:
        return Stop("enough") if ctx.turns else Continue()

    session, provider = make_session([TEXT, TEXT, TEXT])
    result = await session.run("x", loop=Stubborn(), turn_policy={"stop": stop})
    assert (result.status, result.stop_reason, result.stop_detail) == ("succeeded", "host_policy", "enough")
    assert provider.call_count == 1
