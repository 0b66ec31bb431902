"""The fold of one provider attempt's events into a [`ProviderTurnResult`][prism.types.ProviderTurnResult].

This is the only place the provider stream is folded: [`fold_provider_events()`][prism.providers.stream_fold.fold_provider_events] (for tests and
hosts that drive a provider directly) and the runtime's provider attempt both feed a
[`StreamFold`][prism.providers.stream_fold.StreamFold] event by event, the runtime emitting its message events alongside.

The rules of the fold:

* adjacent text deltas become one ``TextContent``; adjacent thinking deltas become one
  ``ThinkingContent`` until a delta carrying a ``signature`` closes it (the signature is kept);
  a ``redacted_data`` thinking delta and an image are parts of their own;
* a final ``tool_call`` appears in the content where it arrived;
* ``tool_call_delta`` fragments are grouped as they arrive (see
  [`reconstruct_tool_call_deltas()`][prism.providers.stream_fold.reconstruct_tool_call_deltas]); after the stream, the calls they rebuild are appended,
  except those whose id also arrived as a final ``tool_call``;
* ``message_id`` is the id of a ``message_start`` that arrives before any content (a stream has
  at most one); ``started`` is set by a message start, any content or any tool call;
  [`StreamFold.streamed`][prism.providers.stream_fold.StreamFold.streamed] tells whether content, thinking or a tool call (final or fragment)
  arrived — a message start alone is not part of an answer;
* ``usage`` is the last usage reported, ``done.usage`` winning; ``done`` gives the stop reason
  and ends the stream.

Each event is looked at once; nothing is collected to be walked again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from typing import Any

from prism.errors import ProviderTransportError, ProviderTurnError
from prism.types import (
    ContentBlock,
    ErrorInfo,
    ProviderContentDelta,
    ProviderDone,
    ProviderErrorEvent,
    ProviderEvent,
    ProviderMessageStart,
    ProviderStopReason,
    ProviderToolCall,
    ProviderToolCallDelta,
    ProviderTurnResult,
    ProviderUsage,
    TextContent,
    ThinkingContent,
    ToolAuthority,
    ToolCallContent,
    Usage,
)

__all__ = [
    "MAX_TOOL_ARGUMENTS_BYTES",
    "StreamFold",
    "fold_provider_events",
    "reconstruct_tool_call_deltas",
    "tool_call_from_arguments_text",
]

MAX_TOOL_ARGUMENTS_BYTES = 262_144
"""Largest tool-call argument text accepted, in UTF-8 bytes."""
MAX_ARGUMENTS_EXCERPT_BYTES = 512
"""How much of invalid argument text its error shows, in UTF-8 bytes."""


# --------------------------------------------------------------------------- tool-call arguments


def _reject_constant(value: str) -> Any:
    raise ValueError(f"non-finite number {value} is not JSON")


def tool_call_from_arguments_text(id: str, name: str, text: str | None) -> ToolCallContent:
    """Build a call from streamed argument text, never raising.

    Blank text (``None``, empty or whitespace) gives ``{}``. Text above
    ``MAX_TOOL_ARGUMENTS_BYTES`` UTF-8 bytes, text that is not valid JSON (``NaN``/
    ``Infinity`` included), or JSON that is not an object gives a call with ``arguments={}`` and
    ``arguments_error=ErrorInfo(name="ProviderTransportError", code="invalid_json_arguments",
    message="Invalid JSON arguments for tool <name>: <detail>; arguments text: <text>")``, the
    text cut to its first 512 UTF-8 bytes (``(first 512 of <n> bytes)`` says so); dispatch later
    blocks such a call with ``invalid_arguments``, so the model sees what it sent and can correct
    itself (the runtime redacts the message like every stored and emitted value).

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
            message=f"Invalid JSON arguments for tool {name}: {detail}; {_excerpt(text, size)}",
        ),
    )


