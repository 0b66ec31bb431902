"""Real MCP servers for the tests: the SDK server in ``mcp_test_server.py`` over stdio (a
subprocess per connection) and over streamable HTTP (a subprocess on a free 127.0.0.1 port,
started by the fixture and stopped by its PID)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from prism.mcp import MCPServerHTTP, MCPServerStdio

SERVER = str(Path(__file__).with_name("mcp_test_server.py"))


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """The file the server's ``slow`` tool writes ``started``/``cancelled`` to."""
    return tmp_path / "marker.txt"


@pytest.fixture
def stdio_server(marker: Path) -> Callable[..., MCPServerStdio]:
    """``stdio_server(**options)``: an ``MCPServerStdio`` running the test server."""

    def make(*, env: dict[str, str] | None = None, **options: Any) -> MCPServerStdio:
        return MCPServerStdio(
            sys.executable,
            [SERVER],
            env={"MCP_TEST_MARKER": str(marker), **(env or {})},
            **options,
        )

    return make


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, process: subprocess.Popen[bytes], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"test MCP server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("test MCP server did not listen in time")


class HttpServer:
    """The HTTP test server process (``env`` adds to its environment)."""

    def __init__(self, marker: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.env = {
            **os.environ,
            "MCP_TEST_MARKER": str(marker),
            "MCP_TEST_TOKEN": "tok-http",
            **(env or {}),
        }
        self.process = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [sys.executable, SERVER, "--http", str(self.port)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, process)
        return process

    def client(self, **options: Any) -> MCPServerHTTP:
        return MCPServerHTTP(self.url, **options)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def restart(self) -> None:
        """Kill the server (its sessions are lost) and start it again on the same port."""
        self.kill()
        self.process = self._start()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


@pytest.fixture
def http_server(marker: Path) -> Iterator[HttpServer]:
    server = HttpServer(marker)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def make_http_server(marker: Path) -> Iterator[Callable[..., HttpServer]]:
    """``make_http_server(env={...})``: an HTTP test server with extra environment."""
    started: list[HttpServer] = []

    def make(env: dict[str, str] | None = None) -> HttpServer:
        server = HttpServer(marker, env)
        started.append(server)
        return server

    try:
        yield make
    finally:
        for server in started:
            server.stop()
