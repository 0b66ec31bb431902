"""Event observers of a session: bounded subscriptions and the ``on_event`` callback.

Delivery never creates a task or a timer per event. A subscription is a bounded ``deque`` plus at
most one waiter future (created only while its consumer waits on an empty queue). An ``on_event``
callback is called inline; when it returns an awaitable, a single per-session dispatcher task
awaits those awaitables in emission order, and the runtime drains it before ``run()`` returns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeAlias

from prism.errors import PrismConfigError
from prism.events import AgentEvent, EventSubscriberOverflowEvent
from prism.redaction import SecretRedactor, error_to_error_info

__all__ = [
    "EventSubscription",
    "OnEvent",
    "OverflowPolicy",
    "SessionObservers",
    "coerce_max_queued_events",
    "stamp_ids",
]

_log = logging.getLogger("prism")

OverflowPolicy: TypeAlias = Literal["close", "drop_oldest", "drop_newest"]
"""What a full subscription does with a new event."""

OnEvent: TypeAlias = Callable[[AgentEvent], "Awaitable[Any] | Any"]
"""``on_event(event)``: sync, or returning an awaitable that the session awaits in order."""

_OVERFLOWS = ("close", "drop_oldest", "drop_newest")
DEFAULT_MAX_QUEUED_EVENTS = 1024


def coerce_max_queued_events(value: object) -> int:
    """Floor ``value`` to an int ≥ 1; non-numeric or non-finite values give 1024."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return DEFAULT_MAX_QUEUED_EVENTS
    if isinstance(value, float) and not math.isfinite(value):
        return DEFAULT_MAX_QUEUED_EVENTS
    return max(1, int(math.floor(value)))


def _check_overflow(value: object) -> OverflowPolicy:
    if value not in _OVERFLOWS:
        raise PrismConfigError(
            f"overflow must be 'close', 'drop_oldest' or 'drop_newest', got {value!r}"
        )
    policy: OverflowPolicy = value  # type: ignore[assignment]
    return policy


class EventSubscription:
    """An async iterator over a session's events with a bounded queue.

    Returned by ``session.subscribe()``. Closing (at the end of every run, or on
    ``"close"`` overflow) lets already-queued events drain, then iteration ends. ``aclose()``
    unsubscribes at once and discards what is queued.

    When the queue holds ``max_queued_events`` events and another arrives:
    ``"drop_oldest"`` discards the oldest queued event; ``"drop_newest"`` discards the new one;
    ``"close"`` replaces the queue with one ``event_subscriber_overflow(dropped_events=queued + 1,
    max_queued_events, overflow)`` event and closes the subscription.
    """

    __slots__ = ("_closed", "_dropped", "_max", "_overflow", "_owner", "_queue", "_waiter")

    def __init__(
        self,
        owner: SessionObservers | None,
        *,
        max_queued_events: int = DEFAULT_MAX_QUEUED_EVENTS,
        overflow: OverflowPolicy = "close",
    ) -> None:
        self._owner = owner
        self._max = coerce_max_queued_events(max_queued_events)
        self._overflow = _check_overflow(overflow)
        self._queue: deque[AgentEvent] = deque()
        self._closed = False
        self._dropped = 0
        self._waiter: asyncio.Future[None] | None = None

    @property
    def closed(self) -> bool:
        """True once the subscription accepts no more events."""
        return self._closed

    @property
    def max_queued_events(self) -> int:
        """Queue capacity (≥ 1)."""
        return self._max

    @property
    def overflow(self) -> OverflowPolicy:
        """The overflow policy."""
        return self._overflow

    @property
    def dropped_events(self) -> int:
        """Events dropped so far by ``drop_oldest``/``drop_newest``/``close``."""
        return self._dropped

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def push(self, event: AgentEvent) -> None:
        """Queue one event, applying the overflow policy when full (never blocks)."""
        if self._closed:
            return
        queue = self._queue
        if len(queue) < self._max:
            queue.append(event)
            if self._waiter is not None:
                self._wake()
            return
        overflow = self._overflow
        if overflow == "drop_oldest":
            queue.popleft()
            queue.append(event)
            self._dropped += 1
        elif overflow == "drop_newest":
            self._dropped += 1
        else:
            dropped = len(queue) + 1
            self._dropped += dropped
            queue.clear()
            queue.append(
                EventSubscriberOverflowEvent(
                    session_id=getattr(event, "session_id", "") or "",
                    run_id=getattr(event, "run_id", None),
                    dropped_events=dropped,
                    max_queued_events=self._max,
                    overflow="close",
                )
            )
            self.close()
        self._wake()

    def close(self) -> None:
        """Stop accepting events; queued events still drain, then iteration ends."""
        if self._closed:
            return
        self._closed = True
        owner = self._owner
        if owner is not None:
            owner.discard(self)
        self._wake()

    def __aiter__(self) -> EventSubscription:
        return self

    async def __anext__(self) -> AgentEvent:
        queue = self._queue
        while not queue:
            if self._closed:
                raise StopAsyncIteration
            waiter = self._waiter
            if waiter is None or waiter.done():
                waiter = asyncio.get_running_loop().create_future()
                self._waiter = waiter
            await waiter
        return queue.popleft()

    async def aclose(self) -> None:
        """Unsubscribe now; queued events are discarded and iteration ends."""
        self._queue.clear()
        self.close()


