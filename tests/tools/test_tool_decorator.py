"""The @tool decorator, and that importing prism loads neither jsonschema nor pydantic
(TOOL-14, ARCH-5).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from tools_support import Opaque, Point, dispatch, make_call, make_context

from prism.errors import (
    PrismConfigError,
)
from prism.tools import (
    tool,
)
from prism.types import (
    ToolDefinition,
    ToolExecutionContext,
)

# =========================================================================== TOOL-14


def test_tool14_bare_decorator_builds_definition() -> None:
    """TOOL-14: name, description up to the Args section, per-parameter descriptions, required."""
    pytest.importorskip("pydantic")

    @tool
    def search(query: str, limit: int = 5, ctx: ToolExecutionContext | None = None) -> list[str]:
        """Search the index.

        Returns matching ids.

        Args:
            query: What to look for,
                across all fields.
            limit: Maximum hits.
            unknown: Not a parameter.
        """
        return [query] * limit

    assert isinstance(search, ToolDefinition)
    assert search.name == "search"
    assert search.description == "Search the index.\n\nReturns matching ids."
    params = search.parameters
    assert params is not None and params["type"] == "object"
    props = params["properties"]
    assert isinstance(props, dict)
    assert props["query"]["description"] == "What to look for, across all fields."  # type: ignore[index]
    assert props["limit"]["description"] == "Maximum hits."  # type: ignore[index]
    assert props["limit"]["default"] == 5  # type: ignore[index]
    assert params["required"] == ["query"]
    assert "unknown" not in props


def test_tool14_options_and_rest_docstring() -> None:
    """TOOL-14: @tool(...) options; reST :param: descriptions."""
    pytest.importorskip("pydantic")

    @tool(name="lookup", exclusive=True, metadata={"k": 1})
    def find(key: str) -> str:
        """Find a key.

        :param key: The key to find,
            exactly.
        :returns: the value
        """
        return key

    assert (find.name, find.exclusive, find.metadata) == ("lookup", True, {"k": 1})
    assert find.description == "Find a key."
    assert find.parameters is not None
    assert find.parameters["properties"]["key"]["description"] == "The key to find, exactly."  # type: ignore[index,call-overload]

    @tool(description="explicit")
    def nodoc(a: int) -> int:
        return a

    assert nodoc.description == "explicit"

    @tool
    def empty(a: int) -> int:
        return a

    assert empty.description is None


def test_tool14_context_parameter_excluded_and_passed() -> None:
    """TOOL-14: a ToolExecutionContext parameter is not in the schema and receives the context."""
    pytest.importorskip("pydantic")

    @tool
    def who(name: str, ctx: ToolExecutionContext) -> str:
        return f"{name}@{ctx.run_id}"

    assert who.parameters is not None
    assert set(who.parameters["properties"]) == {"name"}  # type: ignore[arg-type]
    assert who.execute({"name": "a"}, make_context()) == "a@run_1"
    assert not asyncio.iscoroutinefunction(who.execute)


async def test_tool14_async_function_gives_async_execute_and_models_are_instances() -> None:
    """TOOL-14: async def → async execute; pydantic-model/dataclass params receive instances."""
    pydantic = pytest.importorskip("pydantic")

    class Item(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        id: int

    received: list[Any] = []

    @tool
    async def store(item: Item, point: Point) -> Item:
        received.extend([item, point])
        return item

    assert asyncio.iscoroutinefunction(store.execute)
    value = await store.execute({"item": {"id": 3}, "point": {"x": 1, "y": 2}}, make_context())
    assert isinstance(received[0], Item) and received[1] == Point(1, 2)
    assert value == {"id": 3}  # TOOL-12 conversion


async def test_tool14_dispatch_validates_generated_schema_and_conversion_errors() -> None:
    """TOOL-14: the built-in validator checks generated parameters; conversion errors are error results."""
    pytest.importorskip("pydantic")

    @tool
    def add(a: int, b: int = 0) -> int:
        return a + b

    ok = await dispatch(make_call("add", {"a": 2, "b": 3}), [add])
    assert ok.value == 5
    blocked = await dispatch(make_call("add", {"b": 3}), [add])
    assert blocked.error is not None and blocked.error.code == "validation_failed"
    failed = await dispatch(make_call("add", {"a": "x"}), [add], tool_validator=False)
    assert failed.error is not None and failed.error.name == "ValidationError"


def _varargs(*items: int) -> None: ...


def _kwargs(**items: int) -> None: ...


def _posonly(a: int, /) -> None: ...


def _unannotated(a) -> None:  # type: ignore[no-untyped-def]
    ...


def _undescribable(a: Opaque) -> None: ...


@pytest.mark.parametrize(
    ("fn", "param"),
    [(_varargs, "items"), (_kwargs, "items"), (_posonly, "a"), (_unannotated, "a"), (_undescribable, "a")],
)
def test_tool14_unsupported_parameters_raise_config_error(fn: Callable[..., Any], param: str) -> None:
    """TOOL-14: *args, **kwargs, positional-only, unannotated or undescribable → PrismConfigError."""
    pytest.importorskip("pydantic")
    with pytest.raises(PrismConfigError) as info:
        tool(fn)
    assert fn.__name__ in str(info.value) and param in str(info.value)


def test_tool14_missing_pydantic_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """TOOL-14/ARCH-5: without pydantic, decoration raises ImportError naming the extra."""
    monkeypatch.setitem(sys.modules, "pydantic", None)
    with pytest.raises(ImportError, match=r"prism-runtime\[pydantic\]"):

        @tool
        def f(a: int) -> int:
            return a


def test_arch5_import_does_not_load_jsonschema_or_pydantic() -> None:
    """ARCH-5/TOOL-6/TOOL-14: importing these modules imports neither jsonschema nor pydantic."""
    code = (
        "import sys, prism.tools, prism.guardrails, prism.structured_output;"
        "bad=[m for m in ('jsonschema','pydantic') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


async def test_tool14_generated_schema_forbids_extra_keys() -> None:
    """TOOL-14/TOOL-6: the generated schema sets ``additionalProperties: false``, so a call with
    an unknown key is blocked with an error the model can correct instead of running with the key
    silently dropped."""
    pytest.importorskip("pydantic")
    seen: list[int] = []

    @tool
    def count(a: int) -> int:
        seen.append(a)
        return a

    assert count.parameters is not None
    assert count.parameters["additionalProperties"] is False
    blocked = await dispatch(make_call("count", {"a": 1, "extra": 2}), [count])
    assert blocked.error is not None and "extra" in blocked.error.message
    assert seen == []
    with pytest.raises(Exception, match="extra"):  # also without the validator (TOOL-6 off)
        count.execute({"a": 1, "extra": 2}, make_context())
    ok = await dispatch(make_call("count", {"a": 1}), [count])
    assert ok.error is None and seen == [1]


async def test_a_decorated_tools_plain_result_is_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain JSON result of a decorated tool is walked once, by the dispatcher, not also by the
    decorator's conversion; models and dataclasses are still converted by ``execute`` itself."""
    pytest.importorskip("pydantic")
    from prism.tools import results

    walked: list[Any] = []
    real = results.is_json_value

    def counting(value: Any, **kw: Any) -> bool:
        walked.append(value)
        return real(value, **kw)

    monkeypatch.setattr(results, "is_json_value", counting)

    @tool
    def rows(n: int) -> dict[str, Any]:
        return {"rows": [{"i": i, "x": 0.5} for i in range(n)]}

    outcome = await dispatch(make_call("rows", {"n": 3}), [rows])
    assert outcome.value == {"rows": [{"i": i, "x": 0.5} for i in range(3)]}
    assert len(walked) == 1
    assert rows.execute({"n": 1}, make_context()) == {"rows": [{"i": 0, "x": 0.5}]}

    @tool
    def point() -> Point:
        return Point(1, 2)

    assert point.execute({}, make_context()) == {"x": 1, "y": 2}
