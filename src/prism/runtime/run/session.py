"""Sessions: the entry of a run, and steering, observers, compaction and branches of a session.

An [`AgentSession`][prism.runtime.run.session.AgentSession] is one conversation of an agent over a ``SessionStore``. ``await
session.run(input, ...)`` is where a run starts: the options are resolved into a plan
([`prism.runtime.run.plan.plan_run()`][prism.runtime.run.plan.plan_run], which fails on an invalid option before any side effect), then
one run leg executes it ([`prism.runtime.run.leg.start_leg()`][prism.runtime.run.leg.start_leg]). Only one run per session is active at
a time.

The state a run changes (leaf, busy flag, steer queue, observers) is the session's
[`SessionState`][prism.runtime.run.state.SessionState], handed to the leg.

The run path, top to bottom: this module → ``prism.runtime.run.plan`` → [`prism.runtime.run.leg`][prism.runtime.run.leg]
→ [`prism.runtime.run.context`][prism.runtime.run.context] → [`prism.runtime.run.attempts`][prism.runtime.run.attempts].
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Unpack

from prism._util import new_id
from prism.errors import AgentSessionBusyError, PrismConfigError, SteerError
from prism.events import (
    CompactionFinishedEvent,
    CompactionStartedEvent,
    ErrorEvent,
    QueueUpdatedEvent,
)
from prism.redaction import redact_agent_event
from prism.runtime.run._observers import EventSubscription, OnEvent, OverflowPolicy
from prism.runtime.run.config import ConfiguredAgent
from prism.runtime.run.leg import start_leg
from prism.runtime.run.options import RunOptionKeywords, RunOptions
from prism.runtime.run.plan import plan_run
from prism.runtime.run.state import MAX_STEER_BYTES, MAX_STEER_MESSAGES, SessionState
from prism.runtime.run.stream import RunStream
from prism.store import (
    CompactionOptions,
    MemorySessionStore,
    SessionEntry,
    SessionStore,
    compaction_entry,
    compute_compaction,
    resolve_compaction_options,
)
from prism.types import AgentInput, ErrorInfo, RunResult, to_messages

__all__ = ["MAX_STEER_BYTES", "MAX_STEER_MESSAGES", "AgentSession", "RunOptions", "RunStream"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class AgentSession:
    """One conversation of an agent over a session store.

    Create it with ``agent.create_session(...)``.
    """

    def __init__(
        self,
        agent: ConfiguredAgent,
        *,
        session_id: str | None = None,
        store: SessionStore | None = None,
        leaf_id: str | None = None,
        metadata: Mapping[str, Any] = _EMPTY,
        on_event: OnEvent | None = None,
    ) -> None:
        self.agent = agent
        """The agent whose configuration the session's runs use."""
        self.id: str = session_id if session_id is not None else new_id("session")
        """The session id."""
        config = agent.config
        self.store: SessionStore = (
            store
            if store is not None
            else config.store
            if config.store is not None
            else MemorySessionStore()
        )
        """The session's store."""
        self.metadata: Mapping[str, Any] = metadata
        """Session metadata."""
        self.state = SessionState(
            session_id=self.id,
            store=self.store,
            metadata=metadata,
            leaf_id=leaf_id,
            on_event=on_event,
            kept=getattr(agent, "kept_branches", None),
        )
        """The state the session's runs change (leaf, busy flag, steer queue, observers); the
        runtime's, for hosts to read only."""

    def __repr__(self) -> str:
        return f"<AgentSession {self.id!r} running={self.is_running}>"

    # ----------------------------------------------------------------- properties

    @property
    def leaf_id(self) -> str | None:
        """Id of the entry the next append attaches to; ``None`` before the first lookup or for a
        new conversation."""
        return self.state.leaf_id

    @property
    def is_running(self) -> bool:
        """True while a run (or a manual compaction) is active."""
        return self.state.busy

    # ----------------------------------------------------------------- observers

    def subscribe(
        self, *, max_queued_events: int = 1024, overflow: OverflowPolicy = "close"
    ) -> EventSubscription:
        """Subscribe to this session's events.

        The subscription receives the events of the active run — or, when none is active, of the
        next run — and is closed at that run's end.

        Args:
            max_queued_events: Queue capacity; floored to an int ≥ 1 (non-finite → 1024).
            overflow: ``"close"`` (default), ``"drop_oldest"`` or ``"drop_newest"``.

        Returns:
            An async iterator of events with ``aclose()``.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — unknown ``overflow``.
        """
        return self.state.observers.subscribe(
            max_queued_events=max_queued_events, overflow=overflow
        )

    # ----------------------------------------------------------------- steering (STEER-*)

    def steer(self, input: AgentInput, *, soft_interrupt: bool = False) -> None:
        """Queue messages for the active run's next turn.

        Args:
            input: Text, a message or messages (converted with ``to_messages`` and redacted).
            soft_interrupt: Also interrupt the streaming provider attempt (or the next one).

        Raises:
            SteerError: ``ERR_PRISM_STEER_NO_RUN`` without an active run;
                ``ERR_PRISM_STEER_EMPTY`` for empty input; ``ERR_PRISM_STEER_LIMIT`` when the
                queue would exceed 8 messages or 65 536 bytes of text (nothing is queued).
        """
        state = self.state
        leg = state.active
        if leg is None:
            raise SteerError("ERR_PRISM_STEER_NO_RUN")
        messages = to_messages(input)
        redactor = leg.redactor
        if redactor is not None:
            messages = [redactor.redact(m) for m in messages]
        if not messages:
            raise SteerError("ERR_PRISM_STEER_EMPTY")
        if not state.queue_steers(messages):
            raise SteerError("ERR_PRISM_STEER_LIMIT")
        leg.emit(
            QueueUpdatedEvent(session_id=self.id, run_id=leg.run_id, size=len(state.steer_queue))
        )
        if soft_interrupt and not leg.soft_interrupt():
            state.soft_pending = True

    def abort(self, reason: object = None) -> None:
        """Abort the active run; a no-op when none is active.

        The run's signal aborts at once: no further provider request or tool call starts, and an
        awaited provider stream stops promptly. A tool that is already executing sees the
        aborted ``context.signal`` and gets up to the agent's ``tool_abort_grace_ms`` (default
        5000 ms; ``0`` means no wait) to finish — a call finished within the grace keeps its real
        result; one still running is then cancelled (its cleanup awaited) and answered with a
        ``tool_call_interrupted`` error. A sync tool running inline cannot be interrupted; one in a
        worker thread cannot be cancelled and is still awaited before ``run()`` returns. ``run()``
        then fails with ``AgentRunError`` (status ``aborted``). So ``abort()`` returns immediately,
        but the run may take up to the grace (plus thread time) to end.

        Args:
            reason: Abort reason; ``None`` means ``AbortError("Agent run aborted")``.
        """
        leg = self.state.active
        if leg is not None:
            leg.abort(reason)

    # ----------------------------------------------------------------- runs

    async def run(
        self,
        input: AgentInput,
        *,
        options: RunOptions | Mapping[str, Any] | None = None,
        **overrides: Unpack[RunOptionKeywords],
    ) -> RunResult:
        """Run the agent on ``input``.

        Args:
            input: Text, a message or messages.
            options: A [`RunOptions`][prism.runtime.run.session.RunOptions] or a mapping of its fields.
            **overrides: Any [`RunOptions`][prism.runtime.run.session.RunOptions] field as a keyword; each one that is not
                ``None`` replaces the corresponding ``options`` field.

        Returns:
            ``RunResult(status="succeeded", ...)``: ``messages`` appended by this run, ``usage``
            summed over every provider attempt, ``stop_reason`` (``"turn_limit"`` when a loop
            ceiling ended the run cleanly), ``artifact`` and ``leaf_id``.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — invalid options, found in preflight before
                any side effect.
            AgentSessionBusyError: ``ERR_PRISM_SESSION_BUSY`` — another run is active.
            AgentRunError: the run failed (``ERR_PRISM_RUN_FAILED``, the artifact reason, or
                the ``ERR_PRISM_LOOP_*`` code of a loop-state failure) or was aborted
                (``ERR_PRISM_RUN_ABORTED``); ``.result`` holds status, error, usage.
            AgentRunLimitError: ``ERR_PRISM_RUN_LIMIT`` — a limit breached (``.breach``).
            RunLedgerError: ``ERR_PRISM_LEDGER`` — a ledger write failed.
            asyncio.CancelledError: the awaiting task was cancelled; the run was aborted and
                cleaned up first.
        """
        config = self.agent.config
        opts = RunOptions.coerce(options).with_overrides(overrides)
        plan = plan_run(config, self.metadata, input, opts, hooks=self.agent.durable_hooks)
        state = self.state
        if state.busy:
            self._reject_busy()
        return await start_leg(state, config, plan)

    def _reject_busy(self) -> None:
        """Send one ``error`` event to the current observers, then raise ``AgentSessionBusyError``."""
        error = AgentSessionBusyError()
        event = ErrorEvent(
            session_id=self.id,
            run_id=new_id("run"),
            error=ErrorInfo(message=error.message, name=type(error).__name__, code=error.code),
        )
        leg = self.state.active
        redactor = leg.redactor if leg is not None else self.agent.config.redactor
        self.state.observers.deliver(redact_agent_event(event, redactor))
        raise error

    def run_sync(self, input: AgentInput, **options: Unpack[RunOptionKeywords]) -> RunResult:
        """Blocking ``run()`` for scripts, via ``asyncio.run``.

        Ctrl-C cancels the run through the cancellation path, so the stored history
        stays provider-valid, then ``KeyboardInterrupt`` is re-raised.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — called while an event loop is running in this
                thread (use ``await session.run(...)`` there); no run is started.
            Exception: whatever ``run()`` raises.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise PrismConfigError(
                "run_sync() cannot be called from a running event loop; "
                "use `await session.run(...)` instead"
            )
        return asyncio.run(self.run(input, **options))

    def stream(
        self,
        input: AgentInput,
        *,
        max_queued_events: int = 1024,
        overflow: OverflowPolicy = "close",
        **run_options: Unpack[RunOptionKeywords],
    ) -> RunStream:
        """Run ``input`` and stream its events.

        The stream subscribes first, then starts the run as a task on first use. Use it as
        ``async with session.stream(...) as events: async for event in events: ...``; leaving
        early aborts the run with ``AbortError("stream consumer closed")``.

        Args:
            input: The run input.
            max_queued_events: Subscription capacity.
            overflow: Subscription overflow policy.
            **run_options: Keyword options of ``run()``.

        Returns:
            A [`RunStream`][prism.runtime.run.session.RunStream].
        """
        return RunStream(
            self.run,
            self.subscribe(max_queued_events=max_queued_events, overflow=overflow),
            input,
            run_options,
        )

    # ----------------------------------------------------------------- store access

    async def entries(self) -> list[SessionEntry]:
        """The entries of the current branch, root → leaf."""
        state = self.state
        await state.ensure_leaf()
        return await state.read_branch()

    async def checkout(self, leaf_id: str) -> None:
        """Move the leaf to ``leaf_id``; the next append starts a sibling branch.

        Raises:
            AgentSessionBusyError: ``ERR_PRISM_SESSION_BUSY`` — a run is active.
        """
        if self.state.busy:
            raise AgentSessionBusyError()
        self.state.move_leaf(leaf_id, fork=True)

    async def compact(self, **compaction_options: object) -> SessionEntry:
        """Compact the current branch outside a run.

        Emits ``compaction_started``/``compaction_finished`` (without ``run_id``) to the current
        observers, appends one ``compaction`` entry with ``trigger="manual"``, and returns it.
        It writes no ledger record and does not close subscribers.

        Args:
            **compaction_options: ``CompactionOptions`` fields overriding the agent's.

        Raises:
            AgentSessionBusyError: ``ERR_PRISM_SESSION_BUSY`` — a run is active.
            PrismConfigError: ``ERR_PRISM_CONFIG`` — invalid options.
        """
        state = self.state
        if state.busy:
            raise AgentSessionBusyError()
        config = self.agent.config
        options = (
            resolve_compaction_options(
                config.compaction, compaction_options if compaction_options else None
            )
            or CompactionOptions()
        )
        state.busy = True
        try:
            redactor = config.redactor
            emit = state.observers.deliver
            emit(redact_agent_event(CompactionStartedEvent(session_id=self.id), redactor))
            await state.ensure_leaf()
            branch = await state.read_branch()
            result = await compute_compaction(
                session_id=self.id, entries=branch, options=options, middleware=config.middleware
            )
            entry = compaction_entry(
                result,
                session_id=self.id,
                options=options,
                trigger="manual",
                parent_id=state.leaf_id,
            )
            stored = redactor.redact(entry) if redactor is not None else entry
            await state.append(stored, idempotency_key=config.idempotency_key)
            emit(
                redact_agent_event(
                    CompactionFinishedEvent(session_id=self.id, summary=stored.summary or ""),
                    redactor,
                )
            )
            await state.observers.drain()
            return stored
        finally:
            state.busy = False
