"""Aborts and task cancellation (RUN-9, RUN-10, RUN-20, RUN-22, RUN-24, RUN-25, TOOL-10)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from runtime_support import (
    MODEL,
    assert_provider_valid,
    make_session,
    result_rows,
    stored_messages,
    types_of,
)

from prism.abort import AbortController
from prism.errors import AbortError, AgentRunError
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.types import ProviderEvent, ProviderRequest, ToolDefinition

TEXT = [provider_text_delta("done"), provider_done()]


def blocking_tool(started: asyncio.Event, finished: list[str]) -> ToolDefinition:
    async def execute(arguments: dict[str, Any], context: Any) -> Any:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            finished.append("cleanup")
        return "never"

    return ToolDefinition(name="block", execute=execute)


async def test_abort_during_a_tool_call_ends_aborted_with_a_valid_history_tool_10_run_20() -> None:
    started = asyncio.Event()
    cleanup: list[str] = []
    session, provider = make_session(
        [[provider_tool_call("c1", "block", {}), provider_tool_call("c2", "block", {}), provider_done()], TEXT],
        tools=[blocking_tool(started, cleanup)],
        tool_abort_grace_ms=0,
    )
    sub = session.subscribe()
    task = asyncio.ensure_future(session.run("go"))
    await started.wait()
    session.abort()
    with pytest.raises(AgentRunError) as info:
        await task
    error = info.value
    assert error.code == "ERR_PRISM_RUN_ABORTED"
    assert error.result.status == "aborted"
    assert error.result.abort_reason == "Agent run aborted"
    assert cleanup == ["cleanup"]
    stored = await stored_messages(session)
    assert_provider_valid(stored)
    rows = result_rows(stored)
    assert [(r.tool_call_id, r.error.code if r.error else None) for r in rows] == [
        ("c1", "tool_call_interrupted"),
        ("c2", "tool_call_not_dispatched"),
    ]
    events = [e async for e in sub]
    assert types_of(events)[-1] == "error"
    assert provider.call_count == 1
    assert not session.is_running


async def test_a_tool_finishing_within_the_grace_keeps_its_real_row_tool_10() -> None:
    started = asyncio.Event()

    async def polite(arguments: dict[str, Any], context: Any) -> Any:
        started.set()
        await context.signal.wait()
        return "finished after abort"

    session, _ = make_session(
        [[provider_tool_call("c1", "polite", {}), provider_done()], TEXT],
        tools=[ToolDefinition(name="polite", execute=polite)],
        tool_abort_grace_ms=10_000,
    )
    task = asyncio.ensure_future(session.run("go"))
    await started.wait()
    session.abort("stop now")
    with pytest.raises(AgentRunError) as info:
        await task
    assert info.value.result.status == "aborted"
    assert info.value.result.abort_reason == "stop now"
    rows = result_rows(await stored_messages(session))
    assert [(r.tool_call_id, r.result) for r in rows] == [("c1", "finished after abort")]


async def test_cancelling_the_run_task_reraises_cancelled_error_after_cleanup_run_10() -> None:
    started = asyncio.Event()
    cleanup: list[str] = []
    session, _ = make_session(
        [[provider_tool_call("c1", "block", {}), provider_done()], TEXT],
        tools=[blocking_tool(started, cleanup)],
    )
    sub = session.subscribe()
    task = asyncio.ensure_future(session.run("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Cleanup ran to completion before the cancellation surfaced.
    assert not session.is_running
    assert cleanup == ["cleanup"]
    stored = await stored_messages(session)
    assert_provider_valid(stored)
    rows = result_rows(stored)
    assert [(r.tool_call_id, r.error.code if r.error else None) for r in rows] == [
        ("c1", "tool_call_interrupted")
    ]
    events = [e async for e in sub]  # the subscription was closed by cleanup
    assert events[-1].type == "error"
    assert events[-1].error.message == "run task cancelled"


async def test_a_second_cancel_during_cleanup_does_not_cut_it_short_run_10() -> None:
    started = asyncio.Event()
    cleanup: list[str] = []
    session, _ = make_session(
        [[provider_tool_call("c1", "block", {}), provider_done()], TEXT],
        tools=[blocking_tool(started, cleanup)],
    )
    task = asyncio.ensure_future(session.run("go"))
    await started.wait()
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not session.is_running
    assert_provider_valid(await stored_messages(session))


class StuckProvider:
    """Ignores ``request.signal`` and never yields: only the runtime can end the wait."""

    id = "stuck"

    def __init__(self) -> None:
        self.closed = False
        self.entered = asyncio.Event()

    def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        return self._gen()

    async def _gen(self) -> AsyncIterator[ProviderEvent]:
        try:
            self.entered.set()
            await asyncio.Event().wait()
            yield provider_done()
        finally:
            self.closed = True


async def test_an_abort_ends_the_provider_wait_at_once_even_if_the_provider_ignores_it_run_25() -> None:
    provider = StuckProvider()
    session = create_agent(model=MODEL, provider=provider).create_session()
    sub = session.subscribe()
    task = asyncio.ensure_future(session.run("go"))
    await provider.entered.wait()
    session.abort()
    with pytest.raises(AgentRunError) as info:
        await asyncio.wait_for(task, timeout=5)
    assert info.value.result.status == "aborted"
    assert info.value.result.error is not None and info.value.result.error.name == "AbortError"
    assert provider.closed  # the provider's iterator was closed, not left to the GC
    events = [e async for e in sub]
    assert types_of(events)[-3:] == ["provider_turn_started", "provider_turn_finished", "error"]
    assert events[-2].error is not None
    task_obj = asyncio.current_task()
    assert task_obj is not None and task_obj.cancelling() == 0


async def test_an_external_signal_is_bridged_into_the_run_run_9() -> None:
    provider = StuckProvider()
    session = create_agent(model=MODEL, provider=provider).create_session()
    external = AbortController()
    task = asyncio.ensure_future(session.run("go", signal=external.signal))
    await provider.entered.wait()
    external.abort(AbortError("host says stop"))
    with pytest.raises(AgentRunError) as info:
        await asyncio.wait_for(task, timeout=5)
    assert info.value.result.abort_reason == "host says stop"


async def test_cancelling_during_the_provider_wait_is_not_translated_run_10_run_25() -> None:
    provider = StuckProvider()
    session = create_agent(model=MODEL, provider=provider).create_session()
    task = asyncio.ensure_future(session.run("go"))
    await provider.entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert provider.closed
    assert not session.is_running


async def test_timeout_around_run_still_works_with_runtime_cancellations_run_25() -> None:
    """``asyncio.wait_for`` relies on CancelledError; the runtime's own uncancel must not break it."""
    provider = StuckProvider()
    session = create_agent(model=MODEL, provider=provider).create_session()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(session.run("go"), timeout=0.05)
    assert not session.is_running and provider.closed


