"""Run limit tracker: a run's counters, charged at each limit point, and the first breach.

[`RunLimitTracker`][prism.limits.tracker.RunLimitTracker] holds a run's counters, charges them when a turn starts, a provider
attempt is made, a tool round or tool call runs and usage is reported, records the first breach
once and arms the wall-time deadline. Its counters ([`RunLimitCounters`][prism.limits.tracker.RunLimitCounters]) are exported to
and restored from a JSON dict, so a durable run resumed in a later leg keeps counting where the
previous leg stopped.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
import math
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from prism._keys import reject_unknown_keys
from prism._serde import Serializable
from prism.errors import RunLimitExceeded
from prism.limits.options import (
    DEFAULT_RUN_LIMITS,
    NUMERIC_LIMIT_AXES,
    UNLIMITED,
    LimitValue,
    RunCost,
    RunLimits,
)
from prism.types import DelegatingRun, JsonValue, RunLimitBreach, Usage

__all__ = ["BreachCallback", "RunLimitCounters", "RunLimitTracker", "coerce_counters"]

_log = logging.getLogger("prism")

# --------------------------------------------------------------------------- counters


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLimitCounters(Serializable):
    """A snapshot of a run's limit counters, cumulative across legs.

    Its ``to_dict()`` is the ``counters`` object of a durable envelope; pass that dict (or this
    value) back as ``RunLimitTracker(counters=...)`` on a resumed leg.
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
    """Active wall-clock time in milliseconds (suspended time excluded)."""
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


_D: Final[dict[str, LimitValue]] = {
    axis: getattr(DEFAULT_RUN_LIMITS, axis) for axis in NUMERIC_LIMIT_AXES
}
"""The default of each axis, which a tracker reads when neither layer set it."""


def _or_default(value: LimitValue | None, name: str) -> LimitValue:
    """``value``, or the default of the limit called ``name`` when it is unset."""
    return _D[name] if value is None else value


def coerce_counters(value: RunLimitCounters | Mapping[str, Any] | None) -> RunLimitCounters:
    """The counters a tracker starts from (``None``: zero), checked.

    Raises:
        PrismConfigError: an unknown key.
        TypeError: not a mapping.
        ValueError: a counter is negative or not a number (``cost`` may be fractional).
    """
    if value is None:
        return RunLimitCounters()
    if isinstance(value, RunLimitCounters):
        counters = value
    elif isinstance(value, Mapping):
        reject_unknown_keys("limit counter", value, _COUNTER_FIELDS)
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


# --------------------------------------------------------------------------- deadline timer


class _LoopDeadlines:
    """The wall-time deadlines of the trackers started on one event loop, behind one timer.

    A tracker registers its deadline (in ``loop.time()`` seconds, with a copy of the context it
    starts in) when it starts and removes it when it is disposed: two dictionary operations. The
    loop holds one timer, armed for the earliest deadline registered since it last fired; when it
    fires, every registered deadline up to its time is due (each such tracker's
    ``_on_deadline()`` is called in its own context, as a timer of its own would have called it,
    in registration order) and the timer is armed again for the earliest deadline left. A deadline earlier than the armed
    one arms an earlier timer; the later one then finds itself superseded and does nothing. A
    timer whose trackers were all disposed meanwhile fires once with nothing due.

    One timer per loop instead of one per run: a run of a few hundred microseconds would
    otherwise create, schedule and cancel a timer (with a copy of its context) for a deadline
    minutes away, and cancelled timers stay in the loop's heap until the loop next looks at it.
    Nothing here refers to the loop (its timers do), so a closed loop is freed with its entry.
    """

    __slots__ = ("_armed_at", "_due")

    def __init__(self) -> None:
        self._due: dict[RunLimitTracker, tuple[float, contextvars.Context]] = {}
        self._armed_at = math.inf
        """The time the newest timer is armed for (``inf``: none pending)."""

    def add(
        self, loop: asyncio.AbstractEventLoop, tracker: RunLimitTracker, when: float
    ) -> _LoopDeadlines:
        """Register ``tracker``'s deadline ``when`` (``loop.time()`` seconds), to be called in
        the current context; returns ``self``."""
        self._due[tracker] = (when, contextvars.copy_context())
        if when < self._armed_at:
            self._armed_at = when
            loop.call_at(when, self._fire, when)
        return self

    def remove(self, tracker: RunLimitTracker) -> None:
        """Forget ``tracker``'s deadline (no-op when it is not registered)."""
        self._due.pop(tracker, None)

    def _fire(self, armed_at: float) -> None:
        if armed_at != self._armed_at:
            return  # superseded by an earlier timer, which fired first
        self._armed_at = math.inf
        due = self._due
        passed = [
            (tracker, context) for tracker, (when, context) in due.items() if when <= armed_at
        ]
        for tracker, _ in passed:
            del due[tracker]
        for tracker, context in passed:
            try:
                context.run(tracker._on_deadline)
            except Exception:  # one tracker's failure does not cost the others their deadline
                _log.exception("run deadline callback failed")
        if due and self._armed_at == math.inf:
            when = min(when for when, _ in due.values())
            self._armed_at = when
            asyncio.get_running_loop().call_at(when, self._fire, when)


