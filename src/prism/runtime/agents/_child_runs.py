"""Durable delegation: how an agent tool starts, resumes and checks its child run.

An agent tool's call runs the child agent in a child session (``prism.runtime.agents.agent_tool``). When
the calling run is durable, the child is durable too — with its own ``run_state``, else with the
calling run's (same checkpoint store and revision) — and:

* **before the child starts**, its run id is recorded in the calling run's pending entry of the
  call (``child``: ``{"agent", "session_id", "run_id"}``; written at once when the call's dispatch
  is recorded, see ``DurableDriver.record_child``), so a crash resumes that child instead of
  reporting the call ambiguous;
* a child that suspends (an approval, its input guardrail) raises
  [`ChildRunSuspended`][prism.runtime.run._delegation.ChildRunSuspended] out of the tool: the calling run suspends
  too, its envelope keeps the child link, and its interruption lists the child's pending
  decisions (tagged ``subagent``);
* the child inherits the ``stop`` callback of the calling run's turn policy: a host stopping the
  calling run (a worker draining) stops the child at its next boundary, and the calling run then
  stops at its own next boundary the same way (``succeeded``, ``stop_reason="host_policy"``), the
  child link kept; ``resume_agent_run(..., decision="continue")`` continues both;
* when the calling run is resumed, its resumed leg replays the call: [`run_child()`][prism.runtime.agents._child_runs.run_child] finds the
  recorded child and continues it from the store — with the decisions the operator gave on the
  calling run, or as crash recovery — before the calling run's loop goes on; a child that
  finished before the crash is not run again (its stored answer is used).

``check_child`` (in ``prism.runtime.durable._resume_writes``) is the calling run's resume-time check (before its claim): a child that a
crash left with an ambiguous tool call is reported with the child's run id, so the operator
resolves the call on the child run and resumes the calling run again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prism._util import new_id
from prism.checkpoints import AGENT_RUN_NAMESPACE
from prism.errors import AgentRunStateError
from prism.runtime.durable import resume_agent_run
from prism.runtime.durable._run_envelope import ChildRun, RunEnvelope
from prism.runtime.durable._run_state import (
    RunStateOptions,
    coerce_run_state_options,
)
from prism.runtime.run._delegation import ChildRunSuspended, RunDelegation
from prism.runtime.run.leg import start_leg
from prism.runtime.run.options import RunOptions
from prism.runtime.run.plan import plan_run
from prism.runtime.run.session import AgentSession
from prism.store import read_branch
from prism.types import Message, RunResult, ToolExecutionContext

__all__ = ["child_options", "run_child"]


def child_options(agent: Any, run: object) -> tuple[RunStateOptions | None, bool]:
    """The child's durable options and whether they are inherited: its own ``run_state``, else
    the calling run's when that run is durable and the child agent has an id or a name."""
    config = agent.config
    own = coerce_run_state_options(config.run_state, label="agent run_state")
    if own is not None:
        return own, False
    inherited = run.run_state if isinstance(run, RunDelegation) else None
    if inherited is None or not (config.id or config.name):
        return None, False
    return inherited, True


async def run_child(
    agent: Any,
    session: AgentSession,
    message: Message,
    context: ToolExecutionContext,
    link: dict[str, Any],
) -> RunResult:
    """Start the child run of a call, or continue the one recorded for it.

    Returns:
        The child's ``RunResult`` (``succeeded``).

    Raises:
        ChildRunSuspended: ``ERR_PRISM_DELEGATION_SUSPENDED`` — the child suspended (or still
            waits for decisions the operator has not given yet).
        AgentRunError: the child run failed.
        AgentRunStateError: the recorded child cannot be continued.
    """
    run = context.run
    options, inherited = child_options(agent, run)
    delegation = run if isinstance(run, RunDelegation) else None
    recorded = None if delegation is None else delegation.recorded_child(context.tool_call_id)
    if recorded is not None and options is not None:
        result = await _continue(agent, session, message, context, recorded, options, inherited)
    else:
        run_id = new_id("run")
        if delegation is not None and options is not None:
            await delegation.record_child(context.tool_call_id, {**link, "run_id": run_id})
        result = await _start(agent, session, message, context, run_id, options, inherited)
    stopped = result.status == "succeeded" and result.stop_reason == "host_policy"
    if result.status == "suspended" or stopped:
        version = result.run_state.version if result.run_state is not None else 0
        raise ChildRunSuspended(
            {**link, "run_id": result.run_id}, result.interruption, version, stopped=stopped
        )
    return result