async def test_an_abort_during_a_slow_mock_stream_stops_it_run_25() -> None:
    entered = asyncio.Event()
    provider = create_mock_provider(
        events=[provider_text_delta("a"), provider_text_delta("b"), provider_done()],
        delay_s=30,
        on_request=lambda request: entered.set(),
    )
    session = create_agent(model=MODEL, provider=provider).create_session()
    task = asyncio.ensure_future(session.run("go"))
    await entered.wait()
    session.abort()
    with pytest.raises(AgentRunError) as info:
        await asyncio.wait_for(task, timeout=5)
    assert info.value.result.status == "aborted"


async def test_abort_without_an_active_run_is_a_no_op_run_4() -> None:
    session, _ = make_session([TEXT])
    session.abort()
    result = await session.run("x")
    assert result.status == "succeeded"


async def test_an_abort_during_a_parallel_round_interrupts_both_calls_after_the_grace_tool_10() -> None:
    from prism.loops.contracts import SingleShotLoopOptions

    running: list[str] = []
    both = asyncio.Event()
    tasks: set[object] = set()

    async def stubborn(arguments: dict[str, Any], context: Any) -> Any:
        running.append(context.tool_call_id)
        tasks.add(asyncio.current_task())
        if len(running) == 2:
            both.set()
        await asyncio.Event().wait()  # ignores the signal: the grace ends it
        return "never"

    session, _ = make_session(
        [[provider_tool_call("c1", "slow", {}), provider_tool_call("c2", "slow", {}), provider_done()], TEXT],
        tools=[ToolDefinition(name="slow", execute=stubborn)],
        tool_abort_grace_ms=20,
        loop=SingleShotLoopOptions(tool_concurrency=2),
    )
    task = asyncio.ensure_future(session.run("go"))
    await both.wait()
    assert task in tasks and len(tasks) == 2  # one call in the run's task, one in a worker task
    session.abort()
    with pytest.raises(AgentRunError) as info:
        await task
    assert info.value.result.status == "aborted"
    stored = await stored_messages(session)
    assert_provider_valid(stored)
    assert [(r.tool_call_id, r.error.code if r.error else None) for r in result_rows(stored)] == [
        ("c1", "tool_call_interrupted"),
        ("c2", "tool_call_interrupted"),
    ]
    assert not session.is_running


async def test_cancelling_the_run_task_during_a_parallel_round_cancels_both_calls_run_10() -> None:
    from prism.loops.contracts import SingleShotLoopOptions

    cleanup: list[str] = []
    started = asyncio.Event()
    count = 0

    async def blocking(arguments: dict[str, Any], context: Any) -> Any:
        nonlocal count
        count += 1
        if count == 2:
            started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cleanup.append(context.tool_call_id)
        return "never"

    session, _ = make_session(
        [[provider_tool_call("c1", "b", {}), provider_tool_call("c2", "b", {}), provider_done()], TEXT],
        tools=[ToolDefinition(name="b", execute=blocking)],
        loop=SingleShotLoopOptions(tool_concurrency=2),
    )
    task = asyncio.ensure_future(session.run("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(cleanup) == ["c1", "c2"]
    stored = await stored_messages(session)
    assert_provider_valid(stored)
    assert [(r.tool_call_id, r.error.code if r.error else None) for r in result_rows(stored)] == [
        ("c1", "tool_call_interrupted"),
        ("c2", "tool_call_interrupted"),
    ]
    assert not session.is_running
