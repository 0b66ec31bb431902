"""What keeps the inspector private to its user: one pure ASGI middleware and its policy.

[`SecurityMiddleware`][prism.serve._security.SecurityMiddleware] wraps the whole application and, for every HTTP request, in order:

1. checks the ``Host`` header against an allow-list (loopback names always; others only when
   the host named them) — a page on another site that rebinds its DNS name to 127.0.0.1 still
   sends its own name and is refused (400);
2. refuses a client that is not on this machine when no token is set (403): the app answers only
   loopback clients unless it has a token, wherever it is bound;
3. with a token, lets a request through only with the session cookie the token was exchanged
   for at ``/login`` (``HttpOnly``, ``SameSite=Strict``; an ``EventSource`` cannot send headers)
   or an ``Authorization: Bearer <token>`` header, both compared in constant time; an HTML page
   without it redirects to ``/login``, anything else is 401;
4. refuses a state-changing request that is not a ``POST`` (405) and a ``POST`` whose
   ``Origin`` is not this origin (403) — a browser's own form posts carry ``Origin: null``
   under ``no-referrer``, so that (or no ``Origin``) passes only with
   ``Sec-Fetch-Site: same-origin``; the route then checks its CSRF token
   ([`SecurityPolicy.csrf_ok()`][prism.serve._security.SecurityPolicy.csrf_ok]);
5. adds the security headers to every response: a Content-Security-Policy without inline
   script or style (``script-src 'self'``), ``frame-ancestors 'none'``,
   ``Referrer-Policy: no-referrer``, ``X-Content-Type-Options: nosniff``, and ``no-store``
   caching of everything but the static files.

The token never appears in a URL, a page or a log line: ``/login`` takes it in a ``POST`` body,
and the cookie holds an HMAC of it, not the token.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from prism.errors import PrismConfigError

__all__ = [
    "COOKIE_NAME",
    "LOOPBACK_HOSTS",
    "SecurityMiddleware",
    "SecurityPolicy",
    "is_loopback_host",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE_NAME: Final = "prism_serve_session"
"""The session cookie a token is exchanged for."""
LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})
"""Host names every app accepts in the ``Host`` header."""
MIN_TOKEN_LENGTH: Final = 16
"""Shortest token accepted (``secrets.token_urlsafe()`` gives 43 characters)."""

CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
"""No inline script or style anywhere: every script and stylesheet is a static file."""

_HEADERS: Final = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
)
_PUBLIC_PREFIXES: Final = ("/static/", "/login")
_SAFE_METHODS: Final = frozenset({"GET", "HEAD"})


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this machine:
    ``localhost`` or an address in 127.0.0.0/8 or ``::1``."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """The host name of a ``Host`` header value, without the port, lower-case."""
    value = header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value


@dataclass(frozen=True, slots=True)
class SecurityPolicy:
    """The checks [`SecurityMiddleware`][prism.serve._security.SecurityMiddleware] applies; build it with [`build()`][prism.serve._security.SecurityPolicy.build]."""

    allowed_hosts: frozenset[str]
    """Host names accepted in the ``Host`` header (lower-case, no port)."""
    token: str | None
    """The access token, or ``None`` (then only loopback clients are answered)."""
    session_value: str | None
    """The session cookie's value: an HMAC of the token (``None`` without a token)."""
    csrf_token: str
    """The token every form and ``fetch`` POST carries (random per application)."""

    @classmethod
    def build(cls, *, token: str | None, allowed_hosts: Iterable[str] | None) -> SecurityPolicy:
        """Check the options and build the policy.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — ``token`` is not a string of at least 16
                characters without spaces; ``allowed_hosts`` is a string or holds a non-string,
                an empty name or ``*``; or it names a host beyond loopback while ``token`` is
                ``None``.
        """
        if token is not None:
            if not isinstance(token, str):
                raise PrismConfigError(f"token must be a str or None, got {type(token).__name__}")
            if len(token) < MIN_TOKEN_LENGTH or any(c.isspace() for c in token):
                raise PrismConfigError(
                    f"token must be at least {MIN_TOKEN_LENGTH} characters without spaces "
                    '(e.g. python -c "import secrets; print(secrets.token_urlsafe())")'
                )
        hosts = set(LOOPBACK_HOSTS)
        if allowed_hosts is not None:
            if isinstance(allowed_hosts, str):
                raise PrismConfigError("allowed_hosts must be a list of host names, not a str")
            for name in allowed_hosts:
                if not isinstance(name, str) or not name.strip() or "*" in name:
                    raise PrismConfigError(
                        "allowed_hosts must hold host names (no wildcard: the allow-list is the "
                        f"defence against DNS rebinding), got {name!r}"
                    )
                hosts.add(_host_name(name))
        beyond = sorted(h for h in hosts if not is_loopback_host(h))
        if beyond and token is None:
            raise PrismConfigError(
                f"allowed_hosts names a host beyond loopback ({', '.join(beyond)}): set token= "
                "(prism serve --token, or $PRISM_SERVE_TOKEN)"
            )
        session_value = (
            hmac.new(token.encode(), b"prism serve session v1", hashlib.sha256).hexdigest()
            if token is not None
            else None
        )
        return cls(frozenset(hosts), token, session_value, secrets.token_urlsafe(32))

    def token_ok(self, candidate: str) -> bool:
        """Whether ``candidate`` is the token (constant time)."""
        if self.token is None:
            return False
        return hmac.compare_digest(candidate.encode(), self.token.encode())

    def csrf_ok(self, candidate: str | None) -> bool:
        """Whether ``candidate`` is this application's CSRF token (constant time)."""
        if not candidate:
            return False
        return hmac.compare_digest(candidate.encode(), self.csrf_token.encode())

    def authenticated(self, headers: dict[bytes, bytes]) -> bool:
        """Whether a request with these (lower-case) headers carries the session cookie or the
        bearer token; always with no token set."""
        if self.token is None:
            return True
        assert self.session_value is not None
        auth = headers.get(b"authorization", b"").decode("latin-1")
        if auth[:7].lower() == "bearer " and self.token_ok(auth[7:].strip()):
            return True
        for part in headers.get(b"cookie", b"").decode("latin-1").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE_NAME and hmac.compare_digest(
                value.encode(), self.session_value.encode()
            ):
                return True
        return False


