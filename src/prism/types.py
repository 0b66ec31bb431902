"""Core data contracts: JSON values, errors as data, content, messages, usage, models,
provider requests and stream events, tools, results (01-contracts.md, CON-1..21, CON-30, CON-34/35).

Every type here is a frozen, slotted dataclass with ``to_dict()``/``from_dict()`` (CON-3). Sequences
inside values are tuples (a list given to a constructor is converted); mappings are kept as given.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, TypeVar, Union

from prism._serde import Serializable
from prism.abort import AbortSignal
from prism.errors import PrismConfigError

if TYPE_CHECKING:
    from typing import Self

__all__ = [
    "AgentInput",
    "AgentRunRef",
    "ContentBlock",
    "ContextBlock",
    "ErrorInfo",
    "GuardrailAction",
    "GuardrailRecord",
    "GuardrailStage",
    "ImageContent",
    "JsonValue",
    "Message",
    "MessageRole",
    "ModelCapabilities",
    "ModelConfig",
    "ModelLimits",
    "OwnershipScope",
    "ProgressCallback",
    "ProviderContentDelta",
    "ProviderDone",
    "ProviderErrorEvent",
    "ProviderEvent",
    "ProviderMessageStart",
    "ProviderRequest",
    "ProviderRequestOptions",
    "ProviderStopReason",
    "ProviderToolCall",
    "ProviderToolCallDelta",
    "ProviderTurnResult",
    "ProviderUsage",
    "RunLimitBreach",
    "RunResult",
    "RunStatus",
    "RunStopReason",
    "StructuredOutputOptions",
    "TextContent",
    "ThinkingContent",
    "ToolAuthority",
    "ToolCallContent",
    "ToolCallDeltaContent",
    "ToolDefinition",
    "ToolExecutionContext",
    "ToolResult",
    "ToolResultContent",
    "Usage",
    "assistant_message",
    "canonical_json",
    "is_json_value",
    "merge_provider_options",
    "message_text",
    "provider_event_from_dict",
    "system_message",
    "to_messages",
    "tool_result_message",
    "user_message",
]

_T = TypeVar("_T")

# =========================================================================== JSON (CON-1, CON-2)

JsonValue: TypeAlias = Union[  # noqa: UP007 - recursive alias needs the Union form at runtime
    None, bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"]
]
"""``None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]`` (CON-1)."""

_JSON_MAX_DEPTH = 32


def is_json_value(value: object, *, max_depth: int = _JSON_MAX_DEPTH) -> bool:
    """Return whether ``value`` is JSON-compatible (CON-1, CON-2); never raises.

    JSON-compatible means: built only from ``None``, ``bool``, ``int``, finite ``float``, ``str``,
    ``list``/``tuple`` and ``dict`` with ``str`` keys, nested at most ``max_depth`` containers deep
    (a scalar at the top is depth 0; each container adds 1).
    """
    try:
        return _is_json(value, max_depth)
    except RecursionError:  # pragma: no cover - bounded by max_depth in practice
        return False


def _is_json(value: object, budget: int) -> bool:
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        if budget <= 0:
            return False
        return all(_is_json(item, budget - 1) for item in value)
    if isinstance(value, dict):
        if budget <= 0:
            return False
        for key, item in value.items():
            if not isinstance(key, str) or not _is_json(item, budget - 1):
                return False
        return True
    return False


def canonical_json(value: Any) -> str:
    """Serialise ``value`` canonically for fingerprints and argument hashes (CON-2).

    Returns:
        ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
        allow_nan=False)``.

    Raises:
        TypeError: ``value`` holds a non-JSON type.
        ValueError: ``value`` holds ``NaN``/``inf`` or is circular.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def _snake(name: str) -> str:
    out = []
    for ch in name:
        if ch.isupper():
            out.append("_")
            out.append(ch.lower())
        else:
            out.append(ch)
    return "".join(out)


