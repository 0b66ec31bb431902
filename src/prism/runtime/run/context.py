"""The loop context, one concept: the one object a loop holds to reach model, tools, store, events.

Its methods, the turn boundary they pass and the open calls they track stay together rather than
split by size.

[`RunContext`][prism.runtime.run.context.RunContext] implements [`LoopContext`][prism.loops.contracts.LoopContext]. One is built
per run leg by [`RunLeg`][prism.runtime.run.leg.RunLeg]; the loop receives it as ``ctx`` and reaches
the model, the tools, the store and the observers only through its methods:

* [`RunContext.assemble()`][prism.runtime.run.context.RunContext.assemble] — the turn boundary, then the next request;
* [`RunContext.generate()`][prism.runtime.run.context.RunContext.generate] — request policies, middleware, redaction and byte count, then the
  provider attempts ([`prism.runtime.run.attempts.ProviderAttempts.run()`][prism.runtime.run.attempts.ProviderAttempts.run]);
* [`RunContext.dispatch_tool_call()`][prism.runtime.run.context.RunContext.dispatch_tool_call] / [`RunContext.charge_tool_round()`][prism.runtime.run.context.RunContext.charge_tool_round] — tools;
* [`RunContext.append_message()`][prism.runtime.run.context.RunContext.append_message] — the store; [`RunContext.emit()`][prism.runtime.run.context.RunContext.emit] — events;
* [`RunContext.apply_pending_steers()`][prism.runtime.run.context.RunContext.apply_pending_steers] / [`RunContext.has_pending_steers()`][prism.runtime.run.context.RunContext.has_pending_steers] — steering.

Two parts of the leg's state live here with it: the [`TurnBoundary`][prism.runtime.run.context.TurnBoundary] (once per provider
turn, on the first ``assemble`` or ``generate`` of a turn; durable runs plug their approval
suspension and ``every-turn`` checkpoint into it, the turn policy its stop check), and the open
host calls — calls of stored assistant messages without a stored result, which a failed run
answers with ``tool_call_interrupted`` rows ([`track_calls()`][prism.runtime.run.context.track_calls], [`interrupted_row()`][prism.runtime.run.context.interrupted_row]),
because providers reject a transcript in which an assistant tool call has no result.

The context also holds the leg's live state (limit tracker, usage, ledger writer, the messages
and open tool calls of the run), which the leg reads for its outcome. Those members are the
runtime's: loops are typed against ``LoopContext`` and do not use them.

Per-turn work is constant in the history length: assembling copies message references,
redaction and byte counting are incremental ([`prism.runtime.run._request_codec`][prism.runtime.run._request_codec]), store appends
and event emission are O(1) in the history, and the open-tool-call bookkeeping is a dict.

The run path, top to bottom: [`prism.runtime.run.session`][prism.runtime.run.session] → ``prism.runtime.run.plan`` →
[`prism.runtime.run.leg`][prism.runtime.run.leg] → this module → [`prism.runtime.run.attempts`][prism.runtime.run.attempts] (the provider attempts).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any, Final, Literal, TypeVar

from prism.abort import AbortController, AbortSignal
from prism.assembly import RequestAssembler
from prism.errors import GuardrailError, RunLimitExceeded
from prism.events import (
    AgentEvent,
    ArtifactFailedEvent,
    ArtifactFinishedEvent,
    QueueUpdatedEvent,
    RunLimitExceededEvent,
    SteerRejectedEvent,
    TurnStartedEvent,
)
from prism.guardrails import GuardrailContext, GuardrailStage, run_guardrails
from prism.ledger import LedgerWriter
from prism.limits import RunLimitTracker
from prism.redaction import redact_agent_event
from prism.runtime.run._carry import PayloadCarry
from prism.runtime.run._delegation import RunDelegation, child_forward, parent_run
from prism.runtime.run._observers import stamp_ids
from prism.runtime.run._request_codec import LiveHistory, RequestCodec
from prism.runtime.run._tool_rounds import apply_tool_choice, force_text_answer
from prism.runtime.run.attempts import ProviderAttempts
from prism.runtime.run.config import AgentConfig
from prism.runtime.run.plan import RunPlan, run_defaults
from prism.runtime.run.policies import ProviderRequestPolicy, apply_request_policies
from prism.runtime.run.seam import DurableGate, delegating
from prism.runtime.run.state import SessionState
from prism.session_entry import SessionEntryKind, new_session_entry
from prism.store import SessionEntry
from prism.tools import ToolDispatcher, ToolValidator
from prism.tracing import RunTrace
from prism.types import (
    AgentInput,
    ErrorInfo,
    JsonValue,
    Message,
    ModelConfig,
    ProviderRequest,
    ProviderStopReason,
    ProviderTurnResult,
    ToolCallContent,
    ToolExecutionContext,
    ToolResult,
    ToolResultContent,
    tool_result_message,
)
from prism.usage import UsageAccumulator

__all__ = ["INTERRUPTED_MESSAGE", "BoundaryHook", "RunContext", "TurnBoundary"]

T = TypeVar("T")

_log = logging.getLogger("prism")

_NO_LEDGER: LedgerWriter = LedgerWriter(None, session_id="", run_id="")
"""The writer of every leg without a ledger: it holds no state (every record and drain is a
no-op without a ledger), so the legs share it instead of building one each."""


# --------------------------------------------------------------------------- the turn boundary

BoundaryHook = Callable[[int], Coroutine[Any, Any, None]]
"""``await hook(turn)`` at a turn boundary; may raise to stop or suspend the run."""


class TurnBoundary:
    """The once-per-provider-turn boundary.

    It runs on the first ``ctx.assemble`` or ``ctx.generate`` of a turn; the turn index is
    "completed provider turns + 1" (a completed turn is a ``generate`` call that returned).
    In order: the ``before_charge`` hooks (the approval suspension and the turn policy plug in
    here), charging ``max_turns``, then the ``after_charge`` hooks (the ``every-turn``
    checkpoint plugs in here).

    Args:
        tracker: The run's limit tracker.
        before_charge: Hooks evaluated before ``max_turns`` is charged.
        after_charge: Hooks run after the charge.
    """

    __slots__ = ("_tracker", "after_charge", "before_charge", "completed", "entered", "failure")

    def __init__(
        self,
        tracker: RunLimitTracker,
        *,
        before_charge: Sequence[BoundaryHook] = (),
        after_charge: Sequence[BoundaryHook] = (),
    ) -> None:
        self._tracker = tracker
        self.before_charge: tuple[BoundaryHook, ...] = tuple(before_charge)
        """Hooks evaluated before ``max_turns`` is charged (approvals, turn policy); add one
        with ``+=`` (a tuple: a boundary without hooks holds no container)."""
        self.after_charge: tuple[BoundaryHook, ...] = tuple(after_charge)
        """Hooks run after the charge (``every-turn`` checkpoint)."""
        self.entered = 0
        """Index of the last turn whose boundary ran (0 before the first): the boundary of turn
        ``completed + 1`` is still due when this differs from it."""
        self.completed = 0
        """Provider turns completed in this leg (returned ``generate`` calls)."""
        self.failure: BaseException | None = None
        """What a boundary raised (a stop, a suspension, a breach, a policy error): sticky for
        the rest of the leg."""

    @property
    def turn(self) -> int:
        """Index of the provider turn the next boundary precedes (``completed + 1``)."""
        return self.completed + 1

    async def enter(self) -> int:
        """Run the boundary for the current turn unless it already ran; return the turn index.

        Raises:
            RunLimitExceeded: ``max_turns`` breached.
            Exception: whatever a hook raises (turn-policy stop, suspension).
        """
        failure = self.failure
        if failure is not None:
            raise failure
        turn = self.completed + 1
        if self.entered == turn:
            return turn
        self.entered = turn
        try:
            for hook in self.before_charge:
                await hook(turn)
            self._tracker.charge_turn()
            for hook in self.after_charge:
                await hook(turn)
        except Exception as exc:
            self.failure = exc
            raise
        return turn


# --------------------------------------------------------------------------- open host calls

INTERRUPTED_MESSAGE: Final = "tool call interrupted: the run ended before its result was recorded"
"""Message of the rows that answer calls left open by a failed run."""


def track_calls(open_calls: dict[str, ToolCallContent], message: Message) -> None:
    """Open the host calls of a stored assistant ``message``; close calls by stored results."""
    if message.role == "assistant":
        for part in message.content:
            if type(part) is ToolCallContent and part.authority != "provider-hosted":
                open_calls[part.id] = part
    elif open_calls:
        for part in message.content:
            if type(part) is ToolResultContent:
                open_calls.pop(part.tool_call_id, None)


def interrupted_row(call: ToolCallContent) -> Message:
    """The ``tool_call_interrupted`` row answering the open ``call``."""
    return tool_result_message(
        ToolResult(
            tool_call_id=call.id,
            name=call.name,
            error=ErrorInfo(code="tool_call_interrupted", message=INTERRUPTED_MESSAGE),
        )
    )


# --------------------------------------------------------------------------- the loop context


class RunContext:
    """The ``LoopContext`` of one run leg, with the leg's live state.

    Args:
        state: The session state the leg changes (leaf, steer queue).
        config: The agent configuration.
        plan: The resolved run options.
        run_id: The run id (``run_…``).
        counters: Limit counters restored by a resumed leg, else ``None``.
    """

    __slots__ = (
        "_entering",
        "_held_turn_start",
        "_layout",
        "_layout_version",
        "accumulator",
        "answer_after_tool_rounds",
        "artifact",
        "artifact_finished",
        "assembler",
        "attempts",
        "boundary",
        "carry",
        "codec",
        "config",
        "controller",
        "dispatcher",
        "durable",
        "finish_reason",
        "forward",
        "handoff",
        "history",
        "input",
        "input_messages",
        "last_artifact_failed",
        "last_entry",
        "ledger_on",
        "max_tool_rounds",
        "messages",
        "metadata",
        "middleware",
        "observers",
        "open_calls",
        "plan",
        "policies",
        "provider_stop_reason",
        "redactor",
        "registry",
        "restored_loop_state",
        "run_id",
        "session_id",
        "signal",
        "state",
        "terminal_emitted",
        "tool_calls",
        "tool_concurrency",
        "tool_scope",
        "tool_validator",
        "trace",
        "tracker",
        "turn",
        "worker_threads",
        "writer",
    )

    def __init__(
        self,
        *,
        state: SessionState,
        config: AgentConfig,
        plan: RunPlan,
        run_id: str,
        counters: Mapping[str, Any] | None = None,
    ) -> None:
        # The LoopContext members.
        self.session_id: str = state.session_id
        self.run_id = run_id
        self.metadata: Mapping[str, Any] = plan.metadata
        self.controller = AbortController()
        self.signal: AbortSignal = self.controller.signal
        self.history = LiveHistory()
        self.input: AgentInput = plan.input
        self.input_messages: tuple[Message, ...] = ()
        self.max_tool_rounds: float = 0
        self.tool_concurrency = 1
        self.restored_loop_state: Any = None
        self.finish_reason: str | None = None
        self.artifact: Any = None
        self.provider_stop_reason: ProviderStopReason | None = None
        """The stop reason of the last provider turn (``RunResult.provider_stop_reason``)."""
        self.answer_after_tool_rounds: int | None = None
        """The run's tool-round count (``tracker.tool_rounds``) from which requests must answer in
        text, ``None``: never ([`prism.runtime.run._tool_rounds`][prism.runtime.run._tool_rounds]); set by the leg and by a
        handoff."""
        # The leg's live state.
        self.state = state
        self.config = config
        self.plan = plan
        self.redactor = plan.redactor
        self.observers = state.observers
        self.tracker = RunLimitTracker(
            plan.limits, on_breach=self._on_breach, counters=counters, parent=parent_run(plan)
        )
        self.forward = child_forward(plan.parent, config.name, self.session_id, run_id)
        """Receives each emitted event when this is a child run (the parent's ``SubagentEvent``)."""
        self.accumulator = UsageAccumulator()
        ledger = plan.run_ledger
        self.writer = (
            _NO_LEDGER
            if ledger is None
            else LedgerWriter(
                ledger,
                session_id=self.session_id,
                run_id=run_id,
                redactor=self.redactor,
                ownership=plan.ownership,
            )
        )
        """The leg's ledger writer; without a ledger the shared writer that writes nothing."""
        self.ledger_on = ledger is not None
        self.boundary = TurnBoundary(self.tracker)
        self.codec = RequestCodec(
            self.redactor, self.history, run_defaults(config, plan.durable_hooks).request_head
        )
        self.carry = PayloadCarry(self.codec) if self.redactor is None else None
        """The one-walk copies and sizes of tool payloads; ``None`` with a redactor (every
        payload then takes the general path)."""
        self.registry = config.tools
        """The leg's tools: the agent's, plus its tool sources' once the leg opened them."""
        self.tool_scope: AsyncExitStack | None = None
        """Holds the leg's open tool sources (closed by the leg's cleanup)."""
        self.middleware = config.middleware
        self.messages: list[Message] = []
        """The messages this leg stored, in order (``RunResult.messages``)."""
        self.last_entry: SessionEntry | None = None
        self.open_calls: dict[str, ToolCallContent] = {}
        """Host calls of stored assistant messages without a stored result row, in call order
        (answered with ``tool_call_interrupted`` rows if the run fails)."""
        self.turn = 0
        """The turn the loop last passed to [`assemble()`][prism.runtime.run.context.RequestAssembler.assemble] (0: none; the boundary's turn is
        used then)."""
        self.tool_calls = 0
        self.terminal_emitted = False
        self._held_turn_start: AgentEvent | None = None
        """A loop's ``turn_started`` held until the turn's boundary passes (see [`emit()`][prism.runtime.run.context.RunDelegation.emit])."""
        self._entering = False
        """The turn boundary is running (its own events do not release a held turn start)."""
        self.artifact_finished = False
        self.last_artifact_failed: ArtifactFailedEvent | None = None
        self.worker_threads: list[asyncio.Future[Any]] = []
        self.durable: DurableGate | None = None
        self.trace: RunTrace | None = None  # set with ``forward`` by the leg when traced
        # Set by the leg's setup, before the loop runs.
        self.assembler: RequestAssembler | None = None
        self.attempts: ProviderAttempts | None = None
        self.policies: tuple[ProviderRequestPolicy, ...] = ()
        self.tool_validator: ToolValidator | Literal[False] | None = None
        self._layout: Any = None
        self._layout_version = 0
        self.dispatcher: ToolDispatcher | None = None
        """The leg's tool dispatcher (``None``: build it on the next call, e.g. after an agent
        switch)."""
        self.handoff: Any = None
        """The agent switch of a loop with handoff targets (``HandingOff``), else ``None``."""
        self.observers.set_redactor(self.redactor)

    def __repr__(self) -> str:
        return f"<LoopContext session_id={self.session_id!r} run_id={self.run_id!r}>"

    # ----------------------------------------------------------------- events

    def observed(self) -> bool:
        """Whether anything observes this run's events (subscribers, ``on_event``, a ledger)."""
        return not self.terminal_emitted and (
            self.observers.active or self.ledger_on or self.forward is not None
        )

    def events_dropped(self) -> bool:
        """Whether an [`emit()`][prism.runtime.run.context.RunContext.emit] made now would deliver nothing and change nothing: the leg's
        terminal event is out, or nothing observes the run and no ``turn_started`` is held. A
        loop may then skip building the event."""
        return self._held_turn_start is None and not self.observed()

    def emit(self, event: AgentEvent, /) -> None:
        """Emit one event to observers and the ledger.

        Empty ids are stamped, the event is redacted once, and all observers get the same object.
        Nothing is emitted after the leg's terminal event. O(size of the event).

        A turn starts once its boundary has passed: a ``turn_started`` the loop emits before the
        turn's boundary ran (the approval suspension, the turn policy, ``max_turns``) is held
        until it passes, and dropped when the boundary suspends or stops the leg or the leg
        ends first, so every ``turn_started`` subscribers, the ledger and tracers see is closed
        by its ``turn_finished`` (or the leg fails in between). Another event the loop emits
        meanwhile releases it first, in order.
        """
        if self.terminal_emitted:
            return
        if self._held_turn_start is not None and not self._entering:
            held, self._held_turn_start = self._held_turn_start, None
            self._deliver(held)
        elif type(event) is TurnStartedEvent:
            boundary = self.boundary
            if boundary.failure is None and boundary.entered != boundary.completed + 1:
                self._held_turn_start = event
                return
        self._deliver(event)

    def _deliver(self, event: AgentEvent) -> None:
        """Stamp, redact and hand ``event`` to observers, the ledger and the parent run."""
        observers = self.observers
        ledger_on = self.ledger_on
        forward = self.forward
        if not observers.active and not ledger_on and forward is None:
            return
        event = stamp_ids(event, self.session_id, self.run_id)
        redactor = self.redactor
        if redactor is not None:
            event = redact_agent_event(event, redactor)
        observers.deliver(event)
        if ledger_on:
            self.writer.record_event(event)
        if forward is not None:
            forward(event)

    def emit_terminal(self, event: AgentEvent) -> None:
        """Emit the leg's last event (a held ``turn_started`` is dropped: that turn never began);
        later [`emit()`][prism.runtime.run.context.RunDelegation.emit] calls are dropped."""
        self._held_turn_start = None
        self.emit(event)
        self.terminal_emitted = True

    def report_artifact(self, event: ArtifactFinishedEvent | ArtifactFailedEvent, /) -> None:
        """Record an artifact loop's outcome for the leg's check, then emit it."""
        if type(event) is ArtifactFinishedEvent:
            self.artifact_finished = True
        elif type(event) is ArtifactFailedEvent:
            self.last_artifact_failed = event
        self.emit(event)

    def _on_breach(self, breach: Any) -> None:
        """First limit breach: one ``run_limit_exceeded`` event, then abort the run."""
        self.emit(
            RunLimitExceededEvent(session_id=self.session_id, run_id=self.run_id, breach=breach)
        )
        self.controller.abort(RunLimitExceeded(breach))

    # ----------------------------------------------------------------- store

    async def append_entry(self, entry: SessionEntry) -> SessionEntry:
        """Append ``entry`` redacted under the session's leaf; return the stored entry."""
        redactor = self.redactor
        stored = redactor.redact(entry) if redactor is not None else entry
        await self.state.append(stored, idempotency_key=self.plan.idempotency_key)
        return stored

    async def append_run_entry(
        self,
        kind: SessionEntryKind,
        /,
        *,
        model: ModelConfig | None = None,
        previous_model: ModelConfig | None = None,
        data: Mapping[str, JsonValue] | None = None,
    ) -> SessionEntry:
        """Append a new ``kind`` entry of this run under the session's leaf, redacted (a model
        change, or a ``custom`` entry's ``data``); return the stored entry."""
        entry = new_session_entry(
            kind,
            session_id=self.session_id,
            parent_id=self.state.leaf_id,
            run_id=self.run_id,
            model=model,
            previous_model=previous_model,
            data=data,
        )
        return await self.append_entry(entry)

    async def append_message(self, message: Message, /) -> None:
        """Append one redacted ``message`` entry under this run.

        The stored message joins [`messages`][prism.runtime.run.context.ProviderRequest.messages]; the open host calls are tracked. The
        stored entry is kept in [`last_entry`][prism.runtime.run.context.RunContext.last_entry]. A tool result whose private copy the
        dispatcher made, or a call whose arguments' copy the attempt made
        ([`prism.runtime.run._carry`][prism.runtime.run._carry]), is stored with that copy.
        """
        state = self.state
        redactor = self.redactor
        carry = self.carry
        owned = False
        to_store = message
        if carry is not None:
            to_store, owned = carry.for_store(message)
        entry = new_session_entry(
            "message",
            session_id=self.session_id,
            parent_id=state.leaf_id,
            run_id=self.run_id,
            message=to_store,
        )
        stored = redactor.redact(entry) if redactor is not None else entry
        await state.append(stored, idempotency_key=self.plan.idempotency_key, owned=owned)
        stored_message = message if carry is not None else stored.message
        if stored_message is None:
            stored_message = message
        self.last_entry = stored
        self.messages.append(stored_message)
        role = stored_message.role
        if role == "assistant" or (role == "tool" and self.open_calls):
            track_calls(self.open_calls, stored_message)

    async def answer_open_calls(self) -> None:
        """One ``tool_call_interrupted`` row per host call still open, in call order."""
        open_calls = self.open_calls
        for call_id, call in list(open_calls.items()):
            try:
                await self.append_message(interrupted_row(call))
            except Exception as exc:  # the original failure is the one reported
                _log.warning("could not answer tool call %s: %s", call_id, type(exc).__name__)
        open_calls.clear()

    # ----------------------------------------------------------------- the model

    def check_live(self) -> None:
        """A recorded stop, suspension, breach or abort is sticky for every later assemble and
        generate."""
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
        """The turn boundary, then the next request.

        ``turn`` is the loop's turn number; it labels this turn's provider events (default: the
        boundary's count of completed provider turns + 1).
        """
        boundary = self.boundary
        if boundary.failure is not None or self.signal.aborted:
            self.check_live()
        boundary_turn = boundary.completed + 1
        if boundary.entered != boundary_turn:
            await self._enter(boundary)
        if turn is not None:
            self.turn = turn
        assembler = self.assembler
        assert assembler is not None
        history = self.history
        version = history.mutations
        request = await assembler.assemble(
            history,
            next_input,
            tool_results,
            turn=boundary_turn if turn is None else turn,
            history_version=version,
        )
        self._layout = assembler.last_layout
        self._layout_version = history.mutations
        return request

    async def _enter(self, boundary: TurnBoundary) -> None:
        """Run the turn's boundary, then release the loop's held ``turn_started``; a boundary
        that raises (a suspension, a stop, a breach) drops it."""
        self._entering = True
        try:
            await boundary.enter()
        except BaseException:
            self._held_turn_start = None
            raise
        finally:
            self._entering = False
        held = self._held_turn_start
        if held is not None and not self.terminal_emitted:
            self._held_turn_start = None
            self._deliver(held)

    async def generate(self, request: ProviderRequest, /) -> ProviderTurnResult:
        """Policies, middleware, redaction and byte count, then the provider attempts.

        Raises:
            ProviderTurnError: the last provider attempt failed.
            RunLimitExceeded / GuardrailError / the abort reason: as the attempts raise them.
        """
        boundary = self.boundary
        if boundary.failure is not None or self.signal.aborted:
            self.check_live()
        if boundary.entered != boundary.completed + 1:
            await self._enter(boundary)
        choice = self.plan.tool_choice
        if choice is not None:
            request = apply_tool_choice(request, choice, self.tracker.tool_rounds)
        answer_after = self.answer_after_tool_rounds
        if answer_after is not None and self.tracker.tool_rounds >= answer_after:
            request = force_text_answer(request)
        secrets: tuple[str, ...] = ()
        if self.policies:
            request, secrets = await apply_request_policies(
                self.policies,
                request,
                session_id=self.session_id,
                run_id=self.run_id,
                metadata=self.metadata,
                signal=self.signal,
            )
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
        attempts = self.attempts
        assert attempts is not None
        turn = self.turn or boundary.completed + 1
        result = await attempts.run(red, request_bytes=size, turn=turn, secrets=secrets)
        boundary.completed += 1
        self.provider_stop_reason = result.stop_reason
        return result

    # ----------------------------------------------------------------- tools

    async def charge_tool_round(self, calls: Sequence[ToolCallContent], /) -> None:
        """Charge one tool round when ``calls`` is non-empty, then gate it."""
        if calls:
            self.tracker.charge_tool_round()
            durable = self.durable
            if durable is not None:
                durable.gate_round(tuple(calls))

    def dispatch_tool_call(self, call: ToolCallContent, /) -> Coroutine[object, None, ToolResult]:
        """The fully guarded dispatch of one host call (a coroutine: await it); a gated call is
        answered by the durable run first."""
        durable = self.durable
        if durable is not None:
            answer = durable.before_dispatch(call)
            if answer is not None:
                return _answered(answer)
        self.tool_calls += 1
        dispatcher = self.dispatcher
        if dispatcher is None:
            dispatcher = self.dispatcher = self._tool_dispatcher()
        if durable is None:
            return dispatcher.dispatch(call)  # the dispatch's own coroutine, without a wrapping one
        return delegating(dispatcher.dispatch(call), call, durable)

    def _tool_dispatcher(self) -> ToolDispatcher:
        """This leg's tool dispatcher, built on its first call.

        Its execution context is the leg's: the dispatcher gives ``execute`` (and the validator
        and ``before_execute``) a copy carrying the call's ``tool_call_id`` whenever ``emit`` is
        set, as it is here. Without a redactor, the one walk that checks a tool's dict result
        also copies and measures it, and the leg's carry takes both on (``measured``).
        """
        redactor = self.redactor
        writer = self.writer
        plan = self.plan
        durable = self.durable
        attempts = self.attempts
        # the bound ``emit``/``observed`` the provider attempts hold (set up before any tool
        # call), so that a run holds one bound method of each
        emit, observed = (
            (self.emit, self.observed) if attempts is None else (attempts.emit, attempts.observed)
        )
        return ToolDispatcher(
            registry=self.registry,
            context=ToolExecutionContext(
                session_id=self.session_id,
                run_id=self.run_id,
                tool_call_id="",
                signal=self.signal,
                metadata=self.metadata,
                run=RunDelegation(
                    redactor, self.state.store, self.tracker, self.accumulator, emit, durable
                ),
            ),
            filter=plan.tool_filters or None,
            middleware=self.middleware,
            tool_validator=self.tool_validator,
            permission=self.config.permission,
            guardrails=plan.guardrails,
            redactor=redactor,
            ledger=writer if writer.enabled else None,
            emit=emit,
            observed=observed,
            limit_tracker=self.tracker,
            secrets=redactor.secrets if redactor is not None else (),
            ownership=plan.ownership,
            tool_abort_grace_ms=self.config.tool_abort_grace_ms,
            before_execute=None if durable is None else durable.before_execute,
            prepares=None if durable is None else durable.prepares,
            on_worker_thread=self.worker_threads.append,
            execute_scope=None if self.trace is None else self.trace.tool_scope,
            measured=None if self.carry is None else self.carry.keep,
        )

    def is_tool_call_exclusive(self, call: ToolCallContent, /) -> bool:
        """True when the registered tool named by ``call`` has ``exclusive=True``."""
        tool = self.registry.get(call.name)
        return tool is not None and tool.exclusive

    def result_message(self, result: ToolResult) -> Message:
        """The tool-result message of ``result``."""
        return tool_result_message(result)

    # ----------------------------------------------------------------- steering

    def has_pending_steers(self) -> bool:
        """True when steered messages are queued."""
        return bool(self.state.steer_queue)

    async def apply_pending_steers(self) -> bool:
        """Move the queued steered messages into history and store.

        Only after the leg's first ``generate`` returned, and never inside an open tool round:
        while a stored assistant tool call has no stored result (a round waiting for an
        approval, or a custom loop draining between a call and its result) the queue is kept,
        because providers reject a user message between a tool call and its result. A
        suspension stores the kept messages in the run-state envelope and the resumed leg
        appends them after the round's last result. Each message passes the input guardrails
        first (a blocked one is reported with ``steer_rejected``).

        Returns:
            Whether messages were drained.
        """
        state = self.state
        attempts = self.attempts
        if not state.steer_queue or attempts is None or not attempts.generated:
            return False
        if self.open_calls:
            return False
        messages = state.take_steers()
        attempts.clear_soft_interrupt()
        self.emit(QueueUpdatedEvent(session_id=self.session_id, run_id=self.run_id, size=0))
        await self.store_steers(messages)
        return True

    async def store_steers(self, messages: Sequence[Message]) -> None:
        """Append steered ``messages`` to history and store, each after the input guardrails
        (a blocked one is reported with ``steer_rejected``; an ``interrupt`` fails the run).

        Used by [`apply_pending_steers()`][prism.runtime.run.context.RunContext.apply_pending_steers] and by a resumed leg for the steers its
        suspension stored.
        """
        guardrails = self.plan.guardrails
        has_input_guards = guardrails is not None and bool(guardrails.input)
        for message in messages:
            self.check_live()
            if has_input_guards:
                assert guardrails is not None
                outcome = await run_guardrails(
                    "input",
                    guardrails,
                    (message,),
                    self.guardrail_context("input", (message,)),
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

    def guardrail_context(self, stage: GuardrailStage, value: T) -> GuardrailContext[T]:
        """The guardrail context of this run for ``stage``."""
        return GuardrailContext(
            stage=stage,
            value=value,
            session_id=self.session_id,
            run_id=self.run_id,
            metadata=self.metadata,
            signal=self.signal,
        )


async def _answered(result: ToolResult) -> ToolResult:
    return result
