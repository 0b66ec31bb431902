"""Request side of the Anthropic provider: a ``ProviderRequest`` as a Messages request body.

System text, message mapping (text, images, ``tool_use``/``tool_result``, thinking blocks echoed
with their signature, ``redacted_thinking`` passed back unchanged), tools, model parameters and
the ``thinking`` configuration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from prism.providers.wire import InvalidRequest, tool_result_payload_text
from prism.types import (
    ContentBlock,
    ImageContent,
    Message,
    ModelCapabilities,
    ProviderRequest,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
)

__all__ = ["build_body"]


_TOOL_CHOICE: Final = {"auto": "auto", "none": "none", "required": "any"}
"""``ProviderRequestOptions.tool_choice`` as the Messages ``tool_choice.type``."""


def build_body(request: ProviderRequest, *, default_max_tokens: int = 4096) -> dict[str, Any]:
    """Build the Messages request body for ``request``.

    ``max_tokens`` is ``options.max_tokens``, else ``model.parameters["max_tokens"]``, else
    ``model.limits.max_output_tokens``, else ``default_max_tokens``; ``options.tool_choice`` is
    sent when the request has tools (``{"type": "auto" | "none" | "any"}``, ``"required"`` being
    ``any``; a named tool as ``{"type": "tool", "name": ...}``); ``options.extra`` goes last.

    Raises:
        InvalidRequest: an image the model cannot take, an image without a MIME type, or an
            invalid ``compat["thinking"]``.
    """
    model = request.model
    params = model.parameters or {}
    max_tokens: Any = params.get("max_tokens")
    if max_tokens is None and model.limits is not None:
        max_tokens = model.limits.max_output_tokens
    if max_tokens is None:
        max_tokens = default_max_tokens
    options = request.options
    if options is not None and options.max_tokens is not None:
        max_tokens = options.max_tokens
    preserve = _compat(request, "preserve_thinking") is not False
    # Without declared capabilities the model takes text input only.
    images_ok = "image" in (model.capabilities or ModelCapabilities()).input
    system, messages = _map_messages(request.messages, preserve, images_ok, model.model)
    body: dict[str, Any] = {
        "model": model.model,
        "max_tokens": max_tokens,
        "messages": messages,
        "stream": True,
    }
    if system:
        body["system"] = system
    if request.tools:
        tools: list[dict[str, Any]] = []
        for tool in request.tools:
            spec: dict[str, Any] = {"name": tool.name}
            if tool.description is not None:
                spec["description"] = tool.description
            spec["input_schema"] = tool.parameters or {"type": "object"}
            tools.append(spec)
        body["tools"] = tools
        choice = options.tool_choice if options is not None else None
        if isinstance(choice, str):
            body["tool_choice"] = {"type": _TOOL_CHOICE[choice]}
        elif choice is not None:
            body["tool_choice"] = {"type": "tool", "name": choice["name"]}
    for name, value in params.items():
        if name != "max_tokens":
            body[name] = value
    if options is not None and options.extra:
        body.update(options.extra)
    thinking = _compat(request, "thinking")
    if thinking is False:
        body["thinking"] = {"type": "disabled"}
    elif isinstance(thinking, Mapping):
        body["thinking"] = dict(thinking)
    elif thinking is not None:
        raise InvalidRequest(
            'compat["thinking"] must be a mapping (sent verbatim) or False, '
            f"got {type(thinking).__name__}"
        )
    body["stream"] = True  # the adapter only speaks the streaming protocol
    return body


def _compat(request: ProviderRequest, key: str) -> Any:
    """``options.compat[key]`` when set, else ``model.compat[key]``, else ``None``."""
    options = request.options
    if options is not None and options.compat is not None:
        value = options.compat.get(key)
        if value is not None:
            return value
    compat = request.model.compat
    return compat.get(key) if compat is not None else None


def _map_messages(
    messages: Sequence[Message], preserve_thinking: bool, images_ok: bool, model: str
) -> tuple[str, list[dict[str, Any]]]:
    """System text and wire messages, O(total content)."""
    system: list[str] = []
    # (role, tool_result blocks, other blocks) per merged wire message
    merged: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = []
    for message in messages:
        role = message.role
        results: list[dict[str, Any]] = []
        blocks: list[dict[str, Any]] = []
        if role == "system":
            text = "".join(p.text for p in message.content if isinstance(p, TextContent))
            if text:
                system.append(text)
            continue
        if role == "user":
            wire_role = "user"
            for part in message.content:
                if isinstance(part, TextContent):
                    if part.text:
                        blocks.append({"type": "text", "text": part.text})
                elif isinstance(part, ImageContent):
                    blocks.append(_image_block(part, images_ok, model))
        elif role == "assistant":
            wire_role = "assistant"
            _assistant_blocks(message.content, preserve_thinking, blocks)
        elif role == "tool":
            wire_role = "user"
            result = next((p for p in message.content if isinstance(p, ToolResultContent)), None)
            if result is not None:
                block: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": result.tool_call_id,
                    "content": tool_result_payload_text(message),
                }
                if result.error is not None:
                    block["is_error"] = True
                results.append(block)
        else:  # pragma: no cover - Message validates its role
            continue
        if not results and not blocks:
            continue
        if merged and merged[-1][0] == wire_role:
            merged[-1][1].extend(results)
            merged[-1][2].extend(blocks)
        else:
            merged.append((wire_role, results, blocks))
    wire = [{"role": role, "content": results + blocks} for role, results, blocks in merged]
    return "\n\n".join(system), wire


def _assistant_blocks(
    content: Sequence[ContentBlock], preserve_thinking: bool, out: list[dict[str, Any]]
) -> None:
    for part in content:
        if isinstance(part, TextContent):
            if part.text:
                out.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCallContent):
            if part.authority is None or part.authority == "host":
                out.append(
                    {"type": "tool_use", "id": part.id, "name": part.name, "input": part.arguments}
                )
        elif isinstance(part, ThinkingContent) and preserve_thinking:
            if part.redacted_data is not None:
                out.append({"type": "redacted_thinking", "data": part.redacted_data})
            elif part.signature is not None:
                out.append({"type": "thinking", "thinking": part.text, "signature": part.signature})


def _image_block(part: ImageContent, images_ok: bool, model: str) -> dict[str, Any]:
    if not images_ok:
        raise InvalidRequest(f"Model {model} does not accept image input")
    if part.data is not None:
        if not part.mime_type:
            raise InvalidRequest("An image with base64 data needs a mime_type")
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": part.mime_type, "data": part.data},
        }
    if part.url is not None:
        return {"type": "image", "source": {"type": "url", "url": part.url}}
    raise InvalidRequest("An image needs data or url")
