"""Who decided an approval: recorded decisions, settled approvals and the late decider's answer.

A decision takes effect when a resume applies it; the run's envelope then keeps it (``decided``,
``DecidedApproval``). A host that cannot resume the run
itself — it does not have the run's agent — *records* the decision instead:
[`record_decisions()`][prism.runtime.durable._decision_records.record_decisions] stores it under ``namespace="prism.decision"``, ``key=run_id``, and a
process that has the agent applies what was recorded with ``resume_agent_run(agent, run_id,
decisions="recorded")`` (``prism resume RUN_ID --recorded`` for a run the ``prism`` command
started).

Of several decisions on one approval the first wins: the first recorded (the record is a
compare-and-set), or the first applied (the resume's claim is one). A later one is refused with
``AgentDecisionError`` ``ERR_PRISM_DECISION_DECIDED``, whose ``decided`` names the winner — its
outcome, who decided (``RunDecision.by``) and when. A decision applied directly (a resume with
``decisions=[...]``) does not read the recorded ones: when both race, the one applied first is the
run's, and the recorded one is left unapplied (it no longer answers an open approval).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from prism._util import now_iso
from prism.checkpoints import AGENT_RUN_NAMESPACE, DECISION_NAMESPACE, CheckpointStore
from prism.errors import AgentDecisionError, AgentRunStateError, CheckpointConflictError
from prism.runtime.durable._approvals import (
    check_by,
    coerce_decisions,
    decision_error,
    open_approvals,
)
from prism.runtime.durable._envelope import load_state
from prism.runtime.durable._run_envelope import RunEnvelope
from prism.runtime.durable._run_state import (
    ALLOWING,
    MAX_DECISIONS,
    DecidedApproval,
    PendingDecision,
    RunDecision,
)
from prism.types import JsonValue

__all__ = [
    "decided_error",
    "list_decided_approvals",
    "list_recorded_decisions",
    "lost_to",
    "record_decisions",
    "recorded_batch",
    "settled_decisions",
]

_ATTEMPTS: Final = 16
"""Compare-and-set rounds of [`record_decisions()`][prism.runtime.durable._decision_records.record_decisions] before it gives up."""


def settled_decisions(state: RunEnvelope, batch: Sequence[RunDecision]) -> list[DecidedApproval]:
    """The applied decisions of ``state`` that settled an approval ``batch`` decides, which is no
    longer open: what a late decider is told (empty: none of the batch is late)."""
    opened = open_approvals(state)
    applied = {d.approval_id: d for d in state.decided_approvals()}
    return [
        applied[item.approval_id]
        for item in batch
        if item.approval_id not in opened and item.approval_id in applied
    ]


def decided_error(run_id: str, settled: Sequence[DecidedApproval]) -> AgentDecisionError:
    """``ERR_PRISM_DECISION_DECIDED`` naming each winner (``decided``, ``run_id``)."""
    told = "; ".join(
        f"approval {d.approval_id} of run {run_id} was decided already: {d.outcome}"
        + (f" by {d.by}" if d.by else "")
        + f" at {d.decided_at}"
        + ("" if d.applied_at is not None else " (recorded, waiting to be applied)")
        for d in settled
    )
    return AgentDecisionError(
        "ERR_PRISM_DECISION_DECIDED", told, decided=tuple(settled), run_id=run_id
    )


async def lost_to(
    checkpoints: CheckpointStore, run_id: str, batch: Sequence[RunDecision]
) -> AgentDecisionError | None:
    """After a resume lost the compare-and-set of its write: the ``ERR_PRISM_DECISION_DECIDED``
    error when the run the winner left has settled an approval of ``batch`` with another
    decision, else ``None`` (the caller keeps its ``CheckpointConflictError``). A winner that
    applied the very same decisions — the same message applied twice, by an engine re-running a
    step — is a plain conflict: the run is not the loser's to report on."""
    try:
        _, state = await load_state(checkpoints, run_id, None, None)
    except AgentRunStateError:
        return None
    ours = {d.approval_id: d for d in batch}
    settled = [d for d in settled_decisions(state, batch) if not _same(d, ours[d.approval_id])]
    return decided_error(run_id, settled) if settled else None


def _same(settled: DecidedApproval, decision: RunDecision) -> bool:
    """Whether ``settled`` is the record ``decision`` leaves when applied."""
    modified = decision.modified_arguments is not None and decision.outcome in ALLOWING
    return (settled.outcome, settled.by, settled.reason, settled.modified) == (
        decision.outcome,
        decision.by,
        decision.reason,
        modified,
    )


