"""Leg setup: the provider, the trace, the request assembler, the provider attempts,
auto-compaction.

The leg ([`prism.runtime.run.leg`][prism.runtime.run.leg]) calls these while it sets a run up; each fills in part of
the [`RunContext`][prism.runtime.run.context.RunContext] the loop will receive.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from typing import Any

from prism._util import maybe_await
from prism.assembly import RequestAssembler, Skill, SystemPromptContribution
from prism.errors import ProviderResolutionError
from prism.events import CompactionFinishedEvent, CompactionStartedEvent
from prism.limits import sets_finite_output_budget
from prism.loop_needs import LoopNeeds, loop_needs
from prism.loops.contracts import AgentLoopStrategy
from prism.loops.resolve import loop_name, resolve_loop, resolve_tool_concurrency
from prism.providers.base import AIProvider
from prism.retry import RetryPayload
from prism.runtime.run._tool_rounds import tool_rounds
from prism.runtime.run._tool_sources import open_leg_tools
from prism.runtime.run.attempts import ProviderAttempts
from prism.runtime.run.context import RunContext
from prism.runtime.run.plan import run_defaults
from prism.runtime.run.seam import ResumePoint
from prism.store import (
    CompactionOptions,
    compaction_entry,
    compute_compaction,
    drop_trailing_input,
    history_from_branch,
)
from prism.structured_output import deliver_shown_schema, resolve_structured_output
from prism.tools import filter_tools
from prism.tracing import TracedRun, lend_tracer, resolve_tracer
from prism.types import Message, ProviderRequest, ProviderRequestOptions, Usage

_log = logging.getLogger("prism")

__all__ = [
    "auto_compact",
    "close_leg_resources",
    "close_tool_sources",
    "open_tool_sources",
    "release_context",
    "resolve_provider",
    "setup_assembly",
    "setup_attempts",
    "setup_loop",
    "start_trace",
]

_log = logging.getLogger("prism")


async def resolve_provider(ctx: RunContext) -> AIProvider:
    """The agent's provider, else the run's provider source, else the agent's.

    Raises:
        ProviderResolutionError: ``ERR_PRISM_PROVIDER_UNKNOWN`` (``Unknown provider: <name>``).
    """
    config = ctx.config
    if config.provider is not None:
        return config.provider
    model = ctx.plan.model
    for source in (ctx.plan.provider_source, config.provider_source):
        if source is None:
            continue
        provider: Any = await maybe_await(source(model))
        if provider is not None:
            result: AIProvider = provider
            return result
    raise ProviderResolutionError(f"Unknown provider: {model.provider}")


def start_trace(
    ctx: RunContext,
    provider: AIProvider,
    resume: ResumePoint | None,
) -> None:
    """The leg's trace, when the agent (or the default) has a tracer; else nothing.

    A resumed leg's trace is told the checkpoint version and the link its writer stored."""
    config = ctx.config
    tracer = resolve_tracer(config.tracing)
    if tracer is None:
        return
    link = None if resume is None else resume.trace
    trace = tracer.start_run(
        TracedRun(
            session_id=ctx.session_id,
            run_id=ctx.run_id,
            agent_id=config.id,
            agent_name=config.name,
            model=ctx.plan.model,
            provider_id=str(getattr(provider, "id", "") or ""),
            loop=loop_name(ctx.plan.loop, config.loop),
            resumed_version=None if resume is None else resume.version,
            resumed_link=link if isinstance(link, str) else None,
        )
    )
    if trace is not None:  # the trace sees every event the leg emits, after the other observers
        ctx.trace = lend_tracer(trace, tracer)  # runs the leg's tools start inherit the tracer
        forward = ctx.forward
        ctx.forward = trace.on_event if forward is None else _both(forward, trace.on_event)


def _both(first: Callable[[Any], Any], second: Callable[[Any], Any]) -> Callable[[Any], None]:
    def both(event: Any) -> None:
        first(event)
        second(event)

    return both


async def open_tool_sources(ctx: RunContext) -> None:
    """Open the agent's tool sources for this leg: ``ctx.registry`` becomes the merged tools,
    fixed for the leg, and a durable leg records their schema digests in its envelope.

    Raises:
        PrismConfigError: a source's tool is invalid or its name collides.
        Exception: whatever opening a source raises.
    """
    if not ctx.config.tool_sources:
        return
    scope = ctx.tool_scope = AsyncExitStack()
    tools = await open_leg_tools(ctx.config, scope)
    ctx.registry = tools.registry
    if ctx.durable is not None:
        ctx.durable.record_source_tools(tools.digests)


