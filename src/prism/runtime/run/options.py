"""The per-run options: one typed definition.

[`RunOptions`][prism.runtime.run.options.RunOptions] lists every option a run accepts; ``session.run(input, options=..., **kw)``
takes a ``RunOptions``, a mapping with the same snake_case keys, or the same keys as keywords
(``RunOptionKeywords``, their typed mirror). Resolution against the agent happens once, in
[`prism.runtime.run.plan.plan_run()`][prism.runtime.run.plan.plan_run].
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypedDict

from prism._keys import reject_unknown_keys
from prism.abort import AbortSignal
from prism.assembly import Skill, SystemPromptContribution
from prism.errors import PrismConfigError
from prism.guardrails import Guardrails
from prism.ledger import RunLedger
from prism.limits import RunLimits
from prism.loops.contracts import AgentLoopOptions, AgentLoopStrategy
from prism.redaction import SecretRedactor
from prism.retry import RetryOptions
from prism.runtime.run.config import ProviderSource
from prism.runtime.run.policies import ProviderRequestPolicy
from prism.runtime.run.seam import RunStateOptions
from prism.runtime.run.turn_policy import TurnPolicy
from prism.store import CompactionOptions
from prism.tools import ToolFilter, ToolValidator
from prism.types import (
    ModelConfig,
    OwnershipScope,
    ProviderRequestOptions,
    StructuredOutputOptions,
    ToolChoice,
    ToolExecutionContext,
)

__all__ = ["RUN_OPTION_NAMES", "RunOptionKeywords", "RunOptions"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """Per-run options; every field defaults to ``None`` = "take the agent's".

    This dataclass is the one definition of the run options: the keyword options of
    ``session.run``/``stream``/``run_sync`` (``RunOptionKeywords``), the accepted mapping
    keys and the plan (``prism.runtime.run.plan``) all follow its fields. A new option is a new
    field here, a key in ``RunOptionKeywords`` (a test checks both list the same names) and
    its resolution in the plan.

    A mapping with the same snake_case keys is accepted wherever ``RunOptions`` is.
    """

    loop: AgentLoopOptions | Mapping[str, Any] | AgentLoopStrategy | None = None
    """Loop options, a mapping with ``"strategy"``, or a strategy instance; wins over the
    agent's."""
    turn_policy: TurnPolicy | Mapping[str, Any] | None = None
    """Clean host stops at turn boundaries."""
    run_state: RunStateOptions | Mapping[str, Any] | None = None
    """Durable run options."""
    limits: RunLimits | Mapping[str, Any] | None = None
    """Limits overlay; may only narrow the agent's."""
    signal: AbortSignal | None = None
    """External abort signal bridged into the run."""
    metadata: Mapping[str, Any] | None = None
    """Run metadata, merged over agent and session metadata."""
    structured_output: StructuredOutputOptions | Mapping[str, Any] | None = None
    """Native schema for this run's requests."""
    redactor: SecretRedactor | None = None
    """Redactor for this run (wins over the agent's)."""
    active_skills: Sequence[str] | None = None
    """Names of the skills to activate; unknown names fail the run."""
    model: ModelConfig | Mapping[str, Any] | None = None
    """Model for this run; a change appends a ``model_change`` entry."""
    provider_source: ProviderSource | None = None
    """Provider resolver tried before the agent's."""
    provider_options: ProviderRequestOptions | Mapping[str, Any] | None = None
    """Options merged over the agent's."""
    provider_request_policies: Sequence[ProviderRequestPolicy] | None = None
    """Policies applied after the agent's."""
    system_prompt: Sequence[SystemPromptContribution] | Literal[False] | None = None
    """Contributions after the agent's; ``False`` drops the agent's for this run."""
    compaction: CompactionOptions | Mapping[str, Any] | Literal[False] | None = None
    """``False`` disables; a mapping overrides named keys."""
    retry: RetryOptions | Mapping[str, Any] | Literal[False] | None = None
    """``False`` disables; a mapping overrides named keys."""
    run_ledger: RunLedger | None = None
    """Ledger for this run (wins over the agent's)."""
    ownership: OwnershipScope | Mapping[str, Any] | None = None
    """Ownership copied into this run's records."""
    idempotency_key: str | None = None
    """Idempotency key for this run's store appends."""
    guardrails: Guardrails | Mapping[str, Any] | None = None
    """Guardrails appended per stage after the agent's."""
    skills: Sequence[Skill] | None = None
    """Replaces the agent's skill list for this run."""
    tool_filter: ToolFilter | Sequence[ToolFilter] | None = None
    """Filters applied after the agent's."""
    tool_validator: ToolValidator | Literal[False] | None = None
    """Argument validator for this run; ``False`` disables validation."""
    max_tokens: int | None = None
    """Cap on the tokens generated per provider request (int ≥ 1); wins over the agent's (see
    ``create_agent``). A cut reply has ``provider_stop_reason="max_tokens"``."""
    answer_after_tool_rounds: int | Literal[False] | None = None
    """Tool rounds before the model must answer in text (int ≥ 0; ``0``: at once, the first
    request carries ``tool_choice="none"``); ``False`` never forces an answer; ``None`` takes the
    agent's (after a handoff, the target's), else the provider's default (see ``create_agent``)."""
    tool_choice: ToolChoice | None = None
    """``"auto"``, ``"none"``, ``"required"`` or ``{"name": TOOL}``; wins over the agent's
    (see ``create_agent`` for when a forced choice applies). Checked when the run is planned."""
    parent: ToolExecutionContext | None = None
    """The tool call that runs this run as a child agent run (its ``context``; agent tools
    pass it): the run then redacts with the parent run's secrets too, charges the parent's limit
    budget and usage, emits its events on the parent wrapped in ``SubagentEvent``, aborts with
    the parent and records the link in its metadata (``parent_run``)."""

    @classmethod
    def coerce(cls, value: RunOptions | Mapping[str, Any] | None) -> RunOptions:
        """Return ``value`` as ``RunOptions`` (``None`` → defaults).

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — not a mapping, or an unknown key (a
                camelCase key is reported with its snake_case field name).
        """
        if value is None:
            return _DEFAULT_OPTIONS
        if isinstance(value, RunOptions):
            return value
        if not isinstance(value, Mapping):
            raise PrismConfigError(
                f"options must be RunOptions or a mapping, got {type(value).__name__}"
            )
        reject_unknown_keys("options", value, RUN_OPTION_NAMES)
        return cls(**{str(k): v for k, v in value.items()})

    def with_overrides(self, overrides: Mapping[str, Any]) -> RunOptions:
        """These options with every non-``None`` value of ``overrides`` replacing its field.

        The keyword options of ``session.run(...)`` arrive here; ``None`` means "not given".

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown key.
        """
        changes = {k: v for k, v in overrides.items() if v is not None}
        if not changes:
            return self
        reject_unknown_keys("options", changes, RUN_OPTION_NAMES)
        return dataclasses.replace(self, **changes)


