"""The runtime: agents, sessions, runs and provider turns (02-session-runtime).

Public names are re-exported from ``prism``; import them from the submodules inside the package.
"""

from __future__ import annotations

from prism.runtime.agent import Agent as Agent
from prism.runtime.agent import AgentConfig as AgentConfig
from prism.runtime.agent import ProviderSource as ProviderSource
from prism.runtime.agent import create_agent as create_agent
from prism.runtime.provider_turn import PolicyContext as PolicyContext
from prism.runtime.provider_turn import ProviderRequestPolicy as ProviderRequestPolicy
from prism.runtime.provider_turn import (
    ProviderRequestPolicyResult as ProviderRequestPolicyResult,
)
from prism.runtime.provider_turn import generate_with_retry as generate_with_retry
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
    "generate_with_retry",
]
