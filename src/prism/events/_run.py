"""Run lifecycle events: legs, turns, limits, guardrails, steering, subscribers, compaction
and the terminal error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from prism._fast_init import fast_init
from prism._serde import Serializable
from prism.events._base import RunEventFields, SessionEventFields, TurnEventFields
from prism.types import (
    ErrorInfo,
    GuardrailRecord,
    Message,
    ProviderStopReason,
    RunLimitBreach,
    RunStopReason,
    Usage,
)

__all__ = [
    "AgentDeniedEvent",
    "AgentFinishedEvent",
    "AgentResumedEvent",
    "AgentStartedEvent",
    "AgentSuspendedEvent",
    "CompactionFinishedEvent",
    "CompactionStartedEvent",
    "ErrorEvent",
    "EventSubscriberOverflowEvent",
    "GuardrailDecisionEvent",
    "QueueUpdatedEvent",
    "RunLimitExceededEvent",
    "SteerRejectedEvent",
    "TurnFinishedEvent",
    "TurnStartedEvent",
]


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AgentStartedEvent(RunEventFields):
    """First event of a run leg."""

    type: Literal["agent_started"] = field(default="agent_started", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AgentResumedEvent(RunEventFields):
    """A resumed leg started; immediately follows ``agent_started``."""

    version: int
    """Run-state version the leg resumed from."""
    type: Literal["agent_resumed"] = field(default="agent_resumed", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AgentFinishedEvent(RunEventFields):
    """Terminal event of a succeeded leg."""

    usage: Usage | None = None
    """Aggregated usage of the leg."""
    finish_reason: RunStopReason | None = None
    """Why the run stopped early, if it did."""
    stop_detail: str | None = None
    """Detail of a turn-policy stop."""
    provider_stop_reason: ProviderStopReason | None = None
    """Why the leg's last provider turn stopped (``RunResult.provider_stop_reason``)."""
    type: Literal["agent_finished"] = field(default="agent_finished", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSuspendedEvent(RunEventFields):
    """Terminal event of a suspended leg."""

    interruption: Any
    """The runtime's ``AgentRunInterruption`` (typed ``Any`` because events sit below the
    runtime that defines it)."""
    version: int
    """Run-state version written."""
    type: Literal["agent_suspended"] = field(default="agent_suspended", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AgentDeniedEvent(RunEventFields):
    """Emitted alone by a ``deny`` resume."""

    interruption: Any
    """The runtime's ``AgentRunInterruption`` (typed ``Any`` because events sit below the
    runtime that defines it)."""
    version: int
    """Run-state version written."""
    type: Literal["agent_denied"] = field(default="agent_denied", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStartedEvent(TurnEventFields):
    """A loop turn began: its boundary passed (the approval suspension, the turn policy,
    ``max_turns``), so a provider request follows. A turn stopped or suspended at its boundary
    emits none; every ``turn_started`` is closed by the ``turn_finished`` of the same ``turn``,
    unless the leg fails or is aborted in between (its ``error`` event ends the leg)."""

    type: Literal["turn_started"] = field(default="turn_started", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class TurnFinishedEvent(TurnEventFields):
    """A loop turn ended (closes the ``turn_started`` of the same ``turn``)."""

    type: Literal["turn_finished"] = field(default="turn_finished", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorEvent(Serializable):
    """Terminal event of a failed or aborted leg, or the busy rejection."""

    session_id: str | None = None
    """Session id (``None`` when not applicable)."""
    run_id: str | None = None
    """Run id, when the event belongs to a run."""
    error: ErrorInfo
    """The (redacted) failure."""
    type: Literal["error"] = field(default="error", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class RunLimitExceededEvent(RunEventFields):
    """The first limit breach of a run."""

    breach: RunLimitBreach
    """The breach."""
    type: Literal["run_limit_exceeded"] = field(default="run_limit_exceeded", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class GuardrailDecisionEvent(RunEventFields):
    """A guardrail decided."""

    record: GuardrailRecord
    """The bounded decision record."""
    tool_call_id: str | None = None
    """Tool call id for tool stages."""
    tool_name: str | None = None
    """Tool name for tool stages."""
    type: Literal["guardrail_decision"] = field(default="guardrail_decision", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class QueueUpdatedEvent(RunEventFields):
    """The steer queue changed."""

    size: int
    """Pending steer messages."""
    type: Literal["queue_updated"] = field(default="queue_updated", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class SteerRejectedEvent(RunEventFields):
    """A steered message was rejected by an input guardrail."""

    message: Message
    """The rejected message (redacted)."""
    record: GuardrailRecord
    """The terminal record."""
    type: Literal["steer_rejected"] = field(default="steer_rejected", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class EventSubscriberOverflowEvent(SessionEventFields):
    """A subscriber queue overflowed."""

    dropped_events: int
    """Events dropped so far."""
    max_queued_events: int
    """Queue capacity."""
    overflow: Literal["close", "drop_oldest", "drop_newest"]
    """Overflow policy applied."""
    type: Literal["event_subscriber_overflow"] = field(
        default="event_subscriber_overflow", init=False
    )


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionStartedEvent(SessionEventFields):
    """Compaction began."""

    type: Literal["compaction_started"] = field(default="compaction_started", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionFinishedEvent(SessionEventFields):
    """Compaction ended."""

    summary: str
    """The summary text."""
    type: Literal["compaction_finished"] = field(default="compaction_finished", init=False)
