"""A scripted in-memory provider for tests and examples.

```python
provider = create_mock_provider(turns=[
    [provider_tool_call("c1", "lookup", {"q": "x"}), provider_done()],
    [provider_text_delta("done"), provider_done(Usage(input_tokens=5, output_tokens=1))],
])
```
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence

from prism.abort import AbortSignal
from prism.errors import PrismConfigError
from prism.types import ErrorInfo, ProviderDone, ProviderErrorEvent, ProviderEvent, ProviderRequest

__all__ = ["MockProvider", "MockScriptItem", "create_mock_provider"]

MockScriptItem = ProviderEvent | BaseException
"""One scripted item: a provider event to yield, or an exception instance to raise."""


class MockProvider:
    """Provider that replays scripted events.

    Build it with [`create_mock_provider()`][prism.providers.mock.create_mock_provider]. It satisfies the ``AIProvider`` protocol.
    """

    __slots__ = ("_delay_s", "_events", "_on_request", "_turns", "call_count", "id", "requests")

    id: str
    """Provider id (default ``"mock"``)."""
    requests: list[ProviderRequest]
    """Every request received, in call order (appended before anything is yielded)."""
    call_count: int
    """Number of ``generate`` calls so far."""

    def __init__(
        self,
        *,
        events: Sequence[MockScriptItem] | None = None,
        turns: Sequence[Sequence[MockScriptItem]] | None = None,
        id: str = "mock",
        on_request: Callable[[ProviderRequest], object] | None = None,
        delay_s: float = 0.0,
    ) -> None:
        """Create the provider; see [`create_mock_provider()`][prism.providers.mock.create_mock_provider] for the arguments."""
        if events is not None and turns is not None:
            raise PrismConfigError("create_mock_provider: give either events or turns, not both")
        if not isinstance(delay_s, (int, float)) or isinstance(delay_s, bool) or delay_s < 0:
            raise PrismConfigError("create_mock_provider: delay_s must be a number >= 0")
        self.id = id
        self._events = tuple(events) if events is not None else None
        self._turns = tuple(tuple(turn) for turn in turns) if turns is not None else None
        self._on_request = on_request
        self._delay_s = float(delay_s)
        self.requests = []
        self.call_count = 0

    def _script_for(self, call_index: int) -> tuple[MockScriptItem, ...]:
        if self._events is not None:
            return self._events
        if self._turns is not None:
            if call_index < len(self._turns):
                return self._turns[call_index]
            return (
                ProviderErrorEvent(
                    error=ErrorInfo(
                        message=f"mock provider has no scripted turn {call_index + 1}",
                        code="mock_script_exhausted",
                    )
                ),
            )
        return (ProviderDone(),)

    def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Record the request and replay the script for this call.

        The request is appended to [`requests`][prism.providers.mock.MockProvider.requests] and ``on_request(request)`` is called
        synchronously when ``generate`` is called. Before each item the mock waits ``delay_s``
        seconds (ending early when ``request.signal`` aborts) and raises the signal's abort error
        if it is aborted. Exception items are raised when reached.

        Raises:
            BaseException: a scripted exception item, or the abort reason of ``request.signal``.
        """
        index = self.call_count
        self.call_count += 1
        self.requests.append(request)
        if self._on_request is not None:
            self._on_request(request)
        return self._replay(self._script_for(index), request)

    async def _replay(
        self, script: tuple[MockScriptItem, ...], request: ProviderRequest
    ) -> AsyncIterator[ProviderEvent]:
        signal = request.signal
        for item in script:
            if self._delay_s > 0:
                await _abortable_sleep(self._delay_s, signal)
            if signal is not None:
                signal.throw_if_aborted()
            if isinstance(item, BaseException):
                raise item
            yield item


async def _abortable_sleep(delay_s: float, signal: AbortSignal | None) -> None:
    """Sleep ``delay_s`` seconds, returning early when ``signal`` aborts."""
    if signal is None:
        await asyncio.sleep(delay_s)
        return
    if signal.aborted:
        return
    sleeper = asyncio.ensure_future(asyncio.sleep(delay_s))
    waiter = asyncio.ensure_future(signal.wait())
    try:
        await asyncio.wait({sleeper, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sleeper, waiter):
            if not task.done():
                task.cancel()
        for task in (sleeper, waiter):
            with contextlib.suppress(asyncio.CancelledError):
                await task


def create_mock_provider(
    events: Sequence[MockScriptItem] | None = None,
    *,
    turns: Sequence[Sequence[MockScriptItem]] | None = None,
    id: str = "mock",
    on_request: Callable[[ProviderRequest], object] | None = None,
    delay_s: float = 0.0,
) -> MockProvider:
    """Create a scripted provider.

    Args:
        events: Replayed by every ``generate`` call, e.g.
            ``[provider_text_delta("ok"), provider_done()]``.
        turns: Call *i* (0-based) replays ``turns[i]``; a call past the end yields one ``error``
            event with code ``"mock_script_exhausted"`` and message
            ``mock provider has no scripted turn <i+1>``.
        id: Provider id.
        on_request: Sync callback given each request when ``generate`` is called.
        delay_s: Seconds to wait before each item (abortable via ``request.signal``).

    With neither ``events`` nor ``turns`` every call yields one ``done`` event. Items may be
    exception instances, raised when reached (to simulate transport failures).

    Raises:
        PrismConfigError: both ``events`` and ``turns`` are given, or ``delay_s`` is negative.
    """
    return MockProvider(events=events, turns=turns, id=id, on_request=on_request, delay_s=delay_s)
