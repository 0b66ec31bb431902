"""``MCPServerError``: what goes wrong talking to an MCP server, with its ``code``.

Raised to the host when a server cannot be connected (``async with server``, or a run leg
opening it); inside a run, a failed tool call becomes the call's error result instead (the
model reads the message; the code is the result's ``error.code``), never a failed run.

=================================  ==========================================================
``ERR_PRISM_MCP_CONNECT``          the server could not be started, reached or initialised in
                                   ``connect_timeout`` seconds (stderr tail included)
``ERR_PRISM_MCP_CLOSED``           the server exited (a stdio server's exit code and stderr tail
                                   included) or closed the connection
``ERR_PRISM_MCP_INTERRUPTED``      the call was cut off inside this process (its connection was
                                   closed here, or its request cancelled) while the server may be
                                   alive; the server may have run it
``ERR_PRISM_MCP_AUTH``             an HTTP server refused the request with HTTP 401 or 403 (its
                                   ``http_status``): the credentials are missing or wrong
``ERR_PRISM_MCP_TIMEOUT``          a tool call took longer than ``call_timeout`` seconds (the
                                   server was sent a cancellation)
``ERR_PRISM_MCP_TOOL_ERROR``       the tool answered with ``isError`` (its text is the message)
``ERR_PRISM_MCP_PROTOCOL``         the server answered the request with a JSON-RPC error, or
                                   an HTTP server with another HTTP error status (named in the
                                   message and ``http_status``)
=================================  ==========================================================

Every message has the server's secrets (header values, ``secrets=``) removed.
"""

from __future__ import annotations

from collections.abc import Mapping

from prism.errors import PrismError

__all__ = [
    "ERR_PRISM_MCP_AUTH",
    "ERR_PRISM_MCP_CLOSED",
    "ERR_PRISM_MCP_CONNECT",
    "ERR_PRISM_MCP_INTERRUPTED",
    "ERR_PRISM_MCP_PROTOCOL",
    "ERR_PRISM_MCP_TIMEOUT",
    "ERR_PRISM_MCP_TOOL_ERROR",
    "MCPServerError",
]

ERR_PRISM_MCP_CONNECT = "ERR_PRISM_MCP_CONNECT"
ERR_PRISM_MCP_CLOSED = "ERR_PRISM_MCP_CLOSED"
ERR_PRISM_MCP_TIMEOUT = "ERR_PRISM_MCP_TIMEOUT"
ERR_PRISM_MCP_TOOL_ERROR = "ERR_PRISM_MCP_TOOL_ERROR"
ERR_PRISM_MCP_PROTOCOL = "ERR_PRISM_MCP_PROTOCOL"
ERR_PRISM_MCP_INTERRUPTED = "ERR_PRISM_MCP_INTERRUPTED"
ERR_PRISM_MCP_AUTH = "ERR_PRISM_MCP_AUTH"

_CODES: Mapping[str, str] = {
    ERR_PRISM_MCP_CONNECT: "could not connect to the MCP server",
    ERR_PRISM_MCP_CLOSED: "the MCP server closed the connection",
    ERR_PRISM_MCP_TIMEOUT: "the MCP tool call timed out",
    ERR_PRISM_MCP_TOOL_ERROR: "the MCP tool reported an error",
    ERR_PRISM_MCP_PROTOCOL: "the MCP server answered with an error",
    ERR_PRISM_MCP_INTERRUPTED: "the MCP tool call was interrupted in this process",
    ERR_PRISM_MCP_AUTH: "the MCP server refused the credentials",
}


class MCPServerError(PrismError):
    """A failure talking to an MCP server. Construct with the code first.

    Attributes:
        code: One of the ``ERR_PRISM_MCP_*`` codes above.
        server: The server's label (its redacted ``repr``).
        http_status: The HTTP status an HTTP server answered with (``ERR_PRISM_MCP_AUTH``, and
            ``ERR_PRISM_MCP_PROTOCOL``/``_CONNECT`` when it was an HTTP error), else ``None``.
    """

    code = ERR_PRISM_MCP_CONNECT

    def __init__(
        self,
        code: str,
        message: str | None = None,
        *,
        server: str = "",
        http_status: int | None = None,
    ) -> None:
        if code not in _CODES:
            raise ValueError(f"MCPServerError: unknown code {code!r}")
        super().__init__(_CODES[code] if message is None else message)
        self.code = code
        self.server = server
        self.http_status = http_status
