"""Resuming a stored durable run: continue, approve or deny it (``resume_agent_run``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Literal, Protocol

from prism.checkpoints import AGENT_RUN_NAMESPACE, CheckpointStore
from prism.errors import (
    AgentRunStateError,
    AgentSessionBusyError,
    CheckpointConflictError,
    PrismError,
)
from prism.limits.tracker import coerce_counters
from prism.loop_needs import handoff_tools
from prism.runtime.durable._approvals import (
    apply_decisions,
    check_bound_arguments,
    coerce_decisions,
    decision_error,
    restore_arguments,
)
from prism.runtime.durable._decision_records import (
    decided_error,
    lost_to,
    recorded_batch,
    settled_decisions,
)
from prism.runtime.durable._durable_leg import DURABLE_HOOKS
from prism.runtime.durable._envelope import (
    definition_mismatch,
    load_state,
    run_key,
)
from prism.runtime.durable._resume_writes import (
    EnvelopeWriter,
    adopt_stored_rows,
    ambiguity_error,
    check_ambiguity,
    check_child,
    check_leaf,
    deny,
    deny_children,
    resuspend,
)
from prism.runtime.durable._run_envelope import (
    AgentRunState,
    LoadedRunState,
    RunEnvelope,
    stated_ids,
)
from prism.runtime.durable._run_state import (
    DECISIONS,
    NOT_CONTINUABLE,
    RunDecision,
    RunStateOptions,
    coerce_run_state_options,
    is_int,
    not_resumable_message,
    stale_message,
)
from prism.runtime.run._delegation import child_agent
from prism.runtime.run._tool_sources import check_source_tools, open_leg_tools
from prism.runtime.run.config import AgentConfig
from prism.runtime.run.leg import resume_leg
from prism.runtime.run.options import RunOptions
from prism.runtime.run.plan import plan_run
from prism.runtime.run.seam import ResumePoint
from prism.runtime.run.session import AgentSession
from prism.runtime.run.turn_policy import TurnPolicy
from prism.store import read_branch
from prism.types import (
    AgentRunRef,
    OwnershipScope,
    RunResult,
    ToolCallContent,
    ToolExecutionContext,
)

if TYPE_CHECKING:
    from prism.abort import AbortSignal
    from prism.redaction import SecretRedactor


class ResumableAgent(Protocol):
    """What [`resume_agent_run()`][prism.runtime.durable._resume.resume_agent_run] needs of an agent (``prism.Agent`` is one): its
    configuration and its sessions."""

    @property
    def config(self) -> AgentConfig:
        """The agent's validated configuration."""
        ...

    def create_session(self, session_id: str | None = None) -> AgentSession:
        """A session over the agent's store."""
        ...


__all__ = ["ResumableAgent", "resume_agent_run"]

# --------------------------------------------------------------------------- resume


