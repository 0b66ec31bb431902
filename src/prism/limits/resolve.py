"""Run limit resolution: validating the agent and run layers and merging them into one.

[`resolve_run_limits()`][prism.limits.resolve.resolve_run_limits] merges the agent and run layers, validates each, refuses any run value
that widens the agent's, and fills the defaults, returning a [`RunLimits`][prism.limits.RunLimits]
with every axis set. [`sets_finite_output_budget()`][prism.limits.resolve.sets_finite_output_budget] tells whether the layers cap output.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from prism.errors import PrismConfigError
from prism.limits.options import (
    DEFAULT_RUN_LIMITS,
    MAX_BYTES_LIMIT,
    NUMERIC_LIMIT_AXES,
    UNLIMITED,
    UNLIMITED_TEXT,
    RunCost,
    RunLimits,
    coerce_run_limits,
)

__all__ = ["resolve_run_limits", "sets_finite_output_budget"]

_COUNT_AXES: Final = (
    "max_turns",
    "max_provider_attempts",
    "max_tool_rounds",
    "max_tool_calls",
    "max_wall_time_ms",
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
)
"""Integer axes that also accept UNLIMITED."""

_BYTE_AXES: Final = ("max_request_bytes", "max_response_bytes")
"""Integer axes capped at 64 MiB that never accept UNLIMITED."""


def _fmt(value: Any) -> str:
    """Spell a limit value for messages: UNLIMITED as ``unlimited``."""
    if isinstance(value, float) and math.isinf(value) and value > 0:
        return UNLIMITED_TEXT
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return str(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate_layer(limits: RunLimits, label: str) -> None:
    """Check one layer's values (unset axes are skipped).

    Count axes take an ``int`` >= 1 or UNLIMITED, byte axes an ``int`` from 1 to 64 MiB, and a
    cost a finite amount >= 0 with a non-blank currency.
    """
    for axis in _COUNT_AXES:
        value = getattr(limits, axis)
        if value is None:
            continue
        if _is_int(value):
            if value < 1:
                raise PrismConfigError(
                    f"{label}.{axis} must be an int >= 1 or UNLIMITED, got {value!r}"
                )
        elif not (isinstance(value, float) and value == UNLIMITED):
            raise PrismConfigError(
                f"{label}.{axis} must be an int >= 1 or UNLIMITED, got {value!r}"
            )
    for axis in _BYTE_AXES:
        value = getattr(limits, axis)
        if value is None:
            continue
        if not _is_int(value) or value < 1 or value > MAX_BYTES_LIMIT:
            raise PrismConfigError(
                f"{label}.{axis} must be an int between 1 and {MAX_BYTES_LIMIT} (64 MiB), "
                f"got {value!r}"
            )
    cost: Any = limits.max_cost
    if cost is None:
        return
    if not isinstance(cost, RunCost):
        raise PrismConfigError(
            f"{label}.max_cost must be a RunCost or a mapping with amount and currency, "
            f"got {type(cost).__name__}"
        )
    amount: Any = cost.amount
    if (
        isinstance(amount, bool)
        or not isinstance(amount, (int, float))
        or not math.isfinite(amount)
        or amount < 0
    ):
        raise PrismConfigError(
            f"{label}.max_cost.amount must be a finite number >= 0, got {amount!r}"
        )
    currency: Any = cost.currency
    if not isinstance(currency, str) or not currency.strip():
        raise PrismConfigError(
            f"{label}.max_cost.currency must be a non-blank str, got {currency!r}"
        )


# --------------------------------------------------------------------------- resolution


def resolve_run_limits(
    agent_limits: RunLimits | Mapping[str, Any] | None,
    run_limits: RunLimits | Mapping[str, Any] | None = None,
) -> RunLimits:
    """Resolve the effective limits of a run from the agent and run layers.

    Applies, in order: coercion of mappings (unknown keys), validation of each layer (agent
    first), the narrowing-only rule per axis in field order (UNLIMITED comparing greater
    than every number), and the defaults, including ``max_provider_attempts =
    max(24, max_turns)`` when neither layer sets it and raising a set value below a finite
    ``max_turns`` up to it. Performs no I/O.

    Args:
        agent_limits: The agent layer (``create_agent(limits=...)``), or ``None``.
        run_limits: The run overlay (``run(limits=...)``), or ``None``.

    Returns:
        A [`RunLimits`][prism.limits.resolve.RunLimits] with every numeric axis set to an ``int`` or [`UNLIMITED`][prism.limits.resolve.UNLIMITED];
        ``max_cost`` is ``None`` when neither layer sets it.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown key, an invalid value, a run
            value that widens the agent's (message ``limits.max_turns (<run>) cannot widen the
            agent limit (<agent>)``, UNLIMITED spelled ``unlimited``), or different cost
            currencies on the two layers.
    """
    agent = coerce_run_limits(agent_limits)
    run = coerce_run_limits(run_limits)
    if agent is not None:
        _validate_layer(agent, "limits")
    if run is not None:
        _validate_layer(run, "limits")

    values: dict[str, Any] = {}
    for axis in NUMERIC_LIMIT_AXES:
        a = getattr(agent, axis) if agent is not None else None
        r = getattr(run, axis) if run is not None else None
        if a is not None and r is not None:
            if r > a:
                raise PrismConfigError(
                    f"limits.{axis} ({_fmt(r)}) cannot widen the agent limit ({_fmt(a)})"
                )
            values[axis] = r
        elif r is not None:
            values[axis] = r
        elif a is not None:
            values[axis] = a
        else:
            values[axis] = None  # default below

    agent_cost = agent.max_cost if agent is not None else None
    run_cost = run.max_cost if run is not None else None
    if agent_cost is not None and run_cost is not None:
        if run_cost.currency != agent_cost.currency:
            raise PrismConfigError(
                f"limits.max_cost currency ({run_cost.currency}) differs from the agent limit "
                f"currency ({agent_cost.currency})"
            )
        if run_cost.amount > agent_cost.amount:
            raise PrismConfigError(
                f"limits.max_cost ({_fmt(run_cost.amount)} {run_cost.currency}) cannot widen the "
                f"agent limit ({_fmt(agent_cost.amount)} {agent_cost.currency})"
            )
        cost: RunCost | None = run_cost
    else:
        cost = run_cost if run_cost is not None else agent_cost

    for axis in NUMERIC_LIMIT_AXES:
        if values[axis] is None and axis != "max_provider_attempts":
            values[axis] = getattr(DEFAULT_RUN_LIMITS, axis)
    max_turns = values["max_turns"]
    attempts = values["max_provider_attempts"]
    if attempts is None:
        attempts = max(24, max_turns)
    elif math.isfinite(max_turns) and attempts < max_turns:
        attempts = max_turns
    values["max_provider_attempts"] = attempts
    return RunLimits(**values, max_cost=cost)


def sets_finite_output_budget(*layers: RunLimits | Mapping[str, Any] | None) -> bool:
    """Whether any layer explicitly sets ``max_output_tokens``, ``max_total_tokens`` or
    ``max_cost`` to a finite value — the condition that turns on output buffering.

    Args:
        layers: Limits layers as given by the host (agent, run); ``None`` entries are skipped.

    Raises:
        PrismConfigError: a layer is not a ``RunLimits``/mapping or has an unknown key.
    """
    for layer in layers:
        limits = coerce_run_limits(layer)
        if limits is None:
            continue
        for axis in ("max_output_tokens", "max_total_tokens"):
            value = getattr(limits, axis)
            if value is not None and not (isinstance(value, float) and math.isinf(value)):
                return True
        if limits.max_cost is not None:
            return True
    return False
