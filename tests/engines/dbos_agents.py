"""The agent registry of the DBOS worker tests and benchmark: instant scripted providers and a
tool whose side effects are appended to a log.

Every worker process imports this module (``--agents dbos_agents:REGISTRY``), so nothing here
keeps state between runs: the provider answers from the request alone. A run's input is its
label (``job-7``); turn ``t`` (the number of assistant messages already in the request) asks
for ``effect(label, t)`` while ``t < PRISM_TEST_TOOL_TURNS`` (default 2), then answers
``done <label>``.

Logs (paths from the environment, one line per record, appended by every process):

* ``PRISM_TEST_REQUESTS_LOG``: ``<pid> <label> <turn>`` per provider request;
* ``PRISM_TEST_EFFECTS_LOG``: ``begin <pid> <label> <turn>`` — the tool's side effect — then
  ``end <pid> <label> <turn>`` after ``PRISM_TEST_TOOL_SLEEP`` seconds (default 0.05).

``PRISM_TEST_REVISION`` (default ``r1``) is every agent's definition revision.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import prism
from prism.providers import (
    ProviderEvent,
    provider_done,
    provider_text_delta,
    provider_tool_call,
)
from prism.types import ProviderRequest, TextContent


def _append(env: str, line: str) -> None:
    path = os.environ.get(env)
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")


def _label(request: ProviderRequest) -> str:
    for message in request.messages:
        if message.role == "user":
            for part in message.content:
                if isinstance(part, TextContent):
                    return part.text.split()[0]
    return "?"


class ScriptedProvider:
    """Instant, stateless: the reply depends on the request only."""

    id = "scripted"

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        label = _label(request)
        turn = sum(1 for m in request.messages if m.role == "assistant")
        _append("PRISM_TEST_REQUESTS_LOG", f"{os.getpid()} {label} {turn}")
        if turn < int(os.environ.get("PRISM_TEST_TOOL_TURNS", "2")):
            yield provider_tool_call(f"call_{label}_{turn}", "effect", {"label": label, "turn": turn})
        else:
            yield provider_text_delta(f"done {label}")
        yield provider_done(prism.Usage(input_tokens=10, output_tokens=2))


async def effect(arguments: dict[str, Any], context: prism.ToolExecutionContext) -> dict[str, Any]:
    """The side effect: one ``begin`` line, a pause, one ``end`` line."""
    where = f"{os.getpid()} {arguments['label']} {arguments['turn']}"
    _append("PRISM_TEST_EFFECTS_LOG", f"begin {where}")
    await asyncio.sleep(float(os.environ.get("PRISM_TEST_TOOL_SLEEP", "0.05")))
    _append("PRISM_TEST_EFFECTS_LOG", f"end {where}")
    return {"done": arguments["turn"]}


EFFECT = prism.ToolDefinition(
    name="effect",
    description="Record one side effect.",
    parameters={
        "type": "object",
        "properties": {"label": {"type": "string"}, "turn": {"type": "integer"}},
        "required": ["label", "turn"],
    },
    execute=effect,
)


def _agent(store: Any, name: str, *, approvals: bool, ledger: bool) -> prism.Agent:
    return prism.create_agent(
        id=name,
        model={"provider": "scripted", "model": "instant"},
        provider=ScriptedProvider(),
        tools=[EFFECT],
        store=store,
        run_ledger=store if ledger else None,
        run_state=prism.RunStateOptions(
            store,
            os.environ.get("PRISM_TEST_REVISION", "r1"),
            checkpoint_policy="every-turn",
            interrupt_before_tool=approvals,
        ),
    )


def tools_agent(store: Any) -> prism.Agent:
    """Two tool turns, then an answer."""
    return _agent(store, "tools", approvals=False, ledger=False)


def approval_agent(store: Any) -> prism.Agent:
    """Every tool call waits for an approval; every event goes to the store's ledger."""
    return _agent(store, "approval", approvals=True, ledger=True)


REGISTRY = {"tools": tools_agent, "approval": approval_agent}
