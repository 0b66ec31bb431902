"""Usage aggregation: ``UsageAccumulator`` keeps each attempt's usage and sums them when read."""

from __future__ import annotations

from prism.types import Usage

__all__ = ["UsageAccumulator"]


class UsageAccumulator:
    """Aggregate ``Usage`` values.

    ``add`` keeps the usage object it is given (usages are frozen), O(1); ``value`` sums what was
    added since the last read into the running total, O(usages added since then). A run adds one
    usage per provider attempt and reads the total at its end, so no object is built per turn.

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
        "_currency",
        "_input_tokens",
        "_output_tokens",
        "_pending",
        "_reasoning_tokens",
        "_summed",
        "_total_tokens",
    )

    def __init__(self) -> None:
        self._pending: list[Usage] = []
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
        if usage is not None:
            self._pending.append(usage)

    def value(self) -> Usage | None:
        """Return the aggregate, or ``None`` when nothing was ever summed."""
        pending = self._pending
        if pending:
            for usage in pending:
                self._sum(usage)
            pending.clear()
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

    def _sum(self, usage: Usage) -> None:
        summed = self._summed
        inp = usage.input_tokens
        out = usage.output_tokens
        if inp is not None:
            self._input_tokens = inp if self._input_tokens is None else self._input_tokens + inp
            summed = True
        if out is not None:
            self._output_tokens = out if self._output_tokens is None else self._output_tokens + out
            summed = True
        if (read := usage.cache_read_tokens) is not None:
            current = self._cache_read_tokens
            self._cache_read_tokens = read if current is None else current + read
            summed = True
        if (write := usage.cache_write_tokens) is not None:
            current = self._cache_write_tokens
            self._cache_write_tokens = write if current is None else current + write
            summed = True
        if (reasoning := usage.reasoning_tokens) is not None:
            current = self._reasoning_tokens
            self._reasoning_tokens = reasoning if current is None else current + reasoning
            summed = True
        total = usage.total_tokens
        if total is None and (inp is not None or out is not None):
            total = (inp or 0) + (out or 0)
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
        self._summed = summed
