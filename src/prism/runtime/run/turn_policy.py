"""Turn policy: clean host stops at provider-turn boundaries.

A [`TurnPolicy`][prism.runtime.run.turn_policy.TurnPolicy] lets a host end a run **cleanly** — "stop when the agent has done enough".
It is evaluated at the turn boundary: after the previous turn's tool results and any drained
steers are in the store, before the next provider request. A stop is a successful outcome
(``status="succeeded"``, ``stop_reason="host_policy"`` or ``"turn_limit"``), never a failure and
never a limit breach.

* [`TurnPolicy`][prism.runtime.run.turn_policy.TurnPolicy] — ``max_turns`` (a clean cap) and ``stop`` (a synchronous callback);
* [`TurnBoundaryContext`][prism.runtime.run.turn_policy.TurnBoundaryContext] — the counters the callback sees (never prompt text, tool arguments
  or results);
* [`Continue`][prism.runtime.run.turn_policy.Continue] / [`Stop`][prism.runtime.run.turn_policy.Stop] — the decisions (``{"action": "continue"}`` and
  ``{"action": "stop", "reason": ...}`` are accepted too);
* [`resolve_turn_policy()`][prism.runtime.run.turn_policy.resolve_turn_policy] — preflight validation;
* [`evaluate_turn_policy()`][prism.runtime.run.turn_policy.evaluate_turn_policy] — one boundary evaluation.

Example::

    policy = TurnPolicy(
        max_turns=4,
        stop=lambda ctx: Stop("first plan") if ctx.turns >= 1 and ctx.tool_calls >= 1
        else Continue(),
    )
    result = await session.run("Investigate the churn spike", turn_policy=policy)
    assert result.status == "succeeded" and result.stop_reason in ("host_policy", "turn_limit", None)
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from prism._keys import reject_unknown_keys
from prism._serde import Serializable
from prism.errors import PrismConfigError, TurnPolicyError
from prism.redaction import SecretRedactor, redacted_cause
from prism.types import RunStopReason, Usage

__all__ = [
    "MAX_STOP_DETAIL_BYTES",
    "Continue",
    "Stop",
    "TurnBoundaryContext",
    "TurnDecision",
    "TurnPolicy",
    "TurnPolicyStop",
    "TurnStopCallback",
    "coerce_turn_policy",
    "evaluate_turn_policy",
    "resolve_turn_policy",
]

MAX_STOP_DETAIL_BYTES: Final = 256
"""Most UTF-8 bytes of a redacted ``Stop.reason``."""

_POLICY_KEYS: Final = frozenset(("max_turns", "stop"))


# --------------------------------------------------------------------------- decisions


@dataclass(frozen=True, slots=True)
class Continue(Serializable):
    """Decision: go on with the next provider turn. Same as ``{"action": "continue"}``."""

    action: Literal["continue"] = field(default="continue", init=False)
    """Discriminator, always ``"continue"``."""


@dataclass(frozen=True, slots=True)
class Stop(Serializable):
    """Decision: end the run cleanly at this boundary.

    Same as ``{"action": "stop", "reason": ...}``. The run returns ``status="succeeded"`` with
    ``stop_reason="host_policy"`` and ``stop_detail`` = the redacted ``reason``.
    """

    reason: str
    """Why the host stopped the run: a non-blank string of at most 256 UTF-8 bytes after
    redaction (otherwise the run fails with ``ERR_PRISM_TURN_POLICY``)."""
    action: Literal["stop"] = field(default="stop", init=False)
    """Discriminator, always ``"stop"``."""


TurnDecision: TypeAlias = Continue | Stop
"""What a stop callback returns: [`Continue`][prism.runtime.run.turn_policy.Continue] or [`Stop`][prism.runtime.run.turn_policy.Stop] (or their mapping forms)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnBoundaryContext:
    """What a stop callback sees at a turn boundary. Counters and identity only.

    It never carries prompt text, tool arguments or tool results.
    """

    session_id: str
    """Session of the run."""
    run_id: str
    """Run being evaluated."""
    turn: int
    """1-based index of the provider turn this boundary precedes (``turns + 1``)."""
    turns: int
    """Provider turns completed in this leg (returned ``generate`` calls); ``0`` at the first
    boundary."""
    tool_calls: int
    """Host tool calls that reached the dispatcher in this leg (approval-gated markers and sticky
    rejections excluded)."""
    usage: Usage | None
    """The run's aggregated usage so far; ``None`` when no provider reported any."""
    metadata: Mapping[str, Any]
    """The run metadata (read-only)."""


