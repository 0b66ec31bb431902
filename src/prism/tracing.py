"""Run tracing: the plug-in point through which a tracer watches runs.

A host turns tracing on per agent (``create_agent(..., tracing=tracer)``) or for every agent that
does not say otherwise ([`set_default_tracer()`][prism.tracing.set_default_tracer]); [`prism.otel`][prism.otel] provides the
OpenTelemetry tracer. prism itself knows only these protocols:

* a [`RunTracer`][prism.tracing.RunTracer] is asked once per run leg, before the leg's ``agent_started`` event, for a
  [`RunTrace`][prism.tracing.RunTrace] of that leg (``None``: the leg is not traced);
* the [`RunTrace`][prism.tracing.RunTrace] receives every event of the leg, in order, as the other observers get
  it (stamped and redacted with the run's redactor); for each tool call that executes,
  [`RunTrace.tool_scope()`][prism.tracing.RunTrace.tool_scope] is entered right before the tool runs and left right after, in the
  task (and context) the tool runs in; [`RunTrace.link()`][prism.tracing.RunTrace.link] gives the text a durable run stores
  with its checkpoint so that a resumed leg can link to the suspended one; [`RunTrace.close()`][prism.tracing.RunTrace.close]
  is called once when the leg is over, whatever its outcome.

A run started while a tool of a traced run executes (a child run of an agent tool, or any run a
tool starts) whose agent leaves ``tracing=None`` while no default tracer is set is traced by the
calling run's tracer: its trace starts inside the tool call's scope, so with
[`prism.otel`][prism.otel] its spans nest under the calling run's ``execute_tool`` span. ``tracing=False``
keeps it untraced.

When no tracer is configured, a run does no tracing work at all: no trace is created, the event
path is unchanged (a trace receives the events through the loop context's ``forward`` hook), and
tool dispatch checks one argument for ``None``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias

from prism.events import AgentEvent
from prism.types import ModelConfig, ToolCallContent

__all__ = [
    "RunTrace",
    "RunTracer",
    "TracedRun",
    "TracingOption",
    "default_tracer",
    "lend_tracer",
    "set_default_tracer",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class TracedRun:
    """What a tracer is told about a run leg when it starts."""

    session_id: str
    """Session id (the conversation)."""
    run_id: str
    """Run id (``run_…``); the same in every leg of a durable run."""
    agent_id: str | None
    """The agent's ``id``, when it has one."""
    agent_name: str | None
    """The agent's ``name``, when it has one."""
    model: ModelConfig
    """The run's model (what the agent asks its provider for)."""
    provider_id: str
    """The ``id`` of the provider serving the run (``""`` when it has none)."""
    loop: str
    """The loop's ``name`` (e.g. ``"single-shot"``)."""
    resumed_version: int | None = None
    """The checkpoint version a resumed leg started from; ``None`` for a fresh leg."""
    resumed_link: str | None = None
    """What [`RunTrace.link()`][prism.tracing.RunTrace.link] returned in the leg that wrote that checkpoint, if anything."""


class RunTrace(Protocol):
    """The trace of one run leg (see the module docstring for when each method is called)."""

    def on_event(self, event: AgentEvent, /) -> None:
        """One event of the leg (already stamped and redacted). Must not raise."""
        ...

    def tool_scope(self, call: ToolCallContent, /) -> Callable[[], None]:
        """Entered right before ``call``'s tool executes; returns what to call right after."""
        ...

    def link(self) -> str | None:
        """Text a durable checkpoint stores, handed back as ``TracedRun.resumed_link``."""
        ...

    def close(self) -> None:
        """The leg is over: end whatever is still open. Called once; must not raise."""
        ...


class RunTracer(Protocol):
    """Starts the trace of each run leg of the agents it is configured on."""

    def start_run(self, run: TracedRun, /) -> RunTrace | None:
        """The trace of the leg ``run`` describes, or ``None`` to leave it untraced."""
        ...


TracingOption: TypeAlias = RunTracer | Literal[False] | None
"""``create_agent(tracing=...)``: a tracer, ``False`` (never traced), or ``None`` (the default
tracer, if one is set)."""

_default: list[RunTracer | None] = [None]


def set_default_tracer(tracer: RunTracer | None, /) -> RunTracer | None:
    """Set the tracer of every agent created with ``tracing=None``; return the previous one.

    Takes effect for runs started afterwards. ``None`` turns default tracing off.

    Raises:
        TypeError: ``tracer`` has no callable ``start_run``.
    """
    if tracer is not None and not callable(getattr(tracer, "start_run", None)):
        raise TypeError("a tracer must have a callable start_run(run)")
    previous = _default[0]
    _default[0] = tracer
    return previous


def default_tracer() -> RunTracer | None:
    """The tracer set by [`set_default_tracer()`][prism.tracing.set_default_tracer], else ``None``."""
    return _default[0]


_calling: ContextVar[RunTracer | None] = ContextVar("prism_calling_tracer", default=None)
"""The tracer of the run whose tool is executing here (set by [`lend_tracer()`][prism.tracing.lend_tracer]'s scopes)."""


def resolve_tracer(option: TracingOption) -> RunTracer | None:
    """The tracer of an agent whose ``tracing`` option is ``option``: ``None`` gives the
    default tracer, else the tracer of the run whose tool call is executing in this context
    (a child run inherits it), else no tracer."""
    if option is None:
        default = _default[0]
        return default if default is not None else _calling.get()
    if option is False:
        return None
    return option


class _LendingTrace:
    """A leg's trace whose tool scopes also lend the leg's tracer to the runs a tool starts."""

    __slots__ = ("_trace", "_tracer", "on_event")

    def __init__(self, trace: RunTrace, tracer: RunTracer) -> None:
        self._trace = trace
        self._tracer = tracer
        self.on_event = trace.on_event

    def tool_scope(self, call: ToolCallContent, /) -> Callable[[], None]:
        token = _calling.set(self._tracer)
        try:
            leave = self._trace.tool_scope(call)
        except BaseException:
            _calling.reset(token)
            raise

        def left() -> None:
            try:
                leave()
            finally:
                _calling.reset(token)

        return left

    def link(self) -> str | None:
        return self._trace.link()

    def close(self) -> None:
        self._trace.close()


def lend_tracer(trace: RunTrace, tracer: RunTracer, /) -> RunTrace:
    """``trace`` (started by ``tracer``) whose tool scopes make ``tracer`` the tracer of runs
    started inside a tool call whose agents leave ``tracing=None`` (see
    [`resolve_tracer()`][prism.tracing.resolve_tracer])."""
    return _LendingTrace(trace, tracer)
