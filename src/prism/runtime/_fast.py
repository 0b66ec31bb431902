"""Speed tricks of the run path, kept apart from the code a reader follows.

Each function here does what a plain version would do, in fewer steps on the per-turn path. They
stay until a benchmark shows what each is worth; the run path calls them by name:

* :func:`event_bytes` — the canonical JSON size of a provider event without serialising the
  whole event for the most frequent kinds (a text delta serialises only its text; a bare ``done``
  is a constant). Called once per provider stream event.
* :func:`shielded` — runs a coroutine to completion even if the caller is cancelled, but first
  drives it inline by hand so that a cleanup with nothing to wait for creates no task. Called
  for the success, failure and cleanup steps of every run leg.
* :func:`message_entry` — builds a ``message`` session entry without the generic frozen-dataclass
  ``__init__`` (the same fields ``new_session_entry`` gives). Called for every appended message,
  about twice per tool turn.
"""

from __future__ import annotations

import asyncio
import json
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Final

from prism._util import frozen_builder, new_id, now_iso
from prism.runtime._json_size import canonical_size
from prism.store import SessionEntry
from prism.types import (
    Message,
    ProviderContentDelta,
    ProviderDone,
    ProviderEvent,
    TextContent,
    canonical_json,
)

__all__ = ["event_bytes", "message_entry", "shielded"]

# --------------------------------------------------------------------------- event byte counts

_encode_str: Callable[[str], str] = json.encoder.encode_basestring
_TEXT_DELTA_BASE: Final = len(
    canonical_json(ProviderContentDelta(content=TextContent(text="")).to_dict()).encode()
) - 2
_BARE_DONE_BYTES: Final = len(canonical_json(ProviderDone().to_dict()).encode())


def event_bytes(event: ProviderEvent) -> int:
    """UTF-8 length of ``canonical_json(event.to_dict())``.

    Text deltas — the most frequent event — serialise only their text; a bare ``done`` is a
    constant. Everything else takes the full computation.

    Raises:
        TypeError / ValueError: the event holds non-JSON data.
    """
    kind = type(event)
    if kind is ProviderContentDelta:
        content = event.content  # type: ignore[union-attr]
        if type(content) is TextContent:
            return _TEXT_DELTA_BASE + len(_encode_str(content.text).encode())
    elif kind is ProviderDone and event.usage is None and event.stop_reason is None:  # type: ignore[union-attr]
        return _BARE_DONE_BYTES
    return canonical_size(event)


# --------------------------------------------------------------------------- shielded cleanup


async def shielded(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` to completion even if the caller is cancelled meanwhile.

    ``coro`` first runs inline: when it finishes without suspending (the usual cleanup of a run
    with nothing left to wait for) no task is created; a cancellation cannot reach code
    that never suspends. Once it suspends, the rest runs in its own task, shielded from the
    caller's cancellation. A cancellation that arrives while waiting is re-raised once ``coro``
    has finished.
    """
    try:
        first = coro.send(None)
    except StopIteration as done:
        return done.value
    task = asyncio.ensure_future(_continue_started(coro, first))
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                if task.cancelled():
                    raise
                cancelled = True
                break
            cancelled = True
            continue
        break
    if cancelled:
        task.result()  # surface the task's own exception first
        raise asyncio.CancelledError
    return result


async def _continue_started(coro: Coroutine[Any, Any, Any], first: Any) -> Any:
    """Drive a coroutine that already ran up to its first suspension (it yielded ``first``)."""
    return await _resume(coro, first)


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], yielded: Any) -> Generator[Any, Any, Any]:
    """The ``yield from`` protocol for a started coroutine: hand its yielded value to the event
    loop, then forward what comes back (a value, or an exception thrown in) until it returns."""
    while True:
        try:
            sent = yield yielded
        except BaseException as exc:
            try:
                yielded = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as done:
                return done.value


# --------------------------------------------------------------------------- message entries

_new_entry = frozen_builder(SessionEntry)


def message_entry(
    message: Message, *, session_id: str, run_id: str, parent_id: str | None
) -> SessionEntry:
    """A ``message`` entry for ``message`` under ``run_id``, attached to ``parent_id``, with a
    new ``entry_…`` id and the current timestamp (as ``new_session_entry("message", ...)``)."""
    return _new_entry(
        id=new_id("entry"),
        session_id=session_id,
        kind="message",
        timestamp=now_iso(),
        parent_id=parent_id,
        run_id=run_id,
        message=message,
    )
