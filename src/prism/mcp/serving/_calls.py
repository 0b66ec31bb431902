"""One MCP tool call of a served agent: its run, progress, cancellation and approvals.

A call of ``<name>`` checks its arguments, finds or opens the conversation (``session_id``:
only the principal that opened it may continue it, with the same tool; one call at a time), and
runs the agent in a task of its own. While it runs:

* **progress** — when the request carries a progress token, the run's events become
  ``notifications/progress`` with a counter that only grows: the run starting (its run and
  session ids), each turn, each tool call starting and ending, a retry, a suspension; the
  messages pass the agent's and the server's redaction;
* **cancellation** — ``notifications/cancelled`` aborts the run through its abort signal (no
  further provider request or tool call starts; a running tool gets the agent's
  ``tool_abort_grace_ms``); a durable run's stored status becomes ``aborted``. A call cancelled
  while it asks for an approval leaves the run suspended;
* **approvals** — a run that suspends for a tool approval asks the client
  (``prism.mcp.serving._approvals``); once every approval is answered the run is resumed with the
  decisions, else the call returns "waiting for approval". On the 2026 revision the call answers
  with an ``InputRequiredResult`` instead, and the call repeated with the answers
  ([`answer_input()`][prism.mcp.serving._calls.answer_input]) records them and goes on with the run.

A call of ``<name>_result {run_id}`` collects a run of a conversation the same principal opened:
its kept outcome; "still running"; for a suspended run, the decisions recorded for it are applied
(or, with an elicitation-capable client, the approvals asked again) and the run goes on inside
the call; a run whose server is gone is resumed inside the call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import mcp_types as types

from prism._util import new_id
from prism.abort import AbortController
from prism.checkpoints import AGENT_RUN_NAMESPACE
from prism.errors import (
    ERR_PRISM_SESSION_BUSY,
    AbortError,
    AgentDecisionError,
    AgentRunError,
    AgentRunStateError,
    CheckpointConflictError,
    PrismError,
)
from prism.mcp.serving._approvals import (
    answered,
    ask_approvals,
    can_ask_in_result,
    can_elicit,
    input_required,
    seal,
    unseal,
)
from prism.mcp.serving._records import principal_of
from prism.mcp.serving._results import (
    ERR_PRISM_MCP_ARGUMENTS,
    ERR_PRISM_MCP_DENIED,
    ERR_PRISM_MCP_REFUSED,
    Outcome,
    failure_outcome,
    outcome_of,
    pending_of,
    refused,
    running,
    tool_result,
    waiting,
)
from prism.mcp.serving._service import Service
from prism.mcp.serving._tools import SESSION_ARGUMENT, ServedAgent, check_arguments
from prism.redaction import SecretRedactor, error_to_error_info
from prism.runtime.durable import (
    AgentRunState,
    list_recorded_decisions,
    load_agent_run_state,
    record_decisions,
    resume_agent_run,
)
from prism.store import read_branch
from prism.types import RunResult, message_text

__all__ = ["ToolAnswer", "answer_input", "call_agent", "collect_run"]

ToolAnswer = types.CallToolResult | types.InputRequiredResult
"""A call's answer: its result, or (2026 revision) the approvals it asks about first."""

_CANCELLED: Final = "cancelled by the MCP client"
_DECISION_ERRORS: Final = frozenset(
    ("ERR_PRISM_DECISION_INVALID", "ERR_PRISM_DECISION_DUPLICATE", "ERR_PRISM_DECISION_LIMIT")
)
"""Decision errors that are this server's own (a resume that lost a race is not one)."""


def _not_yours(what: str, ident: str) -> types.CallToolResult:
    return refused(ERR_PRISM_MCP_REFUSED, f"no {what} {ident} that this client may use")


def _by(ctx: Any) -> str:
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    name = getattr(getattr(params, "client_info", None), "name", None)
    return f"MCP client {name}"[:256] if isinstance(name, str) and name else "MCP client"


# --------------------------------------------------------------------------- progress


def _progress_text(event: Any) -> str | None:
    """The progress message of one run event, ``None`` for events not reported."""
    kind = getattr(event, "type", None)
    if kind == "agent_started":
        return f"run {event.run_id} started (session {event.session_id})"
    if kind == "agent_resumed":
        return f"run {event.run_id} resumed"
    if kind == "turn_started":
        return f"turn {event.turn}"
    if kind == "tool_execution_started":
        return f"calling {event.call.name}"
    if kind == "tool_execution_finished":
        return f"{event.result.name} finished"
    if kind == "tool_execution_error":
        return f"{event.call.name} failed"
    if kind == "retry_scheduled":
        return "retrying the model request"
    if kind == "agent_suspended":
        return "waiting for approval"
    return None


