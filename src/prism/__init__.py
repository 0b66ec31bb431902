"""prism: an asyncio agent runtime whose per-run turn control is a replaceable loop strategy.

Everything a host needs is importable from this one namespace (ARCH-6); provider adapters live in
``prism.providers.<name>``, database stores in ``prism.stores``, test doubles in ``prism.testing``
and artifact helpers in ``prism.artifacts``. Importing ``prism`` performs no I/O (ARCH-8).

The names are loaded on first access (PEP 562): ``import prism`` binds this namespace only, and
each submodule is imported the first time one of its names (or the submodule itself) is used, so
a program pays at import for what it touches. ``from prism import X``, ``prism.X`` and
``dir(prism)`` behave as with eager imports.
"""

from __future__ import annotations

import importlib as _importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy treats it alike)

if TYPE_CHECKING:
    from .abort import (
        AbortController as AbortController,
    )
    from .abort import (
        AbortSignal as AbortSignal,
    )
    from .assembly import (
        ContextProvider as ContextProvider,
    )
    from .assembly import (
        ContextProviderContext as ContextProviderContext,
    )
    from .assembly import (
        Skill as Skill,
    )
    from .assembly import (
        SystemPromptContribution as SystemPromptContribution,
    )
    from .assembly import (
        assemble_provider_input as assemble_provider_input,
    )
    from .assembly import (
        compose_system_prompt as compose_system_prompt,
    )
    from .errors import (
        AbortError as AbortError,
    )
    from .errors import (
        AgentDecisionError as AgentDecisionError,
    )
    from .errors import (
        AgentLoopStateError as AgentLoopStateError,
    )
    from .errors import (
        AgentRunError as AgentRunError,
    )
    from .errors import (
        AgentRunLimitError as AgentRunLimitError,
    )
    from .errors import (
        AgentRunStateError as AgentRunStateError,
    )
    from .errors import (
        AgentRunSuspended as AgentRunSuspended,
    )
    from .errors import (
        AgentSessionBusyError as AgentSessionBusyError,
    )
    from .errors import (
        ArtifactFailedError as ArtifactFailedError,
    )
    from .errors import (
        CheckpointConflictError as CheckpointConflictError,
    )
    from .errors import (
        GuardrailError as GuardrailError,
    )
    from .errors import (
        PrismConfigError as PrismConfigError,
    )
    from .errors import (
        PrismError as PrismError,
    )
    from .errors import (
        ProviderResolutionError as ProviderResolutionError,
    )
    from .errors import (
        ProviderTransportError as ProviderTransportError,
    )
    from .errors import (
        ProviderTurnError as ProviderTurnError,
    )
    from .errors import (
        RedactedError as RedactedError,
    )
    from .errors import (
        RunLedgerError as RunLedgerError,
    )
    from .errors import (
        RunLimitExceeded as RunLimitExceeded,
    )
    from .errors import (
        SessionAppendConflictError as SessionAppendConflictError,
    )
    from .errors import (
        SteerError as SteerError,
    )
    from .errors import (
        StoreSchemaError as StoreSchemaError,
    )
    from .errors import (
        StructuredOutputError as StructuredOutputError,
    )
    from .errors import (
        TurnPolicyError as TurnPolicyError,
    )
    from .events import (
        EVENT_TYPES as EVENT_TYPES,
    )
    from .events import (
        AgentDeniedEvent as AgentDeniedEvent,
    )
    from .events import (
        AgentEvent as AgentEvent,
    )
    from .events import (
        AgentFinishedEvent as AgentFinishedEvent,
    )
    from .events import (
        AgentResumedEvent as AgentResumedEvent,
    )
    from .events import (
        AgentStartedEvent as AgentStartedEvent,
    )
    from .events import (
        AgentSuspendedEvent as AgentSuspendedEvent,
    )
    from .events import (
        ArtifactFailedEvent as ArtifactFailedEvent,
    )
    from .events import (
        ArtifactFinishedEvent as ArtifactFinishedEvent,
    )
    from .events import (
        ArtifactRevisionStartedEvent as ArtifactRevisionStartedEvent,
    )
    from .events import (
        ArtifactValidationFinishedEvent as ArtifactValidationFinishedEvent,
    )
    from .events import (
        ArtifactValidationStartedEvent as ArtifactValidationStartedEvent,
    )
    from .events import (
        CompactionFinishedEvent as CompactionFinishedEvent,
    )
    from .events import (
        CompactionStartedEvent as CompactionStartedEvent,
    )
    from .events import (
        ErrorEvent as ErrorEvent,
    )
    from .events import (
        EventSubscriberOverflowEvent as EventSubscriberOverflowEvent,
    )
    from .events import (
        GuardrailDecisionEvent as GuardrailDecisionEvent,
    )
    from .events import (
        MessageDeltaEvent as MessageDeltaEvent,
    )
    from .events import (
        MessageFinishedEvent as MessageFinishedEvent,
    )
    from .events import (
        MessageStartedEvent as MessageStartedEvent,
    )
    from .events import (
        ProviderTurnFinishedEvent as ProviderTurnFinishedEvent,
    )
    from .events import (
        ProviderTurnMetadata as ProviderTurnMetadata,
    )
    from .events import (
        ProviderTurnStartedEvent as ProviderTurnStartedEvent,
    )
    from .events import (
        QueueUpdatedEvent as QueueUpdatedEvent,
    )
    from .events import (
        RetryScheduledEvent as RetryScheduledEvent,
    )
    from .events import (
        RunLimitExceededEvent as RunLimitExceededEvent,
    )
    from .events import (
        SteerRejectedEvent as SteerRejectedEvent,
    )
    from .events import (
        ToolExecutionBlockedEvent as ToolExecutionBlockedEvent,
    )
    from .events import (
        ToolExecutionErrorEvent as ToolExecutionErrorEvent,
    )
    from .events import (
        ToolExecutionFinishedEvent as ToolExecutionFinishedEvent,
    )
    from .events import (
        ToolExecutionMetadata as ToolExecutionMetadata,
    )
    from .events import (
        ToolExecutionProgressEvent as ToolExecutionProgressEvent,
    )
    from .events import (
        ToolExecutionStartedEvent as ToolExecutionStartedEvent,
    )
    from .events import (
        ToolExecutionStatus as ToolExecutionStatus,
    )
    from .events import (
        TurnFinishedEvent as TurnFinishedEvent,
    )
    from .events import (
        TurnStartedEvent as TurnStartedEvent,
    )
    from .events import (
        event_from_dict as event_from_dict,
    )
    from .guardrails import (
        Guardrail as Guardrail,
    )
    from .guardrails import (
        GuardrailContext as GuardrailContext,
    )
    from .guardrails import (
        GuardrailDecision as GuardrailDecision,
    )
    from .guardrails import (
        Guardrails as Guardrails,
    )
    from .guardrails import (
        run_guardrails as run_guardrails,
    )
    from .ledger import (
        AgentEventRecord as AgentEventRecord,
    )
    from .ledger import (
        ExecutionTimeline as ExecutionTimeline,
    )
    from .ledger import (
        MemoryRunLedger as MemoryRunLedger,
    )
    from .ledger import (
        RunLedger as RunLedger,
    )
    from .ledger import (
        RunRecord as RunRecord,
    )
    from .ledger import (
        TimelineArtifactAttempt as TimelineArtifactAttempt,
    )
    from .ledger import (
        TimelineToolCall as TimelineToolCall,
    )
    from .ledger import (
        TimelineTurn as TimelineTurn,
    )
    from .ledger import (
        ToolCallRecord as ToolCallRecord,
    )
    from .ledger import (
        UsageRecord as UsageRecord,
    )
    from .ledger import (
        project_execution_timeline as project_execution_timeline,
    )
    from .limits import (
        UNLIMITED as UNLIMITED,
    )
    from .limits import (
        RunCost as RunCost,
    )
    from .limits import (
        RunLimits as RunLimits,
    )
    from .limits import (
        RunLimitTracker as RunLimitTracker,
    )
    from .limits import (
        resolve_run_limits as resolve_run_limits,
    )
    from .loops.contracts import (
        AgentLoopOptions as AgentLoopOptions,
    )
    from .loops.contracts import (
        AgentLoopStrategy as AgentLoopStrategy,
    )
    from .loops.contracts import (
        ArtifactContext as ArtifactContext,
    )
    from .loops.contracts import (
        ArtifactError as ArtifactError,
    )
    from .loops.contracts import (
        ArtifactParser as ArtifactParser,
    )
    from .loops.contracts import (
        ArtifactParseResult as ArtifactParseResult,
    )
    from .loops.contracts import (
        ArtifactRepairer as ArtifactRepairer,
    )
    from .loops.contracts import (
        ArtifactValidation as ArtifactValidation,
    )
    from .loops.contracts import (
        ArtifactValidator as ArtifactValidator,
    )
    from .loops.contracts import (
        GenerateValidateReviseLoopOptions as GenerateValidateReviseLoopOptions,
    )
    from .loops.contracts import (
        LoopContext as LoopContext,
    )
    from .loops.contracts import (
        SingleShotLoopOptions as SingleShotLoopOptions,
    )
    from .loops.gvr import (
        generate_validate_revise_loop as generate_validate_revise_loop,
    )
    from .loops.resolve import (
        resolve_loop as resolve_loop,
    )
    from .loops.resolve import (
        resolve_tool_concurrency as resolve_tool_concurrency,
    )
    from .loops.single_shot import (
        single_shot_loop as single_shot_loop,
    )
    from .middleware import (
        MiddlewareRegistry as MiddlewareRegistry,
    )
    from .providers.base import (
        AIProvider as AIProvider,
    )
    from .providers.base import (
        provider_content_delta as provider_content_delta,
    )
    from .providers.base import (
        provider_done as provider_done,
    )
    from .providers.base import (
        provider_error as provider_error,
    )
    from .providers.base import (
        provider_message_start as provider_message_start,
    )
    from .providers.base import (
        provider_text_delta as provider_text_delta,
    )
    from .providers.base import (
        provider_thinking_delta as provider_thinking_delta,
    )
    from .providers.base import (
        provider_tool_call as provider_tool_call,
    )
    from .providers.base import (
        provider_tool_call_delta as provider_tool_call_delta,
    )
    from .providers.base import (
        provider_usage as provider_usage,
    )
    from .providers.base import (
        reconstruct_tool_call_deltas as reconstruct_tool_call_deltas,
    )
    from .providers.base import (
        tool_call_content as tool_call_content,
    )
    from .providers.base import (
        tool_call_from_arguments_text as tool_call_from_arguments_text,
    )
    from .providers.mock import (
        MockProvider as MockProvider,
    )
    from .providers.mock import (
        create_mock_provider as create_mock_provider,
    )
    from .redaction import (
        SecretRedactor as SecretRedactor,
    )
    from .redaction import (
        create_secret_redactor as create_secret_redactor,
    )
    from .redaction import (
        error_to_error_info as error_to_error_info,
    )
    from .redaction import (
        redact_agent_event as redact_agent_event,
    )
    from .redaction import (
        redact_value as redact_value,
    )
    from .retry import (
        RetryContext as RetryContext,
    )
    from .retry import (
        RetryDecision as RetryDecision,
    )
    from .retry import (
        RetryOptions as RetryOptions,
    )
    from .retry import (
        RetryPayload as RetryPayload,
    )
    from .retry import (
        RetryPolicy as RetryPolicy,
    )
    from .retry import (
        create_default_retry_policy as create_default_retry_policy,
    )
    from .retry import (
        is_transient_error as is_transient_error,
    )
    from .runtime._observers import (
        EventSubscription as EventSubscription,
    )
    from .runtime.agent import (
        Agent as Agent,
    )
    from .runtime.agent import (
        AgentConfig as AgentConfig,
    )
    from .runtime.agent import (
        ProviderSource as ProviderSource,
    )
    from .runtime.agent import (
        create_agent as create_agent,
    )
    from .runtime.checkpoints import (
        CheckpointStore as CheckpointStore,
    )
    from .runtime.checkpoints import (
        MemoryCheckpointStore as MemoryCheckpointStore,
    )
    from .runtime.durable import (
        AgentRunInterruption as AgentRunInterruption,
    )
    from .runtime.durable import (
        AgentRunState as AgentRunState,
    )
    from .runtime.durable import (
        DecisionScope as DecisionScope,
    )
    from .runtime.durable import (
        LoadedRunState as LoadedRunState,
    )
    from .runtime.durable import (
        PendingDecision as PendingDecision,
    )
    from .runtime.durable import (
        RunDecision as RunDecision,
    )
    from .runtime.durable import (
        RunStateOptions as RunStateOptions,
    )
    from .runtime.durable import (
        StickyDecision as StickyDecision,
    )
    from .runtime.durable import (
        agent_fingerprint as agent_fingerprint,
    )
    from .runtime.durable import (
        load_agent_run_state as load_agent_run_state,
    )
    from .runtime.durable import (
        resume_agent_run as resume_agent_run,
    )
    from .runtime.durable import (
        save_agent_run_state as save_agent_run_state,
    )
    from .runtime.provider_turn import (
        PolicyContext as PolicyContext,
    )
    from .runtime.provider_turn import (
        ProviderRequestPolicy as ProviderRequestPolicy,
    )
    from .runtime.provider_turn import (
        ProviderRequestPolicyResult as ProviderRequestPolicyResult,
    )
    from .runtime.provider_turn import (
        generate_with_retry as generate_with_retry,
    )
    from .runtime.session import (
        AgentSession as AgentSession,
    )
    from .runtime.session import (
        RunOptions as RunOptions,
    )
    from .runtime.session import (
        RunStream as RunStream,
    )
    from .runtime.turn_policy import (
        Continue as Continue,
    )
    from .runtime.turn_policy import (
        Stop as Stop,
    )
    from .runtime.turn_policy import (
        TurnBoundaryContext as TurnBoundaryContext,
    )
    from .runtime.turn_policy import (
        TurnDecision as TurnDecision,
    )
    from .runtime.turn_policy import (
        TurnPolicy as TurnPolicy,
    )
    from .store import (
        CompactionInput as CompactionInput,
    )
    from .store import (
        CompactionOptions as CompactionOptions,
    )
    from .store import (
        CompactionResult as CompactionResult,
    )
    from .store import (
        CompactionStrategy as CompactionStrategy,
    )
    from .store import (
        MemorySessionStore as MemorySessionStore,
    )
    from .store import (
        SessionEntry as SessionEntry,
    )
    from .store import (
        SessionStore as SessionStore,
    )
    from .structured_output import (
        artifact_request as artifact_request,
    )
    from .structured_output import (
        json_artifact_parser as json_artifact_parser,
    )
    from .structured_output import (
        json_schema_artifact_validator as json_schema_artifact_validator,
    )
    from .structured_output import (
        validate_structured_output as validate_structured_output,
    )
    from .structured_output import (
        without_structured_output as without_structured_output,
    )
    from .tools import (
        PermissionPolicy as PermissionPolicy,
    )
    from .tools import (
        PermissionRequest as PermissionRequest,
    )
    from .tools import (
        ToolFilter as ToolFilter,
    )
    from .tools import (
        ToolRegistry as ToolRegistry,
    )
    from .tools import (
        ToolValidator as ToolValidator,
    )
    from .tools import (
        create_tool_registry as create_tool_registry,
    )
    from .tools import (
        dispatch_tool_call as dispatch_tool_call,
    )
    from .tools import (
        filter_tools as filter_tools,
    )
    from .tools import (
        json_schema_tool_validator as json_schema_tool_validator,
    )
    from .tools import (
        tool as tool,
    )
    from .types import (
        AgentInput as AgentInput,
    )
    from .types import (
        AgentRunRef as AgentRunRef,
    )
    from .types import (
        ContentBlock as ContentBlock,
    )
    from .types import (
        ContextBlock as ContextBlock,
    )
    from .types import (
        ErrorInfo as ErrorInfo,
    )
    from .types import (
        GuardrailRecord as GuardrailRecord,
    )
    from .types import (
        ImageContent as ImageContent,
    )
    from .types import (
        JsonValue as JsonValue,
    )
    from .types import (
        Message as Message,
    )
    from .types import (
        ModelCapabilities as ModelCapabilities,
    )
    from .types import (
        ModelConfig as ModelConfig,
    )
    from .types import (
        ModelLimits as ModelLimits,
    )
    from .types import (
        OwnershipScope as OwnershipScope,
    )
    from .types import (
        ProviderContentDelta as ProviderContentDelta,
    )
    from .types import (
        ProviderDone as ProviderDone,
    )
    from .types import (
        ProviderErrorEvent as ProviderErrorEvent,
    )
    from .types import (
        ProviderEvent as ProviderEvent,
    )
    from .types import (
        ProviderMessageStart as ProviderMessageStart,
    )
    from .types import (
        ProviderRequest as ProviderRequest,
    )
    from .types import (
        ProviderRequestOptions as ProviderRequestOptions,
    )
    from .types import (
        ProviderStopReason as ProviderStopReason,
    )
    from .types import (
        ProviderToolCall as ProviderToolCall,
    )
    from .types import (
        ProviderToolCallDelta as ProviderToolCallDelta,
    )
    from .types import (
        ProviderTurnResult as ProviderTurnResult,
    )
    from .types import (
        ProviderUsage as ProviderUsage,
    )
    from .types import (
        RunLimitBreach as RunLimitBreach,
    )
    from .types import (
        RunResult as RunResult,
    )
    from .types import (
        StructuredOutputOptions as StructuredOutputOptions,
    )
    from .types import (
        TextContent as TextContent,
    )
    from .types import (
        ThinkingContent as ThinkingContent,
    )
    from .types import (
        ToolCallContent as ToolCallContent,
    )
    from .types import (
        ToolCallDeltaContent as ToolCallDeltaContent,
    )
    from .types import (
        ToolDefinition as ToolDefinition,
    )
    from .types import (
        ToolExecutionContext as ToolExecutionContext,
    )
    from .types import (
        ToolResult as ToolResult,
    )
    from .types import (
        ToolResultContent as ToolResultContent,
    )
    from .types import (
        Usage as Usage,
    )
    from .types import (
        assistant_message as assistant_message,
    )
    from .types import (
        canonical_json as canonical_json,
    )
    from .types import (
        is_json_value as is_json_value,
    )
    from .types import (
        merge_provider_options as merge_provider_options,
    )
    from .types import (
        system_message as system_message,
    )
    from .types import (
        to_messages as to_messages,
    )
    from .types import (
        tool_result_message as tool_result_message,
    )
    from .types import (
        user_message as user_message,
    )
    from .usage import (
        UsageAccumulator as UsageAccumulator,
    )

