"""Running execute: the abort grace and worker threads for sync tools (TOOL-10, TOOL-11)."""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest
from tools_support import Recorder, dispatch, echo_tool, make_call, make_context

from prism.abort import AbortController
from prism.errors import (
    AbortError,
)
from prism.tools import (
    parallel_tool_round,
)
from prism.tools.abort_grace import run_with_grace
from prism.types import (
    ErrorInfo,
    ToolDefinition,
    ToolExecutionContext,
)

# =========================================================================== TOOL-10


async def test_tool10_call_finishing_within_grace_keeps_its_result() -> None:
    """TOOL-10: a call finishing within the grace after an abort keeps its real result."""
    controller = AbortController()

    async def execute(args: Any, ctx: ToolExecutionContext) -> str:
        controller.abort()
        await ctx.signal.wait()
        await asyncio.sleep(0)
        return "finished anyway"

    result = await dispatch(
        make_call(), [ToolDefinition(name="echo", execute=execute)], context=make_context(controller.signal)
    )
    assert result.value == "finished anyway"


async def test_tool10_abort_error_raised_within_grace_is_its_error_row() -> None:
    """TOOL-10: an AbortError the tool raises within the grace becomes its error result."""
    controller = AbortController()

    async def execute(args: Any, ctx: ToolExecutionContext) -> None:
        controller.abort()
        ctx.signal.throw_if_aborted()

    result = await dispatch(
        make_call(), [ToolDefinition(name="echo", execute=execute)], context=make_context(controller.signal)
    )
    assert result.error is not None and result.error.code == AbortError.code


async def test_tool10_still_running_after_grace_is_cancelled_and_interrupted() -> None:
    """TOOL-10: a call still running when the grace ends is cancelled (cleanup awaited) and answered."""
    controller = AbortController()
    cleaned: list[str] = []

    async def execute(args: Any, ctx: ToolExecutionContext) -> None:
        controller.abort()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)
            cleaned.append("finally")

    rec = Recorder()
    result = await dispatch(
        make_call(),
        [ToolDefinition(name="echo", execute=execute)],
        rec,
        context=make_context(controller.signal),
        tool_abort_grace_ms=0,
    )
    assert cleaned == ["finally"]
    assert result.error == ErrorInfo(
        code="tool_call_interrupted",
        message="tool call interrupted: still running 0 ms after the run was aborted",
    )
    assert rec.types == ["tool_execution_started", "tool_execution_error"]
    assert [r.status for r in rec.rows] == ["started", "error"]
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0  # our own cancellation was undone


async def test_tool10_external_cancel_during_grace_still_propagates() -> None:
    """TOOL-10/RUN-10: a cancellation of the task itself is not swallowed by the grace logic."""
    controller = AbortController()
    entered = asyncio.Event()

    async def execute(args: Any, ctx: ToolExecutionContext) -> None:
        entered.set()
        await asyncio.Event().wait()

    task = asyncio.ensure_future(
        dispatch(
            make_call(),
            [ToolDefinition(name="echo", execute=execute)],
            context=make_context(controller.signal),
            tool_abort_grace_ms=60_000,
        )
    )
    await entered.wait()
    controller.abort()
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_tool10_worker_thread_answered_after_grace_and_handed_over() -> None:
    """TOOL-10/TOOL-11: a worker thread still running after the grace is answered; its future is
    handed over so the runtime can await it before run() returns."""
    controller = AbortController()
    release = threading.Event()
    entered = threading.Event()
    finished: list[str] = []

    def execute(args: Any, ctx: ToolExecutionContext) -> str:
        entered.set()
        release.wait(10)
        finished.append("thread")
        return "late"

    handed: list[asyncio.Future[Any]] = []
    task = asyncio.ensure_future(
        dispatch(
            make_call(),
            [ToolDefinition(name="echo", execute=execute)],
            context=make_context(controller.signal),
            tool_abort_grace_ms=0,
            sync_in_thread=True,
            on_worker_thread=handed.append,
        )
    )
    assert await asyncio.to_thread(entered.wait, 5)
    controller.abort()
    result = await task
    assert result.error is not None and result.error.code == "tool_call_interrupted"
    assert finished == [] and len(handed) == 1
    release.set()
    assert await handed[0] == "late"
    assert finished == ["thread"]


async def test_tool10_no_listener_for_sync_inline_and_removed_after_async() -> None:
    """TOOL-10/RUN-25: the grace costs nothing on the normal path (no listener left behind)."""

    class CountingSignal:
        aborted = False
        reason = None

        def __init__(self) -> None:
            self.added = 0
            self.removed = 0

        def add_listener(self, cb: Callable[..., Any]) -> Callable[[], None]:
            self.added += 1

            def remove() -> None:
                self.removed += 1

            return remove

    signal = CountingSignal()
    ctx = make_context(signal)  # type: ignore[arg-type]
    await dispatch(make_call(), [echo_tool()], context=ctx)
    assert signal.added == 0

    async def execute(args: Any, c: Any) -> int:
        return 1

    # an async execute that returns without waiting needs no listener either
    await dispatch(make_call(), [ToolDefinition(name="echo", execute=execute)], context=ctx)
    assert signal.added == 0

    async def waiting(args: Any, c: Any) -> int:
        await asyncio.sleep(0)
        return 1

    await dispatch(make_call(), [ToolDefinition(name="echo", execute=waiting)], context=ctx)
    assert signal.added == signal.removed == 1