class _Progress:
    """Turns run events into ``notifications/progress`` of one request, in order."""

    def __init__(self, ctx: Any, redactor: SecretRedactor | None) -> None:
        meta = getattr(ctx, "meta", None)
        token = meta.get("progress_token") if isinstance(meta, Mapping) else None
        self.ctx = ctx
        self.redactor = redactor
        self.count = 0
        self.queue: asyncio.Queue[str | None] | None = None
        self.pump: asyncio.Task[None] | None = None
        if token is not None and ctx is not None:
            self.queue = asyncio.Queue()
            self.pump = asyncio.create_task(self._send(), name="prism mcp progress")

    def on_event(self, event: Any) -> None:
        if self.queue is None:
            return
        text = _progress_text(event)
        if text is not None:
            self.queue.put_nowait(text if self.redactor is None else self.redactor.redact(text))

    async def _send(self) -> None:
        assert self.queue is not None
        while (text := await self.queue.get()) is not None:
            self.count += 1
            with contextlib.suppress(Exception):  # a client gone: progress is best effort
                await self.ctx.session.report_progress(float(self.count), None, text)

    async def close(self, *, flush: bool) -> None:
        """Send what is queued (``flush``) or drop it, and stop."""
        if self.pump is None or self.queue is None:
            return
        if flush:
            self.queue.put_nowait(None)
            with contextlib.suppress(Exception):
                await asyncio.shield(self.pump)
        else:
            self.pump.cancel()


# --------------------------------------------------------------------------- one drive


class _Drive:
    """A run driven for one request: the leg, then approvals and resumes until it finishes or
    waits."""

    def __init__(self, service: Service, ctx: Any, served: ServedAgent, session_id: str) -> None:
        self.service = service
        self.ctx = ctx
        self.served = served
        self.session_id = session_id
        self.redactor = service.redactor(served)
        self.progress = _Progress(ctx, self.redactor)
        self.controller = AbortController()
        self.asking = False
        self.session = served.agent.create_session(
            session_id, store=service.session_store(served), on_event=self._on_event
        )

    def _on_event(self, event: Any) -> None:
        if getattr(event, "type", None) in ("agent_started", "agent_resumed"):
            self.service.active[self.session_id] = event.run_id
        self.progress.on_event(event)

    async def run(self, start: Callable[[], Awaitable[RunResult]] | AgentRunState) -> ToolAnswer:
        try:
            result: RunResult | AgentRunState
            if isinstance(start, AgentRunState):
                result = start
            else:
                result = await start()
            while result.status == "suspended":
                found = await self._decide(result)
                if not isinstance(found, RunResult):
                    return found
                result = found
            if result.status == "running" or (
                result.status == "succeeded" and result.stop_reason == "host_policy"
            ):
                return running(self.served, run_id=result.run_id, session_id=self.session_id)
            assert isinstance(result, RunResult)
            outcome = outcome_of(result, redactor=self.redactor)
        except AgentRunError as exc:
            outcome = failure_outcome(exc, redactor=self.redactor, session_id=self.session_id)
        except (CheckpointConflictError, AgentDecisionError, AgentRunStateError) as exc:
            # another process resumed or decided the run meanwhile, or it has finished
            run_id = self.service.active.get(self.session_id)
            if run_id is None or exc.code in _DECISION_ERRORS:
                raise
            return await _settled(self.service, self.served, run_id, self.session_id)
        await self.service.store_outcome(self.served, outcome)
        return tool_result(outcome, self.served)

    async def _decide(self, result: RunResult | AgentRunState) -> RunResult | ToolAnswer:
        """Answer a suspended run's approvals through the client, then resume it."""
        served, store = self.served, self.service.checkpoints(self.served)
        interruption = result.interruption
        pending = list(getattr(interruption, "pending_decisions", ()) or ())
        shown = pending_of(interruption)
        usage = getattr(result, "usage", None)

        def wait_result() -> types.CallToolResult:
            return waiting(
                served,
                run_id=result.run_id,
                session_id=self.session_id,
                pending=self.redact(shown),
                usage=None if usage is None else usage.to_dict(),
            )

        recorded = {d.approval_id for d in await list_recorded_decisions(store, result.run_id)}
        ask = [p for p in pending if p.approval_id not in recorded]
        if ask:
            if self.service.closing:
                return wait_result()
            if not can_elicit(self.ctx):
                if not can_ask_in_result(self.ctx):
                    return wait_result()
                principal = principal_of(getattr(self.ctx, "request", None))
                state = seal(self.service.key, result.run_id, self.session_id, principal)
                answer: types.InputRequiredResult = input_required(
                    served, ask, state=state, redact=self.redact
                )
                return answer
            self.asking = True
            try:
                decisions, complete = await ask_approvals(
                    self.ctx,
                    served,
                    ask,
                    wait_s=self.service.approval_wait_s,
                    by=_by(self.ctx),
                    redact=self.redact,
                )
            finally:
                self.asking = False
            if decisions:
                try:
                    await record_decisions(store, result.run_id, decisions)
                except AgentDecisionError as exc:
                    if exc.code not in ("ERR_PRISM_DECISION_DECIDED", "ERR_PRISM_DECISION_UNKNOWN"):
                        raise
            if not complete:
                return wait_result()
        self.service.active[self.session_id] = result.run_id
        return await resume_agent_run(
            self.session,
            result.run_id,
            decisions="recorded",
            signal=self.controller.signal,
            turn_policy=self.service.policy,
        )

    def redact(self, value: Any) -> Any:
        return value if self.redactor is None else self.redactor.redact(value)


