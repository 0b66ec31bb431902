"""Whether the model's server can be reached, checked before a run stores anything.

A run stores the user's prompt (and creates the session) before it calls the provider, so a run
against a server that is down would leave a session holding only a prompt and a failed run.
``prism run`` therefore first opens one TCP connection to the host and port of the model's
endpoint (``--model openai:…``, ``anthropic:…``, ``openai-compatible:…@URL``); when that fails
it reports the failure and stores nothing. The embedded model has no endpoint and is not checked.

The check is skipped when a proxy is configured (``HTTPS_PROXY``, ``HTTP_PROXY``,
``ALL_PROXY``, any case): the provider's HTTP client then connects through the proxy, not
directly, and a direct connection proves nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

__all__ = ["CONNECT_TIMEOUT_S", "Unreachable", "check_endpoint"]

CONNECT_TIMEOUT_S: Final = 10.0
"""Seconds to wait for the TCP connection (the provider's own connect timeout)."""

_PROXY_VARIABLES: Final = ("https_proxy", "http_proxy", "all_proxy")
_DEFAULT_PORTS: Final = {"https": 443, "http": 80}


@dataclass(frozen=True, slots=True)
class Unreachable:
    """Why the endpoint cannot be reached."""

    code: str
    """``ECONNREFUSED``, ``ENOTFOUND``, ``ETIMEDOUT`` or another ``errno`` name."""
    reason: str
    """What the operating system said, e.g. ``connection refused``."""


def _proxied(environ: Mapping[str, str]) -> bool:
    names = {name.lower() for name, value in environ.items() if value.strip()}
    return any(name in names for name in _PROXY_VARIABLES)


async def check_endpoint(
    endpoint: str | None,
    environ: Mapping[str, str],
    *,
    timeout_s: float = CONNECT_TIMEOUT_S,
) -> Unreachable | None:
    """Open and close one TCP connection to ``endpoint``'s host and port.

    Args:
        endpoint: The model's base URL (``None``: nothing to check).
        environ: The environment (proxy variables).
        timeout_s: Connect timeout in seconds.

    Returns:
        ``None`` when the connection opened, or when nothing can be checked (no endpoint, not an
        http(s) URL, a proxy configured); otherwise why it failed.
    """
    if endpoint is None or _proxied(environ):
        return None
    parts = urlsplit(endpoint)
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:  # a port out of range: the provider reports it
        return None
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except TimeoutError:
        return Unreachable("ETIMEDOUT", f"no connection within {timeout_s:g} s")
    except socket.gaierror as exc:
        return Unreachable("ENOTFOUND", f"host {host!r} not found ({exc.strerror or exc})")
    except OSError as exc:
        if exc.errno:
            code = errno.errorcode.get(exc.errno, "ECONNREFUSED")
            return Unreachable(code, os.strerror(exc.errno).lower())
        # several addresses failed (e.g. IPv6 and IPv4 of "localhost"): no single errno
        text = str(exc) or type(exc).__name__
        return Unreachable("ECONNREFUSED" if "refused" in text.lower() else "ECONNRESET", text)
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None
