"""How a run leg drives its durable state: envelope writes, approvals, suspension and replay.

[`DurableDriver`][prism.runtime.durable._durable_leg.DurableDriver] connects one run leg (its [`RunContext`][prism.runtime.run.context.RunContext]) to
the [`DurableRun`][prism.runtime.durable._durable_run.DurableRun] that owns the envelope. It plugs into the leg's
seams:

* the turn boundary: suspend on an open approval round (before the turn is charged),
  write the ``every-turn`` checkpoint (after it);
* ``ctx.charge_tool_round`` (gating the round's calls) and ``ctx.dispatch_tool_call`` (answers
  for gated or rejected calls, the backstop for a call that reached execution ungated, and the
  dispatch marking of replayed calls, via ``before_execute``);
* setup: the input-guardrail suspension, loop-state restore and the replay of
  decided calls;
* the outcomes: suspension and terminal writes;
* crash safety of ``every-turn`` runs without gating: the first ``running`` envelope is
  written before the input is appended (with the input, so a resume appends it exactly once), and
  every host tool dispatch is recorded as ``dispatched`` by a write of its own made right before
  its ``execute`` is invoked, so a crash inside a tool is reported instead of re-running it, and
  a call that had not started is dispatched again instead of being reported.

Every write costs O(envelope), never O(history).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

from prism.errors import AgentLoopStateError, AgentRunSuspended, CheckpointConflictError
from prism.loops.contracts import AgentLoopStrategy, effective_loop_revision
from prism.runtime.durable._approvals import rejection_result
from prism.runtime.durable._durable_run import DurableRun
from prism.runtime.durable._envelope import (
    loop_state_of,
)
from prism.runtime.durable._run_envelope import AgentRunState, ChildRun, RunEnvelope
from prism.runtime.durable._run_state import (
    AgentRunInterruption,
    RunStateOptions,
    check_durable_run,
)
from prism.runtime.durable._turn_writes import turn_writes_for
from prism.runtime.run._delegation import ChildRunSuspended, child_agent
from prism.runtime.run.config import AgentConfig
from prism.runtime.run.context import RunContext
from prism.runtime.run.seam import ResumePoint
from prism.runtime.run.turn_policy import TurnPolicy, TurnPolicyStop
from prism.types import (
    ErrorInfo,
    GuardrailRecord,
    Message,
    RunStopReason,
    ToolCallContent,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    ToolResultContent,
)

__all__ = ["DURABLE_HOOKS", "DurableDriver"]

CHILD_STOPPED = "a child run stopped on the turn policy"
"""``stop_detail`` of a run stopped because its agent tool's child run stopped on the inherited
turn policy (the child is continued with the run)."""
INPUT_GUARDRAIL_REASON = "Input requires approval"
"""Interruption reason of an input-guardrail suspension without a guard reason."""


class DurableDriver:
    """The durable side of one run leg.

    Args:
        ctx: The leg's loop context (its live state).
        options: The effective durable options.
        resume: The resume point of a resumed leg, else ``None``.
    """

    __slots__ = (
        "_mark_lock",
        "ctx",
        "loop",
        "marks",
        "options",
        "resume",
        "run",
        "terminal_write_failed",
        "turn_writes",
    )

    def __init__(
        self, ctx: RunContext, options: RunStateOptions, resume: ResumePoint | None
    ) -> None:
        self.ctx = ctx
        self.loop: AgentLoopStrategy | None = None
        """The resolved loop, once the leg resolved it."""
        self.options = options
        self.resume = resume
        self.run = DurableRun(
            options,
            config=ctx.config,
            run_id=ctx.run_id,
            session_id=ctx.session_id,
            redactor=ctx.redactor,
            ownership=ctx.plan.ownership,
            resume=resume,
        )
        self.terminal_write_failed = False
        self.marks = options.checkpoint_policy == "every-turn" and not self.run.approvals
        """Record each host dispatch before its side effect; ``on-suspend`` runs and runs
        whose calls may wait for an approval (the agent-wide switch or a tool's
        ``needs_approval``; they mark only their replayed calls) do not."""
        self.turn_writes = turn_writes_for(options, ctx.state) if self.marks else None
        """A marking leg on a store that writes entries and envelope together holds its
        appends from its first turn boundary on (see ``prism.runtime.durable._turn_writes``)."""
        self.run.turn_writes = self.turn_writes
        self._mark_lock: asyncio.Lock | None = None

    # ----------------------------------------------------------------- helpers

    @property
    def every_turn(self) -> bool:
        """Whether the run writes a checkpoint at every turn boundary."""
        return self.options.checkpoint_policy == "every-turn"

    @property
    def state(self) -> AgentRunState | None:
        """The view of the last envelope written or claimed."""
        return self.run.state

    def record_source_tools(self, digests: Mapping[str, str]) -> None:
        """The leg's tool-source schema digests join every envelope it writes."""
        self.run.record_source_tools(digests)

    def _frame(self) -> dict[str, Any]:
        ctx = self.ctx
        tracker = ctx.tracker
        return {
            "leaf_id": ctx.state.leaf_id,
            "counters": tracker.export_counters(),
            "deadline_at": tracker.deadline_at,
            "trace": None if ctx.trace is None else ctx.trace.link(),
        }

    def _snapshot(self) -> dict[str, Any] | None:
        loop = self.loop
        return None if loop is None else loop_state_of(loop)

    async def _suspend(
        self,
        interruption: AgentRunInterruption,
        *,
        pending_calls: list[dict[str, Any]],
        loop_state: dict[str, Any] | None,
        input: tuple[Message, ...] | None = None,
    ) -> AgentRunSuspended:
        # Steers queued while the round is open wait in the envelope for the round's results.
        self.run.hold_steers(self.ctx.state.take_steers())
        state = await self.run.write(
            "suspended",
            **self._frame(),
            loop_state=loop_state,
            interruption=interruption,
            input=input,
            pending_calls=pending_calls,
        )
        return AgentRunSuspended(state, interruption)

    async def suspend_round(self) -> AgentRunSuspended:
        """Write the ``suspended`` envelope of the open gated round; return the signal."""
        run = self.run
        return await self._suspend(
            run.round_interruption(),
            pending_calls=run.open_pending_calls(),
            loop_state=self._snapshot(),
        )

    # ----------------------------------------------------------------- boundary

    async def approval_hook(self, turn: int) -> None:
        """At the turn boundary, before the turn is charged: an open approval round suspends the
        run before the next request; a round whose only open calls are child runs that stopped
        on the turn policy stops the run the same way (``host_policy``, the calls kept)."""
        run = self.run
        if run.has_open_round:
            if run.stopped_round:
                raise TurnPolicyStop("host_policy", CHILD_STOPPED, turn)
            raise await self.suspend_round()

    async def checkpoint_hook(self, turn: int) -> None:
        """At the turn boundary, after the turn is charged: the ``every-turn`` ``running``
        checkpoint; it also ends the dispatch marking of the previous tool round (its rows are
        stored)."""
        run = self.run
        await run.save("running", **self._frame(), loop_state=self._snapshot())
        run.clear_marks()
        if self.turn_writes is not None:
            self.turn_writes.hold()

    async def checkpoint_input(self, input_messages: tuple[Message, ...]) -> None:
        """Write the first ``running`` envelope of a fresh ``every-turn`` leg before
        its input is appended: the leaf before the input, and the (redacted) input itself, as an
        input-guardrail suspension stores it. A crash right after the append leaves a
        resumable run whose resumed leg appends the input again on a fork, so the input
        is on the continued branch exactly once.

        Raises:
            AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — the envelope with the input is
                larger than ``max_state_bytes``; the run fails before the input is stored.
        """
        if self.options.checkpoint_policy != "every-turn" or not input_messages:
            return
        await self.run.save("running", **self._frame(), loop_state=None, input=input_messages)

    # ----------------------------------------------------------------- tools

    def gate_round(self, calls: list[ToolCallContent] | tuple[ToolCallContent, ...]) -> None:
        """Record the round's calls in the open gated round (when gating is active)."""
        self.run.gate_round(calls)

    def before_dispatch(self, call: ToolCallContent) -> ToolResult | None:
        """The answer of a gated or sticky-rejected call, without dispatching."""
        return self.run.before_dispatch(call)

    def prepares(self, call: ToolCallContent) -> bool:
        """Whether ``call``'s arguments are prepared (parsed, defaults filled) before
        [`before_execute()`][prism.runtime.durable._durable_leg.DurableDriver.before_execute]: the calls an approval may be asked for, and replayed ones."""
        return self.run.prepares(call)

    async def before_execute(
        self, call: ToolCallContent, tool: ToolDefinition, context: ToolExecutionContext
    ) -> ToolResult | None:
        """Right before a host tool executes, ``call`` carrying the arguments it will run with
        (after the ``tool_call`` middleware hook, parsing and defaults):

        * a replayed approved call runs only with the arguments approved — other ones (the
          middleware said something else this time) ask again: the call is held;
        * a call that needs an approval is held (the run suspends on the round at the next
          boundary; at once when the loop never announced the round — the backstop), a sticky
          rejection answers it;
        * else a replayed call is marked ``dispatched``, or an ``every-turn`` dispatch marked —
          by a write of its own; an agent tool's call is marked by the write that records its
          child run, before the child starts ([`record_child()`][prism.runtime.durable._durable_leg.DurableDriver.record_child]).

        Returns:
            The result holding the call, else ``None`` (it runs).
        """
        run = self.run
        entry = run.replaying(call)
        if entry is not None:
            held = run.recheck(entry, call, tool)
            if held is not None:
                return held
            if child_agent(tool) is not None:
                return None  # an agent tool is marked with its child (``record_child``)
            entry.status = "dispatched"
            await run.save(
                "running",
                **self._frame(),
                loop_state=run.loop_state,
                pending_calls=run.replay_pending_calls(),
            )
            return None
        held = run.hold(call)
        if held is not None:
            if (held.metadata or {}).get("approval_pending") and not run.announced(call):
                raise await self.suspend_round()  # the backstop: no announced round
            return held
        if self.marks and child_agent(tool) is None:  # an agent tool marks with its child
            await self._mark(call)
        return None

    # ----------------------------------------------------------------- child runs

    @property
    def run_state(self) -> RunStateOptions:
        """The run's durable options (a child agent without its own inherits them)."""
        return self.options

    @property
    def turn_policy(self) -> TurnPolicy | None:
        """The ``stop`` callback of the leg's turn policy, as child runs inherit it (a host
        stopping this run stops its children at their next boundary too)."""
        policy = self.ctx.plan.turn_policy
        return None if policy is None or policy.stop is None else TurnPolicy(stop=policy.stop)

    def recorded_child(self, tool_call_id: str, /) -> dict[str, Any] | None:
        """The child run recorded for a call this resumed leg replays, else ``None``."""
        entry = self.run.child_entry(tool_call_id)
        return None if entry is None or entry.child is None else entry.child.to_json()

    async def record_child(self, tool_call_id: str, link: dict[str, Any], /) -> None:
        """Record the child run ``link`` in the call's pending entry before the child starts.

        Written at once when the call's dispatch is recorded (a replayed call, or the dispatch
        marking of an ``every-turn`` run), so a crash resumes the child instead of reporting
        the call ambiguous; otherwise the link joins the envelope when the child suspends.
        """
        run = self.run
        open_calls = self.ctx.open_calls
        call = open_calls.get(tool_call_id)
        entry = run.replaying(call) if call is not None else None
        if entry is not None:
            entry.status, entry.child = "dispatched", ChildRun.from_json(link)
            pending = run.replay_pending_calls()
            await run.save(
                "running", **self._frame(), loop_state=run.loop_state, pending_calls=pending
            )
            return
        if not self.marks or call is None:
            return
        lock = self._mark_lock
        if lock is None:
            lock = self._mark_lock = asyncio.Lock()
        async with lock:  # one write of its own: dispatched, with the child
            entry = run.mark_dispatched(call, open_calls)
            entry.child = ChildRun.from_json(link)
            try:
                await run.save(
                    "running",
                    **self._frame(),
                    loop_state=self._snapshot(),
                    pending_calls=run.marked_pending_calls(open_calls),
                )
            except BaseException:
                entry.status, entry.child = "ready", None
                raise

    def delegated(self, call: ToolCallContent, signal: ChildRunSuspended) -> ToolResult:
        """``call``'s child run suspended: the call joins the open round (the run suspends at
        the next boundary, with the child's pending decisions), and gets no row now."""
        interruption = signal.interruption
        pending = getattr(interruption, "pending_decisions", ())
        self.run.open_delegation(call, ChildRun.from_json(signal.link), pending, signal.stopped)
        return ToolResult(tool_call_id=call.id, name=call.name, metadata={"approval_pending": True})

    async def _mark(self, call: ToolCallContent) -> None:
        """Write ``call`` as ``dispatched`` right before its ``execute`` is invoked.

        The envelope gets the current leaf (the round's assistant message and the rows stored so
        far), a fresh loop snapshot (as the backstop suspension takes), and the open round: this
        call and the others whose own marking write is done ``dispatched``, the rest ``ready``;
        calls whose rows are stored drop out (the next boundary clears the list). A crash then
        resumes this round without requesting its provider turn again: a stored row is adopted,
        a ``ready`` call is dispatched, and a ``dispatched`` call without a row is reported.

        A call is ``dispatched`` only from its own write: a call waiting on the pool, on the
        write of another call of a parallel round, or on an earlier call of a sequential round
        stays ``ready``, so a crash before its ``execute`` began never makes it ambiguous.
        Parallel rounds: the writes are serialised, one per call (a round of N calls costs N
        marking writes).

        A failing write (store down, envelope over ``max_state_bytes``, a lost compare-and-set)
        raises out of ``before_execute``: the call does not run, stays ``ready`` in the next
        write, and gets an ``execution_denied`` row.
        """
        run = self.run
        open_calls = self.ctx.open_calls
        lock = self._mark_lock
        if lock is None:
            lock = self._mark_lock = asyncio.Lock()
        async with lock:
            entry = run.mark_dispatched(call, open_calls)
            try:
                await run.save(
                    "running",
                    **self._frame(),
                    loop_state=self._snapshot(),
                    pending_calls=run.marked_pending_calls(open_calls),
                )
            except BaseException:
                entry.status = "ready"  # it does not run
                raise

    # ----------------------------------------------------------------- setup

    async def suspend_for_input(
        self, record: GuardrailRecord, input_messages: tuple[Message, ...]
    ) -> AgentRunSuspended:
        """Suspend the run on an ``interrupt`` from the input guardrails of a fresh leg; the
        input is kept in the envelope instead of the store."""
        interruption = AgentRunInterruption(
            kind="input_guardrail", reason=record.reason or INPUT_GUARDRAIL_REASON
        )
        return await self._suspend(
            interruption, pending_calls=[], loop_state=None, input=input_messages
        )

    def restore_loop(self, ctx: RunContext) -> None:
        """Check the stored loop identity, then ``restore`` the loop once."""
        resume = self.resume
        loop = self.loop
        if resume is None or loop is None:
            return
        envelope: RunEnvelope = resume.state
        stored = envelope.loop_state
        if stored is None:
            return
        if stored.get("name") != loop.name or stored.get("revision") != effective_loop_revision(
            loop
        ):
            raise AgentLoopStateError("ERR_PRISM_LOOP_REVISION")
        snapshot = stored.get("snapshot")
        restore = getattr(loop, "restore", None)
        if callable(restore):
            restore(snapshot)
        ctx.restored_loop_state = snapshot

    async def replay(self, ctx: RunContext) -> None:
        """Answer or dispatch every ``ready`` call, in stored order, then append the steers the
        suspension held (after the round's last result).

        A decided call follows its decision; a call an operator resolved as ``succeeded`` gets
        its resolution's result row (never run); an undecided one (a call of the tool round an
        ``every-turn`` dispatch marking left open) is dispatched as it is.
        """
        run = self.run
        for entry in run.replay_entries():
            decision = entry.decision
            call = entry.call
            resolved = entry.resolution
            if decision is not None and decision.outcome in ("reject_once", "reject_for_run"):
                result = rejection_result(call, decision.reason, "Approval rejected")
            elif resolved is not None:  # an operator said this ambiguous call ran
                error = resolved.get("error")
                result = ToolResult(
                    tool_call_id=call.id,
                    name=call.name,
                    value=resolved.get("result"),
                    error=None if error is None else ErrorInfo.from_dict(error),
                    metadata={"operator_resolved": True},
                )
            else:
                if decision is not None and decision.modified_arguments is not None:
                    call = ToolCallContent(
                        id=call.id,
                        name=call.name,
                        arguments=dict(decision.modified_arguments),
                        authority=call.authority,
                    )
                ctx.open_calls[call.id] = call  # open until its row is stored
                run.start_replay(entry, call)
                result = await ctx.dispatch_tool_call(call)
                if (result.metadata or {}).get("approval_pending") is True:
                    continue  # its child run suspended again: the round stays open
            message = ctx.result_message(result)
            ctx.history.append(message)
            await ctx.append_message(message)
            run.finish_replay(entry, call)
        if run.steers and not run.has_open_round:  # (a child suspended again: keep them)
            # Steers the suspension held: after the round's last result, never inside it.
            held = [Message.from_dict(m) for m in run.steers]
            await ctx.store_steers(held)
            run.steers = []

    async def after_loop(self) -> None:
        """Suspend the run when a gated round is still open as ``loop.run`` returns."""
        if self.run.has_open_round:
            raise await self.suspend_round()

    # ----------------------------------------------------------------- outcomes

    async def write_success(self, stop_reason: RunStopReason | None) -> AgentRunState | None:
        """The terminal write of a succeeded leg.

        A ``host_policy`` stop writes the continuable ``succeeded`` envelope with the frontier
        (even when nothing was written before); any other success finalises an existing
        envelope only.
        """
        run = self.run
        try:
            if stop_reason == "host_policy":  # child runs stopped with it stay pending
                return await run.write(
                    "succeeded",
                    **self._frame(),
                    loop_state=self._snapshot(),
                    stop_reason="host_policy",
                    pending_calls=run.open_pending_calls(),
                )
            if run.version == 0:
                return None
            return await run.write(
                "succeeded",
                **self._frame(),
                loop_state=None,
                stop_reason="turn_limit" if stop_reason == "turn_limit" else None,
                keep_sticky=False,
            )
        except BaseException:
            self.terminal_write_failed = True
            raise

    async def write_failure(self, status: str) -> AgentRunState | None:
        """Finalise an existing envelope as ``failed``/``aborted``.

        Skipped when no envelope exists, or when the success path's own terminal write is what
        failed (the stored envelope then keeps its previous, resumable content).

        On a store that writes entries with the envelope, a terminal write refused with the
        held entries (one of them not storable: a value the store cannot encode, a row larger
        than the database takes) is made once more without them: the held entries are dropped,
        the calls whose result rows were among them are answered with ``tool_call_interrupted``
        rows instead, and the run is stored ``failed``/``aborted`` with every call answered, so
        the session's next run sends the provider a complete history. A refusal that is not
        about the entries (a lost compare-and-set) is not retried.
        """
        run = self.run
        try:
            if run.version == 0 or self.terminal_write_failed:
                return run.state
            try:
                return await self._write_terminal(status)
            except CheckpointConflictError:
                raise
            except Exception:
                if not await self._answer_dropped():
                    raise
                return await self._write_terminal(status)
        finally:
            self._release()

    async def _write_terminal(self, status: str) -> AgentRunState:
        return await self.run.write(
            "failed" if status == "failed" else "aborted",
            **self._frame(),
            loop_state=None,
            keep_sticky=False,
        )

    async def _answer_dropped(self) -> bool:
        """Drop the held entries (the leaf goes back to the last stored entry) and answer the
        stored calls whose result rows were among them with ``tool_call_interrupted`` rows, held
        for the next write; ``False`` when nothing was held."""
        turn_writes = self.turn_writes
        if turn_writes is None or not turn_writes.held:
            return False
        opened: set[str] = set()
        answered: dict[str, str] = {}
        for append in turn_writes.held:
            message = append.entry.message
            if message is None:
                continue
            for part in message.content:
                if type(part) is ToolCallContent:
                    opened.add(part.id)
                elif type(part) is ToolResultContent:
                    answered[part.tool_call_id] = part.name
        turn_writes.release()
        turn_writes.hold()
        ctx = self.ctx
        for call_id, name in answered.items():
            if call_id not in opened:  # its call is stored: it needs an answer
                ctx.open_calls[call_id] = ToolCallContent(id=call_id, name=name, arguments={})
        await ctx.answer_open_calls()
        return True

    def _release(self) -> None:
        """Stop holding appends: those no write took are forgotten, the leaf goes back."""
        if self.turn_writes is not None:
            self.turn_writes.release()

    def close(self) -> None:
        """Forget the gated round; stop holding appends."""
        self.run.close_round()
        self._release()


class _DurableMode:
    """The durable mode the run path plans and opens legs through (the seam's ``DurableHooks``):
    the preflight is [`check_durable_run()`][prism.runtime.durable._run_state.check_durable_run], a leg's hooks
    are a [`DurableDriver`][prism.runtime.durable._durable_leg.DurableDriver]."""

    __slots__ = ()

    def preflight(
        self, config: AgentConfig, run_value: RunStateOptions | None, opts: Any
    ) -> RunStateOptions | None:
        if opts is None:
            return check_durable_run(config, run_value)
        return check_durable_run(
            config,
            run_value,
            run_loop=opts.loop,
            run_model=opts.model,
            run_guardrails=opts.guardrails,
            run_tool_filter=opts.tool_filter,
        )

    def open_leg(
        self, ctx: RunContext, options: RunStateOptions, resume: ResumePoint | None
    ) -> DurableDriver:
        return DurableDriver(ctx, options, resume)


DURABLE_HOOKS: Final = _DurableMode()
"""The durable mode an agent's sessions, the resume of a stored run and the engines hand to
[`plan_run()`][prism.runtime.run.plan.plan_run]."""
