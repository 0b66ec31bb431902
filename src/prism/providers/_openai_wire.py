"""Chat Completions wire mapping: request bodies, responses and the description of an incomplete
stream.

Pure data mapping with no SDK dependency; [`prism.providers.openai`][prism.providers.openai] drives it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from prism.providers.stream_fold import tool_call_from_arguments_text
from prism.providers.wire import InvalidRequest, tool_result_payload_text
from prism.types import (
    ErrorInfo,
    ImageContent,
    Message,
    ModelCapabilities,
    ProviderContentDelta,
    ProviderDone,
    ProviderEvent,
    ProviderRequest,
    ProviderStopReason,
    ProviderToolCall,
    ProviderToolCallDelta,
    ProviderUsage,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
    Usage,
)

__all__ = [
    "MAX_STREAM_HEAD_BYTES",
    "ResponseMapper",
    "StreamFailure",
    "build_request_body",
    "map_completion",
    "map_usage",
    "stream_detail",
]

MAX_STREAM_HEAD_BYTES = 1_024
"""Most bytes of the start of a streamed body quoted when the stream ends incomplete."""


_STOP_REASONS: Mapping[str, ProviderStopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filter",
}


# =========================================================================== request mapping


def _text_of(parts: tuple[Any, ...]) -> str:
    return "".join(p.text for p in parts if isinstance(p, TextContent))


def _image_part(part: ImageContent, capabilities: ModelCapabilities) -> dict[str, Any]:
    if "image" not in capabilities.input:
        raise InvalidRequest("model does not accept image input (capabilities.input)")
    if part.url:
        url = part.url
    elif part.data:
        if not part.mime_type:
            raise InvalidRequest("image data without mime_type")
        url = f"data:{part.mime_type};base64,{part.data}"
    else:
        raise InvalidRequest("image without data or url")
    return {"type": "image_url", "image_url": {"url": url}}


def _map_message(
    message: Message,
    capabilities: ModelCapabilities,
    reasoning_field: str | None,
    tool_call_content: str | None,
) -> dict[str, Any]:
    """Map one message to its Chat Completions form; an assistant message with tool calls
    and no text gets ``tool_call_content`` as its ``content``."""
    role = message.role
    content = message.content
    if role == "system":
        return {"role": "system", "content": _text_of(content)}
    if role == "user":
        if len(content) == 1 and isinstance(content[0], TextContent):
            return {"role": "user", "content": content[0].text}
        parts: list[dict[str, Any]] = []
        for part in content:
            if isinstance(part, TextContent):
                parts.append({"type": "text", "text": part.text})
            elif isinstance(part, ImageContent):
                parts.append(_image_part(part, capabilities))
        return {"role": "user", "content": parts}
    if role == "assistant":
        text = _text_of(content)
        calls = [
            {
                "id": part.id,
                "type": "function",
                "function": {"name": part.name, "arguments": json.dumps(part.arguments)},
            }
            for part in content
            if isinstance(part, ToolCallContent) and part.authority != "provider-hosted"
        ]
        sent = tool_call_content if not text and calls else text
        out: dict[str, Any] = {"role": "assistant", "content": sent}
        if calls:
            out["tool_calls"] = calls
        if reasoning_field:
            reasoning = "".join(p.text for p in content if isinstance(p, ThinkingContent))
            if reasoning:
                out[reasoning_field] = reasoning
        return out
    if role == "tool":
        result = next((p for p in content if isinstance(p, ToolResultContent)), None)
        if result is None:
            raise InvalidRequest("tool message without a tool_result part")
        return {
            "role": "tool",
            "tool_call_id": result.tool_call_id,
            "content": tool_result_payload_text(message),
        }
    raise InvalidRequest(f"unsupported message role {role!r}")


def build_request_body(
    request: ProviderRequest,
    *,
    stream: bool = True,
    reasoning_field: str | None = None,
    tool_call_content: str | None = None,
    max_tokens_field: str = "max_tokens",
) -> dict[str, Any]:
    """Build the Chat Completions body for ``request``, before ``transform_body``.

    ``tool_call_content`` is the ``content`` of an assistant message that has tool calls and no
    text: ``None`` (JSON ``null``, what OpenAI documents) or a string such as ``""``.

    ``model.parameters`` then ``options.extra`` are copied into the body; ``options.max_tokens``
    replaces any ``max_tokens``/``max_completion_tokens`` there under ``max_tokens_field``;
    ``options.tool_choice`` is sent when the request has tools (``"auto"``, ``"none"``,
    ``"required"``; a named tool as ``{"type": "function", "function": {"name": ...}}``).

    Raises:
        InvalidRequest: an image for a model without image input, a tool message without a
            result part, or an unknown role.
    """
    model = request.model
    capabilities = model.capabilities or ModelCapabilities()
    body: dict[str, Any] = {
        "model": model.model,
        "messages": [
            _map_message(m, capabilities, reasoning_field, tool_call_content)
            for m in request.messages
        ],
    }
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        tools: list[dict[str, Any]] = []
        for tool in request.tools:
            function: dict[str, Any] = {"name": tool.name}
            if tool.description is not None:
                function["description"] = tool.description
            function["parameters"] = (
                tool.parameters if tool.parameters is not None else {"type": "object"}
            )
            tools.append({"type": "function", "function": function})
        body["tools"] = tools
    if model.parameters:
        body.update(model.parameters)
    options = request.options
    if options is not None:
        if options.extra:
            body.update(options.extra)
        if options.max_tokens is not None:
            body.pop("max_tokens", None)
            body.pop("max_completion_tokens", None)
            body[max_tokens_field] = options.max_tokens
        choice = options.tool_choice
        if choice is not None and request.tools:
            body["tool_choice"] = (
                choice
                if isinstance(choice, str)
                else {"type": "function", "function": {"name": choice["name"]}}
            )
        structured = options.structured_output
        if structured is not None:
            schema: dict[str, Any] = {"name": structured.name, "schema": structured.schema}
            if structured.strict is not None:
                schema["strict"] = structured.strict
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
    return body


# =========================================================================== response mapping


def map_usage(raw: Mapping[str, Any]) -> Usage | None:
    """Map a Chat Completions ``usage`` object to [`Usage`][prism.providers._openai_wire.Usage].

    Returns:
        ``None`` when none of the mapped fields is present (non-``null``).

    Raises:
        TypeError: a present count is not a non-negative int.
    """
    fields: dict[str, Any] = {}

    def take(name: str, value: Any) -> None:
        if value is not None and name not in fields:
            fields[name] = value

    prompt_details = raw.get("prompt_tokens_details")
    completion_details = raw.get("completion_tokens_details")
    take("input_tokens", raw.get("prompt_tokens"))
    take("output_tokens", raw.get("completion_tokens"))
    take("total_tokens", raw.get("total_tokens"))
    if isinstance(prompt_details, Mapping):
        take("cache_read_tokens", prompt_details.get("cached_tokens"))
        take("cache_write_tokens", prompt_details.get("cache_write_tokens"))
    take("cache_read_tokens", raw.get("prompt_cache_hit_tokens"))
    take("cache_write_tokens", raw.get("cache_creation_input_tokens"))
    if isinstance(completion_details, Mapping):
        take("reasoning_tokens", completion_details.get("reasoning_tokens"))
    if not fields:
        return None
    return Usage(**fields)


def _invalid_chunk(message: str) -> StreamFailure:
    return StreamFailure(
        ErrorInfo(name="ProviderTransportError", code="invalid_stream_chunk", message=message)
    )


class StreamFailure(Exception):
    """Ends the attempt with ``info`` (already shaped; redacted by the caller)."""

    def __init__(self, info: ErrorInfo) -> None:
        super().__init__(info.message)
        self.info = info


class _CallAccumulator:
    __slots__ = ("id", "index", "name", "parts")

    def __init__(self, index: int) -> None:
        self.index = index
        self.id: str | None = None
        self.name: str | None = None
        self.parts: list[str] = []


class ResponseMapper:
    """Turns Chat Completions chunks (or one completion) into provider events."""

    __slots__ = ("calls", "done_seen", "finish_reason", "model", "open_calls", "usage")

    def __init__(self) -> None:
        self.done_seen = False
        self.finish_reason: str | None = None
        self.model: str | None = None
        """The response's ``model`` (the first chunk naming one)."""
        self.usage: Usage | None = None
        self.calls: list[_CallAccumulator] = []
        self.open_calls: dict[int, _CallAccumulator] = {}

    # -- one SSE data payload ------------------------------------------------------------

    def on_data(self, data: str) -> list[ProviderEvent]:
        """Map one SSE ``data`` payload; ``[DONE]`` marks completion.

        Raises:
            StreamFailure: ``invalid_stream_chunk`` for non-JSON / non-object data, or the
                error of an ``error`` object.
        """
        if data.strip() == "[DONE]":
            self.done_seen = True
            return []
        try:
            chunk = json.loads(data)
        except ValueError:
            raise _invalid_chunk(f"Invalid stream chunk (not JSON): {data[:200]}") from None
        if not isinstance(chunk, dict):
            raise _invalid_chunk(f"Invalid stream chunk (not a JSON object): {data[:200]}")
        return self.on_chunk(chunk, delta_key="delta")

    def on_chunk(self, chunk: Mapping[str, Any], *, delta_key: str) -> list[ProviderEvent]:
        """Map one chunk (``delta_key="delta"``) or completion (``"message"``): usage first,
        then per choice reasoning, text and tool-call fragments.

        Raises:
            StreamFailure: the chunk carries an ``error`` object.
            TypeError: a usage count is not a non-negative int.
        """
        error = chunk.get("error")
        if error is not None:
            raise StreamFailure(_error_object_info(error))
        events: list[ProviderEvent] = []
        if self.model is None:
            model = chunk.get("model")
            if isinstance(model, str) and model:
                self.model = model
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            mapped = map_usage(usage)
            if mapped is not None:
                self.usage = mapped
                events.append(ProviderUsage(usage=mapped))
        choices = chunk.get("choices")
        if isinstance(choices, list):
            for choice in choices:
                if not isinstance(choice, Mapping):
                    continue
                finish = choice.get("finish_reason")
                if isinstance(finish, str) and finish:
                    self.finish_reason = finish
                delta = choice.get(delta_key)
                if isinstance(delta, Mapping):
                    self._on_delta(delta, events)
        return events

    def _on_delta(self, delta: Mapping[str, Any], events: list[ProviderEvent]) -> None:
        reasoning = delta.get("reasoning_content")
        if not (isinstance(reasoning, str) and reasoning):
            reasoning = delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            events.append(ProviderContentDelta(content=ThinkingContent(text=reasoning)))
        text = delta.get("content")
        if isinstance(text, str) and text:
            events.append(ProviderContentDelta(content=TextContent(text=text)))
        tool_calls = delta.get("tool_calls")
        if isinstance(tool_calls, list):
            for position, entry in enumerate(tool_calls):
                if isinstance(entry, Mapping):
                    events.append(self._on_tool_call(position, entry))

    def _on_tool_call(self, position: int, entry: Mapping[str, Any]) -> ProviderToolCallDelta:
        raw_index = entry.get("index")
        index = (
            raw_index
            if isinstance(raw_index, int) and not isinstance(raw_index, bool)
            else position
        )
        call_id = entry.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        function = entry.get("function")
        name: str | None = None
        arguments: str | None = None
        if isinstance(function, Mapping):
            raw_name = function.get("name")
            name = raw_name if isinstance(raw_name, str) and raw_name else None
            raw_args = function.get("arguments")
            if isinstance(raw_args, str):
                arguments = raw_args or None
            elif isinstance(raw_args, Mapping):
                arguments = json.dumps(raw_args)
        acc = self.open_calls.get(index)
        if acc is None or (call_id is not None and acc.id is not None and call_id != acc.id):
            acc = _CallAccumulator(index)
            self.open_calls[index] = acc
            self.calls.append(acc)
        if call_id is not None:
            acc.id = call_id
        if name is not None:
            acc.name = name
        if arguments is not None:
            acc.parts.append(arguments)
        return ProviderToolCallDelta(index=index, id=call_id, name=name, arguments_text=arguments)

    # -- end of stream -------------------------------------------------------------------

    def finish(self, *, strict: bool, prefix: str, detail: str = "") -> list[ProviderEvent]:
        """Closing events: synthesized-id fragments, final calls, then ``done``.

        ``detail`` (what the response looked like, e.g. its HTTP status and how many events
        arrived) is appended to the ``incomplete_stream`` message.

        Raises:
            StreamFailure: ``incomplete_stream`` (strict and evidence missing) or
                ``incomplete_delta`` (a call without a name).
        """
        if strict:
            missing = [
                label
                for label, present in (
                    ("[DONE]", self.done_seen),
                    ("finish_reason", self.finish_reason is not None),
                )
                if not present
            ]
            if missing:
                raise StreamFailure(
                    ErrorInfo(
                        name="ProviderTransportError",
                        code="incomplete_stream",
                        message=(
                            f"{prefix}: stream ended without {' and '.join(missing)}"
                            + (f" ({detail})" if detail else "")
                        ),
                    )
                )
        ordered = sorted(self.calls, key=lambda acc: acc.index)
        for acc in ordered:
            if acc.name is None:
                raise StreamFailure(
                    ErrorInfo(
                        name="ProviderTransportError",
                        code="incomplete_delta",
                        message=f"{prefix}: streamed tool call at index {acc.index} has no name",
                    )
                )
        events: list[ProviderEvent] = []
        for acc in ordered:
            if acc.id is None:
                acc.id = f"call_{uuid.uuid4().hex}"
                events.append(ProviderToolCallDelta(index=acc.index, id=acc.id))
        for acc in ordered:
            assert acc.id is not None and acc.name is not None
            call = tool_call_from_arguments_text(acc.id, acc.name, "".join(acc.parts))
            events.append(ProviderToolCall(call=call))
        stop = (
            None if self.finish_reason is None else _STOP_REASONS.get(self.finish_reason, "other")
        )
        events.append(ProviderDone(usage=self.usage, stop_reason=stop, model=self.model))
        return events


