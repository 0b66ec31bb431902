"""The durable run state: options, limits and value types (the envelope is in ``_envelope``).

Private module behind ``prism.runtime.durable``; public names are re-exported from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from prism._serde import Serializable
from prism.errors import AgentLoopStateError, AgentRunStateError, PrismConfigError
from prism.loop_needs import handoff_tools
from prism.loops.contracts import is_durable_capable
from prism.runtime.run._delegation import child_agent
from prism.runtime.run.config import AgentConfig
from prism.runtime.run.seam import CheckpointPolicy, RunStateOptions, coerce_run_state_options
from prism.types import (
    JsonValue,
)

__all__ = [
    "MAX_LOADED_STATE_BYTES",
    "MAX_STATE_BYTES_LIMIT",
    "OLDEST_SCHEMA_VERSION",
    "RELEASE_KEY",
    "SCHEMA_VERSION",
    "AgentRunInterruption",
    "CheckpointPolicy",
    "DecidedApproval",
    "DecisionOutcome",
    "DecisionScope",
    "InterruptionKind",
    "PendingDecision",
    "RunDecision",
    "RunStateOptions",
    "RunStateStatus",
    "StickyDecision",
    "check_durable_run",
    "coerce_run_state_options",
]

# --------------------------------------------------------------------------- constants

SCHEMA_VERSION: Final = 3
"""``schema_version`` of every envelope this version writes.

