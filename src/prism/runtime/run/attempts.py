"""The provider attempts of one request: retry, prompt abort, the stream read.

[`ProviderAttempts`][prism.runtime.run.attempts.ProviderAttempts] is built once per run leg; the loop context's ``generate`` hands it each
redacted request through [`ProviderAttempts.run()`][prism.runtime.run.attempts.ProviderAttempts.run], which runs attempts ``1, 2, …`` until one
succeeds or the retry policy gives up.

One attempt charges ``max_provider_attempts`` and ``max_request_bytes``, hands its request to
``on_request`` (the ledger's request row, when the ledger stores them), emits
``provider_turn_started``, opens a child abort signal linked to the run signal (a steer's soft
interrupt aborts only the child), reads ``provider.generate(request)`` event by event (each one
charged to ``max_response_bytes``, folded into the draft and emitted as ``message_delta`` — held
back while output buffering is on — after one ``message_started``, which waits for the first
delta: a message start alone is only folded), rebuilds streamed tool calls,
records usage exactly once, runs the output guardrails, flushes the held-back events and emits
``provider_turn_finished``. The draft and its events live in [`prism.runtime.run._attempt`][prism.runtime.run._attempt].

Prompt abort: while the attempt awaits the provider's next event, an abort listener
cancels the awaiting task; the attempt recognises its own cancellation (``Task.uncancel()``) and
fails with the abort error, while a cancellation from outside still propagates. This costs no task
or timer per event: one flag is set around the ``await``.

Between two attempts, [`decide_retry()`][prism.runtime.run.attempts.decide_retry] asks the retry policy (then the ``retry`` middleware
hook) and [`wait_retry_delay()`][prism.runtime.run.attempts.wait_retry_delay] waits out its delay.

Fallback: when the run's provider is a ``FallbackProvider`` (``prism.providers.fallback``), the
attempts hold one [`FallbackChain`][prism.runtime.run.attempts.FallbackChain] and stream from it: the chain streams from its current
link. Every request starts with the primary and the agent's model; after a provider's last attempt
failed (its retry budget spent, or an error the retry policy does not retry) the chain moves to
the next link when all of these hold:

* a next link exists;
* no content, thinking or tool-call delta had arrived (``observable`` is false): a stream that
  only opened (a message start, a real provider's first chunk) still falls back — and is
  retried — and subscribers never saw its start, which is held until the first delta; once part
  of an answer streamed, the error surfaces;
* the failure is a provider's, not a broken stream protocol (``retry`` is true);
* the run is not aborted (an abort or a cancellation never falls back);
* the chain's [`FallbackPolicy`][prism.providers.chain.FallbackPolicy] names the error.

The next link then serves the same request with its own model and a fresh retry budget; the
attempts' ``provider_id`` and ``model`` (the metadata of their events and usage rows) follow it.
A failed attempt keeps its own record: ``provider_turn_finished`` with the error, a usage row for
what it reported (a message start's input tokens), the failed provider's chat span.

When the turn fails after a fallback, the ``ProviderTurnError`` lists every provider tried
(``info.providers``: id, model, code, message, attempts; the message names them all) and chains
the last one's ``ProviderTurnError`` as its ``__cause__``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeAlias

from prism._util import maybe_await
from prism.abort import AbortController, AbortSignal
from prism.errors import AbortError, GuardrailError, ProviderTurnError, RunLimitExceeded
from prism.events import (
    AgentEvent,
    ProviderTurnMetadata,
    ProviderTurnStartedEvent,
    RetryScheduledEvent,
)
from prism.guardrails import GuardrailContext, Guardrails, run_guardrails
from prism.limits import RunLimitTracker
from prism.providers.base import AIProvider
from prism.providers.chain import FallbackPolicy, FallbackProvider
from prism.redaction import (
    SecretRedactor,
    error_to_error_info,
    redact_value,
    redacted_cause,
)
from prism.retry import (
    RetryContext,
    RetryDecision,
    RetryOptions,
    RetryPayload,
    RetryPolicy,
    create_default_retry_policy,
)
from prism.runtime.run._attempt import (
    EMPTY_TURN_RESULT,
    EVENT_KINDS,
    MESSAGE_KINDS,
    AttemptFailed,
    AttemptState,
    SoftInterrupt,
    as_event,
    checked_call,
    without_split_secret,
)
from prism.runtime.run._carry import PayloadCarry
from prism.runtime.run._json_size import canonical_size
from prism.types import (
    ErrorInfo,
    ModelConfig,
    ProviderErrorEvent,
    ProviderEvent,
    ProviderFailure,
    ProviderRequest,
    ProviderToolCall,
    ProviderTurnResult,
    Usage,
)
from prism.usage import UsageAccumulator

_log = logging.getLogger("prism")

__all__ = ["ProviderAttempts"]


# --------------------------------------------------------------------------- between attempts

RetryHook = Callable[[RetryPayload], Awaitable[RetryPayload]]
"""The ``retry`` middleware hook: may change the policy's decision."""


