"""Run limits: options, resolution and the tracker (LIM-1..LIM-9)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from prism.errors import PrismConfigError, RunLimitExceeded
from prism.limits import (
    DEFAULT_RUN_LIMITS,
    MAX_BYTES_LIMIT,
    UNLIMITED,
    RunCost,
    RunLimitCounters,
    RunLimits,
    RunLimitTracker,
    coerce_run_limits,
    resolve_run_limits,
    sets_finite_output_budget,
)
from prism.types import RunLimitBreach, Usage

MIB = 1024 * 1024


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def tracker(breaches: list[RunLimitBreach] | None = None, **limits: Any) -> RunLimitTracker:
    sink = breaches if breaches is not None else []
    return RunLimitTracker(resolve_run_limits(RunLimits(**limits)), on_breach=sink.append)


# --------------------------------------------------------------------------- LIM-1 defaults


def test_lim1_defaults_when_no_layer_sets_anything() -> None:
    """LIM-1: turns 16, attempts 24, rounds 8, calls 32, wall 600 000 ms, bytes 8 MiB."""
    r = resolve_run_limits(None, None)
    assert r.max_turns == 16
    assert r.max_provider_attempts == 24
    assert r.max_tool_rounds == 8
    assert r.max_tool_calls == 32
    assert r.max_wall_time_ms == 600_000
    assert r.max_request_bytes == 8 * MIB
    assert r.max_response_bytes == 8 * MIB
    assert r.max_input_tokens == UNLIMITED
    assert r.max_output_tokens == UNLIMITED
    assert r.max_total_tokens == UNLIMITED
    assert r.max_cost is None


def test_lim1_provider_attempts_default_is_max_of_24_and_turns() -> None:
    """LIM-1: unset attempts resolve to max(24, max_turns)."""
    assert resolve_run_limits(RunLimits(max_turns=30)).max_provider_attempts == 30
    assert resolve_run_limits(RunLimits(max_turns=3)).max_provider_attempts == 24
    assert resolve_run_limits(None, RunLimits(max_turns=40)).max_provider_attempts == 40


def test_lim1_provider_attempts_below_turns_are_raised_to_turns() -> None:
    """LIM-1: an attempts value below the resolved finite max_turns is raised to it."""
    r = resolve_run_limits(RunLimits(max_provider_attempts=5))
    assert r.max_provider_attempts == 16
    r = resolve_run_limits(RunLimits(max_turns=10, max_provider_attempts=12))
    assert r.max_provider_attempts == 12


def test_lim1_attempts_not_raised_when_turns_unlimited() -> None:
    """LIM-1: the raise applies only while max_turns is finite."""
    r = resolve_run_limits(RunLimits(max_turns=UNLIMITED, max_provider_attempts=5))
    assert r.max_provider_attempts == 5
    r = resolve_run_limits(RunLimits(max_turns=UNLIMITED))
    assert r.max_provider_attempts == UNLIMITED


def test_lim1_an_axis_set_on_one_layer_takes_that_value() -> None:
    """LIM-1/LIM-3: an axis set on one layer takes that value, otherwise the default."""
    r = resolve_run_limits(RunLimits(max_tool_calls=5), RunLimits(max_tool_rounds=2))
    assert r.max_tool_calls == 5
    assert r.max_tool_rounds == 2
    assert r.max_turns == 16


# --------------------------------------------------------------------------- LIM-2 validation


@pytest.mark.parametrize(
    "field,value",
    [
        ("max_turns", 0),
        ("max_turns", -1),
        ("max_turns", True),
        ("max_turns", 1.5),
        ("max_turns", 2.0),
        ("max_turns", "3"),
        ("max_turns", -math.inf),
        ("max_turns", math.nan),
        ("max_tool_calls", False),
        ("max_wall_time_ms", 0),
        ("max_total_tokens", 0),
        ("max_request_bytes", 0),
        ("max_request_bytes", MAX_BYTES_LIMIT + 1),
        ("max_response_bytes", UNLIMITED),
        ("max_request_bytes", 1.0),
        ("max_response_bytes", True),
    ],
)
def test_lim2_invalid_values_raise_config_error(field: str, value: Any) -> None:
    """LIM-2: integer limits are ints >= 1 or UNLIMITED; bytes are ints <= 64 MiB."""
    with pytest.raises(PrismConfigError) as info:
        resolve_run_limits(RunLimits(**{field: value}))
    assert field in str(info.value)
    assert info.value.code == "ERR_PRISM_CONFIG"
    with pytest.raises(PrismConfigError):
        resolve_run_limits(None, {field: value})


def test_lim2_bytes_limit_of_exactly_64_mib_is_accepted() -> None:
    """LIM-2: 64 MiB is the maximum, inclusive."""
    r = resolve_run_limits(RunLimits(max_request_bytes=64 * MIB, max_response_bytes=1))
    assert r.max_request_bytes == 64 * MIB
    assert r.max_response_bytes == 1


@pytest.mark.parametrize(
    "cost",
    [
        RunCost(-1, "USD"),
        RunCost(math.inf, "USD"),
        RunCost(math.nan, "USD"),
        RunCost(True, "USD"),  # type: ignore[arg-type]
        RunCost(1, ""),
        RunCost(1, "   "),
        RunCost(1, None),  # type: ignore[arg-type]
    ],
)
def test_lim2_invalid_cost_raises(cost: RunCost) -> None:
    """LIM-2: max_cost.amount finite and >= 0, currency non-blank."""
    with pytest.raises(PrismConfigError, match="max_cost"):
        resolve_run_limits(RunLimits(max_cost=cost))


def test_lim2_construction_never_validates() -> None:
    """LIM-2: errors are raised where limits are used, not when RunLimits is constructed."""
    bad = RunLimits(max_turns=0, max_cost=RunCost(-1, ""))
    assert bad.max_turns == 0
    with pytest.raises(PrismConfigError):
        resolve_run_limits(bad)


def test_lim2_dataclass_and_mapping_behave_alike() -> None:
    """LIM-2: a dataclass and a mapping with the same values resolve identically."""
    as_dc = resolve_run_limits(RunLimits(max_turns=3, max_cost=RunCost(1.5, "USD")))
    as_map = resolve_run_limits({"max_turns": 3, "max_cost": {"amount": 1.5, "currency": "USD"}})
    assert as_dc == as_map
    with pytest.raises(PrismConfigError):
        resolve_run_limits({"max_turns": 0})


def test_lim2_zero_cost_budget_is_valid() -> None:
    """LIM-2: amount 0 is allowed (>= 0)."""
    assert resolve_run_limits(RunLimits(max_cost=RunCost(0, "USD"))).max_cost == RunCost(0, "USD")


# --------------------------------------------------------------------------- LIM-3 narrowing


def test_lim3_run_may_narrow() -> None:
    """LIM-3: a run value <= the agent value wins."""
    r = resolve_run_limits(RunLimits(max_turns=10, max_tool_calls=5), RunLimits(max_turns=4))
    assert r.max_turns == 4
    assert r.max_tool_calls == 5
    assert resolve_run_limits(RunLimits(max_turns=4), RunLimits(max_turns=4)).max_turns == 4


def test_lim3_widening_raises_with_exact_message() -> None:
    """LIM-3: the message names the axis and both values."""
    with pytest.raises(PrismConfigError) as info:
        resolve_run_limits(RunLimits(max_turns=2), RunLimits(max_turns=3))
    assert str(info.value) == "limits.max_turns (3) cannot widen the agent limit (2)"


def test_lim3_unlimited_run_value_on_capped_axis_is_widening() -> None:
    """LIM-3/LIM-8: UNLIMITED compares greater than every number; spelled `unlimited`."""
    with pytest.raises(PrismConfigError) as info:
        resolve_run_limits(RunLimits(max_tool_rounds=1), RunLimits(max_tool_rounds=UNLIMITED))
    assert str(info.value) == "limits.max_tool_rounds (unlimited) cannot widen the agent limit (1)"


def test_lim3_agent_unlimited_may_be_narrowed() -> None:
    """LIM-3: an agent UNLIMITED axis may be narrowed by any run value."""
    r = resolve_run_limits(RunLimits(max_tool_calls=UNLIMITED), RunLimits(max_tool_calls=7))
    assert r.max_tool_calls == 7
    r = resolve_run_limits(
        RunLimits(max_tool_calls=UNLIMITED), RunLimits(max_tool_calls=UNLIMITED)
    )
    assert r.max_tool_calls == UNLIMITED


@pytest.mark.parametrize(
    "axis",
    [
        "max_provider_attempts",
        "max_tool_rounds",
        "max_tool_calls",
        "max_wall_time_ms",
        "max_request_bytes",
        "max_response_bytes",
        "max_input_tokens",
        "max_output_tokens",
        "max_total_tokens",
    ],
)
def test_lim3_every_axis_is_narrow_only(axis: str) -> None:
    """LIM-3: the rule applies to every axis, not only max_turns."""
    with pytest.raises(PrismConfigError, match=rf"limits\.{axis} \(6\) cannot widen"):
        resolve_run_limits(RunLimits(**{axis: 5}), RunLimits(**{axis: 6}))


def test_lim3_cost_currencies_must_match_and_amount_narrow() -> None:
    """LIM-3: cost set on both layers: equal currencies, run amount <= agent amount."""
    agent = RunLimits(max_cost=RunCost(1.0, "USD"))
    with pytest.raises(PrismConfigError, match="currency"):
        resolve_run_limits(agent, RunLimits(max_cost=RunCost(0.5, "EUR")))
    with pytest.raises(PrismConfigError, match="cannot widen"):
        resolve_run_limits(agent, RunLimits(max_cost=RunCost(2.0, "USD")))
    r = resolve_run_limits(agent, RunLimits(max_cost=RunCost(0.5, "USD")))
    assert r.max_cost == RunCost(0.5, "USD")
    assert resolve_run_limits(None, RunLimits(max_cost=RunCost(3, "USD"))).max_cost == RunCost(
        3, "USD"
    )


# --------------------------------------------------------------------------- LIM-8 UNLIMITED


def test_lim8_unlimited_is_math_inf() -> None:
    """LIM-8: UNLIMITED is a float equal to math.inf."""
    assert isinstance(UNLIMITED, float)
    assert UNLIMITED == math.inf == float("inf")
    assert resolve_run_limits(RunLimits(max_turns=float("inf"))).max_turns == UNLIMITED


def test_lim8_to_dict_writes_unlimited_and_from_dict_reads_it() -> None:
    """LIM-8: RunLimits.to_dict() writes the string "unlimited"; from_dict reads it back."""
    limits = RunLimits(max_turns=UNLIMITED, max_tool_calls=3, max_cost=RunCost(1.5, "USD"))
    data = limits.to_dict()
    assert data == {
        "max_turns": "unlimited",
        "max_tool_calls": 3,
        "max_cost": {"amount": 1.5, "currency": "USD"},
    }
    assert RunLimits.from_dict(data) == limits
    full = resolve_run_limits(None)
    assert RunLimits.from_dict(full.to_dict()) == full


def test_lim8_unlimited_axis_counts_but_never_breaches() -> None:
    """LIM-8: a disabled axis keeps its counter but never breaches."""
    t = tracker(max_tool_rounds=UNLIMITED)
    for _ in range(100):
        t.charge_tool_round()
    assert t.counters.tool_rounds == 100
    assert t.breach is None
    assert t.export_counters()["tool_rounds"] == 100
    assert t.leg_max_tool_rounds == UNLIMITED


# --------------------------------------------------------------------------- LIM-9 / coercion


def test_lim9_result_has_every_axis_set() -> None:
    """LIM-9: every numeric axis is set (a number or UNLIMITED)."""
    r = resolve_run_limits({"max_turns": 5}, {"max_tool_calls": 3})
    for name, value in r.to_dict().items():
        assert value is not None, name
    assert len(r.to_dict()) == 10  # max_cost omitted (None)


def test_lim9_unknown_mapping_key_names_the_snake_case_field() -> None:
    """RUN-7/LIM-9: a camelCase key is reported with its snake_case name."""
    with pytest.raises(PrismConfigError) as info:
        resolve_run_limits({"maxTurns": 3})
    assert "max_turns" in str(info.value)
    assert "maxTurns" in str(info.value)
    with pytest.raises(PrismConfigError, match="bogus"):
        coerce_run_limits({"bogus": 1})


def test_lim9_unknown_key_in_max_cost_mapping_is_rejected() -> None:
    """RUN-7: limits.max_cost given as a mapping is checked for unknown keys too."""
    with pytest.raises(PrismConfigError, match="amount_usd"):
        resolve_run_limits({"max_cost": {"amount_usd": 1, "currency": "USD"}})


def test_lim9_non_mapping_layer_is_rejected() -> None:
    """LIM-9: a layer is a RunLimits, a mapping or None."""
    with pytest.raises(PrismConfigError):
        resolve_run_limits(42)  # type: ignore[arg-type]


def test_lim9_defaults_constant_is_consistent() -> None:
    """LIM-1: the exported defaults match the resolution of two empty layers."""
    r = resolve_run_limits(None)
    assert r.max_turns == DEFAULT_RUN_LIMITS.max_turns
    assert r.max_tool_rounds == DEFAULT_RUN_LIMITS.max_tool_rounds


def test_run16_finite_output_budget_detection() -> None:
    """RUN-16: explicit finite max_output_tokens / max_total_tokens / max_cost buffer output."""
    assert not sets_finite_output_budget(None, RunLimits(max_turns=3))
    assert not sets_finite_output_budget(RunLimits(max_output_tokens=UNLIMITED))
    assert sets_finite_output_budget(None, {"max_total_tokens": 100})
    assert sets_finite_output_budget(RunLimits(max_output_tokens=5))
    assert sets_finite_output_budget(RunLimits(max_cost=RunCost(1, "USD")))


# --------------------------------------------------------------------------- LIM-4 charge points


def test_lim4_turns_breach_when_new_value_exceeds_limit() -> None:
    """LIM-4: max_turns is charged once per boundary; the 3rd boundary breaches a limit of 2."""
    breaches: list[RunLimitBreach] = []
    t = tracker(breaches, max_turns=2)
    t.charge_turn()
    t.charge_turn()
    with pytest.raises(RunLimitExceeded) as info:
        t.charge_turn()
    assert info.value.breach == RunLimitBreach("max_turns", 2, 3)
    assert info.value.code == "ERR_PRISM_RUN_LIMIT"
    assert breaches == [RunLimitBreach("max_turns", 2, 3)]


def test_lim4_provider_attempts_and_request_bytes_per_attempt() -> None:
    """LIM-4: attempts counted per attempt; request bytes compared per request, not summed."""
    t = tracker(max_provider_attempts=24, max_request_bytes=100)
    for _ in range(10):
        t.charge_provider_attempt(request_bytes=100)  # 10 x 100 bytes: never summed
    assert t.counters.provider_attempts == 10
    assert t.counters.request_bytes == 100
    with pytest.raises(RunLimitExceeded) as info:
        t.charge_provider_attempt(request_bytes=101)
    assert info.value.breach.limit == "max_request_bytes"
    assert info.value.breach.observed == 101
    assert info.value.breach.maximum == 100


def test_lim4_provider_attempts_breach() -> None:
    """LIM-4: max_provider_attempts breaches on the attempt past the limit."""
    t = RunLimitTracker(RunLimits(max_turns=1, max_provider_attempts=2))
    t.charge_provider_attempt()
    t.charge_provider_attempt()
    with pytest.raises(RunLimitExceeded) as info:
        t.charge_provider_attempt(request_bytes=1)
    assert info.value.breach == RunLimitBreach("max_provider_attempts", 2, 3)


def test_lim4_response_bytes_per_event_not_summed() -> None:
    """LIM-4: max_response_bytes is compared per provider event."""
    t = tracker(max_response_bytes=50)
    for _ in range(20):
        t.charge_response_bytes(50)
    assert t.breach is None
    with pytest.raises(RunLimitExceeded) as info:
        t.charge_response_bytes(51)
    assert info.value.breach == RunLimitBreach("max_response_bytes", 50, 51)


def test_lim4_tool_rounds_and_tool_calls() -> None:
    """LIM-4: tool rounds in charge_tool_round, tool calls at each dispatch."""
    t = tracker(max_tool_rounds=1, max_tool_calls=2)
    t.charge_tool_round()
    t.charge_tool_call()
    t.charge_tool_call()
    with pytest.raises(RunLimitExceeded) as info:
        t.charge_tool_call()
    assert info.value.breach.limit == "max_tool_calls"
    t2 = tracker(max_tool_rounds=1)
    t2.charge_tool_round()
    with pytest.raises(RunLimitExceeded) as info2:
        t2.charge_tool_round()
    assert info2.value.breach == RunLimitBreach("max_tool_rounds", 1, 2)


def test_lim4_unset_limits_in_tracker_use_defaults() -> None:
    """LIM-1: a tracker built from unresolved limits falls back to the defaults."""
    t = RunLimitTracker(RunLimits())
    for _ in range(8):
        t.charge_tool_round()
    with pytest.raises(RunLimitExceeded):
        t.charge_tool_round()


# --------------------------------------------------------------------------- LIM-5 usage


def test_lim5_tokens_are_summed_and_total_derived() -> None:
    """LIM-5: total = reported total, else input + output."""
    t = tracker()
    t.charge_usage(Usage(input_tokens=10, output_tokens=5))
    t.charge_usage(Usage(input_tokens=1, output_tokens=2, total_tokens=100))
    t.charge_usage(Usage(output_tokens=4))
    t.charge_usage(None)
    c = t.counters
    assert (c.input_tokens, c.output_tokens, c.total_tokens) == (11, 11, 119)


@pytest.mark.parametrize(
    "axis,usage,observed",
    [
        ("max_input_tokens", Usage(input_tokens=11), 11),
        ("max_output_tokens", Usage(output_tokens=11), 11),
        ("max_total_tokens", Usage(input_tokens=6, output_tokens=5), 11),
    ],
)
def test_lim5_token_axes_breach(axis: str, usage: Usage, observed: int) -> None:
    """LIM-5: token counters breach when they exceed their limit."""
    t = tracker(**{axis: 10})
    with pytest.raises(RunLimitExceeded) as info:
        t.charge_usage(usage)
    assert info.value.breach == RunLimitBreach(axis, 10, observed)


def test_lim5_cost_summed_until_it_exceeds() -> None:
    """LIM-5: cost is summed in the budget's currency."""
    t = tracker(max_cost=RunCost(1.0, "USD"))
    t.charge_usage(Usage(cost=0.6, currency="USD"))
    t.charge_usage(Usage(cost=0.4, currency="USD"))
    assert t.breach is None
    with pytest.raises(RunLimitExceeded) as info:
        t.charge_usage(Usage(cost=0.1, currency="USD"))
    assert info.value.breach.limit == "max_cost"
    assert info.value.breach.currency == "USD"
    assert info.value.breach.observed == pytest.approx(1.1)


