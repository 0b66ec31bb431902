"""Agent events: one frozen, keyword-only dataclass per event type.

Every event has ``session_id``/``run_id`` (``""`` by default, or ``None`` where optional; the
runtime stamps empty ids), its own fields, and a ``type`` literal declared last that is not an
``__init__`` parameter. ``event.to_dict()`` is JSON-safe and includes ``"type"``;
[`event_from_dict()`][prism.events.event_from_dict] rebuilds the right class.

This package is a table of contents: the fields events open with (the ids, the turn) live in
``_base``, run lifecycle events in ``_run``, provider attempt and message events in
``_provider``, tool events in ``_tools``, artifact loop events in ``_artifacts``, and the
``AgentEvent`` union with its registry in ``_union``.
"""

from prism.events._artifacts import ArtifactFailedEvent as ArtifactFailedEvent
from prism.events._artifacts import ArtifactFinishedEvent as ArtifactFinishedEvent
from prism.events._artifacts import ArtifactRevisionStartedEvent as ArtifactRevisionStartedEvent
from prism.events._artifacts import (
    ArtifactValidationFinishedEvent as ArtifactValidationFinishedEvent,
)
from prism.events._artifacts import ArtifactValidationStartedEvent as ArtifactValidationStartedEvent
from prism.events._provider import MessageDeltaEvent as MessageDeltaEvent
from prism.events._provider import MessageFinishedEvent as MessageFinishedEvent
from prism.events._provider import MessageStartedEvent as MessageStartedEvent
from prism.events._provider import ProviderTurnFinishedEvent as ProviderTurnFinishedEvent
from prism.events._provider import ProviderTurnMetadata as ProviderTurnMetadata
from prism.events._provider import ProviderTurnStartedEvent as ProviderTurnStartedEvent
from prism.events._provider import RetryScheduledEvent as RetryScheduledEvent
from prism.events._run import AgentDeniedEvent as AgentDeniedEvent
from prism.events._run import AgentFinishedEvent as AgentFinishedEvent
from prism.events._run import AgentResumedEvent as AgentResumedEvent
from prism.events._run import AgentStartedEvent as AgentStartedEvent
from prism.events._run import AgentSuspendedEvent as AgentSuspendedEvent
from prism.events._run import CompactionFinishedEvent as CompactionFinishedEvent
from prism.events._run import CompactionStartedEvent as CompactionStartedEvent
from prism.events._run import ErrorEvent as ErrorEvent
from prism.events._run import EventSubscriberOverflowEvent as EventSubscriberOverflowEvent
from prism.events._run import GuardrailDecisionEvent as GuardrailDecisionEvent
from prism.events._run import QueueUpdatedEvent as QueueUpdatedEvent
from prism.events._run import RunLimitExceededEvent as RunLimitExceededEvent
from prism.events._run import SteerRejectedEvent as SteerRejectedEvent
from prism.events._run import TurnFinishedEvent as TurnFinishedEvent
from prism.events._run import TurnStartedEvent as TurnStartedEvent
from prism.events._tools import ToolExecutionBlockedEvent as ToolExecutionBlockedEvent
from prism.events._tools import ToolExecutionErrorEvent as ToolExecutionErrorEvent
from prism.events._tools import ToolExecutionFinishedEvent as ToolExecutionFinishedEvent
from prism.events._tools import ToolExecutionMetadata as ToolExecutionMetadata
from prism.events._tools import ToolExecutionProgressEvent as ToolExecutionProgressEvent
from prism.events._tools import ToolExecutionStartedEvent as ToolExecutionStartedEvent
from prism.events._tools import ToolExecutionStatus as ToolExecutionStatus
from prism.events._union import EVENT_TYPES as EVENT_TYPES
from prism.events._union import AgentEvent as AgentEvent
from prism.events._union import SubagentEvent as SubagentEvent
from prism.events._union import event_from_dict as event_from_dict

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
    "SubagentEvent",
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
