"""``--model`` specs of the ``prism`` command and the providers they build.

Specs:

* ``local`` — the embedded SmolLM2-135M-Instruct (``prism.providers.llama_cpp``);
  ``local:PATH.gguf`` serves another GGUF file in-process;
* ``openai:MODEL`` — OpenAI Chat Completions; key from ``OPENAI_API_KEY``;
* ``anthropic:MODEL`` — Anthropic Messages; key from ``ANTHROPIC_API_KEY``;
* ``openai-compatible:MODEL@BASE_URL`` — any OpenAI-compatible server (no key, or the one in the
  environment variable named by ``--api-key-env``).

A test-only ``mock:FILE.json`` spec replays scripted provider events
(``{"turns": [[<provider event dicts>], ...]}``) through the mock provider; it is not listed in
``--help``.

Keys are read from the environment only, never from the command line, and every key read is
returned in [`ModelChoice.secrets`][prism.cli._models.ModelChoice.secrets] so the command can redact it from everything it prints.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prism.types import (
    ModelCapabilities,
    ModelConfig,
    ModelLimits,
    provider_event_from_dict,
)

__all__ = ["MODEL_SPEC_HELP", "ModelChoice", "ModelSpecError", "parse_model_spec"]

MODEL_SPEC_HELP = (
    "local (default: the embedded SmolLM2-135M-Instruct), local:PATH.gguf, openai:MODEL, "
    "anthropic:MODEL, openai-compatible:MODEL@BASE_URL"
)

OPENAI_ENDPOINT = "https://api.openai.com/v1"
"""Base URL of ``openai:MODEL`` requests."""
ANTHROPIC_ENDPOINT = "https://api.anthropic.com"
"""Base URL of ``anthropic:MODEL`` requests."""
_GGUF_MAGIC = b"GGUF"

_COMPATIBLE = re.compile(r"^(?P<model>.+?)@(?P<url>https?://\S+)$")


class ModelSpecError(ValueError):
    """A ``--model`` value that cannot be used (the message says what is expected)."""


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """A parsed ``--model``: the model config and how to build its provider."""

    spec: str
    """The spec as given."""
    model: ModelConfig
    """Model config handed to the agent (``parameters`` include the command's sampling options)."""
    make_provider: Callable[[], Any] = field(repr=False)
    """Builds the provider; may raise ``ImportError`` (missing extra) or ``PrismConfigError``."""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """API keys read for this model; redacted from all output."""
    native_structured_output: bool = False
    """Whether ``--loop gvr`` may ask the provider to constrain output to the schema natively."""
    endpoint: str | None = None
    """Where the provider sends its requests (named in connection errors; may hold credentials,
    show it through ``prism.cli._store.display_url``)."""


def parse_model_spec(
    spec: str,
    *,
    parameters: Mapping[str, Any] | None = None,
    api_key_env: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ModelChoice:
    """Parse a ``--model`` spec.

    Args:
        spec: One of the forms in the module docstring.
        parameters: Sampling parameters for ``ModelConfig.parameters`` (e.g. ``max_tokens``).
        api_key_env: For ``openai-compatible``: the environment variable holding the key.
        environ: The environment to read keys from (default ``os.environ``).

    Returns:
        The model config and provider factory. Nothing is built or loaded yet, except that a
        ``mock:`` script file is read.

    Raises:
        ModelSpecError: unknown scheme, empty model name, malformed ``openai-compatible`` spec,
            a missing API key, a ``local:PATH`` that is not a GGUF file, or an unreadable mock
            script.
    """
    env = os.environ if environ is None else environ
    params = dict(parameters) if parameters else None
    scheme, sep, rest = spec.partition(":")
    scheme = scheme.strip().lower()
    if scheme == "local":
        return _local(spec, rest if sep else "", params)
    if not sep or not rest.strip():
        raise ModelSpecError(f"invalid --model {spec!r}: expected one of {MODEL_SPEC_HELP}")
    rest = rest.strip()
    if scheme == "openai":
        key = _key(env, "OPENAI_API_KEY", spec)
        if params and "max_tokens" in params:  # newer OpenAI models accept only this name
            params["max_completion_tokens"] = params.pop("max_tokens")
        return ModelChoice(
            spec=spec,
            model=ModelConfig(
                provider="openai",
                model=rest,
                capabilities=ModelCapabilities(
                    input=("text", "image"), tools=True, structured_output="json_schema"
                ),
                parameters=params,
            ),
            make_provider=lambda: _openai().create_openai_chat_provider(api_key=key),
            secrets=(key,),
            native_structured_output=True,
            endpoint=OPENAI_ENDPOINT,
        )
    if scheme == "anthropic":
        key = _key(env, "ANTHROPIC_API_KEY", spec)
        return ModelChoice(
            spec=spec,
            model=ModelConfig(
                provider="anthropic",
                model=rest,
                capabilities=ModelCapabilities(input=("text", "image"), tools=True),
                parameters=params,
            ),
            make_provider=lambda: _anthropic().create_anthropic_provider(api_key=key),
            secrets=(key,),
            endpoint=ANTHROPIC_ENDPOINT,
        )
    if scheme == "openai-compatible":
        match = _COMPATIBLE.match(rest)
        if match is None:
            raise ModelSpecError(
                f"invalid --model {spec!r}: expected openai-compatible:MODEL@BASE_URL, e.g. "
                "openai-compatible:llama3@http://127.0.0.1:8080/v1"
            )
        model, url = match["model"].strip(), match["url"]
        secrets: tuple[str, ...] = ()
        compat_key: str | None = None
        if api_key_env:
            compat_key = _key(env, api_key_env, spec)
            secrets = (compat_key,)

        def make_compatible() -> Any:
            module = _openai()
            # the compatible provider's defaults already suit llama.cpp servers (an empty
            # string, not null, as the content of assistant tool-call messages)
            if compat_key is None:
                return module.create_openai_compatible_provider(base_url=url, auth_style="none")
            return module.create_openai_compatible_provider(base_url=url, api_key=compat_key)

        return ModelChoice(
            spec=spec,
            model=ModelConfig(
                provider="openai-compatible",
                model=model,
                capabilities=ModelCapabilities(tools=True),
                parameters=params,
            ),
            make_provider=make_compatible,
            secrets=secrets,
            endpoint=url,
        )
    if scheme == "mock":
        return _mock(spec, rest, params)
    raise ModelSpecError(
        f"invalid --model {spec!r}: unknown provider {scheme!r}; expected one of {MODEL_SPEC_HELP}"
    )


def _key(env: Mapping[str, str], name: str, spec: str) -> str:
    value = env.get(name, "")
    if not value:
        raise ModelSpecError(f"--model {spec} needs an API key in the environment variable {name}")
    return value


def _openai() -> Any:
    from prism.providers import openai as module

    return module


def _anthropic() -> Any:
    from prism.providers import anthropic as module

    return module


def _local(spec: str, path: str, params: dict[str, Any] | None) -> ModelChoice:
    from prism.providers import llama_cpp

    path = path.strip()
    if path:
        _check_gguf(spec, path)
        model = ModelConfig(
            provider="local",
            model=os.path.basename(path),
            capabilities=ModelCapabilities(tools=True, structured_output=True),
            limits=ModelLimits(max_output_tokens=512),
            parameters=params,
        )
        return ModelChoice(
            spec=spec,
            model=model,
            make_provider=lambda: llama_cpp.create_local_provider(model_path=path),
            native_structured_output=True,
        )
    return ModelChoice(
        spec=spec,
        model=llama_cpp.default_model_config(parameters=params),
        make_provider=llama_cpp.create_local_provider,
        native_structured_output=True,
    )


def _check_gguf(spec: str, path: str) -> None:
    """``local:PATH`` must name a GGUF model file (checked by its magic bytes, not its name)."""
    try:
        with open(path, "rb") as handle:
            magic = handle.read(len(_GGUF_MAGIC))
    except IsADirectoryError:
        raise ModelSpecError(f"invalid --model {spec!r}: {path} is a directory") from None
    except OSError as exc:
        raise ModelSpecError(
            f"invalid --model {spec!r}: cannot read {path}: {exc.strerror or exc}"
        ) from None
    if magic != _GGUF_MAGIC:
        raise ModelSpecError(
            f"invalid --model {spec!r}: {path} is not a GGUF model file (local:PATH.gguf)"
        )


def _mock(spec: str, path: str, params: dict[str, Any] | None) -> ModelChoice:
    try:
        with open(path, encoding="utf-8") as handle:
            script = json.load(handle)
        turns = [[provider_event_from_dict(item) for item in turn] for turn in script["turns"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelSpecError(f"invalid --model {spec!r}: cannot read mock script: {exc}") from None

    def make_mock() -> Any:
        from prism.providers.mock import create_mock_provider

        return create_mock_provider(turns=turns)

    return ModelChoice(
        spec=spec,
        model=ModelConfig(
            provider="mock",
            model=os.path.basename(path),
            capabilities=ModelCapabilities(tools=True, structured_output=True),
            parameters=params,
        ),
        make_provider=make_mock,
        native_structured_output=bool(script.get("native_structured_output", False)),
    )