class SecurityMiddleware:
    """Pure ASGI middleware applying a [`SecurityPolicy`][prism.serve._security.SecurityPolicy] (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, policy: SecurityPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":  # the app has none; refuse before anything runs
            await send({"type": "websocket.close", "code": 1008})
            return
        policy = self.policy
        headers: dict[bytes, bytes] = {}
        for key, value in scope.get("headers") or ():
            headers.setdefault(bytes(key).lower(), bytes(value))
        path: str = scope.get("path", "/")
        method: str = scope.get("method", "GET").upper()
        host_header = headers.get(b"host", b"").decode("latin-1")
        if _host_name(host_header) not in policy.allowed_hosts:
            await _plain(send, 400, "Invalid Host header.")
            return
        client = scope.get("client")
        if policy.token is None and client is not None and not is_loopback_host(str(client[0])):
            await _plain(
                send,
                403,
                "This inspector answers only this machine: start prism serve with --token to "
                "open it to others.",
            )
            return
        public = path.startswith(_PUBLIC_PREFIXES)
        if not public and not policy.authenticated(headers):
            accept = headers.get(b"accept", b"").decode("latin-1")
            if method in _SAFE_METHODS and "text/html" in accept:
                query = scope.get("query_string", b"").decode("latin-1")
                target = path + ("?" + query if query else "")
                location = "/login?next=" + quote(target, safe="")
                await _send(send, 303, b"", [(b"location", location.encode("latin-1"))])
            else:
                await _plain(send, 401, "Sign in at /login with the token first.")
            return
        if method not in _SAFE_METHODS:
            if method != "POST":
                await _plain(send, 405, "Only GET and POST are served.")
                return
            scheme = scope.get("scheme", "http")
            origin = headers.get(b"origin", b"").decode("latin-1")
            expected = f"{scheme}://{host_header}".lower()
            if origin and origin != "null":
                same = origin.lower() == expected
            else:
                # ``Origin: null`` is what a browser sends for its own form posts under
                # ``Referrer-Policy: no-referrer`` (and what a cross-site page can provoke too):
                # only the browser's fetch metadata, which a page cannot set, tells them apart
                same = headers.get(b"sec-fetch-site", b"") == b"same-origin"
            if not same:
                await _plain(send, 403, "Cross-origin request refused.")
                return
        static = path.startswith("/static/")
        state = {"started": False, "ended": False}

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
                raw = list(message.get("headers") or [])
                present = {bytes(k).lower() for k, _ in raw}
                raw.extend((k, v) for k, v in _HEADERS if k not in present)
                if b"cache-control" not in present:
                    raw.append((b"cache-control", b"no-cache" if static else b"no-store"))
                message["headers"] = raw
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                state["ended"] = True
            await send(message)

        await self.app(scope, receive, send_with_headers)
        if state["started"] and not state["ended"]:
            # an event stream cut short by the server's shutdown: end the response cleanly
            try:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except Exception:  # the client is gone
                pass


async def _plain(send: Send, status: int, text: str) -> None:
    await _send(
        send, status, text.encode() + b"\n", [(b"content-type", b"text/plain; charset=utf-8")]
    )


async def _send(send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]]) -> None:
    headers = [*extra, *_HEADERS, (b"cache-control", b"no-store")]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
