"""Failures of the OpenAI-compatible provider: SDK, httpx and prism exceptions as ``ErrorInfo``.

HTTP statuses keep a bounded part of the error body and the ``Retry-After`` delay;
transport exceptions anywhere in the cause chain become ``timeout``,
``ECONNREFUSED`` or ``ECONNRESET``.
"""

from __future__ import annotations

import sys
from typing import Any

from prism.errors import ProviderTransportError
from prism.providers._openai_wire import InvalidRequest, StreamFailure
from prism.providers.wire import retry_after_ms
from prism.types import ErrorInfo

__all__ = ["MAX_ERROR_BODY_BYTES", "MAX_STREAM_HEAD_BYTES", "exception_info", "stream_detail"]

MAX_ERROR_BODY_BYTES = 65_536
"""Most bytes of an HTTP error body put into an error message."""


MAX_STREAM_HEAD_BYTES = 1_024
"""Most bytes of the start of a streamed body quoted when the stream ends incomplete."""


def stream_detail(status: int | None, data_events: int, head: bytes) -> str:
    """What an incomplete stream looked like, for the ``incomplete_stream`` message.

    A server that fails after it has sent ``200`` and its headers can no longer send an error
    status; some (llama-cpp-python's server among them) just close the stream, leaving the reason
    in their own log. This names the HTTP status, how many ``data`` events arrived and, when none
    did, the start of the body as received (at most :data:`MAX_STREAM_HEAD_BYTES` bytes; the
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


def _class_named(module_name: str, attr: str) -> type[BaseException] | None:
    module = sys.modules.get(module_name)
    cls = getattr(module, attr, None) if module is not None else None
    return cls if isinstance(cls, type) and issubclass(cls, BaseException) else None


def _transport_code(exc: BaseException) -> str | None:
    """``timeout``, ``ECONNREFUSED`` or ``ECONNRESET`` for an httpx/httpx2 transport exception
    anywhere in the cause chain, else ``None``."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 6:
        for module in ("httpx2", "httpx"):
            timeout = _class_named(module, "TimeoutException")
            if timeout is not None and isinstance(current, timeout):
                return "timeout"
            connect = _class_named(module, "ConnectError")
            if connect is not None and isinstance(current, connect):
                return "ECONNREFUSED"
            transport = _class_named(module, "TransportError")
            if transport is not None and isinstance(current, transport):
                return "ECONNRESET"
        current = current.__cause__ or current.__context__
        seen += 1
    return None


def _read_error_body(response: Any) -> str:
    try:
        content = response.content
    except Exception:  # a response that was not read: nothing to show
        return ""
    if not isinstance(content, (bytes, bytearray)):
        return ""
    return bytes(content[:MAX_ERROR_BODY_BYTES]).decode("utf-8", errors="replace")


def exception_info(exc: BaseException, prefix: str) -> ErrorInfo:
    """Translate an SDK, httpx or prism exception into an ``ErrorInfo``.

    The SDK and httpx classes are looked up in ``sys.modules``, so nothing is imported here.

    Args:
        exc: The exception raised while building, sending or reading the request.
        prefix: Start of the message (``"<provider id> request failed"``).

    Returns:
        The error: HTTP status code with the (bounded) body and ``retry_after_ms``, a transport
        code (``timeout``, ``ECONNREFUSED``, ``ECONNRESET``), ``invalid_request``,
        ``invalid_stream_chunk``, or the exception's own ``code``.
    """
    openai_mod = sys.modules.get("openai")
    status_error = getattr(openai_mod, "APIStatusError", None)
    timeout_error = getattr(openai_mod, "APITimeoutError", None)
    connection_error = getattr(openai_mod, "APIConnectionError", None)
    name = type(exc).__name__
    if isinstance(exc, StreamFailure):
        return exc.info
    if isinstance(exc, ProviderTransportError):
        return ErrorInfo(name=name, code=exc.code, message=str(exc))
    if isinstance(exc, UnicodeDecodeError):
        return ErrorInfo(
            name="ProviderTransportError",
            code="invalid_stream_chunk",
            message=f"{prefix}: response is not valid UTF-8",
        )
    if isinstance(exc, InvalidRequest):
        return ErrorInfo(
            name="ProviderTransportError",
            code="invalid_request",
            message=f"{prefix}: invalid request: {exc}",
        )
    if status_error is not None and isinstance(exc, status_error):
        response = exc.response
        status = int(response.status_code)
        body = _read_error_body(response)
        return ErrorInfo(
            name=name,
            code=status,
            message=f"{prefix}: {status} {body}".rstrip(),
            retry_after_ms=retry_after_ms(response.headers.get("retry-after")),
        )
    cause = exc.__cause__
    cause_text = str(cause) if cause is not None else None
    if timeout_error is not None and isinstance(exc, timeout_error):
        return ErrorInfo(name=name, code="timeout", message=f"{prefix}: {exc}", cause=cause_text)
    code = _transport_code(exc)
    if code is not None:
        return ErrorInfo(name=name, code=code, message=f"{prefix}: {exc}", cause=cause_text)
    if connection_error is not None and isinstance(exc, connection_error):
        return ErrorInfo(name=name, code="ECONNRESET", message=f"{prefix}: {exc}", cause=cause_text)
    code_attr = getattr(exc, "code", None)
    return ErrorInfo(
        name=name,
        code=code_attr
        if isinstance(code_attr, (str, int)) and not isinstance(code_attr, bool)
        else None,
        message=f"{prefix}: {exc}",
        cause=cause_text,
    )