async def resume_agent_run(
    agent_or_session: ResumableAgent | AgentSession,
    run_state: AgentRunState | LoadedRunState | AgentRunRef | str,
    *,
    decision: Literal["continue", "approve", "deny"] = "continue",
    decisions: Sequence[RunDecision | Mapping[str, Any]] | Literal["recorded"] | None = None,
    expected_version: int | None = None,
    checkpoints: CheckpointStore | None = None,
    definition_revision: str | None = None,
    signal: AbortSignal | None = None,
    ownership: OwnershipScope | Mapping[str, Any] | None = None,
    fencing_token: int | None = None,
    turn_policy: TurnPolicy | Mapping[str, Any] | None = None,
    parent: ToolExecutionContext | None = None,
) -> RunResult:
    """Continue, approve or deny a stored durable run.

    Steps: validate the input; load the envelope; compare the definition revision, agent
    id and fingerprint with the current agent; check the version; then act on the stored
    status:

    * ``suspended`` + ``"approve"`` or decisions covering every pending approval → claim and run
      a resumed leg: approved calls are replayed (once), rejected ones answered with
      ``approval_rejected`` rows, then the loop continues; completed provider turns are never
      requested again;
    * ``suspended`` + decisions covering only some → re-suspend (``status="suspended"``);
    * ``suspended`` + ``decisions="recorded"`` → the decisions recorded for its open approvals
      (``record_decisions()``, by another process) are applied as if
      given here;
    * ``suspended`` + ``"deny"`` → ``status="denied"``; no tool and no provider call; the gated
      calls still open on the stored branch are answered with ``approval_rejected`` rows first,
      so the session's next turn sends a transcript providers accept (see ``deny()``);
    * ``running`` (crash recovery) or a ``host_policy`` stop + ``"continue"`` → claim and resume;
      for a ``running`` envelope recorded inside a tool round, result rows stored after
      its leaf are adopted first, and a ``dispatched`` call left without one is ambiguous.

    A resumed leg has the same ``run_id``, restored limit counters (wall time counts active time
    only), the given ``turn_policy`` or none, and emits ``agent_started`` then
    ``agent_resumed(version)``. The claim drops the envelope's ``release`` (a released run is
    claimed like any clean stop).

    Args:
        agent_or_session: An ``Agent`` (a session with the stored id is created over
            ``agent.config.store``, else a private memory store) or an ``AgentSession`` (its id
            must equal the stored one; it must not be running).
        run_state: What identifies the stored run: an [`AgentRunState`][prism.runtime.durable._resume.AgentRunState] (as returned by
            ``RunResult.run_state``), a [`LoadedRunState`][prism.runtime.durable._resume.LoadedRunState] (as returned by
            [`load_agent_run_state()`][prism.runtime.durable.load_agent_run_state]), an ``AgentRunRef`` or a run id string. A run id or
            ``AgentRunRef`` carries no version: without ``expected_version`` the stored version
            is resumed (the claim is still a compare-and-set on it, so of two resumers one
            wins). Anything else raises ``AgentRunStateError`` naming the accepted types.
        decision: ``"continue"``, ``"approve"`` or ``"deny"``.
        decisions: A non-empty sequence of [`RunDecision`][prism.runtime.durable._resume.RunDecision] (or mappings), at most 128, or
            ``"recorded"`` (the decisions recorded for the run); only with the default
            ``decision``. Each applied decision is kept in the run's envelope with its ``by``
            and time (``DecidedApproval``) until the run ends.
        expected_version: The stored version; defaults to ``run_state.version``
            (``record.version`` of a ``LoadedRunState``), or to the version loaded for a run
            id or an ``AgentRunRef``. It must be a positive int.
        checkpoints: Defaults to the agent's ``run_state.checkpoints``.
        definition_revision: Defaults to the agent's ``run_state.definition_revision``.
        signal: Abort signal bridged into the resumed leg.
        ownership: Passed to the checkpoint store and the leg's records.
        fencing_token: Used for every write when the agent has no ``run_state``.
        turn_policy: Clean host stops at the resumed leg's turn boundaries (its turns are
            counted from the start of the leg); ``None``: the leg runs to its end or its next
            suspension.
        parent: The calling tool's context when the run is a child run (an agent tool resuming
            its child inside the calling run's resumed leg; see the ``parent`` run option).

    Returns:
        The ``RunResult`` of the resumed leg (``succeeded`` or ``suspended``), or of the
        re-suspension (``suspended``) or denial (``denied``).

    Raises:
        AgentDecisionError: ``ERR_PRISM_DECISION_INVALID`` / ``_DUPLICATE`` / ``_UNKNOWN`` /
            ``_LIMIT``; ``ERR_PRISM_DECISION_DECIDED`` — an approval of ``decisions`` was settled
            by another decision first (the stored run shows it, or the claim lost to it):
            ``decided`` holds the winners with their outcome, ``by`` and time;
            ``ERR_PRISM_DECISION_UNKNOWN`` also for ``decisions="recorded"`` when no recorded
            decision waits for an open approval. Nothing is written.
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — missing or malformed state
            (``"no run <id> in this store …"``), another session's, revision or fingerprint
            mismatch, a final status (``"run <id> already finished (succeeded); nothing to
            resume"``, ``"run <id> is failed and cannot be resumed …"``), ambiguous dispatched
            calls (``calls`` lists them), a leaf the session store does not hold,
            configuration mismatch, a tool-source tool that is gone or whose parameter schema
            changed since the run was stored (named). Nothing is written.
        AgentSessionBusyError: ``ERR_PRISM_SESSION_BUSY`` — the session is running.
        CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — another resumer or writer
            moved the run on: the stored version is not the expected one (at load; the message
            says when the run has finished since), or the claim's compare-and-set lost.
        AgentRunError: the resumed leg failed (as ``session.run`` raises it).
    """
    batch = _checked_decisions(decision, decisions)
    key, stated_session, default_version = _identify(run_state)
    version = expected_version if expected_version is not None else default_version
    if version is not None and (not is_int(version) or version < 1):
        raise decision_error(INVALID, f"expected_version must be a positive int, got {version!r}")
    session, config, stated_session = _session_of(agent_or_session, stated_session)
    options = _options_of(config, checkpoints, definition_revision, fencing_token)
    owner = None if ownership is None else OwnershipScope.coerce(ownership)
    record, state = await load_state(options.checkpoints, key, stated_session, owner)
    recorded: dict[str, str] | None = None
    if decisions == "recorded":
        batch, recorded = await recorded_batch(options.checkpoints, key, state)
    if batch is not None:
        settled = settled_decisions(state, batch)
        if settled:
            raise decided_error(key, settled)
    _check_stored(state, config, options, key, record.version, version, decision, batch)
    check_fields(state)
    if session is None:
        assert not isinstance(agent_or_session, AgentSession)
        session = agent_or_session.create_session(state.session_id)
    if _agent_options(config) is None:  # the stored policy, unless the agent has its own
        options = dataclasses.replace(
            options,
            checkpoint_policy=state.checkpoint_policy,  # type: ignore[arg-type]
            interrupt_before_tool=state.interrupt_before_tool,
        )
    writer = EnvelopeWriter(options, record.version, owner, config.redactor)
    if state.status == "suspended" and decision == "deny":
        await deny_children(state, config.tools, options, session.store, owner)
        return await deny(session, state, writer)
    await check_leaf(session, state)  # before anything is written
    # The tools the resumed leg will have: a source tool whose schema changed since the run
    # was stored fails the resume here, before anything is written (the sources stay open for
    # the leg, which reuses their connections).
    async with AsyncExitStack() as scope:
        tools = await open_leg_tools(config, scope)
        check_source_tools(state.source_tools, tools.digests)
        # The calls and the child runs the resume would continue, before anything is written.
        handoff = {tool.name for tool in handoff_tools(config.loop)}
        await check_pending_calls(
            session, state, lambda name: tools.registry.get(name) is not None or name in handoff
        )
        await check_children(state, tools.registry, options, owner)
        if state.status == "suspended":
            applied = apply_decisions(state, batch, tools.registry, recorded)
            new_state = dataclasses.replace(
                state, pending_calls=applied.pending_calls, sticky_decisions=applied.sticky
            ).with_decided(applied.decided)
            check_bound_arguments(new_state)
            check_ambiguity(new_state)
            if not applied.remaining:
                new_state = restore_arguments(new_state, config.redactor)
            if applied.remaining:
                try:
                    return await resuspend(session, new_state, applied.remaining, writer)
                except CheckpointConflictError as exc:
                    raise await _lost(options.checkpoints, key, batch, exc) from exc
        else:
            new_state = await _recover(
                state, session, tools.registry, options, writer, config.redactor
            )
        # Claim the run, then start the resumed leg.
        claimed: list[int] = []
        claim = _claimer(new_state.claimed(), writer, claimed, crash=state.status == "running")
        if session.is_running:
            raise AgentSessionBusyError()
        plan = plan_run(
            config,
            session.metadata,
            [],
            RunOptions(signal=signal, ownership=owner, turn_policy=turn_policy, parent=parent),
            hooks=DURABLE_HOOKS,
            durable=options,
        )
        try:
            return await resume_leg(session.state, config, plan, claim)
        except CheckpointConflictError as exc:
            if claimed or batch is None:
                raise
            raise await _lost(options.checkpoints, key, batch, exc) from exc


