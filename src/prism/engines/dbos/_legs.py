"""One leg of a run, as one engine step: start, continue or decide, from what is stored.

An engine's step is at-least-once: a worker may die inside it, and the step then runs again on
another worker. [`run_leg()`][prism.engines.dbos._legs.run_leg] therefore never trusts what it was asked to do, but what the run's
stored envelope says happened:

* no envelope — the run never reached its first checkpoint: start it (``start_leg`` with the
  scheduled run id);
* ``running`` — its worker died mid-leg: resume it from the last checkpoint (completed provider
  turns are not requested again; a call dispatched without a stored result makes the run
  *ambiguous*, reported with the call named, never dispatched again);
* ``suspended`` — waiting for an approval: apply the decision the step carries, if the
  envelope is still the one it answers (else the decision was applied before the re-execution,
  and the stored state is reported);
* a clean stop carrying a ``release`` — its worker handed it over at a turn boundary: continue
  it;
* anything else is final: report it.

A leg that ended ``failed``/``aborted`` without the store taking that end (the database went
away) raises [`LegNotStoredError`][prism.engines.dbos._legs.LegNotStoredError], so the step runs again; a run whose step runs out of
attempts is ended ``failed`` in the store by [`fail_run()`][prism.engines.dbos._legs.fail_run]: the store and the engine agree.

Every leg runs under the worker's turn policy: when the worker shuts down, the leg stops at its
next turn boundary, and the step records the hand-over in the envelope (its ``release``,
[`RELEASE_KEY`][prism.runtime.durable.RELEASE_KEY]) and reports ``released``.

A ``CheckpointConflictError`` means another worker claimed the run: this one lost it and reports
``lost`` (its workflow then touches the run no more).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, cast

from prism._util import now_iso
from prism.checkpoints import AGENT_RUN_NAMESPACE
from prism.errors import (
    ERR_PRISM_RUN_FAILED,
    AgentDecisionError,
    AgentRunError,
    AgentRunStateError,
    CheckpointConflictError,
)
from prism.runtime.durable import (
    RELEASE_KEY,
    load_agent_run_state,
    resume_agent_run,
    save_agent_run_state,
)
from prism.runtime.durable._run_envelope import RunEnvelope
from prism.runtime.run.leg import start_leg
from prism.runtime.run.options import RunOptions
from prism.runtime.run.plan import plan_run
from prism.runtime.run.turn_policy import Continue, Stop, TurnBoundaryContext, TurnPolicy
from prism.store import SessionEntry
from prism.types import (
    ErrorInfo,
    JsonValue,
    Message,
    RunResult,
    ToolResultContent,
)

from ._outcome import outcome_json
from ._registry import ServedAgent

__all__ = [
    "DRAIN_REASON",
    "LegContext",
    "LegNotStoredError",
    "fail_run",
    "run_leg",
    "wait_for_store",
]

DRAIN_REASON: Final = "worker shutdown"
"""``stop_detail`` of a leg stopped because its worker shuts down, and the ``reason`` of the
release it writes."""


class LegNotStoredError(RuntimeError):
    """A leg ended ``failed`` or ``aborted`` but the store did not take its end (the write
    failed: the database went away, or refused it), so the stored run says it goes on. The
    engine's step runs the leg again from the stored state, and gives the run up as ``failed``
    when its attempts run out (see [`fail_run()`][prism.engines.dbos._legs.fail_run])."""


@dataclass(frozen=True, slots=True)
class LegContext:
    """What a leg needs from its worker."""

    agents: Mapping[str, ServedAgent]
    """The served agents by registry name."""
    store: Any
    """The worker's PostgreSQL store (sessions, checkpoints, ledger)."""
    worker_id: str
    """This worker's id (its DBOS executor id)."""
    draining: Callable[[], bool]
    """Whether the worker is shutting down (checked at every turn boundary)."""

    def turn_policy(self) -> TurnPolicy:
        """Stop at the next turn boundary once the worker drains."""
        draining = self.draining

        def stop(_: TurnBoundaryContext) -> Continue | Stop:
            return Stop(DRAIN_REASON) if draining() else Continue()

        return TurnPolicy(stop=stop)


