"""One provider call: the request and the context blocks it carries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prism._fast_init import fast_init
from prism._serde import Serializable
from prism.abort import AbortSignal
from prism.types._content import ContentBlock, TextContent, ThinkingContent
from prism.types._messages import Message
from prism.types._models import ModelConfig, ProviderRequestOptions
from prism.types._tools import ToolDefinition

__all__ = [
    "ContextBlock",
    "ProviderRequest",
]


@fast_init
@dataclass(frozen=True, slots=True)
class ContextBlock(Serializable):
    """Extra context given to a request."""

    content: str | tuple[ContentBlock, ...]
    """Text, or content parts."""
    title: str | None = None
    """Optional heading."""
    id: str | None = None
    """Optional id."""
    metadata: Mapping[str, Any] | None = None
    """Host metadata."""

    if TYPE_CHECKING:

        def __init__(
            self,
            content: str | Sequence[ContentBlock],
            title: str | None = None,
            id: str | None = None,
            metadata: Mapping[str, Any] | None = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        if not isinstance(self.content, (str, tuple)):
            object.__setattr__(self, "content", tuple(self.content))

    @property
    def text(self) -> str:
        """``content`` itself, or the text of its text/thinking parts joined by ``""``."""
        if isinstance(self.content, str):
            return self.content
        return "".join(
            p.text for p in self.content if isinstance(p, (TextContent, ThinkingContent))
        )


@fast_init
@dataclass(frozen=True, slots=True)
class ProviderRequest(Serializable):
    """One provider call. Derive modified requests with ``dataclasses.replace``.

    ``to_dict()`` leaves out ``signal`` and each tool's ``execute``.
    """

    model: ModelConfig
    """Model to call."""
    messages: tuple[Message, ...]
    """Conversation sent to the provider."""
    tools: tuple[ToolDefinition, ...] | None = None
    """Tools offered to the model; ``None`` means none."""
    context: tuple[ContextBlock, ...] = ()
    """Context blocks."""
    options: ProviderRequestOptions | None = None
    """Effective provider options."""
    metadata: Mapping[str, Any] | None = None
    """Run metadata."""
    signal: AbortSignal | None = field(default=None, metadata={"serialize": False})
    """The run's abort signal."""

    if TYPE_CHECKING:

        def __init__(
            self,
            model: ModelConfig,
            messages: Sequence[Message],
            tools: Sequence[ToolDefinition] | None = None,
            context: Sequence[ContextBlock] = (),
            options: ProviderRequestOptions | None = None,
            metadata: Mapping[str, Any] | None = None,
            signal: AbortSignal | None = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        if not isinstance(self.messages, tuple):
            object.__setattr__(self, "messages", tuple(self.messages))
        if self.tools is not None and not isinstance(self.tools, tuple):
            object.__setattr__(self, "tools", tuple(self.tools))
        if not isinstance(self.context, tuple):
            object.__setattr__(self, "context", tuple(self.context))
