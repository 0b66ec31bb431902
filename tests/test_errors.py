"""Tests for prism.errors (09-error-codes.md)."""

from __future__ import annotations

import inspect
import pickle

import pytest

import prism.errors as errors_module
from prism.errors import (
    AbortError,
    AgentDecisionError,
    AgentLoopStateError,
    AgentRunError,
    AgentRunLimitError,
    AgentRunStateError,
    AgentRunSuspended,
    AgentSessionBusyError,
    ArtifactFailedError,
    CheckpointConflictError,
    EngineNotReadyError,
    EngineVersionError,
    GuardrailError,
    PrismConfigError,
    PrismError,
    ProviderResolutionError,
    ProviderTransportError,
    ProviderTurnError,
    RedactedError,
    RunAmbiguousError,
    RunLedgerError,
    RunLimitExceeded,
    SessionAppendConflictError,
    SteerError,
    StoreSchemaError,
    StructuredOutputError,
    TurnPolicyError,
)
from prism.types import ErrorInfo, GuardrailRecord, RunLimitBreach, RunResult

SINGLE_CODE = {
    PrismConfigError: "ERR_PRISM_CONFIG",
    AbortError: "ERR_PRISM_ABORTED",
    AgentSessionBusyError: "ERR_PRISM_SESSION_BUSY",
    ProviderResolutionError: "ERR_PRISM_PROVIDER_UNKNOWN",
    TurnPolicyError: "ERR_PRISM_TURN_POLICY",
    AgentRunStateError: "ERR_PRISM_AGENT_RUN_STATE",
    CheckpointConflictError: "ERR_PRISM_CHECKPOINT_CONFLICT",
    SessionAppendConflictError: "ERR_PRISM_SESSION_APPEND_CONFLICT",
    RunLedgerError: "ERR_PRISM_LEDGER",
    StoreSchemaError: "ERR_PRISM_STORE_SCHEMA",
    EngineVersionError: "ERR_PRISM_ENGINE_VERSION",
    EngineNotReadyError: "ERR_PRISM_ENGINE_NOT_READY",
    RunAmbiguousError: "ERR_PRISM_RUN_AMBIGUOUS",
}


def _result(status: str = "failed", error: ErrorInfo | None = None, **kw: object) -> RunResult:
    return RunResult(run_id="run_1", session_id="s", status=status, error=error, **kw)  # type: ignore[arg-type]


def test_err1_every_class_derives_from_prism_error() -> None:
    """ERR-1: every exception class of prism.errors derives from PrismError and has a code."""
    classes = [
        obj
        for name, obj in vars(errors_module).items()
        if inspect.isclass(obj) and issubclass(obj, BaseException) and not name.startswith("_")
    ]
    assert len(classes) == 28
    for cls in classes:
        assert issubclass(cls, PrismError)
        assert isinstance(cls.code, str) and cls.code
    assert set(errors_module.__all__) >= {c.__name__ for c in classes}


@pytest.mark.parametrize(("cls", "code"), list(SINGLE_CODE.items()), ids=lambda v: str(v))
def test_err5_single_code_message_first(cls: type[PrismError], code: str) -> None:
    """ERR-5: one-code classes take the message first; str(err) is the message."""
    err = cls("something went wrong")
    assert err.code == code and code.startswith("ERR_PRISM_")
    assert str(err) == "something went wrong" == err.message
    assert err.args == ("something went wrong",)
    assert str(cls())  # a default sentence


def test_err_config_error_is_value_error() -> None:
    """ERR-2 table: PrismConfigError is also a ValueError."""
    assert issubclass(PrismConfigError, ValueError)
    with pytest.raises(ValueError):
        raise PrismConfigError("Duplicate tool: x")


def test_con33_abort_error_default_message() -> None:
    """CON-33/ERR table: AbortError's default message."""
    assert str(AbortError()) == "Agent run aborted"


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("ERR_PRISM_STEER_NO_RUN", "No active run to steer"),
        ("ERR_PRISM_STEER_EMPTY", "Steer input is empty"),
        ("ERR_PRISM_STEER_LIMIT", "Steer queue is full (8 messages / 65536 bytes)"),
    ],
)
def test_err5_steer_error_code_first_with_default_sentence(code: str, message: str) -> None:
    """ERR-5: SteerError(code) has that code and a fixed default sentence."""
    err = SteerError(code)
    assert err.code == code and str(err) == message


