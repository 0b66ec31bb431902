"""A real MCP server for the tests, written with the ``mcp`` SDK (``MCPServer``).

Run as ``python mcp_test_server.py`` it serves stdio; ``python mcp_test_server.py --http PORT``
serves streamable HTTP on 127.0.0.1:PORT at ``/mcp``. ``MCP_TEST_MARKER`` names a file where the
``slow`` tool writes ``started`` and, when the client cancels it, ``cancelled``.
``MCP_TEST_SCHEMA=v2`` changes the ``add`` tool's parameter schema (a schema-change check).
``MCP_TEST_TOKEN`` is echoed (as ``[token]``) in stderr and by ``whoami`` (redaction checks).
``MCP_TEST_CALLS`` names a file where ``add`` writes one line per call it runs (``add a b``).
Over HTTP, ``MCP_TEST_REQUIRE_AUTH=1`` makes every request need ``Authorization: Bearer TOKEN``
(else HTTP 401), and while the file ``MCP_TEST_REVOKED`` exists every request is refused with
HTTP 403 (a credential revoked mid-session). ``MCP_TEST_STDOUT_NOISE=1`` makes the stdio server
write a line that is not JSON-RPC (holding the token) to stdout before serving.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, TextContent

MARKER = os.environ.get("MCP_TEST_MARKER", "")
TOKEN = os.environ.get("MCP_TEST_TOKEN", "")
CALLS = os.environ.get("MCP_TEST_CALLS", "")
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
        if CALLS:
            with open(CALLS, "a", encoding="utf-8") as handle:
                handle.write(f"add {a} {b}\n")
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


def _guarded(inner: Any) -> Any:
    """The ASGI app behind the bearer-token check (``MCP_TEST_REQUIRE_AUTH``/``_REVOKED``)."""
    revoked = os.environ.get("MCP_TEST_REVOKED", "")

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            status = 0
            if revoked and os.path.exists(revoked):  # noqa: ASYNC240 — a test server's check
                status = 403
            elif headers.get(b"authorization", b"").decode() != f"Bearer {TOKEN}":
                status = 401
            if status:
                body = b"access denied"
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": [(b"content-type", b"text/plain")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await inner(scope, receive, send)

    return guarded


def serve_http(port: int) -> None:
    import uvicorn

    asgi: Any = app.streamable_http_app()
    if os.environ.get("MCP_TEST_REQUIRE_AUTH"):
        asgi = _guarded(asgi)
    uvicorn.run(asgi, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        serve_http(int(sys.argv[2]))
    else:
        if os.environ.get("MCP_TEST_STDOUT_NOISE"):
            print(f"starting up with token {TOKEN}", flush=True)
        app.run()
