"""Middleware: ordered payload transformers the runtime runs at fixed hooks.

Each hook passes its payload through the handlers registered for it, in registration order. A
handler (sync or async) returns a replacement payload, or ``None`` to keep the current
one. Exceptions from handlers propagate to the caller (the runtime fails the run, except in the
``tool_result`` hook, where the dispatcher turns the call into an error result).

Hooks and their payload types:

====================  ==========================================================================
``provider_request``  ``ProviderRequest``, before each provider call
``tool_call``         ``ToolCallContent``, before a tool call is validated and dispatched
``tool_result``       ``ToolResult``, after a tool call finished
``retry``             ``RetryPayload``, before a failed provider attempt is retried
``input_assembly``    ``tuple[Message, ...]``, the messages of the next request
``compaction``        ``CompactionResult``, before a compaction summary is stored
====================  ==========================================================================
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal, TypeAlias, TypeVar, get_args

from prism.errors import PrismConfigError

__all__ = [
    "MIDDLEWARE_HOOKS",
    "MiddlewareHandler",
    "MiddlewareHook",
    "MiddlewareRegistry",
]

MiddlewareHook: TypeAlias = Literal[
    "provider_request", "tool_call", "tool_result", "retry", "input_assembly", "compaction"
]
"""The hook names the runtime runs."""

MIDDLEWARE_HOOKS: Final[frozenset[str]] = frozenset(get_args(MiddlewareHook))
"""Every valid hook name."""

MiddlewareHandler: TypeAlias = Callable[[Any], Any]
"""``handler(payload) -> replacement | None`` (or an awaitable of it)."""

_P = TypeVar("_P")


def _check_hook(hook: object) -> str:
    if not isinstance(hook, str) or hook not in MIDDLEWARE_HOOKS:
        known = ", ".join(sorted(MIDDLEWARE_HOOKS))
        raise PrismConfigError(f"Unknown middleware hook: {hook!r} (expected one of {known})")
    return hook


class MiddlewareRegistry:
    """Handlers per hook, run in registration order.

    Example::

        middleware = MiddlewareRegistry()
        middleware.use("tool_call", lambda call: dataclasses.replace(call, arguments={}))
        call = await middleware.run("tool_call", call)

    Args:
        handlers: Optional initial handlers, ``{hook: handler | [handler, ...]}``, registered in
            the mapping's order.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown hook or a non-callable handler.
    """

    __slots__ = ("_handlers",)

    def __init__(
        self, handlers: Mapping[str, MiddlewareHandler | Iterable[MiddlewareHandler]] | None = None
    ) -> None:
        self._handlers: dict[str, tuple[MiddlewareHandler, ...]] = {}
        if handlers:
            for hook, value in handlers.items():
                items = (value,) if callable(value) else tuple(value)
                for handler in items:
                    self.use(hook, handler)

    def use(self, hook: MiddlewareHook | str, handler: MiddlewareHandler) -> MiddlewareRegistry:
        """Register ``handler`` for ``hook`` after the handlers already registered.

        Args:
            hook: One of [`MIDDLEWARE_HOOKS`][prism.middleware.MIDDLEWARE_HOOKS].
            handler: ``handler(payload)`` returning a replacement payload, ``None`` to keep it,
                or an awaitable of either.

        Returns:
            This registry, for chaining.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — unknown hook name or non-callable handler.
        """
        name = _check_hook(hook)
        if not callable(handler):
            raise PrismConfigError(
                f"Middleware handler for {name!r} must be callable, got {type(handler).__name__}"
            )
        # Copy-on-write tuples: a run iterating a hook never sees a concurrent registration.
        self._handlers[name] = (*self._handlers.get(name, ()), handler)
        return self

    def has(self, hook: MiddlewareHook | str) -> bool:
        """Whether ``hook`` has at least one handler — lets hot paths skip [`run()`][prism.middleware.MiddlewareRegistry.run] (O(1)).

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — unknown hook name.
        """
        return bool(self._handlers.get(_check_hook(hook)))

    def handlers(self, hook: MiddlewareHook | str) -> tuple[MiddlewareHandler, ...]:
        """The handlers registered for ``hook``, in order.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — unknown hook name.
        """
        return self._handlers.get(_check_hook(hook), ())

    async def run(self, hook: MiddlewareHook | str, payload: _P) -> _P:
        """Pass ``payload`` through the handlers of ``hook`` in registration order.

        Each handler receives the current payload; a non-``None`` return (awaited when
        awaitable) replaces it. With no handlers the payload is returned unchanged at once.

        Returns:
            The final payload.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — unknown hook name.
            Exception: Whatever a handler raises, unchanged.
        """
        handlers = self._handlers.get(hook) if isinstance(hook, str) else None
        if not handlers:
            if not isinstance(hook, str) or hook not in MIDDLEWARE_HOOKS:
                _check_hook(hook)
            return payload
        current: Any = payload
        for handler in handlers:
            result = handler(current)
            if inspect.isawaitable(result):
                result = await result
            if result is not None:
                current = result
        out: _P = current
        return out

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={len(v)}" for k, v in self._handlers.items())
        return f"MiddlewareRegistry({counts})"