def test_err5_multi_code_fields_and_unknown_codes() -> None:
    """ERR-5: extra fields become attributes; unknown codes rejected for identity codes."""
    err = AgentDecisionError("ERR_PRISM_DECISION_UNKNOWN", "nope", approval_id="approval_1")
    assert err.code == "ERR_PRISM_DECISION_UNKNOWN" and err.approval_id == "approval_1"  # type: ignore[attr-defined]
    assert str(err) == "nope"
    for code in ("ERR_PRISM_DECISION_INVALID", "ERR_PRISM_DECISION_DUPLICATE",
                 "ERR_PRISM_DECISION_LIMIT"):
        assert AgentDecisionError(code).code == code
    for code in ("ERR_PRISM_LOOP_NOT_DURABLE", "ERR_PRISM_LOOP_SNAPSHOT", "ERR_PRISM_LOOP_REVISION"):
        assert AgentLoopStateError(code).code == code
        assert str(AgentLoopStateError(code))
    with pytest.raises(ValueError):
        SteerError("ERR_PRISM_STEER_TYPO")
    with pytest.raises(TypeError):
        SteerError("ERR_PRISM_STEER_EMPTY", code="x")  # type: ignore[misc]


@pytest.mark.parametrize(
    "code",
    ["sse_event_overflow", "sse_buffer_overflow", "incomplete_delta", "invalid_json_arguments"],
)
def test_err1_transport_codes_are_lowercase_data(code: str) -> None:
    """ERR-1: ProviderTransportError codes are the lowercase transport codes."""
    err = ProviderTransportError(code)
    assert err.code == code and str(err)
    assert ProviderTransportError(code, "custom").message == "custom"


def test_err5_provider_turn_error_carries_info() -> None:
    """ERR-5/RETRY-3: ProviderTurnError(info) keeps .info; str is info.message."""
    info = ErrorInfo("rate limited", code=429)
    err = ProviderTurnError(info)
    assert err.info is info and err.code == "ERR_PRISM_PROVIDER" and str(err) == "rate limited"


def test_err5_run_limit_exceeded() -> None:
    """LIM-7/ERR-5: RunLimitExceeded(breach) with .breach and code ERR_PRISM_RUN_LIMIT."""
    breach = RunLimitBreach("max_tool_calls", 2.0, 3.0)
    err = RunLimitExceeded(breach)
    assert err.breach is breach and err.code == "ERR_PRISM_RUN_LIMIT"
    assert "max_tool_calls" in str(err) and "maximum 2" in str(err)


def test_err3_agent_run_error_codes_and_messages() -> None:
    """ERR-3: code by status; str(err) from result.error.message or the default sentence."""
    failed = AgentRunError(result=_result("failed"))
    assert failed.code == "ERR_PRISM_RUN_FAILED" and str(failed) == "Agent run failed"
    aborted = AgentRunError(result=_result("aborted"))
    assert aborted.code == "ERR_PRISM_RUN_ABORTED" and str(aborted) == "Agent run aborted"
    with_error = AgentRunError(result=_result("failed", ErrorInfo("provider down", code=503)))
    assert str(with_error) == "provider down" and with_error.code == "ERR_PRISM_RUN_FAILED"
    assert with_error.result.error is not None and with_error.run_id == "run_1"
    explicit = AgentRunError("explicit", result=_result("failed", ErrorInfo("x")))
    assert str(explicit) == "explicit"


def test_err3_artifact_failure_code_is_reason() -> None:
    """ERR-3/RUN-17: an artifact failure's AgentRunError code equals result.error.code."""
    info = ErrorInfo("no artifact text in model output", name="ArtifactFailedError",
                     code="parse_error")
    err = AgentRunError(result=_result("failed", info))
    assert err.code == "parse_error" == info.code
    assert AgentRunError(result=_result("failed"), code="tool_round_limit").code == (
        "tool_round_limit"
    )
    aborted = AgentRunError(result=_result("aborted", info))
    assert aborted.code == "ERR_PRISM_RUN_ABORTED"


