"""Worker processes for the crash-safety test (DB-10); run as a script, not collected.

One *case* of the test is a chain of OS processes over one store: a ``start`` process runs a
durable run and kills itself with SIGKILL at its k-th hook point; ``recover`` processes then
continue the run from whatever the store holds, the last one to the end (a ``recover`` may be
killed at a hook point too, for a crash during recovery).

The run: an agent over a session that already holds an exchange (the *seed*), with
``checkpoint_policy="every-turn"``: the first envelope (with the input) is written before the input
is appended. In the ``gated`` mode it also has ``interrupt_before_tool=True`` and the host approves
every gated round at once, so every tool call is dispatched through the approval replay, which
records the dispatch in the envelope before the side effect (APR-9); in the ``plain`` mode tools
run directly and the runtime records each dispatch before its side effect itself (DB-10). With
``together`` (plain tools) the agent gets ONE hooked object as its session store and its
checkpoint store, with ``save_checkpoint_with_entries``: from the first turn boundary on, the run
holds its appends and writes them with its next envelope in one transaction (one ``save`` hook
pair, labelled with the entries it carries).
Provider turns come from a script indexed by the number of assistant messages in the request, so
any process knows which turn comes next:

====  =============================================================
turn  answer
====  =============================================================
1     ``record(a)`` and ``record(b)`` (ids ``call_1a``, ``call_1b``)
2     text "checking c", then ``record(c)`` (id ``call_2``)
3     text "all recorded"
====  =============================================================

Hook points, in the order a clean run meets them (``trace-<phase>.log`` lists them):

* ``provider.request t<n>`` — the provider got the request for turn n (logged in ``turns.log``
  first) and has yielded nothing; ``provider.stream t<n>`` — after its first event;
* ``append.before <what>`` / ``append.after <what>`` — around every session-store append;
* ``save.before <status…>`` / ``save.after <status…>`` — around every checkpoint write (every-turn,
  suspension, claim, dispatch marking, terminal);
* ``tool.before <call>`` / ``tool.after <call>`` — inside the tool, around its side effect (one
  line in ``effects.log``); before both, the tool's first step writes ``<call> <phase>`` to
  ``started.log`` (its ``execute`` began: a call reported ambiguous without that line had never
  started, a needless ambiguity).

Recovery is what a host and an operator do (DUR-16..DUR-24): find the session's last run; if it
has no envelope it never became durable, so start it again from the entry before it (STORE-6);
a ``running`` envelope is continued (crash recovery, DUR-22; the resume itself adopts result rows
stored after the recorded leaf), a ``suspended`` one approved; when resume reports an ambiguous
dispatched call (DUR-20), the operator checks the tool's side-effect log and the session and
repairs the envelope with ``save_agent_run_state`` (DUR-24): a result row already stored is
adopted (the leaf moves onto it), a side effect that happened without a stored result is answered
with a ``reject_once`` row saying so, and a call whose side effect never happened is released for
one (re-)run.

Usage::

    python _crash_worker.py serve          # one JSON job per stdin line; each runs in a forked child
    python _crash_worker.py once JOB_JSON  # run one job in this (fresh) interpreter

A job: ``{"mode": "start" | "recover", "url", "schema", "session", "dir", "phase", "kill_at",
"gated", "delegated"}``.

The ``delegated`` run (issue 16, durable delegation) is the same run whose turn 1 asks a child
agent, ``helper`` (an agent tool, durable with the run's own run state), to record b; the child
records it with its own call ``child_1`` over two turns of its own (``child-turns.log``; hook
labels ``provider.request c<n>``). A recovery resumes only the parent: the parent's resume
continues the child first; an ambiguous call of the child is reported by the parent's resume
with the child's run id, and the operator repairs the child's envelope.
``serve`` answers each job with ``{"pid", "exit", "signal"}`` on stdout. Everything else goes to
files in ``dir``: ``trace-<phase>.log``, ``turns.log``, ``effects.log``,
``snapshot-<phase>.json`` (a recover's view of the store before it acts), ``reports.log`` (each
ambiguity a resume reported and how the operator resolved it), ``final-<phase>.json`` (the
outcome) and ``error-<phase>.txt`` (a traceback).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import traceback
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from prism.errors import AgentRunStateError
from prism.loops.contracts import SingleShotLoopOptions
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.runtime.agent import Agent, create_agent
from prism.runtime.checkpoints import AGENT_RUN_NAMESPACE
from prism.runtime.durable import (
    RunStateOptions,
    load_agent_run_state,
    resume_agent_run,
    save_agent_run_state,
)
from prism.store import SessionEntry, new_session_entry
from prism.stores import open_store
from prism.types import (
    Message,
    ModelConfig,
    ProviderEvent,
    ProviderRequest,
    RunResult,
    TextContent,
    ToolCallContent,
    ToolDefinition,
    ToolResultContent,
)

AGENT_ID = "crash-desk"
REVISION = "crash-v1"
PROMPT = "Record a, b and c."
SEED = (("user", "hello"), ("assistant", "hi, what shall I record?"))
SEED_ASSISTANTS = sum(1 for role, _ in SEED if role == "assistant")
MODEL = ModelConfig(provider="mock", model="crash-script")
AMBIGUOUS = "Ambiguous dispatched tool requires operator resolution"
REJECT_REASON = "executed before a crash; its result was not recorded"

SCRIPT: tuple[tuple[ProviderEvent, ...], ...] = (
    (
        provider_tool_call("call_1a", "record", {"key": "a"}),
        provider_tool_call("call_1b", "record", {"key": "b"}),
        provider_done(),
    ),
    (
        provider_text_delta("checking c"),
        provider_tool_call("call_2", "record", {"key": "c"}),
        provider_done(),
    ),
    (provider_text_delta("all "), provider_text_delta("recorded"), provider_done()),
)
"""Provider turns, 1-based by position; the last one ends the run."""

CHILD_SESSION_SUFFIX = ".call_1b"
"""The ``delegated`` run's child session is ``<parent run id>.call_1b`` (the agent tool's)."""
DELEGATED_SCRIPT: tuple[tuple[ProviderEvent, ...], ...] = (
    (
        provider_tool_call("call_1a", "record", {"key": "a"}),
        provider_tool_call("call_1b", "helper", {"input": "record b"}),
        provider_done(),
    ),
    *SCRIPT[1:],
)
"""The ``delegated`` run: turn 1 records a itself and asks the ``helper`` agent to record b."""
CHILD_SCRIPT: tuple[tuple[ProviderEvent, ...], ...] = (
    (provider_tool_call("child_1", "record", {"key": "b"}), provider_done()),
    (provider_text_delta("b "), provider_text_delta("recorded"), provider_done()),
)
"""The ``helper`` child run's turns: record b, then answer."""


