"""The handoff loop: the model can hand the conversation over to another agent.

``handoff_loop(agent_b, agent_c)`` is the single-shot loop plus one generated tool per target,
``transfer_to_<name>`` (no arguments). When the model calls one, the loop answers the call with
``{"transferred_to": <name>}`` and asks the runtime to switch (``ctx.handoff.switch(name)``, see
[`HandingOff`][prism.loop_needs.HandingOff]): the remaining turns of the run use the target's
instructions, tools, model and provider, over the same history. The loop never holds a
provider; the targets join the agent's durable fingerprint through ``needs.handoffs``. The
loop is durable-capable (its snapshot is empty): a durable run resumed after a suspension or a
crash goes on with the agent that answered last, which the runtime reads from the stored switch.

Tool rounds count per agent: after a switch the target's own ``answer_after_tool_rounds`` applies
from the switch on (the transfer does not spend the target's rounds; the runtime sets
``ctx.max_tool_rounds`` to the target's budget), and the run stops as the single-shot loop's
does: calls beyond the budget are answered "not dispatched" and the run stops with
``stop_reason="tool_round_limit"``, as it does when the turn after the last allowed round
answers with no text.

Every assistant message the loop stores names the agent that answered in its metadata
(``{"agent": <name>}``), so the stored session shows who answered each turn.

Use a handoff when the other agent should *take over the conversation* (triage → specialist); use
an agent tool (``agent.as_tool``) when the calling agent should *stay in charge* and get an
answer back.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any, Final, Protocol

from prism.errors import AgentLoopStateError, PrismConfigError
from prism.events import TurnStartedEvent
from prism.loop_needs import AgentSwitch, LoopNeeds
from prism.loops._turn import end_tool_rounds, record_turn
from prism.loops.contracts import LoopContext
from prism.loops.dispatch import (
    append_result_row,
    dispatch_tool_calls_in_order,
    dispatchable_tool_calls,
)
from prism.types import AgentInput, JsonValue, ToolCallContent, ToolDefinition, ToolResult, Usage

__all__ = ["AGENT_KEY", "TRANSFER_PREFIX", "HandoffLoop", "HandoffTarget", "handoff_loop"]

TRANSFER_PREFIX: Final = "transfer_to_"
"""Prefix of the generated handoff tools."""
AGENT_KEY: Final = "agent"
"""Metadata key of a stored assistant message: the name of the agent that answered."""

_NAME = re.compile(r"[a-zA-Z0-9_-]{1,52}")


class HandoffTarget(Protocol):
    """What the handoff loop reads of a target agent (an ``Agent``); the runtime's switch uses
    its ``config``."""

    @property
    def name(self) -> str | None:
        """The agent's name (the tool is ``transfer_to_<name>``)."""
        ...

    @property
    def config(self) -> object:
        """The agent's configuration."""
        ...


def _never(arguments: dict[str, Any], context: Any) -> Any:  # answered by the loop itself
    raise RuntimeError("handoff tools are answered by the handoff loop")