def _unknown_keys_message(cls: type, keys: Sequence[str]) -> str:
    names = {f.name for f in fields(cls)}
    parts = []
    for key in sorted(str(k) for k in keys):
        snake = _snake(key)
        parts.append(f"{key} (use {snake})" if snake != key and snake in names else key)
    return f"{cls.__name__}: unknown keys: {', '.join(parts)}"


class _Options(Serializable):
    """Options objects: unknown keys raise ``PrismConfigError`` (ARCH-9) and mappings coerce."""

    __slots__ = ()

    @classmethod
    def _unknown_keys_error(cls, keys: Sequence[str]) -> Exception:
        return PrismConfigError(_unknown_keys_message(cls, keys))

    @classmethod
    def coerce(cls, value: Self | Mapping[str, Any]) -> Self:
        """Return ``value`` itself, or the instance built from a snake_case mapping (ARCH-9).

        Raises:
            PrismConfigError: ``value`` is neither, has unknown keys, or has invalid values.
        """
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise PrismConfigError(
                f"{cls.__name__} expects a {cls.__name__} or a mapping, got {type(value).__name__}"
            )
        try:
            return cls.from_dict(value)
        except PrismConfigError:
            raise
        except (TypeError, ValueError) as exc:
            raise PrismConfigError(f"{cls.__name__}: {exc}") from exc


# =========================================================================== errors as data (CON-4)


@dataclass(frozen=True, slots=True)
class ErrorInfo(Serializable):
    """Serialisable description of a failure (CON-4); built by ``error_to_error_info``."""

    message: str
    """Human-readable message (redacted where a redactor is active)."""
    name: str | None = None
    """Exception class name, e.g. ``"TimeoutError"``."""
    code: str | int | None = None
    """Machine code: ``ERR_PRISM_*``, a transport code or an HTTP status int."""
    retry_after_ms: float | None = None
    """Server retry hint in milliseconds (finite, >= 0)."""
    cause: str | None = None
    """``str(exc.__cause__)`` (redacted) when the exception had a cause."""


# =========================================================================== content (CON-5, CON-6)

ToolAuthority: TypeAlias = Literal["host", "provider-hosted"]
"""Who executes a tool call; ``None`` on a call means ``"host"`` (CON-6)."""


@dataclass(frozen=True, slots=True)
class TextContent(Serializable):
    """Plain text part (CON-5)."""

    text: str
    """The text."""
    type: Literal["text"] = field(default="text", init=False)


@dataclass(frozen=True, slots=True)
class ThinkingContent(Serializable):
    """Reasoning part (CON-5). ``redacted_data`` holds an opaque block sent back unchanged."""

    text: str
    """Readable thinking text (``""`` when ``redacted_data`` is set)."""
    signature: str | None = None
    """Provider signature closing a thinking block."""
    redacted_data: str | None = None
    """Opaque encrypted reasoning (Anthropic ``redacted_thinking``), stored as received."""
    type: Literal["thinking"] = field(default="thinking", init=False)


