"""Durable runs: options, the run-state envelope, approvals and resume (05-durable-runs).

A durable run writes a bounded, redacted, versioned **run-state envelope** to a host
:class:`~prism.runtime.checkpoints.CheckpointStore` at safe boundaries, so it can suspend for an
operator decision or stop cleanly and continue later — in another process when the session store
and the checkpoint store are durable.

Public surface (re-exported from ``prism``):

* :class:`RunStateOptions` — ``run_state=`` on the agent or the run (DUR-1);
* :class:`AgentRunState` — the public view of a stored envelope (``RunResult.run_state``, DUR-4);
* :class:`AgentRunInterruption`, :class:`PendingDecision`, :class:`DecisionScope` — why a run is
  suspended (APR-6);
* :class:`RunDecision`, :class:`StickyDecision` — operator decisions (APR-7, APR-10);
* :func:`resume_agent_run` — continue, approve or deny a stored run (DUR-16..DUR-21);
* :func:`agent_fingerprint` — the configuration fingerprint (DUR-5);
* :func:`load_agent_run_state` / :func:`save_agent_run_state` / :class:`LoadedRunState` — operator
  access to the stored envelope (DUR-24).

The per-leg machinery the runtime drives (gating, checkpoint writes, suspension, replay) is
:class:`DurableRun`; :func:`check_durable_run` is the durable preflight (DUR-2).

Example (human approval)::

    store = MemoryCheckpointStore()
    agent = create_agent(model=..., provider=..., id="desk", tools=[refund],
                         run_state=RunStateOptions(store, "v1", interrupt_before_tool=True))
    session = agent.create_session()
    result = await session.run("Refund order 42")
    if result.status == "suspended":
        result = await resume_agent_run(session, result.run_state, decision="approve")
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, cast

from prism._serde import Serializable
from prism._util import new_id, now_iso
from prism.errors import (
    AgentDecisionError,
    AgentLoopStateError,
    AgentRunStateError,
    PrismConfigError,
)
from prism.loops.contracts import effective_loop_revision, is_durable_capable
from prism.redaction import SecretRedactor
from prism.runtime.checkpoints import AGENT_RUN_NAMESPACE, CheckpointRecord, CheckpointStore
from prism.types import (
    AgentRunRef,
    ErrorInfo,
    JsonValue,
    Message,
    ModelConfig,
    OwnershipScope,
    RunResult,
    RunStopReason,
    ToolCallContent,
    ToolResult,
    canonical_json,
    is_json_value,
)

if TYPE_CHECKING:
    from prism.abort import AbortSignal
    from prism.runtime.agent import Agent, AgentConfig
    from prism.runtime.session import AgentSession
    from prism.tools import ToolRegistry

__all__ = [
    "MAX_LOADED_STATE_BYTES",
    "AgentRunInterruption",
    "AgentRunState",
    "CheckpointPolicy",
    "DecisionOutcome",
    "DecisionScope",
    "DurableRun",
    "LoadedRunState",
    "PendingDecision",
    "ResumePoint",
    "RunDecision",
    "RunStateOptions",
    "RunStateStatus",
    "StickyDecision",
    "agent_fingerprint",
    "arguments_hash",
    "check_durable_run",
    "coerce_run_state_options",
    "load_agent_run_state",
    "loop_state_of",
    "rejection_result",
    "resume_agent_run",
    "save_agent_run_state",
]

# --------------------------------------------------------------------------- constants

SCHEMA_VERSION: Final = 1
"""``schema_version`` of every envelope this version writes (DUR-4)."""
MAX_STATE_BYTES_LIMIT: Final = 1_048_576
"""Largest allowed ``max_state_bytes`` (DUR-2)."""
MAX_LOADED_STATE_BYTES: Final = 1_048_576
"""Largest envelope accepted when loading or saved by ``save_agent_run_state``, in UTF-8 bytes
(DUR-6, DUR-24)."""
_MAX_DEPTH: Final = 32
_MAX_KEYS: Final = 256
_MAX_GATED: Final = 32
_MAX_STICKY: Final = 64
_MAX_DECISIONS: Final = 128
_MAX_APPROVAL_ID: Final = 128
_MAX_REASON_BYTES: Final = 2048
_MAX_MODIFIED_BYTES: Final = 16 * 1024
_APPROVAL_REASON: Final = "Tool side effect requires approval"
_NOT_CONTINUABLE: Final = "Run is suspended and not continuable; approve or deny it"
_AMBIGUOUS: Final = "Ambiguous dispatched tool requires operator resolution"

CheckpointPolicy: TypeAlias = Literal["on-suspend", "every-turn"]
"""When a durable run writes its envelope besides suspensions and terminal states (DUR-7)."""
RunStateStatus: TypeAlias = Literal[
    "running", "suspended", "succeeded", "failed", "aborted", "denied"
]
"""``status`` of a stored envelope (DUR-4)."""
DecisionOutcome: TypeAlias = Literal["allow_once", "allow_for_run", "reject_once", "reject_for_run"]
"""An operator's decision on one pending approval (APR-7)."""
InterruptionKind: TypeAlias = Literal["input_guardrail", "tool_approval"]
"""Why a run suspended (APR-6)."""

_POLICIES: Final = frozenset(("on-suspend", "every-turn"))
_STATUSES: Final = frozenset(("running", "suspended", "succeeded", "failed", "aborted", "denied"))
_OUTCOMES: Final = frozenset(("allow_once", "allow_for_run", "reject_once", "reject_for_run"))
_ALLOWING: Final = frozenset(("allow_once", "allow_for_run"))
_DECISIONS: Final = frozenset(("continue", "approve", "deny"))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------- options (DUR-1)


@dataclass(frozen=True, slots=True)
class RunStateOptions:
    """Durable-run options (DUR-1): ``run_state=`` on ``create_agent`` or ``session.run``.

    The run is durable when either layer sets it; when both do they must be equal (DUR-2). A
    mapping of these fields is accepted wherever the options are (unknown keys raise
    ``PrismConfigError``). Values are checked in the run's preflight, not here (DUR-2).

    Example::

        RunStateOptions(MemoryCheckpointStore(), "2024-06-01", checkpoint_policy="every-turn")
    """

    checkpoints: CheckpointStore
    """Where the envelope is stored (``namespace="prism.agent-run"``, ``key=run_id``)."""
    definition_revision: str
    """Host-authored revision of the agent definition; joins the fingerprint (DUR-5). Bump it
    when the agent changes in a way that old runs must not resume under. Must not be blank."""
    _: KW_ONLY
    checkpoint_policy: CheckpointPolicy = "on-suspend"
    """``"on-suspend"``: write only at suspensions and policy stops (and terminal states once an
    envelope exists); ``"every-turn"``: also a ``running`` checkpoint at every turn boundary."""
    interrupt_before_tool: bool = False
    """Gate every host tool call behind an operator approval (APR-1)."""
    max_state_bytes: int = 262_144
    """Largest envelope written, in UTF-8 bytes of its canonical JSON (1..1 048 576, DUR-6)."""
    fencing_token: int | None = None
    """Token passed to every ``save_checkpoint`` of the run (DUR-3); ``None``: unfenced."""


_OPTION_FIELDS: Final = frozenset(f.name for f in dataclasses.fields(RunStateOptions)) - {"_"}


