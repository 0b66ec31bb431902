"""Native structured output: option checks, request helpers, resolution and artifact helpers.

- [`validate_structured_output()`][prism.structured_output.validate_structured_output] checks options;
- [`resolve_structured_output()`][prism.structured_output.resolve_structured_output] merges the provider-option layers and a loop's schema
  and checks model support — the runtime calls it once per run leg, while setting the leg up;
- [`deliver_shown_schema()`][prism.structured_output.deliver_shown_schema] shows a loop's default schema (``needs.shown_schema``, the
  artifact factories' schema) natively where the model supports it, else as instructions;
- [`without_structured_output()`][prism.structured_output.without_structured_output] / [`artifact_request()`][prism.structured_output.artifact_request] derive requests for
  ``final-turn-only`` timing;
- [`json_artifact_parser()`][prism.structured_output.json_artifact_parser] / [`json_schema_artifact_validator()`][prism.structured_output.json_schema_artifact_validator] are ready-made artifact
  callbacks for artifact-loop mode.

``jsonschema`` is imported when [`json_schema_artifact_validator()`][prism.structured_output.json_schema_artifact_validator] is called, never by
``import prism``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from prism.artifact_contracts import (
    ArtifactContext,
    ArtifactError,
    ArtifactParseResult,
    ArtifactValidation,
    ArtifactValidator,
)
from prism.errors import PrismConfigError, StructuredOutputError
from prism.loop_needs import loop_needs
from prism.tools import _compile_schema, _schema_error_detail, _schema_errors
from prism.types import (
    ModelConfig,
    ProviderRequest,
    ProviderRequestOptions,
    StructuredOutputOptions,
    canonical_json,
    is_json_value,
    merge_provider_options,
)

__all__ = [
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_NAME_CHARS",
    "SCHEMA_INSTRUCTIONS",
    "artifact_request",
    "check_structured_output_support",
    "deliver_shown_schema",
    "json_artifact_parser",
    "json_schema_artifact_validator",
    "loop_structured_output",
    "resolve_structured_output",
    "shown_schema_of",
    "validate_structured_output",
    "without_structured_output",
]

MAX_SCHEMA_NAME_CHARS = 128
"""Longest structured-output name, in characters after stripping."""

MAX_SCHEMA_BYTES = 65_536
"""Largest ``canonical_json(schema)``, in UTF-8 bytes."""


def validate_structured_output(
    options: StructuredOutputOptions | Mapping[str, Any],
) -> StructuredOutputOptions:
    """Check structured-output options and return them (a mapping is converted).

    Args:
        options: ``StructuredOutputOptions`` or a mapping of its fields.

    Returns:
        The options, unchanged (the name is checked stripped but not rewritten).

    Raises:
        StructuredOutputError: ``ERR_PRISM_STRUCTURED_OUTPUT`` with ``reason`` ``"invalid_name"``
            (stripped name not 1–128 characters, or not a string), ``"invalid_schema"`` (not a
            JSON-compatible ``dict``) or ``"schema_too_large"`` (``canonical_json`` > 65 536 UTF-8
            bytes).
        PrismConfigError: a mapping with unknown keys or of the wrong shape.
    """
    if not isinstance(options, StructuredOutputOptions):
        options = StructuredOutputOptions.coerce(options)
    name = options.name
    if not isinstance(name, str) or not 1 <= len(name.strip()) <= MAX_SCHEMA_NAME_CHARS:
        raise StructuredOutputError(
            f"structured output name must be 1-{MAX_SCHEMA_NAME_CHARS} characters once stripped",
            reason="invalid_name",
        )
    schema = options.schema
    if not isinstance(schema, dict) or not is_json_value(schema):
        raise StructuredOutputError(
            "structured output schema must be a JSON-compatible object", reason="invalid_schema"
        )
    size = len(canonical_json(schema).encode("utf-8"))
    if size > MAX_SCHEMA_BYTES:
        raise StructuredOutputError(
            f"structured output schema is {size} bytes; the maximum is {MAX_SCHEMA_BYTES}",
            reason="schema_too_large",
        )
    return options


def without_structured_output(request: ProviderRequest) -> ProviderRequest:
    """Return ``request`` with ``options.structured_output = None``.

    The same object is returned when it carried no schema.
    """
    options = request.options
    if options is None or options.structured_output is None:
        return request
    return dataclasses.replace(
        request, options=dataclasses.replace(options, structured_output=None)
    )


def artifact_request(
    request: ProviderRequest, schema: StructuredOutputOptions | None
) -> ProviderRequest:
    """Return ``request`` prepared for an artifact turn.

    ``tools`` is set to ``None``; ``options.structured_output`` is set to ``schema`` when given,
    else kept as the request's own schema (and left ``None`` when neither exists).
    """
    options = request.options
    if schema is None or (options is not None and options.structured_output is schema):
        if request.tools is None:
            return request
        return dataclasses.replace(request, tools=None)
    if options is None:
        options = ProviderRequestOptions(structured_output=schema)
    else:
        options = dataclasses.replace(options, structured_output=schema)
    return dataclasses.replace(request, tools=None, options=options)


def loop_structured_output(loop: object) -> StructuredOutputOptions | None:
    """Return the schema a resolved loop contributes to provider options.

    The loop declares it in ``needs.structured_output`` (a built-in generate-validate-revise
    strategy declares its schema, already ``None`` in ``"artifact-loop"`` mode). A loop that
    declares no needs contributes ``None``.
    """
    return loop_needs(loop).structured_output


def check_structured_output_support(
    options: ProviderRequestOptions | None, model: ModelConfig
) -> None:
    """Fail when a schema is requested from a model without native support.

    Args:
        options: The effective provider options of the run.
        model: The effective model.

    Raises:
        StructuredOutputError: ``reason="unsupported_model"`` when ``options`` carry a
            ``structured_output`` and ``model.capabilities.structured_output`` is neither
            ``True`` nor ``"json_schema"`` (missing capabilities count as unsupported). The
            message names the model and suggests ``structured_output_mode="artifact-loop"``.
    """
    if options is None or options.structured_output is None:
        return
    capabilities = model.capabilities
    support = capabilities.structured_output if capabilities is not None else False
    if support is True or support == "json_schema":
        return
    raise StructuredOutputError(
        f"Model {model.provider}/{model.model} does not support native structured output; "
        'use structured_output_mode="artifact-loop" to enforce the artifact with '
        "parse/validate/repair turns instead",
        reason="unsupported_model",
    )


def resolve_structured_output(
    agent_options: ProviderRequestOptions | Mapping[str, Any] | None,
    run_options: ProviderRequestOptions | Mapping[str, Any] | None = None,
    *,
    structured_output: StructuredOutputOptions | Mapping[str, Any] | None = None,
    loop: object = None,
    model: ModelConfig | None = None,
) -> ProviderRequestOptions | None:
    """Resolve a run's provider options and its native schema, then check that the model
    supports structured output.

    Merge order, later wins (for each layer, fields that are set win; ``headers``, ``compat`` and
    ``extra`` merge key by key): agent ``provider_options``, run ``provider_options``, the run's
    ``structured_output=``, then the schema of the resolved loop when it is a built-in
    generate-validate-revise strategy ([`loop_structured_output()`][prism.structured_output.loop_structured_output]). Every schema that takes part
    is checked with [`validate_structured_output()`][prism.structured_output.validate_structured_output].

    Args:
        agent_options: ``AgentConfig.provider_options`` (a mapping is converted).
        run_options: The run's ``provider_options`` (a mapping is converted).
        structured_output: The run's ``structured_output=`` (a mapping is converted).
        loop: The resolved loop strategy (``None``: no loop contribution).
        model: The effective model; when given, [`check_structured_output_support()`][prism.structured_output.check_structured_output_support] runs on
            the result.

    Returns:
        The effective ``ProviderRequestOptions``, or ``None`` when no layer sets anything.

    Raises:
        StructuredOutputError: an invalid schema or an unsupported model.
        PrismConfigError: an option mapping with unknown keys or of the wrong shape.
    """
    merged = merge_provider_options(_options(agent_options), _options(run_options))
    schema: StructuredOutputOptions | None = None
    if structured_output is not None:
        schema = validate_structured_output(structured_output)
    loop_schema = loop_structured_output(loop)
    if loop_schema is not None:
        schema = validate_structured_output(loop_schema)
    if schema is not None:
        merged = merge_provider_options(merged, ProviderRequestOptions(structured_output=schema))
    elif merged is not None and merged.structured_output is not None:
        validate_structured_output(merged.structured_output)
    if model is not None:
        check_structured_output_support(merged, model)
    return merged


def _options(
    value: ProviderRequestOptions | Mapping[str, Any] | None,
) -> ProviderRequestOptions | None:
    if value is None or isinstance(value, ProviderRequestOptions):
        return value
    if isinstance(value, Mapping):
        return ProviderRequestOptions.coerce(value)
    raise PrismConfigError(
        f"provider_options must be ProviderRequestOptions or a mapping, got {type(value).__name__}"
    )


SCHEMA_INSTRUCTIONS = (
    "Answer with only a JSON value (no prose, no code fence) that validates against this "
    "JSON Schema:\n{schema}"
)
"""The system-prompt text that shows a schema to a model without native structured output
(``{schema}`` is the compact JSON of the schema)."""


def deliver_shown_schema(
    loop: object, options: ProviderRequestOptions | None, model: ModelConfig
) -> tuple[ProviderRequestOptions | None, str | None]:
    """Decide how a loop's ``needs.shown_schema`` reaches the model.

    Natively — merged into ``options`` as ``structured_output`` — when the loop allows it
    (``shown_schema_native``), no native schema is set yet and ``model.capabilities`` declare
    structured output (``True`` or ``"json_schema"``); otherwise as instructions: the
    [`SCHEMA_INSTRUCTIONS`][prism.structured_output.SCHEMA_INSTRUCTIONS] text the runtime adds to the system prompt. A native schema the
    options already carry (the loop's own, or the run's) is shown as it is, with no text.

    Returns:
        ``(options, instructions)``: the options to use and the system-prompt text, or ``None``.
        Never raises for an unsupported model.
    """
    needs = loop_needs(loop)
    schema = needs.shown_schema
    if schema is None or (options is not None and options.structured_output is not None):
        return options, None
    capabilities = model.capabilities
    support = capabilities.structured_output if capabilities is not None else False
    if needs.shown_schema_native and (support is True or support == "json_schema"):
        native = ProviderRequestOptions(structured_output=schema)
        return merge_provider_options(options, native), None
    text = json.dumps(schema.schema, ensure_ascii=False, separators=(",", ":"))
    return options, SCHEMA_INSTRUCTIONS.format(schema=text)


def shown_schema_of(*callbacks: object) -> StructuredOutputOptions | None:
    """The ``artifact_schema`` the first of ``callbacks`` carries (the artifact factories set it
    on the parser and the validator they return), else ``None``."""
    for callback in callbacks:
        schema = getattr(callback, "artifact_schema", None)
        if isinstance(schema, StructuredOutputOptions):
            return schema
    return None


# =========================================================================== artifact helpers


def json_artifact_parser(text: str, ctx: ArtifactContext | None = None) -> ArtifactParseResult[Any]:
    """Parse the stripped draft text with ``json.loads``.

    Args:
        text: The candidate's text.
        ctx: The artifact context (unused; accepted so the function is an ``ArtifactParser``).

    Returns:
        ``ArtifactParseResult(ok=True, value=<decoded>)``, or ``ok=False`` with
        ``error=str(exc)`` when decoding fails.
    """
    try:
        value = json.loads(text.strip())
    except ValueError as exc:
        return ArtifactParseResult(ok=False, error=str(exc))
    return ArtifactParseResult(ok=True, value=value)


def json_schema_artifact_validator(schema: Mapping[str, Any]) -> ArtifactValidator[Any]:
    """Return an artifact validator checking values against a JSON Schema.

    Errors become ``ArtifactError(message, path=<RFC 6901 pointer, None at the root>)``, sorted by
    (pointer, message) as the tool-argument validator sorts them; the result is ``ok`` when there
    are none. The schema is checked and compiled once, here.

    Args:
        schema: A JSON Schema (the ``jsonschema`` class comes from ``validator_for``).

    Returns:
        ``validator(value, ctx) -> ArtifactValidation``.

    Raises:
        PrismConfigError: ``schema`` is not a mapping or is not a valid JSON Schema.
    """
    if not isinstance(schema, Mapping):
        raise PrismConfigError(f"schema must be a mapping, got {type(schema).__name__}")
    compiled = _compile_schema(schema)
    if isinstance(compiled, str):
        raise PrismConfigError(f"invalid JSON Schema: {compiled}")

    def validate(value: Any, ctx: ArtifactContext | None = None) -> ArtifactValidation:
        try:
            found = _schema_errors(compiled, value)
        except Exception as exc:
            detail = _schema_error_detail(exc)
            return ArtifactValidation(
                ok=False, errors=(ArtifactError(f"invalid JSON Schema: {detail}"),)
            )
        if not found:
            return ArtifactValidation(ok=True)
        return ArtifactValidation(
            ok=False,
            errors=tuple(
                ArtifactError(message, path=pointer or None) for pointer, message in found
            ),
        )

    return validate
