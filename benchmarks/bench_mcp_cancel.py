"""How long from an MCP client's cancel to the aborted run in the store.

``prism mcp serve`` runs over stdio (a subprocess started by the official ``mcp`` client), then
over streamable HTTP on 127.0.0.1, with a SQLite store and one agent whose model streams a word and then waits until its run is aborted.
Each sample calls the agent, waits for the ``turn 1`` progress notification, cancels the call
(the client sends ``notifications/cancelled``) and polls the store every millisecond until the
run's stored status is ``aborted``. The time from the cancel to that read is the sample; it
includes the notification's trip, the abort, the leg's cleanup and the envelope's write, and up
to one polling interval.

    PYTHONPATH=src python benchmarks/bench_mcp_cancel.py [--samples 30]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from prism.runtime.durable import load_agent_run_state
from prism.stores import open_store

REGISTRY = """
import asyncio
import prism
from prism.providers import provider_done, provider_text_delta


class Waits:
    id = "waits"

    async def generate(self, request):
        yield provider_text_delta("thinking")
        while True:
            request.signal.throw_if_aborted()
            await request.signal.wait()


def slow(store):
    return prism.create_agent(
        id="slow", model={"provider": "bench", "model": "waits"}, provider=Waits(), store=store,
        run_state=prism.RunStateOptions(store, "v1", checkpoint_policy="every-turn"),
    )


REGISTRY = {"slow": slow}
"""


async def _samples(session: ClientSession, store: Any, samples: int) -> list[float]:
    latencies: list[float] = []
    for _ in range(samples + 2):
        started = asyncio.get_running_loop().create_future()

        async def progress(
            value: float,
            total: float | None,
            message: str | None,
            started: asyncio.Future[str] = started,
        ) -> None:
            if message and message.startswith("run ") and not started.done():
                started.set_result(message.split()[1])

        call = asyncio.ensure_future(
            session.call_tool("slow", {"input": "go"}, progress_callback=progress)
        )
        run_id = await started
        await asyncio.sleep(0.05)  # the run is in its first turn
        begin = time.perf_counter()
        call.cancel()
        while True:
            loaded = await load_agent_run_state(store, run_id=run_id)
            if loaded.state["status"] == "aborted":
                break
            await asyncio.sleep(0.001)
        latencies.append((time.perf_counter() - begin) * 1000)
        with contextlib.suppress(asyncio.CancelledError):
            await call
    return sorted(latencies[2:])  # the first two warm the server up


def _report(transport: str, measured: list[float]) -> None:
    p95 = measured[max(0, round(0.95 * len(measured)) - 1)]
    print(
        f"cancel -> stored 'aborted' over {transport}, {len(measured)} samples: "
        f"median {statistics.median(measured):.1f} ms, p95 {p95:.1f} ms, max {measured[-1]:.1f} ms"
    )


async def main(samples: int) -> None:
    folder = Path(tempfile.mkdtemp())
    (folder / "bench_agents.py").write_text(REGISTRY, encoding="utf-8")
    url = f"sqlite:///{folder / 'store.db'}"
    argv = ["-m", "prism", "mcp", "serve", "--agents", "bench_agents:REGISTRY", "--store", url]
    env = {"PYTHONPATH": ":".join(sys.path)}
    store = await open_store(url)
    with (folder / "server.log").open("w") as errlog:
        params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(folder), env=env)
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                _report("stdio", await _samples(session, store, samples))

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        server = await asyncio.create_subprocess_exec(
            sys.executable,
            *argv,
            "--http",
            "--port",
            str(port),
            cwd=folder,
            env={**os.environ, **env},
            stdin=asyncio.subprocess.DEVNULL,
            stderr=errlog,
        )
        try:
            for _ in range(600):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    await asyncio.sleep(0.05)
            endpoint = f"http://127.0.0.1:{port}/mcp"
            async with streamable_http_client(endpoint) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    _report("streamable HTTP", await _samples(session, store, samples))
        finally:
            server.send_signal(signal.SIGTERM)
            await server.wait()
    await store.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=30)
    asyncio.run(main(parser.parse_args().samples))