def _error_object_info(error: Any) -> ErrorInfo:
    """``ErrorInfo`` for an ``error`` object inside a 200 response."""
    if isinstance(error, Mapping):
        message = error.get("message")
        code = error.get("code")
        if not (isinstance(code, (str, int)) and not isinstance(code, bool) and code != ""):
            code = error.get("type")
            if not (isinstance(code, str) and code):
                code = None
        text = message if isinstance(message, str) and message else json.dumps(error)[:1000]
        return ErrorInfo(name="ProviderStreamError", message=text, code=code)
    return ErrorInfo(name="ProviderStreamError", message=str(error)[:1000])


def map_completion(mapper: ResponseMapper, raw: bytes) -> list[ProviderEvent]:
    """Map a non-streamed JSON completion (or JSON error) to events; counts as complete."""
    try:
        payload = json.loads(raw.decode("utf-8"))
    except ValueError:
        raise _invalid_chunk(f"Invalid completion body (not JSON): {raw[:200]!r}") from None
    if not isinstance(payload, dict):
        raise _invalid_chunk("Invalid completion body (not a JSON object)")
    events = mapper.on_chunk(payload, delta_key="message")
    mapper.done_seen = True
    return events


def stream_detail(status: int | None, data_events: int, head: bytes) -> str:
    """What an incomplete stream looked like, for the ``incomplete_stream`` message.

    A server that fails after it has sent ``200`` and its headers can no longer send an error
    status; some (llama-cpp-python's server among them) just close the stream, leaving the reason
    in their own log. This names the HTTP status, how many ``data`` events arrived and, when none
    did, the start of the body as received (at most [`MAX_STREAM_HEAD_BYTES`][prism.providers._openai_wire.MAX_STREAM_HEAD_BYTES] bytes; the
    provider redacts the message).

    Args:
        status: The response's HTTP status (``None`` when unknown).
        data_events: ``data`` events received.
        head: The first bytes of the body.

    Returns:
        e.g. ``"HTTP 200, no data event received, empty body: the server may have failed after
        sending its headers (its log has the cause)"``.
    """
    parts = [f"HTTP {status}" if status is not None else "HTTP status unknown"]
    if data_events:
        parts.append(f"{data_events} data event{'s' if data_events != 1 else ''} received")
        return ", ".join(parts)
    parts.append("no data event received")
    text = bytes(head[:MAX_STREAM_HEAD_BYTES]).decode("utf-8", errors="replace").strip()
    if text:
        parts.append(f"body began: {text}")
        return ", ".join(parts)
    parts.append("empty body")
    return ", ".join(parts) + (
        ": the server may have failed after sending its headers (its log has the cause)"
    )