@pytest.mark.parametrize(
    "usage",
    [None, Usage(input_tokens=1), Usage(cost=0.1, currency="EUR"), Usage(cost=0.1)],
)
def test_lim5_missing_or_foreign_cost_breaches_immediately(usage: Usage | None) -> None:
    """LIM-5: with max_cost set, no usage, no cost or another currency breach at once."""
    t = tracker(max_cost=RunCost(100.0, "USD"))
    with pytest.raises(RunLimitExceeded) as info:
        t.charge_usage(usage)
    assert info.value.breach == RunLimitBreach("max_cost", 100.0, math.inf, "USD")


def test_lim5_without_cost_cap_missing_usage_is_fine() -> None:
    """LIM-5: without max_cost a missing usage charges nothing."""
    t = tracker()
    t.charge_usage(None)
    t.charge_usage(Usage(cost=0.25, currency="USD"))
    assert t.breach is None
    assert t.counters.cost == 0.25


# --------------------------------------------------------------------------- LIM-7 first breach


def test_lim7_first_breach_recorded_once_and_callback_called_once() -> None:
    """LIM-7: later breaches emit nothing and raise with the first breach."""
    breaches: list[RunLimitBreach] = []
    t = tracker(breaches, max_turns=1, max_tool_calls=1)
    t.charge_turn()
    with pytest.raises(RunLimitExceeded):
        t.charge_turn()
    first = t.breach
    assert first == RunLimitBreach("max_turns", 1, 2)
    t.charge_tool_call()
    with pytest.raises(RunLimitExceeded) as info:
        t.charge_tool_call()
    assert info.value.breach is first
    assert breaches == [first]


