"""``prism mcp serve`` for the tests: a workspace holding the registry module and a SQLite store,
the server as a real subprocess (stdio through the official client's ``stdio_client``, streamable
HTTP on a free 127.0.0.1 port), and the official ``mcp`` client driving it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REGISTRY_SOURCE = Path(__file__).with_name("serve_agents.py")
GUARD_S = 120.0
"""A hang guard only: nothing asserts on time."""


@dataclass
class Workspace:
    """A directory with the registry module, a store, the side-effect ledger and hold file."""

    dir: Path
    store_url: str
    ledger: Path
    hold: Path
    logs: list[Path] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
            "MCP_SERVE_LEDGER": str(self.ledger),
            "MCP_SERVE_HOLD": str(self.hold),
            "XDG_DATA_HOME": str(self.dir / "data"),
            "HOME": str(self.dir),
            **extra,
        }

    def argv(self, *extra: str) -> list[str]:
        return [
            "-m",
            "prism",
            "mcp",
            "serve",
            "--agents",
            "serve_agents:REGISTRY",
            "--store",
            self.store_url,
            "--lease",
            "2",
            *extra,
        ]

    def entries(self) -> list[dict[str, Any]]:
        if not self.ledger.exists():
            return []
        return [json.loads(line) for line in self.ledger.read_text("utf-8").splitlines()]

    def log(self) -> Path:
        path = self.dir / f"server-{len(self.logs)}.log"
        self.logs.append(path)
        return path

    def stderr(self) -> str:
        return "\n".join(p.read_text("utf-8", "replace") for p in self.logs if p.exists())


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    shutil.copy(REGISTRY_SOURCE, tmp_path / "serve_agents.py")
    return Workspace(
        dir=tmp_path,
        store_url=f"sqlite:///{tmp_path / 'store.db'}",
        ledger=tmp_path / "ledger.jsonl",
        hold=tmp_path / "hold",
    )


class Progress:
    """A ``progress_callback`` that keeps what it is sent."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None]] = []
        self.changed = asyncio.Event()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))
        self.changed.set()

    @property
    def messages(self) -> list[str]:
        return [m or "" for _, _, m in self.seen]

    async def wait_for(self, text: str) -> str:
        async def find() -> str:
            while True:
                for message in self.messages:
                    if text in message:
                        return message
                self.changed.clear()
                await self.changed.wait()

        return await asyncio.wait_for(find(), GUARD_S)


@asynccontextmanager
async def stdio_session(
    workspace: Workspace, *extra: str, elicitation: Any = None, **env: str
) -> AsyncIterator[ClientSession]:
    """A ``ClientSession`` with ``prism mcp serve`` started over stdio by the official client."""
    params = StdioServerParameters(
        command=sys.executable,
        args=workspace.argv(*extra),
        env=workspace.env(**env),
        cwd=str(workspace.dir),
    )
    with workspace.log().open("w", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, elicitation_callback=elicitation) as session:
                await asyncio.wait_for(session.initialize(), GUARD_S)
                yield session


def text_of(result: types.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return first.text


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class HttpServer:
    """``prism mcp serve --http`` as a subprocess on a free 127.0.0.1 port."""

    def __init__(self, workspace: Workspace, *extra: str, **env: str) -> None:
        self.workspace = workspace
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = workspace.log()
        with self.log.open("w", encoding="utf-8") as errlog:
            self.process = subprocess.Popen(
                [sys.executable, *workspace.argv("--http", "--port", str(self.port), *extra)],
                env={**os.environ, **workspace.env(**env)},
                cwd=workspace.dir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errlog,
            )
        deadline = time.monotonic() + GUARD_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log.read_text('utf-8')}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the server did not listen in time")

    def stop(self) -> int:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        assert self.process.stdout is not None
        self.process.stdout.close()
        return self.process.returncode


@pytest.fixture
def http_servers(workspace: Workspace) -> Iterator[list[HttpServer]]:
    started: list[HttpServer] = []
    try:
        yield started
    finally:
        for server in started:
            server.stop()


@asynccontextmanager
async def http_session(
    url: str, *, token: str | None = None, elicitation: Any = None
) -> AsyncIterator[ClientSession]:
    """A ``ClientSession`` over streamable HTTP (with a bearer token when given)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(
        headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)
    ) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, elicitation_callback=elicitation) as session:
                await asyncio.wait_for(session.initialize(), GUARD_S)
                yield session
