"""Sessions: ``run()``, streaming, steering, observers, compaction and branches (RUN-3..RUN-8, REC-5..10).

An :class:`AgentSession` is one conversation over a ``SessionStore``. ``await session.run(input)``
preflights the options (RUN-7: no side effect before they pass), then drives one
:class:`~prism.runtime._run.RunLeg`. Only one run per session is active at a time (RUN-8).

Option precedence (RUN-6) is decided in one place, :meth:`AgentSession._plan`: the run value wins
when it is not ``None``; ``metadata`` merges agent < session < run; guardrails, request policies
and tool filters are agent-then-run; ``retry``/``compaction`` layer per RETRY/STORE rules; limits
may only narrow (LIM-3).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal

from prism._util import new_id
from prism.abort import AbortController, AbortSignal
from prism.assembly import Skill, SystemPromptContribution
from prism.errors import (
    AbortError,
    AgentSessionBusyError,
    PrismConfigError,
    SteerError,
)
from prism.events import (
    AgentEvent,
    AgentStartedEvent,
    CompactionFinishedEvent,
    CompactionStartedEvent,
    ErrorEvent,
    QueueUpdatedEvent,
)
from prism.guardrails import Guardrails, merge_guardrails
from prism.limits import RunLimits, coerce_run_limits, resolve_run_limits
from prism.redaction import SecretRedactor, redact_agent_event
from prism.retry import RetryOptions, resolve_retry_options
from prism.runtime._context import RunPlan
from prism.runtime._observers import EventSubscription, OnEvent, OverflowPolicy, SessionObservers
from prism.runtime._run import RunLeg
from prism.runtime.durable import (
    ResumePoint,
    RunStateOptions,
    check_durable_run,
    coerce_run_state_options,
)
from prism.runtime.provider_turn import ProviderRequestPolicy
from prism.runtime.turn_policy import coerce_turn_policy, resolve_turn_policy
from prism.store import (
    CompactionOptions,
    MemorySessionStore,
    SessionEntry,
    SessionStore,
    compaction_entry,
    compute_compaction,
    read_branch,
    resolve_compaction_options,
)
from prism.tools import ToolFilter, ToolValidator, normalize_tool_filters
from prism.types import (
    AgentInput,
    ErrorInfo,
    Message,
    ModelConfig,
    OwnershipScope,
    ProviderRequestOptions,
    RunResult,
    StructuredOutputOptions,
    TextContent,
    to_messages,
)

if TYPE_CHECKING:
    from prism.runtime.agent import Agent, ProviderSource

__all__ = ["AgentSession", "RunOptions", "RunStream"]

MAX_STEER_MESSAGES: Final = 8
"""Most pending steered messages (STEER-2)."""
MAX_STEER_BYTES: Final = 65_536
"""Most pending steered text, in UTF-8 bytes of text parts (STEER-2)."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})


