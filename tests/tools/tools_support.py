"""Shared helpers of the tool tests: calls, contexts, a recorder of events and rows, and a
dispatch shortcut with the test defaults."""

from __future__ import annotations

import dataclasses
from typing import Any

from prism.abort import AbortController, AbortSignal
from prism.tools import (
    ToolDispatcher,
    ToolRegistry,
    create_tool_registry,
)
from prism.types import (
    ToolCallContent,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
)


def echo_tool(name: str = "echo", parameters: dict[str, Any] | None = None, **kw: Any) -> ToolDefinition:
    return ToolDefinition(name=name, execute=lambda args, ctx: dict(args), parameters=parameters, **kw)


def make_call(name: str = "echo", arguments: Any = None, id: str = "c1", **kw: Any) -> ToolCallContent:
    return ToolCallContent(id=id, name=name, arguments={"x": 1} if arguments is None else arguments, **kw)


def make_context(signal: AbortSignal | None = None) -> ToolExecutionContext:
    return ToolExecutionContext(
        session_id="session_1",
        run_id="run_1",
        tool_call_id="c1",
        signal=signal if signal is not None else AbortController().signal,
        metadata={"tenant": "acme"},
    )


class Recorder:
    """Collects events and ledger rows in one ordered log."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.rows: list[Any] = []
        self.log: list[str] = []

    def emit(self, event: Any) -> None:
        self.events.append(event)
        self.log.append(f"event:{event.type}")

    def ledger(self, record: Any) -> None:
        self.rows.append(record)
        self.log.append(f"row:{record.status}")

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]


async def dispatch(
    call: ToolCallContent,
    tools: list[ToolDefinition] | ToolRegistry,
    rec: Recorder | None = None,
    context: ToolExecutionContext | None = None,
    **kw: Any,
) -> ToolResult:
    registry = tools if isinstance(tools, ToolRegistry) else create_tool_registry(tools)
    if rec is not None:
        kw.setdefault("emit", rec.emit)
        kw.setdefault("ledger", rec.ledger)
    dispatcher = ToolDispatcher(registry=registry, context=context or make_context(), **kw)
    return await dispatcher.dispatch(call)


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Opaque:
    pass
