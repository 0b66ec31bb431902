"""Middleware registry (RUN-2)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from prism.errors import PrismConfigError
from prism.middleware import MIDDLEWARE_HOOKS, MiddlewareRegistry


def test_run2_hook_names() -> None:
    """RUN-2: the hooks the runtime runs."""
    assert MIDDLEWARE_HOOKS == {
        "provider_request",
        "tool_call",
        "tool_result",
        "retry",
        "input_assembly",
        "compaction",
    }


async def test_run2_handlers_run_in_registration_order_and_replace_payload() -> None:
    """RUN-2: each handler receives the current payload; a return value replaces it."""
    seen: list[tuple[str, Any]] = []
    m = MiddlewareRegistry()

    def first(p: list[str]) -> list[str]:
        seen.append(("first", p))
        return [*p, "a"]

    def second(p: list[str]) -> list[str]:
        seen.append(("second", p))
        return [*p, "b"]

    m.use("tool_call", first).use("tool_call", second)
    assert await m.run("tool_call", []) == ["a", "b"]
    assert seen == [("first", []), ("second", ["a"])]


async def test_run2_none_keeps_the_payload() -> None:
    """RUN-2: a handler returning None keeps the current payload."""
    m = MiddlewareRegistry()
    calls: list[int] = []
    m.use("retry", lambda p: calls.append(p))
    m.use("retry", lambda p: p + 1)
    assert await m.run("retry", 1) == 2
    assert calls == [1]


async def test_run2_async_handlers_are_awaited() -> None:
    """RUN-2/ARCH-10: handlers may be sync or async."""
    m = MiddlewareRegistry()

    async def double(p: int) -> int:
        await asyncio.sleep(0)
        return p * 2

    async def keep(p: int) -> None:
        return None

    m.use("compaction", double)
    m.use("compaction", keep)
    m.use("compaction", lambda p: p + 1)
    assert await m.run("compaction", 5) == 11


async def test_run2_fast_path_returns_same_object() -> None:
    """RUN-2: with no handler the payload is returned unchanged."""
    m = MiddlewareRegistry()
    payload = object()
    assert await m.run("provider_request", payload) is payload
    assert not m.has("provider_request")
    m.use("tool_result", lambda p: None)
    assert m.has("tool_result")
    assert not m.has("tool_call")


def test_run2_unknown_hook_in_use_raises() -> None:
    """RUN-2: an unknown hook name in use raises PrismConfigError."""
    m = MiddlewareRegistry()
    with pytest.raises(PrismConfigError) as info:
        m.use("before_turn", lambda p: p)  # type: ignore[arg-type]
    assert "before_turn" in str(info.value)
    assert info.value.code == "ERR_PRISM_CONFIG"


async def test_run2_unknown_hook_in_run_and_has_raises() -> None:
    """RUN-2: run() and has() reject unknown hooks too."""
    m = MiddlewareRegistry()
    with pytest.raises(PrismConfigError):
        await m.run("nope", 1)  # type: ignore[arg-type]
    with pytest.raises(PrismConfigError):
        m.has("nope")  # type: ignore[arg-type]
    with pytest.raises(PrismConfigError):
        await m.run(["tool_call"], 1)  # type: ignore[arg-type]


def test_run2_non_callable_handler_raises() -> None:
    """RUN-2: a handler must be callable."""
    with pytest.raises(PrismConfigError):
        MiddlewareRegistry().use("tool_call", "not callable")  # type: ignore[arg-type]


async def test_run2_handler_exception_propagates_and_stops_the_chain() -> None:
    """RUN-2: an exception from a handler propagates; later handlers do not run."""
    m = MiddlewareRegistry()
    later: list[int] = []

    def boom(p: int) -> int:
        raise RuntimeError("boom")

    m.use("tool_result", boom)
    m.use("tool_result", lambda p: later.append(p))
    with pytest.raises(RuntimeError, match="boom"):
        await m.run("tool_result", 1)
    assert later == []


async def test_run2_registration_during_a_run_does_not_affect_it() -> None:
    """RUN-2: a handler registered while a hook runs applies from the next run."""
    m = MiddlewareRegistry()
    order: list[str] = []

    def registering(p: int) -> None:
        order.append("registering")
        m.use("input_assembly", lambda q: order.append("late"))

    m.use("input_assembly", registering)
    await m.run("input_assembly", 0)
    assert order == ["registering"]
    await m.run("input_assembly", 0)
    assert order == ["registering", "registering", "late"]


async def test_run2_constructor_mapping_registers_in_order() -> None:
    """RUN-2: initial handlers may be given as a mapping."""
    m = MiddlewareRegistry({"tool_call": [lambda p: p + "a", lambda p: p + "b"], "retry": str})
    assert await m.run("tool_call", "") == "ab"
    assert m.handlers("retry") == (str,)
    with pytest.raises(PrismConfigError):
        MiddlewareRegistry({"unknown": str})