TurnStopCallback: TypeAlias = Callable[[TurnBoundaryContext], Any]
"""``stop(ctx) -> TurnDecision`` — synchronous; called once per boundary."""


# --------------------------------------------------------------------------- the policy


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnPolicy:
    """How a host ends a run cleanly at provider-turn boundaries.

    Pass it as ``session.run(..., turn_policy=TurnPolicy(...))``; a mapping with the keys
    ``max_turns``/``stop`` is accepted too. Checked in preflight: ``max_turns`` must be an
    ``int`` ≥ 1 that does not exceed the resolved ``limits.max_turns``; ``stop`` must be callable.

    Example::

        TurnPolicy(max_turns=3, stop=lambda ctx: Stop("enough") if ctx.tool_calls else Continue())
    """

    max_turns: int | None = None
    """Clean turn cap: at the boundary where ``turns >= max_turns`` the run stops with
    ``stop_reason="turn_limit"``, ``stop_detail="max_turns"`` (never ``AgentRunLimitError``).
    ``None``: no cap of its own."""
    stop: TurnStopCallback | None = None
    """Synchronous callback consulted once per boundary when the cap did not stop the run. ``None``:
    never consulted."""


def _fmt_limit(value: Any) -> str:
    if isinstance(value, float) and math.isinf(value):
        return "unlimited"
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def coerce_turn_policy(value: object) -> TurnPolicy | None:
    """Convert a ``turn_policy`` option to [`TurnPolicy`][prism.runtime.run.turn_policy.TurnPolicy]. No value checks.

    Args:
        value: ``None``, a [`TurnPolicy`][prism.runtime.run.turn_policy.TurnPolicy], or a mapping with the keys ``max_turns``/``stop``.

    Returns:
        The policy, or ``None``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — neither a ``TurnPolicy`` nor a mapping, or an
            unknown mapping key (``maxTurns`` is reported with its snake_case name).
    """
    if value is None or isinstance(value, TurnPolicy):
        return value
    if not isinstance(value, Mapping):
        raise PrismConfigError(
            f"turn_policy must be a TurnPolicy or a mapping, got {type(value).__name__}"
        )
    reject_unknown_keys("turn_policy", value, _POLICY_KEYS)
    return TurnPolicy(max_turns=value.get("max_turns"), stop=value.get("stop"))


def resolve_turn_policy(
    value: object, *, max_turns_limit: float | None = None
) -> TurnPolicy | None:
    """Validate a run's ``turn_policy`` option. No side effects.

    Args:
        value: ``None``, a [`TurnPolicy`][prism.runtime.run.turn_policy.TurnPolicy], or a mapping with the keys ``max_turns``/``stop``
            (converted with [`coerce_turn_policy()`][prism.runtime.run.turn_policy.coerce_turn_policy]).
        max_turns_limit: The resolved ``limits.max_turns`` (a count or ``UNLIMITED``); ``None``
            skips the widening check.

    Returns:
        The [`TurnPolicy`][prism.runtime.run.turn_policy.TurnPolicy], or ``None`` when ``value`` is ``None``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — ``value`` is neither a ``TurnPolicy`` nor a
            mapping; a mapping key is unknown; ``stop`` is set and not callable; ``max_turns`` is
            set and not an ``int`` ≥ 1 (``bool`` rejected); ``max_turns`` is greater than the
            resolved limit (message ``turn_policy.max_turns (<n>) cannot widen limits.max_turns
            (<m>)``).
    """
    policy = coerce_turn_policy(value)
    if policy is None:
        return None
    stop = policy.stop
    if stop is not None and not callable(stop):
        raise PrismConfigError("turn_policy.stop must be callable")
    cap = policy.max_turns
    if cap is not None:
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise PrismConfigError(f"turn_policy.max_turns must be an int >= 1, got {cap!r}")
        if max_turns_limit is not None and cap > max_turns_limit:
            raise PrismConfigError(
                f"turn_policy.max_turns ({cap}) cannot widen limits.max_turns "
                f"({_fmt_limit(max_turns_limit)})"
            )
    return policy