async def run_leg(
    ctx: LegContext,
    run_id: str,
    request: Mapping[str, Any],
    decision: Mapping[str, Any] | None,
    answers_version: int | None,
) -> dict[str, JsonValue]:
    """Run one leg of ``run_id`` from what is stored; return its outcome object.

    Args:
        ctx: The worker's side.
        run_id: The run (workflow) id.
        request: The submitted run: ``agent``, ``session_id``, ``input``, ``options``.
        decision: The decision message this leg applies (``decision`` and/or ``decisions``),
            or ``None``.
        answers_version: The envelope version of the suspension ``decision`` answers.

    Returns:
        An outcome object (``outcome_json()``) with status
        ``succeeded`` / ``failed`` / ``aborted`` / ``denied`` / ``suspended`` (with a ``note``
        when the decision was refused) / ``ambiguous`` / ``released`` / ``lost``.
    """
    served = ctx.agents.get(str(request.get("agent")))
    if served is None:
        return outcome_json(
            "failed",
            worker=ctx.worker_id,
            note=f"this worker serves no agent {request.get('agent')!r}",
        )
    agent = served.agent
    store = ctx.store
    policy = ctx.turn_policy()
    try:
        record = await store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=run_id)
        if record is None:
            result = await _start(ctx, served, run_id, request, policy)
        else:
            loaded = await load_agent_run_state(store, run_id=run_id)
            state = RunEnvelope.from_json(loaded.state)
            version = loaded.record.version
            status = state.status
            if status == "running":
                result = await resume_agent_run(
                    agent, loaded, decision="continue", turn_policy=policy
                )
            elif status == "suspended" and decision is not None and answers_version == version:
                choice = decision.get("decision") or "continue"
                decisions = decision.get("decisions")
                if choice not in ("approve", "deny") and not decisions:
                    stored = await _stored_result(store, state, version)
                    return outcome_json(
                        "suspended",
                        result=stored,
                        worker=ctx.worker_id,
                        note="a run waiting for an approval takes decision='approve' or "
                        "'deny', or decisions=[...]",
                    )
                result = await resume_agent_run(
                    agent,
                    loaded,
                    decision="continue" if decisions else cast(Literal["approve", "deny"], choice),
                    decisions=decisions,
                    turn_policy=policy,
                )
            elif status == "succeeded" and state.release is not None:
                result = await resume_agent_run(
                    agent, loaded, decision="continue", turn_policy=policy
                )
            else:
                result = await _stored_result(store, state, version)
    except CheckpointConflictError:
        return outcome_json("lost", worker=ctx.worker_id)
    except AgentDecisionError as exc:
        # nothing was written: the run still waits on the same suspension
        loaded = await load_agent_run_state(store, run_id=run_id)
        stored = await _stored_result(
            store, RunEnvelope.from_json(loaded.state), loaded.record.version
        )
        return outcome_json("suspended", result=stored, worker=ctx.worker_id, note=exc.message)
    except AgentRunStateError as exc:
        try:
            calls = await ambiguous_calls(store, run_id)
        except AgentRunStateError:  # no readable envelope: nothing was dispatched
            calls = ()
        if calls:
            return outcome_json("ambiguous", calls=calls, worker=ctx.worker_id)
        return outcome_json("failed", worker=ctx.worker_id, note=exc.message)
    except AgentRunError as exc:
        failed = exc.result
        assert isinstance(failed, RunResult)
        stored = failed.run_state
        if stored is not None and stored.status != failed.status:
            # The store refused the leg's end (it failed too, or is unreachable): the stored
            # run still goes on, so the leg has not ended. The step runs it again from there.
            raise LegNotStoredError(
                f"run {run_id}: the leg ended {failed.status}, but the store did not take its "
                f"end and still says {stored.status}"
                + ("" if failed.error is None else f" ({failed.error.message})")
            ) from exc
        return outcome_json(failed.status, result=failed, worker=ctx.worker_id)
    if (
        result.status == "succeeded"
        and result.stop_reason == "host_policy"
        and result.stop_detail == DRAIN_REASON
    ):
        await _release(ctx, run_id)
        return outcome_json("released", result=result, worker=ctx.worker_id)
    return outcome_json(result.status, result=result, worker=ctx.worker_id)


