"""Artifact contracts: the values and callbacks of a generate-validate-revise artifact loop.

The ``Artifact*`` value types and callback aliases are generic over a host type ``T`` that prism
never constructs, copies, serialises or inspects. They sit below [`prism.events`][prism.events] (whose
artifact events carry an [`ArtifactValidation`][prism.artifact_contracts.ArtifactValidation]) and below the loop contracts in
[`prism.loops.contracts`][prism.loops.contracts], which re-exports them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypeVar

from prism._fast_init import fast_init
from prism._keys import reject_unknown_keys
from prism._serde import Serializable
from prism.abort import AbortSignal
from prism.types import AgentInput

__all__ = [
    "ArtifactContext",
    "ArtifactError",
    "ArtifactParseResult",
    "ArtifactParser",
    "ArtifactRepairer",
    "ArtifactValidation",
    "ArtifactValidator",
]

T = TypeVar("T")


@fast_init
@dataclass(frozen=True, slots=True)
class ArtifactError(Serializable):
    """One artifact validation or parse error.

    Example: ``ArtifactError("must be a string", path="/items/0/name")``.
    """

    message: str
    """Human-readable description. May echo model text; events carrying it are redacted."""

    path: str | None = None
    """Location of the error inside the value, by convention an RFC 6901 JSON pointer such as
    ``"/items/0/name"``. ``None`` when the error has no location (a parse failure)
    or concerns the whole value (how the built-in JSON Schema and pydantic helpers report root
    errors)."""

    @classmethod
    def coerce(cls, value: ArtifactError | Mapping[str, Any]) -> ArtifactError:
        """Return ``value`` as an [`ArtifactError`][prism.artifact_contracts.ArtifactError].

        Args:
            value: An ``ArtifactError`` (returned unchanged) or a mapping
                ``{"message": str, "path": str | None}``.

        Returns:
            The converted error.

        Raises:
            TypeError: ``value`` is neither, or ``message``/``path`` have the wrong type.
            ValueError: the mapping has keys other than ``message`` and ``path``.
        """
        if isinstance(value, ArtifactError):
            return value
        fields = _fields_of(
            value,
            _ERROR_KEYS,
            "artifact error",
            "artifact error must be an ArtifactError or a mapping",
        )
        message = fields.get("message")
        path = fields.get("path")
        if not isinstance(message, str):
            raise TypeError("artifact error 'message' must be a str")
        if path is not None and not isinstance(path, str):
            raise TypeError("artifact error 'path' must be a str or None")
        return cls(message=message, path=path)


_ERROR_KEYS = frozenset({"message", "path"})
_VALIDATION_KEYS = frozenset({"ok", "errors", "metadata"})
_PARSE_KEYS = frozenset({"ok", "value", "error"})


def _fields_of(
    value: object, keys: frozenset[str], label: str, not_a_mapping: str
) -> Mapping[str, Any]:
    """``value`` as the mapping a ``coerce`` builds from: a mapping with only ``keys``.

    Raises:
        TypeError: ``value`` is not a mapping (``"<not_a_mapping>, got <type name>"``).
        ValueError: the mapping has keys outside ``keys`` (``unknown <label> key(s): …``).
    """
    if not isinstance(value, Mapping):
        raise TypeError(f"{not_a_mapping}, got {type(value).__name__}")
    reject_unknown_keys(label, value, keys)
    return value


@fast_init
@dataclass(frozen=True, slots=True)
class ArtifactValidation(Serializable):
    """Outcome of validating (or parsing) one artifact candidate.

    A list given as ``errors`` is converted to a tuple, and mapping elements to
    [`ArtifactError`][prism.artifact_contracts.ArtifactError], so ``from_dict(v.to_dict()) == v``.
    """

    ok: bool
    """``True`` when the candidate is accepted."""

    errors: tuple[ArtifactError, ...] = ()
    """Errors in the order the validator reported them; usually empty when ``ok``."""

    metadata: Mapping[str, Any] | None = None
    """Free-form JSON-compatible data. ``metadata["reason"]`` (a ``str``) names a terminal failure
    and becomes the failed run's error code: ``"parse_error"``,
    ``"tool_round_limit"`` or the host's own reason."""

    def __post_init__(self) -> None:
        errors: Any = self.errors
        if not isinstance(errors, tuple) or not all(isinstance(e, ArtifactError) for e in errors):
            if isinstance(errors, (str, bytes)) or not isinstance(errors, Sequence):
                raise TypeError("ArtifactValidation.errors must be a sequence of ArtifactError")
            object.__setattr__(self, "errors", tuple(ArtifactError.coerce(e) for e in errors))

    @classmethod
    def coerce(cls, value: ArtifactValidation | Mapping[str, Any]) -> ArtifactValidation:
        """Return a validator's result as an [`ArtifactValidation`][prism.artifact_contracts.ArtifactValidation].

        Args:
            value: An ``ArtifactValidation`` (returned unchanged) or a mapping
                ``{"ok": bool, "errors": [{"message": str, "path": str}], "metadata": {...}}``
                (``errors`` and ``metadata`` optional).

        Returns:
            The converted validation.

        Raises:
            TypeError: ``value`` is neither, ``ok`` is not a ``bool``, ``errors`` is not a
                sequence of errors, or ``metadata`` is not a mapping.
            ValueError: the mapping has unknown keys.
        """
        if isinstance(value, ArtifactValidation):
            return value
        fields = _fields_of(
            value,
            _VALIDATION_KEYS,
            "artifact validation",
            "artifact validator must return an ArtifactValidation or a mapping",
        )
        ok = fields.get("ok")
        if not isinstance(ok, bool):
            raise TypeError("artifact validation 'ok' must be a bool")
        metadata = fields.get("metadata")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise TypeError("artifact validation 'metadata' must be a mapping or None")
        errors = fields.get("errors")
        return cls(ok=ok, errors=() if errors is None else errors, metadata=metadata)


