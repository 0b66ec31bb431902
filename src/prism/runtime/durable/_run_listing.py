"""Finding the runs to resume and the approvals they wait for: [`list_agent_runs()`][prism.runtime.durable._run_listing.list_agent_runs] and
[`list_pending_decisions()`][prism.runtime.durable._run_listing.list_pending_decisions] over a store's run index.

After a crash a worker (or an operator) must find every durable run that can be continued —
including one killed after its first checkpoint but before its input was stored, which has no
entry in its session yet. The run-state envelopes know them all: the store lists them through
its optional ``AgentRunIndex`` capability. The same envelopes hold what
each suspended run waits for: [`list_pending_decisions()`][prism.runtime.durable._run_listing.list_pending_decisions] lists those approvals (tool, call id,
the arguments the approval shows, the chain of agent-tool calls down to a child run's call), for
``prism runs`` and for any operator tool built on the stores.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Final, Literal

from prism._serde import Serializable
from prism.checkpoints import (
    AGENT_RUN_NAMESPACE,
    RESUMABLE,
    AgentRunIndex,
    CheckpointRecord,
    CheckpointStore,
)
from prism.errors import AgentRunStateError, PrismConfigError
from prism.runtime.durable._envelope import checked_envelope
from prism.runtime.durable._run_envelope import AgentRunState, RunEnvelope, subagent_fields
from prism.runtime.durable._run_state import (
    MAX_DEPTH,
    STATUSES,
    PendingDecision,
    RunStateStatus,
    is_int,
)

__all__ = ["PendingDecisionRecord", "SubagentLink", "list_agent_runs", "list_pending_decisions"]


def _run_index(caller: str, store: CheckpointStore, limit: int) -> AgentRunIndex:
    """``store`` as a run index, checked with ``limit`` for the listing function ``caller``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — ``store`` has no run index, or ``limit`` is not
            an int >= 1.
    """
    if not isinstance(store, AgentRunIndex):
        raise PrismConfigError(
            f"{type(store).__name__} cannot list runs: {caller} needs a checkpoint store "
            "with the run index (list_run_checkpoints, prism.checkpoints.AgentRunIndex), "
            "as the memory, SQLite and PostgreSQL stores have"
        )
    if not is_int(limit) or limit < 1:
        raise PrismConfigError(f"limit must be an int >= 1, got {limit!r}")
    return store


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
        store: A checkpoint store with the run index (``AgentRunIndex``: the memory,
            SQLite and PostgreSQL stores).
        session_id: Only the runs of this session (a run whose input was never stored
            included), else every session's.
        status: ``"resumable"`` (default: ``running``, ``suspended``, and ``succeeded`` runs a
            turn policy stopped — what [`resume_agent_run()`][prism.runtime.durable.resume_agent_run]
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
    runs = _run_index("list_agent_runs", store, limit)
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
    records = await runs.list_run_checkpoints(
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


# --------------------------------------------------------------------------- pending decisions


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentLink(Serializable):
    """One agent-tool call between the run an operator answers and the child run that made a
    gated call: the calling run's call that started the child, and the child."""

    tool_call_id: str
    """The calling run's agent-tool call that started the child run."""
    agent: str
    """The child's agent (its id or name)."""
    session_id: str
    """The child's session (``<calling run id>.<tool call id>``)."""
    run_id: str
    """The child's run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingDecisionRecord(Serializable):
    """One tool approval a suspended durable run waits for, as [`list_pending_decisions()`][prism.runtime.durable._run_listing.list_pending_decisions]
    lists it.

    Answer it with ``prism.resume_agent_run(agent, run_id, decisions=[RunDecision(approval_id,
    "allow_once")])`` (or ``prism resume RUN_ID --approve`` for a run the ``prism`` command
    started); ``version`` is the ``expected_version`` of that resume. A child run's call (an agent
    tool's child waiting for it) is answered the same way, on the calling run: ``run_id`` is the
    calling run, ``chain`` leads from it to the child that made the call. ``to_dict()`` gives its
    JSON form.
    """

    run_id: str
    """The suspended run an operator resumes to decide (the top of ``chain``)."""
    session_id: str
    """Its session."""
    agent_id: str
    """Its agent (``config.id or config.name``)."""
    version: int
    """Its checkpoint version: the ``expected_version`` of a resume."""
    approval_id: str
    """Id to answer with (``RunDecision(approval_id, ...)``)."""
    tool_name: str
    """The gated call's tool."""
    tool_call_id: str
    """The gated call's id (in the run that made it: the last of ``chain``, else ``run_id``)."""
    arguments: str | None
    """The arguments the tool will run with, as the approval shows them: JSON text after the
    ``tool_call`` middleware, parsing and defaults, registered secrets redacted, at most 4096
    UTF-8 bytes (``arguments_truncated`` when cut; the approval binds to the full arguments).
    ``None`` in envelopes written before approvals showed arguments."""
    arguments_truncated: bool = False
    """``arguments`` was cut at 4096 bytes (it then ends with ``…`` and is not valid JSON)."""
    reason: str
    """Why approval is needed."""
    waiting_since: str
    """ISO-8601 UTC time (ms, ``Z``) the run that made the call suspended on it: the
    ``updated_at`` of its stored envelope."""
    chain: tuple[SubagentLink, ...] = ()
    """Empty for the call of ``run_id`` itself; else the agent-tool calls from ``run_id`` down to
    the child run that made the gated call, outermost first (one link per level of
    delegation)."""

    @property
    def calling_agent(self) -> str:
        """The agent whose call waits: the last child's in ``chain``, else ``agent_id``."""
        return self.chain[-1].agent if self.chain else self.agent_id

    @property
    def calling_run_id(self) -> str:
        """The run that made the call: the last child's in ``chain``, else ``run_id``."""
        return self.chain[-1].run_id if self.chain else self.run_id


