"""What an MCP client sees of a served agent: its tool, its ``<name>_result`` tool, and the
checks of a call's arguments.

An agent becomes the tool [`ServedAgent`][prism.mcp.serving._tools.ServedAgent] describes: the name, description and input schema
of ``agent.as_tool(...)`` (the default input is one string ``input``), plus an optional
``session_id`` argument that continues an earlier call's conversation. When the agent's loop
produces an artifact with a schema (``json_schema_artifact``, ``pydantic_artifact``), that schema
is the tool's ``outputSchema``: as it is when it describes an object, else wrapped as
``{"result": <schema>}`` (MCP's structured content is a JSON object).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from prism._json import JsonValue, canonical_json
from prism.errors import PrismConfigError
from prism.loop_needs import loop_needs
from prism.loops.resolve import resolve_loop
from prism.runtime import Agent
from prism.runtime.agents.agent_tool import DEFAULT_AGENT_TOOL_INPUT
from prism.runtime.run._delegation import child_agent
from prism.tools.schema import compile_schema, schema_errors
from prism.types import ToolDefinition

__all__ = [
    "RESULT_SUFFIX",
    "SESSION_ARGUMENT",
    "ServedAgent",
    "check_arguments",
    "served_agent",
]

SESSION_ARGUMENT: Final = "session_id"
"""The argument that continues an earlier call's conversation."""
RESULT_SUFFIX: Final = "_result"
"""``<name>_result``: the tool that collects a run's answer."""
WRAPPED_KEY: Final = "result"
"""The key of a non-object artifact in the structured content."""