@fast_init
@dataclass(frozen=True, slots=True)
class ArtifactContext(Serializable):
    """Context passed to every artifact callback.

    ``signal`` is a host object and is left out of ``to_dict()``.
    """

    session_id: str
    """The session the run belongs to."""

    run_id: str
    """The run id (``run_`` + 32 hex)."""

    turn: int
    """1-based turn index of the candidate being parsed/validated/repaired."""

    signal: AbortSignal = field(metadata={"serialize": False})
    """The run's abort signal; long callbacks should watch it."""

    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Merged agent, session and run metadata (read-only mapping)."""


@dataclass(frozen=True)  # no slots: ``ArtifactParseResult[X](...)`` must be able to try
class ArtifactParseResult(Serializable, Generic[T]):  # setting ``__orig_class__`` (3.11)
    """Result of an [`ArtifactParser`][prism.artifact_contracts.ArtifactParser].

    A result with ``ok=False`` or ``value is None`` is a parse failure: it consumes revision budget
    like a validation failure.
    """

    ok: bool
    """``True`` when parsing produced a value."""

    value: T | None = None
    """The host's parsed value; prism never inspects it."""

    error: str | None = None
    """Why parsing failed; becomes the synthetic ``parse_error`` message."""

    @classmethod
    def coerce(
        cls, value: ArtifactParseResult[Any] | Mapping[str, Any]
    ) -> ArtifactParseResult[Any]:
        """Return a parser's result as an [`ArtifactParseResult`][prism.artifact_contracts.ArtifactParseResult].

        Args:
            value: An ``ArtifactParseResult`` (returned unchanged) or a mapping
                ``{"ok": bool, "value": T, "error": str}`` (``value``/``error`` optional).

        Returns:
            The converted parse result.

        Raises:
            TypeError: ``value`` is neither, ``ok`` is not a ``bool`` or ``error`` not a ``str``.
            ValueError: the mapping has unknown keys.
        """
        if isinstance(value, ArtifactParseResult):
            return value
        fields = _fields_of(
            value,
            _PARSE_KEYS,
            "artifact parse result",
            "artifact parser must return an ArtifactParseResult or a mapping",
        )
        ok = fields.get("ok")
        error = fields.get("error")
        if not isinstance(ok, bool):
            raise TypeError("artifact parse result 'ok' must be a bool")
        if error is not None and not isinstance(error, str):
            raise TypeError("artifact parse result 'error' must be a str or None")
        return ArtifactParseResult(ok=ok, value=fields.get("value"), error=error)


ArtifactParser: TypeAlias = Callable[
    [str, ArtifactContext],
    ArtifactParseResult[T]
    | Mapping[str, Any]
    | Awaitable[ArtifactParseResult[T] | Mapping[str, Any]],
]
"""``(text, ctx) -> ArtifactParseResult[T]`` (or an equivalent mapping), sync or async.

Never called for empty or whitespace-only call-free text (such a candidate fails without
parsing)."""

ArtifactValidator: TypeAlias = Callable[
    [T, ArtifactContext],
    ArtifactValidation | Mapping[str, Any] | Awaitable[ArtifactValidation | Mapping[str, Any]],
]
"""``(value, ctx) -> ArtifactValidation`` (or an equivalent mapping), sync or async."""

ArtifactRepairer: TypeAlias = Callable[
    [T | None, ArtifactValidation, ArtifactContext],
    AgentInput | Awaitable[AgentInput],
]
"""``(value_or_None, failure, ctx) -> AgentInput``, sync or async.

``value`` is ``None`` after a parse failure. The result becomes the revision request's input."""