@dataclass(frozen=True, slots=True)
class ImageContent(Serializable):
    """Image part (CON-5); at least one of ``data``/``url``.

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


@dataclass(frozen=True, slots=True)
class ToolCallDeltaContent(Serializable):
    """Streamed tool-call fragment; only in live ``message_delta`` events, never stored (CON-5)."""

    index: int
    """Position of the call within the response."""
    id: str | None = None
    """Call id, once known."""
    name: str | None = None
    """Tool name, once known."""
    arguments_text: str | None = None
    """Raw JSON argument text fragment."""
    authority: ToolAuthority | None = None
    """``"provider-hosted"`` for server-executed calls (CON-6)."""
    type: Literal["tool_call_delta"] = field(default="tool_call_delta", init=False)


@dataclass(frozen=True, slots=True)
class ToolCallContent(Serializable):
    """A complete tool call (CON-5, CON-6)."""

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


@dataclass(frozen=True, slots=True)
class ToolResultContent(Serializable):
    """The answer to a tool call (CON-5, CON-8)."""

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
"""Union of the six content parts, discriminated by ``type`` (CON-5)."""


def _text_of(content: Sequence[ContentBlock]) -> str:
    return "".join(p.text for p in content if isinstance(p, TextContent))


# =========================================================================== messages (CON-7..10)

MessageRole: TypeAlias = Literal["system", "user", "assistant", "tool"]
_ROLES = frozenset(("system", "user", "assistant", "tool"))


@dataclass(frozen=True, slots=True)
class Message(Serializable):
    """One transcript message (CON-7).

    A ``str`` content becomes ``(TextContent(text),)``; a list becomes a tuple.

    Raises:
        ValueError: ``role`` is not ``system``/``user``/``assistant``/``tool``.
    """

    role: MessageRole
    """Author role."""
    content: tuple[ContentBlock, ...]
    """Content parts in order."""
    id: str | None = None
    """Message id; the runtime assigns one only where the spec says so."""
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
        """Concatenated text of the ``TextContent`` parts (CON-10)."""
        return _text_of(self.content)


def user_message(
    text: str, *, id: str | None = None, metadata: Mapping[str, JsonValue] | None = None
) -> Message:
    """Build a user message with one ``TextContent`` (CON-7)."""
    return Message("user", (TextContent(text),), id=id, metadata=metadata)


def system_message(
    text: str, *, id: str | None = None, metadata: Mapping[str, JsonValue] | None = None
) -> Message:
    """Build a system message with one ``TextContent`` (CON-7)."""
    return Message("system", (TextContent(text),), id=id, metadata=metadata)


def assistant_message(
    text: str, *, id: str | None = None, metadata: Mapping[str, JsonValue] | None = None
) -> Message:
    """Build an assistant message with one ``TextContent`` (CON-7)."""
    return Message("assistant", (TextContent(text),), id=id, metadata=metadata)


AgentInput: TypeAlias = Union[str, Message, Sequence[Message]]  # noqa: UP007
"""Run input: text, one message or a sequence of messages (CON-9)."""


def to_messages(input: AgentInput) -> list[Message]:
    """Normalise an ``AgentInput`` to a new list of messages (CON-9).

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
    """Concatenate, without separator, the ``TextContent`` texts of a message or parts (CON-10)."""
    return _text_of(value.content if isinstance(value, Message) else value)


def tool_result_message(result: ToolResult) -> Message:
    """Build the tool-result message for ``result`` (CON-8).

    Returns:
        ``Message(role="tool", content=(ToolResultContent(...), *result.content),
        metadata=result.metadata)``.
    """
    head = ToolResultContent(result.tool_call_id, result.name, result.value, result.error)
    return Message("tool", (head, *result.content), metadata=result.metadata)


# =========================================================================== usage (CON-11)

_TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


@dataclass(frozen=True, slots=True)
class Usage(Serializable):
    """Token and cost usage of a provider turn or aggregate (CON-11).

    Raises:
        TypeError: a token count is not a non-negative ``int`` (``bool`` rejected), or ``cost`` is
            not a finite number >= 0.
    """

    input_tokens: int | None = None
    """Prompt tokens."""
    output_tokens: int | None = None
    """Completion tokens (may include ``reasoning_tokens``)."""
    total_tokens: int | None = None
    """Total tokens as reported."""
    cache_read_tokens: int | None = None
    """Prompt tokens served from cache."""
    cache_write_tokens: int | None = None
    """Prompt tokens written to cache."""
    cost: float | None = None
    """Monetary cost in ``currency`` units."""
    currency: str | None = None
    """Currency of ``cost``, e.g. ``"USD"``."""
    reasoning_tokens: int | None = None
    """Output tokens spent on reasoning."""

    def __post_init__(self) -> None:
        for name in _TOKEN_FIELDS:
            value = getattr(self, name)
            if value is not None and (
                type(value) is bool or not isinstance(value, int) or value < 0
            ):
                raise TypeError(f"Usage.{name} must be a non-negative int, got {value!r}")
        cost = self.cost
        if cost is not None and (
            type(cost) is bool
            or not isinstance(cost, (int, float))
            or not math.isfinite(cost)
            or cost < 0
        ):
            raise TypeError(f"Usage.cost must be a finite number >= 0, got {cost!r}")