# --------------------------------------------------------------------------- kill points


class Killer:
    """Counts hook points of this process; logs each; SIGKILLs the process at the chosen one."""

    def __init__(self, directory: Path, phase: int, kill_at: int | None) -> None:
        self.directory = directory
        self.phase = phase
        self.kill_at = kill_at
        self.count = 0
        self.armed = False
        self._fd = os.open(directory / f"trace-{phase}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def hit(self, label: str) -> None:
        if not self.armed:
            return
        self.count += 1
        kill = self.count == self.kill_at
        prefix = "KILL " if kill else ""
        os.write(self._fd, f"{prefix}{self.count} {label}\n".encode())
        if kill:
            os.kill(os.getpid(), signal.SIGKILL)


def append_line(path: Path, line: str) -> None:
    """Append one line with a single ``write`` (it survives a SIGKILL right after)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def describe(message: Message | None) -> str:
    if message is None:
        return "entry"
    calls = [p.id for p in message.content if isinstance(p, ToolCallContent)]
    results = [p.tool_call_id for p in message.content if isinstance(p, ToolResultContent)]
    if calls:
        return f"{message.role}[{','.join(calls)}]"
    if results:
        return f"{message.role}[{','.join(results)}]"
    return f"{message.role}[text]"


class HookedSessionStore:
    """A session store whose appends pass two hook points (before and after the real write)."""

    def __init__(self, inner: Any, killer: Killer) -> None:
        self.inner = inner
        self.killer = killer

    async def append(
        self,
        entry: SessionEntry,
        *,
        expected_parent_id: str | None = None,
        idempotency_key: str | None = None,
        fork: bool = False,
    ) -> None:
        label = describe(entry.message)
        self.killer.hit(f"append.before {label}")
        await self.inner.append(
            entry,
            expected_parent_id=expected_parent_id,
            idempotency_key=idempotency_key,
            fork=fork,
        )
        self.killer.hit(f"append.after {label}")

    async def list(self, session_id: str) -> Sequence[SessionEntry]:
        result: Sequence[SessionEntry] = await self.inner.list(session_id)
        return result

    async def read_branch(self, session_id: str, leaf_id: str) -> Sequence[SessionEntry]:
        result: Sequence[SessionEntry] = await self.inner.read_branch(session_id, leaf_id)
        return result


def describe_state(value: dict[str, Any]) -> str:
    parts = [str(value.get("status"))]
    for entry in value.get("pending_calls", []):
        decided = "decided" if entry.get("decision") else "open"
        parts.append(f"{entry['status']}:{entry['call']['id']}:{decided}")
    return " ".join(parts)


class HookedCheckpoints:
    """A checkpoint store whose saves pass two hook points (before and after the real write)."""

    def __init__(self, inner: Any, killer: Killer) -> None:
        self.inner = inner
        self.killer = killer

    async def save_checkpoint(self, **kwargs: Any) -> Any:
        label = describe_state(kwargs["value"])
        self.killer.hit(f"save.before {label}")
        record = await self.inner.save_checkpoint(**kwargs)
        self.killer.hit(f"save.after {label}")
        return record

    async def load_checkpoint(self, **kwargs: Any) -> Any:
        return await self.inner.load_checkpoint(**kwargs)


class HookedStore(HookedSessionStore):
    """The store as one object that is the session store and the checkpoint store, with the
    hook points of both and of its combined write (entries and envelope in one transaction),
    so an every-turn run writes each turn's entries with its envelope."""

    def __init__(self, inner: Any, killer: Killer) -> None:
        super().__init__(inner, killer)
        self.checkpoints = HookedCheckpoints(inner, killer)

    async def save_checkpoint(self, **kwargs: Any) -> Any:
        return await self.checkpoints.save_checkpoint(**kwargs)

    async def load_checkpoint(self, **kwargs: Any) -> Any:
        return await self.inner.load_checkpoint(**kwargs)

    async def save_checkpoint_with_entries(self, **kwargs: Any) -> Any:
        entries = "".join(f" +{describe(a.entry.message)}" for a in kwargs["entries"])
        label = describe_state(kwargs["value"]) + entries
        self.killer.hit(f"save.before {label}")
        record = await self.inner.save_checkpoint_with_entries(**kwargs)
        self.killer.hit(f"save.after {label}")
        return record


class ScriptedProvider:
    """Answers turn n = assistant messages in the request (minus the seed's) + 1."""

    id = "mock"

    def __init__(
        self,
        killer: Killer,
        turns_log: Path,
        script: tuple[tuple[ProviderEvent, ...], ...] = SCRIPT,
        seed_assistants: int = SEED_ASSISTANTS,
        label: str = "t",
    ) -> None:
        self.killer = killer
        self.turns_log = turns_log
        self.script = script
        self.seed_assistants = seed_assistants
        self.label = label

    def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        assistants = sum(1 for m in request.messages if m.role == "assistant")
        turn = assistants - self.seed_assistants + 1
        append_line(self.turns_log, f"{turn} {self.killer.phase}")
        return self._stream(turn)

    async def _stream(self, turn: int) -> AsyncIterator[ProviderEvent]:
        self.killer.hit(f"provider.request {self.label}{turn}")
        events = self.script[turn - 1]
        yield events[0]
        self.killer.hit(f"provider.stream {self.label}{turn}")
        for event in events[1:]:
            yield event


def build_agent(
    store: Any,
    killer: Killer,
    directory: Path,
    *,
    gated: bool,
    delegated: bool = False,
    together: bool = False,
    parallel: bool = False,
) -> Agent:
    """The run's agent; ``delegated``: turn 1 asks the ``helper`` agent (an agent tool, durable
    with the parent's run state) to record b, and the helper records it with its own call;
    ``together``: one store object is the session and the checkpoint store, so every-turn
    boundaries write their entries with the envelope; ``parallel``: a tool round's calls run two
    at a time (``tool_concurrency=2``), each tool giving up the event loop once after its side
    effect, as a tool doing I/O does."""
    effects = directory / "effects.log"

    async def record(arguments: dict[str, Any], context: Any) -> Any:
        call_id = context.tool_call_id
        # the call's execute began: an ambiguity report of a call without this line is needless
        append_line(directory / "started.log", f"{call_id} {killer.phase}")
        killer.hit(f"tool.before {call_id}")
        append_line(effects, f"{call_id} {killer.phase}")
        killer.hit(f"tool.after {call_id}")
        if parallel:
            await asyncio.sleep(0)  # the other call of the round runs meanwhile
        return {"recorded": arguments["key"]}

    hooked: Any = HookedStore(store, killer) if together else HookedSessionStore(store, killer)
    checkpoints = hooked if together else HookedCheckpoints(store, killer)
    record_tool = ToolDefinition(
        name="record",
        execute=record,
        parameters={
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"],
        },
    )
    tools = [record_tool]
    if delegated:
        helper = create_agent(
            name="helper",
            model=MODEL,
            provider=ScriptedProvider(
                killer, directory / "child-turns.log", CHILD_SCRIPT, 0, "c"
            ),
            tools=[record_tool],
        )
        tools.append(helper.as_tool(description="Records what it is asked to."))
    return create_agent(
        id=AGENT_ID,
        model=MODEL,
        provider=ScriptedProvider(
            killer, directory / "turns.log", DELEGATED_SCRIPT if delegated else SCRIPT
        ),
        tools=tools,
        store=hooked,
        **({"loop": SingleShotLoopOptions(tool_concurrency=2)} if parallel else {}),
        run_state=RunStateOptions(
            checkpoints,
            REVISION,
            checkpoint_policy="every-turn",
            interrupt_before_tool=gated,
        ),
    )


# --------------------------------------------------------------------------- store views


def project(entry: SessionEntry) -> dict[str, Any]:
    """The parts of an entry the test checks."""
    out: dict[str, Any] = {"id": entry.id, "parent": entry.parent_id, "run": entry.run_id}
    message = entry.message
    if message is None:
        out["kind"] = entry.kind
        return out
    out["role"] = message.role
    out["text"] = "".join(p.text for p in message.content if isinstance(p, TextContent))
    calls = [p.id for p in message.content if isinstance(p, ToolCallContent)]
    if calls:
        out["calls"] = calls
    for part in message.content:
        if isinstance(part, ToolResultContent):
            out["result_for"] = part.tool_call_id
            out["error_code"] = part.error.code if part.error is not None else None
    return out


async def seed(store: Any, session_id: str) -> None:
    parent: str | None = None
    for role, text in SEED:
        entry = new_session_entry(
            "message",
            session_id=session_id,
            parent_id=parent,
            message=Message(role=role, content=(TextContent(text=text),)),  # type: ignore[arg-type]
        )
        await store.append(entry, expected_parent_id=parent)
        parent = entry.id


def last_run_id(entries: Sequence[SessionEntry]) -> str | None:
    run_id: str | None = None
    for entry in entries:
        if entry.run_id is not None:
            run_id = entry.run_id
    return run_id


async def snapshot(store: Any, session_id: str) -> dict[str, Any]:
    """What the store holds before a recovery acts: the last run, its envelope and the branch
    the envelope records (the run's history as of its last checkpoint)."""
    entries = await store.list(session_id)
    run_id = last_run_id(entries)
    out: dict[str, Any] = {"run_id": run_id, "envelope": None, "branch": []}
    if run_id is None:
        return out
    record = await store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=run_id)
    if record is None:
        return out
    state = record.value
    out["envelope"] = {
        "version": record.version,
        "status": state["status"],
        "leaf_id": state.get("leaf_id"),
        "input": "input" in state,
        "pending": [
            {
                "id": e["call"]["id"],
                "status": e["status"],
                "decided": "decision" in e,
                "child": "child" in e,
            }
            for e in state.get("pending_calls", [])
        ],
        "adoptable": stored_rows_after(
            entries, run_id, state.get("leaf_id"),
            {e["call"]["id"] for e in state.get("pending_calls", [])},
        ),
    }
    leaf = state.get("leaf_id")
    if leaf is not None:
        out["branch"] = [project(e) for e in await store.read_branch(session_id, leaf)]
    out["child"] = await child_snapshot(store, run_id)
    return out


