"""Worker process for the handoff crash test; run as a script, not collected.

Usage: ``python _handoff_worker.py JOB_JSON`` with a job ``{"mode": "start" | "recover", "url",
"schema", "session", "dir", "phase", "kill_at"}``.

The run: agent ``triage`` (a handoff loop with the target ``billing``) over a durable run with
``every-turn`` checkpoints. Turn 1 is triage's: it calls ``transfer_to_billing``. Turns 2 and 3
are billing's: a ``refund`` call, then the text ``refund issued``. Each provider answers from what
the request holds, so any process knows which turn comes next.

A ``start`` process runs the run and SIGKILLs itself at the hook point ``kill_at``:

* ``billing.request t2`` / ``billing.request t3`` — billing's provider got the request of that
  turn and has yielded nothing;
* ``billing.stream t2`` / ``billing.stream t3`` — after its first event.

A ``recover`` process resumes the stored run (``resume_agent_run`` of the ``running`` envelope)
with a freshly built ``triage`` agent. Every provider request is logged as one JSON line in
``requests.log`` (phase, agent, model, tool names, system text); every refund side effect as one
line in ``effects.log``; the outcome goes to ``final-<phase>.json`` and a traceback to
``error-<phase>.txt``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import traceback
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from prism.loops.handoff import handoff_loop
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.runtime.agent import Agent, create_agent
from prism.runtime.durable import RunStateOptions, load_agent_run_state, resume_agent_run
from prism.stores import open_store
from prism.types import (
    ModelConfig,
    ProviderEvent,
    ProviderRequest,
    TextContent,
    ToolDefinition,
    ToolResultContent,
)

PROMPT = "I was charged twice."
REVISION = "handoff-v1"


def append_line(path: Path, line: str) -> None:
    """Append one line with a single ``write`` (it survives a SIGKILL right after)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


class ScriptedProvider:
    """One agent's provider: logs each request, answers from the request, kills at a hook."""

    id = "mock"

    def __init__(self, agent: str, job: dict[str, Any]) -> None:
        self.agent = agent
        self.job = job
        self.directory = Path(job["dir"])

    def _hit(self, label: str) -> None:
        if self.job.get("kill_at") == label:
            os.kill(os.getpid(), signal.SIGKILL)

    def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        refunded = any(
            isinstance(part, ToolResultContent) and part.tool_call_id == "r1"
            for message in request.messages
            for part in message.content
        )
        turn = 1 if self.agent == "triage" else (3 if refunded else 2)
        system = " ".join(
            part.text
            for message in request.messages
            if message.role == "system"
            for part in message.content
            if isinstance(part, TextContent)
        )
        append_line(
            self.directory / "requests.log",
            json.dumps(
                {
                    "phase": self.job["phase"],
                    "agent": self.agent,
                    "turn": turn,
                    "model": request.model.model,
                    "tools": sorted(t.name for t in request.tools or ()),
                    "system": system,
                }
            ),
        )
        return self._stream(turn)

    async def _stream(self, turn: int) -> AsyncIterator[ProviderEvent]:
        self._hit(f"{self.agent}.request t{turn}")
        if turn == 1:
            events = [provider_tool_call("t1", "transfer_to_billing", {}), provider_done()]
        elif turn == 2:
            events = [provider_tool_call("r1", "refund", {}), provider_done()]
        else:
            events = [provider_text_delta("refund "), provider_text_delta("issued"), provider_done()]
        yield events[0]
        self._hit(f"{self.agent}.stream t{turn}")
        for event in events[1:]:
            yield event


def build_agent(store: Any, job: dict[str, Any]) -> Agent:
    """The triage agent (with its handoff target) every process builds alike."""
    effects = Path(job["dir"]) / "effects.log"

    def refund(arguments: dict[str, Any], context: Any) -> Any:
        append_line(effects, f"{context.tool_call_id} {job['phase']}")
        return {"refunded": True}

    billing = create_agent(
        model=ModelConfig(provider="mock", model="billing-model"),
        provider=ScriptedProvider("billing", job),
        name="billing",
        instructions="You handle refunds.",
        tools=[ToolDefinition(name="refund", execute=refund)],
    )
    return create_agent(
        model=ModelConfig(provider="mock", model="triage-model"),
        provider=ScriptedProvider("triage", job),
        name="triage",
        instructions="You route requests.",
        tools=[ToolDefinition(name="faq", execute=lambda arguments, context: "see the FAQ")],
        loop=handoff_loop(billing),
        store=store,
        run_state=RunStateOptions(store, REVISION, checkpoint_policy="every-turn"),
    )


def project(entry: Any) -> dict[str, Any]:
    """The parts of a stored entry the test checks."""
    out: dict[str, Any] = {"kind": entry.kind, "run": entry.run_id}
    message = entry.message
    if message is not None:
        out["role"] = message.role
        out["agent"] = (message.metadata or {}).get("agent")
        out["text"] = "".join(p.text for p in message.content if isinstance(p, TextContent))
        results = [p.tool_call_id for p in message.content if isinstance(p, ToolResultContent)]
        if results:
            out["result_for"] = results[0]
    if entry.data is not None:
        out["data"] = dict(entry.data)
    if entry.model is not None:
        out["model"] = entry.model.model
    return out


async def run_job(job: dict[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if job.get("schema"):
        options = {"schema": job["schema"], "max_size": 2}
    store = await open_store(job["url"], **options)
    try:
        agent = build_agent(store, job)
        if job["mode"] == "start":
            result = await agent.create_session(job["session"]).run(PROMPT)
        else:
            entries = await store.list(job["session"])
            run_id = next(e.run_id for e in reversed(entries) if e.run_id is not None)
            loaded = await load_agent_run_state(store, run_id=run_id, session_id=job["session"])
            result = await resume_agent_run(
                agent, loaded, decision="continue", expected_version=loaded.record.version
            )
        assert result.leaf_id is not None
        branch = await store.read_branch(job["session"], result.leaf_id)
        return {
            "status": result.status,
            "run_id": result.run_id,
            "branch": [project(e) for e in branch],
            "all": [project(e) for e in await store.list(job["session"])],
        }
    finally:
        await store.aclose()


def main() -> int:
    job = json.loads(sys.argv[1])
    directory = Path(job["dir"])
    try:
        out = asyncio.run(run_job(job))
    except BaseException:
        (directory / f"error-{job['phase']}.txt").write_text(traceback.format_exc())
        return 1
    (directory / f"final-{job['phase']}.json").write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