# --------------------------------------------------------------------------- run options (RUN-5)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """Per-run options (RUN-5); every field defaults to ``None`` = "take the agent's" (RUN-6).

    A mapping with the same snake_case keys is accepted wherever ``RunOptions`` is (ARCH-9).
    """

    loop: Any = None
    """Loop options, a mapping with ``"strategy"``, or a strategy instance; wins over the
    agent's (LOOP-1)."""
    turn_policy: Any = None
    """Clean host stops at turn boundaries (06-turn-policy)."""
    run_state: Any = None
    """Durable run options (05-durable-runs)."""
    limits: RunLimits | Mapping[str, Any] | None = None
    """Limits overlay; may only narrow the agent's (LIM-3)."""
    signal: AbortSignal | None = None
    """External abort signal bridged into the run (RUN-9)."""
    metadata: Mapping[str, Any] | None = None
    """Run metadata, merged over agent and session metadata."""
    structured_output: StructuredOutputOptions | Mapping[str, Any] | None = None
    """Native schema for this run's requests (SO-3)."""
    redactor: SecretRedactor | None = None
    """Redactor for this run (wins over the agent's)."""
    active_skills: Sequence[str] | None = None
    """Names of the skills to activate; unknown names fail the run."""
    model: ModelConfig | Mapping[str, Any] | None = None
    """Model for this run; a change appends a ``model_change`` entry (RUN-11 step 7)."""
    provider_source: ProviderSource | None = None
    """Provider resolver tried before the agent's (RUN-6)."""
    provider_options: ProviderRequestOptions | Mapping[str, Any] | None = None
    """Options merged over the agent's (CON-15)."""
    provider_request_policies: Sequence[ProviderRequestPolicy] | None = None
    """Policies applied after the agent's (RUN-14 step 2)."""
    system_prompt: Sequence[SystemPromptContribution] | Literal[False] | None = None
    """Contributions after the agent's; ``False`` drops the agent's for this run."""
    compaction: CompactionOptions | Mapping[str, Any] | Literal[False] | None = None
    """``False`` disables; a mapping overrides named keys (RUN-6)."""
    retry: RetryOptions | Mapping[str, Any] | Literal[False] | None = None
    """``False`` disables; a mapping overrides named keys (RUN-6, RETRY-6)."""
    run_ledger: Any = None
    """Ledger for this run (wins over the agent's)."""
    ownership: OwnershipScope | Mapping[str, Any] | None = None
    """Ownership copied into this run's records."""
    idempotency_key: str | None = None
    """Idempotency key for this run's store appends."""
    guardrails: Guardrails | Mapping[str, Any] | None = None
    """Guardrails appended per stage after the agent's."""
    skills: Sequence[Skill] | None = None
    """Replaces the agent's skill list for this run."""
    tool_filter: ToolFilter | Sequence[ToolFilter] | None = None
    """Filters applied after the agent's (TOOL-13)."""
    tool_validator: ToolValidator | Literal[False] | None = None
    """Argument validator for this run; ``False`` disables validation (TOOL-6)."""

    @classmethod
    def coerce(cls, value: RunOptions | Mapping[str, Any] | None) -> RunOptions:
        """Return ``value`` as ``RunOptions`` (``None`` → defaults).

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — not a mapping, or an unknown key (a
                camelCase key is reported with its snake_case field name).
        """
        if value is None:
            return _DEFAULT_OPTIONS
        if isinstance(value, RunOptions):
            return value
        if not isinstance(value, Mapping):
            raise PrismConfigError(
                f"options must be RunOptions or a mapping, got {type(value).__name__}"
            )
        _reject_unknown("options", value, _RUN_OPTION_FIELDS)
        return cls(**{str(k): v for k, v in value.items()})


_RUN_OPTION_FIELDS: Final = frozenset(f.name for f in dataclasses.fields(RunOptions))
_DEFAULT_OPTIONS: Final = RunOptions()


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def _reject_unknown(label: str, value: Mapping[str, Any], names: frozenset[str]) -> None:
    unknown = [str(k) for k in value if k not in names]
    if not unknown:
        return
    parts = []
    for key in sorted(unknown):
        snake = _snake(key)
        parts.append(f"{key} (use {snake})" if snake != key and snake in names else key)
    raise PrismConfigError(f"unknown {label} key(s): {', '.join(parts)}")


def _text_bytes(messages: Sequence[Message]) -> int:
    total = 0
    for message in messages:
        for part in message.content:
            if type(part) is TextContent:
                total += len(part.text.encode())
    return total


# --------------------------------------------------------------------------- the session


