"""Execution timeline projection of a run's ledger rows (CON-32)."""

from __future__ import annotations

from typing import Any

import pytest

from prism.events import (
    AgentFinishedEvent,
    AgentResumedEvent,
    AgentStartedEvent,
    AgentSuspendedEvent,
    ArtifactFailedEvent,
    ArtifactFinishedEvent,
    ArtifactRevisionStartedEvent,
    ErrorEvent,
    MessageFinishedEvent,
    ProviderTurnMetadata,
    ProviderTurnStartedEvent,
    ToolExecutionBlockedEvent,
    ToolExecutionErrorEvent,
    ToolExecutionFinishedEvent,
    ToolExecutionMetadata,
    TurnFinishedEvent,
    TurnStartedEvent,
)
from prism.ledger_records import (
    AgentEventRecord,
    finish_run_record,
    start_run_record,
)
from prism.loops.contracts import ArtifactValidation
from prism.timeline import (
    ExecutionTimeline,
    TimelineArtifactAttempt,
    TimelineToolCall,
    TimelineTurn,
    project_execution_timeline,
)
from prism.types import (
    ErrorInfo,
    ModelConfig,
    ToolCallContent,
    ToolResult,
    Usage,
    assistant_message,
)

MODEL = ModelConfig("mock", "m1")


def event_record(event: Any, run_id: str = "run_1", session_id: str = "s1") -> AgentEventRecord:
    return AgentEventRecord(
        id="event_x",
        session_id=session_id,
        run_id=run_id,
        type=event.type,
        timestamp="2024-01-01T00:00:00.000Z",
        event=event,
    )


# --------------------------------------------------------------------------- CON-32 timeline


def meta(status: str = "finished") -> ToolExecutionMetadata:
    return ToolExecutionMetadata(duration_ms=1, status=status)  # type: ignore[arg-type]


def attempt_started(turn: int, attempt: int = 1) -> ProviderTurnStartedEvent:
    return ProviderTurnStartedEvent(
        turn=turn, metadata=ProviderTurnMetadata(provider_id="mock", model=MODEL, attempt=attempt)
    )


def full_run_events() -> list[Any]:
    ok = ArtifactValidation(ok=True)
    bad = ArtifactValidation(ok=False)
    return [
        AgentStartedEvent(),
        TurnStartedEvent(turn=1),
        attempt_started(1, 1),
        attempt_started(1, 2),
        MessageFinishedEvent(message=assistant_message("x")),
        TurnFinishedEvent(turn=1),
        ToolExecutionFinishedEvent(result=ToolResult("c1", "search", value=1), metadata=meta()),
        ToolExecutionErrorEvent(call=ToolCallContent("c2", "fetch", {}), error=ErrorInfo("e"),
                                metadata=meta("error")),
        ToolExecutionBlockedEvent(tool_call_id="c3", name="rm", reason="unknown_tool",
                                  error=ErrorInfo("no"), metadata=meta("blocked")),
        TurnStartedEvent(turn=2),
        attempt_started(2),
        TurnFinishedEvent(turn=2),
        ArtifactRevisionStartedEvent(turn=2, attempt=1, failure=bad),
        TurnStartedEvent(turn=3),
        attempt_started(3),
        MessageFinishedEvent(message=assistant_message("y")),
        ArtifactFinishedEvent(turn=3, attempt=2, result=ok),
        AgentFinishedEvent(usage=Usage(input_tokens=5), finish_reason="host_policy",
                           stop_detail="done"),
    ]


def test_con32_timeline_projection() -> None:
    """CON-32: turns, attempts, messages, tool outcomes, artifact attempts, legs, status."""
    timeline = project_execution_timeline([event_record(e) for e in full_run_events()])
    assert timeline == ExecutionTimeline(
        run_id="run_1",
        session_id="s1",
        status="succeeded",
        stop_reason="host_policy",
        stop_detail="done",
        usage=Usage(input_tokens=5),
        legs=1,
        turns=(
            TimelineTurn(
                turn=1,
                provider_attempts=2,
                assistant_message=True,
                tool_calls=(
                    TimelineToolCall("c1", "search", "finished"),
                    TimelineToolCall("c2", "fetch", "error"),
                    TimelineToolCall("c3", "rm", "blocked"),
                ),
            ),
            TimelineTurn(
                turn=2,
                provider_attempts=1,
                artifact_attempts=(TimelineArtifactAttempt(1, "revised"),),
            ),
            TimelineTurn(
                turn=3,
                provider_attempts=1,
                assistant_message=True,
                artifact_attempts=(TimelineArtifactAttempt(2, "finished"),),
            ),
        ),
    )
    assert ExecutionTimeline.from_dict(timeline.to_dict()) == timeline


