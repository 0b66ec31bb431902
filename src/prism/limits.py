"""Run limits: the options, their resolution across layers and the per-run tracker (LIM-1..LIM-9).

* :class:`RunLimits` / :class:`RunCost` are the keyword-only options (LIM-1). ``None`` means *not
  set* (inherit); :data:`UNLIMITED` (``math.inf``) disables an axis (LIM-8).
* :func:`resolve_run_limits` merges the agent and run layers, validates them (LIM-2), refuses any
  widening (LIM-3) and fills the defaults (LIM-1), returning a :class:`RunLimits` with every axis
  set (LIM-9).
* :class:`RunLimitTracker` holds a run's counters, charges them at the points of LIM-4/LIM-5,
  records the first breach once (LIM-7) and arms the wall-time deadline (LIM-6). Its counters are
  exported to and restored from a JSON dict for durable envelopes (DUR-4, DUR-17).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeAlias

from prism._serde import Serializable
from prism.errors import PrismConfigError, RunLimitExceeded
from prism.types import RunLimitBreach, Usage, _Options

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

_log = logging.getLogger("prism")

UNLIMITED: Final[float] = math.inf
"""Disables a limit axis (LIM-8). Equal to ``math.inf`` / ``float("inf")``, so it compares greater
than every number; ``RunLimits.to_dict()`` writes it as ``"unlimited"``."""

MAX_BYTES_LIMIT: Final[int] = 64 * 1024 * 1024
"""Largest accepted ``max_request_bytes`` / ``max_response_bytes`` (64 MiB, LIM-2)."""

LimitValue: TypeAlias = int | float
"""A limit axis value: an ``int`` ≥ 1 or :data:`UNLIMITED` (the only accepted ``float``)."""

_UNLIMITED_TEXT: Final = "unlimited"
_MIB: Final = 1024 * 1024

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
"""Integer axes that also accept UNLIMITED (LIM-8)."""

_BYTE_AXES: Final = ("max_request_bytes", "max_response_bytes")
"""Integer axes capped at 64 MiB that never accept UNLIMITED (LIM-2)."""

_ALL_NUMERIC_AXES: Final = (
    "max_turns",
    "max_provider_attempts",
    "max_tool_rounds",
    "max_tool_calls",
    "max_wall_time_ms",
    "max_request_bytes",
    "max_response_bytes",
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
)
"""Every numeric axis, in field order (the order errors are reported in)."""


# --------------------------------------------------------------------------- options (LIM-1)


@dataclass(frozen=True, slots=True)
class RunCost(_Options):
    """A monetary budget for a run (LIM-1, LIM-5).

    Example: ``RunCost(0.50, "USD")``. Validated where the limits are used (LIM-2), not here.
    """

    amount: float
    """Maximum summed ``Usage.cost`` of the run, in ``currency`` units (finite, ≥ 0)."""
    currency: str
    """Currency the provider reports costs in, e.g. ``"USD"`` (non-blank)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLimits(_Options):
    """Per-run safety ceilings (LIM-1).

    Every field defaults to ``None`` (*not set*: the other layer's value, else the default of
    :data:`DEFAULT_RUN_LIMITS`). :data:`UNLIMITED` disables an axis (LIM-8): its counter is still
    charged and exported, but it never breaches. Values are validated where they are used
    (``create_agent``, run preflight, :func:`resolve_run_limits`), never at construction (LIM-2), so
    a dataclass and a mapping with the same values behave alike.

    ``to_dict()`` writes :data:`UNLIMITED` as the string ``"unlimited"`` and ``from_dict`` reads it
    back (LIM-8); ``from_dict``/``coerce`` raise ``PrismConfigError`` naming unknown keys, reporting
    a camelCase key such as ``maxTurns`` with its snake_case name.
    """

    max_turns: LimitValue | None = None
    """Turn boundaries per run (charged once per turn, TP-4). Default 16."""
    max_provider_attempts: LimitValue | None = None
    """Provider attempts per run, retries included. Default ``max(24, max_turns)``; a value below
    the resolved finite ``max_turns`` is raised to it."""
    max_tool_rounds: LimitValue | None = None
    """Non-empty tool rounds per run (``charge_tool_round``). Default 8."""
    max_tool_calls: LimitValue | None = None
    """Tool calls that reach the dispatcher (TOOL-3 step 1). Default 32."""
    max_wall_time_ms: LimitValue | None = None
    """Active wall-clock time of the run in milliseconds (LIM-6). Default 600 000 ms."""
    max_request_bytes: int | None = None
    """UTF-8 bytes of one serialised provider request (per request, not summed). Default 8 MiB,
    at most 64 MiB; never UNLIMITED."""
    max_response_bytes: int | None = None
    """UTF-8 bytes of one serialised provider stream event (per event, not summed). Default
    8 MiB, at most 64 MiB; never UNLIMITED."""
    max_input_tokens: LimitValue | None = None
    """Summed input tokens of the run's attempts. Default UNLIMITED."""
    max_output_tokens: LimitValue | None = None
    """Summed output tokens of the run's attempts. Default UNLIMITED."""
    max_total_tokens: LimitValue | None = None
    """Summed total tokens (reported total, else input + output). Default UNLIMITED."""
    max_cost: RunCost | None = None
    """Summed provider cost budget (LIM-5). Default ``None`` (no cost cap). A mapping with the
    keys ``amount``/``currency`` is accepted wherever limits are resolved."""

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form; :data:`UNLIMITED` becomes ``"unlimited"`` (LIM-8, CON-3)."""
        out = Serializable.to_dict(self)
        for key, value in out.items():
            if isinstance(value, float) and math.isinf(value) and value > 0:
                out[key] = _UNLIMITED_TEXT
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunLimits:
        """Rebuild from ``to_dict()`` form, reading ``"unlimited"`` back as :data:`UNLIMITED`.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — a key (or a ``max_cost`` key) is not a field.
        """
        if not isinstance(data, Mapping):
            raise PrismConfigError(f"RunLimits expects a mapping, got {type(data).__name__}")
        names = _RUN_LIMIT_FIELDS
        unknown = [str(k) for k in data if k not in names]
        if unknown:
            raise cls._unknown_keys_error(unknown)
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if value == _UNLIMITED_TEXT and isinstance(value, str):
                value = UNLIMITED
            elif key == "max_cost" and isinstance(value, Mapping):
                value = RunCost.coerce(value)
            kwargs[key] = value
        return cls(**kwargs)


_RUN_LIMIT_FIELDS: Final = frozenset(f.name for f in dataclasses.fields(RunLimits))

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
"""The defaults of LIM-1 (``max_provider_attempts`` resolves to ``max(24, max_turns)``)."""


# --------------------------------------------------------------------------- coercion, validation


def coerce_run_limits(value: RunLimits | Mapping[str, Any] | None, *, label: str = "limits") -> (
    RunLimits | None
):
    """Convert a limits layer to :class:`RunLimits` without validating its values (RUN-7 step 1).

    Args:
        value: A :class:`RunLimits`, a snake_case mapping of its fields (``"unlimited"`` accepted
            for UNLIMITED; ``max_cost`` may itself be a mapping), or ``None``.
        label: Name used in error messages (``"limits"``).

    Returns:
        The :class:`RunLimits` (a ``max_cost`` mapping converted to :class:`RunCost`), or ``None``.

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


