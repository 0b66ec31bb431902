"""The provider protocol, provider-event helpers and tool-call reconstruction.

A provider turns one :class:`~prism.types.ProviderRequest` into a stream of provider events. This
module holds the provider protocol, the public helper constructors for those events, the
reconstruction of streamed tool-call fragments, a reference fold of one attempt's events into a
:class:`~prism.types.ProviderTurnResult` and the tool-result text shared by the wire formats.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from prism.errors import ProviderTransportError, ProviderTurnError
from prism.redaction import error_to_error_info
from prism.types import (
    ContentBlock,
    ErrorInfo,
    ImageContent,
    Message,
    ProviderContentDelta,
    ProviderDone,
    ProviderErrorEvent,
    ProviderEvent,
    ProviderMessageStart,
    ProviderRequest,
    ProviderStopReason,
    ProviderToolCall,
    ProviderToolCallDelta,
    ProviderTurnResult,
    ProviderUsage,
    TextContent,
    ThinkingContent,
    ToolAuthority,
    ToolCallContent,
    ToolResultContent,
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

EMPTY_TOOL_RESULT_TEXT = "(tool completed with no output)"
"""Tool-result payload sent when a result has no value, no error and no text."""

MAX_TOOL_ARGUMENTS_BYTES = 262_144
"""Largest tool-call argument text accepted, in UTF-8 bytes."""


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
            :func:`tool_call_from_arguments_text` (malformed text gives a call whose
            ``arguments_error`` is set, never an exception). ``None`` means ``{}``.

    Raises:
        TypeError: ``call_or_id`` is an id and ``name`` is missing, or ``name``/``arguments``
            are given together with a ``ToolCallContent``.
    """
    if isinstance(call_or_id, ToolCallContent):
        if name is not None or arguments is not None:
            raise TypeError("provider_tool_call: pass either a ToolCallContent or id/name/arguments")
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
    usage: Usage | None = None, stop_reason: ProviderStopReason | None = None
) -> ProviderDone:
    """Build the terminal ``done`` event.

    Args:
        usage: Final usage of the attempt; when set it wins over earlier ``usage`` events.
        stop_reason: Normalised stop reason, or ``None``.
    """
    return ProviderDone(usage=usage, stop_reason=stop_reason)


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
            error = _redact_error_info(error, secret_list)
        return ProviderErrorEvent(error=error)
    return ProviderErrorEvent(error=error_to_error_info(error, secrets=secret_list))


def _redact_text(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, "[REDACTED]")
    return text


def _redact_error_info(info: ErrorInfo, secrets: Sequence[str]) -> ErrorInfo:
    message = _redact_text(info.message, secrets)
    cause = _redact_text(info.cause, secrets) if info.cause is not None else None
    if message == info.message and cause == info.cause:
        return info
    return ErrorInfo(
        message=message,
        name=info.name,
        code=info.code,
        retry_after_ms=info.retry_after_ms,
        cause=cause,
    )


# --------------------------------------------------------------------------- tool-call arguments


def _reject_constant(value: str) -> Any:
    raise ValueError(f"non-finite number {value} is not JSON")


def tool_call_from_arguments_text(id: str, name: str, text: str | None) -> ToolCallContent:
    """Build a call from streamed argument text, never raising.

    Blank text (``None``, empty or whitespace) gives ``{}``. Text above
    :data:`MAX_TOOL_ARGUMENTS_BYTES` UTF-8 bytes, text that is not valid JSON (``NaN``/
    ``Infinity`` included), or JSON that is not an object gives a call with ``arguments={}`` and
    ``arguments_error=ErrorInfo(name="ProviderTransportError", code="invalid_json_arguments",
    message="Invalid JSON arguments for tool <name>: <detail>")``; dispatch later blocks such a
    call with ``invalid_arguments`` so the model can correct itself.

    Args:
        id: Tool-call id.
        name: Tool name.
        text: The complete JSON argument text, or ``None``.
    """
    if text is None or not text.strip():
        return ToolCallContent(id=id, name=name, arguments={})
    detail: str
    size = len(text.encode("utf-8"))
    if size > MAX_TOOL_ARGUMENTS_BYTES:
        detail = f"arguments are {size} bytes, above the {MAX_TOOL_ARGUMENTS_BYTES}-byte limit"
    else:
        try:
            value = json.loads(text, parse_constant=_reject_constant)
        except ValueError as exc:
            detail = str(exc)
        else:
            if isinstance(value, dict):
                return ToolCallContent(id=id, name=name, arguments=value)
            detail = f"expected a JSON object, got {_json_kind(value)}"
    return ToolCallContent(
        id=id,
        name=name,
        arguments={},
        arguments_error=ErrorInfo(
            name="ProviderTransportError",
            code="invalid_json_arguments",
            message=f"Invalid JSON arguments for tool {name}: {detail}",
        ),
    )


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


