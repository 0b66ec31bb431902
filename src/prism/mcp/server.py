"""MCP servers as tool sources: ``MCPServerStdio`` (a command) and ``MCPServerHTTP`` (a URL).

A server object holds configuration only until it is connected. It connects when entered —
``async with server:`` by the host, or by each run leg of an agent that has it in its ``tools``
(a [`ToolSource`][prism.tools.ToolSource]) — and the entries share one connection: it opens on the
first and closes when the last one leaves. A connection whose server died is replaced by a new
one on the next entry (a resumed durable run reconnects that way).

While connected, [`MCPServer.tools`][prism.mcp.server.MCPServer.tools] holds the server's tools as prism
[`ToolDefinition`][prism.types.ToolDefinition] objects: named by ``prism.mcp._convert.prism_tool_name``
(with the ``prefix``), narrowed by ``allow``/``deny`` (server names), described by the server's
description, with the server's input schema as ``parameters`` (so the normal argument
validation applies before a call is sent). The list is read at connect and re-read when the
server sends ``notifications/tools/list_changed``; a run leg keeps the list it started with.

A call's ``execute`` sends ``tools/call`` and maps the result (``prism.mcp._convert``); MCP
progress notifications become ``tool_execution_progress`` events (``progress`` is
``{"progress", "total", "message"}`` with the absent keys left out); an abort of the run cancels
the request at once (``notifications/cancelled``) and the call's error is ``ERR_PRISM_ABORTED``.
Failures are raised as [`MCPServerError`][prism.mcp.errors.MCPServerError], which the dispatcher turns
into the call's error result for the model to read.

An HTTP server that no longer knows the connection's session — it answered HTTP 404, or
"Session not found", to a request carrying the session id, which the MCP specification says it
did not process (a restarted server) — gets a new connection (a new session is initialised) and
the refused call is sent once more; no other failure is ever retried. A dead HTTP connection
(the server went away) is connected again before the next call is sent.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import math
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from prism._json import JsonValue, canonical_json
from prism.errors import PrismConfigError
from prism.mcp._connection import (
    HTTP_STATUS,
    SESSION_LOST,
    Connection,
    SessionLost,
    http_status_text,
)
from prism.mcp._convert import convert_result, prism_tool_name
from prism.mcp._stderr import StderrTail, launcher_command
from prism.mcp.errors import (
    ERR_PRISM_MCP_CLOSED,
    ERR_PRISM_MCP_PROTOCOL,
    ERR_PRISM_MCP_TOOL_ERROR,
    MCPServerError,
)
from prism.redaction import create_secret_redactor
from prism.types import ToolDefinition, ToolExecutionContext, ToolResult

if TYPE_CHECKING:
    from mcp.types import Tool

__all__ = ["MCPServer", "MCPServerHTTP", "MCPServerStdio"]

_log = logging.getLogger("prism.mcp")

_BARE_PYTHON = frozenset({"python", "python3"})


def _names(value: Any, label: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise PrismConfigError(f"{label} must be a sequence of tool names, got {value!r}")
    for item in value:
        if not isinstance(item, str) or not item:
            raise PrismConfigError(f"{label} must hold non-empty strings, got {item!r}")
    return tuple(value)


def _timeout(value: Any, label: str, *, optional: bool) -> float | None:
    if value is None and optional:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise PrismConfigError(f"{label} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


def _string_map(value: Mapping[str, str] | None, label: str) -> dict[str, str] | None:
    """A copy of ``value``, which must map strings to strings (``None`` stays ``None``)."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise PrismConfigError(f"{label} must map strings to strings")
    return dict(value)


def _json_names(names: Any, *, keep: bool = False) -> list[JsonValue] | None:
    """Names as a JSON list (sorted unless ``keep``); ``None`` for none."""
    if not names:
        return None if not keep else []
    out: list[JsonValue] = [*(names if keep else sorted(names))]
    return out


def _check_sdk() -> None:
    """The SDK is installed (found, not imported: it is imported when a server connects)."""
    if importlib.util.find_spec("mcp") is None:
        raise PrismConfigError("MCP servers need the mcp package: pip install 'prism-runtime[mcp]'")


