"""Tests for ``prism.artifacts``: JSON Schema and pydantic artifact callbacks (SO-8, ARCH-5)."""

from __future__ import annotations

import gc
import subprocess
import sys
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ValidationError, model_validator

from prism.abort import AbortController
from prism.artifacts import ArtifactCallbacks, json_schema_artifact, pydantic_artifact
from prism.errors import PrismConfigError, StructuredOutputError
from prism.loops.contracts import (
    ArtifactContext,
    ArtifactError,
    ArtifactParseResult,
    ArtifactValidation,
    GenerateValidateReviseLoopOptions,
)
from prism.loops.gvr import generate_validate_revise_loop
from prism.types import StructuredOutputOptions

CTX = ArtifactContext("session_a", "run_a", 1, AbortController().signal, {})

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["items"],
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}},
            },
        },
        "a/b~c": {"type": "integer"},
    },
}


async def _call(fn: Any, *args: Any) -> Any:
    out = fn(*args)
    if hasattr(out, "__await__"):
        out = await out
    return out


async def parse(callbacks: ArtifactCallbacks[Any], text: str) -> ArtifactParseResult[Any]:
    return ArtifactParseResult.coerce(await _call(callbacks["parser"], text, CTX))


async def validate(callbacks: ArtifactCallbacks[Any], value: Any) -> ArtifactValidation:
    return ArtifactValidation.coerce(await _call(callbacks["validator"], value, CTX))


# ----------------------------------------------------------------------------- JSON Schema


def test_json_schema_artifact_returns_parser_and_validator_only_by_default() -> None:
    callbacks = json_schema_artifact(SCHEMA)
    assert set(callbacks) == {"parser", "validator"}


def test_json_schema_artifact_native_schema_on_request() -> None:
    callbacks = json_schema_artifact(SCHEMA, structured_output_name="doc")
    assert callbacks["structured_output"] == StructuredOutputOptions(name="doc", schema=SCHEMA)


def test_json_schema_artifact_native_name_is_checked_so1() -> None:
    with pytest.raises(StructuredOutputError):
        json_schema_artifact(SCHEMA, structured_output_name="  ")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"items": []}', {"items": []}),
        ('  \n{"items": []}\n ', {"items": []}),
        ('```json\n{"items": []}\n```', {"items": []}),
        ('```\n[1, 2]\n```', [1, 2]),
        ("```{\"a\": 1}```", {"a": 1}),
        ("3", 3),
    ],
)
async def test_json_parser_decodes_plain_and_fenced_json(text: str, value: Any) -> None:
    assert await parse(json_schema_artifact(SCHEMA), text) == ArtifactParseResult(
        ok=True, value=value
    )


@pytest.mark.parametrize("text", ["{not json", "```json\n{\n```", "null", "Here it is: {}"])
async def test_json_parser_failures_are_parse_failures(text: str) -> None:
    result = await parse(json_schema_artifact(SCHEMA), text)
    assert result.ok is False
    assert result.error


async def test_json_schema_errors_map_to_json_pointers_sorted() -> None:
    result = await validate(
        json_schema_artifact(SCHEMA), {"items": [{"name": 1}, {}], "a/b~c": "x"}
    )
    assert result.ok is False
    assert result.errors == (
        ArtifactError("'x' is not of type 'integer'", path="/a~1b~0c"),
        ArtifactError("1 is not of type 'string'", path="/items/0/name"),
        ArtifactError("'name' is a required property", path="/items/1"),
    )


async def test_json_schema_root_error_has_no_path() -> None:
    result = await validate(json_schema_artifact(SCHEMA), [])
    assert result.errors == (ArtifactError("[] is not of type 'object'", path=None),)


async def test_json_schema_valid_value_is_ok() -> None:
    assert await validate(json_schema_artifact(SCHEMA), {"items": [{"name": "a"}]}) == (
        ArtifactValidation(ok=True)
    )


@pytest.mark.parametrize("schema", [{"type": 12}, ["not", "a", "mapping"]])
def test_json_schema_artifact_rejects_bad_schemas(schema: Any) -> None:
    with pytest.raises(PrismConfigError):
        json_schema_artifact(schema)


def test_json_schema_artifact_unpacks_into_loop_options() -> None:
    opts = GenerateValidateReviseLoopOptions(**json_schema_artifact(SCHEMA), max_revisions=1)
    assert opts.parser is not None and opts.max_revisions == 1
    native = GenerateValidateReviseLoopOptions(
        **json_schema_artifact(SCHEMA, structured_output_name="doc")
    )
    assert native.structured_output == StructuredOutputOptions(name="doc", schema=SCHEMA)
    loop = generate_validate_revise_loop(**json_schema_artifact(SCHEMA, structured_output_name="d"))
    assert loop.structured_output is not None and loop.structured_output.name == "d"


# ----------------------------------------------------------------------------- pydantic


