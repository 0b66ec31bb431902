"""Running a run leg's outcome and cleanup steps to completion under cancellation.

The success, failure and cleanup steps of a leg must finish even when the task awaiting the run is
cancelled meanwhile: :func:`shielded` runs such a step in its own task and waits for it, and a
cancellation of the caller is delivered only once the step is done.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["shielded"]

_T = TypeVar("_T")


async def shielded(step: Coroutine[Any, Any, _T]) -> _T:
    """Run ``step`` to completion even if the caller is cancelled meanwhile.

    Returns:
        What ``step`` returns.

    Raises:
        Exception: what ``step`` raises (first, when the caller was cancelled too).
        asyncio.CancelledError: the caller was cancelled while waiting; raised once ``step`` has
            finished.
    """
    task = asyncio.ensure_future(step)
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait((task,))
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        task.result()  # the step's own exception first
        raise asyncio.CancelledError
    return task.result()
