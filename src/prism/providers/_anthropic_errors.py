"""Failures of the Anthropic provider: SDK and transport exceptions as ``ErrorInfo``.

HTTP statuses, in-stream ``error`` events and transport exceptions
each become one ``ErrorInfo`` with the code the runtime's retry policy reads.
"""

from __future__ import annotations

import codecs
import json
from types import ModuleType
from typing import Any, Final

from prism.errors import ProviderTransportError
from prism.providers.wire import retry_after_ms
from prism.types import ErrorInfo

__all__ = ["REQUEST_FAILED", "error_info"]

REQUEST_FAILED: Final = "Anthropic request failed"
"""The prefix of every failure message."""

_MAX_ERROR_BODY_BYTES: Final = 65_536


def error_info(sdk: ModuleType, exc: Exception) -> ErrorInfo | None:
    """Map an SDK/transport exception to an ``ErrorInfo``.

    Args:
        sdk: The imported ``anthropic`` package (its exception classes are matched).
        exc: The exception raised while sending the request or reading the stream.

    Returns:
        The error, or ``None`` for exceptions this adapter does not own (they propagate).
    """
    if isinstance(exc, ProviderTransportError):
        return ErrorInfo(message=str(exc), name=type(exc).__name__, code=exc.code)
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        if isinstance(status, int) and status >= 400:
            return _http_error_info(exc, status)
        return _stream_error_info(exc)
    if isinstance(exc, sdk.APIResponseValidationError) or isinstance(exc, json.JSONDecodeError):
        return ErrorInfo(
            message=f"{REQUEST_FAILED}: invalid stream data: {exc}",
            name=type(exc).__name__,
            code="invalid_stream_chunk",
        )
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__
        code = _transport_code(cause) if isinstance(cause, Exception) else None
        if isinstance(exc, sdk.APITimeoutError):
            code = "timeout"
        return ErrorInfo(
            message=f"{REQUEST_FAILED}: {exc}",
            name=type(exc).__name__,
            code=code or "ECONNRESET",
            cause=f"{type(cause).__name__}: {cause}" if cause is not None else None,
        )
    code = _transport_code(exc)
    if code is not None:
        return ErrorInfo(
            message=f"{REQUEST_FAILED}: {type(exc).__name__}: {exc}",
            name=type(exc).__name__,
            code=code,
        )
    return None


def _transport_code(exc: Exception) -> str | None:
    """``timeout``, ``ECONNREFUSED`` or ``ECONNRESET`` for an ``httpx``-family transport exception,
    matched by class name so the mapping holds whichever HTTP library the installed SDK uses."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "TransportError" not in names:
        return None
    if "TimeoutException" in names:
        return "timeout"
    if "ConnectError" in names:
        return "ECONNREFUSED"
    return "ECONNRESET"


def _http_error_info(exc: Any, status: int) -> ErrorInfo:
    """``ErrorInfo(code=<status>, message="Anthropic request failed: <status> <body>")``."""
    response = getattr(exc, "response", None)
    body = _error_body_text(exc, response)
    retry_after: float | None = None
    if response is not None:
        retry_after = retry_after_ms(response.headers.get("retry-after"))
    message = f"{REQUEST_FAILED}: {status} {body}".rstrip()
    return ErrorInfo(
        message=message, name=type(exc).__name__, code=status, retry_after_ms=retry_after
    )


def _error_body_text(exc: Any, response: Any) -> str:
    """At most 65 536 bytes of the error body as text."""
    raw: bytes | None = None
    if response is not None:
        try:
            raw = response.content
        except Exception:  # the body was never read (closed early); fall back to the SDK's
            raw = None
    if raw is None:
        body = getattr(exc, "body", None)
        if body is None:
            return ""
        raw = (body if isinstance(body, str) else json.dumps(body, default=str)).encode()
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    return decoder.decode(raw[:_MAX_ERROR_BODY_BYTES], final=False)


def _stream_error_info(exc: Any) -> ErrorInfo:
    """An ``event: error`` inside a 200 stream: ``code=error.type``, ``message=error.message``; an
    error event without a JSON ``error.type`` is ``invalid_stream_chunk``."""
    err_type = getattr(exc, "type", None)
    message = getattr(exc, "api_message", None)
    if not isinstance(err_type, str) or not err_type:
        return ErrorInfo(
            message=f"{REQUEST_FAILED}: malformed stream error event: {exc}",
            name="ProviderStreamError",
            code="invalid_stream_chunk",
        )
    return ErrorInfo(
        message=message if isinstance(message, str) and message else err_type,
        name="ProviderStreamError",
        code=err_type,
    )