def _excerpt(text: str, size: int) -> str:
    if size <= MAX_ARGUMENTS_EXCERPT_BYTES:
        return f"arguments text: {text}"
    cut = text.encode("utf-8")[:MAX_ARGUMENTS_EXCERPT_BYTES].decode("utf-8", "ignore")
    return f"arguments text (first {MAX_ARGUMENTS_EXCERPT_BYTES} of {size} bytes): {cut}"


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


# --------------------------------------------------------------------------- fragment groups


class _FragmentGroup:
    """The fragments of one streamed tool call: last id/name/authority, argument text parts."""

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

    def call(self) -> ToolCallContent:
        if self.id is None or self.name is None:
            missing = "id" if self.id is None else "name"
            raise ProviderTransportError(
                "incomplete_delta",
                f"Streamed tool call at index {self.index} has no {missing}",
            )
        call = tool_call_from_arguments_text(self.id, self.name, "".join(self.parts))
        if self.authority is None:
            return call
        return dataclasses.replace(call, authority=self.authority)


class _Fragments:
    """Tool-call fragments grouped by index and id, in the order the groups were opened."""

    __slots__ = ("groups", "open")

    def __init__(self) -> None:
        self.groups: list[_FragmentGroup] = []
        self.open: dict[int, _FragmentGroup] = {}

    def add(self, delta: ProviderToolCallDelta) -> None:
        group = self.open.get(delta.index)
        if group is None or (delta.id and group.id is not None and delta.id != group.id):
            group = _FragmentGroup(delta.index)
            self.open[delta.index] = group
            self.groups.append(group)
        group.add(delta)

    def calls(self, final_ids: set[str]) -> list[ToolCallContent]:
        # A stable sort keeps the groups of one index in the order they were opened.
        ordered = sorted(self.groups, key=lambda group: group.index)
        return [group.call() for group in ordered if group.id is None or group.id not in final_ids]


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
        parsed with [`tool_call_from_arguments_text()`][prism.providers.stream_fold.tool_call_from_arguments_text] (never raises on bad JSON).

    Raises:
        ProviderTransportError: code ``"incomplete_delta"`` when a group lacks an id or a name.
    """
    fragments = _Fragments()
    final_ids: set[str] = set()
    for event in events:
        if isinstance(event, ProviderToolCallDelta):
            fragments.add(event)
        elif isinstance(event, ProviderToolCall):
            final_ids.add(event.call.id)
    return fragments.calls(final_ids)


# --------------------------------------------------------------------------- the fold

_NONE = 0
_TEXT = 1
_THINKING = 2


class StreamFold:
    """The incremental fold of one attempt's provider events (rules in the module docstring).

    Feed events in stream order with [`add()`][prism.providers.stream_fold._FragmentGroup.add] until it returns ``True`` (``done``) or the
    stream ends; then call [`finish()`][prism.providers.stream_fold.StreamFold.finish] once and read [`result()`][prism.providers.stream_fold.StreamFold.result]. The attributes are the
    fold so far, readable at any time (a failed attempt still records its ``usage``).
    """

    __slots__ = (
        "_fragments",
        "_open",
        "_parts",
        "calls",
        "content",
        "message_id",
        "model",
        "started",
        "stop_reason",
        "usage",
    )

    def __init__(self) -> None:
        self.content: list[ContentBlock] = []  # the open text/thinking part joins on close
        self.calls: list[ToolCallContent] = []  # the tool calls of content, in the same order
        self.message_id: str | None = None
        self.started = False
        self.usage: Usage | None = None
        self.stop_reason: ProviderStopReason | None = None
        self.model: str | None = None
        """The model the ``done`` event says generated the response."""
        self._open = _NONE
        self._parts: list[str] = []
        self._fragments: _Fragments | None = None

    def add(self, event: ProviderEvent) -> bool:
        """Fold one event.

        Returns:
            ``True`` for ``done``: the stream is over and later events must not be added.

        Raises:
            ProviderTurnError: ``event`` is an ``error`` event (``.info`` is its ``ErrorInfo``).
        """
        if isinstance(event, ProviderContentDelta):
            self.started = True
            part = event.content
            if isinstance(part, TextContent):
                if self._open != _TEXT:
                    self._close()
                    self._open = _TEXT
                self._parts.append(part.text)
            elif isinstance(part, ThinkingContent) and part.redacted_data is None:
                if self._open != _THINKING:
                    self._close()
                    self._open = _THINKING
                self._parts.append(part.text)
                if part.signature is not None:
                    self.content.append(
                        ThinkingContent("".join(self._parts), signature=part.signature)
                    )
                    self._parts.clear()
                    self._open = _NONE
            else:
                self._add_part(part)
        elif isinstance(event, ProviderToolCall):
            self.started = True
            self._add_part(event.call)
            self.calls.append(event.call)
        elif isinstance(event, ProviderDone):
            if event.usage is not None:
                self.usage = event.usage
            self.stop_reason = event.stop_reason
            self.model = event.model
            return True
        elif isinstance(event, ProviderUsage):
            self.usage = event.usage
        elif isinstance(event, ProviderToolCallDelta):
            self.started = True
            fragments = self._fragments
            if fragments is None:
                fragments = self._fragments = _Fragments()
            fragments.add(event)
        elif isinstance(event, ProviderMessageStart):
            if not self.started:
                self.message_id = event.message_id
            self.started = True
        elif isinstance(event, ProviderErrorEvent):
            raise ProviderTurnError(event.error)
        return False

    @property
    def streamed(self) -> bool:
        """Whether a content, thinking or tool-call delta (or a final tool call) was folded; a
        message start alone does not count. Read from the fold's state, so folding costs
        nothing more."""
        return bool(self.content) or self._open != _NONE or self._fragments is not None

    def finish(
        self, *, check: Callable[[ToolCallContent], ToolCallContent] | None = None
    ) -> list[ToolCallContent]:
        """End the stream: close the open part and append the calls rebuilt from fragments.

        Args:
            check: Applied to each rebuilt call before it is appended; what it returns is what
                ``content`` and ``calls`` hold (the runtime drops a piece of a secret that the
                cut of an invalid-arguments excerpt split).

        Returns:
            The rebuilt calls (already appended to ``content`` and ``calls``), in order.

        Raises:
            ProviderTransportError: code ``"incomplete_delta"`` for a fragment group lacking an
                id or a name.
        """
        self._close()
        fragments = self._fragments
        if fragments is None:
            return []
        rebuilt = fragments.calls({call.id for call in self.calls})
        if check is not None:
            rebuilt = [check(call) for call in rebuilt]
        self.content.extend(rebuilt)
        self.calls.extend(rebuilt)
        return rebuilt

    def result(self) -> ProviderTurnResult:
        """The turn result of the fold (after [`finish()`][prism.providers.stream_fold.StreamFold.finish])."""
        # content, calls, message_id, started, usage, stop_reason (positional: built each turn)
        return ProviderTurnResult(
            tuple(self.content),
            tuple(self.calls),
            self.message_id,
            self.started,
            self.usage,
            self.stop_reason,
        )

    def _add_part(self, part: ContentBlock) -> None:
        if self._open:
            self._close()
        self.content.append(part)

    def _close(self) -> None:
        kind = self._open
        if kind:
            text = "".join(self._parts)
            self.content.append(TextContent(text) if kind == _TEXT else ThinkingContent(text))
            self._parts.clear()
            self._open = _NONE


def fold_provider_events(events: Iterable[ProviderEvent]) -> ProviderTurnResult:
    """Fold one attempt's provider events into a [`ProviderTurnResult`][prism.providers.stream_fold.ProviderTurnResult].

    The fold the runtime performs while emitting its events (rules in the module docstring):
    reading stops at ``done``.

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
    fold = StreamFold()
    for event in events:
        if fold.add(event):
            break
    fold.finish()
    return fold.result()
