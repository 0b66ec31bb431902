"""One live connection to an MCP server, owned by a task of its own.

The ``mcp`` SDK's transports and sessions are anyio context managers that must be entered and left
in the same task. A run leg, a host's ``async with`` and the cleanup of a cancelled run can all be
different tasks, so [`Connection`][prism.mcp._connection.Connection] enters them in a dedicated *owner task* that lives from
connect to close; every other task only sends requests over the session (which works from any
task) and signals the owner to stop. When the server exits or the transport fails, the session
answers in-flight requests with "connection closed", or the owner task ends; either way the
connection is marked dead and every later call fails at once with ``ERR_PRISM_MCP_CLOSED``.

The tool list is read once at connect (all pages) and again whenever the server sends
``notifications/tools/list_changed``.

A call that ends with the connection says what ended it: this process closing the connection
(``ERR_PRISM_MCP_INTERRUPTED``: the server may be alive and may have run it), a stdio server's
exit (``ERR_PRISM_MCP_CLOSED`` with ``exited with code N`` and its stderr tail), or the server
closing it. An HTTP error status reaches here as the JSON-RPC error that ``prism.mcp.server``'s
HTTP transport puts in place of the body, with the status in the error's data
([`HTTP_STATUS`][prism.mcp._connection.HTTP_STATUS]): 401/403 become ``ERR_PRISM_MCP_AUTH``; a refusal because the session is
unknown ([`SESSION_LOST`][prism.mcp._connection.SESSION_LOST]) raises [`SessionLost`][prism.mcp._connection.SessionLost], which the server answers by
initialising a new session and sending the call once more.

While the connection is open its secrets (and the HTTP session id) are kept out of the ``mcp``,
``httpx*`` and ``httpcore*`` loggers' records (``SecretLogFilter``, below).
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, cast

from prism.abort import AbortSignal
from prism.errors import AbortError
from prism.mcp._stderr import StderrTail, describe_exit
from prism.mcp.errors import (
    ERR_PRISM_MCP_AUTH,
    ERR_PRISM_MCP_CLOSED,
    ERR_PRISM_MCP_CONNECT,
    ERR_PRISM_MCP_INTERRUPTED,
    ERR_PRISM_MCP_PROTOCOL,
    ERR_PRISM_MCP_TIMEOUT,
    MCPServerError,
)
from prism.redaction import create_secret_redactor

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.shared.dispatcher import ProgressFnT
    from mcp.types import CallToolResult, Tool

__all__ = [
    "HTTP_STATUS",
    "SESSION_LOST",
    "Connection",
    "OpenTransport",
    "SessionLost",
    "describe",
    "http_status_text",
]

_log = logging.getLogger("prism.mcp")

OpenTransport = Callable[[AsyncExitStack, "Connection"], Awaitable[tuple[Any, Any]]]
"""Enters the SDK transport on the stack (in the owner task) and returns its stream pair."""

HTTP_STATUS = "prism_http_status"
"""Key of the HTTP status in the data of a JSON-RPC error made from an HTTP error response."""
SESSION_LOST = "prism_session_lost"
"""Key (``True``) in that data when the server refused the request's session id: HTTP 404, or
"Session not found", for a request that carried one (the server did not process it)."""

_CONNECTION_CLOSED = -32000
_REQUEST_TIMEOUT = -32001


class SessionLost(MCPServerError):
    """The HTTP server does not know the connection's session (it did not process the call)."""


