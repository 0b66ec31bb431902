"""A worker process for the durable delegation test (issue 16); run as a script, not collected.

Usage: ``python _delegation_worker.py STORE_URL SCHEMA|- DIR start SESSION`` or
``python _delegation_worker.py STORE_URL SCHEMA|- DIR approve RUN_ID``.

Both phases build the same two agents over the store (so fingerprints match): ``lead``, a durable
agent with a plain tool ``note`` and the agent tool ``clerk``; ``clerk``, without run state of its
own (it inherits the lead's), with a plain tool ``lookup`` and a tool ``pay`` that needs approval.
Every tool appends ``<tool> <pid>`` to ``DIR/effects.log``; every provider request appends
``<agent> t<turn> <pid>`` to ``DIR/turns.log`` (the turn is the number of assistant messages of
that agent's history + 1, so any process serves the right turn).

``start`` runs the lead on a new session and prints the outcome; ``approve`` loads the lead's
stored envelope, approves every pending decision it lists (the clerk's, tagged ``subagent``) and
resumes the lead with ``resume_agent_run``; it prints the outcome. An outcome is one JSON line:
``{"status", "run_id", "pending": [{"approval_id", "tool_name", "subagent"}], "text"}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.runtime.agent import Agent, create_agent
from prism.runtime.durable import (
    AgentRunInterruption,
    RunStateOptions,
    load_agent_run_state,
    resume_agent_run,
)
from prism.stores import open_store
from prism.types import (
    ModelConfig,
    ProviderEvent,
    ProviderRequest,
    RunResult,
    ToolDefinition,
    message_text,
)

MODEL = ModelConfig(provider="mock", model="delegation")
SCRIPTS: dict[str, tuple[tuple[ProviderEvent, ...], ...]] = {
    "lead": (
        (
            provider_tool_call("l1", "note", {"text": "asked the clerk"}),
            provider_tool_call("l2", "clerk", {"input": "Pay invoice 7."}),
            provider_done(),
        ),
        (provider_text_delta("The clerk paid invoice 7."), provider_done()),
    ),
    "clerk": (
        (
            provider_tool_call("k1", "lookup", {"invoice": 7}),
            provider_tool_call("k2", "pay", {"invoice": 7}),
            provider_done(),
        ),
        (provider_text_delta("Invoice 7 is paid."), provider_done()),
    ),
}


def append_line(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


class ScriptedProvider:
    """Serves turn n of an agent's script, n = assistant messages in the request + 1."""

    id = "mock"

    def __init__(self, agent: str, log: Path) -> None:
        self.agent = agent
        self.log = log

    def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        turn = sum(1 for m in request.messages if m.role == "assistant") + 1
        append_line(self.log, f"{self.agent} t{turn} {os.getpid()}")
        return self._stream(SCRIPTS[self.agent][turn - 1])

    async def _stream(self, events: tuple[ProviderEvent, ...]) -> AsyncIterator[ProviderEvent]:
        for event in events:
            yield event


def build_lead(store: Any, directory: Path) -> Agent:
    effects = directory / "effects.log"

    def tool(name: str, **options: Any) -> ToolDefinition:
        def execute(arguments: dict[str, Any], context: Any) -> Any:
            append_line(effects, f"{name} {os.getpid()}")
            return {name: "done"}

        return ToolDefinition(name=name, execute=execute, **options)

    clerk = create_agent(
        name="clerk",
        model=MODEL,
        provider=ScriptedProvider("clerk", directory / "turns.log"),
        tools=[tool("lookup"), tool("pay", needs_approval=True)],
    )
    return create_agent(
        name="lead",
        model=MODEL,
        provider=ScriptedProvider("lead", directory / "turns.log"),
        tools=[tool("note"), clerk.as_tool(description="The clerk pays invoices.")],
        store=store,
        run_state=RunStateOptions(store, "delegation-v1", checkpoint_policy="every-turn"),
    )


def outcome(result: RunResult) -> dict[str, Any]:
    pending = [] if result.interruption is None else result.interruption.pending_decisions
    last = result.messages[-1] if result.messages else None
    return {
        "status": result.status,
        "run_id": result.run_id,
        "pending": [
            {"approval_id": p.approval_id, "tool_name": p.tool_name, "subagent": p.subagent}
            for p in pending
        ],
        "text": None if last is None else message_text(last),
    }


async def main() -> None:
    url, schema, directory, mode, key = sys.argv[1:6]
    options: dict[str, Any] = {} if schema == "-" else {"schema": schema, "max_size": 2}
    store = await open_store(url, **options)
    try:
        lead = build_lead(store, Path(directory))
        if mode == "start":
            result = await lead.create_session(key).run("Please pay invoice 7.")
        else:
            loaded = await load_agent_run_state(store, run_id=key)
            interruption = AgentRunInterruption.from_dict(loaded.state["interruption"])
            decisions = [
                {"approval_id": p.approval_id, "outcome": "allow_once"}
                for p in interruption.pending_decisions
            ]
            result = await resume_agent_run(lead, key, decisions=decisions)
        print(json.dumps(outcome(result)), flush=True)
    finally:
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main())
