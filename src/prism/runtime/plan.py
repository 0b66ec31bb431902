"""The run plan: every run option resolved against the agent, once, before anything runs.

:func:`plan_run` is the preflight of a run (invalid options fail here, before any side
effect) and the one place where option precedence is decided: a run value wins when it is
not ``None``; ``metadata`` merges agent < session < run; guardrails, request policies and tool
filters are the agent's followed by the run's; ``retry``/``compaction`` layer per their own rules;
limits may only narrow the agent's. The resulting :class:`RunPlan` is what the run leg
(:mod:`prism.runtime.leg`) executes.

The run path, top to bottom: :mod:`prism.runtime.session` (``AgentSession.run``) →
:mod:`prism.runtime.plan` (this module) → :mod:`prism.runtime.leg` (the leg's envelope) →
:mod:`prism.runtime.context` (``RunContext``, the loop's ``ctx``; ``ctx.generate`` hands the
request to the provider attempts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

from prism.abort import AbortSignal
from prism.assembly import Skill, SystemPromptContribution
from prism.errors import PrismConfigError
from prism.guardrails import Guardrails, merge_guardrails
from prism.ledger import RunLedger
from prism.limits import RunLimits, coerce_run_limits, resolve_run_limits
from prism.loops.contracts import AgentLoopOptions, AgentLoopStrategy
from prism.redaction import SecretRedactor
from prism.retry import RetryOptions, resolve_retry_options
from prism.runtime._delegation import PARENT_RUN_KEY, child_redactor, parent_link
from prism.runtime._run_state import RunStateOptions, check_durable_run, coerce_run_state_options
from prism.runtime.config import AgentConfig, ProviderSource
from prism.runtime.options import RunOptions
from prism.runtime.policies import ProviderRequestPolicy
from prism.runtime.turn_policy import TurnPolicy, coerce_turn_policy, resolve_turn_policy
from prism.store import CompactionOptions, resolve_compaction_options
from prism.tools import ToolFilter, ToolValidator, normalize_tool_filters
from prism.types import (
    AgentInput,
    ModelConfig,
    OwnershipScope,
    ProviderRequestOptions,
    StructuredOutputOptions,
    ToolExecutionContext,
)

__all__ = ["RunPlan", "plan_run"]


@dataclasses.dataclass(slots=True, kw_only=True)
class RunPlan:
    """The run options after preflight, resolved against the agent config."""

    input: AgentInput
    limits: RunLimits
    agent_limits: RunLimits | None
    run_limits: RunLimits | None
    retry: RetryOptions | None
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
    durable: RunStateOptions | None = None
    parent: ToolExecutionContext | None = None


def plan_run(
    config: AgentConfig,
    session_metadata: Mapping[str, Any],
    input: AgentInput,
    opts: RunOptions,
    *,
    durable: RunStateOptions | None = None,
) -> RunPlan:
    """Resolve ``opts`` against the agent ``config`` into a :class:`RunPlan`. No side effects.

    Args:
        config: The agent's configuration.
        session_metadata: The session's metadata (between the agent's and the run's).
        input: The run input (converted to messages later, by the leg).
        opts: The run options.
        durable: Forces the durable options of a resumed leg; ``None`` resolves them
            from ``opts`` and the agent.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an invalid option.
    """
# Option mappings become their dataclasses.
    run_limits = coerce_run_limits(opts.limits)
    coerced_policy = coerce_turn_policy(opts.turn_policy)
    run_state = coerce_run_state_options(opts.run_state)
    retry = resolve_retry_options(config.retry, opts.retry)
    compaction = resolve_compaction_options(config.compaction, opts.compaction)
# Limits may only narrow the agent's.
    resolved_limits = resolve_run_limits(config.limits, run_limits)
# The turn policy is checked against the resolved turn limit.
    turn_policy = resolve_turn_policy(coerced_policy, max_turns_limit=resolved_limits.max_turns)
# Durable options: the run's or the agent's, checked against the other options.
    if durable is None:
        durable = check_durable_run(
            config,
            run_state,
            run_loop=opts.loop,
            run_model=opts.model,
            run_guardrails=opts.guardrails,
            run_tool_filter=opts.tool_filter,
        )
    model = config.model if opts.model is None else ModelConfig.coerce(opts.model)
    parent = opts.parent
    if parent is not None and not isinstance(parent, ToolExecutionContext):
        raise PrismConfigError(
            f"parent must be the calling tool's ToolExecutionContext, got {type(parent).__name__}"
        )
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
    skills = config.skills if opts.skills is None else tuple(opts.skills)
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
    ownership = opts.ownership if opts.ownership is not None else config.ownership
    return RunPlan(
        input=input,
        limits=resolved_limits,
        agent_limits=config.limits,
        run_limits=run_limits,
        retry=retry,
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
        provider_options=opts.provider_options,
        provider_request_policies=policies,
        system_prompt=contributions,
        drop_agent_system_prompt=drop_agent_prompt,
        run_ledger=opts.run_ledger if opts.run_ledger is not None else config.run_ledger,
        ownership=None if ownership is None else OwnershipScope.coerce(ownership),
        idempotency_key=(
            opts.idempotency_key if opts.idempotency_key is not None
            else config.idempotency_key
        ),
        guardrails=merge_guardrails(config.guardrails, opts.guardrails),
        skills=skills,
        tool_filters=config.tool_filter + normalize_tool_filters(opts.tool_filter),
        tool_validator=validator,
        turn_policy=turn_policy,
        durable=durable,
        parent=parent,
    )
