"""Usage aggregation: ``UsageAccumulator`` sums usages in O(1) per ``add``."""

from __future__ import annotations

from prism.types import Usage

__all__ = ["UsageAccumulator"]

_SUMMED = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
"""The token counts summed as they are (``total_tokens`` has its own rule)."""


class UsageAccumulator:
    """Aggregate ``Usage`` values.

    * ``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens``,
      ``reasoning_tokens``: sum of the present values; absent when no usage had the key.
    * ``total_tokens``: adds ``usage.total_tokens`` when present, else ``input + output`` (missing
      side counted as 0) when at least one of them is present.
    * ``cost``: the first usage with a ``cost`` fixes the currency (possibly ``None``); later costs
      are summed only while their currency matches; a mismatch drops cost and currency for good.
    """

    __slots__ = (
        "_cache_read_tokens",
        "_cache_write_tokens",
        "_cost",
        "_cost_dropped",
        "_summed",
        "_currency",
        "_input_tokens",
        "_output_tokens",
        "_reasoning_tokens",
        "_total_tokens",
    )

    def __init__(self) -> None:
        self._input_tokens: int | None = None
        self._output_tokens: int | None = None
        self._cache_read_tokens: int | None = None
        self._cache_write_tokens: int | None = None
        self._reasoning_tokens: int | None = None
        self._total_tokens: int | None = None
        self._cost: float | None = None
        self._currency: str | None = None
        self._cost_dropped = False
        self._summed = False

    def add(self, usage: Usage | None) -> None:
        """Add one usage (``None`` is ignored). O(1)."""
        if usage is None:
            return
        summed = False
        for name in _SUMMED:
            value = getattr(usage, name)
            if value is not None:
                current = getattr(self, f"_{name}")
                setattr(self, f"_{name}", value if current is None else current + value)
                summed = True
        if usage.total_tokens is not None:
            total: int | None = usage.total_tokens
        elif usage.input_tokens is not None or usage.output_tokens is not None:
            total = (usage.input_tokens or 0) + (usage.output_tokens or 0)
        else:
            total = None
        if total is not None:
            self._total_tokens = total if self._total_tokens is None else self._total_tokens + total
            summed = True
        if usage.cost is not None and not self._cost_dropped:
            summed = True
            if self._cost is None:
                self._cost = usage.cost
                self._currency = usage.currency
            elif usage.currency == self._currency:
                self._cost += usage.cost
            else:
                self._cost = None
                self._currency = None
                self._cost_dropped = True
        if summed:
            self._summed = True

    def value(self) -> Usage | None:
        """Return the aggregate, or ``None`` when nothing was ever summed."""
        if not self._summed:
            return None
        return Usage(
            input_tokens=self._input_tokens,
            output_tokens=self._output_tokens,
            total_tokens=self._total_tokens,
            cache_read_tokens=self._cache_read_tokens,
            cache_write_tokens=self._cache_write_tokens,
            cost=self._cost,
            currency=self._currency if self._cost is not None else None,
            reasoning_tokens=self._reasoning_tokens,
        )
