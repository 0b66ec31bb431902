"""Run-leg setup helpers (RUN-11 steps 1, 11 and 14; STORE-8).

Functions of the :class:`~prism.runtime._run.RunLeg` kept apart so that the leg module reads as
the run's envelope: provider resolution, the request assembler, the provider-turn runner and
auto-compaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prism._util import maybe_await
from prism.assembly import RequestAssembler, Skill
from prism.errors import ProviderResolutionError
from prism.events import CompactionFinishedEvent, CompactionStartedEvent
from prism.limits import sets_finite_output_budget
from prism.providers.base import AIProvider
from prism.retry import RetryPayload
from prism.runtime.provider_turn import ProviderTurnRunner
from prism.store import (
    CompactionOptions,
    compaction_entry,
    compute_compaction,
    drop_trailing_input,
    history_from_branch,
    read_branch,
)
from prism.tools import filter_tools
from prism.types import Message, ProviderRequestOptions, Usage

if TYPE_CHECKING:
    from prism.runtime._run import RunLeg

__all__ = ["auto_compact", "resolve_provider", "setup_assembly", "setup_runner"]


async def resolve_provider(leg: RunLeg) -> AIProvider:
    """RUN-11 step 1 / RUN-6: the agent's provider, else the run's source, else the agent's.

    Raises:
        ProviderResolutionError: ``ERR_PRISM_PROVIDER_UNKNOWN`` (``Unknown provider: <name>``).
    """
    config = leg.config
    if config.provider is not None:
        return config.provider
    model = leg.plan.model
    for source in (leg.plan.provider_source, config.provider_source):
        if source is None:
            continue
        provider: Any = await maybe_await(source(model))
        if provider is not None:
            result: AIProvider = provider
            return result
    raise ProviderResolutionError(f"Unknown provider: {model.provider}")


def setup_assembly(
    leg: RunLeg,
    options: ProviderRequestOptions | None,
    skills: tuple[Skill, ...],
    summaries: Sequence[str],
) -> None:
    """RUN-11 step 14: the request assembler (system prompt, context providers, skills, tools,
    options, ``input_assembly`` hook), the request policies and the tool validator."""
    config = leg.config
    plan = leg.plan
    contributions = plan.system_prompt
    if not plan.drop_agent_system_prompt:
        contributions = config.system_prompt + contributions
    providers = list(config.context)
    for skill in skills:
        providers.extend(skill.context)
    tools = filter_tools(leg.registry, plan.tool_filters) if len(leg.registry) else ()
    middleware = leg.middleware
    hook = None
    if middleware is not None and middleware.has("input_assembly"):
        registry = middleware

        async def hook(messages: tuple[Message, ...]) -> tuple[Message, ...]:
            result: tuple[Message, ...] = await registry.run("input_assembly", messages)
            return result

    assembler = RequestAssembler(
        model=plan.model,
        instructions=config.instructions,
        system_prompt=contributions,
        context=providers,
        skills=skills,
        tools=tools or None,
        options=options,
        metadata=leg.metadata,
        signal=leg.signal,
        session_id=leg.session_id,
        run_id=leg.run_id,
        input_assembly=hook,
    )
    if summaries:
        assembler.set_summaries(summaries)
    leg.assembler = assembler
    leg.policies = config.provider_request_policies + plan.provider_request_policies
    validator = plan.tool_validator
    leg.tool_validator = validator if validator is not None else config.tool_validator


def setup_runner(leg: RunLeg, provider: AIProvider) -> None:
    """The leg's provider-turn runner: retry, ``retry`` hook, usage rows, output buffering."""
    plan = leg.plan
    middleware = leg.middleware
    retry_hook = None
    if middleware is not None and middleware.has("retry"):
        registry = middleware

        async def retry_hook(payload: RetryPayload) -> RetryPayload:
            result: RetryPayload = await registry.run("retry", payload)
            return result

    writer = leg.writer
    on_usage = None
    if writer.enabled:

        def on_usage(turn: int, attempt: int, usage: Usage) -> None:
            writer.record_usage("provider_turn", usage, turn=turn, attempt=attempt)

    guardrails = plan.guardrails
    leg.runner = ProviderTurnRunner(
        provider=provider,
        model=plan.model,
        session_id=leg.session_id,
        run_id=leg.run_id,
        metadata=leg.metadata,
        signal=leg.signal,
        emit=leg.emit,
        observed=leg.observed,
        tracker=leg.tracker,
        accumulator=leg.accumulator,
        on_usage=on_usage,
        retry=plan.retry,
        retry_hook=retry_hook,
        guardrails=guardrails,
        redactor=leg.redactor,
        buffer_output=sets_finite_output_budget(plan.agent_limits, plan.run_limits),
    )
    session = leg.session
    if session._soft_pending:
        session._soft_pending = False
        leg.runner.soft_interrupt()


async def auto_compact(leg: RunLeg, options: CompactionOptions) -> list[str]:
    """STORE-8: compact, append the entry, rebuild the history without the input."""
    leg.emit(CompactionStartedEvent(session_id=leg.session_id, run_id=leg.run_id))
    branch = await read_branch(leg.store, leg.session_id, leg.session._leaf_id)
    result = await compute_compaction(
        session_id=leg.session_id,
        entries=branch,
        options=options,
        signal=leg.signal,
        middleware=leg.middleware,
    )
    entry = await leg.append_entry(
        compaction_entry(
            result,
            session_id=leg.session_id,
            options=options,
            trigger="auto",
            parent_id=leg.session._leaf_id,
            run_id=leg.run_id,
        )
    )
    leg.emit(
        CompactionFinishedEvent(
            session_id=leg.session_id, run_id=leg.run_id, summary=entry.summary or ""
        )
    )
    messages, summaries = history_from_branch([*branch, entry])
    drop_trailing_input(messages, leg.input_messages)
    leg.history.clear()
    leg.history.extend(messages)
    return summaries
