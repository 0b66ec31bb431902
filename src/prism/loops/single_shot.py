"""The default loop: ``single_shot_loop``.

Each iteration drains pending steers, emits ``turn_started``, assembles and generates one provider
turn, appends the assistant draft, emits ``message_finished``/``turn_finished`` and dispatches the
host tool calls of the draft as one round. The run ends after a turn without host calls (unless
steers arrived meanwhile) or when the tool-round budget is spent: calls beyond it are answered with
"not dispatched" rows and the run stops with ``stop_reason="tool_round_limit"``, as it does when
the turn after the last allowed round answers with no text.

The loop touches nothing but its :class:`~prism.loops.contracts.LoopContext` and keeps
its state in local variables, so the module-level object is safe to share between runs.
"""

from __future__ import annotations

from typing import Final, Literal

from prism.events import MessageFinishedEvent, TurnFinishedEvent, TurnStartedEvent
from prism.loops.contracts import LoopContext
from prism.loops.dispatch import (
    append_unanswered_rows,
    dispatch_tool_calls_in_order,
    dispatchable_tool_calls,
)
from prism.types import AgentInput, Message, Usage

__all__ = ["ROUND_LIMIT_MESSAGE", "SingleShotLoop", "single_shot_loop"]

ROUND_LIMIT_MESSAGE: Final = "tool call not dispatched: tool round limit reached"
"""Message of the rows that answer calls beyond ``max_tool_rounds``."""


class SingleShotLoop:
    """The single-shot turn loop. Use the shared :data:`single_shot_loop`.

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
        history = ctx.history
        # optional; called as a method each time, so the loop keeps no bound method alive
        steers = getattr(ctx, "apply_pending_steers", None) is not None
        # events carry the run's ids from the start, so the runtime need not copy them to stamp
        # the ids in later
        sid: str = getattr(ctx, "session_id", "")
        rid: str = getattr(ctx, "run_id", "")
        while True:
            signal.throw_if_aborted()
            if steers:
                await ctx.apply_pending_steers()
            ctx.emit(TurnStartedEvent(session_id=sid, run_id=rid, turn=turn))
            request = await ctx.assemble(next_input, None, turn)
            signal.throw_if_aborted()
            result = await ctx.generate(request)
            if result.usage is not None:
                usage = result.usage
            if turn == 1:
                history.extend(ctx.input_messages)
            if result.started:
                message = Message(role="assistant", content=result.content, id=result.message_id)
                history.append(message)
                await ctx.append_message(message)
                ctx.emit(MessageFinishedEvent(session_id=sid, run_id=rid, message=message))
            ctx.emit(TurnFinishedEvent(session_id=sid, run_id=rid, turn=turn))
            calls = dispatchable_tool_calls(result.calls) if result.calls else []
            if not calls or tool_rounds >= ctx.max_tool_rounds:
                if calls:
                    ctx.finish_reason = "tool_round_limit"
                    await append_unanswered_rows(ctx, calls, ROUND_LIMIT_MESSAGE)
                elif tool_rounds and tool_rounds >= ctx.max_tool_rounds and not result.text.strip():
                    # the answer the spent round budget asked for is empty
                    ctx.finish_reason = "tool_round_limit"
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
