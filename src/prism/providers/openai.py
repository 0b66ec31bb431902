"""OpenAI Chat Completions and OpenAI-compatible servers, on the official ``openai`` SDK.

```python
from prism.providers.openai import create_openai_compatible_provider

provider = create_openai_compatible_provider(base_url="http://127.0.0.1:8080/v1", auth_style="none")
```

Layering: the SDK client (``openai.AsyncOpenAI``) owns HTTP, auth defaults, timeouts and
HTTP status errors (``APIStatusError`` and friends); it is built with ``max_retries=0`` because
retry belongs to the runtime. Prism owns the mapping between its contracts and the Chat Completions
wire format (in ``_openai_wire``), the byte bounds and the translation of failures into ``error``
events. The response body is read through the SDK's public streaming-response API and framed by
prism's bounded SSE reader, because the SDK's own stream iterator hides whether ``data: [DONE]``
arrived (needed to fail closed) and puts no bound on event size.

Assistant tool-call messages: OpenAI documents ``"content": null`` for an assistant message that
has tool calls and no text, and [`create_openai_chat_provider()`][prism.providers.openai.create_openai_chat_provider] sends that. Servers that
validate messages strictly reject ``null`` there — llama-cpp-python's server answers 500 (``Input
should be a valid string``) on the second turn of every tool conversation. An empty string is a
valid value of that field in OpenAI's own message schema, so it is harmless where ``null`` is
accepted, and [`create_openai_compatible_provider()`][prism.providers.openai.create_openai_compatible_provider] sends ``"content": ""`` by default
(``tool_call_content=""``); pass ``tool_call_content=None`` for a server that wants ``null``. No
``transform_body`` is needed for llama.cpp servers any more.

Models whose ``capabilities.streaming`` is ``False`` are called without streaming (no ``stream``
or ``stream_options`` keys); the JSON completion is mapped to the same events. A ``200`` response
with a JSON body to a streaming request is handled the same way.

This module holds the provider and the factories; the wire mapping is in ``_openai_wire`` and
what it shares with the Anthropic adapter (the abort bridge, HTTP status and transport failures)
in ``_sdk``. The ``openai`` package is the extra ``prism-runtime[openai]``; it is imported when a
factory is called, never when this module is imported.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Literal

from prism._util import maybe_await
from prism.errors import PrismConfigError, ProviderTransportError
from prism.providers._openai_wire import (
    MAX_STREAM_HEAD_BYTES,
    ResponseMapper,
    StreamFailure,
    build_request_body,
    map_completion,
    stream_detail,
)
from prism.providers._sdk import MAX_ERROR_BODY_BYTES as MAX_ERROR_BODY_BYTES
from prism.providers._sdk import (
    AbortBridge,
    client_url,
    import_sdk,
    resolve_api_key,
    sdk_error_info,
    sdk_timeout,
)
from prism.providers._sse import SSEDecoder
from prism.providers.base import provider_error
from prism.providers.defaults import ProviderDefaults
from prism.providers.wire import MAX_REQUEST_BODY_BYTES as MAX_REQUEST_BODY_BYTES
from prism.providers.wire import InvalidRequest, encoded_body_size, redact_error_info
from prism.types import (
    ErrorInfo,
    ModelCapabilities,
    ModelConfig,
    ProviderErrorEvent,
    ProviderEvent,
    ProviderRequest,
)

if TYPE_CHECKING:
    import openai

__all__ = [
    "DEFAULT_OPENAI_MODEL",
    "MAX_ERROR_BODY_BYTES",
    "MAX_REQUEST_BODY_BYTES",
    "MAX_RESPONSE_BODY_BYTES",
    "ApiKey",
    "AuthStyle",
    "OpenAICompatibleProvider",
    "TransformBody",
    "create_openai_chat_provider",
    "create_openai_compatible_provider",
]

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
"""Model name of ``create_openai_chat_provider().defaults.model``."""

MAX_RESPONSE_BODY_BYTES = 8 * 1024 * 1024
"""Largest non-streamed JSON completion read, in bytes (streamed events have their own
per-event bound)."""

AuthStyle = Literal["bearer", "api-key", "none"]
"""How the key is sent: ``Authorization: Bearer``, an ``api-key`` header, or not at all."""

ApiKey = str | Callable[[], str | Awaitable[str]]
"""A key, or a sync/async callable returning one, resolved on every request."""

TransformBody = Callable[[dict[str, Any], ProviderRequest], Any]
"""``transform_body(body, request)``, sync or async; returns a replacement body or ``None``."""

_MAX_REMEMBERED_KEYS = 16
_PLACEHOLDER_KEY = "prism-key-set-per-request"


# --------------------------------------------------------------------------- provider


class OpenAICompatibleProvider:
    """Chat Completions provider; build it with the factories of this module."""

    __slots__ = (
        "_api_key",
        "_auth_style",
        "_client",
        "_defaults",
        "_extra_headers",
        "_max_tokens_field",
        "_omit_openai_headers",
        "_prefix",
        "_reasoning_field",
        "_secrets",
        "_strict",
        "_tool_call_content",
        "_transform_body",
        "id",
    )

    id: str
    """Provider id (``"openai"`` or ``"openai-compatible"`` by default)."""

    def __init__(
        self,
        *,
        client: openai.AsyncOpenAI,
        id: str,
        api_key: ApiKey | None,
        auth_style: AuthStyle,
        extra_headers: Mapping[str, str] | None,
        transform_body: TransformBody | None,
        strict_completion: bool,
        reasoning_field: str | None,
        request_failed_prefix: str,
        omit_openai_headers: bool,
        default_model: ModelConfig | None = None,
        max_tokens_field: str = "max_tokens",
        tool_call_content: str | None = None,
    ) -> None:
        """Store the configuration; use the factories instead of calling this directly."""
        self.id = id
        self._defaults = ProviderDefaults(model=default_model)
        self._max_tokens_field = max_tokens_field
        self._client = client
        self._api_key = api_key
        self._auth_style = auth_style
        self._extra_headers = dict(extra_headers or {})
        self._transform_body = transform_body
        self._strict = strict_completion
        self._reasoning_field = reasoning_field
        self._prefix = request_failed_prefix
        self._omit_openai_headers = omit_openai_headers
        self._tool_call_content = tool_call_content
        self._secrets: deque[str] = deque(maxlen=_MAX_REMEMBERED_KEYS)
        if isinstance(api_key, str):
            self._remember(api_key)
        client_key = getattr(client, "api_key", None)
        if isinstance(client_key, str) and client_key != _PLACEHOLDER_KEY:
            self._remember(client_key)

    @property
    def defaults(self) -> ProviderDefaults:
        """The model of ``create_agent(provider=...)`` without ``model=`` (the factory's
        ``model``; ``None`` when an OpenAI-compatible provider was built without one)."""
        return self._defaults

    def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream one Chat Completions attempt as provider events.

        Failures end the stream with one ``error`` event: HTTP statuses carry
        the status int as ``code`` (``retry_after_ms`` from ``Retry-After``); ``timeout``,
        ``ECONNREFUSED``, ``ECONNRESET`` for transport failures; ``invalid_request``,
        ``invalid_stream_chunk``, ``incomplete_stream``, ``incomplete_delta``,
        ``sse_event_overflow``/``sse_buffer_overflow`` otherwise. An ``incomplete_stream``
        message also names the HTTP status, how many events arrived and, when none did, the
        start of the body (a server failing after its ``200`` headers leaves nothing else).
        Secrets are redacted.

        Raises:
            BaseException: the abort reason of ``request.signal`` when it aborts.
        """
        return self._generate(request)

    async def _generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        signal = request.signal
        if signal is not None:
            signal.throw_if_aborted()
        capabilities = request.model.capabilities
        stream = capabilities is None or capabilities.streaming
        try:
            key = await resolve_api_key(self._api_key, "OpenAI-compatible")
            if key is not None:
                self._remember(key)
            body = build_request_body(
                request,
                stream=stream,
                reasoning_field=self._reasoning_field,
                max_tokens_field=self._max_tokens_field,
                tool_call_content=self._tool_call_content,
            )
            if self._transform_body is not None:
                replaced = await maybe_await(self._transform_body(body, request))
                if replaced is not None:
                    body = replaced
            encoded_body_size(body)
            headers = self._headers(request, key)
        except Exception as exc:
            yield self._error(exc)
            return

        mapper = ResponseMapper()
        async with AsyncExitStack() as stack:
            bridge = stack.enter_context(AbortBridge(signal))
            try:
                response = await bridge.run(
                    stack.enter_async_context(
                        self._client.chat.completions.with_streaming_response.create(
                            model=str(body.get("model", "")),
                            messages=[],
                            extra_body=_sdk_body(body),
                            extra_headers=headers,
                        )
                    )
                )
                content_type = str(response.headers.get("content-type", "")).lower()
                chunks = response.iter_bytes().__aiter__()
                detail = ""
                if stream and "json" not in content_type:
                    decoder = SSEDecoder()
                    head = bytearray()
                    data_events = 0
                    while not mapper.done_seen:
                        chunk = await bridge.run(anext(chunks, None))
                        if chunk is not None and len(head) < MAX_STREAM_HEAD_BYTES:
                            head += chunk[: MAX_STREAM_HEAD_BYTES - len(head)]
                        sse_events = decoder.finish() if chunk is None else decoder.feed(chunk)
                        for sse in sse_events:
                            data_events += 1
                            for event in mapper.on_data(sse.data):
                                yield event
                            if mapper.done_seen:
                                break
                        if chunk is None:
                            break
                    status = getattr(response, "status_code", None)
                    detail = stream_detail(
                        status if isinstance(status, int) else None, data_events, bytes(head)
                    )
                else:
                    raw = bytearray()
                    while True:
                        chunk = await bridge.run(anext(chunks, None))
                        if chunk is None:
                            break
                        raw += chunk
                        if len(raw) > MAX_RESPONSE_BODY_BYTES:
                            raise ProviderTransportError(
                                "response_overflow",
                                f"Response body exceeds {MAX_RESPONSE_BODY_BYTES} bytes",
                            )
                    for event in map_completion(mapper, bytes(raw)):
                        yield event
                for event in mapper.finish(strict=self._strict, prefix=self._prefix, detail=detail):
                    yield event
            except Exception as exc:
                if signal is not None and signal.aborted:
                    signal.throw_if_aborted()
                yield self._error(exc)

    def _error(self, exc: BaseException) -> ProviderErrorEvent:
        info = _exception_info(exc, self._prefix, client_url(self._client))
        return provider_error(redact_error_info(info, tuple(self._secrets)))

    # ----------------------------------------------------------------- request side

    def _remember(self, secret: str) -> None:
        if secret and secret not in self._secrets:
            self._secrets.append(secret)

    def _headers(self, request: ProviderRequest, key: str | None) -> dict[str, Any]:
        """Request headers: options, then ``extra_headers``, then provider-owned keys."""
        import openai as sdk

        merged: dict[str, tuple[str, Any]] = {}
        options = request.options
        for source in (options.headers if options is not None else None, self._extra_headers):
            if source:
                for name, value in source.items():
                    merged[name.lower()] = (name, value)
        owned: dict[str, Any] = {"content-type": "application/json"}
        if self._omit_openai_headers:
            owned["openai-organization"] = sdk.Omit()
            owned["openai-project"] = sdk.Omit()
        if self._auth_style == "none":
            owned["authorization"] = sdk.Omit()
        elif key is not None:
            if self._auth_style == "bearer":
                owned["authorization"] = f"Bearer {key}"
            else:
                owned["authorization"] = sdk.Omit()
                owned["api-key"] = key
        for name, value in owned.items():
            merged[name] = (name, value)
        return dict(merged.values())


