"""Delegation: what a run lends to the child agent runs its tools start, and what a child takes.

A run gives each tool call a [`RunDelegation`][prism.runtime.run._delegation.RunDelegation] as ``context.run`` (the
[`DelegatingRun`][prism.types.DelegatingRun] protocol). A child run started with ``parent=context``
([`parent_link()`][prism.runtime.run._delegation.parent_link], [`child_redactor()`][prism.runtime.run._delegation.child_redactor], [`child_forward()`][prism.runtime.run._delegation.child_forward]) then:

* redacts with its own redactor followed by the parent's (every secret of either is removed from
  what the child stores, emits and returns);
* charges its turns, tool calls and usage to the parent's limit tracker before its own (the
  charges are synchronous, so parallel children share the remaining budget atomically), and its
  usage joins the parent's;
* emits each of its events, after redaction, on the parent wrapped in a ``SubagentEvent``;
* aborts with the parent's signal.

Durable delegation: the run also lends the child its durable side ([`ChildRuns`][prism.runtime.run._delegation.ChildRuns], the
parent's ``DurableDriver``). An agent tool records the child's run id in the parent's pending call
before the child starts ([`RunDelegation.record_child()`][prism.runtime.run._delegation.RunDelegation.record_child]), finds the recorded child of a call a
resumed parent replays ([`RunDelegation.recorded_child()`][prism.runtime.run._delegation.RunDelegation.recorded_child]), and raises
[`ChildRunSuspended`][prism.runtime.run._delegation.ChildRunSuspended] when the child suspends, which suspends the parent on the child's
approvals.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar
from weakref import WeakKeyDictionary

from prism.errors import ERR_PRISM_DELEGATION_SUSPENDED, PrismError
from prism.events import AgentEvent, SubagentEvent
from prism.limits import RunLimitTracker
from prism.redaction import SecretRedactor
from prism.types import DelegatingRun, ToolExecutionContext, Usage
from prism.usage import UsageAccumulator

__all__ = [
    "PARENT_RUN_KEY",
    "ChildRunSuspended",
    "ChildRuns",
    "RunDelegation",
    "child_agent",
    "child_forward",
    "child_redactor",
    "parent_link",
    "parent_run",
    "register_child_agent",
]

_T = TypeVar("_T")

PARENT_RUN_KEY: Final = "parent_run"
"""Metadata key of a child run's link to its parent: ``{"session_id", "run_id",
"tool_call_id"}`` (in the child's run metadata, and in the metadata of its stored input when an
agent tool started it)."""


class ChildRunSuspended(PrismError):
    """A child run started by a tool call suspended (an approval, an input guardrail): the
    calling run suspends too. Code ``ERR_PRISM_DELEGATION_SUSPENDED``; a suspension signal in tool
    dispatch (no result row is written for the call).

    Attributes:
        link: ``{"agent", "session_id", "run_id"}`` of the child run.
        interruption: The child's ``AgentRunInterruption`` (``None`` when it stopped).
        version: The child's stored checkpoint version.
        stopped: The child stopped on the calling run's turn policy (a continuable
            ``host_policy`` stop) instead of suspending: the calling run stops at its next
            boundary the same way.
    """

    code = ERR_PRISM_DELEGATION_SUSPENDED
    default_message = (
        "a child run is suspended; the calling run needs durable run state to wait for it"
    )

    def __init__(
        self, link: dict[str, Any], interruption: Any, version: int, *, stopped: bool = False
    ) -> None:
        super().__init__(None)
        self.link = link
        self.interruption = interruption
        self.version = version
        self.stopped = stopped


class ChildRuns(Protocol):
    """The durable side of a calling run, as its agent tools need it (``DurableDriver``)."""

    @property
    def run_state(self) -> Any:
        """The calling run's ``RunStateOptions`` (a child agent without its own inherits them)."""
        ...

    @property
    def turn_policy(self) -> Any:
        """The turn policy child runs inherit (its ``stop`` callback), else ``None``."""
        ...

    def recorded_child(self, tool_call_id: str, /) -> dict[str, Any] | None:
        """The child run recorded for a call the resumed run replays, else ``None``."""
        ...

    async def record_child(self, tool_call_id: str, link: dict[str, Any], /) -> None:
        """Record ``link`` in the call's pending entry (written at once when the call's
        dispatch is recorded in the envelope)."""
        ...


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class RunDelegation:
    """A run's [`DelegatingRun`][prism.types.DelegatingRun]: its redactor, store, limit tracker, usage and
    event stream, lent to the child runs its tools start."""

    redactor: SecretRedactor | None
    """The run's redactor."""
    store: object
    """The run's session store."""
    tracker: RunLimitTracker
    """The run's limit tracker."""
    accumulator: UsageAccumulator
    """The run's usage sum."""
    emit: Callable[[AgentEvent], None]
    """The run's ``emit``."""
    children: ChildRuns | None = None
    """The run's durable side (a durable run), else ``None``."""

    @property
    def redacting(self) -> bool:
        """Whether the run has a redactor."""
        return self.redactor is not None

    @property
    def secrets(self) -> tuple[str, ...]:
        """The run's secrets."""
        redactor = self.redactor
        return redactor.secrets if redactor is not None else ()

    def redact(self, value: _T, /) -> _T:
        """``value`` redacted with the run's redactor."""
        redactor = self.redactor
        return redactor.redact(value) if redactor is not None else value

    @property
    def run_state(self) -> Any:
        """The run's durable options (``RunStateOptions``), else ``None``."""
        children = self.children
        return None if children is None else children.run_state

    @property
    def turn_policy(self) -> Any:
        """The turn policy a child run inherits (the ``stop`` callback of a durable run's)."""
        children = self.children
        return None if children is None else children.turn_policy

    def recorded_child(self, tool_call_id: str, /) -> dict[str, Any] | None:
        """The child run recorded for ``tool_call_id`` when the resumed run replays it."""
        children = self.children
        return None if children is None else children.recorded_child(tool_call_id)

    async def record_child(self, tool_call_id: str, link: dict[str, Any], /) -> None:
        """Record the child run ``link`` in the run's pending entry of ``tool_call_id`` before
        the child starts (no-op for a run that is not durable)."""
        children = self.children
        if children is not None:
            await children.record_child(tool_call_id, link)

    def charge_turn(self) -> None:
        """Charge one turn to the run's budget (raises ``RunLimitExceeded``)."""
        self.tracker.charge_turn()

    def charge_tool_call(self) -> None:
        """Charge one tool call to the run's budget (raises ``RunLimitExceeded``)."""
        self.tracker.charge_tool_call()

    def refund_tool_call(self) -> None:
        """Take back one tool call charge (a child's call held for an approval)."""
        self.tracker.refund_tool_call()

    def charge_usage(self, usage: Usage | None, /) -> None:
        """Add ``usage`` to the run's usage, then charge its token and cost limits."""
        if usage is not None:
            self.accumulator.add(usage)
        self.tracker.charge_usage(usage)

    def forward_event(
        self,
        event: object,
        /,
        *,
        tool_call_id: str,
        agent: str | None,
        session_id: str,
        run_id: str,
    ) -> None:
        """Emit ``event`` of a child run wrapped in a ``SubagentEvent``."""
        inner: Any = event
        self.emit(
            SubagentEvent(
                tool_call_id=tool_call_id,
                agent=agent,
                child_session_id=session_id,
                child_run_id=run_id,
                event=inner,
            )
        )


