"""The runtime: agents, sessions, runs and provider turns.

The host-facing names (``create_agent``, ``Agent``, ``AgentSession``, ``RunOptions``,
``RunStream``) are re-exported from ``prism``; this package also exports the agent's frozen
configuration and the provider request policies, which ``prism`` does not.

The modules, in layers (each imports only the ones above it in this list):

* leaves: ``_json_size``, ``checkpoints``, ``turn_policy``, ``_observers``, ``_request_codec``,
  ``_shield`` (steps that finish under cancellation), ``policies``, ``_stream_redaction``
  (streamed text held back where a secret could be split), ``_delegation`` (what a run lends
  the child agent runs of its tools: redactor, limit budget, usage, events), ``_durable_gate``
  (the durable run's hooks around tool dispatch);
* ``config`` (``AgentConfig``), ``_run_state`` and ``_approvals`` (durable envelope and
  approvals), ``_repair`` (the operator's repair of an ambiguous call) and ``_run_listing``
  (``list_agent_runs``), ``_attempt`` and ``attempts`` (the provider attempts of one request,
  with retry and a fallback provider's chain);
* ``options`` (``RunOptions``) → ``plan`` (``plan_run``) → ``state`` (``SessionState``),
  ``context`` (``RunContext``, the loop's ``ctx``, with the turn boundary) → ``_setup``,
  ``_durable_leg`` → ``leg`` (``RunLeg``, ``start_leg``, ``resume_leg``);
* ``stream`` → ``session`` (``AgentSession``) → ``_resume_writes`` → ``durable``
  (``resume_agent_run``); ``agent_tool`` (``agent.as_tool``: an agent run as a child of the
  calling run) → ``agent`` (``create_agent``); ``provider_turn`` keeps older import paths.

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