Version 2 adds, all optional: ``steers`` (steered messages held for after an open tool round),
per pending call ``arguments_hash`` (what an approval binds to) and ``resolution`` (an
operator's repair of an ambiguous call), and per pending decision ``tool_name`` and
``arguments`` (the redacted arguments an approver reads). Version 3 adds, optional too: per
pending call ``child`` (the child run an agent-tool call started, with the decisions forwarded to
it) and per pending decision ``subagent`` (the child run asking for it). An older envelope is
upgraded on load (it has none of them)."""
OLDEST_SCHEMA_VERSION: Final = 1
"""The oldest ``schema_version`` still loaded (and upgraded)."""
MAX_STATE_BYTES_LIMIT: Final = 1_048_576
"""Largest allowed ``max_state_bytes``."""
MAX_LOADED_STATE_BYTES: Final = 1_048_576
"""Largest envelope accepted when loading or saved by ``save_agent_run_state``, in UTF-8 bytes."""
MAX_DEPTH: Final = 32
MAX_KEYS: Final = 256
MAX_GATED: Final = 32
MAX_STICKY: Final = 64
MAX_DECISIONS: Final = 128
MAX_APPROVAL_ID: Final = 128
MAX_REASON_BYTES: Final = 2048
MAX_BY: Final = 256
"""Most characters of ``RunDecision.by``."""
MAX_DECIDED: Final = 32
"""Most decided approvals an envelope keeps (``decided``, the newest ones)."""
MAX_MODIFIED_BYTES: Final = 16 * 1024
MAX_SHOWN_ARGUMENTS_BYTES: Final = 4096
"""Most UTF-8 bytes of ``PendingDecision.arguments``."""
APPROVAL_REASON: Final = "Tool side effect requires approval"
NOT_CONTINUABLE: Final = "Run is suspended and not continuable; approve or deny it"
AMBIGUOUS: Final = "Ambiguous dispatched tool requires operator resolution"

RELEASE_KEY: Final = "release"
"""Optional envelope key of a run whose worker let it go at a turn boundary (a worker shutting
down): ``{"by": <worker id>, "reason": <why>, "at": <ISO-8601 UTC time>}`` on a clean-stop
envelope (``status="succeeded"``, ``stop_reason="host_policy"``). It tells a scheduler that the
stop was not the host's answer but a hand-over: the run is to be continued at once, by whoever
claims it next. Absent on every other envelope; the claim of a resume removes it. Envelopes
without it load as before."""

"""When a durable run writes its envelope besides suspensions and terminal states."""
RunStateStatus: TypeAlias = Literal[
    "running", "suspended", "succeeded", "failed", "aborted", "denied"
]
"""``status`` of a stored envelope."""
DecisionOutcome: TypeAlias = Literal["allow_once", "allow_for_run", "reject_once", "reject_for_run"]
"""An operator's decision on one pending approval."""
InterruptionKind: TypeAlias = Literal["input_guardrail", "tool_approval"]
"""Why a run suspended."""

CHECKPOINT_POLICIES: Final = frozenset(("on-suspend", "every-turn"))
STATUSES: Final = frozenset(("running", "suspended", "succeeded", "failed", "aborted", "denied"))
OUTCOMES: Final = frozenset(("allow_once", "allow_for_run", "reject_once", "reject_for_run"))
ALLOWING: Final = frozenset(("allow_once", "allow_for_run"))
DECISIONS: Final = frozenset(("continue", "approve", "deny"))


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def not_resumable_message(run_id: str, status: str) -> str:
    """Why a stored run in a final ``status`` cannot be resumed (the ``prism resume`` wording)."""
    if status == "succeeded":
        return f"run {run_id} already finished (succeeded); nothing to resume"
    return (
        f"run {run_id} is {status} and cannot be resumed (only a run stopped at a turn "
        "boundary, waiting for an approval or cut off mid-run can be)"
    )


def stale_message(
    run_id: str, stored: int, expected: int, status: str, stop_reason: str | None
) -> str:
    """The message of a resume whose expected version is not the stored one: another resumer
    (or writer) moved the run on; a run that has finished since says so."""
    head = (
        f"run {run_id} was resumed or changed by another writer "
        f"(stored version {stored}, expected {expected})"
    )
    continuable = status in ("running", "suspended") or (
        status == "succeeded" and stop_reason == "host_policy"
    )
    if continuable:
        return f"{head}; load it again to resume its current version"
    return f"{head}: {not_resumable_message(run_id, status)}"


# --------------------------------------------------------------------------- options


def _validate_options(options: RunStateOptions) -> None:
    """Check the options of a durable run: a checkpoint store, a non-blank
    ``definition_revision``, ``max_state_bytes`` in range, a known ``checkpoint_policy`` (plus the
    types of the remaining fields)."""
    store = options.checkpoints
    if not callable(getattr(store, "save_checkpoint", None)) or not callable(
        getattr(store, "load_checkpoint", None)
    ):
        raise AgentRunStateError("run_state.checkpoints must be a CheckpointStore")
    revision = options.definition_revision
    if not isinstance(revision, str) or not revision.strip():
        raise AgentRunStateError("run_state.definition_revision must be a non-blank string")
    size = options.max_state_bytes
    if not is_int(size) or not 1 <= size <= MAX_STATE_BYTES_LIMIT:
        raise AgentRunStateError(
            f"run_state.max_state_bytes must be an int in 1..{MAX_STATE_BYTES_LIMIT}, got {size!r}"
        )
    if options.checkpoint_policy not in CHECKPOINT_POLICIES:
        raise AgentRunStateError(
            f"unknown run_state.checkpoint_policy: {options.checkpoint_policy!r}"
        )
    if not isinstance(options.interrupt_before_tool, bool):
        raise AgentRunStateError("run_state.interrupt_before_tool must be a bool")
    token = options.fencing_token
    if token is not None and not is_int(token):
        raise AgentRunStateError("run_state.fencing_token must be an int or None")


def check_durable_run(
    config: AgentConfig,
    run_value: RunStateOptions | None,
    *,
    run_loop: object = None,
    run_model: object = None,
    run_guardrails: object = None,
    run_tool_filter: object = None,
) -> RunStateOptions | None:
    """Durable preflight; no side effects.

    Checks, in order: (1) a run-level ``run_state`` differing (``!=``) from the agent's; (2) the
    option values; (3) an agent without ``id`` and ``name``; (4) a custom loop strategy that is
    not durable-capable; (5) run-level ``loop``, ``model``, ``guardrails`` or ``tool_filter``.

    Args:
        config: The agent configuration.
        run_value: The run's coerced ``run_state`` (or ``None``).
        run_loop: The run's ``loop`` option.
        run_model: The run's ``model`` option.
        run_guardrails: The run's ``guardrails`` option.
        run_tool_filter: The run's ``tool_filter`` option.

    Returns:
        The effective options, or ``None`` when the run is not durable.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — the agent's ``run_state`` mapping is malformed;
            a tool with ``needs_approval`` (the agent's, or a handoff target's) on a run that is
            not durable; an agent tool whose child would run without durable state and needs it
            (a child without ``run_state`` of its own, under a run that is not durable or without
            an id or a name to inherit the run's).
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — checks 1, 2, 3 and 5.
        AgentLoopStateError: ``ERR_PRISM_LOOP_NOT_DURABLE`` — check 4.
    """
    agent_value = coerce_run_state_options(config.run_state, label="agent run_state")
    if run_value is None and agent_value is None:
        tools = (*config.tools, *handoff_tools(run_loop if run_loop is not None else config.loop))
        gated = [t.name for t in tools if t.needs_approval is not False]
        if gated:
            raise PrismConfigError(
                f"tool {gated[0]} needs approval (needs_approval), and an approval needs "
                "durable run state to wait in: set run_state=RunStateOptions(checkpoints, "
                "definition_revision) on the agent or the run"
            )
        _check_children(config, durable=False)
        return None
    if run_value is not None and agent_value is not None and run_value != agent_value:
        raise AgentRunStateError("run_state differs from the agent's run_state")
    options = run_value if run_value is not None else agent_value
    assert options is not None
    _validate_options(options)
    if not (config.id or config.name):
        raise AgentRunStateError("a durable run needs an agent with an id or a name")
    loop = run_loop if run_loop is not None else config.loop
    if is_strategy(loop) and not _is_single_shot(loop) and not is_durable_capable(loop):
        raise AgentLoopStateError("ERR_PRISM_LOOP_NOT_DURABLE")
    for name, value in (
        ("loop", run_loop),
        ("model", run_model),
        ("guardrails", run_guardrails),
        ("tool_filter", run_tool_filter),
    ):
        if value is not None:
            raise AgentRunStateError(
                f"run-level {name} is not allowed on a durable run; set it on the agent"
            )
    _check_children(config, durable=True)
    return options


def _check_children(config: AgentConfig, *, durable: bool) -> None:
    """Fail a run before its first turn when one of its agent tools' children would fail the
    durable preflight: a child without ``run_state`` of its own runs without durable state when
    the calling run has none (or when the child has neither id nor name, as it cannot inherit)."""
    for tool in config.tools:
        agent = child_agent(tool)
        if agent is None:
            continue
        child = agent.config
        if child.run_state is not None or (durable and (child.id or child.name)):
            continue
        try:
            check_durable_run(child, None)
        except PrismConfigError as exc:
            where = "the calling run" if not durable else "the child agent (it has no id or name)"
            raise PrismConfigError(
                f"agent tool {tool.name} runs an agent that cannot run without durable run "
                f"state, and {where} has none ({exc}); set run_state on the calling "
                "agent or run (a named child inherits it), or on the child agent"
            ) from exc


def is_strategy(loop: object) -> bool:
    """A loop strategy object (not options, not a mapping, not ``None``)."""
    if loop is None or isinstance(loop, Mapping):
        return False
    from prism.loops.contracts import GenerateValidateReviseLoopOptions, SingleShotLoopOptions

    return not isinstance(loop, (SingleShotLoopOptions, GenerateValidateReviseLoopOptions))


def _is_single_shot(loop: object) -> bool:
    from prism.loops.single_shot import single_shot_loop

    return loop is single_shot_loop


# --------------------------------------------------------------------------- value types


@dataclass(frozen=True, slots=True)
class DecisionScope(Serializable):
    """What a decision applies to. A call matches when every set field equals
    the call's."""

    tool_name: str | None = None
    """Tool name; ``None`` matches any tool."""
    arguments_hash: str | None = None
    """``sha256(canonical_json(call.arguments)).hexdigest()``; ``None`` matches any arguments."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingDecision(Serializable):
    """One approval an operator must decide before the run continues."""

    approval_id: str
    """Id to answer with ``RunDecision(approval_id, ...)`` (``approval_…``)."""
    tool_call_id: str
    """The gated call's id."""
    scope: DecisionScope
    """The call's tool name and arguments hash: what the approval binds to."""
    tool_name: str | None = None
    """The gated call's tool."""
    arguments: str | None = None
    """The call's arguments for the approver to read: JSON text with the registered secrets
    redacted, at most 4096 UTF-8 bytes (a longer text is cut and ends with ``…``; see
    ``arguments_truncated``). The approval still binds to the full arguments' hash."""
    arguments_truncated: bool = False
    """``arguments`` was cut at 4096 bytes."""
    reason: str = APPROVAL_REASON
    """Why approval is needed."""
    kind: Literal["tool_approval"] = "tool_approval"
    """Always ``"tool_approval"``."""
    subagent: dict[str, str] | None = None
    """``None``: this run's own call. Else the call is a child run's (an agent tool's child
    waiting for it): ``{"tool_call_id", "agent", "session_id", "run_id"}`` — the calling run's
    tool call and the child's agent, session and run. Answer it like any other pending decision,
    on the calling run; ``tool_call_id``, ``tool_name`` and ``arguments`` above are the child's."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRunInterruption(Serializable):
    """Why a durable run is suspended. Tool arguments appear only as each pending decision's
    redacted, capped ``arguments`` text.

    For a single pending decision ``reason``, ``tool_call_id`` and ``tool_name`` come from it; for
    several, ``reason`` is ``"<n> tool side effects require approval"`` and the call fields are
    ``None``.
    """

    kind: InterruptionKind
    """``"tool_approval"`` or ``"input_guardrail"``."""
    reason: str
    """Human-readable reason."""
    tool_call_id: str | None = None
    """The single gated call's id, else ``None``."""
    tool_name: str | None = None
    """The single gated call's tool, else ``None``."""
    pending_decisions: tuple[PendingDecision, ...] = ()
    """Decisions the operator must make (empty for ``input_guardrail``)."""

    def __post_init__(self) -> None:
        if not isinstance(self.pending_decisions, tuple):
            object.__setattr__(self, "pending_decisions", tuple(self.pending_decisions))


@dataclass(frozen=True, slots=True)
class RunDecision(Serializable):
    """An operator's decision on one pending approval.

    A mapping with these keys is accepted by [`resume_agent_run()`][prism.runtime.durable.resume_agent_run] too.
    """

    approval_id: str
    """The ``PendingDecision.approval_id`` decided (1–128 characters)."""
    outcome: DecisionOutcome
    """``allow_once``, ``allow_for_run``, ``reject_once`` or ``reject_for_run``; the ``*_for_run``
    outcomes also add a ``StickyDecision`` for the rest of the run."""
    reason: str | None = None
    """Operator reason (≤ 2048 UTF-8 bytes); the row text of a rejection."""
    modified_arguments: dict[str, JsonValue] | None = None
    """Replacement arguments for an allowed call (a JSON object ≤ 16 KiB, validated against the
    tool's parameter schema)."""
    by: str | None = None
    """Who decided: an operator's name, a user id, ``"prism serve"`` (1–256 characters). Kept
    with the decision in the run's envelope (``DecidedApproval``), so that a later decider
    of the same approval is told who decided it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DecidedApproval(Serializable):
    """Who decided one approval, how and when.

    A durable run keeps the decisions a resume applied in its envelope (the newest 32, key
    ``decided``) for the rest of the run, its end included; a decision recorded for another
    process to apply (``record_decisions``) is one too before it is applied. A decision that
    arrives once the approval is settled is refused with the winner's
    (``AgentDecisionError`` ``ERR_PRISM_DECISION_DECIDED``, ``decided``).
    """

    run_id: str
    """The run the decision was given on (the calling run for a child run's approval)."""
    approval_id: str
    """The approval decided (``PendingDecision.approval_id``)."""
    outcome: DecisionOutcome
    """The outcome; a run denied as a whole (``decision="deny"``) shows ``reject_once``."""
    by: str | None = None
    """``RunDecision.by``: who decided, when the decider said."""
    reason: str | None = None
    """The decider's reason."""
    decided_at: str
    """ISO-8601 UTC time of the decision: when it was recorded, else when a resume applied it."""
    applied_at: str | None = None
    """ISO-8601 UTC time a resume applied it to the run; ``None`` while a recorded decision waits
    for a process to apply it."""
    modified: bool = False
    """The call was allowed with other arguments (``modified_arguments``)."""
    tool_name: str | None = None
    """The decided call's tool, when known."""
    tool_call_id: str | None = None
    """The decided call's id, when known (a child run's call for a child run's approval)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StickyDecision(Serializable):
    """A decision that applies for the rest of the run, across legs."""

    scope: DecisionScope
    """Calls it applies to (no ``arguments_hash`` when the decision modified the arguments)."""
    outcome: Literal["allow_for_run", "reject_for_run"]
    """``allow_for_run`` dispatches matching calls without approval; ``reject_for_run`` answers
    them with an ``approval_rejected`` row."""
    reason: str | None = None
    """The operator's reason."""
    decided_at: str
    """ISO-8601 UTC time of the decision."""
