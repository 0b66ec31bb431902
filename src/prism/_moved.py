"""How the top-level ``prism`` namespace resolves names: lazily, and with a pointer for moved ones.

``import prism`` runs ``prism/__init__.py`` and this module only, and both import nothing but
cheap standard-library modules (not even ``typing``), so importing ``prism`` stays near 1 ms.
Each top-level name is bound on first use: [`HOMES`][prism._moved.HOMES] says which module defines it, the
module-level ``__getattr__`` built by [`module_getattr()`][prism._moved.module_getattr] imports that module, and the value is
then cached in the namespace, so later reads are plain attribute reads. ``HOMES`` lists exactly
the names of the ``TYPE_CHECKING`` imports in ``prism/__init__.py``, which type checkers and
readers see (``tests/test_namespace.py`` checks that the two agree).

The top level keeps what a host application uses. Provider-author names moved to
``prism.providers``, test doubles to ``prism.testing``, and the rest (runtime internals, the less
common events, helpers) to the module that defines them. Reading a moved name from ``prism``
raises an ``AttributeError`` that says where to import it from, e.g.
``prism.ToolRegistry moved: import it from prism.tools``.

The same ``__getattr__`` also keeps ``prism.<submodule>`` working without an explicit
``import prism.<submodule>`` (``prism.artifacts``, ``prism.testing`` …): the submodule is
imported on first access, as with the earlier namespace.
"""

from __future__ import annotations

import importlib

# Type checkers treat a name ``TYPE_CHECKING`` as true whatever its value; importing it from
# ``typing`` would make ``import prism`` import ``typing`` (several milliseconds).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["HOMES", "MOVED", "TYPE_CHECKING", "module_dir", "module_getattr", "moved_message"]

HOMES: dict[str, str] = {
    "abort": "AbortController AbortSignal",
    "errors": (
        "AbortError AgentDecisionError AgentLoopStateError AgentRunError AgentRunLimitError"
        " AgentRunStateError AgentRunSuspended AgentSessionBusyError ArtifactFailedError"
        " CheckpointConflictError EngineNotReadyError EngineVersionError GuardrailError"
        " PrismConfigError PrismError ProviderResolutionError ProviderTransportError"
        " ProviderTurnError RedactedError RunAmbiguousError RunLedgerError RunLimitExceeded"
        " SessionAppendConflictError SteerError StoreError StoreSchemaError StructuredOutputError"
        " TurnPolicyError"
    ),
    "events": (
        "AgentEvent AgentFinishedEvent ErrorEvent MessageDeltaEvent MessageFinishedEvent"
        " ToolExecutionErrorEvent ToolExecutionFinishedEvent ToolExecutionStartedEvent"
        " TurnFinishedEvent TurnStartedEvent"
    ),
    "guardrails": "Guardrail GuardrailContext GuardrailDecision Guardrails",
    "limits": "UNLIMITED RunLimits",
    "loops.contracts": (
        "AgentLoopStrategy GenerateValidateReviseLoopOptions LoopContext SingleShotLoopOptions"
    ),
    "loops.gvr": "generate_validate_revise_loop",
    "loops.single_shot": "single_shot_loop",
    "redaction": "SecretRedactor create_secret_redactor",
    "retry": "RetryContext RetryDecision RetryOptions RetryPolicy",
    "runtime.run._observers": "EventSubscription",
    "runtime.agents.agent": "Agent create_agent",
    "checkpoints": "CheckpointStore",
    "runtime.durable": (
        "AgentRunState LoadedRunState PendingDecision RunDecision RunStateOptions"
        " list_agent_runs load_agent_run_state resume_agent_run save_agent_run_state"
    ),
    "runtime.durable._run_listing": "PendingDecisionRecord list_pending_decisions",
    "runtime.run.session": "AgentSession RunOptions RunStream",
    "runtime.run.turn_policy": "Continue Stop TurnBoundaryContext TurnDecision TurnPolicy",
    "store": "SessionStore",
    "tools": "PermissionPolicy PermissionRequest tool",
    "types": (
        "ModelConfig RunResult AgentInput ContentBlock ImageContent JsonValue Message"
        " TextContent ThinkingContent ToolCallContent ToolResultContent Usage assistant_message"
        " system_message to_messages user_message ToolDefinition ToolExecutionContext ToolResult"
        " StructuredOutputOptions"
    ),
}
"""Submodule of ``prism`` (relative) -> the top-level names it defines, separated by spaces."""

_PROVIDERS = "prism.providers"
_TESTING = "prism.testing"