# --------------------------------------------------------------------------- the steps

INVALID = "ERR_PRISM_DECISION_INVALID"


def _checked_decisions(
    decision: str, decisions: Sequence[RunDecision | Mapping[str, Any]] | str | None
) -> list[RunDecision] | None:
    """The decision arguments, checked before anything is read (``decisions="recorded"``: read
    from the store once the run is loaded)."""
    if decision not in DECISIONS:
        raise decision_error(INVALID, f"unknown decision: {decision!r}")
    if decisions is None:
        return None
    if decision != "continue":
        raise decision_error(INVALID, "decisions cannot be combined with decision=" + decision)
    if isinstance(decisions, str):
        if decisions != "recorded":
            raise decision_error(
                INVALID,
                f"decisions must be a sequence of RunDecision or 'recorded', got {decisions!r}",
            )
        return None
    return coerce_decisions(decisions)


async def _lost(
    checkpoints: CheckpointStore,
    run_id: str,
    batch: list[RunDecision] | None,
    error: CheckpointConflictError,
) -> PrismError:
    """What a resume whose write lost the compare-and-set raises: ``ERR_PRISM_DECISION_DECIDED``
    when the winner settled an approval of ``batch``, else ``error``."""
    late = None if batch is None else await lost_to(checkpoints, run_id, batch)
    return error if late is None else late


