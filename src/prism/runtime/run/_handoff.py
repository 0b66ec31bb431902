"""The agent switch of a run whose loop hands the conversation over (``needs.handoffs``).

[`RunHandoff`][prism.runtime.run._handoff.RunHandoff] is ``ctx.handoff`` ([`AgentSwitch`][prism.loop_needs.AgentSwitch]). ``switch(name)``
makes the named target agent answer the rest of the run: the context's configuration, tools and
middleware become the target's (the tool dispatch is bound again), the plan's model and tool
filters become the target's, and the request assembler and provider attempts are set up again
with the target's instructions, system prompt, context providers, skills, provider options and
provider. The history, compaction summaries, limits, usage, redactor, run options and durable
state stay the run's.

The target's tool-round policy (``answer_after_tool_rounds``: the run's own value, else the
target's, else its provider's default) applies after the switch and counts the rounds from the
switch, so the transfer does not spend the target's rounds ([`prism.runtime.run._tool_rounds`][prism.runtime.run._tool_rounds]);
``ctx.max_tool_rounds`` becomes the target's round budget from the switch on.

Every switch is stored: a ``custom`` entry whose ``data`` is ``{"type": "handoff", "agent":
<target>, "previous_agent": <name before>, "tool_rounds": <the run's tool rounds at the
switch>}`` ([`handoff_entry_agent()`][prism.runtime.run._handoff.handoff_entry_agent] reads the agent), then a ``model_change`` entry when the
target's model differs, as for a run with another model. A durable run resumed after a crash or a
suspension reads the last switch its run stored on the branch it resumes from
([`handed_off_to()`][prism.runtime.run._handoff.handed_off_to]) and makes that agent answer again ([`RunHandoff.restore()`][prism.runtime.run._handoff.RunHandoff.restore]) before its
first turn, without storing anything; the stored model is already the target's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from prism.assembly import select_skills
from prism.errors import AgentRunStateError, PrismConfigError
from prism.providers.base import AIProvider
from prism.runtime.run._setup import resolve_provider, setup_assembly, setup_attempts
from prism.runtime.run._tool_rounds import tool_rounds
from prism.runtime.run.context import RunContext
from prism.store import SessionEntry
from prism.structured_output import resolve_structured_output

__all__ = ["HANDOFF_ENTRY", "Handover", "RunHandoff", "handed_off_to", "handoff_entry_agent"]

HANDOFF_ENTRY: Final = "handoff"
"""``data["type"]`` of the ``custom`` entry a switch stores."""


def handoff_entry_agent(entry: SessionEntry) -> str | None:
    """The agent a stored switch handed the run to, or ``None`` when ``entry`` is not one."""
    data = entry.data
    if entry.kind != "custom" or data is None or data.get("type") != HANDOFF_ENTRY:
        return None
    agent = data.get("agent")
    return agent if isinstance(agent, str) else None


@dataclass(frozen=True, slots=True)
class Handover:
    """A stored switch: the ``agent`` the run was handed to, at ``tool_rounds`` (the run's tool
    rounds then; 0 in switches stored before it was recorded)."""

    agent: str
    tool_rounds: int = 0


def handed_off_to(branch: Sequence[SessionEntry], run_id: str) -> Handover | None:
    """The last switch of the run ``run_id`` on ``branch`` (root→leaf), or ``None`` when it
    never switched there (its own agent answers). Switches of earlier runs do not count: every
    run starts with the session's agent. O(len(branch))."""
    for entry in reversed(branch):
        if entry.run_id == run_id:
            agent = handoff_entry_agent(entry)
            if agent is not None:
                assert entry.data is not None
                rounds = entry.data.get("tool_rounds")
                return Handover(agent, rounds if type(rounds) is int and rounds >= 0 else 0)
    return None


