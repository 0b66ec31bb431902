"""Between two provider attempts: asking the retry policy, then waiting out its delay.

:class:`~prism.runtime.run.attempts.ProviderAttempts` calls :func:`decide_retry` after a failed
attempt that may be retried, and :func:`wait_retry_delay` before the next one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from prism._util import maybe_await
from prism.abort import AbortSignal
from prism.retry import RetryContext, RetryDecision, RetryPayload, RetryPolicy

__all__ = ["RetryHook", "decide_retry", "wait_retry_delay"]

RetryHook = Callable[[RetryPayload], Awaitable[RetryPayload]]
"""The ``retry`` middleware hook: may change the policy's decision."""


async def decide_retry(
    policy: RetryPolicy | None, context: RetryContext, *, hook: RetryHook | None
) -> RetryDecision:
    """The policy's decision for the failed attempt described by ``context``, after ``hook``.

    Raises:
        TypeError: the policy returned neither a ``RetryDecision`` nor a mapping of one.
    """
    assert policy is not None
    decision: Any = await maybe_await(policy.decide(context))
    if isinstance(decision, Mapping):
        decision = RetryDecision.coerce(decision)
    if not isinstance(decision, RetryDecision):
        raise TypeError(f"retry policy returned {type(decision).__name__}, not a RetryDecision")
    if hook is not None:
        payload = await hook(RetryPayload(context=context, decision=decision))
        decision = payload.decision
    result: RetryDecision = decision
    return result


def _set_none(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def wait_retry_delay(signal: AbortSignal, delay_ms: float) -> None:
    """Wait ``delay_ms`` milliseconds; an abort of ``signal`` ends the wait and raises.

    Raises:
        Exception: the signal's abort reason, when it is aborted before or during the wait.
    """
    signal.throw_if_aborted()
    if delay_ms > 0:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        handle = loop.call_later(delay_ms / 1000.0, _set_none, fut)
        remove = signal.add_listener(lambda _reason: _set_none(fut))
        try:
            await fut
        finally:
            handle.cancel()
            remove()
    signal.throw_if_aborted()