async def child_snapshot(store: Any, run_id: str) -> dict[str, Any] | None:
    """The ``delegated`` run's child as stored: its run, envelope view and recorded branch."""
    child_session = run_id + CHILD_SESSION_SUFFIX
    entries = await store.list(child_session)
    child_run = last_run_id(entries)
    if child_run is None:
        return None
    record = await store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=child_run)
    out: dict[str, Any] = {"run_id": child_run, "session": child_session, "envelope": None}
    out["branch"] = []
    if record is None:
        return out
    state = record.value
    pending = {e["call"]["id"] for e in state.get("pending_calls", [])}
    out["envelope"] = {
        "status": state["status"],
        "input": "input" in state,
        "pending": [
            {"id": e["call"]["id"], "status": e["status"]} for e in state.get("pending_calls", [])
        ],
        "adoptable": stored_rows_after(entries, child_run, state.get("leaf_id"), pending),
    }
    if state.get("leaf_id") is not None:
        branch = await store.read_branch(child_session, state["leaf_id"])
        out["branch"] = [project(e) for e in branch]
    return out


def stored_rows_after(
    entries: Sequence[SessionEntry], run_id: str, leaf: str | None, pending: set[str]
) -> list[str]:
    """The pending calls whose result rows this run stored right after the recorded leaf (a
    chain of tool rows hanging off it): their outcome is known, so they are not ambiguous."""
    found: list[str] = []
    while leaf is not None and pending:
        nxt = None
        for entry in entries:
            if entry.parent_id != leaf or entry.run_id != run_id or entry.message is None:
                continue
            answered = [
                p.tool_call_id for p in entry.message.content
                if isinstance(p, ToolResultContent) and p.tool_call_id in pending
            ]
            if answered:
                nxt = entry.id
                found += answered
                pending -= set(answered)
                break
        leaf = nxt
    return found


