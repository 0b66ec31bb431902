"""Tool execution events and the metadata they carry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from prism._fast_init import fast_init
from prism._serde import Serializable
from prism.events._base import RunEventFields
from prism.types import ErrorInfo, JsonValue, ToolCallContent, ToolResult

__all__ = [
    "ToolExecutionBlockedEvent",
    "ToolExecutionErrorEvent",
    "ToolExecutionFinishedEvent",
    "ToolExecutionMetadata",
    "ToolExecutionProgressEvent",
    "ToolExecutionStartedEvent",
    "ToolExecutionStatus",
]


ToolExecutionStatus: TypeAlias = Literal["finished", "error", "blocked"]
"""Terminal status of a tool call."""


@fast_init
@dataclass(frozen=True, slots=True)
class ToolExecutionMetadata(Serializable):
    """Timing and outcome of one tool call."""

    duration_ms: int
    """Execution time in ms (0 for calls blocked before execution)."""
    status: ToolExecutionStatus
    """Terminal status."""


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionStartedEvent(RunEventFields):
    """A tool call started executing."""

    call: ToolCallContent
    """The call."""
    type: Literal["tool_execution_started"] = field(default="tool_execution_started", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionProgressEvent(RunEventFields):
    """A tool reported progress."""

    tool_call_id: str
    """The call id."""
    name: str
    """Tool name."""
    progress: JsonValue
    """Progress value."""
    metadata: Mapping[str, Any] | None = None
    """Progress metadata."""
    type: Literal["tool_execution_progress"] = field(default="tool_execution_progress", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionFinishedEvent(RunEventFields):
    """A tool call finished."""

    result: ToolResult
    """The result."""
    metadata: ToolExecutionMetadata
    """Duration and status."""
    type: Literal["tool_execution_finished"] = field(default="tool_execution_finished", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionErrorEvent(RunEventFields):
    """A tool call raised or returned an error."""

    call: ToolCallContent
    """The call."""
    error: ErrorInfo
    """The failure."""
    metadata: ToolExecutionMetadata
    """Duration and status."""
    type: Literal["tool_execution_error"] = field(default="tool_execution_error", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionBlockedEvent(RunEventFields):
    """A tool call was blocked before it executed (guardrail, unknown or denied tool, invalid
    arguments, permission or validation failure); ``execute`` was never called."""

    tool_call_id: str
    """The call id."""
    name: str
    """Tool name."""
    reason: str
    """Blocked reason, e.g. ``unknown_tool``."""
    error: ErrorInfo
    """The blocked error."""
    metadata: ToolExecutionMetadata
    """Duration and status."""
    type: Literal["tool_execution_blocked"] = field(default="tool_execution_blocked", init=False)
