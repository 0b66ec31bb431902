"""The agent registry the MCP serving tests serve (``--agents serve_agents:REGISTRY``).

The tests copy this file into a temporary directory and start ``prism mcp serve`` there. Every
provider is stateless — it answers from the request alone — so one agent, built once by the
server, serves any number of runs, and a restarted server continues a run where it stopped.
Side effects are appended to the file ``$MCP_SERVE_LEDGER`` (one JSON line each), so a test in
another process can count them.

* ``echo`` — answers ``echo: <the user's message>``; its redactor removes ``hunter2``;
* ``chat`` — answers with how many user messages the conversation holds (``turns: N``);
* ``slow`` — streams ``thinking`` and then waits (until aborted) before it would answer;
* ``failing`` — its model fails (``ERR_PRISM_RUN_FAILED``);
* ``desk`` — calls ``pay`` (needs approval) with ``{"amount": 5, "note": <message>}``, then
  answers ``paid`` (or ``refused`` when the call was rejected);
* ``writer`` — an artifact loop with a JSON Schema: answers ``{"title", "words"}``;
* ``crashy`` — calls ``note`` (no approval), then, while the file ``$MCP_SERVE_HOLD`` exists,
  waits before it answers ``finished`` (the restart tests kill the server meanwhile);
* ``noisy`` — writes to standard output from Python, from the file descriptor and from a child
  process while it answers ``quiet``;
* ``local`` — the embedded model (SmolLM2), for the local-model test only.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import prism
from prism.artifacts import json_schema_artifact
from prism.providers import ProviderEvent, provider_done, provider_text_delta, provider_tool_call
from prism.types import ProviderRequest, Usage, message_text

MODEL = {"provider": "scripted", "model": "instant"}
SECRET = "hunter2"


def _ledger(entry: dict[str, Any]) -> None:
    path = os.environ.get("MCP_SERVE_LEDGER")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps(entry) + "\n")


def _last_user(request: ProviderRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message_text(message)
    return ""


def _after_last_user(request: ProviderRequest) -> list[Any]:
    roles = [m.role for m in request.messages]
    last = max(i for i, role in enumerate(roles) if role == "user")
    return list(request.messages[last + 1 :])


class Scripted:
    """A stateless provider: ``answer(request)`` gives the events of one turn."""

    id = "scripted"

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        async for event in self.answer(request):
            yield event


async def _echo(request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
    yield provider_text_delta(f"echo: {_last_user(request)}")
    yield provider_done(Usage(input_tokens=3, output_tokens=2, cost=0.001, currency="USD"))


async def _chat(request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
    users = sum(1 for m in request.messages if m.role == "user")
    yield provider_text_delta(f"turns: {users}")
    yield provider_done()


async def _slow(request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
    yield provider_text_delta("thinking")
    signal = request.signal
    for _ in range(6000):  # ten minutes at most; an abort ends it at once
        if signal is not None and signal.aborted:
            signal.throw_if_aborted()
        await asyncio.sleep(0.01)
    yield provider_done()


async def _failing(request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
    raise RuntimeError("the model is down")
    yield provider_done()  # pragma: no cover


async def _desk(request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
    tail = _after_last_user(request)
    if not tail:
        note = _last_user(request)
        yield provider_tool_call("call_pay", "pay", {"amount": 5, "note": note})
    else:
        rejected = any(
            getattr(block, "error", None) is not None
            for message in tail
            if message.role == "tool"
            for block in message.content
        )
        yield provider_text_delta("refused" if rejected else "paid")
    yield provider_done()


async def _pay(arguments: dict[str, Any], context: prism.ToolExecutionContext) -> dict[str, Any]:
    _ledger({"tool": "pay", "arguments": arguments, "run_id": context.run_id})
    return {"paid": arguments["amount"]}


PAY = prism.ToolDefinition(
    name="pay",
    description="Pay an amount.",
    execute=_pay,
    needs_approval=True,
    parameters={
        "type": "object",
        "properties": {"amount": {"type": "integer"}, "note": {"type": "string"}},
        "required": ["amount"],
        "additionalProperties": False,
    },
)


async def _writer(request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
    topic = _last_user(request)
    yield provider_text_delta(json.dumps({"title": topic.title(), "words": len(topic.split())}))
    yield provider_done()


ARTICLE = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "words": {"type": "integer"}},
    "required": ["title", "words"],
    "additionalProperties": False,
}


def _mark_waiting(hold: str) -> bool:
    """Whether the hold file exists; if so, write ``<hold>.waiting`` with this process's id."""
    if not os.path.exists(hold):
        return False
    Path(hold + ".waiting").write_text(str(os.getpid()), encoding="utf-8")
    return True