# =========================================================================== models (CON-13..16)


@dataclass(frozen=True, slots=True)
class ModelCapabilities(_Options):
    """What a model supports (CON-13)."""

    input: tuple[str, ...] = ("text",)
    """Input modalities, e.g. ``("text", "image")``."""
    output: tuple[str, ...] = ("text",)
    """Output modalities."""
    reasoning: bool = False
    """Produces thinking content."""
    tools: bool = False
    """Supports tool calls."""
    streaming: bool = True
    """Supports streaming."""
    structured_output: bool | Literal["json_schema"] = False
    """Native structured output support (SO-2)."""

    if TYPE_CHECKING:

        def __init__(
            self,
            input: Sequence[str] = ("text",),
            output: Sequence[str] = ("text",),
            reasoning: bool = False,
            tools: bool = False,
            streaming: bool = True,
            structured_output: bool | Literal["json_schema"] = False,
        ) -> None: ...

    def __post_init__(self) -> None:
        if not isinstance(self.input, tuple):
            object.__setattr__(self, "input", tuple(self.input))
        if not isinstance(self.output, tuple):
            object.__setattr__(self, "output", tuple(self.output))


@dataclass(frozen=True, slots=True)
class ModelLimits(_Options):
    """Model size limits in tokens (CON-13)."""

    context_window: int | None = None
    """Context window in tokens."""
    max_output_tokens: int | None = None
    """Maximum output tokens."""


@dataclass(frozen=True, slots=True)
class ModelConfig(_Options):
    """Which model to call and how (CON-13)."""

    provider: str
    """Provider id used for resolution (e.g. ``"openai"``)."""
    model: str
    """Provider model name."""
    display_name: str | None = None
    """Human-friendly name."""
    capabilities: ModelCapabilities | None = None
    """Capabilities; ``None`` means defaults."""
    limits: ModelLimits | None = None
    """Token limits."""
    compat: Mapping[str, Any] | None = None
    """Provider compatibility switches."""
    parameters: Mapping[str, JsonValue] | None = None
    """Passed verbatim into request bodies (``temperature``, ``max_tokens``, ...)."""
    metadata: Mapping[str, Any] | None = None
    """Host metadata."""


@dataclass(frozen=True, slots=True)
class StructuredOutputOptions(_Options):
    """Native structured output request (CON-14, SO-1)."""

    name: str
    """Schema name (1-128 characters once stripped)."""
    schema: dict[str, JsonValue]
    """JSON Schema object."""
    strict: bool | None = None
    """Provider strict mode."""


@dataclass(frozen=True, slots=True)
class ProviderRequestOptions(_Options):
    """Per-request provider options (CON-15); merged with ``merge_provider_options``."""

    session_id: str | None = None
    """Session id forwarded to the provider (e.g. for caching)."""
    headers: Mapping[str, str] | None = None
    """Extra HTTP headers."""
    compat: Mapping[str, Any] | None = None
    """Provider compatibility switches."""
    extra: Mapping[str, Any] | None = None
    """Extra request body fields."""
    structured_output: StructuredOutputOptions | None = None
    """Native structured output."""


def _merge_maps(
    base: Mapping[str, _T] | None, patch: Mapping[str, _T] | None
) -> Mapping[str, _T] | None:
    if patch is None:
        return base
    if base is None:
        return patch
    return {**base, **patch}


def merge_provider_options(
    base: ProviderRequestOptions | None, patch: ProviderRequestOptions | None
) -> ProviderRequestOptions | None:
    """Merge two option sets (CON-15).

    Non-``None`` fields of ``patch`` win, except ``headers``, ``compat`` and ``extra``, which merge
    key by key with ``patch`` keys winning. ``None`` on either side returns the other side.
    """
    if patch is None:
        return base
    if base is None:
        return patch
    return ProviderRequestOptions(
        session_id=patch.session_id if patch.session_id is not None else base.session_id,
        headers=_merge_maps(base.headers, patch.headers),
        compat=_merge_maps(base.compat, patch.compat),
        extra=_merge_maps(base.extra, patch.extra),
        structured_output=(
            patch.structured_output
            if patch.structured_output is not None
            else base.structured_output
        ),
    )


