"""Small internal helpers shared across the runtime (ids, timestamps, sync-or-async callbacks)."""

from __future__ import annotations

import inspect
import os
import time
from typing import Any, TypeVar

__all__ = ["maybe_await", "new_id", "now_iso"]

_T = TypeVar("_T")

# uuid4 layout (RFC 4122): version nibble 4 at bits 76..79, variant bits 10 at bits 62..63.
_UUID4_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_UUID4_SET = (0x4000 << 64) | (0x8000 << 48)
_from_bytes = int.from_bytes
_urandom = os.urandom


async def maybe_await(value: Any) -> Any:
    """Return ``value``, awaiting it first when it is awaitable (ARCH-10)."""
    if inspect.isawaitable(value):
        return await value
    return value


def new_id(prefix: str) -> str:
    """Return ``<prefix>_<32 lowercase hex>``, a random version-4 UUID's hex (ARCH-13).

    The value is exactly what ``uuid.uuid4().hex`` produces — 16 bytes of ``os.urandom`` with the
    version and variant bits set — without building a ``UUID`` object (ARCH-15).
    """
    return f"{prefix}_{(_from_bytes(_urandom(16)) & _UUID4_CLEAR) | _UUID4_SET:032x}"


_second: tuple[int, str] = (-1, "")


def now_iso() -> str:
    """Return the current UTC time as ISO-8601 with millisecond precision and ``Z`` (ARCH-13).

    The ``YYYY-MM-DDTHH:MM:SS`` part is formatted once per second and reused.
    """
    global _second
    secs, rem = divmod(time.time_ns(), 1_000_000_000)
    cached_secs, head = _second
    if cached_secs != secs:
        head = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
        _second = (secs, head)
    return f"{head}.{rem // 1_000_000:03d}Z"
