"""What a loop needs from the runtime, declared by the loop.

A loop strategy may carry a ``needs`` attribute, a [`LoopNeeds`][prism.loop_needs.LoopNeeds]; the runtime reads it with
[`loop_needs()`][prism.loop_needs.loop_needs] and never looks at the loop's ``name``. A loop without one (any custom loop
that does not declare it) gets [`DEFAULT_LOOP_NEEDS`][prism.loop_needs.DEFAULT_LOOP_NEEDS]: no schema of its own and no artifact
requirement.

Optional loop-context members that only some loops use are protocols of their own here, so that
[`LoopContext`][prism.loops.contracts.LoopContext] stays what every loop may rely on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from prism.types import StructuredOutputOptions, ToolDefinition

__all__ = [
    "DEFAULT_LOOP_NEEDS",
    "AgentSwitch",
    "ArtifactReporting",
    "HandingOff",
    "LoopNeeds",
    "handoff_tools",
    "loop_needs",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopNeeds:
    """What a loop asks of the runtime.

    Attributes:
        structured_output: A native schema the runtime merges into the run's provider options
            (so every request carries it unless the loop removes it); ``None``: none. A model
            without native structured output fails the run (``unsupported_model``).
        artifact: The run succeeds only when the loop reported a validated artifact through
            [`ArtifactReporting.report_artifact()`][prism.loop_needs.ArtifactReporting.report_artifact] (an ``artifact_finished`` event); otherwise
            it fails with ``ArtifactFailedError`` built from the last reported
            ``artifact_failed`` event.
        shown_schema: A schema the model should see without the loop requiring it natively
            (the artifact factories' schema): when ``structured_output`` is ``None``,
            ``shown_schema_native`` is true and the model supports native structured output,
            the runtime sends it natively; otherwise it goes into the system prompt as
            instructions. Never fails a run for an unsupported model.
        shown_schema_native: Whether ``shown_schema`` may go natively (``False``: instructions
            only).
        dispatches_tools: ``False`` when the loop answers every host tool call with a "not
            dispatched" row; the runtime then reports a run that offers tools (a warning on the
            ``prism`` logger).
        handoffs: Agents (``Agent`` objects) the loop may hand the run over to; they join the
            agent's durable fingerprint, and the runtime offers the switch as ``ctx.handoff``
            ([`HandingOff`][prism.loop_needs.HandingOff]).
    """

    structured_output: StructuredOutputOptions | None = None
    artifact: bool = False
    shown_schema: StructuredOutputOptions | None = None
    shown_schema_native: bool = True
    dispatches_tools: bool = True
    handoffs: tuple[Any, ...] = ()


DEFAULT_LOOP_NEEDS: Final = LoopNeeds()
"""The needs of a loop that declares none."""


def loop_needs(loop: object) -> LoopNeeds:
    """The [`LoopNeeds`][prism.loop_needs.LoopNeeds] a loop declares in its ``needs`` attribute, else the default."""
    needs = getattr(loop, "needs", None)
    return needs if isinstance(needs, LoopNeeds) else DEFAULT_LOOP_NEEDS


def handoff_tools(loop: object) -> tuple[ToolDefinition, ...]:
    """The tools of every handoff target ``loop`` declares, in target order: a run of the loop
    may call them after a switch, so what is checked of a run's tools before it starts (approval
    gates) covers them too."""
    return tuple(tool for target in loop_needs(loop).handoffs for tool in target.config.tools)


@runtime_checkable
class ArtifactReporting(Protocol):
    """Optional loop-context member of loops that produce an artifact (``needs.artifact``).

    ``report_artifact(event)`` records the outcome the runtime checks after the loop returns and
    emits ``event`` (an ``ArtifactFinishedEvent`` or ``ArtifactFailedEvent``) as ``ctx.emit``
    would. A context without it (a test double) gets the event through ``ctx.emit`` instead.
    """

    def report_artifact(self, event: object, /) -> None:
        """Record and emit an artifact outcome event."""
        ...


class AgentSwitch(Protocol):
    """The runtime's agent switch of a run whose loop declares ``needs.handoffs``."""

    @property
    def agent_name(self) -> str | None:
        """Name of the agent answering the run's turns now."""
        ...

    async def switch(self, name: str, /) -> None:
        """Hand the rest of the run to the handoff target named ``name``: later turns use its
        instructions, tools, model and provider (the history is kept), and its tool-round
        policy, counted from the switch: ``ctx.max_tool_rounds`` becomes its budget from here.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — no handoff target has that name.
        """
        ...


@runtime_checkable
class HandingOff(Protocol):
    """Optional loop-context member of loops that hand the conversation over to other agents
    (``needs.handoffs``): ``ctx.handoff`` is the [`AgentSwitch`][prism.loop_needs.AgentSwitch], ``None`` when the loop
    declares no handoff targets."""

    @property
    def handoff(self) -> AgentSwitch | None:
        """The run's agent switch."""
        ...
