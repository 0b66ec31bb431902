"""Small internal helpers shared across the runtime.

[`maybe_await()`][prism._util.maybe_await] and [`resumed()`][prism._util.resumed] (the rest of a coroutine started by hand) are
defined here. The id and timestamp helpers live in
[`prism._fast_stamps`][prism._fast_stamps] and are re-exported here so that ``from prism._util import ...`` lines
keep working.

The ``prism`` logger gets a ``NullHandler`` here, as a library's loggers should: prism's log
records (a tool's failure with its redacted traceback, a subscriber that raised, ...) reach the
host's handlers when the host configures logging, and print nothing otherwise.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

from prism._fast_stamps import new_id as new_id
from prism._fast_stamps import now_iso as now_iso

__all__ = ["maybe_await", "new_id", "now_iso", "resumed"]

_T = TypeVar("_T")

logging.getLogger("prism").addHandler(logging.NullHandler())


async def maybe_await(value: Any) -> Any:
    """Return ``value``, awaiting it first when it is awaitable."""
    if inspect.isawaitable(value):
        return await value
    return value


@types.coroutine
def resumed(
    step: Coroutine[Any, Any, _T], pending: Any, context: contextvars.Context | None = None
) -> Generator[Any, Any, _T]:
    """The rest of a coroutine whose first step the caller ran by hand (``pending = step.send(None)``
    did not finish it), awaited as ``await step`` would: what it waits on (``pending`` first) is
    handed to the awaiting task, and what the task sends or throws back (a cancellation included)
    is passed on to it; closing this closes ``step``. With ``context`` each step runs in it."""
    advance: Callable[[Any], Any]
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            step.close()
            raise
        except BaseException as exc:
            advance, sent = step.throw, exc
        else:
            advance = step.send
        try:
            pending = advance(sent) if context is None else context.run(advance, sent)
        except StopIteration as done:
            result: _T = done.value
            return result
