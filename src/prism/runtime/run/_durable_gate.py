"""The durable run's part in tool dispatch, as the loop context sees it.

:class:`~prism.runtime.run.context.RunContext` calls these hooks around every tool round and host
call of a durable run; ``DurableDriver`` (in ``prism.runtime.durable._durable_leg``) implements them.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from typing import Protocol

from prism.runtime.run._delegation import ChildRuns, ChildRunSuspended
from prism.types import ToolCallContent, ToolDefinition, ToolExecutionContext, ToolResult

__all__ = ["DurableGate", "delegating"]


class DurableGate(ChildRuns, Protocol):
    """The durable run's part in tool dispatch; see ``DurableDriver``."""

    def delegated(self, call: ToolCallContent, signal: ChildRunSuspended) -> ToolResult:
        """The answer of a call whose child run suspended (the run suspends on it)."""
        ...

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


async def delegating(
    dispatch: Coroutine[object, None, ToolResult], call: ToolCallContent, gate: DurableGate
) -> ToolResult:
    """Await a durable run's dispatch of ``call``; when the call's child run suspends, the
    call's answer is ``gate.delegated(...)`` (the run suspends with the child)."""
    try:
        return await dispatch
    except ChildRunSuspended as signal:
        return gate.delegated(call, signal)
