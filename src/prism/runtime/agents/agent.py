"""Agents: validated, immutable configuration and the session factory.

``create_agent(...)`` checks every option once, converts mappings to their dataclasses and freezes
the result as [`AgentConfig`][prism.runtime.agents.agent.AgentConfig] (``agent.config``). It performs no I/O and starts nothing; a run
starts only when a session's ``run()`` is awaited.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal

from prism.assembly import ContextProvider, Skill, SystemPromptContribution
from prism.errors import AgentRunStateError, PrismConfigError
from prism.guardrails import Guardrails, coerce_guardrails
from prism.ledger import RunLedger
from prism.limits import RunLimits, coerce_run_limits, resolve_run_limits
from prism.loop_needs import handoff_tools
from prism.loops.contracts import AgentLoopOptions, AgentLoopStrategy
from prism.loops.resolve import resolve_loop
from prism.middleware import MiddlewareRegistry
from prism.providers.base import AIProvider
from prism.providers.defaults import check_model_for_provider, provider_defaults
from prism.redaction import SecretRedactor
from prism.retry import RetryOptions, validate_retry_options
from prism.runtime.run._delegation import child_agent
from prism.runtime.run._kept_branches import DEFAULT_SESSION_CACHE_ENTRIES, KeptBranches
from prism.runtime.run.config import AgentConfig as AgentConfig
from prism.runtime.run.config import ProviderSource as ProviderSource
from prism.runtime.run.config import (
    check_answer_after_tool_rounds,
    check_run_tool_choice,
    with_max_tokens,
)
from prism.runtime.run.plan import run_defaults
from prism.runtime.run.seam import DurableHooks, LegHooks, ResumePoint, RunStateOptions
from prism.store import CompactionOptions, SessionStore, validate_compaction_options
from prism.tools import (
    PermissionPolicy,
    ToolFilter,
    ToolRegistry,
    ToolSource,
    ToolValidator,
    check_tool,
    create_tool_registry,
    is_tool_source,
    normalize_tool_filters,
)
from prism.tracing import TracingOption
from prism.types import (
    ModelConfig,
    OwnershipScope,
    ProviderRequestOptions,
    ToolChoice,
    ToolDefinition,
)

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from prism.runtime.run._observers import OnEvent
    from prism.runtime.run.policies import ProviderRequestPolicy
    from prism.runtime.run.session import AgentSession

__all__ = ["Agent", "AgentConfig", "ProviderSource", "create_agent"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _tuple(value: Any, label: str) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise PrismConfigError(f"{label} must be a sequence, got {type(value).__name__}")
    return tuple(value)


def _check_callable_or_none(value: Any, label: str) -> None:
    if value is not None and not callable(value):
        raise PrismConfigError(f"{label} must be callable or None")


def _check_grace(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PrismConfigError(f"tool_abort_grace_ms must be a finite number >= 0, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise PrismConfigError(f"tool_abort_grace_ms must be a finite number >= 0, got {value!r}")
    return float(value) if isinstance(value, float) else value


def _check_session_cache(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PrismConfigError(f"session_cache_entries must be an int >= 0, got {value!r}")
    return value


def _tools(value: Any) -> tuple[ToolRegistry, tuple[ToolSource, ...]]:
    """The agent's tool registry and its tool sources (the items of ``tools`` that are
    [`ToolSource`][prism.tools.ToolSource] objects, e.g. MCP servers, in order)."""
    if value is None:
        return ToolRegistry(), ()
    if isinstance(value, ToolDefinition) or is_tool_source(value):
        raise PrismConfigError(
            "tools must be a sequence of ToolDefinition or ToolSource, or a ToolRegistry"
        )
    sources: tuple[ToolSource, ...] = ()
    if isinstance(value, ToolRegistry):
        registry = value
    else:
        items = _tuple(value, "tools")
        sources = tuple(item for item in items if is_tool_source(item))
        for source in sources:
            if sources.count(source) > 1:
                raise PrismConfigError(f"tool source given twice: {source!r}")
        registry = create_tool_registry(item for item in items if not is_tool_source(item))
    for tool in registry:
        check_tool(tool)
    return registry, sources


def _model(value: Any, provider: AIProvider | None) -> ModelConfig:
    """The agent's model: ``value``, else the provider's default; checked against the provider."""
    if value is None:
        default = provider_defaults(provider).model if provider is not None else None
        if default is None:
            raise PrismConfigError(
                "create_agent requires model= (a ModelConfig or a mapping) unless provider= "
                "declares a default model"
                + (f" ({type(provider).__name__} declares none)" if provider is not None else "")
            )
        return default
    if isinstance(value, ModelConfig):
        model = value
    elif isinstance(value, Mapping):
        model = ModelConfig.coerce(value)
    else:
        raise PrismConfigError(
            f"model must be a ModelConfig or a mapping, got {type(value).__name__}"
        )
    if provider is not None:
        check_model_for_provider(model, provider)
    return model


def _system_prompt(value: Any) -> tuple[SystemPromptContribution, ...]:
    items = _tuple(value, "system_prompt")
    for item in items:
        if not isinstance(item, SystemPromptContribution):
            raise PrismConfigError(
                "system_prompt must be a sequence of SystemPromptContribution, "
                f"got {type(item).__name__}"
            )
    return items


def _skills(value: Any) -> tuple[Skill, ...]:
    items = _tuple(value, "skills")
    names: set[str] = set()
    for item in items:
        if not isinstance(item, Skill):
            raise PrismConfigError(f"skills must be Skill objects, got {type(item).__name__}")
        if item.name in names:
            raise PrismConfigError(f"Duplicate skill: {item.name}")
        names.add(item.name)
    return items


def _context(value: Any) -> tuple[ContextProvider, ...]:
    items = _tuple(value, "context")
    for item in items:
        if not callable(getattr(item, "resolve", None)):
            raise PrismConfigError(
                f"context providers need a callable resolve(), got {type(item).__name__}"
            )
    return items


def _tool_validator(value: Any) -> ToolValidator | Literal[False] | None:
    if value is None:
        return None
    if value is False:
        return False
    if not callable(value):
        raise PrismConfigError("tool_validator must be None, False or callable")
    validator: ToolValidator = value
    return validator


def _retry(value: Any) -> RetryOptions | Literal[False] | None:
    if value is None:
        return None
    if value is False:
        return False
    if isinstance(value, (RetryOptions, Mapping)):
        return validate_retry_options(value)
    raise PrismConfigError(
        f"retry must be a RetryOptions, a mapping, False or None, got {type(value).__name__}"
    )


def _compaction(value: Any) -> CompactionOptions | Literal[False] | None:
    if value is None:
        return None
    if value is False:
        return False
    if isinstance(value, (CompactionOptions, Mapping)):
        return validate_compaction_options(value)
    raise PrismConfigError(
        "compaction must be a CompactionOptions, a mapping, False or None, "
        f"got {type(value).__name__}"
    )


def _run_state_store(run_state: object) -> SessionStore | None:
    """The checkpoint store of ``run_state`` when it is a session store too (``SqliteStore``,
    ``PostgresStore``), else ``None``."""
    checkpoints = (
        run_state.get("checkpoints")
        if isinstance(run_state, Mapping)
        else getattr(run_state, "checkpoints", None)
    )
    return checkpoints if isinstance(checkpoints, SessionStore) else None


def _metadata(value: Any, label: str = "metadata") -> Mapping[str, Any]:
    if value is None:
        return _EMPTY
    if not isinstance(value, Mapping):
        raise PrismConfigError(f"{label} must be a mapping, got {type(value).__name__}")
    return MappingProxyType(dict(value))


def create_agent(
    *,
    model: ModelConfig | Mapping[str, Any] | None = None,
    provider: AIProvider | None = None,
    provider_source: ProviderSource | None = None,
    id: str | None = None,
    name: str | None = None,
    instructions: str | None = None,
    system_prompt: Sequence[SystemPromptContribution] | None = None,
    tools: Sequence[ToolDefinition | ToolSource] | ToolRegistry | None = None,
    tool_filter: ToolFilter | Sequence[ToolFilter] | None = None,
    context: Sequence[ContextProvider] | None = None,
    skills: Sequence[Skill] | None = None,
    store: SessionStore | None = None,
    run_ledger: RunLedger | None = None,
    redactor: SecretRedactor | None = None,
    guardrails: Guardrails | Mapping[str, Any] | None = None,
    permission: PermissionPolicy | None = None,
    tool_validator: ToolValidator | Literal[False] | None = None,
    middleware: MiddlewareRegistry | None = None,
    provider_options: ProviderRequestOptions | Mapping[str, Any] | None = None,
    provider_request_policies: Sequence[ProviderRequestPolicy] | None = None,
    limits: RunLimits | Mapping[str, Any] | None = None,
    retry: RetryOptions | Mapping[str, Any] | Literal[False] | None = None,
    compaction: CompactionOptions | Mapping[str, Any] | Literal[False] | None = None,
    loop: AgentLoopOptions | Mapping[str, Any] | AgentLoopStrategy | None = None,
    run_state: RunStateOptions | Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    ownership: OwnershipScope | Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
    tool_abort_grace_ms: float = 5000,
    session_cache_entries: int = DEFAULT_SESSION_CACHE_ENTRIES,
    max_tokens: int | None = None,
    answer_after_tool_rounds: int | Literal[False] | None = None,
    tool_choice: ToolChoice | None = None,
    tracing: TracingOption = None,
) -> Agent:
    """Validate and freeze an agent's configuration. Performs no I/O.

    Args:
        model: A ``ModelConfig`` or a mapping of its fields; may be left out when ``provider``
            declares a default model (``provider.defaults.model``, e.g. the embedded model of
            ``create_local_provider()``). With such a provider, ``model.provider`` must name
            the same provider as that default.
        provider: A fixed provider (wins over every ``provider_source``).
        provider_source: ``model -> AIProvider | None`` resolver (sync or async).
        id: Stable agent id.
        name: Agent name.
        instructions: Base system instructions.
        system_prompt: ``SystemPromptContribution`` objects joined after ``instructions``.
        tools: ``ToolDefinition`` sequence (names must be unique) or a ``ToolRegistry``; the
            sequence may also hold tool sources (``prism.tools.ToolSource``, e.g. a
            ``prism.mcp`` server), whose tools each run leg adds when it starts.
        tool_filter: A ``ToolFilter`` or a sequence of them.
        context: Context providers (``resolve(ctx)``, sync or async).
        skills: ``Skill`` objects (unique names).
        store: Default session store. Without it, an agent whose ``run_state`` checkpoint store
            is a session store too (``SqliteStore``, ``PostgresStore``) keeps its sessions there,
            so a run suspended in one process resumes in another; else each session gets a
            private memory store.
        run_ledger: Ledger receiving run/event/tool-call/usage records.
        redactor: Active redactor (e.g. ``create_secret_redactor([...])``).
        guardrails: ``Guardrails`` or a mapping of its fields.
        permission: Tool permission policy.
        tool_validator: ``None`` (built-in), ``False`` (off) or a callable.
        middleware: A ``MiddlewareRegistry``.
        provider_options: ``ProviderRequestOptions`` or a mapping.
        provider_request_policies: Callables applied to every request.
        limits: ``RunLimits`` or a mapping; its values are checked here.
        retry: ``RetryOptions``, a mapping, or ``False``; its values are checked here.
        compaction: ``CompactionOptions``, a mapping, or ``False``.
        loop: Loop options, a mapping with ``"strategy"``, or a strategy instance.
        run_state: Durable run options.
        metadata: Agent metadata.
        ownership: ``OwnershipScope`` or a mapping (copied into records).
        idempotency_key: Key for store appends.
        tool_abort_grace_ms: Grace for running tools after an abort, in ms (finite, ≥ 0).
        session_cache_entries: Most session entries (int ≥ 0; default 20,000) the agent keeps
            in memory, over all sessions, for the session objects it creates next for the same
            session ids. A host that creates a session object per request
            (``create_session(session_id=...)``) then continues a long conversation without
            reading its stored history again: the store is asked only for the id of the last
            entry. Only branches of at least 32 entries are kept, the least recently used
            session's first to go; ``0`` keeps none. A kept entry takes about 1–2.5 KB of
            memory (text messages; calls and ~1 KB tool results), so the default holds 20–50 MB
            at most.
        max_tokens: Cap on the tokens the model generates per provider request (int ≥ 1); sets
            ``provider_options.max_tokens``, which every provider maps to its own request
            field. Unlike ``limits={"max_output_tokens": N}`` (a run budget checked on reported
            usage, which fails the run after the fact), it stops generation: the reply is cut
            and ``RunResult.provider_stop_reason`` is ``"max_tokens"``.
        answer_after_tool_rounds: Tool rounds a run allows before the model must answer in
            text: once that many rounds ran, requests carry ``tool_choice="none"`` and calls
            beyond them are not dispatched (the run then stops with ``stop_reason=
            "tool_round_limit"``). ``None`` inherits the provider's default
            (``provider.defaults``; the embedded model: 1); ``0`` asks for the answer at once
            (the first request carries ``tool_choice="none"``); ``False`` never forces an
            answer. A handoff target's own value applies after the switch, counted from it.
        tool_choice: Whether the model may (``"auto"``), must (``"required"``) or must not
            (``"none"``) call tools, or must call one (``{"name": TOOL}``); every provider maps
            it to its own form. ``"auto"`` and ``"none"`` apply to every request of a run; a
            forced choice (``"required"``, a named tool) applies until the run's first tool round,
            then the requests are ``"auto"`` so the model can answer with the results. The
            ``"none"`` of ``answer_after_tool_rounds`` wins over it. ``None``: the provider's
            default (``"auto"``). A run's ``tool_choice`` wins.
        tracing: A tracer (e.g. ``prism.otel.OpenTelemetryTracing()``) tracing every run,
            ``False`` for none, or ``None`` for the default tracer set with
            ``prism.tracing.set_default_tracer`` (none unless set).

    Returns:
        The [`Agent`][prism.runtime.agents.agent.Agent].

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — ``model`` missing (and no provider default) or
            of another type, or naming another provider than ``provider``'s default; invalid
            ``limits``, ``retry`` or ``compaction``; a ``loop`` that
            ``resolve_loop(loop, None)`` rejects; duplicate tool or skill names;
            a tool name not matching ``^[a-zA-Z0-9_-]{1,64}$`` or a tool ``parameters`` that is
            not a valid JSON Schema (``check_schema``; checked once per ``ToolDefinition``);
            an invalid ``tool_filter``; ``tool_validator`` not ``None``/``False``/callable;
            ``tool_abort_grace_ms`` not a finite number ≥ 0 (``bool`` rejected);
            ``session_cache_entries`` not an int ≥ 0; a
            ``tool_choice`` that is not one of its forms, or names a tool the agent does not
            have (unless tool sources or handoff targets add tools at run time); a
            ``tracing`` that is not ``None``, ``False`` or an object with ``start_run``.
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — ``run_state`` without ``id`` and
            ``name`` (a durable run's envelope names its agent), as ``run()`` would raise it.
    """
    if provider is not None and not callable(getattr(provider, "generate", None)):
        raise PrismConfigError("provider must have a callable generate(request)")
    model_config = _model(model, provider)
    if run_state is not None and not (id or name):
        # the envelope is keyed by the agent's id or name: refuse here, not at the first run()
        raise AgentRunStateError(
            "a durable run needs an agent with an id or a name: create_agent(run_state=...) "
            "needs id= or name= too"
        )
    registry, sources = _tools(tools)
    agent_limits = coerce_run_limits(limits)
    if agent_limits is not None:
        resolve_run_limits(agent_limits)  # on the agent layer
    if loop is not None:
        resolve_loop(loop, None)
    _check_callable_or_none(provider_source, "provider_source")
    _check_callable_or_none(permission, "permission")
    if middleware is not None and not isinstance(middleware, MiddlewareRegistry):
        raise PrismConfigError("middleware must be a MiddlewareRegistry")
    if redactor is not None and not callable(getattr(redactor, "redact", None)):
        raise PrismConfigError("redactor must have a callable redact(value)")
    if (
        tracing is not None
        and tracing is not False
        and not callable(getattr(tracing, "start_run", None))
    ):
        raise PrismConfigError("tracing must be None, False or a tracer with start_run(run)")
    policies = _tuple(provider_request_policies, "provider_request_policies")
    for policy in policies:
        if not callable(policy):
            raise PrismConfigError("provider_request_policies must be callables")
    config = AgentConfig(
        model=model_config,
        provider=provider,
        provider_source=provider_source,
        id=id,
        name=name,
        instructions=instructions,
        system_prompt=_system_prompt(system_prompt),
        tools=registry,
        tool_sources=sources,
        tool_filter=normalize_tool_filters(tool_filter),
        context=_context(context),
        skills=_skills(skills),
        store=store if store is not None else _run_state_store(run_state),
        run_ledger=run_ledger,
        redactor=redactor,
        guardrails=coerce_guardrails(guardrails),
        permission=permission,
        tool_validator=_tool_validator(tool_validator),
        middleware=middleware,
        provider_options=with_max_tokens(provider_options, max_tokens),
        provider_request_policies=policies,
        limits=agent_limits,
        retry=_retry(retry),
        compaction=_compaction(compaction),
        loop=loop,
        run_state=run_state,
        metadata=_metadata(metadata),
        ownership=None if ownership is None else OwnershipScope.coerce(ownership),
        idempotency_key=idempotency_key,
        tool_abort_grace_ms=_check_grace(tool_abort_grace_ms),
        session_cache_entries=_check_session_cache(session_cache_entries),
        max_tokens=max_tokens,
        answer_after_tool_rounds=check_answer_after_tool_rounds(answer_after_tool_rounds),
        tool_choice=check_run_tool_choice(
            tool_choice, tools=registry, tool_sources=sources, loop=loop
        ),
        tracing=tracing,
    )
    try:  # what every run needs of the agent's options is resolved once, here
        run_defaults(config, AGENT_DURABLE_HOOKS)
    except Exception:  # nothing is kept: each run raises it again, as without this line
        pass
    return Agent(config)


class Agent:
    """An agent: immutable configuration plus a session factory.

    Build one with [`create_agent()`][prism.runtime.agents.agent.create_agent].

    Attributes:
        config: The validated [`AgentConfig`][prism.runtime.agents.agent.AgentConfig].
    """

    __slots__ = ("config", "kept_branches")

    def __init__(self, config: AgentConfig) -> None:
        if not isinstance(config, AgentConfig):
            raise TypeError("Agent expects an AgentConfig; use create_agent(...)")
        self.config = config
        limit = config.session_cache_entries
        self.kept_branches: KeptBranches | None = KeptBranches(limit) if limit > 0 else None
        """The branches of this agent's sessions kept for its next session objects of the same
        ids (``session_cache_entries``); the runtime's, for hosts to read only."""

    @property
    def id(self) -> str | None:
        """``config.id``."""
        return self.config.id

    @property
    def name(self) -> str | None:
        """``config.name``."""
        return self.config.name

    @property
    def durable_hooks(self) -> DurableHooks:
        """The durable mode the agent's runs are planned with (``prism.runtime.durable``)."""
        return AGENT_DURABLE_HOOKS

    def __repr__(self) -> str:
        label = self.config.id or self.config.name or self.config.model.model
        return f"<Agent {label!r}>"

    def as_tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        input: Mapping[str, Any] | None = None,
    ) -> ToolDefinition:
        """This agent as a tool of another agent: each call runs it in a child session linked
        to the calling run (see ``prism.runtime.agents.agent_tool``).

        Args:
            name: Tool name (default: the agent's name).
            description: Description for the model.
            input: JSON Schema of the arguments (default: one string ``input``).

        Returns:
            The ``ToolDefinition``.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — no name, or ``input`` is not a mapping.
        """
        from prism.runtime.agents.agent_tool import agent_tool

        tool = agent_tool(self, name=name, description=description, input=input)
        check_tool(tool)
        return tool

    def to_mcp_server(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        input: Mapping[str, Any] | None = None,
        server_name: str = "prism",
        instructions: str | None = None,
        approval_wait_s: float = 60.0,
        secrets: Sequence[str] = (),
        resume: bool = True,
    ) -> Server:
        """This agent as an MCP server (the ``mcp`` SDK's low-level ``Server``): one tool that
        runs it, and ``<name>_result`` to collect a run; see ``prism.mcp.serving`` (needs the
        ``mcp`` extra, imported only here).

        Args:
            name: Tool name (default: the agent's name, else its id).
            description: Tool description (default: ``"Ask the <name> agent."``).
            input: JSON Schema of the arguments (default: one string ``input``).
            server_name: The server's name.
            instructions: The server's instructions for clients.
            approval_wait_s: Seconds an approval waits for the client's elicitation answer.
            secrets: Strings removed from every result and notification.
            resume: Resume the runs a gone server left behind.

        Returns:
            The server; serve it with ``prism.mcp.serving.serve_stdio`` or ``serve_http``.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — see
                ``prism.mcp.serving.create_mcp_server``.
            ImportError: the ``mcp`` package is not installed.
        """
        # prism.mcp.serving is built on the runtime: it is looked up by name when called, so
        # the runtime does not import it (and ``import prism`` never loads the SDK).
        serving = importlib.import_module("prism.mcp.serving")
        served = serving.served_agent(self, name=name, description=description, input=input)
        server: Server = serving.create_mcp_server(
            [served],
            name=server_name,
            instructions=instructions,
            approval_wait_s=approval_wait_s,
            secrets=secrets,
            resume=resume,
        )
        return server

    def create_session(
        self,
        session_id: str | None = None,
        *,
        store: SessionStore | None = None,
        leaf_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        on_event: OnEvent | None = None,
    ) -> AgentSession:
        """Create a session over a store. Performs no I/O.

        Args:
            session_id: Id of the conversation (default: a generated ``session_…`` id). An id that
                already has entries continues from its last stored entry (looked up at the first
                run, ``entries()`` or ``compact()``).
            store: Store for this session (default: ``config.store``, else a private
                ``MemorySessionStore``).
            leaf_id: Entry to continue from, as if ``checkout(leaf_id)`` had been called.
            metadata: Session metadata (merged between agent and run metadata).
            on_event: Callback receiving every redacted event of every run.

        Returns:
            The new [`AgentSession`][prism.runtime.run.session.AgentSession].
        """
        from prism.runtime.run.session import AgentSession

        return AgentSession(
            self,
            session_id=session_id,
            store=store,
            leaf_id=leaf_id,
            metadata=_metadata(metadata, "session metadata"),
            on_event=on_event,
        )