# --------------------------------------------------------------------------- delta reconstruction


class _DeltaGroup:
    __slots__ = ("authority", "id", "index", "name", "parts")

    def __init__(self, index: int) -> None:
        self.index = index
        self.id: str | None = None
        self.name: str | None = None
        self.authority: ToolAuthority | None = None
        self.parts: list[str] = []

    def add(self, delta: ProviderToolCallDelta) -> None:
        if delta.id:
            self.id = delta.id
        if delta.name:
            self.name = delta.name
        if delta.authority is not None:
            self.authority = delta.authority
        if delta.arguments_text:
            self.parts.append(delta.arguments_text)


def _group_deltas(events: Iterable[ProviderEvent]) -> tuple[list[_DeltaGroup], set[str]]:
    """Group ``tool_call_delta`` fragments by index and id; also collect final ids."""
    groups: list[_DeltaGroup] = []
    open_groups: dict[int, _DeltaGroup] = {}
    final_ids: set[str] = set()
    for event in events:
        if isinstance(event, ProviderToolCall):
            final_ids.add(event.call.id)
            continue
        if not isinstance(event, ProviderToolCallDelta):
            continue
        group = open_groups.get(event.index)
        if group is None or (event.id and group.id is not None and event.id != group.id):
            group = _DeltaGroup(event.index)
            open_groups[event.index] = group
            groups.append(group)
        group.add(event)
    return groups, final_ids


def _complete_groups(groups: list[_DeltaGroup], final_ids: set[str]) -> list[ToolCallContent]:
    # Stable sort keeps groups of one index in the order they were opened.
    ordered = sorted(groups, key=lambda g: g.index)
    calls: list[ToolCallContent] = []
    for group in ordered:
        if group.id is not None and group.id in final_ids:
            continue
        if group.id is None or group.name is None:
            missing = "id" if group.id is None else "name"
            raise ProviderTransportError(
                "incomplete_delta",
                f"Streamed tool call at index {group.index} has no {missing}",
            )
        call = tool_call_from_arguments_text(group.id, group.name, "".join(group.parts))
        if group.authority is not None:
            call = ToolCallContent(
                id=call.id,
                name=call.name,
                arguments=call.arguments,
                arguments_error=call.arguments_error,
                authority=group.authority,
            )
        calls.append(call)
    return calls


def reconstruct_tool_call_deltas(events: Iterable[ProviderEvent]) -> list[ToolCallContent]:
    """Rebuild complete tool calls from one attempt's ``tool_call_delta`` fragments.

    Fragments are grouped by ``index`` and ``id``: a fragment whose ``id`` is set and differs from
    the id the open group at its index already has starts a new group there; any other fragment
    continues the open group (opening one when there is none), so a group still without an id
    adopts the first id it receives. Within a group ``id`` and ``name`` take the last non-empty
    value and ``arguments_text`` is concatenated. Groups whose ``id`` also arrived as a final
    ``tool_call`` event are skipped; parallel calls sharing an index are never glued together.

    Args:
        events: One attempt's provider events, in stream order.

    Returns:
        The reconstructed calls, ascending by ``index``, then in opening order. Arguments are
        parsed with :func:`tool_call_from_arguments_text` (never raises on bad JSON).

    Raises:
        ProviderTransportError: code ``"incomplete_delta"`` when a group lacks an id or a name.
    """
    groups, final_ids = _group_deltas(events)
    return _complete_groups(groups, final_ids)


# --------------------------------------------------------------------------- folding


class _TurnFolder:
    """Incremental fold of one attempt's events into a turn result: O(1) amortised per event."""

    __slots__ = (
        "_open_kind",
        "_open_parts",
        "_open_signature",
        "content",
        "deltas",
        "final_ids",
        "message_id",
        "started",
        "stop_reason",
        "usage",
    )

    def __init__(self) -> None:
        self.content: list[ContentBlock] = []
        self.message_id: str | None = None
        self.started = False
        self.usage: Usage | None = None
        self.stop_reason: ProviderStopReason | None = None
        self.deltas: list[ProviderEvent] = []
        self._open_kind: str | None = None  # "text" | "thinking" | None
        self._open_parts: list[str] = []
        self._open_signature: str | None = None

    def _close(self) -> None:
        if self._open_kind == "text":
            self.content.append(TextContent(text="".join(self._open_parts)))
        elif self._open_kind == "thinking":
            self.content.append(
                ThinkingContent(text="".join(self._open_parts), signature=self._open_signature)
            )
        self._open_kind = None
        self._open_parts = []
        self._open_signature = None

    def add_content(self, part: TextContent | ThinkingContent | ImageContent) -> None:
        self.started = True
        if isinstance(part, TextContent):
            if self._open_kind != "text":
                self._close()
                self._open_kind = "text"
            self._open_parts.append(part.text)
        elif isinstance(part, ThinkingContent):
            if part.redacted_data is not None:
                self._close()
                self.content.append(part)
                return
            if self._open_kind != "thinking":
                self._close()
                self._open_kind = "thinking"
            self._open_parts.append(part.text)
            if part.signature is not None:
                self._open_signature = part.signature
                self._close()
        else:
            self._close()
            self.content.append(part)

    def add_call(self, call: ToolCallContent) -> None:
        self.started = True
        self._close()
        self.content.append(call)

    def result(self) -> ProviderTurnResult:
        self._close()
        calls = tuple(part for part in self.content if isinstance(part, ToolCallContent))
        return ProviderTurnResult(
            content=tuple(self.content),
            calls=calls,
            message_id=self.message_id,
            started=self.started,
            usage=self.usage,
            stop_reason=self.stop_reason,
        )


