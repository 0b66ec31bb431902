"""What a provider streams back: the seven stream events, and the result of one attempt."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, Union

from prism._failure_records import ErrorInfo
from prism._fast_init import fast_init
from prism._serde import Serializable
from prism.types._content import (
    ContentBlock,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolCallDeltaFields,
    _text_of,
)
from prism.types._usage import Usage

__all__ = [
    "ProviderContentDelta",
    "ProviderDone",
    "ProviderErrorEvent",
    "ProviderEvent",
    "ProviderMessageStart",
    "ProviderStopReason",
    "ProviderToolCall",
    "ProviderToolCallDelta",
    "ProviderTurnResult",
    "ProviderUsage",
    "provider_event_from_dict",
]

ProviderStopReason: TypeAlias = Literal[
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop_sequence",
    "content_filter",
    "refusal",
    "pause_turn",
    "other",
]
"""Why the provider stopped."""


@fast_init
@dataclass(frozen=True, slots=True)
class ProviderMessageStart(Serializable):
    """The provider opened an assistant message."""

    message_id: str | None = None
    """Provider message id."""
    type: Literal["message_start"] = field(default="message_start", init=False)


@fast_init
@dataclass(frozen=True, slots=True)
class ProviderContentDelta(Serializable):
    """A text, thinking or image fragment."""

    content: TextContent | ThinkingContent | ImageContent
    """The fragment."""
    type: Literal["content_delta"] = field(default="content_delta", init=False)


@fast_init
@dataclass(frozen=True, slots=True)
class ProviderToolCallDelta(ToolCallDeltaFields):
    """A tool-call fragment; reconstructed into ``ProviderToolCall``."""

    type: Literal["tool_call_delta"] = field(default="tool_call_delta", init=False)


@fast_init
@dataclass(frozen=True, slots=True)
class ProviderToolCall(Serializable):
    """A completed tool call."""

    call: ToolCallContent
    """The call."""
    type: Literal["tool_call"] = field(default="tool_call", init=False)


@fast_init
@dataclass(frozen=True, slots=True)
class ProviderUsage(Serializable):
    """A usage report."""

    usage: Usage
    """Usage so far for this attempt."""
    type: Literal["usage"] = field(default="usage", init=False)


@fast_init
@dataclass(frozen=True, slots=True)
class ProviderDone(Serializable):
    """End of a successful stream."""

    usage: Usage | None = None
    """Final usage; wins over earlier ``usage`` events."""
    stop_reason: ProviderStopReason | None = None
    """Why the provider stopped."""
    model: str | None = None
    """The model that generated the response as the provider names it (e.g. the dated snapshot
    ``"gpt-4o-mini-2024-07-18"`` of a requested ``"gpt-4o-mini"``), when the provider said;
    ``None`` otherwise."""
    type: Literal["done"] = field(default="done", init=False)


@fast_init
@dataclass(frozen=True, slots=True)
class ProviderErrorEvent(Serializable):
    """A failed stream."""

    error: ErrorInfo
    """The failure; ``code`` drives retry."""
    type: Literal["error"] = field(default="error", init=False)


ProviderEvent: TypeAlias = Union[  # noqa: UP007
    ProviderMessageStart,
    ProviderContentDelta,
    ProviderToolCallDelta,
    ProviderToolCall,
    ProviderUsage,
    ProviderDone,
    ProviderErrorEvent,
]
"""Union of the seven provider stream events."""

_PROVIDER_EVENT_TYPES: Mapping[str, type[Serializable]] = MappingProxyType(
    {
        "message_start": ProviderMessageStart,
        "content_delta": ProviderContentDelta,
        "tool_call_delta": ProviderToolCallDelta,
        "tool_call": ProviderToolCall,
        "usage": ProviderUsage,
        "done": ProviderDone,
        "error": ProviderErrorEvent,
    }
)


def provider_event_from_dict(data: Mapping[str, Any]) -> ProviderEvent:
    """Rebuild a provider event from its ``to_dict()`` form.

    Raises:
        ValueError: unknown or missing ``type``, or unknown keys.
    """
    kind = data.get("type") if isinstance(data, Mapping) else None
    cls = _PROVIDER_EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown provider event type: {kind!r}")
    return cls.from_dict(data)  # type: ignore[return-value]


@fast_init
@dataclass(frozen=True, slots=True)
class ProviderTurnResult(Serializable):
    """The outcome of one provider attempt."""

    content: tuple[ContentBlock, ...] = ()
    """Assistant content in stream order; coalesced text/thinking; never tool-call deltas."""
    calls: tuple[ToolCallContent, ...] = ()
    """Every ``ToolCallContent`` of ``content``, in order (host and provider-hosted)."""
    message_id: str | None = None
    """Provider message id."""
    started: bool = False
    """True once a message start, content or tool call arrived; else nothing is appended."""
    usage: Usage | None = None
    """Last usage reported for this attempt."""
    stop_reason: ProviderStopReason | None = None
    """Why the provider stopped."""

    if TYPE_CHECKING:

        def __init__(
            self,
            content: Sequence[ContentBlock] = (),
            calls: Sequence[ToolCallContent] = (),
            message_id: str | None = None,
            started: bool = False,
            usage: Usage | None = None,
            stop_reason: ProviderStopReason | None = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        if not isinstance(self.content, tuple):
            object.__setattr__(self, "content", tuple(self.content))
        if not isinstance(self.calls, tuple):
            object.__setattr__(self, "calls", tuple(self.calls))

    @property
    def text(self) -> str:
        """Text of the ``TextContent`` parts."""
        return _text_of(self.content)
