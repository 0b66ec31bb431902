"""The stored run envelope as a value: [`RunEnvelope`][prism.runtime.durable._run_envelope.RunEnvelope], its records, JSON and upgrades —
one concept, the envelope's stored form, kept in one module because its JSON is read here and
nowhere else.

The JSON object a durable run checkpoints (``namespace="prism.agent-run"``, ``key=run_id``) is
read here and nowhere else: the rest of the runtime reads the fields of a [`RunEnvelope`][prism.runtime.durable._run_envelope.RunEnvelope]
(and of its [`PendingCall`][prism.runtime.durable._run_envelope.PendingCall] and [`ChildRun`][prism.runtime.durable._run_envelope.ChildRun] records) and changes them with
``dataclasses.replace()``. This module holds the conversion both ways
([`RunEnvelope.from_json()`][prism.runtime.durable._run_envelope.RunEnvelope.from_json] of a checked envelope, [`RunEnvelope.to_json()`][prism.runtime.durable._run_envelope.RunEnvelope.to_json]), the upgrade of
an older ``schema_version`` and the field checks a loaded envelope passes.

What is written is what the runtime wrote before the envelope had a type, byte for byte:

* an absent key is ``None`` on the record (a present one keeps its value, ``[]`` included);
* ``to_json`` writes the keys in the order a run leg writes them, or — for an envelope read
  from the store — in the stored order, a key set since then after the stored ones (as
  assigning to the stored mapping did);
* keys the runtime does not know (written by another version or by an operator) and known
  optional keys stored as ``null`` are kept in ``extra`` and written back in place;
* the values of the public value types (the model, the interruption, decisions, calls and
  messages) are kept as their stored JSON; their accessors decode them.

The leg's own checkpoint writes build their JSON directly (see
[`write()`][prism.runtime.durable._durable_run.DurableRun.write]): a typed envelope adds no
conversion to the every-turn write path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from prism._serde import Serializable
from prism.checkpoints import CheckpointRecord
from prism.errors import AgentRunStateError
from prism.runtime.durable._run_state import (
    CHECKPOINT_POLICIES,
    MAX_DECIDED,
    OLDEST_SCHEMA_VERSION,
    RELEASE_KEY,
    SCHEMA_VERSION,
    STATUSES,
    AgentRunInterruption,
    DecidedApproval,
    RunDecision,
    RunStateStatus,
    StickyDecision,
    is_int,
)
from prism.types import (
    ErrorInfo,
    JsonValue,
    Message,
    ModelConfig,
    RunStopReason,
    ToolCallContent,
    is_json_value,
)

__all__ = [
    "pending_call_json",
    "AgentRunState",
    "ChildRun",
    "LoadedRunState",
    "PendingCall",
    "RunEnvelope",
    "check_envelope",
    "envelope_view",
    "upgrade_envelope",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRunState(Serializable):
    """Public view of a stored run-state envelope; ``RunResult.run_state``.

    It never contains the input, pending calls, counters or raw tool arguments. ``to_dict()`` /
    ``from_dict()`` round-trip it through JSON, so a host may persist it and pass it back to
    [`resume_agent_run()`][prism.runtime.durable.resume_agent_run] later.
    """

    schema_version: int
    """Envelope schema version (``3``; an older stored envelope is shown upgraded)."""
    agent_id: str
    """``config.id or config.name`` of the agent that wrote it."""
    definition_revision: str
    """The agent's ``run_state.definition_revision``."""
    fingerprint: str
    """``agent_fingerprint()`` of the agent that wrote it (hex SHA-256)."""
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
        return envelope_view(envelope, version)


@dataclass(frozen=True, slots=True)
class LoadedRunState:
    """A stored envelope and its record.

    ``state`` is the envelope as stored (``record.value``), upgraded to the current
    ``schema_version`` when an older version wrote it: a JSON object with the envelope's keys,
    where an absent field is an absent key. ``record.version`` is what
    ``resume_agent_run(..., expected_version=...)`` expects.
    """

    record: CheckpointRecord
    """The checkpoint record."""
    state: dict[str, JsonValue]
    """The stored envelope."""


