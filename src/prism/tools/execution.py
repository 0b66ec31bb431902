"""Running a tool's ``execute``: inline, or in a worker thread during a parallel round.

A sync ``execute`` called inline blocks the event loop, which is harmless when calls run one at a
time but serialises a parallel round. Inside :func:`parallel_tool_round` (entered by the
tool-round dispatcher around its parallel workers) the dispatcher therefore runs a sync
``execute`` in a worker thread of prism's own pool (``prism.tools._pool``). Either way the call is
awaited under the abort grace (``prism.tools.abort_grace``).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

from prism.tools._pool import TOOL_THREADS
from prism.tools.abort_grace import await_with_grace
from prism.types import ToolDefinition, ToolExecutionContext, ToolResult

__all__ = ["PARALLEL_ROUND", "parallel_tool_round", "run_execute"]

PARALLEL_ROUND: ContextVar[bool] = ContextVar("prism_parallel_tool_round", default=False)
"""``True`` inside :func:`parallel_tool_round` (and in tasks created there)."""


@contextmanager
def parallel_tool_round() -> Iterator[None]:
    """Mark dispatches started in this context as part of a parallel round.

    Inside it (and in tasks created inside it, which copy the context), ``dispatch_tool_call``
    runs a sync ``execute`` in a worker thread (prism's own pool, which always has a free thread;
    the context is copied as ``asyncio.to_thread`` does) instead of inline, unless its
    ``sync_in_thread`` argument says otherwise. The tool-round dispatcher enters it around the
    creation of its parallel workers.
    """
    token = PARALLEL_ROUND.set(True)
    try:
        yield
    finally:
        PARALLEL_ROUND.reset(token)


async def run_execute(
    tool: ToolDefinition,
    arguments: dict[str, Any],
    context: ToolExecutionContext,
    *,
    grace_ms: float,
    threaded: bool,
    on_worker_thread: Callable[[asyncio.Future[Any]], object] | None,
) -> object:
    """Run ``tool.execute(arguments, context)`` and return what it returned (awaited).

    Args:
        tool: The tool.
        arguments: The call's arguments.
        context: What ``execute`` receives as its context; its ``signal`` starts the abort grace.
        grace_ms: The abort grace in milliseconds.
        threaded: Run a sync ``execute`` in a worker thread (an ``async def`` always runs
            inline).
        on_worker_thread: Receives the future of a worker thread still running when the call
            ended early (grace over, or the task cancelled); ``None``: wait for the thread here
            before re-raising, so no tool work keeps running unseen.

    Raises:
        ToolInterrupted: the call outlived the abort grace.
        BaseException: whatever ``execute`` raises.
    """
    execute = tool.execute
    if threaded and not inspect.iscoroutinefunction(execute):
        future = TOOL_THREADS.run(execute, arguments, context)
        try:
            raw = await await_with_grace(asyncio.shield(future), context.signal, grace_ms)
        except BaseException:
            if not future.done():
                if on_worker_thread is not None:
                    on_worker_thread(future)
                else:
                    await asyncio.wait((future,))
            raise
    else:
        raw = execute(arguments, context)
    if type(raw) not in _PLAIN and inspect.isawaitable(raw):
        raw = await await_with_grace(raw, context.signal, grace_ms)
    return raw


_PLAIN: Final = frozenset({dict, list, str, int, float, bool, type(None), ToolResult})
"""Types a sync ``execute`` commonly returns, never awaitable: ``inspect.isawaitable`` (an ABC
check) is skipped for them. Measured with ``timeit`` on a ``dict``: 1.9 µs for
``inspect.isawaitable``, 0.2 µs with this check first (once per sync tool call)."""
