"""Small internal helpers shared across the runtime.

:func:`maybe_await` is defined here. The id and timestamp helpers live in
:mod:`prism._fast_stamps` and are re-exported here so that ``from prism._util import ...`` lines
keep working.
"""

from __future__ import annotations

import inspect
from typing import Any

from prism._fast_stamps import new_id as new_id
from prism._fast_stamps import now_iso as now_iso

__all__ = ["maybe_await", "new_id", "now_iso"]


async def maybe_await(value: Any) -> Any:
    """Return ``value``, awaiting it first when it is awaitable."""
    if inspect.isawaitable(value):
        return await value
    return value