async def _drive(
    service: Service,
    ctx: Any,
    served: ServedAgent,
    session_id: str,
    start: Callable[[_Drive], Awaitable[RunResult]] | AgentRunState,
) -> ToolAnswer:
    """Run ``start`` (or continue a stored run) as the request's drive, in a task of its own;
    the request's cancellation aborts the run (unless the server is shutting down)."""
    drive = _Drive(service, ctx, served, session_id)
    begin: Callable[[], Awaitable[RunResult]] | AgentRunState = (
        start if isinstance(start, AgentRunState) else (lambda: start(drive))
    )
    service.active.setdefault(session_id, None)

    async def work() -> ToolAnswer:
        try:
            return await drive.run(begin)
        except PrismError as exc:
            info = error_to_error_info(exc, drive.redactor or ())
            return refused(exc.code, info.message)
        except Exception as exc:  # a bug or a store failure: an error result, never a crash
            info = error_to_error_info(exc, drive.redactor or ())
            return refused("ERR_PRISM_RUN_FAILED", f"{type(exc).__name__}: {info.message}")
        finally:
            service.active.pop(session_id, None)

    task = service.spawn(work(), f"prism mcp call {session_id}")
    try:
        await asyncio.wait({task})
    except asyncio.CancelledError:
        if not service.closing:
            drive.controller.abort(AbortError(_CANCELLED))
            if drive.asking:
                task.cancel()
        await drive.progress.close(flush=False)
        raise
    await drive.progress.close(flush=True)
    result: ToolAnswer = task.result()
    return result


# --------------------------------------------------------------------------- the tools


async def call_agent(
    service: Service, ctx: Any, served: ServedAgent, arguments: Mapping[str, Any]
) -> ToolAnswer:
    """``<name>``: run the agent on the arguments (see the module docstring)."""
    problems = check_arguments(served, arguments)
    if problems:
        return refused(
            ERR_PRISM_MCP_ARGUMENTS,
            f"the arguments do not fit the input schema of {served.name}: " + "; ".join(problems),
        )
    principal = principal_of(getattr(ctx, "request", None))
    records = service.records(served)
    session_id = arguments.get(SESSION_ARGUMENT)
    if isinstance(session_id, str):
        found = await records.value(f"session:{session_id}")
        if (
            principal is None
            or found is None
            or found.get("principal") != principal
            or found.get("tool") != served.name
        ):
            return _not_yours("session", session_id)
    else:
        session_id = new_id("session")
    if session_id in service.active:
        return refused(ERR_PRISM_SESSION_BUSY, f"the session {session_id} is running another call")
    service.active[session_id] = None
    try:
        await records.update(
            f"session:{session_id}",
            lambda value: {
                "principal": principal,
                "tool": served.name,
                **(value or {}),
                "server": service.server_id,
            },
        )
    except BaseException:
        service.active.pop(session_id, None)
        raise
    text = served.agent_input(arguments)

    def start(drive: _Drive) -> Awaitable[RunResult]:
        return drive.session.run(text, signal=drive.controller.signal, turn_policy=service.policy)

    return await _drive(service, ctx, served, session_id, start)


