"""The other process of the inspector's browser tests: a program that runs one agent over a store
while ``prism serve`` — another process — shows it.

    python -m _other_process STORE_URL SCENARIO TOOL_LOG [--leave-suspended]

Scenarios (each agent writes its ledger to the store; its provider is stateless, so the same
agent also resumes the run):

* ``live`` — ``lookup`` waits until a line arrives on standard input, then the agent answers;
* ``desk`` — a durable run whose ``pay`` call needs an approval;
* ``lead`` — a durable run whose agent tool ``payer`` calls ``pay``, which needs an approval:
  the sub-agent's decision is the calling run's to take.

A suspended run waits here for a decision recorded by someone else (the inbox of a ``prism
serve`` that does not have the agent records it), then applies it with
``resume_agent_run(agent, run_id, decisions="recorded")`` and runs to the end in this process
— unless ``--leave-suspended``: then this process exits once the run is suspended (a ``prism
serve --agents`` resumes it).

Every tool call that runs appends one JSON line to TOOL_LOG. What happens is printed as JSON
lines: ``{"event": "started", "run_id"}`` (``live``: the tool is running), ``{"event":
"suspended", "run_id", "approval_id"}``, ``{"event": "finished", "run_id", "status", "text"}``.

:data:`REGISTRY` holds the same agents for ``prism serve --agents _other_process:REGISTRY``
(their tool log is ``$SERVE_TEST_TOOL_LOG``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import prism
from prism.providers import ProviderEvent, provider_done, provider_text_delta, provider_tool_call
from prism.runtime.durable import list_decided_approvals, list_pending_decisions, resume_agent_run
from prism.stores import open_store
from prism.types import ProviderRequest, Usage

MODEL = {"provider": "scripted", "model": "steady"}
PAID_TEXT = "Paid 5 EUR."
REFUSED_TEXT = "The payment was not made: it was rejected."
LIVE_TEXT = "Tides follow the moon."
_GUARD_S = 120.0  # how long a suspended run waits for a decision before giving up


class OneCall:
    """Asks for ``name(arguments)`` once per user message; after the tool's answer it says
    what came of it."""

    id = "scripted"

    def __init__(self, call_id: str, name: str, arguments: dict[str, Any], answer: str) -> None:
        self.call = (call_id, name, arguments)
        self.answer = answer

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        roles = [m.role for m in request.messages]
        last_user = max(i for i, role in enumerate(roles) if role == "user")
        tools = [m for m in request.messages[last_user:] if m.role == "tool"]
        if not tools:
            yield provider_tool_call(*self.call)
            yield provider_done(Usage(input_tokens=40, output_tokens=12, cost=0.0006, currency="USD"))
            return
        said = json.dumps(tools[-1].to_dict())
        rejected = "approval_rejected" in said or "rejected" in said.lower()
        text = REFUSED_TEXT if rejected and self.answer == PAID_TEXT else self.answer
        yield provider_text_delta(text)
        yield provider_done(Usage(input_tokens=60, output_tokens=8, cost=0.0008, currency="USD"))


def _log(path: Path, name: str, arguments: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"tool": name, "arguments": arguments, "pid": os.getpid()}) + "\n")


def _pay_tool(log: Path) -> prism.ToolDefinition:
    async def pay(arguments: dict[str, Any], context: prism.ToolExecutionContext) -> Any:
        _log(log, "pay", arguments)
        return {"paid": arguments["amount"], "currency": "EUR"}

    return prism.ToolDefinition(
        name="pay",
        description="Pay an amount in euros.",
        execute=pay,
        needs_approval=True,
        parameters={
            "type": "object",
            "properties": {"amount": {"type": "integer", "minimum": 1}},
            "required": ["amount"],
            "additionalProperties": False,
        },
    )


def desk(store: Any, log: Path | None = None) -> prism.Agent:
    """``pay({"amount": 5})``, gated."""
    log = log or Path(os.environ["SERVE_TEST_TOOL_LOG"])
    return prism.create_agent(
        id="desk",
        model=MODEL,
        provider=OneCall("call_pay", "pay", {"amount": 5}, PAID_TEXT),
        tools=[_pay_tool(log)],
        store=store,
        run_ledger=store,
        run_state=prism.RunStateOptions(store, "desk-v1", checkpoint_policy="every-turn"),
    )


def lead(store: Any, log: Path | None = None) -> prism.Agent:
    """lead → payer (an agent tool) → ``pay({"amount": 5})``, gated."""
    log = log or Path(os.environ["SERVE_TEST_TOOL_LOG"])
    payer = prism.create_agent(
        name="payer",
        model=MODEL,
        provider=OneCall("call_pay", "pay", {"amount": 5}, PAID_TEXT),
        tools=[_pay_tool(log)],
        run_ledger=store,
        run_state=prism.RunStateOptions(store, "payer-v1"),
    )
    return prism.create_agent(
        name="lead",
        model=MODEL,
        provider=OneCall("call_payer", "payer", {"input": "pay 5 EUR"}, "The payer is done."),
        tools=[payer.as_tool()],
        store=store,
        run_ledger=store,
        run_state=prism.RunStateOptions(store, "lead-v1"),
    )


def live(store: Any, log: Path) -> prism.Agent:
    """``lookup`` runs until a line arrives on standard input."""

    async def lookup(arguments: dict[str, Any], context: prism.ToolExecutionContext) -> Any:
        await asyncio.to_thread(sys.stdin.readline)
        _log(log, "lookup", arguments)
        return f"notes about {arguments['topic']}"

    tool = prism.ToolDefinition(
        name="lookup",
        description="Look a topic up.",
        execute=lookup,
        parameters={"type": "object", "properties": {"topic": {"type": "string"}}},
    )
    return prism.create_agent(
        name="watcher",
        model=MODEL,
        provider=OneCall("call_lookup", "lookup", {"topic": "tides"}, LIVE_TEXT),
        tools=[tool],
        store=store,
        run_ledger=store,
    )


REGISTRY = {"desk": desk, "lead": lead}
"""The agents of the ``desk`` and ``lead`` scenarios, for ``prism serve --agents``."""


def _say(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def _text(result: Any) -> str:
    for message in reversed(result.messages):
        if message.role == "assistant":
            return "".join(getattr(part, "text", "") for part in message.content)
    return ""


async def _wait_for_a_decision(store: Any, run_id: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _GUARD_S
    while loop.time() < deadline:
        decided = await list_decided_approvals(store, run_id)
        if any(d.applied_at is None for d in decided):
            return
        if not await list_pending_decisions(store, run_id=run_id):
            raise SystemExit(f"run {run_id} waits for no decision any more")
        await asyncio.sleep(0.1)
    raise SystemExit(f"no decision was recorded for run {run_id}")


async def main(url: str, scenario: str, log: Path, leave: bool) -> int:
    store = await open_store(url)
    try:
        if scenario == "live":
            agent = live(store, log)

            def on_event(event: Any) -> None:
                if event.type == "tool_execution_started":
                    _say("started", run_id=event.run_id)

            result = await agent.create_session(on_event=on_event).run("Tell me about tides")
        else:
            agent = REGISTRY[scenario](store, log)
            result = await agent.create_session().run("Pay 5 EUR to the printer shop")
            while result.status == "suspended":
                pending = await list_pending_decisions(store, run_id=result.run_id)
                _say("suspended", run_id=result.run_id,
                     approval_id=pending[0].approval_id if pending else None)
                if leave:
                    return 0
                await _wait_for_a_decision(store, result.run_id)
                result = await resume_agent_run(agent, result.run_id, decisions="recorded")
        _say("finished", run_id=result.run_id, status=result.status, text=_text(result))
        return 0
    finally:
        await store.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("scenario", choices=["live", *REGISTRY])
    parser.add_argument("tool_log", type=Path)
    parser.add_argument("--leave-suspended", action="store_true")
    a = parser.parse_args()
    sys.exit(asyncio.run(main(a.url, a.scenario, a.tool_log, a.leave_suspended)))