def coerce_run_state_options(value: Any, *, label: str = "run_state") -> RunStateOptions | None:
    """Convert a ``run_state`` option to :class:`RunStateOptions` (RUN-7 step 1). No checks of
    the values (those are DUR-2's, in :func:`check_durable_run`).

    Args:
        value: ``None``, :class:`RunStateOptions` or a mapping of its fields.
        label: Name used in error messages.

    Returns:
        The options, or ``None``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — another type, an unknown mapping key (a camelCase
            key is reported with its snake_case name) or a missing required key.
    """
    if value is None or isinstance(value, RunStateOptions):
        return value
    if not isinstance(value, Mapping):
        raise PrismConfigError(
            f"{label} must be RunStateOptions or a mapping, got {type(value).__name__}"
        )
    unknown = sorted(str(k) for k in value if k not in _OPTION_FIELDS)
    if unknown:
        parts = []
        for key in unknown:
            snake = "".join("_" + c.lower() if c.isupper() else c for c in key)
            parts.append(f"{key} (use {snake})" if snake in _OPTION_FIELDS else key)
        raise PrismConfigError(f"unknown {label} key(s): {', '.join(parts)}")
    missing = [k for k in ("checkpoints", "definition_revision") if k not in value]
    if missing:
        raise PrismConfigError(f"{label} requires {', '.join(missing)}")
    data = {str(k): v for k, v in value.items()}
    return RunStateOptions(data.pop("checkpoints"), data.pop("definition_revision"), **data)


def _validate_options(options: RunStateOptions) -> None:
    """DUR-2 step 2 (plus the types of the remaining fields)."""
    store = options.checkpoints
    if not callable(getattr(store, "save_checkpoint", None)) or not callable(
        getattr(store, "load_checkpoint", None)
    ):
        raise AgentRunStateError("run_state.checkpoints must be a CheckpointStore")
    revision = options.definition_revision
    if not isinstance(revision, str) or not revision.strip():
        raise AgentRunStateError("run_state.definition_revision must be a non-blank string")
    size = options.max_state_bytes
    if not _is_int(size) or not 1 <= size <= MAX_STATE_BYTES_LIMIT:
        raise AgentRunStateError(
            f"run_state.max_state_bytes must be an int in 1..{MAX_STATE_BYTES_LIMIT}, got {size!r}"
        )
    if options.checkpoint_policy not in _POLICIES:
        raise AgentRunStateError(
            f"unknown run_state.checkpoint_policy: {options.checkpoint_policy!r}"
        )
    if not isinstance(options.interrupt_before_tool, bool):
        raise AgentRunStateError("run_state.interrupt_before_tool must be a bool")
    token = options.fencing_token
    if token is not None and not _is_int(token):
        raise AgentRunStateError("run_state.fencing_token must be an int or None")


def check_durable_run(
    config: AgentConfig,
    run_value: RunStateOptions | None,
    *,
    run_loop: Any = None,
    run_model: Any = None,
    run_guardrails: Any = None,
    run_tool_filter: Any = None,
) -> RunStateOptions | None:
    """Durable preflight (RUN-7 step 4, DUR-2); no side effects.

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
        PrismConfigError: ``ERR_PRISM_CONFIG`` — the agent's ``run_state`` mapping is malformed.
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — checks 1, 2, 3 and 5.
        AgentLoopStateError: ``ERR_PRISM_LOOP_NOT_DURABLE`` — check 4.
    """
    agent_value = coerce_run_state_options(config.run_state, label="agent run_state")
    if run_value is None and agent_value is None:
        return None
    if run_value is not None and agent_value is not None and run_value != agent_value:
        raise AgentRunStateError("run_state differs from the agent's run_state")
    options = run_value if run_value is not None else agent_value
    assert options is not None
    _validate_options(options)
    if not (config.id or config.name):
        raise AgentRunStateError("a durable run needs an agent with an id or a name")
    loop = run_loop if run_loop is not None else config.loop
    if _is_strategy(loop) and not _is_single_shot(loop) and not is_durable_capable(loop):
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
    return options


def _is_strategy(loop: object) -> bool:
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
    """What a decision applies to (APR-2, APR-10). A call matches when every set field equals
    the call's."""

    tool_name: str | None = None
    """Tool name; ``None`` matches any tool."""
    arguments_hash: str | None = None
    """``sha256(canonical_json(call.arguments)).hexdigest()``; ``None`` matches any arguments."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingDecision(Serializable):
    """One approval an operator must decide before the run continues (APR-2)."""

    approval_id: str
    """Id to answer with ``RunDecision(approval_id, ...)`` (``approval_…``)."""
    tool_call_id: str
    """The gated call's id."""
    scope: DecisionScope
    """The call's tool name and arguments hash (never the raw arguments, APR-6)."""
    reason: str = _APPROVAL_REASON
    """Why approval is needed."""
    kind: Literal["tool_approval"] = "tool_approval"
    """Always ``"tool_approval"``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRunInterruption(Serializable):
    """Why a durable run is suspended (APR-6). Never contains raw tool arguments.

    For a single pending decision ``reason``, ``tool_call_id`` and ``tool_name`` come from it; for
    several, ``reason`` is ``"<n> tool side effects require approval"`` and the call fields are
    ``None`` (APR-5).
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
    """An operator's decision on one pending approval (APR-7).

    A mapping with these keys is accepted by :func:`resume_agent_run` too.
    """

    approval_id: str
    """The ``PendingDecision.approval_id`` decided (1–128 characters)."""
    outcome: DecisionOutcome
    """``allow_once``, ``allow_for_run``, ``reject_once`` or ``reject_for_run``; the ``*_for_run``
    outcomes also add a :class:`StickyDecision` for the rest of the run."""
    reason: str | None = None
    """Operator reason (≤ 2048 UTF-8 bytes); the row text of a rejection."""
    modified_arguments: dict[str, JsonValue] | None = None
    """Replacement arguments for an allowed call (a JSON object ≤ 16 KiB, validated against the
    tool's parameter schema, APR-8)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StickyDecision(Serializable):
    """A decision that applies for the rest of the run, across legs (APR-10)."""

    scope: DecisionScope
    """Calls it applies to (no ``arguments_hash`` when the decision modified the arguments)."""
    outcome: Literal["allow_for_run", "reject_for_run"]
    """``allow_for_run`` dispatches matching calls without approval; ``reject_for_run`` answers
    them with an ``approval_rejected`` row."""
    reason: str | None = None
    """The operator's reason."""
    decided_at: str
    """ISO-8601 UTC time of the decision."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRunState(Serializable):
    """Public view of a stored run-state envelope (DUR-4); ``RunResult.run_state``.

    It never contains the input, pending calls, counters or raw tool arguments. ``to_dict()`` /
    ``from_dict()`` round-trip it through JSON, so a host may persist it and pass it back to
    :func:`resume_agent_run` later.
    """

    schema_version: int
    """Envelope schema version (``1``)."""
    agent_id: str
    """``config.id or config.name`` of the agent that wrote it."""
    definition_revision: str
    """The agent's ``run_state.definition_revision``."""
    fingerprint: str
    """:func:`agent_fingerprint` of the agent that wrote it (hex SHA-256)."""
    run_id: str
    """Run id (``key`` of the checkpoint)."""
    session_id: str
    """Session of the run."""
    leaf_id: str | None = None
    """Store entry the run continues from."""
    model: ModelConfig
    """Model of the run."""
    status: RunStateStatus
    """Stored status."""
    stop_reason: RunStopReason | None = None
    """``"host_policy"``/``"turn_limit"`` on a policy-stopped ``succeeded`` state."""
    interruption: AgentRunInterruption | None = None
    """Why the run is suspended (``suspended`` and ``denied`` views)."""
    version: int
    """Checkpoint version of this state; the default ``expected_version`` of a resume."""

    @classmethod
    def from_envelope(cls, envelope: Mapping[str, Any], version: int) -> AgentRunState:
        """Build the view of a stored envelope (already shape-checked)."""
        interruption = envelope.get("interruption")
        return cls(
            schema_version=envelope["schema_version"],
            agent_id=envelope["agent_id"],
            definition_revision=envelope["definition_revision"],
            fingerprint=envelope["fingerprint"],
            run_id=envelope["run_id"],
            session_id=envelope["session_id"],
            leaf_id=envelope.get("leaf_id"),
            model=ModelConfig.from_dict(envelope["model"]),
            status=envelope["status"],
            stop_reason=envelope.get("stop_reason"),
            interruption=(
                None if interruption is None else AgentRunInterruption.from_dict(interruption)
            ),
            version=version,
        )


