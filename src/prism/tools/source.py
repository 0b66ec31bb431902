"""``ToolSource``: tools an agent gets from somewhere else at run time (e.g. an MCP server).

A tool source is passed in ``create_agent(tools=[...])`` next to plain tool definitions. The
runtime knows only this protocol: each run leg opens every source once, takes the tool
definitions it yields as fixed for that leg, and closes it when the leg ends. Calls to those
tools go through the same dispatch as any other tool (validation, permission, guardrails,
approvals, events, ledger rows, abort). ``prism.mcp`` implements it; the runtime does not import
that package.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from prism._json import JsonValue
from prism.types import ToolDefinition

__all__ = ["ToolSource", "is_tool_source"]


class ToolSource(Protocol):
    """Where some of an agent's tools come from at run time.

    ``source_identity()`` is a JSON object that names the source without secrets (e.g. the
    command or URL of a server, its name prefix and filters); it joins the durable-run
    fingerprint, so a run resumes only under a source with the same identity.

    ``open_tools()`` returns an async context manager: entering it connects (or reuses a
    connection) and yields the tool definitions available now; leaving it releases the
    connection. The runtime enters it once per run leg. Entering may raise: the run then fails
    before its first provider turn with that error.
    """

    def source_identity(self) -> dict[str, JsonValue]:
        """The secret-free identity of this source (a JSON object)."""
        ...

    def open_tools(self) -> AbstractAsyncContextManager[Sequence[ToolDefinition]]:
        """Connect and yield the current tool definitions (see the class docstring)."""
        ...


def is_tool_source(value: object) -> bool:
    """Whether ``value`` is a tool source (has callable ``source_identity`` and ``open_tools``)
    and not a tool definition."""
    return (
        not isinstance(value, ToolDefinition)
        and callable(getattr(value, "source_identity", None))
        and callable(getattr(value, "open_tools", None))
    )
