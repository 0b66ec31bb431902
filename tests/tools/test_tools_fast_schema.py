"""The fast valid path of tool-argument validation agrees with jsonschema (TOOL-6, SO-8, ARCH-15).

The fast checker may only ever answer "certainly valid"; every instance it cannot prove valid goes
to jsonschema, so the validator's results and messages are jsonschema's. These tests check that it
never accepts an instance jsonschema rejects, over a grid of schemas and instances, and that it
does take the common tool schemas (so the per-call cost is what the benchmark measures).
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from typing import Any

import jsonschema
import pytest

from prism.abort import AbortController
from prism.tools import json_schema_tool_validator
from prism.tools._fast_schema import fast_checker, fast_schema_checker
from prism.tools.schema import compile_schema, schema_errors
from prism.types import ToolDefinition, ToolExecutionContext

SCHEMAS: list[Any] = [
    {"type": "object", "properties": {"i": {"title": "I", "type": "integer"}}, "required": ["i"],
     "title": "noop"},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
     "required": ["a", "b"], "additionalProperties": False},
    {"type": "object", "properties": {"q": {"type": "string", "minLength": 2, "maxLength": 4},
                                      "n": {"type": "number", "minimum": 0, "exclusiveMaximum": 10}}},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
                                               "maxItems": 2}}},
    {"type": "object", "properties": {"x": {"anyOf": [{"type": "integer"}, {"type": "null"}],
                                            "default": None}}},
    {"type": ["integer", "null"], "minimum": 3},
    {"type": "object", "properties": {"inner": {"type": "object", "properties": {
        "flag": {"type": "boolean"}}, "required": ["flag"]}}},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
     "properties": {"i": {"type": "integer"}}, "required": ["i"]},
    # outside the subset: no fast checker, same answers
    {"type": "object", "properties": {"e": {"enum": [1, 2]}}},
    {"type": "object", "properties": {"p": {"type": "string", "pattern": "^a"}}},
    {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
     "properties": {"i": {"type": "integer"}}},
    {"type": "object", "properties": {"r": {"$ref": "#/$defs/R"}},
     "$defs": {"R": {"type": "object", "properties": {"r": {"$ref": "#/$defs/R"}}}}},
    {"type": "object", "properties": {"r": {"$ref": "#/$defs/R"}},
     "$defs": {"R": {"type": "integer"}, "U": {"type": "string", "pattern": "^a"}}},
    # in the subset: pydantic's shapes of a nested model and of a ``Literal`` field
    {"type": "object", "properties": {"r": {"$ref": "#/$defs/R", "description": "R."}},
     "$defs": {"R": {"type": "integer"}}, "required": ["r"], "additionalProperties": False},
    {"type": "object", "properties": {"r": {"$ref": "#/$defs/R"}}, "$defs": {"R": {
        "type": "object", "title": "R", "required": ["s"], "properties": {
            "s": {"enum": ["a", "ab"], "title": "S", "type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}}}}}},
]
SUBSET = [0, 1, 2, 3, 4, 5, 6, 7, 8, 14, 15]

VALUES: list[Any] = [
    None, True, False, 0, 1, 3, -1, 2.0, 2.5, 10, 10.0, float("inf"), "", "a", "ab", "abcde",
    [], ["x"], ["x", "y", "z"], [1], (1,), {}, {"flag": True}, {"flag": 1}, {"s": "a"},
    {"s": "b", "tags": ["x"]}, {"s": "ab", "tags": [1]}, {"s": 1}, {"r": 1},
]
KEYS = ["i", "a", "b", "q", "n", "tags", "x", "inner", "when", "e", "p", "r", "extra"]


def _instances() -> list[Any]:
    out: list[Any] = list(VALUES)
    for key, value in itertools.product(KEYS, VALUES):
        out.append({key: value})
    for (k1, v1), (k2, v2) in itertools.islice(
        itertools.combinations(itertools.product(KEYS[:5], VALUES[:12]), 2), 0, None, 7
    ):
        out.append({k1: v1, k2: v2})
    return out


@pytest.mark.parametrize("schema", SCHEMAS)
def test_fast_path_never_accepts_what_jsonschema_rejects(schema: Any) -> None:
    """TOOL-6: fast "valid" ⇒ jsonschema finds no error; results always equal jsonschema's."""
    compiled = compile_schema(schema)
    assert not isinstance(compiled, str)
    fast = fast_checker(compiled)
    reference = jsonschema.validators.validator_for(schema)(schema)
    for instance in _instances():
        expected = sorted(
            ("/".join(str(p) for p in e.absolute_path), e.message)
            for e in reference.iter_errors(instance)
        )
        if fast is not None and fast(instance):
            assert expected == [], (schema, instance)
        got = schema_errors(compiled, instance)
        assert [m for _, m in got] == [m for _, m in expected], (schema, instance)


@pytest.mark.parametrize("index", SUBSET)
def test_common_schemas_take_the_fast_path(index: int) -> None:
    """ARCH-15: the schemas ``@prism.tool`` produces are checked without jsonschema."""
    assert fast_checker(compile_schema(SCHEMAS[index])) is not None
    if "$schema" not in SCHEMAS[index]:
        assert fast_schema_checker(SCHEMAS[index]) is not None