# =========================================================================== tools (CON-19..21)


class ProgressCallback(Protocol):
    """``await progress(value, metadata=None)`` (CON-20)."""

    def __call__(
        self, value: JsonValue, metadata: Mapping[str, Any] | None = None, /
    ) -> Awaitable[None]: ...


async def _no_progress(value: JsonValue, metadata: Mapping[str, Any] | None = None, /) -> None:
    return None


_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ToolDefinition(Serializable):
    """A host tool (CON-19). ``to_dict()`` omits ``execute``; there is no round trip."""

    name: str
    """Unique tool name."""
    execute: Callable[..., Any] = field(metadata={"serialize": False})
    """``execute(arguments: dict, ctx: ToolExecutionContext)``; sync or async; returns a
    ``ToolResult`` or any JSON value."""
    description: str | None = None
    """Description shown to the model."""
    parameters: dict[str, JsonValue] | None = None
    """JSON Schema of the argument object (validated by default, TOOL-6)."""
    exclusive: bool = False
    """Forces sequential dispatch of any round containing this tool."""
    metadata: Mapping[str, Any] | None = None
    """Host metadata."""


@dataclass(frozen=True, slots=True)
class ToolExecutionContext(Serializable):
    """What a tool's ``execute`` receives besides its arguments (CON-20)."""

    session_id: str
    """Session id."""
    run_id: str
    """Run id."""
    tool_call_id: str
    """The call being executed."""
    signal: AbortSignal = field(metadata={"serialize": False})
    """Aborted when the run aborts (TOOL-10)."""
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """Merged run metadata (read-only)."""
    progress: ProgressCallback = field(default=_no_progress, metadata={"serialize": False})
    """``await progress(value, metadata=None)`` emits ``tool_execution_progress``."""