# --------------------------------------------------------------------------- the record


def _recorded(value: Any, run_id: str) -> list[tuple[RunDecision, str]]:
    """``(decision, recorded at)`` of a stored record, in recording order.

    Raises:
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — the record is malformed.
    """
    if value is None:
        return []
    try:
        items = value["decisions"]
        out = []
        for item in items:
            fields = dict(item)
            at = fields.pop("decided_at")
            if not isinstance(at, str):
                raise TypeError("decided_at is not a string")
            out.append((RunDecision.from_dict(fields), at))
    except Exception as exc:
        raise AgentRunStateError(
            f"the recorded decisions of run {run_id} are malformed ({exc}); "
            f"namespace {DECISION_NAMESPACE!r}, key {run_id!r}"
        ) from None
    return out


def _waiting(
    run_id: str, decision: RunDecision, at: str, pending: PendingDecision | None
) -> DecidedApproval:
    """A recorded decision not applied yet (``pending``: the approval it answers)."""
    return DecidedApproval(
        run_id=run_id,
        approval_id=decision.approval_id,
        outcome=decision.outcome,
        by=decision.by,
        reason=decision.reason,
        decided_at=at,
        modified=decision.modified_arguments is not None and decision.outcome in ALLOWING,
        tool_name=None if pending is None else pending.tool_name or pending.scope.tool_name,
        tool_call_id=None if pending is None else pending.tool_call_id,
    )


async def record_decisions(
    store: CheckpointStore,
    run_id: str,
    decisions: Sequence[RunDecision | Mapping[str, Any]],
    *,
    by: str | None = None,
) -> tuple[DecidedApproval, ...]:
    """Record decisions on a suspended run's approvals, for a process with the run's agent to
    apply (``resume_agent_run(agent, run_id, decisions="recorded")``).

    The first decision recorded for an approval wins; the batch is recorded all or nothing.
    Nothing but the record (``namespace="prism.decision"``, ``key=run_id``) is written: the run
    stays suspended until a resume applies it. Each write drops the recorded decisions whose
    approval is no longer open (applied, or settled otherwise).

    Args:
        store: The run's checkpoint store.
        run_id: The suspended run the approvals are answered on (for a child run's approval: the
            calling run, as [`list_pending_decisions()`][prism.runtime.durable.list_pending_decisions] lists it).
        decisions: [`RunDecision`][prism.runtime.durable._decision_records.RunDecision] objects (or mappings), at most 128, each for an open
            approval of the run; ``modified_arguments`` are checked against the tool's schema
            when the decision is applied, not here.
        by: Who decides (1–256 characters), for each decision without its own ``by``.

    Returns:
        The recorded decisions (``applied_at`` is ``None``).

    Raises:
        AgentDecisionError: ``ERR_PRISM_DECISION_DECIDED`` — an approval of the batch was decided
            first (recorded, or applied to the run): ``decided`` holds the winners; nothing was
            recorded. ``ERR_PRISM_DECISION_UNKNOWN`` — an approval that is not open on the run
            (the message says the run's status). ``ERR_PRISM_DECISION_INVALID`` / ``_DUPLICATE``
            / ``_LIMIT`` — a malformed batch, a bad ``by``, or ``modified_arguments`` for a child
            run's approval (they are not forwarded to a child run).
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — no run ``run_id`` in ``store``, or a
            malformed envelope or record.
        CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — the record kept changing
            under 16 attempts.
    """
    batch = coerce_decisions(decisions)
    check_by(by)
    if by is not None:
        batch = [d if d.by is not None else dataclasses.replace(d, by=by) for d in batch]
    for _ in range(_ATTEMPTS):
        _, state = await load_state(store, run_id, None, None)
        settled = settled_decisions(state, batch)
        if settled:
            raise decided_error(run_id, settled)
        opened = open_approvals(state)
        for item in batch:
            pending = opened.get(item.approval_id)
            if pending is None:
                raise decision_error(
                    "ERR_PRISM_DECISION_UNKNOWN",
                    f"approval_id {item.approval_id} is not pending on run {run_id} "
                    f"(the run is {state.status})",
                )
            if pending.subagent is not None and item.modified_arguments is not None:
                raise decision_error(
                    "ERR_PRISM_DECISION_INVALID",
                    f"approval {item.approval_id} is a child run's: modified_arguments are not "
                    "forwarded to a child run",
                )
        record = await store.load_checkpoint(namespace=DECISION_NAMESPACE, key=run_id)
        version = 0 if record is None else record.version
        kept = [
            (d, at)
            for d, at in _recorded(None if record is None else record.value, run_id)
            if d.approval_id in opened
        ]
        taken = {d.approval_id: (d, at) for d, at in kept}
        lost = [
            _waiting(run_id, *taken[d.approval_id], opened.get(d.approval_id))
            for d in batch
            if d.approval_id in taken
        ]
        if lost:
            raise decided_error(run_id, lost)
        now = now_iso()
        rows = [*kept, *((d, now) for d in batch)]
        if len(rows) > MAX_DECISIONS:
            raise decision_error(
                "ERR_PRISM_DECISION_LIMIT", f"at most {MAX_DECISIONS} recorded decisions per run"
            )
        value: dict[str, JsonValue] = {
            "run_id": run_id,
            "decisions": [{**d.to_dict(), "decided_at": at} for d, at in rows],
        }
        try:
            await store.save_checkpoint(
                namespace=DECISION_NAMESPACE,
                key=run_id,
                value=value,
                version=version + 1,
                expected_version=version,
            )
        except CheckpointConflictError:
            continue  # another recorder wrote first: look again
        return tuple(_waiting(run_id, d, now, opened[d.approval_id]) for d in batch)
    raise CheckpointConflictError(
        f"the recorded decisions of run {run_id} kept changing; nothing was recorded, try again"
    )