async def decide_retry(
    policy: RetryPolicy | None, context: RetryContext, *, hook: RetryHook | None
) -> RetryDecision:
    """The policy's decision for the failed attempt described by ``context``, after ``hook``.

    Raises:
        TypeError: the policy returned neither a ``RetryDecision`` nor a mapping of one.
    """
    assert policy is not None
    decision: Any = await maybe_await(policy.decide(context))
    if isinstance(decision, Mapping):
        decision = RetryDecision.coerce(decision)
    if not isinstance(decision, RetryDecision):
        raise TypeError(f"retry policy returned {type(decision).__name__}, not a RetryDecision")
    if hook is not None:
        payload = await hook(RetryPayload(context=context, decision=decision))
        decision = payload.decision
    result: RetryDecision = decision
    return result


def _set_none(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def wait_retry_delay(signal: AbortSignal, delay_ms: float) -> None:
    """Wait ``delay_ms`` milliseconds; an abort of ``signal`` ends the wait and raises.

    Raises:
        Exception: the signal's abort reason, when it is aborted before or during the wait.
    """
    signal.throw_if_aborted()
    if delay_ms > 0:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        handle = loop.call_later(delay_ms / 1000.0, _set_none, fut)
        remove = signal.add_listener(lambda _reason: _set_none(fut))
        try:
            await fut
        finally:
            handle.cancel()
            remove()
    signal.throw_if_aborted()


# --------------------------------------------------------------------------- the fallback chain

ChainLink: TypeAlias = tuple[AIProvider, str, ModelConfig]
"""One link: the provider, its id and the model it is asked for."""


@dataclasses.dataclass(slots=True, eq=False, repr=False)
class FallbackChain:
    """The links of a fallback provider and the one serving the current request.

    It is itself a provider (``id`` and ``generate`` are the current link's).
    """

    links: tuple[ChainLink, ...]
    """The primary, then the fallbacks in order."""
    policy: FallbackPolicy
    """Which failures move to the next link."""
    redactor: SecretRedactor | None = None
    """Redacts the fallbacks' models in requests."""
    index: int = dataclasses.field(default=0, init=False)
    """The link serving the current request (0: the primary)."""
    id: str = dataclasses.field(init=False)
    """The current link's provider id."""

    def __post_init__(self) -> None:
        self.id = self.links[0][1]

    @classmethod
    def of(
        cls, provider: AIProvider, model: ModelConfig, redactor: SecretRedactor | None
    ) -> FallbackChain | None:
        """The chain of ``provider`` when it is a ``FallbackProvider`` (its primary serving
        ``model``), else ``None``. ``redactor`` redacts the fallbacks' models in requests."""
        if not isinstance(provider, FallbackProvider):
            return None
        links: list[ChainLink] = [(provider.primary, provider.id, model)]
        for link in provider.fallbacks:
            links.append((link.provider, str(getattr(link.provider, "id", "") or ""), link.model))
        return cls(tuple(links), provider.policy, redactor)

    def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """The current link's stream."""
        return self.links[self.index][0].generate(request)

    def falls_back(self, failure: Any, signal: AbortSignal) -> bool:
        """Whether the failed attempt ``failure`` (an ``AttemptFailed``) moves to the next link."""
        return (
            self.index + 1 < len(self.links)
            and not failure.observable
            and failure.retry
            and not signal.aborted
            and self.policy.applies(failure.info)
        )

    def failed(
        self, tried: list[ProviderFailure] | None, info: ErrorInfo, attempts: int
    ) -> list[ProviderFailure]:
        """``tried`` with the current link's failure appended: its last attempt's (redacted)
        ``info`` after ``attempts`` attempts."""
        _, provider_id, model = self.links[self.index]
        failure = ProviderFailure(
            provider_id=provider_id,
            model=model.model,
            message=info.message,
            code=info.code,
            attempts=attempts,
        )
        return [failure] if tried is None else [*tried, failure]

    @staticmethod
    def all_failed(tried: list[ProviderFailure], last: ErrorInfo) -> ErrorInfo:
        """The error of a turn every provider tried failed: ``last``'s name, code and retry hint,
        a message naming each provider with its model, code and message, and the list itself
        as ``providers``."""
        parts = []
        for failure in tried:
            code = "" if failure.code is None else f" {failure.code}"
            parts.append(f"{failure.provider_id} ({failure.model}){code}: {failure.message}")
        return ErrorInfo(
            message=f"all {len(tried)} providers tried failed: {'; '.join(parts)}",
            name=last.name,
            code=last.code,
            retry_after_ms=last.retry_after_ms,
            cause=last.message,
            providers=tuple(tried),
        )

    def switch(self, attempts: Any, index: int, request: ProviderRequest) -> ProviderRequest:
        """Make link ``index`` serve: ``attempts.provider_id``/``model`` become its own, and the
        returned request asks for its model (redacted like the rest of the request; link 0 is
        the primary, whose requests are the run's own)."""
        self.index = index
        _, provider_id, model = self.links[index]
        self.id = attempts.provider_id = provider_id
        attempts.model = model
        if index == 0:
            return request
        redactor = self.redactor
        if redactor is not None:
            model = redactor.redact(model)
        return dataclasses.replace(request, model=model)


# --------------------------------------------------------------------------- the attempts


def _always() -> bool:
    return True


def _with_signal(request: ProviderRequest, signal: AbortSignal) -> ProviderRequest:
    """``request`` carrying the attempt's ``signal``: built field by field (one constructor call,
    where ``dataclasses.replace`` reads the fields generically first); a subclass is replaced."""
    if type(request) is not ProviderRequest:
        return dataclasses.replace(request, signal=signal)
    return ProviderRequest(
        request.model,
        request.messages,
        request.tools,
        request.context,
        request.options,
        request.metadata,
        signal,
    )


def _drop(event: AgentEvent) -> None:
    return None


Emit = Callable[[AgentEvent], None]
UsageSink = Callable[[int, int, Usage], None]
RequestSink = Callable[[int, int, ProviderRequest], None]


class ProviderAttempts:
    """Runs provider attempts for one run leg.

    Args:
        provider: The resolved provider.
        model: The effective model (for ``ProviderTurnMetadata``).
        session_id: Session id stamped on events.
        run_id: Run id stamped on events.
        metadata: Run metadata (retry contexts, guardrail contexts).
        signal: The run's abort signal.
        emit: Emits a runtime event (already carrying ids) to observers.
        observed: Returns whether anything observes events; when it returns ``False`` the
            attempt skips building event objects (``None``: always build them).
        tracker: The run's limit tracker.
        accumulator: The leg's usage accumulator.
        on_usage: Called once per attempt with usage, as ``(turn, attempt, usage)`` — the ledger
            ``provider_turn`` row; ``None`` skips it.
        on_request: Called when an attempt starts, as ``(turn, attempt, request)`` with the
            redacted request the provider is handed (a fallback's model in it) — the ledger's
            request row; ``None`` skips it.
        retry: Effective retry options, or ``None`` when retry is off.
        retry_random: Injectable jitter source for the default policy (tests).
        retry_policy: The built-in policy of ``retry``, when one is already built (shared by
            an agent's runs); ``None`` builds it here.
        retry_hook: The ``retry`` middleware hook, or ``None`` when it has no handler.
        guardrails: Merged guardrails; only ``output`` is used here.
        redactor: The active redactor (error infos, guardrail records), or ``None``.
        buffer_output: Hold back message events until usage and guardrails passed.
        carry: Checks, copies and measures each streamed tool call's arguments in one walk and
            carries the copy and the size on ([`prism.runtime.run._carry`][prism.runtime.run._carry]); ``None`` (a run
            with a redactor): the arguments are checked and measured separately.
    """

    __slots__ = (
        "accumulator",
        "buffer_output",
        "_cancel_pending",
        "carry",
        "_chain",
        "_child",
        "emit",
        "_generated",
        "observed",
        "_guardrails",
        "held_secrets",
        "_metadata",
        "model",
        "on_request",
        "on_usage",
        "_policy",
        "_provider",
        "provider_id",
        "_redactor",
        "_retry",
        "_retry_hook",
        "_retry_metadata",
        "run_id",
        "session_id",
        "_signal",
        "_soft_pending",
        "_task",
        "tracker",
        "_waiting",
    )

    def __init__(
        self,
        *,
        provider: AIProvider,
        model: ModelConfig,
        session_id: str,
        run_id: str,
        metadata: Mapping[str, Any],
        signal: AbortSignal,
        emit: Emit,
        tracker: RunLimitTracker,
        observed: Callable[[], bool] | None = None,
        accumulator: UsageAccumulator,
        on_usage: UsageSink | None = None,
        on_request: RequestSink | None = None,
        retry: RetryOptions | None = None,
        retry_random: Callable[[], float] | None = None,
        retry_policy: RetryPolicy | None = None,
        retry_hook: RetryHook | None = None,
        guardrails: Guardrails | None = None,
        redactor: SecretRedactor | None = None,
        buffer_output: bool = False,
        carry: PayloadCarry | None = None,
    ) -> None:
        self._chain = chain = FallbackChain.of(provider, model, redactor)
        self._provider = provider = provider if chain is None else chain  # streams from a link
        self.provider_id = str(getattr(provider, "id", "") or "")
        self.model = model
        self.session_id = session_id
        self.run_id = run_id
        self._metadata = metadata
        self._signal = signal
        self.emit = emit
        self.observed: Callable[[], bool] = observed if observed is not None else _always
        self.tracker = tracker
        self.accumulator = accumulator
        self.on_usage = on_usage
        self.on_request = on_request
        self._retry = retry
        self._policy: RetryPolicy | None = None
        if retry is not None and retry.max_attempts > 1:
            self._policy = (
                retry.policy
                or retry_policy
                or create_default_retry_policy(retry, random=retry_random)
            )
        self._retry_metadata: Mapping[str, Any] | None = None
        if retry is not None and (retry.metadata or metadata):
            self._retry_metadata = {**metadata, **(retry.metadata or {})}
        self._retry_hook = retry_hook
        self._guardrails = guardrails if guardrails is not None and guardrails.output else None
        self._redactor = redactor
        secrets = redactor.secrets if redactor is not None else ()
        # all, in order, once one can be split (a 1-character secret changes the later passes)
        self.held_secrets = secrets if any(len(secret) > 1 for secret in secrets) else ()
        self.buffer_output = buffer_output or self._guardrails is not None
        self.carry = carry
        self._child: AbortController | None = None
        self._soft_pending = False
        self._generated = False
        self._task: asyncio.Task[Any] | None = None
        self._waiting = False
        self._cancel_pending = False

    def close(self) -> None:
        """The leg is over: drop the callbacks into the run's context (later events are
        dropped), so the finished run holds no reference cycle through this object and is freed
        by reference counting. Idempotent. (The link from the run's signal exists only while an
        attempt streams.)"""
        self.emit, self.observed = _drop, _always

    # ----------------------------------------------------------------- soft interrupts

    @property
    def generated(self) -> bool:
        """Whether the leg's first ``generate`` has returned."""
        return self._generated

    def soft_interrupt(self) -> None:
        """Interrupt the streaming attempt, or set the pending flag when none streams."""
        if self._child is not None:
            self._abort_child(SoftInterrupt())
        else:
            self._soft_pending = True

    def clear_soft_interrupt(self) -> None:
        """Clear a pending soft interrupt (``apply_pending_steers`` drained the queue)."""
        self._soft_pending = False

    # ----------------------------------------------------------------- the attempts of one request

    async def run(
        self,
        request: ProviderRequest,
        *,
        request_bytes: int | None,
        turn: int,
        secrets: tuple[str, ...] = (),
    ) -> ProviderTurnResult:
        """Run attempts of one redacted request until one succeeds.

        Args:
            request: The redacted request (its ``signal`` is replaced per attempt).
            request_bytes: ``len(canonical_json(request.to_dict()).encode())``.
            turn: Turn number for provider events (last ``turn_started``).
            secrets: Secrets returned by provider-request policies.

        Returns:
            The successful attempt's result, or [`EMPTY_TURN_RESULT`][prism.runtime.run.attempts.EMPTY_TURN_RESULT] after a soft interrupt.

        Raises:
            ProviderTurnError: ``ERR_PRISM_PROVIDER`` — the last attempt failed and was not
                retried nor taken over by a fallback ([`FallbackChain`][prism.runtime.run.attempts.FallbackChain]). After a fallback,
                its ``info.providers`` lists every provider tried and its ``__cause__`` is the
                last one's ``ProviderTurnError`` ([`FallbackChain.all_failed()`][prism.runtime.run.attempts.FallbackChain.all_failed]).
            RunLimitExceeded: ``ERR_PRISM_RUN_LIMIT`` — a limit breached during an attempt.
            GuardrailError: an output guardrail did not allow the draft.
            Exception: the run signal's abort reason when the run was aborted.
        """
        attempt = 1
        tried: list[ProviderFailure] | None = None  # the chain's failed links, once one failed
        if (chain := self._chain) is not None and chain.index:
            request = chain.switch(self, 0, request)  # each request starts with the primary
        while True:
            failure: AttemptFailed | None = None
            try:
                result = await self._attempt(request, request_bytes, turn, attempt, secrets)
            except AttemptFailed as exc:
                failure = exc
            if failure is None:
                self._generated = True
                return result
            # Outside the handler: the provider error's only link is the redacted cause.
            info = failure.info
            decision = None
            if (
                failure.retry
                and not failure.observable
                and self._policy is not None
                and (not self._signal.aborted)
            ):
                decision = await decide_retry(
                    self._policy,
                    RetryContext(
                        session_id=self.session_id,
                        run_id=self.run_id,
                        attempt=attempt,
                        error=info,
                        metadata=self._retry_metadata,
                        signal=self._signal,
                    ),
                    hook=self._retry_hook,
                )
            if decision is None or not decision.retry:
                if chain is not None:
                    if chain.falls_back(failure, self._signal):
                        tried = chain.failed(tried, info, attempt)
                        request, attempt = chain.switch(self, chain.index + 1, request), 1
                        continue
                    if tried is not None:  # every provider tried failed
                        last = ProviderTurnError(info)
                        last.__cause__ = failure.cause
                        combined = chain.all_failed(chain.failed(tried, info, attempt), info)
                        raise ProviderTurnError(self._redact_info(combined, secrets)) from last
                raise ProviderTurnError(info) from failure.cause
            delay = float(decision.delay_ms or 0)
            self.emit(
                RetryScheduledEvent(
                    session_id=self.session_id,
                    run_id=self.run_id,
                    attempt=attempt,
                    delay_ms=delay,
                    error=info,
                )
            )
            await wait_retry_delay(self._signal, delay)
            attempt += 1

    # ----------------------------------------------------------------- one attempt

    def _abort_child(self, reason: object) -> None:
        """Abort the streaming attempt's child signal: the run signal's listener
        (registered for the time of each attempt) and soft interrupts come here.

        The task awaiting the provider is woken first, then the child is aborted, which
        runs the provider's own listeners. Nothing happens between attempts or once the child is
        aborted.
        """
        controller = self._child
        if controller is None or controller.signal.aborted:
            return
        self._on_child_abort(reason)
        controller.abort(reason)

    def _on_child_abort(self, _reason: object) -> None:
        # wake the task awaiting the provider. Only while it awaits the next event, so a
        # cancellation never lands in code that does not expect it.
        task = self._task
        if self._waiting and task is not None and not self._cancel_pending:
            self._cancel_pending = True
            task.cancel()

    async def _consume_cancel(self) -> None:
        """Swallow our own cancellation that was requested but not delivered (rare race)."""
        task = self._task
        assert task is not None
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            self._cancel_pending = False
            if task.uncancel() > 0:
                raise
            return
        self._cancel_pending = False
        if task.cancelling() > 0:
            task.uncancel()

    def _extra_secrets(self, secrets: tuple[str, ...]) -> tuple[str, ...]:
        return secrets + (self._retry.secrets if self._retry is not None else ())

    def _redact_info(self, info: ErrorInfo, secrets: tuple[str, ...]) -> ErrorInfo:
        redactor = self._redactor
        if redactor is not None:
            info = redactor.redact(info)
        extra = self._extra_secrets(secrets)
        if extra:
            info = redact_value(info, extra)
        return info

    def _clean_cause(
        self, cause: BaseException | None, secrets: tuple[str, ...]
    ) -> BaseException | None:
        """The provider's exception, or its redacted stand-in when it holds a secret."""
        if cause is None:
            return None
        return redacted_cause(cause, self._redactor, self._extra_secrets(secrets))

    async def _attempt(
        self,
        request: ProviderRequest,
        request_bytes: int | None,
        turn: int,
        attempt: int,
        secrets: tuple[str, ...],
    ) -> ProviderTurnResult:
        self.tracker.charge_provider_attempt(request_bytes)
        on_request = self.on_request
        if on_request is not None:
            on_request(turn, attempt, request)
        st = AttemptState(self, turn, attempt)
        if self.observed():
            st.started_at = time.perf_counter()
            self.emit(
                ProviderTurnStartedEvent(
                    session_id=self.session_id,
                    run_id=self.run_id,
                    turn=turn,
                    metadata=ProviderTurnMetadata(
                        provider_id=self.provider_id, model=self.model, attempt=attempt
                    ),
                )
            )
        controller = AbortController()
        child = controller.signal
        run_signal = self._signal
        if run_signal.aborted:
            controller.abort(run_signal.reason)
        if self._soft_pending and self._generated:
            self._soft_pending = False
            controller.abort(SoftInterrupt())
        self._child = controller  # run aborts and soft interrupts reach it via _abort_child
        self._task = asyncio.current_task()
        # linked only while the attempt streams: between attempts and while tools run, a run
        # holds no listener objects on its signal
        unlink = run_signal.add_listener(self._abort_child)
        iterator: Any = None
        try:
            try:
                iterator = self._provider.generate(_with_signal(request, child))
                await self._stream(st, iterator.__anext__, child)
            finally:
                if iterator is not None:  # release the provider's response at once
                    aclose = getattr(iterator, "aclose", None)
                    if aclose is not None:
                        try:
                            await aclose()
                        except Exception as exc:  # must not mask the outcome
                            _log.warning("provider iterator close failed: %s", type(exc).__name__)
        except asyncio.CancelledError:
            task = self._task
            if self._cancel_pending and task is not None:
                self._cancel_pending = False
                if task.uncancel() == 0:
                    return self._after_stop(st, child, secrets)
            st.record_usage_quietly()
            st.finished(ErrorInfo(name="CancelledError", message="run task cancelled"))
            raise
        except AttemptFailed as failure:
            info = self._redact_info(failure.info, secrets)
            st.fail(info)
            raise AttemptFailed(
                info,
                failure.observable,
                self._clean_cause(failure.cause, secrets),
                retry=failure.retry,
            ) from None
        except (GuardrailError, RunLimitExceeded) as exc:
            st.fail(error_to_error_info(exc, self._redactor or ()))
            raise
        except Exception as exc:
            if child.aborted:
                return self._after_stop(st, child, secrets)
            info = self._redact_info(error_to_error_info(exc), secrets)
            st.fail(info)
            raise AttemptFailed(info, st.fold.streamed, self._clean_cause(exc, secrets)) from None
        finally:
            unlink()
            self._child = None
            self._task = None
            self._waiting = False

        # Usage (priced), output guardrails, flush, provider_turn_finished.
        try:
            st.record_usage()
            result = st.fold.result()
            guardrails = self._guardrails
            if guardrails is not None:
                context: GuardrailContext[Any] = GuardrailContext(
                    stage="output",
                    value=result,
                    session_id=self.session_id,
                    run_id=self.run_id,
                    metadata=self._metadata,
                    signal=self._signal,
                )
                outcome = await run_guardrails(
                    "output", guardrails, result, context, redactor=self._redactor, emit=self.emit
                )
                if outcome.terminal is not None:
                    raise GuardrailError(outcome.terminal)
        except (GuardrailError, RunLimitExceeded) as exc:
            st.fail(error_to_error_info(exc, self._redactor or ()))
            raise
        buffered = st.buffered
        if buffered:
            emit = self.emit
            for event in buffered:
                emit(event)
        if self.observed():
            st.finished(None)
        return result

    async def _stream(
        self,
        st: AttemptState,
        next_event: Callable[[], Awaitable[ProviderEvent]],
        child: AbortSignal,
    ) -> None:
        """Read provider events until ``done`` or exhaustion. Each event is checked, charged to
        ``max_response_bytes``, announced as message events and added to the attempt's fold
        (``message_started`` waits for the first delta: a message start alone is only folded). At
        the end the held channels release what they hold, the start of a message that had no
        delta goes out, then the calls rebuilt from fragments (each without a piece of a secret
        its invalid-arguments excerpt cut) are announced."""
        charge = self.tracker.charge_response_bytes
        fold = st.fold
        add = fold.add
        announce = st.announce
        event_kinds = EVENT_KINDS
        message_kinds = MESSAGE_KINDS
        held = self.held_secrets
        carry = self.carry
        while True:
            if child.aborted:
                child.throw_if_aborted()
            self._waiting = True
            try:
                event = await next_event()
            except StopAsyncIteration:
                break
            finally:
                self._waiting = False
            if self._cancel_pending:
                await self._consume_cancel()
                child.throw_if_aborted()
            kind = type(event)
            if kind not in event_kinds:
                event = as_event(event, fold.streamed)
                kind = type(event)
            if kind is ProviderToolCall:
                size = -1 if carry is None else carry.call_size(event)  # type: ignore[arg-type]
                if size < 0:
                    event = checked_call(event, held)  # type: ignore[arg-type]
                    size = canonical_size(event)
                charge(size)
            else:
                charge(canonical_size(event))
            if kind in message_kinds:
                if self.observed():
                    announce(event)
            elif kind is ProviderErrorEvent:
                raise AttemptFailed(event.error, fold.streamed, None)  # type: ignore[union-attr]
            if add(event):
                break
        if st.held is not None:
            st.flush_held()
        rebuilt = fold.finish(
            check=(lambda call: without_split_secret(call, held)) if held else None
        )
        if fold.started and not st.opened and self.observed():
            st.open_message()  # a message without a delta: its held start goes out at its end
        for call in rebuilt:
            st.announce_call(call)

    def _after_stop(
        self, st: AttemptState, child: AbortSignal, secrets: tuple[str, ...]
    ) -> ProviderTurnResult:
        """The child signal stopped the stream: a run abort fails the attempt with the abort
        error; a soft interrupt ends it cleanly with an empty result."""
        run_signal = self._signal
        if run_signal.aborted or not isinstance(child.reason, SoftInterrupt):
            reason = run_signal.reason if run_signal.aborted else child.reason
            st.fail(self._redact_info(error_to_error_info(reason), secrets))
            if isinstance(reason, BaseException):
                raise reason
            raise AbortError(str(reason))
        st.record_usage()
        st.finished(None)
        self._generated = True
        return EMPTY_TURN_RESULT
