"""Agent tools: an agent offered to another agent's model as a tool (``agent.as_tool(...)``).

A call of the tool runs the agent in a child session linked to the calling run: the child's
input is the call's ``input`` argument (or, with a custom ``input`` schema, the arguments as JSON
text); the run is started with ``parent=context`` (see the ``parent`` run option), so the child
shares the calling run's secrets, limit budget, usage, event stream and abort signal. The call's
result is the child's final text, or with an artifact loop its validated artifact as a JSON
value; the result row's metadata names the child (``{"subagent": {"agent", "session_id",
"run_id"}}``). A child run that fails answers the call with an error result carrying the child
run's error code; a configuration error of the child (``PrismConfigError``, any
``ERR_PRISM_CONFIG*`` code) is not the model's to read: it fails the calling run with that code.
A child that needs durable run state it would not get (a tool with ``needs_approval`` and no
``run_state`` of its own, under a calling run that is not durable) fails the calling run before
its first turn (``PrismConfigError``).

The child session's id is ``<calling run id>.<tool call id>``; it is stored in the agent's
``store`` when it has one, else next to the calling session. Its stored input carries the link
to the call in its metadata (``parent_run``), as does the child run's metadata.

When the calling run is durable, so is the child (its own ``run_state``, else the calling run's):
its run id is recorded in the calling run's pending call before it starts, a child that suspends
suspends the calling run (its approvals are answered on the calling run), and resuming the
calling run continues the child first (see [`prism.runtime.agents._child_runs`][prism.runtime.agents._child_runs]).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol

from prism._json import JsonValue, canonical_json
from prism._serde import to_json_value
from prism.errors import ERR_PRISM_CONFIG, AgentRunError, PrismConfigError
from prism.runtime.agents._child_runs import run_child
from prism.runtime.run._delegation import PARENT_RUN_KEY, parent_link, register_child_agent
from prism.types import (
    ErrorInfo,
    Message,
    RunResult,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    message_text,
    user_message,
)

__all__ = ["DEFAULT_AGENT_TOOL_INPUT", "SUBAGENT_KEY", "agent_tool"]

SUBAGENT_KEY: Final = "subagent"
"""Metadata key of an agent tool's result row: ``{"agent", "session_id", "run_id"}``."""

DEFAULT_AGENT_TOOL_INPUT: Final[dict[str, JsonValue]] = {
    "type": "object",
    "properties": {
        "input": {"type": "string", "description": "The request for the agent."},
    },
    "required": ["input"],
    "additionalProperties": False,
}
"""The arguments schema of an agent tool without ``input``: one string, the child's input."""


class _AgentLike(Protocol):
    @property
    def name(self) -> str | None: ...

    @property
    def config(self) -> Any: ...

    def create_session(
        self,
        session_id: str | None = None,
        *,
        store: Any = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Any: ...


def agent_tool(
    agent: _AgentLike,
    *,
    name: str | None = None,
    description: str | None = None,
    input: Mapping[str, Any] | None = None,
) -> ToolDefinition:
    """The tool definition that runs ``agent`` as a child of the calling run.

    Args:
        agent: The child agent.
        name: Tool name (default: the agent's name); must match ``^[a-zA-Z0-9_-]{1,64}$``.
        description: What the tool does, for the model (default: ``"Ask the <name> agent."``).
        input: JSON Schema of the arguments (default [`DEFAULT_AGENT_TOOL_INPUT`][prism.runtime.agents.agent_tool.DEFAULT_AGENT_TOOL_INPUT]: one
            string ``input``). With a custom schema the child's input is the arguments as
            canonical JSON text.

    Returns:
        A ``ToolDefinition`` (async ``execute``).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — no ``name`` and the agent has none, or
            ``input`` is not a mapping.
    """
    tool_name = name if name is not None else agent.name
    if not tool_name:
        raise PrismConfigError("as_tool needs a name (the agent has none)")
    if input is not None and not isinstance(input, Mapping):
        raise PrismConfigError(f"input must be a JSON Schema mapping, got {type(input).__name__}")
    schema: dict[str, Any] = dict(input) if input is not None else dict(DEFAULT_AGENT_TOOL_INPUT)
    plain = input is None
    agent_name = agent.name

    async def execute(arguments: dict[str, Any], context: ToolExecutionContext) -> ToolResult:
        text = arguments.get("input") if plain else canonical_json(arguments)
        link = parent_link(context)
        run = context.run
        store = agent.config.store
        if store is None and run is not None:
            store = run.store
        session: Any = agent.create_session(
            f"{context.run_id}.{context.tool_call_id}",
            store=store,
            metadata={PARENT_RUN_KEY: link},
        )
        message = user_message(str(text), metadata={PARENT_RUN_KEY: dict(link)})
        child = {"agent": agent_name, "session_id": session.id}
        try:
            result = await run_child(agent, session, message, context, child)
        except AgentRunError as exc:
            if exc.code.startswith(ERR_PRISM_CONFIG):
                raise  # the program's configuration, not the model's call: fails the caller
            failed = exc.result
            return ToolResult(
                tool_call_id=context.tool_call_id,
                name=tool_name,
                error=ErrorInfo(
                    code=exc.code, message=f"agent {agent_name or tool_name} failed: {exc.message}"
                ),
                metadata={SUBAGENT_KEY: {**child, "run_id": failed.run_id}},
            )
        return ToolResult(
            tool_call_id=context.tool_call_id,
            name=tool_name,
            value=_result_value(result),
            metadata={SUBAGENT_KEY: {**child, "run_id": result.run_id}},
        )

    register_child_agent(execute, agent)
    return ToolDefinition(
        name=tool_name,
        execute=execute,
        description=description if description is not None else f"Ask the {tool_name} agent.",
        parameters=schema,
        metadata={SUBAGENT_KEY: {"agent": agent_name}},
    )


def _result_value(result: RunResult) -> JsonValue:
    """The child's artifact as a JSON value, else its final assistant text."""
    artifact = result.artifact
    if artifact is not None:
        dump = getattr(artifact, "model_dump", None)
        value: JsonValue = dump(mode="json") if callable(dump) else to_json_value(artifact)
        return value
    for message in reversed(result.messages):
        if message.role == "assistant":
            return _text(message)
    return ""


def _text(message: Message) -> str:
    return message_text(message)
