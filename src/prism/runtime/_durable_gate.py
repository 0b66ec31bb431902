"""Two parts of the loop context kept apart from it: the durable run's gate in tool dispatch
(:class:`DurableGate`, implemented by ``DurableDriver``) and the stamping of an event's empty ids
(:func:`stamp_ids`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol

from prism.types import ToolCallContent, ToolDefinition, ToolExecutionContext, ToolResult

__all__ = ["DurableGate", "stamp_ids"]


class DurableGate(Protocol):
    """The durable run's part in tool dispatch; see ``DurableDriver``."""

    def gate_round(self, calls: tuple[ToolCallContent, ...]) -> None:
        """Record a tool round's calls in the open gated round."""
        ...

    def before_dispatch(self, call: ToolCallContent) -> ToolResult | None:
        """The answer of a gated or sticky-rejected call, without dispatching."""
        ...

    async def before_execute(
        self, call: ToolCallContent, tool: ToolDefinition, context: ToolExecutionContext
    ) -> None:
        """Runs right before a host tool executes; may suspend the run."""
        ...

    def record_source_tools(self, digests: Mapping[str, str]) -> None:
        """Store the schema digests of the leg's tool-source tools with the run."""
        ...


def stamp_ids(event: Any, session_id: str, run_id: str) -> Any:
    """``event`` with empty ``session_id``/``run_id`` fields filled in."""
    sid = getattr(event, "session_id", session_id)
    rid = getattr(event, "run_id", run_id)
    if sid and rid:
        return event
    changes: dict[str, str] = {}
    if not sid and hasattr(event, "session_id"):
        changes["session_id"] = session_id
    if not rid and hasattr(event, "run_id"):
        changes["run_id"] = run_id
    return dataclasses.replace(event, **changes) if changes else event
