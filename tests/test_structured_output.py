"""Structured output: option checks, resolution, request helpers and artifact helpers (SO-1..SO-8)."""

from __future__ import annotations

from typing import Any

import pytest

from prism.abort import AbortController
from prism.errors import ERR_PRISM_STRUCTURED_OUTPUT, PrismConfigError, StructuredOutputError
from prism.loops.contracts import ArtifactContext, ArtifactError
from prism.loops.gvr import generate_validate_revise_loop
from prism.structured_output import (
    artifact_request,
    check_structured_output_support,
    json_artifact_parser,
    json_schema_artifact_validator,
    loop_structured_output,
    resolve_structured_output,
    validate_structured_output,
    without_structured_output,
)
from prism.types import (
    ModelCapabilities,
    ModelConfig,
    ProviderRequest,
    ProviderRequestOptions,
    StructuredOutputOptions,
    ToolDefinition,
    user_message,
)

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "integer"}}}


def so(name: str = "answer", schema: dict[str, Any] | None = None) -> StructuredOutputOptions:
    return StructuredOutputOptions(name=name, schema=SCHEMA if schema is None else schema)


def model(structured: Any = False, capabilities: bool = True) -> ModelConfig:
    caps = ModelCapabilities(structured_output=structured) if capabilities else None
    return ModelConfig(provider="acme", model="m-1", capabilities=caps)


def request(**kw: Any) -> ProviderRequest:
    return ProviderRequest(model=model(True), messages=(user_message("hi"),), **kw)


def artifact_ctx() -> ArtifactContext:
    return ArtifactContext(session_id="s", run_id="r", turn=1, signal=AbortController().signal)


# =========================================================================== SO-1


def test_so1_valid_options_are_returned_and_mappings_converted() -> None:
    """SO-1: valid options pass; a mapping is converted."""
    options = so("  name  ")
    assert validate_structured_output(options) is options
    converted = validate_structured_output({"name": "x", "schema": SCHEMA, "strict": True})
    assert converted == StructuredOutputOptions(name="x", schema=SCHEMA, strict=True)
    assert validate_structured_output(so("n" * 128)).name == "n" * 128


@pytest.mark.parametrize("name", ["", "   ", "n" * 129, " " + "n" * 129])
def test_so1_invalid_name(name: str) -> None:
    """SO-1: the stripped name must be 1-128 characters → reason invalid_name."""
    with pytest.raises(StructuredOutputError) as info:
        validate_structured_output(so(name))
    assert info.value.reason == "invalid_name"
    assert info.value.code == ERR_PRISM_STRUCTURED_OUTPUT


def test_so1_non_string_name_is_invalid_name() -> None:
    """SO-1: a non-string name is invalid_name."""
    with pytest.raises(StructuredOutputError) as info:
        validate_structured_output(StructuredOutputOptions(name=5, schema=SCHEMA))  # type: ignore[arg-type]
    assert info.value.reason == "invalid_name"


@pytest.mark.parametrize("schema", [["a"], {"x": float("nan")}, {"x": {1, 2}}, {1: "a"}, "s"])
def test_so1_invalid_schema(schema: Any) -> None:
    """SO-1: the schema must be a JSON-compatible dict → reason invalid_schema."""
    with pytest.raises(StructuredOutputError) as info:
        validate_structured_output(StructuredOutputOptions(name="n", schema=schema))
    assert info.value.reason == "invalid_schema"