def http_status_text(status: int) -> str:
    """``HTTP 401 Unauthorized`` (the reason phrase when the status has one)."""
    from http import HTTPStatus

    try:
        return f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


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
        open_transport: Enters the transport (see [`OpenTransport`][prism.mcp._connection.OpenTransport]).
        redact: Removes the server's secrets from a text.
        stderr: The stderr tail of a stdio server, else ``None``.
        on_tools: Called with each new tool list (the first one and every refresh).
        secrets: The server's secrets, kept out of the SDK's and httpx's log records.
    """

    label: str
    open_transport: OpenTransport = field(repr=False)
    redact: Callable[[str], str] = field(repr=False)
    stderr: StderrTail | None = field(repr=False)
    on_tools: Callable[[list[Tool]], None] = field(repr=False)
    secrets: tuple[str, ...] = field(default=(), repr=False)
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
    _log_secrets: list[str] = field(default_factory=list, init=False, repr=False)

    # ----------------------------------------------------------------- lifetime

    async def start(self, timeout: float) -> None:  # noqa: ASYNC109 — it bounds the handshake
        """Start the owner task and wait until the session is initialised and listed.

        Raises:
            MCPServerError: ``ERR_PRISM_MCP_CONNECT`` — the transport or the handshake failed, or
                did not finish within ``timeout`` seconds (stderr tail included).
        """
        if self.stderr is not None:
            await self.stderr.start()
        self.add_log_secret(*self.secrets)
        task = self._task = asyncio.get_running_loop().create_task(self._main())
        ready = asyncio.ensure_future(self._ready.wait())
        try:
            await asyncio.wait({ready, task}, timeout=timeout, return_when="FIRST_COMPLETED")
        finally:
            if not ready.done():
                ready.cancel()
        if self._ready.is_set() and not task.done():
            return
        status = None
        code = ERR_PRISM_MCP_CONNECT
        if task.done():
            cause = self.failure
            status = _http_status(cause)
            if status is not None:
                reason = f"the server answered {http_status_text(status)}"
                if status in (401, 403):
                    code = ERR_PRISM_MCP_AUTH
                    reason += " (check the credentials in its headers)"
            else:
                reason = describe(cause) if cause is not None else "the connection closed"
            ended = await self._ended()
            if ended:
                reason = f"{reason} (the server {ended})"
        else:
            reason = f"no answer within {timeout:g} s"
            await self.close()
        raise MCPServerError(
            code,
            await self._message(f"could not connect to MCP server {self.label}: {reason}"),
            server=self.label,
            http_status=status,
        )

    async def _main(self) -> None:
        try:
            from mcp import ClientSession
            from mcp.types import Implementation

            async with AsyncExitStack() as stack:
                read, write = await self.open_transport(stack, self)
                self.add_log_secret()  # on the loggers of the modules imported by now
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
            _log.debug(
                "MCP server %s: connection ended: %s", self.label, self.redact(describe(exc))
            )
        finally:
            self.dead = True
            self.closed.set()
            if self.stderr is not None:
                self.stderr.close_writer()
            unregister_log_secrets(id(self))

    def add_log_secret(self, *values: str) -> None:
        """Keep ``values`` (e.g. the session id the server assigned) out of the log records of
        the SDK and httpx while this connection is open."""
        self._log_secrets.extend(v for v in values if v and v not in self._log_secrets)
        if not self.closed.is_set():
            register_log_secrets(id(self), self._log_secrets)

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
        unregister_log_secrets(id(self))

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
            _log.warning(
                "MCP server %s: re-listing tools failed: %s", self.label, self.redact(describe(exc))
            )

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
            if self.closed.is_set() and not self._stop.is_set():
                raise await self.closed_error()
            raise self._interrupted(name)
        try:
            return request.result()
        except MCPError as exc:
            raise await self._call_error(name, exc, timeout) from None

    async def _call_error(self, name: str, exc: Any, timeout: float | None) -> MCPServerError:  # noqa: ASYNC109
        """The error of a call the SDK answered with ``MCPError`` ``exc``."""
        code: int = exc.error.code
        data = exc.error.data
        status = data.get(HTTP_STATUS) if isinstance(data, dict) else None
        if code == _CONNECTION_CLOSED:
            if self._stop.is_set():
                return self._interrupted(name)
            self.dead = True
            return await self.closed_error()
        if code == _REQUEST_TIMEOUT:
            return MCPServerError(
                ERR_PRISM_MCP_TIMEOUT,
                f"MCP tool {name} of {self.label} did not answer within {timeout:g} s "
                "(the server was sent a cancellation)",
                server=self.label,
            )
        said = f"{exc.error.message}"
        if isinstance(status, int):
            said = f"{http_status_text(status)}: {said}"
        if isinstance(data, dict) and data.get(SESSION_LOST):
            return SessionLost(
                ERR_PRISM_MCP_PROTOCOL,
                self.redact(
                    f"MCP server {self.label} does not know this client's session ({said}); "
                    "it did not run the call"
                ),
                server=self.label,
                http_status=status if isinstance(status, int) else None,
            )
        if status in (401, 403):
            return MCPServerError(
                ERR_PRISM_MCP_AUTH,
                self.redact(
                    f"MCP server {self.label} refused the call to {name}: {said} "
                    "(check the credentials in its headers)"
                ),
                server=self.label,
                http_status=status,
            )
        return MCPServerError(
            ERR_PRISM_MCP_PROTOCOL,
            self.redact(f"MCP server {self.label} answered error {code}: {said}"),
            server=self.label,
            http_status=status if isinstance(status, int) else None,
        )

    def _interrupted(self, name: str) -> MCPServerError:
        why = (
            "this process closed the connection while the call was running"
            if self._stop.is_set()
            else "its request was cancelled in this process"
        )
        return MCPServerError(
            ERR_PRISM_MCP_INTERRUPTED,
            f"MCP tool {name} of {self.label} was interrupted: {why} "
            "(the server may still be running and may have run the call)",
            server=self.label,
        )

    async def closed_error(self) -> MCPServerError:
        """The ``ERR_PRISM_MCP_CLOSED`` error of a dead connection: how it ended (a stdio
        server's exit code) and the stderr tail."""
        if self._stop.is_set():
            text = f"MCP server {self.label}: this process closed the connection"
        else:
            ended = await self._ended()
            if ended:
                text = f"MCP server {self.label} {ended}"
            else:
                failure = self.failure
                reason = f": {describe(failure)}" if failure is not None else ""
                text = f"MCP server {self.label} closed the connection{reason}"
        return MCPServerError(ERR_PRISM_MCP_CLOSED, await self._message(text), server=self.label)

    async def _ended(self) -> str | None:
        """``exited with code N`` (or ``was killed by signal …``) of a stdio server that ended
        (after its stderr closed, at most 1 s), else ``None``."""
        stderr = self.stderr
        if stderr is None:
            return None
        await stderr.settle()
        status = stderr.exit_status
        return None if status is None else describe_exit(status)

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


def _http_status(exc: BaseException | None) -> int | None:
    """The HTTP status carried by the ``MCPError`` in ``exc`` (groups unwrapped), if any."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    error = getattr(exc, "error", None)
    data = getattr(error, "data", None)
    status = data.get(HTTP_STATUS) if isinstance(data, dict) else None
    return status if isinstance(status, int) else None


# ---------------------------------------------------------------------------
# Secrets kept out of the log records of the libraries an MCP connection runs on.
#
# The ``mcp`` SDK logs raw messages at DEBUG (``SSE message: …``, tool results included) and its
# session id at INFO; ``httpx2``/``httpcore2`` log requests. None of them knows prism's secrets, so
# while a connection is open, ``SecretLogFilter`` sits on every logger of those libraries —
# ``mcp`` and ``mcp.*``, ``client`` (the SDK's session logger), and any logger whose name starts with
# ``httpx`` or ``httpcore`` — and rewrites each record before any handler sees it: the message is
# formatted with its args, every registered secret is replaced by ``[REDACTED]``, and the result
# becomes the record's ``msg`` (``args`` emptied); a traceback (``exc_info``) is rendered, redacted
# into ``exc_text`` and dropped, as is redacted ``stack_info``. In the ``httpx*``/``httpcore*``
# records every header value is replaced too (``httpcore`` logs the response headers as
# ``(b'name', b'value')`` pairs — the session id among them — before anyone could register it).
#
# A filter on a logger applies only to records created on that very logger (records a child
# logger propagates skip the parent's filters), so the filter is put on each matching logger that
# exists, at every ``register_log_secrets`` (the SDK modules a connection uses are imported by
# then, and their loggers are module-level). ``register_log_secrets`` adds a connection's
# secrets; ``unregister_log_secrets`` removes them, and the filter from every logger once no
# connection holds any.

_PREFIXES: Final = ("httpx", "httpcore")
_EXACT: Final = frozenset({"mcp", "client"})
_HEADER: Final = re.compile(r"""\((b?(['"]).*?\2), b?(['"]).*?\3\)""")
"""A ``(b'name', b'value')`` header pair as ``httpcore`` logs it."""


def _covered(name: str) -> bool:
    return name in _EXACT or name.startswith("mcp.") or name.startswith(_PREFIXES)


class SecretLogFilter(logging.Filter):
    """Redacts the registered secrets from each record it sees (never drops a record)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._secrets: dict[int, tuple[str, ...]] = {}
        self._redact: Callable[[str], str] | None = None

    def set_secrets(self, owner: int, secrets: Iterable[str] | None) -> None:
        """Set ``owner``'s secrets (``None``: forget the owner)."""
        with self._lock:
            if secrets is None:
                self._secrets.pop(owner, None)
            else:
                self._secrets[owner] = tuple(s for s in secrets if s)
            every = sorted({s for group in self._secrets.values() for s in group})
            self._redact = create_secret_redactor(every).redact if every else None

    @property
    def empty(self) -> bool:
        """No owner is registered."""
        return not self._secrets

    def filter(self, record: logging.LogRecord) -> bool:
        headers = record.name.startswith(_PREFIXES)
        if self._redact is None and not headers:
            return True
        redact = self._redact or _keep
        try:
            message = record.getMessage()
        except Exception:  # a broken format: keep the template, redacted
            message = str(record.msg)
        if headers:
            message = _HEADER.sub(r"(\1, b'[REDACTED]')", message)
        record.msg = redact(message)
        record.args = None
        if record.exc_info:
            text = record.exc_text or logging.Formatter().formatException(record.exc_info)
            record.exc_text = redact(text)
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def _keep(text: str) -> str:
    return text


_FILTER: Final = SecretLogFilter()
_GUARD: Final = threading.Lock()


def _loggers() -> list[logging.Logger]:
    for name in ("mcp", "client", "httpx2", "httpcore2"):
        logging.getLogger(name)
    manager = logging.Logger.manager
    return [
        logger
        for name, logger in list(manager.loggerDict.items())
        if isinstance(logger, logging.Logger) and _covered(name)
    ]


def register_log_secrets(owner: int, secrets: Iterable[str]) -> None:
    """Redact ``secrets`` (of connection ``owner``, e.g. its ``id``; replacing those it
    registered before) and header values from the covered loggers' records, and put the filter
    on every covered logger that exists now (idempotent)."""
    with _GUARD:
        _FILTER.set_secrets(owner, secrets)
        for logger in _loggers():
            logger.addFilter(_FILTER)  # no-op when already there


def unregister_log_secrets(owner: int) -> None:
    """Forget ``owner``'s secrets; with none left, take the filter off every logger."""
    with _GUARD:
        _FILTER.set_secrets(owner, None)
        if _FILTER.empty:
            for logger in _loggers():
                logger.removeFilter(_FILTER)
