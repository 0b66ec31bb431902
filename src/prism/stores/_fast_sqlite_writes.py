"""The SQLite store's inline writes: a durable run's turn write made on the caller's thread while
the store is idle.

A turn write of an ``every-turn`` durable run (its held session entries and its envelope, one
short transaction, see ``prism.runtime.durable._turn_writes``) is awaited by the run before it
goes on, so handing it to the store's worker thread buys no parallelism: the run waits, and the
hand-over costs two thread wake-ups (the worker's, then the event loop's). Measured on a shared
two-core machine, those wake-ups cost more CPU than the transaction itself. So
[`InlineWrites`][prism.stores._fast_sqlite_writes.InlineWrites] runs such a write on the calling thread
— with a connection of its own — when that cannot wait on anything:

* only while the worker is idle (no queued job, none running), so the writes of one store keep
  their order and a busy store keeps its group commits on the worker thread;
* with a busy timeout of 0: when another connection (another process, the worker) holds the
  database's write lock, ``BEGIN IMMEDIATE`` fails at once, the transaction is rolled back and
  the write goes to the worker, which waits for the lock with the store's timeout;
* never a WAL checkpoint (which syncs the files): this connection's automatic checkpoints are
  off, and every [`WORKER_EVERY`][prism.stores._fast_sqlite_writes.WORKER_EVERY]-th write is left to the
  worker, whose commit makes SQLite's automatic checkpoint once the WAL holds 1,000 pages (as
  every commit of the store did before).

Same statements, same transaction, same ``synchronous``: a write made inline is stored exactly
as the worker would store it, with its commit done before the caller goes on.

Measured worth (``benchmarks/ablate.py --scenarios realistic-sqlite:200``, 11 interleaved
rounds, a shared two-core machine under load): with the encode-once turn writes, 2,373 → 1,613
CPU µs per turn (paired ratio 0.67), of which these inline writes about 0.74 (the encoding
alone measured 0.91); a 200-turn run's context switches went from ~8,700 to ~600.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any, Final

__all__ = ["WORKER_EVERY", "InlineWrites"]

WORKER_EVERY: Final = 32
"""One write in this many goes to the worker, whose commits make the automatic WAL checkpoint
(a turn write appends about ten WAL pages: the WAL stays within ~1,300 pages)."""

_BUSY: Final = frozenset((5, 6))
"""SQLite's primary result codes ``SQLITE_BUSY`` and ``SQLITE_LOCKED``."""


class InlineWrites:
    """A second connection to the store's database, for writes made on the caller's thread.

    Args:
        connect: Opens a connection with the store's settings (the schema already migrated by
            the worker's connection, automatic checkpoints off); called on first use.
    """

    __slots__ = ("_conn", "_connect", "_lock", "_writes")

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._writes = 0
        self._lock = threading.Lock()

    def run(self, fn: Callable[[sqlite3.Connection], Any]) -> tuple[bool, Any] | None:
        """Run ``fn(connection)`` — a job that makes its own transaction, starting with ``BEGIN
        IMMEDIATE`` and rolling back whatever it raises — here and now.

        Returns:
            ``(True, result)``, or ``(False, exception)`` when ``fn`` raised; ``None`` when the
            write could not start here without waiting (the connection in use on another
            thread, or the database's write lock held by another connection) or is the worker's
            turn: nothing was written, and the caller hands ``fn`` to the worker.
        """
        if not self._lock.acquire(blocking=False):
            return None
        try:
            self._writes += 1
            if self._writes >= WORKER_EVERY:
                self._writes = 0
                return None
            conn = self._conn
            if conn is None:
                try:
                    conn = self._conn = self._connect()
                except sqlite3.Error:
                    return None  # the worker's connection reports what is wrong
            try:
                result = fn(conn)
            except sqlite3.OperationalError as exc:
                if getattr(exc, "sqlite_errorcode", 0) & 0xFF in _BUSY and not conn.in_transaction:
                    return None
                return False, exc
            except BaseException as exc:
                return False, exc
            return True, result
        finally:
            self._lock.release()

    def close(self) -> None:
        """Close the connection (idempotent); a later write opens a new one."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
