"""The run plan: every run option resolved against the agent, once, before anything runs.

[`plan_run()`][prism.runtime.run.plan.plan_run] is the preflight of a run (invalid options fail here, before any side
effect) and the one place where option precedence is decided: a run value wins when it is
not ``None``; ``metadata`` merges agent < session < run; guardrails, request policies and tool
filters are the agent's followed by the run's; ``retry``/``compaction`` layer per their own rules;
limits may only narrow the agent's. The resulting [`RunPlan`][prism.runtime.run.plan.RunPlan] is what the run leg
([`prism.runtime.run.leg`][prism.runtime.run.leg]) executes.

The run path, top to bottom: [`prism.runtime.run.session`][prism.runtime.run.session] (``AgentSession.run``) →
``prism.runtime.run.plan`` (this module) → [`prism.runtime.run.leg`][prism.runtime.run.leg] (the leg's envelope) →
[`prism.runtime.run.context`][prism.runtime.run.context] (``RunContext``, the loop's ``ctx``; ``ctx.generate`` hands the
request to the provider attempts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

from prism.abort import AbortSignal
from prism.assembly import Skill, SystemPromptContribution
from prism.errors import PrismConfigError, PrismError
from prism.guardrails import Guardrails, merge_guardrails
from prism.ledger import RunLedger
from prism.limits import (
    RunLimits,
    coerce_run_limits,
    resolve_run_limits,
    sets_finite_output_budget,
)
from prism.loops.contracts import AgentLoopOptions, AgentLoopStrategy, coerce_loop_options
from prism.loops.resolve import resolve_loop, resolve_tool_concurrency
from prism.loops.single_shot import single_shot_loop
from prism.providers.defaults import check_model_for_provider
from prism.redaction import SecretRedactor
from prism.retry import (
    RetryOptions,
    RetryPolicy,
    create_default_retry_policy,
    resolve_retry_options,
)
from prism.runtime.run._delegation import PARENT_RUN_KEY, child_redactor, parent_link
from prism.runtime.run._request_codec import HeadMemo
from prism.runtime.run.config import (
    AgentConfig,
    ProviderSource,
    check_answer_after_tool_rounds,
    check_run_tool_choice,
    with_max_tokens,
)
from prism.runtime.run.options import RunOptions
from prism.runtime.run.policies import ProviderRequestPolicy
from prism.runtime.run.seam import DurableHooks, RunStateOptions, coerce_run_state_options
from prism.runtime.run.turn_policy import TurnPolicy, coerce_turn_policy, resolve_turn_policy
from prism.store import CompactionOptions, resolve_compaction_options
from prism.tools import ToolFilter, ToolValidator, normalize_tool_filters
from prism.types import (
    AgentInput,
    ModelConfig,
    OwnershipScope,
    ProviderRequestOptions,
    StructuredOutputOptions,
    ToolChoice,
    ToolExecutionContext,
)

__all__ = ["RunDefaults", "RunPlan", "plan_run", "run_defaults"]


@dataclasses.dataclass(slots=True, kw_only=True)
class RunPlan:
    """The run options after preflight, resolved against the agent config."""

    input: AgentInput
    limits: RunLimits
    agent_limits: RunLimits | None
    run_limits: RunLimits | None
    retry: RetryOptions | None
    retry_policy: RetryPolicy | None
    """The built-in policy of ``retry`` when it is the agent's (shared by its runs), else
    ``None`` (the provider attempts build their own)."""
    compaction: CompactionOptions | None
    loop: AgentLoopOptions | Mapping[str, Any] | AgentLoopStrategy | None
    signal: AbortSignal | None
    metadata: Mapping[str, Any]
    structured_output: StructuredOutputOptions | Mapping[str, Any] | None
    redactor: SecretRedactor | None
    active_skills: Sequence[str] | None
    model: ModelConfig
    provider_source: ProviderSource | None
    provider_options: ProviderRequestOptions | Mapping[str, Any] | None
    provider_request_policies: tuple[ProviderRequestPolicy, ...]
    system_prompt: tuple[SystemPromptContribution, ...]
    drop_agent_system_prompt: bool
    run_ledger: RunLedger | None
    ownership: OwnershipScope | None
    idempotency_key: str | None
    guardrails: Guardrails | None
    skills: tuple[Skill, ...]
    tool_filters: tuple[ToolFilter, ...]
    tool_validator: ToolValidator | Literal[False] | None
    turn_policy: TurnPolicy | None = None
    durable_hooks: DurableHooks
    """The durable mode the leg opens its hooks from (handed over by whoever planned the run)."""
    durable: RunStateOptions | None = None
    answer_after_tool_rounds: int | Literal[False] | None = None
    """The run's tool-round policy, else the answering agent's; ``None``: the provider's default
    applies (resolved by the leg, which knows the provider)."""
    run_answer_after_tool_rounds: int | Literal[False] | None = None
    """The run's own ``answer_after_tool_rounds`` (``None``: not set; a handoff target's own
    policy then applies after the switch)."""
    tool_choice: ToolChoice | None = None
    """The run's tool choice, else the agent's; ``None``: the provider's default."""
    parent: ToolExecutionContext | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class RunDefaults:
    """What a run takes from its agent when it sets no option of its own, resolved once per
    agent config (``run_defaults()``) instead of on every run."""

    limits: RunLimits
    retry: RetryOptions | None
    retry_policy: RetryPolicy | None
    """The built-in policy of ``retry`` (``None``: retry off, a single attempt, or the host's
    own ``retry.policy``); it keeps no state, so the agent's runs share it."""
    compaction: CompactionOptions | None
    durable: RunStateOptions | None
    durable_known: bool
    """Whether ``durable`` holds: ``False`` when the agent alone does not pass the durable
    preflight (a tool needs approval and only a run's ``run_state`` can make it durable)."""
    metadata: Mapping[str, Any]
    guardrails: Guardrails | None
    ownership: OwnershipScope | None
    loop: AgentLoopStrategy | None
    """The agent's loop when resolving it gives the same object on every run (single-shot, or
    a strategy instance); ``None``: each run builds its own (generate-validate-revise)."""
    tool_concurrency: int
    """The agent loop's parallel tool dispatch limit."""
    finite_output_budget: bool
    """Whether the agent's limits set a finite output budget (output buffering)."""
    request_head: HeadMemo = dataclasses.field(default_factory=HeadMemo, compare=False)
    """The request head (tool schemas, options, metadata) the agent's runs measured last."""


