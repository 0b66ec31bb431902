"""The cost of one more run on a session with a long stored history, in CPU milliseconds per run.

A chat keeps one session and makes one run per user message, so every run starts from the
whole stored branch. This benchmark grows a session to ``H`` stored entries, then times further
runs of it: each run is a one-turn text answer (a user message and an assistant message, two
more entries). Two kinds of history:

* ``text`` — every earlier run was a text exchange (user and assistant text, ~150 bytes each);
* ``tools`` — every earlier run also made one tool call with a ~200-byte JSON argument and a
  ~1 KB JSON result (four entries a run: the user message, the call, the result, the answer).

And two ways of holding the session:

* ``same`` — one session object for every run (a chat kept in one process);
* ``reopened`` — a new session object for the same session id before every run (a web server
  that builds the session per request); its first run looks up the leaf and continues the
  branch the agent kept for that id, or reads it when the agent kept none.

Stores (``--stores``): ``memory`` (the default in-memory store) and ``sqlite`` (``SqliteStore`` on
a temporary file). Reported per configuration and ``H``: the median over ``--runs`` timed runs
of process CPU time per run (all threads: the SQLite worker thread counts), in ms.

Usage::

    python benchmarks/bench_session_history.py [--entries 200 1000 3000] [--runs 9]
        [--stores memory sqlite] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from _common import emit_json, machine
from _prism_api import api

P = api(
    "create_agent", "tool", "Usage", "provider_done", "provider_text_delta", "provider_tool_call"
)

QUESTION = "Where is the parcel for order 1042? It was due on Monday and nothing arrived. " * 2
ANSWER = "The parcel left the depot this morning; the carrier expects to deliver it today. " * 2
RESULT = {
    "rows": [
        {"id": f"EV-{i:03d}", "status": "in transit", "at": f"2024-06-{10 + i:02d}T09:00:00Z"}
        for i in range(12)
    ],
    "next_page": None,
}


@P.tool
async def track(order: str, carrier: str, detail: str) -> dict[str, Any]:
    """Look up the parcel events of an order."""
    return {**RESULT, "order": order}


class ChatProvider:
    """Answers in text, or first calls ``track`` once when the request ends with a user message
    and ``tools`` is on."""

    id = "bench"

    def __init__(self) -> None:
        self.tools = False

    def generate(self, request: Any) -> Any:
        last = request.messages[-1] if request.messages else None
        call = self.tools and last is not None and last.role == "user"
        return self._replay(call)

    async def _replay(self, call: bool) -> Any:
        if call:
            arguments = {"order": "1042", "carrier": "DHL", "detail": "x" * 150}
            yield P.provider_tool_call(f"call_{time.monotonic_ns()}", "track", arguments)
        else:
            yield P.provider_text_delta(ANSWER)
        yield P.provider_done(P.Usage(input_tokens=1, output_tokens=1))


async def measure(store_kind: str, history: str, held: str, sizes: list[int], runs: int) -> Any:
    tmp: tempfile.TemporaryDirectory[str] | None = None
    store: Any = None
    if store_kind == "sqlite":
        tmp = tempfile.TemporaryDirectory(prefix="prism-bench-")
        store = api("SqliteStore").SqliteStore(os.path.join(tmp.name, "history.db"))
        await store.open()
    else:
        store = api("MemorySessionStore").MemorySessionStore()
    provider = ChatProvider()
    agent = P.create_agent(
        model={"provider": "bench", "model": "history"},
        provider=provider,
        tools=[track],
        store=store,
    )
    session = agent.create_session("history-1")
    per_run = 4 if history == "tools" else 2
    stored = 0
    out: dict[str, float] = {}
    try:
        for target in sizes:
            provider.tools = history == "tools"
            while stored < target:
                await session.run(QUESTION)
                stored += per_run
            provider.tools = False
            samples = []
            for _ in range(runs):
                if held == "reopened":
                    session = agent.create_session("history-1")
                gc.collect()
                cpu0 = time.process_time()
                result = await session.run(QUESTION)
                samples.append(time.process_time() - cpu0)
                if result.status != "succeeded":
                    raise RuntimeError(f"run failed: {result.status}")
                stored += 2
            out[str(target)] = statistics.median(samples) * 1e3
    finally:
        if store_kind == "sqlite":
            await store.aclose()
        if tmp is not None:
            tmp.cleanup()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--entries", type=int, nargs="+", default=[200, 1000, 3000])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--stores", nargs="+", default=["memory", "sqlite"])
    parser.add_argument("--history", nargs="+", default=["text", "tools"])
    parser.add_argument("--held", nargs="+", default=["same", "reopened"])
    parser.add_argument("--json", default=None, help="write the results here ('-': stdout)")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for store in args.stores:
        for history in args.history:
            for held in args.held:
                key = f"{store}/{history}/{held}"
                results[key] = asyncio.run(measure(store, history, held, args.entries, args.runs))
                if args.json != "-":
                    row = "  ".join(f"H={h}: {ms:8.3f} ms" for h, ms in results[key].items())
                    print(f"{key:24s} {row}", flush=True)
    if args.json:
        payload = {"machine": machine(), "unit": "ms CPU per run", "results": results}
        emit_json(payload, args.json)


if __name__ == "__main__":
    sys.exit(main())
