"""Anthropic Messages provider on the official ``anthropic`` SDK (PROV-0, ANT-1..6).

The SDK owns HTTP, SSE framing and its error classes; this adapter owns the mapping between
prism's contracts and the Messages wire format:

* request: system text, message mapping (text, images, ``tool_use``/``tool_result``, thinking
  blocks echoed with their signature, ``redacted_thinking`` passed back unchanged), tools, model
  parameters, ``thinking`` configuration (ANT-2, ANT-3);
* response: raw stream events mapped to provider events (ANT-4), usage (ANT-5), fail-closed end of
  stream and stop reasons (ANT-6);
* failures: HTTP statuses, in-stream ``error`` events, transport exceptions and byte bounds become
  one ``error`` event with the codes of PROV-10..12, secrets redacted (PROV-9).

```python
from prism.providers.anthropic import create_anthropic_provider

provider = create_anthropic_provider(api_key="sk-ant-...")          # or ANTHROPIC_API_KEY
provider = create_anthropic_provider(client=anthropic.AsyncAnthropic(max_retries=0))
```

The SDK is an optional extra, imported when a provider is created:
``pip install 'prism-runtime[anthropic]'``.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar

from prism._util import maybe_await
from prism.errors import PrismConfigError, ProviderTransportError
from prism.providers.base import (
    _retry_after_ms,
    _tool_result_payload_text,
    provider_done,
    provider_error,
    provider_message_start,
    provider_thinking_delta,
    provider_tool_call_delta,
    provider_usage,
    tool_call_from_arguments_text,
)
from prism.types import (
    ContentBlock,
    ErrorInfo,
    ImageContent,
    Message,
    ModelCapabilities,
    ProviderContentDelta,
    ProviderEvent,
    ProviderRequest,
    ProviderStopReason,
    ProviderToolCall,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
    Usage,
)

if TYPE_CHECKING:
    import anthropic

    from prism.abort import AbortSignal

__all__ = [
    "ANTHROPIC_DEFAULT_BASE_URL",
    "AnthropicApiKey",
    "AnthropicProvider",
    "create_anthropic_provider",
]

ANTHROPIC_DEFAULT_BASE_URL: Final = "https://api.anthropic.com/v1"
"""Default ``base_url``; requests go to ``<base_url>/messages`` (ANT-1)."""

AnthropicApiKey: TypeAlias = str | Callable[[], "str | Awaitable[str]"]
"""An API key, or a sync/async callable returning one, resolved on each request (PROV-9)."""

_T = TypeVar("_T")

_EXTRA_HINT: Final = "pip install 'prism-runtime[anthropic]'"
_REQUEST_FAILED: Final = "Anthropic request failed"
_MAX_REQUEST_BYTES: Final = 8 * 1024 * 1024
_MAX_EVENT_BYTES: Final = 262_144
_MAX_ERROR_BODY_BYTES: Final = 65_536
_CONNECT_TIMEOUT_S: Final = 10.0
_TIMEOUT_S: Final = 600.0
_OWNED_HEADERS: Final = frozenset({"content-type", "x-api-key", "anthropic-version"})
_STOP_REASONS: Final[Mapping[str, ProviderStopReason]] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
}
# (wire field, Usage field) pairs of ANT-5; total_tokens is left to the accumulator.
_USAGE_FIELDS: Final = (
    ("input_tokens", "input_tokens"),
    ("output_tokens", "output_tokens"),
    ("cache_read_input_tokens", "cache_read_tokens"),
    ("cache_creation_input_tokens", "cache_write_tokens"),
)


def _import_sdk() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise ImportError(
            f"The Anthropic provider needs the 'anthropic' SDK: {_EXTRA_HINT}"
        ) from exc
    return anthropic


# --------------------------------------------------------------------------- factory (ANT-1)


def create_anthropic_provider(
    *,
    api_key: AnthropicApiKey | None = None,
    base_url: str = ANTHROPIC_DEFAULT_BASE_URL,
    id: str = "anthropic",
    client: anthropic.AsyncAnthropic | None = None,
    http_client: Any = None,
    anthropic_version: str = "2023-06-01",
    default_max_tokens: int = 4096,
) -> AnthropicProvider:
    """Create an Anthropic Messages provider (ANT-1, PROV-0, PROV-8, PROV-9).

    Without ``client`` the factory builds ``anthropic.AsyncAnthropic`` itself with
    ``base_url``, ``max_retries=0`` (retry is the runtime's, RETRY-1), an explicit
    ``Timeout(600 s, connect=10 s)`` and ``http_client`` when given; requests then go to
    ``<base_url>/messages``. A host-built ``client`` keeps its own base URL (the SDK's path
    ``/v1/messages``), timeout, retries and auth.

    When neither ``api_key`` nor ``client`` is given, ``ANTHROPIC_API_KEY`` is read from
    ``os.environ`` now (never at import, ARCH-8) and handled like a given key.

    Args:
        api_key: A key, or a sync/async callable returning one, resolved on every request and
            sent as ``x-api-key`` (any ``Authorization`` header is then dropped, so one
            credential goes on the wire); the resolved key is redacted from every
            ``ErrorInfo``. Given together with ``client``, it replaces the client's own
            credential for this provider's requests; without it the client's auth is used as
            is (its ``api_key``/``auth_token`` are still redacted).
        base_url: API root including the version segment (default
            ``https://api.anthropic.com/v1``); ignored when ``client`` is given.
        id: Provider id reported in ``provider_turn_started`` metadata.
        client: A host-built ``anthropic.AsyncAnthropic`` (``max_retries=0`` recommended).
        http_client: An HTTP client for the SDK client this factory builds (the SDK's
            ``http_client=`` argument, e.g. an ``AsyncClient`` with a ``MockTransport`` in
            tests). Not allowed together with ``client``.
        anthropic_version: Value of the provider-owned ``anthropic-version`` header.
        default_max_tokens: ``max_tokens`` when neither ``model.parameters["max_tokens"]`` nor
            ``model.limits.max_output_tokens`` is set (tokens, > 0).

    Returns:
        The provider; it satisfies ``AIProvider``.

    Raises:
        ImportError: the ``anthropic`` SDK is not installed (names the extra to install).
        PrismConfigError: no key (neither ``api_key``, ``client`` nor a non-empty
            ``ANTHROPIC_API_KEY``), an invalid argument, or the SDK rejected the arguments
            (``ERR_PRISM_CONFIG``).
    """
    sdk = _import_sdk()
    if not isinstance(id, str) or not id:
        raise PrismConfigError("create_anthropic_provider: id must be a non-empty string")
    if not isinstance(base_url, str) or not base_url:
        raise PrismConfigError("create_anthropic_provider: base_url must be a non-empty string")
    if not isinstance(anthropic_version, str) or not anthropic_version:
        raise PrismConfigError(
            "create_anthropic_provider: anthropic_version must be a non-empty string"
        )
    if (
        not isinstance(default_max_tokens, int)
        or isinstance(default_max_tokens, bool)
        or default_max_tokens <= 0
    ):
        raise PrismConfigError(
            "create_anthropic_provider: default_max_tokens must be a positive int"
        )
    if api_key is not None and not ((isinstance(api_key, str) and api_key) or callable(api_key)):
        raise PrismConfigError(
            "create_anthropic_provider: api_key must be a non-empty string or a callable"
        )
    if client is not None and http_client is not None:
        raise PrismConfigError(
            "create_anthropic_provider: give http_client only when the factory builds the "
            "client (not together with client)"
        )
    if client is None and api_key is None:
        env_key = os.environ.get("ANTHROPIC_API_KEY")
        if not env_key:
            raise PrismConfigError(
                "create_anthropic_provider: no API key; pass api_key= (or client=) or set "
                "ANTHROPIC_API_KEY"
            )
        api_key = env_key
    if client is None:
        try:
            client = sdk.AsyncAnthropic(
                # A callable key is sent per request; the placeholder keeps the SDK from
                # discovering credentials of its own (environment, profiles).
                api_key=api_key if isinstance(api_key, str) else "",
                base_url=base_url,
                timeout=sdk.Timeout(_TIMEOUT_S, connect=_CONNECT_TIMEOUT_S),
                max_retries=0,
                http_client=http_client,
            )
        except (TypeError, ValueError) as exc:
            raise PrismConfigError(
                f"create_anthropic_provider: the anthropic SDK rejected the arguments: {exc}"
            ) from exc
        path = "messages"
    else:
        path = "/v1/messages"
    return AnthropicProvider(
        sdk=sdk,
        client=client,
        path=path,
        api_key=api_key,
        id=id,
        anthropic_version=anthropic_version,
        default_max_tokens=default_max_tokens,
    )


# --------------------------------------------------------------------------- provider


class AnthropicProvider:
    """Provider for the Anthropic Messages API (ANT-1..6); build it with
    :func:`create_anthropic_provider`.

    Each ``generate`` call is one streaming ``POST`` through the SDK client. The stream is
    mapped to provider events as ANT-4 describes and always ends with exactly one ``done`` or
    ``error`` event (PROV-2); a stream that cannot be proven complete ends with ``error``
    ``incomplete_stream`` (ANT-6).
    """

    __slots__ = (
        "_api_key",
        "_client",
        "_default_max_tokens",
        "_path",
        "_sdk",
        "_stream_cls",
        "_version",
        "id",
    )

    id: str
    """Provider id (default ``"anthropic"``)."""

    def __init__(
        self,
        *,
        sdk: Any,
        client: Any,
        path: str,
        api_key: AnthropicApiKey | None,
        id: str,
        anthropic_version: str,
        default_max_tokens: int,
    ) -> None:
        """Wrap an SDK client; use :func:`create_anthropic_provider` instead."""
        self.id = id
        self._sdk = sdk
        self._client = client
        self._path = path
        self._api_key = api_key
        self._version = anthropic_version
        self._default_max_tokens = default_max_tokens
        self._stream_cls = sdk.AsyncStream[sdk.types.RawMessageStreamEvent]

    def __repr__(self) -> str:
        return f"AnthropicProvider(id={self.id!r})"

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream one attempt for ``request`` (PROV-1, PROV-2, ANT-1..6).

        Failures before or during the stream are reported as one ``error`` event: HTTP status
        ≥ 400 → ``code=<status int>`` with ``retry_after_ms`` from ``Retry-After`` (PROV-11);
        an in-stream ``error`` → ``code=error.type``; timeouts/refused/reset connections →
        ``"timeout"``/``"ECONNREFUSED"``/``"ECONNRESET"`` (PROV-12); a body above 8 MiB or one
        that cannot be built → ``"invalid_request"``; a stream event above 262 144 bytes →
        ``"sse_event_overflow"`` (PROV-10); ``options.structured_output`` →
        ``"unsupported_structured_output"`` (ANT-2). No HTTP call is made for request-side
        failures.

        Args:
            request: The provider request; ``request.signal`` aborts the attempt.

        Yields:
            Provider events (CON-17).

        Raises:
            BaseException: the abort reason of ``request.signal`` (an ``AbortError`` by
                default) after the HTTP response was closed (PROV-4).
            PrismConfigError: a callable ``api_key`` returned something other than a non-empty
                string.
            TypeError: the provider reported usage that breaks CON-11.
        """
        signal = request.signal
        if signal is not None:
            signal.throw_if_aborted()
        options = request.options
        if options is not None and options.structured_output is not None:
            yield provider_error(
                ProviderTransportError(
                    "unsupported_structured_output",
                    "The Anthropic provider does not support options.structured_output; "
                    "use the generate-validate-revise (artifact) loop with this provider",
                )
            )
            return
        try:
            body = _build_body(request, default_max_tokens=self._default_max_tokens)
            size = len(json.dumps(body).encode("utf-8"))
        except _InvalidRequest as exc:
            yield provider_error(
                ProviderTransportError(
                    "invalid_request", f"{_REQUEST_FAILED}: invalid request: {exc}"
                )
            )
            return
        except (TypeError, ValueError) as exc:
            yield provider_error(
                ProviderTransportError(
                    "invalid_request",
                    f"{_REQUEST_FAILED}: invalid request: body is not JSON-serialisable: {exc}",
                )
            )
            return
        if size > _MAX_REQUEST_BYTES:
            yield provider_error(
                ProviderTransportError(
                    "invalid_request",
                    f"{_REQUEST_FAILED}: invalid request: body is {size} bytes, above the "
                    f"{_MAX_REQUEST_BYTES}-byte limit",
                )
            )
            return

        key = await self._resolve_key()
        secrets = self._secrets(key)
        bridge = _AbortBridge(signal)
        stream: Any = None
        mapper = _StreamMapper()
        finishing = False
        try:
            stream = await bridge.run(
                self._client.post(
                    self._path,
                    body=body,
                    cast_to=self._sdk.types.Message,
                    stream=True,
                    stream_cls=self._stream_cls,
                    options={"headers": self._headers(options, key)},
                )
            )
            while True:
                try:
                    event = await bridge.run(stream.__anext__())
                except StopAsyncIteration:
                    break
                overflow = _event_overflow(event)
                if overflow is not None:
                    yield provider_error(
                        ProviderTransportError(
                            "sse_event_overflow",
                            f"Anthropic stream event is {overflow} bytes, above the "
                            f"{_MAX_EVENT_BYTES}-byte limit",
                        )
                    )
                    return
                for out in mapper.feed(event):
                    yield out
            finishing = True
            for out in mapper.finish():
                yield out
        except Exception as exc:
            if signal is not None and signal.aborted:
                signal.throw_if_aborted()
            info = self._error_info(exc)
            if info is None:
                raise
            if mapper.complete and not finishing:
                # message_stop already proved the turn complete; a failure while draining the
                # rest of the body does not undo it.
                for out in mapper.finish():
                    yield out
            else:
                yield provider_error(info, secrets)
        finally:
            bridge.close()
            if stream is not None:
                await _close_stream(stream)

    # ----------------------------------------------------------------- request side

    async def _resolve_key(self) -> str | None:
        key = self._api_key
        if key is None or isinstance(key, str):
            return key
        value = await maybe_await(key())
        if not isinstance(value, str) or not value:
            raise PrismConfigError(
                "Anthropic provider: the api_key callable must return a non-empty string"
            )
        return value

    def _secrets(self, key: str | None) -> tuple[str, ...]:
        found: list[str] = []
        for value in (
            key,
            getattr(self._client, "api_key", None),
            getattr(self._client, "auth_token", None),
        ):
            if isinstance(value, str) and value and value not in found:
                found.append(value)
        return tuple(found)

    def _headers(self, options: Any, key: str | None) -> dict[str, Any]:
        """Per-request headers (ANT-1): host headers, then the provider-owned ones."""
        owned = _OWNED_HEADERS if key is None else _OWNED_HEADERS | {"authorization"}
        headers: dict[str, Any] = {}
        host = options.headers if options is not None else None
        if host:
            for name, value in host.items():
                if name.lower() not in owned:
                    headers[name] = value
        headers["anthropic-version"] = self._version
        if key is not None:
            headers["x-api-key"] = key
            # One credential on the wire: drop any bearer header the SDK derives from its key.
            headers["Authorization"] = self._sdk.Omit()
        return headers

    # ----------------------------------------------------------------- failures

    def _error_info(self, exc: Exception) -> ErrorInfo | None:
        """Map an SDK/transport exception to an ``ErrorInfo`` (PROV-11, PROV-12, ANT-4).

        Returns ``None`` for exceptions this adapter does not own (they propagate).
        """
        sdk = self._sdk
        if isinstance(exc, ProviderTransportError):
            return ErrorInfo(message=str(exc), name=type(exc).__name__, code=exc.code)
        if isinstance(exc, sdk.APIStatusError):
            status = exc.status_code
            if isinstance(status, int) and status >= 400:
                return _http_error_info(exc, status)
            return _stream_error_info(exc)
        if isinstance(exc, sdk.APIResponseValidationError) or isinstance(exc, json.JSONDecodeError):
            return ErrorInfo(
                message=f"{_REQUEST_FAILED}: invalid stream data: {exc}",
                name=type(exc).__name__,
                code="invalid_stream_chunk",
            )
        if isinstance(exc, sdk.APIConnectionError):
            cause = exc.__cause__
            code = _transport_code(cause) if isinstance(cause, Exception) else None
            if isinstance(exc, sdk.APITimeoutError):
                code = "timeout"
            return ErrorInfo(
                message=f"{_REQUEST_FAILED}: {exc}",
                name=type(exc).__name__,
                code=code or "ECONNRESET",
                cause=f"{type(cause).__name__}: {cause}" if cause is not None else None,
            )
        code = _transport_code(exc)
        if code is not None:
            return ErrorInfo(
                message=f"{_REQUEST_FAILED}: {type(exc).__name__}: {exc}",
                name=type(exc).__name__,
                code=code,
            )
        return None


def _transport_code(exc: Exception) -> str | None:
    """PROV-12 code of an ``httpx``-family transport exception, matched by class name so the
    mapping holds whichever HTTP library the installed SDK uses."""
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
        retry_after = _retry_after_ms(response.headers.get("retry-after"))
    message = f"{_REQUEST_FAILED}: {status} {body}".rstrip()
    return ErrorInfo(
        message=message, name=type(exc).__name__, code=status, retry_after_ms=retry_after
    )


def _error_body_text(exc: Any, response: Any) -> str:
    """At most 65 536 bytes of the error body as text (PROV-10, PROV-11)."""
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
    """An ``event: error`` inside a 200 stream: ``code=error.type``, ``message=error.message``
    (ANT-4); an error event without a JSON ``error.type`` is ``invalid_stream_chunk``."""
    err_type = getattr(exc, "type", None)
    message = getattr(exc, "api_message", None)
    if not isinstance(err_type, str) or not err_type:
        return ErrorInfo(
            message=f"{_REQUEST_FAILED}: malformed stream error event: {exc}",
            name="ProviderStreamError",
            code="invalid_stream_chunk",
        )
    return ErrorInfo(
        message=message if isinstance(message, str) and message else err_type,
        name="ProviderStreamError",
        code=err_type,
    )


def _event_overflow(event: Any) -> int | None:
    """Size in bytes of ``event``'s JSON form when above the PROV-10 bound, else ``None``.

    Content deltas are measured exactly only when a cheap upper bound (6 bytes per character
    of their payload plus a fixed envelope) could exceed the bound, so ordinary streams do not
    serialise every fragment twice (ARCH-15).
    """
    if getattr(event, "type", None) == "content_block_delta":
        delta = getattr(event, "delta", None)
        payload = 0
        for attr in ("text", "thinking", "partial_json", "signature"):
            value = getattr(delta, attr, None)
            if isinstance(value, str):
                payload += len(value)
        if payload * 6 + 512 <= _MAX_EVENT_BYTES:
            return None
    dump = getattr(event, "model_dump_json", None)
    if dump is not None:
        text = dump(by_alias=True, exclude_unset=True, warnings=False)
    elif hasattr(event, "json"):  # pragma: no cover - pydantic v1
        text = event.json(by_alias=True, exclude_unset=True)
    else:
        text = json.dumps(event, default=str)
    size = len(text.encode("utf-8"))
    return size if size > _MAX_EVENT_BYTES else None


async def _close_stream(stream: Any) -> None:
    """Close the SDK stream's HTTP response at once (PROV-4, RUN-15)."""
    await stream.close()


# --------------------------------------------------------------------------- abort (PROV-4)


class _AbortBridge:
    """Interrupts an await on the SDK when ``signal`` aborts (PROV-4).

    While the provider waits on the SDK, an abort cancels the waiting task; the cancellation is
    taken back (``Task.uncancel``) and turned into the signal's abort error, so an external
    cancellation is never swallowed. No task is created per event.
    """

    __slots__ = ("_fired", "_remove", "_signal", "_task")

    def __init__(self, signal: AbortSignal | None) -> None:
        self._signal = signal
        self._task: asyncio.Task[Any] | None = None
        self._fired = False
        self._remove = signal.add_listener(self._on_abort) if signal is not None else None

    def _on_abort(self, _reason: Any) -> None:
        task = self._task
        if task is None or self._fired:
            return
        try:
            running = asyncio.current_task()
        except RuntimeError:
            running = None
        if running is task:
            # Aborted from inside the awaited call itself: checked when the await returns.
            return
        self._fired = True
        task.cancel()

    async def run(self, awaitable: Awaitable[_T]) -> _T:
        signal = self._signal
        if signal is None:
            return await awaitable
        if signal.aborted:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            signal.throw_if_aborted()
        task = asyncio.current_task()
        self._task = task
        try:
            result = await awaitable
        except asyncio.CancelledError:
            if self._fired and task is not None:
                self._fired = False
                if task.uncancel() == 0:
                    signal.throw_if_aborted()
            raise
        finally:
            self._task = None
        if signal.aborted:
            signal.throw_if_aborted()
        return result

    def close(self) -> None:
        if self._remove is not None:
            self._remove()
            self._remove = None


# --------------------------------------------------------------------------- stream mapping


class _ToolBlock:
    __slots__ = ("complete", "id", "index", "input", "name", "parts")

    def __init__(self, index: int, id: Any, name: Any, input: Any) -> None:
        self.index = index
        self.id = id if isinstance(id, str) and id else None
        self.name = name if isinstance(name, str) and name else None
        self.input = input
        self.parts: list[str] | None = None
        self.complete = False


class _StreamMapper:
    """Maps raw Messages stream events to provider events (ANT-4..6); O(1) per event."""

    __slots__ = ("_done", "_pending_signature", "_started", "_stop_reason", "_tools", "_usage")

    def __init__(self) -> None:
        self._started = False
        self._done = False
        self._usage: Usage | None = None
        self._stop_reason: Any = None
        self._tools: dict[int, _ToolBlock] = {}
        self._pending_signature: dict[int, str] = {}

    @property
    def complete(self) -> bool:
        """Whether ``message_stop`` arrived (the completion evidence of ANT-6)."""
        return self._done

    def feed(self, event: Any) -> Sequence[ProviderEvent]:
        """Provider events for one SDK stream event (ANT-4)."""
        if self._done:
            return ()  # nothing after message_stop counts (PROV-2)
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
            # A signature given only at block start still closes its thinking part (CON-18).
            return (provider_thinking_delta("", signature=signature),)
        return ()

    def finish(self) -> Sequence[ProviderEvent]:
        """Terminal events once the SDK stream ended (ANT-6)."""
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
            )
        )
        return out


