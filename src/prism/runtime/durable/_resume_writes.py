"""The writes of a resume that happen outside a run leg.

[`resume_agent_run()`][prism.runtime.durable.resume_agent_run] decides what a stored run's resume does; the
store and checkpoint work it needs before (or instead of) a resumed leg lives here: the
compare-and-set envelope writer, adopting result rows a crash left after the recorded leaf, the
denial of a suspended run, and its re-suspension when decisions remain.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from prism._util import now_iso
from prism.checkpoints import AGENT_RUN_NAMESPACE
from prism.errors import AgentRunStateError
from prism.redaction import SecretRedactor
from prism.runtime.durable._approvals import open_approvals, rejection_result, round_interruption
from prism.runtime.durable._envelope import encode_state, load_state
from prism.runtime.durable._run_envelope import ChildRun, RunEnvelope, stored_status_is
from prism.runtime.durable._run_state import (
    AMBIGUOUS,
    MAX_LOADED_STATE_BYTES,
    DecidedApproval,
    PendingDecision,
    RunStateOptions,
    coerce_run_state_options,
)
from prism.runtime.run._delegation import PARENT_RUN_KEY, child_agent
from prism.store import SessionEntry, new_session_entry, read_branch
from prism.types import (
    Message,
    OwnershipScope,
    RunResult,
    ToolCallContent,
    ToolResultContent,
    tool_result_message,
)

if TYPE_CHECKING:
    from prism.runtime.run.session import AgentSession

__all__ = [
    "DENIED_MESSAGE",
    "EnvelopeWriter",
    "adopt_stored_rows",
    "ambiguity_error",
    "check_ambiguity",
    "check_child",
    "deny_children",
    "check_leaf",
    "open_round_calls",
    "deny",
    "resuspend",
]


async def adopt_stored_rows(session: AgentSession, state: RunEnvelope) -> RunEnvelope | None:
    """Crash recovery: adopt the result rows stored after the recorded leaf.

    A ``running`` envelope written by a dispatch marking (an ``every-turn`` run, or the replay
    of decided calls) records the leaf inside a tool round and the round's open calls. When the process
    died after a call's result row was stored but before the next write, that row hangs off the
    recorded leaf: the call's outcome is known, so it is not ambiguous. Starting at the leaf,
    each child entry that is a tool row of this run answering a pending call moves the leaf onto
    it and drops the call from ``pending_calls`` (in the envelope returned, which the claim then
    saves). A ``dispatched`` call left without a row stays ambiguous. Nothing is read unless a
    ``dispatched`` entry exists; the read is O(session), on the resume path only.

    Returns:
        The envelope with the rows adopted, or ``None`` when no row was adopted: a resume that
        then stops on an ambiguous call saves what it learned first.
    """
    pending = state.calls
    leaf = state.leaf_id
    if leaf is None or not any(e.status == "dispatched" for e in pending):
        return None
    try:
        entries = await session.store.list(session.id)
    except Exception:
        return None  # the ambiguity check reports the calls; the operator decides
    children: dict[str | None, list[SessionEntry]] = {}
    for entry in entries:
        children.setdefault(entry.parent_id, []).append(entry)
    run_id = state.run_id
    open_ids = {e.call_id for e in pending}
    moved = False
    while open_ids:
        row = _row_answering(children.get(leaf, ()), run_id, open_ids)
        if row is None:
            break
        leaf, answered = row
        open_ids.discard(answered)
        moved = True
    if not moved:
        return None
    kept = tuple(e for e in pending if e.call_id in open_ids)
    return replace(state, leaf_id=leaf, pending_calls=kept)


def run_results(
    entries: Iterable[SessionEntry], run_id: str
) -> Iterator[tuple[SessionEntry, ToolResultContent]]:
    """``(entry, result)`` for each tool result of the tool messages ``run_id`` stored among
    ``entries``, in order."""
    for entry in entries:
        message = entry.message
        if entry.kind != "message" or entry.run_id != run_id or message is None:
            continue
        if message.role != "tool":
            continue
        for part in message.content:
            if isinstance(part, ToolResultContent):
                yield entry, part


def _row_answering(
    entries: Sequence[SessionEntry], run_id: str, call_ids: set[str]
) -> tuple[str, str] | None:
    """``(entry id, call id)`` of the first of ``entries`` that is this run's result row for
    one of ``call_ids``."""
    for entry, result in run_results(entries, run_id):
        if result.tool_call_id in call_ids:
            return entry.id, result.tool_call_id
    return None


async def check_leaf(session: AgentSession, state: RunEnvelope) -> None:
    """The stored leaf must be an entry of the run's session in the session's store.

    Checked before a resume writes anything, so a run whose transcript this store does not hold
    (another store, a deleted session, an edited ``leaf_id`` or ``session_id``) is reported
    and stays as stored instead of being claimed and then failed. O(branch).

    Raises:
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — the leaf is not in the session.
    """
    leaf = state.leaf_id
    if leaf is None:
        return
    try:
        await read_branch(session.store, session.id, leaf)
    except ValueError as exc:
        raise AgentRunStateError(
            f"run {state.run_id} cannot be resumed: its leaf {leaf} is not in session "
            f"{session.id} of this session store ({exc}); nothing was written. The agent's "
            "session store must be the one the run was started with: pass store= to "
            "create_agent (or create_session) with that store"
        ) from exc


def ambiguity_error(state: RunEnvelope) -> AgentRunStateError | None:
    """The report of the ``dispatched`` pending calls (never replayed silently), else ``None``.

    The message starts with ``"Ambiguous dispatched tool requires operator resolution"`` and
    names each call with its tool and the repair; ``calls`` lists ``(tool_call_id, tool_name)``.
    """
    calls = tuple(
        (entry.call_id, entry.tool_name)
        for entry in state.calls
        if entry.status == "dispatched" and entry.child is None  # a child resumes
    )
    if not calls:
        return None
    run_id = state.run_id
    named = ", ".join(f"{call_id} ({name})" for call_id, name in calls)
    error = AgentRunStateError(
        f"{AMBIGUOUS}: {named} of run {run_id} started and stored no result, so whether its "
        "side effect happened is unknown; check the tool's own records, then resolve each "
        f"call (prism runs resolve {run_id} CALL_ID --rejected|--succeeded, or "
        "resolve_ambiguous_call(...)) and resume again"
    )
    error.calls = calls
    error.run_id = run_id
    return error


def check_ambiguity(state: RunEnvelope) -> None:
    """Raise ``AgentRunStateError`` when a pending call is ``dispatched``: its outcome is
    unknown, so it is never replayed silently (see [`ambiguity_error()`][prism.runtime.durable._resume_writes.ambiguity_error])."""
    error = ambiguity_error(state)
    if error is not None:
        raise error


@dataclass(slots=True)
class EnvelopeWriter:
    """Compare-and-set writes of [`resume_agent_run()`][prism.runtime.durable.resume_agent_run] (claim, re-suspension, denial)."""

    options: RunStateOptions
    version: int
    ownership: OwnershipScope | None
    redactor: SecretRedactor | None

    async def save(self, envelope: RunEnvelope) -> int:
        """Redact (operator reasons and modified arguments join the envelope here), check and
        compare-and-set ``envelope``; return the new version."""
        redactor = self.redactor
        value = envelope.to_json()
        stored = redactor.redact(value) if redactor is not None else value
        encode_state(stored, MAX_LOADED_STATE_BYTES)
        record = await self.options.checkpoints.save_checkpoint(
            namespace=AGENT_RUN_NAMESPACE,
            key=envelope.run_id,
            value=stored,
            version=self.version + 1,
            expected_version=self.version,
            fencing_token=self.options.fencing_token,
            ownership=self.ownership,
        )
        self.version = record.version
        return record.version


DENIED_MESSAGE: Final = "Run denied by the operator: the tool call was not approved and did not run"
"""``ErrorInfo.message`` of the ``approval_rejected`` rows that answer a denied run's calls."""


