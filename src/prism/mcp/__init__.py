"""MCP client tools: Model Context Protocol servers as an agent's tool source.

Needs the ``mcp`` extra (``pip install 'prism-runtime[mcp]'``, the official ``mcp`` SDK 2.x),
imported only when a server connects; ``import prism`` never imports it::

    from prism.mcp import MCPServerHTTP, MCPServerStdio

    files = MCPServerStdio("python", ["files_server.py"], prefix="fs", allow=["read_file"])
    search = MCPServerHTTP("https://example.com/mcp", headers={"Authorization": "Bearer …"})
    agent = create_agent(model=..., tools=[my_tool, files, search])

Each run leg of the agent connects the servers (or shares a connection the host opened with
``async with server:``) and offers their tools, fixed for that leg, through the normal tool
dispatch. See ``docs/guides/mcp.md``.

Modules:
    server: ``MCPServer``, ``MCPServerStdio``, ``MCPServerHTTP``.
    errors: ``MCPServerError`` and its ``ERR_PRISM_MCP_*`` codes.
    _connection: the connection and its owner task; calls, cancellation, list refresh; the
        logging filter that keeps secrets out of the SDK's and httpx's records.
    _convert: tool names and call results, MCP to prism.
    _stderr: the bounded stderr tail and the exit status of a stdio server.
    serving: the other direction — prism agents served to MCP clients (``prism.mcp.serving``,
        ``agent.to_mcp_server()``, ``prism mcp serve``); not imported by this package.
"""

from prism.mcp.errors import ERR_PRISM_MCP_AUTH as ERR_PRISM_MCP_AUTH
from prism.mcp.errors import ERR_PRISM_MCP_CLOSED as ERR_PRISM_MCP_CLOSED
from prism.mcp.errors import ERR_PRISM_MCP_CONNECT as ERR_PRISM_MCP_CONNECT
from prism.mcp.errors import ERR_PRISM_MCP_INTERRUPTED as ERR_PRISM_MCP_INTERRUPTED
from prism.mcp.errors import ERR_PRISM_MCP_PROTOCOL as ERR_PRISM_MCP_PROTOCOL
from prism.mcp.errors import ERR_PRISM_MCP_TIMEOUT as ERR_PRISM_MCP_TIMEOUT
from prism.mcp.errors import ERR_PRISM_MCP_TOOL_ERROR as ERR_PRISM_MCP_TOOL_ERROR
from prism.mcp.errors import MCPServerError as MCPServerError
from prism.mcp.server import MCPServer as MCPServer
from prism.mcp.server import MCPServerHTTP as MCPServerHTTP
from prism.mcp.server import MCPServerStdio as MCPServerStdio

__all__ = [
    "ERR_PRISM_MCP_AUTH",
    "ERR_PRISM_MCP_CLOSED",
    "ERR_PRISM_MCP_CONNECT",
    "ERR_PRISM_MCP_INTERRUPTED",
    "ERR_PRISM_MCP_PROTOCOL",
    "ERR_PRISM_MCP_TIMEOUT",
    "ERR_PRISM_MCP_TOOL_ERROR",
    "MCPServer",
    "MCPServerError",
    "MCPServerHTTP",
    "MCPServerStdio",
]
