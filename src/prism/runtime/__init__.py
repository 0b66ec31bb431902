"""The runtime: agents, sessions, runs and provider turns, in three rooms with one-way doors.

The host-facing names (``create_agent``, ``Agent``, ``AgentSession``, ``RunOptions``,
``RunStream``) are re-exported from ``prism``; this package also exports the agent's frozen
configuration and the provider request policies, which ``prism`` does not.

* ``prism.runtime.run`` — the run path and only it: ``session`` (``AgentSession``) →
  ``plan`` (``plan_run``, with ``options`` and ``config``) → ``leg`` (``RunLeg``, ``start_leg``,
  ``resume_leg``; its setup in ``_setup``, handoffs in ``_handoff``) → ``context`` (``RunContext``,
  the loop's ``ctx``, with the turn boundary and the open calls) → ``attempts`` (the provider
  attempts of one request, with retry and the fallback chain; one attempt's stream in
  ``_attempt``, streamed text held back where a secret could be split in ``_stream_redaction``).
  Beside them: ``state`` (``SessionState``), ``stream`` (``RunStream``), ``_observers``,
  ``policies`` and ``turn_policy``, ``_request_codec`` with the speed modules ``_carry`` and
  ``_json_size``, ``_tool_sources``, ``_tool_rounds``, ``_delegation`` (what a run lends the
  child runs of its agent tools), ``_shield`` (steps that finish under cancellation), and
  ``seam`` — the one door to durable runs (the run-state options value, the resume point, the
  durable gate, the leg's hooks). The run path never imports the other two rooms.
* ``prism.runtime.durable`` — durable runs, implementing the seam: the preflight
  (``_run_state``), the stored envelope (``_run_envelope``; fingerprint, load and save in
  ``_envelope``), approvals (``_approvals``), a leg's durable driver (``_durable_leg``, over the
  per-leg ``_durable_run``), turn writes, resume (``_resume``, ``_resume_writes``), the repair of
  an ambiguous call (``_repair``) and run listing (``_run_listing``).
* ``prism.runtime.agents`` — ``agent`` (``create_agent``, ``Agent``), ``agent_tool``
  (``agent.as_tool``) and the child runs of agent tools (``_child_runs``).

The earlier module paths (``prism.runtime.agent``, ``.session``, ``.leg``, ``.checkpoints``, …)
are the same module objects as their new homes; ``provider_turn`` keeps ``generate_with_retry``.
A run goes one way: ``session`` → ``plan`` → ``leg`` → ``context`` → ``attempts``.
"""

from prism.runtime.agents.agent import Agent as Agent
from prism.runtime.agents.agent import AgentConfig as AgentConfig
from prism.runtime.agents.agent import ProviderSource as ProviderSource
from prism.runtime.agents.agent import create_agent as create_agent
from prism.runtime.run.options import RunOptions as RunOptions
from prism.runtime.run.policies import PolicyContext as PolicyContext
from prism.runtime.run.policies import ProviderRequestPolicy as ProviderRequestPolicy
from prism.runtime.run.policies import ProviderRequestPolicyResult as ProviderRequestPolicyResult
from prism.runtime.run.session import AgentSession as AgentSession
from prism.runtime.run.stream import RunStream as RunStream

__all__ = [
    "Agent",
    "AgentConfig",
    "AgentSession",
    "PolicyContext",
    "ProviderRequestPolicy",
    "ProviderRequestPolicyResult",
    "ProviderSource",
    "RunOptions",
    "RunStream",
    "create_agent",
]
