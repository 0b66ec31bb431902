"""One live connection to an MCP server, owned by a task of its own.

The ``mcp`` SDK's transports and sessions are anyio context managers that must be entered and left
in the same task. A run leg, a host's ``async with`` and the cleanup of a cancelled run can all be
different tasks, so :class:`Connection` enters them in a dedicated *owner task* that lives from
connect to close; every other task only sends requests over the session (which works from any
task) and signals the owner to stop. When the server exits or the transport fails, the session
answers in-flight requests with "connection closed", or the owner task ends; either way the
connection is marked dead and every later call fails at once with ``ERR_PRISM_MCP_CLOSED``.

The tool list is read once at connect (all pages) and again whenever the server sends
``notifications/tools/list_changed``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from prism.abort import AbortSignal
from prism.errors import AbortError
from prism.mcp._stderr import StderrTail
from prism.mcp.errors import (
    ERR_PRISM_MCP_CLOSED,
    ERR_PRISM_MCP_CONNECT,
    ERR_PRISM_MCP_PROTOCOL,
    ERR_PRISM_MCP_TIMEOUT,
    MCPServerError,
)

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.shared.dispatcher import ProgressFnT
    from mcp.types import CallToolResult, Tool

__all__ = ["Connection", "OpenTransport", "describe"]

_log = logging.getLogger("prism.mcp")

OpenTransport = Callable[[AsyncExitStack], Awaitable[tuple[Any, Any]]]
"""Enters the SDK transport on the stack (in the owner task) and returns its stream pair."""

_CONNECTION_CLOSED = -32000
_REQUEST_TIMEOUT = -32001


def describe(exc: BaseException) -> str:
    """``Type: message`` of the first leaf of an exception (groups unwrapped)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass(slots=True, kw_only=True, eq=False)
