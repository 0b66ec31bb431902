"""Tests for prism.abort (CON-33)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from prism.abort import AbortController, AbortError, AbortSignal
from prism.errors import AbortError as ErrorsAbortError


def test_con33_abort_error_reexported() -> None:
    """CON-33: AbortError is the one from prism.errors."""
    assert AbortError is ErrorsAbortError


def test_con33_first_abort_wins_and_default_reason() -> None:
    """CON-33: the first abort wins; ``reason=None`` means AbortError("Agent run aborted")."""
    controller = AbortController()
    assert not controller.signal.aborted and controller.signal.reason is None
    controller.abort()
    reason = controller.signal.reason
    assert controller.signal.aborted and isinstance(reason, AbortError)
    assert str(reason) == "Agent run aborted"
    controller.abort("later")
    assert controller.signal.reason is reason


def test_con33_throw_if_aborted() -> None:
    """CON-33: raises the reason when it is an exception, else AbortError(str(reason))."""
    controller = AbortController()
    controller.signal.throw_if_aborted()  # not aborted: no-op
    boom = RuntimeError("boom")
    controller.abort(boom)
    with pytest.raises(RuntimeError) as info:
        controller.signal.throw_if_aborted()
    assert info.value is boom
    other = AbortController()
    other.abort("user pressed stop")
    with pytest.raises(AbortError, match="user pressed stop") as info2:
        other.signal.throw_if_aborted()
    assert info2.value.code == "ERR_PRISM_ABORTED"


def test_con33_listeners_run_once_synchronously_and_remove() -> None:
    """CON-33: listeners run synchronously, once, at abort time; remove() unregisters."""
    controller = AbortController()
    calls: list[tuple[str, Any]] = []
    controller.signal.add_listener(lambda r: calls.append(("a", r)))
    remove_b = controller.signal.add_listener(lambda r: calls.append(("b", r)))
    remove_b()
    remove_b()  # idempotent
    controller.abort("why")
    assert calls == [("a", "why")]
    controller.abort("again")
    assert calls == [("a", "why")]


def test_con33_listener_on_aborted_signal_runs_immediately() -> None:
    """CON-33: a listener added to an already-aborted signal runs immediately."""
    controller = AbortController()
    controller.abort("done")
    seen: list[Any] = []
    remove = controller.signal.add_listener(seen.append)
    assert seen == ["done"]
    remove()


def test_con33_failing_listener_does_not_stop_others() -> None:
    """CON-33: one failing listener does not prevent the others from running."""
    controller = AbortController()
    seen: list[Any] = []

    def bad(reason: Any) -> None:
        raise ValueError("listener bug")

    controller.signal.add_listener(bad)
    controller.signal.add_listener(seen.append)
    controller.abort("x")
    assert seen == ["x"] and controller.signal.aborted


async def test_con33_wait_returns_once_aborted() -> None:
    """CON-33: ``await signal.wait()`` returns once aborted (and at once if already aborted)."""
    controller = AbortController()
    waiters = [asyncio.create_task(controller.signal.wait()) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(t.done() for t in waiters)
    controller.abort()
    await asyncio.gather(*waiters)
    await controller.signal.wait()


async def test_con33_cancelled_wait_leaves_no_waiter() -> None:
    """CON-33: a cancelled waiter is removed; later aborts still wake other waiters."""
    controller = AbortController()
    cancelled = asyncio.create_task(controller.signal.wait())
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert not controller.signal._waiters
    survivor = asyncio.create_task(controller.signal.wait())
    await asyncio.sleep(0)
    controller.abort()
    await survivor


def test_con33_any_aborts_with_first_reason() -> None:
    """CON-33: AbortSignal.any aborts with the reason of the first input to abort."""
    a, b = AbortController(), AbortController()
    combined = AbortSignal.any(a.signal, b.signal)
    assert not combined.aborted
    b.abort("b first")
    assert combined.aborted and combined.reason == "b first"
    a.abort("a later")
    assert combined.reason == "b first"
    assert not a.signal._listeners  # listeners on the other inputs were removed


def test_con33_any_with_already_aborted_input() -> None:
    """CON-33: an already-aborted input aborts the combined signal at once."""
    a, b = AbortController(), AbortController()
    b.abort("pre")
    combined = AbortSignal.any(a.signal, b.signal)
    assert combined.aborted and combined.reason == "pre"
    assert not AbortSignal.any().aborted
