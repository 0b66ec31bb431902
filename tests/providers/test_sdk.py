"""The pieces the OpenAI and Anthropic adapters share: the abort bridge and the transport mapper."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from prism.abort import AbortController, AbortSignal
from prism.errors import AbortError
from prism.providers._sdk import AbortBridge, transport_code


class _SpySignal(AbortSignal):
    """A signal that counts its live listeners."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0

    def add_listener(self, callback: Callable[[Any], None]) -> Callable[[], None]:
        remove = super().add_listener(callback)
        self.live += 1

        def removed() -> None:
            self.live -= 1
            remove()

        return removed


async def test_an_abort_cancels_the_pending_await_and_the_listener_goes_with_the_block() -> None:
    controller = AbortController()
    signal = controller.signal
    with AbortBridge(signal) as bridge:
        asyncio.get_running_loop().call_later(0.01, controller.abort)
        with pytest.raises(AbortError):
            await bridge.run(asyncio.sleep(10))
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0
    assert len(asyncio.all_tasks()) == 1  # no task of its own

    spy = _SpySignal()
    with AbortBridge(spy) as bridge:
        assert spy.live == 1
        assert await bridge.run(asyncio.sleep(0, "value")) == "value"
    assert spy.live == 0


async def test_an_already_aborted_signal_never_starts_the_awaitable() -> None:
    controller = AbortController()
    controller.abort()
    started = False

    async def call() -> None:
        nonlocal started
        started = True

    with AbortBridge(controller.signal) as bridge, pytest.raises(AbortError):
        await bridge.run(call())
    assert not started


async def test_an_abort_while_suspended_outside_run_is_raised_by_the_next_run() -> None:
    controller = AbortController()
    with AbortBridge(controller.signal) as bridge:
        await bridge.run(asyncio.sleep(0))
        controller.abort()  # between two awaits on the SDK: nothing to cancel
        await asyncio.sleep(0)
        with pytest.raises(AbortError):
            await bridge.run(asyncio.sleep(0))


async def test_a_cancellation_swallowed_by_the_awaited_call_is_taken_back() -> None:
    controller = AbortController()

    async def stubborn() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "swallowed"
        return "slept"

    with AbortBridge(controller.signal) as bridge:
        asyncio.get_running_loop().call_later(0.01, controller.abort)
        with pytest.raises(AbortError):
            await bridge.run(stubborn())
    await asyncio.sleep(0)
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0


async def test_an_external_cancellation_propagates() -> None:
    controller = AbortController()

    async def waiter() -> None:
        with AbortBridge(controller.signal) as bridge:
            await bridge.run(asyncio.sleep(10))

    task = asyncio.create_task(waiter())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not controller.signal.aborted


async def test_without_a_signal_the_bridge_just_awaits() -> None:
    with AbortBridge(None) as bridge:
        assert await bridge.run(asyncio.sleep(0, 3)) == 3


def _chained(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except BaseException as caught:
        return caught


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (httpx.ConnectTimeout("slow connect"), "timeout"),
        (httpx.ReadTimeout("slow read"), "timeout"),
        (httpx.ConnectError("refused"), "ECONNREFUSED"),
        (httpx.ReadError("reset"), "ECONNRESET"),
        (httpx.RemoteProtocolError("peer closed"), "ECONNRESET"),
        (_chained(RuntimeError("wrapped"), httpx.ConnectError("refused")), "ECONNREFUSED"),
        (RuntimeError("no transport failure"), None),
        (httpx.HTTPStatusError("500", request=None, response=None), None),  # type: ignore[arg-type]
    ],
)
def test_transport_code_maps_httpx_failures_anywhere_in_the_cause_chain(
    exc: BaseException, code: str | None
) -> None:
    assert transport_code(exc) == code
