"""Small internal helpers shared across the runtime (ids, timestamps, sync-or-async callbacks)."""

from __future__ import annotations

import inspect
import time
import uuid
from typing import Any, TypeVar

__all__ = ["maybe_await", "new_id", "now_iso"]

_T = TypeVar("_T")


async def maybe_await(value: Any) -> Any:
    """Return ``value``, awaiting it first when it is awaitable (ARCH-10)."""
    if inspect.isawaitable(value):
        return await value
    return value


def new_id(prefix: str) -> str:
    """Return ``<prefix>_<32 lowercase hex>`` from ``uuid4`` (ARCH-13)."""
    return f"{prefix}_{uuid.uuid4().hex}"


def now_iso() -> str:
    """Return the current UTC time as ISO-8601 with millisecond precision and ``Z`` (ARCH-13)."""
    ns = time.time_ns()
    secs, rem = divmod(ns, 1_000_000_000)
    ms = rem // 1_000_000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{ms:03d}Z"