# --------------------------------------------------------------------------- phases


async def approve_all(agent: Agent, result: RunResult) -> RunResult:
    """The host approves every gated round as soon as the run suspends on it."""
    while result.status == "suspended":
        assert result.run_state is not None
        result = await resume_agent_run(agent, result.run_state, decision="approve")
    return result


async def start(job: dict[str, Any], store: Any, killer: Killer, directory: Path) -> dict[str, Any]:
    await seed(store, job["session"])
    killer.armed = True
    agent = build_agent(
        store,
        killer,
        directory,
        gated=job.get("gated", True),
        delegated=job.get("delegated", False),
        together=job.get("together", False),
        parallel=job.get("parallel", False),
    )
    session = agent.create_session(job["session"])
    result = await approve_all(agent, await session.run(PROMPT))
    return {"status": result.status, "leaf_id": result.leaf_id}


async def resolve_ambiguity(
    store: Any, run_id: str, session_id: str | None, directory: Path
) -> list[dict[str, Any]]:
    """The operator's repair of an envelope with a ``dispatched`` call (DUR-20, DUR-24); the
    run may be a child run the parent's resume named (its session is read from its envelope)."""
    loaded = await load_agent_run_state(store, run_id=run_id, session_id=session_id)
    session_id = str(loaded.state["session_id"])
    state: dict[str, Any] = json.loads(json.dumps(loaded.state))
    effects_path = directory / "effects.log"
    effects = effects_path.read_text().split() if effects_path.exists() else []
    entries = await store.list(session_id)
    results = {}
    for entry in entries:
        message = entry.message
        if message is None or message.role != "tool":
            continue
        for part in message.content:
            if isinstance(part, ToolResultContent):
                results[part.tool_call_id] = entry
    decisions: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    for entry in state["pending_calls"]:
        call_id = entry["call"]["id"]
        if entry["status"] != "dispatched":
            kept.append(entry)
            continue
        stored = results.get(call_id)
        if stored is not None:
            # the row is in the store, right after the recorded leaf: adopt it
            if stored.parent_id != state.get("leaf_id"):
                raise AssertionError(f"result of {call_id} is not under the recorded leaf")
            state["leaf_id"] = stored.id
            decisions.append({"call": call_id, "action": "adopt"})
            continue
        entry["status"] = "ready"
        if call_id in effects:
            entry["decision"] = {
                "approval_id": entry["approval_id"],
                "outcome": "reject_once",
                "reason": REJECT_REASON,
            }
            decisions.append({"call": call_id, "action": "reject"})
        else:
            decisions.append({"call": call_id, "action": "rerun"})
        kept.append(entry)
    state["pending_calls"] = kept
    await save_agent_run_state(
        checkpoints=store, state=state, expected_version=loaded.record.version
    )
    return decisions