async def _crashy(request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
    tail = _after_last_user(request)
    if not tail:
        yield provider_tool_call("call_note", "note", {"text": _last_user(request)})
        yield provider_done()
        return
    hold = os.environ.get("MCP_SERVE_HOLD")
    if hold and _mark_waiting(hold):
        while os.path.exists(hold):  # noqa: ASYNC110, ASYNC240 - another process removes it
            await asyncio.sleep(0.02)
    yield provider_text_delta("finished")
    yield provider_done()


async def _note(arguments: dict[str, Any], context: prism.ToolExecutionContext) -> str:
    _ledger({"tool": "note", "arguments": arguments, "run_id": context.run_id, "pid": os.getpid()})
    return "noted"


NOTE = prism.ToolDefinition(
    name="note",
    description="Write a note.",
    execute=_note,
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
)


async def _noisy(request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
    print("noise from print")
    sys.stdout.flush()
    os.write(1, b"noise from file descriptor 1\n")
    child = await asyncio.create_subprocess_exec("echo", "noise from a child process")
    await child.wait()
    yield provider_text_delta("quiet")
    yield provider_done()


def _durable(store: Any, revision: str) -> prism.RunStateOptions:
    return prism.RunStateOptions(store, revision, checkpoint_policy="every-turn")


def echo(store: Any) -> prism.Agent:
    return prism.create_agent(
        id="echo",
        name="echo",
        model=MODEL,
        provider=Scripted(_echo),
        store=store,
        redactor=prism.create_secret_redactor([SECRET]),
        run_state=_durable(store, "echo-v1"),
    )


def chat(store: Any) -> prism.Agent:
    return prism.create_agent(
        id="chat",
        model=MODEL,
        provider=Scripted(_chat),
        store=store,
        run_state=_durable(store, "chat-v1"),
    )


def slow(store: Any) -> prism.Agent:
    return prism.create_agent(
        id="slow",
        model=MODEL,
        provider=Scripted(_slow),
        store=store,
        run_state=_durable(store, "slow-v1"),
    )


def failing(store: Any) -> prism.Agent:
    return prism.create_agent(
        id="failing",
        model=MODEL,
        provider=Scripted(_failing),
        store=store,
        retry=False,
        run_state=_durable(store, "failing-v1"),
    )


def desk(store: Any) -> prism.ToolDefinition:
    agent = prism.create_agent(
        id="desk",
        model=MODEL,
        provider=Scripted(_desk),
        tools=[PAY],
        store=store,
        redactor=prism.create_secret_redactor([SECRET]),
        run_state=_durable(store, "desk-v1"),
    )
    return agent.as_tool(name="desk", description="The payment desk: pays what you ask.")


def writer(store: Any) -> prism.Agent:
    return prism.create_agent(
        id="writer",
        name="writer",
        model=MODEL,
        provider=Scripted(_writer),
        store=store,
        loop=prism.GenerateValidateReviseLoopOptions(**json_schema_artifact(ARTICLE)),
        run_state=_durable(store, "writer-v1"),
    )


def crashy(store: Any) -> prism.Agent:
    return prism.create_agent(
        id="crashy",
        model=MODEL,
        provider=Scripted(_crashy),
        tools=[NOTE],
        store=store,
        answer_after_tool_rounds=False,
        run_state=_durable(store, "crashy-v1"),
    )


def noisy(store: Any) -> prism.Agent:
    return prism.create_agent(id="noisy", model=MODEL, provider=Scripted(_noisy), store=store)


def local(store: Any) -> prism.Agent:
    from prism.providers.llama_cpp import create_local_provider, default_model_config

    return prism.create_agent(
        id="local",
        name="local",
        model=default_model_config(),
        provider=create_local_provider(default_max_tokens=24, seed=7),
        instructions="Answer in a few words.",
        store=store,
        run_state=_durable(store, "local-v1"),
    )


REGISTRY = {
    "echo": echo,
    "chat": chat,
    "slow": slow,
    "failing": failing,
    "desk": desk,
    "writer": writer,
    "crashy": crashy,
    "noisy": noisy,
    "local": local,
}