def _merge_usage(base: Usage | None, raw: Any) -> Usage:
    """ANT-5 usage, fields present in ``raw`` winning over ``base`` (ANT-4 message_delta)."""
    values: dict[str, Any] = {}
    for wire, name in _USAGE_FIELDS:
        value = getattr(raw, wire, None)
        if value is None and base is not None:
            value = getattr(base, name)
        values[name] = value
    return Usage(**values)


# --------------------------------------------------------------------------- request body


class _InvalidRequest(Exception):
    """The request cannot be expressed on the wire (PROV-12 ``invalid_request``)."""


def _build_body(request: ProviderRequest, *, default_max_tokens: int = 4096) -> dict[str, Any]:
    """Build the Messages request body for ``request`` (ANT-2, ANT-3).

    Raises:
        _InvalidRequest: an image the model cannot take, an image without a MIME type, or an
            invalid ``compat["thinking"]``.
    """
    model = request.model
    params = model.parameters or {}
    max_tokens: Any = params.get("max_tokens")
    if max_tokens is None and model.limits is not None:
        max_tokens = model.limits.max_output_tokens
    if max_tokens is None:
        max_tokens = default_max_tokens
    preserve = _compat(request, "preserve_thinking") is not False
    # Without declared capabilities the CON-13 defaults apply (text input only).
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
    for name, value in params.items():
        if name != "max_tokens":
            body[name] = value
    options = request.options
    if options is not None and options.extra:
        body.update(options.extra)
    thinking = _compat(request, "thinking")
    if thinking is False:
        body["thinking"] = {"type": "disabled"}
    elif isinstance(thinking, Mapping):
        body["thinking"] = dict(thinking)
    elif thinking is not None:
        raise _InvalidRequest(
            'compat["thinking"] must be a mapping (sent verbatim) or False, '
            f"got {type(thinking).__name__}"
        )
    body["stream"] = True  # the adapter only speaks the streaming protocol (PROV-8)
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
    """System text and wire messages (ANT-2, ANT-3), O(total content)."""
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
                    "content": _tool_result_payload_text(message),
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
        raise _InvalidRequest(f"Model {model} does not accept image input")
    if part.data is not None:
        if not part.mime_type:
            raise _InvalidRequest("An image with base64 data needs a mime_type")
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": part.mime_type, "data": part.data},
        }
    if part.url is not None:
        return {"type": "image", "source": {"type": "url", "url": part.url}}
    raise _InvalidRequest("An image needs data or url")
