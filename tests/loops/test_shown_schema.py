"""The artifact loop shows the model its target: the schema of ``pydantic_artifact`` /
``json_schema_artifact`` reaches the model by default — natively where the model declares
structured-output support, else as instructions in the system prompt — and never fails a run
for an unsupported model; tools the loop does not dispatch are reported."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from pydantic import BaseModel

import prism
from prism.artifacts import json_schema_artifact, pydantic_artifact
from prism.errors import AgentRunError
from prism.loops.gvr import generate_validate_revise_loop
from prism.providers.base import provider_done, provider_text_delta
from prism.providers.mock import MockProvider, create_mock_provider
from prism.structured_output import SCHEMA_INSTRUCTIONS
from prism.types import ModelCapabilities, ModelConfig, ProviderRequest, ToolDefinition


class Person(BaseModel):
    name: str
    age: int
    hobbies: list[str]


PLAIN = ModelConfig(provider="mock", model="plain")
NATIVE = ModelConfig(
    provider="mock", model="native", capabilities=ModelCapabilities(structured_output=True)
)
ANSWER = [provider_text_delta('{"name": "Ada", "age": 36, "hobbies": ["chess"]}'), provider_done()]


def _system(request: ProviderRequest) -> str:
    return "\n".join(
        part.text
        for message in request.messages
        if message.role == "system"
        for part in message.content
        if part.type == "text"
    )


async def _run(model: ModelConfig, loop: Any, **agent: Any) -> tuple[Any, MockProvider]:
    provider = create_mock_provider(turns=[ANSWER])
    session = prism.create_agent(model=model, provider=provider, loop=loop, **agent).create_session()
    return await session.run("Describe Ada."), provider


def test_the_factories_attach_the_schema_to_their_callbacks() -> None:
    callbacks = pydantic_artifact(Person)
    assert set(callbacks) == {"parser", "validator"}
    for key in ("parser", "validator"):
        shown = getattr(callbacks[key], "artifact_schema")  # noqa: B009
        assert shown.name == "Person" and shown.schema == Person.model_json_schema()
    loop = generate_validate_revise_loop(**json_schema_artifact({"type": "object"}))
    assert loop.shown_schema is not None and loop.shown_schema.name == "artifact"
    assert generate_validate_revise_loop(validator=lambda v, c: {"ok": True}).shown_schema is None


async def test_a_model_without_native_support_gets_the_schema_as_instructions() -> None:
    result, provider = await _run(PLAIN, generate_validate_revise_loop(**pydantic_artifact(Person)))
    assert isinstance(result.artifact, Person) and result.artifact.name == "Ada"
    request = provider.requests[0]
    assert request.options is None or request.options.structured_output is None
    compact = json.dumps(Person.model_json_schema(), separators=(",", ":"))
    assert SCHEMA_INSTRUCTIONS.format(schema=compact) in _system(request)


async def test_a_model_with_native_support_gets_it_natively_without_instructions() -> None:
    result, provider = await _run(NATIVE, generate_validate_revise_loop(**pydantic_artifact(Person)))
    assert result.status == "succeeded"
    request = provider.requests[0]
    assert request.options is not None and request.options.structured_output is not None
    assert request.options.structured_output.schema == Person.model_json_schema()
    assert "JSON Schema" not in _system(request)


async def test_artifact_loop_mode_keeps_the_schema_to_the_instructions() -> None:
    loop = generate_validate_revise_loop(
        **pydantic_artifact(Person), structured_output_mode="artifact-loop"
    )
    _, provider = await _run(NATIVE, loop, instructions="Be brief.")
    request = provider.requests[0]
    assert request.options is None or request.options.structured_output is None
    system = _system(request)
    assert system.startswith("Be brief.") and "validates against this JSON Schema" in system


async def test_only_an_explicitly_required_native_schema_fails_an_unsupported_model() -> None:
    for loop in (
        generate_validate_revise_loop(**pydantic_artifact(Person, structured_output_name="p")),
        generate_validate_revise_loop(**pydantic_artifact(Person), structured_output_mode="native"),
    ):
        with pytest.raises(AgentRunError) as info:
            await _run(PLAIN, loop)
        assert "does not support native structured output" in str(info.value.result.error)


async def test_tools_the_loop_does_not_dispatch_are_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lookup = ToolDefinition(name="lookup", execute=lambda args, ctx: "x")
    caplog.set_level(logging.WARNING, logger="prism")
    await _run(PLAIN, generate_validate_revise_loop(**pydantic_artifact(Person)), tools=[lookup])
    warned = [r.getMessage() for r in caplog.records if r.name == "prism"]
    assert len(warned) == 1
    assert "does not dispatch tool calls (tool_calls='disabled')" in warned[0]
    assert "lookup" in warned[0] and "tool_calls='bounded'" in warned[0]
    caplog.clear()
    bounded = generate_validate_revise_loop(**pydantic_artifact(Person), tool_calls="bounded")
    await _run(PLAIN, bounded, tools=[lookup])
    await _run(PLAIN, generate_validate_revise_loop(**pydantic_artifact(Person)))
    assert [r for r in caplog.records if r.name == "prism"] == []
