"""Durable runs: options, the run-state envelope, approvals and resume.

A durable run writes a bounded, redacted, versioned **run-state envelope** to a host
[`CheckpointStore`][prism.checkpoints.CheckpointStore] at safe boundaries, so it can suspend for an
operator decision or stop cleanly and continue later — in another process when the session store
and the checkpoint store are durable.

Public surface (re-exported from ``prism``):

* [`RunStateOptions`][prism.runtime.durable.RunStateOptions] — ``run_state=`` on the agent or the run;
* [`AgentRunState`][prism.runtime.durable.AgentRunState] — the public view of a stored envelope (``RunResult.run_state``);
* [`AgentRunInterruption`][prism.runtime.durable.AgentRunInterruption], [`PendingDecision`][prism.runtime.durable.PendingDecision], [`DecisionScope`][prism.runtime.durable.DecisionScope] — why a run is
  suspended;
* [`RunDecision`][prism.runtime.durable.RunDecision], [`StickyDecision`][prism.runtime.durable.StickyDecision] — operator decisions;
* [`resume_agent_run()`][prism.runtime.durable.resume_agent_run] — continue, approve or deny a stored run;
* ``agent_fingerprint()`` — the configuration fingerprint;
* [`load_agent_run_state()`][prism.runtime.durable.load_agent_run_state] / [`save_agent_run_state()`][prism.runtime.durable.save_agent_run_state] / [`LoadedRunState`][prism.runtime.durable.LoadedRunState] — operator
  access to the stored envelope;
* [`resolve_ambiguous_call()`][prism.runtime.durable.resolve_ambiguous_call] — the operator's repair of a call a crash left ambiguous;
* [`list_agent_runs()`][prism.runtime.durable.list_agent_runs] — the stored runs (by default the resumable ones), for a worker or an
  operator to resume;
* [`list_pending_decisions()`][prism.runtime.durable.list_pending_decisions] / [`PendingDecisionRecord`][prism.runtime.durable.PendingDecisionRecord] — the tool approvals the
  suspended runs wait for (also importable from here, outside ``__all__``, which stays as it was);
* ``record_decisions()`` / [`list_recorded_decisions()`][prism.runtime.durable.list_recorded_decisions] — decisions stored for a process
  with the run's agent to apply (``resume_agent_run(agent, run_id, decisions="recorded")``);
  [`list_decided_approvals()`][prism.runtime.durable.list_decided_approvals] /
  ``DecidedApproval`` — who decided a run's approvals, how and when (importable from here,
  outside ``__all__``).

The per-leg machinery the runtime drives (gating, checkpoint writes, suspension, replay) is
[`DurableRun`][prism.runtime.durable.DurableRun]; [`check_durable_run()`][prism.runtime.durable.check_durable_run] is the durable preflight.

Example (human approval)::

    store = MemoryCheckpointStore()
    agent = create_agent(model=..., provider=..., id="desk", tools=[refund],
                         run_state=RunStateOptions(store, "v1", interrupt_before_tool=True))
    session = agent.create_session()
    result = await session.run("Refund order 42")
    if result.status == "suspended":
        result = await resume_agent_run(session, result.run_state, decision="approve")
"""

from prism.runtime.durable._approvals import rejection_result as rejection_result
from prism.runtime.durable._decision_records import (
    list_decided_approvals as list_decided_approvals,
)
from prism.runtime.durable._decision_records import (
    list_recorded_decisions as list_recorded_decisions,
)
from prism.runtime.durable._decision_records import record_decisions as record_decisions
from prism.runtime.durable._durable_leg import DURABLE_HOOKS as DURABLE_HOOKS
from prism.runtime.durable._durable_run import DurableRun as DurableRun
from prism.runtime.durable._envelope import agent_fingerprint as agent_fingerprint
from prism.runtime.durable._envelope import arguments_hash as arguments_hash
from prism.runtime.durable._envelope import load_agent_run_state as load_agent_run_state
from prism.runtime.durable._envelope import loop_state_of as loop_state_of
from prism.runtime.durable._envelope import save_agent_run_state as save_agent_run_state
from prism.runtime.durable._repair import resolve_ambiguous_call as resolve_ambiguous_call
from prism.runtime.durable._resume import resume_agent_run as resume_agent_run
from prism.runtime.durable._resume_writes import DENIED_MESSAGE as DENIED_MESSAGE
from prism.runtime.durable._run_envelope import AgentRunState as AgentRunState
from prism.runtime.durable._run_envelope import LoadedRunState as LoadedRunState
from prism.runtime.durable._run_listing import PendingDecisionRecord as PendingDecisionRecord
from prism.runtime.durable._run_listing import SubagentLink as SubagentLink
from prism.runtime.durable._run_listing import list_agent_runs as list_agent_runs
from prism.runtime.durable._run_listing import list_pending_decisions as list_pending_decisions
from prism.runtime.durable._run_state import MAX_LOADED_STATE_BYTES as MAX_LOADED_STATE_BYTES
from prism.runtime.durable._run_state import RELEASE_KEY as RELEASE_KEY
from prism.runtime.durable._run_state import AgentRunInterruption as AgentRunInterruption
from prism.runtime.durable._run_state import CheckpointPolicy as CheckpointPolicy
from prism.runtime.durable._run_state import DecidedApproval as DecidedApproval
from prism.runtime.durable._run_state import DecisionOutcome as DecisionOutcome
from prism.runtime.durable._run_state import DecisionScope as DecisionScope
from prism.runtime.durable._run_state import InterruptionKind as InterruptionKind
from prism.runtime.durable._run_state import PendingDecision as PendingDecision
from prism.runtime.durable._run_state import RunDecision as RunDecision
from prism.runtime.durable._run_state import RunStateOptions as RunStateOptions
from prism.runtime.durable._run_state import RunStateStatus as RunStateStatus
from prism.runtime.durable._run_state import StickyDecision as StickyDecision
from prism.runtime.durable._run_state import check_durable_run as check_durable_run
from prism.runtime.durable._run_state import coerce_run_state_options as coerce_run_state_options
from prism.runtime.durable._run_state import not_resumable_message as not_resumable_message
from prism.runtime.run.seam import ResumePoint as ResumePoint

__all__ = [
    "DENIED_MESSAGE",
    "MAX_LOADED_STATE_BYTES",
    "RELEASE_KEY",
    "AgentRunInterruption",
    "AgentRunState",
    "CheckpointPolicy",
    "DecisionOutcome",
    "DecisionScope",
    "DurableRun",
    "InterruptionKind",
    "LoadedRunState",
    "PendingDecision",
    "ResumePoint",
    "RunDecision",
    "RunStateOptions",
    "RunStateStatus",
    "StickyDecision",
    "agent_fingerprint",
    "arguments_hash",
    "check_durable_run",
    "coerce_run_state_options",
    "list_agent_runs",
    "load_agent_run_state",
    "loop_state_of",
    "rejection_result",
    "resolve_ambiguous_call",
    "resume_agent_run",
    "save_agent_run_state",
]
