"""The tool-round dispatcher shared by the built-in loops.

One *round* is the host tool calls of one assistant response. [`dispatch_tool_calls_in_order()`][prism.loops.dispatch.dispatch_tool_calls_in_order]
dispatches a round through ``ctx.dispatch_tool_call`` — sequentially, or with a bounded pool of
worker coroutines — and appends exactly one result row per call, in call order, to the live
history and the store. A stopped round (a run-level failure, an abort) still answers every call:
real rows for finished calls, an error row for the call that raised, and
``tool_call_not_dispatched`` rows for calls the round never started. Providers reject a
transcript in which an assistant ``tool_call`` has no ``tool_result``.

Performance: the sequential path awaits each dispatch directly; the parallel path starts each
call in the calling task and starts further worker tasks (one per other concurrency slot, never
one per call or per event) only once a call really waits — a round of calls that finish without
waiting creates no task, so a run whose tools and provider never wait runs to its end without
giving up the event loop.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from prism._util import resumed
from prism.abort import AbortSignal
from prism.errors import AgentLoopStateError, AgentRunSuspended
from prism.loops.contracts import LoopContext
from prism.redaction import error_to_error_info
from prism.tools.execution import parallel_round_context
from prism.types import ErrorInfo, ToolCallContent, ToolResult, tool_result_message

__all__ = [
    "NOT_DISPATCHED_BATCH_MESSAGE",
    "TOOL_CALL_NOT_DISPATCHED",
    "append_result_row",
    "append_unanswered_rows",
    "dispatch_tool_calls_in_order",
    "dispatchable_tool_calls",
    "is_suspension_signal",
]

TOOL_CALL_NOT_DISPATCHED = "tool_call_not_dispatched"
"""``ErrorInfo.code`` of a synthetic row for a call that never started (ERR codes table)."""

NOT_DISPATCHED_BATCH_MESSAGE = "tool call not dispatched: the tool batch stopped before it started"
"""Message of the rows written for calls a stopped round never claimed."""


def dispatchable_tool_calls(calls: Sequence[ToolCallContent]) -> list[ToolCallContent]:
    """Return, in order, the calls the host must dispatch.

    Args:
        calls: The calls of one assistant response (``ProviderTurnResult.calls``).

    Returns:
        A new list with every call whose ``authority`` is not ``"provider-hosted"``.
    """
    return [c for c in calls if c.authority != "provider-hosted"]


def is_suspension_signal(exc: BaseException) -> bool:
    """Return whether ``exc`` is a suspension signal that must get no synthetic row.

    A suspension signal is an ``AgentRunSuspended``, an ``AgentLoopStateError``, or any exception
    whose ``code`` is ``"ERR_PRISM_DELEGATION_SUSPENDED"`` or starts with ``"ERR_PRISM_LOOP_"``.
    """
    if isinstance(exc, (AgentRunSuspended, AgentLoopStateError)):
        return True
    code = getattr(exc, "code", None)
    return isinstance(code, str) and (
        code == "ERR_PRISM_DELEGATION_SUSPENDED" or code.startswith("ERR_PRISM_LOOP_")
    )


async def append_result_row(ctx: LoopContext, result: ToolResult) -> None:
    """Append one result row to ``ctx.history`` and the store.

    Results whose ``metadata`` has ``approval_pending: True`` (approval-gated calls) are
    skipped entirely. Every other result becomes a tool-result message.
    """
    metadata = result.metadata
    if metadata is not None and metadata.get("approval_pending") is True:
        return
    message = tool_result_message(result)
    ctx.history.append(message)
    await ctx.append_message(message)


def _not_dispatched(call: ToolCallContent, message: str) -> ToolResult:
    return ToolResult(
        tool_call_id=call.id,
        name=call.name,
        error=ErrorInfo(code=TOOL_CALL_NOT_DISPATCHED, message=message),
    )


def _error_row(call: ToolCallContent, exc: BaseException) -> ToolResult:
    return ToolResult(tool_call_id=call.id, name=call.name, error=error_to_error_info(exc))


async def append_unanswered_rows(
    ctx: LoopContext, calls: Sequence[ToolCallContent], message: str
) -> None:
    """Answer calls a loop decided not to dispatch.

    For each call in order, appends a ``tool_call_not_dispatched`` row carrying ``message`` to the
    history and the store. Emits no tool event.

    Args:
        ctx: The loop context.
        calls: The host calls to answer, in call order.
        message: The row's ``ErrorInfo.message``, e.g.
            ``"tool call not dispatched: tool round limit reached"``.
    """
    for call in calls:
        await append_result_row(ctx, _not_dispatched(call, message))


async def dispatch_tool_calls_in_order(
    calls: Sequence[ToolCallContent],
    ctx: LoopContext,
    *,
    concurrency: int | None = None,
) -> None:
    """Dispatch one tool round and append its rows in call order.

    Steps: ``ctx.charge_tool_round(calls)`` (when the context has it; a failure other than a
    suspension signal answers every call with a not-dispatched row and re-raises); then
    sequential dispatch when the effective concurrency is 1, else a pool of worker coroutines.

    The effective concurrency is 1 when any call is exclusive (``ctx.is_tool_call_exclusive``),
    else ``max(1, min(concurrency or ctx.tool_concurrency, len(calls)))``.

    A cancellation of the running task is re-raised at once without writing rows: the
    runtime's failure path answers the open calls with ``tool_call_interrupted`` rows.

    Args:
        calls: The host calls of the round (see [`dispatchable_tool_calls()`][prism.loops.dispatch.dispatchable_tool_calls]).
        ctx: The loop context.
        concurrency: Override of ``ctx.tool_concurrency`` for this round (``None``: the context's).

    Raises:
        Exception: The first run-level failure of the round (guardrail tripwire, limit breach,
            suspension signal, ...), after every row was appended; else the abort error when the
            run signal aborted during the round.
    """
    if not calls:
        return
    if getattr(ctx, "charge_tool_round", None) is not None:  # optional; no bound method kept
        try:
            await ctx.charge_tool_round(calls)
        except Exception as exc:
            if not is_suspension_signal(exc):
                await append_unanswered_rows(ctx, calls, NOT_DISPATCHED_BATCH_MESSAGE)
            raise
    width = _effective_concurrency(calls, ctx, concurrency)
    if width == 1:
        await _dispatch_sequential(calls, ctx)
    else:
        await _dispatch_parallel(calls, ctx, width)


def _effective_concurrency(
    calls: Sequence[ToolCallContent], ctx: LoopContext, concurrency: int | None
) -> int:
    if len(calls) == 1:
        return 1  # one call: sequential whatever the width or exclusivity
    exclusive = getattr(ctx, "is_tool_call_exclusive", None)
    if exclusive is not None and any(exclusive(c) for c in calls):
        return 1
    requested = concurrency or getattr(ctx, "tool_concurrency", 1) or 1
    return max(1, min(int(requested), len(calls)))


async def _dispatch_sequential(calls: Sequence[ToolCallContent], ctx: LoopContext) -> None:
    """One call at a time; each row is appended as soon as its call returns."""
    signal = ctx.signal
    for index, call in enumerate(calls):
        if signal.aborted:
            await append_unanswered_rows(ctx, calls[index:], NOT_DISPATCHED_BATCH_MESSAGE)
            signal.throw_if_aborted()
        try:
            result = await ctx.dispatch_tool_call(call)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not is_suspension_signal(exc):
                await append_result_row(ctx, _error_row(call, exc))
            await append_unanswered_rows(ctx, calls[index + 1 :], NOT_DISPATCHED_BATCH_MESSAGE)
            raise
        await append_result_row(ctx, result)


async def _dispatch_parallel(
    calls: Sequence[ToolCallContent], ctx: LoopContext, width: int
) -> None:
    """``width`` workers claim indices; rows are appended after all settle.

    The calling task is the first worker: it starts each call it claims in place, and only when a
    call really waits (its first step suspends) does it start the other ``width - 1`` workers as
    tasks, which claim the next calls while it finishes the waiting one in place. A round whose
    calls all finish without waiting thus creates no task at all, and a round that waits has as
    many calls in flight as before. Every worker runs in a copy of the context that marks a
    parallel round (``parallel_round_context()``), so a sync tool runs in a worker thread and a
    context variable a tool sets stays in its worker.
    """
    count = len(calls)
    pool = _Round(calls, ctx.dispatch_tool_call, ctx.signal)
    context = parallel_round_context()
    helpers: list[asyncio.Future[None]] | None = None
    try:
        while pool.claimable():
            index = pool.next_index  # claiming is synchronous: each index is claimed once
            pool.next_index += 1
            step = pool.dispatch(calls[index])
            if type(step) is not types.CoroutineType:  # another awaitable: await it in a coroutine
                step = _awaited(step)
            try:
                try:
                    pending = context.run(step.send, None)
                except StopIteration as done:
                    pool.results[index] = done.value
                    continue
                if helpers is None and width > 1 and pool.next_index < count:
                    # the call waits: the other workers start now and take the next calls
                    helpers = []
                    for _ in range(width - 1):  # a loop, not a comprehension: no cells kept
                        helpers.append(context.run(_start_worker, pool))
                pool.results[index] = await resumed(step, pending, context)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                pool.fail(index, exc)
    except asyncio.CancelledError:
        if helpers is not None:
            for helper in helpers:
                helper.cancel()
            await asyncio.wait(helpers)
        raise
    if helpers is not None:
        outcomes = await asyncio.gather(*helpers, return_exceptions=True)
        for outcome in outcomes:
            # A worker cancelled on its own (not through this task) is a failure of the round.
            if isinstance(outcome, BaseException) and not pool.first_failure:
                pool.first_failure.append(outcome)

    results = pool.results
    errors = pool.errors
    for index, call in enumerate(calls):
        result = results[index]
        if result is not None:
            await append_result_row(ctx, result)
            continue
        error = errors.get(index) if errors is not None else None
        if error is not None:
            if not is_suspension_signal(error):
                await append_result_row(ctx, _error_row(call, error))
            continue
        await append_result_row(ctx, _not_dispatched(call, NOT_DISPATCHED_BATCH_MESSAGE))
    if pool.first_failure:
        raise pool.first_failure[0]
    ctx.signal.throw_if_aborted()


class _Round:
    """The shared state of one parallel round's workers."""

    __slots__ = ("calls", "dispatch", "errors", "first_failure", "next_index", "results", "signal")

    def __init__(
        self,
        calls: Sequence[ToolCallContent],
        dispatch: Callable[[ToolCallContent], Coroutine[Any, Any, ToolResult]],
        signal: AbortSignal,
    ) -> None:
        self.calls = calls
        self.dispatch = dispatch
        self.signal = signal
        self.results: list[ToolResult | None] = [None] * len(calls)
        self.errors: dict[int, BaseException] | None = None
        self.first_failure: list[BaseException] = []
        self.next_index = 0

    def claimable(self) -> bool:
        """Whether a worker may claim the next call."""
        return (
            not self.first_failure and not self.signal.aborted and self.next_index < len(self.calls)
        )

    def fail(self, index: int, exc: Exception) -> None:
        """Record that the call at ``index`` raised ``exc``."""
        if self.errors is None:
            self.errors = {}
        self.errors[index] = exc
        if not self.first_failure:
            self.first_failure.append(exc)

    async def worker(self) -> None:
        """A worker task: claim and await calls until none is left or the round stops."""
        while self.claimable():
            index = self.next_index
            self.next_index += 1
            try:
                self.results[index] = await self.dispatch(self.calls[index])
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.fail(index, exc)


async def _awaited(awaitable: Awaitable[ToolResult]) -> ToolResult:
    return await awaitable


def _start_worker(pool: _Round) -> asyncio.Future[None]:
    """A worker task of ``pool`` (called inside the round's context, which the task copies)."""
    return asyncio.ensure_future(pool.worker())