_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})


def _no_extra() -> Mapping[str, Any]:
    return _EMPTY


def _ordered(out: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """``out`` with the keys of ``order`` first, in that order, then its other keys: the order
    a stored mapping had, keys set since then last."""
    if not order or tuple(out) == order:
        return out
    result = {k: out[k] for k in order if k in out}
    if len(result) != len(out):
        for key, value in out.items():
            if key not in result:
                result[key] = value
    return result


def _split(data: Mapping[str, Any], known: frozenset[str]) -> dict[str, Any]:
    """The members of ``data`` a record keeps as they are: unknown keys, and known keys stored
    as ``null``."""
    return {k: v for k, v in data.items() if k not in known or v is None}


def pending_call_json(
    *,
    call: Any,
    status: str,
    approval_id: str,
    arguments_hash: str | None,
    shown_hash: str | None,
    restore_hash: str | None,
    decision: Any,
    resolution: Any,
    child: Any,
) -> dict[str, Any]:
    """The stored JSON object of one pending call, keys in the order a leg writes them (an absent
    optional field is an absent key). Both the stored record ([`PendingCall`][prism.runtime.durable._run_envelope.PendingCall]) and the live
    entry of a durable leg write through it, so the format is written once."""
    out: dict[str, Any] = {"call": call, "status": status, "approval_id": approval_id}
    for key, value in (
        ("arguments_hash", arguments_hash),
        ("shown_hash", shown_hash),
        ("restore_hash", restore_hash),
        ("decision", decision),
        ("resolution", resolution),
        ("child", child),
    ):
        if value is not None:
            out[key] = value
    return out


def _emit(out: dict[str, Any], extra: Mapping[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    for key, value in extra.items():
        if key not in out:
            out[key] = value
    return _ordered(out, order)


# --------------------------------------------------------------------------- records

_CHILD_KEYS: Final = frozenset(("agent", "session_id", "run_id", "decisions", "decision"))


@dataclass(frozen=True, slots=True)
class ChildRun:
    """The child run a pending call started (an agent tool's): ``{"agent", "session_id",
    "run_id"}`` plus the decisions forwarded to it."""

    session_id: str
    run_id: str
    agent: str | None = None
    decisions: tuple[Mapping[str, Any], ...] | None = None
    """The operator's decisions forwarded to the child (``RunDecision`` JSON), if any."""
    decision: str | None = None
    """``"approve"``: approve the child's input (a child waiting on its input guardrail)."""
    extra: Mapping[str, Any] = field(default_factory=_no_extra, repr=False)
    order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChildRun:
        decisions = data.get("decisions")
        return cls(
            session_id=data["session_id"],
            run_id=data["run_id"],
            agent=data.get("agent"),
            decisions=None if decisions is None else tuple(decisions),
            decision=data.get("decision"),
            extra=_split(data, _CHILD_KEYS),
            order=tuple(data),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.agent is not None:
            out["agent"] = self.agent
        out["session_id"] = self.session_id
        out["run_id"] = self.run_id
        if self.decisions is not None:
            out["decisions"] = list(self.decisions)
        if self.decision is not None:
            out["decision"] = self.decision
        return _emit(out, self.extra, self.order)

    def tag(self) -> dict[str, str]:
        """``{"agent", "session_id", "run_id"}`` as strings: a pending decision's ``subagent``
        (its ``tool_call_id`` aside)."""
        return {"agent": str(self.agent), "session_id": self.session_id, "run_id": self.run_id}

    def link(self) -> dict[str, Any]:
        """``{"agent", "session_id", "run_id"}``: the link a suspended child reports."""
        return {"agent": self.agent, "session_id": self.session_id, "run_id": self.run_id}

    def forwarded(self) -> list[RunDecision]:
        """The forwarded decisions."""
        return [RunDecision.from_dict(d) for d in self.decisions or ()]


_CALL_KEYS: Final = frozenset(
    (
        "call",
        "status",
        "approval_id",
        "arguments_hash",
        "shown_hash",
        "restore_hash",
        "decision",
        "resolution",
        "child",
    )
)


@dataclass(frozen=True, slots=True)
class PendingCall:
    """One entry of ``pending_calls``: a call of the open tool round, ``ready`` (not started)
    or ``dispatched`` (started, no result stored)."""

    call: Mapping[str, Any]
    """The call (``ToolCallContent`` JSON, as stored)."""
    status: str
    approval_id: str
    arguments_hash: str | None = None
    """The hash of the call's arguments as stored when its approval was asked (an envelope
    written before ``shown_hash`` existed: as the model gave them)."""
    shown_hash: str | None = None
    """The hash of the arguments the approval showed: the ones the tool runs with (after the
    ``tool_call`` middleware hook, parsing and defaults), redacted. The replay asks again when
    the arguments about to run hash differently. Absent in envelopes written before it."""
    restore_hash: str | None = None
    """The hash of the call's arguments before redaction, when redaction changed them (they
    held a registered secret): the resume restores the secrets with the resuming agent's
    redactor and checks the restored arguments against it."""
    decision: Mapping[str, Any] | None = None
    """The operator's decision (``RunDecision`` JSON)."""
    resolution: Mapping[str, Any] | None = None
    """An operator's ``succeeded`` resolution of an ambiguous call: ``{"outcome", "result",
    "error"?}``."""
    child: ChildRun | None = None
    extra: Mapping[str, Any] = field(default_factory=_no_extra, repr=False)
    order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PendingCall:
        child = data.get("child")
        return cls(
            call=data["call"],
            status=data["status"],
            approval_id=data["approval_id"],
            arguments_hash=data.get("arguments_hash"),
            shown_hash=data.get("shown_hash"),
            restore_hash=data.get("restore_hash"),
            decision=data.get("decision"),
            resolution=data.get("resolution"),
            child=None if child is None else ChildRun.from_json(child),
            extra=_split(data, _CALL_KEYS),
            order=tuple(data),
        )

    def to_json(self) -> dict[str, Any]:
        out = pending_call_json(
            call=self.call,
            status=self.status,
            approval_id=self.approval_id,
            arguments_hash=self.arguments_hash,
            shown_hash=self.shown_hash,
            restore_hash=self.restore_hash,
            decision=self.decision,
            resolution=self.resolution,
            child=None if self.child is None else self.child.to_json(),
        )
        return _emit(out, self.extra, self.order)

    @property
    def call_id(self) -> str:
        return str(self.call["id"])

    @property
    def tool_name(self) -> str:
        return str(self.call["name"])

    def tool_call(self) -> ToolCallContent:
        return ToolCallContent.from_dict(self.call)

    def run_decision(self) -> RunDecision | None:
        return None if self.decision is None else RunDecision.from_dict(self.decision)

    @property
    def allowing_unmodified(self) -> bool:
        """The decision allows the call with its stored arguments."""
        decision = self.decision
        return (
            decision is not None
            and decision.get("outcome") in ("allow_once", "allow_for_run")
            and not decision.get("modified_arguments")
        )

    @property
    def resolved_result(self) -> Any:
        """The result an operator's resolution gives the call."""
        return None if self.resolution is None else self.resolution.get("result")

    def resolved_error(self) -> ErrorInfo | None:
        """The error an operator's resolution gives the call, if any."""
        error = None if self.resolution is None else self.resolution.get("error")
        return None if error is None else ErrorInfo.from_dict(error)


# --------------------------------------------------------------------------- the envelope

_HEAD: Final = (
    "schema_version",
    "agent_id",
    "definition_revision",
    "fingerprint",
    "run_id",
    "session_id",
    "model",
    "interrupt_before_tool",
    "checkpoint_policy",
)
_KNOWN: Final = frozenset(
    (
        *_HEAD,
        "source_tools",
        "status",
        "leaf_id",
        "stop_reason",
        "interruption",
        "input",
        "pending_calls",
        "sticky_decisions",
        "decided",
        "counters",
        "steers",
        "deadline_at",
        "loop_state",
        "trace",
        RELEASE_KEY,
    )
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEnvelope:
    """A stored durable run's envelope (``schema_version`` 3). ``None``: the key is absent.

    Built by [`from_json()`][prism.runtime.durable._run_envelope.ChildRun.from_json] from a checked envelope (see [`check_envelope()`][prism.runtime.durable._run_envelope.check_envelope]), changed
    with ``dataclasses.replace()``, written with [`to_json()`][prism.runtime.durable._run_envelope.ChildRun.to_json].
    """

    schema_version: int = SCHEMA_VERSION
    agent_id: str
    definition_revision: str
    fingerprint: str
    run_id: str
    session_id: str
    model: Mapping[str, Any]
    """``ModelConfig`` JSON."""
    interrupt_before_tool: bool
    checkpoint_policy: str
    source_tools: Mapping[str, str] | None = None
    """Tool-source tool name → schema digest of the leg that wrote it."""
    status: str
    leaf_id: str | None = None
    stop_reason: str | None = None
    interruption: Mapping[str, Any] | None = None
    """``AgentRunInterruption`` JSON."""
    input: tuple[Mapping[str, Any], ...] | None = None
    """Input messages held in the envelope (``Message`` JSON)."""
    pending_calls: tuple[PendingCall, ...] | None = None
    sticky_decisions: tuple[Mapping[str, Any], ...] | None = None
    """``StickyDecision`` JSON."""
    decided: tuple[Mapping[str, Any], ...] | None = None
    """The decisions resumes applied, oldest first, at most 32 (``DecidedApproval`` JSON)."""
    counters: Mapping[str, Any]
    steers: tuple[Mapping[str, Any], ...] | None = None
    """Steered messages held for after the open tool round (``Message`` JSON)."""
    deadline_at: str | None = None
    loop_state: Mapping[str, Any] | None = None
    """``{"name", "revision", "snapshot"}`` of the loop strategy."""
    trace: Any = None
    release: Mapping[str, Any] | None = None
    """The hand-over of a released run (see ``RELEASE_KEY``)."""
    extra: Mapping[str, Any] = field(default_factory=_no_extra, repr=False)
    """Unknown keys, and known optional keys stored as ``null``: written back as stored."""
    order: tuple[str, ...] = field(default=(), repr=False, compare=False)
    """The stored key order (empty for an envelope built here)."""

    # ----------------------------------------------------------------- JSON

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunEnvelope:
        """The envelope of a checked JSON object (see [`check_envelope()`][prism.runtime.durable._run_envelope.check_envelope])."""
        get = data.get
        calls = get("pending_calls")
        sticky = get("sticky_decisions")
        decided = get("decided")
        messages = get("input")
        steers = get("steers")
        return cls(
            schema_version=data["schema_version"],
            agent_id=data["agent_id"],
            definition_revision=data["definition_revision"],
            fingerprint=data["fingerprint"],
            run_id=data["run_id"],
            session_id=data["session_id"],
            model=data["model"],
            interrupt_before_tool=data["interrupt_before_tool"],
            checkpoint_policy=data["checkpoint_policy"],
            source_tools=get("source_tools"),
            status=data["status"],
            leaf_id=get("leaf_id"),
            stop_reason=get("stop_reason"),
            interruption=get("interruption"),
            input=None if messages is None else tuple(messages),
            pending_calls=None if calls is None else tuple(PendingCall.from_json(e) for e in calls),
            sticky_decisions=None if sticky is None else tuple(sticky),
            decided=None if decided is None else tuple(decided),
            counters=data["counters"],
            steers=None if steers is None else tuple(steers),
            deadline_at=get("deadline_at"),
            loop_state=get("loop_state"),
            trace=get("trace"),
            release=get(RELEASE_KEY),
            extra=_split(data, _KNOWN),
            order=tuple(data),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object to store: the keys a leg writes, in its order (or the stored
        order), then ``extra``."""
        out: dict[str, Any] = {
            "schema_version": self.schema_version,
            "agent_id": self.agent_id,
            "definition_revision": self.definition_revision,
            "fingerprint": self.fingerprint,
            "run_id": self.run_id,
            "session_id": self.session_id,
            "model": self.model,
            "interrupt_before_tool": self.interrupt_before_tool,
            "checkpoint_policy": self.checkpoint_policy,
        }
        if self.source_tools is not None:
            out["source_tools"] = self.source_tools
        out["status"] = self.status
        if self.leaf_id is not None:
            out["leaf_id"] = self.leaf_id
        if self.stop_reason is not None:
            out["stop_reason"] = self.stop_reason
        if self.interruption is not None:
            out["interruption"] = self.interruption
        if self.input is not None:
            out["input"] = list(self.input)
        if self.pending_calls is not None:
            out["pending_calls"] = [e.to_json() for e in self.pending_calls]
        if self.sticky_decisions is not None:
            out["sticky_decisions"] = list(self.sticky_decisions)
        if self.decided is not None:
            out["decided"] = list(self.decided)
        out["counters"] = self.counters
        if self.steers is not None:
            out["steers"] = list(self.steers)
        if self.deadline_at is not None:
            out["deadline_at"] = self.deadline_at
        if self.loop_state is not None:
            out["loop_state"] = self.loop_state
        if self.trace is not None:
            out["trace"] = self.trace
        if self.release is not None:
            out[RELEASE_KEY] = self.release
        return _emit(out, self.extra, self.order)

    def without(self, *names: str, **changes: Any) -> RunEnvelope:
        """A copy with the optional fields ``names`` absent (stored ``null`` included) and
        ``changes`` applied."""
        extra = self.extra
        if any(name in extra for name in names):
            extra = {k: v for k, v in extra.items() if k not in names}
        if RELEASE_KEY in names:
            names = tuple("release" if n == RELEASE_KEY else n for n in names)
        cleared: dict[str, Any] = dict.fromkeys(names)
        return dataclasses.replace(self, **cleared, **changes, extra=extra)

    def claimed(self) -> RunEnvelope:
        """The envelope a resume claims: ``running``, without interruption, stop reason or
        release."""
        return self.without("interruption", "stop_reason", RELEASE_KEY, status="running")

    # ----------------------------------------------------------------- reading

    @property
    def calls(self) -> tuple[PendingCall, ...]:
        """``pending_calls`` (empty when absent)."""
        return self.pending_calls or ()

    @property
    def continuable(self) -> bool:
        """A run the resume continues: ``running``, ``suspended``, or stopped by a host
        turn policy."""
        return self.status in ("running", "suspended") or self.policy_stop

    @property
    def policy_stop(self) -> bool:
        """A ``succeeded`` run a host turn policy stopped (continuable)."""
        return self.status == "succeeded" and self.stop_reason == "host_policy"

    def model_config(self) -> ModelConfig:
        return ModelConfig.from_dict(self.model)

    def interruption_view(self) -> AgentRunInterruption | None:
        raw = self.interruption
        return None if raw is None else AgentRunInterruption.from_dict(raw)

    def sticky(self) -> list[StickyDecision]:
        return [StickyDecision.from_dict(s) for s in self.sticky_decisions or ()]

    def decided_approvals(self) -> list[DecidedApproval]:
        """The decisions resumes applied to the run (``decided``), oldest first."""
        return [DecidedApproval.from_dict(d) for d in self.decided or ()]

    def with_decided(self, added: Sequence[DecidedApproval]) -> RunEnvelope:
        """A copy whose ``decided`` also holds ``added`` (the newest 32 kept)."""
        if not added:
            return self
        kept = [*(self.decided or ()), *(d.to_dict() for d in added)][-MAX_DECIDED:]
        return dataclasses.replace(self, decided=tuple(kept))

    def input_messages(self) -> tuple[Message, ...] | None:
        raw = self.input
        return None if raw is None else tuple(Message.from_dict(m) for m in raw)

    def steered(self) -> list[Message]:
        return [Message.from_dict(m) for m in self.steers or ()]

    def view(self, version: int) -> AgentRunState:
        """The public view of this envelope, stored as ``version``."""
        return AgentRunState(
            schema_version=self.schema_version,
            agent_id=self.agent_id,
            definition_revision=self.definition_revision,
            fingerprint=self.fingerprint,
            run_id=self.run_id,
            session_id=self.session_id,
            leaf_id=self.leaf_id,
            model=self.model_config(),
            status=self.status,  # type: ignore[arg-type]  # checked on load
            stop_reason=self.stop_reason,  # type: ignore[arg-type]
            interruption=self.interruption_view(),
            version=version,
        )


def model_of(envelope: Mapping[str, Any]) -> ModelConfig:
    """The decoded ``model`` of an envelope JSON object (or of its constant head)."""
    return ModelConfig.from_dict(envelope["model"])


def envelope_view(
    envelope: Mapping[str, Any], version: int, model: ModelConfig | None = None
) -> AgentRunState:
    """The public view of an envelope JSON object (as written, or checked); ``model`` when the
    caller has it decoded already."""
    interruption = envelope.get("interruption")
    return AgentRunState(
        schema_version=envelope["schema_version"],
        agent_id=envelope["agent_id"],
        definition_revision=envelope["definition_revision"],
        fingerprint=envelope["fingerprint"],
        run_id=envelope["run_id"],
        session_id=envelope["session_id"],
        leaf_id=envelope.get("leaf_id"),
        model=ModelConfig.from_dict(envelope["model"]) if model is None else model,
        status=envelope["status"],
        stop_reason=envelope.get("stop_reason"),
        interruption=(
            None if interruption is None else AgentRunInterruption.from_dict(interruption)
        ),
        version=version,
    )


# --------------------------------------------------------------------------- upgrade and checks

_REQUIRED_STR: Final = ("agent_id", "definition_revision", "fingerprint", "run_id", "session_id")


def upgrade_envelope(state: Any) -> Any:
    """A stored envelope in the current schema: a version 1 or 2 envelope is the same object with
    the current ``schema_version`` (versions 2 and 3 only add optional keys); anything else is
    returned unchanged for [`check_envelope()`][prism.runtime.durable._run_envelope.check_envelope] to judge. Never mutates ``state``."""
    if (
        isinstance(state, dict)
        and is_int(state.get("schema_version"))
        and OLDEST_SCHEMA_VERSION <= state["schema_version"] < SCHEMA_VERSION
    ):
        return {**state, "schema_version": SCHEMA_VERSION}
    return state


def check_envelope(state: Any) -> dict[str, Any]:
    """Re-check the fields and field types of a loaded envelope; raises AgentRunStateError."""
    if not isinstance(state, dict):
        raise AgentRunStateError("malformed run state: not an object")
    bad: str | None = None
    if state.get("schema_version") != SCHEMA_VERSION:
        bad = "schema_version"
    elif any(not isinstance(state.get(k), str) for k in _REQUIRED_STR):
        bad = next(k for k in _REQUIRED_STR if not isinstance(state.get(k), str))
    elif not isinstance(state.get("model"), dict):
        bad = "model"
    elif state.get("status") not in STATUSES:
        bad = "status"
    elif state.get("checkpoint_policy") not in CHECKPOINT_POLICIES:
        bad = "checkpoint_policy"
    elif not isinstance(state.get("interrupt_before_tool"), bool):
        bad = "interrupt_before_tool"
    elif not isinstance(state.get("counters"), dict):
        bad = "counters"
    elif not isinstance(state.get("pending_calls", []), list):
        bad = "pending_calls"
    elif not isinstance(state.get("sticky_decisions", []), list):
        bad = "sticky_decisions"
    elif not isinstance(state.get("decided", []), list):
        bad = "decided"
    elif state.get("leaf_id") is not None and not isinstance(state.get("leaf_id"), str):
        bad = "leaf_id"
    elif state.get("stop_reason") not in (None, "host_policy", "turn_limit"):
        bad = "stop_reason"
    elif state.get("input") is not None and not isinstance(state.get("input"), list):
        bad = "input"
    elif state.get("steers") is not None and not isinstance(state.get("steers"), list):
        bad = "steers"
    elif not _is_release(state.get("release")):
        bad = "release"
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
                and _is_child(entry.get("child"))
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
        for item in state.get("decided", []):
            DecidedApproval.from_dict(item)
        for entry in state.get("pending_calls", []):
            ToolCallContent.from_dict(entry["call"])
            for forwarded in (entry.get("child") or {}).get("decisions") or ():
                RunDecision.from_dict(forwarded)
            if entry.get("decision") is not None:
                RunDecision.from_dict(entry["decision"])
            resolution = entry.get("resolution")
            if resolution is not None:
                if not (
                    isinstance(resolution, dict)
                    and resolution.get("outcome") == "succeeded"
                    and is_json_value(resolution.get("result"))
                ):
                    raise ValueError("invalid pending call resolution")
                if resolution.get("error") is not None:
                    ErrorInfo.from_dict(resolution["error"])
            for digest in ("arguments_hash", "shown_hash", "restore_hash"):
                if entry.get(digest) is not None and not isinstance(entry[digest], str):
                    raise ValueError(f"invalid pending call {digest}")
        for message in state.get("steers") or ():
            Message.from_dict(message)
    except Exception as exc:
        raise AgentRunStateError(f"malformed run state: {exc}") from exc
    return state


def _is_child(value: object) -> bool:
    """``child`` of a pending call is optional: absent, or ``{"session_id", "run_id"}`` strings
    (plus ``agent``, and the forwarded ``decision`` / ``decisions``)."""
    if value is None:
        return True
    if not (
        isinstance(value, dict)
        and isinstance(value.get("session_id"), str)
        and isinstance(value.get("run_id"), str)
    ):
        return False
    decisions = value.get("decisions")
    return (decisions is None or isinstance(decisions, list)) and value.get("decision") in (
        None,
        "approve",
    )


def _is_release(value: object) -> bool:
    """``release`` is optional: absent, or ``{"by", "reason", "at"}`` strings (see
    [`RELEASE_KEY`][prism.runtime.durable._run_state.RELEASE_KEY])."""
    if value is None:
        return True
    return isinstance(value, dict) and all(
        isinstance(value.get(k), str) for k in ("by", "reason", "at")
    )


def subagent_fields(tag: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """``(tool_call_id, agent, session_id, run_id)`` of a pending decision's ``subagent`` tag
    ([`ChildRun.tag()`][prism.runtime.durable._run_envelope.ChildRun.tag] plus the calling run's ``tool_call_id``), each as a string."""
    return (
        str(tag.get("tool_call_id")),
        str(tag.get("agent")),
        str(tag.get("session_id")),
        str(tag.get("run_id")),
    )


def names_of(calls: Sequence[PendingCall]) -> dict[str, str]:
    """Call id → tool name of ``calls``."""
    return {e.call_id: e.tool_name for e in calls}


def stored_status_is(value: object, status: str) -> bool:
    """Whether a stored (unchecked) checkpoint value is an envelope with ``status``."""
    return isinstance(value, dict) and value.get("status") == status


def stated_ids(value: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``(run_id, session_id)`` of an envelope mapping a caller holds (possibly edited), each
    ``None`` when it is not a string."""
    run_id, session_id = value.get("run_id"), value.get("session_id")
    return (
        run_id if isinstance(run_id, str) else None,
        session_id if isinstance(session_id, str) else None,
    )


def unchecked_fields(value: Mapping[str, Any]) -> tuple[str, str | None, str | None]:
    """``(status, stop_reason, session_id)`` of a stored envelope read without its checks (a
    listing that must not fail on one malformed run): ``str()`` of the status, the others
    ``None`` unless strings."""
    stop, session_id = value.get("stop_reason"), value.get("session_id")
    return (
        str(value.get("status")),
        stop if isinstance(stop, str) else None,
        session_id if isinstance(session_id, str) else None,
    )
