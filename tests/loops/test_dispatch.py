"""The tool-round dispatcher with a stub loop context (POOL-1..POOL-10, TOOL-11)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from prism.abort import AbortController, AbortSignal
from prism.errors import AbortError, AgentLoopStateError, AgentRunSuspended, RunLimitExceeded
from prism.loops import (
    append_unanswered_rows,
    dispatch_tool_calls_in_order,
    dispatchable_tool_calls,
)
from prism.loops.dispatch import NOT_DISPATCHED_BATCH_MESSAGE, is_suspension_signal
from prism.tools import parallel_tool_round
from prism.types import (
    Message,
    RunLimitBreach,
    ToolCallContent,
    ToolResult,
    ToolResultContent,
)

Handler = Callable[[ToolCallContent], Awaitable[ToolResult]]


def call(i: int, name: str = "t", authority: Any = None) -> ToolCallContent:
    return ToolCallContent(id=f"c{i}", name=name, arguments={"i": i}, authority=authority)


@dataclass
class Ctx:
    """A duck-typed loop context that records history, store rows and dispatches."""

    handler: Handler
    tool_concurrency: int = 1
    exclusive: frozenset[str] = frozenset()
    signal: AbortSignal = field(default_factory=lambda: AbortController().signal)
    history: list[Message] = field(default_factory=list)
    stored: list[Message] = field(default_factory=list)
    dispatched: list[str] = field(default_factory=list)
    charged: list[int] = field(default_factory=list)
    charge_error: BaseException | None = None

    async def dispatch_tool_call(self, c: ToolCallContent) -> ToolResult:
        self.dispatched.append(c.id)
        return await self.handler(c)

    async def append_message(self, message: Message) -> None:
        self.stored.append(message)

    async def charge_tool_round(self, calls: Sequence[ToolCallContent]) -> None:
        self.charged.append(len(calls))
        if self.charge_error is not None:
            raise self.charge_error

    def is_tool_call_exclusive(self, c: ToolCallContent) -> bool:
        return c.name in self.exclusive


def rows(ctx: Ctx) -> list[tuple[str, Any, Any]]:
    out = []
    for message in ctx.stored:
        head = message.content[0]
        assert isinstance(head, ToolResultContent)
        out.append((head.tool_call_id, head.result, head.error.code if head.error else None))
    return out


def ok(value: Any = None) -> Handler:
    async def handler(c: ToolCallContent) -> ToolResult:
        return ToolResult(tool_call_id=c.id, name=c.name, value=value if value is not None else c.id)

    return handler


async def test_empty_round_does_nothing_and_charges_nothing_pool_1() -> None:
    ctx = Ctx(ok())
    await dispatch_tool_calls_in_order([], ctx)  # type: ignore[arg-type]
    assert ctx.charged == [] and ctx.stored == [] and ctx.dispatched == []


async def test_sequential_round_appends_each_row_in_call_order_pool_3_pool_7() -> None:
    ctx = Ctx(ok())
    calls = [call(1), call(2), call(3)]
    await dispatch_tool_calls_in_order(calls, ctx)  # type: ignore[arg-type]
    assert ctx.charged == [3]
    assert ctx.dispatched == ["c1", "c2", "c3"]
    assert rows(ctx) == [("c1", "c1", None), ("c2", "c2", None), ("c3", "c3", None)]
    assert ctx.history == ctx.stored


async def test_eight_slow_tools_with_concurrency_four_run_four_at_a_time_pool_4() -> None:
    """tool_concurrency=4 with 8 slow tools: at most 4 in flight, and 4 reached; rows in call order."""
    in_flight = 0
    max_in_flight = 0
    release = asyncio.Event()
    finish_order: list[str] = []

    async def slow(c: ToolCallContent) -> ToolResult:
        nonlocal in_flight, max_in_flight
        in_flight += 1
        max_in_flight = max(max_in_flight, in_flight)
        if in_flight == 4:
            release.set()
        await release.wait()
        # Later calls finish first to prove rows are not appended in completion order.
        for _ in range(10 - int(c.id[1:])):
            await asyncio.sleep(0)
        in_flight -= 1
        finish_order.append(c.id)
        return ToolResult(tool_call_id=c.id, name=c.name, value=c.id)

    ctx = Ctx(slow, tool_concurrency=4)
    calls = [call(i) for i in range(1, 9)]
    # A pool narrower than 4 would never release the first wave: fail instead of hanging.
    await asyncio.wait_for(dispatch_tool_calls_in_order(calls, ctx), timeout=5)  # type: ignore[arg-type]
    assert max_in_flight == 4
    assert finish_order != [c.id for c in calls]
    assert [r[0] for r in rows(ctx)] == [c.id for c in calls]
    assert all(r[2] is None for r in rows(ctx))


async def test_concurrency_never_exceeds_the_number_of_calls_pool_2() -> None:
    in_flight = 0
    seen = 0

    async def slow(c: ToolCallContent) -> ToolResult:
        nonlocal in_flight, seen
        in_flight += 1
        seen = max(seen, in_flight)
        await asyncio.sleep(0)
        in_flight -= 1
        return ToolResult(tool_call_id=c.id, name=c.name)

    ctx = Ctx(slow, tool_concurrency=16)
    await dispatch_tool_calls_in_order([call(1), call(2)], ctx)  # type: ignore[arg-type]
    assert seen == 2


async def test_explicit_concurrency_overrides_the_context_pool_2() -> None:
    in_flight = 0
    seen = 0

    async def slow(c: ToolCallContent) -> ToolResult:
        nonlocal in_flight, seen
        in_flight += 1
        seen = max(seen, in_flight)
        await asyncio.sleep(0)
        in_flight -= 1
        return ToolResult(tool_call_id=c.id, name=c.name)

    ctx = Ctx(slow, tool_concurrency=4)
    await dispatch_tool_calls_in_order([call(i) for i in range(4)], ctx, concurrency=1)  # type: ignore[arg-type]
    assert seen == 1


async def test_an_exclusive_tool_forces_sequential_dispatch_for_its_round_only_pool_2() -> None:
    in_flight = 0
    peaks: list[int] = []

    async def slow(c: ToolCallContent) -> ToolResult:
        nonlocal in_flight
        in_flight += 1
        peaks.append(in_flight)
        await asyncio.sleep(0)
        in_flight -= 1
        return ToolResult(tool_call_id=c.id, name=c.name)

    ctx = Ctx(slow, tool_concurrency=3, exclusive=frozenset({"x"}))
    await dispatch_tool_calls_in_order([call(1), call(2, "x"), call(3)], ctx)  # type: ignore[arg-type]
    assert max(peaks) == 1
    peaks.clear()
    await dispatch_tool_calls_in_order([call(4), call(5), call(6)], ctx)  # type: ignore[arg-type]
    assert max(peaks) == 3


async def test_a_failing_dispatch_mid_batch_answers_every_call_exactly_once_pool_5_pool_8() -> None:
    """Concurrency 2, three calls; the second raises (a limit breach) while the first still runs."""
    first_started = asyncio.Event()
    breach = RunLimitExceeded(RunLimitBreach(limit="max_tool_calls", maximum=1, observed=2))

    async def handler(c: ToolCallContent) -> ToolResult:
        if c.id == "c1":
            first_started.set()
            for _ in range(5):
                await asyncio.sleep(0)
            return ToolResult(tool_call_id=c.id, name=c.name, value="real")
        await first_started.wait()
        raise breach

    ctx = Ctx(handler, tool_concurrency=2)
    with pytest.raises(RunLimitExceeded) as info:
        await dispatch_tool_calls_in_order([call(1), call(2), call(3)], ctx)  # type: ignore[arg-type]
    assert info.value is breach
    assert rows(ctx) == [
        ("c1", "real", None),
        ("c2", None, "ERR_PRISM_RUN_LIMIT"),
        ("c3", None, "tool_call_not_dispatched"),
    ]
    assert ctx.dispatched == ["c1", "c2"]  # the third was never claimed
    last = ctx.stored[2].content[0]
    assert isinstance(last, ToolResultContent) and last.error is not None
    assert last.error.message == NOT_DISPATCHED_BATCH_MESSAGE


async def test_sequential_failure_answers_the_failing_and_later_calls_pool_3() -> None:
    async def handler(c: ToolCallContent) -> ToolResult:
        if c.id == "c2":
            raise RuntimeError("guard tripped")
        return ToolResult(tool_call_id=c.id, name=c.name, value="v")

    ctx = Ctx(handler)
    with pytest.raises(RuntimeError, match="guard tripped"):
        await dispatch_tool_calls_in_order([call(1), call(2), call(3)], ctx)  # type: ignore[arg-type]
    assert rows(ctx) == [
        ("c1", "v", None),
        ("c2", None, None),
        ("c3", None, "tool_call_not_dispatched"),
    ]
    error = ctx.stored[1].content[0]
    assert isinstance(error, ToolResultContent) and error.error is not None
    assert error.error.message == "guard tripped" and error.error.name == "RuntimeError"


@pytest.mark.parametrize("concurrency", [1, 2])
async def test_a_suspension_signal_gets_no_synthetic_row_pool_6(concurrency: int) -> None:
    async def handler(c: ToolCallContent) -> ToolResult:
        if c.id == "c1":
            raise AgentRunSuspended()
        return ToolResult(tool_call_id=c.id, name=c.name)

    ctx = Ctx(handler, tool_concurrency=concurrency)
    with pytest.raises(AgentRunSuspended):
        await dispatch_tool_calls_in_order([call(1), call(2)], ctx)  # type: ignore[arg-type]
    ids = [r[0] for r in rows(ctx)]
    assert "c1" not in ids
    assert ids == ["c2"]


def test_suspension_signals_are_recognised_by_class_and_code_pool_6() -> None:
    class Delegated(Exception):
        code = "ERR_PRISM_DELEGATION_SUSPENDED"

    class LoopThing(Exception):
        code = "ERR_PRISM_LOOP_SOMETHING"

    assert is_suspension_signal(AgentRunSuspended())
    assert is_suspension_signal(AgentLoopStateError("ERR_PRISM_LOOP_SNAPSHOT"))
    assert is_suspension_signal(Delegated())
    assert is_suspension_signal(LoopThing())
    assert not is_suspension_signal(RuntimeError("x"))


async def test_charge_failure_answers_every_call_and_reraises_pool_1() -> None:
    breach = RunLimitExceeded(RunLimitBreach(limit="max_tool_rounds", maximum=1, observed=2))
    ctx = Ctx(ok(), charge_error=breach)
    with pytest.raises(RunLimitExceeded):
        await dispatch_tool_calls_in_order([call(1), call(2)], ctx)  # type: ignore[arg-type]
    assert ctx.dispatched == []
    assert rows(ctx) == [
        ("c1", None, "tool_call_not_dispatched"),
        ("c2", None, "tool_call_not_dispatched"),
    ]


async def test_charge_suspension_starts_no_worker_and_writes_no_row_pool_1_pool_8() -> None:
    ctx = Ctx(ok(), charge_error=AgentRunSuspended(), tool_concurrency=4)
    with pytest.raises(AgentRunSuspended):
        await dispatch_tool_calls_in_order([call(1), call(2)], ctx)  # type: ignore[arg-type]
    assert ctx.dispatched == [] and ctx.stored == []


async def test_approval_pending_results_are_not_appended_pool_7() -> None:
    async def handler(c: ToolCallContent) -> ToolResult:
        if c.id == "c1":
            return ToolResult(tool_call_id=c.id, name=c.name, metadata={"approval_pending": True})
        return ToolResult(tool_call_id=c.id, name=c.name)

    ctx = Ctx(handler)
    await dispatch_tool_calls_in_order([call(1), call(2)], ctx)  # type: ignore[arg-type]
    assert [r[0] for r in rows(ctx)] == ["c2"]


@pytest.mark.parametrize("concurrency", [1, 3])
async def test_an_abort_stops_claiming_and_answers_unclaimed_calls_pool_3_pool_4(
    concurrency: int,
) -> None:
    controller = AbortController()

    async def handler(c: ToolCallContent) -> ToolResult:
        if c.id == "c1":
            controller.abort()
        await asyncio.sleep(0)
        return ToolResult(tool_call_id=c.id, name=c.name, value="done")

    ctx = Ctx(handler, tool_concurrency=concurrency, signal=controller.signal)
    calls = [call(i) for i in range(1, 6)]
    with pytest.raises(AbortError):
        await dispatch_tool_calls_in_order(calls, ctx)  # type: ignore[arg-type]
    table = rows(ctx)
    assert [r[0] for r in table] == [c.id for c in calls]  # one row per call, in call order
    assert table[0] == ("c1", "done", None)  # a claimed call keeps its real result
    claimed = set(ctx.dispatched)
    for call_id, _value, code in table:
        assert (code is None) == (call_id in claimed)
        if call_id not in claimed:
            assert code == "tool_call_not_dispatched"


async def test_cancelling_the_dispatching_task_reraises_without_rows_pool_4() -> None:
    started = asyncio.Event()

    async def handler(c: ToolCallContent) -> ToolResult:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    ctx = Ctx(handler, tool_concurrency=2)
    task = asyncio.ensure_future(dispatch_tool_calls_in_order([call(1), call(2)], ctx))  # type: ignore[arg-type]
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ctx.stored == []  # the runtime's failure path answers them (RUN-24)


async def test_parallel_workers_run_inside_a_parallel_tool_round_tool_11() -> None:
    from prism.tools import _PARALLEL_ROUND

    seen: list[bool] = []

    async def handler(c: ToolCallContent) -> ToolResult:
        seen.append(_PARALLEL_ROUND.get())
        return ToolResult(tool_call_id=c.id, name=c.name)

    await dispatch_tool_calls_in_order([call(1), call(2)], Ctx(handler, tool_concurrency=2))  # type: ignore[arg-type]
    await dispatch_tool_calls_in_order([call(3)], Ctx(handler, tool_concurrency=2))  # type: ignore[arg-type]
    assert seen == [True, True, False]
    assert _PARALLEL_ROUND.get() is False
    with parallel_tool_round():
        assert _PARALLEL_ROUND.get() is True
    assert threading.current_thread() is threading.main_thread()


def test_dispatchable_tool_calls_drops_provider_hosted_calls_pool_10() -> None:
    calls = [call(1), call(2, authority="provider-hosted"), call(3, authority="host")]
    assert [c.id for c in dispatchable_tool_calls(calls)] == ["c1", "c3"]


async def test_append_unanswered_rows_answers_each_call_in_order_pool_9() -> None:
    ctx = Ctx(ok())
    await append_unanswered_rows(ctx, [call(1), call(2)], "tool call not dispatched: because")  # type: ignore[arg-type]
    assert rows(ctx) == [
        ("c1", None, "tool_call_not_dispatched"),
        ("c2", None, "tool_call_not_dispatched"),
    ]
    head = ctx.history[0].content[0]
    assert isinstance(head, ToolResultContent) and head.error is not None
    assert head.error.message == "tool call not dispatched: because"
    assert ctx.dispatched == []


async def test_a_minimal_context_without_optional_members_works_con_29() -> None:
    @dataclass
    class Minimal:
        signal: AbortSignal = field(default_factory=lambda: AbortController().signal)
        history: list[Message] = field(default_factory=list)
        stored: list[Message] = field(default_factory=list)
        tool_concurrency: int = 2

        async def dispatch_tool_call(self, c: ToolCallContent) -> ToolResult:
            return ToolResult(tool_call_id=c.id, name=c.name)

        async def append_message(self, message: Message) -> None:
            self.stored.append(message)

    ctx = Minimal()
    await dispatch_tool_calls_in_order([call(1), call(2)], ctx)  # type: ignore[arg-type]
    assert len(ctx.stored) == 2


async def test_a_parallel_round_of_calls_that_do_not_wait_starts_no_task_pool_4() -> None:
    tasks: list[int] = []

    async def handler(c: ToolCallContent) -> ToolResult:
        tasks.append(len(asyncio.all_tasks()))
        return ToolResult(tool_call_id=c.id, name=c.name, value=c.id)

    before = len(asyncio.all_tasks())
    ctx = Ctx(handler, tool_concurrency=4)
    await dispatch_tool_calls_in_order([call(1), call(2), call(3)], ctx)  # type: ignore[arg-type]
    assert tasks == [before, before, before]
    assert rows(ctx) == [("c1", "c1", None), ("c2", "c2", None), ("c3", "c3", None)]


async def test_a_parallel_round_starts_its_other_workers_once_a_call_waits_pool_4() -> None:
    in_flight = 0
    max_in_flight = 0
    release = asyncio.Event()
    order: list[str] = []

    async def handler(c: ToolCallContent) -> ToolResult:
        nonlocal in_flight, max_in_flight
        order.append(c.id)
        in_flight += 1
        max_in_flight = max(max_in_flight, in_flight)
        if in_flight == 2:
            release.set()
        await release.wait()
        in_flight -= 1
        return ToolResult(tool_call_id=c.id, name=c.name, value=c.id)

    ctx = Ctx(handler, tool_concurrency=2)
    await dispatch_tool_calls_in_order([call(1), call(2), call(3)], ctx)  # type: ignore[arg-type]
    assert max_in_flight == 2
    assert order == ["c1", "c2", "c3"]
    assert rows(ctx) == [("c1", "c1", None), ("c2", "c2", None), ("c3", "c3", None)]


async def test_a_context_variable_a_parallel_tool_sets_stays_in_its_worker_pool_4() -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("tool_var", default="caller")

    async def handler(c: ToolCallContent) -> ToolResult:
        var.set(c.id)
        await asyncio.sleep(0)
        return ToolResult(tool_call_id=c.id, name=c.name, value=var.get())

    ctx = Ctx(handler, tool_concurrency=2)
    await dispatch_tool_calls_in_order([call(1), call(2)], ctx)  # type: ignore[arg-type]
    assert var.get() == "caller"
    assert rows(ctx) == [("c1", "c1", None), ("c2", "c2", None)]


async def test_cancelling_a_parallel_round_cancels_the_call_in_place_and_the_workers_pool_4() -> None:
    cancelled: list[str] = []
    started = 0
    both = asyncio.Event()

    async def handler(c: ToolCallContent) -> ToolResult:
        nonlocal started
        started += 1
        if started == 2:
            both.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(c.id)
            raise
        raise AssertionError("unreachable")

    ctx = Ctx(handler, tool_concurrency=2)
    task = asyncio.ensure_future(dispatch_tool_calls_in_order([call(1), call(2)], ctx))  # type: ignore[arg-type]
    await both.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(cancelled) == ["c1", "c2"]
    assert ctx.stored == []