def fold_provider_events(events: Iterable[ProviderEvent]) -> ProviderTurnResult:
    """Fold one attempt's provider events into a :class:`ProviderTurnResult`.

    Adjacent text deltas become one ``TextContent``; adjacent thinking deltas become one
    ``ThinkingContent`` until a delta carrying a ``signature`` closes it; a ``redacted_data``
    delta is a part of its own; final ``tool_call`` events appear where they arrived. Reading
    stops at ``done``. After the stream, calls rebuilt from ``tool_call_delta`` fragments whose
    id did not arrive as a final ``tool_call`` are appended. ``usage`` is the last
    reported usage, ``done.usage`` winning.

    This is the reference fold for tests and for hosts that drive a provider directly; the
    runtime performs the same fold while emitting its events.

    Args:
        events: One attempt's provider events, in stream order.

    Returns:
        The turn result. ``started`` is false (and ``content`` empty) when the provider produced
        no message start, content or tool call.

    Raises:
        ProviderTurnError: the stream contained an ``error`` event (``.info`` is its
            ``ErrorInfo``).
        ProviderTransportError: code ``"incomplete_delta"`` for a fragment group lacking an id or
            a name.
    """
    folder = _TurnFolder()
    for event in events:
        if isinstance(event, ProviderContentDelta):
            folder.add_content(event.content)
        elif isinstance(event, ProviderToolCall):
            folder.add_call(event.call)
            folder.deltas.append(event)
        elif isinstance(event, ProviderToolCallDelta):
            folder.started = True
            folder.deltas.append(event)
        elif isinstance(event, ProviderMessageStart):
            folder.started = True
            folder.message_id = event.message_id
        elif isinstance(event, ProviderUsage):
            folder.usage = event.usage
        elif isinstance(event, ProviderDone):
            if event.usage is not None:
                folder.usage = event.usage
            folder.stop_reason = event.stop_reason
            break
        elif isinstance(event, ProviderErrorEvent):
            raise ProviderTurnError(event.error)
    if folder.deltas:
        for call in reconstruct_tool_call_deltas(folder.deltas):
            folder.add_call(call)
    return folder.result()


# --------------------------------------------------------------------------- wire helpers


def _tool_result_payload_text(message: Message) -> str:
    """Payload text of a tool-result message for the wire formats.

    Uses the first ``ToolResultContent`` part and the text parts that follow it: an ``error``
    gives ``{"error": {"message", "code"?}}``; a ``str`` result is itself; another non-``None``
    result is compact JSON; else the extra text parts joined by ``"\\n"``; else
    :data:`EMPTY_TOOL_RESULT_TEXT`. Never empty.
    """
    result: ToolResultContent | None = None
    texts: list[str] = []
    for part in message.content:
        if result is None:
            if isinstance(part, ToolResultContent):
                result = part
        elif isinstance(part, TextContent):
            texts.append(part.text)
    if result is not None and result.error is not None:
        error: dict[str, Any] = {"message": result.error.message}
        if result.error.code is not None:
            error["code"] = result.error.code
        return json.dumps({"error": error})
    if result is not None and isinstance(result.result, str):
        if result.result:
            return result.result
    elif result is not None and result.result is not None:
        return json.dumps(result.result, ensure_ascii=False, separators=(",", ":"))
    joined = "\n".join(texts)
    return joined if joined else EMPTY_TOOL_RESULT_TEXT


def _retry_after_ms(value: str | None, *, now: float | None = None) -> float | None:
    """Parse a ``Retry-After`` header into milliseconds from now, never negative.

    Args:
        value: The header value: delay seconds (``"2"``, ``"1.5"``) or an HTTP date.
        now: Current POSIX time in seconds (injectable for tests); defaults to ``time.time()``.

    Returns:
        The delay in milliseconds, or ``None`` when the header is missing or unparseable.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        import email.utils  # an HTTP date: rare, so the email package loads only here
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        current = time.time() if now is None else now
        return max(0.0, (when.timestamp() - current) * 1000.0)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds * 1000.0)
