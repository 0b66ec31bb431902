"""Checks shared by the store conformance suites.

The suites raise ``AssertionError`` with a message naming the requirement on the first deviation;
[`check()`][prism.testing._conformance_checks.check] and [`expect()`][prism.testing._conformance_checks.expect] do that even under ``python -O`` (unlike ``assert``).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Final

__all__ = ["CONCURRENT_WRITERS", "check", "expect"]

CONCURRENT_WRITERS: Final = 8
"""How many concurrent writers race for one tip or one checkpoint version."""


def check(condition: object, message: str) -> None:
    """Raise ``AssertionError(message)`` unless ``condition`` (kept under ``python -O``)."""
    if not condition:
        raise AssertionError(message)


async def expect(
    exc_type: type[BaseException], call: Awaitable[Any], message: str
) -> BaseException:
    """Await ``call`` and return the ``exc_type`` exception it raises.

    Raises:
        AssertionError: ``call`` raised another exception, or nothing.
    """
    try:
        await call
    except exc_type as exc:
        return exc
    except Exception as exc:
        raise AssertionError(
            f"{message}: expected {exc_type.__name__}, got {type(exc).__name__}: {exc}"
        ) from exc
    raise AssertionError(f"{message}: expected {exc_type.__name__}, nothing was raised")
