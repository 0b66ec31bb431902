"""Serving over standard input and output, where nothing but JSON-RPC frames may reach stdout.

[`claim_stdio()`][prism.mcp.serving._stdio.claim_stdio] moves the wire off the standard descriptors for the whole process: the MCP
transport reads and writes private duplicates of fd 0 and fd 1, while fd 1 points at standard
error (so ``print``, logging to stdout, rich and the C library under llama.cpp all land on
stderr) and fd 0 at the null device (so a child process cannot read the client's frames). The
``prism mcp serve`` command claims them before it imports anything else; [`serve_stdio()`][prism.mcp.serving._stdio.serve_stdio]
claims them itself when it is given no wire.

The end of standard input is the client going away: the service starts its shutdown before the
SDK cancels the calls in progress, so their runs stop at a turn boundary instead of being
aborted (see [`prism.mcp.serving._service`][prism.mcp.serving._service]).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prism.mcp.serving._server import service_of
from prism.mcp.serving._service import Service

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

__all__ = ["StdioWire", "claim_stdio", "serve_stdio"]


@dataclass(frozen=True, slots=True)
class StdioWire:
    """The private descriptors of the MCP wire ([`claim_stdio()`][prism.mcp.serving._stdio.claim_stdio])."""

    read_fd: int
    """A duplicate of the original standard input."""
    write_fd: int
    """A duplicate of the original standard output."""


def _private(fd: int) -> int:
    if sys.platform == "win32":  # pragma: no cover - no F_DUPFD there
        return os.dup(fd)
    import fcntl

    found: int = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    return found


@contextlib.contextmanager
def claim_stdio() -> Iterator[StdioWire]:
    """Keep fd 0 and fd 1 for the MCP wire only (see the module docstring); both are restored
    on exit."""
    sys.stdout.flush()
    read_fd, write_fd = _private(0), _private(1)
    saved_in, saved_out = _private(0), _private(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
        os.dup2(2, 1)
    finally:
        os.close(devnull)
    try:
        yield StdioWire(read_fd, write_fd)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (saved_in, saved_out, read_fd, write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


async def serve_stdio(server: Server[Service], *, wire: StdioWire | None = None) -> bool:
    """Serve ``server`` (from [`prism.mcp.serving.create_mcp_server()`][prism.mcp.serving.create_mcp_server]) to the one client on
    standard input and output, until it closes its end.

    Args:
        server: The MCP server.
        wire: The descriptors [`claim_stdio()`][prism.mcp.serving._stdio.claim_stdio] gave (default: claimed here, for the call).

    Returns:
        ``True`` when every run ended at shutdown; ``False`` when some were still going after
        the stop wait (they are left to the next server on the store).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — ``server`` was not made by
            ``create_mcp_server``.
    """
    if wire is None:
        with claim_stdio() as claimed:
            return await serve_stdio(server, wire=claimed)
    import anyio
    from mcp.server.stdio import stdio_server

    service = service_of(server)
    reader = anyio.wrap_file(
        io.TextIOWrapper(os.fdopen(wire.read_fd, "rb", closefd=False), encoding="utf-8")
    )
    writer = anyio.wrap_file(
        io.TextIOWrapper(
            os.fdopen(wire.write_fd, "wb", closefd=False), encoding="utf-8", write_through=True
        )
    )
    async with stdio_server(stdin=reader, stdout=writer) as (read_stream, write_stream):
        relay_send, relay_receive = anyio.create_memory_object_stream[Any](0)

        async def relay() -> None:
            async with relay_send:
                async for item in read_stream:
                    await relay_send.send(item)
            service.begin_shutdown()  # the client went away: calls in progress are not aborted

        async with anyio.create_task_group() as group:
            group.start_soon(relay)
            await server.run(relay_receive, write_stream, server.create_initialization_options())
            group.cancel_scope.cancel()
    return service.ended
