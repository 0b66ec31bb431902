"""The worker threads that run blocking (sync) tools during parallel tool rounds.

``asyncio.to_thread`` uses the event loop's default executor, whose ``min(32, cpu + 4)`` workers
make a round of more blocking tools than that wait for a free thread (6 on 2 cores: 8 calls of
50 ms take 100 ms instead of 50 ms). This pool belongs to prism and is never full: when a
submission would exceed its size, a pool twice as large (at least the number of threads in use)
replaces it; the old one is shut down without waiting, so its running threads finish their call
and exit. Threads are started on demand, so the size costs nothing until used. Like
``to_thread``, each call runs in a copy of the caller's context.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from contextvars import copy_context
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["TOOL_THREADS", "ToolThreadPool"]


class ToolThreadPool:
    """A thread pool that grows instead of queueing (see the module docstring)."""

    __slots__ = ("_busy", "_executor", "_lock", "_size")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._size = 0
        self._busy = 0

    def run(self, fn: Callable[..., Any], /, *args: Any) -> asyncio.Future[Any]:
        """Start ``fn(*args)`` in a worker thread at once; the future resolves on this loop."""
        loop = asyncio.get_running_loop()
        with self._lock:  # submitted under the lock: no other thread can retire the pool first
            executor = self._executor
            if executor is None or self._busy >= self._size:
                # imported with the first pool: a run whose tools are all async never needs it
                from concurrent.futures import ThreadPoolExecutor

                self._size = max(self._busy + 1, 2 * self._size, 8)
                executor = ThreadPoolExecutor(self._size, thread_name_prefix="prism-tool")
                if self._executor is not None:
                    self._executor.shutdown(wait=False)
                self._executor = executor
            future = loop.run_in_executor(executor, copy_context().run, fn, *args)
            self._busy += 1
        future.add_done_callback(self._release)
        return future

    def _release(self, _future: object) -> None:
        with self._lock:
            self._busy -= 1


TOOL_THREADS = ToolThreadPool()
"""The process-wide pool used by the dispatcher."""
