"""Delegation: what a run lends to the child agent runs its tools start, and what a child takes.

A run gives each tool call a :class:`RunDelegation` as ``context.run`` (the
:class:`~prism.types.DelegatingRun` protocol). A child run started with ``parent=context``
(:func:`parent_link`, :func:`child_redactor`, :func:`child_forward`) then:

* redacts with its own redactor followed by the parent's (every secret of either is removed from
  what the child stores, emits and returns);
* charges its turns, tool calls and usage to the parent's limit tracker before its own (the
  charges are synchronous, so parallel children share the remaining budget atomically), and its
  usage joins the parent's;
* emits each of its events, after redaction, on the parent wrapped in a ``SubagentEvent``;
* aborts with the parent's signal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

from prism.events import AgentEvent, SubagentEvent
from prism.limits import RunLimitTracker
from prism.redaction import SecretRedactor
from prism.types import DelegatingRun, ToolExecutionContext, Usage
from prism.usage import UsageAccumulator

__all__ = [
    "PARENT_RUN_KEY",
    "RunDelegation",
    "child_forward",
    "child_redactor",
    "parent_link",
    "parent_run",
]

_T = TypeVar("_T")

PARENT_RUN_KEY: Final = "parent_run"
"""Metadata key of a child run's link to its parent: ``{"session_id", "run_id",
"tool_call_id"}`` (in the child's run metadata, and in the metadata of its stored input when an
agent tool started it)."""


class RunDelegation:
    """A run's :class:`~prism.types.DelegatingRun`: its redactor, store, limit tracker, usage and
    event stream, lent to the child runs its tools start.

    Args:
        redactor: The run's redactor.
        store: The run's session store.
        tracker: The run's limit tracker.
        accumulator: The run's usage sum.
        emit: The run's ``emit``.
    """

    __slots__ = ("_accumulator", "_emit", "_redactor", "_store", "_tracker")

    def __init__(
        self,
        redactor: SecretRedactor | None,
        store: object,
        tracker: RunLimitTracker,
        accumulator: UsageAccumulator,
        emit: Callable[[AgentEvent], None],
    ) -> None:
        self._redactor = redactor
        self._store = store
        self._tracker = tracker
        self._accumulator = accumulator
        self._emit = emit

    @property
    def redacting(self) -> bool:
        """Whether the run has a redactor."""
        return self._redactor is not None

    @property
    def secrets(self) -> tuple[str, ...]:
        """The run's secrets."""
        redactor = self._redactor
        return redactor.secrets if redactor is not None else ()

    def redact(self, value: _T, /) -> _T:
        """``value`` redacted with the run's redactor."""
        redactor = self._redactor
        return redactor.redact(value) if redactor is not None else value

    @property
    def store(self) -> object:
        """The run's session store."""
        return self._store

    def charge_turn(self) -> None:
        """Charge one turn to the run's budget (raises ``RunLimitExceeded``)."""
        self._tracker.charge_turn()

    def charge_tool_call(self) -> None:
        """Charge one tool call to the run's budget (raises ``RunLimitExceeded``)."""
        self._tracker.charge_tool_call()

    def charge_usage(self, usage: Usage | None, /) -> None:
        """Add ``usage`` to the run's usage, then charge its token and cost limits."""
        if usage is not None:
            self._accumulator.add(usage)
        self._tracker.charge_usage(usage)

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
        self._emit(
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
