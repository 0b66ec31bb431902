"""Ready-made artifact callbacks for the generate → validate → revise loop.

Each factory returns an [`ArtifactCallbacks`][prism.artifacts.ArtifactCallbacks] mapping whose keys are loop options, so it can
be unpacked straight into the loop::

    loop = GenerateValidateReviseLoopOptions(**json_schema_artifact(schema), max_revisions=2)
    loop = generate_validate_revise_loop(**pydantic_artifact(ReleaseNote))

By default only ``parser`` and ``validator`` are returned, and both carry the schema as their
``artifact_schema`` attribute (a ``StructuredOutputOptions``). The loop shows that schema to the
model by default: natively where the model declares structured-output support (the embedded
model constrains decoding with a grammar built from it; OpenAI's JSON-Schema response format),
else in the system prompt as instructions — a schema that only comes this way never fails a run
for an unsupported model. ``structured_output_mode="artifact-loop"`` keeps it to the
instructions. Pass ``structured_output_name=`` to also get a ``structured_output`` key, which
requires native structured output: the run then fails up front on models without it.

Validation errors become ``ArtifactError`` values whose ``path`` is an
RFC 6901 JSON pointer (``"/items/0/name"``), or ``None`` for an error at the root; errors are sorted
by (pointer, message) like the tool-argument validator.

``jsonschema`` (a core dependency) and ``pydantic`` (extra ``prism-runtime[pydantic]``) are imported
when a factory is called, never by ``import prism``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Generic, NotRequired, TypedDict, TypeVar

from prism.errors import PrismConfigError
from prism.loops.contracts import (
    ArtifactContext,
    ArtifactError,
    ArtifactParser,
    ArtifactParseResult,
    ArtifactValidation,
    ArtifactValidator,
    coerce_structured_output,
)
from prism.structured_output import json_schema_artifact_validator
from prism.types import StructuredOutputOptions

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["ArtifactCallbacks", "json_schema_artifact", "pydantic_artifact"]

T = TypeVar("T")
M = TypeVar("M", bound="BaseModel")

_PYDANTIC_MISSING = "pydantic_artifact needs pydantic v2: pip install 'prism-runtime[pydantic]'"


class ArtifactCallbacks(TypedDict, Generic[T]):
    """Loop options produced by the artifact factories; unpack with ``**``.

    Keys match [`GenerateValidateReviseLoopOptions`][prism.loops.contracts.GenerateValidateReviseLoopOptions] fields and
    ``generate_validate_revise_loop`` parameters.
    """

    parser: ArtifactParser[T]
    """Decodes the draft's JSON text."""

    validator: ArtifactValidator[T]
    """Checks the decoded value and reports every error with its JSON pointer."""

    structured_output: NotRequired[StructuredOutputOptions]
    """Present only when ``structured_output_name`` was given: the native provider schema."""


# --------------------------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------------------------


def _pointer(parts: Iterable[object]) -> str | None:
    """RFC 6901 pointer of a location (``None`` at the root): ``("items", 0)`` → ``/items/0``."""
    tokens = [str(p).replace("~", "~0").replace("/", "~1") for p in parts]
    return "/" + "/".join(tokens) if tokens else None


def _error_order(error: ArtifactError) -> tuple[str, str]:
    return (error.path or "", error.message)


def _sorted_errors(errors: list[ArtifactError]) -> tuple[ArtifactError, ...]:
    if len(errors) > 1:
        errors.sort(key=_error_order)
    return tuple(errors)


