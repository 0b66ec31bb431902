"""Anthropic Messages provider on the official ``anthropic`` SDK.

The SDK owns HTTP, SSE framing and its error classes; this adapter owns the mapping between
prism's contracts and the Messages wire format:

* request: system text, message mapping (text, images, ``tool_use``/``tool_result``, thinking
  blocks echoed with their signature, ``redacted_thinking`` passed back unchanged), tools, model
  parameters, ``thinking`` configuration;
* response: raw stream events mapped to provider events, usage, fail-closed end of
  stream and stop reasons;
* failures: HTTP statuses, in-stream ``error`` events, transport exceptions and byte bounds become
  one ``error`` event (HTTP status codes, ``sse_event_overflow``, ``timeout``,
  ``ECONNREFUSED``, ``ECONNRESET``, ``invalid_request``), secrets redacted.

This module holds the provider (one streaming request per attempt, with abort; its headers,
credentials and failures) and the factory; the request body is built in ``_anthropic_wire`` and
stream events are mapped in ``_anthropic_stream``. What it shares with the OpenAI adapter (the
abort bridge, HTTP status and transport failures) is in ``_sdk``.

```python
from prism.providers.anthropic import create_anthropic_provider

provider = create_anthropic_provider(api_key="sk-ant-...")          # or ANTHROPIC_API_KEY
provider = create_anthropic_provider(client=anthropic.AsyncAnthropic(max_retries=0))
```

The SDK is an optional extra, imported when a provider is created:
``pip install 'prism-runtime[anthropic]'``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from prism.errors import PrismConfigError, ProviderTransportError
from prism.providers._anthropic_stream import MAX_EVENT_BYTES, StreamMapper, event_overflow
from prism.providers._anthropic_wire import build_body
from prism.providers._sdk import (
    AbortBridge,
    client_url,
    import_sdk,
    resolve_api_key,
    sdk_error_info,
    sdk_timeout,
)
from prism.providers.base import provider_error
from prism.providers.defaults import ProviderDefaults
from prism.providers.wire import InvalidRequest, encoded_body_size
from prism.types import ErrorInfo, ModelCapabilities, ModelConfig, ProviderEvent, ProviderRequest

if TYPE_CHECKING:
    import anthropic

__all__ = [
    "ANTHROPIC_DEFAULT_BASE_URL",
    "DEFAULT_ANTHROPIC_MODEL",
    "AnthropicApiKey",
    "AnthropicProvider",
    "create_anthropic_provider",
]

ANTHROPIC_DEFAULT_BASE_URL: Final = "https://api.anthropic.com/v1"
"""Default ``base_url``; requests go to ``<base_url>/messages``."""

DEFAULT_ANTHROPIC_MODEL: Final = "claude-haiku-4-5"
"""Model name of ``create_anthropic_provider().defaults.model``."""

AnthropicApiKey: TypeAlias = str | Callable[[], "str | Awaitable[str]"]
"""An API key, or a sync/async callable returning one, resolved on each request."""

_REQUEST_FAILED: Final = "Anthropic request failed"
_OWNED_HEADERS: Final = frozenset({"content-type", "x-api-key", "anthropic-version"})


# --------------------------------------------------------------------------- provider


class AnthropicProvider:
    """Provider for the Anthropic Messages API; build it with
    [`create_anthropic_provider()`][prism.providers.anthropic.create_anthropic_provider].

    Each ``generate`` call is one streaming ``POST`` through the SDK client. The stream is mapped to
    provider events (see ``_anthropic_stream``) and always ends with exactly one ``done`` or
    ``error`` event; a stream that cannot be proven complete ends with ``error``
    ``incomplete_stream``.
    """

    __slots__ = (
        "_api_key",
        "_client",
        "_default_max_tokens",
        "_defaults",
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
        default_model: ModelConfig | None = None,
    ) -> None:
        """Wrap an SDK client; use [`create_anthropic_provider()`][prism.providers.anthropic.create_anthropic_provider] instead."""
        self.id = id
        self._defaults = ProviderDefaults(model=default_model)
        self._sdk = sdk
        self._client = client
        self._path = path
        self._api_key = api_key
        self._version = anthropic_version
        self._default_max_tokens = default_max_tokens
        self._stream_cls = sdk.AsyncStream[sdk.types.RawMessageStreamEvent]

    def __repr__(self) -> str:
        return f"AnthropicProvider(id={self.id!r})"

    @property
    def defaults(self) -> ProviderDefaults:
        """The model of ``create_agent(provider=...)`` without ``model=`` (the factory's
        ``model``)."""
        return self._defaults

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream one attempt for ``request``.

        Failures before or during the stream are reported as one ``error`` event: HTTP status
        ≥ 400 → ``code=<status int>`` with ``retry_after_ms`` from ``Retry-After``;
        an in-stream ``error`` → ``code=error.type``; timeouts/refused/reset connections →
        ``"timeout"``/``"ECONNREFUSED"``/``"ECONNRESET"``; a body above 8 MiB or one
        that cannot be built → ``"invalid_request"``; a stream event above 262 144 bytes →
        ``"sse_event_overflow"``; ``options.structured_output`` →
        ``"unsupported_structured_output"``. No HTTP call is made for request-side
        failures.

        Args:
            request: The provider request; ``request.signal`` aborts the attempt.

        Yields:
            Provider events.

        Raises:
            BaseException: the abort reason of ``request.signal`` (an ``AbortError`` by
                default) after the HTTP response was closed.
            PrismConfigError: a callable ``api_key`` returned something other than a non-empty
                string.
            TypeError: the provider reported a token count that is not a non-negative ``int``.
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
            body = build_body(request, default_max_tokens=self._default_max_tokens)
            encoded_body_size(body)
        except InvalidRequest as exc:
            yield provider_error(
                ProviderTransportError(
                    "invalid_request", f"{_REQUEST_FAILED}: invalid request: {exc}"
                )
            )
            return

        key = await resolve_api_key(self._api_key, "Anthropic")
        secrets = self._secrets(key)
        stream: Any = None
        mapper = StreamMapper()
        finishing = False
        with AbortBridge(signal) as bridge:
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
                    overflow = event_overflow(event)
                    if overflow is not None:
                        yield provider_error(
                            ProviderTransportError(
                                "sse_event_overflow",
                                f"Anthropic stream event is {overflow} bytes, above the "
                                f"{MAX_EVENT_BYTES}-byte limit",
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
                info = _error_info(self._sdk, exc, client_url(self._client))
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
                if stream is not None:
                    await stream.close()

    # ----------------------------------------------------------------- request side

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
        """Per-request headers: host headers, then the provider-owned ones."""
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


# --------------------------------------------------------------------------- failures


def _error_info(sdk: Any, exc: Exception, url: str | None = None) -> ErrorInfo | None:
    """An SDK/transport exception as ``ErrorInfo``; ``None`` for exceptions this adapter does
    not own (they propagate). A transport failure names ``url`` (the server's base URL, its
    credentials masked).

    Beyond [`sdk_error_info()`][prism.providers._sdk.sdk_error_info]: an ``APIStatusError`` below 400 is an
    in-stream ``error`` event, and stream data the SDK cannot parse is ``invalid_stream_chunk``.
    """
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        if not isinstance(status, int) or status < 400:
            return _stream_error_info(exc)
    if isinstance(exc, (sdk.APIResponseValidationError, json.JSONDecodeError)):
        return ErrorInfo(
            message=f"{_REQUEST_FAILED}: invalid stream data: {exc}",
            name=type(exc).__name__,
            code="invalid_stream_chunk",
        )
    return sdk_error_info(sdk, exc, _REQUEST_FAILED, url=url)


def _stream_error_info(exc: Any) -> ErrorInfo:
    """An ``event: error`` inside a 200 stream: ``code=error.type``, ``message=error.message``; an
    error event without a JSON ``error.type`` is ``invalid_stream_chunk``."""
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


# --------------------------------------------------------------------------- factories


def create_anthropic_provider(
    *,
    api_key: AnthropicApiKey | None = None,
    base_url: str = ANTHROPIC_DEFAULT_BASE_URL,
    id: str = "anthropic",
    client: anthropic.AsyncAnthropic | None = None,
    http_client: Any = None,
    anthropic_version: str = "2023-06-01",
    default_max_tokens: int = 4096,
    model: str | ModelConfig = DEFAULT_ANTHROPIC_MODEL,
) -> AnthropicProvider:
    """Create an Anthropic Messages provider.

    Without ``client`` the factory builds ``anthropic.AsyncAnthropic`` itself with
    ``base_url``, ``max_retries=0`` (retry is the runtime's), an explicit
    ``Timeout(600 s, connect=10 s)`` and ``http_client`` when given; requests then go to
    ``<base_url>/messages``. A host-built ``client`` keeps its own base URL (the SDK's path
    ``/v1/messages``), timeout, retries and auth.

    When neither ``api_key`` nor ``client`` is given, ``ANTHROPIC_API_KEY`` is read from
    ``os.environ`` now (never at import) and handled like a given key.

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
        model: The model agents use when ``create_agent`` gets no ``model=`` (``defaults.model``):
            a model name (text and image input, tools) or a full ``ModelConfig``; default
            [`DEFAULT_ANTHROPIC_MODEL`][prism.providers.anthropic.DEFAULT_ANTHROPIC_MODEL].

    Returns:
        The provider; it satisfies ``AIProvider``.

    Raises:
        ImportError: the ``anthropic`` SDK is not installed (names the extra to install).
        PrismConfigError: no key (neither ``api_key``, ``client`` nor a non-empty
            ``ANTHROPIC_API_KEY``), an invalid argument, or the SDK rejected the arguments
            (``ERR_PRISM_CONFIG``).
    """
    sdk = import_sdk("anthropic", "Anthropic")
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
                timeout=sdk_timeout(sdk),
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
        default_model=(
            model
            if isinstance(model, ModelConfig)
            else ModelConfig(
                provider=id,
                model=model,
                capabilities=ModelCapabilities(input=("text", "image"), tools=True),
            )
        ),
    )
