"""Cancelling an SDK await when the request's abort signal fires."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prism.abort import AbortSignal

__all__ = ["cancel_on_abort"]


@contextmanager
def cancel_on_abort(signal: AbortSignal | None) -> Iterator[None]:
    """While active, an abort of ``signal`` cancels the current task's pending await.

    The resulting ``CancelledError`` is turned into the signal's abort error; a cancellation
    that did not come from the signal propagates unchanged. Never active across a ``yield``.
    """
    if signal is None:
        yield
        return
    signal.throw_if_aborted()
    task = asyncio.current_task()
    fired = False

    def on_abort(_reason: Any) -> None:
        nonlocal fired
        if task is not None and not task.done():
            fired = True
            task.cancel()

    remove = signal.add_listener(on_abort)
    try:
        yield
    except asyncio.CancelledError:
        if fired and task is not None and task.uncancel() == 0:
            signal.throw_if_aborted()
        raise
    finally:
        remove()
