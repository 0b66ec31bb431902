"""SQLite store: sessions, checkpoints and the run ledger in one embedded database.

[`SqliteStore`][prism.stores.sqlite.SqliteStore] implements [`SessionStore`][prism.store.SessionStore] (with ``read_branch``),
[`CheckpointStore`][prism.checkpoints.CheckpointStore] and ``RunLedger`` with the
semantics of the memory stores, over the standard library's ``sqlite3``:

* WAL journal, ``synchronous=NORMAL`` (a commit survives a process crash; after a power loss the
  last commits may be lost, never half of one), foreign keys on, a busy timeout;
* every blocking call runs on one dedicated worker thread per store that owns the connection and
  takes jobs from a queue, except one kind: a durable run's turn write, which the run awaits
  anyway, is made on the calling thread through a second connection when the worker is idle and
  the write lock is free (it never waits for a lock nor syncs a file; see ``_fast_sqlite_writes``);
* every write is ONE transaction: an append's tip check, idempotency check and insert are a
  single ``INSERT ... SELECT ... WHERE``; a checkpoint save is a single conditional
  ``INSERT OR IGNORE``, or a conditional ``UPDATE ... RETURNING`` followed by an update of the
  run-index columns that writes only when they change (so their index pages are not rewritten
  on every save); a save with entries is those statements between ``BEGIN IMMEDIATE`` and
  ``COMMIT`` — or, when several
  writes are queued at once, inside one savepoint of a shared transaction (group commit: one
  commit for the batch, see ``_sqlite_connection``) — so a process killed at any point leaves each
  write whole or absent, no caller is told of a write before its commit, and concurrent writers
  in other processes serialise on the database lock;
* ``save_checkpoint_with_entries`` appends session entries and saves a checkpoint in ONE
  transaction; an ``every-turn`` durable run whose session store is this store writes each
  turn's entries with its envelope through it. Per tool turn of the realistic scenario (two
  parallel calls, ~1 KB results; ``benchmarks/bench_checkpoint_writes.py``): three entry rows
  and two checkpoint saves in two commits (before: six), 11 statements, ~12 KB of statement
  text, ~75 KB written to the WAL (before: ~127 KB), 0.05 fsyncs; the same at N=20 and N=200;
* durability: a returned write survives a crash or kill of the process; after a power loss or
  an operating-system crash the last writes may be lost (``synchronous=NORMAL`` syncs the WAL
  only when it is checkpointed into the database, every ~1,000 pages), never part of one, so an
  every-turn run resumes from an earlier envelope together with its entries;
* the schema comes from the package's checksummed migrations.

The class is composed by concept: ``_sqlite_connection`` (the worker thread, the connection's
settings, migrations, ``open``/``aclose``), ``_sqlite_sessions`` (session entries),
``_sqlite_checkpoints`` (checkpoints, the run index, entries with a checkpoint in one
transaction) and the shared ``_ledger`` (run records); the dialect-free half of each concept is
in ``_sessions``, ``_checkpoints`` and ``_ledger``, which the PostgreSQL store shares.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prism.checkpoints import AgentRunIndex, CheckpointStore, EntryCheckpointStore
from prism.inspection import InspectionReader
from prism.ledger import RunLedger
from prism.store import BranchReadingSessionStore, LastEntrySessionStore
from prism.stores._inspection import InspectionMethods
from prism.stores._inspection_sql import InspectionSql
from prism.stores._ledger import LedgerMethods, LedgerSql
from prism.stores._sqlite_checkpoints import SqliteCheckpoints
from prism.stores._sqlite_sessions import SqliteSessions

__all__ = ["SqliteStore"]


class SqliteStore(SqliteSessions, SqliteCheckpoints, LedgerMethods, InspectionMethods):
    """Sessions, checkpoints and run records in one SQLite database.

    Implements [`SessionStore`][prism.store.SessionStore] (``append``, ``list``, ``read_branch``),
    [`CheckpointStore`][prism.checkpoints.CheckpointStore] and ``RunLedger``,
    plus read methods for tooling (``list_sessions``, ``list_runs``, ``list_events``,
    ``list_tool_calls``, ``list_usage``) and the paged reads of an inspector
    (``InspectionReader``). Semantics are those of the memory stores.

    The database is opened, configured and migrated lazily on the first call (or by
    ``open()`` / ``async with``), on the store's worker thread. Any number of processes may
    open the same file; their writes serialise on SQLite's lock (waiting up to
    ``busy_timeout_s``).

    Example::

        async with SqliteStore("prism.db") as store:
            agent = create_agent(..., store=store)

    Args:
        path_or_uri: A file path, ``":memory:"`` (a private in-memory database), or a
            ``file:`` URI (passed with ``uri=True``).
        busy_timeout_s: Seconds a write waits for another connection's lock before failing
            with ``sqlite3.OperationalError: database is locked``.

    Raises:
        ValueError: ``busy_timeout_s`` is negative or not finite.
    """

    __slots__ = ()

    _ledger_sql = LedgerSql(prefix="", placeholder="?", body_cast="")
    _inspection_sql = InspectionSql(prefix="", placeholder="?", substring="instr")


if TYPE_CHECKING:  # static proof that one object implements the protocols

    def _implements(
        s: SqliteStore,
    ) -> tuple[
        BranchReadingSessionStore,
        LastEntrySessionStore,
        CheckpointStore,
        AgentRunIndex,
        EntryCheckpointStore,
        RunLedger,
        InspectionReader,
    ]:
        return (s, s, s, s, s, s, s)
