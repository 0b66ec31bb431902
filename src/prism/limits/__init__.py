"""Run limits: the per-run safety ceilings, their resolution across layers and the run's tracker.

* [`options`][prism.limits.options] — [`RunLimits`][prism.limits.RunLimits], [`RunCost`][prism.limits.RunCost], [`UNLIMITED`][prism.limits.UNLIMITED], the
  defaults and [`coerce_run_limits()`][prism.limits.coerce_run_limits];
* [`resolve`][prism.limits.resolve] — ``resolve_run_limits()`` (validation, the rule that a run may
  only narrow the agent's limits, defaults) and [`sets_finite_output_budget()`][prism.limits.sets_finite_output_budget];
* [`tracker`][prism.limits.tracker] — [`RunLimitTracker`][prism.limits.RunLimitTracker], which charges a run's counters and
  records its first breach, and [`RunLimitCounters`][prism.limits.RunLimitCounters], the counters a durable run carries
  from one leg to the next.
"""

from __future__ import annotations

from prism.limits.options import DEFAULT_RUN_LIMITS as DEFAULT_RUN_LIMITS
from prism.limits.options import MAX_BYTES_LIMIT as MAX_BYTES_LIMIT
from prism.limits.options import UNLIMITED as UNLIMITED
from prism.limits.options import LimitValue as LimitValue
from prism.limits.options import RunCost as RunCost
from prism.limits.options import RunLimits as RunLimits
from prism.limits.options import coerce_run_limits as coerce_run_limits
from prism.limits.resolve import resolve_run_limits as resolve_run_limits
from prism.limits.resolve import sets_finite_output_budget as sets_finite_output_budget
from prism.limits.tracker import BreachCallback as BreachCallback
from prism.limits.tracker import RunLimitCounters as RunLimitCounters
from prism.limits.tracker import RunLimitTracker as RunLimitTracker
from prism.types import RunLimitBreach as RunLimitBreach

__all__ = [
    "DEFAULT_RUN_LIMITS",
    "BreachCallback",
    "MAX_BYTES_LIMIT",
    "UNLIMITED",
    "LimitValue",
    "RunCost",
    "RunLimitBreach",
    "RunLimitCounters",
    "RunLimitTracker",
    "RunLimits",
    "coerce_run_limits",
    "resolve_run_limits",
    "sets_finite_output_budget",
]
