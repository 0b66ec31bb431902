"""Response side of the Anthropic provider: raw Messages stream events as provider events.

Each stream event maps to provider events by its ``type`` (``message_start``, content block
start/delta/stop, ``message_delta`` with stop reason and usage, ``message_stop`` as completion
evidence, ``ping`` ignored, ``error``), and the end of the stream fails closed: without
``message_stop``, or with a ``tool_use`` block that never completed or lacks its id or name, the
turn ends with an ``incomplete_stream`` error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from prism.errors import ProviderTransportError
from prism.providers.base import (
    provider_done,
    provider_error,
    provider_message_start,
    provider_thinking_delta,
    provider_tool_call_delta,
    provider_usage,
    tool_call_from_arguments_text,
)
from prism.types import (
    ProviderContentDelta,
    ProviderEvent,
    ProviderStopReason,
    ProviderToolCall,
    TextContent,
    ThinkingContent,
    Usage,
)

__all__ = ["MAX_EVENT_BYTES", "StreamMapper", "event_overflow"]

MAX_EVENT_BYTES: Final = 262_144
"""Largest stream event accepted, in bytes of its JSON form."""
_STOP_REASONS: Final[Mapping[str, ProviderStopReason]] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
}
# (wire field, Usage field) pairs; total_tokens is left to the accumulator.
_USAGE_FIELDS: Final = (
    ("input_tokens", "input_tokens"),
    ("output_tokens", "output_tokens"),
    ("cache_read_input_tokens", "cache_read_tokens"),
    ("cache_creation_input_tokens", "cache_write_tokens"),
)


def event_overflow(event: Any) -> int | None:
    """Size in bytes of ``event``'s JSON form when above [`MAX_EVENT_BYTES`][prism.providers._anthropic_stream.MAX_EVENT_BYTES], else
    ``None``.

    Content deltas are measured exactly only when a cheap upper bound (6 bytes per character
    of their payload plus a fixed envelope) could exceed the bound, so ordinary streams do not
    serialise every fragment twice.
    """
    if getattr(event, "type", None) == "content_block_delta":
        delta = getattr(event, "delta", None)
        payload = 0
        for attr in ("text", "thinking", "partial_json", "signature"):
            value = getattr(delta, attr, None)
            if isinstance(value, str):
                payload += len(value)
        if payload * 6 + 512 <= MAX_EVENT_BYTES:
            return None
    dump = getattr(event, "model_dump_json", None)
    if dump is not None:
        text = dump(by_alias=True, exclude_unset=True, warnings=False)
    elif hasattr(event, "json"):  # pragma: no cover - pydantic v1
        text = event.json(by_alias=True, exclude_unset=True)
    else:
        text = json.dumps(event, default=str)
    size = len(text.encode("utf-8"))
    return size if size > MAX_EVENT_BYTES else None


class _ToolBlock:
    __slots__ = ("complete", "id", "index", "input", "name", "parts")

    def __init__(self, index: int, id: Any, name: Any, input: Any) -> None:
        self.index = index
        self.id = id if isinstance(id, str) and id else None
        self.name = name if isinstance(name, str) and name else None
        self.input = input
        self.parts: list[str] | None = None
        self.complete = False


class StreamMapper:
    """Maps raw Messages stream events to provider events; O(1) per event."""

    __slots__ = (
        "_done",
        "_model",
        "_pending_signature",
        "_started",
        "_stop_reason",
        "_tools",
        "_usage",
    )

    def __init__(self) -> None:
        self._started = False
        self._model: str | None = None  # message_start's message.model
        self._done = False
        self._usage: Usage | None = None
        self._stop_reason: Any = None
        self._tools: dict[int, _ToolBlock] = {}
        self._pending_signature: dict[int, str] = {}

    @property
    def complete(self) -> bool:
        """Whether ``message_stop`` arrived (without it the stream is incomplete)."""
        return self._done

    def feed(self, event: Any) -> Sequence[ProviderEvent]:
        """Provider events for one SDK stream event."""
        if self._done:
            return ()  # nothing after message_stop counts
        kind = getattr(event, "type", None)
        if kind == "content_block_delta":
            return self._delta(event)
        if kind == "content_block_start":
            return self._block_start(event)
        if kind == "content_block_stop":
            return self._block_stop(event)
        if kind == "message_delta":
            delta = getattr(event, "delta", None)
            reason = getattr(delta, "stop_reason", None)
            if reason is not None:
                self._stop_reason = reason
            usage = getattr(event, "usage", None)
            if usage is None:
                return ()
            self._usage = _merge_usage(self._usage, usage)
            return (provider_usage(self._usage),)
        if kind == "message_start":
            if self._started:
                return ()
            self._started = True
            message = getattr(event, "message", None)
            message_id = getattr(message, "id", None)
            model = getattr(message, "model", None)
            self._model = model if isinstance(model, str) and model else None
            out: list[ProviderEvent] = [
                provider_message_start(message_id if isinstance(message_id, str) else None)
            ]
            usage = getattr(message, "usage", None)
            if usage is not None:
                self._usage = _merge_usage(self._usage, usage)
                out.append(provider_usage(self._usage))
            return out
        if kind == "message_stop":
            self._done = True
        return ()  # ping (filtered by the SDK too) and unknown event types

    def _delta(self, event: Any) -> Sequence[ProviderEvent]:
        delta = event.delta
        kind = getattr(delta, "type", None)
        if kind == "text_delta":
            text = delta.text
            return (ProviderContentDelta(content=TextContent(text=text)),) if text else ()
        if kind == "input_json_delta":
            block = self._tools.get(event.index)
            fragment = getattr(delta, "partial_json", None)
            if block is None or not isinstance(fragment, str):
                return ()
            if block.parts is None:
                block.parts = []
            if not fragment:
                return ()  # an empty fragment (no-argument call) adds nothing
            block.parts.append(fragment)
            return (provider_tool_call_delta(block.index, arguments_text=fragment),)
        if kind == "thinking_delta":
            text = delta.thinking
            return (provider_thinking_delta(text),) if text else ()
        if kind == "signature_delta":
            self._pending_signature.pop(event.index, None)
            return (provider_thinking_delta("", signature=delta.signature),)
        return ()  # citations_delta and future delta types

    def _block_start(self, event: Any) -> Sequence[ProviderEvent]:
        block = event.content_block
        kind = getattr(block, "type", None)
        index = event.index
        if kind == "text":
            text = getattr(block, "text", None)
            return (ProviderContentDelta(content=TextContent(text=text)),) if text else ()
        if kind == "tool_use":
            tool = _ToolBlock(
                index,
                getattr(block, "id", None),
                getattr(block, "name", None),
                getattr(block, "input", None),
            )
            self._tools[index] = tool
            return (provider_tool_call_delta(index, id=tool.id, name=tool.name),)
        if kind == "thinking":
            signature = getattr(block, "signature", None)
            if isinstance(signature, str) and signature:
                self._pending_signature[index] = signature
            text = getattr(block, "thinking", None)
            return (provider_thinking_delta(text),) if isinstance(text, str) and text else ()
        if kind == "redacted_thinking":
            data = getattr(block, "data", None)
            if not isinstance(data, str):
                return ()
            return (ProviderContentDelta(content=ThinkingContent(text="", redacted_data=data)),)
        return ()  # server tool blocks and future block types are not mapped

    def _block_stop(self, event: Any) -> Sequence[ProviderEvent]:
        index = event.index
        tool = self._tools.get(index)
        if tool is not None:
            tool.complete = True
            return ()
        signature = self._pending_signature.pop(index, None)
        if signature is not None:
            # A signature given only at block start still closes its thinking part.
            return (provider_thinking_delta("", signature=signature),)
        return ()

    def finish(self) -> Sequence[ProviderEvent]:
        """Terminal events once the SDK stream ended."""
        if not self._done:
            return (
                provider_error(
                    ProviderTransportError(
                        "incomplete_stream",
                        "Anthropic stream ended without message_stop",
                    )
                ),
            )
        out: list[ProviderEvent] = []
        for index in sorted(self._tools):
            tool = self._tools[index]
            if tool.id is None or tool.name is None:
                missing = "id" if tool.id is None else "name"
                return (
                    provider_error(
                        ProviderTransportError(
                            "incomplete_stream",
                            f"Anthropic tool_use block at index {index} has no {missing}",
                        )
                    ),
                )
            if not tool.complete:
                return (
                    provider_error(
                        ProviderTransportError(
                            "incomplete_stream",
                            f"Anthropic tool_use block at index {index} never completed",
                        )
                    ),
                )
            if tool.parts is None and isinstance(tool.input, dict) and tool.input:
                # No input_json_delta at all: the start block carried the whole input.
                text = json.dumps(tool.input)
            else:
                text = "".join(tool.parts or ())
            out.append(
                ProviderToolCall(call=tool_call_from_arguments_text(tool.id, tool.name, text))
            )
        reason = self._stop_reason
        out.append(
            provider_done(
                self._usage,
                _STOP_REASONS.get(reason, "other") if isinstance(reason, str) else "other",
                model=self._model,
            )
        )
        return out


def _merge_usage(base: Usage | None, raw: Any) -> Usage:
    """Map wire usage to [`Usage`][prism.providers._anthropic_stream.Usage]; fields present in ``raw`` win over ``base`` (a
    ``message_delta`` updates the usage of ``message_start``)."""
    values: dict[str, Any] = {}
    for wire, name in _USAGE_FIELDS:
        value = getattr(raw, wire, None)
        if value is None and base is not None:
            value = getattr(base, name)
        values[name] = value
    return Usage(**values)