def _fmt(value: Any) -> str:
    """Spell a limit value for messages: UNLIMITED as ``unlimited`` (LIM-3)."""
    if isinstance(value, float) and math.isinf(value) and value > 0:
        return _UNLIMITED_TEXT
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return str(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate_layer(limits: RunLimits, label: str) -> None:
    """Check one layer against LIM-2 / LIM-8 (unset axes are skipped)."""
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
        raise PrismConfigError(f"{label}.max_cost.amount must be a finite number >= 0, got {amount!r}")
    currency: Any = cost.currency
    if not isinstance(currency, str) or not currency.strip():
        raise PrismConfigError(f"{label}.max_cost.currency must be a non-blank str, got {currency!r}")


# --------------------------------------------------------------------------- resolution (LIM-9)


def resolve_run_limits(
    agent_limits: RunLimits | Mapping[str, Any] | None,
    run_limits: RunLimits | Mapping[str, Any] | None = None,
) -> RunLimits:
    """Resolve the effective limits of a run from the agent and run layers (LIM-9).

    Applies, in order: coercion of mappings (unknown keys), validation of each layer (LIM-2, agent
    first), the narrowing-only rule per axis in field order (LIM-3, UNLIMITED comparing greater
    than every number), and the defaults (LIM-1), including ``max_provider_attempts =
    max(24, max_turns)`` when neither layer sets it and raising a set value below a finite
    ``max_turns`` up to it. Performs no I/O.

    Args:
        agent_limits: The agent layer (``create_agent(limits=...)``), or ``None``.
        run_limits: The run overlay (``run(limits=...)``), or ``None``.

    Returns:
        A :class:`RunLimits` with every numeric axis set to an ``int`` or :data:`UNLIMITED`;
        ``max_cost`` is ``None`` when neither layer sets it.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown key, an invalid value (LIM-2), a run
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
    for axis in _ALL_NUMERIC_AXES:
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

    for axis in _ALL_NUMERIC_AXES:
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
    ``max_cost`` to a finite value — the condition that turns on output buffering (RUN-16).

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


# --------------------------------------------------------------------------- counters


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLimitCounters(Serializable):
    """A snapshot of a run's limit counters, cumulative across legs (LIM-4, DUR-4).

    Its ``to_dict()`` is the ``counters`` object of a durable envelope; pass that dict (or this
    value) back as ``RunLimitTracker(counters=...)`` on a resumed leg (DUR-17).
    """

    turns: int = 0
    """Turn boundaries charged."""
    provider_attempts: int = 0
    """Provider attempts charged (retries included)."""
    tool_rounds: int = 0
    """Non-empty tool rounds charged."""
    tool_calls: int = 0
    """Tool calls that reached the dispatcher."""
    wall_time_ms: int = 0
    """Active wall-clock time in milliseconds (suspended time excluded, DUR-17)."""
    request_bytes: int = 0
    """Largest single request seen, in UTF-8 bytes (requests are compared, not summed)."""
    response_bytes: int = 0
    """Largest single provider stream event seen, in UTF-8 bytes (compared, not summed)."""
    input_tokens: int = 0
    """Summed input tokens."""
    output_tokens: int = 0
    """Summed output tokens."""
    total_tokens: int = 0
    """Summed total tokens (reported total, else input + output)."""
    cost: float = 0
    """Summed cost in the ``max_cost`` currency (any reported cost when no cost cap is set)."""


_COUNTER_FIELDS: Final = tuple(f.name for f in dataclasses.fields(RunLimitCounters))


def _coerce_counters(value: RunLimitCounters | Mapping[str, Any] | None) -> RunLimitCounters:
    if value is None:
        return RunLimitCounters()
    if isinstance(value, RunLimitCounters):
        counters = value
    elif isinstance(value, Mapping):
        unknown = sorted(str(k) for k in value if k not in _COUNTER_FIELDS)
        if unknown:
            raise ValueError(f"unknown limit counter(s): {', '.join(unknown)}")
        counters = RunLimitCounters(**dict(value))
    else:
        raise TypeError(f"counters must be a mapping, got {type(value).__name__}")
    for name in _COUNTER_FIELDS:
        v = getattr(counters, name)
        ok = (
            not isinstance(v, bool)
            and isinstance(v, (int, float))
            and math.isfinite(v)
            and v >= 0
            and (name == "cost" or isinstance(v, int))
        )
        if not ok:
            raise ValueError(f"limit counter {name} must be a non-negative number, got {v!r}")
    return counters


# --------------------------------------------------------------------------- tracker


BreachCallback: TypeAlias = Callable[[RunLimitBreach], object]
"""``on_breach(breach)``: called once, synchronously, with the run's first breach (LIM-7)."""


class RunLimitTracker:
    """Counts a run's usage against its resolved limits (LIM-4..LIM-8).

    One tracker per run leg. Counters are cumulative across the legs of a durable run: a resumed
    leg passes the envelope's ``counters`` back in (DUR-17). Every ``charge_*`` method costs O(1).

    The first breach of the run (LIM-7) is recorded as :attr:`breach`, then ``on_breach(breach)``
    is called synchronously exactly once — the runtime uses it to emit ``run_limit_exceeded`` and
    abort the run signal with ``RunLimitExceeded(breach)`` — and the charging method raises
    :class:`~prism.errors.RunLimitExceeded`. Later breaches call nothing and raise
    ``RunLimitExceeded`` carrying the first breach. The wall-time deadline (LIM-6) records the
    breach and calls ``on_breach`` from a ``loop.call_later`` timer without raising.

    Example::

        tracker = RunLimitTracker(resolve_run_limits(agent_limits, run_limits), on_breach=cb)
        tracker.start()                 # inside the running loop: arms the deadline
        try:
            tracker.charge_turn()       # raises RunLimitExceeded on a breach
        finally:
            tracker.dispose()           # cancels the timer, freezes wall time
        envelope["counters"] = tracker.export_counters()

    Args:
        limits: Resolved limits (:func:`resolve_run_limits`); unset axes fall back to the
            defaults of LIM-1.
        on_breach: Called once with the first :class:`RunLimitBreach`; sync. An exception it raises
            propagates from the charging method (from the timer it is logged on ``prism``).
        counters: Restored counters (a :class:`RunLimitCounters` or its ``to_dict()``) for a
            resumed leg; ``None`` starts from zero.
        clock: Monotonic clock in seconds (``time.monotonic``); injectable for tests.

    Raises:
        ValueError: ``counters`` has an unknown key or a negative / non-numeric value.
    """

    __slots__ = (
        "_breach",
        "_clock",
        "_cost",
        "_deadline_at",
        "_disposed",
        "_input_tokens",
        "_leg_start",
        "_limits",
        "_max_cost",
        "_max_input",
        "_max_output",
        "_max_provider_attempts",
        "_max_request_bytes",
        "_max_response_bytes",
        "_max_tool_calls",
        "_max_tool_rounds",
        "_max_total",
        "_max_turns",
        "_max_wall",
        "_on_breach",
        "_output_tokens",
        "_provider_attempts",
        "_request_bytes",
        "_response_bytes",
        "_restored_tool_rounds",
        "_timer",
        "_tool_calls",
        "_tool_rounds",
        "_total_tokens",
        "_turns",
        "_wall_base_ms",
    )

    def __init__(
        self,
        limits: RunLimits,
        *,
        on_breach: BreachCallback | None = None,
        counters: RunLimitCounters | Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limits = limits
        d = DEFAULT_RUN_LIMITS

        def pick(axis: str) -> Any:
            value = getattr(limits, axis)
            return getattr(d, axis) if value is None else value

        self._max_turns: LimitValue = pick("max_turns")
        attempts = limits.max_provider_attempts
        self._max_provider_attempts: LimitValue = (
            max(24, self._max_turns) if attempts is None else attempts
        )
        self._max_tool_rounds: LimitValue = pick("max_tool_rounds")
        self._max_tool_calls: LimitValue = pick("max_tool_calls")
        self._max_wall: LimitValue = pick("max_wall_time_ms")
        self._max_request_bytes: LimitValue = pick("max_request_bytes")
        self._max_response_bytes: LimitValue = pick("max_response_bytes")
        self._max_input: LimitValue = pick("max_input_tokens")
        self._max_output: LimitValue = pick("max_output_tokens")
        self._max_total: LimitValue = pick("max_total_tokens")
        self._max_cost: RunCost | None = limits.max_cost
        self._on_breach = on_breach
        self._clock = clock

        c = _coerce_counters(counters)
        self._turns = c.turns
        self._provider_attempts = c.provider_attempts
        self._tool_rounds = c.tool_rounds
        self._restored_tool_rounds = c.tool_rounds
        self._tool_calls = c.tool_calls
        self._wall_base_ms: float = float(c.wall_time_ms)
        self._request_bytes = c.request_bytes
        self._response_bytes = c.response_bytes
        self._input_tokens = c.input_tokens
        self._output_tokens = c.output_tokens
        self._total_tokens = c.total_tokens
        self._cost: float = c.cost

        self._breach: RunLimitBreach | None = None
        self._leg_start: float | None = None
        self._disposed = False
        self._timer: asyncio.TimerHandle | None = None
        self._deadline_at: str | None = None

    # ----------------------------------------------------------------- properties

    @property
    def limits(self) -> RunLimits:
        """The limits this tracker enforces."""
        return self._limits

    @property
    def breach(self) -> RunLimitBreach | None:
        """The first breach of the run, or ``None`` (LIM-7)."""
        return self._breach

    @property
    def on_breach(self) -> BreachCallback | None:
        """The breach callback (settable before the first charge)."""
        return self._on_breach

    @on_breach.setter
    def on_breach(self, callback: BreachCallback | None) -> None:
        self._on_breach = callback

    @property
    def wall_time_ms(self) -> int:
        """Active wall time of the run so far in whole milliseconds (restored + this leg)."""
        return int(self._wall_ms())

    @property
    def deadline_at(self) -> str | None:
        """ISO-8601 UTC wall-clock deadline of this leg (informational, DUR-4); ``None`` before
        :meth:`start` or when ``max_wall_time_ms`` is UNLIMITED."""
        return self._deadline_at

    @property
    def leg_max_tool_rounds(self) -> LimitValue:
        """Tool rounds left for this leg: ``max_tool_rounds`` minus the rounds restored from
        earlier legs, never below 0; :data:`UNLIMITED` when the axis is disabled (CON-28
        ``max_tool_rounds``)."""
        limit = self._max_tool_rounds
        if math.isinf(limit):
            return UNLIMITED
        return max(0, int(limit) - self._restored_tool_rounds)

    @property
    def counters(self) -> RunLimitCounters:
        """A snapshot of the counters, wall time included."""
        return RunLimitCounters(
            turns=self._turns,
            provider_attempts=self._provider_attempts,
            tool_rounds=self._tool_rounds,
            tool_calls=self._tool_calls,
            wall_time_ms=int(self._wall_ms()),
            request_bytes=self._request_bytes,
            response_bytes=self._response_bytes,
            input_tokens=self._input_tokens,
            output_tokens=self._output_tokens,
            total_tokens=self._total_tokens,
            cost=self._cost,
        )

    def export_counters(self) -> dict[str, Any]:
        """Return the counters as the JSON dict stored in a durable envelope (DUR-4)."""
        return self.counters.to_dict()

    # ----------------------------------------------------------------- wall time (LIM-6)

    def start(self) -> None:
        """Start counting active wall time and arm the deadline timer (LIM-6).

        Must be called from inside the running event loop. The deadline is
        ``now + max_wall_time_ms - restored wall_time_ms`` (DUR-17); with UNLIMITED no timer is
        armed but time is still counted. Idempotent; a no-op after :meth:`dispose`.
        """
        if self._leg_start is not None or self._disposed:
            return
        self._leg_start = self._clock()
        limit = self._max_wall
        if math.isinf(limit):
            return
        remaining_ms = max(0.0, float(limit) - self._wall_base_ms)
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(remaining_ms / 1000.0, self._on_deadline)
        deadline = datetime.now(UTC) + timedelta(milliseconds=remaining_ms)
        self._deadline_at = deadline.strftime("%Y-%m-%dT%H:%M:%S.") + (
            f"{deadline.microsecond // 1000:03d}Z"
        )

    def dispose(self) -> None:
        """Cancel the deadline timer and stop counting wall time (RUN-22). Idempotent."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._leg_start is not None and not self._disposed:
            self._wall_base_ms += (self._clock() - self._leg_start) * 1000.0
        self._disposed = True

    def _wall_ms(self) -> float:
        if self._leg_start is None or self._disposed:
            return self._wall_base_ms
        return self._wall_base_ms + (self._clock() - self._leg_start) * 1000.0

    def _on_deadline(self) -> None:
        self._timer = None
        if self._disposed or self._breach is not None:
            return
        observed = max(int(self._wall_ms()), int(self._max_wall))
        breach = RunLimitBreach(
            limit="max_wall_time_ms", maximum=self._max_wall, observed=observed
        )
        self._breach = breach
        callback = self._on_breach
        if callback is None:
            return
        try:
            callback(breach)
        except Exception as exc:  # a timer callback has no caller to raise to
            _log.error(
                "run limit breach callback failed: %s", type(exc).__name__
            )

    # ----------------------------------------------------------------- charge points (LIM-4)

    def _exceeded(
        self,
        limit: str,
        maximum: float,
        observed: float,
        currency: str | None = None,
    ) -> RunLimitExceeded:
        first = self._breach
        if first is not None:
            return RunLimitExceeded(first)
        breach = RunLimitBreach(limit=limit, maximum=maximum, observed=observed, currency=currency)
        self._breach = breach
        callback = self._on_breach
        if callback is not None:
            callback(breach)
        return RunLimitExceeded(breach)

    def charge_turn(self) -> None:
        """Charge ``max_turns`` by 1 at a turn boundary (TP-4 step 3).

        Raises:
            RunLimitExceeded: ``ERR_PRISM_RUN_LIMIT`` — the new count exceeds ``max_turns``.
        """
        self._turns += 1
        if self._turns > self._max_turns:
            raise self._exceeded("max_turns", self._max_turns, self._turns)

    def charge_provider_attempt(self, request_bytes: int | None = None) -> None:
        """Charge ``max_provider_attempts`` by 1, then compare one request's size (RUN-15 step 1).

        Args:
            request_bytes: UTF-8 length of ``canonical_json(request.to_dict())``; ``None`` skips
                the byte check.

        Raises:
            RunLimitExceeded: ``ERR_PRISM_RUN_LIMIT`` — attempts exceed ``max_provider_attempts``,
                or the request is larger than ``max_request_bytes``.
        """
        self._provider_attempts += 1
        if self._provider_attempts > self._max_provider_attempts:
            raise self._exceeded(
                "max_provider_attempts", self._max_provider_attempts, self._provider_attempts
            )
        if request_bytes is not None:
            self.charge_request_bytes(request_bytes)

    def charge_request_bytes(self, request_bytes: int) -> None:
        """Compare one request's UTF-8 size with ``max_request_bytes`` (per request, not summed).

        Raises:
            RunLimitExceeded: ``ERR_PRISM_RUN_LIMIT`` — the request is larger than the limit.
        """
        if request_bytes > self._request_bytes:
            self._request_bytes = request_bytes
        if request_bytes > self._max_request_bytes:
            raise self._exceeded("max_request_bytes", self._max_request_bytes, request_bytes)

    def charge_response_bytes(self, event_bytes: int) -> None:
        """Compare one provider stream event's UTF-8 size with ``max_response_bytes`` (RUN-15
        step 4; per event, not summed).

        Raises:
            RunLimitExceeded: ``ERR_PRISM_RUN_LIMIT`` — the event is larger than the limit.
        """
        if event_bytes > self._response_bytes:
            self._response_bytes = event_bytes
        if event_bytes > self._max_response_bytes:
            raise self._exceeded("max_response_bytes", self._max_response_bytes, event_bytes)

    def charge_tool_round(self) -> None:
        """Charge ``max_tool_rounds`` by 1 for a non-empty round (``ctx.charge_tool_round``).

        Raises:
            RunLimitExceeded: ``ERR_PRISM_RUN_LIMIT`` — rounds exceed ``max_tool_rounds``.
        """
        self._tool_rounds += 1
        if self._tool_rounds > self._max_tool_rounds:
            raise self._exceeded("max_tool_rounds", self._max_tool_rounds, self._tool_rounds)

    def charge_tool_call(self) -> None:
        """Charge ``max_tool_calls`` by 1 at the start of a dispatch (TOOL-3 step 1).

        Raises:
            RunLimitExceeded: ``ERR_PRISM_RUN_LIMIT`` — calls exceed ``max_tool_calls``.
        """
        self._tool_calls += 1
        if self._tool_calls > self._max_tool_calls:
            raise self._exceeded("max_tool_calls", self._max_tool_calls, self._tool_calls)

    def charge_usage(self, usage: Usage | None) -> None:
        """Charge one provider attempt's usage (USAGE-1, LIM-5); call it also when ``None``.

        Token counts are added to ``input_tokens``, ``output_tokens`` and ``total_tokens``
        (reported total, else input + output); the axes are then checked in that order. When
        ``max_cost`` is set, a missing usage, a usage without ``cost`` or one in another currency
        breaches ``max_cost`` at once with ``observed = inf``; otherwise the cost is summed and
        compared.

        Raises:
            RunLimitExceeded: ``ERR_PRISM_RUN_LIMIT`` — a token or cost axis was exceeded.
        """
        if usage is not None:
            inp = usage.input_tokens
            out = usage.output_tokens
            if inp is not None:
                self._input_tokens += inp
            if out is not None:
                self._output_tokens += out
            total = usage.total_tokens
            if total is None and (inp is not None or out is not None):
                total = (inp or 0) + (out or 0)
            if total is not None:
                self._total_tokens += total
            if self._input_tokens > self._max_input:
                raise self._exceeded("max_input_tokens", self._max_input, self._input_tokens)
            if self._output_tokens > self._max_output:
                raise self._exceeded("max_output_tokens", self._max_output, self._output_tokens)
            if self._total_tokens > self._max_total:
                raise self._exceeded("max_total_tokens", self._max_total, self._total_tokens)
        cap = self._max_cost
        if cap is None:
            if usage is not None and usage.cost is not None:
                self._cost += usage.cost
            return
        if usage is None or usage.cost is None or usage.currency != cap.currency:
            raise self._exceeded("max_cost", cap.amount, math.inf, cap.currency)
        self._cost += usage.cost
        if self._cost > cap.amount:
            raise self._exceeded("max_cost", cap.amount, self._cost, cap.currency)
