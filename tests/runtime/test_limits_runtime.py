"""Run limits inside a run: charge points, one breach event, failure status (LIM-1..LIM-8, TP-4)."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest
from runtime_support import (
    assert_provider_valid,
    echo_tool,
    make_session,
    run_collect,
    stored_messages,
    types_of,
)

from prism.errors import AgentRunError, AgentRunLimitError, PrismConfigError
from prism.limits import UNLIMITED, RunLimits
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.types import ProviderRequest, ToolDefinition, Usage, canonical_json

TEXT = [provider_text_delta("done"), provider_done()]
CALL = [provider_tool_call("c", "lookup", {}), provider_done()]


def calls(n: int) -> list[list[Any]]:
    return [[provider_tool_call(f"c{i}", "lookup", {"i": i}), provider_done()] for i in range(n)]


async def test_max_turns_breach_raises_with_exactly_one_event_lim_7() -> None:
    session, provider = make_session(calls(5) + [TEXT], tools=[echo_tool()], limits={"max_turns": 2})
    result, events = await run_collect(session)
    assert isinstance(result, AgentRunLimitError)
    assert result.code == "ERR_PRISM_RUN_LIMIT"
    assert result.breach is not None and result.breach.limit == "max_turns"
    assert (result.breach.maximum, result.breach.observed) == (2, 3)
    assert result.result.status == "failed" and result.result.limit == result.breach
    kinds = types_of(events)
    assert kinds.count("run_limit_exceeded") == 1
    assert kinds.index("run_limit_exceeded") < kinds.index("error") == len(kinds) - 1
    assert provider.call_count == 2
    assert_provider_valid(await stored_messages(session))


async def test_max_turns_is_charged_at_the_boundary_before_the_provider_call_tp_4() -> None:
    session, provider = make_session(calls(3) + [TEXT], tools=[echo_tool()], limits={"max_turns": 1})
    result, events = await run_collect(session)
    assert isinstance(result, AgentRunLimitError)
    kinds = types_of(events)
    # turn 2 never starts: the loop's turn_started is held until the boundary passes, and the
    # boundary breaches max_turns (issue 21, item 20)
    tail = kinds[kinds.index("turn_finished") + 1 :]
    assert "turn_started" not in tail and tail[-2:] == ["run_limit_exceeded", "error"]


async def test_a_run_overlay_may_narrow_but_not_widen_lim_3() -> None:
    session, _ = make_session(calls(2) + [TEXT], tools=[echo_tool()], limits={"max_tool_rounds": 1})
    with pytest.raises(PrismConfigError, match=r"limits\.max_tool_rounds \(unlimited\) cannot widen the agent limit \(1\)"):
        await session.run("x", limits=RunLimits(max_tool_rounds=UNLIMITED))
    with pytest.raises(PrismConfigError, match="cannot widen"):
        await session.run("x", limits={"max_tool_rounds": 2})


async def test_unlimited_tool_rounds_dispatch_every_round_lim_8() -> None:
    session, provider = make_session(calls(9) + [TEXT], tools=[echo_tool()])
    result = await session.run("x", limits=RunLimits(max_tool_rounds=UNLIMITED))
    assert result.status == "succeeded" and provider.call_count == 10


async def test_the_default_round_cap_stops_after_eight_rounds_lim_1_ssl_2() -> None:
    session, provider = make_session(calls(9) + [TEXT], tools=[echo_tool()])
    result = await session.run("x")
    assert result.status == "succeeded"
    assert result.stop_reason == "tool_round_limit"
    assert provider.call_count == 9
    assert_provider_valid(result.messages)


async def test_max_tool_calls_breach_fails_the_run_lim_4() -> None:
    session, _ = make_session(
        [[provider_tool_call("a", "lookup", {}), provider_tool_call("b", "lookup", {}), provider_done()], TEXT],
        tools=[echo_tool()],
        limits={"max_tool_calls": 1},
    )
    result, events = await run_collect(session)
    assert isinstance(result, AgentRunLimitError)
    assert result.breach is not None and result.breach.limit == "max_tool_calls"
    assert types_of(events).count("run_limit_exceeded") == 1
    assert_provider_valid(await stored_messages(session))


def request_size(request: ProviderRequest) -> int:
    return len(canonical_json(request.to_dict()).encode())


async def test_request_bytes_equal_the_full_computation_arch_15_lim_4() -> None:
    """The incremental byte count is exact: a limit equal to the size passes, one less breaches."""
    script = calls(3) + [TEXT]
    probe, probe_provider = make_session(script, tools=[echo_tool()], instructions="Be brief.")
    await probe.run("measure me")
    sizes = [request_size(r) for r in probe_provider.requests]
    largest = max(sizes)

    ok, _ = make_session(script, tools=[echo_tool()], instructions="Be brief.")
    assert (await ok.run("measure me", limits={"max_request_bytes": largest})).status == "succeeded"

    tight, _ = make_session(script, tools=[echo_tool()], instructions="Be brief.")
    result, _ = await run_collect(tight, "measure me", limits={"max_request_bytes": largest - 1})
    assert isinstance(result, AgentRunLimitError)
    assert result.breach is not None
    assert result.breach.limit == "max_request_bytes" and result.breach.observed == largest


async def test_response_bytes_are_charged_per_event_lim_4() -> None:
    big = "y" * 500
    session, _ = make_session([[provider_text_delta(big), provider_done()]], limits={"max_response_bytes": 400})
    result, _ = await run_collect(session)
    assert isinstance(result, AgentRunLimitError)
    assert result.breach is not None and result.breach.limit == "max_response_bytes"
    expected = len(canonical_json(provider_text_delta(big).to_dict()).encode())
    assert result.breach.observed == expected


async def test_token_budget_breach_after_usage_lim_5() -> None:
    session, _ = make_session(
        [[provider_text_delta("x"), provider_done(Usage(input_tokens=10, output_tokens=50))]],
        limits={"max_output_tokens": 10},
    )
    result, events = await run_collect(session)
    assert isinstance(result, AgentRunLimitError)
    assert result.breach is not None and result.breach.limit == "max_output_tokens"
    assert result.result.usage == Usage(input_tokens=10, output_tokens=50, total_tokens=60)
    # Output buffering (RUN-16): the draft's message events were never emitted.
    assert "message_started" not in types_of(events)


async def test_wall_time_breach_aborts_a_stuck_tool_lim_6() -> None:
    async def stuck(arguments: dict[str, Any], context: Any) -> Any:
        await context.signal.wait()
        return "late"

    session, _ = make_session(
        [[provider_tool_call("c", "stuck", {}), provider_done()], TEXT],
        tools=[ToolDefinition(name="stuck", execute=stuck)],
        limits={"max_wall_time_ms": 20},
    )
    result, events = await asyncio.wait_for(run_collect(session), timeout=5)
    assert isinstance(result, AgentRunLimitError)
    assert result.breach is not None and result.breach.limit == "max_wall_time_ms"
    assert result.result.status == "failed"
    assert types_of(events).count("run_limit_exceeded") == 1


def _stuck_session(wall_ms: int, **session_options: Any) -> Any:
    async def stuck(arguments: dict[str, Any], context: Any) -> Any:
        await context.signal.wait()
        return "late"

    session, _ = make_session(
        [[provider_tool_call("c", "stuck", {}), provider_done()], TEXT],
        tools=[ToolDefinition(name="stuck", execute=stuck)],
        limits={"max_wall_time_ms": wall_ms},
        session_options=session_options,
    )
    return session


async def test_wall_time_deadlines_of_concurrent_runs_each_fire_on_time_lim_6() -> None:
    """Runs in flight at once share the loop's deadline timer: a later deadline registered
    first and an earlier one registered after it both breach, each once, and a run that ends
    first leaves the others' deadlines armed."""
    finished, _ = make_session([TEXT], limits={"max_wall_time_ms": 10_000})
    loop = asyncio.get_running_loop()
    started = loop.time()
    outcomes = await asyncio.wait_for(
        asyncio.gather(
            _stuck_session(200).run("x"),
            _stuck_session(30).run("x"),
            finished.run("x"),
            return_exceptions=True,
        ),
        timeout=5,
    )
    late, early, done = outcomes
    for failed in (late, early):
        assert isinstance(failed, AgentRunLimitError)
        assert failed.breach is not None and failed.breach.limit == "max_wall_time_ms"
    assert not isinstance(done, BaseException) and done.status == "succeeded"
    assert loop.time() - started >= 0.2


