"""A finished run is freed by reference counting: it leaves no reference cycle (ARCH-15).

With many concurrent runs the cycle collector's passes walk every live object; a run that left
cycles behind would also keep its whole context (history, requests, tool results) alive until
such a pass. The check: with the collector off, a successful run with a parallel tool round,
followed by dropping every reference, leaves nothing for ``gc.collect()`` to find. (A run that
raises still hands its caller an exception whose traceback holds the frames it passed through:
that cycle is Python's, and it is freed by the collector.)
"""

from __future__ import annotations

import gc
import os
from typing import Any

from prism.loops.contracts import SingleShotLoopOptions
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.tools import tool


@tool
async def lookup(order_id: str) -> dict[str, Any]:
    """Look up an order.

    Args:
        order_id: The order number.
    """
    return {"order_id": order_id, "status": "shipped"}


async def _one_run(turns: list[list[Any]]) -> str:
    agent = create_agent(
        model={"provider": "mock", "model": "m"},
        provider=create_mock_provider(turns=turns),
        tools=[lookup],
        loop=SingleShotLoopOptions(tool_concurrency=2),
    )
    session = agent.create_session()
    try:
        result = await session.run("where is A-1?")
    except Exception:
        return "raised"
    return result.status


def _tool_turn() -> list[Any]:
    return [
        provider_text_delta("Looking."),
        provider_tool_call("call_a", "lookup", {"order_id": "A-1"}),
        provider_tool_call("call_b", "lookup", {"order_id": "A-2"}),
        provider_done(),
    ]


async def test_finished_runs_leave_no_reference_cycle() -> None:
    last = [provider_text_delta("Shipped."), provider_done()]
    await _one_run([_tool_turn(), last])  # warm-up: first-use caches
    gc.collect()
    # Everything alive before the run is held, so what an earlier test left to other threads
    # (a server's objects they drop meanwhile) cannot turn into garbage during the check.
    alive_before = gc.get_objects()
    gc.disable()
    try:
        assert await _one_run([_tool_turn(), last]) == "succeeded"
        assert _prism_garbage() == []
    finally:
        gc.enable()
        del alive_before


def _prism_garbage() -> list[str]:
    """What a collection finds that the run made: objects of prism's classes, and frames,
    coroutines, generators and functions of prism's code (with the tasks that hold them).
    Garbage that other threads of the test process leave meanwhile (a server or an SDK left
    running by an earlier test) is not the run's and is ignored."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = [type(obj).__qualname__ for obj in gc.garbage if _made_by_prism(obj)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return found


def _made_by_prism(obj: object) -> bool:
    if (getattr(type(obj), "__module__", None) or "").startswith("prism"):
        return True
    code = None
    for name in ("f_code", "cr_code", "gi_code", "ag_code", "__code__"):
        code = getattr(obj, name, None)
        if code is not None:
            break
    if code is None and hasattr(obj, "get_coro"):
        coro = obj.get_coro()
        code = getattr(coro, "cr_code", None)
    return code is not None and f"{os.sep}prism{os.sep}" in code.co_filename