def test_lim7_callback_runs_before_the_raise() -> None:
    """LIM-7: record, callback (event + abort), then raise at the charge point."""
    order: list[str] = []
    t = RunLimitTracker(
        RunLimits(max_tool_calls=1), on_breach=lambda b: order.append(f"cb:{b.limit}")
    )
    t.charge_tool_call()
    try:
        t.charge_tool_call()
    except RunLimitExceeded:
        order.append("raised")
    assert order == ["cb:max_tool_calls", "raised"]


# --------------------------------------------------------------------------- LIM-6 wall time


async def test_lim6_wall_deadline_records_breach_and_calls_back_without_raising() -> None:
    """LIM-6: the timer records the breach and calls on_breach; nothing is raised."""
    fired = asyncio.Event()
    breaches: list[RunLimitBreach] = []

    def on_breach(b: RunLimitBreach) -> None:
        breaches.append(b)
        fired.set()

    t = RunLimitTracker(resolve_run_limits(RunLimits(max_wall_time_ms=1)), on_breach=on_breach)
    t.start()
    await asyncio.wait_for(fired.wait(), timeout=10)
    assert t.breach is not None
    assert t.breach.limit == "max_wall_time_ms"
    assert t.breach.maximum == 1
    assert t.breach.observed >= 1
    assert breaches == [t.breach]
    t.charge_turn()  # the charge points do not re-raise a wall-time breach by themselves
    t.dispose()