async def fail_run(ctx: LegContext, run_id: str, reason: str) -> dict[str, JsonValue]:
    """The outcome of a run whose leg the engine gave up on (its step ran out of retries), with
    the stored run made to agree: an envelope that is not final (``running``, ``suspended``,
    released) is written ``failed`` (compare-and-set); a final one is reported as stored.

    Args:
        ctx: The worker's side.
        run_id: The run.
        reason: What the last attempt raised.

    Returns:
        A ``failed`` outcome (its ``RunResult`` carries the reason as an ``ERR_PRISM_RUN_FAILED``
        error, and ``note`` says it), or the outcome of the stored final state.

    Raises:
        CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — another process wrote the
            run meanwhile (the step tries again).
        Exception: whatever the store raises (the step tries again).
    """
    store = ctx.store
    note = f"the engine gave up on the run: {reason}"
    if await store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=run_id) is None:
        return outcome_json("failed", worker=ctx.worker_id, note=note)  # nothing stored
    loaded = await load_agent_run_state(store, run_id=run_id)
    state = RunEnvelope.from_json(loaded.state)
    version = loaded.record.version
    if not state.continuable and state.release is None:  # the leg's end was stored after all
        stored = await _stored_result(store, state, version)
        return outcome_json(stored.status, result=stored, worker=ctx.worker_id)
    state = state.without("interruption", "stop_reason", "loop_state", RELEASE_KEY, status="failed")
    saved = await save_agent_run_state(
        checkpoints=store, state=state.to_json(), expected_version=version
    )
    failed = await _stored_result(store, state, saved.record.version)
    error = ErrorInfo(message=note, code=ERR_PRISM_RUN_FAILED)
    return outcome_json(
        "failed", result=replace(failed, error=error), worker=ctx.worker_id, note=note
    )


async def wait_for_store(store: Any, timeout_s: float) -> bool:
    """Wait until the store's database answers (``SELECT 1`` through its pool, every half
    second), at most ``timeout_s``; ``False`` when it never did."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        try:
            async with store.pool.connection(timeout=max(0.5, deadline - loop.time())) as conn:
                await conn.execute("SELECT 1")
            return True
        except Exception:
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.5)


async def _start(
    ctx: LegContext,
    served: ServedAgent,
    run_id: str,
    request: Mapping[str, Any],
    policy: TurnPolicy,
) -> RunResult:
    """The first leg of a run: ``start_leg`` under the scheduled run id."""
    agent = served.agent
    session = agent.create_session(str(request["session_id"]))
    raw_input = request.get("input")
    run_input: Any = (
        [Message.from_dict(m) for m in raw_input] if isinstance(raw_input, list) else raw_input
    )
    options = RunOptions.coerce(dict(request.get("options") or {})).with_overrides(
        {"turn_policy": policy}
    )
    plan = plan_run(agent.config, session.metadata, run_input, options, hooks=agent.durable_hooks)
    return await start_leg(session.state, agent.config, plan, run_id=run_id)


async def _release(ctx: LegContext, run_id: str) -> None:
    """Write the hand-over into the clean-stop envelope this leg left (compare-and-set)."""
    loaded = await load_agent_run_state(ctx.store, run_id=run_id)
    release = {"by": ctx.worker_id, "reason": DRAIN_REASON, "at": now_iso()}
    state = replace(RunEnvelope.from_json(loaded.state), release=release)
    await save_agent_run_state(
        checkpoints=ctx.store, state=state.to_json(), expected_version=loaded.record.version
    )


async def _stored_result(store: Any, state: RunEnvelope, version: int) -> RunResult:
    """The ``RunResult`` a stored envelope describes (a step re-executed after its leg ended):
    status, stop reason, state view and interruption from the envelope; the run's messages on
    the stored branch."""
    leaf = state.leaf_id
    messages: list[Message] = []
    if isinstance(leaf, str):
        branch: Sequence[SessionEntry] = await store.read_branch(state.session_id, leaf)
        messages = [
            e.message
            for e in branch
            if e.kind == "message" and e.message is not None and e.run_id == state.run_id
        ]
    view = state.view(version)
    return RunResult(
        run_id=state.run_id,
        session_id=state.session_id,
        status=view.status,  # type: ignore[arg-type]  # never "running": a leg ended
        stop_reason=view.stop_reason,
        messages=messages,
        run_state=view,
        interruption=view.interruption,
        leaf_id=leaf if isinstance(leaf, str) else None,
    )


async def ambiguous_calls(store: Any, run_id: str) -> tuple[tuple[str, str], ...]:
    """``(call id, tool name)`` of the calls of ``run_id``'s envelope that are ``dispatched``
    and answered by no stored result row of the run: the calls whose outcome is unknown (an agent
    tool's call that recorded its child run is not: a resume continues the child)."""
    loaded = await load_agent_run_state(store, run_id=run_id)
    state = RunEnvelope.from_json(loaded.state)
    dispatched = [
        entry.tool_call()
        for entry in state.calls
        if entry.status == "dispatched"
        and entry.child is None  # a call that started a child run resumes the child
    ]
    if not dispatched:
        return ()
    answered: set[str] = set()
    for entry in await store.list(state.session_id):
        message = entry.message
        if entry.run_id != run_id or message is None or message.role != "tool":
            continue
        answered.update(
            part.tool_call_id for part in message.content if isinstance(part, ToolResultContent)
        )
    return tuple((call.id, call.name) for call in dispatched if call.id not in answered)
