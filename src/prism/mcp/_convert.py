"""From MCP to prism: tool names, and what a tool call returned.

Names: a server's tool name may use characters providers refuse (MCP allows ``.``, ``/`` and
more); each character outside ``[A-Za-z0-9_-]`` becomes ``_``, the server's ``prefix`` (if any)
is joined with ``_``, and the result is cut to 64 characters. The server's own name is what is
sent back on a call.

Results (``CallToolResult``):

* ``structuredContent``, when the server sends it, is the result's JSON ``value``;
* otherwise the text of the text parts (and of embedded text resources, and a
  ``resource link: URI`` line per resource link) joined with newlines is the ``value``
  (``None`` when there is none);
* image parts become [`ImageContent`][prism.types.ImageContent] blocks of the result's ``content``
  (base64 ``data`` and ``mime_type``); audio and binary resources, which prism's content has no
  block for, become a text line naming their type and size;
* ``isError`` results become the ``ERR_PRISM_MCP_TOOL_ERROR`` error whose message is that text.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from prism.types import ImageContent

if TYPE_CHECKING:
    from mcp.types import CallToolResult

__all__ = ["ConvertedResult", "convert_result", "prism_tool_name"]

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_-]")


def prism_tool_name(name: str, prefix: str | None) -> str:
    """The prism tool name of server tool ``name`` (see the module docstring)."""
    safe = _UNSAFE.sub("_", name)
    if prefix:
        safe = f"{prefix}_{safe}"
    return safe[:64]


class ConvertedResult:
    """A call result as prism values: ``value``, ``content`` blocks, ``error_text``."""

    __slots__ = ("content", "error_text", "value")

    def __init__(
        self, value: Any, content: tuple[ImageContent, ...], error_text: str | None
    ) -> None:
        self.value = value
        self.content = content
        self.error_text = error_text


def convert_result(result: CallToolResult) -> ConvertedResult:
    """Map one ``CallToolResult`` (see the module docstring)."""
    from mcp.types import (
        AudioContent,
        BlobResourceContents,
        EmbeddedResource,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )
    from mcp.types import ImageContent as McpImage

    texts: list[str] = []
    images: list[ImageContent] = []
    for part in result.content:
        if isinstance(part, TextContent):
            texts.append(part.text)
        elif isinstance(part, McpImage):
            images.append(ImageContent(mime_type=part.mime_type, data=part.data))
        elif isinstance(part, AudioContent):
            texts.append(f"[audio {part.mime_type}, {len(part.data)} base64 characters]")
        elif isinstance(part, EmbeddedResource):
            resource = part.resource
            if isinstance(resource, TextResourceContents):
                texts.append(resource.text)
            elif isinstance(resource, BlobResourceContents):
                texts.append(
                    f"[resource {resource.uri} ({resource.mime_type or 'binary'}), "
                    f"{len(resource.blob)} base64 characters]"
                )
        elif isinstance(part, ResourceLink):
            texts.append(f"resource link: {part.uri}")
    text = "\n".join(texts) if texts else None
    if result.is_error:
        return ConvertedResult(None, tuple(images), text or "the tool reported an error")
    structured = result.structured_content
    value: Any = structured if structured is not None else text
    return ConvertedResult(value, tuple(images), None)
