"""``@prism.tool`` keeps the function: the decorated object is callable with the original
signature (sync and async) and is a ``ToolDefinition`` wherever one is accepted."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
from tools_support import dispatch, make_call

import prism
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.tools import create_tool_registry, tool
from prism.tools.function_tool import FunctionTool
from prism.types import ModelConfig, ToolDefinition, ToolExecutionContext, ToolResultContent

pytest.importorskip("pydantic")


def test_a_decorated_sync_function_is_called_like_the_function() -> None:
    @prism.tool
    def add(a: int, b: int = 1) -> int:
        """Add two integers."""
        return a + b

    assert add(2, 3) == 5
    assert add(a=4) == 5
    assert add(2, b=10) == 12
    with pytest.raises(TypeError):
        add()  # type: ignore[call-arg]


async def test_a_decorated_async_function_returns_an_awaitable_of_its_result() -> None:
    calls: list[str] = []

    @tool
    async def shout(text: str) -> str:
        calls.append(text)
        return text.upper()

    pending = shout("hi")
    assert inspect.isawaitable(pending)
    assert await pending == "HI"
    assert calls == ["hi"]


def test_calling_the_tool_does_no_validation_or_conversion() -> None:
    """A direct call is the function itself: what it returns comes back unchanged."""

    @dataclasses.dataclass
    class Point:
        x: int

    @tool
    def make(x: int) -> Point:
        return Point(x)

    assert make(3) == Point(3)
    assert make("not validated") == Point("not validated")  # type: ignore[arg-type]


def test_tool_with_options_stays_callable_and_keeps_the_options() -> None:
    @prism.tool(name="lookup", description="Find a key.", exclusive=True, metadata={"k": 1})
    def find(key: str, ctx: ToolExecutionContext | None = None) -> str:
        return f"value of {key}"

    assert find("a") == "value of a"
    assert (find.name, find.description, find.exclusive, find.metadata) == (
        "lookup",
        "Find a key.",
        True,
        {"k": 1},
    )


def test_the_decorated_object_is_a_tool_definition_and_looks_like_the_function() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    assert isinstance(add, ToolDefinition) and isinstance(add, FunctionTool)
    assert add.__name__ == "add"
    assert add.__wrapped__ is add.function
    assert inspect.signature(add) == inspect.signature(add.function)
    assert list(inspect.signature(add).parameters) == ["a", "b"]
    # the class itself keeps its own dataclass signature
    assert "function" in inspect.signature(FunctionTool).parameters
    # the function is not part of the serialised definition
    assert set(add.to_dict()) == {"name", "description", "parameters", "exclusive"}
    renamed = dataclasses.replace(add, name="plus")
    assert renamed.name == "plus" and renamed(1, 2) == 3


async def test_the_decorated_object_is_accepted_by_the_registry_and_dispatch() -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    registry = create_tool_registry([add])
    assert registry.get("add") is add
    result = await dispatch(make_call("add", {"a": 2, "b": 3}), registry)
    assert result.error is None and result.value == 5


async def test_create_agent_runs_a_decorated_tool() -> None:
    seen: list[tuple[int, int]] = []

    @tool
    async def add(a: int, b: int) -> int:
        seen.append((a, b))
        return a + b

    provider = create_mock_provider(
        turns=[
            [provider_tool_call("c1", "add", {"a": 2, "b": 3}), provider_done()],
            [provider_text_delta("5"), provider_done()],
        ]
    )
    agent = create_agent(
        model=ModelConfig(provider="mock", model="m"), provider=provider, tools=[add]
    )
    result = await agent.create_session().run("2+3?")
    assert result.status == "succeeded"
    rows = [p for m in result.messages for p in m.content if isinstance(p, ToolResultContent)]
    assert [row.result for row in rows] == [5]
    assert seen == [(2, 3)]
    # and the same object is still a plain function for a unit test
    assert await add(1, 1) == 2


def test_positional_arguments_bind_like_the_function() -> None:
    @tool
    def describe(name: str, count: int = 0, *, loud: bool = False) -> dict[str, Any]:
        return {"name": name, "count": count, "loud": loud}

    assert describe("x", 2, loud=True) == {"name": "x", "count": 2, "loud": True}
    with pytest.raises(TypeError):
        describe("x", 2, True)  # type: ignore[call-arg]