class HandoffLoop:
    """The handoff loop; build it with [`handoff_loop()`][prism.loops.handoff.handoff_loop]."""

    __slots__ = ("_tools", "needs", "tool_concurrency")

    def __init__(self, targets: tuple[HandoffTarget, ...], tool_concurrency: int) -> None:
        self.needs = LoopNeeds(handoffs=targets)
        """Declares the targets (the runtime offers ``ctx.handoff``)."""
        self.tool_concurrency = tool_concurrency
        """Parallel dispatch limit of a tool round."""
        self._tools = {
            str(target.name): ToolDefinition(
                name=f"{TRANSFER_PREFIX}{target.name}",
                execute=_never,
                description=_description(target),
                parameters={"type": "object", "properties": {}, "additionalProperties": False},
            )
            for target in targets
        }

    @property
    def name(self) -> str:
        """Strategy name, ``"handoff"``."""
        return "handoff"

    @property
    def revision(self) -> str:
        """Strategy revision, ``"1"`` (the targets join the fingerprint separately)."""
        return "1"

    def __repr__(self) -> str:
        return f"handoff_loop({', '.join(self._tools)})"

    def snapshot(self) -> JsonValue:
        """The loop's durable state: ``{}``. Like the single-shot loop's, a durable run of this
        loop rests on the stored history; the agent answering is stored there too (each switch
        is a session entry the runtime reads back on resume)."""
        return {}

    def restore(self, snapshot: JsonValue, /) -> None:
        """Accept [`snapshot()`][prism.loops.handoff.HandoffLoop.snapshot]'s value (nothing to rehydrate).

        Raises:
            AgentLoopStateError: ``ERR_PRISM_LOOP_SNAPSHOT`` — ``snapshot`` is not an object.
        """
        if not isinstance(snapshot, dict):
            raise AgentLoopStateError(
                "ERR_PRISM_LOOP_SNAPSHOT", "handoff loop snapshot must be an object"
            )

    def _offer(self, request: Any, current: str | None) -> Any:
        extra = tuple(tool for name, tool in self._tools.items() if name != current)
        if not extra:
            return request
        return dataclasses.replace(request, tools=tuple(request.tools or ()) + extra)

    async def run(self, ctx: LoopContext, /) -> Usage | None:
        """Drive turns as the single-shot loop does, switching agents on a transfer call.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — the context offers no agent switch (a
                runtime that does not read ``needs.handoffs``).
            Exception: as the single-shot loop.
        """
        switch: AgentSwitch | None = getattr(ctx, "handoff", None)
        if switch is None:
            raise PrismConfigError("the handoff loop needs a context with an agent switch")
        usage: Usage | None = None
        tool_rounds = 0
        next_input: AgentInput = ctx.input
        turn = 1
        sid: str = getattr(ctx, "session_id", "")
        rid: str = getattr(ctx, "run_id", "")
        apply_steers = getattr(ctx, "apply_pending_steers", None)
        while True:
            ctx.signal.throw_if_aborted()
            if apply_steers is not None:
                await apply_steers()
            ctx.emit(TurnStartedEvent(session_id=sid, run_id=rid, turn=turn))
            request = await ctx.assemble(next_input, None, turn)
            result = await ctx.generate(self._offer(request, switch.agent_name))
            if result.usage is not None:
                usage = result.usage
            await record_turn(ctx, result, turn, sid, rid, {AGENT_KEY: switch.agent_name})
            calls = dispatchable_tool_calls(result.calls) if result.calls else []
            # tool_rounds: the rounds of the agent answering now; ctx.max_tool_rounds is its
            # budget (the runtime sets a target's at the switch)
            if not calls or tool_rounds >= ctx.max_tool_rounds:
                await end_tool_rounds(ctx, calls, tool_rounds, result.text)
                return usage
            switched = await self._round(ctx, switch, calls)
            tool_rounds = 0 if switched else tool_rounds + 1
            next_input = []
            turn += 1

    async def _round(
        self, ctx: LoopContext, switch: AgentSwitch, calls: Sequence[ToolCallContent]
    ) -> bool:
        """Dispatch the host calls, then answer the transfers and switch to the first one's
        target; whether it switched."""
        transfers = [
            c
            for c in calls
            if c.name.startswith(TRANSFER_PREFIX) and c.name[len(TRANSFER_PREFIX) :] in self._tools
        ]
        others = [c for c in calls if c not in transfers]
        if others:
            await dispatch_tool_calls_in_order(others, ctx, concurrency=self.tool_concurrency)
        target: str | None = None
        for call in transfers:
            name = call.name[len(TRANSFER_PREFIX) :]
            if target is None:
                target = name
                value: Any = {"transferred_to": name}
            else:
                value = {"ignored": f"already transferred to {target}"}
            await append_result_row(
                ctx, ToolResult(tool_call_id=call.id, name=call.name, value=value)
            )
        if target is None:
            return False
        await switch.switch(target)
        return True


def _description(target: HandoffTarget) -> str:
    metadata = getattr(target.config, "metadata", None) or {}
    agent_description = metadata.get("description")
    text = f"Hand the conversation over to the {target.name} agent."
    return f"{text} {agent_description}" if isinstance(agent_description, str) else text


def handoff_loop(*targets: HandoffTarget, tool_concurrency: int = 1) -> HandoffLoop:
    """The handoff loop over ``targets`` (``Agent`` objects with distinct names).

    Args:
        *targets: The agents the model may hand the run over to; each needs a ``name`` of 1–52
            characters from ``[a-zA-Z0-9_-]`` (the tool is ``transfer_to_<name>``). An agent's
            ``metadata["description"]`` (a string) is added to its tool's description.
        tool_concurrency: Parallel dispatch limit of a tool round (≥ 1).

    Returns:
        A ``HandoffLoop`` (``name="handoff"``) to pass as ``loop=``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — no targets, a target without a valid name,
            duplicate names, or an invalid ``tool_concurrency``.
    """
    if not targets:
        raise PrismConfigError("handoff_loop needs at least one target agent")
    names: set[str] = set()
    for target in targets:
        name = getattr(target, "name", None)
        if not isinstance(name, str) or _NAME.fullmatch(name) is None:
            raise PrismConfigError(
                f"handoff target names must match ^[a-zA-Z0-9_-]{{1,52}}$, got {name!r}"
            )
        if name in names:
            raise PrismConfigError(f"duplicate handoff target: {name}")
        names.add(name)
    if (
        isinstance(tool_concurrency, bool)
        or not isinstance(tool_concurrency, int)
        or (tool_concurrency < 1)
    ):
        raise PrismConfigError("tool_concurrency must be an int >= 1")
    return HandoffLoop(tuple(targets), tool_concurrency)
