"""The open host calls of a run leg: calls of stored assistant messages without a stored result.

A run that fails while calls are open answers each with an ``tool_call_interrupted`` row, because
providers reject a transcript in which an assistant tool call has no result.
"""

from __future__ import annotations

from typing import Final

from prism.types import (
    ErrorInfo,
    Message,
    ToolCallContent,
    ToolResult,
    ToolResultContent,
    tool_result_message,
)

__all__ = ["INTERRUPTED_MESSAGE", "interrupted_row", "track_calls"]

INTERRUPTED_MESSAGE: Final = "tool call interrupted: the run ended before its result was recorded"
"""Message of the rows that answer calls left open by a failed run."""


def track_calls(open_calls: dict[str, ToolCallContent], message: Message) -> None:
    """Open the host calls of a stored assistant ``message``; close calls by stored results."""
    if message.role == "assistant":
        for part in message.content:
            if type(part) is ToolCallContent and part.authority != "provider-hosted":
                open_calls[part.id] = part
    elif open_calls:
        for part in message.content:
            if type(part) is ToolResultContent:
                open_calls.pop(part.tool_call_id, None)


def interrupted_row(call: ToolCallContent) -> Message:
    """The ``tool_call_interrupted`` row answering the open ``call``."""
    return tool_result_message(
        ToolResult(
            tool_call_id=call.id,
            name=call.name,
            error=ErrorInfo(code="tool_call_interrupted", message=INTERRUPTED_MESSAGE),
        )
    )
