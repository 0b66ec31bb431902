"""Content parts of messages: text, thinking, images, tool calls and tool results.

Each part is a frozen dataclass with a ``type`` tag, so decoding a ``ContentBlock`` field picks
the right class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, Union

from prism._failure_records import ErrorInfo
from prism._fast_init import fast_init
from prism._json import JsonValue
from prism._serde import Serializable

__all__ = [
    "ContentBlock",
    "ImageContent",
    "TextContent",
    "ThinkingContent",
    "ToolAuthority",
    "ToolCallContent",
    "ToolCallDeltaContent",
    "ToolCallDeltaFields",
    "ToolResultContent",
]

ToolAuthority: TypeAlias = Literal["host", "provider-hosted"]
"""Who executes a tool call; ``None`` on a call means ``"host"``."""


@fast_init
@dataclass(frozen=True, slots=True)
class TextContent(Serializable):
    """Plain text part."""

    text: str
    """The text."""
    type: Literal["text"] = field(default="text", init=False)


@fast_init
@dataclass(frozen=True, slots=True)
class ThinkingContent(Serializable):
    """Reasoning part. ``redacted_data`` holds an opaque block sent back unchanged."""

    text: str
    """Readable thinking text (``""`` when ``redacted_data`` is set)."""
    signature: str | None = None
    """Provider signature closing a thinking block."""
    redacted_data: str | None = None
    """Opaque encrypted reasoning (Anthropic ``redacted_thinking``), stored as received."""
    type: Literal["thinking"] = field(default="thinking", init=False)


@fast_init
@dataclass(frozen=True, slots=True)
class ImageContent(Serializable):
    """Image part; at least one of ``data``/``url``.

    Raises:
        ValueError: neither ``data`` nor ``url`` is given.
    """

    mime_type: str | None = None
    """MIME type, e.g. ``"image/png"``."""
    data: str | None = None
    """Base64-encoded bytes."""
    url: str | None = None
    """Image URL."""
    type: Literal["image"] = field(default="image", init=False)

    def __post_init__(self) -> None:
        if self.data is None and self.url is None:
            raise ValueError("ImageContent needs data or url")


@fast_init
@dataclass(frozen=True, slots=True)
class ToolCallDeltaFields(Serializable):
    """The fields of a streamed tool-call fragment, as a provider streams it
    ([`ProviderToolCallDelta`][prism.types.ProviderToolCallDelta]) and as a ``message_delta`` event carries it
    ([`ToolCallDeltaContent`][prism.types._content.ToolCallDeltaContent])."""

    index: int
    """Position of the call within the response."""
    id: str | None = None
    """Call id, once known."""
    name: str | None = None
    """Tool name, once known."""
    arguments_text: str | None = None
    """Raw JSON argument text fragment."""
    authority: ToolAuthority | None = None
    """``"provider-hosted"`` for server-executed calls."""


@fast_init
@dataclass(frozen=True, slots=True)
class ToolCallDeltaContent(ToolCallDeltaFields):
    """Streamed tool-call fragment; only in live ``message_delta`` events, never stored."""

    type: Literal["tool_call_delta"] = field(default="tool_call_delta", init=False)


@fast_init
@dataclass(frozen=True, slots=True)
class ToolCallContent(Serializable):
    """A complete tool call."""

    id: str
    """Call id; pairs with ``ToolResultContent.tool_call_id``."""
    name: str
    """Tool name."""
    arguments: dict[str, JsonValue]
    """Parsed argument object."""
    arguments_error: ErrorInfo | None = None
    """Why the streamed arguments could not be parsed (e.g. ``invalid_json_arguments``)."""
    authority: ToolAuthority | None = None
    """``"provider-hosted"``: already executed server-side; never dispatched nor answered."""
    type: Literal["tool_call"] = field(default="tool_call", init=False)


@fast_init
@dataclass(frozen=True, slots=True)
class ToolResultContent(Serializable):
    """The answer to a tool call."""

    tool_call_id: str
    """Id of the answered call."""
    name: str
    """Tool name."""
    result: JsonValue | None = None
    """JSON result value."""
    error: ErrorInfo | None = None
    """Set for error results."""
    type: Literal["tool_result"] = field(default="tool_result", init=False)


ContentBlock: TypeAlias = Union[  # noqa: UP007 - runtime union used by from_dict
    TextContent,
    ThinkingContent,
    ImageContent,
    ToolCallDeltaContent,
    ToolCallContent,
    ToolResultContent,
]
"""Union of the six content parts, discriminated by ``type``."""


def _text_of(content: Sequence[ContentBlock]) -> str:
    return "".join(p.text for p in content if isinstance(p, TextContent))
