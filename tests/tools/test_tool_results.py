"""Normalising what a tool returned (TOOL-12, CON-21)."""

from __future__ import annotations

from typing import Any

import pytest
from tools_support import Opaque, Point, Recorder, dispatch, make_call

from prism.types import (
    ErrorInfo,
    ToolDefinition,
    ToolResult,
)

# =========================================================================== TOOL-12


async def test_tool12_result_values() -> None:
    """TOOL-12: JSON kept, model_dump(mode="json"), dataclasses.asdict, otherwise invalid_tool_result."""
    pydantic = pytest.importorskip("pydantic")

    class Model(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        n: int
        tags: set[str] = set()

    async def run(value: Any) -> ToolResult:
        return await dispatch(make_call(), [ToolDefinition(name="echo", execute=lambda a, c: value)])

    assert (await run(None)).value is None
    assert (await run({"a": [1, 2.5, "x", None, True]})).value == {"a": [1, 2.5, "x", None, True]}
    assert (await run(Model(n=1, tags={"a"}))).value == {"n": 1, "tags": ["a"]}
    assert (await run(Point(1, 2))).value == {"x": 1, "y": 2}
    bad = await run(Opaque())
    assert bad.error == ErrorInfo(
        code="invalid_tool_result",
        message="Tool echo returned a value that is not JSON-compatible: Opaque",
    )
    nan = await run(float("nan"))
    assert nan.error is not None and nan.error.code == "invalid_tool_result"
    wrapped_bad = await run(ToolResult(tool_call_id="x", name="y", value={1, 2}))  # type: ignore[arg-type]
    assert wrapped_bad.error is not None and wrapped_bad.error.message.endswith(": set")


async def test_tool12_invalid_result_emits_error_event() -> None:
    """TOOL-12: a non-JSON outcome ends with tool_execution_error."""
    rec = Recorder()
    await dispatch(make_call(), [ToolDefinition(name="echo", execute=lambda a, c: object())], rec)
    assert rec.types == ["tool_execution_started", "tool_execution_error"]


async def test_con21_returned_tool_result_gets_call_id_and_name() -> None:
    """CON-21: a returned ToolResult has its tool_call_id and name replaced by the call's."""
    returned = ToolResult(tool_call_id="other", name="other", value=1, metadata={"k": "v"})
    result = await dispatch(make_call(id="c42"), [ToolDefinition(name="echo", execute=lambda a, c: returned)])
    assert (result.tool_call_id, result.name, result.value, result.metadata) == ("c42", "echo", 1, {"k": "v"})
