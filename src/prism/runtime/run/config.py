"""The validated agent configuration every run reads.

[`AgentConfig`][prism.runtime.run.config.AgentConfig] is built once by ``create_agent(...)`` (in [`prism.runtime.agents.agent`][prism.runtime.agents.agent]) and
read by every layer of a run: the plan resolves run options against it, the leg and the loop
context take their collaborators from it. It sits below the session and the leg so that they
need not import the agent module (which creates sessions).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from prism.assembly import ContextProvider, Skill, SystemPromptContribution
from prism.errors import PrismConfigError
from prism.guardrails import Guardrails
from prism.ledger import RunLedger
from prism.limits import RunLimits
from prism.loop_needs import loop_needs
from prism.loops.contracts import AgentLoopOptions, AgentLoopStrategy
from prism.middleware import MiddlewareRegistry
from prism.providers.base import AIProvider
from prism.redaction import SecretRedactor
from prism.retry import RetryOptions
from prism.runtime.run._kept_branches import DEFAULT_SESSION_CACHE_ENTRIES
from prism.store import CompactionOptions, SessionStore
from prism.tools import PermissionPolicy, ToolFilter, ToolRegistry, ToolSource, ToolValidator
from prism.tracing import TracingOption
from prism.types import (
    ModelConfig,
    OwnershipScope,
    ProviderRequestOptions,
    ToolChoice,
    check_tool_choice,
    merge_provider_options,
)

if TYPE_CHECKING:
    from prism.runtime.run.policies import ProviderRequestPolicy
    from prism.runtime.run.seam import DurableHooks

__all__ = [
    "AgentConfig",
    "ConfiguredAgent",
    "ProviderSource",
    "check_answer_after_tool_rounds",
    "check_run_tool_choice",
    "with_max_tokens",
]

ProviderSource: TypeAlias = Callable[
    [ModelConfig], "AIProvider | None | Awaitable[AIProvider | None]"
]
"""``provider_source(model) -> AIProvider | None`` (sync or async); ``None`` means it has no
provider for that model."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    """The immutable, validated configuration of an agent. Built by [`create_agent()`][prism.runtime.create_agent].

    Sequences are tuples, mappings are read-only, and option mappings are already converted to
    their dataclasses.
    """

    model: ModelConfig
    """Default model of the agent's runs (a run ``model=`` overrides it)."""
    provider: AIProvider | None = None
    """Fixed provider; wins over every ``provider_source``."""
    provider_source: ProviderSource | None = None
    """Resolves a provider per model when ``provider`` is not set (after the run's source)."""
    id: str | None = None
    """Stable agent id (durable fingerprints use ``id or name``)."""
    name: str | None = None
    """Human-readable agent name."""
    instructions: str | None = None
    """Base system instructions (first part of the composed system prompt)."""
    system_prompt: tuple[SystemPromptContribution, ...] = ()
    """System prompt contributions joined after ``instructions``."""
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    """The agent's own tool definitions; each run dispatches against these plus the tools of
    ``tool_sources``."""
    tool_sources: tuple[ToolSource, ...] = ()
    """Tool sources (e.g. MCP servers) given in ``tools``; each run leg opens them and adds their
    tools, fixed for that leg."""
    tool_filter: tuple[ToolFilter, ...] = ()
    """Agent tool filters; a tool must pass all of them."""
    context: tuple[ContextProvider, ...] = ()
    """Context providers resolved on every request; each block becomes one ``system`` message."""
    skills: tuple[Skill, ...] = ()
    """Skills; all active unless a run selects ``active_skills``."""
    store: SessionStore | None = None
    """Default session store; ``None`` gives each session a private memory store.
    ``create_agent`` without ``store=`` sets it to the ``run_state`` checkpoint store when that is a
    session store too (``SqliteStore``, ``PostgresStore``)."""
    run_ledger: RunLedger | None = None
    """Write-only sink for run, event, tool-call and usage records."""
    redactor: SecretRedactor | None = None
    """Redacts requests, events, store entries and records."""
    guardrails: Guardrails | None = None
    """Agent guardrails (run guardrails are appended per stage)."""
    permission: PermissionPolicy | None = None
    """Tool permission policy."""
    tool_validator: ToolValidator | Literal[False] | None = None
    """Argument validator; ``None`` = built-in JSON Schema validator, ``False`` = none."""
    middleware: MiddlewareRegistry | None = None
    """Middleware hooks."""
    provider_options: ProviderRequestOptions | None = None
    """Provider options merged under the run's."""
    provider_request_policies: tuple[ProviderRequestPolicy, ...] = ()
    """Request policies applied before the run's."""
    limits: RunLimits | None = None
    """Agent limits layer (validated; defaults apply per axis when unset)."""
    retry: RetryOptions | Literal[False] | None = None
    """Retry options; ``False`` disables retry; ``None`` = ``RetryOptions()``."""
    compaction: CompactionOptions | Literal[False] | None = None
    """Compaction options; ``None``/``False``: no compaction."""
    loop: AgentLoopOptions | Mapping[str, Any] | AgentLoopStrategy | None = None
    """Default loop: loop options, a mapping of them, or a strategy instance."""
    run_state: object = None
    """Durable run options."""
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """Agent metadata, merged under session and run metadata."""
    ownership: OwnershipScope | None = None
    """Ownership copied into records."""
    idempotency_key: str | None = None
    """Idempotency key passed to every store append."""
    tool_abort_grace_ms: float = 5000
    """Milliseconds a running tool may continue after an abort."""
    session_cache_entries: int = DEFAULT_SESSION_CACHE_ENTRIES
    """Most session entries the agent keeps in memory for its next session objects of the
    same session ids (``0``: none)."""
    max_tokens: int | None = None
    """Cap on the tokens generated per provider request, as given (already merged into
    ``provider_options.max_tokens``)."""
    answer_after_tool_rounds: int | Literal[False] | None = None
    """Tool rounds before the model must answer in text; ``None``: the provider's default,
    ``False``: never forced (a run's value wins)."""
    tool_choice: ToolChoice | None = None
    """The runs' tool choice (a run's value wins); ``None``: the provider's default (see
    ``create_agent``)."""
    tracing: TracingOption = None
    """The tracer of the agent's runs; ``None``: the default tracer (``prism.tracing``), if
    one is set; ``False``: never traced."""
    run_defaults: object = field(default=None, init=False, repr=False, compare=False)
    """What a run that sets no option of its own takes from this config, resolved on the first
    run (``prism.runtime.run.plan.run_defaults()``) and kept here; the runtime's. A config is
    frozen, so the value stays true; ``dataclasses.replace`` starts a new one empty."""


