"""Abort signals: ``AbortController`` and ``AbortSignal``.

A signal is a cheap, loop-agnostic object: it starts no task and creates a future only while
someone awaits [`AbortSignal.wait()`][prism.abort.AbortSignal.wait]. Listeners run synchronously, once, at abort time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from prism.errors import AbortError

__all__ = ["AbortController", "AbortError", "AbortSignal"]

_log = logging.getLogger("prism")

_Listener = Callable[[Any], object]
"""``callback(reason)``; the return value is ignored."""


class AbortSignal:
    """Read side of an abort.

    Attributes:
        aborted: Whether the signal has been aborted.
        reason: The abort reason (``None`` until aborted; an ``AbortError`` by default).
    """

    __slots__ = ("_aborted", "_listeners", "_next_key", "_reason", "_waiters")

    def __init__(
        self, connect: Callable[[Callable[[object], bool]], object] | None = None, /
    ) -> None:
        """Create a signal that is not aborted.

        Args:
            connect: Called once, here, with the function that aborts this signal
                (``abort(reason) -> bool``, ``False`` when it was already aborted).
                [`AbortController`][prism.abort.AbortController] passes it, so only the controller can abort its signal.
        """
        self._aborted = False
        self._reason: Any = None
        self._listeners: dict[int, _Listener] | None = None
        self._next_key = 0
        self._waiters: list[asyncio.Future[None]] | None = None
        if connect is not None:
            connect(self._abort)

    def __repr__(self) -> str:
        if self._aborted:
            return f"<AbortSignal aborted reason={self._reason!r}>"
        return "<AbortSignal>"

    @property
    def aborted(self) -> bool:
        """True once aborted."""
        return self._aborted

    @property
    def reason(self) -> object:
        """The abort reason, or ``None`` while not aborted."""
        return self._reason

    def throw_if_aborted(self) -> None:
        """Raise when aborted.

        Raises:
            BaseException: ``reason`` itself when it is an exception instance.
            AbortError: ``AbortError(str(reason))`` for any other reason (``ERR_PRISM_ABORTED``).
        """
        if not self._aborted:
            return
        reason = self._reason
        if isinstance(reason, BaseException):
            raise reason
        raise AbortError(str(reason))

    async def wait(self) -> None:
        """Return once the signal is aborted (immediately when it already is)."""
        if self._aborted:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(fut)
        try:
            await fut
        finally:
            waiters = self._waiters
            if waiters is not None:
                try:
                    waiters.remove(fut)
                except ValueError:  # pragma: no cover - already removed
                    pass

    def add_listener(self, callback: _Listener) -> Callable[[], None]:
        """Register ``callback(reason)``, run synchronously and once at abort time.

        On an already-aborted signal the callback runs immediately. Exceptions raised by a
        callback are logged (type name only) and do not stop other listeners.

        Returns:
            A function removing the listener (idempotent).
        """
        if self._aborted:
            _call(callback, self._reason)
            return _noop
        if self._listeners is None:
            self._listeners = {}
        key = self._next_key
        self._next_key = key + 1
        self._listeners[key] = callback
        return _Remover(self, key)

    def _remove(self, key: int) -> None:
        listeners = self._listeners
        if listeners is not None:
            listeners.pop(key, None)
            if not listeners:  # a signal without listeners holds no dict
                self._listeners = None

    def _abort(self, reason: Any) -> bool:
        if self._aborted:
            return False
        self._aborted = True
        self._reason = reason
        waiters, self._waiters = self._waiters, None
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)
        listeners, self._listeners = self._listeners, None
        if listeners:
            for callback in listeners.values():
                _call(callback, reason)
        return True

    @staticmethod
    def any(*signals: AbortSignal) -> AbortSignal:
        """Return a signal that aborts with the reason of the first input signal to abort.

        An input that is already aborted aborts the result at once (first such input, in argument
        order). Once the result aborts, its listeners on the other inputs are removed.
        """
        controller = AbortController()
        for sig in signals:
            if sig.aborted:
                controller.abort(sig.reason)
                return controller.signal
        removers: list[Callable[[], None]] = []

        def on_abort(reason: Any) -> None:
            controller.abort(reason)
            for remove in removers:
                remove()
            removers.clear()

        for sig in signals:
            removers.append(sig.add_listener(on_abort))
        return controller.signal


def _noop() -> None:
    return None


class _Remover:
    """What [`AbortSignal.add_listener()`][prism.abort.AbortSignal.add_listener] returns: ``remover()`` removes the listener. One
    small object, where a closure would be four (function, closure tuple, two cells); a signal
    gets one per awaited tool call and per provider attempt."""

    __slots__ = ("_key", "_signal")

    def __init__(self, signal: AbortSignal, key: int) -> None:
        self._signal = signal
        self._key = key

    def __call__(self) -> None:
        self._signal._remove(self._key)


def _call(callback: _Listener, reason: Any) -> None:
    try:
        callback(reason)
    except Exception as exc:  # a failing host listener must not break the abort
        _log.warning("abort listener raised %s", type(exc).__name__)


class AbortController:
    """Write side of an abort.

    Attributes:
        signal: The controlled ``AbortSignal``.
    """

    __slots__ = ("signal",)

    def __init__(self) -> None:
        # The controller aborts its own signal directly (this module's class), so it holds no
        # bound method: a controller is two objects.
        self.signal = AbortSignal()

    def abort(self, reason: object = None) -> None:
        """Abort the signal; the first call wins, later calls are no-ops.

        Args:
            reason: Any value; ``None`` means ``AbortError("Agent run aborted")``.
        """
        if self.signal.aborted:
            return
        self.signal._abort(AbortError("Agent run aborted") if reason is None else reason)

    @property
    def aborted(self) -> bool:
        """Whether ``signal`` is aborted."""
        return self.signal.aborted
