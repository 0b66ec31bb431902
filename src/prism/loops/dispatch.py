"""The tool-round dispatcher shared by the built-in loops.

One *round* is the host tool calls of one assistant response. :func:`dispatch_tool_calls_in_order`
dispatches a round through ``ctx.dispatch_tool_call`` — sequentially, or with a bounded pool of
worker coroutines — and appends exactly one result row per call, in call order, to the live
history and the store. A stopped round (a run-level failure, an abort) still answers every call:
real rows for finished calls, an error row for the call that raised, and
``tool_call_not_dispatched`` rows for calls the round never started. Providers reject a
transcript in which an assistant ``tool_call`` has no ``tool_result``.

Performance: the sequential path awaits each dispatch directly; the parallel path starts one
worker coroutine per concurrency slot (never one task per call or per event).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from prism.errors import AgentLoopStateError, AgentRunSuspended
from prism.loops.contracts import LoopContext
from prism.redaction import error_to_error_info
from prism.tools import parallel_tool_round
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
        calls: The host calls of the round (see :func:`dispatchable_tool_calls`).
        ctx: The loop context.
        concurrency: Override of ``ctx.tool_concurrency`` for this round (``None``: the context's).

    Raises:
        Exception: The first run-level failure of the round (guardrail tripwire, limit breach,
            suspension signal, ...), after every row was appended; else the abort error when the
            run signal aborted during the round.
    """
    if not calls:
        return
    charge = getattr(ctx, "charge_tool_round", None)
    if charge is not None:
        try:
            await charge(calls)
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
    """``width`` workers claim indices; rows are appended after all settle."""
    count = len(calls)
    results: list[ToolResult | None] = [None] * count
    errors: dict[int, BaseException] = {}
    first_failure: list[BaseException] = []
    next_index = 0
    signal = ctx.signal
    dispatch = ctx.dispatch_tool_call

    async def worker() -> None:
        nonlocal next_index
        while not first_failure and not signal.aborted and next_index < count:
            index = next_index  # claiming is synchronous: each index is claimed once
            next_index += 1
            try:
                results[index] = await dispatch(calls[index])
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                errors[index] = exc
                if not first_failure:
                    first_failure.append(exc)

    # Workers are created inside ``parallel_tool_round`` so that their copied context runs sync
    # tools in worker threads.
    with parallel_tool_round():
        workers = [asyncio.ensure_future(worker()) for _ in range(width)]
    outcomes = await asyncio.gather(*workers, return_exceptions=True)
    for outcome in outcomes:
        # A worker cancelled on its own (not through this task) is a failure of the round.
        if isinstance(outcome, BaseException) and not first_failure:
            first_failure.append(outcome)

    for index, call in enumerate(calls):
        result = results[index]
        if result is not None:
            await append_result_row(ctx, result)
            continue
        exc = errors.get(index)
        if exc is not None:
            if not is_suspension_signal(exc):
                await append_result_row(ctx, _error_row(call, exc))
            continue
        await append_result_row(ctx, _not_dispatched(call, NOT_DISPATCHED_BATCH_MESSAGE))
    if first_failure:
        raise first_failure[0]
    signal.throw_if_aborted()