class SessionObservers:
    """The observers of one session: subscriptions and ``on_event``.

    Args:
        on_event: The session's callback, or ``None``.
    """

    __slots__ = (
        "_closing",
        "_dispatch_queue",
        "_dispatcher",
        "_on_event",
        "_redactor",
        "_subs",
        "_wakeup",
        "active",
    )

    def __init__(self, on_event: OnEvent | None = None) -> None:
        self._on_event = on_event
        self._subs: tuple[EventSubscription, ...] = ()
        """The open subscriptions, replaced as a whole when one is added or removed (a session
        that never subscribes keeps the shared empty tuple: no list per session)."""
        self._dispatch_queue: deque[Awaitable[Any]] | None = None
        """Awaitables an async ``on_event`` returned, not yet awaited; made on the first one
        (a deque is some 600 bytes, and most sessions never need it)."""
        self._dispatcher: asyncio.Task[None] | None = None
        self._wakeup: asyncio.Future[None] | None = None
        self._redactor: SecretRedactor | None = None
        self._closing = False
        self.active = on_event is not None
        """True when anything observes events (a subscription or ``on_event``). Kept up to date
        by [`subscribe()`][prism.runtime.run._observers.SessionObservers.subscribe], [`discard()`][prism.runtime.run._observers.SessionObservers.discard] and [`close_all()`][prism.runtime.run._observers.SessionObservers.close_all], so that the per-event check
        is one attribute read. Read-only for callers."""

    @property
    def dispatching(self) -> bool:
        """Whether a dispatcher task awaits what an async ``on_event`` returned (then
        [`drain()`][prism.runtime.run._observers.SessionObservers.drain] has something to wait for)."""
        return self._dispatcher is not None

    def _update_active(self) -> None:
        self.active = bool(self._subs) or self._on_event is not None

    def set_redactor(self, redactor: SecretRedactor | None) -> None:
        """Set the redactor used for logged ``on_event`` failures."""
        self._redactor = redactor

    def subscribe(
        self,
        *,
        max_queued_events: int = DEFAULT_MAX_QUEUED_EVENTS,
        overflow: OverflowPolicy = "close",
    ) -> EventSubscription:
        """Add and return a new subscription."""
        sub = EventSubscription(self, max_queued_events=max_queued_events, overflow=overflow)
        self._subs = (*self._subs, sub)
        self.active = True
        return sub

    def discard(self, sub: EventSubscription) -> None:
        """Forget ``sub`` (called when it closes)."""
        subs = self._subs
        if sub in subs:
            index = subs.index(sub)
            self._subs = subs[:index] + subs[index + 1 :]
        self._update_active()

    def close_all(self) -> None:
        """Close every subscription; queued events still drain."""
        subs, self._subs = self._subs, ()
        self._update_active()
        for sub in subs:
            sub.close()

    def deliver(self, event: AgentEvent) -> None:
        """Hand one (already redacted) event to every subscription and ``on_event``, in order."""
        subs = self._subs
        if subs:
            if len(subs) == 1:
                subs[0].push(event)
            else:
                for sub in subs:  # a push may close (and discard) its subscription: a new tuple
                    sub.push(event)
        callback = self._on_event
        if callback is None:
            return
        try:
            result = callback(event)
        except Exception as exc:
            self._log_failure(exc)
            return
        if inspect.isawaitable(result):
            queue = self._dispatch_queue
            if queue is None:
                queue = self._dispatch_queue = deque()
            queue.append(result)
            self._ensure_dispatcher()

    # ----------------------------------------------------------------- async on_event

    def _log_failure(self, exc: BaseException) -> None:
        info = error_to_error_info(exc, self._redactor or ())
        _log.error("on_event callback failed: %s: %s", info.name, info.message)

    def _ensure_dispatcher(self) -> None:
        task = self._dispatcher
        if task is None or task.done():
            self._closing = False
            self._dispatcher = asyncio.get_running_loop().create_task(self._dispatch())
            return
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)

    async def _dispatch(self) -> None:
        queue = self._dispatch_queue
        assert queue is not None  # started after the first awaitable was queued
        loop = asyncio.get_running_loop()
        while True:
            while queue:
                awaitable = queue.popleft()
                try:
                    await awaitable
                except Exception as exc:
                    self._log_failure(exc)
            if self._closing:
                return
            wakeup = loop.create_future()
            self._wakeup = wakeup
            try:
                await wakeup
            finally:
                self._wakeup = None

    async def drain(self) -> None:
        """Await every queued ``on_event`` awaitable, then stop the dispatcher."""
        task = self._dispatcher
        if task is None:
            return
        self._closing = True
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)
        await task
        self._dispatcher = None


def stamp_ids(event: Any, session_id: str, run_id: str) -> Any:
    """``event`` with empty ``session_id``/``run_id`` fields filled in."""
    sid = getattr(event, "session_id", session_id)
    rid = getattr(event, "run_id", run_id)
    if sid and rid:
        return event
    changes: dict[str, str] = {}
    if not sid and hasattr(event, "session_id"):
        changes["session_id"] = session_id
    if not rid and hasattr(event, "run_id"):
        changes["run_id"] = run_id
    return dataclasses.replace(event, **changes) if changes else event