def release_context(ctx: RunContext) -> None:
    """The last step of a leg's cleanup: drop the links that point back to ``ctx`` (the tool
    dispatch bound to it, the tracker's breach callback, the provider attempts' callbacks and
    signal link). A finished run then holds no reference cycle, so it is freed by reference
    counting when its caller lets go of it instead of staying for the cycle collector, whose
    passes walk every live run. Idempotent; nothing of the leg runs afterwards."""
    ctx.dispatcher = None
    ctx.tracker.on_breach = None
    if ctx.attempts is not None:
        ctx.attempts.close()


async def close_tool_sources(ctx: RunContext) -> None:
    """Close what [`open_tool_sources()`][prism.runtime.run._setup.open_tool_sources] opened (errors while closing are logged, not
    raised: the leg's outcome is already decided)."""
    scope, ctx.tool_scope = ctx.tool_scope, None
    if scope is None:
        return
    try:
        await scope.aclose()
    except Exception:
        _log.warning("closing a tool source failed", exc_info=True)


async def close_leg_resources(ctx: RunContext) -> None:
    """At the leg's cleanup: close its tool sources and end what its trace left open (the
    terminal event already ended the trace's run span, unless none was emitted)."""
    await close_tool_sources(ctx)
    if ctx.trace is not None:
        ctx.trace.close()


def setup_loop(
    ctx: RunContext, provider: AIProvider, skills: tuple[Skill, ...], summaries: Sequence[str]
) -> tuple[AgentLoopStrategy, LoopNeeds]:
    """The leg's loop and its needs (the agent's loop is resolved once per agent, a run's own on
    each run), its tool concurrency, then the request assembler ([`setup_assembly()`][prism.runtime.run._setup.setup_assembly]) and the
    provider attempts ([`setup_attempts()`][prism.runtime.run._setup.setup_attempts]).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — the run's loop or structured output is invalid.
    """
    plan = ctx.plan
    config = ctx.config
    agent = run_defaults(config, plan.durable_hooks) if plan.loop is None else None
    if agent is not None and agent.loop is not None:
        loop = agent.loop
        ctx.tool_concurrency = agent.tool_concurrency
    else:
        loop = resolve_loop(plan.loop, config.loop)
        ctx.tool_concurrency = resolve_tool_concurrency(plan.loop, config.loop)
    options = resolve_structured_output(
        config.provider_options,
        plan.provider_options,
        structured_output=plan.structured_output,
        loop=loop,
        model=plan.model,
    )
    setup_assembly(ctx, options, skills, summaries, loop, provider)
    setup_attempts(ctx, provider)
    return loop, loop_needs(loop)


def setup_assembly(
    ctx: RunContext,
    options: ProviderRequestOptions | None,
    skills: tuple[Skill, ...],
    summaries: Sequence[str],
    loop: object = None,
    provider: object = None,
) -> None:
    """The request assembler (system prompt, context providers, skills, tools, options,
    ``input_assembly`` hook), the request policies, the tool-round policy (with ``provider``'s
    default; [`prism.runtime.run._tool_rounds`][prism.runtime.run._tool_rounds]) and the tool validator.

    The loop's needs add to it: its shown schema, natively or as a system-prompt contribution
    (``artifact-schema``, after the others; [`deliver_shown_schema()`][prism.structured_output.deliver_shown_schema]),
    and a warning on the ``prism`` logger when the loop dispatches no tool calls but the run
    offers tools.
    """
    config = ctx.config
    plan = ctx.plan
    contributions = plan.system_prompt
    if not plan.drop_agent_system_prompt:
        contributions = config.system_prompt + contributions
    options, schema_text = deliver_shown_schema(loop, options, plan.model)
    if schema_text is not None:
        contributions = (*contributions, SystemPromptContribution("artifact-schema", schema_text))
    providers = list(config.context)
    for skill in skills:
        providers.extend(skill.context)
    tools = filter_tools(ctx.registry, plan.tool_filters) if len(ctx.registry) else ()
    if tools and not loop_needs(loop).dispatches_tools:
        _log.warning(
            "run %s: the %s loop does not dispatch tool calls (tool_calls='disabled'), but the "
            "run offers the tools %s; their calls are answered as not dispatched. Pass "
            "tool_calls='bounded' to let the model use them, or leave them out of the run "
            "(tool_filter=)",
            ctx.run_id,
            getattr(loop, "name", "artifact"),
            ", ".join(sorted(tool.name for tool in tools)),
        )
    middleware = ctx.middleware
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
        metadata=ctx.metadata,
        signal=ctx.signal,
        session_id=ctx.session_id,
        run_id=ctx.run_id,
        input_assembly=hook,
    )
    if summaries:
        assembler.set_summaries(summaries)
    ctx.assembler = assembler
    ctx.policies = config.provider_request_policies + plan.provider_request_policies
    ctx.answer_after_tool_rounds, ctx.max_tool_rounds = tool_rounds(plan, provider, ctx.tracker)
    validator = plan.tool_validator
    ctx.tool_validator = validator if validator is not None else config.tool_validator


