"""Token and cost usage of a provider turn or of a whole run."""

from __future__ import annotations

import math
from dataclasses import dataclass

from prism._fast_init import fast_init
from prism._serde import Serializable

__all__ = [
    "Usage",
]

_TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


@fast_init
@dataclass(frozen=True, slots=True)
class Usage(Serializable):
    """Token and cost usage of a provider turn or aggregate.

    Raises:
        TypeError: a token count is not a non-negative ``int`` (``bool`` rejected), or ``cost`` is
            not a finite number >= 0.
    """

    input_tokens: int | None = None
    """Prompt tokens."""
    output_tokens: int | None = None
    """Completion tokens (may include ``reasoning_tokens``)."""
    total_tokens: int | None = None
    """Total tokens as reported."""
    cache_read_tokens: int | None = None
    """Prompt tokens served from cache."""
    cache_write_tokens: int | None = None
    """Prompt tokens written to cache."""
    cost: float | None = None
    """Monetary cost in ``currency`` units."""
    currency: str | None = None
    """Currency of ``cost``, e.g. ``"USD"``."""
    reasoning_tokens: int | None = None
    """Output tokens spent on reasoning."""

    def __post_init__(self) -> None:
        for name in _TOKEN_FIELDS:
            value = getattr(self, name)
            if value is not None and (
                type(value) is bool or not isinstance(value, int) or value < 0
            ):
                raise TypeError(f"Usage.{name} must be a non-negative int, got {value!r}")
        cost = self.cost
        if cost is not None and (
            type(cost) is bool
            or not isinstance(cost, (int, float))
            or not math.isfinite(cost)
            or cost < 0
        ):
            raise TypeError(f"Usage.cost must be a finite number >= 0, got {cost!r}")
