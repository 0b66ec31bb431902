"""Agent registries: the ``MODULE:REGISTRY`` maps of agent names to factory functions.

A *registry* maps agent names to factory functions, ``{"refunds": build_refund_agent}``. A
factory takes the host's store and returns an agent that keeps its sessions and its durable runs
there::

    def build_refund_agent(store) -> prism.Agent:
        return prism.create_agent(
            id="refunds", provider=..., tools=[refund], store=store,
            run_state=prism.RunStateOptions(store, "refunds-7", checkpoint_policy="every-turn"),
        )

    REGISTRY = {"refunds": build_refund_agent}

Every process that serves or decides runs of these agents imports the same registry: ``prism
worker --agents myagents:REGISTRY`` runs them on a worker fleet, ``prism serve --agents
myagents:REGISTRY`` resumes the runs an operator decides in its inbox. [`load_registry()`][prism.registry.load_registry]
imports one, [`check_registry()`][prism.registry.check_registry] checks a mapping a host built itself, and
[`build_registry_agents()`][prism.registry.build_registry_agents] calls every factory with the store. Nothing here imports an engine;
the checks an engine adds (every-turn checkpoints in the worker's store) are the engine's.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

from prism.errors import PrismConfigError
from prism.runtime import Agent

__all__ = ["AgentFactory", "build_registry_agents", "check_registry", "load_registry"]

AgentFactory: TypeAlias = Callable[[Any], Agent]
"""``factory(store) -> Agent``: builds one registry agent over the host's store."""

_DOTTED: Final = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def load_registry(spec: str) -> Mapping[str, AgentFactory]:
    """Import the registry ``spec`` names (``MODULE:ATTR``, ``ATTR`` may be dotted).

    The module is imported with the current directory first on ``sys.path``, as ``python -m``
    does.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — a malformed spec, a module that cannot be
            imported, a missing attribute, or an object that is not a non-empty mapping of
            names to callables.
    """
    module_name, _, attr_path = spec.partition(":")
    if not _DOTTED.match(module_name) or not _DOTTED.match(attr_path):
        raise PrismConfigError(
            f"--agents {spec}: expected MODULE:ATTR with Python names, e.g. myagents:REGISTRY"
        )
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise PrismConfigError(
            f"--agents {spec}: importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from None
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise PrismConfigError(
                f"--agents {spec}: {module_name} has no attribute {attr_path!r}"
            ) from None
    return check_registry(target, label=f"--agents {spec}")


def check_registry(value: object, *, label: str = "agents") -> Mapping[str, AgentFactory]:
    """``value`` as a registry: a non-empty mapping of names to factory callables.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — anything else (the message starts with
            ``label``).
    """
    if not isinstance(value, Mapping) or not value:
        raise PrismConfigError(
            f"{label}: expected a non-empty mapping of agent names to factory functions, "
            f"got {type(value).__name__}"
        )
    for name, factory in value.items():
        if not isinstance(name, str) or not name:
            raise PrismConfigError(f"{label}: agent names must be non-empty strings, got {name!r}")
        if not callable(factory):
            raise PrismConfigError(
                f"{label}: {name!r} maps to {type(factory).__name__}, not a factory function"
            )
    return value


def build_registry_agents(registry: Mapping[str, AgentFactory], store: object) -> dict[str, Agent]:
    """Call every factory of ``registry`` with ``store``; the agents by registry name, in the
    registry's order.

    Example::

        agents = build_registry_agents(load_registry("myagents:REGISTRY"), store)
        result = await prism.resume_agent_run(agents["refunds"], run_id, decision="approve")

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — ``registry`` is not one (see
            [`check_registry()`][prism.registry.check_registry]), a factory raised (the message names the agent and the
            error; a ``PrismConfigError`` it raised is passed on as it is), or a factory
            returned something else than an ``Agent``.
    """
    agents: dict[str, Agent] = {}
    for name, factory in check_registry(registry).items():
        try:
            agent = factory(store)
        except PrismConfigError:
            raise
        except Exception as exc:
            raise PrismConfigError(
                f"agent {name!r}: its factory raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(agent, Agent):
            raise PrismConfigError(
                f"agent {name!r}: the factory returned {type(agent).__name__}, not an Agent"
            )
        agents[name] = agent
    return agents