# --------------------------------------------------------------------------- evaluation


class TurnPolicyStop(Exception):
    """Internal, sticky control signal: the turn policy stopped the run at a boundary.

    Raised from ``ctx.assemble``/``ctx.generate``; the runtime takes the success path with
    [`stop_reason`][prism.runtime.run.turn_policy.TurnPolicyStop.stop_reason] and [`stop_detail`][prism.runtime.run.turn_policy.TurnPolicyStop.stop_detail]. Never surfaced to callers.

    Attributes:
        stop_reason: ``"host_policy"`` or ``"turn_limit"``.
        stop_detail: The redacted host reason, or ``"max_turns"`` for the cap.
        turn: The boundary's turn index.
    """

    def __init__(self, stop_reason: RunStopReason, stop_detail: str, turn: int) -> None:
        super().__init__(f"turn policy stop ({stop_reason}) at turn {turn}")
        self.stop_reason: RunStopReason = stop_reason
        self.stop_detail = stop_detail
        self.turn = turn


def _malformed(what: str) -> TurnPolicyError:
    return TurnPolicyError(f"turn policy stop callback {what}")


def evaluate_turn_policy(
    policy: TurnPolicy,
    context: TurnBoundaryContext,
    *,
    redactor: SecretRedactor | None = None,
) -> TurnPolicyStop | None:
    """Evaluate ``policy`` at one boundary.

    Steps: when ``max_turns`` is set and ``context.turns >= max_turns``, stop with
    ``turn_limit``/``"max_turns"`` without consulting the callback; otherwise call ``stop`` once,
    synchronously. ``Continue()`` (or ``{"action": "continue"}``) continues; ``Stop(reason)``
    (or ``{"action": "stop", "reason": ...}``) stops with ``host_policy`` and the redacted reason.

    Args:
        policy: The validated policy ([`resolve_turn_policy()`][prism.runtime.run.turn_policy.resolve_turn_policy]).
        context: The boundary context.
        redactor: The run's active redactor, applied to the stop reason.

    Returns:
        ``None`` to continue, else the [`TurnPolicyStop`][prism.runtime.run.turn_policy.TurnPolicyStop] signal for the runtime to raise.

    Raises:
        TurnPolicyError: ``ERR_PRISM_TURN_POLICY`` — the callback raised (the exception is
            ``__cause__``); returned an awaitable (a coroutine is closed unawaited), ``None``,
            another object or a mapping with another ``action``/other keys; or a stop reason that
            is not a ``str``, is blank, or is longer than 256 UTF-8 bytes after redaction.
    """
    cap = policy.max_turns
    if cap is not None and context.turns >= cap:
        return TurnPolicyStop("turn_limit", "max_turns", context.turn)
    stop = policy.stop
    if stop is None:
        return None
    failure: Exception | None = None
    try:
        decision = stop(context)
    except Exception as exc:
        failure = exc
    if failure is not None:  # raised outside the handler: no raw ``__context__``
        raise TurnPolicyError(
            f"turn policy stop callback raised {type(failure).__name__}"
        ) from redacted_cause(failure, redactor)
    if inspect.isawaitable(decision):
        close = getattr(decision, "close", None)
        if inspect.iscoroutine(decision) and callable(close):
            close()
        raise _malformed("returned an awaitable; it must be synchronous")
    reason: Any
    if isinstance(decision, Continue):
        return None
    if isinstance(decision, Stop):
        reason = decision.reason
    elif isinstance(decision, Mapping):
        action = decision.get("action")
        keys = set(decision)
        if action == "continue" and keys == {"action"}:
            return None
        if action != "stop" or not keys <= {"action", "reason"}:
            raise _malformed("returned a malformed decision mapping")
        reason = decision.get("reason")
    else:
        raise _malformed(f"returned {type(decision).__name__}, not Continue() or Stop(reason)")
    if not isinstance(reason, str) or not reason.strip():
        raise _malformed("returned a stop reason that is not a non-blank string")
    detail = redactor.redact(reason) if redactor is not None else reason
    size = len(detail.encode("utf-8"))
    if size > MAX_STOP_DETAIL_BYTES:
        raise _malformed(
            f"returned a stop reason of {size} UTF-8 bytes (at most {MAX_STOP_DETAIL_BYTES})"
        )
    return TurnPolicyStop("host_policy", detail, context.turn)
