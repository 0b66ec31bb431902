"""Execution timeline: a pure projection of one run's ledger rows into turns.

[`project_execution_timeline()`][prism.timeline.project_execution_timeline] reads a run's event rows (and optionally its run rows) and
returns an [`ExecutionTimeline`][prism.timeline.ExecutionTimeline]: the run's status and stop reason, its usage, how many legs
it took, and per turn the provider attempts, whether an assistant message was produced, the tool
calls with their outcome and the artifact candidates with theirs. It performs no I/O and works on
rows read back from any ledger (events as objects or as dicts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from prism._serde import Serializable
from prism.ledger_records import AgentEventRecord, RunRecord, RunRecordStatus
from prism.types import Usage

__all__ = [
    "ExecutionTimeline",
    "TimelineArtifactAttempt",
    "TimelineStatus",
    "TimelineToolCall",
    "TimelineTurn",
    "project_execution_timeline",
]

TimelineStatus: TypeAlias = RunRecordStatus
"""Status of an [`ExecutionTimeline`][prism.timeline.ExecutionTimeline]."""


@dataclass(frozen=True, slots=True)
class TimelineToolCall(Serializable):
    """A tool call of a turn, from its terminal tool event."""

    tool_call_id: str
    """The call id."""
    name: str
    """Tool name."""
    outcome: Literal["finished", "error", "blocked"]
    """Terminal event: ``tool_execution_finished`` / ``_error`` / ``_blocked``."""


@dataclass(frozen=True, slots=True)
class TimelineArtifactAttempt(Serializable):
    """An artifact candidate of a turn."""

    attempt: int
    """1-based candidate number of the leg."""
    outcome: Literal["finished", "revised", "failed"]
    """``artifact_finished``, ``artifact_revision_started`` or ``artifact_failed``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineTurn(Serializable):
    """Events from one ``turn_started`` up to the next one."""

    turn: int
    """The turn number (a resumed leg starts again at 1)."""
    provider_attempts: int = 0
    """``provider_turn_started`` events of the turn."""
    assistant_message: bool = False
    """Whether a ``message_finished`` event was emitted."""
    tool_calls: tuple[TimelineToolCall, ...] = ()
    """Dispatched calls, in terminal-event order."""
    artifact_attempts: tuple[TimelineArtifactAttempt, ...] = ()
    """Artifact candidates judged in the turn."""

    def __post_init__(self) -> None:
        for name in ("tool_calls", "artifact_attempts"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionTimeline(Serializable):
    """A pure projection of one run's ledger rows."""

    run_id: str | None = None
    """The run id (``None`` when no row was given)."""
    session_id: str | None = None
    """The session id."""
    status: TimelineStatus = "running"
    """Status of the last run record, else derived from the last terminal event."""
    stop_reason: str | None = None
    """From the last ``agent_finished`` (``finish_reason``), else from the last run record."""
    stop_detail: str | None = None
    """From the last ``agent_finished``, else from the last run record."""
    usage: Usage | None = None
    """From the last ``agent_finished``."""
    turns: tuple[TimelineTurn, ...] = ()
    """One per ``turn_started`` event, in event order."""
    legs: int = 0
    """Number of ``agent_started`` events (1 + resumed legs)."""

    def __post_init__(self) -> None:
        if not isinstance(self.turns, tuple):
            object.__setattr__(self, "turns", tuple(self.turns))


_TERMINAL_STATUS: Final[Mapping[str, TimelineStatus]] = {
    "agent_finished": "succeeded",
    "agent_suspended": "suspended",
    "agent_denied": "denied",
    "error": "failed",
}


def _get(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


class _TurnBuilder:
    __slots__ = ("artifacts", "attempts", "message", "tools", "turn")

    def __init__(self, turn: int) -> None:
        self.turn = turn
        self.attempts = 0
        self.message = False
        self.tools: list[TimelineToolCall] = []
        self.artifacts: list[TimelineArtifactAttempt] = []

    def build(self) -> TimelineTurn:
        return TimelineTurn(
            turn=self.turn,
            provider_attempts=self.attempts,
            assistant_message=self.message,
            tool_calls=tuple(self.tools),
            artifact_attempts=tuple(self.artifacts),
        )


def project_execution_timeline(
    events: Iterable[AgentEventRecord], run_records: Iterable[RunRecord] = ()
) -> ExecutionTimeline:
    """Project one run's ledger rows into an [`ExecutionTimeline`][prism.timeline.ExecutionTimeline].

    Events are taken in the order given (ledger order; timestamps are not re-sorted). Each
    ``turn_started`` opens a [`TimelineTurn`][prism.timeline.TimelineTurn] that gathers the events up to the next
    ``turn_started``: ``provider_turn_started`` counts attempts, ``message_finished`` sets
    ``assistant_message``, terminal tool events give [`TimelineToolCall`][prism.timeline.TimelineToolCall] and
    ``artifact_finished`` / ``artifact_revision_started`` / ``artifact_failed`` give
    [`TimelineArtifactAttempt`][prism.timeline.TimelineArtifactAttempt]. ``status`` is the last run record's status, else derived
    from the last terminal event (``agent_finished`` → ``succeeded``, ``agent_suspended`` →
    ``suspended``, ``agent_denied`` → ``denied``, ``error`` → ``failed``, none → ``running``).

    Args:
        events: The run's [`AgentEventRecord`][prism.timeline.AgentEventRecord] rows (events as objects or dicts).
        run_records: The run's [`RunRecord`][prism.timeline.RunRecord] rows.

    Raises:
        ValueError: the rows belong to more than one run.
    """
    records = list(events)
    runs = list(run_records)
    run_ids = {r.run_id for r in records} | {r.id for r in runs}
    if len(run_ids) > 1:
        raise ValueError(
            "project_execution_timeline expects the rows of one run, got run ids: "
            + ", ".join(sorted(run_ids))
        )
    run_id = next(iter(run_ids)) if run_ids else None
    session_id: str | None = None
    for r in records:
        if r.session_id:
            session_id = r.session_id
            break
    if session_id is None:
        for rr in runs:
            if rr.session_id:
                session_id = rr.session_id
                break

    turns: list[TimelineTurn] = []
    current: _TurnBuilder | None = None
    legs = 0
    last_terminal: str | None = None
    finished: Any = None
    for rec in records:
        kind = rec.type
        ev: Any = rec.event
        if kind == "turn_started":
            if current is not None:
                turns.append(current.build())
            turn = _get(ev, "turn")
            current = _TurnBuilder(turn if isinstance(turn, int) else len(turns) + 1)
            continue
        if kind == "agent_started":
            legs += 1
        if kind in _TERMINAL_STATUS:
            last_terminal = kind
            if kind == "agent_finished":
                finished = ev
        if current is None:
            continue
        if kind == "provider_turn_started":
            current.attempts += 1
        elif kind == "message_finished":
            current.message = True
        elif kind == "tool_execution_finished":
            result = _get(ev, "result")
            current.tools.append(
                TimelineToolCall(
                    str(_get(result, "tool_call_id")), str(_get(result, "name")), "finished"
                )
            )
        elif kind == "tool_execution_error":
            call = _get(ev, "call")
            current.tools.append(
                TimelineToolCall(str(_get(call, "id")), str(_get(call, "name")), "error")
            )
        elif kind == "tool_execution_blocked":
            current.tools.append(
                TimelineToolCall(str(_get(ev, "tool_call_id")), str(_get(ev, "name")), "blocked")
            )
        elif kind in ("artifact_finished", "artifact_revision_started", "artifact_failed"):
            outcome: Literal["finished", "revised", "failed"] = (
                "finished"
                if kind == "artifact_finished"
                else "revised"
                if kind == "artifact_revision_started"
                else "failed"
            )
            attempt = _get(ev, "attempt")
            current.artifacts.append(
                TimelineArtifactAttempt(attempt if isinstance(attempt, int) else 0, outcome)
            )
    if current is not None:
        turns.append(current.build())

    last_run = runs[-1] if runs else None
    status: TimelineStatus
    if last_run is not None:
        status = last_run.status
    elif last_terminal is not None:
        status = _TERMINAL_STATUS[last_terminal]
    else:
        status = "running"

    usage: Usage | None = None
    if finished is not None:
        stop_reason = _get(finished, "finish_reason")
        stop_detail = _get(finished, "stop_detail")
        raw_usage = _get(finished, "usage")
        usage = Usage.from_dict(raw_usage) if isinstance(raw_usage, Mapping) else raw_usage
    elif last_run is not None:
        stop_reason = last_run.stop_reason
        stop_detail = last_run.stop_detail
    else:
        stop_reason = stop_detail = None
    return ExecutionTimeline(
        run_id=run_id,
        session_id=session_id,
        status=status,
        stop_reason=stop_reason,
        stop_detail=stop_detail,
        usage=usage,
        turns=tuple(turns),
        legs=legs,
    )
