"""prism runs on DBOS workers (extra ``prism-runtime[dbos]``).

One prism run is one DBOS workflow whose id is the run id; one *leg* of the run (a start, or a
continuation after a suspension, a hand-over or a crash, up to the next suspension or the end,
with every-turn checkpoints) is one DBOS step. DBOS decides who runs what — a queue with a
per-worker limit, durable waits for approvals, recovery of a dead worker's runs — and prism
decides how a run goes: a re-executed step continues from the run's last checkpoint, so
completed provider turns are not requested again, tools keep their at-most-once dispatch, and a
call cut off mid-dispatch makes the run *ambiguous* (named, never run again). prism's
compare-and-set claims stay, so a stale worker never runs a run another worker owns.

* [`serve()`][prism.engines.dbos.serve] / [`WorkerOptions`][prism.engines.dbos.WorkerOptions] — a worker process (``prism worker --engine dbos``);
* [`RunClient`][prism.engines.dbos.RunClient] / [`RunHandle`][prism.engines.dbos.RunHandle] — submit, wait, decide, list and follow runs from
  any process;
* [`RunOutcome`][prism.engines.dbos.RunOutcome], [`RunInfo`][prism.engines.dbos.RunInfo], [`AmbiguousCall`][prism.engines.dbos.AmbiguousCall], [`EngineRunStatus`][prism.engines.dbos.EngineRunStatus] — what
  a submitter reads back;
* [`application_version()`][prism.engines.dbos.application_version] — the DBOS application version a registry pins.

``docs/operations/scale-out.md`` describes the architecture, how to start workers on several machines, and
what is guaranteed.
"""

try:
    import dbos as _dbos  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "prism.engines.dbos needs DBOS Transact: pip install 'prism-runtime[dbos]'"
    ) from exc

from prism.engines.dbos._outcome import AmbiguousCall as AmbiguousCall
from prism.engines.dbos._outcome import EngineRunStatus as EngineRunStatus
from prism.engines.dbos._outcome import RunInfo as RunInfo
from prism.engines.dbos._outcome import RunOutcome as RunOutcome
from prism.engines.dbos._registry import SUBMITTED_OPTION_NAMES as SUBMITTED_OPTION_NAMES
from prism.engines.dbos._registry import AgentFactory as AgentFactory
from prism.engines.dbos._registry import application_version as application_version
from prism.engines.dbos.client import RunClient as RunClient
from prism.engines.dbos.client import RunHandle as RunHandle
from prism.engines.dbos.worker import WorkerOptions as WorkerOptions
from prism.engines.dbos.worker import serve as serve

__all__ = [
    "SUBMITTED_OPTION_NAMES",
    "AgentFactory",
    "AmbiguousCall",
    "EngineRunStatus",
    "RunClient",
    "RunHandle",
    "RunInfo",
    "RunOutcome",
    "WorkerOptions",
    "application_version",
    "serve",
]
