"""Tool registry and filters (TOOL-1, TOOL-2, TOOL-13)."""

from __future__ import annotations

import pytest
from tools_support import Recorder, dispatch, echo_tool, make_call

from prism.errors import (
    PrismConfigError,
)
from prism.tools import (
    ToolFilter,
    create_tool_registry,
    filter_tools,
    normalize_tool_filters,
)
from prism.types import (
    ErrorInfo,
)

# =========================================================================== TOOL-1


def test_tool1_registry_register_get_resolve_list() -> None:
    """TOOL-1: get/resolve/list in insertion order; resolve raises KeyError for unknown names."""
    a, b = echo_tool("a"), echo_tool("b")
    registry = create_tool_registry([a])
    registry.register(b)
    assert registry.get("a") is a and registry.get("zzz") is None
    assert registry.resolve("b") is b
    assert registry.list() == [a, b]
    with pytest.raises(KeyError, match="Unknown tool: zzz"):
        registry.resolve("zzz")
    assert "a" in registry and len(registry) == 2


def test_tool1_duplicate_error_and_replace_keeps_position() -> None:
    """TOOL-1: duplicate="error" raises PrismConfigError; "replace" keeps the first position."""
    a1, b, a2 = echo_tool("a"), echo_tool("b"), echo_tool("a", description="new")
    with pytest.raises(PrismConfigError, match="Duplicate tool: a"):
        create_tool_registry([a1, b, a2])
    registry = create_tool_registry([a1, b, a2], duplicate="replace")
    assert registry.list() == [a2, b]
    with pytest.raises(PrismConfigError):
        create_tool_registry(duplicate="ignore")  # type: ignore[arg-type]
    with pytest.raises(PrismConfigError):
        create_tool_registry(["not a tool"])  # type: ignore[list-item]
    copy = create_tool_registry(registry)
    assert copy.list() == registry.list() and copy is not registry


# =========================================================================== TOOL-2 / TOOL-13


def test_tool2_filter_semantics() -> None:
    """TOOL-2: kept when no filter denies it and every filter with a non-empty allow lists it."""
    tools = [echo_tool(n) for n in ("a", "b", "c")]
    names = lambda ts: [t.name for t in ts]  # noqa: E731
    assert names(filter_tools(tools, ToolFilter(allow=("a", "b")))) == ["a", "b"]
    assert names(filter_tools(tools, ToolFilter(deny=("b",)))) == ["a", "c"]
    assert names(filter_tools(tools, ToolFilter(allow=("a", "b"), deny=("a",)))) == ["b"]
    assert names(filter_tools(tools, [ToolFilter(allow=("a", "b")), ToolFilter(allow=("b", "c"))])) == ["b"]
    assert names(filter_tools(tools, [ToolFilter(), ToolFilter(deny=("c",))])) == ["a", "b"]
    assert names(filter_tools(tools, None)) == ["a", "b", "c"]
    assert names(filter_tools(create_tool_registry(tools), ToolFilter(allow=["c"]))) == ["c"]  # type: ignore[arg-type]


def test_tool13_filter_values_are_checked() -> None:
    """TOOL-13/RUN-1: a ToolFilter or a sequence of them; anything else raises PrismConfigError."""
    f = ToolFilter(allow=("a",))
    assert normalize_tool_filters(f) == (f,)
    assert normalize_tool_filters([f, f]) == (f, f)
    assert normalize_tool_filters(None) == ()
    for bad in ("a", {"allow": ["a"]}, [f, "x"], 3):
        with pytest.raises(PrismConfigError):
            normalize_tool_filters(bad)  # type: ignore[arg-type]
    with pytest.raises(PrismConfigError):
        ToolFilter(allow="abc")  # type: ignore[arg-type]


async def test_tool13_filtered_out_registered_tool_is_blocked_tool_denied() -> None:
    """TOOL-13/TOOL-3 step 5: a registered tool the filters exclude is blocked tool_denied."""
    rec = Recorder()
    result = await dispatch(make_call(), [echo_tool()], rec, filter=[ToolFilter(), ToolFilter(deny=("echo",))])
    assert result.error == ErrorInfo(message="Tool denied: echo", code="tool_denied")
    assert rec.types == ["tool_execution_blocked"]