_SUSPENDED: Final = ("suspended",)


async def list_pending_decisions(
    store: CheckpointStore,
    *,
    session_id: str | None = None,
    run_id: str | None = None,
    limit: int = 100,
) -> list[PendingDecisionRecord]:
    """The tool approvals the stored suspended runs wait for, most recently suspended run first
    (its approvals in call order).

    A child run's approvals (an agent tool's child waiting) are listed once, on the run an
    operator answers them on — the calling run, which lists them in its own interruption — with
    ``chain`` naming the child (and its children, for deeper delegation); the suspended child
    run itself is not listed again. A run suspended on its input guardrail waits for no tool
    approval and gives no record.

    Example (an operator's queue)::

        for item in await prism.list_pending_decisions(store):
            print(item.run_id, item.tool_name, item.tool_call_id, item.arguments)

    Args:
        store: A checkpoint store with the run index (``AgentRunIndex``:
            the memory, SQLite and PostgreSQL stores).
        session_id: Only the approvals answered on this session's runs.
        run_id: Only the approvals answered on this run (none when it is not suspended, or is a
            child run whose calling run lists them).
        limit: Most records returned (>= 1).

    Returns:
        [`PendingDecisionRecord`][prism.runtime.durable._run_listing.PendingDecisionRecord] objects (frozen). Nothing is written.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — the store cannot list runs (it does not
            implement ``list_run_checkpoints``), or a bad ``limit``, ``session_id`` or ``run_id``.
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — a listed envelope is malformed (the
            message names its run).
        StoreError: ``ERR_PRISM_STORE_UNDECODABLE`` — a listed value does not decode.
    """
    runs = _run_index("list_pending_decisions", store, limit)
    for name, value in (("session_id", session_id), ("run_id", run_id)):
        if value is not None and not isinstance(value, str):
            raise PrismConfigError(f"{name} must be a str or None, got {type(value).__name__}")
    reader = _Reader(store)
    if run_id is not None:
        record = await store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=run_id)
        if record is None:
            return []
        envelope = reader.envelope(record)
        if session_id is not None and envelope.session_id != session_id:
            return []
        return (await reader.records(record, envelope))[:limit]
    window = limit
    while True:
        listed = await runs.list_run_checkpoints(
            session_id=session_id, statuses=_SUSPENDED, limit=window
        )
        out: list[PendingDecisionRecord] = []
        for record in listed:
            out += await reader.records(record, reader.envelope(record))
            if len(out) >= limit:
                return out[:limit]
        if len(listed) < window:
            return out
        window *= 4  # the suspended runs so far gave fewer records than asked for


