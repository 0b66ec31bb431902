"""Host tool contracts: the tool definition, what its ``execute`` receives, and its result."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from prism._failure_records import ErrorInfo
from prism._fast_init import fast_init
from prism._json import JsonValue
from prism._serde import Serializable
from prism.abort import AbortSignal
from prism.types._content import ContentBlock, ToolCallContent
from prism.types._usage import Usage

__all__ = [
    "DelegatingRun",
    "ProgressCallback",
    "ToolDefinition",
    "ToolExecutionContext",
    "ToolResult",
]


class ProgressCallback(Protocol):
    """``await progress(value, metadata=None)``."""

    def __call__(
        self, value: JsonValue, metadata: Mapping[str, Any] | None = None, /
    ) -> Awaitable[None]: ...


async def _no_progress(value: JsonValue, metadata: Mapping[str, Any] | None = None, /) -> None:
    return None


_EMPTY: Mapping[str, Any] = MappingProxyType({})

_T = TypeVar("_T")


class DelegatingRun(Protocol):
    """The run that called a tool, as a child agent run started by that tool needs it.

    ``context.run`` of a tool executed by the runtime. An agent tool (``agent.as_tool``) hands it
    to the child run (the ``parent`` run option), which then shares the calling run's secrets,
    limit budget, usage and event stream; the abort signal is ``context.signal``. All members
    are synchronous and return at once, so charges from parallel children are atomic.
    """

    @property
    def redacting(self) -> bool:
        """Whether the calling run has a redactor."""
        ...

    @property
    def secrets(self) -> tuple[str, ...]:
        """The calling run's secrets (its redactor's ``secrets``; ``()`` without one)."""
        ...

    def redact(self, value: _T, /) -> _T:
        """``value`` redacted with the calling run's redactor (unchanged without one)."""
        ...

    @property
    def store(self) -> object:
        """The calling session's ``SessionStore`` (a child session is stored next to it)."""
        ...

    def charge_turn(self) -> None:
        """Charge one turn to the calling run's ``max_turns``.

        Raises:
            RunLimitExceeded: ``ERR_PRISM_RUN_LIMIT`` — the calling run's budget is spent (the
                calling run records the breach and aborts).
        """
        ...

    def charge_tool_call(self) -> None:
        """Charge one tool call to the calling run's ``max_tool_calls``.

        Raises:
            RunLimitExceeded: as [`charge_turn()`][prism.types._tools.DelegatingRun.charge_turn].
        """
        ...

    def charge_usage(self, usage: Usage | None, /) -> None:
        """Add one provider attempt's usage to the calling run's usage, then charge its token
        and cost limits.

        Raises:
            RunLimitExceeded: as [`charge_turn()`][prism.types._tools.DelegatingRun.charge_turn].
        """
        ...

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
        """Emit a child run's (already redacted) ``event`` on the calling run, wrapped in a
        ``SubagentEvent`` naming the calling tool call and the child's agent, session and
        run."""
        ...


@fast_init
@dataclass(frozen=True, slots=True)
class ToolDefinition(Serializable):
    """A host tool. ``to_dict()`` omits ``execute``; there is no round trip."""

    name: str
    """Unique tool name."""
    execute: Callable[..., Any] = field(metadata={"serialize": False})
    """``execute(arguments: dict, ctx: ToolExecutionContext)``; sync or async; returns a
    ``ToolResult`` or any JSON value."""
    description: str | None = None
    """Description shown to the model."""
    parameters: dict[str, JsonValue] | None = None
    """JSON Schema of the argument object (validated by default)."""
    exclusive: bool = False
    """Forces sequential dispatch of any round containing this tool."""
    metadata: Mapping[str, Any] | None = None
    """Host metadata."""
    needs_approval: bool | Callable[[ToolCallContent], bool] = field(
        default=False, metadata={"serialize": False}
    )
    """Ask an operator before each call runs: ``True``, or a sync callable deciding from the
    call (``needs_approval(call) -> bool``), which gets the arguments the tool will run with
    (after the ``tool_call`` middleware hook, validated, parsed, defaults filled in); one that
    raises answers the call with an error row and the call never runs. Beside the agent-wide
    ``RunStateOptions(interrupt_before_tool=True)``; it needs durable run state (a run
    without it raises ``PrismConfigError``) and joins the agent fingerprint. A waiting call
    suspends the run as ``interrupt_before_tool`` does."""


@fast_init
@dataclass(frozen=True, slots=True)
class ToolExecutionContext(Serializable):
    """What a tool's ``execute`` receives besides its arguments."""

    session_id: str
    """Session id."""
    run_id: str
    """Run id."""
    tool_call_id: str
    """The call being executed."""
    signal: AbortSignal = field(metadata={"serialize": False})
    """Aborted when the run aborts."""
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """Merged run metadata (read-only)."""
    progress: ProgressCallback = field(default=_no_progress, metadata={"serialize": False})
    """``await progress(value, metadata=None)`` emits ``tool_execution_progress``."""
    run: DelegatingRun | None = field(default=None, metadata={"serialize": False})
    """The calling run, for a tool that runs a child agent (``None`` outside a run)."""


@fast_init
@dataclass(frozen=True, slots=True)
class ToolResult(Serializable):
    """Outcome of one tool call; an *error result* when ``error`` is set."""

    tool_call_id: str
    """Id of the answered call (replaced by the runtime with the call's id)."""
    name: str
    """Tool name (replaced by the runtime with the call's name)."""
    value: JsonValue | None = None
    """JSON result."""
    content: tuple[ContentBlock, ...] = ()
    """Extra content parts appended after the ``ToolResultContent``."""
    error: ErrorInfo | None = None
    """Failure description for error results."""
    metadata: Mapping[str, Any] | None = None
    """Host metadata, copied to the tool-result message."""

    if TYPE_CHECKING:

        def __init__(
            self,
            tool_call_id: str,
            name: str,
            value: JsonValue | None = None,
            content: Sequence[ContentBlock] = (),
            error: ErrorInfo | None = None,
            metadata: Mapping[str, Any] | None = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        if not isinstance(self.content, tuple):
            object.__setattr__(self, "content", tuple(self.content))

    @property
    def is_error(self) -> bool:
        """Whether this is an error result (``error is not None``)."""
        return self.error is not None
