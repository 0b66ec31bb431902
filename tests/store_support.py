"""Entry builders shared by the session-store and compaction tests."""

from __future__ import annotations

from typing import Any

from prism.store import SessionEntry, new_session_entry
from prism.types import Message, ToolCallContent, ToolResult, tool_result_message

SID = "session_1"


def msg_entry(message: Message, parent: SessionEntry | None = None, **kw: Any) -> SessionEntry:
    return new_session_entry(
        "message", session_id=SID, parent_id=parent.id if parent else None, message=message, **kw
    )


def chain(*items: Message | SessionEntry) -> list[SessionEntry]:
    """Build a linear branch; Messages become message entries."""
    out: list[SessionEntry] = []
    for item in items:
        parent = out[-1].id if out else None
        if isinstance(item, Message):
            out.append(new_session_entry("message", session_id=SID, parent_id=parent, message=item))
        else:
            out.append(SessionEntry(item.id, SID, item.kind, item.timestamp, parent, item.run_id,
                                    item.message, item.model, item.previous_model, item.summary,
                                    item.data, item.metadata))
    return out


def call_msg(*names: str) -> Message:
    return Message(
        "assistant", tuple(ToolCallContent(f"c_{n}", n, {"q": n}) for n in names)
    )


def result_msg(name: str) -> Message:
    return tool_result_message(ToolResult(f"c_{name}", name, value={"ok": True}))
