"""The tools of one run leg: the agent's own, plus those its tool sources yield.

A leg opens every tool source of the agent (``prism.tools.ToolSource``, e.g. an MCP server) once,
checks the tools it yields like ``create_agent`` checks the agent's own, and dispatches against
the merged set until the leg ends; the sources are closed with the leg. A durable run stores a
digest of each source tool's parameter schema in its envelope, and a resume refuses to continue
when one of those tools is gone or its schema changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from prism._json import canonical_json
from prism.errors import AgentRunStateError, PrismConfigError
from prism.runtime.run.config import AgentConfig
from prism.tools import ToolRegistry, check_tool
from prism.types import ToolDefinition

__all__ = ["LegTools", "check_source_tools", "open_leg_tools", "tool_digest"]


@dataclass(frozen=True, slots=True)
class LegTools:
    """The tools of one leg."""

    registry: ToolRegistry
    """The agent's tools followed by each source's, in source order."""
    digests: Mapping[str, str] = field(default_factory=dict)
    """Source tool name → [`tool_digest()`][prism.runtime.run._tool_sources.tool_digest] of its parameter schema."""


def tool_digest(tool: ToolDefinition) -> str:
    """``sha256(canonical_json(parameters)).hexdigest()`` of a tool (``None`` schema included)."""
    import hashlib  # only runs with tool sources load it

    return hashlib.sha256(canonical_json(tool.parameters).encode("utf-8")).hexdigest()


async def open_leg_tools(config: AgentConfig, scope: AsyncExitStack) -> LegTools:
    """Open the agent's tool sources on ``scope`` and merge their tools with the agent's.

    Without tool sources this is the agent's registry itself (no copy, no I/O).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — a source yielded a tool whose name or schema
            is invalid, or whose name is already taken (by the agent or an earlier source; the
            message names both and suggests a prefix).
        Exception: whatever opening a source raises (e.g. ``prism.mcp.MCPServerError`` when a
            server cannot be reached).
    """
    sources = config.tool_sources
    if not sources:
        return LegTools(config.tools)
    tools = list(config.tools)
    owners: dict[str, str] = {tool.name: "the agent's own tools" for tool in tools}
    digests: dict[str, str] = {}
    for source in sources:
        label = repr(source)
        yielded: Any = await scope.enter_async_context(source.open_tools())
        for tool in yielded:
            if not isinstance(tool, ToolDefinition):
                raise PrismConfigError(
                    f"tool source {label} yielded {type(tool).__name__}, not a ToolDefinition"
                )
            check_tool(tool)
            owner = owners.get(tool.name)
            if owner is not None:
                raise PrismConfigError(
                    f"tool name collision: {tool.name!r} of {label} is also in {owner}; "
                    "give one of the servers a prefix (prefix=...) or filter the tool out"
                )
            owners[tool.name] = label
            tools.append(tool)
            digests[tool.name] = tool_digest(tool)
    return LegTools(ToolRegistry(tools), digests)


def check_source_tools(stored: Any, digests: Mapping[str, str]) -> None:
    """Compare a stored run's source-tool digests with the tools a resume would use.

    Args:
        stored: The envelope's ``source_tools`` (name → digest), or ``None`` when the run was
            stored without tool sources.
        digests: [`LegTools.digests`][prism.runtime.run._tool_sources.LegTools.digests] of the resuming leg.

    Raises:
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — a stored tool is gone or its
            parameter schema changed (the message names the tool).
    """
    if not isinstance(stored, Mapping):
        return
    for name, digest in stored.items():
        current = digests.get(name)
        if current is None:
            raise AgentRunStateError(
                f"tool {name} is no longer offered by its tool source; the run cannot resume"
            )
        if current != digest:
            raise AgentRunStateError(
                f"tool {name} changed its parameter schema since the run was stored; "
                "the run cannot resume"
            )
