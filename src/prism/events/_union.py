"""The union of every event class, the type-tag registry and ``event_from_dict``."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, TypeAlias, Union

from prism.events._artifacts import (
    ArtifactFailedEvent,
    ArtifactFinishedEvent,
    ArtifactRevisionStartedEvent,
    ArtifactValidationFinishedEvent,
    ArtifactValidationStartedEvent,
)
from prism.events._provider import (
    MessageDeltaEvent,
    MessageFinishedEvent,
    MessageStartedEvent,
    ProviderTurnFinishedEvent,
    ProviderTurnStartedEvent,
    RetryScheduledEvent,
)
from prism.events._run import (
    AgentDeniedEvent,
    AgentFinishedEvent,
    AgentResumedEvent,
    AgentStartedEvent,
    AgentSuspendedEvent,
    CompactionFinishedEvent,
    CompactionStartedEvent,
    ErrorEvent,
    EventSubscriberOverflowEvent,
    GuardrailDecisionEvent,
    QueueUpdatedEvent,
    RunLimitExceededEvent,
    SteerRejectedEvent,
    TurnFinishedEvent,
    TurnStartedEvent,
)
from prism.events._tools import (
    ToolExecutionBlockedEvent,
    ToolExecutionErrorEvent,
    ToolExecutionFinishedEvent,
    ToolExecutionProgressEvent,
    ToolExecutionStartedEvent,
)

__all__ = [
    "AgentEvent",
    "EVENT_TYPES",
    "event_from_dict",
]


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
"""Union of every event class; it may grow, so subscribers must tolerate unknown types."""


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
    """Rebuild an event from its ``to_dict()`` form.

    Raises:
        ValueError: ``data`` has an unknown or missing ``type``, or keys that are not fields.
    """
    kind = data.get("type") if isinstance(data, Mapping) else None
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown event type: {kind!r}")
    return cls.from_dict(data)
