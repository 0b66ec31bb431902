"""The SQLite store's worker thread: it owns the connection and runs jobs one at a time.

SQLite calls block, so none of them runs on the event loop. Each store starts one
:class:`Worker` thread that opens the connection and then takes ``(function, future, loop)``
jobs from a FIFO queue, runs ``function(connection)`` and hands the result or the exception back
to the waiting coroutine on its own loop. ``None`` on the queue stops the thread, which closes the
connection.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeAlias

__all__ = ["Job", "Worker"]

Job: TypeAlias = tuple[
    Callable[[sqlite3.Connection], Any], asyncio.Future[Any], asyncio.AbstractEventLoop
]
"""``(function, future, loop)``: run ``function(connection)``, resolve ``future`` on ``loop``."""



def _deliver(fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if fut.done():  # the caller was cancelled; the write itself has completed
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


class Worker(threading.Thread):
    """Owns the connection; runs jobs from a FIFO queue one at a time.

    Args:
        connect: Opens (and migrates) the connection, on this thread.
        name: The thread name.
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection], name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._connect = connect

    def run(self) -> None:
        conn: sqlite3.Connection | None = None
        failure: BaseException | None = None
        try:
            conn = self._connect()
        except BaseException as exc:
            failure = exc
        try:
            while True:
                job = self.jobs.get()
                if job is None:
                    return
                fn, fut, loop = job
                ok = False
                value: Any
                if failure is not None:
                    value = failure
                else:
                    assert conn is not None
                    try:
                        value = fn(conn)
                        ok = True
                    except BaseException as exc:
                        value = exc
                try:
                    loop.call_soon_threadsafe(_deliver, fut, ok, value)
                except RuntimeError:  # the caller's loop is closed; nobody is waiting
                    pass
        finally:
            if conn is not None:
                conn.close()
