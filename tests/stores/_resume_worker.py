"""A worker process that resumes suspended durable runs (DB-11); run as a script, not collected.

Usage: ``python _resume_worker.py STORE_URL SCHEMA|- EFFECTS_FILE``.

The worker opens the store, prints ``ready``, then handles one ``go RUN_ID VERSION BARRIER`` line
at a time: it builds the same agent as :func:`build_agent` (so fingerprints match) and calls
``resume_agent_run(agent, RUN_ID, decision="approve", expected_version=VERSION)``. With
``BARRIER=1`` its first checkpoint write (the claim, DUR-19) prints ``claiming`` and waits for a
``claim`` line first, so the test can let every worker load and check the envelope before any of
them writes: then only the store's compare-and-set decides. Each round ends with one outcome line:
``{"ok": true, "status": ...}`` or ``{"ok": false, "code": ..., "error": <class name>}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from prism.errors import PrismError
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import Agent, create_agent
from prism.runtime.durable import RunStateOptions, resume_agent_run
from prism.stores import open_store
from prism.types import ModelConfig, ToolDefinition

MODEL = ModelConfig(provider="mock", model="race")
FIRST_TURN = [provider_tool_call("call_pay", "pay", {"amount": 5}), provider_done()]
"""The turn that suspends the run on an approval."""
LAST_TURN = [provider_text_delta("paid"), provider_done()]
"""The turn the resumed leg gets."""


def build_agent(store: Any, checkpoints: Any, effects: Path, turns: list[Any]) -> Agent:
    """The agent every process builds; ``pay`` appends one line to ``effects`` per run."""

    def pay(arguments: dict[str, Any], context: Any) -> Any:
        fd = os.open(effects, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            os.write(fd, f"{context.tool_call_id} {os.getpid()}\n".encode())
        finally:
            os.close(fd)
        return {"paid": arguments["amount"]}

    return create_agent(
        id="race-desk",
        model=MODEL,
        provider=create_mock_provider(turns=turns),
        tools=[
            ToolDefinition(
                name="pay",
                execute=pay,
                parameters={"type": "object", "properties": {"amount": {"type": "integer"}}},
            )
        ],
        store=store,
        run_state=RunStateOptions(checkpoints, "race-v1", interrupt_before_tool=True),
    )


class _Barrier:
    """Checkpoint store wrapper: the first save waits for the test's ``claim`` line."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.waited = False

    async def save_checkpoint(self, **kwargs: Any) -> Any:
        if not self.waited:
            self.waited = True
            print("claiming", flush=True)
            line = await asyncio.to_thread(sys.stdin.readline)
            assert line.strip() == "claim", line
        return await self.inner.save_checkpoint(**kwargs)

    async def load_checkpoint(self, **kwargs: Any) -> Any:
        return await self.inner.load_checkpoint(**kwargs)


async def main() -> None:
    url, schema, effects = sys.argv[1:4]
    options: dict[str, Any] = {} if schema == "-" else {"schema": schema, "max_size": 2}
    store = await open_store(url, **options)
    try:
        print("ready", flush=True)
        while True:
            line = await asyncio.to_thread(sys.stdin.readline)
            if not line:
                return
            command, run_id, version, barrier = line.split()
            assert command == "go", line
            checkpoints = _Barrier(store) if barrier == "1" else store
            agent = build_agent(store, checkpoints, Path(effects), [LAST_TURN])
            try:
                result = await resume_agent_run(
                    agent, run_id, decision="approve", expected_version=int(version)
                )
                outcome: dict[str, Any] = {"ok": True, "status": result.status}
            except PrismError as exc:
                outcome = {"ok": False, "code": exc.code, "error": type(exc).__name__}
            print(json.dumps(outcome), flush=True)
    finally:
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main())