def setup_attempts(ctx: RunContext, provider: AIProvider) -> None:
    """The ctx's provider attempts: retry, ``retry`` hook, usage rows, output buffering."""
    plan = ctx.plan
    middleware = ctx.middleware
    retry_hook = None
    if middleware is not None and middleware.has("retry"):
        registry = middleware

        async def retry_hook(payload: RetryPayload) -> RetryPayload:
            result: RetryPayload = await registry.run("retry", payload)
            return result

    writer = ctx.writer
    on_usage = None
    on_request = None
    if writer.records_requests:
        codec = ctx.codec
        codec.hashing = True

        def on_request(turn: int, attempt: int, request: ProviderRequest) -> None:
            attempts = ctx.attempts  # the serving provider: a fallback's when one took over
            assert attempts is not None
            request_hash, head_hash, messages, head = codec.fingerprint(request)
            writer.record_request(
                turn=turn,
                attempt=attempt,
                provider_id=attempts.provider_id,
                model=attempts.model.model,
                request_hash=request_hash,
                head_hash=head_hash,
                messages=messages,
                head=head,
            )

    if writer.enabled:

        def on_usage(turn: int, attempt: int, usage: Usage) -> None:
            attempts = ctx.attempts  # the serving provider: a fallback's when one took over
            assert attempts is not None
            writer.record_usage(
                "provider_turn",
                usage,
                turn=turn,
                attempt=attempt,
                provider_id=attempts.provider_id,
                model=attempts.model.model,
            )

    guardrails = plan.guardrails
    ctx.attempts = ProviderAttempts(
        provider=provider,
        model=plan.model,
        session_id=ctx.session_id,
        run_id=ctx.run_id,
        metadata=ctx.metadata,
        signal=ctx.signal,
        emit=ctx.emit,
        observed=ctx.observed,
        tracker=ctx.tracker,
        accumulator=ctx.accumulator,
        on_usage=on_usage,
        on_request=on_request,
        retry=plan.retry,
        retry_policy=plan.retry_policy,
        retry_hook=retry_hook,
        guardrails=guardrails,
        redactor=ctx.redactor,
        buffer_output=(
            run_defaults(ctx.config, ctx.plan.durable_hooks).finite_output_budget
            if plan.run_limits is None and plan.agent_limits is ctx.config.limits
            else sets_finite_output_budget(plan.agent_limits, plan.run_limits)
        ),
        carry=ctx.carry,
    )
    state = ctx.state
    if state.soft_pending:
        state.soft_pending = False
        ctx.attempts.soft_interrupt()


async def auto_compact(ctx: RunContext, options: CompactionOptions) -> list[str]:
    """Compact, append the entry, rebuild the history without the input."""
    ctx.emit(CompactionStartedEvent(session_id=ctx.session_id, run_id=ctx.run_id))
    branch = await ctx.state.read_branch()
    result = await compute_compaction(
        session_id=ctx.session_id,
        entries=branch,
        options=options,
        signal=ctx.signal,
        middleware=ctx.middleware,
    )
    entry = await ctx.append_entry(
        compaction_entry(
            result,
            session_id=ctx.session_id,
            options=options,
            trigger="auto",
            parent_id=ctx.state.leaf_id,
            run_id=ctx.run_id,
        )
    )
    ctx.emit(
        CompactionFinishedEvent(
            session_id=ctx.session_id, run_id=ctx.run_id, summary=entry.summary or ""
        )
    )
    messages, summaries = history_from_branch([*branch, entry])
    drop_trailing_input(messages, ctx.input_messages)
    ctx.history.clear()
    ctx.history.extend(messages)
    return summaries