@pytest.mark.parametrize(
    "code", ["ERR_PRISM_LOOP_NOT_DURABLE", "ERR_PRISM_LOOP_SNAPSHOT", "ERR_PRISM_LOOP_REVISION"]
)
def test_err3_loop_state_failure_code_is_the_top_level_code(code: str) -> None:
    """ERR-3: a run failed by a loop-state error carries that code itself, not RUN_FAILED."""
    info = ErrorInfo(AgentLoopStateError(code).message, name="AgentLoopStateError", code=code)
    assert AgentRunError(result=_result("failed", info)).code == code
    assert AgentRunError(result=_result("aborted", info)).code == "ERR_PRISM_RUN_ABORTED"
    host = ErrorInfo("tool broke", name="ValueError", code="ERR_PRISM_LOOP_TYPO")
    assert AgentRunError(result=_result("failed", host)).code == "ERR_PRISM_RUN_FAILED"


def test_err3_agent_run_limit_error() -> None:
    """ERR-3/LIM-7: AgentRunLimitError code ERR_PRISM_RUN_LIMIT with .breach and .result."""
    breach = RunLimitBreach("max_turns", 1, 2)
    result = _result("failed", ErrorInfo("limit", code="ERR_PRISM_RUN_LIMIT"), limit=breach)
    err = AgentRunLimitError(result=result)
    assert isinstance(err, AgentRunError)
    assert err.code == "ERR_PRISM_RUN_LIMIT" and err.breach is breach and err.result is result


def test_run17_artifact_failed_error() -> None:
    """RUN-17/ERR table: ArtifactFailedError code is the reason, default artifact_failed."""
    assert ArtifactFailedError().code == "artifact_failed"
    assert str(ArtifactFailedError()) == "artifact loop ended without a validated artifact"
    err = ArtifactFailedError("bad json", code="parse_error")
    assert err.code == "parse_error" and str(err) == "bad json"
    assert ArtifactFailedError("x", code=7).code == "7"


def test_grd7_guardrail_error_codes() -> None:
    """GRD-7: block/tripwire -> BLOCKED; interrupt -> INTERRUPT_UNAVAILABLE naming the stage."""
    block = GuardrailError(GuardrailRecord("pii", "output", "block", reason="pii"))
    assert block.code == "ERR_PRISM_GUARDRAIL_BLOCKED" and block.record.guardrail == "pii"
    trip = GuardrailError(GuardrailRecord("g", "tool_input", "tripwire"))
    assert trip.code == "ERR_PRISM_GUARDRAIL_BLOCKED"
    interrupt = GuardrailError(GuardrailRecord("g", "tool_output", "interrupt"))
    assert interrupt.code == "ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE"
    assert "tool_output" in str(interrupt)


def test_err_table_suspended_structured_redacted() -> None:
    """ERR table: AgentRunSuspended/StructuredOutputError/RedactedError fields and codes."""
    sus = AgentRunSuspended({"v": 1}, {"kind": "approval"})
    assert sus.code == "ERR_PRISM_AGENT_RUN_SUSPENDED"
    assert sus.state == {"v": 1} and sus.interruption == {"kind": "approval"}
    so = StructuredOutputError(reason="unsupported_model")
    assert so.code == "ERR_PRISM_STRUCTURED_OUTPUT" and so.reason == "unsupported_model"
    assert "artifact-loop" in str(so)
    red = RedactedError("key [REDACTED]", original_type="ValueError")
    assert red.code == "ERR_PRISM_REDACTED" and red.original_type == "ValueError"
    assert str(red) == "key [REDACTED]"


def test_errors_pickle_round_trip() -> None:
    """Errors with data-first constructors survive pickling with their fields."""
    err = AgentRunError(result=_result("aborted"))
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is AgentRunError and copy.code == err.code and str(copy) == str(err)
    steer = pickle.loads(pickle.dumps(SteerError("ERR_PRISM_STEER_EMPTY")))
    assert steer.code == "ERR_PRISM_STEER_EMPTY"