def _identify(run_state: object) -> tuple[str, str | None, int | None]:
    """``(run id, stated session id, default expected version)`` of what names the run."""
    if isinstance(run_state, AgentRunState):
        return run_key(run_state), run_state.session_id, run_state.version
    if isinstance(run_state, LoadedRunState):
        run_id, session_id = stated_ids(run_state.state)
        return run_id or run_state.record.key, session_id, run_state.record.version
    if isinstance(run_state, AgentRunRef):
        return run_key(run_state), run_state.session_id, None
    if isinstance(run_state, str) and run_state:
        return run_state, None, None
    raise AgentRunStateError(
        "run_state must be an AgentRunState (RunResult.run_state), a LoadedRunState "
        "(load_agent_run_state(...)), an AgentRunRef or a non-empty run id string, got "
        + (repr(run_state) if isinstance(run_state, str) else type(run_state).__name__)
    )


def _session_of(
    agent_or_session: ResumableAgent | AgentSession, stated_session: str | None
) -> tuple[AgentSession | None, AgentConfig, str | None]:
    """The given session (checked: idle, the stored one) or none, the agent configuration, and
    the session id the stored run must have."""
    if not isinstance(agent_or_session, AgentSession):
        return None, agent_or_session.config, stated_session
    session = agent_or_session
    if session.is_running:
        raise AgentSessionBusyError()
    if stated_session is not None and stated_session != session.id:
        raise AgentRunStateError("run state belongs to another session")
    return session, session.agent.config, session.id


def _agent_options(config: AgentConfig) -> RunStateOptions | None:
    return coerce_run_state_options(config.run_state, label="agent run_state")


def _options_of(
    config: AgentConfig,
    checkpoints: CheckpointStore | None,
    definition_revision: str | None,
    fencing_token: int | None,
) -> RunStateOptions:
    """The durable options of the resume: the agent's ``run_state`` (the arguments must agree
    with it), else the arguments."""
    agent_options = _agent_options(config)
    if agent_options is not None:
        if checkpoints is not None and checkpoints is not agent_options.checkpoints:
            raise AgentRunStateError("checkpoints differ from the agent's run_state")
        if (
            definition_revision is not None
            and definition_revision != agent_options.definition_revision
        ):
            raise AgentRunStateError("definition_revision differs from the agent's run_state")
        return agent_options
    if checkpoints is None or definition_revision is None:
        raise AgentRunStateError(
            "resume needs checkpoints and definition_revision (or an agent run_state)"
        )
    return RunStateOptions(checkpoints, definition_revision, fencing_token=fencing_token)