class AgentSession:
    """One conversation of an agent over a session store (RUN-3, RUN-4).

    Create it with ``agent.create_session(...)``.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        session_id: str | None = None,
        store: SessionStore | None = None,
        leaf_id: str | None = None,
        metadata: Mapping[str, Any] = _EMPTY,
        on_event: OnEvent | None = None,
    ) -> None:
        self.agent = agent
        self.id: str = session_id if session_id is not None else new_id("session")
        """The session id."""
        config = agent.config
        self.store: SessionStore = (
            store if store is not None else config.store if config.store is not None
            else MemorySessionStore()
        )
        """The session's store."""
        self.metadata: Mapping[str, Any] = metadata
        """Session metadata (RUN-6)."""
        self._observers = SessionObservers(on_event)
        self._leaf_id: str | None = leaf_id
        self._leaf_resolved = leaf_id is not None
        self._fork_next = leaf_id is not None
        self._active: RunLeg | None = None
        self._busy = False
        self._steer_queue: list[Message] = []
        self._steer_bytes = 0
        self._soft_pending = False

    def __repr__(self) -> str:
        return f"<AgentSession {self.id!r} running={self.is_running}>"

    # ----------------------------------------------------------------- properties

    @property
    def leaf_id(self) -> str | None:
        """Id of the entry the next append attaches to; ``None`` before the first lookup or for a
        new conversation (RUN-3)."""
        return self._leaf_id

    @property
    def is_running(self) -> bool:
        """True while a run (or a manual compaction) is active (RUN-8)."""
        return self._busy

    # ----------------------------------------------------------------- observers (REC-5, REC-7)

    def subscribe(
        self, *, max_queued_events: int = 1024, overflow: OverflowPolicy = "close"
    ) -> EventSubscription:
        """Subscribe to this session's events (REC-5).

        The subscription receives the events of the active run — or, when none is active, of the
        next run — and is closed at that run's end (EVT-20).

        Args:
            max_queued_events: Queue capacity; floored to an int ≥ 1 (non-finite → 1024).
            overflow: ``"close"`` (default), ``"drop_oldest"`` or ``"drop_newest"``.

        Returns:
            An async iterator of events with ``aclose()``.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — unknown ``overflow``.
        """
        return self._observers.subscribe(max_queued_events=max_queued_events, overflow=overflow)

    # ----------------------------------------------------------------- steering (STEER-*)

    def steer(self, input: AgentInput, *, soft_interrupt: bool = False) -> None:
        """Queue messages for the active run's next turn (STEER-1, STEER-2, STEER-6).

        Args:
            input: Text, a message or messages (converted with ``to_messages`` and redacted).
            soft_interrupt: Also interrupt the streaming provider attempt (or the next one).

        Raises:
            SteerError: ``ERR_PRISM_STEER_NO_RUN`` without an active run;
                ``ERR_PRISM_STEER_EMPTY`` for empty input; ``ERR_PRISM_STEER_LIMIT`` when the
                queue would exceed 8 messages or 65 536 bytes of text (nothing is queued).
        """
        leg = self._active
        if leg is None:
            raise SteerError("ERR_PRISM_STEER_NO_RUN")
        messages = to_messages(input)
        redactor = leg.redactor
        if redactor is not None:
            messages = [redactor.redact(m) for m in messages]
        if not messages:
            raise SteerError("ERR_PRISM_STEER_EMPTY")
        size = _text_bytes(messages)
        queue = self._steer_queue
        if (
            len(queue) + len(messages) > MAX_STEER_MESSAGES
            or self._steer_bytes + size > MAX_STEER_BYTES
        ):
            raise SteerError("ERR_PRISM_STEER_LIMIT")
        queue.extend(messages)
        self._steer_bytes += size
        leg.emit(QueueUpdatedEvent(session_id=self.id, run_id=leg.run_id, size=len(queue)))
        if soft_interrupt:
            runner = leg.runner
            if runner is not None:
                runner.soft_interrupt()
            else:
                self._soft_pending = True

    def abort(self, reason: Any = None) -> None:
        """Abort the active run (RUN-4); a no-op when none is active.

        The run's signal aborts at once: no further provider request or tool call starts, and an
        awaited provider stream stops promptly (RUN-25). A tool that is already executing sees the
        aborted ``context.signal`` and gets up to the agent's ``tool_abort_grace_ms`` (default
        5000 ms; ``0`` means no wait) to finish — a call finished within the grace keeps its real
        result; one still running is then cancelled (its cleanup awaited) and answered with a
        ``tool_call_interrupted`` error (TOOL-10). A sync tool running inline cannot be interrupted;
        one in a worker thread cannot be cancelled and is still awaited before ``run()`` returns
        (RUN-22). ``run()`` then fails with ``AgentRunError`` (status ``aborted``). So ``abort()``
        returns immediately, but the run may take up to the grace (plus thread time) to end.

        Args:
            reason: Abort reason; ``None`` means ``AbortError("Agent run aborted")``.
        """
        leg = self._active
        if leg is not None:
            leg.controller.abort(reason)

    # ----------------------------------------------------------------- runs

    async def run(
        self,
        input: AgentInput,
        *,
        options: RunOptions | Mapping[str, Any] | None = None,
        loop: Any = None,
        turn_policy: Any = None,
        run_state: Any = None,
        limits: RunLimits | Mapping[str, Any] | None = None,
        signal: AbortSignal | None = None,
        metadata: Mapping[str, Any] | None = None,
        structured_output: StructuredOutputOptions | Mapping[str, Any] | None = None,
        redactor: SecretRedactor | None = None,
        active_skills: Sequence[str] | None = None,
        model: ModelConfig | Mapping[str, Any] | None = None,
        provider_source: ProviderSource | None = None,
        provider_options: ProviderRequestOptions | Mapping[str, Any] | None = None,
        provider_request_policies: Sequence[ProviderRequestPolicy] | None = None,
        system_prompt: Sequence[SystemPromptContribution] | Literal[False] | None = None,
        compaction: CompactionOptions | Mapping[str, Any] | Literal[False] | None = None,
        retry: RetryOptions | Mapping[str, Any] | Literal[False] | None = None,
        run_ledger: Any = None,
        ownership: OwnershipScope | Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        guardrails: Guardrails | Mapping[str, Any] | None = None,
        skills: Sequence[Skill] | None = None,
        tool_filter: ToolFilter | Sequence[ToolFilter] | None = None,
        tool_validator: ToolValidator | Literal[False] | None = None,
    ) -> RunResult:
        """Run the agent on ``input`` (RUN-5..RUN-24).

        Each keyword that is not ``None`` replaces the corresponding ``options`` field (RUN-5).

        Returns:
            ``RunResult(status="succeeded", ...)``: ``messages`` appended by this run, ``usage``
            summed over every provider attempt, ``stop_reason`` (``"turn_limit"`` when a loop
            ceiling ended the run cleanly), ``artifact`` and ``leaf_id``.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — invalid options, found in preflight before
                any side effect (RUN-7).
            AgentSessionBusyError: ``ERR_PRISM_SESSION_BUSY`` — another run is active (RUN-8).
            AgentRunError: the run failed (``ERR_PRISM_RUN_FAILED``, or the artifact reason) or
                was aborted (``ERR_PRISM_RUN_ABORTED``); ``.result`` holds status, error, usage.
            AgentRunLimitError: ``ERR_PRISM_RUN_LIMIT`` — a limit breached (``.breach``).
            RunLedgerError: ``ERR_PRISM_LEDGER`` — a ledger write failed.
            asyncio.CancelledError: the awaiting task was cancelled; the run was aborted and
                cleaned up first (RUN-10).
        """
        overrides = {
            "loop": loop,
            "turn_policy": turn_policy,
            "run_state": run_state,
            "limits": limits,
            "signal": signal,
            "metadata": metadata,
            "structured_output": structured_output,
            "redactor": redactor,
            "active_skills": active_skills,
            "model": model,
            "provider_source": provider_source,
            "provider_options": provider_options,
            "provider_request_policies": provider_request_policies,
            "system_prompt": system_prompt,
            "compaction": compaction,
            "retry": retry,
            "run_ledger": run_ledger,
            "ownership": ownership,
            "idempotency_key": idempotency_key,
            "guardrails": guardrails,
            "skills": skills,
            "tool_filter": tool_filter,
            "tool_validator": tool_validator,
        }
        return await self._run(input, options, overrides)

    async def _run(
        self,
        input: AgentInput,
        options: RunOptions | Mapping[str, Any] | None,
        overrides: Mapping[str, Any],
    ) -> RunResult:
        plan = self._plan(input, options, overrides)
        if self._busy:
            self._reject_busy()
        leg = RunLeg(self, plan, new_id("run"))
        self._busy = True
        self._active = leg
        self._steer_queue.clear()
        self._steer_bytes = 0
        self._soft_pending = False
        return await leg.execute()

    def _reject_busy(self) -> None:
        """RUN-8: one ``error`` event to the current observers, then raise."""
        error = AgentSessionBusyError()
        event = ErrorEvent(
            session_id=self.id,
            run_id=new_id("run"),
            error=ErrorInfo(message=error.message, name=type(error).__name__, code=error.code),
        )
        leg = self._active
        redactor = leg.redactor if leg is not None else self.agent.config.redactor
        self._observers.deliver(redact_agent_event(event, redactor))
        raise error

    def _plan(
        self,
        input: AgentInput,
        options: RunOptions | Mapping[str, Any] | None,
        overrides: Mapping[str, Any],
        *,
        durable: RunStateOptions | None = None,
    ) -> RunPlan:
        """Preflight (RUN-7 steps 1–4) and option resolution (RUN-6). No side effects.

        ``durable`` forces the durable options of a resumed leg (DUR-17 step 6).
        """
        config = self.agent.config
        opts = RunOptions.coerce(options)
        changes = {k: v for k, v in overrides.items() if v is not None}
        if changes:
            opts = dataclasses.replace(opts, **changes)
        # step 1: option mappings
        run_limits = coerce_run_limits(opts.limits)
        coerced_policy = coerce_turn_policy(opts.turn_policy)
        run_state = coerce_run_state_options(opts.run_state)
        retry = resolve_retry_options(config.retry, opts.retry)
        compaction = resolve_compaction_options(config.compaction, opts.compaction)
        # step 2: limits (LIM-2, LIM-3)
        resolved_limits = resolve_run_limits(config.limits, run_limits)
        # step 3: turn policy (TP-2)
        turn_policy = resolve_turn_policy(coerced_policy, max_turns_limit=resolved_limits.max_turns)
        # step 4: durable options (DUR-2)
        if durable is None:
            durable = check_durable_run(
                config,
                run_state,
                run_loop=opts.loop,
                run_model=opts.model,
                run_guardrails=opts.guardrails,
                run_tool_filter=opts.tool_filter,
            )
        model = config.model if opts.model is None else ModelConfig.coerce(opts.model)
        metadata = MappingProxyType({**config.metadata, **self.metadata, **(opts.metadata or {})})
        system_prompt = opts.system_prompt
        drop_agent_prompt = system_prompt is False
        contributions: tuple[SystemPromptContribution, ...] = ()
        if system_prompt is not None and system_prompt is not False:
            contributions = tuple(system_prompt)
            for item in contributions:
                if not isinstance(item, SystemPromptContribution):
                    raise PrismConfigError(
                        "system_prompt must be a sequence of SystemPromptContribution or False"
                    )
        skills = config.skills if opts.skills is None else tuple(opts.skills)
        for skill in skills:
            if not isinstance(skill, Skill):
                raise PrismConfigError(f"skills must be Skill objects, got {type(skill).__name__}")
        active = opts.active_skills
        if isinstance(active, str):
            active = (active,)
        policies = tuple(opts.provider_request_policies or ())
        for policy in policies:
            if not callable(policy):
                raise PrismConfigError("provider_request_policies must be callables")
        validator = opts.tool_validator
        if validator is not None and validator is not False and not callable(validator):
            raise PrismConfigError("tool_validator must be None, False or callable")
        ownership = opts.ownership if opts.ownership is not None else config.ownership
        return RunPlan(
            input=input,
            limits=resolved_limits,
            agent_limits=config.limits,
            run_limits=run_limits,
            retry=retry,
            compaction=compaction,
            loop=opts.loop,
            signal=opts.signal,
            metadata=metadata,
            structured_output=opts.structured_output,
            redactor=opts.redactor if opts.redactor is not None else config.redactor,
            active_skills=active,
            model=model,
            provider_source=opts.provider_source,
            provider_options=opts.provider_options,
            provider_request_policies=policies,
            system_prompt=contributions,
            drop_agent_system_prompt=drop_agent_prompt,
            run_ledger=opts.run_ledger if opts.run_ledger is not None else config.run_ledger,
            ownership=None if ownership is None else OwnershipScope.coerce(ownership),
            idempotency_key=(
                opts.idempotency_key if opts.idempotency_key is not None
                else config.idempotency_key
            ),
            guardrails=merge_guardrails(config.guardrails, opts.guardrails),
            skills=skills,
            tool_filters=config.tool_filter + normalize_tool_filters(opts.tool_filter),
            tool_validator=validator,
            turn_policy=turn_policy,
            durable=durable,
        )

    async def _run_resumed(
        self,
        claim: Callable[[], Awaitable[ResumePoint]],
        *,
        options: RunStateOptions,
        signal: AbortSignal | None = None,
        ownership: OwnershipScope | None = None,
    ) -> RunResult:
        """Run a resumed leg of a durable run (DUR-17 step 6); called by ``resume_agent_run``.

        The leg has the stored ``run_id``, input = the stored input or ``[]``, the given durable
        options, no turn policy (TP-10), restored limit counters, and starts from the stored
        leaf. ``claim()`` (the compare-and-set claim, DUR-19) is awaited after the busy check and
        before any event; its failure is raised as is.

        Raises:
            AgentSessionBusyError: ``ERR_PRISM_SESSION_BUSY`` — a run is active.
            CheckpointConflictError: another resumer claimed the run first.
            AgentRunError: the resumed leg failed.
        """
        if self._busy:
            raise AgentSessionBusyError()
        overrides: dict[str, Any] = {"signal": signal, "ownership": ownership}
        plan = self._plan([], None, overrides, durable=options)
        self._busy = True
        try:
            resume = await claim()
        except BaseException:
            self._busy = False
            raise
        plan.input = list(resume.input) if resume.input is not None else []
        self._leaf_id = resume.leaf_id
        self._leaf_resolved = True
        self._fork_next = resume.fork
        run_id = str(resume.envelope["run_id"])
        leg = RunLeg(self, plan, run_id, resume)
        self._active = leg
        self._steer_queue.clear()
        self._steer_bytes = 0
        self._soft_pending = False
        return await leg.execute()

    async def _emit_outside_run(self, event: AgentEvent, *, run_id: str | None = None) -> None:
        """Deliver a terminal event of a run that has no active leg (DUR-21, APR-8).

        The event is redacted with the agent's redactor and given to every subscription and
        ``on_event`` (no ledger record); then the subscriptions are closed (EVT-20).
        """
        del run_id  # the event carries it
        redactor = self.agent.config.redactor
        self._observers.set_redactor(redactor)
        self._observers.deliver(redact_agent_event(event, redactor))
        await self._observers.drain()
        self._observers.close_all()

    def _finish_leg(self, leg: RunLeg) -> None:
        """Called by the leg at the end of its cleanup (RUN-22)."""
        if self._active is leg:
            self._active = None
            self._busy = False
            self._steer_queue.clear()
            self._steer_bytes = 0
            self._soft_pending = False

    async def _ensure_leaf(self) -> None:
        """RUN-3: on first use, continue from the last stored entry of this session id."""
        if self._leaf_resolved:
            return
        entries = await self.store.list(self.id)
        self._leaf_id = entries[-1].id if entries else None
        self._leaf_resolved = True

    def run_sync(self, input: AgentInput, **options: Any) -> RunResult:
        """Blocking ``run()`` for scripts (RUN-4a), via ``asyncio.run``.

        Ctrl-C cancels the run through the cancellation path (RUN-10), so the stored history
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
        **run_options: Any,
    ) -> RunStream:
        """Run ``input`` and stream its events (REC-6, REC-9).

        The stream subscribes first, then starts the run as a task on first use. Use it as
        ``async with session.stream(...) as events: async for event in events: ...``; leaving
        early aborts the run with ``AbortError("stream consumer closed")``.

        Args:
            input: The run input.
            max_queued_events: Subscription capacity (REC-5).
            overflow: Subscription overflow policy (REC-5).
            **run_options: Keyword options of :meth:`run`.

        Returns:
            A :class:`RunStream`.
        """
        return RunStream(
            self, input, run_options, max_queued_events=max_queued_events, overflow=overflow
        )

    # ----------------------------------------------------------------- store access

    async def entries(self) -> list[SessionEntry]:
        """The entries of the current branch, root → leaf (STORE-6)."""
        await self._ensure_leaf()
        return await read_branch(self.store, self.id, self._leaf_id)

    async def checkout(self, leaf_id: str) -> None:
        """Move the leaf to ``leaf_id`` (STORE-6); the next append starts a sibling branch.

        Raises:
            AgentSessionBusyError: ``ERR_PRISM_SESSION_BUSY`` — a run is active.
        """
        if self._busy:
            raise AgentSessionBusyError()
        self._leaf_id = leaf_id
        self._leaf_resolved = True
        self._fork_next = True

    async def compact(self, **compaction_options: Any) -> SessionEntry:
        """Compact the current branch outside a run (STORE-8, REC-10).

        Emits ``compaction_started``/``compaction_finished`` (without ``run_id``) to the current
        observers, appends one ``compaction`` entry with ``trigger="manual"``, and returns it.
        It writes no ledger record and does not close subscribers.

        Args:
            **compaction_options: ``CompactionOptions`` fields overriding the agent's.

        Raises:
            AgentSessionBusyError: ``ERR_PRISM_SESSION_BUSY`` — a run is active.
            PrismConfigError: ``ERR_PRISM_CONFIG`` — invalid options.
        """
        if self._busy:
            raise AgentSessionBusyError()
        config = self.agent.config
        options = resolve_compaction_options(
            config.compaction, compaction_options if compaction_options else None
        ) or CompactionOptions()
        self._busy = True
        try:
            redactor = config.redactor
            emit = self._observers.deliver
            emit(redact_agent_event(CompactionStartedEvent(session_id=self.id), redactor))
            await self._ensure_leaf()
            branch = await read_branch(self.store, self.id, self._leaf_id)
            result = await compute_compaction(
                session_id=self.id, entries=branch, options=options, middleware=config.middleware
            )
            entry = compaction_entry(
                result,
                session_id=self.id,
                options=options,
                trigger="manual",
                parent_id=self._leaf_id,
            )
            stored = redactor.redact(entry) if redactor is not None else entry
            await self.store.append(
                stored,
                expected_parent_id=self._leaf_id,
                idempotency_key=config.idempotency_key,
                fork=self._fork_next and self._leaf_id is not None,
            )
            self._fork_next = False
            self._leaf_id = stored.id
            emit(
                redact_agent_event(
                    CompactionFinishedEvent(session_id=self.id, summary=stored.summary or ""),
                    redactor,
                )
            )
            await self._observers.drain()
            return stored
        finally:
            self._busy = False


# --------------------------------------------------------------------------- streaming (REC-6, REC-9)


class RunStream:
    """The events of one run, as an async iterator and async context manager (REC-6, REC-9).

    Yields every event until the run's ``agent_started``, then only that run's events; after the
    last event it re-raises the run's exception, if any. :attr:`result` is set once the run
    returned a result. Leaving early (``aclose()``, ``async with`` exit, or finalisation after a
    ``break``) aborts the run with ``AbortError("stream consumer closed")``.
    """

    def __init__(
        self,
        session: AgentSession,
        input: AgentInput,
        run_options: Mapping[str, Any],
        *,
        max_queued_events: int,
        overflow: OverflowPolicy,
    ) -> None:
        self._session = session
        self._input = input
        self._options = dict(run_options)
        self._sub = session.subscribe(max_queued_events=max_queued_events, overflow=overflow)
        self._controller = AbortController()
        self._task: asyncio.Task[RunResult] | None = None
        self._run_id: str | None = None
        self._result: RunResult | None = None
        self._finished = False

    @property
    def result(self) -> RunResult | None:
        """The run's result once it returned one (succeeded/suspended), else ``None``."""
        return self._result

    def _start(self) -> asyncio.Task[RunResult]:
        task = self._task
        if task is None:
            options = self._options
            external = options.get("signal")
            signal = self._controller.signal
            if external is not None:
                signal = AbortSignal.any(external, signal)
            options["signal"] = signal
            task = asyncio.get_running_loop().create_task(
                self._session.run(self._input, **options)
            )
            sub = self._sub
            task.add_done_callback(lambda _t: sub.close())
            self._task = task
        return task

    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        return self

    async def __anext__(self) -> AgentEvent:
        task = self._start()
        sub = self._sub
        while True:
            try:
                event = await sub.__anext__()
            except StopAsyncIteration:
                await self._finish(task)
                raise
            run_id = self._run_id
            if run_id is None:
                if type(event) is AgentStartedEvent:
                    self._run_id = event.run_id
                return event
            if getattr(event, "run_id", None) == run_id:
                return event

    async def _finish(self, task: asyncio.Task[RunResult]) -> None:
        if self._finished:
            return
        self._finished = True
        self._result = await task

    async def aclose(self) -> None:
        """Stop consuming: abort the run if still running and wait for it (REC-6)."""
        task = self._task
        self._finished = True
        await self._sub.aclose()
        if task is None:
            return
        if not task.done():
            self._controller.abort(AbortError("stream consumer closed"))
        try:
            result = await task
        except Exception:
            return
        self._result = result

    async def __aenter__(self) -> RunStream:
        self._start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __del__(self) -> None:
        task = self._task
        if task is None:
            return
        if task.done():
            _retrieve_exception(task)
        else:
            self._controller.abort(AbortError("stream consumer closed"))
            # REC-6: the aborted run's exception is suppressed — retrieved when it ends, so
            # asyncio does not log "Task exception was never retrieved"
            task.add_done_callback(_retrieve_exception)


def _retrieve_exception(task: asyncio.Task[Any]) -> None:
    """Mark a finished task's exception as retrieved (REC-6: suppressed, not logged)."""
    if not task.cancelled():
        task.exception()