async def test_lim6_resumed_leg_deadline_subtracts_restored_wall_time() -> None:
    """LIM-6/DUR-17: deadline = now + max - wall_time_ms; restored time at the max fires at once."""
    fired = asyncio.Event()
    t = RunLimitTracker(
        resolve_run_limits(RunLimits(max_wall_time_ms=600_000)),
        counters={"wall_time_ms": 600_000},
        on_breach=lambda _b: fired.set(),
    )
    t.start()
    await asyncio.wait_for(fired.wait(), timeout=10)
    assert t.breach is not None and t.breach.limit == "max_wall_time_ms"
    t.dispose()


async def test_lim6_deadline_not_reached_does_not_fire() -> None:
    """LIM-6: a fresh leg with plenty of time left records nothing."""
    t = RunLimitTracker(
        resolve_run_limits(RunLimits(max_wall_time_ms=600_000)), counters={"wall_time_ms": 1}
    )
    t.start()
    for _ in range(5):
        await asyncio.sleep(0)
    assert t.breach is None
    assert t.deadline_at is not None and t.deadline_at.endswith("Z")
    t.dispose()


async def test_lim6_dispose_cancels_the_timer() -> None:
    """RUN-22: disposing the tracker disarms the deadline."""
    breaches: list[RunLimitBreach] = []
    t = RunLimitTracker(resolve_run_limits(RunLimits(max_wall_time_ms=1)), on_breach=breaches.append)
    t.start()
    t.dispose()
    t.dispose()  # idempotent
    await asyncio.sleep(0.02)
    assert breaches == []
    assert t.breach is None