class Connection:
    """A connected MCP client session and its tool list.

    Args:
        label: The server's redacted label (for messages).
        open_transport: Enters the transport (see :data:`OpenTransport`).
        redact: Removes the server's secrets from a text.
        stderr: The stderr tail of a stdio server, else ``None``.
        on_tools: Called with each new tool list (the first one and every refresh).
    """

    label: str
    open_transport: OpenTransport = field(repr=False)
    redact: Callable[[str], str] = field(repr=False)
    stderr: StderrTail | None = field(repr=False)
    on_tools: Callable[[list[Tool]], None] = field(repr=False)
    session: ClientSession | None = field(default=None, init=False, repr=False)
    dead: bool = field(default=False, init=False)
    """The server exited or the transport failed: every call fails."""
    failure: BaseException | None = field(default=None, init=False)
    closed: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)
    """Set when the owner task has ended."""
    _ready: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)
    _stop: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)
    _refresh: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    # ----------------------------------------------------------------- lifetime

    async def start(self, timeout: float) -> None:  # noqa: ASYNC109 — it bounds the handshake
        """Start the owner task and wait until the session is initialised and listed.

        Raises:
            MCPServerError: ``ERR_PRISM_MCP_CONNECT`` — the transport or the handshake failed, or
                did not finish within ``timeout`` seconds (stderr tail included).
        """
        if self.stderr is not None:
            await self.stderr.start()
        task = self._task = asyncio.get_running_loop().create_task(self._main())
        ready = asyncio.ensure_future(self._ready.wait())
        try:
            await asyncio.wait({ready, task}, timeout=timeout, return_when="FIRST_COMPLETED")
        finally:
            if not ready.done():
                ready.cancel()
        if self._ready.is_set() and not task.done():
            return
        if task.done():
            cause = self.failure
            reason = describe(cause) if cause is not None else "the connection closed"
        else:
            reason = f"no answer within {timeout:g} s"
            await self.close()
        raise MCPServerError(
            ERR_PRISM_MCP_CONNECT,
            await self._message(f"could not connect to MCP server {self.label}: {reason}"),
            server=self.label,
        )

    async def _main(self) -> None:
        try:
            from mcp import ClientSession
            from mcp.types import Implementation

            async with AsyncExitStack() as stack:
                read, write = await self.open_transport(stack)
                if self.stderr is not None:
                    self.stderr.close_writer()
                session = await stack.enter_async_context(
                    ClientSession(
                        read,
                        write,
                        message_handler=self._on_message,
                        client_info=Implementation(name="prism", version="0.1.0"),
                    )
                )
                await session.initialize()
                self.session = session
                self.on_tools(await self._list(session))
                self._ready.set()
                await self._stop.wait()
        except asyncio.CancelledError:
            self.dead = True
            raise
        except BaseException as exc:  # anyio wraps transport failures in exception groups
            self.failure = exc
            self.dead = True
            _log.debug("MCP server %s: connection ended: %s", self.label, describe(exc))
        finally:
            self.dead = True
            self.closed.set()
            if self.stderr is not None:
                self.stderr.close_writer()

    async def close(self) -> None:
        """Stop the owner task (which closes the session and the transport) and wait for it."""
        self._stop.set()
        refresh = self._refresh
        if refresh is not None and not refresh.done():
            refresh.cancel()
        task = self._task
        if task is not None and not task.done() and not self._ready.is_set():
            task.cancel()  # still connecting: nothing to close gracefully
            await asyncio.wait({task})
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), 10)
            except TimeoutError:
                task.cancel()
                await asyncio.wait({task})
        if self.stderr is not None:
            self.stderr.close()

    # ----------------------------------------------------------------- tools

    async def _list(self, session: ClientSession) -> list[Tool]:
        from mcp.types import PaginatedRequestParams

        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(1000):
            params = None if cursor is None else PaginatedRequestParams(cursor=cursor)
            page = await session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def _on_message(self, message: Any) -> None:
        from mcp.types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification) and self.session is not None:
            previous = self._refresh
            if previous is not None and not previous.done():
                previous.cancel()
            self._refresh = asyncio.get_running_loop().create_task(self._relist())

    async def _relist(self) -> None:
        session = self.session
        if session is None or self.dead:
            return
        try:
            self.on_tools(await self._list(session))
        except Exception as exc:
            _log.warning("MCP server %s: re-listing tools failed: %s", self.label, describe(exc))

    # ----------------------------------------------------------------- calls

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        timeout: float | None,  # noqa: ASYNC109 — passed to the SDK as the request timeout
        signal: AbortSignal | None,
        progress: Callable[[float, float | None, str | None], Awaitable[None]] | None,
    ) -> CallToolResult:
        """Call tool ``name`` and return the SDK's result.

        An abort of ``signal`` or the end of the connection cancels the request (the SDK sends
        ``notifications/cancelled``) and raises at once.

        Raises:
            AbortError: ``ERR_PRISM_ABORTED`` — ``signal`` aborted during the call.
            MCPServerError: ``ERR_PRISM_MCP_CLOSED`` / ``_TIMEOUT`` / ``_PROTOCOL``.
        """
        from mcp import MCPError

        session = self.session
        if self.dead or session is None:
            raise await self.closed_error()
        loop = asyncio.get_running_loop()
        aborted = asyncio.Event()
        remove = (
            signal.add_listener(lambda _reason: loop.call_soon_threadsafe(aborted.set))
            if signal is not None
            else None
        )
        request = asyncio.ensure_future(
            session.call_tool(
                name,
                dict(arguments),
                read_timeout_seconds=timeout,
                progress_callback=cast("ProgressFnT | None", progress),
            )
        )
        watchers = {
            asyncio.ensure_future(aborted.wait()),
            asyncio.ensure_future(self.closed.wait()),
        }
        try:
            await asyncio.wait({request, *watchers}, return_when="FIRST_COMPLETED")
        finally:
            if remove is not None:
                remove()
            for watcher in watchers:
                watcher.cancel()
            if not request.done():
                request.cancel()  # the SDK sends notifications/cancelled for it
                await asyncio.wait({request})
        if aborted.is_set() and not (request.done() and not request.cancelled()):
            raise AbortError("tool call aborted; the MCP server was sent a cancellation")
        if request.cancelled():
            raise await self.closed_error()
        try:
            return request.result()
        except MCPError as exc:
            code = exc.error.code
            if code == _CONNECTION_CLOSED:
                self.dead = True
                raise await self.closed_error() from None
            if code == _REQUEST_TIMEOUT:
                raise MCPServerError(
                    ERR_PRISM_MCP_TIMEOUT,
                    f"MCP tool {name} of {self.label} did not answer within {timeout:g} s "
                    "(the server was sent a cancellation)",
                    server=self.label,
                ) from None
            raise MCPServerError(
                ERR_PRISM_MCP_PROTOCOL,
                self.redact(f"MCP server {self.label} answered error {code}: {exc.error.message}"),
                server=self.label,
            ) from None

    async def closed_error(self) -> MCPServerError:
        """The ``ERR_PRISM_MCP_CLOSED`` error of a dead connection, with the stderr tail."""
        failure = self.failure
        reason = f": {describe(failure)}" if failure is not None else ""
        return MCPServerError(
            ERR_PRISM_MCP_CLOSED,
            await self._message(f"MCP server {self.label} closed the connection{reason}"),
            server=self.label,
        )

    async def _message(self, text: str) -> str:
        """``text`` plus the stderr tail (after the child's end closed, at most 1 s), redacted."""
        stderr = self.stderr
        if stderr is not None:
            if self.dead:
                await stderr.settle()
            tail = stderr.text()
            if tail:
                text = f"{text}\nserver stderr (last lines):\n{tail}"
        return self.redact(text)