class _AgentDurableHooks:
    """The durable mode of an agent's runs: [`prism.runtime.durable.DURABLE_HOOKS`][prism.runtime.durable.DURABLE_HOOKS], imported
    by the first run that has something durable to check.

    A run with no ``run_state`` (the agent's or its own), no tool that needs approval (its own or
    a handoff target's) and no agent tool passes the durable preflight with nothing to check, so a
    plain agent's runs never import the durable package; any other run goes through the full
    preflight, with its errors.
    """

    __slots__ = ()

    def preflight(
        self, config: AgentConfig, run_value: RunStateOptions | None, opts: Any
    ) -> RunStateOptions | None:
        if run_value is None and config.run_state is None:
            run_loop = None if opts is None else opts.loop
            tools = (
                *config.tools,
                *handoff_tools(run_loop if run_loop is not None else config.loop),
            )
            if all(t.needs_approval is False for t in tools) and not any(
                child_agent(t) is not None for t in config.tools
            ):
                return None
        return _durable_hooks().preflight(config, run_value, opts)

    def open_leg(self, ctx: Any, options: RunStateOptions, resume: ResumePoint | None) -> LegHooks:
        return _durable_hooks().open_leg(ctx, options, resume)


def _durable_hooks() -> DurableHooks:
    from prism.runtime.durable import DURABLE_HOOKS

    return DURABLE_HOOKS


AGENT_DURABLE_HOOKS: Final = _AgentDurableHooks()
"""The durable hooks every [`Agent`][prism.runtime.agents.agent.Agent] hands its runs."""