# public name -> the submodule that defines it
_EXPORTS: dict[str, str] = {
    "compose_system_prompt": ".assembly",
    "EventSubscription": ".runtime._observers",
    "AgentRunInterruption": ".runtime.durable",
    "AgentRunState": ".runtime.durable",
    "DecisionScope": ".runtime.durable",
    "LoadedRunState": ".runtime.durable",
    "PendingDecision": ".runtime.durable",
    "RunDecision": ".runtime.durable",
    "RunStateOptions": ".runtime.durable",
    "StickyDecision": ".runtime.durable",
    "agent_fingerprint": ".runtime.durable",
    "load_agent_run_state": ".runtime.durable",
    "resume_agent_run": ".runtime.durable",
    "save_agent_run_state": ".runtime.durable",
    "Continue": ".runtime.turn_policy",
    "Stop": ".runtime.turn_policy",
    "TurnBoundaryContext": ".runtime.turn_policy",
    "TurnDecision": ".runtime.turn_policy",
    "TurnPolicy": ".runtime.turn_policy",
    "AIProvider": ".providers.base",
    "AbortController": ".abort",
    "AbortError": ".errors",
    "AbortSignal": ".abort",
    "Agent": ".runtime.agent",
    "AgentConfig": ".runtime.agent",
    "AgentDecisionError": ".errors",
    "AgentDeniedEvent": ".events",
    "AgentEvent": ".events",
    "AgentEventRecord": ".ledger",
    "AgentFinishedEvent": ".events",
    "AgentInput": ".types",
    "AgentLoopOptions": ".loops.contracts",
    "AgentLoopStateError": ".errors",
    "AgentLoopStrategy": ".loops.contracts",
    "AgentResumedEvent": ".events",
    "AgentRunError": ".errors",
    "AgentRunLimitError": ".errors",
    "AgentRunRef": ".types",
    "AgentRunStateError": ".errors",
    "AgentRunSuspended": ".errors",
    "AgentSession": ".runtime.session",
    "AgentSessionBusyError": ".errors",
    "AgentStartedEvent": ".events",
    "AgentSuspendedEvent": ".events",
    "ArtifactContext": ".loops.contracts",
    "ArtifactError": ".loops.contracts",
    "ArtifactFailedError": ".errors",
    "ArtifactFailedEvent": ".events",
    "ArtifactFinishedEvent": ".events",
    "ArtifactParseResult": ".loops.contracts",
    "ArtifactParser": ".loops.contracts",
    "ArtifactRepairer": ".loops.contracts",
    "ArtifactRevisionStartedEvent": ".events",
    "ArtifactValidation": ".loops.contracts",
    "ArtifactValidationFinishedEvent": ".events",
    "ArtifactValidationStartedEvent": ".events",
    "ArtifactValidator": ".loops.contracts",
    "CheckpointConflictError": ".errors",
    "CheckpointStore": ".runtime.checkpoints",
    "CompactionFinishedEvent": ".events",
    "CompactionInput": ".store",
    "CompactionOptions": ".store",
    "CompactionResult": ".store",
    "CompactionStartedEvent": ".events",
    "CompactionStrategy": ".store",
    "ContentBlock": ".types",
    "ContextBlock": ".types",
    "ContextProvider": ".assembly",
    "ContextProviderContext": ".assembly",
    "EVENT_TYPES": ".events",
    "ErrorEvent": ".events",
    "ErrorInfo": ".types",
    "EventSubscriberOverflowEvent": ".events",
    "ExecutionTimeline": ".ledger",
    "GenerateValidateReviseLoopOptions": ".loops.contracts",
    "Guardrail": ".guardrails",
    "GuardrailContext": ".guardrails",
    "GuardrailDecision": ".guardrails",
    "GuardrailDecisionEvent": ".events",
    "GuardrailError": ".errors",
    "GuardrailRecord": ".types",
    "Guardrails": ".guardrails",
    "ImageContent": ".types",
    "JsonValue": ".types",
    "LoopContext": ".loops.contracts",
    "MemoryCheckpointStore": ".runtime.checkpoints",
    "MemoryRunLedger": ".ledger",
    "MemorySessionStore": ".store",
    "Message": ".types",
    "MessageDeltaEvent": ".events",
    "MessageFinishedEvent": ".events",
    "MessageStartedEvent": ".events",
    "MiddlewareRegistry": ".middleware",
    "MockProvider": ".providers.mock",
    "ModelCapabilities": ".types",
    "ModelConfig": ".types",
    "ModelLimits": ".types",
    "OwnershipScope": ".types",
    "PermissionPolicy": ".tools",
    "PermissionRequest": ".tools",
    "PolicyContext": ".runtime.provider_turn",
    "PrismConfigError": ".errors",
    "PrismError": ".errors",
    "ProviderContentDelta": ".types",
    "ProviderDone": ".types",
    "ProviderErrorEvent": ".types",
    "ProviderEvent": ".types",
    "ProviderMessageStart": ".types",
    "ProviderRequest": ".types",
    "ProviderRequestOptions": ".types",
    "ProviderRequestPolicy": ".runtime.provider_turn",
    "ProviderRequestPolicyResult": ".runtime.provider_turn",
    "ProviderResolutionError": ".errors",
    "ProviderSource": ".runtime.agent",
    "ProviderStopReason": ".types",
    "ProviderToolCall": ".types",
    "ProviderToolCallDelta": ".types",
    "ProviderTransportError": ".errors",
    "ProviderTurnError": ".errors",
    "ProviderTurnFinishedEvent": ".events",
    "ProviderTurnMetadata": ".events",
    "ProviderTurnResult": ".types",
    "ProviderTurnStartedEvent": ".events",
    "ProviderUsage": ".types",
    "QueueUpdatedEvent": ".events",
    "RedactedError": ".errors",
    "RetryContext": ".retry",
    "RetryDecision": ".retry",
    "RetryOptions": ".retry",
    "RetryPayload": ".retry",
    "RetryPolicy": ".retry",
    "RetryScheduledEvent": ".events",
    "RunCost": ".limits",
    "RunLedger": ".ledger",
    "RunLedgerError": ".errors",
    "RunLimitBreach": ".types",
    "RunLimitExceeded": ".errors",
    "RunLimitExceededEvent": ".events",
    "RunLimitTracker": ".limits",
    "RunLimits": ".limits",
    "RunOptions": ".runtime.session",
    "RunRecord": ".ledger",
    "RunResult": ".types",
    "RunStream": ".runtime.session",
    "SecretRedactor": ".redaction",
    "SessionAppendConflictError": ".errors",
    "SessionEntry": ".store",
    "SessionStore": ".store",
    "SingleShotLoopOptions": ".loops.contracts",
    "Skill": ".assembly",
    "SteerError": ".errors",
    "SteerRejectedEvent": ".events",
    "StoreSchemaError": ".errors",
    "StructuredOutputError": ".errors",
    "StructuredOutputOptions": ".types",
    "SystemPromptContribution": ".assembly",
    "TextContent": ".types",
    "ThinkingContent": ".types",
    "TimelineArtifactAttempt": ".ledger",
    "TimelineToolCall": ".ledger",
    "TimelineTurn": ".ledger",
    "ToolCallContent": ".types",
    "ToolCallDeltaContent": ".types",
    "ToolCallRecord": ".ledger",
    "ToolDefinition": ".types",
    "ToolExecutionBlockedEvent": ".events",
    "ToolExecutionContext": ".types",
    "ToolExecutionErrorEvent": ".events",
    "ToolExecutionFinishedEvent": ".events",
    "ToolExecutionMetadata": ".events",
    "ToolExecutionProgressEvent": ".events",
    "ToolExecutionStartedEvent": ".events",
    "ToolExecutionStatus": ".events",
    "ToolFilter": ".tools",
    "ToolRegistry": ".tools",
    "ToolResult": ".types",
    "ToolResultContent": ".types",
    "ToolValidator": ".tools",
    "TurnFinishedEvent": ".events",
    "TurnPolicyError": ".errors",
    "TurnStartedEvent": ".events",
    "UNLIMITED": ".limits",
    "Usage": ".types",
    "UsageAccumulator": ".usage",
    "UsageRecord": ".ledger",
    "artifact_request": ".structured_output",
    "assemble_provider_input": ".assembly",
    "assistant_message": ".types",
    "canonical_json": ".types",
    "create_agent": ".runtime.agent",
    "create_default_retry_policy": ".retry",
    "create_mock_provider": ".providers.mock",
    "create_secret_redactor": ".redaction",
    "create_tool_registry": ".tools",
    "dispatch_tool_call": ".tools",
    "error_to_error_info": ".redaction",
    "event_from_dict": ".events",
    "filter_tools": ".tools",
    "generate_validate_revise_loop": ".loops.gvr",
    "generate_with_retry": ".runtime.provider_turn",
    "is_json_value": ".types",
    "is_transient_error": ".retry",
    "json_artifact_parser": ".structured_output",
    "json_schema_artifact_validator": ".structured_output",
    "json_schema_tool_validator": ".tools",
    "merge_provider_options": ".types",
    "project_execution_timeline": ".ledger",
    "provider_content_delta": ".providers.base",
    "provider_done": ".providers.base",
    "provider_error": ".providers.base",
    "provider_message_start": ".providers.base",
    "provider_text_delta": ".providers.base",
    "provider_thinking_delta": ".providers.base",
    "provider_tool_call": ".providers.base",
    "provider_tool_call_delta": ".providers.base",
    "provider_usage": ".providers.base",
    "reconstruct_tool_call_deltas": ".providers.base",
    "redact_agent_event": ".redaction",
    "redact_value": ".redaction",
    "resolve_loop": ".loops.resolve",
    "resolve_run_limits": ".limits",
    "resolve_tool_concurrency": ".loops.resolve",
    "run_guardrails": ".guardrails",
    "single_shot_loop": ".loops.single_shot",
    "system_message": ".types",
    "to_messages": ".types",
    "tool": ".tools",
    "tool_call_content": ".providers.base",
    "tool_call_from_arguments_text": ".providers.base",
    "tool_result_message": ".types",
    "user_message": ".types",
    "validate_structured_output": ".structured_output",
    "without_structured_output": ".structured_output",
}

