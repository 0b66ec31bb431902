"""The shielded envelope steps of a run leg (RUN-10, RUN-22, ARCH-15), started in a task of their
own or inline in the caller's task (``inline=True``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from prism.runtime.run._shield import shielded as _shielded

INLINE = pytest.mark.parametrize("inline", [False, True])


@INLINE
async def test_a_synchronous_failure_propagates_run_10(inline: bool) -> None:
    async def step() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await _shielded(step(), inline=inline)


@INLINE
async def test_a_suspended_step_finishes_and_returns_its_value_run_10(inline: bool) -> None:
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[int] = loop.create_future()
    order: list[str] = []

    async def step() -> int:
        order.append("start")
        value = await gate
        order.append("resumed")
        await asyncio.sleep(0)
        order.append("end")
        return value * 2

    loop.call_soon(gate.set_result, 21)
    assert await _shielded(step(), inline=inline) == 42
    assert order == ["start", "resumed", "end"]


@INLINE
async def test_exceptions_reach_the_step_and_leave_it_run_10(inline: bool) -> None:
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[None] = loop.create_future()
    caught: list[str] = []

    async def step() -> str:
        try:
            await gate
        except KeyError as exc:
            caught.append(str(exc))
            await asyncio.sleep(0)
            raise RuntimeError("after") from exc
        return "unreachable"

    loop.call_soon(gate.set_exception, KeyError("k"))
    with pytest.raises(RuntimeError, match="after"):
        await _shielded(step(), inline=inline)
    assert caught == ["'k'"]


@INLINE
async def test_a_cancelled_caller_waits_for_the_step_then_raises_run_10(inline: bool) -> None:
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[None] = loop.create_future()
    finished: list[bool] = []

    async def step() -> None:
        await gate
        await asyncio.sleep(0)
        finished.append(True)

    async def caller() -> Any:
        return await _shielded(step(), inline=inline)

    task = asyncio.ensure_future(caller())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0)
    assert not task.done()  # still waiting for the step
    gate.set_result(None)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished == [True]


async def test_an_inline_step_that_does_not_wait_runs_in_the_callers_task_run_10() -> None:
    seen: list[object] = []

    async def step() -> int:
        seen.append(asyncio.current_task())
        return 7

    assert await _shielded(step(), inline=True) == 7
    assert seen == [asyncio.current_task()]
    assert await _shielded(step()) == 7
    assert seen[1] is not asyncio.current_task()  # the default: a task of its own
