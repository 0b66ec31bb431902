"""A real MCP server for the tests, written with the ``mcp`` SDK (``MCPServer``).

Run as ``python mcp_test_server.py`` it serves stdio; ``python mcp_test_server.py --http PORT``
serves streamable HTTP on 127.0.0.1:PORT at ``/mcp``. ``MCP_TEST_MARKER`` names a file where the
``slow`` tool writes ``started`` and, when the client cancels it, ``cancelled``.
``MCP_TEST_SCHEMA=v2`` changes the ``add`` tool's parameter schema (a schema-change check).
``MCP_TEST_TOKEN`` is echoed (as ``[token]``) in stderr and by ``whoami`` (redaction checks).
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, TextContent

MARKER = os.environ.get("MCP_TEST_MARKER", "")
TOKEN = os.environ.get("MCP_TEST_TOKEN", "")
app = MCPServer("prism-test-server", log_level="WARNING")


def _mark(text: str) -> None:
    if MARKER:
        with open(MARKER, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")


if os.environ.get("MCP_TEST_SCHEMA") == "v2":

    @app.tool()
    def add(a: int, b: int, c: int = 0) -> int:
        """Add numbers."""
        return a + b + c

else:

    @app.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b


@app.tool()
def fail(reason: str) -> str:
    """Always fails with the reason (and the token when the reason is ``token``)."""
    raise ToolError(f"cannot do it: {reason}" + (f" {TOKEN}" if reason == "token" else ""))


@app.tool()
def picture() -> list[TextContent | ImageContent]:
    """A caption and a tiny image."""
    return [
        TextContent(type="text", text="a red dot"),
        ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
    ]


@app.tool(name="read.file")
def read_file(path: str) -> str:
    """A name with a dot (mapped to read_file)."""
    return f"contents of {path}"


@app.tool()
async def slow(ctx: Context, steps: int = 2) -> str:
    """Reports progress, then waits until cancelled."""
    try:
        for step in range(steps):
            await ctx.report_progress(step + 1, steps, f"step {step + 1}")
        _mark("started")
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        _mark("cancelled")
        raise
    return "finished"


@app.tool()
def crash() -> str:
    """The server process dies mid-call."""
    print(f"fatal: giving up [{TOKEN}]", file=sys.stderr, flush=True)
    os._exit(3)


@app.tool()
def whoami() -> str:
    """Echoes the token (a result holding a secret)."""
    return f"token={TOKEN}"


@app.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool ``extra`` and announces the new list."""

    def extra(text: str) -> str:
        """Echo."""
        return text

    ctx.mcp_server.add_tool(extra)
    await ctx.session.send_tool_list_changed()
    return "grown"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
