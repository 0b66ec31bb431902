"""The provider protocol and the constructors of provider events.

A provider turns one [`ProviderRequest`][prism.types.ProviderRequest] into a stream of provider events. This
module holds the protocol every provider implements and the public helper constructors for those
events. The fold of a stream into a [`ProviderTurnResult`][prism.types.ProviderTurnResult] and the
reconstruction of streamed tool calls live in [`prism.providers.stream_fold`][prism.providers.stream_fold], the pieces the
wire formats share in [`prism.providers.wire`][prism.providers.wire]; their names stay importable from here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from prism.providers.stream_fold import MAX_TOOL_ARGUMENTS_BYTES as MAX_TOOL_ARGUMENTS_BYTES
from prism.providers.stream_fold import fold_provider_events as fold_provider_events
from prism.providers.stream_fold import (
    reconstruct_tool_call_deltas as reconstruct_tool_call_deltas,
)
from prism.providers.stream_fold import (
    tool_call_from_arguments_text as tool_call_from_arguments_text,
)
from prism.providers.wire import EMPTY_TOOL_RESULT_TEXT as EMPTY_TOOL_RESULT_TEXT
from prism.providers.wire import redact_error_info
from prism.redaction import error_to_error_info
from prism.types import (
    ErrorInfo,
    ImageContent,
    ProviderContentDelta,
    ProviderDone,
    ProviderErrorEvent,
    ProviderEvent,
    ProviderMessageStart,
    ProviderRequest,
    ProviderStopReason,
    ProviderToolCall,
    ProviderToolCallDelta,
    ProviderUsage,
    TextContent,
    ThinkingContent,
    ToolAuthority,
    ToolCallContent,
    Usage,
)

__all__ = [
    "EMPTY_TOOL_RESULT_TEXT",
    "MAX_TOOL_ARGUMENTS_BYTES",
    "AIProvider",
    "fold_provider_events",
    "provider_content_delta",
    "provider_done",
    "provider_error",
    "provider_message_start",
    "provider_text_delta",
    "provider_thinking_delta",
    "provider_tool_call",
    "provider_tool_call_delta",
    "provider_usage",
    "reconstruct_tool_call_deltas",
    "tool_call_content",
    "tool_call_from_arguments_text",
]


@runtime_checkable
class AIProvider(Protocol):
    """A model provider: turns one request into a stream of provider events.

    The stream follows these rules: at most one ``message_start`` before any content,
    content/tool-call events, optional ``usage`` events, and exactly one terminal ``done`` or
    ``error`` event. A provider never sees the session, the store, the ledger or the loop.
    """

    id: str
    """Provider id, recorded in ``provider_turn_started`` metadata (e.g. ``"openai"``)."""

    def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the events of one attempt for ``request`` (normally an async generator).

        Args:
            request: The redacted provider request. ``request.signal``, when set, must be
                honoured: on abort the provider stops reading, closes its HTTP response and
                raises the signal's abort error.

        Returns:
            An async iterator of provider events.
        """
        ...


# --------------------------------------------------------------------------- helper constructors


def provider_message_start(message_id: str | None = None) -> ProviderMessageStart:
    """Build a ``message_start`` event.

    Args:
        message_id: The provider's id for the assistant message, or ``None``.
    """
    return ProviderMessageStart(message_id=message_id)


def provider_text_delta(text: str) -> ProviderContentDelta:
    """Build a ``content_delta`` event carrying a ``TextContent`` fragment."""
    return ProviderContentDelta(content=TextContent(text=text))


def provider_thinking_delta(text: str, signature: str | None = None) -> ProviderContentDelta:
    """Build a ``content_delta`` event carrying a ``ThinkingContent`` fragment.

    Args:
        text: Reasoning text fragment (``""`` for a bare signature delta).
        signature: Reasoning signature; a delta carrying one closes its thinking part.
    """
    return ProviderContentDelta(content=ThinkingContent(text=text, signature=signature))


