"""Store conformance suites: one behaviour for memory, SQLite, PostgreSQL and host stores.

Each suite is an ``async`` function that exercises a store through its protocol and raises
``AssertionError`` with a message naming the requirement on the first deviation. They create their
own session ids, run ids and checkpoint keys, so they can run against a shared, non-empty database
and leave only their own rows behind.

* [`run_session_store_conformance()`][prism.testing._conformance.run_session_store_conformance] ([`_conformance_sessions`][prism.testing._conformance_sessions]) — append
  order, round trips, copies, duplicate ids, the branch-tip compare-and-set, idempotency keys,
  ``read_branch`` and concurrent appends to one tip;
* [`run_checkpoint_store_conformance()`][prism.testing._conformance.run_checkpoint_store_conformance] ([`_conformance_checkpoints`][prism.testing._conformance_checkpoints]) —
  versions, fencing tokens, copies, timestamps and concurrent claims;
* [`run_ledger_conformance()`][prism.testing._conformance.run_ledger_conformance] ([`_conformance_ledger`][prism.testing._conformance_ledger]) — every record kind
  round-trips, per run and per session, in append order;
* [`run_inspection_conformance()`][prism.testing._conformance.run_inspection_conformance] ([`_conformance_inspection`][prism.testing._conformance_inspection]) — the paged
  reads of an inspector (``InspectionReader``) over a fresh store: summaries
  and totals, every filter, runs, a run's ledger after a cursor, entries and usage.
"""

from __future__ import annotations

from prism.testing._conformance_checkpoints import (
    run_checkpoint_store_conformance as run_checkpoint_store_conformance,
)
from prism.testing._conformance_inspection import (
    run_inspection_conformance as run_inspection_conformance,
)
from prism.testing._conformance_ledger import run_ledger_conformance as run_ledger_conformance
from prism.testing._conformance_ledger import (
    run_run_ledger_conformance as run_run_ledger_conformance,
)
from prism.testing._conformance_sessions import (
    run_session_store_conformance as run_session_store_conformance,
)

__all__ = [
    "run_checkpoint_store_conformance",
    "run_inspection_conformance",
    "run_ledger_conformance",
    "run_run_ledger_conformance",
    "run_session_store_conformance",
]