def test_so1_schema_size_limit_is_65536_bytes_of_canonical_json() -> None:
    """SO-1: canonical_json(schema) at most 65 536 UTF-8 bytes → else schema_too_large."""
    # {"d":"<pad>"} is 8 bytes of framing; "é" is 2 bytes in UTF-8
    fits = {"d": "é" * ((65_536 - 8) // 2)}
    validate_structured_output(so(schema=fits))
    too_big = {"d": "é" * ((65_536 - 8) // 2) + "x"}
    with pytest.raises(StructuredOutputError) as info:
        validate_structured_output(so(schema=too_big))
    assert info.value.reason == "schema_too_large"


def test_so1_mapping_with_unknown_keys_is_config_error() -> None:
    """SO-1/ARCH-9: a mapping with an unknown key raises PrismConfigError."""
    with pytest.raises(PrismConfigError):
        validate_structured_output({"name": "x", "schema": SCHEMA, "schemaName": "y"})


# =========================================================================== SO-2


@pytest.mark.parametrize("support", [True, "json_schema"])
def test_so2_supported_models_pass(support: Any) -> None:
    """SO-2: capability True or "json_schema" accepts a schema."""
    check_structured_output_support(ProviderRequestOptions(structured_output=so()), model(support))


@pytest.mark.parametrize("kw", [{"structured": False}, {"capabilities": False}])
def test_so2_unsupported_model_fails_naming_model_and_artifact_loop(kw: dict[str, Any]) -> None:
    """SO-2: a schema on a model without the capability → StructuredOutputError(unsupported_model)."""
    with pytest.raises(StructuredOutputError) as info:
        check_structured_output_support(ProviderRequestOptions(structured_output=so()), model(**kw))
    assert info.value.reason == "unsupported_model"
    assert "m-1" in str(info.value)
    assert 'structured_output_mode="artifact-loop"' in str(info.value)


def test_so2_no_schema_needs_no_capability() -> None:
    """SO-2: without structured_output nothing is checked."""
    check_structured_output_support(None, model(False))
    check_structured_output_support(ProviderRequestOptions(headers={"a": "b"}), model(False))


# =========================================================================== SO-3


def test_so3_merge_order_later_wins() -> None:
    """SO-3: agent provider_options < run provider_options < structured_output= < GVR loop schema."""
    a, b, c, d = so("a"), so("b"), so("c"), so("d")
    agent = ProviderRequestOptions(structured_output=a, headers={"x": "1"})
    run = ProviderRequestOptions(structured_output=b, headers={"y": "2"})
    merged = resolve_structured_output(agent, run)
    assert merged is not None and merged.structured_output is b
    assert merged.headers == {"x": "1", "y": "2"}
    merged = resolve_structured_output(agent, run, structured_output=c)
    assert merged is not None and merged.structured_output is c
    loop = generate_validate_revise_loop(validator=lambda v, ctx: {"ok": True}, structured_output=d)
    merged = resolve_structured_output(agent, run, structured_output=c, loop=loop)
    assert merged is not None and merged.structured_output is d
    assert merged.headers == {"x": "1", "y": "2"}


def test_so3_artifact_loop_mode_contributes_nothing() -> None:
    """SO-3: with structured_output_mode="artifact-loop" the loop sends no schema."""
    loop = generate_validate_revise_loop(
        validator=lambda v, ctx: {"ok": True},
        structured_output=so("d"),
        structured_output_mode="artifact-loop",
    )
    assert loop_structured_output(loop) is None
    assert resolve_structured_output(None, None, loop=loop) is None
    c = so("c")
    merged = resolve_structured_output(None, None, structured_output={"name": "c", "schema": SCHEMA}, loop=loop)
    assert merged is not None and merged.structured_output == c


def test_so3_only_builtin_gvr_loops_contribute() -> None:
    """SO-3: a loop that is not a generate-validate-revise strategy contributes nothing."""

    class Custom:
        name = "custom"
        structured_output = so("custom")

    assert loop_structured_output(Custom()) is None
    assert resolve_structured_output(None, None, loop=Custom()) is None


def test_so3_resolution_checks_support_and_so1() -> None:
    """SO-3 + SO-2: with a model the result is checked; every schema passes SO-1."""
    with pytest.raises(StructuredOutputError) as info:
        resolve_structured_output(None, None, structured_output=so(), model=model(False))
    assert info.value.reason == "unsupported_model"
    with pytest.raises(StructuredOutputError) as bad:
        resolve_structured_output({"structured_output": {"name": " ", "schema": SCHEMA}})
    assert bad.value.reason == "invalid_name"
    assert resolve_structured_output(None, None, model=model(False)) is None
    with pytest.raises(PrismConfigError):
        resolve_structured_output({"header": {}})


# =========================================================================== SO-5 / SO-6


def test_so5_without_structured_output() -> None:
    """SO-5: options.structured_output becomes None; a request without one is unchanged."""
    req = request(options=ProviderRequestOptions(structured_output=so(), headers={"h": "v"}))
    stripped = without_structured_output(req)
    assert stripped.options is not None
    assert stripped.options.structured_output is None and stripped.options.headers == {"h": "v"}
    assert stripped.messages == req.messages
    plain = request()
    assert without_structured_output(plain) is plain


def test_so6_artifact_request() -> None:
    """SO-6: tools withdrawn; schema (else the request's own) attached."""
    t = ToolDefinition(name="t", execute=lambda a, c: None)
    own, given = so("own"), so("given")
    req = request(tools=(t,), options=ProviderRequestOptions(structured_output=own))
    out = artifact_request(req, given)
    assert out.tools is None and out.options is not None and out.options.structured_output is given
    kept = artifact_request(req, None)
    assert kept.tools is None and kept.options is not None and kept.options.structured_output is own
    fresh = artifact_request(request(tools=(t,)), given)
    assert fresh.options == ProviderRequestOptions(structured_output=given)
    nothing = artifact_request(request(tools=(t,)), None)
    assert nothing.tools is None and nothing.options is None


# =========================================================================== SO-8


def test_so8_json_artifact_parser() -> None:
    """SO-8: json.loads on the stripped text; failure → ok=False with str(exc)."""
    ok = json_artifact_parser('  {"a": 1}\n', artifact_ctx())
    assert ok.ok and ok.value == {"a": 1}
    bad = json_artifact_parser("{nope", artifact_ctx())
    assert not bad.ok and bad.value is None
    assert bad.error is not None and "line 1" in bad.error


def test_so8_json_schema_artifact_validator_sorted_pointers() -> None:
    """SO-8: jsonschema errors → ArtifactError(message, path=<pointer or None>), sorted as TOOL-6."""
    validator = json_schema_artifact_validator(
        {
            "type": "object",
            "required": ["z", "name"],
            "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
        }
    )
    result = validator({"items": [1, "x", "y"]}, artifact_ctx())
    assert not result.ok
    assert result.errors == (
        ArtifactError("'name' is a required property", path=None),
        ArtifactError("'z' is a required property", path=None),
        ArtifactError("'x' is not of type 'integer'", path="/items/1"),
        ArtifactError("'y' is not of type 'integer'", path="/items/2"),
    )
    good = validator({"z": 1, "name": "n"}, artifact_ctx())
    assert good.ok and good.errors == ()


def test_so8_invalid_schema_raises_config_error() -> None:
    """SO-8: an invalid schema is rejected when the validator is built."""
    with pytest.raises(PrismConfigError):
        json_schema_artifact_validator({"type": 5})
