"""Engines: run prism runs on a fleet of worker processes.

An engine decides *who* runs *what*: it queues submitted runs, hands each to a free worker,
notices a dead worker and has its runs continued elsewhere. prism keeps deciding *how* a run
goes: every-turn checkpoints, at-most-once tool dispatch, ambiguous-call reporting and the
compare-and-set claim of a run.

* [`prism.engines.dbos`][prism.engines.dbos] — DBOS Transact over the PostgreSQL database the prism store already
  uses (extra ``prism-runtime[dbos]``); the ``prism worker`` command starts its workers.

Importing this package imports no engine; each engine module imports its library when it is
imported itself.
"""

__all__: list[str] = []