class RunHandoff:
    """``ctx.handoff`` of a run whose loop declares handoff targets.

    Args:
        ctx: The run's context.
        loop: The run's loop.
        targets: The loop's ``needs.handoffs`` (agents, by name).
    """

    __slots__ = ("_ctx", "_leg_start", "_loop", "_targets")

    def __init__(self, ctx: RunContext, loop: Any, targets: tuple[Any, ...]) -> None:
        self._ctx = ctx
        self._loop = loop
        self._targets = {target.name: target for target in targets}
        self._leg_start = ctx.tracker.tool_rounds
        """The run's tool rounds when this leg started."""

    @classmethod
    async def attach(
        cls, ctx: RunContext, loop: Any, targets: tuple[Any, ...], handed_to: Handover | None
    ) -> RunHandoff | None:
        """The switch of a leg (``ctx.handoff``): ``None`` when the loop declares no targets and
        the run never handed over; in a resumed leg of a run that handed over to ``handed_to``
        ([`handed_off_to()`][prism.runtime.run._handoff.handed_off_to]), that agent answers again ([`restore()`][prism.runtime.run._handoff.RunHandoff.restore]), its tool rounds
        counted from that switch.

        Raises:
            AgentRunStateError: as [`restore()`][prism.runtime.run._handoff.RunHandoff.restore].
            ProviderResolutionError: as [`restore()`][prism.runtime.run._handoff.RunHandoff.restore].
        """
        if not targets and handed_to is None:
            return None
        switch = cls(ctx, loop, targets)
        if handed_to is not None:
            await switch.restore(handed_to.agent, taken_over_at=handed_to.tool_rounds)
        return switch

    @property
    def agent_name(self) -> str | None:
        """Name of the agent answering now."""
        name: str | None = self._ctx.config.name
        return name

    async def switch(self, name: str, /) -> None:
        """Make the target named ``name`` answer the rest of the run; its tool-round policy
        counts from here and ``ctx.max_tool_rounds`` becomes its round budget from here.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — no target has that name.
            ProviderResolutionError: the target's provider cannot be resolved.
        """
        target = self._targets.get(name)
        if target is None:
            raise PrismConfigError(f"unknown handoff target: {name}")
        ctx = self._ctx
        previous_agent = self.agent_name
        previous = ctx.plan.model
        provider = await self._take_over(target)
        model = target.config.model
        rounds = ctx.tracker.tool_rounds
        await ctx.append_run_entry(
            "custom",
            data={
                "type": HANDOFF_ENTRY,
                "agent": name,
                "previous_agent": previous_agent,
                "tool_rounds": rounds,
            },
        )
        if previous.to_dict() != model.to_dict():
            await ctx.append_run_entry("model_change", model=model, previous_model=previous)
        self._set_up(provider, rounds)

    async def restore(self, name: str, /, *, taken_over_at: int = 0) -> None:
        """Make the target named ``name`` answer again in a resumed leg of a run that handed over
        to it before it stopped (see [`handed_off_to()`][prism.runtime.run._handoff.handed_off_to]), at ``taken_over_at`` (the run's
        tool rounds at that switch); nothing is stored.

        Raises:
            AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — no handoff target of the agent
                has that name any more.
            ProviderResolutionError: the target's provider cannot be resolved.
        """
        target = self._targets.get(name)
        if target is None:
            raise AgentRunStateError(
                f"the run was handed over to agent {name}, which is not a handoff target of "
                "this agent"
            )
        if target.config is self._ctx.config:
            return
        self._set_up(await self._take_over(target), taken_over_at)

    async def _take_over(self, target: Any) -> AIProvider:
        """The target's configuration, tools, middleware, model and tool filters become the
        run's; returns its provider."""
        ctx = self._ctx
        config = target.config
        plan = ctx.plan
        ctx.config = config
        ctx.registry = config.tools
        ctx.middleware = config.middleware
        ctx.dispatcher = None
        plan.model = config.model
        plan.tool_filters = config.tool_filter
        if plan.run_answer_after_tool_rounds is None:
            plan.answer_after_tool_rounds = config.answer_after_tool_rounds
        return await resolve_provider(ctx)

    def _set_up(self, provider: AIProvider, taken_over_at: int) -> None:
        """The request assembler and the provider attempts again, with the target's parts and
        the run's compaction summaries; the target's tool-round policy from ``taken_over_at``
        (the run's tool rounds at the switch) within the rounds the leg's limit has left."""
        ctx = self._ctx
        config = ctx.config
        plan = ctx.plan
        options = resolve_structured_output(
            config.provider_options,
            plan.provider_options,
            structured_output=plan.structured_output,
            loop=self._loop,
            model=plan.model,
        )
        summaries = () if ctx.assembler is None else ctx.assembler.summaries
        setup_assembly(
            ctx, options, select_skills(config.skills, None), summaries, self._loop, provider
        )
        setup_attempts(ctx, provider)
        tracker = ctx.tracker
        left = max(0, tracker.leg_max_tool_rounds - (tracker.tool_rounds - self._leg_start))
        ctx.answer_after_tool_rounds, ctx.max_tool_rounds = tool_rounds(
            plan, provider, tracker, taken_over_at=taken_over_at, leg_budget=left
        )
