"""prism agents served over MCP: Claude Code, Cursor and other MCP clients call them as tools.

Not to be confused with [`prism.mcp.MCPServer`][prism.mcp.MCPServer], the configuration of a server whose tools
an agent *uses*. Needs the ``mcp`` extra (the official ``mcp`` SDK 2.x)::

    server = agent.to_mcp_server()                         # the SDK's low-level Server
    await prism.mcp.serving.serve_stdio(server)            # or serve_http(server, port=8765)

or, for a registry of agents, ``prism mcp serve --agents myagents:REGISTRY [--http]``. Each agent
is one tool (``as_tool``'s name, description and input schema, plus an optional ``session_id``
that continues a conversation; its artifact schema, when its loop has one, is the
``outputSchema``) and a ``<name>_result {run_id}`` tool that collects a run's answer. A call runs
the agent: the answer (and the artifact as ``structuredContent``) comes back, a failed run as an
``isError`` result with its code; progress notifications follow the run; a cancellation aborts
it; a tool that needs approval asks the client through elicitation, or the call returns "waiting
for approval" with the run id. See ``docs/guides/mcp-server.md``.

Modules:
    _tools: the served tool of an agent ([`served_agent()`][prism.mcp.serving.served_agent]) and argument checks.
    _results: a run's outcome as an MCP tool result, the ``ERR_PRISM_MCP_*`` refusal codes.
    _records: who owns each conversation, each run's outcome, server heartbeats (in the store).
    _approvals: approvals through elicitation.
    _calls: one tool call: run, progress, cancellation, approvals, collection.
    _service: one serving process's state; shutdown; the restart of abandoned runs.
    _server: [`create_mcp_server()`][prism.mcp.serving.create_mcp_server], the SDK server and its handlers.
    _stdio: [`serve_stdio()`][prism.mcp.serving.serve_stdio], with only JSON-RPC on standard output.
    _http: [`serve_http()`][prism.mcp.serving.serve_http] and [`http_app()`][prism.mcp.serving.http_app]: loopback, DNS rebinding protection, tokens.
"""

from prism.mcp.serving._http import http_app as http_app
from prism.mcp.serving._http import serve_http as serve_http
from prism.mcp.serving._results import ERR_PRISM_MCP_ARGUMENTS as ERR_PRISM_MCP_ARGUMENTS
from prism.mcp.serving._results import ERR_PRISM_MCP_DENIED as ERR_PRISM_MCP_DENIED
from prism.mcp.serving._results import ERR_PRISM_MCP_REFUSED as ERR_PRISM_MCP_REFUSED
from prism.mcp.serving._server import AgentsToServe as AgentsToServe
from prism.mcp.serving._server import create_mcp_server as create_mcp_server
from prism.mcp.serving._service import SHUTDOWN_REASON as SHUTDOWN_REASON
from prism.mcp.serving._stdio import StdioWire as StdioWire
from prism.mcp.serving._stdio import claim_stdio as claim_stdio
from prism.mcp.serving._stdio import serve_stdio as serve_stdio
from prism.mcp.serving._tools import ServedAgent as ServedAgent
from prism.mcp.serving._tools import served_agent as served_agent

__all__ = [
    "ERR_PRISM_MCP_ARGUMENTS",
    "ERR_PRISM_MCP_DENIED",
    "ERR_PRISM_MCP_REFUSED",
    "SHUTDOWN_REASON",
    "AgentsToServe",
    "ServedAgent",
    "StdioWire",
    "claim_stdio",
    "create_mcp_server",
    "http_app",
    "serve_http",
    "serve_stdio",
    "served_agent",
]