__all__ = [
    "AIProvider",
    "AbortController",
    "AbortError",
    "AbortSignal",
    "Agent",
    "AgentConfig",
    "AgentDecisionError",
    "AgentDeniedEvent",
    "AgentEvent",
    "AgentEventRecord",
    "AgentFinishedEvent",
    "AgentInput",
    "AgentLoopOptions",
    "AgentLoopStateError",
    "AgentLoopStrategy",
    "AgentResumedEvent",
    "AgentRunError",
    "AgentRunInterruption",
    "AgentRunLimitError",
    "AgentRunRef",
    "AgentRunState",
    "AgentRunStateError",
    "AgentRunSuspended",
    "AgentSession",
    "AgentSessionBusyError",
    "AgentStartedEvent",
    "AgentSuspendedEvent",
    "ArtifactContext",
    "ArtifactError",
    "ArtifactFailedError",
    "ArtifactFailedEvent",
    "ArtifactFinishedEvent",
    "ArtifactParseResult",
    "ArtifactParser",
    "ArtifactRepairer",
    "ArtifactRevisionStartedEvent",
    "ArtifactValidation",
    "ArtifactValidationFinishedEvent",
    "ArtifactValidationStartedEvent",
    "ArtifactValidator",
    "CheckpointConflictError",
    "CheckpointStore",
    "CompactionFinishedEvent",
    "CompactionInput",
    "CompactionOptions",
    "CompactionResult",
    "CompactionStartedEvent",
    "CompactionStrategy",
    "ContentBlock",
    "ContextBlock",
    "ContextProvider",
    "ContextProviderContext",
    "Continue",
    "DecisionScope",
    "EVENT_TYPES",
    "ErrorEvent",
    "ErrorInfo",
    "EventSubscriberOverflowEvent",
    "EventSubscription",
    "ExecutionTimeline",
    "GenerateValidateReviseLoopOptions",
    "Guardrail",
    "GuardrailContext",
    "GuardrailDecision",
    "GuardrailDecisionEvent",
    "GuardrailError",
    "GuardrailRecord",
    "Guardrails",
    "ImageContent",
    "JsonValue",
    "LoadedRunState",
    "LoopContext",
    "MemoryCheckpointStore",
    "MemoryRunLedger",
    "MemorySessionStore",
    "Message",
    "MessageDeltaEvent",
    "MessageFinishedEvent",
    "MessageStartedEvent",
    "MiddlewareRegistry",
    "MockProvider",
    "ModelCapabilities",
    "ModelConfig",
    "ModelLimits",
    "OwnershipScope",
    "PendingDecision",
    "PermissionPolicy",
    "PermissionRequest",
    "PolicyContext",
    "PrismConfigError",
    "PrismError",
    "ProviderContentDelta",
    "ProviderDone",
    "ProviderErrorEvent",
    "ProviderEvent",
    "ProviderMessageStart",
    "ProviderRequest",
    "ProviderRequestOptions",
    "ProviderRequestPolicy",
    "ProviderRequestPolicyResult",
    "ProviderResolutionError",
    "ProviderSource",
    "ProviderStopReason",
    "ProviderToolCall",
    "ProviderToolCallDelta",
    "ProviderTransportError",
    "ProviderTurnError",
    "ProviderTurnFinishedEvent",
    "ProviderTurnMetadata",
    "ProviderTurnResult",
    "ProviderTurnStartedEvent",
    "ProviderUsage",
    "QueueUpdatedEvent",
    "RedactedError",
    "RetryContext",
    "RetryDecision",
    "RetryOptions",
    "RetryPayload",
    "RetryPolicy",
    "RetryScheduledEvent",
    "RunCost",
    "RunDecision",
    "RunLedger",
    "RunLedgerError",
    "RunLimitBreach",
    "RunLimitExceeded",
    "RunLimitExceededEvent",
    "RunLimitTracker",
    "RunLimits",
    "RunOptions",
    "RunRecord",
    "RunResult",
    "RunStateOptions",
    "RunStream",
    "SecretRedactor",
    "SessionAppendConflictError",
    "SessionEntry",
    "SessionStore",
    "SingleShotLoopOptions",
    "Skill",
    "SteerError",
    "SteerRejectedEvent",
    "StickyDecision",
    "Stop",
    "StoreSchemaError",
    "StructuredOutputError",
    "StructuredOutputOptions",
    "SystemPromptContribution",
    "TextContent",
    "ThinkingContent",
    "TimelineArtifactAttempt",
    "TimelineToolCall",
    "TimelineTurn",
    "ToolCallContent",
    "ToolCallDeltaContent",
    "ToolCallRecord",
    "ToolDefinition",
    "ToolExecutionBlockedEvent",
    "ToolExecutionContext",
    "ToolExecutionErrorEvent",
    "ToolExecutionFinishedEvent",
    "ToolExecutionMetadata",
    "ToolExecutionProgressEvent",
    "ToolExecutionStartedEvent",
    "ToolExecutionStatus",
    "ToolFilter",
    "ToolRegistry",
    "ToolResult",
    "ToolResultContent",
    "ToolValidator",
    "TurnBoundaryContext",
    "TurnDecision",
    "TurnFinishedEvent",
    "TurnPolicy",
    "TurnPolicyError",
    "TurnStartedEvent",
    "UNLIMITED",
    "Usage",
    "UsageAccumulator",
    "UsageRecord",
    "agent_fingerprint",
    "artifact_request",
    "assemble_provider_input",
    "assistant_message",
    "canonical_json",
    "compose_system_prompt",
    "create_agent",
    "create_default_retry_policy",
    "create_mock_provider",
    "create_secret_redactor",
    "create_tool_registry",
    "dispatch_tool_call",
    "error_to_error_info",
    "event_from_dict",
    "filter_tools",
    "generate_validate_revise_loop",
    "generate_with_retry",
    "is_json_value",
    "is_transient_error",
    "json_artifact_parser",
    "json_schema_artifact_validator",
    "json_schema_tool_validator",
    "load_agent_run_state",
    "merge_provider_options",
    "project_execution_timeline",
    "provider_content_delta",
    "provider_done",
    "provider_error",
    "provider_message_start",
    "provider_text_delta",
    "provider_thinking_delta",
    "provider_tool_call",
    "provider_tool_call_delta",
    "provider_usage",
    "reconstruct_tool_call_deltas",
    "redact_agent_event",
    "redact_value",
    "resolve_loop",
    "resolve_run_limits",
    "resolve_tool_concurrency",
    "resume_agent_run",
    "run_guardrails",
    "save_agent_run_state",
    "single_shot_loop",
    "system_message",
    "to_messages",
    "tool",
    "tool_call_content",
    "tool_call_from_arguments_text",
    "tool_result_message",
    "user_message",
    "validate_structured_output",
    "without_structured_output",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """Load a public name (or a submodule) on first access and keep it in this namespace."""
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(_importlib.import_module(module, __name__), name)
    elif not name.startswith("__"):
        try:
            value = _importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, the public submodules already loaded, and the dunders (not the
    implementation's own bindings such as ``TYPE_CHECKING``, ``annotations`` or ``_EXPORTS``)."""
    names = {*__all__}
    for name, value in globals().items():
        if name[:2] == "__" == name[-2:]:
            names.add(name)
        elif name[:1] != "_" and type(value) is _ModuleType and name not in _NOT_PUBLIC:
            names.add(name)
    return sorted(names)


_ModuleType = type(_importlib)
_NOT_PUBLIC = frozenset({"annotations", "TYPE_CHECKING"})
