"""The agents a worker serves, the application version they pin, and the run options a
submitter may send.

A *registry* maps agent names to factory functions, ``{"refunds": build_refund_agent}``; every
worker and every submitter imports the same one (``--agents module:REGISTRY``). Loading and
checking one is [`prism.registry`][prism.registry]'s (re-exported here); a worker adds its own rules. A
factory takes the worker's [`PostgresStore`][prism.stores.postgres.PostgresStore] and returns an agent
that keeps its sessions and its durable runs there, with every-turn checkpoints::

    def build_refund_agent(store: PostgresStore) -> prism.Agent:
        return prism.create_agent(
            id="refunds", provider=..., tools=[refund], store=store, run_ledger=store,
            run_state=prism.RunStateOptions(store, "refunds-7", checkpoint_policy="every-turn"),
        )

    REGISTRY = {"refunds": build_refund_agent}

The DBOS application version of a fleet is derived from prism's version and each agent's
``definition_revision`` ([`application_version()`][prism.engines.dbos._registry.application_version]): DBOS hands a run only to workers of the
version it was submitted under, and recovers a dead worker's runs only on workers of its version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, cast

from prism._json import canonical_json
from prism.errors import PrismConfigError
from prism.registry import AgentFactory as AgentFactory
from prism.registry import build_registry_agents
from prism.registry import check_registry as check_registry
from prism.registry import load_registry as load_registry
from prism.runtime import Agent
from prism.runtime.durable import coerce_run_state_options
from prism.types import JsonValue, is_json_value

__all__ = [
    "SUBMITTED_OPTION_NAMES",
    "AgentFactory",
    "ServedAgent",
    "application_version",
    "build_agents",
    "check_registry",
    "check_run_options",
    "load_registry",
]

SUBMITTED_OPTION_NAMES: Final = frozenset(
    (
        "limits",
        "metadata",
        "structured_output",
        "active_skills",
        "provider_options",
        "compaction",
        "retry",
        "ownership",
        "idempotency_key",
    )
)
"""The run options a submitted run may carry, as JSON (each a ``RunOptions`` field in its
mapping form). The others either hold live objects (a provider, a ledger, a signal) or belong
to the agent on a durable run (``loop``, ``model``, ``guardrails``, ``tool_filter``), and the
turn policy is the worker's (it stops runs cleanly when the worker shuts down)."""


@dataclass(frozen=True, slots=True)
class ServedAgent:
    """One registry agent, built and checked."""

    name: str
    """Its registry name (what a submitter asks for)."""
    agent: Agent
    """The agent."""
    definition_revision: str
    """Its ``run_state.definition_revision``."""


def build_agents(registry: Mapping[str, AgentFactory], store: object) -> dict[str, ServedAgent]:
    """Call every factory with ``store`` and check the agent it returns.

    An agent a worker can serve is durable over ``store`` itself — its session store and its
    ``run_state.checkpoints`` are ``store`` — with ``checkpoint_policy="every-turn"``, so that a
    run re-executed on another worker continues from its last turn boundary.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — a factory raised, returned something else than
            an ``Agent``, or an agent breaks one of the rules above (the message names it).
    """
    served: dict[str, ServedAgent] = {}
    for name, agent in build_registry_agents(registry, store).items():
        config = agent.config
        options = coerce_run_state_options(config.run_state, label=f"agent {name!r} run_state")
        problem: str | None = None
        if options is None:
            problem = "has no run_state (an engine runs durable agents only)"
        elif options.checkpoint_policy != "every-turn":
            problem = (
                'needs run_state checkpoint_policy="every-turn" (a run continued on another '
                "worker resumes from its last turn boundary)"
            )
        elif options.checkpoints is not store:
            problem = (
                "must keep its run_state checkpoints in the worker's store (the factory's argument)"
            )
        elif config.store is not cast(object, store):
            problem = "must keep its sessions in the worker's store (store=the factory's argument)"
        if problem is not None:
            raise PrismConfigError(f"agent {name!r} {problem}")
        assert options is not None
        served[name] = ServedAgent(name, agent, options.definition_revision)
    return served


def application_version(prism_version: str, revisions: Mapping[str, str]) -> str:
    """The DBOS application version of a fleet serving ``revisions`` (agent name → definition
    revision) with prism ``prism_version``: ``"prism-<version>-<16 hex>"``, the hex digits
    being the start of the SHA-256 of the canonical JSON of both. Equal inputs give equal
    versions on every machine; any changed revision, added or removed agent, or another prism
    version gives another one."""
    import hashlib

    text = canonical_json({"prism": prism_version, "agents": dict(sorted(revisions.items()))})
    return f"prism-{prism_version}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}"


def check_run_options(options: object) -> dict[str, JsonValue]:
    """The JSON run options of a submitted run, checked.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — not a mapping, a key outside
            [`SUBMITTED_OPTION_NAMES`][prism.engines.dbos._registry.SUBMITTED_OPTION_NAMES] (the message lists them), or a value that is not
            JSON.
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise PrismConfigError(f"run options must be a mapping, got {type(options).__name__}")
    out: dict[str, JsonValue] = {}
    for key, value in options.items():
        if key not in SUBMITTED_OPTION_NAMES:
            raise PrismConfigError(
                f"run option {key!r} cannot be submitted to a worker; allowed: "
                + ", ".join(sorted(SUBMITTED_OPTION_NAMES))
            )
        if not is_json_value(value):
            raise PrismConfigError(f"run option {key!r} must be a JSON value")
        out[str(key)] = value
    return out