def _check_stored(
    state: RunEnvelope,
    config: AgentConfig,
    options: RunStateOptions,
    key: str,
    stored_version: int,
    version: int | None,
    decision: str,
    batch: list[RunDecision] | None,
) -> None:
    """The stored run must come from the same agent definition, be at the expected version (a
    run id alone resumes the stored version; the claim still compares it), and be in a status
    the decision applies to."""
    mismatch = definition_mismatch(state, config, options.definition_revision)
    if mismatch is not None:
        raise AgentRunStateError(mismatch)
    status = state.status
    if version is not None and stored_version != version:
        raise CheckpointConflictError(
            stale_message(key, stored_version, version, status, state.stop_reason)
        )
    if status == "suspended":
        if decision == "continue" and batch is None:
            raise AgentRunStateError(NOT_CONTINUABLE)
    elif status == "running" or state.policy_stop:
        if decision != "continue" or batch is not None:
            raise decision_error(INVALID, f"a {status} run takes decision='continue' only")
    else:
        raise AgentRunStateError(not_resumable_message(key, status))


def check_fields(state: RunEnvelope) -> None:
    """The stored fields a resumed leg starts from must be usable, checked before anything is
    written: the limit counters and the held input messages. A corrupt one
    fails the resume here, not after the claim (which would lose the pending approvals).

    Raises:
        AgentRunStateError: ``reason="invalid_field"``, ``field`` naming the stored field.
    """
    field, problem = None, ""
    try:
        coerce_counters(state.counters)
    except Exception as exc:
        field, problem = "counters", str(exc)
    if field is None:
        try:
            state.input_messages()
        except Exception as exc:
            field, problem = "input", str(exc)
    if field is None:
        return
    raise refusal(
        f"run {state.run_id} cannot be resumed: its stored {field} are invalid ({problem}); "
        f"nothing was written, the run stays {state.status}",
        "invalid_field",
        state.run_id,
        field=field,
    )


async def check_pending_calls(
    session: AgentSession, state: RunEnvelope, has_tool: Callable[[str], bool]
) -> None:
    """Every pending call the resume would answer or run must be the call the run's stored
    transcript holds (same id, tool and arguments, as stored) and a tool the agent has.

    Raises:
        AgentRunStateError: ``reason="pending_call_edited"`` — an entry names another tool or
            other arguments than the transcript's call, or a call the transcript does not hold;
            ``reason="agent_changed"`` — the call's tool is not one of the agent's tools.
    """
    entries = [e for e in state.calls if e.status == "ready" or e.child is not None]
    if not entries:
        return
    run_id = state.run_id
    transcript: dict[str, ToolCallContent] = {}
    if state.leaf_id is not None:
        for row in await read_branch(session.store, session.id, state.leaf_id):
            message = row.message
            if row.kind != "message" or message is None or message.role != "assistant":
                continue
            for part in message.content:
                if isinstance(part, ToolCallContent):
                    transcript[part.id] = part
    for pending in entries:
        call = pending.tool_call()
        stored = transcript.get(call.id)
        if stored is None or stored.name != call.name or stored.arguments != call.arguments:
            told = (
                "no call of the run's transcript"
                if stored is None
                else f"the transcript's call is {stored.name} with other arguments"
                if stored.name == call.name
                else f"the transcript's call is {stored.name}"
            )
            raise refusal(
                f"run {run_id} cannot be resumed: its pending call {call.id} names {call.name} "
                f"but {told} (the stored entry was edited); nothing was written, the run stays "
                f"{state.status}",
                "pending_call_edited",
                run_id,
            )
        if not has_tool(call.name):
            raise refusal(
                f"run {run_id} cannot be resumed: its pending call {call.id} is of tool "
                f"{call.name}, which the agent no longer has; nothing was written, the run "
                f"stays {state.status} — resume it with the agent it was started with",
                "agent_changed",
                run_id,
            )