async def deny(session: AgentSession, state: RunEnvelope, writer: EnvelopeWriter) -> RunResult:
    """Answer the gated calls, save ``denied``, emit ``agent_denied``, close subscribers.

    Besides saving the ``denied`` envelope: the gated round's host calls have no
    result rows in the session store, and providers reject a transcript in which an
    assistant tool call has no result. A denied run must leave a history a provider accepts on
    the session's next turn, so each call of the round still open on the stored branch gets one
    ``approval_rejected`` error row ([`DENIED_MESSAGE`][prism.runtime.durable._resume_writes.DENIED_MESSAGE]), in call order, redacted with the
    agent's redactor and recorded under the denied run. No tool and no provider is called, and
    no event but ``agent_denied`` is emitted. The envelope keeps each approval the denial
    settled in ``decided`` (as ``reject_once``).

    Order of the writes: the rows first, then the ``denied`` envelope (with ``leaf_id`` moved to
    the last row). A failure while appending leaves the envelope ``suspended`` and the run
    resumable; a failure of the envelope write leaves the rows stored and the run ``suspended``
    — the store never holds a ``denied`` run whose calls are unanswered. Retrying the denial
    then finds the rows already stored (this run's ``approval_rejected`` rows chained from the
    envelope's leaf) and appends only the missing ones, so every call is answered exactly once.
    A branch the session's store does not hold (a resume over another store) gets no rows.
    """
    from prism.events import AgentDeniedEvent

    run_id = state.run_id
    session.state.busy = True  # no run may start on this session between the rows and the envelope
    try:
        rows, leaf = await _answer_denied_calls(session, state, writer.redactor)
        now = now_iso()
        settled = [
            DecidedApproval(
                run_id=run_id,
                approval_id=approval_id,
                outcome="reject_once",
                decided_at=now,
                applied_at=now,
                tool_name=pending.tool_name or pending.scope.tool_name,
                tool_call_id=pending.tool_call_id,
            )
            for approval_id, pending in open_approvals(state).items()
        ]
        envelope = state.without(
            "loop_state", "input", status="denied", pending_calls=(), sticky_decisions=()
        ).with_decided(settled)
        if leaf is not None:
            envelope = replace(envelope, leaf_id=leaf)
        version = await writer.save(envelope)
    finally:
        session.state.busy = False
    view = envelope.view(version)
    interruption = view.interruption
    await session.state.deliver_outside_run(
        AgentDeniedEvent(
            session_id=session.id,
            run_id=run_id,
            interruption=interruption,
            version=version,
        ),
        session.agent.config.redactor,
    )
    return RunResult(
        run_id=run_id,
        session_id=session.id,
        status="denied",
        messages=tuple(rows),
        run_state=view,
        interruption=interruption,
        leaf_id=view.leaf_id,
    )


