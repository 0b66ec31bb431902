"""Small internal helpers shared across the runtime.

:func:`maybe_await` is defined here. The id, timestamp and fast-constructor helpers live in the
speed-trick modules :mod:`prism._fast_stamps` and :mod:`prism._fast_dataclass`; they are
re-exported here so that existing ``from prism._util import ...`` lines keep working.
"""

from __future__ import annotations

import inspect
from typing import Any

from prism._fast_dataclass import field_replacer as field_replacer
from prism._fast_dataclass import frozen_builder as frozen_builder
from prism._fast_stamps import new_id as new_id
from prism._fast_stamps import now_iso as now_iso

__all__ = ["field_replacer", "frozen_builder", "maybe_await", "new_id", "now_iso"]


async def maybe_await(value: Any) -> Any:
    """Return ``value``, awaiting it first when it is awaitable."""
    if inspect.isawaitable(value):
        return await value
    return value
