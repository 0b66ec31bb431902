"""Agent events (04-events.md, EVT-1..3): one frozen, keyword-only dataclass per event type.

Every event has ``session_id``/``run_id`` (``""`` by default, or ``None`` where optional; the
runtime stamps empty ids, EVT-1), its own fields, and a ``type`` literal declared last that is not an
``__init__`` parameter (CON-3). ``event.to_dict()`` is JSON-safe and includes ``"type"``;
:func:`event_from_dict` rebuilds the right class.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias, Union

from prism._serde import Serializable
from prism.loops.contracts import ArtifactValidation
from prism.types import (
    ContentBlock,
    ErrorInfo,
    GuardrailRecord,
    JsonValue,
    Message,
    ModelConfig,
    RunLimitBreach,
    RunStopReason,
    ToolCallContent,
    ToolResult,
    Usage,
)

__all__ = [
    "AgentDeniedEvent",
    "AgentEvent",
    "AgentFinishedEvent",
    "AgentResumedEvent",
    "AgentStartedEvent",
    "AgentSuspendedEvent",
    "ArtifactFailedEvent",
    "ArtifactFinishedEvent",
    "ArtifactRevisionStartedEvent",
    "ArtifactValidationFinishedEvent",
    "ArtifactValidationStartedEvent",
    "CompactionFinishedEvent",
    "CompactionStartedEvent",
    "EVENT_TYPES",
    "ErrorEvent",
    "EventSubscriberOverflowEvent",
    "GuardrailDecisionEvent",
    "MessageDeltaEvent",
    "MessageFinishedEvent",
    "MessageStartedEvent",
    "ProviderTurnFinishedEvent",
    "ProviderTurnMetadata",
    "ProviderTurnStartedEvent",
    "QueueUpdatedEvent",
    "RetryScheduledEvent",
    "RunLimitExceededEvent",
    "SteerRejectedEvent",
    "ToolExecutionBlockedEvent",
    "ToolExecutionErrorEvent",
    "ToolExecutionFinishedEvent",
    "ToolExecutionMetadata",
    "ToolExecutionProgressEvent",
    "ToolExecutionStartedEvent",
    "ToolExecutionStatus",
    "TurnFinishedEvent",
    "TurnStartedEvent",
    "event_from_dict",
]

# TODO: type `interruption` as `AgentRunInterruption` once durable runs (05-durable-runs) land.


@dataclass(frozen=True, slots=True)
class ProviderTurnMetadata(Serializable):
    """Identity of one provider attempt (EVT-3)."""

    provider_id: str
    """Provider id."""
    model: ModelConfig
    """Model called."""
    attempt: int
    """1-based attempt number within the turn (EVT-11)."""
    latency_ms: int | None = None
    """Attempt latency in ms; only on ``provider_turn_finished``."""
    http_status: int | None = None
    """HTTP status of a failed attempt, when the error code is an int in 100..599."""


ToolExecutionStatus: TypeAlias = Literal["finished", "error", "blocked"]
"""Terminal status of a tool call (EVT-3)."""


@dataclass(frozen=True, slots=True)
class ToolExecutionMetadata(Serializable):
    """Timing and outcome of one tool call (EVT-3)."""

    duration_ms: int
    """Execution time in ms (0 for calls blocked before execution)."""
    status: ToolExecutionStatus
    """Terminal status."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentStartedEvent(Serializable):
    """First event of a run leg (EVT-6)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    type: Literal["agent_started"] = field(default="agent_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentResumedEvent(Serializable):
    """A resumed leg started; immediately follows ``agent_started`` (EVT-6)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    version: int
    """Run-state version the leg resumed from."""
    type: Literal["agent_resumed"] = field(default="agent_resumed", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentFinishedEvent(Serializable):
    """Terminal event of a succeeded leg (EVT-7)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    usage: Usage | None = None
    """Aggregated usage of the leg."""
    finish_reason: RunStopReason | None = None
    """Why the run stopped early, if it did."""
    stop_detail: str | None = None
    """Detail of a turn-policy stop."""
    type: Literal["agent_finished"] = field(default="agent_finished", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSuspendedEvent(Serializable):
    """Terminal event of a suspended leg (EVT-7, RUN-19)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    interruption: Any
    """The ``AgentRunInterruption`` (05-durable-runs)."""
    version: int
    """Run-state version written."""
    type: Literal["agent_suspended"] = field(default="agent_suspended", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentDeniedEvent(Serializable):
    """Emitted alone by a ``deny`` resume (EVT-7, DUR-21)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    interruption: Any
    """The ``AgentRunInterruption`` (05-durable-runs)."""
    version: int
    """Run-state version written."""
    type: Literal["agent_denied"] = field(default="agent_denied", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStartedEvent(Serializable):
    """A loop turn began (EVT-9)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    turn: int
    """1-based turn index within the leg."""
    type: Literal["turn_started"] = field(default="turn_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnFinishedEvent(Serializable):
    """A loop turn ended (EVT-9)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    turn: int
    """1-based turn index within the leg."""
    type: Literal["turn_finished"] = field(default="turn_finished", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderTurnStartedEvent(Serializable):
    """A provider attempt began (EVT-10, EVT-11)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    turn: int
    """Turn index."""
    metadata: ProviderTurnMetadata
    """Provider, model and attempt."""
    type: Literal["provider_turn_started"] = field(default="provider_turn_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderTurnFinishedEvent(Serializable):
    """A provider attempt ended (EVT-10, EVT-11)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    turn: int
    """Turn index."""
    metadata: ProviderTurnMetadata
    """Provider, model, attempt, latency and HTTP status."""
    usage: Usage | None = None
    """Usage of the attempt."""
    error: ErrorInfo | None = None
    """Failure of the attempt, if any."""
    type: Literal["provider_turn_finished"] = field(default="provider_turn_finished", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageStartedEvent(Serializable):
    """An assistant draft opened (EVT-10); at most once per attempt."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    message: Message
    """The assistant message, empty content."""
    type: Literal["message_started"] = field(default="message_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageDeltaEvent(Serializable):
    """One stream fragment of the draft (EVT-10)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    content: ContentBlock
    """The fragment; may be a ``ToolCallDeltaContent``."""
    type: Literal["message_delta"] = field(default="message_delta", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageFinishedEvent(Serializable):
    """The complete assistant draft, after it was stored (EVT-9)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    message: Message
    """The complete assistant message."""
    type: Literal["message_finished"] = field(default="message_finished", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionStartedEvent(Serializable):
    """A tool call started executing (EVT-12)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    call: ToolCallContent
    """The call."""
    type: Literal["tool_execution_started"] = field(default="tool_execution_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionProgressEvent(Serializable):
    """A tool reported progress (EVT-12, CON-20)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    tool_call_id: str
    """The call id."""
    name: str
    """Tool name."""
    progress: JsonValue
    """Progress value."""
    metadata: Mapping[str, Any] | None = None
    """Progress metadata."""
    type: Literal["tool_execution_progress"] = field(default="tool_execution_progress", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionFinishedEvent(Serializable):
    """A tool call finished (EVT-12)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    result: ToolResult
    """The result."""
    metadata: ToolExecutionMetadata
    """Duration and status."""
    type: Literal["tool_execution_finished"] = field(default="tool_execution_finished", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionErrorEvent(Serializable):
    """A tool call raised or returned an error (EVT-12)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    call: ToolCallContent
    """The call."""
    error: ErrorInfo
    """The failure."""
    metadata: ToolExecutionMetadata
    """Duration and status."""
    type: Literal["tool_execution_error"] = field(default="tool_execution_error", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionBlockedEvent(Serializable):
    """A tool call was blocked (EVT-12, TOOL-3/4)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    tool_call_id: str
    """The call id."""
    name: str
    """Tool name."""
    reason: str
    """Blocked reason, e.g. ``unknown_tool``."""
    error: ErrorInfo
    """The blocked error."""
    metadata: ToolExecutionMetadata
    """Duration and status."""
    type: Literal["tool_execution_blocked"] = field(default="tool_execution_blocked", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardrailDecisionEvent(Serializable):
    """A guardrail decided (GRD-3)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    record: GuardrailRecord
    """The bounded decision record."""
    tool_call_id: str | None = None
    """Tool call id for tool stages."""
    tool_name: str | None = None
    """Tool name for tool stages."""
    type: Literal["guardrail_decision"] = field(default="guardrail_decision", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLimitExceededEvent(Serializable):
    """The first limit breach of a run (LIM-7)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    breach: RunLimitBreach
    """The breach."""
    type: Literal["run_limit_exceeded"] = field(default="run_limit_exceeded", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueUpdatedEvent(Serializable):
    """The steer queue changed (EVT-16)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    size: int
    """Pending steer messages."""
    type: Literal["queue_updated"] = field(default="queue_updated", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class SteerRejectedEvent(Serializable):
    """A steered message was rejected by an input guardrail (EVT-16)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    message: Message
    """The rejected message (redacted)."""
    record: GuardrailRecord
    """The terminal record."""
    type: Literal["steer_rejected"] = field(default="steer_rejected", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class EventSubscriberOverflowEvent(Serializable):
    """A subscriber queue overflowed."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str | None = None
    """Run id, when the event belongs to a run."""
    dropped_events: int
    """Events dropped so far."""
    max_queued_events: int
    """Queue capacity."""
    overflow: Literal["close", "drop_oldest", "drop_newest"]
    """Overflow policy applied."""
    type: Literal["event_subscriber_overflow"] = field(default="event_subscriber_overflow", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionStartedEvent(Serializable):
    """Compaction began (EVT-8)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str | None = None
    """Run id, when the event belongs to a run."""
    type: Literal["compaction_started"] = field(default="compaction_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionFinishedEvent(Serializable):
    """Compaction ended (EVT-8)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str | None = None
    """Run id, when the event belongs to a run."""
    summary: str
    """The summary text."""
    type: Literal["compaction_finished"] = field(default="compaction_finished", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryScheduledEvent(Serializable):
    """A failed provider attempt will be retried (EVT-11, RETRY-2)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    attempt: int
    """The failed attempt (1-based)."""
    delay_ms: float
    """Delay before the next attempt, in ms."""
    error: ErrorInfo
    """The (redacted) failure."""
    type: Literal["retry_scheduled"] = field(default="retry_scheduled", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorEvent(Serializable):
    """Terminal event of a failed or aborted leg, or the busy rejection (EVT-17)."""

    session_id: str | None = None
    """Session id (``None`` when not applicable)."""
    run_id: str | None = None
    """Run id, when the event belongs to a run."""
    error: ErrorInfo
    """The (redacted) failure."""
    type: Literal["error"] = field(default="error", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactValidationStartedEvent(Serializable):
    """Validation of a candidate began (EVT-14)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    turn: int
    """Turn index."""
    attempt: int
    """1-based call-free candidate count (EVT-4)."""
    type: Literal["artifact_validation_started"] = field(default="artifact_validation_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactValidationFinishedEvent(Serializable):
    """Validation of a candidate ended (EVT-14)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    turn: int
    """Turn index."""
    attempt: int
    """1-based call-free candidate count (EVT-4)."""
    result: ArtifactValidation
    """The validation outcome."""
    type: Literal["artifact_validation_finished"] = field(default="artifact_validation_finished", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactRevisionStartedEvent(Serializable):
    """A revision turn follows a failed candidate (EVT-14)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    turn: int
    """Turn index."""
    attempt: int
    """1-based call-free candidate count (EVT-4)."""
    failure: ArtifactValidation
    """The failure being revised."""
    type: Literal["artifact_revision_started"] = field(default="artifact_revision_started", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactFinishedEvent(Serializable):
    """A candidate was accepted (EVT-14)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    turn: int
    """Turn index."""
    attempt: int
    """1-based call-free candidate count (EVT-4)."""
    result: ArtifactValidation
    """The accepting validation."""
    type: Literal["artifact_finished"] = field(default="artifact_finished", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactFailedEvent(Serializable):
    """The artifact loop failed terminally (EVT-14, EVT-18)."""

    session_id: str = ""
    """Session id (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id (stamped by the runtime when empty)."""
    turn: int
    """Turn index."""
    attempt: int
    """1-based call-free candidate count (EVT-4)."""
    result: ArtifactValidation
    """The failing validation; ``metadata['reason']`` is the error code."""
    type: Literal["artifact_failed"] = field(default="artifact_failed", init=False)


AgentEvent: TypeAlias = Union[  # noqa: UP007 - runtime union used by from_dict
    AgentStartedEvent,
    AgentResumedEvent,
    AgentFinishedEvent,
    AgentSuspendedEvent,
    AgentDeniedEvent,
    TurnStartedEvent,
    TurnFinishedEvent,
    ProviderTurnStartedEvent,
    ProviderTurnFinishedEvent,
    MessageStartedEvent,
    MessageDeltaEvent,
    MessageFinishedEvent,
    ToolExecutionStartedEvent,
    ToolExecutionProgressEvent,
    ToolExecutionFinishedEvent,
    ToolExecutionErrorEvent,
    ToolExecutionBlockedEvent,
    GuardrailDecisionEvent,
    RunLimitExceededEvent,
    QueueUpdatedEvent,
    SteerRejectedEvent,
    EventSubscriberOverflowEvent,
    CompactionStartedEvent,
    CompactionFinishedEvent,
    RetryScheduledEvent,
    ErrorEvent,
    ArtifactValidationStartedEvent,
    ArtifactValidationFinishedEvent,
    ArtifactRevisionStartedEvent,
    ArtifactFinishedEvent,
    ArtifactFailedEvent,
]
"""Union of every event class (EVT-1); it may grow, so subscribers must tolerate unknown types."""

EVENT_TYPES: Mapping[str, type[AgentEvent]] = MappingProxyType({
    "agent_started": AgentStartedEvent,
    "agent_resumed": AgentResumedEvent,
    "agent_finished": AgentFinishedEvent,
    "agent_suspended": AgentSuspendedEvent,
    "agent_denied": AgentDeniedEvent,
    "turn_started": TurnStartedEvent,
    "turn_finished": TurnFinishedEvent,
    "provider_turn_started": ProviderTurnStartedEvent,
    "provider_turn_finished": ProviderTurnFinishedEvent,
    "message_started": MessageStartedEvent,
    "message_delta": MessageDeltaEvent,
    "message_finished": MessageFinishedEvent,
    "tool_execution_started": ToolExecutionStartedEvent,
    "tool_execution_progress": ToolExecutionProgressEvent,
    "tool_execution_finished": ToolExecutionFinishedEvent,
    "tool_execution_error": ToolExecutionErrorEvent,
    "tool_execution_blocked": ToolExecutionBlockedEvent,
    "guardrail_decision": GuardrailDecisionEvent,
    "run_limit_exceeded": RunLimitExceededEvent,
    "queue_updated": QueueUpdatedEvent,
    "steer_rejected": SteerRejectedEvent,
    "event_subscriber_overflow": EventSubscriberOverflowEvent,
    "compaction_started": CompactionStartedEvent,
    "compaction_finished": CompactionFinishedEvent,
    "retry_scheduled": RetryScheduledEvent,
    "error": ErrorEvent,
    "artifact_validation_started": ArtifactValidationStartedEvent,
    "artifact_validation_finished": ArtifactValidationFinishedEvent,
    "artifact_revision_started": ArtifactRevisionStartedEvent,
    "artifact_finished": ArtifactFinishedEvent,
    "artifact_failed": ArtifactFailedEvent,
})



def event_from_dict(data: Mapping[str, Any]) -> AgentEvent:
    """Rebuild an event from its ``to_dict()`` form (EVT-1).

    Raises:
        ValueError: ``data`` has an unknown or missing ``type``, or keys that are not fields.
    """
    kind = data.get("type") if isinstance(data, Mapping) else None
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown event type: {kind!r}")
    return cls.from_dict(data)
