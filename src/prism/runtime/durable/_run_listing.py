"""Finding the runs to resume: :func:`list_agent_runs` over a store's run index.

After a crash a worker (or an operator) must find every durable run that can be continued —
including one killed after its first checkpoint but before its input was stored, which has no
entry in its session yet. The run-state envelopes know them all: the store lists them through
its optional :class:`~prism.checkpoints.AgentRunIndex` capability.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from prism.checkpoints import RESUMABLE, AgentRunIndex, CheckpointStore
from prism.errors import AgentRunStateError, PrismConfigError
from prism.runtime.durable._envelope import checked_envelope
from prism.runtime.durable._run_envelope import AgentRunState, RunEnvelope
from prism.runtime.durable._run_state import STATUSES, RunStateStatus, is_int

__all__ = ["list_agent_runs"]


async def list_agent_runs(
    store: CheckpointStore,
    *,
    session_id: str | None = None,
    status: RunStateStatus | Literal["resumable"] | Collection[RunStateStatus] | None = RESUMABLE,
    limit: int = 100,
) -> list[AgentRunState]:
    """The stored durable runs, most recently updated first.

    Example (a worker after a restart)::

        for state in await prism.list_agent_runs(store):          # every resumable run
            await prism.resume_agent_run(agent, state)

    Args:
        store: A checkpoint store with the run index (:class:`AgentRunIndex`: the memory,
            SQLite and PostgreSQL stores).
        session_id: Only the runs of this session (a run whose input was never stored
            included), else every session's.
        status: ``"resumable"`` (default: ``running``, ``suspended``, and ``succeeded`` runs a
            turn policy stopped — what :func:`~prism.runtime.durable.resume_agent_run`
            continues), one status, a collection of statuses, or ``None`` for all.
        limit: Most runs returned (>= 1).

    Returns:
        The views of the stored envelopes (``AgentRunState``: run and session ids, status,
        stop reason, the interruption of a suspended run, and the version a resume expects).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — the store cannot list runs (it does not
            implement ``list_run_checkpoints``), an unknown status, or a bad ``limit``.
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — a listed envelope is malformed
            (the message names its run).
        StoreError: ``ERR_PRISM_STORE_UNDECODABLE`` — a listed value does not decode.
    """
    if not isinstance(store, AgentRunIndex):
        raise PrismConfigError(
            f"{type(store).__name__} cannot list runs: list_agent_runs needs a checkpoint store "
            "with the run index (list_run_checkpoints, prism.checkpoints.AgentRunIndex), "
            "as the memory, SQLite and PostgreSQL stores have"
        )
    if not is_int(limit) or limit < 1:
        raise PrismConfigError(f"limit must be an int >= 1, got {limit!r}")
    resumable = status == RESUMABLE
    statuses: tuple[str, ...] | None = None
    if status is not None and not resumable:
        statuses = (status,) if isinstance(status, str) else tuple(status)
        unknown = [s for s in statuses if s not in STATUSES]
        if unknown:
            allowed = ", ".join(sorted(STATUSES))
            raise PrismConfigError(
                f"unknown run status {unknown[0]!r} (expected 'resumable', one of {allowed}, "
                "a collection of them, or None)"
            )
    records = await store.list_run_checkpoints(
        session_id=session_id, statuses=statuses, resumable=resumable, limit=limit
    )
    out: list[AgentRunState] = []
    for record in records:
        try:
            envelope = checked_envelope(record.value)
        except AgentRunStateError as exc:
            raise AgentRunStateError(f"run {record.key}: {exc}") from exc
        out.append(RunEnvelope.from_json(envelope).view(record.version))
    return out