def _strip_fence(text: str) -> str:
    """Strip surrounding whitespace and one enclosing Markdown code fence (```json ... ```)."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and len(stripped) >= 6:
        body = stripped[3:-3]
        newline = body.find("\n")
        # drop the opening fence line when it is empty or an info string such as "json"
        if newline != -1:
            info = body[:newline].strip()
            if not info or info.isidentifier():
                body = body[newline + 1 :]
        return body.strip()
    return stripped


def _decode_json(text: str) -> tuple[Any, str | None]:
    """Decode the draft as JSON (optionally inside one code fence): ``(value, None)``, or
    ``(None, why)`` when it is no artifact.

    A decode error is a failure with the decoder's message; a decoded JSON ``null`` is also a
    failure, because the loop treats a ``None`` value as "no artifact".
    """
    try:
        value = json.loads(_strip_fence(text))
    except ValueError as exc:
        return None, f"invalid JSON: {exc}"
    if value is None:
        return None, "artifact is JSON null"
    return value, None


def _native(name: str | None, schema: Mapping[str, Any]) -> StructuredOutputOptions | None:
    if name is None:
        return None
    return coerce_structured_output({"name": name, "schema": dict(schema)})


def _carry_schema(callbacks: ArtifactCallbacks[Any], name: str, schema: Mapping[str, Any]) -> None:
    """Attach the schema to the parser and validator as ``artifact_schema`` (the loop reads it
    to show the model its target). A schema that is not valid structured-output options (too
    large, not JSON) is left off: the loop then only parses and validates."""
    try:
        shown = coerce_structured_output({"name": name, "schema": dict(schema)})
    except Exception:
        return
    for key in ("parser", "validator"):
        setattr(callbacks[key], "artifact_schema", shown)  # noqa: B010


# --------------------------------------------------------------------------------------------
# JSON Schema
# --------------------------------------------------------------------------------------------


def json_schema_artifact(
    schema: Mapping[str, Any],
    *,
    structured_output_name: str | None = None,
) -> ArtifactCallbacks[Any]:
    """Parser and validator enforcing a JSON Schema on the artifact.

    The parser decodes the draft text as JSON (surrounding whitespace and one enclosing Markdown
    code fence are ignored; JSON ``null`` is a parse failure). The validator is
    ``prism.json_schema_artifact_validator(schema)``: the ``jsonschema`` class the schema
    declares, compiled once here, with one ``ArtifactError`` per violation sorted by
    (pointer, message), e.g. ``ArtifactError("'name' is a required property", path="/items/0")``.

    Args:
        schema: A JSON Schema (a JSON-compatible mapping).
        structured_output_name: When given, the result also carries ``structured_output =
            StructuredOutputOptions(name=structured_output_name, schema=schema)`` for native
            structured output.

    Returns:
        ``{"parser": ..., "validator": ...}`` (+ ``"structured_output"``). The accepted artifact is
        the decoded JSON value (``dict``, ``list``, ``str``, number or ``bool``).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` when ``schema`` is not a mapping or not a valid
            schema for its metaschema.
        StructuredOutputError: ``ERR_PRISM_STRUCTURED_OUTPUT`` when the native options fail
            the structured-output check.
    """
    if not isinstance(schema, Mapping):
        raise PrismConfigError(f"artifact schema must be a mapping, got {type(schema).__name__}")
    schema_dict = dict(schema)
    validator = json_schema_artifact_validator(schema_dict)

    def parser(text: str, ctx: ArtifactContext) -> ArtifactParseResult[Any]:
        value, error = _decode_json(text)
        if error is not None:
            return ArtifactParseResult(ok=False, error=error)
        return ArtifactParseResult(ok=True, value=value)

    callbacks: ArtifactCallbacks[Any] = {"parser": parser, "validator": validator}
    native = _native(structured_output_name, schema_dict)
    if native is not None:
        callbacks["structured_output"] = native
    _carry_schema(callbacks, structured_output_name or _title(schema_dict), schema_dict)
    return callbacks


def _title(schema: Mapping[str, Any]) -> str:
    title = schema.get("title")
    return title if isinstance(title, str) and title.strip() else "artifact"


# --------------------------------------------------------------------------------------------
# pydantic v2
# --------------------------------------------------------------------------------------------


_ACCEPTED: Final = ArtifactValidation(ok=True)
"""The pydantic validator's verdict on an instance of the model (immutable, shared)."""


def _pydantic_failure(exc: Any) -> ArtifactValidation:
    """A ``pydantic.ValidationError`` as a failed validation: one ``ArtifactError`` per pydantic
    error (path = JSON pointer of its ``loc``), sorted; holds no reference to ``exc``."""
    details: list[dict[str, Any]] = exc.errors(include_url=False)
    return ArtifactValidation(
        ok=False,
        errors=_sorted_errors(
            [
                ArtifactError(str(d.get("msg", "invalid value")), path=_pointer(d.get("loc", ())))
                for d in details
            ]
        ),
    )


def _import_pydantic() -> Any:
    try:
        import pydantic
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(_PYDANTIC_MISSING) from exc
    if not str(getattr(pydantic, "VERSION", "")).startswith("2"):
        raise ImportError(_PYDANTIC_MISSING)
    return pydantic


def pydantic_artifact(
    model: type[M],
    *,
    structured_output_name: str | None = None,
) -> ArtifactCallbacks[M | Any]:
    """Parser and validator producing an instance of a pydantic v2 model.

    The parser decodes the draft as JSON (as [`json_schema_artifact()`][prism.artifacts.json_schema_artifact] does) and validates it
    with ``model.model_validate``; on success the value is the model instance, so
    ``RunResult.artifact`` is a ``model``. When the decoded data does not fit the model, the parser
    hands the decoded data on unchanged and the validator reports one ``ArtifactError`` per
    pydantic error (path = JSON pointer of its ``loc``, ``None`` at the root), so the repairer sees
    every field-level problem; the repairer then receives the decoded data, not an instance.
    Each draft is validated once: for the very object its parser last handed on, the validator
    reports the errors the parser's validation found (the data must not be changed in between).

    Args:
        model: A ``pydantic.BaseModel`` subclass.
        structured_output_name: When given, also return ``structured_output`` with
            ``model.model_json_schema()`` for native structured output.

    Returns:
        ``{"parser": ..., "validator": ...}`` (+ ``"structured_output"``).

    Raises:
        ImportError: pydantic v2 is not installed (message names ``prism-runtime[pydantic]``).
        PrismConfigError: ``ERR_PRISM_CONFIG`` when ``model`` is not a ``BaseModel`` subclass.
        StructuredOutputError: ``ERR_PRISM_STRUCTURED_OUTPUT`` when the native options fail
            the structured-output check.
    """
    pydantic = _import_pydantic()
    if not (isinstance(model, type) and issubclass(model, pydantic.BaseModel)):
        raise PrismConfigError(
            f"pydantic_artifact expects a pydantic.BaseModel subclass, got {model!r}"
        )
    validation_error: type[Exception] = pydantic.ValidationError
    # The parser's verdict on the data it last handed on, so that the validator does not
    # validate the same draft again: (that very object, its failure), taken by the validator
    # only for that object. Concurrent runs sharing these callbacks may overwrite it; a validator
    # that then finds another object validates itself, as it does for values from elsewhere.
    handed_on: tuple[Any, ArtifactValidation] | None = None

    def parser(text: str, ctx: ArtifactContext) -> ArtifactParseResult[Any]:
        nonlocal handed_on
        value, error = _decode_json(text)
        if error is not None:
            return ArtifactParseResult(ok=False, error=error)
        try:
            return ArtifactParseResult(ok=True, value=model.model_validate(value))
        except validation_error as exc:
            failure = _pydantic_failure(exc)
        handed_on = (value, failure)
        return ArtifactParseResult(ok=True, value=value)  # the validator reports the errors

    def validator(value: Any, ctx: ArtifactContext) -> ArtifactValidation:
        nonlocal handed_on
        if isinstance(value, model):
            return _ACCEPTED
        handed = handed_on
        if handed is not None and handed[0] is value:
            handed_on = None
            return handed[1]
        try:
            model.model_validate(value)
        except validation_error as exc:
            return _pydantic_failure(exc)
        return _ACCEPTED

    callbacks: ArtifactCallbacks[M | Any] = {"parser": parser, "validator": validator}
    schema = model.model_json_schema()
    if structured_output_name is not None:
        native = _native(structured_output_name, schema)
        if native is not None:
            callbacks["structured_output"] = native
    _carry_schema(callbacks, structured_output_name or model.__name__, schema)
    return callbacks
