"""The default loop: ``single_shot_loop``.

Each iteration drains pending steers, emits ``turn_started``, assembles and generates one provider
turn, appends the assistant draft, emits ``message_finished``/``turn_finished`` and dispatches the
host tool calls of the draft as one round. The run ends after a turn without host calls (unless
steers arrived meanwhile) or when the tool-round budget is spent: calls beyond it are answered with
"not dispatched" rows and the run stops with ``stop_reason="tool_round_limit"``, as it does when
the turn after the last allowed round answers with no text.

The loop touches nothing but its [`LoopContext`][prism.loops.contracts.LoopContext] and keeps
its state in local variables, so the module-level object is safe to share between runs.
"""

from __future__ import annotations

from typing import Final, Literal

from prism.events import TurnStartedEvent
from prism.loops._turn import ROUND_LIMIT_MESSAGE as ROUND_LIMIT_MESSAGE
from prism.loops._turn import end_tool_rounds, record_turn
from prism.loops.contracts import LoopContext
from prism.loops.dispatch import dispatch_tool_calls_in_order, dispatchable_tool_calls
from prism.types import AgentInput, Usage

__all__ = ["ROUND_LIMIT_MESSAGE", "SingleShotLoop", "single_shot_loop"]


class SingleShotLoop:
    """The single-shot turn loop. Use the shared [`single_shot_loop`][prism.loops.single_shot.single_shot_loop].

    It has no ``snapshot``/``restore``: its durability rests on the stored history and the
    runtime's pending-call machinery.
    """

    __slots__ = ()

    @property
    def name(self) -> Literal["single-shot"]:
        """Strategy name, ``"single-shot"``."""
        return "single-shot"

    @property
    def revision(self) -> str:
        """Strategy revision, ``"1"``."""
        return "1"

    def __repr__(self) -> str:
        return "single_shot_loop"

    async def run(self, ctx: LoopContext, /) -> Usage | None:
        """Drive turns until a turn ends without host tool calls.

        Args:
            ctx: The run's loop context.

        Returns:
            The last non-``None`` per-turn usage — only a fallback; the runtime accumulates usage
            itself.

        Raises:
            Exception: The abort error when the run signal is aborted at a turn start or before a
                provider call; run-level failures from ``ctx`` (limits, guardrails, suspension,
                turn-policy stop) propagate unchanged.
        """
        usage: Usage | None = None
        tool_rounds = 0
        next_input: AgentInput = ctx.input
        turn = 1
        signal = ctx.signal
        # optional; called as a method each time, so the loop keeps no bound method alive
        steers = getattr(ctx, "apply_pending_steers", None) is not None
        # events carry the run's ids from the start, so the runtime need not copy them to stamp
        # the ids in later
        sid: str = getattr(ctx, "session_id", "")
        rid: str = getattr(ctx, "run_id", "")
        # optional: turn_started is built only while something observes the run
        observed = getattr(ctx, "observed", None)
        while True:
            signal.throw_if_aborted()
            if steers:
                await ctx.apply_pending_steers()
            if observed is None or observed():
                ctx.emit(TurnStartedEvent(session_id=sid, run_id=rid, turn=turn))
            request = await ctx.assemble(next_input, None, turn)
            signal.throw_if_aborted()
            result = await ctx.generate(request)
            if result.usage is not None:
                usage = result.usage
            await record_turn(ctx, result, turn, sid, rid)
            calls = dispatchable_tool_calls(result.calls) if result.calls else []
            if not calls or tool_rounds >= ctx.max_tool_rounds:
                await end_tool_rounds(ctx, calls, tool_rounds, result.text)
                if steers and await ctx.apply_pending_steers():
                    next_input = []
                    turn += 1
                    continue
                return usage
            tool_rounds += 1
            await dispatch_tool_calls_in_order(calls, ctx)
            next_input = []
            turn += 1


single_shot_loop: Final[SingleShotLoop] = SingleShotLoop()
"""The default loop strategy (``name="single-shot"``, ``revision="1"``)."""
