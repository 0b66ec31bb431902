"""prism: an asyncio agent runtime whose per-run turn control is a replaceable loop strategy.

This namespace holds what a host application uses: agents, sessions and runs, messages, tools,
events, errors, limits, retry, redaction, durable runs, the turn policy and the built-in loops.
Everything else has its own namespace:

* ``prism.providers`` — what a provider author needs (the provider protocol, provider events and
  their constructors); the adapters are ``prism.providers.openai``, ``.anthropic``, ``.llama_cpp``;
* ``prism.testing`` — test doubles (mock provider, memory stores) and store conformance suites;
* ``prism.stores`` (SQLite, PostgreSQL), ``prism.artifacts``, ``prism.events``, ``prism.types``…

Importing ``prism`` imports none of the modules below: each name's module is imported the first
time it is read (``prism._moved`` says where each lives), so ``import prism`` loads no extra, nor
asyncio or jsonschema. A name that left raises an ``AttributeError`` naming its new module.
"""

# The imports are grouped by topic (one comment per group), not sorted as one block.
# ruff: noqa: I001

from . import _moved

# Read by type checkers and readers; at run time __getattr__ binds each name on first use.
if _moved.TYPE_CHECKING:
    # Agents, sessions and runs: build an agent, open a session, run it, read the result.
    from .runtime.run._observers import EventSubscription as EventSubscription
    from .runtime.agents.agent import Agent as Agent
    from .runtime.agents.agent import create_agent as create_agent
    from .runtime.run.session import AgentSession as AgentSession
    from .runtime.run.session import RunOptions as RunOptions
    from .runtime.run.session import RunStream as RunStream
    from .types import ModelConfig as ModelConfig
    from .types import RunResult as RunResult

    # Messages and content: run input, stored history and token usage.
    from .types import AgentInput as AgentInput
    from .types import ContentBlock as ContentBlock
    from .types import ImageContent as ImageContent
    from .types import JsonValue as JsonValue
    from .types import Message as Message
    from .types import TextContent as TextContent
    from .types import ThinkingContent as ThinkingContent
    from .types import ToolCallContent as ToolCallContent
    from .types import ToolResultContent as ToolResultContent
    from .types import Usage as Usage
    from .types import assistant_message as assistant_message
    from .types import system_message as system_message
    from .types import to_messages as to_messages
    from .types import user_message as user_message

    # Tools: the decorator, a hand-written definition, what a tool receives and returns, permission.
    from .tools import PermissionPolicy as PermissionPolicy
    from .tools import PermissionRequest as PermissionRequest
    from .tools import tool as tool
    from .types import ToolDefinition as ToolDefinition
    from .types import ToolExecutionContext as ToolExecutionContext
    from .types import ToolResult as ToolResult

    # Events: the union and the events a host usually reacts to (every event class is in prism.events).
    from .events import AgentEvent as AgentEvent
    from .events import AgentFinishedEvent as AgentFinishedEvent
    from .events import ErrorEvent as ErrorEvent
    from .events import MessageDeltaEvent as MessageDeltaEvent
    from .events import MessageFinishedEvent as MessageFinishedEvent
    from .events import ToolExecutionErrorEvent as ToolExecutionErrorEvent
    from .events import ToolExecutionFinishedEvent as ToolExecutionFinishedEvent
    from .events import ToolExecutionStartedEvent as ToolExecutionStartedEvent
    from .events import TurnFinishedEvent as TurnFinishedEvent
    from .events import TurnStartedEvent as TurnStartedEvent

    # Errors: every exception class, also importable from prism.errors.
    from .errors import AbortError as AbortError
    from .errors import AgentDecisionError as AgentDecisionError
    from .errors import AgentLoopStateError as AgentLoopStateError
    from .errors import AgentRunError as AgentRunError
    from .errors import AgentRunLimitError as AgentRunLimitError
    from .errors import AgentRunStateError as AgentRunStateError
    from .errors import AgentRunSuspended as AgentRunSuspended
    from .errors import AgentSessionBusyError as AgentSessionBusyError
    from .errors import ArtifactFailedError as ArtifactFailedError
    from .errors import CheckpointConflictError as CheckpointConflictError
    from .errors import EngineNotReadyError as EngineNotReadyError
    from .errors import EngineVersionError as EngineVersionError
    from .errors import GuardrailError as GuardrailError
    from .errors import PrismConfigError as PrismConfigError
    from .errors import PrismError as PrismError
    from .errors import ProviderResolutionError as ProviderResolutionError
    from .errors import ProviderTransportError as ProviderTransportError
    from .errors import ProviderTurnError as ProviderTurnError
    from .errors import RedactedError as RedactedError
    from .errors import RunAmbiguousError as RunAmbiguousError
    from .errors import RunLedgerError as RunLedgerError
    from .errors import RunLimitExceeded as RunLimitExceeded
    from .errors import SessionAppendConflictError as SessionAppendConflictError
    from .errors import SteerError as SteerError
    from .errors import StoreError as StoreError
    from .errors import StoreSchemaError as StoreSchemaError
    from .errors import StructuredOutputError as StructuredOutputError
    from .errors import TurnPolicyError as TurnPolicyError

    # Cancellation, limits, retry and redaction: the options that bound and protect a run.
    from .abort import AbortController as AbortController
    from .abort import AbortSignal as AbortSignal
    from .limits import UNLIMITED as UNLIMITED
    from .limits import RunLimits as RunLimits
    from .redaction import SecretRedactor as SecretRedactor
    from .redaction import create_secret_redactor as create_secret_redactor
    from .retry import RetryContext as RetryContext
    from .retry import RetryDecision as RetryDecision
    from .retry import RetryOptions as RetryOptions
    from .retry import RetryPolicy as RetryPolicy

    # Guardrails and structured output: checks on input, tool calls and output; a typed final answer.
    from .guardrails import Guardrail as Guardrail
    from .guardrails import GuardrailContext as GuardrailContext
    from .guardrails import GuardrailDecision as GuardrailDecision
    from .guardrails import Guardrails as Guardrails
    from .types import StructuredOutputOptions as StructuredOutputOptions

    # Stores: the protocols a session store and a checkpoint store implement.
    from .checkpoints import CheckpointStore as CheckpointStore
    from .store import SessionStore as SessionStore

    # Durable runs: checkpoint, suspend for approval, resume (possibly in another process).
    from .runtime.durable import AgentRunState as AgentRunState
    from .runtime.durable import LoadedRunState as LoadedRunState
    from .runtime.durable import PendingDecision as PendingDecision
    from .runtime.durable import RunDecision as RunDecision
    from .runtime.durable import RunStateOptions as RunStateOptions
    from .runtime.durable import list_agent_runs as list_agent_runs
    from .runtime.durable import load_agent_run_state as load_agent_run_state
    from .runtime.durable import resume_agent_run as resume_agent_run
    from .runtime.durable import save_agent_run_state as save_agent_run_state
    from .runtime.durable._run_listing import PendingDecisionRecord as PendingDecisionRecord
    from .runtime.durable._run_listing import list_pending_decisions as list_pending_decisions

    # Turn policy: stop cleanly at a turn boundary.
    from .runtime.run.turn_policy import Continue as Continue
    from .runtime.run.turn_policy import Stop as Stop
    from .runtime.run.turn_policy import TurnBoundaryContext as TurnBoundaryContext
    from .runtime.run.turn_policy import TurnDecision as TurnDecision
    from .runtime.run.turn_policy import TurnPolicy as TurnPolicy

    # Loops: the two built-in loops, their options, and what a custom loop implements and receives.
    from .loops.contracts import AgentLoopStrategy as AgentLoopStrategy
    from .loops.contracts import GenerateValidateReviseLoopOptions as GenerateValidateReviseLoopOptions
    from .loops.contracts import LoopContext as LoopContext
    from .loops.contracts import SingleShotLoopOptions as SingleShotLoopOptions
    from .loops.gvr import generate_validate_revise_loop as generate_validate_revise_loop
    from .loops.single_shot import single_shot_loop as single_shot_loop