class _JoinedRedactor:
    """The child's redactor followed by the parent's."""

    __slots__ = ("_own", "_parent", "secrets")

    def __init__(self, own: SecretRedactor | None, parent: DelegatingRun) -> None:
        self._own = own
        self._parent = parent
        own_secrets = own.secrets if own is not None else ()
        self.secrets: tuple[str, ...] = tuple(dict.fromkeys(own_secrets + parent.secrets))

    def redact(self, value: _T) -> _T:
        own = self._own
        if own is not None:
            value = own.redact(value)
        return self._parent.redact(value)

    def __repr__(self) -> str:  # never show the secrets themselves
        return f"<redactor secrets={len(self.secrets)}>"


def child_redactor(
    own: SecretRedactor | None, parent: ToolExecutionContext | None
) -> SecretRedactor | None:
    """The redactor of a child run: its own followed by the parent run's (when it has one)."""
    run = None if parent is None else parent.run
    if run is None or not run.redacting:
        return own
    return _JoinedRedactor(own, run)


def parent_link(parent: ToolExecutionContext) -> dict[str, str]:
    """The link a child run records to the call that started it."""
    return {
        "session_id": parent.session_id,
        "run_id": parent.run_id,
        "tool_call_id": parent.tool_call_id,
    }


def parent_run(plan: Any) -> DelegatingRun | None:
    """The calling run of a child run's plan (its ``parent.run``), else ``None``."""
    parent: ToolExecutionContext | None = plan.parent
    return None if parent is None else parent.run


def child_forward(
    parent: ToolExecutionContext | None, agent: str | None, session_id: str, run_id: str
) -> Callable[[AgentEvent], None] | None:
    """What a child run calls with each of its redacted events (``None``: no parent run)."""
    run = None if parent is None else parent.run
    if run is None or parent is None:
        return None
    forward = run.forward_event
    tool_call_id = parent.tool_call_id

    def emit(event: AgentEvent) -> None:
        forward(event, tool_call_id=tool_call_id, agent=agent, session_id=session_id, run_id=run_id)

    return emit


_CHILD_AGENTS: WeakKeyDictionary[Callable[..., Any], Any] = WeakKeyDictionary()
"""The agent of each agent tool, by its ``execute`` (what a resume checks a child run with)."""


def register_child_agent(execute: Callable[..., Any], agent: Any) -> None:
    """Remember that the tool whose ``execute`` is ``execute`` runs ``agent``."""
    _CHILD_AGENTS[execute] = agent


def child_agent(tool: object) -> Any:
    """The agent an agent tool runs, else ``None`` (another tool, or ``None``)."""
    execute = getattr(tool, "execute", None)
    return None if execute is None else _CHILD_AGENTS.get(execute)