def test_con32_status_from_last_run_record_wins() -> None:
    """CON-32: status is the last RunRecord's; stop fields from agent_finished first."""
    events = [event_record(e) for e in full_run_events()]
    start = start_run_record(run_id="run_1", session_id="s1", branch_id=None, model=MODEL)
    finish = finish_run_record(start, status="succeeded", stop_reason="turn_limit",
                               stop_detail="max_turns")
    timeline = project_execution_timeline(events, [start, finish])
    assert timeline.status == "succeeded"
    assert timeline.stop_reason == "host_policy"  # from agent_finished
    only_records = project_execution_timeline([], [start, finish])
    assert only_records.stop_reason == "turn_limit"
    assert only_records.stop_detail == "max_turns"
    assert only_records.run_id == "run_1" and only_records.turns == ()
    running = project_execution_timeline(events, [start])
    assert running.status == "running"


@pytest.mark.parametrize(
    "terminal,status",
    [
        (AgentSuspendedEvent(interruption=None, version=1), "suspended"),
        (ErrorEvent(error=ErrorInfo("x")), "failed"),
        (TurnStartedEvent(turn=1), "running"),
    ],
)
def test_con32_status_derived_from_last_terminal_event(terminal: Any, status: str) -> None:
    """CON-32: without run records, status comes from the last terminal event."""
    events = [event_record(AgentStartedEvent()), event_record(terminal)]
    assert project_execution_timeline(events).status == status


def test_con32_resumed_legs_repeat_turn_numbers() -> None:
    """CON-32: a resumed leg starts again at turn 1; turns are never merged; legs counted."""
    events = [
        AgentStartedEvent(),
        TurnStartedEvent(turn=1),
        attempt_started(1),
        AgentSuspendedEvent(interruption=None, version=1),
        AgentStartedEvent(),
        AgentResumedEvent(version=1),
        TurnStartedEvent(turn=1),
        attempt_started(1),
        ArtifactFailedEvent(turn=1, attempt=1, result=ArtifactValidation(ok=False)),
        ErrorEvent(error=ErrorInfo("x")),
    ]
    timeline = project_execution_timeline([event_record(e) for e in events])
    assert [t.turn for t in timeline.turns] == [1, 1]
    assert timeline.legs == 2
    assert timeline.status == "failed"
    assert timeline.turns[1].artifact_attempts == (TimelineArtifactAttempt(1, "failed"),)
    assert timeline.usage is None and timeline.stop_reason is None


def test_con32_rows_of_several_runs_raise() -> None:
    """CON-32: all rows must share one run_id."""
    with pytest.raises(ValueError, match="run"):
        project_execution_timeline(
            [event_record(AgentStartedEvent()), event_record(AgentStartedEvent(), run_id="run_2")]
        )
    start = start_run_record(run_id="run_3", session_id="s1", branch_id=None, model=MODEL)
    with pytest.raises(ValueError):
        project_execution_timeline([event_record(AgentStartedEvent())], [start])


def test_con32_events_are_taken_in_the_order_given() -> None:
    """CON-32: ledger order, timestamps are not re-sorted."""
    a = AgentEventRecord(id="e1", session_id="s1", run_id="run_1", type="turn_started",
                         timestamp="2024-01-02T00:00:00.000Z", event=TurnStartedEvent(turn=7))
    b = AgentEventRecord(id="e2", session_id="s1", run_id="run_1", type="turn_started",
                         timestamp="2024-01-01T00:00:00.000Z", event=TurnStartedEvent(turn=8))
    assert [t.turn for t in project_execution_timeline([a, b]).turns] == [7, 8]


def test_con32_accepts_records_whose_events_are_dicts() -> None:
    """CON-32: rows read back as plain dicts still project."""
    events = [e.to_dict() for e in full_run_events()]
    rows = [AgentEventRecord(id="e", session_id="s1", run_id="run_1", type=d["type"],
                             timestamp="t", event=d) for d in events]  # type: ignore[arg-type]
    timeline = project_execution_timeline(rows)
    assert timeline.usage == Usage(input_tokens=5)
    assert timeline.turns[0].tool_calls[0] == TimelineToolCall("c1", "search", "finished")