class _Reader:
    """Reads suspended runs' envelopes for [`list_pending_decisions()`][prism.runtime.durable._run_listing.list_pending_decisions]; each run loaded once
    per call."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store
        self.loaded: dict[str, tuple[CheckpointRecord, RunEnvelope] | None] = {}

    @staticmethod
    def envelope(record: CheckpointRecord) -> RunEnvelope:
        try:
            return RunEnvelope.from_json(checked_envelope(record.value))
        except AgentRunStateError as exc:
            raise AgentRunStateError(f"run {record.key}: {exc}") from exc

    async def load(self, run_id: str) -> tuple[CheckpointRecord, RunEnvelope] | None:
        """A run's record and envelope; ``None`` when absent or malformed (a link that leads
        nowhere ends a chain, it does not fail the listing)."""
        if run_id not in self.loaded:
            record = await self.store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=run_id)
            found = None
            if record is not None:
                try:
                    found = (record, self.envelope(record))
                except AgentRunStateError:
                    found = None
            self.loaded[run_id] = found
        return self.loaded[run_id]

    async def records(
        self, record: CheckpointRecord, envelope: RunEnvelope
    ) -> list[PendingDecisionRecord]:
        interruption = envelope.interruption_view()
        if (
            envelope.status != "suspended"
            or interruption is None
            or interruption.kind != "tool_approval"
            or await self._answered_by_caller(envelope)
        ):
            return []
        out = []
        for pending in interruption.pending_decisions:
            chain, call, since = await self._chain(pending, record.updated_at)
            out.append(
                PendingDecisionRecord(
                    run_id=envelope.run_id,
                    session_id=envelope.session_id,
                    agent_id=envelope.agent_id,
                    version=record.version,
                    approval_id=pending.approval_id,
                    tool_name=call.tool_name or "",
                    tool_call_id=call.tool_call_id,
                    arguments=call.arguments,
                    arguments_truncated=call.arguments_truncated,
                    reason=call.reason,
                    waiting_since=since,
                    chain=chain,
                )
            )
        return out

    async def _chain(
        self, pending: PendingDecision, since: str
    ) -> tuple[tuple[SubagentLink, ...], PendingDecision, str]:
        """Follow a child's decision down to the run that made the call: the links, that run's
        own decision (the same approval) and when that run suspended."""
        links: list[SubagentLink] = []
        current = pending
        while current.subagent is not None and len(links) < MAX_DEPTH:
            call_id, agent, session_id, run_id = subagent_fields(current.subagent)
            link = SubagentLink(
                tool_call_id=call_id, agent=agent, session_id=session_id, run_id=run_id
            )
            links.append(link)
            child = await self.load(link.run_id)
            interruption = None if child is None else child[1].interruption_view()
            if child is None or interruption is None:
                break
            own = next(
                (p for p in interruption.pending_decisions if p.approval_id == pending.approval_id),
                None,
            )
            if own is None:
                break
            current, since = own, child[0].updated_at
        return tuple(links), current, since

    async def _answered_by_caller(self, envelope: RunEnvelope) -> bool:
        """A child run (session ``<calling run id>.<tool call id>``) whose calling run is
        suspended on the call that started it: its approvals are the calling run's to answer."""
        session_id = envelope.session_id
        for index, char in enumerate(session_id):
            if char != ".":
                continue
            caller = await self.load(session_id[:index])
            if caller is None or caller[1].status != "suspended":
                continue
            if any(
                entry.child is not None and entry.child.run_id == envelope.run_id
                for entry in caller[1].calls
            ):
                return True
        return False