async def _answer_denied_calls(
    session: AgentSession, state: RunEnvelope, redactor: SecretRedactor | None
) -> tuple[list[Message], str | None]:
    """Append the ``approval_rejected`` rows of a denial (see [`deny()`][prism.runtime.durable._resume_writes.deny]).

    Returns:
        ``(stored rows, new leaf)``: the rows of this run answering the open calls (those an
        earlier, interrupted denial stored included), and the last one's id — or the envelope's
        leaf when there is nothing to answer.

    Raises:
        SessionAppendConflictError: ``ERR_PRISM_SESSION_APPEND_CONFLICT`` — the branch moved on
            meanwhile (another writer appended after the envelope's leaf).
        Exception: whatever the session store raises.
    """
    leaf = state.leaf_id
    if leaf is None:
        return [], None
    store = session.store
    run_id = state.run_id
    try:
        branch = await read_branch(store, session.id, leaf)
    except ValueError:  # this store does not hold the run's transcript
        return [], leaf
    open_calls = open_round_calls(branch)
    rows: list[Message] = []
    if open_calls:
        # Rows an earlier denial of this run stored before its envelope write failed.
        children: dict[str | None, list[SessionEntry]] = {}
        for entry in await store.list(session.id):
            children.setdefault(entry.parent_id, []).append(entry)
        remaining = list(open_calls)
        while remaining:
            found = _rejection_row(children.get(leaf, ()), run_id, remaining[0].id)
            if found is None:
                break
            assert found.message is not None
            rows.append(found.message)
            leaf = found.id
            remaining.pop(0)
        for call in remaining:
            row = tool_result_message(rejection_result(call, None, DENIED_MESSAGE))
            entry = new_session_entry(
                "message", session_id=session.id, parent_id=leaf, run_id=run_id, message=row
            )
            if redactor is not None:
                entry = redactor.redact(entry)
            await store.append(entry, expected_parent_id=leaf)
            rows.append(entry.message if entry.message is not None else row)
            leaf = entry.id
    session.state.leaf_id = leaf
    session.state.leaf_resolved = True
    return rows, leaf


