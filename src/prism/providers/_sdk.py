"""What the two SDK adapters (``openai``, ``anthropic``) share.

Both official SDKs are built the same way: an ``httpx``-family HTTP client underneath and the
same exception classes (``APIStatusError``, ``APIConnectionError``, ``APITimeoutError``). This
module holds what the OpenAI and the Anthropic adapter do alike on top of them: importing the
optional SDK, resolving a callable API key, interrupting an SDK await when the request's abort
signal fires ([`AbortBridge`][prism.providers._sdk.AbortBridge]), and turning HTTP statuses and transport failures into
``ErrorInfo`` ([`sdk_error_info()`][prism.providers._sdk.sdk_error_info]; a transport failure names the server's base URL, its
credentials masked by [`shown_url()`][prism.providers._sdk.shown_url]).
"""

from __future__ import annotations

import asyncio
import codecs
import importlib
import json
from collections.abc import Awaitable, Callable
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import urlsplit, urlunsplit

from prism._util import maybe_await
from prism.errors import PrismConfigError, ProviderTransportError
from prism.providers.wire import retry_after_ms
from prism.types import ErrorInfo

if TYPE_CHECKING:
    from prism.abort import AbortSignal

__all__ = [
    "MAX_ERROR_BODY_BYTES",
    "AbortBridge",
    "import_sdk",
    "resolve_api_key",
    "client_url",
    "sdk_error_info",
    "sdk_timeout",
    "shown_url",
    "transport_code",
]

MAX_ERROR_BODY_BYTES: Final = 65_536
"""Most bytes of an HTTP error body put into an error message."""

_T = TypeVar("_T")

_CAUSE_CHAIN_LINKS: Final = 6


def import_sdk(name: str, provider: str) -> ModuleType:
    """Import the optional SDK package ``name`` (``"openai"``, ``"anthropic"``).

    Raises:
        ImportError: the package is not installed; the message names the extra to install,
            ``pip install 'prism-runtime[<name>]'``.
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(
            f"The {provider} provider needs the '{name}' SDK: pip install 'prism-runtime[{name}]'"
        ) from exc


def sdk_timeout(sdk: Any) -> Any:
    """The ``sdk.Timeout`` of an SDK client a factory builds: 600 s in all, 10 s to connect."""
    return sdk.Timeout(600.0, connect=10.0)


async def resolve_api_key(
    api_key: str | Callable[[], str | Awaitable[str]] | None, provider: str
) -> str | None:
    """The key to send on this request: ``api_key`` itself, or what the callable returns.

    Raises:
        PrismConfigError: the callable returned something other than a non-empty ``str``.
    """
    if api_key is None or isinstance(api_key, str):
        return api_key
    value = await maybe_await(api_key())
    if not isinstance(value, str) or not value:
        raise PrismConfigError(
            f"{provider} provider: the api_key callable must return a non-empty string"
        )
    return value


# --------------------------------------------------------------------------- abort


class AbortBridge:
    """Interrupts an await on the SDK when ``signal`` aborts; one bridge per attempt.

    ``with AbortBridge(request.signal) as bridge:`` then ``await bridge.run(awaitable)`` for each
    await on the SDK (sending the request, each read of the response). While such an await is
    pending, an abort cancels the waiting task; the cancellation is taken back
    (``Task.uncancel``) and the signal's abort error is raised in its place, so the SDK closes
    its request cleanly and an external cancellation is never swallowed. An abort outside
    ``run`` (the provider suspended at a ``yield``) is raised by the next ``run``. The listener
    is removed when the ``with`` block ends; no task is created.
    """

    __slots__ = ("_fired", "_remove", "_signal", "_task")

    def __init__(self, signal: AbortSignal | None) -> None:
        self._signal = signal
        self._task: asyncio.Task[Any] | None = None
        self._fired = False
        self._remove = signal.add_listener(self._on_abort) if signal is not None else None

    def __enter__(self) -> AbortBridge:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

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

    def _take_back(self, task: asyncio.Task[Any] | None) -> bool:
        """Withdraw this bridge's cancellation of ``task``; ``True`` when no other one remains."""
        if not self._fired or task is None:
            return False
        self._fired = False
        return task.uncancel() == 0

    async def run(self, awaitable: Awaitable[_T]) -> _T:
        """Await ``awaitable``; the signal's abort error replaces it when the signal aborts.

        Raises:
            BaseException: the abort reason of the signal (an ``AbortError`` by default).
        """
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
            if self._take_back(task):
                signal.throw_if_aborted()
            raise
        finally:
            self._task = None
        self._take_back(task)  # the awaited call swallowed the cancellation
        signal.throw_if_aborted()
        return result

    def close(self) -> None:
        """Remove the abort listener (idempotent)."""
        if self._remove is not None:
            self._remove()
            self._remove = None


# --------------------------------------------------------------------------- failures


def transport_code(exc: BaseException) -> str | None:
    """``timeout``, ``ECONNREFUSED`` or ``ECONNRESET`` for an ``httpx``-family transport exception.

    ``exc`` and up to five exceptions of its cause chain (``__cause__``, else ``__context__``)
    are looked at; classes are matched by name (``TransportError``, ``TimeoutException``,
    ``ConnectError`` in the class's ancestry), so the mapping holds whichever HTTP library
    (``httpx``, ``httpx2``) the installed SDK uses. ``None`` when there is none.
    """
    current: BaseException | None = exc
    for _ in range(_CAUSE_CHAIN_LINKS):
        if current is None:
            break
        names = {cls.__name__ for cls in type(current).__mro__}
        if "TransportError" in names:
            if "TimeoutException" in names:
                return "timeout"
            if "ConnectError" in names:
                return "ECONNREFUSED"
            return "ECONNRESET"
        current = current.__cause__ or current.__context__
    return None