def check_answer_after_tool_rounds(value: object) -> int | Literal[False] | None:
    """Check an ``answer_after_tool_rounds`` option: ``None``, ``False`` or an int ≥ 0.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — any other value.
    """
    if value is None or value is False:
        return value
    if type(value) is int and value >= 0:
        return value
    raise PrismConfigError(
        "answer_after_tool_rounds must be None (inherit), False (never force an answer) or an "
        f"int >= 0, got {value!r}"
    )


def check_run_tool_choice(
    value: object, *, tools: ToolRegistry, tool_sources: tuple[ToolSource, ...], loop: object
) -> ToolChoice | None:
    """Check a ``tool_choice`` option of ``create_agent`` or ``run()`` (``None``: not set).

    A named tool must be one of ``tools`` when they are all the tools a run may offer; with
    tool sources (e.g. MCP servers) or a loop with handoff targets it is checked against the
    first request that offers tools instead
    ([`prism.runtime.run._tool_rounds.apply_tool_choice()`][prism.runtime.run._tool_rounds.apply_tool_choice]).

    Args:
        value: The option.
        tools: The agent's tools.
        tool_sources: The agent's tool sources.
        loop: The run's loop (its handoff targets add tools).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — a value that is not ``"auto"``, ``"none"``,
            ``"required"`` or ``{"name": TOOL}`` (the message names it), or a tool name the
            agent does not have (the message names it).
    """
    if value is None:
        return None
    known = not tool_sources and not loop_needs(loop).handoffs
    return check_tool_choice(value, [tool.name for tool in tools] if known else None)


def with_max_tokens(
    options: ProviderRequestOptions | Mapping[str, Any] | None, max_tokens: object
) -> ProviderRequestOptions | None:
    """``options`` (a mapping is converted) with ``max_tokens`` set when it is not ``None``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — ``max_tokens`` is not an int ≥ 1, or a bad
            options mapping.
    """
    coerced = None if options is None else ProviderRequestOptions.coerce(options)
    if max_tokens is None:
        return coerced
    cap: Any = max_tokens  # checked by ProviderRequestOptions
    return merge_provider_options(coerced, ProviderRequestOptions(max_tokens=cap))


class ConfiguredAgent(Protocol):
    """What a session needs of its agent: the validated configuration and the durable mode its
    runs plan with.

    [`Agent`][prism.runtime.agents.agent.Agent] satisfies it; sessions are typed against this protocol so
    that the session module does not import the agent module that creates sessions.
    """

    @property
    def config(self) -> AgentConfig:
        """The agent's validated configuration."""
        ...

    @property
    def durable_hooks(self) -> DurableHooks:
        """The durable mode (preflight and leg hooks) the agent's runs are planned with."""
        ...
