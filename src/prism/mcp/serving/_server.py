"""The SDK's low-level MCP ``Server`` of a set of served agents: ``tools/list`` and
``tools/call`` handlers over one [`Service`][prism.mcp.serving._service.Service], whose life is the
server's lifespan (entered once per stdio connection, once for the whole HTTP app)."""

from __future__ import annotations

import math
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from prism.checkpoints import CheckpointStore
from prism.errors import PrismConfigError
from prism.mcp.serving._calls import answer_input, call_agent, collect_run
from prism.mcp.serving._service import Service, served_map
from prism.mcp.serving._tools import ServedAgent, served_agent
from prism.runtime import Agent
from prism.types import ToolDefinition

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = ["AgentsToServe", "create_mcp_server", "service_of"]

AgentsToServe = (
    Agent
    | ToolDefinition
    | ServedAgent
    | Sequence[Agent | ToolDefinition | ServedAgent]
    | Mapping[str, Agent | ToolDefinition]
)
"""What [`create_mcp_server()`][prism.mcp.serving._server.create_mcp_server] serves: one agent, a sequence, or a mapping of tool names to
agents (a registry's built agents; an agent tool keeps its own name)."""

_SERVICES: weakref.WeakKeyDictionary[Server[Service], Service] = weakref.WeakKeyDictionary()
_INVALID_PARAMS = -32602


def _served(agents: AgentsToServe) -> list[ServedAgent]:
    if isinstance(agents, (Agent, ToolDefinition, ServedAgent)):
        items: list[Any] = [agents]
    elif isinstance(agents, Mapping):
        items = [
            served_agent(value, name=None if isinstance(value, ToolDefinition) else key)
            for key, value in agents.items()
        ]
    elif isinstance(agents, Sequence) and not isinstance(agents, str):
        items = list(agents)
    else:
        raise PrismConfigError(
            f"expected agents to serve (an Agent, a sequence or a mapping), got "
            f"{type(agents).__name__}"
        )
    return [item if isinstance(item, ServedAgent) else served_agent(item) for item in items]


def _seconds(name: str, value: object, *, positive: bool = True) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
    ):
        kind = "> 0" if positive else ">= 0"
        raise PrismConfigError(f"{name} must be a finite number of seconds {kind}, got {value!r}")
    return float(value)


def create_mcp_server(
    agents: AgentsToServe,
    *,
    name: str = "prism",
    instructions: str | None = None,
    store: CheckpointStore | None = None,
    approval_wait_s: float = 60.0,
    secrets: Sequence[str] = (),
    resume: bool = True,
    lease_s: float = 15.0,
    stop_wait_s: float = 5.0,
) -> Server[Service]:
    """An MCP server (the ``mcp`` SDK's low-level ``Server``) whose tools run prism agents.

    Each agent is one tool (see [`prism.mcp.serving.served_agent()`][prism.mcp.serving.served_agent]) plus ``<name>_result``,
    which collects a run's answer. Serve it with [`prism.mcp.serving.serve_stdio()`][prism.mcp.serving.serve_stdio],
    [`prism.mcp.serving.serve_http()`][prism.mcp.serving.serve_http], ``server.streamable_http_app(...)`` or in process
    (``mcp.Client(server)``).

    Args:
        agents: An ``Agent``, an agent tool (``agent.as_tool(...)``), a [`ServedAgent`][prism.mcp.serving._server.ServedAgent],
            a sequence of them, or a mapping of tool names to agents.
        name: The server's name (``serverInfo.name``).
        instructions: The server's instructions for clients.
        store: Where the serving records of agents without durable run state are kept (default:
            a memory store); a durable agent's go next to its runs.
        approval_wait_s: Seconds an approval waits for the client's elicitation answer before
            the call returns "waiting for approval".
        secrets: Strings removed from every result and notification, besides each agent's
            redactor's (e.g. the bearer tokens).
        resume: Resume the runs a gone server left (on start, then every ``lease_s``).
        lease_s: Seconds without a heartbeat after which a server counts as gone.
        stop_wait_s: Seconds a shutdown waits for runs to stop at a turn boundary.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — nothing to serve, a tool name used twice or
            not ``[A-Za-z0-9_-]{1,64}``, a bad input schema, a bad number of seconds.
    """
    served = list(served_map(_served(agents)).values())
    if not isinstance(name, str) or not name:
        raise PrismConfigError(f"name must be a non-empty string, got {name!r}")
    if isinstance(secrets, str) or not all(isinstance(s, str) for s in secrets):
        raise PrismConfigError("secrets must be a sequence of strings")
    service = Service(
        served,
        store=store,
        approval_wait_s=_seconds("approval_wait_s", approval_wait_s, positive=False),
        secrets=tuple(secrets),
        resume=bool(resume),
        lease_s=_seconds("lease_s", lease_s),
        stop_wait_s=_seconds("stop_wait_s", stop_wait_s, positive=False),
    )

    @asynccontextmanager
    async def lifespan(_: Server[Service]) -> AsyncIterator[Service]:
        async with service:
            yield service

    async def list_tools(
        ctx: ServerRequestContext[Service], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools: list[types.Tool] = []
        for item in service.served.values():
            tools.append(
                types.Tool(
                    name=item.name,
                    description=item.description,
                    input_schema=item.mcp_input_schema(),
                    output_schema=item.output_schema,
                )
            )
            tools.append(
                types.Tool(
                    name=item.result_name,
                    description=f"Collect the answer of a run of {item.name} that was waiting "
                    "for approval or still running: pass the run_id its call returned.",
                    input_schema=item.result_input_schema(),
                )
            )
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Service], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        arguments = params.arguments or {}
        found = service.served.get(params.name)
        collect = found is None
        if found is None:
            found = service.results.get(params.name)
        if found is None:
            raise MCPError(code=_INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        if params.request_state is not None:  # the answers to an InputRequiredResult
            return await answer_input(
                service, ctx, found, params.request_state, params.input_responses or {}
            )
        if collect:
            return await collect_run(service, ctx, found, arguments)
        return await call_agent(service, ctx, found, arguments)

    from prism import __version__

    server: Server[Service] = Server(
        name,
        version=__version__,
        instructions=instructions,
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    _SERVICES[server] = service
    return server


def service_of(server: Server[Any]) -> Service:
    """The service behind a server [`create_mcp_server()`][prism.mcp.serving._server.create_mcp_server] made.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — another server.
    """
    found = _SERVICES.get(server)
    if found is None:
        raise PrismConfigError("this MCP server was not made by prism.mcp.serving")
    return found