_DEADLINES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopDeadlines] = (
    weakref.WeakKeyDictionary()
)


def _loop_deadlines(loop: asyncio.AbstractEventLoop) -> _LoopDeadlines:
    """The deadlines of ``loop``, made on first use and dropped with the loop (a loop that
    takes no weak reference gets a timer per tracker instead)."""
    try:
        deadlines = _DEADLINES.get(loop)
        if deadlines is None:
            deadlines = _DEADLINES[loop] = _LoopDeadlines()
    except TypeError:
        return _LoopDeadlines()
    return deadlines


# --------------------------------------------------------------------------- tracker


BreachCallback: TypeAlias = Callable[[RunLimitBreach], object]
"""``on_breach(breach)``: called once, synchronously, with the run's first breach."""


class RunLimitTracker:
    """Counts a run's usage against its resolved limits.

    One tracker per run leg. Counters are cumulative across the legs of a durable run: a resumed
    leg passes the envelope's ``counters`` back in. Every ``charge_*`` method costs O(1).

    The first breach of the run is recorded as [`breach`][prism.limits.tracker.RunLimitExceeded.breach], then ``on_breach(breach)``
    is called synchronously exactly once — the runtime uses it to emit ``run_limit_exceeded`` and
    abort the run signal with ``RunLimitExceeded(breach)`` — and the charging method raises
    [`RunLimitExceeded`][prism.errors.RunLimitExceeded]. Later breaches call nothing and raise
    ``RunLimitExceeded`` carrying the first breach. The wall-time deadline records the
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
        limits: Resolved limits (``resolve_run_limits()``); unset axes fall back to the
            defaults of [`DEFAULT_RUN_LIMITS`][prism.limits.DEFAULT_RUN_LIMITS].
        on_breach: Called once with the first [`RunLimitBreach`][prism.limits.tracker.RunLimitBreach]; sync. An exception it raises
            propagates from the charging method (from the timer it is logged on ``prism``).
        counters: Restored counters (a [`RunLimitCounters`][prism.limits.tracker.RunLimitCounters] or its ``to_dict()``) for a
            resumed leg; ``None`` starts from zero.
        clock: Monotonic clock in seconds (``time.monotonic``); injectable for tests.
        parent: The run that delegated this one: every turn, tool call and usage is charged to
            its budget first (its breach becomes this tracker's first breach, reported through
            ``on_breach`` and raised), then to this tracker's own limits.

    Raises:
        PrismConfigError: ``counters`` has an unknown key (reported as a ``ValueError`` too).
        ValueError: a counter is negative or not a number.
    """

    __slots__ = (
        "_breach",
        "_clock",
        "_cost",
        "_deadline_at",
        "_deadline_epoch",
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
        "_parent",
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
        parent: DelegatingRun | None = None,
    ) -> None:
        self._limits = limits
        self._parent = parent
        self._max_turns: LimitValue = _or_default(limits.max_turns, "max_turns")
        v = limits.max_provider_attempts
        self._max_provider_attempts: LimitValue = max(24, self._max_turns) if v is None else v
        self._max_tool_rounds = _or_default(limits.max_tool_rounds, "max_tool_rounds")
        self._max_tool_calls = _or_default(limits.max_tool_calls, "max_tool_calls")
        self._max_wall = _or_default(limits.max_wall_time_ms, "max_wall_time_ms")
        self._max_request_bytes = _or_default(limits.max_request_bytes, "max_request_bytes")
        self._max_response_bytes = _or_default(limits.max_response_bytes, "max_response_bytes")
        self._max_input = _or_default(limits.max_input_tokens, "max_input_tokens")
        self._max_output = _or_default(limits.max_output_tokens, "max_output_tokens")
        self._max_total = _or_default(limits.max_total_tokens, "max_total_tokens")
        self._max_cost: RunCost | None = limits.max_cost
        self._on_breach = on_breach
        self._clock = clock

        if counters is None:  # a fresh run: every counter at zero
            self._turns = self._provider_attempts = self._tool_rounds = 0
            self._restored_tool_rounds = self._tool_calls = 0
            self._request_bytes = self._response_bytes = 0
            self._input_tokens = self._output_tokens = self._total_tokens = 0
            self._wall_base_ms: float = 0.0
            self._cost: float = 0.0
        else:
            c = coerce_counters(counters)
            self._turns = c.turns
            self._provider_attempts = c.provider_attempts
            self._tool_rounds = c.tool_rounds
            self._restored_tool_rounds = c.tool_rounds
            self._tool_calls = c.tool_calls
            self._wall_base_ms = float(c.wall_time_ms)
            self._request_bytes = c.request_bytes
            self._response_bytes = c.response_bytes
            self._input_tokens = c.input_tokens
            self._output_tokens = c.output_tokens
            self._total_tokens = c.total_tokens
            self._cost = c.cost

        self._breach: RunLimitBreach | None = None
        self._leg_start: float | None = None
        self._disposed = False
        self._timer: _LoopDeadlines | None = None
        """The deadlines of the event loop this tracker's deadline is registered with."""
        self._deadline_at: str | None = None
        self._deadline_epoch: float | None = None

    # ----------------------------------------------------------------- properties

    @property
    def limits(self) -> RunLimits:
        """The limits this tracker enforces."""
        return self._limits

    @property
    def breach(self) -> RunLimitBreach | None:
        """The first breach of the run, or ``None``."""
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
        """ISO-8601 UTC wall-clock deadline of this leg (informational); ``None`` before
        [`start()`][prism.limits.tracker.RunLimitTracker.start] or when ``max_wall_time_ms`` is UNLIMITED."""
        text = self._deadline_at
        epoch = self._deadline_epoch
        if text is None and epoch is not None:  # written out when first read
            from datetime import UTC, datetime  # only here: not imported at start-up

            deadline = datetime.fromtimestamp(epoch, UTC)
            text = self._deadline_at = deadline.strftime("%Y-%m-%dT%H:%M:%S.") + (
                f"{deadline.microsecond // 1000:03d}Z"
            )
        return text

    @property
    def tool_rounds(self) -> int:
        """Tool rounds charged so far in the whole run (earlier legs included)."""
        return self._tool_rounds

    @property
    def leg_max_tool_rounds(self) -> LimitValue:
        """Tool rounds left for this leg: ``max_tool_rounds`` minus the rounds restored from
        earlier legs, never below 0; [`UNLIMITED`][prism.limits.tracker.UNLIMITED] when the axis is disabled (the
        value ``LoopContext.max_tool_rounds`` reports)."""
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

    def export_counters(self) -> dict[str, JsonValue]:
        """Return the counters as the JSON dict stored in a durable envelope:
        ``counters.to_dict()``, built straight from the tracker's numbers (a durable run writes
        it with every envelope, several times a turn)."""
        return {
            "turns": self._turns,
            "provider_attempts": self._provider_attempts,
            "tool_rounds": self._tool_rounds,
            "tool_calls": self._tool_calls,
            "wall_time_ms": int(self._wall_ms()),
            "request_bytes": self._request_bytes,
            "response_bytes": self._response_bytes,
            "input_tokens": self._input_tokens,
            "output_tokens": self._output_tokens,
            "total_tokens": self._total_tokens,
            "cost": self._cost,
        }

    # ----------------------------------------------------------------- wall time

    def start(self) -> None:
        """Start counting active wall time and arm the deadline timer.

        Must be called from inside the running event loop. The deadline is
        ``now + max_wall_time_ms - restored wall_time_ms``; with UNLIMITED no timer is
        armed but time is still counted. Idempotent; a no-op after [`dispose()`][prism.limits.tracker.RunLimitTracker.dispose].
        """
        if self._leg_start is not None or self._disposed:
            return
        self._leg_start = self._clock()
        limit = self._max_wall
        if math.isinf(limit):
            return
        remaining_s = max(0.0, float(limit) - self._wall_base_ms) / 1000.0
        loop = asyncio.get_running_loop()
        self._timer = _loop_deadlines(loop).add(loop, self, loop.time() + remaining_s)
        self._deadline_epoch = time.time() + remaining_s

    def dispose(self) -> None:
        """Cancel the deadline timer and stop counting wall time. Idempotent."""
        deadlines = self._timer
        if deadlines is not None:
            deadlines.remove(self)
            self._timer = None
        if self._leg_start is not None and not self._disposed:
            self._wall_base_ms += (self._clock() - self._leg_start) * 1000.0
        self._disposed = True

    def _wall_ms(self) -> float:
        if self._leg_start is None or self._disposed:
            return self._wall_base_ms
        return self._wall_base_ms + (self._clock() - self._leg_start) * 1000.0

    def _on_deadline(self) -> None:
        """The deadline passed (called once, by the loop's deadline timer)."""
        self._timer = None
        if self._disposed or self._breach is not None:
            return
        observed = max(int(self._wall_ms()), int(self._max_wall))
        breach = RunLimitBreach(limit="max_wall_time_ms", maximum=self._max_wall, observed=observed)
        self._breach = breach
        callback = self._on_breach
        if callback is None:
            return
        try:
            callback(breach)
        except Exception as exc:  # a timer callback has no caller to raise to
            _log.error("run limit breach callback failed: %s", type(exc).__name__)

    # ----------------------------------------------------------------- charge points

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

    def _parent_breach(self, exc: RunLimitExceeded) -> RunLimitExceeded:
        """The parent's breach becomes this run's first breach (``on_breach`` called once)."""
        if self._breach is None:
            self._breach = exc.breach
            callback = self._on_breach
            if callback is not None:
                callback(exc.breach)
        return RunLimitExceeded(self._breach)

    def charge_turn(self) -> None:
        """Charge ``max_turns`` by 1 at a turn boundary (the parent's budget first).

        Raises:
            RunLimitExceeded: ``ERR_PRISM_RUN_LIMIT`` — the new count exceeds ``max_turns``.
        """
        parent = self._parent
        if parent is not None:
            try:
                parent.charge_turn()
            except RunLimitExceeded as exc:
                raise self._parent_breach(exc) from None
        self._turns += 1
        if self._turns > self._max_turns:
            raise self._exceeded("max_turns", self._max_turns, self._turns)

    def charge_provider_attempt(self, request_bytes: int | None = None) -> None:
        """Charge ``max_provider_attempts`` by 1, then compare one request's size.

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
        """Compare one provider stream event's UTF-8 size with ``max_response_bytes``
        (per event, not summed).

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
        """Charge ``max_tool_calls`` by 1 at the start of a dispatch.

        Raises:
            RunLimitExceeded: ``ERR_PRISM_RUN_LIMIT`` — calls exceed ``max_tool_calls``.
        """
        parent = self._parent
        if parent is not None:
            try:
                parent.charge_tool_call()
            except RunLimitExceeded as exc:
                raise self._parent_breach(exc) from None
        self._tool_calls += 1
        if self._tool_calls > self._max_tool_calls:
            raise self._exceeded("max_tool_calls", self._max_tool_calls, self._tool_calls)

    def refund_tool_call(self) -> None:
        """Take back one [`charge_tool_call()`][prism.limits.tracker.DelegatingRun.charge_tool_call] (of this run and its parents): the call was
        held without running (an approval asked for it; its replay is charged)."""
        refund = getattr(self._parent, "refund_tool_call", None)
        if refund is not None:
            refund()
        if self._tool_calls > 0:
            self._tool_calls -= 1

    def charge_usage(self, usage: Usage | None) -> None:
        """Charge one provider attempt's usage; call it also when ``None``.

        Token counts are added to ``input_tokens``, ``output_tokens`` and ``total_tokens``
        (reported total, else input + output); the axes are then checked in that order. When
        ``max_cost`` is set, a missing usage, a usage without ``cost`` or one in another currency
        breaches ``max_cost`` at once with ``observed = inf``; otherwise the cost is summed and
        compared.

        Raises:
            RunLimitExceeded: ``ERR_PRISM_RUN_LIMIT`` — a token or cost axis was exceeded.
        """
        parent = self._parent
        if parent is not None:
            try:
                parent.charge_usage(usage)
            except RunLimitExceeded as exc:
                raise self._parent_breach(exc) from None
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
