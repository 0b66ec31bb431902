"""Transcript messages, their builders and run input normalisation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, Union

from prism._fast_init import fast_init
from prism._json import JsonValue
from prism._serde import Serializable
from prism.types._content import ContentBlock, TextContent, ToolResultContent, _text_of
from prism.types._tools import ToolResult

__all__ = [
    "AgentInput",
    "Message",
    "MessageRole",
    "assistant_message",
    "message_text",
    "system_message",
    "to_messages",
    "tool_result_message",
    "user_message",
]

MessageRole: TypeAlias = Literal["system", "user", "assistant", "tool"]
"""Who wrote a message: the system prompt, the user, the assistant (the model) or a tool result."""
_ROLES = frozenset(("system", "user", "assistant", "tool"))


@fast_init
@dataclass(frozen=True, slots=True)
class Message(Serializable):
    """One transcript message.

    A ``str`` content becomes ``(TextContent(text),)``; a list becomes a tuple.

    Raises:
        ValueError: ``role`` is not ``system``/``user``/``assistant``/``tool``.
    """

    role: MessageRole
    """Author role."""
    content: tuple[ContentBlock, ...]
    """Content parts in order."""
    id: str | None = None
    """Message id; the runtime assigns one only to the repair messages of an artifact loop, and
    every other message keeps the id it was given (``None`` included)."""
    metadata: Mapping[str, JsonValue] | None = None
    """Host metadata (kept as given)."""

    if TYPE_CHECKING:

        def __init__(
            self,
            role: MessageRole,
            content: str | Sequence[ContentBlock],
            id: str | None = None,
            metadata: Mapping[str, JsonValue] | None = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ValueError(f"invalid message role: {self.role!r}")
        content: Any = self.content
        if isinstance(content, str):
            object.__setattr__(self, "content", (TextContent(content),))
        elif not isinstance(content, tuple):
            object.__setattr__(self, "content", tuple(content))

    @property
    def text(self) -> str:
        """Concatenated text of the ``TextContent`` parts."""
        return _text_of(self.content)


def user_message(
    text: str, *, id: str | None = None, metadata: Mapping[str, JsonValue] | None = None
) -> Message:
    """Build a user message with one ``TextContent``."""
    return Message("user", (TextContent(text),), id=id, metadata=metadata)


def system_message(
    text: str, *, id: str | None = None, metadata: Mapping[str, JsonValue] | None = None
) -> Message:
    """Build a system message with one ``TextContent``."""
    return Message("system", (TextContent(text),), id=id, metadata=metadata)


def assistant_message(
    text: str, *, id: str | None = None, metadata: Mapping[str, JsonValue] | None = None
) -> Message:
    """Build an assistant message with one ``TextContent``."""
    return Message("assistant", (TextContent(text),), id=id, metadata=metadata)


AgentInput: TypeAlias = Union[str, Message, Sequence[Message]]  # noqa: UP007
"""Run input: text, one message or a sequence of messages."""


def to_messages(input: AgentInput) -> list[Message]:
    """Normalise an ``AgentInput`` to a new list of messages.

    Raises:
        TypeError: ``input`` is not a ``str``, ``Message`` or a sequence of ``Message``.
    """
    if isinstance(input, str):
        return [Message("user", (TextContent(input),))]
    if isinstance(input, Message):
        return [input]
    if isinstance(input, Sequence) and not isinstance(input, (bytes, bytearray)):
        out: list[Message] = []
        for item in input:
            if not isinstance(item, Message):
                raise TypeError(f"agent input sequence holds {type(item).__name__}, not Message")
            out.append(item)
        return out
    raise TypeError(f"unsupported agent input type: {type(input).__name__}")


def message_text(value: Message | Sequence[ContentBlock]) -> str:
    """Concatenate, without separator, the ``TextContent`` texts of a message or parts."""
    return _text_of(value.content if isinstance(value, Message) else value)


def tool_result_message(result: ToolResult) -> Message:
    """Build the tool-result message for ``result``.

    Returns:
        ``Message(role="tool", content=(ToolResultContent(...), *result.content),
        metadata=result.metadata)``.
    """
    head = ToolResultContent(result.tool_call_id, result.name, result.value, result.error)
    return Message("tool", (head, *result.content), metadata=result.metadata)