@dataclass(frozen=True, slots=True)
class LoadedRunState:
    """A stored envelope and its record (DUR-24).

    ``state`` is the envelope exactly as stored (``record.value``): a JSON object with the DUR-4
    keys, where an absent field is an absent key. ``record.version`` is what
    ``resume_agent_run(..., expected_version=...)`` expects.
    """

    record: CheckpointRecord
    """The checkpoint record."""
    state: dict[str, JsonValue]
    """The stored envelope."""


# --------------------------------------------------------------------------- fingerprint (DUR-5)


def _loop_identity(loop: Any) -> dict[str, str]:
    """``L`` of DUR-5 for a configured loop (options, mapping, strategy or ``None``)."""
    if loop is None:
        return {"name": "single-shot", "revision": "1"}
    if isinstance(loop, Mapping):
        return {"name": str(loop.get("strategy")), "revision": "1"}
    strategy = getattr(loop, "strategy", None)
    if not _is_strategy(loop) and isinstance(strategy, str):
        return {"name": strategy, "revision": "1"}
    return {"name": str(getattr(loop, "name", "")), "revision": effective_loop_revision(loop)}


def _agent_id(config: AgentConfig) -> str:
    agent_id = config.id or config.name
    if not agent_id:
        raise AgentRunStateError("a durable run needs an agent with an id or a name")
    return agent_id


def agent_fingerprint(agent: Agent | AgentConfig, definition_revision: str, /) -> str:
    """Return the durable-run fingerprint of an agent definition (DUR-5); no I/O.

    ``sha256(canonical_json(F)).hexdigest()`` where ``F`` holds the agent id, the revision, the
    model, instructions, system prompt contributions, skills, tools (name, parameters,
    exclusive), guardrails (name, stage, revision), the loop identity, and — only when the agent
    sets ``tool_filter`` — the tool filters. Two agents built from equal configuration give equal
    fingerprints; a changed loop revision or a removed loop gives a different one.

    Args:
        agent: An ``Agent`` or its ``AgentConfig``.
        definition_revision: The ``run_state.definition_revision``.

    Returns:
        64 lowercase hex characters.

    Raises:
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — the agent has neither ``id`` nor
            ``name``.
    """
    from prism.runtime.agent import Agent as _Agent

    config: AgentConfig = agent.config if isinstance(agent, _Agent) else agent
    guardrails = config.guardrails
    guards: list[dict[str, Any]] = []
    if guardrails is not None:
        for stage in ("input", "output", "tool_input", "tool_output"):
            for guard in getattr(guardrails, stage):
                guards.append({"name": guard.name, "stage": stage, "revision": guard.revision})
    data: dict[str, Any] = {
        "id": _agent_id(config),
        "revision": definition_revision,
        "model": config.model.to_dict(),
        "instructions": config.instructions or None,
        "system_prompt": [{"id": c.id, "text": c.text} for c in config.system_prompt] or None,
        "skills": [{"name": s.name, "instructions": s.instructions} for s in config.skills],
        "tools": [
            {"name": t.name, "parameters": t.parameters, "exclusive": t.exclusive}
            for t in config.tools
        ],
        "guardrails": guards,
        "loop": _loop_identity(config.loop),
    }
    if config.tool_filter:
        data["tool_filters"] = [
            {"allow": list(f.allow), "deny": list(f.deny)} for f in config.tool_filter
        ]
    return hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()


