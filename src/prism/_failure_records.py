"""The small records that describe a failure: ``ErrorInfo`` (with the ``ProviderFailure`` of each
provider a fallback chain tried), ``RunLimitBreach`` and ``GuardrailRecord``, and the ``FailedLeg`` view of a failed run's result.

Exceptions in [`prism.errors`][prism.errors] carry these records, and results and events hold them too, so
they sit below both: this module imports only the serialisation mixin and ``JsonValue``. Import
the names from [`prism.types`][prism.types].
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias

from prism._json import JsonValue
from prism._serde import Serializable

__all__ = [
    "ErrorInfo",
    "FailedLeg",
    "GuardrailAction",
    "GuardrailRecord",
    "GuardrailStage",
    "ProviderFailure",
    "RunLimitBreach",
]


@dataclass(frozen=True, slots=True)
class ProviderFailure(Serializable):
    """How one provider of a fallback chain failed a turn: its last attempt's error."""

    provider_id: str
    """The provider's id."""
    model: str
    """The model it was asked for."""
    message: str
    """Its last attempt's error message (redacted like every provider error)."""
    code: str | int | None = None
    """Its last attempt's code: an HTTP status int or an error code."""
    attempts: int = 1
    """How many attempts it made (its retries included)."""


@dataclass(frozen=True, slots=True)
class ErrorInfo(Serializable):
    """Serialisable description of a failure; built by ``error_to_error_info``."""

    message: str
    """Human-readable message (redacted where a redactor is active)."""
    name: str | None = None
    """Exception class name, e.g. ``"TimeoutError"``."""
    code: str | int | None = None
    """Machine code: ``ERR_PRISM_*``, a transport code or an HTTP status int."""
    retry_after_ms: float | None = None
    """Server retry hint in milliseconds (finite, >= 0)."""
    cause: str | None = None
    """``str(exc.__cause__)`` (redacted) when the exception had a cause."""
    providers: tuple[ProviderFailure, ...] | None = None
    """Every provider a fallback chain tried for the turn, in order, each with its failure:
    set when the turn failed after a fallback (the last entry is the failure that ended it, as
    ``name``/``code`` are)."""


@dataclass(frozen=True, slots=True)
class RunLimitBreach(Serializable):
    """The first limit breach of a run: which limit, its maximum and the value that passed it."""

    limit: str
    """snake_case limit field name, e.g. ``"max_tool_calls"``."""
    maximum: float
    """Configured maximum (same unit as the limit: count, ms, bytes, tokens or cost)."""
    observed: float
    """Observed value that passed the maximum."""
    currency: str | None = None
    """Currency of a cost limit."""


GuardrailStage: TypeAlias = Literal["input", "output", "tool_input", "tool_output"]
"""Where a guardrail runs: on the run input, the model output, a tool call's arguments or its
result."""
GuardrailAction: TypeAlias = Literal["allow", "block", "tripwire", "interrupt"]
"""What a guardrail decided."""


@dataclass(frozen=True, slots=True)
class GuardrailRecord(Serializable):
    """A bounded, redacted guardrail decision, as stored and emitted."""

    guardrail: str
    """Guardrail name (<= 128 chars)."""
    stage: GuardrailStage
    """Stage evaluated."""
    action: GuardrailAction
    """Decision."""
    reason: str | None = None
    """Redacted reason (<= 4 KiB UTF-8)."""
    metadata: Mapping[str, JsonValue] | None = None
    """Redacted, JSON-normalised metadata (<= 16 KiB)."""


class FailedLeg(Protocol):
    """What [`AgentRunError`][prism.errors.AgentRunError] reads from the ``prism.types.RunResult`` it carries.

    ``RunResult`` satisfies it; the protocol keeps [`prism.errors`][prism.errors] free of the data types
    above it.
    """

    @property
    def run_id(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def error(self) -> ErrorInfo | None: ...

    @property
    def limit(self) -> RunLimitBreach | None: ...
