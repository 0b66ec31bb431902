"""The runtime: agents, sessions, runs and provider turns.

The host-facing names (``create_agent``, ``Agent``, ``AgentSession``, ``RunOptions``,
``RunStream``) are re-exported from ``prism``. This package also exports the agent's frozen
configuration and the provider request policies, which ``prism`` does not; the modules inside
the package are the runtime's own.
"""

from prism.runtime.agent import Agent as Agent
from prism.runtime.agent import AgentConfig as AgentConfig
from prism.runtime.agent import ProviderSource as ProviderSource
from prism.runtime.agent import create_agent as create_agent
from prism.runtime.provider_turn import PolicyContext as PolicyContext
from prism.runtime.provider_turn import ProviderRequestPolicy as ProviderRequestPolicy
from prism.runtime.provider_turn import (
    ProviderRequestPolicyResult as ProviderRequestPolicyResult,
)
from prism.runtime.session import AgentSession as AgentSession
from prism.runtime.session import RunOptions as RunOptions
from prism.runtime.session import RunStream as RunStream

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