def open_round_calls(branch: Sequence[SessionEntry]) -> list[ToolCallContent]:
    """The host calls of the branch's last tool round without a result row, in call order."""
    messages = [e.message for e in branch if e.kind == "message" and e.message is not None]
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role != "assistant":
            continue
        calls = [
            part
            for part in message.content
            if isinstance(part, ToolCallContent) and part.authority != "provider-hosted"
        ]
        if not calls:
            continue
        answered = {
            part.tool_call_id
            for later in messages[index + 1 :]
            if later.role == "tool"
            for part in later.content
            if isinstance(part, ToolResultContent)
        }
        return [call for call in calls if call.id not in answered]
    return []


def _rejection_row(
    entries: Sequence[SessionEntry], run_id: str, call_id: str
) -> SessionEntry | None:
    """The entry among ``entries`` that is this run's ``approval_rejected`` row for ``call_id``."""
    for entry, result in run_results(entries, run_id):
        error = result.error
        if (
            result.tool_call_id == call_id
            and error is not None
            and error.code == "approval_rejected"
        ):
            return entry
    return None


async def resuspend(
    session: AgentSession,
    state: RunEnvelope,
    remaining: list[PendingDecision],
    writer: EnvelopeWriter,
) -> RunResult:
    """A batch decided only some calls: save ``suspended`` again with the remaining decisions
    and report it."""
    from prism.events import AgentSuspendedEvent

    names = {call.id: call.name for call in (e.tool_call() for e in state.calls)}
    interruption = round_interruption(
        remaining, names, reason=f"{len(remaining)} approval request(s) remain"
    )
    state = replace(state, interruption=interruption.to_dict())
    version = await writer.save(state)
    view = state.view(version)
    await session.state.deliver_outside_run(
        AgentSuspendedEvent(
            session_id=session.id,
            run_id=state.run_id,
            interruption=interruption,
            version=version,
        ),
        session.agent.config.redactor,
    )
    return RunResult(
        run_id=state.run_id,
        session_id=session.id,
        status="suspended",
        run_state=view,
        interruption=interruption,
        leaf_id=view.leaf_id,
    )


async def check_child(
    agent: Any, link: ChildRun, parent_options: RunStateOptions, store: object
) -> None:
    """Before a calling run's crash recovery claims it: the recorded child run must not be
    ambiguous (a tool call of the child that started and stored no result).

    Raises:
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — the child's ambiguity report, naming
            the child run (``run_id`` and ``calls`` attributes); resolve the calls on the child
            run (``resolve_ambiguous_call(store, <child run id>, ...)``) and resume again.
    """
    config = agent.config
    own = coerce_run_state_options(config.run_state, label="agent run_state")
    options = own if own is not None else parent_options
    run_id = link.run_id
    record = await options.checkpoints.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=run_id)
    if record is None:
        return
    _, state = await load_state(options.checkpoints, run_id, None, None)
    if state.status != "running":
        return
    session = agent.create_session(
        link.session_id,
        store=config.store if config.store is not None else store,
        metadata={PARENT_RUN_KEY: {}},
    )
    state = await adopt_stored_rows(session, state) or state
    error = ambiguity_error(state)
    if error is not None:
        raise error


async def deny_children(
    state: RunEnvelope,
    registry: Any,
    options: RunStateOptions,
    store: object,
    ownership: OwnershipScope | None,
) -> None:
    """Before a calling run is denied: deny each suspended child run its pending calls recorded
    (an agent tool's child waiting for an approval), so no child is left waiting for a decision
    nobody will give. Each child's gated calls get ``approval_rejected`` rows (see [`deny()`][prism.runtime.durable._resume_writes.deny]).
    """
    for entry in state.calls:
        link = entry.child
        agent = None if link is None else child_agent(registry.get(entry.tool_name))
        if agent is None or link is None:
            continue
        config = agent.config
        own = coerce_run_state_options(config.run_state, label="agent run_state")
        child_options = own if own is not None else options
        run_id = link.run_id
        record = await child_options.checkpoints.load_checkpoint(
            namespace=AGENT_RUN_NAMESPACE, key=run_id
        )
        if record is None or not stored_status_is(record.value, "suspended"):
            continue
        _, child_state = await load_state(child_options.checkpoints, run_id, None, ownership)
        session = agent.create_session(
            link.session_id,
            store=config.store if config.store is not None else store,
            metadata={PARENT_RUN_KEY: {}},
        )
        writer = EnvelopeWriter(child_options, record.version, ownership, config.redactor)
        await deny(session, child_state, writer)
