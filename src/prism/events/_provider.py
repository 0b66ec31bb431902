"""Provider attempt and assistant message events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from prism._fast_init import fast_init
from prism._serde import Serializable
from prism.events._base import RunEventFields, TurnEventFields
from prism.types import ContentBlock, ErrorInfo, Message, ModelConfig, ProviderStopReason, Usage

__all__ = [
    "MessageDeltaEvent",
    "MessageFinishedEvent",
    "MessageStartedEvent",
    "ProviderTurnFinishedEvent",
    "ProviderTurnMetadata",
    "ProviderTurnStartedEvent",
    "RetryScheduledEvent",
]


@fast_init
@dataclass(frozen=True, slots=True)
class ProviderTurnMetadata(Serializable):
    """Identity of one provider attempt."""

    provider_id: str
    """Provider id."""
    model: ModelConfig
    """Model called."""
    attempt: int
    """1-based attempt number within the turn."""
    latency_ms: int | None = None
    """Attempt latency in ms; only on ``provider_turn_finished``."""
    http_status: int | None = None
    """HTTP status of a failed attempt, when the error code is an int in 100..599."""


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderTurnStartedEvent(TurnEventFields):
    """A provider attempt began."""

    metadata: ProviderTurnMetadata
    """Provider, model and attempt."""
    type: Literal["provider_turn_started"] = field(default="provider_turn_started", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderTurnFinishedEvent(TurnEventFields):
    """A provider attempt ended."""

    metadata: ProviderTurnMetadata
    """Provider, model, attempt, latency and HTTP status."""
    usage: Usage | None = None
    """Usage of the attempt."""
    error: ErrorInfo | None = None
    """Failure of the attempt, if any."""
    stop_reason: ProviderStopReason | None = None
    """Why the provider stopped, when the attempt succeeded and the provider said."""
    response_model: str | None = None
    """The model that generated the response as the provider named it (e.g. a dated snapshot of
    ``metadata.model.model``), when the attempt succeeded and the provider said."""
    type: Literal["provider_turn_finished"] = field(default="provider_turn_finished", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class RetryScheduledEvent(RunEventFields):
    """A failed provider attempt will be retried."""

    attempt: int
    """The failed attempt (1-based)."""
    delay_ms: float
    """Delay before the next attempt, in ms."""
    error: ErrorInfo
    """The (redacted) failure."""
    type: Literal["retry_scheduled"] = field(default="retry_scheduled", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class MessageStartedEvent(RunEventFields):
    """An assistant draft opened; at most once per attempt, and once per turn.

    Held until the attempt's first content, thinking or tool-call delta (or the end of a message
    without one): an attempt whose stream opened and failed before that emits none, so when it is
    retried or a fallback provider takes the turn over, subscribers see the one start of the
    message that comes. ``message.id`` is the id of the provider's message start.
    """

    message: Message
    """The assistant message, empty content."""
    type: Literal["message_started"] = field(default="message_started", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class MessageDeltaEvent(RunEventFields):
    """One stream fragment of the draft."""

    content: ContentBlock
    """The fragment; may be a ``ToolCallDeltaContent``."""
    type: Literal["message_delta"] = field(default="message_delta", init=False)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class MessageFinishedEvent(RunEventFields):
    """The complete assistant draft, after it was stored."""

    message: Message
    """The complete assistant message."""
    type: Literal["message_finished"] = field(default="message_finished", init=False)
