"""Workarounds for ``llama-cpp-python``: what the local provider changes in the library, and why.

Two things the library does not offer are added here, kept apart from the provider so the
provider reads as plain request/stream mapping:

* **No extra weight-buffer types.** llama.cpp's extra buffer types (repacked and AMX kernels)
  crash with a segmentation fault on multi-token batches on some x86 CPUs with AMX (observed
  with llama-cpp-python 0.3.36). ``llama_cpp.Llama`` has no keyword for
  ``llama_model_params.use_extra_bufts``: it builds its parameters from
  ``llama_cpp.llama_cpp.llama_model_default_params()`` while constructing, so that function is
  wrapped ([`patch_default_params()`][prism.providers.llama_cpp._workarounds.patch_default_params]) — for one construction under a lock
  ([`load_llama()`][prism.providers.llama_cpp._workarounds.load_llama]), or for a whole server process (the launcher). For a 135M-parameter model
  the difference in speed is negligible.
* **Token counting, output cap and stop on request.** A streamed chat completion reports no
  usage, the ``chatml-function-calling`` chat format ignores ``max_tokens`` in its automatic
  tool mode, and generation cannot be interrupted from another thread. A subclass of
  ``llama_cpp.Llama`` ([`counting_llama_class()`][prism.providers.llama_cpp._workarounds.counting_llama_class]) wraps ``Llama.generate`` — the one
  generator every completion goes through — and reports to a [`TokenMeter`][prism.providers.llama_cpp._workarounds.TokenMeter].
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from prism.providers.llama_cpp._chat_handler import register_chat_handler
from prism.providers.llama_cpp._model_files import import_llama_cpp
from prism.providers.llama_cpp._wire import PRISM_CHAT_FORMAT
from prism.types import Usage

__all__ = [
    "TokenMeter",
    "counting_llama_class",
    "load_llama",
    "patch_default_params",
]

_PARAMS_LOCK = threading.Lock()
_COUNTING_CLASS: type[Any] | None = None


def patch_default_params() -> Callable[[], None]:
    """Make ``llama_cpp.Llama(...)`` load weights without llama.cpp's extra buffer types.

    Wraps ``llama_cpp.llama_cpp.llama_model_default_params`` so the parameters it returns have
    ``use_extra_bufts = False`` (where that field exists).

    Returns:
        The function that restores the original.
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
    """[`patch_default_params()`][prism.providers.llama_cpp._workarounds.patch_default_params] for the duration of one construction (under a lock)."""
    with _PARAMS_LOCK:
        restore = patch_default_params()
        try:
            yield
        finally:
            restore()


class TokenMeter:
    """Per-request counting and stopping state of one loaded model.

    The provider arms it before a request ([`start()`][prism.providers.llama_cpp._workarounds.TokenMeter.start]) and disarms it after ([`end()`][prism.providers.llama_cpp._workarounds.TokenMeter.end]);
    the counting ``Llama`` subclass reads ``stop``/``max_tokens`` and adds to the counts.
    """

    __slots__ = ("max_tokens", "output_tokens", "prompt_tokens", "stop")

    def __init__(self) -> None:
        self.stop: threading.Event | None = None
        """Set from any thread to end generation at the next token."""
        self.max_tokens: int | None = None
        """Most sampled (non end-of-generation) tokens per completion; ``None`` is no cap."""
        self.prompt_tokens = 0
        """Prompt tokens evaluated since [`start()`][prism.providers.llama_cpp._workarounds.TokenMeter.start], over every completion of the request."""
        self.output_tokens = 0
        """Tokens sampled since [`start()`][prism.providers.llama_cpp._workarounds.TokenMeter.start]."""

    def start(self, stop: threading.Event, max_tokens: int) -> None:
        """Arm the meter for one request: zero the counts, set the stop event and the cap."""
        self.stop = stop
        self.max_tokens = max_tokens
        self.prompt_tokens = 0
        self.output_tokens = 0

    def end(self) -> None:
        """Disarm the meter after a request (the counts stay readable)."""
        self.stop = None
        self.max_tokens = None

    def usage(self) -> Usage:
        """The request's token usage so far."""
        return Usage(
            input_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens,
            total_tokens=self.prompt_tokens + self.output_tokens,
        )


def counting_llama_class() -> type[Any]:
    """``llama_cpp.Llama`` subclass that counts tokens, caps output and stops on request.

    Each instance has a [`TokenMeter`][prism.providers.llama_cpp._workarounds.TokenMeter] as ``prism_meter``. Its ``generate`` counts prompt
    tokens and sampled tokens per request, stops a completion after ``meter.max_tokens`` sampled
    tokens, and ends generation at the next token once ``meter.stop`` is set. A generation ended
    early finishes as ``"length"``. The class is built once, on first use, because it needs the
    library imported.
    """
    global _COUNTING_CLASS
    if _COUNTING_CLASS is not None:
        return _COUNTING_CLASS
    llama_cpp = import_llama_cpp()
    base: type[Any] = llama_cpp.Llama
    low = llama_cpp.llama_cpp

    class _CountingLlama(base):  # type: ignore[misc]
        prism_meter: TokenMeter

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.prism_meter = TokenMeter()
            super().__init__(*args, **kwargs)

        def generate(self, tokens: Sequence[int], *args: Any, **kwargs: Any) -> Iterator[int]:
            meter = self.prism_meter
            meter.prompt_tokens += len(tokens)
            stop = meter.stop
            cap = meter.max_tokens
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
                        meter.output_tokens += 1
                    yield token
            finally:
                inner.close()

    _COUNTING_CLASS = _CountingLlama
    return _COUNTING_CLASS


def load_llama(
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
    """Load a GGUF file as a counting ``Llama`` (blocking).

    Args:
        model_path: The GGUF file.
        n_ctx: Context window in tokens.
        n_threads: Generation threads.
        n_threads_batch: Prompt-evaluation threads.
        chat_format: llama-cpp-python chat format name (``PRISM_CHAT_FORMAT`` registers prism's
            chat handler first).
        extra_buffer_types: ``False`` loads without the extra weight-buffer types (see the module
            docstring).
        seed: Sampling seed; ``None`` keeps the library's default.
        verbose: Let llama.cpp print its logs to stderr.
        llama_kwargs: Further ``Llama`` keyword arguments (they win over the ones above).

    Returns:
        The loaded model (an instance of [`counting_llama_class()`][prism.providers.llama_cpp._workarounds.counting_llama_class]).

    Raises:
        ImportError: llama-cpp-python is not installed.
        ValueError: llama.cpp could not load the file.
    """
    cls = counting_llama_class()
    if chat_format == PRISM_CHAT_FORMAT:
        register_chat_handler()
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
