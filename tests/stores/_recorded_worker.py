"""A process that applies the decisions another process recorded; run as a script, not collected.

Usage: ``python _recorded_worker.py STORE_URL SCHEMA|- EFFECTS_FILE RUN_ID [lead]``.

It opens the store, builds the same agent as :func:`build_agent` (or, with ``lead``, the agent
tree of :func:`build_lead`) so fingerprints match, calls ``resume_agent_run(agent, RUN_ID,
decisions="recorded")`` and prints one outcome line: ``{"ok": true, "status": ...}`` or
``{"ok": false, "code": ..., "error": <class name>, "message": ...}``.
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

MODEL = ModelConfig(provider="mock", model="recorded")
PAY_TURN = [provider_tool_call("call_pay", "pay", {"amount": 5}), provider_done()]
"""The turn that suspends the run on an approval."""
LAST_TURN = [provider_text_delta("paid"), provider_done()]
"""The turn a resumed leg gets."""


def pay_tool(effects: Path) -> ToolDefinition:
    """``pay``: appends one line to ``effects`` per run (call id, amount, process id)."""

    def pay(arguments: dict[str, Any], context: Any) -> Any:
        fd = os.open(effects, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            os.write(fd, f"{context.tool_call_id} {arguments['amount']} {os.getpid()}\n".encode())
        finally:
            os.close(fd)
        return {"paid": arguments["amount"]}

    return ToolDefinition(
        name="pay",
        description="Pay an amount.",
        execute=pay,
        needs_approval=True,
        parameters={
            "type": "object",
            "properties": {"amount": {"type": "integer", "minimum": 1}},
            "required": ["amount"],
            "additionalProperties": False,
        },
    )


def build_agent(store: Any, effects: Path, turns: list[Any], checkpoints: Any = None) -> Agent:
    """The desk agent: one gated tool, every-turn checkpoints in ``store``."""
    return create_agent(
        id="desk",
        model=MODEL,
        provider=create_mock_provider(turns=turns),
        tools=[pay_tool(effects)],
        store=store,
        run_state=RunStateOptions(
            store if checkpoints is None else checkpoints, "desk-v1", checkpoint_policy="every-turn"
        ),
    )


def build_lead(store: Any, effects: Path, lead_turns: list[Any], child_turns: list[Any]) -> Agent:
    """lead → payer (an agent tool) → pay (gated): the child's approval is answered on the lead."""
    payer = create_agent(
        name="payer",
        model=MODEL,
        provider=create_mock_provider(turns=child_turns),
        tools=[pay_tool(effects)],
        run_state=RunStateOptions(store, "payer-v1"),
    )
    return create_agent(
        name="lead",
        model=MODEL,
        provider=create_mock_provider(turns=lead_turns),
        tools=[payer.as_tool()],
        store=store,
        run_state=RunStateOptions(store, "lead-v1"),
    )


async def main() -> None:
    url, schema, effects, run_id, *rest = sys.argv[1:]
    options: dict[str, Any] = {} if schema == "-" else {"schema": schema, "max_size": 2}
    store = await open_store(url, **options)
    try:
        if rest == ["lead"]:
            agent = build_lead(store, Path(effects), [LAST_TURN], [LAST_TURN])
        else:
            agent = build_agent(store, Path(effects), [LAST_TURN])
        try:
            result = await resume_agent_run(agent, run_id, decisions="recorded")
            outcome: dict[str, Any] = {"ok": True, "status": result.status}
        except PrismError as exc:
            outcome = {
                "ok": False, "code": exc.code, "error": type(exc).__name__, "message": str(exc)
            }
        print(json.dumps(outcome), flush=True)
    finally:
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main())