def arguments_hash(arguments: Any) -> str:
    """``sha256(canonical_json(arguments)).hexdigest()`` — the scope hash of a call (APR-2)."""
    return hashlib.sha256(canonical_json(arguments).encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- envelope checks (DUR-6)


_LEAVES: Final = frozenset((str, int, bool, type(None)))


def _check_shape(value: Any, depth: int) -> None:
    """Every value JSON-compatible, depth ≤ 32, ≤ 256 keys per object. Raises ``ValueError``.

    ``depth`` is the number of containers above ``value`` (0 for the envelope itself). O(size).
    """
    t = type(value)
    if t in _LEAVES:
        return
    if t is dict:
        if depth >= _MAX_DEPTH:
            raise ValueError(f"nested deeper than {_MAX_DEPTH}")
        if len(value) > _MAX_KEYS:
            raise ValueError(f"an object has more than {_MAX_KEYS} keys")
        for key, item in value.items():
            if type(key) is not str:
                raise ValueError("non-string object key")
            if type(item) not in _LEAVES:
                _check_shape(item, depth + 1)
        return
    if t is list or t is tuple:
        if depth >= _MAX_DEPTH:
            raise ValueError(f"nested deeper than {_MAX_DEPTH}")
        for item in value:
            if type(item) not in _LEAVES:
                _check_shape(item, depth + 1)
        return
    if t is float:
        if value != value or value in (math.inf, -math.inf):
            raise ValueError("non-finite number")
        return
    # subclasses of the JSON types (e.g. an IntEnum) take the slow path
    if isinstance(value, (str, int)):
        return
    if isinstance(value, float):
        _check_shape(float(value), depth)
        return
    if isinstance(value, dict):
        _check_shape(dict(value), depth)
        return
    if isinstance(value, (list, tuple)):
        _check_shape(list(value), depth)
        return
    raise ValueError(f"non-JSON value of type {t.__name__}")


def _encode(state: Any, limit: int) -> int:
    """Shape-check ``state`` and return its canonical UTF-8 size (raises AgentRunStateError)."""
    try:
        _check_shape(state, 0)
        size = len(canonical_json(state).encode("utf-8"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise AgentRunStateError(f"run state is not storable: {exc}") from exc
    if size > limit:
        raise AgentRunStateError(f"run state is {size} bytes, more than the {limit} allowed")
    return size


def _members_size(obj: Mapping[str, Any]) -> int:
    """UTF-8 bytes of ``canonical_json(obj)`` without its braces, plus one separator per member.

    ``canonical_json({**a, **b})`` (disjoint keys) is ``1 + _members_size(a) + _members_size(b)``
    bytes: braces (2) plus the members, minus the one separator too many. Raises ``TypeError`` /
    ``ValueError`` for non-JSON values.
    """
    total = 0
    for key, value in obj.items():
        total += len(canonical_json(key).encode("utf-8")) + 2  # ':' and ','
        total += len(canonical_json(value).encode("utf-8"))
    return total


_REQUIRED_STR: Final = ("agent_id", "definition_revision", "fingerprint", "run_id", "session_id")


def _check_envelope(state: Any) -> dict[str, Any]:
    """Re-check the DUR-4 shape of a loaded envelope; raises AgentRunStateError."""
    if not isinstance(state, dict):
        raise AgentRunStateError("malformed run state: not an object")
    bad: str | None = None
    if state.get("schema_version") != SCHEMA_VERSION:
        bad = "schema_version"
    elif any(not isinstance(state.get(k), str) for k in _REQUIRED_STR):
        bad = next(k for k in _REQUIRED_STR if not isinstance(state.get(k), str))
    elif not isinstance(state.get("model"), dict):
        bad = "model"
    elif state.get("status") not in _STATUSES:
        bad = "status"
    elif state.get("checkpoint_policy") not in _POLICIES:
        bad = "checkpoint_policy"
    elif not isinstance(state.get("interrupt_before_tool"), bool):
        bad = "interrupt_before_tool"
    elif not isinstance(state.get("counters"), dict):
        bad = "counters"
    elif not isinstance(state.get("pending_calls", []), list):
        bad = "pending_calls"
    elif not isinstance(state.get("sticky_decisions", []), list):
        bad = "sticky_decisions"
    elif state.get("leaf_id") is not None and not isinstance(state.get("leaf_id"), str):
        bad = "leaf_id"
    elif state.get("stop_reason") not in (None, "host_policy", "turn_limit"):
        bad = "stop_reason"
    elif state.get("input") is not None and not isinstance(state.get("input"), list):
        bad = "input"
    else:
        loop_state = state.get("loop_state")
        if loop_state is not None and not (
            isinstance(loop_state, dict)
            and isinstance(loop_state.get("name"), str)
            and isinstance(loop_state.get("revision"), str)
            and "snapshot" in loop_state
        ):
            bad = "loop_state"
        for entry in state.get("pending_calls", []):
            if not (
                isinstance(entry, dict)
                and isinstance(entry.get("call"), dict)
                and entry.get("status") in ("ready", "dispatched")
                and isinstance(entry.get("approval_id"), str)
            ):
                bad = "pending_calls"
                break
    if bad is not None:
        raise AgentRunStateError(f"malformed run state: invalid {bad}")
    try:
        if state.get("interruption") is not None:
            AgentRunInterruption.from_dict(state["interruption"])
        ModelConfig.from_dict(state["model"])
        for item in state.get("sticky_decisions", []):
            StickyDecision.from_dict(item)
        for entry in state.get("pending_calls", []):
            ToolCallContent.from_dict(entry["call"])
            if entry.get("decision") is not None:
                RunDecision.from_dict(entry["decision"])
    except Exception as exc:
        raise AgentRunStateError(f"malformed run state: {exc}") from exc
    return state


def _run_key(run_state: Any) -> str:
    if isinstance(run_state, str):
        return run_state
    return str(run_state.run_id)


async def _load(
    checkpoints: CheckpointStore,
    run_id: str,
    session_id: str | None,
    ownership: OwnershipScope | None,
) -> tuple[CheckpointRecord, dict[str, Any]]:
    record = await checkpoints.load_checkpoint(
        namespace=AGENT_RUN_NAMESPACE, key=run_id, ownership=ownership
    )
    if record is None:
        raise AgentRunStateError(f"no run state stored for run {run_id}")
    _encode(record.value, MAX_LOADED_STATE_BYTES)
    state = _check_envelope(record.value)
    if state["run_id"] != run_id:
        raise AgentRunStateError("malformed run state: run_id differs from its key")
    if session_id is not None and state["session_id"] != session_id:
        raise AgentRunStateError("run state belongs to another session")
    return record, state


async def load_agent_run_state(
    checkpoints: CheckpointStore,
    *,
    run_id: str,
    session_id: str | None = None,
    ownership: OwnershipScope | None = None,
) -> LoadedRunState:
    """Load a stored envelope for inspection or repair (DUR-24).

    Args:
        checkpoints: The checkpoint store.
        run_id: The run id (the checkpoint key under ``"prism.agent-run"``).
        session_id: When given, the stored ``session_id`` must equal it.
        ownership: Passed to the store.

    Returns:
        The record and the envelope as stored.

    Raises:
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — no record, a malformed one (shape,
            more than 1 MiB), or another session's.
    """
    record, state = await _load(checkpoints, run_id, session_id, ownership)
    return LoadedRunState(record=record, state=state)


async def save_agent_run_state(
    *,
    checkpoints: CheckpointStore,
    state: Mapping[str, Any],
    expected_version: int,
    fencing_token: int | None = None,
    ownership: OwnershipScope | None = None,
) -> LoadedRunState:
    """Write a (possibly edited) envelope back (DUR-24). Recomputes nothing.

    The envelope is saved under ``key=state["run_id"]`` with ``version = expected_version + 1``
    and compare-and-set on ``expected_version``. An edited envelope still meets every resume
    check (DUR-13, DUR-17).

    Args:
        checkpoints: The checkpoint store.
        state: A JSON object with the DUR-4 keys (e.g. an edited ``LoadedRunState.state``).
        expected_version: The stored version being replaced.
        fencing_token: Passed to ``save_checkpoint``.
        ownership: Passed to the store.

    Returns:
        The new record and state.

    Raises:
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — not JSON-compatible, deeper than 32,
            an object with more than 256 keys, more than 1 MiB, or a malformed envelope.
        CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — stale ``expected_version``
            or fencing token.
    """
    if not _is_int(expected_version) or expected_version < 0:
        raise AgentRunStateError("expected_version must be an int >= 0")
    value = dict(state) if isinstance(state, Mapping) else state
    _encode(value, MAX_LOADED_STATE_BYTES)
    envelope = _check_envelope(value)
    record = await checkpoints.save_checkpoint(
        namespace=AGENT_RUN_NAMESPACE,
        key=envelope["run_id"],
        value=envelope,
        version=expected_version + 1,
        expected_version=expected_version,
        fencing_token=fencing_token,
        ownership=ownership,
    )
    return LoadedRunState(record=record, state=cast(dict[str, JsonValue], record.value))


# --------------------------------------------------------------------------- loop state (DUR-10)


def loop_state_of(loop: Any) -> dict[str, Any] | None:
    """Capture ``{"name", "revision", "snapshot"}`` from a strategy with ``snapshot`` (DUR-10).

    Args:
        loop: The active strategy.

    Returns:
        The loop state, or ``None`` when the strategy has no callable ``snapshot``.

    Raises:
        AgentLoopStateError: ``ERR_PRISM_LOOP_SNAPSHOT`` — ``snapshot()`` raised or returned a
            value that is not JSON-compatible (CON-1, depth ≤ 32).
    """
    snapshot = getattr(loop, "snapshot", None)
    if not callable(snapshot):
        return None
    try:
        value = snapshot()
    except AgentLoopStateError:
        raise
    except Exception as exc:
        raise AgentLoopStateError(
            "ERR_PRISM_LOOP_SNAPSHOT", f"loop snapshot() raised {type(exc).__name__}"
        ) from exc
    if not is_json_value(value, max_depth=_MAX_DEPTH):
        raise AgentLoopStateError("ERR_PRISM_LOOP_SNAPSHOT")
    return {"name": loop.name, "revision": effective_loop_revision(loop), "snapshot": value}


# --------------------------------------------------------------------------- approvals (APR-*)


def _sticky_match(stickies: Sequence[StickyDecision], call: ToolCallContent) -> StickyDecision | None:
    """The first sticky decision whose set scope fields equal the call's (APR-10)."""
    if not stickies:
        return None
    digest: str | None = None
    for sticky in stickies:
        scope = sticky.scope
        if scope.tool_name is not None and scope.tool_name != call.name:
            continue
        if scope.arguments_hash is not None:
            if digest is None:
                try:
                    digest = arguments_hash(call.arguments)
                except (TypeError, ValueError):
                    digest = ""
            if scope.arguments_hash != digest:
                continue
        return sticky
    return None


def _decision_error(code: str, message: str) -> AgentDecisionError:
    return AgentDecisionError(code, message)


def _coerce_decisions(decisions: Any) -> list[RunDecision]:
    """APR-7: shape, sizes and duplicates of a decision batch (before any read or write)."""
    invalid = "ERR_PRISM_DECISION_INVALID"
    if isinstance(decisions, (str, bytes, Mapping)) or not isinstance(decisions, Sequence):
        raise _decision_error(invalid, "decisions must be a sequence of RunDecision")
    if not decisions:
        raise _decision_error(invalid, "decisions must not be empty")
    if len(decisions) > _MAX_DECISIONS:
        raise _decision_error(
            "ERR_PRISM_DECISION_LIMIT", f"at most {_MAX_DECISIONS} decisions per resume"
        )
    out: list[RunDecision] = []
    seen: set[str] = set()
    for item in decisions:
        if isinstance(item, Mapping):
            try:
                item = RunDecision.from_dict(item)
            except Exception as exc:
                raise _decision_error(invalid, f"malformed decision: {exc}") from exc
        if not isinstance(item, RunDecision):
            raise _decision_error(invalid, "decisions must be RunDecision objects")
        approval_id = item.approval_id
        if not isinstance(approval_id, str) or not approval_id:
            raise _decision_error(invalid, "approval_id must be a non-empty string")
        if len(approval_id) > _MAX_APPROVAL_ID:
            raise _decision_error(invalid, f"approval_id is longer than {_MAX_APPROVAL_ID}")
        if item.outcome not in _OUTCOMES:
            raise _decision_error(invalid, f"unknown decision outcome: {item.outcome!r}")
        reason = item.reason
        if reason is not None:
            if not isinstance(reason, str):
                raise _decision_error(invalid, "decision reason must be a string")
            if len(reason.encode("utf-8")) > _MAX_REASON_BYTES:
                raise _decision_error(
                    "ERR_PRISM_DECISION_LIMIT",
                    f"decision reason is longer than {_MAX_REASON_BYTES} bytes",
                )
        modified = item.modified_arguments
        if modified is not None:
            if not isinstance(modified, dict) or not is_json_value(modified):
                raise _decision_error(invalid, "modified_arguments must be a JSON object")
            if len(canonical_json(modified).encode("utf-8")) > _MAX_MODIFIED_BYTES:
                raise _decision_error(
                    "ERR_PRISM_DECISION_LIMIT",
                    f"modified_arguments are larger than {_MAX_MODIFIED_BYTES} bytes",
                )
        if approval_id in seen:
            raise _decision_error(
                "ERR_PRISM_DECISION_DUPLICATE", f"approval_id {approval_id} appears twice"
            )
        seen.add(approval_id)
        out.append(item)
    return out


def _validate_modified(registry: ToolRegistry, name: str, arguments: dict[str, Any]) -> None:
    """APR-8: modified arguments must match the tool's parameter schema (TOOL-6 validator)."""
    from prism.abort import AbortController
    from prism.tools import json_schema_tool_validator
    from prism.types import ToolExecutionContext

    tool = registry.get(name)
    if tool is None:
        raise _decision_error(
            "ERR_PRISM_DECISION_INVALID", f"modified_arguments for unknown tool {name}"
        )
    context = ToolExecutionContext(
        session_id="", run_id="", tool_call_id="", signal=AbortController().signal
    )
    problem = json_schema_tool_validator()(tool, arguments, context)
    if problem is not None:
        raise _decision_error(
            "ERR_PRISM_DECISION_INVALID", f"modified_arguments do not match {name}: {problem}"
        )


@dataclass(slots=True)
class _Applied:
    """The outcome of applying a decision batch to a suspended envelope (APR-8)."""

    pending_calls: list[dict[str, Any]]
    sticky: list[dict[str, Any]]
    remaining: list[PendingDecision]


def _apply_decisions(
    state: Mapping[str, Any],
    decisions: list[RunDecision] | None,
    registry: ToolRegistry,
) -> _Applied:
    """APR-8 (atomic): resolve decisions against the stored pending set, on copies.

    ``decisions=None`` means ``decision="approve"``: every undecided entry becomes ``allow_once``.
    """
    entries: list[dict[str, Any]] = [dict(e) for e in state.get("pending_calls", [])]
    raw_interruption = state.get("interruption")
    pending_by_id: dict[str, PendingDecision] = {}
    if raw_interruption is not None:
        for decision in AgentRunInterruption.from_dict(raw_interruption).pending_decisions:
            pending_by_id[decision.approval_id] = decision
    undecided = {
        e["approval_id"]: e
        for e in entries
        if e.get("decision") is None and e.get("status") == "ready"
    }
    sticky: list[dict[str, Any]] = [dict(s) for s in state.get("sticky_decisions", [])]
    if decisions is None:
        for entry in undecided.values():
            entry["decision"] = RunDecision(entry["approval_id"], "allow_once").to_dict()
        return _Applied(entries, sticky, [])
    for item in decisions:
        if item.approval_id not in undecided:
            raise _decision_error(
                "ERR_PRISM_DECISION_UNKNOWN", f"approval_id {item.approval_id} is not pending"
            )
    decided_at = now_iso()
    for item in decisions:
        entry = undecided[item.approval_id]
        call = ToolCallContent.from_dict(entry["call"])
        modified = item.modified_arguments if item.outcome in _ALLOWING else None
        if modified is not None:
            _validate_modified(registry, call.name, modified)
        if item.outcome in ("allow_for_run", "reject_for_run"):
            stored_scope = pending_by_id.get(item.approval_id)
            scope_hash = stored_scope.scope.arguments_hash if stored_scope is not None else None
            if scope_hash is None:
                try:
                    scope_hash = arguments_hash(call.arguments)
                except (TypeError, ValueError):
                    scope_hash = None
            scope = DecisionScope(
                tool_name=call.name, arguments_hash=None if modified is not None else scope_hash
            )
            sticky.append(
                StickyDecision(
                    scope=scope,
                    outcome=item.outcome,
                    reason=item.reason,
                    decided_at=decided_at,
                ).to_dict()
            )
        if len(sticky) > _MAX_STICKY:
            raise _decision_error(
                "ERR_PRISM_DECISION_LIMIT", f"more than {_MAX_STICKY} sticky decisions"
            )
        entry["decision"] = item.to_dict()
    remaining = [
        pending_by_id.get(e["approval_id"]) or _pending_for(e)
        for e in entries
        if e.get("decision") is None and e.get("status") == "ready"
    ]
    return _Applied(entries, sticky, remaining)


def _pending_for(entry: Mapping[str, Any]) -> PendingDecision:
    call = ToolCallContent.from_dict(entry["call"])
    try:
        digest: str | None = arguments_hash(call.arguments)
    except (TypeError, ValueError):
        digest = None
    return PendingDecision(
        approval_id=entry["approval_id"],
        tool_call_id=call.id,
        scope=DecisionScope(tool_name=call.name, arguments_hash=digest),
    )


def _round_interruption(
    decisions: Sequence[PendingDecision],
    names: Mapping[str, str],
    reason: str | None = None,
) -> AgentRunInterruption:
    """APR-5: the interruption of an open gated round (or APR-8's remaining decisions)."""
    if len(decisions) == 1:
        only = decisions[0]
        return AgentRunInterruption(
            kind="tool_approval",
            reason=reason or only.reason,
            tool_call_id=only.tool_call_id,
            tool_name=names.get(only.tool_call_id) or only.scope.tool_name,
            pending_decisions=tuple(decisions),
        )
    return AgentRunInterruption(
        kind="tool_approval",
        reason=reason or f"{len(decisions)} tool side effects require approval",
        pending_decisions=tuple(decisions),
    )


def rejection_result(call: ToolCallContent, reason: str | None, default: str) -> ToolResult:
    """The ``approval_rejected`` row of a rejected call (APR-3, APR-9)."""
    return ToolResult(
        tool_call_id=call.id,
        name=call.name,
        error=ErrorInfo(message=reason or default, code="approval_rejected"),
    )


# --------------------------------------------------------------------------- the per-leg machine


@dataclass(slots=True)
class _Entry:
    """One pending call: the envelope's ``{call, status, approval_id, decision?}``."""

    call: ToolCallContent
    approval_id: str
    status: Literal["ready", "dispatched"] = "ready"
    decision: RunDecision | None = None
    pending: PendingDecision | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "call": self.call.to_dict(),
            "status": self.status,
            "approval_id": self.approval_id,
        }
        if self.decision is not None:
            out["decision"] = self.decision.to_dict()
        return out


@dataclass(slots=True, kw_only=True)
class ResumePoint:
    """What a resumed leg starts from (DUR-17 step 6); built by :func:`resume_agent_run`."""

    version: int
    """The claimed checkpoint version."""
    envelope: dict[str, Any]
    """The claimed envelope."""
    input: tuple[Message, ...] | None
    """Stored input messages (input-guardrail approval), else ``None``."""
    fork: bool
    """Crash recovery from a ``running`` envelope: the first append forks (DUR-22)."""

    @property
    def leaf_id(self) -> str | None:
        """The stored leaf."""
        leaf: str | None = self.envelope.get("leaf_id")
        return leaf

    @property
    def counters(self) -> dict[str, Any]:
        """The stored limit counters (DUR-17)."""
        counters: dict[str, Any] = self.envelope["counters"]
        return counters

    @property
    def loop_state(self) -> dict[str, Any] | None:
        """The stored ``loop_state``, if any (DUR-13)."""
        value: dict[str, Any] | None = self.envelope.get("loop_state")
        return value


class DurableRun:
    """The durable state of one run leg: writes, approval gating, suspension, replay.

    Built by the runtime for a durable leg (after preflight). Envelope writes are redacted,
    bounded and compare-and-set on the version this object tracks (DUR-6); each costs
    O(envelope size), independent of the history length.

    Args:
        options: The effective :class:`RunStateOptions`.
        config: The agent configuration (identity and fingerprint).
        run_id: The run id (checkpoint key).
        session_id: The session id.
        redactor: The run's active redactor.
        ownership: Passed to the checkpoint store.
        resume: The resume point on a resumed leg, else ``None``.
    """

    __slots__ = (
        "_base",
        "_base_bytes",
        "_entries",
        "_gated",
        "_model",
        "_names",
        "_open",
        "_replaying",
        "checkpoints",
        "gating",
        "loop_state",
        "options",
        "ownership",
        "redactor",
        "resume",
        "run_id",
        "session_id",
        "state",
        "sticky",
        "stop_reason",
        "version",
    )

    def __init__(
        self,
        options: RunStateOptions,
        *,
        config: AgentConfig,
        run_id: str,
        session_id: str,
        redactor: SecretRedactor | None,
        ownership: OwnershipScope | None,
        resume: ResumePoint | None = None,
    ) -> None:
        self.options = options
        self.checkpoints = options.checkpoints
        self.run_id = run_id
        self.session_id = session_id
        self.redactor = redactor
        self.ownership = ownership
        self.resume = resume
        self.gating: bool = options.interrupt_before_tool
        """Approval gating is active (APR-1)."""
        revision = options.definition_revision
        base: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "agent_id": _agent_id(config),
            "definition_revision": revision,
            "fingerprint": agent_fingerprint(config, revision),
            "run_id": run_id,
            "session_id": session_id,
            "model": config.model.to_dict(),
            "interrupt_before_tool": options.interrupt_before_tool,
            "checkpoint_policy": options.checkpoint_policy,
        }
        if redactor is not None:
            base = redactor.redact(base)
        # The constant part is redacted, checked and sized once per leg (ARCH-15).
        self._base = base
        self._base_bytes = _members_size(base)
        self._model = ModelConfig.from_dict(base["model"])
        self.version = 0
        """The stored version (0: no envelope written yet)."""
        self.state: AgentRunState | None = None
        """View of the last envelope written (or claimed)."""
        self.sticky: list[StickyDecision] = []
        self.loop_state: dict[str, Any] | None = None
        """The loop state of the last write that kept one (or the stored one on resume)."""
        self.stop_reason: RunStopReason | None = None
        self._open: list[_Entry] = []
        self._gated: dict[str, _Entry] = {}
        self._names: dict[str, str] = {}
        self._entries: list[_Entry] = []
        self._replaying: dict[str, _Entry] = {}
        if resume is not None:
            envelope = resume.envelope
            self.version = resume.version
            self.state = AgentRunState.from_envelope(envelope, resume.version)
            self.sticky = [StickyDecision.from_dict(s) for s in envelope.get("sticky_decisions", [])]
            self.loop_state = envelope.get("loop_state")
            for raw in envelope.get("pending_calls", []):
                decision = raw.get("decision")
                if raw.get("status") != "ready" or decision is None:
                    continue
                self._entries.append(
                    _Entry(
                        call=ToolCallContent.from_dict(raw["call"]),
                        approval_id=raw["approval_id"],
                        decision=RunDecision.from_dict(decision),
                    )
                )

    # ----------------------------------------------------------------- writes (DUR-6, DUR-7)

    async def write(
        self,
        status: RunStateStatus,
        *,
        leaf_id: str | None,
        counters: Mapping[str, Any],
        deadline_at: str | None,
        loop_state: dict[str, Any] | None,
        stop_reason: RunStopReason | None = None,
        interruption: AgentRunInterruption | None = None,
        input: Sequence[Message] | None = None,
        pending_calls: Sequence[Mapping[str, Any]] = (),
        keep_sticky: bool = True,
    ) -> AgentRunState:
        """Build, redact, check and compare-and-set the envelope (DUR-4, DUR-6).

        Returns:
            The view of the written state (with the new version).

        Raises:
            AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — the envelope is not storable or
                larger than ``max_state_bytes``.
            CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — another writer won.
            Exception: whatever the checkpoint store raises.
        """
        options = self.options
        parts: dict[str, Any] = {"status": status}
        if leaf_id is not None:
            parts["leaf_id"] = leaf_id
        if stop_reason is not None:
            parts["stop_reason"] = stop_reason
        if interruption is not None:
            parts["interruption"] = interruption.to_dict()
        if input is not None:
            parts["input"] = [m.to_dict() for m in input]
        parts["pending_calls"] = list(pending_calls)
        parts["sticky_decisions"] = [s.to_dict() for s in self.sticky] if keep_sticky else []
        parts["counters"] = dict(counters)
        if deadline_at is not None:
            parts["deadline_at"] = deadline_at
        if loop_state is not None:
            parts["loop_state"] = loop_state
        redactor = self.redactor
        if redactor is not None:
            parts = redactor.redact(parts)
        try:
            _check_shape(parts, 0)
            # canonical_json(parts) has its braces and one separator fewer than its members
            size = self._base_bytes + len(canonical_json(parts).encode("utf-8"))
        except (TypeError, ValueError, RecursionError) as exc:
            raise AgentRunStateError(f"run state is not storable: {exc}") from exc
        limit = options.max_state_bytes
        if size > limit:
            raise AgentRunStateError(f"run state is {size} bytes, more than the {limit} allowed")
        envelope = {**self._base, **parts}
        version = self.version
        record = await self.checkpoints.save_checkpoint(
            namespace=AGENT_RUN_NAMESPACE,
            key=self.run_id,
            value=envelope,
            version=version + 1,
            expected_version=version,
            fencing_token=options.fencing_token,
            ownership=self.ownership,
        )
        self.version = record.version
        if not keep_sticky:
            self.sticky = []
        self.loop_state = loop_state
        raw_interruption = parts.get("interruption")
        state = AgentRunState(
            schema_version=SCHEMA_VERSION,
            agent_id=self._base["agent_id"],
            definition_revision=self._base["definition_revision"],
            fingerprint=self._base["fingerprint"],
            run_id=self.run_id,
            session_id=self.session_id,
            leaf_id=parts.get("leaf_id"),
            model=self._model,
            status=status,
            stop_reason=parts.get("stop_reason"),
            interruption=(
                None
                if raw_interruption is None
                else AgentRunInterruption.from_dict(raw_interruption)
            ),
            version=record.version,
        )
        self.state = state
        return state

    # ----------------------------------------------------------------- gating (APR-2..APR-5)

    @property
    def has_open_round(self) -> bool:
        """An approval round is open (calls gated, not yet suspended on)."""
        return bool(self._open)

    def gate_round(self, calls: Sequence[ToolCallContent]) -> None:
        """APR-2: record every call not matching a sticky decision in the open gated round.

        Raises:
            AgentDecisionError: ``ERR_PRISM_DECISION_LIMIT`` — more than 32 gated calls open.
        """
        if not self.gating:
            return
        for call in calls:
            if _sticky_match(self.sticky, call) is not None:
                continue
            if call.id in self._gated:
                continue
            if len(self._open) >= _MAX_GATED:
                raise _decision_error(
                    "ERR_PRISM_DECISION_LIMIT", f"more than {_MAX_GATED} gated tool calls open"
                )
            entry = self._entry_for(call)
            self._open.append(entry)
            self._gated[call.id] = entry

    def _entry_for(self, call: ToolCallContent) -> _Entry:
        try:
            digest: str | None = arguments_hash(call.arguments)
        except (TypeError, ValueError):
            digest = None
        approval_id = new_id("approval")
        pending = PendingDecision(
            approval_id=approval_id,
            tool_call_id=call.id,
            scope=DecisionScope(tool_name=call.name, arguments_hash=digest),
        )
        self._names[call.id] = call.name
        return _Entry(call=call, approval_id=approval_id, pending=pending)

    def before_dispatch(self, call: ToolCallContent) -> ToolResult | None:
        """APR-3: the result a gated or sticky-rejected call gets without dispatching, else
        ``None`` (dispatch normally)."""
        if call.id in self._replaying:
            return None
        if call.id in self._gated:
            return ToolResult(
                tool_call_id=call.id, name=call.name, metadata={"approval_pending": True}
            )
        sticky = _sticky_match(self.sticky, call)
        if sticky is not None and sticky.outcome == "reject_for_run":
            return rejection_result(call, sticky.reason, "Rejected for this run")
        return None

    def needs_backstop(self, call: ToolCallContent) -> bool:
        """APR-4: a call reached the pre-execution step without having been gated."""
        if not self.gating or call.id in self._replaying or call.id in self._gated:
            return False
        sticky = _sticky_match(self.sticky, call)
        return sticky is None or sticky.outcome != "allow_for_run"

    def open_backstop(self, call: ToolCallContent) -> None:
        """APR-4: gate ``call`` alone (after any open entries) so the leg suspends on it."""
        entry = self._entry_for(call)
        self._open.append(entry)
        self._gated[call.id] = entry

    def round_interruption(self) -> AgentRunInterruption:
        """APR-5: the interruption of the open gated round."""
        decisions = [e.pending for e in self._open if e.pending is not None]
        return _round_interruption(decisions, self._names)

    def open_pending_calls(self) -> list[dict[str, Any]]:
        """The open gated round as ``pending_calls`` entries, in call order."""
        return [e.to_json() for e in self._open]

    def close_round(self) -> None:
        """Forget the open gated round (cleanup, RUN-22)."""
        self._open.clear()
        self._gated.clear()

    # ----------------------------------------------------------------- replay (APR-9)

    def replay_entries(self) -> list[_Entry]:
        """The decided ``ready`` calls of a resumed leg, in stored order."""
        return list(self._entries)

    def start_replay(self, entry: _Entry, call: ToolCallContent) -> None:
        """Let ``call`` (the possibly modified replayed call) pass the gate."""
        self._replaying[call.id] = entry

    def finish_replay(self, entry: _Entry, call: ToolCallContent) -> None:
        """``entry``'s row is stored: it is no longer pending."""
        self._replaying.pop(call.id, None)
        if entry in self._entries:
            self._entries.remove(entry)

    def replaying(self, call: ToolCallContent) -> _Entry | None:
        """The replay entry of ``call``, if it is being replayed."""
        return self._replaying.get(call.id)

    def replay_pending_calls(self) -> list[dict[str, Any]]:
        """The still-pending replay entries (written by a dispatch marking)."""
        return [e.to_json() for e in self._entries]


# --------------------------------------------------------------------------- resume (DUR-16..23)


async def resume_agent_run(
    agent_or_session: Agent | AgentSession,
    run_state: AgentRunState | AgentRunRef | str,
    *,
    decision: Literal["continue", "approve", "deny"] = "continue",
    decisions: Sequence[RunDecision | Mapping[str, Any]] | None = None,
    expected_version: int | None = None,
    checkpoints: CheckpointStore | None = None,
    definition_revision: str | None = None,
    signal: AbortSignal | None = None,
    ownership: OwnershipScope | Mapping[str, Any] | None = None,
    fencing_token: int | None = None,
) -> RunResult:
    """Continue, approve or deny a stored durable run (DUR-16..DUR-23, APR-7..APR-9).

    Steps: validate the input (APR-7); load the envelope; compare the definition revision, agent
    id and fingerprint with the current agent (DUR-5); check the version; then act on the stored
    status (DUR-18):

    * ``suspended`` + ``"approve"`` or decisions covering every pending approval → claim and run
      a resumed leg: approved calls are replayed (once), rejected ones answered with
      ``approval_rejected`` rows, then the loop continues; completed provider turns are never
      requested again;
    * ``suspended`` + decisions covering only some → re-suspend (``status="suspended"``);
    * ``suspended`` + ``"deny"`` → ``status="denied"``; no tool and no provider call;
    * ``running`` (crash recovery) or a ``host_policy`` stop + ``"continue"`` → claim and resume.

    A resumed leg has the same ``run_id``, restored limit counters (wall time counts active time
    only), no turn policy, and emits ``agent_started`` then ``agent_resumed(version)``.

    Args:
        agent_or_session: An ``Agent`` (a session with the stored id is created over
            ``agent.config.store``, else a private memory store) or an ``AgentSession`` (its id
            must equal the stored one; it must not be running).
        run_state: An :class:`AgentRunState`, an ``AgentRunRef`` or a run id.
        decision: ``"continue"``, ``"approve"`` or ``"deny"``.
        decisions: A non-empty sequence of :class:`RunDecision` (or mappings), at most 128; only
            with the default ``decision``.
        expected_version: The stored version; defaults to ``run_state.version``.
        checkpoints: Defaults to the agent's ``run_state.checkpoints``.
        definition_revision: Defaults to the agent's ``run_state.definition_revision``.
        signal: Abort signal bridged into the resumed leg.
        ownership: Passed to the checkpoint store and the leg's records.
        fencing_token: Used for every write when the agent has no ``run_state``.

    Returns:
        The ``RunResult`` of the resumed leg (``succeeded`` or ``suspended``), or of the
        re-suspension (``suspended``) or denial (``denied``).

    Raises:
        AgentDecisionError: ``ERR_PRISM_DECISION_INVALID`` / ``_DUPLICATE`` / ``_UNKNOWN`` /
            ``_LIMIT`` (APR-7, APR-8, DUR-16, DUR-18); nothing is written.
        AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — missing or malformed state, another
            session's, revision or fingerprint mismatch, stale version, non-resumable status,
            ambiguous dispatched call (DUR-20), configuration mismatch (DUR-16).
        AgentSessionBusyError: ``ERR_PRISM_SESSION_BUSY`` — the session is running.
        CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — another resumer claimed it.
        AgentRunError: the resumed leg failed (as ``session.run`` raises it).
    """
    from prism.errors import AgentSessionBusyError
    from prism.runtime.session import AgentSession

    invalid = "ERR_PRISM_DECISION_INVALID"
    # -- 1. input shape (APR-7, DUR-16)
    if decision not in _DECISIONS:
        raise _decision_error(invalid, f"unknown decision: {decision!r}")
    batch: list[RunDecision] | None = None
    if decisions is not None:
        if decision != "continue":
            raise _decision_error(invalid, "decisions cannot be combined with decision=" + decision)
        batch = _coerce_decisions(decisions)
    if isinstance(run_state, AgentRunState):
        stated_session: str | None = run_state.session_id
        default_version: int | None = run_state.version
    elif isinstance(run_state, AgentRunRef):
        stated_session, default_version = run_state.session_id, None
    elif isinstance(run_state, str) and run_state:
        stated_session, default_version = None, None
    else:
        raise AgentRunStateError("run_state must be an AgentRunState, an AgentRunRef or a run id")
    version = expected_version if expected_version is not None else default_version
    if not _is_int(version) or cast(int, version) < 1:
        raise _decision_error(invalid, "expected_version must be a positive int")
    assert version is not None
    session: AgentSession | None = None
    if isinstance(agent_or_session, AgentSession):
        session = agent_or_session
        agent = session.agent
        if session.is_running:
            raise AgentSessionBusyError()
        if stated_session is not None and stated_session != session.id:
            raise AgentRunStateError("run state belongs to another session")
        stated_session = session.id
    else:
        agent = agent_or_session
    config = agent.config
    agent_options = coerce_run_state_options(config.run_state, label="agent run_state")
    if agent_options is not None:
        if checkpoints is not None and checkpoints is not agent_options.checkpoints:
            raise AgentRunStateError("checkpoints differ from the agent's run_state")
        if (
            definition_revision is not None
            and definition_revision != agent_options.definition_revision
        ):
            raise AgentRunStateError("definition_revision differs from the agent's run_state")
        checkpoints = agent_options.checkpoints
        definition_revision = agent_options.definition_revision
    if checkpoints is None or definition_revision is None:
        raise AgentRunStateError(
            "resume needs checkpoints and definition_revision (or an agent run_state)"
        )
    owner = None if ownership is None else OwnershipScope.coerce(ownership)
    # -- 2. load
    record, state = await _load(checkpoints, _run_key(run_state), stated_session, owner)
    # -- 3. identity
    if (
        state["definition_revision"] != definition_revision
        or state["agent_id"] != _agent_id(config)
        or state["fingerprint"] != agent_fingerprint(config, definition_revision)
    ):
        raise AgentRunStateError("revision or fingerprint mismatch")
    # -- 4. version
    if record.version != version:
        raise AgentRunStateError(
            f"stale run state: stored version {record.version}, expected {version}"
        )
    # -- 5. status (DUR-18)
    status = state["status"]
    stop_reason = state.get("stop_reason")
    policy_stop = status == "succeeded" and stop_reason == "host_policy"
    if status == "suspended":
        if decision == "continue" and batch is None:
            raise AgentRunStateError(_NOT_CONTINUABLE)
    elif status == "running" or policy_stop:
        if decision != "continue" or batch is not None:
            raise _decision_error(invalid, f"a {status} run takes decision='continue' only")
    else:
        raise AgentRunStateError("stale or non-resumable run")
    if session is None:
        session = agent.create_session(state["session_id"])
    options = agent_options or RunStateOptions(
        checkpoints,
        definition_revision,
        checkpoint_policy=state["checkpoint_policy"],
        interrupt_before_tool=state["interrupt_before_tool"],
        fencing_token=fencing_token,
    )
    writer = _Writer(options, record.version, owner)
    if status == "suspended" and decision == "deny":
        return await _deny(session, state, writer)
    new_state = dict(state)
    if status == "suspended":
        applied = _apply_decisions(state, batch, config.tools)
        new_state["pending_calls"] = applied.pending_calls
        new_state["sticky_decisions"] = applied.sticky
        _check_ambiguity(new_state)
        if applied.remaining:
            return await _resuspend(session, new_state, applied.remaining, writer)
    else:
        _check_ambiguity(new_state)
    # -- 6. claim (DUR-19) and the resumed leg
    new_state["status"] = "running"
    new_state.pop("interruption", None)
    new_state.pop("stop_reason", None)
    stored_input = state.get("input")
    messages = (
        None if stored_input is None else tuple(Message.from_dict(m) for m in stored_input)
    )
    crash = status == "running"

    async def claim() -> ResumePoint:
        claimed = await writer.save(new_state)
        return ResumePoint(version=claimed, envelope=new_state, input=messages, fork=crash)

    return await session._run_resumed(claim, options=options, signal=signal, ownership=owner)


def _check_ambiguity(state: Mapping[str, Any]) -> None:
    """DUR-20: a ``dispatched`` pending call is never replayed silently."""
    for entry in state.get("pending_calls", []):
        if entry.get("status") == "dispatched":
            raise AgentRunStateError(_AMBIGUOUS)


@dataclass(slots=True)
class _Writer:
    """Compare-and-set writes of :func:`resume_agent_run` (claim, re-suspension, denial)."""

    options: RunStateOptions
    version: int
    ownership: OwnershipScope | None

    async def save(self, envelope: dict[str, Any]) -> int:
        _encode(envelope, MAX_LOADED_STATE_BYTES)
        record = await self.options.checkpoints.save_checkpoint(
            namespace=AGENT_RUN_NAMESPACE,
            key=envelope["run_id"],
            value=envelope,
            version=self.version + 1,
            expected_version=self.version,
            fencing_token=self.options.fencing_token,
            ownership=self.ownership,
        )
        self.version = record.version
        return record.version


async def _deny(session: AgentSession, state: Mapping[str, Any], writer: _Writer) -> RunResult:
    """DUR-21: save ``denied``, emit ``agent_denied``, close subscribers."""
    from prism.events import AgentDeniedEvent

    envelope = dict(state)
    envelope["status"] = "denied"
    envelope["pending_calls"] = []
    envelope["sticky_decisions"] = []
    envelope.pop("loop_state", None)
    envelope.pop("input", None)
    version = await writer.save(envelope)
    view = AgentRunState.from_envelope(envelope, version)
    interruption = view.interruption
    await session._emit_outside_run(
        AgentDeniedEvent(
            session_id=session.id,
            run_id=state["run_id"],
            interruption=interruption,
            version=version,
        ),
        run_id=state["run_id"],
    )
    return RunResult(
        run_id=state["run_id"],
        session_id=session.id,
        status="denied",
        run_state=view,
        interruption=interruption,
        leaf_id=view.leaf_id,
    )


async def _resuspend(
    session: AgentSession,
    state: dict[str, Any],
    remaining: list[PendingDecision],
    writer: _Writer,
) -> RunResult:
    """APR-8: some decisions remain; save ``suspended`` again and report it."""
    from prism.events import AgentSuspendedEvent

    names = {
        ToolCallContent.from_dict(e["call"]).id: ToolCallContent.from_dict(e["call"]).name
        for e in state.get("pending_calls", [])
    }
    interruption = _round_interruption(
        remaining, names, reason=f"{len(remaining)} approval request(s) remain"
    )
    state["interruption"] = interruption.to_dict()
    version = await writer.save(state)
    view = AgentRunState.from_envelope(state, version)
    await session._emit_outside_run(
        AgentSuspendedEvent(
            session_id=session.id,
            run_id=state["run_id"],
            interruption=interruption,
            version=version,
        ),
        run_id=state["run_id"],
    )
    return RunResult(
        run_id=state["run_id"],
        session_id=session.id,
        status="suspended",
        run_state=view,
        interruption=interruption,
        leaf_id=view.leaf_id,
    )