MOVED: dict[str, tuple[str, ...]] = {
    # what a provider author needs: the provider protocol, the request, the provider events
    # (types and constructors) and the helpers that fold them
    "AIProvider": (_PROVIDERS,),
    "ProviderContentDelta": (_PROVIDERS,),
    "ProviderDone": (_PROVIDERS,),
    "ProviderErrorEvent": (_PROVIDERS,),
    "ProviderEvent": (_PROVIDERS,),
    "ProviderMessageStart": (_PROVIDERS,),
    "ProviderRequest": (_PROVIDERS,),
    "ProviderRequestOptions": (_PROVIDERS,),
    "ProviderStopReason": (_PROVIDERS,),
    "ProviderToolCall": (_PROVIDERS,),
    "ProviderToolCallDelta": (_PROVIDERS,),
    "ProviderTurnResult": (_PROVIDERS,),
    "ProviderUsage": (_PROVIDERS,),
    "merge_provider_options": (_PROVIDERS,),
    "reconstruct_tool_call_deltas": (_PROVIDERS,),
    "tool_call_from_arguments_text": (_PROVIDERS,),
    "provider_content_delta": (_PROVIDERS, _TESTING),
    "provider_done": (_PROVIDERS, _TESTING),
    "provider_error": (_PROVIDERS, _TESTING),
    "provider_message_start": (_PROVIDERS, _TESTING),
    "provider_text_delta": (_PROVIDERS, _TESTING),
    "provider_thinking_delta": (_PROVIDERS, _TESTING),
    "provider_tool_call": (_PROVIDERS, _TESTING),
    "provider_tool_call_delta": (_PROVIDERS, _TESTING),
    "provider_usage": (_PROVIDERS, _TESTING),
    "tool_call_content": (_PROVIDERS, _TESTING),
    # test doubles
    "MemoryCheckpointStore": (_TESTING,),
    "MemoryRunLedger": (_TESTING,),
    "MemorySessionStore": (_TESTING,),
    "MockProvider": (_TESTING,),
    "create_mock_provider": (_TESTING,),
    # agent configuration details and provider request policies
    "AgentConfig": ("prism.runtime",),
    "PolicyContext": ("prism.runtime",),
    "ProviderRequestPolicy": ("prism.runtime",),
    "ProviderRequestPolicyResult": ("prism.runtime",),
    "ProviderSource": ("prism.runtime",),
    "generate_with_retry": ("prism.runtime.provider_turn",),
    # prompt assembly
    "ContextProvider": ("prism.assembly",),
    "ContextProviderContext": ("prism.assembly",),
    "Skill": ("prism.assembly",),
    "SystemPromptContribution": ("prism.assembly",),
    "assemble_provider_input": ("prism.assembly",),
    "compose_system_prompt": ("prism.assembly",),
    # events other than the everyday ones
    "AgentDeniedEvent": ("prism.events",),
    "AgentResumedEvent": ("prism.events",),
    "AgentStartedEvent": ("prism.events",),
    "AgentSuspendedEvent": ("prism.events",),
    "ArtifactFailedEvent": ("prism.events",),
    "ArtifactFinishedEvent": ("prism.events",),
    "ArtifactRevisionStartedEvent": ("prism.events",),
    "ArtifactValidationFinishedEvent": ("prism.events",),
    "ArtifactValidationStartedEvent": ("prism.events",),
    "CompactionFinishedEvent": ("prism.events",),
    "CompactionStartedEvent": ("prism.events",),
    "EVENT_TYPES": ("prism.events",),
    "EventSubscriberOverflowEvent": ("prism.events",),
    "GuardrailDecisionEvent": ("prism.events",),
    "MessageStartedEvent": ("prism.events",),
    "ProviderTurnFinishedEvent": ("prism.events",),
    "ProviderTurnMetadata": ("prism.events",),
    "ProviderTurnStartedEvent": ("prism.events",),
    "QueueUpdatedEvent": ("prism.events",),
    "RetryScheduledEvent": ("prism.events",),
    "RunLimitExceededEvent": ("prism.events",),
    "SteerRejectedEvent": ("prism.events",),
    "ToolExecutionBlockedEvent": ("prism.events",),
    "ToolExecutionMetadata": ("prism.events",),
    "ToolExecutionProgressEvent": ("prism.events",),
    "ToolExecutionStatus": ("prism.events",),
    "event_from_dict": ("prism.events",),
    # guardrails, limits, retry, redaction and usage internals
    "run_guardrails": ("prism.guardrails",),
    "RunCost": ("prism.limits",),
    "RunLimitTracker": ("prism.limits",),
    "resolve_run_limits": ("prism.limits",),
    "RetryPayload": ("prism.retry",),
    "create_default_retry_policy": ("prism.retry",),
    "is_transient_error": ("prism.retry",),
    "error_to_error_info": ("prism.redaction",),
    "redact_agent_event": ("prism.redaction",),
    "redact_value": ("prism.redaction",),
    "UsageAccumulator": ("prism.usage",),
    # run records and the execution timeline
    "AgentEventRecord": ("prism.ledger",),
    "ExecutionTimeline": ("prism.ledger",),
    "RunLedger": ("prism.ledger",),
    "RunRecord": ("prism.ledger",),
    "TimelineArtifactAttempt": ("prism.ledger",),
    "TimelineToolCall": ("prism.ledger",),
    "TimelineTurn": ("prism.ledger",),
    "ToolCallRecord": ("prism.ledger",),
    "UsageRecord": ("prism.ledger",),
    "project_execution_timeline": ("prism.ledger",),
    # session entries and compaction
    "CompactionInput": ("prism.store",),
    "CompactionOptions": ("prism.store",),
    "CompactionResult": ("prism.store",),
    "CompactionStrategy": ("prism.store",),
    "SessionEntry": ("prism.store",),
    # durable-run details
    "AgentRunInterruption": ("prism.runtime.durable",),
    "DecisionScope": ("prism.runtime.durable",),
    "StickyDecision": ("prism.runtime.durable",),
    "agent_fingerprint": ("prism.runtime.durable",),
    # the contracts a loop or an artifact parser/validator/repairer implements
    "AgentLoopOptions": ("prism.loops.contracts",),
    "ArtifactContext": ("prism.loops.contracts",),
    "ArtifactError": ("prism.loops.contracts",),
    "ArtifactParseResult": ("prism.loops.contracts",),
    "ArtifactParser": ("prism.loops.contracts",),
    "ArtifactRepairer": ("prism.loops.contracts",),
    "ArtifactValidation": ("prism.loops.contracts",),
    "ArtifactValidator": ("prism.loops.contracts",),
    "resolve_loop": ("prism.loops",),
    "resolve_tool_concurrency": ("prism.loops",),
    # structured output helpers
    "artifact_request": ("prism.structured_output",),
    "json_artifact_parser": ("prism.structured_output",),
    "json_schema_artifact_validator": ("prism.structured_output",),
    "validate_structured_output": ("prism.structured_output",),
    "without_structured_output": ("prism.structured_output",),
    # tool registry, filters, validation and dispatch
    "ToolFilter": ("prism.tools",),
    "ToolRegistry": ("prism.tools",),
    "ToolValidator": ("prism.tools",),
    "create_tool_registry": ("prism.tools",),
    "dispatch_tool_call": ("prism.tools",),
    "filter_tools": ("prism.tools",),
    "json_schema_tool_validator": ("prism.tools",),
    # value types used less often by a host
    "AgentRunRef": ("prism.types",),
    "ContextBlock": ("prism.types",),
    "ErrorInfo": ("prism.types",),
    "GuardrailRecord": ("prism.types",),
    "ModelCapabilities": ("prism.types",),
    "ModelLimits": ("prism.types",),
    "OwnershipScope": ("prism.types",),
    "RunLimitBreach": ("prism.types",),
    "ToolCallDeltaContent": ("prism.types",),
    "canonical_json": ("prism.types",),
    "is_json_value": ("prism.types",),
    "tool_result_message": ("prism.types",),
    # the middleware registry
    "MiddlewareRegistry": ("prism.middleware",),
}
"""Former top-level name -> the public modules to import it from (the first is its home)."""


