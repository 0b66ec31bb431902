"""The seam between the run path and durable runs: the one door ``run/`` opens to ``durable/``.

The run path never imports ``prism.runtime.durable``. What a durable run needs of a leg, and
what a leg needs of a durable run, meet here as protocols and values. The seam sits below the
agent configuration and the loop context, so it names them only in words: ``config`` is the
agent's ``AgentConfig`` and ``ctx`` the leg's ``RunContext`` (``prism.runtime.run.context``).

* [`RunStateOptions`][prism.runtime.run.seam.RunStateOptions] — the ``run_state=`` option value (and its conversion from a mapping);
* [`ResumePoint`][prism.runtime.run.seam.ResumePoint] — where a resumed leg starts: run id, claimed version, leaf, counters;
* [`DurableGate`][prism.runtime.run.seam.DurableGate] — the durable run's part in tool dispatch (gating, answers, delegation);
* [`LegHooks`][prism.runtime.run.seam.LegHooks] — the durable run's part in one leg (turn-boundary hooks, setup, outcomes);
* [`DurableHooks`][prism.runtime.run.seam.DurableHooks] — the durable mode as a whole: the preflight of a run's options and the
  hooks of one leg. Whoever starts a leg hands the plan its hooks: an agent's sessions, the
  resume of a stored run and the engines pass [`prism.runtime.durable.DURABLE_HOOKS`][prism.runtime.durable.DURABLE_HOOKS].
"""

from __future__ import annotations

import dataclasses
from collections.abc import Coroutine, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeAlias

from prism._keys import reject_unknown_keys
from prism.checkpoints import CheckpointStore
from prism.errors import AgentRunSuspended, PrismConfigError
from prism.runtime.run._delegation import ChildRuns, ChildRunSuspended
from prism.types import (
    GuardrailRecord,
    Message,
    RunStopReason,
    ToolCallContent,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
)

if TYPE_CHECKING:
    from prism.loops.contracts import AgentLoopStrategy

__all__ = [
    "CheckpointPolicy",
    "DurableGate",
    "DurableHooks",
    "LegHooks",
    "ResumePoint",
    "RunStateOptions",
    "coerce_run_state_options",
    "delegating",
]

CheckpointPolicy: TypeAlias = Literal["on-suspend", "every-turn"]


@dataclass(frozen=True, slots=True)
class RunStateOptions:
    """Durable-run options: ``run_state=`` on ``create_agent`` or ``session.run``.

    The run is durable when either layer sets it; when both do they must be equal. A
    mapping of these fields is accepted wherever the options are (unknown keys raise
    ``PrismConfigError``). Values are checked in the run's preflight, not here.

    Example::

        RunStateOptions(MemoryCheckpointStore(), "2024-06-01", checkpoint_policy="every-turn")
    """

    checkpoints: CheckpointStore
    """Where the envelope is stored (``namespace="prism.agent-run"``, ``key=run_id``). On an
    agent created without ``store=``, a checkpoint store that is a session store too
    (``SqliteStore``, ``PostgresStore``) is the agent's session store as well."""
    definition_revision: str
    """Host-authored revision of the agent definition; joins the fingerprint. Bump it
    when the agent changes in a way that old runs must not resume under. Must not be blank."""
    _: KW_ONLY
    checkpoint_policy: CheckpointPolicy = "on-suspend"
    """``"on-suspend"``: write only at suspensions and policy stops (and terminal states once an
    envelope exists); ``"every-turn"``: also a ``running`` checkpoint at every turn boundary."""
    interrupt_before_tool: bool = False
    """Gate every host tool call behind an operator approval."""
    max_state_bytes: int = 262_144
    """Largest envelope written, in UTF-8 bytes of its canonical JSON (1..1 048 576)."""
    fencing_token: int | None = None
    """Token passed to every ``save_checkpoint`` of the run; ``None``: unfenced."""


_OPTION_FIELDS: Final = frozenset(f.name for f in dataclasses.fields(RunStateOptions)) - {"_"}


def coerce_run_state_options(value: object, *, label: str = "run_state") -> RunStateOptions | None:
    """Convert a ``run_state`` option to [`RunStateOptions`][prism.runtime.run.seam.RunStateOptions]. No checks of
    the values (the durable preflight, ``check_durable_run()``, does those).

    Args:
        value: ``None``, [`RunStateOptions`][prism.runtime.run.seam.RunStateOptions] or a mapping of its fields.
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
    reject_unknown_keys(label, value, _OPTION_FIELDS)
    missing = [k for k in ("checkpoints", "definition_revision") if k not in value]
    if missing:
        raise PrismConfigError(f"{label} requires {', '.join(missing)}")
    data = {str(k): v for k, v in value.items()}
    return RunStateOptions(data.pop("checkpoints"), data.pop("definition_revision"), **data)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumePoint:
    """Where a resumed leg starts; built by the resume of a stored run after its claim."""

    run_id: str
    """The stored run's id."""
    version: int
    """The claimed checkpoint version."""
    leaf_id: str | None
    """The stored leaf the leg continues from."""
    counters: Mapping[str, Any]
    """The stored limit counters."""
    trace: Mapping[str, Any] | None
    """The stored trace link (a tracer continues the run's trace), if any."""
    input: tuple[Message, ...] | None
    """Stored input messages (input-guardrail approval), else ``None``."""
    fork: bool
    """Crash recovery from a ``running`` envelope: the first append forks."""
    state: Any
    """The claimed durable state, opaque to the run path (the durable hooks read it)."""


