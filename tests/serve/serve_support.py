"""What the inspector's tests share besides their fixtures: the origin their clients use and an
httpx client of the ASGI app that connects from a given address."""

from __future__ import annotations

from typing import Any

import httpx

BASE = "http://127.0.0.1:8765"
"""The origin the tests' clients use (a loopback Host the allow-list accepts)."""


def client_for(app: Any, *, client: tuple[str, int] = ("127.0.0.1", 50123)) -> httpx.AsyncClient:
    """An httpx client of ``app`` that connects from ``client`` to :data:`BASE`."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=client), base_url=BASE)