async def recorded_batch(
    store: CheckpointStore, run_id: str, state: RunEnvelope
) -> tuple[list[RunDecision], dict[str, str]]:
    """The recorded decisions a resume of ``state`` applies (those for its open approvals) and
    when each was recorded (approval id → time).

    Raises:
        AgentDecisionError: ``ERR_PRISM_DECISION_UNKNOWN`` — none waits for an open approval.
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — a malformed record.
    """
    record = await store.load_checkpoint(namespace=DECISION_NAMESPACE, key=run_id)
    opened = open_approvals(state)
    rows = [
        (d, at)
        for d, at in _recorded(None if record is None else record.value, run_id)
        if d.approval_id in opened
    ]
    if not rows:
        raise decision_error(
            "ERR_PRISM_DECISION_UNKNOWN",
            f"no recorded decision waits for an approval of run {run_id} (the run is "
            f"{state.status})",
        )
    return [d for d, _ in rows], {d.approval_id: at for d, at in rows}


async def list_decided_approvals(store: CheckpointStore, run_id: str) -> list[DecidedApproval]:
    """Who decided the approvals of run ``run_id``, how and when: the decisions resumes applied
    (the newest 32 the envelope keeps, oldest first), then the recorded ones still waiting for a
    process to apply them (``applied_at`` is ``None``; see [`record_decisions()`][prism.runtime.durable._decision_records.record_decisions]). A child
    run's approval decided on the calling run is listed on the calling run.

    Returns:
        ``[]`` when the store holds no run ``run_id``. Nothing is written.

    Raises:
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — a malformed envelope or record.
    """
    if await store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=run_id) is None:
        return []
    _, state = await load_state(store, run_id, None, None)
    out = state.decided_approvals()
    opened = open_approvals(state)
    if opened:
        record = await store.load_checkpoint(namespace=DECISION_NAMESPACE, key=run_id)
        if record is not None:
            out += [
                _waiting(run_id, d, at, opened[d.approval_id])
                for d, at in _recorded(record.value, run_id)
                if d.approval_id in opened
            ]
    return out


async def list_recorded_decisions(store: CheckpointStore, run_id: str) -> list[RunDecision]:
    """The decisions recorded for run ``run_id`` ([`record_decisions()`][prism.runtime.durable._decision_records.record_decisions]) that still wait for
    an open approval, in recording order, as ``resume_agent_run(agent, run_id,
    decisions="recorded")`` would apply them (``by`` included) — what a host that applies them
    some other way sends (a DBOS run: ``RunClient.decide(run_id, decisions=...)``).

    Returns:
        ``[]`` when the store holds no run ``run_id`` or none waits. Nothing is written.

    Raises:
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — a malformed envelope or record.
    """
    if await store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=run_id) is None:
        return []
    _, state = await load_state(store, run_id, None, None)
    record = await store.load_checkpoint(namespace=DECISION_NAMESPACE, key=run_id)
    if record is None:
        return []
    opened = open_approvals(state)
    return [d for d, _ in _recorded(record.value, run_id) if d.approval_id in opened]