def run_defaults(config: AgentConfig, hooks: DurableHooks) -> RunDefaults:
    """The [`RunDefaults`][prism.runtime.run.plan.RunDefaults] of ``config``, resolved on the first call and kept on it.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — as [`plan_run()`][prism.runtime.run.plan.plan_run] for an agent option (then
            nothing is kept, and the next run raises again).
    """
    kept = config.run_defaults
    if isinstance(kept, RunDefaults):
        return kept
    retry = resolve_retry_options(config.retry, None)
    policy = None
    if retry is not None and retry.policy is None and retry.max_attempts > 1:
        policy = create_default_retry_policy(retry)
    ownership = config.ownership
    loop: AgentLoopStrategy | None = resolve_loop(None, config.loop)
    if loop is not single_shot_loop and loop is not config.loop:
        loop = None
    try:
        durable: RunStateOptions | None = hooks.preflight(config, None, None)
        durable_known = True
    except PrismError:  # raised again by each run that does not make itself durable
        durable, durable_known = None, False
    defaults = RunDefaults(
        limits=resolve_run_limits(config.limits, None),
        retry=retry,
        retry_policy=policy,
        compaction=resolve_compaction_options(config.compaction, None),
        durable=durable,
        durable_known=durable_known,
        metadata=MappingProxyType(dict(config.metadata)),
        guardrails=merge_guardrails(config.guardrails, None),
        ownership=None if ownership is None else OwnershipScope.coerce(ownership),
        loop=loop,
        tool_concurrency=resolve_tool_concurrency(None, config.loop),
        finite_output_budget=sets_finite_output_budget(config.limits),
    )
    object.__setattr__(config, "run_defaults", defaults)  # a memo on the frozen config
    return defaults


