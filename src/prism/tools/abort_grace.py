"""The abort grace: how long a running tool may go on after its run was aborted.

When the run's abort signal fires while a tool's ``execute`` is being awaited, the tool gets
``tool_abort_grace_ms`` to notice the signal and return. If it is still running when the grace
ends, the dispatching task is cancelled and [`await_with_grace()`][prism.tools.abort_grace.await_with_grace] raises
[`ToolInterrupted`][prism.tools.abort_grace.ToolInterrupted]; the dispatcher answers the call ``tool_call_interrupted``. Nothing is
armed on the normal path: the timer exists only once the abort happened.

A coroutine ``execute`` runs its first step before anything is set up
([`run_with_grace()`][prism.tools.abort_grace.run_with_grace]): the grace can only end while the call waits, so a call that returns
without waiting (most do) needs no listener on the signal; one that waits gets it when it first
waits. The grace of an abort during that first step starts when the call first waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

from prism._util import resumed
from prism.abort import AbortSignal

__all__ = ["ToolInterrupted", "await_with_grace", "run_with_grace"]

T = TypeVar("T")


class ToolInterrupted(Exception):
    """The abort grace ended while ``execute`` was still running."""


class _Grace:
    """Cancels the dispatching task ``grace_ms`` after the run signal aborts."""

    __slots__ = ("fired", "grace_s", "handle", "loop", "settled", "task")

    def __init__(self, grace_ms: float) -> None:
        loop = asyncio.get_running_loop()
        self.loop = loop
        self.task = asyncio.current_task(loop)
        self.grace_s = max(0.0, float(grace_ms)) / 1000.0
        self.handle: asyncio.TimerHandle | None = None
        self.fired = False
        self.settled = False

    def on_abort(self, *_: Any) -> None:
        """Abort listener: start the grace timer (on the dispatching task's loop)."""
        if self.settled:
            return
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # aborted from another thread
            running = None
        if running is self.loop:
            self._arm()
        else:
            self.loop.call_soon_threadsafe(self._arm)

    def _arm(self) -> None:
        if not self.settled and self.handle is None:
            self.handle = self.loop.call_later(self.grace_s, self._fire)

    def _fire(self) -> None:
        if not self.settled and self.task is not None:
            self.fired = True
            self.task.cancel()

    def settle(self) -> None:
        """The awaited call ended: disarm the timer."""
        self.settled = True
        if self.handle is not None:
            self.handle.cancel()


async def await_with_grace(
    awaitable: Awaitable[T], signal: AbortSignal | None, grace_ms: float
) -> T:
    """Await ``awaitable`` and return its result.

    Args:
        awaitable: The running ``execute`` (or the future of its worker thread).
        signal: The run's abort signal; ``None`` awaits without a grace.
        grace_ms: Milliseconds allowed after the abort (negative counts as ``0``).

    Raises:
        ToolInterrupted: the call outlived the grace (it was cancelled, or it swallowed the
            cancellation but only returned after the grace ended).
        BaseException: whatever ``awaitable`` raises.
    """
    if signal is None:
        return await awaitable
    grace = _Grace(grace_ms)
    remove = signal.add_listener(grace.on_abort)
    try:
        result = await awaitable
    except BaseException:
        grace.settle()
        remove()
        if grace.fired and grace.task is not None:
            if grace.task.uncancel() == 0:
                raise ToolInterrupted() from None
        raise
    grace.settle()
    remove()
    if grace.fired and grace.task is not None:
        # execute swallowed the cancellation but only returned after the grace ended
        grace.task.uncancel()
        raise ToolInterrupted()
    return result


async def run_with_grace(
    coroutine: Coroutine[Any, Any, T], signal: AbortSignal | None, grace_ms: float
) -> T:
    """Run ``coroutine`` (not started yet) under the abort grace and return its result.

    Its first step runs at once; the grace is set up (see
    [`await_with_grace()`][prism.tools.abort_grace.await_with_grace]) only when it waits.

    Raises:
        ToolInterrupted: the call outlived the grace.
        BaseException: whatever ``coroutine`` raises.
    """
    try:
        pending = coroutine.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    return await await_with_grace(resumed(coroutine, pending), signal, grace_ms)
