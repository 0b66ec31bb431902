"""One run leg: setup, the loop, and the success / suspension / failure / cleanup envelope.

A *leg* is one uninterrupted execution of a run in this process: a fresh run has one leg; a
durable run that suspends or stops cleanly continues later in a resumed leg with the same run id.
[`start_leg()`][prism.runtime.run.leg.start_leg] and [`resume_leg()`][prism.runtime.run.leg.resume_leg] start a leg on a session's [`SessionState`][prism.runtime.run.leg.SessionState];
[`RunLeg`][prism.runtime.run.leg.RunLeg] is the leg itself:

* setup — provider, ``agent_started``, the stored branch, the model change, the redacted and
  guarded input, auto-compaction, the loop, the request assembler and the provider attempts;
* ``loop.run(ctx)`` with the leg's [`RunContext`][prism.runtime.run.context.RunContext];
* the outcome — success (``agent_finished`` and the result), suspension (``agent_suspended``), or
  failure (open tool calls answered, ``error``, the error to raise);
* cleanup — always, shielded from cancellation: worker threads, steer state, ledger records,
  observers, and the session freed.

The run path, top to bottom: [`prism.runtime.run.session`][prism.runtime.run.session] → ``prism.runtime.run.plan`` → this
module → [`prism.runtime.run.context`][prism.runtime.run.context] → [`prism.runtime.run.attempts`][prism.runtime.run.attempts].
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from inspect import isawaitable
from typing import Any

from prism._util import new_id
from prism.assembly import select_skills
from prism.errors import (
    AbortError,
    AgentRunError,
    AgentRunLimitError,
    AgentRunSuspended,
    AgentSessionBusyError,
    ArtifactFailedError,
    GuardrailError,
    PrismConfigError,
    ProviderTurnError,
)
from prism.events import (
    AgentEvent,
    AgentFinishedEvent,
    AgentResumedEvent,
    AgentStartedEvent,
    AgentSuspendedEvent,
    ArtifactFailedEvent,
    ErrorEvent,
)
from prism.guardrails import run_guardrails
from prism.ledger import finish_run_record, start_run_record
from prism.loops.contracts import AgentLoopStrategy
from prism.redaction import SecretRedactor, error_to_error_info, redacted_cause
from prism.runtime.run._handoff import RunHandoff, handed_off_to
from prism.runtime.run._setup import (
    auto_compact,
    close_leg_resources,
    open_tool_sources,
    release_context,
    resolve_provider,
    setup_loop,
    start_trace,
)
from prism.runtime.run._shield import shielded
from prism.runtime.run.config import AgentConfig
from prism.runtime.run.context import RunContext
from prism.runtime.run.plan import RunPlan
from prism.runtime.run.seam import LegHooks, ResumePoint
from prism.runtime.run.state import SessionState
from prism.runtime.run.turn_policy import TurnBoundaryContext, TurnPolicyStop, evaluate_turn_policy
from prism.store import (
    current_model,
    history_from_branch,
    should_auto_compact,
)
from prism.types import (
    ErrorInfo,
    RunResult,
    RunStatus,
    Usage,
    to_messages,
)

__all__ = ["RunLeg", "resume_leg", "start_leg"]

_log = logging.getLogger("prism")


async def start_leg(
    state: SessionState, config: AgentConfig, plan: RunPlan, *, run_id: str | None = None
) -> RunResult:
    """Run a fresh leg of a new run on the session ``state`` (the caller checked it is free).

    ``run_id`` names the run (a new ``run_…`` id when ``None``); an engine that schedules runs
    passes the id it scheduled the run under, so the run and its checkpoint share it.

    Raises:
        AgentRunError: as [`RunLeg.execute()`][prism.runtime.run.leg.RunLeg.execute].
    """
    leg = RunLeg(state, config, plan, run_id if run_id is not None else new_id("run"))
    state.begin(leg)
    return await leg.execute()


async def resume_leg(
    state: SessionState,
    config: AgentConfig,
    plan: RunPlan,
    claim: Callable[[], Awaitable[ResumePoint]],
) -> RunResult:
    """Run a resumed leg of a durable run.

    The session is marked busy, then ``claim()`` (the compare-and-set claim of the stored run) is
    awaited before any event; its failure frees the session and is raised as is. The leg has the
    stored ``run_id``, the stored input or none, restored limit counters, and starts from the stored
    leaf.

    Raises:
        AgentSessionBusyError: ``ERR_PRISM_SESSION_BUSY`` — a run is active.
        CheckpointConflictError: another resumer claimed the run first.
        AgentRunError: the resumed leg failed.
    """
    if state.busy:
        raise AgentSessionBusyError()
    state.busy = True
    try:
        resume = await claim()
    except BaseException:
        state.busy = False
        raise
    plan.input = list(resume.input) if resume.input is not None else []
    state.move_leaf(resume.leaf_id, fork=resume.fork)
    leg = RunLeg(state, config, plan, resume.run_id, resume)
    state.begin(leg)
    return await leg.execute()


class RunLeg:
    """One run leg; started by [`start_leg()`][prism.runtime.run.leg.start_leg] or [`resume_leg()`][prism.runtime.run.leg.resume_leg].

    Args:
        state: The session state (marked active by the caller).
        config: The agent configuration.
        plan: The resolved run options.
        run_id: The run id (``run_…``).
        resume: Where a resumed leg starts from, else ``None``.
    """

    __slots__ = (
        "_abort_reason",
        "_error",
        "_failure_cause",
        "_start_record",
        "_status",
        "_stop_detail",
        "_stop_reason",
        "_unbridge",
        "config",
        "ctx",
        "durable",
        "loop",
        "plan",
        "resume",
        "run_id",
    )

    def __init__(
        self,
        state: SessionState,
        config: AgentConfig,
        plan: RunPlan,
        run_id: str,
        resume: ResumePoint | None = None,
    ) -> None:
        self.config = config
        self.plan = plan
        self.run_id = run_id
        self.resume = resume
        ctx = RunContext(
            state=state,
            config=config,
            plan=plan,
            run_id=run_id,
            counters=None if resume is None else resume.counters,
        )
        self.ctx = ctx
        self._unbridge: Callable[[], None] | None = None
        if plan.signal is not None:
            self._unbridge = plan.signal.add_listener(ctx.controller.abort)
        # The turn boundary's hooks, in order: the approval suspension and the turn policy
        # before the turn is charged, the every-turn checkpoint after it.
        self.durable: LegHooks | None = None
        if plan.durable is not None:
            durable = plan.durable_hooks.open_leg(ctx, plan.durable, resume)
            self.durable = durable
            ctx.durable = durable
            ctx.boundary.before_charge += (durable.approval_hook,)
            if durable.every_turn:
                ctx.boundary.after_charge += (durable.checkpoint_hook,)
        if plan.turn_policy is not None:
            ctx.boundary.before_charge += (self._turn_policy_hook,)
        self.loop: AgentLoopStrategy | None = None
        self._start_record: Any = None
        self._failure_cause: BaseException | None = None
        self._status: RunStatus | None = None
        self._stop_reason: Any = None
        self._stop_detail: str | None = None
        self._abort_reason: str | None = None
        self._error: ErrorInfo | None = None

    # ----------------------------------------------------------------- the session's view

    @property
    def redactor(self) -> SecretRedactor | None:
        """The run's redactor."""
        return self.ctx.redactor

    def emit(self, event: AgentEvent, /) -> None:
        """Emit one event of this run (see [`RunContext.emit()`][prism.runtime.run.leg.RunContext.emit])."""
        self.ctx.emit(event)

    def abort(self, reason: object) -> None:
        """Abort the run's signal with ``reason``."""
        self.ctx.controller.abort(reason)

    def soft_interrupt(self) -> bool:
        """Interrupt the streaming provider attempt; ``False`` before setup built the attempts."""
        attempts = self.ctx.attempts
        if attempts is None:
            return False
        attempts.soft_interrupt()
        return True

    async def _turn_policy_hook(self, turn: int) -> None:
        """The turn policy at the boundary: a stop is raised (the boundary keeps it sticky)."""
        policy = self.plan.turn_policy
        assert policy is not None
        ctx = self.ctx
        context = TurnBoundaryContext(
            session_id=ctx.session_id,
            run_id=self.run_id,
            turn=turn,
            turns=ctx.boundary.completed,
            tool_calls=ctx.tool_calls,
            usage=ctx.accumulator.value(),
            metadata=ctx.metadata,
        )
        stop = evaluate_turn_policy(policy, context, redactor=ctx.redactor)
        if stop is not None:
            raise stop

    # ----------------------------------------------------------------- the envelope

    async def execute(self) -> RunResult:
        """Run the leg: setup and loop, then the outcome; cleanup always runs.

        Returns:
            The ``succeeded`` or ``suspended`` ``RunResult``.

        Raises:
            AgentRunError: the run failed or was aborted (``AgentRunLimitError`` for a breach).
            asyncio.CancelledError: the task awaiting ``run()`` was cancelled (after cleanup).
            RunLedgerError: a ledger write failed (found during cleanup).
        """
        outcome: BaseException | None = None
        try:
            try:
                return await self._run()
            except AgentRunSuspended as exc:
                outcome = exc
                result: RunResult = await shielded(self._suspended(exc))
                return result
            except asyncio.CancelledError as exc:
                self.ctx.controller.abort(AbortError("run task cancelled"))
                outcome = exc
                await shielded(self._failure(exc))
                raise
            except Exception as exc:
                outcome = exc
                error = await shielded(self._failure(exc))
                cause = redacted_cause(self._failure_cause or exc, self.ctx.redactor)
            # Raised outside the handler, so the raw failure is not its ``__context__``.
            raise error from cause
        finally:  # without tool sources, a ledger or a trace, cleanup calls no host code
            ctx = self.ctx
            inline = ctx.tool_scope is None and not ctx.ledger_on and ctx.trace is None
            await shielded(self._cleanup(outcome), inline=inline)

    async def _run(self) -> RunResult:
        """Set up, run the loop, check what the loop left, then the success outcome."""
        config = self.config
        plan = self.plan
        ctx = self.ctx
        state = ctx.state
        provider = config.provider
        if provider is None:
            provider = await resolve_provider(ctx)
        start_trace(ctx, provider, self.resume)
        if config.tool_sources:
            await open_tool_sources(ctx)
        ctx.signal.throw_if_aborted()
        ctx.tracker.start()
        if ctx.observed():  # no event object when nothing observes the run
            ctx.emit(AgentStartedEvent(session_id=ctx.session_id, run_id=self.run_id))
        resume = self.resume
        if resume is not None:
            ctx.emit(
                AgentResumedEvent(
                    session_id=ctx.session_id, run_id=self.run_id, version=resume.version
                )
            )
        if not state.leaf_resolved:
            await state.ensure_leaf()
        if ctx.ledger_on:  # the run record exists only for a ledger
            self._start_record = start_run_record(
                run_id=self.run_id,
                session_id=ctx.session_id,
                branch_id=state.leaf_id,
                model=plan.model,
                idempotency_key=plan.idempotency_key,
                metadata=dict(ctx.metadata) or None,
                ownership=plan.ownership,
                agent_id=config.id or config.name,
            )
            ctx.writer.append_run(self._start_record)
        # The stored branch becomes the history; a model change is recorded.
        branch, sizes = await state.read_branch_for_run(ctx.redactor)
        ctx.codec.take_sizes(sizes)
        messages, summaries = history_from_branch(branch)
        ctx.history.extend(messages)
        active_skills = select_skills(plan.skills, plan.active_skills)
        handed_to = None if resume is None else handed_off_to(branch, self.run_id)
        # a resumed run that handed over keeps the target's model (restored below), not the plan's
        current = plan.model if handed_to else current_model(branch) or config.model
        if plan.model is not current and plan.model.to_dict() != current.to_dict():
            entry = await ctx.append_run_entry(
                "model_change", model=plan.model, previous_model=current
            )
            branch.append(entry)
        # The input: redacted, guarded, stored.
        redactor, given = ctx.redactor, to_messages(plan.input)
        ctx.input_messages = tuple(given if redactor is None else map(redactor.redact, given))
        await self._guard_input(ctx.input_messages)
        durable = self.durable
        if durable is not None and resume is None:
            # A fresh every-turn leg checkpoints the input before storing it.
            await durable.checkpoint_input(ctx.input_messages)
        for message in ctx.input_messages:
            await ctx.append_message(message)
            assert ctx.last_entry is not None
            branch.append(ctx.last_entry)
        compaction = plan.compaction
        if compaction is not None and should_auto_compact(compaction, branch):
            summaries = await auto_compact(ctx, compaction)
        # The loop, its needs, the request assembler and the provider attempts.
        loop, needs = setup_loop(ctx, provider, active_skills, summaries)
        del branch, messages, summaries  # not kept alive while the loop runs
        self.loop = loop
        if needs.handoffs or handed_to is not None:
            ctx.handoff = await RunHandoff.attach(ctx, loop, needs.handoffs, handed_to)
        if durable is not None:
            # A resumed leg restores the loop, then replays the decided calls.
            durable.loop = loop
            durable.restore_loop(ctx)
            await durable.replay(ctx)
        stop: TurnPolicyStop | None = None
        try:
            pending = loop.run(ctx)
            if not isawaitable(pending):  # a custom loop's run must be async
                raise PrismConfigError(
                    f"custom loop {loop.name}: run(ctx) must be async "
                    f"(returned {type(pending).__name__})"
                )
            fallback = await pending
        except TurnPolicyStop as exc:
            stop, fallback = exc, None
        recorded = ctx.boundary.failure
        if isinstance(recorded, TurnPolicyStop):
            stop = recorded  # sticky even when a custom loop swallowed it
        elif recorded is not None:
            raise recorded
        if stop is None:
            ctx.check_live()
            if durable is not None:
                await durable.after_loop()  # an open approval round suspends
            if needs.artifact and not ctx.artifact_finished:
                raise _artifact_failure(ctx.last_artifact_failed)
        return await self._success(fallback, stop)

    async def _guard_input(self, input_messages: tuple[Any, ...]) -> None:
        """The input guardrails: a block fails the run; an ``interrupt`` suspends a
        fresh durable leg and counts as approved in a resumed one."""
        ctx = self.ctx
        guardrails = self.plan.guardrails
        if guardrails is None or not guardrails.input or not input_messages:
            return
        outcome = await run_guardrails(
            "input",
            guardrails,
            input_messages,
            ctx.guardrail_context("input", input_messages),
            redactor=ctx.redactor,
            emit=ctx.emit,
        )
        record = outcome.terminal
        if record is None:
            return
        durable = self.durable
        if record.action != "interrupt" or durable is None:
            raise GuardrailError(record)
        if self.resume is None:
            raise await durable.suspend_for_input(record, input_messages)

    # ----------------------------------------------------------------- outcomes

    async def _success(self, fallback: Any, stop: TurnPolicyStop | None) -> RunResult:
        """Usage, the ``run_total`` row, ledger drain, ``agent_finished``, the result. A
        turn-policy stop overrides ``ctx.finish_reason`` and leaves ``artifact`` unset."""
        ctx = self.ctx
        usage = ctx.accumulator.value()
        if usage is None and isinstance(fallback, Usage):
            usage = fallback
        if ctx.ledger_on:
            writer = ctx.writer
            if usage is not None:
                writer.record_usage("run_total", usage)
            await writer.drain()
        finish_reason: Any = ctx.finish_reason
        stop_detail: str | None = None
        artifact = ctx.artifact
        if stop is not None:
            finish_reason, stop_detail, artifact = stop.stop_reason, stop.stop_detail, None
        run_state = None
        durable = self.durable
        if durable is not None:
            run_state = await durable.write_success(None if stop is None else stop.stop_reason)
        if ctx.observed():
            ctx.emit_terminal(
                AgentFinishedEvent(
                    session_id=ctx.session_id,
                    run_id=self.run_id,
                    usage=usage,
                    finish_reason=finish_reason,
                    stop_detail=stop_detail,
                    provider_stop_reason=ctx.provider_stop_reason,
                )
            )
        ctx.terminal_emitted = True
        self._status = "succeeded"
        self._stop_reason = finish_reason
        self._stop_detail = stop_detail
        return RunResult(
            run_id=self.run_id,
            session_id=ctx.session_id,
            status="succeeded",
            stop_reason=finish_reason,
            stop_detail=stop_detail,
            usage=usage,
            messages=tuple(ctx.messages),
            artifact=artifact,
            run_state=run_state,
            leaf_id=ctx.state.leaf_id,
            provider_stop_reason=ctx.provider_stop_reason,
        )

    async def _suspended(self, signal: AgentRunSuspended) -> RunResult:
        """``agent_suspended`` and a ``suspended`` result; gated calls stay open."""
        ctx = self.ctx
        state: Any = signal.state
        interruption: Any = signal.interruption
        version = getattr(state, "version", 0)
        ctx.emit_terminal(
            AgentSuspendedEvent(
                session_id=ctx.session_id,
                run_id=self.run_id,
                interruption=interruption,
                version=version,
            )
        )
        self._status = "suspended"
        return RunResult(
            run_id=self.run_id,
            session_id=ctx.session_id,
            status="suspended",
            usage=ctx.accumulator.value(),
            messages=tuple(ctx.messages),
            run_state=state,
            interruption=interruption,
            leaf_id=ctx.state.leaf_id,
            provider_stop_reason=ctx.provider_stop_reason,
        )

    def _error_info(self, exc: BaseException) -> ErrorInfo:
        redactor = self.ctx.redactor
        if isinstance(exc, ProviderTurnError):
            info = exc.info
            return redactor.redact(info) if redactor is not None else info
        if isinstance(exc, asyncio.CancelledError):
            reason = self.ctx.signal.reason
            return error_to_error_info(reason if reason is not None else exc, redactor or ())
        return error_to_error_info(exc, redactor or ())

    async def _failure(self, exc: BaseException) -> AgentRunError:
        """Error info, open calls answered, ``error`` event, the error to raise."""
        ctx = self.ctx
        info = self._error_info(exc)
        await ctx.answer_open_calls()
        ctx.emit_terminal(ErrorEvent(session_id=ctx.session_id, run_id=self.run_id, error=info))
        breach = ctx.tracker.breach
        signal = ctx.signal
        status: RunStatus
        if breach is not None:
            status = "failed"
        elif signal.aborted:
            status = "aborted"
        else:
            status = "failed"
        self._status = status
        self._error = info
        abort_reason: str | None = None
        if signal.aborted and breach is None:
            abort_reason = str(signal.reason)
            if ctx.redactor is not None:
                abort_reason = ctx.redactor.redact(abort_reason)
        self._abort_reason = abort_reason
        run_state = None
        durable = self.durable
        if durable is not None:
            try:
                run_state = await durable.write_failure(status)
            except Exception as write_error:  # report both failures
                write_error.__context__ = exc
                self._failure_cause = write_error
                run_state = durable.state
        result = RunResult(
            run_id=self.run_id,
            session_id=ctx.session_id,
            status=status,
            usage=ctx.accumulator.value(),
            messages=tuple(ctx.messages),
            error=info,
            leaf_id=ctx.state.leaf_id,
            limit=breach,
            abort_reason=abort_reason,
            run_state=run_state,
            provider_stop_reason=ctx.provider_stop_reason,
        )
        if breach is not None:
            return AgentRunLimitError(result=result, breach=breach)
        return AgentRunError(result=result)

    async def _cleanup(self, outcome: BaseException | None) -> None:
        """Worker threads, steer state, ledger, timers, observers; the session and ctx freed."""
        ctx = self.ctx
        for fut in ctx.worker_threads:
            try:
                await fut
            except BaseException:
                pass
        if ctx.tool_scope is not None or ctx.trace is not None:
            await close_leg_resources(ctx)
        state = ctx.state
        state.clear_steers()
        if state.branch is not None:  # keep what this run measured of the history held
            state.branch.record(ctx.redactor, ctx.codec.measured)
        if self.durable is not None:
            self.durable.close()
        ctx.tracker.dispose()
        if self._unbridge is not None:
            self._unbridge()
            self._unbridge = None
        ledger_error: BaseException | None = None
        writer = ctx.writer
        if ctx.ledger_on:  # without a ledger the writer has nothing to drain
            try:
                await writer.drain()
            except Exception as exc:
                ledger_error = exc
        if self._start_record is not None and writer.enabled:
            status = self._status or "failed"
            writer.append_run(
                finish_run_record(
                    self._start_record,
                    status=status,
                    abort_reason=self._abort_reason,
                    error=self._error,
                    stop_reason=self._stop_reason if status == "succeeded" else None,
                    stop_detail=self._stop_detail if status == "succeeded" else None,
                )
            )
            try:
                await writer.drain()
            except Exception as exc:
                ledger_error = ledger_error or exc
        observers = ctx.observers
        if observers.dispatching:
            await observers.drain()
        observers.close_all()
        state.keep_branch()
        state.finish(self)
        release_context(ctx)
        if ledger_error is not None and not isinstance(outcome, asyncio.CancelledError):
            raise ledger_error


def _artifact_failure(event: ArtifactFailedEvent | None) -> ArtifactFailedError:
    """The failure of an artifact loop that reported no validated artifact."""
    if event is None:
        return ArtifactFailedError("artifact loop ended without a validated artifact")
    result = event.result
    message = result.errors[0].message if result.errors else None
    reason: Any = (result.metadata or {}).get("reason")
    code = reason if isinstance(reason, (str, int)) and not isinstance(reason, bool) else None
    return ArtifactFailedError(
        message or "artifact loop ended without a validated artifact",
        code=code if code is not None else "artifact_failed",
        validation=result,
    )