@dataclass(frozen=True, slots=True)
class ToolResult(Serializable):
    """Outcome of one tool call (CON-21); an *error result* when ``error`` is set."""

    tool_call_id: str
    """Id of the answered call (replaced by the runtime with the call's id)."""
    name: str
    """Tool name (replaced by the runtime with the call's name)."""
    value: JsonValue | None = None
    """JSON result."""
    content: tuple[ContentBlock, ...] = ()
    """Extra content parts appended after the ``ToolResultContent``."""
    error: ErrorInfo | None = None
    """Failure description for error results."""
    metadata: Mapping[str, Any] | None = None
    """Host metadata, copied to the tool-result message."""

    if TYPE_CHECKING:

        def __init__(
            self,
            tool_call_id: str,
            name: str,
            value: JsonValue | None = None,
            content: Sequence[ContentBlock] = (),
            error: ErrorInfo | None = None,
            metadata: Mapping[str, Any] | None = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        if not isinstance(self.content, tuple):
            object.__setattr__(self, "content", tuple(self.content))

    @property
    def is_error(self) -> bool:
        """Whether this is an error result (``error is not None``)."""
        return self.error is not None


# =========================================================================== context (CON-34)


@dataclass(frozen=True, slots=True)
class ContextBlock(Serializable):
    """Extra context given to a request (CON-34)."""

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


# =========================================================================== requests (CON-16)


@dataclass(frozen=True, slots=True)
class ProviderRequest(Serializable):
    """One provider call (CON-16). Derive modified requests with ``dataclasses.replace``.

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


# =========================================================================== provider events (CON-17)

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
"""Why the provider stopped (CON-17)."""


@dataclass(frozen=True, slots=True)
class ProviderMessageStart(Serializable):
    """The provider opened an assistant message (CON-17)."""

    message_id: str | None = None
    """Provider message id."""
    type: Literal["message_start"] = field(default="message_start", init=False)


@dataclass(frozen=True, slots=True)
class ProviderContentDelta(Serializable):
    """A text, thinking or image fragment (CON-17)."""

    content: TextContent | ThinkingContent | ImageContent
    """The fragment."""
    type: Literal["content_delta"] = field(default="content_delta", init=False)


@dataclass(frozen=True, slots=True)
class ProviderToolCallDelta(Serializable):
    """A tool-call fragment (CON-17); reconstructed into ``ProviderToolCall`` (PROV-6)."""

    index: int
    """Position of the call within the response."""
    id: str | None = None
    """Call id, once known."""
    name: str | None = None
    """Tool name, once known."""
    arguments_text: str | None = None
    """Raw JSON argument fragment."""
    authority: ToolAuthority | None = None
    """``"provider-hosted"`` for server-executed calls."""
    type: Literal["tool_call_delta"] = field(default="tool_call_delta", init=False)


@dataclass(frozen=True, slots=True)
class ProviderToolCall(Serializable):
    """A completed tool call (CON-17)."""

    call: ToolCallContent
    """The call."""
    type: Literal["tool_call"] = field(default="tool_call", init=False)


@dataclass(frozen=True, slots=True)
class ProviderUsage(Serializable):
    """A usage report (CON-17)."""

    usage: Usage
    """Usage so far for this attempt."""
    type: Literal["usage"] = field(default="usage", init=False)


@dataclass(frozen=True, slots=True)
class ProviderDone(Serializable):
    """End of a successful stream (CON-17)."""

    usage: Usage | None = None
    """Final usage; wins over earlier ``usage`` events."""
    stop_reason: ProviderStopReason | None = None
    """Why the provider stopped."""
    type: Literal["done"] = field(default="done", init=False)


@dataclass(frozen=True, slots=True)
class ProviderErrorEvent(Serializable):
    """A failed stream (CON-17)."""

    error: ErrorInfo
    """The failure; ``code`` drives retry (RETRY-5)."""
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
"""Union of the seven provider stream events (CON-17)."""

_PROVIDER_EVENT_TYPES: Mapping[str, type[Serializable]] = MappingProxyType({
    "message_start": ProviderMessageStart,
    "content_delta": ProviderContentDelta,
    "tool_call_delta": ProviderToolCallDelta,
    "tool_call": ProviderToolCall,
    "usage": ProviderUsage,
    "done": ProviderDone,
    "error": ProviderErrorEvent,
})


def provider_event_from_dict(data: Mapping[str, Any]) -> ProviderEvent:
    """Rebuild a provider event from its ``to_dict()`` form (CON-3).

    Raises:
        ValueError: unknown or missing ``type``, or unknown keys.
    """
    kind = data.get("type") if isinstance(data, Mapping) else None
    cls = _PROVIDER_EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown provider event type: {kind!r}")
    return cls.from_dict(data)  # type: ignore[return-value]


# =========================================================================== turn result (CON-18)


@dataclass(frozen=True, slots=True)
class ProviderTurnResult(Serializable):
    """The outcome of one provider attempt (CON-18)."""

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
        """Text of the ``TextContent`` parts (CON-10)."""
        return _text_of(self.content)


# =========================================================================== small types (CON-35)


@dataclass(frozen=True, slots=True)
class AgentRunRef(Serializable):
    """Reference to a run (CON-35)."""

    run_id: str
    """Run id."""
    session_id: str | None = None
    """Session id, when known."""


@dataclass(frozen=True, slots=True)
class OwnershipScope(_Options):
    """Tenant/account/user a run belongs to (CON-35)."""

    tenant_id: str | None = None
    """Tenant id."""
    account_id: str | None = None
    """Account id."""
    user_id: str | None = None
    """User id."""


@dataclass(frozen=True, slots=True)
class RunLimitBreach(Serializable):
    """The first limit breach of a run (CON-35, LIM-7)."""

    limit: str
    """snake_case limit field name, e.g. ``"max_tool_calls"``."""
    maximum: float
    """Configured maximum (same unit as the limit: count, ms, bytes, tokens or cost)."""
    observed: float
    """Observed value that passed the maximum."""
    currency: str | None = None
    """Currency of a cost limit."""


GuardrailStage: TypeAlias = Literal["input", "output", "tool_input", "tool_output"]
"""Where a guardrail runs (GRD-1)."""
GuardrailAction: TypeAlias = Literal["allow", "block", "tripwire", "interrupt"]
"""What a guardrail decided (GRD-1)."""


@dataclass(frozen=True, slots=True)
class GuardrailRecord(Serializable):
    """A bounded, redacted guardrail decision (CON-35, GRD-4)."""

    guardrail: str
    """Guardrail name (<= 128 chars)."""
    stage: GuardrailStage
    """Stage evaluated."""
    action: GuardrailAction
    """Decision."""
    reason: str | None = None
    """Redacted reason (<= 4 KiB UTF-8)."""
    metadata: Mapping[str, JsonValue] | None = None
    """Redacted, JSON-normalised metadata (<= 16 KiB)."""


# =========================================================================== run result (CON-30)

RunStatus: TypeAlias = Literal["succeeded", "failed", "aborted", "suspended", "denied"]
"""Terminal status of a run leg (CON-30)."""
RunStopReason: TypeAlias = Literal["turn_limit", "host_policy", "token_limit", "refusal"]
"""Why a succeeded run stopped early (CON-30)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult(Serializable):
    """Result of one run leg (CON-30).

    ``to_dict()`` passes ``artifact`` through unchanged (the host's ``T``, CON-25); ``run_state``
    and ``interruption`` are serialised through their ``to_dict()`` when they have one.
    """

    run_id: str
    """Run id."""
    session_id: str
    """Session id."""
    status: RunStatus
    """Terminal status of the leg."""
    stop_reason: RunStopReason | None = None
    """Why a succeeded run stopped (turn policy or ``ctx.finish_reason``)."""
    stop_detail: str | None = None
    """Detail of a turn-policy stop."""
    usage: Usage | None = None
    """Aggregated usage of the leg."""
    messages: tuple[Message, ...] = ()
    """Every message this leg appended to the store, in order, as stored (redacted)."""
    artifact: Any = None
    """The accepted artifact (``ctx.artifact``) on success, else ``None``."""
    run_state: Any = None
    """``AgentRunState`` of a durable run, else ``None``."""
    error: ErrorInfo | None = None
    """Redacted failure description."""
    leaf_id: str | None = None
    """Store leaf entry id after the leg."""
    limit: RunLimitBreach | None = None
    """The limit breach, when one ended the run."""
    abort_reason: str | None = None
    """``str(signal.reason)`` when aborted without a breach."""
    interruption: Any = None
    """``AgentRunInterruption`` of a suspended/denied run, else ``None``."""

    if TYPE_CHECKING:

        def __init__(
            self,
            *,
            run_id: str,
            session_id: str,
            status: RunStatus,
            stop_reason: RunStopReason | None = None,
            stop_detail: str | None = None,
            usage: Usage | None = None,
            messages: Sequence[Message] = (),
            artifact: Any = None,
            run_state: Any = None,
            error: ErrorInfo | None = None,
            leaf_id: str | None = None,
            limit: RunLimitBreach | None = None,
            abort_reason: str | None = None,
            interruption: Any = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        if not isinstance(self.messages, tuple):
            object.__setattr__(self, "messages", tuple(self.messages))

    def to_dict(self) -> dict[str, Any]:
        """Return the dict form (CON-3), with ``artifact`` passed through unchanged."""
        out = Serializable.to_dict(self)
        if self.artifact is not None:
            out["artifact"] = self.artifact
        return out

    @property
    def message(self) -> Message | None:
        """The last assistant message among ``messages``, or ``None``."""
        for msg in reversed(self.messages):
            if msg.role == "assistant":
                return msg
        return None

    @property
    def text(self) -> str:
        """Text (CON-10) of ``message``, or ``""``."""
        msg = self.message
        return "" if msg is None else _text_of(msg.content)