def provider_content_delta(
    content: TextContent | ThinkingContent | ImageContent,
) -> ProviderContentDelta:
    """Build a ``content_delta`` event for an arbitrary content fragment."""
    return ProviderContentDelta(content=content)


def tool_call_content(
    id: str, name: str, arguments: Mapping[str, Any] | None = None
) -> ToolCallContent:
    """Build a host ``ToolCallContent``.

    Args:
        id: Tool-call id, echoed back with its result.
        name: Tool name.
        arguments: The argument object; ``None`` means ``{}``.
    """
    return ToolCallContent(id=id, name=name, arguments=dict(arguments or {}))


def provider_tool_call(
    call_or_id: ToolCallContent | str,
    name: str | None = None,
    arguments: Mapping[str, Any] | str | None = None,
) -> ProviderToolCall:
    """Build a final ``tool_call`` event.

    Args:
        call_or_id: A complete ``ToolCallContent``, or the id of the call to build.
        name: Tool name; required when ``call_or_id`` is an id.
        arguments: The argument object, or raw JSON text, which goes through
            [`tool_call_from_arguments_text()`][prism.providers.base.tool_call_from_arguments_text] (malformed text gives a call whose
            ``arguments_error`` is set, never an exception). ``None`` means ``{}``.

    Raises:
        TypeError: ``call_or_id`` is an id and ``name`` is missing, or ``name``/``arguments``
            are given together with a ``ToolCallContent``.
    """
    if isinstance(call_or_id, ToolCallContent):
        if name is not None or arguments is not None:
            raise TypeError(
                "provider_tool_call: pass either a ToolCallContent or id/name/arguments"
            )
        return ProviderToolCall(call=call_or_id)
    if name is None:
        raise TypeError("provider_tool_call: name is required when an id is given")
    if isinstance(arguments, str):
        return ProviderToolCall(call=tool_call_from_arguments_text(call_or_id, name, arguments))
    return ProviderToolCall(call=tool_call_content(call_or_id, name, arguments))


def provider_tool_call_delta(
    index: int,
    *,
    id: str | None = None,
    name: str | None = None,
    arguments_text: str | None = None,
    authority: ToolAuthority | None = None,
) -> ProviderToolCallDelta:
    """Build a ``tool_call_delta`` fragment event.

    Args:
        index: The provider's index of the call within the message (groups fragments).
        id: Call id, when this fragment carries it.
        name: Tool name, when this fragment carries it.
        arguments_text: A fragment of the JSON argument text.
        authority: ``"host"``, ``"provider-hosted"`` or ``None`` (host).
    """
    return ProviderToolCallDelta(
        index=index,
        id=id,
        name=name,
        arguments_text=arguments_text,
        authority=authority,
    )


def provider_usage(usage: Usage) -> ProviderUsage:
    """Build a ``usage`` event; the last one of an attempt is authoritative."""
    return ProviderUsage(usage=usage)


def provider_done(
    usage: Usage | None = None,
    stop_reason: ProviderStopReason | None = None,
    *,
    model: str | None = None,
) -> ProviderDone:
    """Build the terminal ``done`` event.

    Args:
        usage: Final usage of the attempt; when set it wins over earlier ``usage`` events.
        stop_reason: Normalised stop reason, or ``None``.
        model: The model that generated the response, as the provider named it (``None``: it
            did not say).
    """
    return ProviderDone(usage=usage, stop_reason=stop_reason, model=model)


def provider_error(
    error: BaseException | ErrorInfo, secrets: Iterable[str] = ()
) -> ProviderErrorEvent:
    """Build the terminal ``error`` event.

    Args:
        error: An exception (converted with ``error_to_error_info``) or an ``ErrorInfo``.
        secrets: Strings replaced by ``[REDACTED]`` in the message and cause.
    """
    secret_list = tuple(s for s in secrets if s)
    if isinstance(error, ErrorInfo):
        if secret_list:
            error = redact_error_info(error, secret_list)
        return ProviderErrorEvent(error=error)
    return ProviderErrorEvent(error=error_to_error_info(error, secrets=secret_list))
