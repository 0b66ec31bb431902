"""The steps the built-in loops share around one generated turn.

[`record_turn()`][prism.loops._turn.record_turn] files the turn's output (the first turn's input, the assistant draft and
their events); [`end_tool_rounds()`][prism.loops._turn.end_tool_rounds] closes a loop's tool rounds once a turn asks for no host
call or the round budget is spent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from prism.events import MessageFinishedEvent, TurnFinishedEvent
from prism.loops.contracts import LoopContext
from prism.loops.dispatch import append_unanswered_rows
from prism.types import JsonValue, Message, ProviderTurnResult, ToolCallContent

ROUND_LIMIT_MESSAGE: Final = "tool call not dispatched: tool round limit reached"
"""Message of the rows that answer calls beyond ``max_tool_rounds``."""


async def record_turn(
    ctx: LoopContext,
    result: ProviderTurnResult,
    turn: int,
    session_id: str,
    run_id: str,
    metadata: Mapping[str, JsonValue] | None = None,
) -> None:
    """File a generated turn: on turn 1 the run's input messages join the live history; a
    started response becomes the assistant message (with ``metadata``), appended to the history
    and the store with ``message_finished``; then ``turn_finished``."""
    history = ctx.history
    if turn == 1:
        history.extend(ctx.input_messages)
    # optional on a context: when nothing would receive them, the events are not built
    dropped = getattr(ctx, "events_dropped", None)
    if result.started:
        message = Message(
            role="assistant", content=result.content, id=result.message_id, metadata=metadata
        )
        history.append(message)
        await ctx.append_message(message)
        if dropped is None or not dropped():
            ctx.emit(MessageFinishedEvent(session_id=session_id, run_id=run_id, message=message))
    if dropped is None or not dropped():
        ctx.emit(TurnFinishedEvent(session_id=session_id, run_id=run_id, turn=turn))


async def end_tool_rounds(
    ctx: LoopContext, calls: Sequence[ToolCallContent], tool_rounds: int, text: str
) -> None:
    """Close the tool rounds of a turn that asked for no host call (``calls`` empty) or came
    after the last allowed round: its calls are answered with not-dispatched rows and
    ``ctx.finish_reason`` becomes ``"tool_round_limit"``, as it does when the answer the spent
    budget asked for (``text``) is empty."""
    if calls:
        ctx.finish_reason = "tool_round_limit"
        await append_unanswered_rows(ctx, calls, ROUND_LIMIT_MESSAGE)
    elif tool_rounds and tool_rounds >= ctx.max_tool_rounds and not text.strip():
        ctx.finish_reason = "tool_round_limit"
