"""Tests for prism.usage (CON-12)."""

from __future__ import annotations

from prism.types import Usage
from prism.usage import UsageAccumulator


def test_con12_nothing_summed_is_none() -> None:
    """CON-12: value() is None when nothing was summed."""
    acc = UsageAccumulator()
    assert acc.value() is None
    acc.add(None)
    acc.add(Usage())
    assert acc.value() is None


def test_con12_sums_present_keys_only() -> None:
    """CON-12: token keys are summed when present and stay absent otherwise."""
    acc = UsageAccumulator()
    acc.add(Usage(input_tokens=10, output_tokens=5, reasoning_tokens=2))
    acc.add(Usage(input_tokens=1, cache_read_tokens=3))
    value = acc.value()
    assert value == Usage(
        input_tokens=11,
        output_tokens=5,
        total_tokens=16,
        cache_read_tokens=3,
        reasoning_tokens=2,
    )
    assert value is not None and value.cache_write_tokens is None


def test_con12_total_tokens_rule() -> None:
    """CON-12: total adds usage.total_tokens when present, else input + output (missing = 0)."""
    acc = UsageAccumulator()
    acc.add(Usage(input_tokens=3, output_tokens=4, total_tokens=100))
    acc.add(Usage(output_tokens=2))
    acc.add(Usage(cache_write_tokens=1))
    value = acc.value()
    assert value is not None and value.total_tokens == 102


def test_con12_cost_same_currency_summed() -> None:
    """CON-12: costs of the first currency are summed; None is a valid currency."""
    acc = UsageAccumulator()
    acc.add(Usage(cost=0.5, currency="USD"))
    acc.add(Usage(input_tokens=1))
    acc.add(Usage(cost=0.25, currency="USD"))
    assert acc.value() == Usage(input_tokens=1, total_tokens=1, cost=0.75, currency="USD")
    none_cur = UsageAccumulator()
    none_cur.add(Usage(cost=1.0))
    none_cur.add(Usage(cost=2.0))
    value = none_cur.value()
    assert value is not None and value.cost == 3.0 and value.currency is None


def test_con12_currency_mismatch_drops_cost_for_good() -> None:
    """CON-12: a differing currency drops cost and currency permanently."""
    acc = UsageAccumulator()
    acc.add(Usage(input_tokens=1, cost=1.0, currency="USD"))
    acc.add(Usage(cost=1.0, currency="EUR"))
    acc.add(Usage(cost=1.0, currency="USD"))
    value = acc.value()
    assert value is not None and value.cost is None and value.currency is None
    assert value.input_tokens == 1


def test_con12_currency_only_with_cost() -> None:
    """CON-12: currency appears only when cost is present."""
    acc = UsageAccumulator()
    acc.add(Usage(output_tokens=1, currency="USD"))
    value = acc.value()
    assert value is not None and value.currency is None and value.cost is None
