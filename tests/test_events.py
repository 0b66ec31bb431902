"""Tests for prism.events (04-events.md, EVT-1..3)."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

import pytest

import prism.events as events_module
from prism.events import (
    EVENT_TYPES,
    AgentEvent,
    AgentFinishedEvent,
    ErrorEvent,
    MessageDeltaEvent,
    ProviderTurnMetadata,
    ToolExecutionMetadata,
    TurnStartedEvent,
    event_from_dict,
)
from prism.loops.contracts import ArtifactError, ArtifactValidation
from prism.types import (
    ErrorInfo,
    GuardrailRecord,
    ModelConfig,
    RunLimitBreach,
    TextContent,
    ToolCallContent,
    ToolCallDeltaContent,
    ToolResult,
    Usage,
    assistant_message,
    is_json_value,
    user_message,
)

# EVT-2, copied from the spec table: type literal -> class name.
SPEC_EVENTS = {
    "agent_started": "AgentStartedEvent",
    "agent_resumed": "AgentResumedEvent",
    "agent_finished": "AgentFinishedEvent",
    "agent_suspended": "AgentSuspendedEvent",
    "agent_denied": "AgentDeniedEvent",
    "turn_started": "TurnStartedEvent",
    "turn_finished": "TurnFinishedEvent",
    "provider_turn_started": "ProviderTurnStartedEvent",
    "provider_turn_finished": "ProviderTurnFinishedEvent",
    "message_started": "MessageStartedEvent",
    "message_delta": "MessageDeltaEvent",
    "message_finished": "MessageFinishedEvent",
    "tool_execution_started": "ToolExecutionStartedEvent",
    "tool_execution_progress": "ToolExecutionProgressEvent",
    "tool_execution_finished": "ToolExecutionFinishedEvent",
    "tool_execution_error": "ToolExecutionErrorEvent",
    "tool_execution_blocked": "ToolExecutionBlockedEvent",
    "guardrail_decision": "GuardrailDecisionEvent",
    "run_limit_exceeded": "RunLimitExceededEvent",
    "queue_updated": "QueueUpdatedEvent",
    "steer_rejected": "SteerRejectedEvent",
    "event_subscriber_overflow": "EventSubscriberOverflowEvent",
    "compaction_started": "CompactionStartedEvent",
    "compaction_finished": "CompactionFinishedEvent",
    "retry_scheduled": "RetryScheduledEvent",
    "error": "ErrorEvent",
    "artifact_validation_started": "ArtifactValidationStartedEvent",
    "artifact_validation_finished": "ArtifactValidationFinishedEvent",
    "artifact_revision_started": "ArtifactRevisionStartedEvent",
    "artifact_finished": "ArtifactFinishedEvent",
    "artifact_failed": "ArtifactFailedEvent",
    # Beyond the spec table: the wrapper of a child agent run's events (sub-agents issue).
    "subagent_event": "SubagentEvent",
}

OPTIONAL_RUN_ID = {
    "event_subscriber_overflow", "compaction_started", "compaction_finished", "error"
}

_MODEL = ModelConfig("mock", "m")
_META = ProviderTurnMetadata(provider_id="mock", model=_MODEL, attempt=1)
_CALL = ToolCallContent("c1", "t", {"q": "x"})
_TOOL_META = ToolExecutionMetadata(duration_ms=12, status="finished")
_RECORD = GuardrailRecord("g", "input", "block", reason="r", metadata={"k": [1]})
_VALIDATION = ArtifactValidation(
    ok=False, errors=(ArtifactError("bad", path="/a"),), metadata={"reason": "parse_error"}
)
_INTERRUPTION = {"kind": "approval", "pending": [{"approval_id": "approval_1"}]}

SAMPLE_FIELDS: dict[str, dict[str, Any]] = {
    "agent_started": {},
    "agent_resumed": {"version": 2},
    "agent_finished": {"usage": Usage(input_tokens=1), "finish_reason": "turn_limit",
                       "stop_detail": "cap"},
    "agent_suspended": {"interruption": _INTERRUPTION, "version": 1},
    "agent_denied": {"interruption": _INTERRUPTION, "version": 3},
    "turn_started": {"turn": 1},
    "turn_finished": {"turn": 1},
    "provider_turn_started": {"turn": 1, "metadata": _META},
    "provider_turn_finished": {
        "turn": 1,
        "metadata": ProviderTurnMetadata(
            provider_id="mock", model=_MODEL, attempt=2, latency_ms=30, http_status=429
        ),
        "usage": Usage(output_tokens=2),
        "error": ErrorInfo("rate", code=429),
    },
    "message_started": {"message": dataclasses.replace(assistant_message(""), content=())},
    "message_delta": {"content": ToolCallDeltaContent(0, id="c1", arguments_text="{")},
    "message_finished": {"message": assistant_message("done")},
    "tool_execution_started": {"call": _CALL},
    "tool_execution_progress": {"tool_call_id": "c1", "name": "t", "progress": {"pct": 50},
                                "metadata": {"m": 1}},
    "tool_execution_finished": {"result": ToolResult("c1", "t", value=[1]),
                                "metadata": _TOOL_META},
    "tool_execution_error": {"call": _CALL, "error": ErrorInfo("x"),
                             "metadata": ToolExecutionMetadata(duration_ms=1, status="error")},
    "tool_execution_blocked": {"tool_call_id": "c1", "name": "t", "reason": "unknown_tool",
                               "error": ErrorInfo("no", code="unknown_tool"),
                               "metadata": ToolExecutionMetadata(duration_ms=0,
                                                                 status="blocked")},
    "guardrail_decision": {"record": _RECORD, "tool_call_id": "c1", "tool_name": "t"},
    "run_limit_exceeded": {"breach": RunLimitBreach("max_turns", 2, 3)},
    "queue_updated": {"size": 2},
    "steer_rejected": {"message": user_message("bad"), "record": _RECORD},
    "event_subscriber_overflow": {"dropped_events": 3, "max_queued_events": 10,
                                  "overflow": "drop_oldest"},
    "compaction_started": {},
    "compaction_finished": {"summary": "short"},
    "retry_scheduled": {"attempt": 1, "delay_ms": 120.5, "error": ErrorInfo("t", code="timeout")},
    "error": {"error": ErrorInfo("failed", code="ERR_PRISM_RUN_FAILED")},
    "artifact_validation_started": {"turn": 1, "attempt": 1},
    "artifact_validation_finished": {"turn": 1, "attempt": 1, "result": _VALIDATION},
    "artifact_revision_started": {"turn": 1, "attempt": 1, "failure": _VALIDATION},
    "artifact_finished": {"turn": 2, "attempt": 2, "result": ArtifactValidation(ok=True)},
    "artifact_failed": {"turn": 3, "attempt": 3, "result": _VALIDATION},
    "subagent_event": {"tool_call_id": "c1", "agent": "helper", "child_session_id": "s2",
                       "child_run_id": "run_2",
                       "event": TurnStartedEvent(session_id="s2", run_id="run_2", turn=1)},
}


def _sample(kind: str) -> AgentEvent:
    return EVENT_TYPES[kind](session_id="session_1", run_id="run_1", **SAMPLE_FIELDS[kind])


def test_evt2_type_literals_equal_spec_list() -> None:
    """EVT-2: the set of event ``type`` literals and class names equals the spec catalogue."""
    assert set(EVENT_TYPES) == set(SPEC_EVENTS)
    for kind, cls in EVENT_TYPES.items():
        assert cls.__name__ == SPEC_EVENTS[kind]
        assert getattr(events_module, cls.__name__) is cls
    assert set(typing.get_args(AgentEvent)) == set(EVENT_TYPES.values())


@pytest.mark.parametrize("kind", sorted(SPEC_EVENTS))
def test_evt1_shape(kind: str) -> None:
    """EVT-1: frozen, kw_only, ``type`` last and not an init parameter, ids default."""
    cls = EVENT_TYPES[kind]
    params = getattr(cls, "__dataclass_params__")  # noqa: B009
    assert params.frozen
    fields = dataclasses.fields(cls)
    assert fields[-1].name == "type" and fields[-1].init is False
    assert fields[-1].default == kind
    assert all(f.kw_only for f in fields if f.init)
    by_name = {f.name: f for f in fields}
    expected_default = None if kind in OPTIONAL_RUN_ID else ""
    assert by_name["run_id"].default == expected_default
    assert by_name["session_id"].default == (None if kind == "error" else "")
    event = cls(**SAMPLE_FIELDS[kind])
    assert event.type == kind
    with pytest.raises(TypeError):
        cls(type=kind, **SAMPLE_FIELDS[kind])  # type: ignore[call-arg]


@pytest.mark.parametrize("kind", sorted(SPEC_EVENTS))
def test_evt1_round_trip(kind: str) -> None:
    """EVT-1/CON-3: to_dict is JSON-safe with ``type``; event_from_dict rebuilds it equal."""
    event = _sample(kind)
    data = event.to_dict()
    assert data["type"] == kind
    assert is_json_value(data)
    rebuilt = event_from_dict(json.loads(json.dumps(data)))
    assert type(rebuilt) is type(event)
    assert rebuilt == event


def test_evt1_unknown_type_raises() -> None:
    """EVT-1: event_from_dict raises ValueError for an unknown or missing type."""
    with pytest.raises(ValueError):
        event_from_dict({"type": "not_an_event"})
    with pytest.raises(ValueError):
        event_from_dict({"turn": 1})
    with pytest.raises(ValueError):
        event_from_dict({"type": "turn_started", "turn": 1, "bogus": 2})


def test_evt1_positional_arguments_rejected_and_ids_default() -> None:
    """EVT-1: keyword-only; a loop may write TurnStartedEvent(turn=n) with no ids (SSL-2)."""
    event = TurnStartedEvent(turn=3)
    assert event.session_id == "" and event.run_id == ""
    with pytest.raises(TypeError):
        TurnStartedEvent("s", "r", 3)  # type: ignore[call-arg]
    error = ErrorEvent(error=ErrorInfo("x"))
    assert error.session_id is None and error.run_id is None
    assert "session_id" not in error.to_dict()


def test_evt3_helper_types() -> None:
    """EVT-3: ProviderTurnMetadata and ToolExecutionMetadata shapes and defaults."""
    assert _META.latency_ms is None and _META.http_status is None
    assert ProviderTurnMetadata.from_dict(_META.to_dict()) == _META
    assert ToolExecutionMetadata.from_dict(_TOOL_META.to_dict()) == _TOOL_META


def test_evt2_finished_event_defaults() -> None:
    """EVT-2: agent_finished usage/finish_reason/stop_detail default to None."""
    event = AgentFinishedEvent()
    assert event.usage is None and event.finish_reason is None and event.stop_detail is None


def test_evt2_message_delta_content_union() -> None:
    """EVT-2: message_delta content rebuilds the right content class from its type."""
    for part in (TextContent("x"), ToolCallDeltaContent(1, name="n")):
        event = MessageDeltaEvent(content=part)
        assert event_from_dict(event.to_dict()) == event
