"""The durable state of one run leg: envelope writes, approval gating, suspension, replay.

[`DurableRun`][prism.runtime.durable._durable_run.DurableRun] is what a durable run leg drives (through
[`DurableDriver`][prism.runtime.durable._durable_leg.DurableDriver]); [`ResumePoint`][prism.runtime.durable._durable_run.ResumePoint] is where a resumed leg
starts. Decision validation and application are in [`prism.runtime.durable._approvals`][prism.runtime.durable._approvals].
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from prism._util import new_id
from prism.checkpoints import AGENT_RUN_NAMESPACE
from prism.errors import AgentRunStateError, PrismConfigError
from prism.loop_needs import handoff_tools
from prism.redaction import SecretRedactor
from prism.runtime.durable._approvals import (
    decision_error,
    pending_decision,
    rejection_result,
    round_interruption,
    sticky_match,
)
from prism.runtime.durable._envelope import (
    CallTexts,
    agent_fingerprint,
    agent_id_of,
    arguments_hash,
    check_shape,
    json_text,
    parts_text,
    utf8_size,
)
from prism.runtime.durable._run_envelope import (
    AgentRunState,
    ChildRun,
    RunEnvelope,
    envelope_view,
    model_of,
    pending_call_json,
)
from prism.runtime.durable._run_state import (
    MAX_GATED,
    SCHEMA_VERSION,
    AgentRunInterruption,
    PendingDecision,
    RunDecision,
    RunStateOptions,
    RunStateStatus,
    StickyDecision,
)
from prism.runtime.durable._turn_writes import TurnWrites
from prism.runtime.run.seam import ResumePoint
from prism.tools.preparation import prepare_arguments
from prism.types import (
    Message,
    OwnershipScope,
    RunStopReason,
    ToolCallContent,
    ToolDefinition,
    ToolResult,
)

if TYPE_CHECKING:
    from prism.runtime.run.config import AgentConfig

__all__ = ["DurableRun"]


# --------------------------------------------------------------------------- the per-leg machine


@dataclass(slots=True)
class _Entry:
    """One pending call: the envelope's ``{call, status, approval_id, decision?}``."""

    call: ToolCallContent
    approval_id: str
    status: Literal["ready", "dispatched"] = "ready"
    decision: RunDecision | None = None
    pending: PendingDecision | None = None
    call_json: dict[str, Any] | None = None
    """``call.to_dict()`` once computed (a marked call is written several times)."""
    arguments_hash: str | None = None
    """The hash of the call's arguments as stored (redacted), for gated calls: the resume refuses
    to run the call with stored arguments that hash differently."""
    shown_hash: str | None = None
    """The hash of the (redacted) arguments the approval showed: those the tool runs with."""
    restore_hash: str | None = None
    """The hash of the call's unredacted arguments, when redaction changed them."""
    resolution: dict[str, Any] | None = None
    """An operator's ``succeeded`` resolution of an ambiguous call: answered, never run."""
    child: ChildRun | None = None
    """The child run the call started (an agent tool): a resume continues it, never reports the
    call ambiguous."""
    child_pending: tuple[PendingDecision, ...] = ()
    """The suspended child's pending decisions, tagged with ``subagent``."""
    stopped: bool = False
    """The child run stopped on the (inherited) turn policy rather than suspending."""

    def to_json(self) -> dict[str, Any]:
        call_json = self.call_json
        if call_json is None:
            call_json = self.call_json = self.call.to_dict()
        return pending_call_json(
            call=call_json,
            status=self.status,
            approval_id=self.approval_id,
            arguments_hash=self.arguments_hash,
            shown_hash=self.shown_hash,
            restore_hash=self.restore_hash,
            decision=None if self.decision is None else self.decision.to_dict(),
            resolution=self.resolution,
            child=None if self.child is None else self.child.to_json(),
        )