_TOOL_NAME: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SESSION_PROPERTY: Final[dict[str, JsonValue]] = {
    "type": "string",
    "description": "Continue the conversation of an earlier call: the session_id its result "
    "gave. Leave it out to start a new conversation.",
}
_RUN_INPUT: Final[dict[str, JsonValue]] = {
    "type": "object",
    "properties": {
        "run_id": {"type": "string", "description": "The run_id an earlier call returned."},
    },
    "required": ["run_id"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ServedAgent:
    """One agent served as an MCP tool (build it with [`served_agent()`][prism.mcp.serving._tools.served_agent])."""

    agent: Agent
    """The agent each call runs."""
    name: str
    """The tool's name (``[A-Za-z0-9_-]``, 1-64 characters); ``<name>_result`` collects runs."""
    description: str
    """The tool's description."""
    input_schema: dict[str, JsonValue]
    """The arguments the agent takes (``as_tool``'s ``input``), without ``session_id``."""
    plain: bool
    """The default input (one string ``input``, the agent's user message); otherwise the
    agent's message is the arguments as canonical JSON text."""
    output_schema: dict[str, JsonValue] | None
    """The tool's ``outputSchema``: the artifact's schema, wrapped when it is not an object."""
    wrapped: bool
    """The artifact is shown as ``{"result": artifact}``."""

    @property
    def result_name(self) -> str:
        """``<name>_result``."""
        return self.name + RESULT_SUFFIX

    @property
    def agent_id(self) -> str:
        """The agent's id (``config.id or config.name``), as its stored runs name it."""
        config = self.agent.config
        return str(config.id or config.name or self.name)

    def mcp_input_schema(self) -> dict[str, JsonValue]:
        """The input schema the client sees: [`input_schema`][prism.mcp.serving._tools.ServedAgent.input_schema] plus ``session_id``."""
        schema = dict(self.input_schema)
        properties = schema.get("properties")
        shown = dict(properties) if isinstance(properties, Mapping) else {}
        shown[SESSION_ARGUMENT] = dict(_SESSION_PROPERTY)
        schema["properties"] = shown
        schema.setdefault("type", "object")
        return schema

    def result_input_schema(self) -> dict[str, JsonValue]:
        """The input schema of ``<name>_result``: ``{"run_id": string}``."""
        return dict(_RUN_INPUT)

    def agent_input(self, arguments: Mapping[str, Any]) -> str:
        """The user message of a call with these (checked) arguments, ``session_id`` left out."""
        if self.plain:
            return str(arguments.get("input", ""))
        return canonical_json({k: v for k, v in arguments.items() if k != SESSION_ARGUMENT})

    def structured(self, artifact: JsonValue) -> dict[str, JsonValue]:
        """The structured content of an artifact."""
        if self.wrapped or not isinstance(artifact, dict):
            return {WRAPPED_KEY: artifact}
        return artifact


def served_agent(
    agent: Agent | ToolDefinition,
    *,
    name: str | None = None,
    description: str | None = None,
    input: Mapping[str, Any] | None = None,
) -> ServedAgent:
    """Describe ``agent`` as an MCP tool.

    Args:
        agent: An ``Agent``, or the tool ``agent.as_tool(name=..., description=...,
            input=...)`` made of it (its options are then the tool's).
        name: The tool name (default: the ``as_tool`` tool's name, else the agent's name,
            else its id).
        description: The tool description (default: ``as_tool``'s, ``"Ask the <name> agent."``).
        input: JSON Schema of the arguments, an object (default: one string ``input``).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — not an agent or an agent tool, no name, a name
            that is not ``[A-Za-z0-9_-]{1,64}``, an input schema that is not a JSON Schema object
            or that has a ``session_id`` property of its own.
    """
    if isinstance(agent, ToolDefinition):
        found = child_agent(agent)
        if not isinstance(found, Agent):
            raise PrismConfigError(
                f"tool {agent.name!r} is not an agent tool: serve an Agent or agent.as_tool(...)"
            )
        tool = agent
        agent = found
        name = name if name is not None else tool.name
        description = description if description is not None else tool.description
        if input is None and tool.parameters != DEFAULT_AGENT_TOOL_INPUT:
            input = tool.parameters
    if not isinstance(agent, Agent):
        raise PrismConfigError(f"expected an Agent or an agent tool, got {type(agent).__name__}")
    tool_name = name if name is not None else (agent.name or agent.id)
    if not isinstance(tool_name, str) or not _TOOL_NAME.match(tool_name):
        raise PrismConfigError(
            f"an MCP tool name must be 1-64 characters of [A-Za-z0-9_-], got {tool_name!r} "
            "(give the agent a name, or name=)"
        )
    if input is not None and not isinstance(input, Mapping):
        raise PrismConfigError(f"input must be a JSON Schema mapping, got {type(input).__name__}")
    schema: dict[str, JsonValue] = (
        dict(input) if input is not None else dict(DEFAULT_AGENT_TOOL_INPUT)
    )
    if schema.get("type", "object") != "object":
        raise PrismConfigError(f"the input schema of {tool_name} must describe an object")
    if isinstance(compile_schema(schema), str):
        raise PrismConfigError(f"the input schema of {tool_name} is not a valid JSON Schema")
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and SESSION_ARGUMENT in properties:
        raise PrismConfigError(
            f"the input schema of {tool_name} has a {SESSION_ARGUMENT!r} property: the served "
            "tool adds that argument itself (it continues a conversation)"
        )
    output, wrapped = _output_schema(agent)
    return ServedAgent(
        agent=agent,
        name=tool_name,
        description=description if description is not None else f"Ask the {tool_name} agent.",
        input_schema=schema,
        plain=input is None,
        output_schema=output,
        wrapped=wrapped,
    )


def _output_schema(agent: Agent) -> tuple[dict[str, JsonValue] | None, bool]:
    """The tool's output schema from the agent's loop (its artifact's shown schema), and
    whether a non-object artifact is wrapped."""
    shown = loop_needs(resolve_loop(None, agent.config.loop)).shown_schema
    if shown is None:
        return None, False
    schema = dict(shown.schema)
    if schema.get("type") == "object":
        return schema, False
    return {
        "type": "object",
        "properties": {WRAPPED_KEY: schema},
        "required": [WRAPPED_KEY],
    }, True


def check_arguments(served: ServedAgent, arguments: Mapping[str, Any]) -> list[str]:
    """Why ``arguments`` do not fit the tool's input schema (``session_id`` aside): one line
    per problem, ``"<pointer>: <message>"``; empty when they fit."""
    rest = {k: v for k, v in arguments.items() if k != SESSION_ARGUMENT}
    session = arguments.get(SESSION_ARGUMENT)
    problems: list[str] = []
    if session is not None and not isinstance(session, str):
        problems.append(f"/{SESSION_ARGUMENT}: must be a string")
    compiled = compile_schema(served.input_schema)
    if not isinstance(compiled, str):
        problems += [f"{path or '/'}: {message}" for path, message in schema_errors(compiled, rest)]
    return problems