class Item(BaseModel):
    name: str


class Doc(BaseModel):
    title: str
    items: list[Item]


async def test_pydantic_artifact_parses_to_a_model_instance() -> None:
    callbacks = pydantic_artifact(Doc)
    assert set(callbacks) == {"parser", "validator"}
    parsed = await parse(callbacks, '```json\n{"title": "t", "items": [{"name": "a"}]}\n```')
    assert parsed.ok
    assert parsed.value == Doc(title="t", items=[Item(name="a")])
    assert await validate(callbacks, parsed.value) == ArtifactValidation(ok=True)


async def test_pydantic_artifact_reports_field_errors_with_pointers() -> None:
    callbacks = pydantic_artifact(Doc)
    parsed = await parse(callbacks, '{"items": [{"name": 5}]}')
    assert parsed.ok and parsed.value == {"items": [{"name": 5}]}  # handed on for reporting
    result = await validate(callbacks, parsed.value)
    assert result.ok is False
    assert result.errors == (
        ArtifactError("Input should be a valid string", path="/items/0/name"),
        ArtifactError("Field required", path="/title"),
    )


class Counted(BaseModel):
    """A model that counts how often it is validated."""

    runs: ClassVar[list[int]] = []
    age: int

    @model_validator(mode="before")
    @classmethod
    def _count(cls, data: Any) -> Any:
        cls.runs.append(1)
        return data


async def test_pydantic_artifact_validates_each_draft_once() -> None:
    callbacks = pydantic_artifact(Counted)
    Counted.runs.clear()
    parsed = await parse(callbacks, '{"age": "old"}')
    result = await validate(callbacks, parsed.value)
    assert result.ok is False
    assert result.errors == (
        ArtifactError(
            "Input should be a valid integer, unable to parse string as an integer", path="/age"
        ),
    )
    assert len(Counted.runs) == 1
    # the parser's verdict is used once: the same object again is validated again
    assert await validate(callbacks, parsed.value) == result
    assert len(Counted.runs) == 2


async def test_pydantic_artifact_interleaved_drafts_get_their_own_errors() -> None:
    callbacks = pydantic_artifact(Doc)
    first = await parse(callbacks, '{"title": 1, "items": []}')
    second = await parse(callbacks, '{"items": []}')
    other = {"title": "t", "items": [{"name": 5}]}
    assert await validate(callbacks, other) == ArtifactValidation(
        ok=False, errors=(ArtifactError("Input should be a valid string", path="/items/0/name"),)
    )
    assert await validate(callbacks, first.value) == ArtifactValidation(
        ok=False, errors=(ArtifactError("Input should be a valid string", path="/title"),)
    )
    assert await validate(callbacks, second.value) == ArtifactValidation(
        ok=False, errors=(ArtifactError("Field required", path="/title"),)
    )
    assert await validate(callbacks, {"title": "t", "items": []}) == ArtifactValidation(ok=True)


async def test_pydantic_artifact_keeps_no_validation_error_alive() -> None:
    callbacks = pydantic_artifact(Doc)
    await parse(callbacks, '{"items": 3}')
    assert not [o for o in gc.get_objects() if isinstance(o, ValidationError)]


async def test_pydantic_artifact_root_error_has_no_path() -> None:
    callbacks = pydantic_artifact(Doc)
    result = await validate(callbacks, [1])
    assert result.ok is False
    assert [e.path for e in result.errors] == [None]


async def test_pydantic_artifact_invalid_json_is_a_parse_failure() -> None:
    parsed = await parse(pydantic_artifact(Doc), "{title:")
    assert parsed.ok is False and parsed.error and parsed.error.startswith("invalid JSON")


def test_pydantic_artifact_native_schema_from_model() -> None:
    callbacks = pydantic_artifact(Doc, structured_output_name="doc")
    assert callbacks["structured_output"] == StructuredOutputOptions(
        name="doc", schema=Doc.model_json_schema()
    )


@pytest.mark.parametrize("model", [dict, Doc(title="t", items=[]), "Doc"])
def test_pydantic_artifact_rejects_non_models(model: Any) -> None:
    with pytest.raises(PrismConfigError):
        pydantic_artifact(model)


def test_pydantic_artifact_without_pydantic_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pydantic", None)
    with pytest.raises(ImportError, match=r"prism-runtime\[pydantic\]"):
        pydantic_artifact(Doc)


def test_pydantic_artifact_unpacks_into_loop_factory() -> None:
    loop = generate_validate_revise_loop(**pydantic_artifact(Doc), max_revisions=2)
    assert loop.max_revisions == 2


def test_arch5_importing_artifacts_imports_neither_pydantic_nor_jsonschema() -> None:
    code = (
        "import sys, prism.artifacts; "
        "print(sorted(m for m in ('pydantic', 'jsonschema') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert out == "[]"