def test_pydantic_model_arguments_are_proved_valid_without_jsonschema() -> None:
    """ARCH-15: a nested pydantic model with a ``Literal`` field (``$defs``/``$ref``/``enum``)
    is proved valid by the fast checker; a wrong literal or a missing field is not."""
    from typing import Literal

    from pydantic import BaseModel

    import prism

    class Query(BaseModel):
        status: Literal["open", "shipped"]
        tags: list[str]
        limit: int

    @prism.tool
    async def search(query: Query) -> str:
        """Search.

        Args:
            query: What to find.
        """
        return "ok"

    fast = fast_schema_checker(search.parameters)
    assert fast is not None
    assert fast({"query": {"status": "open", "tags": ["a"], "limit": 3}})
    assert not fast({"query": {"status": "closed", "tags": [], "limit": 3}})
    assert not fast({"query": {"status": "open", "tags": []}})
    assert not fast({"query": {"status": "open", "tags": [], "limit": 3}, "extra": 1})


MALFORMED: list[Any] = [
    {"type": "object", "required": ["a", "a"]},
    {"type": "object", "required": "a"},
    {"type": ["string", "string"]},
    {"type": []},
    {"type": "text"},
    {"type": "string", "minLength": -1},
    {"type": "string", "maxLength": 1.5},
    {"type": "number", "minimum": "0"},
    {"type": "object", "title": 3},
    {"type": "object", "properties": {"a": {"type": "integer", "description": None}}},
    {"type": "array", "items": [{"type": "string"}]},
    {"anyOf": []},
    {"type": "object", "additionalProperties": {"type": "string"}},
]


@pytest.mark.parametrize("schema", SCHEMAS + MALFORMED)
def test_raw_schema_fast_path_only_for_schemas_jsonschema_accepts(schema: Any) -> None:
    """TOOL-6: a schema the jsonschema-free path accepts passes ``check_schema``, and the
    validator's verdicts equal jsonschema's (an invalid schema is still reported as such)."""
    fast = fast_schema_checker(schema)
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
        schema_ok = True
    except jsonschema.SchemaError:
        schema_ok = False
    if fast is not None:
        assert schema_ok, schema
        assert "$schema" not in schema
    validate = json_schema_tool_validator()
    tool = ToolDefinition(name="t", execute=lambda a, c: None, parameters=schema)
    context = ToolExecutionContext(
        session_id="s", run_id="r", tool_call_id="c", signal=AbortController().signal
    )
    for instance in _instances():
        if type(instance) is not dict:
            continue
        got = validate(tool, instance, context)
        if not schema_ok:
            assert got is not None and got.startswith("invalid parameters schema for tool t:")
            continue
        errors = sorted(
            ("".join("/" + str(p) for p in e.absolute_path), e.message)
            for e in cls(schema).iter_errors(instance)
        )
        expected = "; ".join(f"{p}: {m}" if p else m for p, m in errors) if errors else None
        assert got == expected, (schema, instance)


def test_valid_arguments_need_no_jsonschema_import() -> None:
    """ARCH-5 / ARCH-15: a provably valid call never imports jsonschema."""
    code = (
        "import sys\n"
        "from prism.abort import AbortController\n"
        "from prism.tools import json_schema_tool_validator\n"
        "from prism.types import ToolDefinition, ToolExecutionContext\n"
        "schema = {'type': 'object', 'properties': {'i': {'type': 'integer'}}, 'required': ['i']}\n"
        "tool = ToolDefinition(name='t', execute=lambda a, c: None, parameters=schema)\n"
        "ctx = ToolExecutionContext(session_id='s', run_id='r', tool_call_id='c',"
        " signal=AbortController().signal)\n"
        "assert json_schema_tool_validator()(tool, {'i': 1}, ctx) is None\n"
        "print('jsonschema' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("index", [9, 10, 11, 12, 13])
def test_other_schemas_use_jsonschema_only(index: int) -> None:
    assert fast_checker(compile_schema(SCHEMAS[index])) is None
    assert fast_schema_checker(SCHEMAS[index]) is None


def test_validator_messages_unchanged_for_invalid_arguments() -> None:
    """TOOL-6: an invalid call still gets jsonschema's sorted ``pointer: message`` text."""
    validate = json_schema_tool_validator()
    tool = ToolDefinition(name="add", execute=lambda a, c: None, parameters=SCHEMAS[1])
    context = ToolExecutionContext(
        session_id="s", run_id="r", tool_call_id="c", signal=AbortController().signal
    )
    assert validate(tool, {"a": 1, "b": 2}, context) is None
    assert validate(tool, {"a": 1.5, "b": 2}, context) == "/a: 1.5 is not of type 'integer'"
    assert validate(tool, {"a": 1}, context) == "'b' is a required property"
    assert validate(tool, {"a": 1, "b": 2, "c": 3}, context) == (
        "Additional properties are not allowed ('c' was unexpected)"
    )


def test_identity_cache_builds_once_per_object_and_drops_the_oldest() -> None:
    """ARCH-15: compiled schemas and fast checkers are cached per schema object, bounded."""
    from prism.tools._identity_cache import IdentityCache

    built: list[int] = []

    def build(owner: list[int]) -> int:
        built.append(len(owner))
        return len(owner)

    cache: IdentityCache[list[int], int] = IdentityCache(2)
    a, b, c = [1], [1, 2], [1, 2, 3]
    assert cache.get_or_build(a, build) == 1
    assert cache.get_or_build(a, build) == 1
    assert cache.get_or_build([1], build) == 1  # an equal but distinct object is built again
    assert built == [1, 1]
    cache.get_or_build(b, build)
    cache.get_or_build(c, build)
    cache.get_or_build(a, build)  # "a" was the oldest entry and was dropped
    assert built == [1, 1, 2, 3, 1]