async def recover(
    job: dict[str, Any], store: Any, killer: Killer, directory: Path
) -> dict[str, Any]:
    session_id = job["session"]
    before = await snapshot(store, session_id)
    (directory / f"snapshot-{job['phase']}.json").write_text(json.dumps(before))
    killer.armed = True
    agent = build_agent(
        store,
        killer,
        directory,
        gated=job.get("gated", True),
        delegated=job.get("delegated", False),
        together=job.get("together", False),
        parallel=job.get("parallel", False),
    )
    run_id = before["run_id"]
    envelope = before["envelope"]
    out: dict[str, Any] = {"ambiguous": 0, "resolutions": [], "path": None}
    if envelope is None:
        # the run never wrote a checkpoint: it is not durable yet; start it again from the
        # entry it started from (its own entries stay on an abandoned branch)
        session = agent.create_session(session_id)
        if run_id is not None:
            entries = await store.list(session_id)
            first = next(e for e in entries if e.run_id == run_id)
            assert first.parent_id is not None
            await session.checkout(first.parent_id)
        out["path"] = "restart"
        result = await approve_all(agent, await session.run(PROMPT))
    elif envelope["status"] == "succeeded":
        out["path"] = "finished"
        out["status"] = "succeeded"
        return out
    else:
        assert run_id is not None
        out["path"] = envelope["status"]
        while True:
            loaded = await load_agent_run_state(store, run_id=run_id, session_id=session_id)
            decision = "approve" if loaded.state["status"] == "suspended" else "continue"
            try:
                first_result = await resume_agent_run(
                    agent, run_id, decision=decision, expected_version=loaded.record.version
                )
            except AgentRunStateError as exc:
                if AMBIGUOUS not in str(exc):
                    raise
                out["ambiguous"] += 1
                append_line(directory / "reports.log", f"{job['phase']} ambiguous")
                named = getattr(exc, "run_id", None) or run_id  # a child run's, when named
                resolutions = await resolve_ambiguity(
                    store, named, session_id if named == run_id else None, directory
                )
                for item in resolutions:
                    append_line(
                        directory / "reports.log",
                        f"{job['phase']} {item['action']} {item['call']}",
                    )
                out["resolutions"] += resolutions
                continue
            break
        result = await approve_all(agent, first_result)
    out["status"] = result.status
    return out