async def collect_run(
    service: Service, ctx: Any, served: ServedAgent, arguments: Mapping[str, Any]
) -> ToolAnswer:
    """``<name>_result``: the answer of a run, or why it has none yet (module docstring)."""
    run_id = arguments.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        return refused(ERR_PRISM_MCP_ARGUMENTS, f"{served.result_name} needs a run_id string")
    principal = principal_of(getattr(ctx, "request", None))
    records = service.records(served)
    kept = await records.value(f"result:{run_id}")
    state: AgentRunState | None = None
    if kept is not None:
        session_id = kept.get("session_id")
    else:
        state = await _stored_state(service, served, run_id)
        session_id = state.session_id if state is not None else None
    found = await records.value(f"session:{session_id}") if isinstance(session_id, str) else None
    if (
        principal is None
        or found is None
        or found.get("principal") != principal
        or found.get("tool") != served.name
        or not isinstance(session_id, str)
    ):
        return _not_yours("run", run_id)
    if kept is not None:
        return tool_result(kept, served)
    assert state is not None
    if session_id in service.active:
        return running(served, run_id=run_id, session_id=session_id)
    if state.status == "suspended":
        return await _drive(service, ctx, served, session_id, state)
    if state.status == "running" or (
        state.status == "succeeded" and state.stop_reason == "host_policy"
    ):
        owner = found.get("server")
        if isinstance(owner, str) and await records.alive(
            owner, me=service.server_id, lease_s=service.lease_s
        ):
            return running(served, run_id=run_id, session_id=session_id)
        if not await service.claim_session(served, session_id):
            return running(served, run_id=run_id, session_id=session_id)

        def resume(drive: _Drive) -> Awaitable[RunResult]:
            return resume_agent_run(
                drive.session, run_id, signal=drive.controller.signal, turn_policy=service.policy
            )

        return await _drive(service, ctx, served, session_id, resume)
    return await _settled(service, served, run_id, session_id)


async def answer_input(
    service: Service,
    ctx: Any,
    served: ServedAgent,
    state: str,
    responses: Mapping[str, object],
) -> ToolAnswer:
    """A call repeated with the answers to the approvals an ``InputRequiredResult`` asked about
    (2026 revision; see ``prism.mcp.serving._approvals``): the decisions are recorded, then the
    run goes on in this call once every approval has one."""
    principal = principal_of(getattr(ctx, "request", None))
    opened = unseal(service.key, state, principal)
    if opened is None:
        return refused(
            ERR_PRISM_MCP_REFUSED,
            "this call's request_state is not one this server gave this client (a restarted "
            f"server cannot read it): call {served.result_name} with the run_id instead",
        )
    run_id, session_id = opened
    if session_id in service.active:
        return running(served, run_id=run_id, session_id=session_id)
    stored = await _stored_state(service, served, run_id)
    if stored is None or stored.status != "suspended":
        return await _settled(service, served, run_id, session_id)
    pending = list(getattr(stored.interruption, "pending_decisions", ()) or ())
    decisions, complete = answered(pending, responses, by=_by(ctx))
    if decisions:
        try:
            await record_decisions(service.checkpoints(served), run_id, decisions)
        except AgentDecisionError as exc:
            if exc.code not in ("ERR_PRISM_DECISION_DECIDED", "ERR_PRISM_DECISION_UNKNOWN"):
                raise
    if not complete:
        return await _settled(service, served, run_id, session_id)
    return await _drive(service, ctx, served, session_id, stored)


async def _stored_state(service: Service, served: ServedAgent, run_id: str) -> AgentRunState | None:
    store = service.checkpoints(served)
    if await store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=run_id) is None:
        return None
    try:
        loaded = await load_agent_run_state(store, run_id=run_id)
    except AgentRunStateError:
        return None
    return AgentRunState.from_envelope(loaded.state, loaded.record.version)


async def _settled(
    service: Service, served: ServedAgent, run_id: str, session_id: str
) -> types.CallToolResult:
    """The result of a run another process moved on: its kept outcome, "still running", or
    what its stored state and conversation show."""
    kept = await service.records(served).value(f"result:{run_id}")
    if kept is not None:
        return tool_result(kept, served)
    state = await _stored_state(service, served, run_id)
    redactor = service.redactor(served)
    if state is not None and state.status == "suspended":
        shown = pending_of(state.interruption)
        return waiting(
            served,
            run_id=run_id,
            session_id=session_id,
            pending=shown if redactor is None else redactor.redact(shown),
        )
    if state is None or state.status == "running" or state.stop_reason == "host_policy":
        return running(served, run_id=run_id, session_id=session_id)
    text = ""
    with contextlib.suppress(Exception):
        branch = await read_branch(service.session_store(served), session_id, state.leaf_id)
        for entry in reversed(branch):
            if entry.message is not None and entry.message.role == "assistant":
                text = message_text(entry.message)
                break
    outcome: Outcome = {"run_id": run_id, "session_id": session_id, "status": state.status}
    outcome["text"] = text
    if state.status in ("failed", "aborted"):
        code = "ERR_PRISM_RUN_ABORTED" if state.status == "aborted" else "ERR_PRISM_RUN_FAILED"
        outcome["error"] = {"code": code, "message": f"the run {state.status}"}
    elif state.status == "denied":
        outcome["error"] = {
            "code": ERR_PRISM_MCP_DENIED,
            "message": "an operator denied the run's tool call",
        }
    return tool_result(outcome if redactor is None else redactor.redact(outcome), served)