def _sdk_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body as ``extra_body``: keys the SDK sets itself are omitted when absent."""
    import openai as sdk

    out: dict[str, Any] = dict(body)
    for key in ("model", "messages"):
        if key not in out:
            out[key] = sdk.Omit()
    return out


# --------------------------------------------------------------------------- failures


def _exception_info(exc: BaseException, prefix: str, url: str | None = None) -> ErrorInfo:
    """An exception raised while building, sending or reading the request as ``ErrorInfo``:
    ``invalid_request``, ``invalid_stream_chunk``, what [`sdk_error_info()`][prism.providers._sdk.sdk_error_info]
    makes of it (HTTP status, ``timeout``, ``ECONNREFUSED``, ``ECONNRESET``), or the exception's
    own ``code``; ``prefix`` starts the message (``"<provider id> request failed"``), and a
    transport failure names ``url`` (the server's base URL, credentials masked)."""
    import openai as sdk

    if isinstance(exc, StreamFailure):
        return exc.info
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
    info = sdk_error_info(sdk, exc, prefix, url=url)
    if info is not None:
        return info
    code = getattr(exc, "code", None)
    return ErrorInfo(
        name=type(exc).__name__,
        code=code if isinstance(code, (str, int)) and not isinstance(code, bool) else None,
        message=f"{prefix}: {exc}",
        cause=str(exc.__cause__) if exc.__cause__ is not None else None,
    )


# --------------------------------------------------------------------------- factories


def create_openai_chat_provider(
    *,
    api_key: ApiKey | None = None,
    base_url: str = "https://api.openai.com/v1",
    id: str = "openai",
    client: openai.AsyncOpenAI | None = None,
    http_client: Any = None,
    model: str | ModelConfig = DEFAULT_OPENAI_MODEL,
) -> OpenAICompatibleProvider:
    """Create the OpenAI Chat Completions provider.

    Same provider as [`create_openai_compatible_provider()`][prism.providers.openai.create_openai_compatible_provider] with OpenAI defaults, bearer auth
    and the error prefix ``OpenAI request failed``. When neither ``api_key`` nor ``client`` is
    given, ``OPENAI_API_KEY`` is read from ``os.environ`` now (never at import).

    Args:
        api_key: A ``str`` or a sync/async callable returning one.
        base_url: API base URL.
        id: Provider id.
        client: A host-built ``openai.AsyncOpenAI`` (keeps its own timeout and auth).
        http_client: An ``httpx.AsyncClient`` for the SDK client this factory builds.
        model: The model agents use when ``create_agent`` gets no ``model=`` (``defaults.model``):
            a model name (text and image input, tools, native JSON-Schema output) or a full
            ``ModelConfig``; default [`DEFAULT_OPENAI_MODEL`][prism.providers.openai.DEFAULT_OPENAI_MODEL].

    Raises:
        PrismConfigError: no ``api_key``, no ``client`` and ``OPENAI_API_KEY`` unset or empty
            (the message names ``api_key`` and ``OPENAI_API_KEY``); invalid arguments.
        ImportError: the ``openai`` extra is not installed.
    """
    if api_key is None and client is None:
        api_key = os.environ.get("OPENAI_API_KEY") or None
        if api_key is None:
            raise PrismConfigError(
                "OpenAI provider needs api_key (or a client), or the OPENAI_API_KEY "
                "environment variable"
            )
    return _make_provider(
        base_url=base_url,
        api_key=api_key,
        id=id,
        auth_style="bearer",
        client=client,
        http_client=http_client,
        extra_headers=None,
        transform_body=None,
        strict_completion=True,
        reasoning_field=None,
        request_failed_prefix="OpenAI request failed",
        openai_server=True,
        default_model=_default_model(
            id,
            model,
            ModelCapabilities(input=("text", "image"), tools=True, structured_output="json_schema"),
        ),
    )


def create_openai_compatible_provider(
    *,
    base_url: str,
    api_key: ApiKey | None = None,
    id: str = "openai-compatible",
    auth_style: AuthStyle = "bearer",
    client: openai.AsyncOpenAI | None = None,
    http_client: Any = None,
    extra_headers: Mapping[str, str] | None = None,
    transform_body: TransformBody | None = None,
    strict_completion: bool = True,
    reasoning_field: str | None = None,
    request_failed_prefix: str = "OpenAI-compatible request failed",
    model: str | ModelConfig | None = None,
    tool_call_content: str | None = "",
) -> OpenAICompatibleProvider:
    """Create a provider for a server speaking OpenAI Chat Completions.

    Requests go to ``<base_url without trailing slash>/chat/completions``. No environment variable
    is read: the key of another server must never be sent here.

    Args:
        base_url: Server base URL, e.g. ``"http://127.0.0.1:8080/v1"``.
        api_key: A ``str``, or a sync/async callable returning one, resolved on every request; it is
            redacted from every ``ErrorInfo``. Required unless ``client`` is given or
            ``auth_style="none"``.
        id: Provider id.
        auth_style: ``"bearer"`` (``Authorization: Bearer <key>``), ``"api-key"``
            (``api-key: <key>``) or ``"none"`` (no auth header).
        client: A host-built ``openai.AsyncOpenAI``; it keeps its own timeout and auth (an
            ``api_key`` given here still overrides the auth header per request).
        http_client: An ``httpx.AsyncClient`` (or ``httpx2``) passed to the SDK client this
            factory builds (e.g. with ``httpx.MockTransport`` in tests).
        extra_headers: Headers added after ``request.options.headers``.
        transform_body: ``transform_body(body, request)`` (sync or async) may return a
            replacement body; ``None`` keeps it.
        strict_completion: When true, a stream without ``[DONE]`` or ``finish_reason`` ends with
            ``error`` ``incomplete_stream``.
        reasoning_field: When set (e.g. ``"reasoning_content"``), assistant thinking text is sent
            back under this key; otherwise thinking parts are dropped.
        request_failed_prefix: Prefix of HTTP error messages.
        model: The model agents use when ``create_agent`` gets no ``model=`` (``defaults.model``):
            a model name served by the server (``ModelConfig(provider=id, model=model)`` with
            tool support), or a full ``ModelConfig``. ``None``: agents must pass ``model=``.
        tool_call_content: ``content`` of an assistant message with tool calls and no text:
            ``""`` (default; accepted by OpenAI-compatible servers generally and required by
            llama-cpp-python's server) or ``None`` (JSON ``null``, OpenAI's documented form).

    Raises:
        PrismConfigError: a missing ``api_key`` (unless ``client`` or ``auth_style="none"``), an
            unknown ``auth_style``, an invalid ``base_url``/``id``/``client``, or both ``client``
            and ``http_client``.
        ImportError: the ``openai`` extra is not installed.
    """
    return _make_provider(
        base_url=base_url,
        api_key=api_key,
        id=id,
        auth_style=auth_style,
        client=client,
        http_client=http_client,
        extra_headers=extra_headers,
        transform_body=transform_body,
        strict_completion=strict_completion,
        reasoning_field=reasoning_field,
        request_failed_prefix=request_failed_prefix,
        openai_server=False,
        default_model=_default_model(id, model, ModelCapabilities(tools=True)),
        tool_call_content=tool_call_content,
    )


def _make_provider(
    *,
    base_url: str,
    api_key: ApiKey | None,
    id: str,
    auth_style: AuthStyle,
    client: openai.AsyncOpenAI | None,
    http_client: Any,
    extra_headers: Mapping[str, str] | None,
    transform_body: TransformBody | None,
    strict_completion: bool,
    reasoning_field: str | None,
    request_failed_prefix: str,
    openai_server: bool,
    default_model: ModelConfig | None,
    tool_call_content: str | None = None,
) -> OpenAICompatibleProvider:
    _check_str("base_url", base_url)
    if tool_call_content is not None and not isinstance(tool_call_content, str):
        raise PrismConfigError("tool_call_content must be a str or None")
    _check_str("id", id)
    _check_str("request_failed_prefix", request_failed_prefix)
    _check_str("reasoning_field", reasoning_field, allow_none=True)
    if auth_style not in ("bearer", "api-key", "none"):
        raise PrismConfigError("auth_style must be 'bearer', 'api-key' or 'none'")
    _check_api_key(api_key)
    if api_key is None and client is None and auth_style != "none":
        raise PrismConfigError(
            "api_key is required for an OpenAI-compatible server unless client is given "
            "or auth_style='none'"
        )
    if transform_body is not None and not callable(transform_body):
        raise PrismConfigError("transform_body must be callable")
    sdk = import_sdk("openai", "OpenAI")
    built = client is None
    if client is None:
        client = sdk.AsyncOpenAI(
            api_key=api_key if isinstance(api_key, str) else _PLACEHOLDER_KEY,
            base_url=base_url.rstrip("/"),
            timeout=sdk_timeout(sdk),
            max_retries=0,  # retry is the runtime's
            http_client=http_client,
        )
    elif not isinstance(client, sdk.AsyncOpenAI):
        raise PrismConfigError("client must be an openai.AsyncOpenAI instance")
    elif http_client is not None:
        raise PrismConfigError("give either client or http_client, not both")
    return OpenAICompatibleProvider(
        client=client,
        id=id,
        api_key=api_key,
        auth_style=auth_style,
        extra_headers=extra_headers,
        transform_body=transform_body,
        strict_completion=bool(strict_completion),
        reasoning_field=reasoning_field,
        request_failed_prefix=request_failed_prefix,
        omit_openai_headers=built and not openai_server,
        default_model=default_model,
        # OpenAI's newer models accept only ``max_completion_tokens``; other servers know
        # ``max_tokens``
        max_tokens_field="max_completion_tokens" if openai_server else "max_tokens",
        tool_call_content=tool_call_content,
    )


def _default_model(
    id: str, model: str | ModelConfig | None, capabilities: ModelCapabilities
) -> ModelConfig | None:
    if model is None or isinstance(model, ModelConfig):
        return model
    _check_str("model", model)
    return ModelConfig(provider=id, model=model, capabilities=capabilities)


def _check_str(name: str, value: Any, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, str) or not value:
        raise PrismConfigError(f"{name} must be a non-empty str")


def _check_api_key(api_key: Any) -> None:
    if api_key is None or callable(api_key):
        return
    if not isinstance(api_key, str) or not api_key:
        raise PrismConfigError("api_key must be a non-empty str or a callable returning one")