async def test_tool10_started_coroutine_is_finished_as_await_would() -> None:
    """TOOL-10: a coroutine whose first step ran before the grace was set up is finished as a
    plain ``await`` finishes it: results, exceptions and a cancellation it handles."""
    signal = AbortController().signal

    async def raises_after_wait() -> int:
        await asyncio.sleep(0)
        raise ValueError("late")

    with pytest.raises(ValueError, match="late"):
        await run_with_grace(raises_after_wait(), signal, 1000)

    async def values() -> list[int]:
        seen = []
        for i in range(3):
            await asyncio.sleep(0)
            seen.append(i)
        return seen

    assert await run_with_grace(values(), signal, 1000) == [0, 1, 2]

    gate = asyncio.Event()

    async def handles_cancel() -> str:
        try:
            await gate.wait()
        except asyncio.CancelledError:
            return "cleaned up"
        return "not cancelled"

    async def runner() -> str:
        return await run_with_grace(handles_cancel(), signal, 1000)

    task = asyncio.ensure_future(runner())
    await asyncio.sleep(0)
    task.cancel()
    assert await task == "cleaned up"


# =========================================================================== TOOL-11


async def test_tool11_sync_tool_inline_when_sequential_thread_when_parallel() -> None:
    """TOOL-11: a sync execute runs inline sequentially and in a worker thread (context copied) in
    a parallel round."""
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: list[tuple[int, str]] = []

    def execute(args: Any, ctx: Any) -> None:
        seen.append((threading.get_ident(), var.get()))

    tools = [ToolDefinition(name="echo", execute=execute)]
    var.set("copied")
    await dispatch(make_call(), tools)
    with parallel_tool_round():
        await asyncio.gather(dispatch(make_call(), tools), dispatch(make_call(id="c2"), tools))
    await dispatch(make_call(), tools, sync_in_thread=True)
    loop_thread = threading.get_ident()
    assert seen[0] == (loop_thread, "copied")
    assert all(ident != loop_thread and value == "copied" for ident, value in seen[1:])


async def test_tool11_parallel_threads_overlap_blocking_tools() -> None:
    """TOOL-11: in a parallel round blocking sync tools overlap (counted in flight)."""
    lock = threading.Lock()
    in_flight = 0
    peak = 0
    barrier = threading.Barrier(2, timeout=5)

    def execute(args: Any, ctx: Any) -> str:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        barrier.wait()  # only passes when both run at the same time
        with lock:
            in_flight -= 1
        return "ok"

    tools = [ToolDefinition(name="echo", execute=execute)]
    with parallel_tool_round():
        results = await asyncio.gather(dispatch(make_call(), tools), dispatch(make_call(id="c2"), tools))
    assert [r.value for r in results] == ["ok", "ok"] and peak == 2


@pytest.mark.parametrize("width", [8, min(32, (os.cpu_count() or 1) + 4) + 1])
async def test_tool11_a_parallel_round_never_waits_for_a_worker_thread(width: int) -> None:
    """TOOL-11: with ``tool_concurrency=width`` all ``width`` blocking sync tools of a round are in
    flight at once — more than the default executor's ``min(32, cpu + 4)`` workers (counted with a
    barrier that only opens when every call runs at the same time)."""
    from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
    from prism.providers.mock import create_mock_provider
    from prism.runtime.agent import create_agent

    barrier = threading.Barrier(width, timeout=10)
    lock = threading.Lock()
    in_flight = peak = 0

    def blocking(args: Any, ctx: Any) -> str:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        barrier.wait()  # BrokenBarrierError (an error result) unless all run at once
        with lock:
            in_flight -= 1
        return "ok"

    calls = [provider_tool_call(f"c{i}", "blocking", {}) for i in range(width)]
    provider = create_mock_provider(
        turns=[[*calls, provider_done()], [provider_text_delta("done"), provider_done()]]
    )
    agent = create_agent(
        model={"provider": "mock", "model": "m"},
        provider=provider,
        tools=[ToolDefinition(name="blocking", execute=blocking)],
        loop={"strategy": "single-shot", "tool_concurrency": width},
    )
    result = await agent.create_session().run("go")
    rows = [part for message in result.messages[2:-1] for part in message.content]
    assert [getattr(row, "result", None) for row in rows] == ["ok"] * width
    assert peak == width


async def test_tool11_awaitable_returned_by_sync_execute_is_awaited_on_the_loop() -> None:
    """TOOL-11: an awaitable returned by a sync execute (even in a thread) is awaited on the loop."""
    loop_thread = threading.get_ident()
    ran_on: list[int] = []

    async def later() -> str:
        ran_on.append(threading.get_ident())
        return "awaited"

    def execute(args: Any, ctx: Any) -> Any:
        return later()

    result = await dispatch(make_call(), [ToolDefinition(name="echo", execute=execute)], sync_in_thread=True)
    assert result.value == "awaited" and ran_on == [loop_thread]


async def test_execute_context_carries_the_call_and_the_run() -> None:
    """The context ``execute`` receives while events are emitted: the run's fields, the call's
    id and a ``progress`` bound to the call (built positionally, so in field order)."""
    base = make_context()
    run = object()
    base = ToolExecutionContext(
        session_id=base.session_id,
        run_id=base.run_id,
        tool_call_id="",
        signal=base.signal,
        metadata=base.metadata,
        run=run,  # type: ignore[arg-type]
    )
    seen: list[ToolExecutionContext] = []

    async def execute(args: Any, ctx: ToolExecutionContext) -> str:
        seen.append(ctx)
        await ctx.progress("half")
        return "ok"

    rec = Recorder()
    await dispatch(make_call(), [ToolDefinition(name="echo", execute=execute)], rec, context=base)
    (ctx,) = seen
    assert (ctx.session_id, ctx.run_id, ctx.tool_call_id) == ("session_1", "run_1", "c1")
    assert ctx.signal is base.signal and ctx.metadata is base.metadata and ctx.run is run
    assert [e.type for e in rec.events if e.type == "tool_execution_progress"] == [
        "tool_execution_progress"
    ]