class MCPServer:
    """What both server kinds share (build one with [`MCPServerStdio`][prism.mcp.server.MCPServerStdio] or
    [`MCPServerHTTP`][prism.mcp.server.MCPServerHTTP]). A [`ToolSource`][prism.tools.ToolSource] and an async context manager.

    Keyword args (both kinds):
        prefix: Joined before each tool name with ``_`` (``prefix="fs"``: ``fs_read_file``);
            ``[A-Za-z0-9_-]``, at most 32 characters. Needed when two servers offer the same
            name (a run fails with a ``PrismConfigError`` naming both otherwise).
        allow: Only these tools (the server's names) are offered.
        deny: These tools (the server's names) are not offered.
        connect_timeout: Seconds to start, connect, initialise and list tools (default 30).
        call_timeout: Seconds one tool call may take (default ``None``: no limit of its own;
            the run's abort still cancels it). A late call is cancelled on the server and
            fails with ``ERR_PRISM_MCP_TIMEOUT``.
        secrets: Extra strings removed from every message, result and stderr tail (e.g.
            tokens passed in ``env``); HTTP header values are always removed.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an option is invalid, or the ``mcp`` package is
            not installed (``pip install 'prism-runtime[mcp]'``).
    """

    def __init__(
        self,
        *,
        prefix: str | None = None,
        allow: Sequence[str] | None = None,
        deny: Sequence[str] | None = None,
        connect_timeout: float = 30.0,
        call_timeout: float | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        _check_sdk()
        if prefix is not None and (
            not isinstance(prefix, str)
            or not 0 < len(prefix) <= 32
            or prism_tool_name(prefix, None) != prefix
        ):
            raise PrismConfigError(
                f"prefix must be 1-32 characters of [A-Za-z0-9_-], got {prefix!r}"
            )
        self.prefix = prefix
        self.allow = _names(allow, "allow")
        self.deny = _names(deny, "deny")
        self.connect_timeout = _timeout(connect_timeout, "connect_timeout", optional=False)
        self.call_timeout = _timeout(call_timeout, "call_timeout", optional=True)
        if isinstance(secrets, str):
            raise PrismConfigError("secrets must be a sequence of strings, not a string")
        self._secrets: list[str] = [s for s in secrets if isinstance(s, str) and s]
        self._connection: Connection | None = None
        self._reconnecting = asyncio.Lock()
        self._users = 0
        self._tools: tuple[ToolDefinition, ...] = ()
        self._problem: str | None = None
        self._made: dict[str, ToolDefinition] = {}
        self.tools_version = 0
        """How many tool lists were read (1 after connecting, +1 per list-changed refresh)."""

    # ----------------------------------------------------------------- subclass parts

    def _describe(self) -> str:
        raise NotImplementedError

    def _identity(self) -> dict[str, JsonValue]:
        raise NotImplementedError

    async def _open_transport(self, stack: AsyncExitStack, connection: Connection) -> Any:
        raise NotImplementedError

    def _stderr(self) -> StderrTail | None:
        return None

    _reconnects = False
    """Whether a dead connection is connected again before the next call (HTTP)."""

    # ----------------------------------------------------------------- public view

    def redact(self, text: str) -> str:
        """``text`` without this server's secrets."""
        redacted: str = create_secret_redactor(self._secrets).redact(text)
        return redacted

    def __repr__(self) -> str:
        extra = f", prefix={self.prefix!r}" if self.prefix else ""
        return self.redact(f"{type(self).__name__}({self._describe()!r}{extra})")

    @property
    def connected(self) -> bool:
        """Whether a live connection is open."""
        connection = self._connection
        return connection is not None and not connection.dead

    @property
    def tools(self) -> tuple[ToolDefinition, ...]:
        """The tools offered now (``()`` before the first connection)."""
        return self._tools

    def source_identity(self) -> dict[str, JsonValue]:
        """Which server, with which prefix and filters (no secrets): joins the durable-run
        fingerprint (``prism.tools.ToolSource``)."""
        identity = self._identity()
        identity["prefix"] = self.prefix
        identity["allow"] = None if self.allow is None else _json_names(self.allow, keep=True)
        identity["deny"] = None if self.deny is None else _json_names(self.deny, keep=True)
        return identity

    # ----------------------------------------------------------------- connection sharing

    async def __aenter__(self) -> MCPServer:
        """Connect (or share the open connection).

        Raises:
            MCPServerError: ``ERR_PRISM_MCP_CONNECT`` (stderr tail of a stdio server included).
        """
        connection = self._connection
        if connection is None or connection.dead:
            self._connection = None
            if connection is not None:
                await connection.close()
            self._connection = await self._connect()
        self._users += 1
        return self

    async def _connect(self) -> Connection:
        """A new, started connection (``ERR_PRISM_MCP_CONNECT``/``_AUTH`` when it fails)."""
        connection = Connection(
            label=repr(self),
            open_transport=self._open_transport,
            redact=self.redact,
            stderr=self._stderr(),
            on_tools=self._set_tools,
            secrets=tuple(self._secrets),
        )
        await connection.start(self.connect_timeout or 30.0)
        return connection

    async def _reconnect(self, old: Connection, why: str) -> Connection:
        """Replace the connection ``old`` (dead, or its session lost) with a new one — a new
        session — unless another call did so already. The replaced connection is closed.

        Raises:
            MCPServerError: ``ERR_PRISM_MCP_CONNECT``/``_AUTH`` (the new connection failed), or
                ``ERR_PRISM_MCP_CLOSED`` (the last user left meanwhile).
        """
        async with self._reconnecting:
            current = self._connection
            if current is not None and current is not old and not current.dead:
                return current
            if current is None:
                raise MCPServerError(
                    ERR_PRISM_MCP_CLOSED, f"MCP server {self!r} is not connected", server=repr(self)
                )
            _log.info("MCP server %r: %s; connecting again", self, self.redact(why))
            try:
                connection = await self._connect()
            finally:
                await current.close()
            replaced = self._connection
            if replaced is not current:  # the last user left, or an entry connected, meanwhile
                await connection.close()
                if replaced is None or replaced.dead:
                    raise MCPServerError(
                        ERR_PRISM_MCP_CLOSED,
                        f"MCP server {self!r} is not connected",
                        server=repr(self),
                    )
                return replaced
            self._connection = connection
            return connection

    async def __aexit__(self, *exc_info: object) -> None:
        """Leave (whatever the exception); the last one out closes the connection."""
        self._users = max(0, self._users - 1)
        connection = self._connection
        if self._users == 0 and connection is not None:
            self._connection = None
            await connection.close()

    def open_tools(self) -> AbstractAsyncContextManager[Sequence[ToolDefinition]]:
        """Connect (shared) and yield the tools offered now (``prism.tools.ToolSource``).

        Raises:
            MCPServerError: ``ERR_PRISM_MCP_CONNECT``.
            PrismConfigError: two of the server's tool names map to the same prism name.
        """
        return self._open_tools()

    @asynccontextmanager
    async def _open_tools(self) -> AsyncIterator[Sequence[ToolDefinition]]:
        async with self:
            if self._problem is not None:
                raise PrismConfigError(self._problem)
            yield self._tools

    # ----------------------------------------------------------------- tools

    def _set_tools(self, listed: list[Tool]) -> None:
        """A new tool list from the server: filter, name and wrap it (cached by content)."""
        tools: list[ToolDefinition] = []
        seen: dict[str, str] = {}
        problem = None
        for tool in listed:
            if self.allow is not None and tool.name not in self.allow:
                continue
            if self.deny is not None and tool.name in self.deny:
                continue
            name = prism_tool_name(tool.name, self.prefix)
            if name in seen:
                problem = (
                    f"MCP server {self!r}: tools {seen[name]!r} and {tool.name!r} both become "
                    f"{name!r}; deny one of them"
                )
                continue
            seen[name] = tool.name
            tools.append(self._definition(name, tool))
        self._tools = tuple(tools)
        self._problem = problem
        self._made = {t.name: t for t in tools}
        self.tools_version += 1

    def _definition(self, name: str, tool: Tool) -> ToolDefinition:
        parameters: dict[str, Any] = dict(tool.input_schema or {"type": "object"})
        description = tool.description or tool.title
        known = self._made.get(name)
        if (
            known is not None
            and known.description == description
            and canonical_json(known.parameters) == canonical_json(parameters)
        ):
            return known  # unchanged: the same object, so its checks are not repeated
        remote = tool.name

        async def execute(arguments: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
            return await self._call(remote, name, arguments, ctx)

        return ToolDefinition(
            name=name,
            execute=execute,
            description=description,
            parameters=parameters,
            metadata={"mcp_server": repr(self), "mcp_tool": remote},
        )

    async def _call(
        self, remote: str, name: str, arguments: dict[str, Any], ctx: ToolExecutionContext
    ) -> ToolResult:
        connection = self._connection
        if connection is None:
            raise MCPServerError(
                ERR_PRISM_MCP_CLOSED, f"MCP server {self!r} is not connected", server=repr(self)
            )
        if connection.dead and self._reconnects:
            connection = await self._reconnect(connection, "the connection was lost")

        async def progress(value: float, total: float | None, message: str | None) -> None:
            data: dict[str, JsonValue] = {"progress": value}
            if total is not None:
                data["total"] = total
            if message:
                data["message"] = self.redact(message)
            await ctx.progress(data)

        try:
            result = await connection.call(
                remote, arguments, timeout=self.call_timeout, signal=ctx.signal, progress=progress
            )
        except SessionLost as lost:
            # the server did not process the call: a new session, and the call once more
            connection = await self._reconnect(connection, f"session lost ({lost})")
            try:
                result = await connection.call(
                    remote,
                    arguments,
                    timeout=self.call_timeout,
                    signal=ctx.signal,
                    progress=progress,
                )
            except SessionLost as again:
                raise MCPServerError(
                    ERR_PRISM_MCP_PROTOCOL,
                    f"{again} (also after initialising a new session; not retried again)",
                    server=repr(self),
                    http_status=again.http_status,
                ) from None
        converted = convert_result(result)
        if converted.error_text is not None:
            raise MCPServerError(
                ERR_PRISM_MCP_TOOL_ERROR, self.redact(converted.error_text), server=repr(self)
            )
        redactor = create_secret_redactor(self._secrets)
        return ToolResult(
            tool_call_id=ctx.tool_call_id,
            name=name,
            value=redactor.redact(converted.value),
            content=converted.content,
        )


class MCPServerStdio(MCPServer):
    """An MCP server started as a subprocess and spoken to over its stdin/stdout.

    Args:
        command: The executable (looked up on the ``PATH`` the server gets). A bare ``python`` or
            ``python3`` is the interpreter running prism (``sys.executable``), so a server
            written with the ``mcp`` SDK starts without an activated virtual environment.
        args: Its arguments.
        env: Environment variables for the server, over the ``mcp`` SDK's safe default set
            (``HOME``, ``PATH``, ``USER``, …; the host's other variables are not passed on).
            The names join the fingerprint, the values do not.
        cwd: Working directory of the server (default: the current one).

    ``prefix``, ``allow``, ``deny``, ``connect_timeout``, ``call_timeout`` and ``secrets`` are
    those of [`MCPServer`][prism.mcp.server.MCPServer].

    The server's stderr is captured (the last 8 KiB are kept); when the server exits, the
    error says so with its exit code (``exited with code N``) and its last lines, redacted. On
    POSIX the server runs under a small Python launcher that reports its exit code (see
    ``prism.mcp._stderr``). Leaving the connection closes the server's
    stdin and stops it (terminated, then killed, after a grace of a few seconds).
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        prefix: str | None = None,
        allow: Sequence[str] | None = None,
        deny: Sequence[str] | None = None,
        connect_timeout: float = 30.0,
        call_timeout: float | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        super().__init__(
            prefix=prefix,
            allow=allow,
            deny=deny,
            connect_timeout=connect_timeout,
            call_timeout=call_timeout,
            secrets=secrets,
        )
        if not isinstance(command, str) or not command:
            raise PrismConfigError(f"command must be a non-empty string, got {command!r}")
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise PrismConfigError("args must be a sequence of strings")
        env = _string_map(env, "env")
        self.command = command
        self.args = tuple(args)
        self.env = env
        self.cwd = None if cwd is None else os.fspath(cwd)

    def _describe(self) -> str:
        return " ".join([self.command, *self.args])

    def _identity(self) -> dict[str, JsonValue]:
        return {
            "transport": "stdio",
            "command": self.redact(self.command),
            "args": [self.redact(a) for a in self.args],
            "env": _json_names(self.env),
            "cwd": self.cwd,
        }

    def _stderr(self) -> StderrTail | None:
        return StderrTail()

    async def _open_transport(self, stack: AsyncExitStack, connection: Connection) -> Any:
        from mcp import StdioServerParameters, stdio_client

        command = self.command
        if command in _BARE_PYTHON and sys.executable:
            command = sys.executable
        command, args = launcher_command(command, list(self.args))
        params = StdioServerParameters(command=command, args=args, env=self.env, cwd=self.cwd)
        stderr = connection.stderr
        errlog: Any = stderr.writer if stderr is not None else None
        if errlog is None:
            return await stack.enter_async_context(stdio_client(params))
        return await stack.enter_async_context(stdio_client(params, errlog=errlog))


class MCPServerHTTP(MCPServer):
    """An MCP server at a URL, spoken to over streamable HTTP.

    Args:
        url: ``http://`` or ``https://`` endpoint (e.g. ``http://127.0.0.1:8000/mcp``). A
            ``user:password@`` part is treated as a secret.
        headers: Sent with every request (e.g. ``{"Authorization": "Bearer …"}``). Every value
            is a secret: removed from messages, results, ``repr`` and events; only the header
            names join the fingerprint.

    ``prefix``, ``allow``, ``deny``, ``connect_timeout``, ``call_timeout`` and ``secrets`` are
    those of [`MCPServer`][prism.mcp.server.MCPServer].

    An HTTP error status is named in the error: 401 and 403 are ``ERR_PRISM_MCP_AUTH`` (at
    connect or on a call), others ``ERR_PRISM_MCP_PROTOCOL`` (``ERR_PRISM_MCP_CONNECT`` at
    connect) with ``http_status`` set. A server that lost the session (restarted) gets a new one
    and the refused call is sent once more (see the module docstring). The session id the
    server assigns is a secret too in the ``mcp``/``httpx`` log records.
    """

    _reconnects = True

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        prefix: str | None = None,
        allow: Sequence[str] | None = None,
        deny: Sequence[str] | None = None,
        connect_timeout: float = 30.0,
        call_timeout: float | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        super().__init__(
            prefix=prefix,
            allow=allow,
            deny=deny,
            connect_timeout=connect_timeout,
            call_timeout=call_timeout,
            secrets=secrets,
        )
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise PrismConfigError(f"url must be an http:// or https:// URL, got {url!r}")
        checked_headers = _string_map(headers, "headers")
        self.url = url
        self.headers = checked_headers or {}
        for value in self.headers.values():
            # the whole value, and the credential after a scheme ("Bearer TOKEN")
            self._secrets.extend(part for part in (value, value.partition(" ")[2]) if part)
        if parts.password:
            self._secrets.append(parts.password)
        if parts.username or parts.password:
            netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
            self._shown = urlunsplit(
                (parts.scheme, netloc, parts.path, parts.query, parts.fragment)
            )
        else:
            self._shown = url

    def _describe(self) -> str:
        return self._shown

    def _identity(self) -> dict[str, JsonValue]:
        return {
            "transport": "streamable-http",
            "url": self.redact(self._shown),
            "headers": _json_names(self.headers),
        }

    async def _open_transport(self, stack: AsyncExitStack, connection: Connection) -> Any:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        client = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=self.headers,
                timeout=httpx2.Timeout(self.connect_timeout or 30.0, read=300.0),
                transport=_status_transport(httpx2.AsyncHTTPTransport(), connection),
            )
        )
        return await stack.enter_async_context(streamable_http_client(self.url, http_client=client))


_SESSION_HEADER = "mcp-session-id"


def _status_transport(inner: Any, connection: Connection) -> Any:
    """An ``httpx2`` transport over ``inner`` that keeps the HTTP status of a refused request.

    The SDK turns an HTTP error answer to a request into a JSON-RPC error without its status
    (``-32603 Server returned an error response``). Here the answer to a JSON-RPC request POST
    with status >= 400 is replaced by a JSON-RPC error (the server's own, when its body is one)
    whose data holds the status (``HTTP_STATUS``) and, when the request carried a session id
    and the answer was 404 or "Session not found", ``SESSION_LOST``. Every session id the
    server assigns is handed to ``connection.add_log_secret``.
    """
    import httpx2

    class StatusTransport(httpx2.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            response: httpx2.Response = await inner.handle_async_request(request)
            session = response.headers.get(_SESSION_HEADER)
            if session:
                connection.add_log_secret(session)
            if request.method != "POST" or response.status_code < 400:
                return response
            try:
                sent = json.loads(request.content)
            except (ValueError, httpx2.RequestNotRead):
                return response
            if not isinstance(sent, dict) or "method" not in sent or "id" not in sent:
                return response  # a notification or a response: the SDK expects no answer
            try:
                body = await response.aread()
            finally:
                await response.aclose()
            error = _refusal(response.status_code, body, _SESSION_HEADER in request.headers)
            return httpx2.Response(
                response.status_code,
                headers={"content-type": "application/json"},
                content=json.dumps({"jsonrpc": "2.0", "id": sent["id"], "error": error}),
                request=request,
            )

        async def aclose(self) -> None:
            await inner.aclose()

    return StatusTransport()


def _refusal(status: int, body: bytes, had_session: bool) -> dict[str, Any]:
    """The JSON-RPC error for an HTTP error answer (see [`_status_transport()`][prism.mcp.server._status_transport])."""
    error: dict[str, Any] | None = None
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        found = parsed["error"]
        if isinstance(found.get("code"), int) and isinstance(found.get("message"), str):
            error = {"code": found["code"], "message": found["message"]}
            if "data" in found:
                error["data"] = found["data"]
    if error is None:
        text = body.decode("utf-8", "replace").strip()[:200]
        error = {"code": -32603, "message": text or http_status_text(status)}
    data: dict[str, Any] = {HTTP_STATUS: status}
    if had_session and (status == 404 or "session not found" in str(error["message"]).lower()):
        data[SESSION_LOST] = True
    if "data" in error:
        data["server_data"] = error["data"]
    error["data"] = data
    return error
