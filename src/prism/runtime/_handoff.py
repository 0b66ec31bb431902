"""The agent switch of a run whose loop hands the conversation over (``needs.handoffs``).

:class:`RunHandoff` is ``ctx.handoff`` (:class:`~prism.loop_needs.AgentSwitch`). ``switch(name)``
makes the named target agent answer the rest of the run: the context's configuration, tools and
middleware become the target's (the tool dispatch is bound again), the plan's model and tool
filters become the target's, and the request assembler and provider attempts are set up again
with the target's instructions, system prompt, context providers, skills, provider options and
provider. The history, limits, usage, redactor, run options and durable state stay the run's.
A model change is recorded as a ``model_change`` entry, as for a run with another model.
"""

from __future__ import annotations

from typing import Any

from prism.assembly import select_skills
from prism.errors import PrismConfigError
from prism.runtime._setup import resolve_provider, setup_assembly, setup_attempts
from prism.runtime.context import RunContext
from prism.store import new_session_entry
from prism.structured_output import resolve_structured_output

__all__ = ["RunHandoff"]


class RunHandoff:
    """``ctx.handoff`` of a run whose loop declares handoff targets.

    Args:
        ctx: The run's context.
        loop: The run's loop.
        targets: The loop's ``needs.handoffs`` (agents, by name).
    """

    __slots__ = ("_ctx", "_loop", "_targets")

    def __init__(self, ctx: RunContext, loop: Any, targets: tuple[Any, ...]) -> None:
        self._ctx = ctx
        self._loop = loop
        self._targets = {target.name: target for target in targets}

    @property
    def agent_name(self) -> str | None:
        """Name of the agent answering now."""
        name: str | None = self._ctx.config.name
        return name

    async def switch(self, name: str, /) -> None:
        """Make the target named ``name`` answer the rest of the run.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — no target has that name.
            ProviderResolutionError: the target's provider cannot be resolved.
        """
        target = self._targets.get(name)
        if target is None:
            raise PrismConfigError(f"unknown handoff target: {name}")
        ctx = self._ctx
        config = target.config
        plan = ctx.plan
        previous = plan.model
        ctx.config = config
        ctx.registry = config.tools
        ctx.middleware = config.middleware
        ctx.bound_dispatch = None
        plan.model = config.model
        plan.tool_filters = config.tool_filter
        provider = await resolve_provider(ctx)
        if previous.to_dict() != config.model.to_dict():
            await ctx.append_entry(
                new_session_entry(
                    "model_change",
                    session_id=ctx.session_id,
                    parent_id=ctx.state.leaf_id,
                    run_id=ctx.run_id,
                    model=config.model,
                    previous_model=previous,
                )
            )
        options = resolve_structured_output(
            config.provider_options,
            plan.provider_options,
            structured_output=plan.structured_output,
            loop=self._loop,
            model=plan.model,
        )
        setup_assembly(ctx, options, select_skills(config.skills, None), ())
        setup_attempts(ctx, provider)