RUN_OPTION_NAMES: Final = frozenset(f.name for f in dataclasses.fields(RunOptions))
"""The field names of [`RunOptions`][prism.runtime.run.options.RunOptions]: the accepted mapping and keyword keys."""
_DEFAULT_OPTIONS: Final = RunOptions()


class RunOptionKeywords(TypedDict, total=False):
    """The keyword options of ``session.run``/``stream``/``run_sync``: the fields of
    [`RunOptions`][prism.runtime.run.options.RunOptions], typed for ``**kwargs`` (``None`` = not given)."""

    loop: AgentLoopOptions | Mapping[str, Any] | AgentLoopStrategy | None
    turn_policy: TurnPolicy | Mapping[str, Any] | None
    run_state: RunStateOptions | Mapping[str, Any] | None
    limits: RunLimits | Mapping[str, Any] | None
    signal: AbortSignal | None
    metadata: Mapping[str, Any] | None
    structured_output: StructuredOutputOptions | Mapping[str, Any] | None
    redactor: SecretRedactor | None
    active_skills: Sequence[str] | None
    model: ModelConfig | Mapping[str, Any] | None
    provider_source: ProviderSource | None
    provider_options: ProviderRequestOptions | Mapping[str, Any] | None
    provider_request_policies: Sequence[ProviderRequestPolicy] | None
    system_prompt: Sequence[SystemPromptContribution] | Literal[False] | None
    compaction: CompactionOptions | Mapping[str, Any] | Literal[False] | None
    retry: RetryOptions | Mapping[str, Any] | Literal[False] | None
    run_ledger: RunLedger | None
    ownership: OwnershipScope | Mapping[str, Any] | None
    idempotency_key: str | None
    guardrails: Guardrails | Mapping[str, Any] | None
    skills: Sequence[Skill] | None
    tool_filter: ToolFilter | Sequence[ToolFilter] | None
    tool_validator: ToolValidator | Literal[False] | None
    max_tokens: int | None
    answer_after_tool_rounds: int | Literal[False] | None
    tool_choice: ToolChoice | None
    parent: ToolExecutionContext | None