async def test_lim6_unlimited_wall_time_arms_no_timer_but_counts() -> None:
    """LIM-6: with UNLIMITED no timer is armed; active wall time is still counted."""
    clock = FakeClock()
    t = RunLimitTracker(
        resolve_run_limits(RunLimits(max_wall_time_ms=UNLIMITED)),
        counters={"wall_time_ms": 1000},
        clock=clock,
    )
    t.start()
    assert t.deadline_at is None
    clock.now += 2.5
    assert t.wall_time_ms == 3500
    t.dispose()
    clock.now += 100  # time after dispose (e.g. suspended) is not counted
    assert t.wall_time_ms == 3500
    assert t.export_counters()["wall_time_ms"] == 3500


async def test_lim6_timer_callback_errors_are_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """LIM-6: a failing breach callback from the timer is logged on the prism logger."""
    fired = asyncio.Event()

    def bad(_b: RunLimitBreach) -> None:
        fired.set()
        raise RuntimeError("boom sk-secret")

    t = RunLimitTracker(resolve_run_limits(RunLimits(max_wall_time_ms=1)), on_breach=bad)
    with caplog.at_level("ERROR", logger="prism"):
        t.start()
        await asyncio.wait_for(fired.wait(), timeout=10)
        await asyncio.sleep(0)
    assert t.breach is not None
    assert any("RuntimeError" in r.getMessage() for r in caplog.records)
    assert not any("sk-secret" in r.getMessage() for r in caplog.records)
    t.dispose()


