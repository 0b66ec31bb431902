"""One run leg: activation, setup, the loop, and the success/failure/cleanup envelope (RUN-9..RUN-24).

:class:`RunLeg` is created by ``AgentSession.run()`` after preflight. It owns the run's abort
controller, limit tracker, usage accumulator, ledger writer, request assembler and codec, the
provider-turn runner and the live history, and builds the one :class:`RunContext` (the
``LoopContext``, CON-28) the loop receives. The loop reaches the model, tools, store and events only
through that context (ARCH-2).

Per-turn work is constant in the history length (ARCH-15): assembling copies message references,
redaction and byte counting are incremental (:mod:`prism.runtime._request_codec`), store appends
and event emission are O(1) in the history, and the open-tool-call bookkeeping of RUN-24 is a dict.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import types
from collections.abc import Callable, Coroutine, Generator, Mapping, Sequence
from inspect import isawaitable
from typing import TYPE_CHECKING, Any, Final

from prism._util import frozen_builder, maybe_await, new_id, now_iso
from prism.abort import AbortController, AbortSignal
from prism.assembly import RequestAssembler, select_skills
from prism.errors import (
    AbortError,
    AgentRunError,
    AgentRunLimitError,
    AgentRunSuspended,
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
    ArtifactFinishedEvent,
    ErrorEvent,
    QueueUpdatedEvent,
    RunLimitExceededEvent,
    SteerRejectedEvent,
    TurnStartedEvent,
)
from prism.guardrails import GuardrailContext, run_guardrails
from prism.ledger import LedgerWriter, finish_run_record, start_run_record
from prism.limits import RunLimitTracker
from prism.loops.contracts import AgentLoopStrategy
from prism.loops.resolve import resolve_loop, resolve_tool_concurrency
from prism.middleware import MiddlewareRegistry
from prism.redaction import SecretRedactor, error_to_error_info, redact_agent_event, redacted_cause
from prism.runtime._context import RunContext, RunPlan, TurnBoundary
from prism.runtime._durable_leg import DurableDriver
from prism.runtime._observers import SessionObservers
from prism.runtime._request_codec import LiveHistory, RequestCodec
from prism.runtime._setup import auto_compact, resolve_provider, setup_assembly, setup_runner
from prism.runtime.durable import ResumePoint
from prism.runtime.provider_turn import (
    PolicyContext,
    ProviderRequestPolicy,
    ProviderRequestPolicyResult,
    ProviderTurnRunner,
)
from prism.runtime.turn_policy import (
    TurnBoundaryContext,
    TurnPolicyStop,
    evaluate_turn_policy,
)
from prism.store import (
    SessionEntry,
    SessionStore,
    current_model,
    history_from_branch,
    new_session_entry,
    read_branch,
    should_auto_compact,
)
from prism.structured_output import resolve_structured_output
from prism.tools import dispatch_tool_call
from prism.types import (
    AgentInput,
    ErrorInfo,
    Message,
    ProviderRequest,
    ProviderRequestOptions,
    ProviderTurnResult,
    RunResult,
    RunStatus,
    ToolCallContent,
    ToolExecutionContext,
    ToolResult,
    ToolResultContent,
    Usage,
    merge_provider_options,
    to_messages,
    tool_result_message,
)
from prism.usage import UsageAccumulator

if TYPE_CHECKING:
    from prism.runtime.agent import AgentConfig
    from prism.runtime.session import AgentSession

__all__ = ["RunLeg"]

_log = logging.getLogger("prism")

_new_entry = frozen_builder(SessionEntry)
"""``SessionEntry(**fields)`` without the generic frozen ``__init__`` (ARCH-15)."""

INTERRUPTED_MESSAGE: Final = "tool call interrupted: the run ended before its result was recorded"
"""Message of the rows that answer calls left open by a failed run (RUN-24)."""


# --------------------------------------------------------------------------- the leg


def _stamp(event: Any, session_id: str, run_id: str) -> Any:
    sid = getattr(event, "session_id", session_id)
    rid = getattr(event, "run_id", run_id)
    if sid and rid:
        return event
    changes: dict[str, str] = {}
    if not sid and hasattr(event, "session_id"):
        changes["session_id"] = session_id
    if not rid and hasattr(event, "run_id"):
        changes["run_id"] = run_id
    return dataclasses.replace(event, **changes) if changes else event


async def _shielded(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` to completion even if the caller is cancelled meanwhile (RUN-10).

    ``coro`` first runs inline: when it finishes without suspending (the usual cleanup of a run
    with nothing left to wait for) no task is created (ARCH-15); a cancellation cannot reach code
    that never suspends. Once it suspends, the rest runs in its own task, shielded from the
    caller's cancellation. A cancellation that arrives while waiting is re-raised once ``coro``
    has finished.
    """
    try:
        first = coro.send(None)
    except StopIteration as done:
        return done.value
    task = asyncio.ensure_future(_continue(coro, first))
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                if task.cancelled():
                    raise
                cancelled = True
                break
            cancelled = True
            continue
        break
    if cancelled:
        task.result()  # surface the task's own exception first
        raise asyncio.CancelledError
    return result


