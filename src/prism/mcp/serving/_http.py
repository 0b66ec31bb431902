"""Serving over streamable HTTP, safely: loopback by default, DNS rebinding protection, bearer
tokens beyond loopback.

* **Binding.** ``127.0.0.1`` unless told otherwise. Any other address needs at least one bearer
  token; a wildcard address (``0.0.0.0``, ``::``) also needs the host names clients use
  (``allowed_hosts``). Without TLS (``ssl_certfile``/``ssl_keyfile``) beyond loopback a warning
  says the tokens cross the network in clear text unless a TLS proxy is in front.
* **DNS rebinding.** The SDK's ``TransportSecuritySettings`` with the protection on: a request's
  ``Host`` must be one of the loopback names (any port) or ``allowed_hosts``, its ``Origin``
  (when sent) one of the matching ``http``/``https`` origins or ``allowed_origins``; other
  requests are refused (421 and 403) before they reach MCP.
* **Bearer tokens.** When tokens are given, every request needs ``Authorization: Bearer
  <token>`` (refused with 401 otherwise). The header is compared with each token in constant time
  (``hmac.compare_digest``, all of them every time), never logged, and each token is its own
  principal: conversations and runs are scoped to the token, across MCP sessions and restarts.
  Without tokens they are scoped to the MCP session (``Mcp-Session-Id``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import signal
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from prism.errors import PrismConfigError
from prism.mcp.serving._records import PRINCIPAL_SCOPE_KEY, token_principal
from prism.mcp.serving._server import service_of
from prism.mcp.serving._service import Service

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from starlette.types import ASGIApp

__all__ = ["check_http_options", "http_app", "is_loopback", "serve_http"]

_log = logging.getLogger("prism.mcp.serving")

_LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost", "[::1]")
_WILDCARDS: Final = frozenset(("0.0.0.0", "::", ""))


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost``."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_http_options(
    host: str,
    *,
    tokens: Sequence[str],
    allowed_hosts: Sequence[str],
    tls: bool,
) -> list[str]:
    """Check where and how an HTTP server is about to listen; returns the warnings to show.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — beyond loopback without a bearer token, or a
            wildcard address without ``allowed_hosts``, or an empty token.
    """
    if any(not isinstance(t, str) or not t.strip() for t in tokens):
        raise PrismConfigError("a bearer token must be a non-empty string")
    if is_loopback(host):
        return []
    if not tokens:
        raise PrismConfigError(
            f"serving on {host} (beyond loopback) needs a bearer token: set one in the "
            "environment (--token-env, default PRISM_MCP_TOKEN)"
        )
    if host in _WILDCARDS and not allowed_hosts:
        raise PrismConfigError(
            f"listening on every address ({host or 'all'}) needs --allowed-host NAME[:PORT], the "
            "host names clients reach this server by (DNS rebinding protection)"
        )
    if tls:
        return []
    return [
        f"serving on {host} without TLS: the bearer token and every call cross the network in "
        "clear text unless a TLS-terminating proxy is in front (or give --ssl-certfile and "
        "--ssl-keyfile)"
    ]


def _security(
    host: str, port: int, allowed_hosts: Sequence[str], allowed_origins: Sequence[str]
) -> Any:
    """The SDK's DNS rebinding protection: the loopback names on any port, the address listened
    on (unless a wildcard), ``allowed_hosts``; their ``http``/``https`` origins, and
    ``allowed_origins``."""
    from mcp.server.transport_security import TransportSecuritySettings

    named = list(allowed_hosts)
    if not is_loopback(host) and host not in _WILDCARDS:
        named += [host, f"{host}:{port}"]
    hosts = [*(f"{name}:*" for name in _LOOPBACK_NAMES), *_LOOPBACK_NAMES, *named]
    origins = [
        *(f"http://{name}:*" for name in _LOOPBACK_NAMES),
        *(f"http://{name}" for name in _LOOPBACK_NAMES),
        *(f"{scheme}://{name}" for name in named for scheme in ("http", "https")),
        *allowed_origins,
    ]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class _BearerAuth:
    """ASGI middleware: refuse HTTP requests without one of the tokens (see module docstring)."""

    def __init__(self, app: Any, tokens: Sequence[str]) -> None:
        self.app = app
        self.tokens = [(t.encode("utf-8"), token_principal(t)) for t in tokens]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        given = b""
        for name, value in scope.get("headers") or ():
            if name.lower() == b"authorization":
                scheme, _, credential = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    given = credential.strip()
        found: str | None = None
        for token, principal in self.tokens:
            if hmac.compare_digest(given, token) and given:
                found = principal
        if found is None:
            from starlette.responses import JSONResponse

            response = JSONResponse(
                {"error": "unauthorized", "message": "a valid bearer token is required"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="prism"'},
            )
            await response(scope, receive, send)
            return
        await self.app({**scope, PRINCIPAL_SCOPE_KEY: found}, receive, send)


def http_app(
    server: Server[Service],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    tokens: Sequence[str] = (),
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
) -> ASGIApp:
    """The ASGI app that serves ``server`` over streamable HTTP at ``path`` (module docstring).

    Args:
        server: A server from [`prism.mcp.serving.create_mcp_server()`][prism.mcp.serving.create_mcp_server].
        host: The address it will listen on (decides the loopback rules).
        port: The port it will listen on.
        path: The MCP endpoint.
        tokens: Bearer tokens; when given, every request needs one.
        allowed_hosts: Extra ``Host`` values (``name`` or ``name:port``; ``name:*`` any port).
        allowed_origins: Extra ``Origin`` values (``https://name``).

    Returns:
        A Starlette application (its lifespan runs the MCP session manager and the service).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — see ``check_http_options()`` (TLS aside), or
            ``server`` was not made by ``create_mcp_server``.
    """
    from starlette.applications import Starlette
    from starlette.routing import Mount

    service = service_of(server)
    check_http_options(host, tokens=tokens, allowed_hosts=allowed_hosts, tls=True)
    inner = server.streamable_http_app(
        streamable_http_path=path,
        transport_security=_security(host, port, allowed_hosts, allowed_origins),
        host=host,
    )
    manager = server.session_manager

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        async with manager.run():
            try:
                yield
            finally:
                service.begin_shutdown()  # the calls the manager cancels next are not aborted
                await service.shutdown()

    app = Starlette(routes=[Mount("/", app=inner)], lifespan=lifespan)
    return _BearerAuth(app, tokens) if tokens else app


async def serve_http(
    server: Server[Service],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    tokens: Sequence[str] = (),
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    ready: Callable[[str], object] | None = None,
) -> bool:
    """Serve ``server`` over streamable HTTP with uvicorn until SIGINT or SIGTERM.

    ``server``, ``host``, ``port``, ``path``, ``tokens``, ``allowed_hosts`` and
    ``allowed_origins`` are those of [`http_app()`][prism.mcp.serving._http.http_app].

    Args:
        ssl_certfile: A PEM certificate: serve HTTPS (with ``ssl_keyfile``).
        ssl_keyfile: The certificate's private key.
        ready: Called with the endpoint URL once the server listens.

    Returns:
        ``True`` when every run ended at shutdown (``False``: some were left going).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — see ``check_http_options()``.
    """
    import uvicorn

    tls = bool(ssl_certfile and ssl_keyfile)
    for warning in check_http_options(host, tokens=tokens, allowed_hosts=allowed_hosts, tls=tls):
        _log.warning("%s", warning)
    app = http_app(
        server,
        host=host,
        port=port,
        path=path,
        tokens=tokens,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
    )
    service = service_of(server)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=max(1, int(service.stop_wait_s)),
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
    )

    class Runner(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            service.begin_shutdown()  # from here on a cancelled call is not a client's cancel
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # as uvicorn's, without raising the signal again afterwards: the shutdown is ours
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            signals = (signal.SIGINT, signal.SIGTERM)
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in signals}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    runner = Runner(config)

    async def announce() -> None:
        while not runner.started:
            if runner.should_exit:
                return
            await asyncio.sleep(0.02)
        if ready is not None:
            shown = f"[{host}]" if ":" in host else host
            ready(f"{'https' if tls else 'http'}://{shown}:{port}{path}")

    watcher = asyncio.create_task(announce())
    try:
        await runner.serve()
    finally:
        watcher.cancel()
    return service.ended