async def check_children(
    state: RunEnvelope,
    registry: Any,
    options: RunStateOptions,
    ownership: OwnershipScope | None,
) -> None:
    """Every child run a pending call continues (an agent tool's) must belong to the child
    agent the tool now runs: same agent id, definition revision and fingerprint, its own pending
    calls of tools that agent has, and so on down the tree.

    Raises:
        AgentRunStateError: ``reason="agent_changed"`` — names the call, the child run and what
            changed.
    """
    run_id = state.run_id
    for entry in state.calls:
        link = entry.child
        if link is None:
            continue
        agent = child_agent(registry.get(entry.tool_name))
        where = f"its pending call {entry.call_id} ({entry.tool_name}) continues child run {link.run_id}"
        if agent is None:
            raise refusal(
                f"run {run_id} cannot be resumed: {where}, but {entry.tool_name} no longer "
                f"runs a child agent; nothing was written, the run stays {state.status}",
                "agent_changed",
                run_id,
            )
        config: AgentConfig = agent.config
        own = _agent_options(config)
        child_options = own if own is not None else options
        record = await child_options.checkpoints.load_checkpoint(
            namespace=AGENT_RUN_NAMESPACE, key=link.run_id
        )
        if record is None:
            continue
        _, child_state = await load_state(child_options.checkpoints, link.run_id, None, ownership)
        if not child_state.continuable:
            continue
        changed = definition_mismatch(child_state, config, child_options.definition_revision)
        if changed is None:
            tools = {tool.name: tool for tool in config.tools}
            gone = [
                e for e in child_state.calls if e.status == "ready" and e.tool_name not in tools
            ]
            if gone:
                changed = f"its pending call {gone[0].call_id} is of tool {gone[0].tool_name}, "
                changed += "which the child agent no longer has"
        if changed is not None:
            raise refusal(
                f"run {run_id} cannot be resumed: {where}, whose agent changed ({changed}); "
                f"nothing was written, the run stays {state.status} — resume it with the "
                "agent tree it was started with",
                "agent_changed",
                run_id,
            )
        await check_children(child_state, tools_of(config), child_options, ownership)


def tools_of(config: AgentConfig) -> dict[str, Any]:
    """Tool name → tool of an agent's static tools."""
    return {tool.name: tool for tool in config.tools}


def refusal(
    message: str, reason: str, run_id: str, *, field: str | None = None
) -> AgentRunStateError:
    """An ``AgentRunStateError`` refusing a resume before anything was written."""
    error = AgentRunStateError(message)
    error.reason = reason
    error.run_id = run_id
    error.field = field
    return error


async def _recover(
    state: RunEnvelope,
    session: AgentSession,
    registry: Any,
    options: RunStateOptions,
    writer: EnvelopeWriter,
    redactor: SecretRedactor | None = None,
) -> RunEnvelope:
    """A ``running`` run (crash recovery) or a policy stop about to be claimed: adopt the result
    rows a crash left after the leaf, then refuse ambiguous calls (this run's, or a recorded
    child run's), keeping the adopted rows (compare-and-set)."""
    adopted = await adopt_stored_rows(session, state) if state.status == "running" else None
    new_state = adopted or state
    check_bound_arguments(new_state)
    new_state = restore_arguments(new_state, redactor)
    ambiguous = ambiguity_error(new_state)
    if ambiguous is None:  # a child run left ambiguous is reported before the claim
        ambiguous = await _child_ambiguity(new_state, registry, options, session)
    if ambiguous is not None:
        if adopted is not None:  # the rows matched to their calls are kept
            await writer.save(adopted)
        raise ambiguous
    return new_state


def _claimer(
    claimed: RunEnvelope, writer: EnvelopeWriter, done: list[int], *, crash: bool
) -> Callable[[], Awaitable[ResumePoint]]:
    """The claim the resumed leg makes before its first step: save ``claimed`` (compare-and-set;
    its version is appended to ``done``) and return where the leg starts."""
    messages = claimed.input_messages()

    async def claim() -> ResumePoint:
        version = await writer.save(claimed)
        done.append(version)
        return ResumePoint(
            run_id=claimed.run_id,
            version=version,
            leaf_id=claimed.leaf_id,
            counters=claimed.counters,
            trace=claimed.trace,
            input=messages,
            fork=crash,
            state=claimed,
        )

    return claim


async def _child_ambiguity(
    state: RunEnvelope, registry: Any, options: RunStateOptions, session: AgentSession
) -> AgentRunStateError | None:
    """The ambiguity report of a child run a pending call recorded (an agent tool's), else
    ``None``."""
    for entry in state.calls:
        link = entry.child
        agent = None if link is None else child_agent(registry.get(entry.tool_name))
        if agent is not None and link is not None:
            try:
                await check_child(agent, link, options, session.store)
            except AgentRunStateError as exc:
                return exc
    return None
