"""Run limit options: the per-run ceilings a host sets, their defaults and their coercion.

* [`RunLimits`][prism.limits.options.RunLimits] / [`RunCost`][prism.limits.options.RunCost] are the keyword-only options. ``None`` means *not set*
  (inherit from the other layer, else the default); [`UNLIMITED`][prism.limits.options.UNLIMITED] (``math.inf``) disables an
  axis.
* ``DEFAULT_RUN_LIMITS`` holds the defaults.
* [`coerce_run_limits()`][prism.limits.options.coerce_run_limits] turns a mapping layer into [`RunLimits`][prism.limits.options.RunLimits] without validating it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from prism._keys import reject_unknown_keys
from prism._serde import Serializable
from prism.errors import PrismConfigError
from prism.types import _Options

__all__ = [
    "DEFAULT_RUN_LIMITS",
    "MAX_BYTES_LIMIT",
    "NUMERIC_LIMIT_AXES",
    "UNLIMITED",
    "UNLIMITED_TEXT",
    "LimitValue",
    "RunCost",
    "RunLimits",
    "coerce_run_limits",
]

UNLIMITED: Final[float] = math.inf
"""Disables a limit axis. Equal to ``math.inf`` / ``float("inf")``, so it compares greater
than every number; ``RunLimits.to_dict()`` writes it as ``"unlimited"``."""

MAX_BYTES_LIMIT: Final[int] = 64 * 1024 * 1024
"""Largest accepted ``max_request_bytes`` / ``max_response_bytes`` (64 MiB)."""

LimitValue: TypeAlias = int | float
"""A limit axis value: an ``int`` ≥ 1 or [`UNLIMITED`][prism.limits.options.UNLIMITED] (the only accepted ``float``)."""

UNLIMITED_TEXT: Final = "unlimited"
"""How [`UNLIMITED`][prism.limits.options.UNLIMITED] is written in JSON and in error messages."""
_MIB: Final = 1024 * 1024

# --------------------------------------------------------------------------- options


@dataclass(frozen=True, slots=True)
class RunCost(_Options):
    """A monetary budget for a run.

    Example: ``RunCost(0.50, "USD")``. Validated where the limits are used, not here.
    """

    amount: float
    """Maximum summed ``Usage.cost`` of the run, in ``currency`` units (finite, ≥ 0)."""
    currency: str
    """Currency the provider reports costs in, e.g. ``"USD"`` (non-blank)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLimits(_Options):
    """Per-run safety ceilings.

    Every field defaults to ``None`` (*not set*: the other layer's value, else the default of
    ``DEFAULT_RUN_LIMITS``). [`UNLIMITED`][prism.limits.options.UNLIMITED] disables an axis: its counter is still
    charged and exported, but it never breaches. Values are validated where they are used
    (``create_agent``, run preflight, ``resolve_run_limits()``), never at construction, so
    a dataclass and a mapping with the same values behave alike.

    ``to_dict()`` writes [`UNLIMITED`][prism.limits.options.UNLIMITED] as the string ``"unlimited"`` and ``from_dict`` reads it
    back; ``from_dict``/``coerce`` raise ``PrismConfigError`` naming unknown keys, reporting
    a camelCase key such as ``maxTurns`` with its snake_case name.
    """

    max_turns: LimitValue | None = None
    """Turn boundaries per run (charged once per turn). Default 16."""
    max_provider_attempts: LimitValue | None = None
    """Provider attempts per run, retries included. Default ``max(24, max_turns)``; a value below
    the resolved finite ``max_turns`` is raised to it."""
    max_tool_rounds: LimitValue | None = None
    """Non-empty tool rounds per run (``charge_tool_round``). Default 8."""
    max_tool_calls: LimitValue | None = None
    """Tool calls that reach the dispatcher (charged as a dispatch starts). Default 32."""
    max_wall_time_ms: LimitValue | None = None
    """Active wall-clock time of the run in milliseconds. Default 600 000 ms."""
    max_request_bytes: int | None = None
    """UTF-8 bytes of one serialised provider request (per request, not summed). Default 8 MiB,
    at most 64 MiB; never UNLIMITED."""
    max_response_bytes: int | None = None
    """UTF-8 bytes of one serialised provider stream event (per event, not summed). Default
    8 MiB, at most 64 MiB; never UNLIMITED."""
    max_input_tokens: LimitValue | None = None
    """Summed input tokens of the run's attempts. Default UNLIMITED."""
    max_output_tokens: LimitValue | None = None
    """Summed output tokens of the run's attempts. Default UNLIMITED. A budget checked on the
    usage each turn reports, after the turn: it never stops a generation, and a turn that crosses
    it fails the run. To cap the tokens of each reply, use ``max_tokens=`` (agent or run), which
    the provider enforces while generating."""
    max_total_tokens: LimitValue | None = None
    """Summed total tokens (reported total, else input + output). Default UNLIMITED."""
    max_cost: RunCost | None = None
    """Summed provider cost budget. Default ``None`` (no cost cap). A mapping with the
    keys ``amount``/``currency`` is accepted wherever limits are resolved."""

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form; [`UNLIMITED`][prism.limits.options.UNLIMITED] becomes ``"unlimited"``."""
        out = Serializable.to_dict(self)
        for key, value in out.items():
            if isinstance(value, float) and math.isinf(value) and value > 0:
                out[key] = UNLIMITED_TEXT
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunLimits:
        """Rebuild from ``to_dict()`` form, reading ``"unlimited"`` back as [`UNLIMITED`][prism.limits.options.UNLIMITED].

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — a key (or a ``max_cost`` key) is not a field.
        """
        if not isinstance(data, Mapping):
            raise PrismConfigError(f"RunLimits expects a mapping, got {type(data).__name__}")
        reject_unknown_keys(cls.__name__, data, _RUN_LIMIT_FIELDS)
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if value == UNLIMITED_TEXT and isinstance(value, str):
                value = UNLIMITED
            elif key == "max_cost" and isinstance(value, Mapping):
                value = RunCost.coerce(value)
            kwargs[key] = value
        return cls(**kwargs)


_RUN_LIMIT_FIELDS: Final = frozenset(f.name for f in dataclasses.fields(RunLimits))

NUMERIC_LIMIT_AXES: Final = tuple(
    f.name for f in dataclasses.fields(RunLimits) if f.name != "max_cost"
)
"""Every numeric axis of [`RunLimits`][prism.limits.options.RunLimits] (all but ``max_cost``), in field order."""

DEFAULT_RUN_LIMITS: Final = RunLimits(
    max_turns=16,
    max_provider_attempts=24,
    max_tool_rounds=8,
    max_tool_calls=32,
    max_wall_time_ms=600_000,
    max_request_bytes=8 * _MIB,
    max_response_bytes=8 * _MIB,
    max_input_tokens=UNLIMITED,
    max_output_tokens=UNLIMITED,
    max_total_tokens=UNLIMITED,
    max_cost=None,
)
"""The defaults (``max_provider_attempts`` resolves to ``max(24, max_turns)``)."""


# --------------------------------------------------------------------------- coercion, validation


def coerce_run_limits(
    value: RunLimits | Mapping[str, Any] | None, *, label: str = "limits"
) -> RunLimits | None:
    """Convert a limits layer to [`RunLimits`][prism.limits.options.RunLimits] without validating its values.

    Args:
        value: A [`RunLimits`][prism.limits.options.RunLimits], a snake_case mapping of its fields (``"unlimited"`` accepted
            for UNLIMITED; ``max_cost`` may itself be a mapping), or ``None``.
        label: Name used in error messages (``"limits"``).

    Returns:
        The [`RunLimits`][prism.limits.options.RunLimits] (a ``max_cost`` mapping converted to [`RunCost`][prism.limits.options.RunCost]), or ``None``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — not a ``RunLimits``/mapping, or an unknown key
            (``limits`` or ``max_cost``), a camelCase key being reported with its snake_case name.
    """
    if value is None:
        return None
    if isinstance(value, RunLimits):
        cost: Any = value.max_cost
        if isinstance(cost, Mapping):
            return dataclasses.replace(value, max_cost=RunCost.coerce(cost))
        return value
    if isinstance(value, Mapping):
        return RunLimits.from_dict(value)
    raise PrismConfigError(
        f"{label} must be a RunLimits or a mapping of its fields, got {type(value).__name__}"
    )