async def _start(
    agent: Any,
    session: AgentSession,
    message: Message,
    context: ToolExecutionContext,
    run_id: str,
    options: RunStateOptions | None,
    inherited: bool,
) -> RunResult:
    config = agent.config
    plan = plan_run(
        config,
        session.metadata,
        [message],
        RunOptions(
            parent=context,
            run_state=options if inherited else None,
            turn_policy=_inherited_policy(context),
        ),
        hooks=agent.durable_hooks,
    )
    return await start_leg(session.state, config, plan, run_id=run_id)


async def _continue(
    agent: Any,
    session: AgentSession,
    message: Message,
    context: ToolExecutionContext,
    recorded: Mapping[str, Any],
    options: RunStateOptions,
    inherited: bool,
) -> RunResult:
    """Continue the recorded child from what the store holds (see [`run_child()`][prism.runtime.agents._child_runs.run_child])."""
    link = ChildRun.from_json(recorded)
    run_id = link.run_id
    record = await options.checkpoints.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=run_id)
    if record is None:
        # The child never wrote its envelope. With nothing of it stored it starts now, under
        # the recorded id; stored entries without an envelope cannot be continued.
        if any(e.run_id == run_id for e in await session.store.list(session.id)):
            raise AgentRunStateError(
                f"child run {run_id} stored entries but no run state, so it cannot be continued "
                "(give the child checkpoint_policy='every-turn')"
            )
        return await _start(agent, session, message, context, run_id, options, inherited)
    state = RunEnvelope.from_json(record.value)  # type: ignore[arg-type]
    status = state.status
    extra: dict[str, Any] = {}
    if inherited:
        extra = {
            "checkpoints": options.checkpoints,
            "definition_revision": options.definition_revision,
            "fencing_token": options.fencing_token,
        }
    if status == "succeeded" and not state.policy_stop:
        return await _stored_result(session, state)
    if status == "suspended":
        interruption = state.interruption_view()
        assert interruption is not None  # a suspended envelope has one
        open_ids = {p.approval_id for p in interruption.pending_decisions}
        decisions = [d for d in link.forwarded() if d.approval_id in open_ids]
        if decisions:
            extra["decisions"] = decisions
        elif link.decision == "approve" and not open_ids:
            extra["decision"] = "approve"
        else:  # no decision for what the child waits for yet
            raise ChildRunSuspended(link.link(), interruption, record.version)
    elif status not in ("running", "succeeded"):
        raise AgentRunStateError(f"child run {run_id} is {status}; its call cannot be answered")
    return await resume_agent_run(
        session, run_id, parent=context, turn_policy=_inherited_policy(context), **extra
    )


def _inherited_policy(context: ToolExecutionContext) -> Any:
    """The calling run's turn policy as its child inherits it (durable calling runs only)."""
    run = context.run
    return run.turn_policy if isinstance(run, RunDelegation) else None


async def _stored_result(session: AgentSession, state: RunEnvelope) -> RunResult:
    """The ``RunResult`` of a child that finished before the crash: its messages on the stored
    branch (never run again)."""
    leaf = state.leaf_id
    messages: list[Message] = []
    if isinstance(leaf, str):
        branch = await read_branch(session.store, session.id, leaf)
        messages = [
            e.message
            for e in branch
            if e.kind == "message" and e.message is not None and e.run_id == state.run_id
        ]
    return RunResult(
        run_id=state.run_id,
        session_id=session.id,
        status="succeeded",
        messages=tuple(messages),
        leaf_id=leaf if isinstance(leaf, str) else None,
    )