def plan_run(
    config: AgentConfig,
    session_metadata: Mapping[str, Any],
    input: AgentInput,
    opts: RunOptions,
    *,
    hooks: DurableHooks,
    durable: RunStateOptions | None = None,
) -> RunPlan:
    """Resolve ``opts`` against the agent ``config`` into a [`RunPlan`][prism.runtime.run.plan.RunPlan]. No side effects.

    What does not depend on the run's options comes from ``run_defaults()`` (resolved once per
    agent); an option the run sets is resolved here, against the agent's value.

    Args:
        config: The agent's configuration.
        session_metadata: The session's metadata (between the agent's and the run's).
        input: The run input (converted to messages later, by the leg).
        opts: The run options.
        hooks: The durable mode's preflight and leg hooks (``prism.runtime.durable.DURABLE_HOOKS``).
        durable: Forces the durable options of a resumed leg; ``None`` resolves them
            from ``opts`` and the agent.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an invalid option.
    """
    agent = run_defaults(config, hooks)
    # Option mappings become their dataclasses.
    run_limits = coerce_run_limits(opts.limits)
    coerced_policy = coerce_turn_policy(opts.turn_policy)
    run_state = coerce_run_state_options(opts.run_state)
    retry = agent.retry if opts.retry is None else resolve_retry_options(config.retry, opts.retry)
    compaction = (
        agent.compaction
        if opts.compaction is None
        else resolve_compaction_options(config.compaction, opts.compaction)
    )
    # Limits may only narrow the agent's.
    resolved_limits = (
        agent.limits if run_limits is None else resolve_run_limits(config.limits, run_limits)
    )
    # The turn policy is checked against the resolved turn limit.
    turn_policy = (
        None
        if coerced_policy is None
        else resolve_turn_policy(coerced_policy, max_turns_limit=resolved_limits.max_turns)
    )
    # Durable options: the run's or the agent's, checked against the other options.
    if durable is None:
        if (
            agent.durable_known
            and run_state is None
            and opts.loop is None
            and opts.model is None
            and opts.guardrails is None
            and opts.tool_filter is None
        ):
            durable = agent.durable
        else:
            durable = hooks.preflight(config, run_state, opts)
    if isinstance(opts.loop, Mapping):
        coerce_loop_options(opts.loop)  # a bad strategy fails here, before any provider call
    model = config.model if opts.model is None else ModelConfig.coerce(opts.model)
    if opts.model is not None and config.provider is not None:
        check_model_for_provider(model, config.provider)
    parent = opts.parent
    if parent is not None and not isinstance(parent, ToolExecutionContext):
        raise PrismConfigError(
            f"parent must be the calling tool's ToolExecutionContext, got {type(parent).__name__}"
        )
    metadata = agent.metadata
    if session_metadata or opts.metadata or parent is not None:
        link = {} if parent is None else {PARENT_RUN_KEY: parent_link(parent)}
        metadata = MappingProxyType(
            {**config.metadata, **session_metadata, **(opts.metadata or {}), **link}
        )
    system_prompt = opts.system_prompt
    drop_agent_prompt = system_prompt is False
    contributions: tuple[SystemPromptContribution, ...] = ()
    if system_prompt is not None and system_prompt is not False:
        contributions = tuple(system_prompt)
        for item in contributions:
            if not isinstance(item, SystemPromptContribution):
                raise PrismConfigError(
                    "system_prompt must be a sequence of SystemPromptContribution or False"
                )
    skills = config.skills
    if opts.skills is not None:
        skills = tuple(opts.skills)
        for skill in skills:
            if not isinstance(skill, Skill):
                raise PrismConfigError(f"skills must be Skill objects, got {type(skill).__name__}")
    active = opts.active_skills
    if isinstance(active, str):
        active = (active,)
    policies = tuple(opts.provider_request_policies or ())
    for policy in policies:
        if not callable(policy):
            raise PrismConfigError("provider_request_policies must be callables")
    validator = opts.tool_validator
    if validator is not None and validator is not False and not callable(validator):
        raise PrismConfigError("tool_validator must be None, False or callable")
    ownership = agent.ownership if opts.ownership is None else OwnershipScope.coerce(opts.ownership)
    run_answer_after = check_answer_after_tool_rounds(opts.answer_after_tool_rounds)
    answer_after = run_answer_after
    if answer_after is None:
        answer_after = config.answer_after_tool_rounds
    tool_choice = config.tool_choice
    if opts.tool_choice is not None:
        tool_choice = check_run_tool_choice(
            opts.tool_choice,
            tools=config.tools,
            tool_sources=config.tool_sources,
            loop=opts.loop if opts.loop is not None else config.loop,
        )
    return RunPlan(
        input=input,
        limits=resolved_limits,
        agent_limits=config.limits,
        run_limits=run_limits,
        retry=retry,
        retry_policy=agent.retry_policy if retry is agent.retry else None,
        compaction=compaction,
        loop=opts.loop,
        signal=opts.signal if opts.signal is not None or parent is None else parent.signal,
        metadata=metadata,
        structured_output=opts.structured_output,
        redactor=child_redactor(
            opts.redactor if opts.redactor is not None else config.redactor, parent
        ),
        active_skills=active,
        model=model,
        provider_source=opts.provider_source,
        provider_options=(
            opts.provider_options
            if opts.max_tokens is None
            else with_max_tokens(opts.provider_options, opts.max_tokens)
        ),
        provider_request_policies=policies,
        system_prompt=contributions,
        drop_agent_system_prompt=drop_agent_prompt,
        run_ledger=opts.run_ledger if opts.run_ledger is not None else config.run_ledger,
        ownership=ownership,
        idempotency_key=(
            opts.idempotency_key if opts.idempotency_key is not None else config.idempotency_key
        ),
        guardrails=(
            agent.guardrails
            if opts.guardrails is None
            else merge_guardrails(config.guardrails, opts.guardrails)
        ),
        skills=skills,
        tool_filters=(
            config.tool_filter
            if opts.tool_filter is None
            else config.tool_filter + normalize_tool_filters(opts.tool_filter)
        ),
        tool_validator=validator,
        turn_policy=turn_policy,
        durable_hooks=hooks,
        durable=durable,
        answer_after_tool_rounds=answer_after,
        run_answer_after_tool_rounds=run_answer_after,
        tool_choice=tool_choice,
        parent=parent,
    )
