"""What a submitter sees of a run: its outcome after each leg, and its listing row.

A run's workflow records one *outcome* per leg (the DBOS step's output, a JSON object) and
publishes the latest one as the workflow event [`OUTCOME_EVENT`][prism.engines.dbos._outcome.OUTCOME_EVENT]; its final outcome is the
workflow's result. [`RunOutcome`][prism.engines.dbos._outcome.RunOutcome] is the typed view a submitter gets back;
[`RunInfo`][prism.engines.dbos._outcome.RunInfo] is one row of [`list_runs()`][prism.engines.dbos.client.RunClient.list_runs].
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from prism.errors import RunAmbiguousError
from prism.runtime.durable import AgentRunInterruption, AgentRunState
from prism.types import JsonValue, RunResult, is_json_value

__all__ = [
    "DECISION_TOPIC",
    "FINAL_STATUSES",
    "OUTCOME_EVENT",
    "WAITING_STATUSES",
    "WORKFLOW_NAME",
    "AmbiguousCall",
    "EngineRunStatus",
    "RunInfo",
    "RunOutcome",
    "outcome_json",
]

WORKFLOW_NAME: Final = "prism.run"
"""The DBOS workflow name of a prism run."""
OUTCOME_EVENT: Final = "prism.outcome"
"""Workflow event key holding the latest leg outcome (a JSON object)."""
DECISION_TOPIC: Final = "prism.decision"
"""Message topic of operator decisions sent to a waiting run."""

EngineRunStatus: TypeAlias = Literal[
    "queued",
    "running",
    "suspended",
    "ambiguous",
    "succeeded",
    "failed",
    "aborted",
    "denied",
    "cancelled",
]
"""Where a run stands, seen from a submitter.

``queued``: submitted, no worker has started it; ``running``: a worker runs (or is about to
continue) one of its legs; ``suspended``: waiting for an approval decision; ``ambiguous``: stopped
on a tool call whose outcome is unknown, waiting for an operator; ``succeeded`` / ``failed`` /
``aborted`` / ``denied``: final, as prism's ``RunResult.status``; ``cancelled``: the DBOS workflow
was cancelled by an operator."""

FINAL_STATUSES: Final = frozenset(("succeeded", "failed", "aborted", "denied", "cancelled"))
WAITING_STATUSES: Final = frozenset(("suspended", "ambiguous"))


@dataclass(frozen=True, slots=True, kw_only=True)
class AmbiguousCall:
    """A tool call whose worker died after it was dispatched and before its result was stored."""

    tool_call_id: str
    """The call's id."""
    tool_name: str
    """The tool it called."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOutcome:
    """What a run's latest leg ended in, as [`RunHandle.wait()`][prism.engines.dbos.RunHandle.wait] returns it."""

    run_id: str
    """The run (and DBOS workflow) id."""
    status: EngineRunStatus
    """See [`EngineRunStatus`][prism.engines.dbos._outcome.EngineRunStatus]."""
    leg: int
    """How many legs the run has had (1 after its first); 0 before any."""
    result: RunResult | None = None
    """The ``RunResult`` of the leg (``messages`` are that leg's); ``None`` while queued or
    running, and for an ambiguous run."""
    ambiguous_calls: tuple[AmbiguousCall, ...] = ()
    """The calls an ``ambiguous`` run stopped on."""
    worker: str | None = None
    """The id of the worker that ran the leg."""
    note: str | None = None
    """Why a decision was refused (the run still waits), or what failed outside the run."""

    def raise_for_ambiguous(self) -> None:
        """Raise ``RunAmbiguousError`` (``ERR_PRISM_RUN_AMBIGUOUS``) naming the calls when the
        run is ``ambiguous``."""
        if self.status != "ambiguous":
            return
        named = ", ".join(f"{c.tool_name} ({c.tool_call_id})" for c in self.ambiguous_calls)
        raise RunAmbiguousError(
            f"run {self.run_id} stopped on ambiguous tool call(s): {named}; check the tool's own "
            "records, repair the stored run state, then send decision='continue'",
            calls=tuple((c.tool_call_id, c.tool_name) for c in self.ambiguous_calls),
        )

    @classmethod
    def from_json(cls, run_id: str, data: Mapping[str, Any]) -> RunOutcome:
        """The typed view of an outcome object (``outcome_json()``)."""
        raw = data.get("result")
        result: RunResult | None = None
        if isinstance(raw, Mapping):
            result = RunResult.from_dict(dict(raw))
            state = raw.get("run_state")
            interruption = raw.get("interruption")
            result = dataclasses.replace(
                result,
                run_state=(
                    AgentRunState.from_dict(dict(state)) if isinstance(state, Mapping) else None
                ),
                interruption=(
                    AgentRunInterruption.from_dict(dict(interruption))
                    if isinstance(interruption, Mapping)
                    else None
                ),
            )
        calls = tuple(
            AmbiguousCall(tool_call_id=str(c[0]), tool_name=str(c[1]))
            for c in data.get("calls") or ()
        )
        worker = data.get("worker")
        note = data.get("note")
        return cls(
            run_id=run_id,
            status=data["status"],
            leg=int(data.get("leg") or 0),
            result=result,
            ambiguous_calls=calls,
            worker=worker if isinstance(worker, str) else None,
            note=note if isinstance(note, str) else None,
        )


def outcome_json(
    status: str,
    *,
    result: RunResult | None = None,
    calls: tuple[tuple[str, str], ...] = (),
    worker: str | None = None,
    note: str | None = None,
) -> dict[str, JsonValue]:
    """The JSON object of one leg outcome (``leg`` is stamped by the workflow).

    ``result.to_dict()`` is kept whole except a non-JSON ``artifact`` (a host object), which is
    left out: the artifact lives in the worker's process; the stored messages carry its text.
    """
    out: dict[str, JsonValue] = {"status": status}
    if result is not None:
        data = result.to_dict()
        if not is_json_value(data.get("artifact")):
            data["artifact"] = None
        out["result"] = data
    if calls:
        out["calls"] = [[call_id, name] for call_id, name in calls]
    if worker is not None:
        out["worker"] = worker
    if note is not None:
        out["note"] = note
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
    """One run as [`RunClient.list_runs()`][prism.engines.dbos.RunClient.list_runs] lists it."""

    run_id: str
    """The run (and workflow) id."""
    agent: str | None
    """The registry name it was submitted for."""
    session_id: str | None
    """Its session."""
    status: EngineRunStatus
    """See [`EngineRunStatus`][prism.engines.dbos._outcome.EngineRunStatus] (``suspended``/``ambiguous`` from the latest outcome)."""
    worker: str | None
    """The worker that runs (or last ran) it; ``None`` while queued."""
    app_version: str | None
    """The application version it is pinned to."""
    created_at: int | None
    """Submission time, milliseconds since the epoch."""
    updated_at: int | None
    """Last status change, milliseconds since the epoch."""
