"""The tool-round policy: tools for the first N rounds of a run, then the model must answer.

``answer_after_tool_rounds`` (a run option, an agent option, else the provider's declared
default, [`ProviderDefaults`][prism.providers.defaults.ProviderDefaults]) does two things once N tool rounds
of the run have been dispatched:

* every later request that offers tools carries ``options.tool_choice = "none"`` (set before the
  host's request policies, which may still change it), so the model answers in text;
* the loop's round budget (``ctx.max_tool_rounds``) is at most N, so calls the model makes anyway
  are answered with "not dispatched" rows and the run stops with
  ``stop_reason="tool_round_limit"``.

``0`` forces the answer at once (the first request carries ``tool_choice="none"``); ``False``
never forces one. After a handoff the target agent's own policy applies (unless the run set
one), counting the rounds from the switch: a transfer does not spend the target's rounds.

Small models (the embedded 135M one) otherwise call the same tool again and again; the
embedded provider declares N = 1.

The ``tool_choice`` option (of ``create_agent`` and ``run()``) is put on the request before
that ([`apply_tool_choice()`][prism.runtime.run._tool_rounds.apply_tool_choice]), so the policy's ``"none"`` wins over it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

from prism.errors import PrismConfigError
from prism.limits import LimitValue, RunLimitTracker
from prism.providers.defaults import provider_defaults
from prism.types import ProviderRequest, ProviderRequestOptions, ToolChoice, merge_provider_options

if TYPE_CHECKING:
    from prism.runtime.run.plan import RunPlan

__all__ = [
    "apply_tool_choice",
    "force_text_answer",
    "resolve_answer_after",
    "round_budget",
    "tool_rounds",
]

_NO_TOOLS = ProviderRequestOptions(tool_choice="none")


def resolve_answer_after(planned: int | Literal[False] | None, provider: object) -> int | None:
    """The run's N: the run/agent value (``planned``), else the provider's default; ``False``
    (never force an answer) is ``None``."""
    if planned is None:
        return provider_defaults(provider).answer_after_tool_rounds
    if planned is False:
        return None
    return planned


def round_budget(leg_budget: LimitValue, answer_after: int | None, rounds_done: int) -> LimitValue:
    """The loop's round budget for this leg: the limit's, capped at the rounds the policy has
    left (N minus the rounds already dispatched in the run)."""
    if answer_after is None:
        return leg_budget
    return min(leg_budget, max(0, answer_after - rounds_done))


def tool_rounds(
    plan: RunPlan,
    provider: object,
    tracker: RunLimitTracker,
    *,
    taken_over_at: int = 0,
    leg_budget: LimitValue | None = None,
) -> tuple[int | None, LimitValue]:
    """The leg's ``(answer_after, max_tool_rounds)``.

    ``answer_after`` is the run's tool-round count (``tracker.tool_rounds``) from which requests
    must answer in text: ``taken_over_at`` plus the policy's N ([`resolve_answer_after()`][prism.runtime.run._tool_rounds.resolve_answer_after]),
    ``None`` when no answer is forced. ``taken_over_at`` is the run's tool-round count when the
    agent answering now took the run over (a handoff; 0 for the run's own agent): each agent's
    policy counts its own rounds. ``max_tool_rounds`` is the loop's round budget from now
    ([`round_budget()`][prism.runtime.run._tool_rounds.round_budget]) within ``leg_budget`` (the limit's rounds left; default the leg's,
    ``tracker.leg_max_tool_rounds``).
    """
    answer_after = resolve_answer_after(plan.answer_after_tool_rounds, provider)
    if leg_budget is None:
        leg_budget = tracker.leg_max_tool_rounds
    budget = round_budget(leg_budget, answer_after, tracker.tool_rounds - taken_over_at)
    return (None if answer_after is None else taken_over_at + answer_after), budget


def force_text_answer(request: ProviderRequest) -> ProviderRequest:
    """``request`` with ``tool_choice="none"`` when it offers tools (else unchanged)."""
    if not request.tools:
        return request
    return dataclasses.replace(request, options=merge_provider_options(request.options, _NO_TOOLS))


def apply_tool_choice(
    request: ProviderRequest, choice: ToolChoice, rounds_done: int
) -> ProviderRequest:
    """``request`` with the run's ``tool_choice`` when it offers tools (else unchanged).

    ``"auto"`` and ``"none"`` apply to every request; a forced choice (``"required"`` or a named
    tool) only before the run's first tool round (``rounds_done == 0``): after it, the request
    keeps its own choice, so the model can answer with the results instead of calling again.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — a named tool the request does not offer (the
            message names it and the offered tools).
    """
    if not request.tools:
        return request
    if not isinstance(choice, str):
        if rounds_done:
            return request
        offered = [tool.name for tool in request.tools]
        if choice["name"] not in offered:
            raise PrismConfigError(
                f"tool_choice names the tool {choice['name']!r}, which this request does not "
                f"offer (offered: {', '.join(offered)})"
            )
    elif choice == "required" and rounds_done:
        return request
    options = ProviderRequestOptions(tool_choice=choice)
    return dataclasses.replace(request, options=merge_provider_options(request.options, options))
