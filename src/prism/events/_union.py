"""The union of every event class, the type-tag registry and ``event_from_dict``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias, Union

from prism._serde import Serializable
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
    "SubagentEvent",
    "event_from_dict",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentEvent(Serializable):
    """An event of a child agent run, delivered to the observers of the run that started it.

    A run that calls an agent tool (``agent.as_tool``) emits every event of the child run
    wrapped in one of these, in the child's order (the events of parallel children interleave).
    ``session_id``/``run_id`` are the calling run's; the child's ids are in
    ``child_session_id``/``child_run_id`` and in ``event`` itself. A child of a child arrives
    wrapped twice. The wrapped event has passed the child's redactor, which includes every
    secret of the calling run.
    """

    session_id: str = ""
    """Session id of the calling run (stamped by the runtime when empty)."""
    run_id: str = ""
    """Run id of the calling run (stamped by the runtime when empty)."""
    tool_call_id: str
    """The calling run's tool call that runs the child."""
    agent: str | None = None
    """The child agent's name."""
    child_session_id: str
    """The child's session id."""
    child_run_id: str
    """The child's run id."""
    event: AgentEvent
    """The child's event."""
    type: Literal["subagent_event"] = field(default="subagent_event", init=False)


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
    SubagentEvent,
]
"""Union of every event class; it may grow, so subscribers must tolerate unknown types."""


EVENT_TYPES: Mapping[str, type[AgentEvent]] = MappingProxyType(
    {
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
        "subagent_event": SubagentEvent,
    }
)
"""Each event's ``type`` string mapped to its event class (read-only); ``event_from_dict`` reads it."""


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
