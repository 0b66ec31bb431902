"""What the provider adapters' wire formats and error mappings share.

The error a request that cannot be expressed on the wire raises, the bound on an encoded request
body, the tool-result payload text every wire format sends for a tool message, the
``Retry-After`` header read into a delay, and an [`ErrorInfo`][prism.types.ErrorInfo] with secrets
replaced.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from typing import Any

from prism.types import ErrorInfo, Message, TextContent, ToolResultContent

__all__ = [
    "EMPTY_TOOL_RESULT_TEXT",
    "MAX_REQUEST_BODY_BYTES",
    "InvalidRequest",
    "encoded_body_size",
    "redact_error_info",
    "retry_after_ms",
    "tool_result_payload_text",
]

MAX_REQUEST_BODY_BYTES = 8 * 1024 * 1024
"""Largest request body the OpenAI and Anthropic adapters send, in UTF-8 bytes of
``json.dumps(body)``; a larger body ends the attempt with ``invalid_request`` before any HTTP call."""


class InvalidRequest(Exception):
    """A request that cannot be expressed on the wire (error code ``invalid_request``)."""


def encoded_body_size(body: object) -> int:
    """UTF-8 bytes of ``json.dumps(body)``.

    Raises:
        InvalidRequest: the body is not JSON-serialisable, or above
            [`MAX_REQUEST_BODY_BYTES`][prism.providers.wire.MAX_REQUEST_BODY_BYTES].
    """
    try:
        size = len(json.dumps(body).encode("utf-8"))
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"body is not JSON-serialisable: {exc}") from None
    if size > MAX_REQUEST_BODY_BYTES:
        raise InvalidRequest(f"body is {size} bytes, above the {MAX_REQUEST_BODY_BYTES}-byte limit")
    return size


EMPTY_TOOL_RESULT_TEXT = "(tool completed with no output)"
"""Tool-result payload sent when a result has no value, no error and no text."""


def tool_result_payload_text(message: Message) -> str:
    """Payload text of a tool-result message for the wire formats.

    Uses the first ``ToolResultContent`` part and the text parts that follow it: an ``error``
    gives ``{"error": {"message", "code"?}}``; a ``str`` result is itself; another non-``None``
    result is compact JSON; else the extra text parts joined by ``"\\n"``; else
    [`EMPTY_TOOL_RESULT_TEXT`][prism.providers.wire.EMPTY_TOOL_RESULT_TEXT]. Never empty.
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


def retry_after_ms(value: str | None, *, now: float | None = None) -> float | None:
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


def _redact_text(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, "[REDACTED]")
    return text


def redact_error_info(info: ErrorInfo, secrets: Sequence[str]) -> ErrorInfo:
    """``info`` with every secret in its ``message`` and ``cause`` replaced by ``[REDACTED]``.

    Args:
        info: The error info.
        secrets: The strings to replace (empty strings are skipped).

    Returns:
        A new ``ErrorInfo`` with the same ``name``, ``code`` and ``retry_after_ms``, or ``info``
        itself when no secret occurs in it.
    """
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
