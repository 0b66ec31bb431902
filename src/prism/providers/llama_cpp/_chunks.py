"""Response mapping of the local provider: llama-cpp-python chat chunks as provider events.

Streamed ``chat.completion.chunk`` dicts and non-streamed ``chat.completion`` responses (the same
shapes an OpenAI-compatible server sends) become ``message_start``, text deltas, tool-call
fragments, final tool calls and one ``done`` — or an ``error`` when the stream proves incomplete.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Final

from prism.providers.base import (
    provider_done,
    provider_error,
    provider_message_start,
    provider_text_delta,
    provider_tool_call,
    provider_tool_call_delta,
)
from prism.types import ErrorInfo, ProviderEvent, ProviderStopReason, Usage

__all__ = ["ChunkMapper"]

_STOP_REASONS: Final[Mapping[str, ProviderStopReason]] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filter",
}


class ChunkMapper:
    """Turns llama-cpp-python chat chunks/responses into provider events, as the Chat
    Completions stream is mapped.

    One mapper serves one request. Streamed tool-call fragments become ``tool_call_delta`` events
    keyed by index; at the end every accumulated call is also emitted as a final ``tool_call``
    (same id), so the runtime does not reconstruct it twice. A call without an id gets
    ``call_<32 hex>``. A stream without a finish reason ends with an
    ``incomplete_stream`` error, a call without a name with ``incomplete_delta``.
    """

    __slots__ = ("_calls", "_started", "finish_reason", "message_id", "response_usage")

    def __init__(self) -> None:
        self._started = False
        self._calls: list[list[Any]] = []  # [index, id, name, arguments_text]
        self.finish_reason: str | None = None
        self.message_id: str | None = None
        self.response_usage: Usage | None = None

    def _start(self, source: Mapping[str, Any], out: list[ProviderEvent]) -> None:
        if not self._started:
            self._started = True
            ident = source.get("id")
            self.message_id = ident if isinstance(ident, str) else None
            out.append(provider_message_start(self.message_id))

    def chunk(self, chunk: Mapping[str, Any]) -> list[ProviderEvent]:
        """Events for one streamed ``chat.completion.chunk``."""
        out: list[ProviderEvent] = []
        self._start(chunk, out)
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if isinstance(content, str) and content:
                out.append(provider_text_delta(content))
            for entry in delta.get("tool_calls") or ():
                out.append(self._call_fragment(entry))
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = reason
        return out

    def _call_fragment(self, entry: Mapping[str, Any]) -> ProviderEvent:
        index = entry.get("index")
        index = index if isinstance(index, int) and not isinstance(index, bool) else 0
        call_id = entry.get("id") or None
        function = entry.get("function") or {}
        name = function.get("name") or None
        text = function.get("arguments")
        text = text if isinstance(text, str) else ""
        open_call = next((c for c in reversed(self._calls) if c[0] == index), None)
        if open_call is None or (call_id is not None and open_call[1] not in (None, call_id)):
            open_call = [index, call_id, name, ""]
            self._calls.append(open_call)
            new_id, new_name = call_id, name
        else:
            # servers repeat id and name on every fragment; send them once per call
            new_id = call_id if open_call[1] is None else None
            new_name = name if open_call[2] is None else None
            open_call[1] = open_call[1] or call_id
            open_call[2] = open_call[2] or name
        open_call[3] += text
        return provider_tool_call_delta(
            index, id=new_id, name=new_name, arguments_text=text or None
        )

    def response(self, response: Mapping[str, Any]) -> list[ProviderEvent]:
        """Events for one non-streamed ``chat.completion`` response."""
        out: list[ProviderEvent] = []
        self._start(response, out)
        for choice in response.get("choices") or ():
            message = choice.get("message") or {}
            content = message.get("content")
            if isinstance(content, str) and content:
                out.append(provider_text_delta(content))
            for index, entry in enumerate(message.get("tool_calls") or ()):
                function = entry.get("function") or {}
                text = function.get("arguments")
                self._calls.append(
                    [
                        index,
                        entry.get("id") or None,
                        function.get("name") or None,
                        text if isinstance(text, str) else "",
                    ]
                )
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = reason
        usage = response.get("usage")
        if isinstance(usage, Mapping):
            self.response_usage = Usage(
                input_tokens=usage.get("prompt_tokens"),
                output_tokens=usage.get("completion_tokens"),
                total_tokens=usage.get("total_tokens"),
            )
        return out

    def finish(self, usage: Usage | None) -> list[ProviderEvent]:
        """Final ``tool_call`` events then ``done``, or ``error`` when incomplete."""
        out: list[ProviderEvent] = []
        if self.finish_reason is None:
            out.append(
                provider_error(
                    ErrorInfo(
                        message="local model stream ended without a finish reason",
                        code="incomplete_stream",
                    )
                )
            )
            return out
        for call in self._calls:
            index, call_id, name, text = call
            if name is None:
                out.append(
                    provider_error(
                        ErrorInfo(
                            message=f"tool call at index {index} has no name",
                            code="incomplete_delta",
                        )
                    )
                )
                return out
            if call_id is None:
                call_id = f"call_{uuid.uuid4().hex}"
                out.append(provider_tool_call_delta(index, id=call_id))
            out.append(provider_tool_call(call_id, name, text))
        reason = _STOP_REASONS.get(self.finish_reason, "other")
        if self._calls and reason == "end_turn":
            reason = "tool_use"
        out.append(provider_done(usage if usage is not None else self.response_usage, reason))
        return out
