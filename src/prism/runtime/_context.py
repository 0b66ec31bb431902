"""The run plan, the turn boundary and the loop context of a run leg (RUN-6, TP-4, CON-28).

* :class:`RunPlan` — the run options after preflight, resolved against the agent (RUN-6, RUN-7);
* :class:`TurnBoundary` — the once-per-provider-turn boundary and its extension hooks (TP-4);
* :class:`RunContext` — the ``LoopContext`` a loop receives, one object per leg (CON-28).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from prism.abort import AbortSignal
from prism.assembly import Skill, SystemPromptContribution
from prism.guardrails import Guardrails
from prism.limits import RunLimits, RunLimitTracker
from prism.redaction import SecretRedactor
from prism.retry import RetryOptions
from prism.runtime.durable import RunStateOptions
from prism.runtime.provider_turn import ProviderRequestPolicy
from prism.runtime.turn_policy import TurnPolicy
from prism.store import CompactionOptions
from prism.tools import ToolFilter, ToolValidator
from prism.types import (
    AgentInput,
    Message,
    ModelConfig,
    OwnershipScope,
    ProviderRequestOptions,
    StructuredOutputOptions,
    ToolCallContent,
)

if TYPE_CHECKING:
    from prism.runtime._run import RunLeg
    from prism.runtime.agent import ProviderSource

__all__ = ["BoundaryHook", "RunContext", "RunPlan", "TurnBoundary"]


# --------------------------------------------------------------------------- the run plan


@dataclasses.dataclass(slots=True, kw_only=True)
class RunPlan:
    """The run options after preflight (RUN-5..RUN-7), resolved against the agent config."""

    input: AgentInput
    limits: RunLimits
    agent_limits: RunLimits | None
    run_limits: RunLimits | None
    retry: RetryOptions | None
    compaction: CompactionOptions | None
    loop: Any
    signal: AbortSignal | None
    metadata: Mapping[str, Any]
    structured_output: StructuredOutputOptions | Mapping[str, Any] | None
    redactor: SecretRedactor | None
    active_skills: Sequence[str] | None
    model: ModelConfig
    provider_source: ProviderSource | None
    provider_options: ProviderRequestOptions | Mapping[str, Any] | None
    provider_request_policies: tuple[ProviderRequestPolicy, ...]
    system_prompt: tuple[SystemPromptContribution, ...]
    drop_agent_system_prompt: bool
    run_ledger: Any
    ownership: OwnershipScope | None
    idempotency_key: str | None
    guardrails: Guardrails | None
    skills: tuple[Skill, ...]
    tool_filters: tuple[ToolFilter, ...]
    tool_validator: ToolValidator | bool | None
    turn_policy: TurnPolicy | None = None
    durable: RunStateOptions | None = None


# --------------------------------------------------------------------------- turn boundary


BoundaryHook = Callable[[int], Coroutine[Any, Any, None]]
"""``await hook(turn)`` at a turn boundary; may raise to stop or suspend the run."""


class TurnBoundary:
    """The once-per-provider-turn boundary (TP-4, LIM-4).

    It runs on the first ``ctx.assemble`` or ``ctx.generate`` of a turn; the turn index is
    "completed provider turns + 1" (a completed turn is a ``generate`` call that returned, TP-5).
    Steps, in order: the ``before_charge`` hooks (approval suspension APR-5 and the turn policy
    TP-6 plug in here), charging ``max_turns`` (LIM-4), then the ``after_charge`` hooks (the
    ``every-turn`` checkpoint DUR-7 plugs in here).

    Args:
        tracker: The run's limit tracker.
        before_charge: Hooks evaluated before ``max_turns`` is charged.
        after_charge: Hooks run after the charge.
    """

    __slots__ = ("_tracker", "after_charge", "before_charge", "completed", "entered", "failure")

    def __init__(
        self,
        tracker: RunLimitTracker,
        *,
        before_charge: Sequence[BoundaryHook] = (),
        after_charge: Sequence[BoundaryHook] = (),
    ) -> None:
        self._tracker = tracker
        self.before_charge: list[BoundaryHook] = list(before_charge)
        """Hooks evaluated before ``max_turns`` is charged (approvals, turn policy)."""
        self.after_charge: list[BoundaryHook] = list(after_charge)
        """Hooks run after the charge (``every-turn`` checkpoint)."""
        self.entered = 0
        """Index of the last turn whose boundary ran (0 before the first): the boundary of turn
        ``completed + 1`` is still due when this differs from it."""
        self.completed = 0
        """Provider turns completed in this leg (returned ``generate`` calls)."""
        self.failure: BaseException | None = None
        """What a boundary raised (a stop, a suspension, a breach, a policy error): sticky for
        the rest of the leg (LOOP-8)."""

    @property
    def turn(self) -> int:
        """Index of the provider turn the next boundary precedes (``completed + 1``)."""
        return self.completed + 1

    async def enter(self) -> int:
        """Run the boundary for the current turn unless it already ran; return the turn index.

        Raises:
            RunLimitExceeded: ``max_turns`` breached (LIM-7).
            Exception: whatever a hook raises (turn-policy stop, suspension).
        """
        failure = self.failure
        if failure is not None:
            raise failure
        turn = self.completed + 1
        if self.entered == turn:
            return turn
        self.entered = turn
        try:
            for hook in self.before_charge:
                await hook(turn)
            self._tracker.charge_turn()
            for hook in self.after_charge:
                await hook(turn)
        except Exception as exc:
            self.failure = exc
            raise
        return turn


# --------------------------------------------------------------------------- the loop context


class RunContext:
    """The ``LoopContext`` of one run leg (CON-28). Built once per leg by :class:`RunLeg`.

    Data members are plain attributes; ``finish_reason`` and ``artifact`` are writable. The
    operations are the leg's own bound methods, stored on the context so that a loop's call
    reaches the leg with no wrapper frame (ARCH-15); none of them exposes the provider, the store,
    the ledger or credentials:

    * ``await assemble(next_input, tool_results=None, turn=None, /)`` — run the turn boundary,
      then build the next request (RUN-13, TP-4);
    * ``await generate(request, /)`` — policies, middleware, redaction, retry, provider stream,
      output guardrails (RUN-14);
    * ``await dispatch_tool_call(call, /)`` — the fully guarded dispatch of one host call
      (TOOL-9, APR-3);
    * ``await charge_tool_round(calls, /)`` — charge one tool round when ``calls`` is non-empty,
      then gate it (LIM-4, APR-2);
    * ``await append_message(message, /)`` — append to the store under this run, redacted
      (STORE-4);
    * ``emit(event, /)`` — emit a redacted event, stamping empty ids (EVT-1, EVT-21);
    * ``await apply_pending_steers()`` — drain the steer queue into history and store (STEER-4,
      STEER-8);
    * ``has_pending_steers()`` and ``is_tool_call_exclusive(call, /)`` (methods below).
    """

    __slots__ = (
        "_leg",
        "append_message",
        "apply_pending_steers",
        "artifact",
        "assemble",
        "charge_tool_round",
        "dispatch_tool_call",
        "emit",
        "finish_reason",
        "generate",
        "history",
        "input",
        "input_messages",
        "max_tool_rounds",
        "metadata",
        "restored_loop_state",
        "run_id",
        "session_id",
        "signal",
        "tool_concurrency",
    )

    def __init__(
        self,
        leg: RunLeg,
        *,
        tool_concurrency: int,
        max_tool_rounds: float,
    ) -> None:
        self._leg = leg
        self.session_id: str = leg.session_id
        self.run_id: str = leg.run_id
        self.metadata: Mapping[str, Any] = leg.metadata
        self.signal: AbortSignal = leg.signal
        self.history: list[Message] = leg.history
        self.input: AgentInput = leg.plan.input
        self.input_messages: tuple[Message, ...] = leg.input_messages
        self.max_tool_rounds: float = max_tool_rounds
        self.tool_concurrency: int = tool_concurrency
        self.restored_loop_state: Any = None
        self.finish_reason: str | None = None
        self.artifact: Any = None
        self.assemble = leg.assemble
        self.generate = leg.generate
        self.dispatch_tool_call = leg.dispatch_tool_call
        self.charge_tool_round = leg.charge_tool_round
        self.append_message = leg.append_message
        self.emit = leg.emit
        self.apply_pending_steers = leg.apply_pending_steers

    def __repr__(self) -> str:
        return f"<LoopContext session_id={self.session_id!r} run_id={self.run_id!r}>"

    def is_tool_call_exclusive(self, call: ToolCallContent, /) -> bool:
        """True when the registered tool named by ``call`` has ``exclusive=True`` (POOL-2)."""
        tool = self._leg.registry.get(call.name)
        return tool is not None and tool.exclusive

    def has_pending_steers(self) -> bool:
        """True when steered messages are queued (STEER-3)."""
        return bool(self._leg.session._steer_queue)