async def _continue(coro: Coroutine[Any, Any, Any], first: Any) -> Any:
    """Drive a coroutine that already ran up to its first suspension (it yielded ``first``)."""
    return await _resume(coro, first)


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], yielded: Any) -> Generator[Any, Any, Any]:
    """The ``yield from`` protocol for a started coroutine: hand its yielded value to the event
    loop, then forward what comes back (a value, or an exception thrown in) until it returns."""
    while True:
        try:
            sent = yield yielded
        except BaseException as exc:
            try:
                yielded = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as done:
                return done.value


class RunLeg:
    """One run leg of a session (RUN-9..RUN-24). Created by ``AgentSession.run()``.

    Args:
        session: The owning session (marked active by the caller).
        plan: The preflighted, resolved run options.
        run_id: The run id (``run_…``).
    """

    def __init__(
        self,
        session: AgentSession,
        plan: RunPlan,
        run_id: str,
        resume: ResumePoint | None = None,
    ) -> None:
        config: AgentConfig = session.agent.config
        self.session = session
        self.config = config
        self.plan = plan
        self.session_id = session.id
        self.run_id = run_id
        self.redactor: SecretRedactor | None = plan.redactor
        self.metadata: Mapping[str, Any] = plan.metadata
        self.store: SessionStore = session.store
        self.observers: SessionObservers = session._observers
        # RUN-9 activation
        self.controller = AbortController()
        self.signal: AbortSignal = self.controller.signal
        self._unbridge: Callable[[], None] | None = None
        if plan.signal is not None:
            self._unbridge = plan.signal.add_listener(self.controller.abort)
        self.tracker = RunLimitTracker(
            plan.limits,
            on_breach=self._on_breach,
            counters=None if resume is None else resume.counters,
        )
        self.resume = resume
        self.accumulator = UsageAccumulator()
        self.writer = LedgerWriter(
            plan.run_ledger,
            session_id=self.session_id,
            run_id=run_id,
            redactor=self.redactor,
            ownership=plan.ownership,
        )
        self._ledger_on = self.writer.enabled
        self.middleware: MiddlewareRegistry | None = config.middleware
        self.registry = config.tools
        self.history: LiveHistory = LiveHistory()
        self.input_messages: tuple[Message, ...] = ()
        self.messages: list[Message] = []
        self.last_entry: SessionEntry | None = None
        self._open_calls: dict[str, ToolCallContent] = {}
        """RUN-24: host calls of stored assistant messages without a stored result row, in call
        order (also what an ``every-turn`` dispatch marking lists, DB-10)."""
        self._terminal_emitted = False
        self._start_record: Any = None
        self._last_turn = 1
        self._artifact_finished = False
        self._last_artifact_failed: ArtifactFailedEvent | None = None
        self._worker_threads: list[asyncio.Future[Any]] = []
        self._fork_next = session._fork_next
        self.boundary = TurnBoundary(self.tracker)
        self.durable: DurableDriver | None = None
        if plan.durable is not None:
            durable = DurableDriver(self, plan.durable, resume)
            self.durable = durable
            self.boundary.before_charge.append(durable.approval_hook)  # TP-4 step 1
            if plan.durable.checkpoint_policy == "every-turn":
                self.boundary.after_charge.append(durable.checkpoint_hook)  # TP-4 step 4
        if plan.turn_policy is not None:
            self.boundary.before_charge.append(self._turn_policy_hook)  # TP-4 step 2
        self._failure_cause: BaseException | None = None
        self.ctx: RunContext | None = None
        self.loop: AgentLoopStrategy | None = None
        self.runner: ProviderTurnRunner | None = None
        self.assembler: RequestAssembler | None = None
        self.codec = RequestCodec(self.redactor, self.history)
        self._layout: Any = None
        self._layout_version = 0
        self.policies: tuple[ProviderRequestPolicy, ...] = ()
        self.tool_validator: Any = None
        self._tool_calls = 0
        self._dispatch: Callable[[ToolCallContent], Coroutine[Any, Any, ToolResult]] | None = None
        self._status: RunStatus | None = None
        self._stop_reason: Any = None
        self._stop_detail: str | None = None
        self._abort_reason: str | None = None
        self._error: ErrorInfo | None = None
        self.observers.set_redactor(self.redactor)

    # ----------------------------------------------------------------- events

    def _on_breach(self, breach: Any) -> None:
        """First limit breach (LIM-7): one ``run_limit_exceeded`` event, then abort the run."""
        from prism.errors import RunLimitExceeded

        self.emit(RunLimitExceededEvent(session_id=self.session_id, run_id=self.run_id, breach=breach))
        self.controller.abort(RunLimitExceeded(breach))

    def observed(self) -> bool:
        """Whether anything observes this run's events (subscribers, ``on_event``, a ledger)."""
        return not self._terminal_emitted and (self.observers.active or self._ledger_on)

    def emit(self, event: AgentEvent, /) -> None:
        """Emit one event to observers and the ledger (EVT-1, EVT-7, EVT-21, REC-3).

        Empty ids are stamped, the event is redacted once, and all observers get the same object.
        Nothing is emitted after the leg's terminal event. O(size of the event).
        """
        if self._terminal_emitted:
            return
        kind = type(event)
        if kind is TurnStartedEvent:
            self._last_turn = event.turn  # type: ignore[union-attr]
        elif kind is ArtifactFinishedEvent:
            self._artifact_finished = True
        elif kind is ArtifactFailedEvent:
            self._last_artifact_failed = event  # type: ignore[assignment]
        observers = self.observers
        if not observers.active and not self._ledger_on:
            return
        event = _stamp(event, self.session_id, self.run_id)
        redactor = self.redactor
        if redactor is not None:
            event = redact_agent_event(event, redactor)
        observers.deliver(event)
        if self._ledger_on:
            self.writer.record_event(event)

    def _emit_terminal(self, event: AgentEvent) -> None:
        self.emit(event)
        self._terminal_emitted = True

    async def _turn_policy_hook(self, turn: int) -> None:
        """TP-6 at the boundary: a stop is raised (and recorded as sticky by the boundary)."""
        policy = self.plan.turn_policy
        assert policy is not None
        context = TurnBoundaryContext(
            session_id=self.session_id,
            run_id=self.run_id,
            turn=turn,
            turns=self.boundary.completed,
            tool_calls=self._tool_calls,
            usage=self.accumulator.value(),
            metadata=self.metadata,
        )
        stop = evaluate_turn_policy(policy, context, redactor=self.redactor)
        if stop is not None:
            raise stop

    # ----------------------------------------------------------------- store (STORE-4)

    async def append_entry(self, entry: SessionEntry) -> SessionEntry:
        redactor = self.redactor
        stored = redactor.redact(entry) if redactor is not None else entry
        session = self.session
        parent = session._leaf_id
        fork = self._fork_next and parent is not None
        await self.store.append(
            stored,
            expected_parent_id=parent,
            idempotency_key=self.plan.idempotency_key,
            fork=fork,
        )
        self._fork_next = False
        session._fork_next = False
        session._leaf_id = stored.id
        return stored

    async def append_message(self, message: Message, /) -> None:
        """``ctx.append_message``: one redacted ``message`` entry under this run (STORE-4).

        Then the RUN-24 bookkeeping of open host calls. The entry gets the fields
        ``new_session_entry`` would give it and is appended as :meth:`append_entry` appends, built
        inline because this runs twice per tool turn (ARCH-15). The stored entry is kept in
        :attr:`last_entry`.
        """
        session = self.session
        parent = session._leaf_id
        entry = _new_entry(
            id=new_id("entry"),
            session_id=self.session_id,
            kind="message",
            timestamp=now_iso(),
            parent_id=parent,
            run_id=self.run_id,
            message=message,
        )
        redactor = self.redactor
        stored = redactor.redact(entry) if redactor is not None else entry
        await self.store.append(
            stored,
            expected_parent_id=parent,
            idempotency_key=self.plan.idempotency_key,
            fork=self._fork_next and parent is not None,
        )
        self._fork_next = False
        session._fork_next = False
        session._leaf_id = stored.id
        self.last_entry = stored
        stored_message = stored.message
        if stored_message is None:
            stored_message = message
        self.messages.append(stored_message)
        role = stored_message.role
        if role == "assistant" or (role == "tool" and self._open_calls):
            self._track_calls(stored_message)

    async def _append_message_entry(self, message: Message) -> SessionEntry:
        """:meth:`append_message`, returning the stored entry."""
        await self.append_message(message)
        stored = self.last_entry
        assert stored is not None
        return stored

    def _track_calls(self, message: Message) -> None:
        """RUN-24 bookkeeping: open host calls of stored assistant messages, closed by results."""
        role = message.role
        if role == "assistant":
            open_calls = self._open_calls
            for part in message.content:
                if type(part) is ToolCallContent and part.authority != "provider-hosted":
                    open_calls[part.id] = part
        elif role == "tool":
            open_calls = self._open_calls
            if open_calls:
                for part in message.content:
                    if type(part) is ToolResultContent:
                        open_calls.pop(part.tool_call_id, None)

    # ----------------------------------------------------------------- loop context primitives

    def _check_live(self) -> None:
        """LOOP-8: a recorded stop, suspension, breach or abort is sticky for every later
        assemble/generate."""
        failure = self.boundary.failure
        if failure is not None:
            raise failure
        signal = self.signal
        if signal.aborted:
            signal.throw_if_aborted()

    async def assemble(
        self,
        next_input: AgentInput,
        tool_results: Sequence[ToolResult] | None = None,
        turn: int | None = None,
        /,
    ) -> ProviderRequest:
        """``ctx.assemble``: the turn boundary, then the next request (RUN-13, TP-4, LOOP-8)."""
        boundary = self.boundary
        failure = boundary.failure  # LOOP-8, as _check_live (inline: twice per turn)
        if failure is not None:
            raise failure
        if self.signal.aborted:
            self.signal.throw_if_aborted()
        boundary_turn = boundary.completed + 1
        if boundary.entered != boundary_turn:
            await boundary.enter()
        assembler = self.assembler
        assert assembler is not None
        request = await assembler.assemble(
            self.history,
            next_input,
            tool_results,
            turn=boundary_turn if turn is None else turn,
        )
        self._layout = assembler.last_layout
        self._layout_version = self.history.mutations
        return request

    async def generate(self, request: ProviderRequest, /) -> ProviderTurnResult:
        """``ctx.generate``: policies, middleware, redaction and byte count, then the attempts
        (RUN-14, RUN-15)."""
        boundary = self.boundary
        failure = boundary.failure  # LOOP-8, as _check_live
        if failure is not None:
            raise failure
        if self.signal.aborted:
            self.signal.throw_if_aborted()
        if boundary.entered != boundary.completed + 1:
            await boundary.enter()
        secrets: tuple[str, ...] = ()
        if self.policies:
            request, secrets = await self._apply_policies(request)
        middleware = self.middleware
        if middleware is not None and middleware.has("provider_request"):
            request = await middleware.run("provider_request", request)
        layout = self._layout
        if layout is not None and layout.messages is request.messages:
            red, size = self.codec.encode(
                request,
                prefix_len=layout.prefix_len,
                history_len=layout.history_len,
                history_version=self._layout_version,
            )
        else:
            red, size = self.codec.encode(request)
        runner = self.runner
        assert runner is not None
        result = await runner.generate(
            red, request_bytes=size, turn=self._last_turn, secrets=secrets
        )
        boundary.completed += 1
        return result

    async def _apply_policies(
        self, request: ProviderRequest
    ) -> tuple[ProviderRequest, tuple[str, ...]]:
        secrets: list[str] = []
        for policy in self.policies:
            context = PolicyContext(
                request=request,
                session_id=self.session_id,
                run_id=self.run_id,
                metadata=self.metadata,
                signal=self.signal,
            )
            outcome: Any = await maybe_await(policy(context))
            if outcome is None:
                continue
            if isinstance(outcome, Mapping):
                outcome = ProviderRequestPolicyResult(
                    options=outcome.get("options"), secrets=tuple(outcome.get("secrets") or ())
                )
            if not isinstance(outcome, ProviderRequestPolicyResult):
                raise TypeError(
                    "provider request policy returned "
                    f"{type(outcome).__name__}, not a ProviderRequestPolicyResult"
                )
            options: Any = outcome.options
            if isinstance(options, Mapping):
                options = ProviderRequestOptions.coerce(options)
            if options is not None:
                request = dataclasses.replace(
                    request, options=merge_provider_options(request.options, options)
                )
            secrets.extend(s for s in outcome.secrets if s)
        return request, tuple(secrets)

    async def charge_tool_round(self, calls: Sequence[ToolCallContent], /) -> None:
        """``ctx.charge_tool_round``: charge one round when ``calls`` is non-empty, then gate it
        (LIM-4, APR-2)."""
        if calls:
            self.tracker.charge_tool_round()
            durable = self.durable
            if durable is not None:
                durable.gate_round(tuple(calls))

    async def dispatch_tool_call(self, call: ToolCallContent, /) -> ToolResult:
        """``ctx.dispatch_tool_call`` (TOOL-9): APR-3 answers first, then the guarded dispatch."""
        durable = self.durable
        if durable is not None:
            answer = durable.before_dispatch(call)
            if answer is not None:
                return answer
        self._tool_calls += 1
        dispatch = self._dispatch
        if dispatch is None:
            dispatch = self._dispatch = self._make_dispatch()
        return await dispatch(call)

    def _make_dispatch(self) -> Callable[[ToolCallContent], Coroutine[Any, Any, ToolResult]]:
        """``prism.tools.dispatch_tool_call`` bound to this leg's fixed arguments (ARCH-15).

        Everything but the call is fixed once setup has run. The execution context is the leg's:
        ``dispatch_tool_call`` gives ``execute`` (and the validator and ``before_execute``) a
        copy carrying the call's ``tool_call_id`` whenever ``emit`` is passed, as it is here.
        """
        redactor = self.redactor
        writer = self.writer
        plan = self.plan
        durable = self.durable
        return functools.partial(
            dispatch_tool_call,
            registry=self.registry,
            context=ToolExecutionContext(
                session_id=self.session_id,
                run_id=self.run_id,
                tool_call_id="",
                signal=self.signal,
                metadata=self.metadata,
            ),
            filter=plan.tool_filters or None,
            middleware=self.middleware,
            tool_validator=self.tool_validator,
            permission=self.config.permission,
            guardrails=plan.guardrails,
            redactor=redactor,
            ledger=writer if writer.enabled else None,
            emit=self.emit,
            limit_tracker=self.tracker,
            secrets=redactor.secrets if redactor is not None else (),
            ownership=plan.ownership,
            tool_abort_grace_ms=self.config.tool_abort_grace_ms,
            before_execute=None if durable is None else durable.before_execute,
            on_worker_thread=self._worker_threads.append,
        )

    def open_call(self, call: ToolCallContent) -> None:
        """Track a host call stored by an earlier leg until its row is written (RUN-24)."""
        self._open_calls[call.id] = call

    def result_message(self, result: ToolResult) -> Message:
        """The tool-result message of ``result`` (CON-8)."""
        return tool_result_message(result)

    async def apply_pending_steers(self) -> bool:
        """STEER-4 / STEER-8."""
        session = self.session
        queue = session._steer_queue
        runner = self.runner
        if not queue or runner is None or not runner.generated:
            return False
        messages = list(queue)
        queue.clear()
        session._steer_bytes = 0
        runner.clear_soft_interrupt()
        self.emit(QueueUpdatedEvent(session_id=self.session_id, run_id=self.run_id, size=0))
        guardrails = self.plan.guardrails
        has_input_guards = guardrails is not None and bool(guardrails.input)
        for message in messages:
            self._check_live()
            if has_input_guards:
                assert guardrails is not None
                outcome = await run_guardrails(
                    "input",
                    guardrails,
                    (message,),
                    self._guardrail_context("input", (message,)),
                    redactor=self.redactor,
                    emit=self.emit,
                )
                record = outcome.terminal
                if record is not None:
                    if record.action == "interrupt":
                        raise GuardrailError(record)
                    self.emit(
                        SteerRejectedEvent(
                            session_id=self.session_id,
                            run_id=self.run_id,
                            message=message,
                            record=record,
                        )
                    )
                    continue
            self.history.append(message)
            await self.append_message(message)
        return True

    def _guardrail_context(self, stage: Any, value: Any) -> GuardrailContext[Any]:
        return GuardrailContext(
            stage=stage,
            value=value,
            session_id=self.session_id,
            run_id=self.run_id,
            metadata=self.metadata,
            signal=self.signal,
        )

    # ----------------------------------------------------------------- the envelope

    async def execute(self) -> RunResult:
        """Run the leg: setup, loop, success path; failure path and cleanup around them.

        Returns:
            The succeeded ``RunResult``.

        Raises:
            AgentRunError: the run failed or was aborted (``AgentRunLimitError`` for a breach).
            asyncio.CancelledError: the task awaiting ``run()`` was cancelled (after cleanup).
            RunLedgerError: a ledger write failed (found during cleanup).
        """
        outcome: BaseException | None = None
        try:
            try:
                return await self._body()
            except AgentRunSuspended as exc:
                outcome = exc
                result: RunResult = await _shielded(self._suspended(exc))
                return result
            except asyncio.CancelledError as exc:
                self.controller.abort(AbortError("run task cancelled"))
                outcome = exc
                await _shielded(self._failure(exc))
                raise
            except Exception as exc:
                outcome = exc
                error = await _shielded(self._failure(exc))
                cause = self._failure_cause
                raise error from (
                    cause if cause is not None else redacted_cause(exc, self.redactor)
                )
        finally:
            await _shielded(self._cleanup(outcome))

    async def _body(self) -> RunResult:
        config = self.config
        plan = self.plan
        # RUN-11 step 1: provider
        provider = await resolve_provider(self)
        # step 2
        self.signal.throw_if_aborted()
        self.tracker.start()
        # step 3
        self.emit(AgentStartedEvent(session_id=self.session_id, run_id=self.run_id))
        resume = self.resume
        if resume is not None:
            self.emit(
                AgentResumedEvent(
                    session_id=self.session_id, run_id=self.run_id, version=resume.version
                )
            )
        # step 4
        session = self.session
        await session._ensure_leaf()
        if self._ledger_on:  # the run record exists only for a ledger (REC-3)
            self._start_record = start_run_record(
                run_id=self.run_id,
                session_id=self.session_id,
                branch_id=session._leaf_id,
                model=plan.model,
                idempotency_key=plan.idempotency_key,
                metadata=dict(self.metadata) or None,
                ownership=plan.ownership,
            )
            self.writer.append_run(self._start_record)
        # step 5
        branch = await read_branch(self.store, self.session_id, session._leaf_id)
        messages, summaries = history_from_branch(branch)
        self.history.extend(messages)
        # step 6
        active_skills = select_skills(plan.skills, plan.active_skills)
        # step 7
        current = current_model(branch) or config.model
        if plan.model is not current and plan.model.to_dict() != current.to_dict():
            entry = await self.append_entry(
                new_session_entry(
                    "model_change",
                    session_id=self.session_id,
                    parent_id=session._leaf_id,
                    run_id=self.run_id,
                    model=plan.model,
                    previous_model=current,
                )
            )
            branch.append(entry)
        # step 8
        redactor = self.redactor
        raw_inputs = to_messages(plan.input)
        self.input_messages = tuple(
            redactor.redact(m) if redactor is not None else m for m in raw_inputs
        )
        # step 9
        guardrails = plan.guardrails
        if guardrails is not None and guardrails.input and self.input_messages:
            outcome = await run_guardrails(
                "input",
                guardrails,
                self.input_messages,
                self._guardrail_context("input", self.input_messages),
                redactor=redactor,
                emit=self.emit,
            )
            record = outcome.terminal
            if record is not None:
                durable = self.durable
                if record.action != "interrupt" or durable is None:
                    raise GuardrailError(record)
                if resume is None:  # DUR-9: a fresh durable leg suspends
                    raise await durable.suspend_for_input(record, self.input_messages)
                # a resumed leg: the interrupt counts as approved
        # step 10 (a fresh every-turn leg checkpoints the input first, DB-10)
        if self.durable is not None and resume is None:
            await self.durable.checkpoint_input(self.input_messages)
        for message in self.input_messages:
            branch.append(await self._append_message_entry(message))
        # step 11
        compaction = plan.compaction
        if compaction is not None and should_auto_compact(compaction, branch):
            summaries = await auto_compact(self, compaction)
        # step 12
        loop = resolve_loop(plan.loop, config.loop)
        self.loop = loop
        concurrency = resolve_tool_concurrency(plan.loop, config.loop)
        # step 13
        options = resolve_structured_output(
            config.provider_options,
            plan.provider_options,
            structured_output=plan.structured_output,
            loop=loop,
            model=plan.model,
        )
        # step 14
        setup_assembly(self, options, active_skills, summaries)
        setup_runner(self, provider)
        # step 15
        ctx = RunContext(
            self, tool_concurrency=concurrency, max_tool_rounds=self.tracker.leg_max_tool_rounds
        )
        self.ctx = ctx
        # step 16 (DUR-13, APR-9)
        durable = self.durable
        if durable is not None:
            durable.restore_loop(ctx)
            await durable.replay(ctx)
        # step 17
        stop: TurnPolicyStop | None = None
        try:
            pending = loop.run(ctx)
            if not isawaitable(pending):  # LOOP-1: a custom loop's run must be async
                raise PrismConfigError(
                    f"custom loop {loop.name}: run(ctx) must be async "
                    f"(returned {type(pending).__name__})"
                )
            fallback = await pending
        except TurnPolicyStop as exc:
            stop, fallback = exc, None
        recorded = self.boundary.failure
        if isinstance(recorded, TurnPolicyStop):
            stop = recorded  # sticky even when a custom loop swallowed it (LOOP-8)
        elif recorded is not None:
            raise recorded
        if stop is None:
            self._check_live()
            if durable is not None:
                await durable.after_loop()  # APR-5
            # step 18 (RUN-17)
            if loop.name == "generate-validate-revise" and not self._artifact_finished:
                raise _artifact_failure(self._last_artifact_failed)
        return await self._success(ctx, fallback, stop)

    # ----------------------------------------------------------------- outcomes

    async def _success(
        self, ctx: RunContext, fallback: Any, stop: TurnPolicyStop | None = None
    ) -> RunResult:
        """RUN-18/RUN-21: usage, ``run_total`` row, ledger drain, ``agent_finished``, result.

        A turn-policy stop overrides ``ctx.finish_reason`` and leaves ``artifact`` unset (TP-7).
        """
        usage = self.accumulator.value()
        if usage is None and isinstance(fallback, Usage):
            usage = fallback
        writer = self.writer
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
        self._emit_terminal(
            AgentFinishedEvent(
                session_id=self.session_id,
                run_id=self.run_id,
                usage=usage,
                finish_reason=finish_reason,
                stop_detail=stop_detail,
            )
        )
        self._status = "succeeded"
        self._stop_reason = finish_reason
        self._stop_detail = stop_detail
        return RunResult(
            run_id=self.run_id,
            session_id=self.session_id,
            status="succeeded",
            stop_reason=finish_reason,
            stop_detail=stop_detail,
            usage=usage,
            messages=tuple(self.messages),
            artifact=artifact,
            run_state=run_state,
            leaf_id=self.session._leaf_id,
        )

    async def _suspended(self, signal: AgentRunSuspended) -> RunResult:
        """RUN-19: ``agent_suspended`` and a ``suspended`` result; gated calls stay open."""
        state: Any = signal.state
        interruption: Any = signal.interruption
        version = getattr(state, "version", 0)
        self._emit_terminal(
            AgentSuspendedEvent(
                session_id=self.session_id,
                run_id=self.run_id,
                interruption=interruption,
                version=version,
            )
        )
        self._status = "suspended"
        return RunResult(
            run_id=self.run_id,
            session_id=self.session_id,
            status="suspended",
            usage=self.accumulator.value(),
            messages=tuple(self.messages),
            run_state=state,
            interruption=interruption,
            leaf_id=self.session._leaf_id,
        )

    def _error_info(self, exc: BaseException) -> ErrorInfo:
        redactor = self.redactor
        if isinstance(exc, ProviderTurnError):
            info = exc.info
            return redactor.redact(info) if redactor is not None else info
        if isinstance(exc, asyncio.CancelledError):
            reason = self.signal.reason
            return error_to_error_info(reason if reason is not None else exc, redactor or ())
        return error_to_error_info(exc, redactor or ())

    async def _failure(self, exc: BaseException) -> AgentRunError:
        """RUN-20: error info, dangling calls (RUN-24), ``error`` event, the error to raise."""
        info = self._error_info(exc)
        await self._answer_open_calls()
        self._emit_terminal(ErrorEvent(session_id=self.session_id, run_id=self.run_id, error=info))
        breach = self.tracker.breach
        signal = self.signal
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
            if self.redactor is not None:
                abort_reason = self.redactor.redact(abort_reason)
        self._abort_reason = abort_reason
        run_state = None
        durable = self.durable
        if durable is not None:
            try:
                run_state = await durable.write_failure(status)
            except Exception as write_error:  # DUR-15: report both failures
                write_error.__context__ = exc
                self._failure_cause = write_error
                run_state = durable.state
        result = RunResult(
            run_id=self.run_id,
            session_id=self.session_id,
            status=status,
            usage=self.accumulator.value(),
            messages=tuple(self.messages),
            error=info,
            leaf_id=self.session._leaf_id,
            limit=breach,
            abort_reason=abort_reason,
            run_state=run_state,
        )
        if breach is not None:
            return AgentRunLimitError(result=result, breach=breach)
        return AgentRunError(result=result)

    async def _answer_open_calls(self) -> None:
        """RUN-24: one ``tool_call_interrupted`` row per host call still open, in call order."""
        open_calls = self._open_calls
        if not open_calls:
            return
        pending = list(open_calls.items())
        for call_id, call in pending:
            row = tool_result_message(
                ToolResult(
                    tool_call_id=call_id,
                    name=call.name,
                    error=ErrorInfo(code="tool_call_interrupted", message=INTERRUPTED_MESSAGE),
                )
            )
            try:
                await self.append_message(row)
            except Exception as exc:  # the original failure is the one reported
                _log.warning("could not answer tool call %s: %s", call_id, type(exc).__name__)
        open_calls.clear()

    async def _cleanup(self, outcome: BaseException | None) -> None:
        """RUN-22: threads, steer state, ledger drain + finish record, timers, subscribers."""
        for fut in self._worker_threads:
            try:
                await fut
            except BaseException:
                pass
        session = self.session
        session._steer_queue.clear()
        session._steer_bytes = 0
        if self.durable is not None:
            self.durable.close()
        self.tracker.dispose()
        if self._unbridge is not None:
            self._unbridge()
            self._unbridge = None
        ledger_error: BaseException | None = None
        writer = self.writer
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
        await self.observers.drain()
        self.observers.close_all()
        session._finish_leg(self)
        if ledger_error is not None and not isinstance(outcome, asyncio.CancelledError):
            raise ledger_error


# --------------------------------------------------------------------------- helpers


def _artifact_failure(event: ArtifactFailedEvent | None) -> ArtifactFailedError:
    """RUN-17: the failure of a generate-validate-revise leg without ``artifact_finished``."""
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

