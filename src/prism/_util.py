"""Small internal helpers shared across the runtime.

[`maybe_await()`][prism._util.maybe_await] is defined here. The id and timestamp helpers live in
[`prism._fast_stamps`][prism._fast_stamps] and are re-exported here so that ``from prism._util import ...`` lines
keep working.

The ``prism`` logger gets a ``NullHandler`` here, as a library's loggers should: prism's log
records (a tool's failure with its redacted traceback, a subscriber that raised, ...) reach the
host's handlers when the host configures logging, and print nothing otherwise.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from prism._fast_stamps import new_id as new_id
from prism._fast_stamps import now_iso as now_iso

__all__ = ["maybe_await", "new_id", "now_iso"]

logging.getLogger("prism").addHandler(logging.NullHandler())


async def maybe_await(value: Any) -> Any:
    """Return ``value``, awaiting it first when it is awaitable."""
    if inspect.isawaitable(value):
        return await value
    return value
