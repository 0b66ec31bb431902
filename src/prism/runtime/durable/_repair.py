"""The operator's repair of an ambiguous tool call.

A durable run that died after recording a call as ``dispatched`` but before storing its result
cannot be resumed on its own: whether the side effect happened is unknown, and Prism never runs
such a call again silently (the resume reports it, naming the calls). The operator checks the
tool's own records and says what happened with [`resolve_ambiguous_call()`][prism.runtime.durable._repair.resolve_ambiguous_call]:

* ``"rejected"`` — treat the call as not done: the resumed leg answers it with an
  ``approval_rejected`` error row carrying the operator's reason, and the model goes on;
* ``"succeeded"`` — the call ran: the resumed leg answers it with a result row instead of
  running it — the result stored for it anywhere in the session (an abandoned branch
  included), else the ``result`` the operator gives, else a note that it completed.

A call whose result row is stored cannot be rejected: it ran, and telling the model otherwise
would leave its real result on an abandoned branch.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final, Literal

from prism.checkpoints import CheckpointStore
from prism.errors import AgentRunStateError, PrismConfigError
from prism.runtime.durable._envelope import load_state, save_agent_run_state
from prism.runtime.durable._resume_writes import run_results
from prism.runtime.durable._run_envelope import LoadedRunState
from prism.runtime.durable._run_state import RunDecision, is_int
from prism.store import SessionStore
from prism.types import JsonValue, OwnershipScope, ToolResultContent, is_json_value

__all__ = ["REJECTED_MESSAGE", "SUCCEEDED_NOTE", "resolve_ambiguous_call"]

REJECTED_MESSAGE: Final = (
    "Rejected by the operator: the run stopped while this call was running and its outcome "
    "could not be confirmed"
)
"""Default row text of a call resolved as ``rejected``."""
SUCCEEDED_NOTE: Final = "The call completed; its result was not recorded"
"""Default result of a call resolved as ``succeeded`` without a stored or given result."""


async def resolve_ambiguous_call(
    checkpoints: CheckpointStore,
    run_id: str,
    call_id: str,
    *,
    outcome: Literal["rejected", "succeeded"],
    sessions: SessionStore | None = None,
    reason: str | None = None,
    result: JsonValue = None,
    expected_version: int | None = None,
    fencing_token: int | None = None,
    ownership: OwnershipScope | None = None,
) -> LoadedRunState:
    """Record what happened to an ambiguous (``dispatched``) call of a stored run.

    The call's entry becomes ``ready`` with the resolution, written as a compare-and-set of the
    envelope; the next [`resume_agent_run()`][prism.runtime.durable.resume_agent_run] then answers it (it never
    runs the tool) and continues the run. Resolve every call an ambiguity report names.

    Args:
        checkpoints: The run's checkpoint store.
        run_id: The run id.
        call_id: The ambiguous call's id (``AgentRunStateError.calls[i][0]``).
        outcome: ``"rejected"`` (not done: an ``approval_rejected`` row) or ``"succeeded"``
            (done: a result row).
        sessions: The session store holding the run's transcript; defaults to ``checkpoints``
            when that is a session store too (the SQLite and PostgreSQL stores are).
        reason: The rejected row's text (default [`REJECTED_MESSAGE`][prism.runtime.durable._repair.REJECTED_MESSAGE]).
        result: The succeeded row's result when no result is stored for the call (default
            [`SUCCEEDED_NOTE`][prism.runtime.durable._repair.SUCCEEDED_NOTE]). A JSON value.
        expected_version: The stored version (default: the one loaded; the write is a
            compare-and-set either way).
        fencing_token: Passed to the checkpoint write.
        ownership: Passed to the checkpoint store.

    Returns:
        The written envelope and its record.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown ``outcome``, a ``result`` that is not
            JSON, or no session store to check (pass ``sessions=``).
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — no such run, the call is not a
            pending call of it, it is not ambiguous, or (``"rejected"``) its result is stored.
        CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — the run moved on meanwhile.
    """
    if outcome not in ("rejected", "succeeded"):
        raise PrismConfigError(f"outcome must be 'rejected' or 'succeeded', got {outcome!r}")
    if not is_json_value(result):
        raise PrismConfigError("result must be a JSON value")
    if expected_version is not None and (not is_int(expected_version) or expected_version < 1):
        raise PrismConfigError(f"expected_version must be a positive int, got {expected_version!r}")
    store = sessions if sessions is not None else checkpoints
    if not callable(getattr(store, "list", None)):
        raise PrismConfigError(
            "resolve_ambiguous_call needs the run's session store to check for a stored "
            "result: pass sessions=<the session store>"
        )
    record, state = await load_state(checkpoints, run_id, None, ownership)
    version = record.version if expected_version is None else expected_version
    entries = list(state.calls)
    index = next((i for i, e in enumerate(entries) if e.call.get("id") == call_id), None)
    if index is None:
        raise AgentRunStateError(f"call {call_id} is not a pending call of run {run_id}")
    entry = entries[index]
    name = str(entry.call.get("name"))
    if entry.status != "dispatched":
        raise AgentRunStateError(
            f"call {call_id} ({name}) of run {run_id} is not ambiguous (it never started, or it "
            "was resolved already)"
        )
    stored = await _stored_result(store, state.session_id, run_id, call_id)
    entry = replace(entry, status="ready")
    if outcome == "rejected":
        if stored is not None:
            raise AgentRunStateError(
                f"call {call_id} ({name}) of run {run_id} has a stored result: it ran, so it "
                "cannot be rejected; resolve it as succeeded (its stored result is used)"
            )
        decision = RunDecision(entry.approval_id, "reject_once", reason or REJECTED_MESSAGE)
        entry = replace(entry, decision=decision.to_dict())
    else:
        resolution: dict[str, Any] = {"outcome": "succeeded"}
        if stored is not None:
            resolution["result"] = stored.result
            if stored.error is not None:
                resolution["error"] = stored.error.to_dict()
        else:
            resolution["result"] = SUCCEEDED_NOTE if result is None else result
        entry = replace(entry, resolution=resolution)
    entries[index] = entry
    return await save_agent_run_state(
        checkpoints=checkpoints,
        state=replace(state, pending_calls=tuple(entries)).to_json(),
        expected_version=version,
        fencing_token=fencing_token,
        ownership=ownership,
    )


async def _stored_result(
    store: Any, session_id: str, run_id: str, call_id: str
) -> ToolResultContent | None:
    """The result this run stored for ``call_id`` on any branch of the session, else ``None``.
    O(session)."""
    for _entry, result in run_results(await store.list(session_id), run_id):
        if result.tool_call_id == call_id:
            return result
    return None
