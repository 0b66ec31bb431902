"""PostgreSQL store: sessions, checkpoints and the run ledger shared by many workers.

[`PostgresStore`][prism.stores.postgres.PostgresStore] implements [`SessionStore`][prism.store.SessionStore] (with ``read_branch``),
[`CheckpointStore`][prism.checkpoints.CheckpointStore] and ``RunLedger`` with the
semantics of the memory stores, over ``psycopg`` 3 (async) and ``psycopg_pool``. Both come with the
``postgres`` extra: ``pip install 'prism-runtime[postgres]'``.

Every write is one statement, hence one transaction (a save with entries: one transaction), and
holds under concurrent writers on different machines:

* a session append calls the schema's ``prism_append_entry`` function, which locks the expected
  parent row (``FOR UPDATE``) before checking that it has no child, then inserts with ``ON
  CONFLICT DO NOTHING`` over the unique keys ``(session_id, id)`` and ``(session_id,
  idempotency_key, expected_parent_id)`` — one round trip;
* a checkpoint save is ``INSERT ... ON CONFLICT DO NOTHING`` (first version) or ``UPDATE ... WHERE
  version = expected AND`` the fencing condition: of N workers claiming one run with the
  same expected version exactly one gets a row back;
* ledger rows are single inserts into four append-only tables;
* ``save_checkpoint_with_entries``: appends and a save in ONE transaction (two round trips,
  one commit), how an ``every-turn`` run writes a turn's entries with its envelope.

Durability is the server's: with ``synchronous_commit=on`` (its default) a returned write
survives any crash and a power loss; see [`PostgresStore.connect()`][prism.stores.postgres.PostgresStore.connect] for ``"off"``.

Tables live in one schema (default ``prism``); migrations are applied on open under a
transaction-scoped advisory lock, so concurrent openers serialise. Values are ``jsonb``; since
``jsonb`` cannot hold a NUL character, a value containing one is stored wrapped as
``{"$prism_json": "<its JSON text>"}`` and unwrapped on read, so every JSON value round-trips.
A pool's connections must not cross ``fork()``: open the store in each worker process.

The class is composed by concept: ``_postgres_connection`` (the pool, migrations,
``open``/``aclose``, the ``jsonb`` encoding), ``_postgres_sessions`` (session entries),
``_postgres_checkpoints`` (checkpoints, the run index, entries with a checkpoint in one
transaction) and the shared ``_ledger`` (run records); the dialect-free half of each concept is
in ``_sessions``, ``_checkpoints`` and ``_ledger``, which the SQLite store shares.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prism.checkpoints import AgentRunIndex, CheckpointStore, EntryCheckpointStore
from prism.inspection import InspectionReader
from prism.ledger import RunLedger
from prism.store import BranchReadingSessionStore, LastEntrySessionStore
from prism.stores._inspection import InspectionMethods
from prism.stores._inspection_sql import InspectionSql
from prism.stores._ledger import LedgerMethods, LedgerSql
from prism.stores._postgres_checkpoints import PostgresCheckpoints, PostgresCheckpointSql
from prism.stores._postgres_connection import SynchronousCommit as SynchronousCommit
from prism.stores._postgres_sessions import PostgresSessions, PostgresSessionSql

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresStore"]


class PostgresStore(PostgresSessions, PostgresCheckpoints, LedgerMethods, InspectionMethods):
    """Sessions, checkpoints and run records in PostgreSQL, for many workers.

    Implements [`SessionStore`][prism.store.SessionStore] (``append``, ``list``, ``read_branch``),
    [`CheckpointStore`][prism.checkpoints.CheckpointStore] and ``RunLedger``,
    plus read methods for tooling (``list_sessions``, ``list_runs``, ``list_events``,
    ``list_tool_calls``, ``list_usage``) and the paged reads of an inspector
    (``InspectionReader``). Semantics are those of the memory stores.

    Create it with ``connect()`` (the store owns its pool), or over a host pool with
    ``PostgresStore(pool=...)`` (the host opens and closes that pool; its connections may be in
    autocommit mode or not). The schema is migrated by ``open()``, ``async with``, or lazily
    on first use. A pool made by ``connect()`` replaces connections the server ended (a
    database restart) before they are used; give a host pool a ``check`` callback for the same
    (``psycopg_pool.AsyncConnectionPool.check_connection``, one round trip per checkout).

    Example::

        async with await PostgresStore.connect("postgresql://app@db/app") as store:
            agent = create_agent(..., store=store)

    Args:
        pool: An open or openable ``psycopg_pool.AsyncConnectionPool``.
        schema: Schema holding the tables (created when missing); letters, digits and ``_``.
        owns_pool: Whether ``aclose()`` also closes ``pool`` (what ``connect()`` sets);
            by default the host keeps the pool open and closes it itself.

    Raises:
        ValueError: ``schema`` is not a plain identifier.
        ImportError: ``psycopg``/``psycopg_pool`` are not installed (names the extra).
    """

    __slots__ = ("_checkpoint_sql", "_inspection_sql", "_ledger_sql", "_session_sql")

    def __init__(
        self, *, pool: AsyncConnectionPool[Any], schema: str = "prism", owns_pool: bool = False
    ) -> None:
        super().__init__(pool=pool, schema=schema, owns_pool=owns_pool)
        quoted = self._quoted
        self._session_sql = PostgresSessionSql.build(quoted)
        self._checkpoint_sql = PostgresCheckpointSql.build(quoted)
        self._ledger_sql = LedgerSql(prefix=f"{quoted}.", placeholder="%s", body_cast="::jsonb")
        self._inspection_sql = InspectionSql(
            prefix=f"{quoted}.",
            placeholder="%s",
            substring="strpos",
            text_cast="::text",
            statistics=True,
        )


if TYPE_CHECKING:  # static proof that one object implements the protocols

    def _implements(
        s: PostgresStore,
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