class DurableRun:
    """The durable state of one run leg: writes, approval gating, suspension, replay.

    Built by the runtime for a durable leg (after preflight). Envelope writes are redacted,
    bounded and compare-and-set on the version this object tracks; each costs
    O(envelope size), independent of the history length.

    Args:
        options: The effective [`RunStateOptions`][prism.runtime.durable._durable_run.RunStateOptions].
        config: The agent configuration (identity and fingerprint).
        run_id: The run id (checkpoint key).
        session_id: The session id.
        redactor: The run's active redactor.
        ownership: Passed to the checkpoint store.
        resume: The resume point on a resumed leg, else ``None``.
    """

    __slots__ = (
        "_base",
        "_base_open",
        "_call_texts",
        "_entries",
        "_gated",
        "_gated_calls",
        "_gates",
        "_marked",
        "_stray",
        "_model",
        "_written",
        "approvals",
        "_names",
        "_open",
        "_replaying",
        "_round",
        "_round_calls",
        "checkpoints",
        "decided",
        "gating",
        "loop_state",
        "options",
        "ownership",
        "redactor",
        "resume",
        "run_id",
        "session_id",
        "_state",
        "steers",
        "sticky",
        "stop_reason",
        "turn_writes",
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
        self.turn_writes: TurnWrites | None = None
        """Set when the envelope writes also write the leg's held session appends."""
        self.run_id = run_id
        self.session_id = session_id
        self.redactor = redactor
        self.ownership = ownership
        self.resume = resume
        self.gating: bool = options.interrupt_before_tool
        """Every host call is gated (the agent-wide switch)."""
        self._gates: dict[str, Any] = {}
        """Per-tool approval: tool name → ``True`` or the callable deciding from the call; the
        tools of the loop's handoff targets included (``True`` wins on a shared name)."""
        for tool in (*config.tools, *handoff_tools(config.loop)):
            gate = tool.needs_approval
            if gate is not False and self._gates.get(tool.name) is not True:
                self._gates[tool.name] = gate
        self._gated_calls: dict[str, bool] = {}
        """What the per-tool decision said, per call id (asked once per call)."""
        self.approvals: bool = self.gating or bool(self._gates)
        """Some call may need an approval."""
        revision = options.definition_revision
        base: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "agent_id": agent_id_of(config),
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
        # The constant part is redacted, checked and encoded once per leg.
        self._base = base
        self._base_open = _open_text(base)
        self._call_texts = CallTexts()
        """The open round's calls as written (a round writes them with each of its envelopes)."""
        self._model = model_of(base)
        self.version = 0
        """The stored version (0: no envelope written yet)."""
        self._state: AgentRunState | None = None
        self._written: tuple[dict[str, Any], int] | None = None
        """The last envelope written and its version, whose view is made when first read."""
        self.sticky: list[StickyDecision] = []
        self.loop_state: dict[str, Any] | None = None
        """The loop state of the last write that kept one (or the stored one on resume)."""
        self.stop_reason: RunStopReason | None = None
        self.steers: list[dict[str, Any]] = []
        """Steered messages held for after an open tool round (as stored): kept in every
        envelope written until the resumed leg appends them."""
        self.decided: list[Any] = []
        """The decisions resumes applied to the run (as stored): kept in every envelope."""
        self._open: list[_Entry] = []
        self._gated: dict[str, _Entry] = {}
        self._names: dict[str, str] = {}
        self._entries: list[_Entry] = []
        self._replaying: dict[str, _Entry] = {}
        self._round: dict[str, int] = {}
        """The current tool round's call ids (announced by the loop), in call order."""
        self._round_calls: dict[str, ToolCallContent] = {}
        """The current tool round's calls as the model gave them (unredacted)."""
        self._marked: dict[str, _Entry] = {}
        """Every-turn dispatch marking of the open tool round: call id → entry."""
        self._stray: list[_Entry] = []
        """Marked calls that no stored assistant message carries."""
        if resume is not None:
            envelope: RunEnvelope = resume.state
            self.version = resume.version
            self._state = envelope.view(resume.version)
            self.sticky = envelope.sticky()
            self.loop_state = None if envelope.loop_state is None else dict(envelope.loop_state)
            self.steers = [dict(m) for m in envelope.steers or ()]
            self.decided = list(envelope.decided or ())
            # Decided ``ready`` calls, and the undecided ``ready`` calls of a tool round
            # an ``every-turn`` dispatch marking left open: both are replayed.
            # A call that started a child run is continued through the child.
            for stored in envelope.calls:
                if stored.status != "ready" and stored.child is None:
                    continue
                self._entries.append(
                    _Entry(
                        call=stored.tool_call(),
                        approval_id=stored.approval_id,
                        status="ready" if stored.status == "ready" else "dispatched",
                        decision=stored.run_decision(),
                        arguments_hash=stored.arguments_hash,
                        shown_hash=stored.shown_hash,
                        restore_hash=stored.restore_hash,
                        resolution=None if stored.resolution is None else dict(stored.resolution),
                        child=stored.child,
                    )
                )

    def record_source_tools(self, digests: Mapping[str, str]) -> None:
        """Keep the leg's tool-source schema digests (tool name → digest) in every envelope
        written from now on (``source_tools``; a resume compares them, see
        ``prism.runtime.run._tool_sources``)."""
        base = dict(self._base)
        base["source_tools"] = dict(digests)
        self._base = base
        self._base_open = _open_text(base)

    # ----------------------------------------------------------------- writes

    @property
    def state(self) -> AgentRunState | None:
        """View of the last envelope written (or claimed); made when first read."""
        state = self._state
        if state is None and self._written is not None:
            envelope, version = self._written
            state = self._state = envelope_view(envelope, version, self._model)
        return state

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
        trace: str | None = None,
    ) -> AgentRunState:
        """[`save()`][prism.runtime.durable._durable_run.DurableRun.save] the envelope and return the view of the written state (with the
        new version). Raises what ``save`` raises."""
        await self.save(
            status,
            leaf_id=leaf_id,
            counters=counters,
            deadline_at=deadline_at,
            loop_state=loop_state,
            stop_reason=stop_reason,
            interruption=interruption,
            input=input,
            pending_calls=pending_calls,
            keep_sticky=keep_sticky,
            trace=trace,
        )
        state = self.state
        assert state is not None
        return state

    async def save(
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
        trace: str | None = None,
    ) -> None:
        """Build, redact, check and compare-and-set the envelope (its view,
        [`state`][prism.runtime.durable._durable_run.DurableRun.state], is made when read: the writes of every turn do not read it).

        Raises:
            AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — the envelope is not storable or
                larger than ``max_state_bytes``.
            CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — another writer won.
            Exception: whatever the checkpoint store raises.
        """
        options = self.options
        head: dict[str, Any] = {"status": status}
        if leaf_id is not None:
            head["leaf_id"] = leaf_id
        if stop_reason is not None:
            head["stop_reason"] = stop_reason
        if interruption is not None:
            head["interruption"] = interruption.to_dict()
        if input is not None:
            head["input"] = [m.to_dict() for m in input]
        pending = list(pending_calls)
        tail: dict[str, Any] = {
            "sticky_decisions": [s.to_dict() for s in self.sticky] if keep_sticky else []
        }
        if self.decided:
            tail["decided"] = list(self.decided)
        tail["counters"] = dict(counters)
        if self.steers:
            tail["steers"] = list(self.steers)
        if deadline_at is not None:
            tail["deadline_at"] = deadline_at
        if loop_state is not None:
            tail["loop_state"] = loop_state
        if trace is not None:
            tail["trace"] = trace
        parts = {**head, "pending_calls": pending, **tail}
        redactor = self.redactor
        if redactor is not None:
            parts = redactor.redact(parts)
        try:
            # The envelope's text, made once: its size is checked on it, and a store that takes
            # it stores it as it is. ``{**base, **parts}`` (disjoint keys) is the base's members,
            # a comma, then the parts' members; its compact text has the canonical form's size.
            # Unredacted, the open round's calls are encoded once for all its writes.
            if redactor is not None:
                check_shape(parts, 0)
                body = json_text(parts)
            else:
                body = parts_text(head, pending, tail, self._call_texts)
            text = self._base_open + body[1:]
            size = utf8_size(text)
        except (TypeError, ValueError, RecursionError) as exc:
            raise AgentRunStateError(f"run state is not storable: {exc}") from exc
        limit = options.max_state_bytes
        if size > limit:
            raise AgentRunStateError(f"run state is {size} bytes, more than the {limit} allowed")
        envelope = {**self._base, **parts}
        version = self.version
        if self.turn_writes is not None:
            stored = await self.turn_writes.save(
                self.run_id, envelope, text, version, self.ownership
            )
        else:
            record = await self.checkpoints.save_checkpoint(
                namespace=AGENT_RUN_NAMESPACE,
                key=self.run_id,
                value=envelope,
                version=version + 1,
                expected_version=version,
                fencing_token=options.fencing_token,
                ownership=self.ownership,
            )
            stored = record.version
        self.version = stored
        if not keep_sticky:
            self.sticky = []
        self.loop_state = loop_state
        self._written = (envelope, stored)
        self._state = None

    # ----------------------------------------------------------------- gating

    @property
    def has_open_round(self) -> bool:
        """An approval round is open (calls gated, not yet suspended on)."""
        return bool(self._open)

    def gate_round(self, calls: Sequence[ToolCallContent]) -> None:
        """The loop announced a tool round: its calls are asked for approval as each reaches
        execution ([`hold()`][prism.runtime.durable._durable_run.TurnWrites.hold]), with the arguments it will run with.

        Raises:
            AgentDecisionError: ``ERR_PRISM_DECISION_LIMIT`` — the round would open more than 32
                gated calls (counting those that always ask), before any of them runs.
        """
        if not self.approvals:
            return
        self._round = {call.id: index for index, call in enumerate(calls)}
        self._round_calls = {call.id: call for call in calls}
        # the calls that certainly ask (a callable decides later, per call)
        certain = sum(
            1
            for call in calls
            if (self.gating or self._gates.get(call.name) is True)
            and call.id not in self._gated
            and sticky_match(self.sticky, call) is None
        )
        if len(self._open) + certain > MAX_GATED:
            raise decision_error(
                "ERR_PRISM_DECISION_LIMIT", f"more than {MAX_GATED} gated tool calls open"
            )

    def prepares(self, call: ToolCallContent) -> bool:
        """Whether ``call``'s arguments are prepared before the pre-execution hook (they may be
        asked for an approval, or are an approved call's being replayed)."""
        return self.gating or call.name in self._gates or call.id in self._replaying

    def _needs_approval(self, call: ToolCallContent) -> bool:
        """The agent-wide switch, else the tool's ``needs_approval`` (a callable is asked once
        per call, with the arguments the tool will run with).

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — the callable returned something other than
                a bool (an ``async`` callable is not supported).
            RuntimeError: the callable raised: the call is answered with an error row and never
                runs (fails closed).
        """
        if self.gating:
            return True
        gate = self._gates.get(call.name)
        if gate is None:
            return False
        if gate is True:
            return True
        known = self._gated_calls.get(call.id)
        if known is not None:
            return known
        try:
            decided = gate(call)
        except Exception as exc:
            raise RuntimeError(
                f"needs_approval of tool {call.name} raised {type(exc).__name__}: {exc}; "
                "the call was not run"
            ) from exc
        if not isinstance(decided, bool):
            close = getattr(decided, "close", None)
            if callable(close):  # a coroutine from an async callable: never awaited
                close()
            raise PrismConfigError(
                f"needs_approval of tool {call.name} must return a bool, got "
                f"{type(decided).__name__} (an async callable is not supported)"
            )
        self._gated_calls[call.id] = decided
        return decided

    def _shown(self, arguments: Mapping[str, Any]) -> str | None:
        """The hash of ``arguments`` as an approval shows them (redacted)."""
        redactor = self.redactor
        shown = redactor.redact(arguments) if redactor is not None else arguments
        try:
            return arguments_hash(shown)
        except (TypeError, ValueError):
            return None

    def _entry_for(self, call: ToolCallContent, original: ToolCallContent | None = None) -> _Entry:
        """The gated entry of ``call`` (its arguments as they will run); ``original`` is the
        call as the model gave it (stored, replayed through the middleware again)."""
        stored_call = call if original is None else original
        redactor = self.redactor
        stored = (
            redactor.redact(stored_call.arguments)
            if redactor is not None
            else stored_call.arguments
        )
        try:
            digest: str | None = arguments_hash(stored)
            restore = (
                None if stored == stored_call.arguments else arguments_hash(stored_call.arguments)
            )
        except (TypeError, ValueError):
            digest = restore = None
        shown = self._shown(call.arguments)
        approval_id = new_id("approval")
        pending = pending_decision(approval_id, call, shown, redactor)
        self._names[call.id] = call.name
        return _Entry(
            call=stored_call,
            approval_id=approval_id,
            pending=pending,
            arguments_hash=digest,
            shown_hash=shown,
            restore_hash=restore,
        )

    def _open_entry(self, entry: _Entry) -> None:
        if len(self._open) >= MAX_GATED:
            raise decision_error(
                "ERR_PRISM_DECISION_LIMIT", f"more than {MAX_GATED} gated tool calls open"
            )
        self._open.append(entry)
        self._gated[entry.call.id] = entry

    def before_dispatch(self, call: ToolCallContent) -> ToolResult | None:
        """The answer of a call already gated, without dispatching, else ``None``."""
        if call.id in self._replaying:
            return None
        if call.id in self._gated:
            return _held(call)
        return None

    def hold(self, call: ToolCallContent) -> ToolResult | None:
        """Ask for an approval of ``call`` (its arguments as the tool will run with them) when it
        needs one: the call joins the open gated round and is held (the returned
        ``approval_pending`` result); a sticky rejection answers it; else ``None`` (it runs).

        Raises:
            RuntimeError: the tool's ``needs_approval`` callable raised (never lets the call
                through).
            AgentDecisionError: ``ERR_PRISM_DECISION_LIMIT`` — more than 32 gated calls open.
        """
        if not self.approvals or call.id in self._replaying:
            return None
        if call.id in self._gated:
            return _held(call)
        if not self._needs_approval(call):
            return None
        sticky = sticky_match(self.sticky, call, self._shown(call.arguments))
        if sticky is not None:
            if sticky.outcome == "reject_for_run":
                return rejection_result(call, sticky.reason, "Rejected for this run")
            if sticky.outcome == "allow_for_run":
                return None
        self._open_entry(self._entry_for(call, self._round_calls.get(call.id)))
        return _held(call)

    def announced(self, call: ToolCallContent) -> bool:
        """Whether ``call`` belongs to a tool round the loop announced (else a held call
        suspends the run at once: the backstop)."""
        return call.id in self._round

    def recheck(
        self, entry: _Entry, call: ToolCallContent, tool: ToolDefinition
    ) -> ToolResult | None:
        """An approved call about to be replayed with ``call``'s arguments (as they will run):
        ``None`` when they are the approved ones, else the approval is asked again with them
        (the call joins the open round, held).

        The approved arguments are those the approval showed (``shown_hash``), or the
        operator's own ``modified_arguments``, parsed and with their defaults. An entry written
        before ``shown_hash`` existed is not rechecked (its stored arguments were checked
        before the claim).
        """
        if entry.shown_hash is None:
            return None
        decision = entry.decision
        approved: str | None = entry.shown_hash
        if decision is not None and decision.modified_arguments is not None:
            try:
                approved = self._shown(prepare_arguments(tool, dict(decision.modified_arguments)))
            except ValueError:
                approved = None
        if approved is not None and self._shown(call.arguments) == approved:
            return None
        self._replaying.pop(call.id, None)
        if entry in self._entries:
            self._entries.remove(entry)
        self._gated_calls.pop(call.id, None)
        self._open_entry(self._entry_for(call, entry.call))
        return _held(call)

    def open_backstop(self, call: ToolCallContent) -> None:
        """Gate ``call`` alone (after any open entries) so the leg suspends on it."""
        if call.id not in self._gated:
            self._open_entry(self._entry_for(call))

    def round_interruption(self) -> AgentRunInterruption:
        """The interruption of the open gated round: its own pending decisions, then those of
        its suspended child runs (none for a child waiting on its input guardrail)."""
        order = self._round
        last = len(order)
        self._open.sort(key=lambda e: order.get(e.call.id, last))
        decisions = [e.pending for e in self._open if e.pending is not None]
        decisions += [p for e in self._open for p in e.child_pending]
        if not decisions:  # decision="approve" approves the child's input
            reason = "a child run is waiting for an approval of its input"
            return AgentRunInterruption(kind="input_guardrail", reason=reason)
        return round_interruption(decisions, self._names)

    def child_entry(self, call_id: str) -> _Entry | None:
        """The entry recording ``call_id``'s dispatch (replayed or marked), else ``None``."""
        return self._replaying.get(call_id) or self._marked.get(call_id)

    @property
    def stopped_round(self) -> bool:
        """The open round holds only child runs that stopped on the turn policy."""
        return bool(self._open) and all(e.stopped for e in self._open)

    def open_delegation(
        self,
        call: ToolCallContent,
        link: ChildRun,
        pending: Sequence[PendingDecision],
        stopped: bool,
    ) -> None:
        """``call`` started the child run ``link``, which suspended asking for ``pending`` (or
        ``stopped`` on the turn policy): the call joins the open round (the run suspends, or
        stops, on it at the next boundary)."""
        entry = self.child_entry(call.id) or _Entry(call=call, approval_id=new_id("approval"))
        self._replaying.pop(call.id, None)
        entry.status, entry.child, entry.stopped = "dispatched", link, stopped
        tag = link.tag()
        tag["tool_call_id"] = call.id
        entry.child_pending = tuple(dataclasses.replace(p, subagent=tag) for p in pending)
        self._names[call.id] = call.name
        self._open.append(entry)
        self._gated[call.id] = entry

    def open_pending_calls(self) -> list[dict[str, Any]]:
        """The open gated round as ``pending_calls`` entries, in call order."""
        order = self._round
        last = len(order)
        self._open.sort(key=lambda e: order.get(e.call.id, last))
        return [e.to_json() for e in self._open]

    def hold_steers(self, messages: Sequence[Message]) -> None:
        """Keep steered ``messages`` (queued while a tool round is open) for the next
        envelope writes, after any already held."""
        self.steers.extend(m.to_dict() for m in messages)

    def close_round(self) -> None:
        """Forget the open gated round (cleanup)."""
        self._open.clear()
        self._gated.clear()
        self._round = {}
        self._round_calls = {}

    # ----------------------------------------------------------------- replay

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

    # ----------------------------------------------------------------- dispatch marking

    def mark_dispatched(
        self, call: ToolCallContent, open_calls: Mapping[str, ToolCallContent]
    ) -> _Entry:
        """Record that ``call`` is about to run (an ``every-turn`` run without gating); its
        entry, which the caller writes at once ([`marked_pending_calls()`][prism.runtime.durable._durable_run.DurableRun.marked_pending_calls]) before the call
        starts. It stays ``dispatched`` until its result row is stored (it then leaves
        ``open_calls``).
        """
        marked = self._marked
        entry = marked.get(call.id)
        if entry is None:
            entry = marked[call.id] = _Entry(call=call, approval_id=new_id("approval"))
            if call.id not in open_calls:  # no stored assistant message carries it
                self._stray.append(entry)
        entry.status = "dispatched"
        return entry

    def marked_pending_calls(
        self, open_calls: Mapping[str, ToolCallContent]
    ) -> list[dict[str, Any]]:
        """The ``pending_calls`` of a dispatch marking, in call order.

        Args:
            open_calls: The leg's host calls without a stored result row, in call
                order: the open tool round.

        Returns:
            One entry per open call — ``dispatched`` when it reached execution, else ``ready``
            (not started: a resumed leg dispatches it) — then the dispatched calls no stored
            assistant message carries (listed until the next boundary). Calls whose result row
            is stored are left out. O(round size).
        """
        marked = self._marked
        out: list[dict[str, Any]] = []
        for call_id, call in open_calls.items():
            entry = marked.get(call_id)
            if entry is None:
                entry = marked[call_id] = _Entry(call=call, approval_id=new_id("approval"))
            out.append(entry.to_json())
        if self._stray:
            out.extend(e.to_json() for e in self._stray)
        return out

    def clear_marks(self) -> None:
        """A boundary checkpoint (the round's rows are stored) ends the marked round."""
        self._call_texts.clear()
        if self._marked:
            self._marked.clear()
            self._stray.clear()


def _open_text(base: Mapping[str, Any]) -> str:
    """The compact JSON text of ``base`` without its closing brace, and a comma: what the text
    of an envelope ``{**base, **parts}`` starts with."""
    return json_text(base)[:-1] + ","


def _held(call: ToolCallContent) -> ToolResult:
    """The answer of a call held for an approval (no row: the round stays open)."""
    return ToolResult(tool_call_id=call.id, name=call.name, metadata={"approval_pending": True})