_MASK: Final = "***"


def shown_url(url: str) -> str:
    """``url`` fit for a message: the userinfo's password and every query value replaced by
    ``***`` (``http://user:***@host:8080/v1?key=***``), the fragment dropped. A text that is not
    a URL is returned unchanged."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.scheme or not parts.netloc:
        return url
    netloc = parts.netloc
    userinfo, at, host = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.partition(':')[0]}:{_MASK}@{host}"
    query = "&".join(
        f"{pair.partition('=')[0]}={_MASK}" if "=" in pair else pair
        for pair in parts.query.split("&")
        if pair
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def client_url(client: Any) -> str | None:
    """The base URL of an SDK client (its ``base_url``, without the path's trailing slash),
    shown with [`shown_url()`][prism.providers._sdk.shown_url]; ``None`` when the client has none."""
    base = getattr(client, "base_url", None)
    text = str(base) if base is not None else ""
    if not text:
        return None
    try:
        parts = urlsplit(text)
    except ValueError:
        return shown_url(text)
    # the SDKs keep the base URL with a trailing slash on its path; show it as it was given
    return shown_url(parts._replace(path=parts.path.rstrip("/")).geturl())


def sdk_error_info(
    sdk: Any, exc: BaseException, prefix: str, *, url: str | None = None
) -> ErrorInfo | None:
    """The failures both SDKs raise alike, as ``ErrorInfo``; ``None`` for any other exception.

    Args:
        sdk: The imported SDK package (its exception classes are matched).
        exc: The exception raised while sending the request or reading the response.
        prefix: Start of the message (``"<provider> request failed"``).
        url: The server's base URL, credentials already masked ([`client_url()`][prism.providers._sdk.client_url]): a transport
            failure's message names it (``"<prefix>: cannot reach http://127.0.0.1:8080/v1:
            Connection error."``; ``timed out waiting for URL``, ``connection to URL failed``),
            as the ``prism`` command's reachability check does.

    Returns:
        A [`ProviderTransportError`][prism.errors.ProviderTransportError] with its own code; an
        ``APIStatusError`` with ``code=<status int>``, ``message="<prefix>: <status> <body>"``
        (at most [`MAX_ERROR_BODY_BYTES`][prism.providers._sdk.MAX_ERROR_BODY_BYTES] bytes of the body) and ``retry_after_ms`` from
        ``Retry-After``; ``timeout`` for ``APITimeoutError``; ``timeout``, ``ECONNREFUSED`` or
        ``ECONNRESET`` for a transport exception ([`transport_code()`][prism.providers._sdk.transport_code]); ``ECONNRESET`` for any
        other ``APIConnectionError``. The message of these transport codes names ``url``.
    """
    name = type(exc).__name__
    if isinstance(exc, ProviderTransportError):
        return ErrorInfo(message=str(exc), name=name, code=exc.code)
    if isinstance(exc, sdk.APIStatusError):
        status = int(exc.status_code)
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        return ErrorInfo(
            message=f"{prefix}: {status} {_error_body_text(exc, response)}".rstrip(),
            name=name,
            code=status,
            retry_after_ms=retry_after_ms(headers.get("retry-after")) if headers else None,
        )
    code = "timeout" if isinstance(exc, sdk.APITimeoutError) else transport_code(exc)
    if code is None and not isinstance(exc, sdk.APIConnectionError):
        return None
    cause = exc.__cause__
    # The SDK's own message ("Connection error.") says little; a bare transport exception's
    # class names what failed, and the URL which server.
    detail = str(exc) if isinstance(exc, sdk.APIConnectionError) else f"{name}: {exc}"
    if url:
        if code == "ECONNREFUSED":
            detail = f"cannot reach {url}: {detail}"
        elif code == "timeout":
            detail = f"timed out waiting for {url}: {detail}"
        else:
            detail = f"connection to {url} failed: {detail}"
    return ErrorInfo(
        message=f"{prefix}: {detail}",
        name=name,
        code=code or "ECONNRESET",
        cause=f"{type(cause).__name__}: {cause}" if cause is not None else None,
    )


def _error_body_text(exc: Any, response: Any) -> str:
    """At most [`MAX_ERROR_BODY_BYTES`][prism.providers._sdk.MAX_ERROR_BODY_BYTES] bytes of the error body as text (the SDK's parsed
    ``body`` when the response's bytes were never read)."""
    raw: bytes | None = None
    if response is not None:
        try:
            content = response.content
        except Exception:  # the body was never read (closed early); fall back to the SDK's
            content = None
        if isinstance(content, (bytes, bytearray)):
            raw = bytes(content)
    if raw is None:
        body = getattr(exc, "body", None)
        if body is None:
            return ""
        raw = (body if isinstance(body, str) else json.dumps(body, default=str)).encode()
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    return decoder.decode(raw[:MAX_ERROR_BODY_BYTES], final=False)