def moved_message(package: str, name: str) -> str | None:
    """The ``AttributeError`` text for a moved name, or ``None`` when ``name`` never moved."""
    modules = MOVED.get(name)
    if modules is None:
        return None
    return f"{package}.{name} moved: import it from {' or '.join(modules)}"


def module_getattr(namespace: dict[str, object]) -> Callable[[str], object]:
    """Build the ``__getattr__`` of the package whose module globals are ``namespace`` (PEP 562).

    It is consulted only for names the namespace does not bind yet. A name of [`HOMES`][prism._moved.HOMES]
    imports its module and is cached in ``namespace`` (so ``__getattr__`` sees each name once); a
    moved name raises ``AttributeError`` naming its new module; a submodule name
    (``prism.artifacts``) imports that submodule; anything else raises the usual
    ``AttributeError``.
    """
    package = str(namespace["__name__"])
    homes = _by_name(package, HOMES)

    def __getattr__(name: str) -> object:
        home = homes.get(name)
        if home is not None:
            value = getattr(importlib.import_module(home), name)
            namespace[name] = value
            return value
        message = moved_message(package, name)
        if message is not None:
            raise AttributeError(message, name=name)
        if not name.startswith("_"):
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}", name=name)

    return __getattr__


def module_dir(namespace: dict[str, object], public: list[str]) -> Callable[[], list[str]]:
    """Build the ``__dir__`` of a lazy namespace: its ``public`` names (bound yet or not), the
    dunders and the submodules imported so far — never its private helpers."""

    def __dir__() -> list[str]:
        from types import ModuleType

        bound = (
            name
            for name, value in namespace.items()
            if name[:2] == "__" == name[-2:] or isinstance(value, ModuleType)
        )
        return sorted({*public, *bound})

    return __dir__


def _by_name(package: str, homes: Mapping[str, str]) -> dict[str, str]:
    """Top-level name -> the absolute name of the module that defines it."""
    return {
        name: f"{package}.{module}" for module, names in homes.items() for name in names.split()
    }
