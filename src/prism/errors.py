"""Every exception prism defines, and their codes.

Hierarchy::

    PrismError (Exception)                      .code: str
    ├── PrismConfigError (ValueError)           ERR_PRISM_CONFIG
    ├── AbortError                              ERR_PRISM_ABORTED
    ├── AgentSessionBusyError                   ERR_PRISM_SESSION_BUSY
    ├── SteerError                              ERR_PRISM_STEER_{NO_RUN,EMPTY,LIMIT}
    ├── ProviderResolutionError                 ERR_PRISM_PROVIDER_UNKNOWN
    ├── ProviderTurnError                       ERR_PRISM_PROVIDER (.info, .failures)
    ├── ProviderTransportError                  lowercase transport codes (data)
    ├── RunLimitExceeded                        ERR_PRISM_RUN_LIMIT (.breach)
    ├── AgentRunError                           ERR_PRISM_RUN_{FAILED,ABORTED} / artifact reason /
    │                                           ERR_PRISM_{LOOP_*,CONFIG*,DELEGATION_SUSPENDED}
    │   └── AgentRunLimitError                  ERR_PRISM_RUN_LIMIT (.breach)
    ├── ArtifactFailedError                     the artifact failure reason (data)
    ├── GuardrailError                          ERR_PRISM_GUARDRAIL_{BLOCKED,INTERRUPT_UNAVAILABLE}
    ├── TurnPolicyError                         ERR_PRISM_TURN_POLICY
    ├── AgentRunStateError                      ERR_PRISM_AGENT_RUN_STATE
    ├── AgentLoopStateError                     ERR_PRISM_LOOP_{NOT_DURABLE,SNAPSHOT,REVISION}
    ├── AgentRunSuspended                       ERR_PRISM_AGENT_RUN_SUSPENDED (control signal)
    ├── AgentDecisionError                      ERR_PRISM_DECISION_{INVALID,DUPLICATE,UNKNOWN,LIMIT,
    │                                           DECIDED} (.decided)
    ├── CheckpointConflictError                 ERR_PRISM_CHECKPOINT_CONFLICT
    ├── SessionAppendConflictError              ERR_PRISM_SESSION_APPEND_CONFLICT
    ├── StructuredOutputError                   ERR_PRISM_STRUCTURED_OUTPUT (.reason)
    ├── RunLedgerError                          ERR_PRISM_LEDGER
    ├── StoreError                              ERR_PRISM_STORE_{CORRUPT,UNDECODABLE}
    │   └── StoreSchemaError                    ERR_PRISM_STORE_SCHEMA
    ├── RedactedError                           ERR_PRISM_REDACTED (.original_type)
    ├── EngineVersionError                      ERR_PRISM_ENGINE_VERSION
    ├── EngineNotReadyError                     ERR_PRISM_ENGINE_NOT_READY
    └── RunAmbiguousError                       ERR_PRISM_RUN_AMBIGUOUS (.calls)

Constructor conventions: classes with several codes take the code first
(``SteerError("ERR_PRISM_STEER_NO_RUN")``); classes with one code take the message first; classes
built from data take the data first (``RunLimitExceeded(breach)``, ``GuardrailError(record)``,
``ProviderTurnError(info)``, ``AgentRunError(message, *, result)``). ``str(err)`` is always the
message, and every instance keeps its fields as attributes.

This module holds errors only; redaction helpers live in ``prism.redaction``. It sits at the
bottom of the package: ``PrismError`` and ``PrismConfigError`` are defined in
``prism._error_root`` (so value serialisation below this module can raise them) and re-exported
here, the records its exceptions carry (``ErrorInfo``, ``RunLimitBreach``, ``GuardrailRecord``)
live below it, and a failed run's ``RunResult`` is described by the
``FailedLeg`` protocol rather than imported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from prism._error_root import ERR_PRISM_CONFIG as ERR_PRISM_CONFIG
from prism._error_root import PrismConfigError as PrismConfigError
from prism._error_root import PrismError as PrismError
from prism._failure_records import (
    ErrorInfo,
    FailedLeg,
    GuardrailRecord,
    ProviderFailure,
    RunLimitBreach,
)

__all__ = [
    "ERR_PRISM_ABORTED",
    "ERR_PRISM_AGENT_RUN_STATE",
    "ERR_PRISM_AGENT_RUN_SUSPENDED",
    "ERR_PRISM_CHECKPOINT_CONFLICT",
    "ERR_PRISM_CONFIG",
    "ERR_PRISM_DECISION_DECIDED",
    "ERR_PRISM_DECISION_DUPLICATE",
    "ERR_PRISM_DECISION_INVALID",
    "ERR_PRISM_DECISION_LIMIT",
    "ERR_PRISM_DECISION_UNKNOWN",
    "ERR_PRISM_DELEGATION_SUSPENDED",
    "ERR_PRISM_ENGINE_NOT_READY",
    "ERR_PRISM_ENGINE_VERSION",
    "ERR_PRISM_GUARDRAIL_BLOCKED",
    "ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE",
    "ERR_PRISM_LEDGER",
    "ERR_PRISM_LOOP_NOT_DURABLE",
    "ERR_PRISM_LOOP_REVISION",
    "ERR_PRISM_LOOP_SNAPSHOT",
    "ERR_PRISM_PROVIDER",
    "ERR_PRISM_PROVIDER_UNKNOWN",
    "ERR_PRISM_REDACTED",
    "ERR_PRISM_RUN_ABORTED",
    "ERR_PRISM_RUN_AMBIGUOUS",
    "ERR_PRISM_RUN_FAILED",
    "ERR_PRISM_RUN_LIMIT",
    "ERR_PRISM_SESSION_APPEND_CONFLICT",
    "ERR_PRISM_SESSION_BUSY",
    "ERR_PRISM_STEER_EMPTY",
    "ERR_PRISM_STEER_LIMIT",
    "ERR_PRISM_STEER_NO_RUN",
    "ERR_PRISM_STORE_CORRUPT",
    "ERR_PRISM_STORE_SCHEMA",
    "ERR_PRISM_STORE_UNDECODABLE",
    "ERR_PRISM_STRUCTURED_OUTPUT",
    "ERR_PRISM_TURN_POLICY",
    "AbortError",
    "AgentDecisionError",
    "AgentLoopStateError",
    "AgentRunError",
    "AgentRunLimitError",
    "AgentRunStateError",
    "AgentRunSuspended",
    "AgentSessionBusyError",
    "ArtifactFailedError",
    "CheckpointConflictError",
    "EngineNotReadyError",
    "EngineVersionError",
    "GuardrailError",
    "PrismConfigError",
    "PrismError",
    "ProviderResolutionError",
    "ProviderTransportError",
    "ProviderTurnError",
    "RedactedError",
    "RunAmbiguousError",
    "RunLedgerError",
    "RunLimitExceeded",
    "SessionAppendConflictError",
    "SteerError",
    "StoreError",
    "StoreSchemaError",
    "StructuredOutputError",
    "TurnPolicyError",
]

# --------------------------------------------------------------------------- codes

ERR_PRISM_ABORTED = "ERR_PRISM_ABORTED"
ERR_PRISM_SESSION_BUSY = "ERR_PRISM_SESSION_BUSY"
ERR_PRISM_STEER_NO_RUN = "ERR_PRISM_STEER_NO_RUN"
ERR_PRISM_STEER_EMPTY = "ERR_PRISM_STEER_EMPTY"
ERR_PRISM_STEER_LIMIT = "ERR_PRISM_STEER_LIMIT"
ERR_PRISM_PROVIDER_UNKNOWN = "ERR_PRISM_PROVIDER_UNKNOWN"
ERR_PRISM_PROVIDER = "ERR_PRISM_PROVIDER"
ERR_PRISM_RUN_LIMIT = "ERR_PRISM_RUN_LIMIT"
ERR_PRISM_RUN_FAILED = "ERR_PRISM_RUN_FAILED"
ERR_PRISM_RUN_ABORTED = "ERR_PRISM_RUN_ABORTED"
ERR_PRISM_GUARDRAIL_BLOCKED = "ERR_PRISM_GUARDRAIL_BLOCKED"
ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE = "ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE"
ERR_PRISM_TURN_POLICY = "ERR_PRISM_TURN_POLICY"
ERR_PRISM_AGENT_RUN_STATE = "ERR_PRISM_AGENT_RUN_STATE"
ERR_PRISM_LOOP_NOT_DURABLE = "ERR_PRISM_LOOP_NOT_DURABLE"
ERR_PRISM_LOOP_SNAPSHOT = "ERR_PRISM_LOOP_SNAPSHOT"
ERR_PRISM_LOOP_REVISION = "ERR_PRISM_LOOP_REVISION"
ERR_PRISM_AGENT_RUN_SUSPENDED = "ERR_PRISM_AGENT_RUN_SUSPENDED"
ERR_PRISM_DECISION_INVALID = "ERR_PRISM_DECISION_INVALID"
ERR_PRISM_DECISION_DUPLICATE = "ERR_PRISM_DECISION_DUPLICATE"
ERR_PRISM_DECISION_UNKNOWN = "ERR_PRISM_DECISION_UNKNOWN"
ERR_PRISM_DECISION_LIMIT = "ERR_PRISM_DECISION_LIMIT"
ERR_PRISM_DECISION_DECIDED = "ERR_PRISM_DECISION_DECIDED"
"""A decision on an approval another decision settled first (the error's ``decided`` names it)."""
ERR_PRISM_CHECKPOINT_CONFLICT = "ERR_PRISM_CHECKPOINT_CONFLICT"
ERR_PRISM_SESSION_APPEND_CONFLICT = "ERR_PRISM_SESSION_APPEND_CONFLICT"
ERR_PRISM_STRUCTURED_OUTPUT = "ERR_PRISM_STRUCTURED_OUTPUT"
ERR_PRISM_LEDGER = "ERR_PRISM_LEDGER"
ERR_PRISM_STORE_SCHEMA = "ERR_PRISM_STORE_SCHEMA"
ERR_PRISM_STORE_CORRUPT = "ERR_PRISM_STORE_CORRUPT"
ERR_PRISM_STORE_UNDECODABLE = "ERR_PRISM_STORE_UNDECODABLE"
ERR_PRISM_REDACTED = "ERR_PRISM_REDACTED"
ERR_PRISM_ENGINE_VERSION = "ERR_PRISM_ENGINE_VERSION"
ERR_PRISM_ENGINE_NOT_READY = "ERR_PRISM_ENGINE_NOT_READY"
ERR_PRISM_RUN_AMBIGUOUS = "ERR_PRISM_RUN_AMBIGUOUS"
ERR_PRISM_DELEGATION_SUSPENDED = "ERR_PRISM_DELEGATION_SUSPENDED"
"""A child run started by a tool call (an agent tool) suspended, so the calling run suspends too;
an exception carrying it counts as a suspension signal in tool dispatch."""


class _MultiCodeError(PrismError):
    """Base for classes with several codes: ``Cls(code, message=None, **fields)``."""

    codes: Mapping[str, str] = {}
    """Allowed codes mapped to their default message."""

    def __init__(self, code: str, message: str | None = None, **fields: object) -> None:
        if not isinstance(code, str) or not code:
            raise TypeError(f"{type(self).__name__} code must be a non-empty str, got {code!r}")
        if self.codes and code not in self.codes:
            allowed = ", ".join(sorted(self.codes))
            raise ValueError(f"{type(self).__name__}: unknown code {code!r} (expected {allowed})")
        if message is None:
            message = self.codes.get(code) or code
        super().__init__(message)
        self.code = code
        for key, value in fields.items():
            if key in ("code", "message", "args"):
                raise TypeError(f"{type(self).__name__}: field {key!r} is reserved")
            setattr(self, key, value)


# --------------------------------------------------------------------------- abort / session


class AbortError(PrismError):
    """The default abort reason; raised by ``throw_if_aborted`` for non-exception reasons.

    Code ``ERR_PRISM_ABORTED``; default message ``Agent run aborted``.
    """

    code = ERR_PRISM_ABORTED
    default_message = "Agent run aborted"


class AgentSessionBusyError(PrismError):
    """``run()``/``compact()``/``checkout()`` while a run is active.

    Code ``ERR_PRISM_SESSION_BUSY``.
    """

    code = ERR_PRISM_SESSION_BUSY
    default_message = "Agent session already has an active run"


class SteerError(_MultiCodeError):
    """``steer()`` rejected; the active run is unaffected.

    Construct with the code first: ``SteerError("ERR_PRISM_STEER_NO_RUN")``.
    """

    code = ERR_PRISM_STEER_NO_RUN
    codes = {
        ERR_PRISM_STEER_NO_RUN: "No active run to steer",
        ERR_PRISM_STEER_EMPTY: "Steer input is empty",
        ERR_PRISM_STEER_LIMIT: "Steer queue is full (8 messages / 65536 bytes)",
    }


# --------------------------------------------------------------------------- providers


class ProviderResolutionError(PrismError):
    """No provider could be resolved for the model when the run started.

    Code ``ERR_PRISM_PROVIDER_UNKNOWN``.
    """

    code = ERR_PRISM_PROVIDER_UNKNOWN
    default_message = "No provider for the model"


class ProviderTurnError(PrismError):
    """A provider attempt failed and was not retried.

    Code ``ERR_PRISM_PROVIDER``. ``str(err)`` is ``info.message``.

    When a fallback chain tried several providers and every one failed, ``info.providers`` (and
    [`failures`][prism.errors.ProviderTurnError.failures]) lists each provider tried with its model, code and message, ``info.message``
    names them all, ``info.name``/``info.code`` are the last failure's, and ``__cause__`` is the
    ``ProviderTurnError`` of that last failure (chained to the provider's own exception, if any).

    Attributes:
        info: The (redacted) provider ``ErrorInfo``; it becomes ``RunResult.error`` unchanged.
    """

    code = ERR_PRISM_PROVIDER
    default_message = "Provider turn failed"

    def __init__(self, info: ErrorInfo, message: str | None = None) -> None:
        super().__init__(message if message is not None else info.message)
        self.info = info

    @property
    def failures(self) -> tuple[ProviderFailure, ...]:
        """Each provider a fallback chain tried, with its failure (``info.providers``); empty
        when the turn failed without a fallback."""
        return self.info.providers or ()


class ProviderTransportError(_MultiCodeError):
    """Bounded SSE reading, delta reconstruction or argument parsing failed.

    The code is data (lowercase), e.g. ``sse_event_overflow``, ``sse_buffer_overflow``,
    ``incomplete_delta``, ``invalid_json_arguments``; other non-empty codes are accepted.
    Construct with the code first: ``ProviderTransportError("incomplete_delta")``.
    """

    code = "incomplete_delta"
    codes: Mapping[str, str] = {}
    _defaults = {
        "sse_event_overflow": "SSE event exceeds the maximum event size",
        "sse_buffer_overflow": "SSE buffer exceeds the maximum buffered size",
        "incomplete_delta": "Stream ended with an incomplete tool call delta",
        "invalid_json_arguments": "Tool call arguments are not a valid JSON object",
    }

    def __init__(self, code: str, message: str | None = None, **fields: object) -> None:
        if message is None and isinstance(code, str):
            message = self._defaults.get(code)
        super().__init__(code, message, **fields)


# --------------------------------------------------------------------------- limits / runs


def _num(value: Any) -> str:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return str(value)


class RunLimitExceeded(PrismError):
    """A run limit counter passed its maximum. Code ``ERR_PRISM_RUN_LIMIT``.

    Attributes:
        breach: The ``RunLimitBreach`` (limit field name, maximum, observed, currency).
    """

    code = ERR_PRISM_RUN_LIMIT
    default_message = "Run limit exceeded"

    def __init__(self, breach: RunLimitBreach, message: str | None = None) -> None:
        if message is None:
            message = (
                f"Run limit exceeded: {breach.limit} "
                f"(maximum {_num(breach.maximum)}, observed {_num(breach.observed)}"
                + (f" {breach.currency})" if breach.currency else ")")
            )
        super().__init__(message)
        self.breach = breach


class AgentRunError(PrismError):
    """Terminal failure of ``run()`` or of a resumed leg.

    ``code`` is ``ERR_PRISM_RUN_ABORTED`` when ``result.status == "aborted"``; the artifact failure
    reason (``result.error.code``) when a generate-validate-revise leg ended without an accepted
    artifact (``result.error.name == "ArtifactFailedError"``, or given as ``code=``); else
    ``result.error.code`` when it is an ``ERR_PRISM_LOOP_*`` code (an ``AgentLoopStateError``),
    ``ERR_PRISM_DELEGATION_SUSPENDED`` (a child run suspended under a caller that is not durable)
    or an ``ERR_PRISM_CONFIG*`` code (a configuration error, e.g. a child run's raised out of a
    tool); else ``ERR_PRISM_RUN_FAILED``. ``str(err)`` is ``message`` when given, else
    ``result.error.message`` when present, else ``Agent run failed`` / ``Agent run aborted``.

    Args:
        message: Explicit message (normally ``None``: derived from ``result``).
        result: The ``RunResult`` of the failed leg (``status``, ``error``, ``usage``, ...).
        code: Override of the derived code (the runtime passes the artifact reason here).

    Attributes:
        result: The ``RunResult`` of the failed leg.
    """

    code = ERR_PRISM_RUN_FAILED
    default_message = "Agent run failed"
    _passed_codes = (ERR_PRISM_CONFIG, ERR_PRISM_DELEGATION_SUSPENDED)

    def __init__(
        self, message: str | None = None, *, result: FailedLeg, code: str | None = None
    ) -> None:
        status = getattr(result, "status", None)
        error = getattr(result, "error", None)
        if message is None:
            found = getattr(error, "message", None)
            message = (
                str(found)
                if found
                else f"Agent run {'aborted' if status == 'aborted' else 'failed'}"
            )
        super().__init__(message)
        self.result = result
        self.code = code if code is not None else self._derive_code(status, error)

    def _derive_code(self, status: object, error: object) -> str:
        if status == "aborted":
            return ERR_PRISM_RUN_ABORTED
        reason = getattr(error, "code", None)  # None without an error
        if getattr(error, "name", None) == "ArtifactFailedError":
            if isinstance(reason, (str, int)) and not isinstance(reason, bool):
                return str(reason)
        elif isinstance(reason, str) and (
            reason in AgentLoopStateError.codes or reason.startswith(self._passed_codes)
        ):
            return reason
        return ERR_PRISM_RUN_FAILED

    @property
    def run_id(self) -> str:
        """The failed run's id (``result.run_id``)."""
        return str(getattr(self.result, "run_id", ""))


class AgentRunLimitError(AgentRunError):
    """A run failed because of a limit breach. Code ``ERR_PRISM_RUN_LIMIT``.

    Attributes:
        breach: The ``RunLimitBreach`` (defaults to ``result.limit``).
        result: The failed ``RunResult``.
    """

    code = ERR_PRISM_RUN_LIMIT

    def __init__(
        self,
        message: str | None = None,
        *,
        result: FailedLeg,
        breach: RunLimitBreach | None = None,
    ) -> None:
        super().__init__(message, result=result, code=ERR_PRISM_RUN_LIMIT)
        self.breach = breach if breach is not None else getattr(result, "limit", None)


class ArtifactFailedError(PrismError):
    """A generate-validate-revise leg ended without ``artifact_finished``.

    ``code`` is data: the failure reason (``parse_error``, ``tool_round_limit``, a host reason,
    or ``artifact_failed``); an ``int`` reason is kept as its ``str``.

    Args:
        message: First error message of the last ``artifact_failed`` result.
        code: The reason (``ArtifactValidation.metadata["reason"]``); default ``artifact_failed``.
        validation: The last failing ``ArtifactValidation``, if any.
    """

    code = "artifact_failed"
    default_message = "artifact loop ended without a validated artifact"

    def __init__(
        self,
        message: str | None = None,
        *,
        code: str | int | None = None,
        validation: object = None,
    ) -> None:
        super().__init__(message)
        if code is not None and not isinstance(code, bool):
            self.code = str(code)
        self.validation = validation


class GuardrailError(PrismError):
    """A terminal guardrail decision ended the run.

    ``code`` is ``ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE`` when ``record.action ==
    "interrupt"`` (the message names the stage), else ``ERR_PRISM_GUARDRAIL_BLOCKED``. Never retried.

    Attributes:
        record: The terminal ``GuardrailRecord``.
    """

    code = ERR_PRISM_GUARDRAIL_BLOCKED
    default_message = "Guardrail blocked the run"

    def __init__(self, record: GuardrailRecord, message: str | None = None) -> None:
        interrupt = record.action == "interrupt"
        if message is None:
            if interrupt:
                message = f"Guardrail interrupt is unavailable at stage {record.stage!r}"
            else:
                message = (
                    f"Guardrail {record.guardrail!r} {record.action} at stage {record.stage!r}"
                )
                if record.reason:
                    message += f": {record.reason}"
        super().__init__(message)
        self.record = record
        self.code = (
            ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE
            if interrupt
            else (ERR_PRISM_GUARDRAIL_BLOCKED)
        )


class TurnPolicyError(PrismError):
    """The turn-policy stop callback failed or decided something unusable (``ERR_PRISM_TURN_POLICY``)."""

    code = ERR_PRISM_TURN_POLICY
    default_message = "Turn policy failed"


# --------------------------------------------------------------------------- durable runs


class AgentRunStateError(PrismError):
    """Durable preflight, envelope or resume failure. Code ``ERR_PRISM_AGENT_RUN_STATE``.

    ``calls``: an ambiguity report's ``(tool_call_id, tool_name)`` pairs (as
    [`RunAmbiguousError`][prism.errors.RunAmbiguousError]'s), else ``()``; ``run_id``: the run they belong to, else ``None``.

    ``reason``: what a resume refused, before anything was written (the run stays as stored and
    can be resumed once the cause is fixed), else ``None``:

    * ``"invalid_field"`` — a stored field (``field`` names it: ``counters``, ``input``)
      cannot be used;
    * ``"agent_changed"`` — the agent tree changed since the run was stored: a child run an agent
      tool started belongs to another agent definition, or a pending call's tool is gone;
    * ``"pending_call_edited"`` — a stored pending call is not the call the transcript holds;
    * ``"arguments_not_restorable"`` — an approved call's arguments held registered secrets that
      the resuming agent's redactor cannot restore (no redactor, or other secrets)."""

    code = ERR_PRISM_AGENT_RUN_STATE
    default_message = "Invalid agent run state"
    calls: tuple[tuple[str, str], ...] = ()
    run_id: str | None = None
    reason: str | None = None
    field: str | None = None


class AgentLoopStateError(_MultiCodeError):
    """Loop durability failure; code first: ``AgentLoopStateError("ERR_PRISM_LOOP_NOT_DURABLE")``."""

    code = ERR_PRISM_LOOP_NOT_DURABLE
    codes = {
        ERR_PRISM_LOOP_NOT_DURABLE: "Loop strategy does not support durable runs "
        "(snapshot and restore are required)",
        ERR_PRISM_LOOP_SNAPSHOT: "Loop snapshot is not valid JSON-compatible state",
        ERR_PRISM_LOOP_REVISION: "Stored loop state does not match the resolved loop revision",
    }


class AgentRunSuspended(PrismError):
    """Internal control signal: a suspension was persisted.

    Code ``ERR_PRISM_AGENT_RUN_SUSPENDED``. The run returns ``RunResult(status="suspended")``.

    Attributes:
        state: The persisted ``AgentRunState``.
        interruption: The ``AgentRunInterruption`` that caused the suspension.
    """

    code = ERR_PRISM_AGENT_RUN_SUSPENDED
    default_message = "Agent run suspended"

    def __init__(
        self, state: object = None, interruption: object = None, message: str | None = None
    ) -> None:
        super().__init__(message)
        self.state = state
        self.interruption = interruption


class AgentDecisionError(_MultiCodeError):
    """Malformed, duplicate, unknown, over-limit or late resume decisions; code first:
    ``AgentDecisionError("ERR_PRISM_DECISION_UNKNOWN")``.

    ``ERR_PRISM_DECISION_DECIDED``: an approval of the batch was settled by another decision
    first (nothing of the batch was applied or recorded); ``decided`` holds the winning
    decisions (``prism.runtime.durable.DecidedApproval``: outcome, ``by``, ``decided_at``) and
    ``run_id`` the run."""

    code = ERR_PRISM_DECISION_INVALID
    codes = {
        ERR_PRISM_DECISION_INVALID: "Invalid run decision",
        ERR_PRISM_DECISION_DUPLICATE: "Duplicate approval_id in decision batch",
        ERR_PRISM_DECISION_UNKNOWN: "Unknown approval_id",
        ERR_PRISM_DECISION_LIMIT: "Decision limit exceeded",
        ERR_PRISM_DECISION_DECIDED: "Approval already decided",
    }
    decided: tuple[Any, ...] = ()
    run_id: str | None = None


class CheckpointConflictError(PrismError):
    """Version or fencing-token mismatch on ``save_checkpoint``, or a resume that lost to
    another resumer (at load or at its claim). Code ``ERR_PRISM_CHECKPOINT_CONFLICT``."""

    code = ERR_PRISM_CHECKPOINT_CONFLICT
    default_message = "Checkpoint version conflict"


# --------------------------------------------------------------------------- stores / misc


class SessionAppendConflictError(PrismError):
    """Append parent conflict or duplicate idempotent append (``ERR_PRISM_SESSION_APPEND_CONFLICT``)."""

    code = ERR_PRISM_SESSION_APPEND_CONFLICT
    default_message = "Session append conflict"


class StructuredOutputError(PrismError):
    """Invalid structured-output options or unsupported model.

    Code ``ERR_PRISM_STRUCTURED_OUTPUT``.

    Attributes:
        reason: ``"invalid_name"``, ``"invalid_schema"``, ``"schema_too_large"`` or
            ``"unsupported_model"`` (``None`` when not given).
    """

    code = ERR_PRISM_STRUCTURED_OUTPUT
    default_message = "Invalid structured output"
    _defaults = {
        "invalid_name": "Structured output name must be 1-128 characters",
        "invalid_schema": "Structured output schema must be a JSON-compatible object",
        "schema_too_large": "Structured output schema exceeds 65536 bytes",
        "unsupported_model": "Model does not support native structured output; "
        "use structured_output_mode='artifact-loop'",
    }

    def __init__(self, message: str | None = None, *, reason: str | None = None) -> None:
        if message is None and reason is not None:
            message = self._defaults.get(reason)
        super().__init__(message)
        self.reason = reason


class RunLedgerError(PrismError):
    """A ledger write failed and was detected during cleanup. Code ``ERR_PRISM_LEDGER``."""

    code = ERR_PRISM_LEDGER
    default_message = "Run ledger write failed"


class StoreError(PrismError):
    """A store's database or a stored row cannot be used; the code (given first) says how:
    ``ERR_PRISM_STORE_CORRUPT`` (a file that is not a database, or damaged),
    ``ERR_PRISM_STORE_UNDECODABLE`` (a stored value that is not valid JSON or not the record it
    should hold), ``ERR_PRISM_STORE_SCHEMA`` ([`StoreSchemaError`][prism.errors.StoreSchemaError])."""

    code = ERR_PRISM_STORE_CORRUPT
    default_message = "Store cannot be used"

    def __init__(self, code: str, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class StoreSchemaError(StoreError):
    """A migration record is unknown, newer than the package or altered (``ERR_PRISM_STORE_SCHEMA``)."""

    code = ERR_PRISM_STORE_SCHEMA
    default_message = "Unsupported store schema"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(ERR_PRISM_STORE_SCHEMA, message)


class RedactedError(PrismError):
    """Stand-in ``__cause__`` for a host exception whose message or attributes held a secret.

    Never raised on its own. Carries the original class name, the redacted message and the
    redacted original traceback as text (also a note, shown in printed tracebacks); neither the
    original object nor its traceback (frames hold raw values) is kept. ``ERR_PRISM_REDACTED``.

    Attributes:
        original_type: ``type(original).__name__``.
        traceback_text: The original's redacted ``traceback.format_tb`` text (``""``: unknown).
    """

    code = ERR_PRISM_REDACTED
    default_message = "[REDACTED]"

    def __init__(
        self, message: str | None = None, *, original_type: str, traceback_text: str = ""
    ) -> None:
        super().__init__(message)
        self.original_type = original_type
        self.traceback_text = traceback_text
        if traceback_text:
            self.add_note(f"Original {original_type} traceback (redacted):\n{traceback_text}")


# --------------------------------------------------------------------------- engines


class EngineVersionError(PrismError):
    """A worker or a submitted run pins another application version than the workers serving
    the same runs (prism's version and the agents' definition revisions differ).

    Raised when a worker starts next to live workers of another version, and when a run is
    submitted for a version no live worker serves; the message names both versions and the
    agent revisions that differ. Code ``ERR_PRISM_ENGINE_VERSION``.
    """

    code = ERR_PRISM_ENGINE_VERSION
    default_message = "Application version mismatch"


class EngineNotReadyError(PrismError):
    """The engine's tables in the database are not there yet: no worker has started on it, or
    the one starting has not finished creating them within the wait.

    Retryable: submit again once a worker is ready. Code ``ERR_PRISM_ENGINE_NOT_READY``.
    """

    code = ERR_PRISM_ENGINE_NOT_READY
    default_message = "The engine's tables are not ready"


class RunAmbiguousError(PrismError):
    """A run stopped on a tool call whose outcome is unknown: its worker died after the call
    was recorded as dispatched and before its result was stored.

    prism never runs such a call again on its own; an operator checks the tool's own records
    and repairs the stored envelope. Code ``ERR_PRISM_RUN_AMBIGUOUS``.

    Attributes:
        calls: ``(tool_call_id, tool_name)`` of each ambiguous call.
    """

    code = ERR_PRISM_RUN_AMBIGUOUS
    default_message = "Ambiguous dispatched tool requires operator resolution"

    def __init__(
        self, message: str | None = None, *, calls: tuple[tuple[str, str], ...] = ()
    ) -> None:
        super().__init__(message)
        self.calls = calls