async def final_view(store: Any, session_id: str, leaf_id: str | None) -> dict[str, Any]:
    entries = await store.list(session_id)
    if leaf_id is None:
        leaf_id = entries[-1].id
    branch = await store.read_branch(session_id, leaf_id)
    return {"branch": [project(e) for e in branch], "all": [project(e) for e in entries]}


async def run_job(job: dict[str, Any]) -> None:
    directory = Path(job["dir"])
    phase = job["phase"]
    killer = Killer(directory, phase, job.get("kill_at"))
    options: dict[str, Any] = {}
    if job.get("schema"):
        options = {"schema": job["schema"], "max_size": 2}
    store = await open_store(job["url"], **options)
    try:
        if job["mode"] == "start":
            out = await start(job, store, killer, directory)
        else:
            out = await recover(job, store, killer, directory)
        killer.armed = False
        if out.get("status") == "succeeded":
            entries = await store.list(job["session"])
            run_id = last_run_id(entries)
            assert run_id is not None
            loaded = await load_agent_run_state(store, run_id=run_id)
            out["final"] = await final_view(store, job["session"], loaded.state.get("leaf_id"))
            if job.get("delegated"):
                child = await child_snapshot(store, run_id)
                assert child is not None and child["envelope"] is not None
                out["child"] = {
                    "status": child["envelope"]["status"],
                    **await final_view(store, child["session"], child["branch"][-1]["id"]),
                }
        (directory / f"final-{phase}.json").write_text(json.dumps(out))
    finally:
        await store.aclose()


def run_in_this_process(job: dict[str, Any]) -> int:
    try:
        asyncio.run(run_job(job))
    except BaseException:
        Path(job["dir"], f"error-{job['phase']}.txt").write_text(traceback.format_exc())
        return 1
    return 0


def serve() -> None:
    """Fork one child per job line: each job runs in a new process of an already-warm
    interpreter (the parent never opens a store or an event loop)."""
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the child: tracebacks go to error-<phase>.txt, nothing to the pipes
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            code = run_in_this_process(job)
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        answer = {
            "pid": pid,
            "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        }
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve()
    else:
        raise SystemExit(run_in_this_process(json.loads(sys.argv[2])))
