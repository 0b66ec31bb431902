"""Tool-argument validation: the built-in JSON Schema validator and the effective validator
(TOOL-6).
"""

from __future__ import annotations

from typing import Any

import pytest
from tools_support import Recorder, dispatch, echo_tool, make_call, make_context

from prism.errors import (
    PrismConfigError,
)
from prism.redaction import create_secret_redactor
from prism.tools import (
    json_schema_tool_validator,
    resolve_tool_validator,
)

# =========================================================================== TOOL-6


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "items": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}}}},
        "a/b~c": {"type": "integer"},
    },
    "required": ["name"],
    "additionalProperties": False,
}


async def test_tool6_builtin_validator_messages_sorted_with_pointers() -> None:
    """TOOL-6: '; '-joined '<pointer>: <message>' sorted by (pointer, message); root has no pointer."""
    validator = json_schema_tool_validator()
    t = echo_tool(parameters=SCHEMA)
    message = validator(t, {"items": [{"id": "x"}], "a/b~c": "s", "extra": 1}, make_context())
    assert message == (
        "'name' is a required property; "
        "Additional properties are not allowed ('extra' was unexpected); "
        "/a~1b~0c: 's' is not of type 'integer'; "
        "/items/0/id: 'x' is not of type 'integer'"
    )
    assert validator(t, {"name": "n"}, make_context()) is None


async def test_tool6_root_errors_sorted_by_message() -> None:
    """TOOL-6: errors at the same pointer are ordered by message."""
    validator = json_schema_tool_validator()
    schema = {"type": "object", "required": ["b", "a"]}
    message = validator(echo_tool(parameters=schema), {}, make_context())
    assert message == "'a' is a required property; 'b' is a required property"


async def test_tool6_builtin_is_default_and_blocks_with_redacted_message() -> None:
    """TOOL-6/TOOL-3 step 8: tool_validator=None uses the built-in; the message is redacted."""
    rec = Recorder()
    t = echo_tool(parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
    result = await dispatch(
        make_call(arguments={"n": "sk-xyz"}), [t], rec, redactor=create_secret_redactor(["sk-xyz"])
    )
    assert result.error is not None
    assert result.error.code == "validation_failed"
    assert result.error.message == "/n: '[REDACTED]' is not of type 'integer'"
    assert rec.types == ["tool_execution_blocked"]


async def test_tool6_false_disables_validation() -> None:
    """TOOL-6: tool_validator=False disables validation."""
    t = echo_tool(parameters={"type": "object", "required": ["missing"]})
    result = await dispatch(make_call(), [t], tool_validator=False)
    assert result.error is None and result.value == {"x": 1}
    blocked = await dispatch(make_call(), [t])
    assert blocked.error is not None and blocked.error.code == "validation_failed"


async def test_tool6_invalid_schema_and_missing_schema() -> None:
    """TOOL-6: an invalid schema message; missing_schema="reject" blocks tools without parameters."""
    validator = json_schema_tool_validator()
    bad = echo_tool("bad", parameters={"type": 12})
    message = validator(bad, {}, make_context())
    assert message is not None and message.startswith("invalid parameters schema for tool bad: ")
    assert validator(echo_tool(), {"any": 1}, make_context()) is None
    strict = json_schema_tool_validator(missing_schema="reject")
    assert strict(echo_tool(), {}, make_context()) is not None
    with pytest.raises(PrismConfigError):
        json_schema_tool_validator(missing_schema="maybe")  # type: ignore[arg-type]


async def test_tool6_validator_built_once_per_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """TOOL-6: the checked validator is built once per tool and schema, not per call."""
    import jsonschema

    built = 0
    real = jsonschema.Draft202012Validator.check_schema

    def counting(schema: Any, *a: Any, **k: Any) -> Any:
        nonlocal built
        built += 1
        return real(schema, *a, **k)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", counting)
    # `enum` is outside the jsonschema-free fast path, so every call reaches jsonschema
    t = echo_tool(parameters={"type": "object", "properties": {"x": {"enum": [1, 2]}}})
    for _ in range(5):
        assert (await dispatch(make_call(), [t])).error is None
    assert built == 1


async def test_tool6_uses_validator_for_draft() -> None:
    """TOOL-6: the validator class comes from validator_for($schema)."""
    validator = json_schema_tool_validator()
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
              "properties": {"n": {"type": "number", "maximum": 5, "exclusiveMaximum": True}}}
    assert validator(echo_tool(parameters=draft4), {"n": 5}, make_context()) is not None
    assert validator(echo_tool(parameters=draft4), {"n": 4}, make_context()) is None


def test_tool6_effective_validator_run_then_agent_then_builtin() -> None:
    """TOOL-6/RUN-6: run value wins, else agent, else the built-in; False disables; bad values raise."""

    def mine(t: Any, a: Any, c: Any) -> None:
        return None

    builtin = resolve_tool_validator(None, None)
    assert callable(builtin) and builtin is resolve_tool_validator(None)
    assert resolve_tool_validator(mine, None) is mine
    assert resolve_tool_validator(False, mine) is mine
    assert resolve_tool_validator(mine, False) is False
    assert resolve_tool_validator(False, None) is False
    with pytest.raises(PrismConfigError):
        resolve_tool_validator(True, None)  # type: ignore[arg-type]
    with pytest.raises(PrismConfigError):
        resolve_tool_validator(None, "x")  # type: ignore[arg-type]