async def test_a_wall_time_breach_reaches_on_event_in_the_runs_context_lim_6() -> None:
    """Each deadline's ``run_limit_exceeded`` event is delivered in the context its run started
    in (where a host's context variables are set), whichever run's deadline armed the timer that
    fired it."""
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
    seen: list[str] = []

    def on_event(event: Any) -> None:
        if event.type == "run_limit_exceeded":
            seen.append(request_id.get())

    async def run(name: str, delay_s: float) -> Any:
        request_id.set(name)
        await asyncio.sleep(delay_s)
        return await _stuck_session(40, on_event=on_event).run("x")

    outcomes = await asyncio.wait_for(
        asyncio.gather(run("first", 0), run("second", 0.02), return_exceptions=True), timeout=5
    )
    assert all(isinstance(outcome, AgentRunLimitError) for outcome in outcomes)
    assert seen == ["first", "second"]


async def test_a_breach_recorded_by_a_tool_is_status_failed_not_aborted_err_4() -> None:
    session, _ = make_session(calls(2) + [TEXT], tools=[echo_tool()], limits={"max_tool_rounds": 1})
    # The round ceiling is a clean stop for single-shot (SSL-2), not a breach.
    result = await session.run("x")
    assert result.status == "succeeded" and result.stop_reason == "tool_round_limit"
    with pytest.raises(AgentRunError):
        s2, _ = make_session(calls(3) + [TEXT], tools=[echo_tool()], limits={"max_turns": 1})
        await s2.run("x")