# --------------------------------------------------------------------------- counters (DUR-4)


def test_counters_export_and_restore_round_trip() -> None:
    """DUR-4/DUR-17: counters export as a JSON dict and restore cumulatively."""
    t = tracker(max_tool_rounds=5)
    t.charge_turn()
    t.charge_provider_attempt(request_bytes=42)
    t.charge_response_bytes(7)
    t.charge_tool_round()
    t.charge_tool_round()
    t.charge_tool_call()
    t.charge_usage(Usage(input_tokens=3, output_tokens=4, cost=0.5, currency="USD"))
    data = t.export_counters()
    assert data == {
        "turns": 1,
        "provider_attempts": 1,
        "tool_rounds": 2,
        "tool_calls": 1,
        "wall_time_ms": 0,
        "request_bytes": 42,
        "response_bytes": 7,
        "input_tokens": 3,
        "output_tokens": 4,
        "total_tokens": 7,
        "cost": 0.5,
    }
    resumed = RunLimitTracker(resolve_run_limits(RunLimits(max_tool_rounds=5)), counters=data)
    assert resumed.counters == RunLimitCounters.from_dict(data)
    assert resumed.leg_max_tool_rounds == 3
    resumed.charge_tool_round()
    resumed.charge_tool_round()
    resumed.charge_tool_round()
    with pytest.raises(RunLimitExceeded) as info:
        resumed.charge_tool_round()  # cumulative across legs
    assert info.value.breach.observed == 6


def test_leg_max_tool_rounds_never_below_zero() -> None:
    """CON-28: tool rounds left for the leg never go below 0."""
    t = RunLimitTracker(RunLimits(max_tool_rounds=2), counters={"tool_rounds": 5})
    assert t.leg_max_tool_rounds == 0
    assert RunLimitTracker(RunLimits(max_tool_rounds=2)).leg_max_tool_rounds == 2


@pytest.mark.parametrize(
    "counters",
    [{"turns": -1}, {"bogus": 1}, {"turns": 1.5}, {"cost": math.inf}, {"turns": True}],
)
def test_malformed_counters_are_rejected(counters: dict[str, Any]) -> None:
    """DUR-4: restored counters must be known, non-negative numbers."""
    with pytest.raises(ValueError):
        RunLimitTracker(RunLimits(), counters=counters)