class DurableGate(ChildRuns, Protocol):
    """The durable run's part in tool dispatch; see ``DurableDriver``."""

    def delegated(self, call: ToolCallContent, signal: ChildRunSuspended) -> ToolResult:
        """The answer of a call whose child run suspended (the run suspends on it)."""
        ...

    def gate_round(self, calls: tuple[ToolCallContent, ...]) -> None:
        """Record a tool round's calls in the open gated round."""
        ...

    def before_dispatch(self, call: ToolCallContent) -> ToolResult | None:
        """The answer of a gated or sticky-rejected call, without dispatching."""
        ...

    def prepares(self, call: ToolCallContent) -> bool:
        """Whether the call's arguments are prepared (parsed, defaults filled) before
        ``before_execute``."""
        ...

    async def before_execute(
        self, call: ToolCallContent, tool: ToolDefinition, context: ToolExecutionContext
    ) -> ToolResult | None:
        """Runs right before a host tool executes, with the arguments it will run with; may
        hold the call (its answer, e.g. an approval pending) or suspend the run."""
        ...

    def record_source_tools(self, digests: Mapping[str, str]) -> None:
        """Store the schema digests of the leg's tool-source tools with the run."""
        ...


async def delegating(
    dispatch: Coroutine[object, None, ToolResult], call: ToolCallContent, gate: DurableGate
) -> ToolResult:
    """Await a durable run's dispatch of ``call``; when the call's child run suspends, the
    call's answer is ``gate.delegated(...)`` (the run suspends with the child)."""
    try:
        return await dispatch
    except ChildRunSuspended as signal:
        return gate.delegated(call, signal)


class LegHooks(DurableGate, Protocol):
    """A durable run's part in one leg: the leg calls these at its turn boundaries, in setup and
    at its outcome. Built per leg by [`DurableHooks.open_leg()`][prism.runtime.run.seam.DurableHooks.open_leg]."""

    loop: AgentLoopStrategy | None
    """The leg's loop, set by the leg once setup resolved it."""

    @property
    def state(self) -> Any:
        """The last written public run state (``RunResult.run_state``), else ``None``."""
        ...

    @property
    def every_turn(self) -> bool:
        """Whether the run writes a checkpoint at every turn boundary."""
        ...

    async def approval_hook(self, turn: int) -> None:
        """Before a turn is charged: suspend on an open approval round."""
        ...

    async def checkpoint_hook(self, turn: int) -> None:
        """After a turn is charged: the ``every-turn`` checkpoint."""
        ...

    async def checkpoint_input(self, input_messages: tuple[Message, ...]) -> None:
        """A fresh leg's first checkpoint, written before its input is stored."""
        ...

    def restore_loop(self, ctx: Any) -> None:
        """Restore a resumed leg's loop state."""
        ...

    async def replay(self, ctx: Any) -> None:
        """Replay a resumed leg's decided calls."""
        ...

    async def after_loop(self) -> None:
        """After the loop returned: an open approval round suspends."""
        ...

    async def suspend_for_input(
        self, record: GuardrailRecord, input_messages: tuple[Message, ...]
    ) -> AgentRunSuspended:
        """Suspend a fresh leg on an input guardrail's interrupt; returns the error to raise."""
        ...

    async def write_success(self, stop_reason: RunStopReason | None) -> Any:
        """Write the terminal success (or a turn-policy stop); returns the public run state."""
        ...

    async def write_failure(self, status: str) -> Any:
        """Write a terminal failure with ``status``; returns the public run state."""
        ...

    def close(self) -> None:
        """Release what the leg held (the leg's cleanup calls it once)."""
        ...


class DurableHooks(Protocol):
    """The durable mode, as the run path sees it."""

    def preflight(
        self, config: Any, run_value: RunStateOptions | None, opts: Any
    ) -> RunStateOptions | None:
        """The durable preflight of a run: its effective options, or ``None`` when it is not
        durable. ``run_value`` is the run's coerced ``run_state``; ``opts`` the run's
        ``RunOptions`` (``None`` for the agent's own defaults), whose ``loop``, ``model``,
        ``guardrails`` and ``tool_filter`` a durable run may not set. Raises the preflight's
        configuration errors."""
        ...

    def open_leg(self, ctx: Any, options: RunStateOptions, resume: ResumePoint | None) -> LegHooks:
        """The hooks of one durable leg."""
        ...