__version__ = "0.1.0"

__all__ = [
    # Agents, sessions and runs
    "EventSubscription", "Agent", "create_agent", "AgentSession", "RunOptions", "RunStream",
    "ModelConfig", "RunResult",
    # Messages and content
    "AgentInput", "ContentBlock", "ImageContent", "JsonValue", "Message", "TextContent",
    "ThinkingContent", "ToolCallContent", "ToolResultContent", "Usage", "assistant_message",
    "system_message", "to_messages", "user_message",
    # Tools
    "PermissionPolicy", "PermissionRequest", "tool", "ToolDefinition", "ToolExecutionContext",
    "ToolResult",
    # Events
    "AgentEvent", "AgentFinishedEvent", "ErrorEvent", "MessageDeltaEvent",
    "MessageFinishedEvent", "ToolExecutionErrorEvent", "ToolExecutionFinishedEvent",
    "ToolExecutionStartedEvent", "TurnFinishedEvent", "TurnStartedEvent",
    # Errors
    "AbortError", "AgentDecisionError", "AgentLoopStateError", "AgentRunError",
    "AgentRunLimitError", "AgentRunStateError", "AgentRunSuspended", "AgentSessionBusyError",
    "ArtifactFailedError", "CheckpointConflictError", "EngineNotReadyError", "EngineVersionError",
    "GuardrailError",
    "PrismConfigError", "PrismError", "ProviderResolutionError", "ProviderTransportError",
    "ProviderTurnError", "RedactedError", "RunAmbiguousError", "RunLedgerError",
    "RunLimitExceeded", "SessionAppendConflictError",
    "SteerError", "StoreError", "StoreSchemaError", "StructuredOutputError", "TurnPolicyError",
    # Cancellation, limits, retry and redaction
    "AbortController", "AbortSignal", "UNLIMITED", "RunLimits", "SecretRedactor",
    "create_secret_redactor", "RetryContext", "RetryDecision", "RetryOptions", "RetryPolicy",
    # Guardrails and structured output
    "Guardrail", "GuardrailContext", "GuardrailDecision", "Guardrails",
    "StructuredOutputOptions",
    # Stores
    "CheckpointStore", "SessionStore",
    # Durable runs
    "AgentRunState", "LoadedRunState", "PendingDecision", "RunDecision", "RunStateOptions",
    "list_agent_runs", "load_agent_run_state", "resume_agent_run", "save_agent_run_state",
    "PendingDecisionRecord", "list_pending_decisions",
    # Turn policy
    "Continue", "Stop", "TurnBoundaryContext", "TurnDecision", "TurnPolicy",
    # Loops
    "AgentLoopStrategy", "GenerateValidateReviseLoopOptions", "LoopContext",
    "SingleShotLoopOptions", "generate_validate_revise_loop", "single_shot_loop",
]

# Type checkers see no __getattr__, so they report a moved name as missing rather than as `object`.
if not _moved.TYPE_CHECKING:
    __getattr__ = _moved.module_getattr(globals())
    __dir__ = _moved.module_dir(globals(), __all__)
