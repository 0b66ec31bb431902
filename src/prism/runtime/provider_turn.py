"""One provider attempt and the retry loop around it (RUN-15, RUN-16, RETRY-1..3, STEER-6, RUN-25).

:class:`ProviderTurnRunner` is built once per run leg. Its :meth:`~ProviderTurnRunner.generate`
is ``generate_with_retry``: it runs attempts ``1, 2, …`` of one already-redacted request and
returns the :class:`~prism.types.ProviderTurnResult` of the first attempt that succeeds.

One attempt (RUN-15):

1. charge ``max_provider_attempts`` and ``max_request_bytes`` (the byte count is computed
   incrementally by the caller, ARCH-15);
2. emit ``provider_turn_started``;
3. open a child abort signal linked to the run signal (soft interrupts abort only the child) and
   iterate ``provider.generate(request)``;
4. per event: raise if aborted, charge ``max_response_bytes``, fold it into the draft (CON-18) and
   emit ``message_started``/``message_delta`` (held back while output buffering is on, RUN-16);
5. rebuild streamed tool calls (PROV-5);
6. record usage exactly once (USAGE-1);
7. run output guardrails;
8. flush buffered message events;
9. emit ``provider_turn_finished``.

Prompt abort (RUN-25): while the attempt awaits the provider's next event, an abort listener
cancels the awaiting task; the attempt recognises its own cancellation (``Task.uncancel()``) and
fails with the abort error, while a cancellation from outside still propagates. This costs no task
or timer per event: one flag is set around the ``await``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, get_args

from prism._util import field_replacer, maybe_await
from prism.abort import AbortController, AbortSignal
from prism.errors import AbortError, GuardrailError, ProviderTurnError, RunLimitExceeded
from prism.events import (
    AgentEvent,
    MessageDeltaEvent,
    MessageStartedEvent,
    ProviderTurnFinishedEvent,
    ProviderTurnMetadata,
    ProviderTurnStartedEvent,
    RetryScheduledEvent,
)
from prism.guardrails import GuardrailContext, Guardrails, run_guardrails
from prism.limits import RunLimitTracker
from prism.providers.base import AIProvider, reconstruct_tool_call_deltas
from prism.redaction import SecretRedactor, error_to_error_info, redact_value
from prism.retry import (
    RetryContext,
    RetryDecision,
    RetryOptions,
    RetryPayload,
    RetryPolicy,
    create_default_retry_policy,
)
from prism.runtime._json_size import canonical_size
from prism.types import (
    ContentBlock,
    ErrorInfo,
    Message,
    ModelConfig,
    ProviderContentDelta,
    ProviderDone,
    ProviderErrorEvent,
    ProviderEvent,
    ProviderMessageStart,
    ProviderRequest,
    ProviderRequestOptions,
    ProviderStopReason,
    ProviderToolCall,
    ProviderToolCallDelta,
    ProviderTurnResult,
    ProviderUsage,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolCallDeltaContent,
    Usage,
    canonical_json,
    is_json_value,
)
from prism.usage import UsageAccumulator

_log = logging.getLogger("prism")

__all__ = [
    "EMPTY_TURN_RESULT",
    "PolicyContext",
    "ProviderRequestPolicy",
    "ProviderRequestPolicyResult",
    "ProviderTurnRunner",
    "SoftInterrupt",
    "event_bytes",
    "generate_with_retry",
]

EMPTY_TURN_RESULT: Final = ProviderTurnResult(
    content=(), calls=(), message_id=None, started=False, usage=None
)
"""What ``generate`` returns for an attempt ended by a steer soft interrupt (RUN-14 step 6)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyContext:
    """What a provider-request policy sees (RUN-14 step 2)."""

    request: ProviderRequest
    """The request as assembled (policies run before middleware and redaction)."""
    session_id: str
    """Session id."""
    run_id: str
    """Run id."""
    metadata: Mapping[str, Any]
    """Run metadata (read-only)."""
    signal: AbortSignal | None = None
    """The run's abort signal."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderRequestPolicyResult:
    """A policy's contribution to one request (RUN-14 step 2).

    ``options`` are merged into ``request.options`` (CON-15); ``secrets`` are collected to redact
    the ``ErrorInfo`` of failed attempts (RETRY-3).
    """

    options: ProviderRequestOptions | None = None
    """Options merged over the request's (``patch`` wins, CON-15)."""
    secrets: tuple[str, ...] = ()
    """Strings to redact from provider errors of this request."""

    def __post_init__(self) -> None:
        if not isinstance(self.secrets, tuple):
            object.__setattr__(self, "secrets", tuple(self.secrets))


ProviderRequestPolicy: TypeAlias = Callable[
    [PolicyContext],
    "ProviderRequestPolicyResult | None | Awaitable[ProviderRequestPolicyResult | None]",
]
"""``policy(ctx) -> ProviderRequestPolicyResult | None`` (sync or async, RUN-14 step 2)."""


class SoftInterrupt(Exception):
    """Abort reason of an attempt's child signal when a steer soft-interrupts it (STEER-6).

    Internal signal: never surfaced to callers.
    """

    def __init__(self) -> None:
        super().__init__("provider attempt interrupted by a steer")


# --------------------------------------------------------------------------- event byte counts

_encode_str: Callable[[str], str] = json.encoder.encode_basestring
_TEXT_DELTA_BASE: Final = len(
    canonical_json(ProviderContentDelta(content=TextContent(text="")).to_dict()).encode()
) - 2
_BARE_DONE_BYTES: Final = len(canonical_json(ProviderDone().to_dict()).encode())


def event_bytes(event: ProviderEvent) -> int:
    """UTF-8 length of ``canonical_json(event.to_dict())`` (RUN-15 step 4, LIM-4).

    Text deltas — the most frequent event — serialise only their text; a bare ``done`` is a
    constant. Everything else takes the full computation.

    Raises:
        TypeError / ValueError: the event holds non-JSON data.
    """
    kind = type(event)
    if kind is ProviderContentDelta:
        content = event.content  # type: ignore[union-attr]
        if type(content) is TextContent:
            return _TEXT_DELTA_BASE + len(_encode_str(content.text).encode())
    elif kind is ProviderDone and event.usage is None and event.stop_reason is None:  # type: ignore[union-attr]
        return _BARE_DONE_BYTES
    return canonical_size(event)


# --------------------------------------------------------------------------- internal failures


class _AttemptFailed(Exception):
    """A provider-side failure of one attempt (error event, provider exception, bad stream).

    ``retry=False`` marks a provider bug (``invalid_stream_chunk``): never retried, the retry
    policy is not asked.
    """

    def __init__(
        self,
        info: ErrorInfo,
        observable: bool,
        cause: BaseException | None,
        *,
        retry: bool = True,
    ) -> None:
        super().__init__(info.message)
        self.info = info
        self.observable = observable
        self.cause = cause
        self.retry = retry


_EVENT_TYPES: Final[tuple[type[Any], ...]] = get_args(ProviderEvent)
_EVENT_KINDS: Final = frozenset(_EVENT_TYPES)


def _as_event(event: object, started: bool) -> Any:
    """A stream item that is not exactly a provider event class (RUN-15 step 4).

    An instance of a subclass is rebuilt as its provider event class (so the fold sees the exact
    type); anything else (a dict, a str, ``None``) fails the attempt with
    ``ErrorInfo(name="ProviderTurnError", code="invalid_stream_chunk")`` — a provider bug, never
    retried.
    """
    for base in _EVENT_TYPES:
        if isinstance(event, base):
            return base(
                **{f.name: getattr(event, f.name) for f in dataclasses.fields(base) if f.init}
            )
    raise _AttemptFailed(
        ErrorInfo(
            name="ProviderTurnError",
            code="invalid_stream_chunk",
            message=(
                "provider stream yielded "
                f"{type(event).__module__}.{type(event).__qualname__}, not a provider event "
                "(ProviderMessageStart, ProviderContentDelta, ProviderToolCallDelta, "
                "ProviderToolCall, ProviderUsage, ProviderDone or ProviderErrorEvent)"
            ),
        ),
        started,
        None,
        retry=False,
    )


def _checked_call(event: ProviderToolCall) -> ProviderToolCall:
    """A provider's tool call whose ``arguments`` are not a JSON object of JSON values (NaN,
    Infinity, a set, a host object…) becomes a call with ``arguments={}`` and an
    ``invalid_json_arguments`` error, like malformed argument text (PROV-6): dispatch blocks it
    with a tool error the model can see, and the run goes on."""
    call = event.call
    arguments: Any = call.arguments
    if type(arguments) is dict:
        if not arguments or call.arguments_error is not None or is_json_value(arguments):
            return event
        detail = "arguments hold a value that is not JSON (e.g. NaN, Infinity or a host object)"
    elif isinstance(arguments, Mapping):
        return event  # sized and checked the full way
    else:
        detail = f"arguments are a {type(arguments).__name__}, not a JSON object"
    return ProviderToolCall(
        call=ToolCallContent(
            id=call.id,
            name=call.name,
            arguments={},
            arguments_error=ErrorInfo(
                name="ProviderTransportError",
                code="invalid_json_arguments",
                message=f"Invalid JSON arguments for tool {call.name}: {detail}",
            ),
            authority=call.authority,
        )
    )


def _http_status(code: object) -> int | None:
    if isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599:
        return code
    return None


_with_signal: Final = field_replacer(ProviderRequest, "signal")
"""The request with the attempt's child signal; the other fields are the valid request's own
(``signal`` is neither checked nor converted by ``ProviderRequest.__post_init__``)."""

_EMPTY_DRAFT: Final = Message("assistant", ())
"""The ``message_started`` draft of an attempt without a provider message id (frozen, shared)."""


def _always() -> bool:
    return True


def _set_none(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


Emit = Callable[[AgentEvent], None]
UsageSink = Callable[[int, int, Usage], None]
RetryHook = Callable[[RetryPayload], Awaitable[RetryPayload]]


class ProviderTurnRunner:
    """Runs provider attempts for one run leg (RUN-15, RETRY-1..3).

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
        accumulator: The leg's usage accumulator (USAGE-2).
        on_usage: Called once per attempt with usage, as ``(turn, attempt, usage)`` — the ledger
            ``provider_turn`` row (USAGE-1); ``None`` skips it.
        retry: Effective retry options, or ``None`` when retry is off (RUN-6).
        retry_random: Injectable jitter source for the default policy (tests).
        retry_hook: The ``retry`` middleware hook, or ``None`` when it has no handler.
        guardrails: Merged guardrails; only ``output`` is used here.
        redactor: The active redactor (error infos, guardrail records), or ``None``.
        buffer_output: Hold back message events until usage and guardrails passed (RUN-16).
    """

    __slots__ = (
        "_accumulator",
        "_buffer",
        "_cancel_pending",
        "_child",
        "_emit",
        "_first_attempt_metadata",
        "_generated",
        "_observed",
        "_guardrails",
        "_metadata",
        "_model",
        "_on_usage",
        "_policy",
        "_provider",
        "_provider_id",
        "_redactor",
        "_retry",
        "_retry_hook",
        "_retry_metadata",
        "_run_id",
        "_session_id",
        "_signal",
        "_soft_pending",
        "_task",
        "_tracker",
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
        retry: RetryOptions | None = None,
        retry_random: Callable[[], float] | None = None,
        retry_hook: RetryHook | None = None,
        guardrails: Guardrails | None = None,
        redactor: SecretRedactor | None = None,
        buffer_output: bool = False,
    ) -> None:
        self._provider = provider
        self._provider_id = str(getattr(provider, "id", "") or "")
        self._model = model
        self._session_id = session_id
        self._run_id = run_id
        self._metadata = metadata
        self._signal = signal
        self._emit = emit
        self._observed: Callable[[], bool] = observed if observed is not None else _always
        self._tracker = tracker
        self._accumulator = accumulator
        self._on_usage = on_usage
        self._retry = retry
        self._policy: RetryPolicy | None = None
        if retry is not None and retry.max_attempts > 1:
            self._policy = retry.policy or create_default_retry_policy(retry, random=retry_random)
        self._retry_metadata: Mapping[str, Any] | None = None
        if retry is not None and (retry.metadata or metadata):
            self._retry_metadata = {**metadata, **(retry.metadata or {})}
        self._retry_hook = retry_hook
        self._guardrails = guardrails if guardrails is not None and guardrails.output else None
        self._redactor = redactor
        self._buffer = buffer_output or self._guardrails is not None
        self._child: AbortController | None = None
        self._soft_pending = False
        self._generated = False
        self._task: asyncio.Task[Any] | None = None
        self._waiting = False
        self._cancel_pending = False
        self._first_attempt_metadata: ProviderTurnMetadata | None = None
        signal.add_listener(self._abort_child)  # the streaming attempt's link (RUN-15 step 3)

    # ----------------------------------------------------------------- soft interrupts (STEER-6)

    @property
    def generated(self) -> bool:
        """Whether the leg's first ``generate`` has returned (STEER-8)."""
        return self._generated

    def soft_interrupt(self) -> None:
        """Interrupt the streaming attempt, or set the pending flag when none streams (STEER-6)."""
        if self._child is not None:
            self._abort_child(SoftInterrupt())
        else:
            self._soft_pending = True

    def clear_soft_interrupt(self) -> None:
        """Clear a pending soft interrupt (``apply_pending_steers`` drained the queue, STEER-4)."""
        self._soft_pending = False

    # ----------------------------------------------------------------- generate_with_retry

    async def generate(
        self,
        request: ProviderRequest,
        *,
        request_bytes: int | None,
        turn: int,
        secrets: tuple[str, ...] = (),
    ) -> ProviderTurnResult:
        """Run attempts of one redacted request until one succeeds (RETRY-1..3).

        Args:
            request: The redacted request (its ``signal`` is replaced per attempt).
            request_bytes: ``len(canonical_json(request.to_dict()).encode())`` (ARCH-15).
            turn: Turn number for provider events (last ``turn_started``).
            secrets: Secrets returned by provider-request policies (RETRY-3).

        Returns:
            The successful attempt's result, or :data:`EMPTY_TURN_RESULT` after a soft interrupt.

        Raises:
            ProviderTurnError: ``ERR_PRISM_PROVIDER`` — the last attempt failed and was not
                retried; ``.info`` is its redacted ``ErrorInfo``.
            RunLimitExceeded: ``ERR_PRISM_RUN_LIMIT`` — a limit breached during an attempt.
            GuardrailError: an output guardrail did not allow the draft.
            Exception: the run signal's abort reason when the run was aborted.
        """
        attempt = 1
        while True:
            try:
                result = await self._attempt(request, request_bytes, turn, attempt, secrets)
            except _AttemptFailed as failure:
                info = failure.info
                if (
                    failure.observable
                    or not failure.retry
                    or self._policy is None
                    or self._signal.aborted
                ):
                    raise ProviderTurnError(info) from failure.cause
                decision = await self._decide(attempt, info)
                if not decision.retry:
                    raise ProviderTurnError(info) from failure.cause
                delay = float(decision.delay_ms or 0)
                self._emit(
                    RetryScheduledEvent(
                        session_id=self._session_id,
                        run_id=self._run_id,
                        attempt=attempt,
                        delay_ms=delay,
                        error=info,
                    )
                )
                await self._sleep(delay)
                attempt += 1
                continue
            self._generated = True
            return result

    async def _decide(self, attempt: int, info: ErrorInfo) -> RetryDecision:
        policy = self._policy
        assert policy is not None
        context = RetryContext(
            session_id=self._session_id,
            run_id=self._run_id,
            attempt=attempt,
            error=info,
            metadata=self._retry_metadata,
            signal=self._signal,
        )
        decision: Any = await maybe_await(policy.decide(context))
        if isinstance(decision, Mapping):
            decision = RetryDecision.coerce(decision)
        if not isinstance(decision, RetryDecision):
            raise TypeError(
                f"retry policy returned {type(decision).__name__}, not a RetryDecision"
            )
        hook = self._retry_hook
        if hook is not None:
            payload = await hook(RetryPayload(context=context, decision=decision))
            decision = payload.decision
        result: RetryDecision = decision
        return result

    async def _sleep(self, delay_ms: float) -> None:
        """Wait ``delay_ms``; an abort of the run signal ends the wait and raises (RETRY-2)."""
        signal = self._signal
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

    # ----------------------------------------------------------------- one attempt (RUN-15)

    def _abort_child(self, reason: object) -> None:
        """Abort the streaming attempt's child signal (RUN-15 step 3): the run signal's listener
        (registered once per runner) and soft interrupts (STEER-6) come here.

        The task awaiting the provider is woken first (RUN-25), then the child is aborted, which
        runs the provider's own listeners. Nothing happens between attempts or once the child is
        aborted.
        """
        controller = self._child
        if controller is None or controller.signal.aborted:
            return
        self._on_child_abort(reason)
        controller.abort(reason)

    def _on_child_abort(self, _reason: object) -> None:
        # RUN-25: wake the task awaiting the provider. Only while it awaits the next event, so a
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

    def _redact_info(self, info: ErrorInfo, secrets: tuple[str, ...]) -> ErrorInfo:
        redactor = self._redactor
        if redactor is not None:
            info = redactor.redact(info)
        extra = secrets + (self._retry.secrets if self._retry is not None else ())
        if extra:
            info = redact_value(info, extra)
        return info

    async def _attempt(
        self,
        request: ProviderRequest,
        request_bytes: int | None,
        turn: int,
        attempt: int,
        secrets: tuple[str, ...],
    ) -> ProviderTurnResult:
        self._tracker.charge_provider_attempt(request_bytes)
        st = _Attempt(self, turn, attempt)
        if self._observed():
            st.started_at = time.perf_counter()
            metadata = self._first_attempt_metadata
            if attempt != 1 or metadata is None:
                metadata = ProviderTurnMetadata(
                    provider_id=self._provider_id, model=self._model, attempt=attempt
                )
                if attempt == 1:
                    self._first_attempt_metadata = metadata  # frozen: shared by every turn
            self._emit(
                ProviderTurnStartedEvent(
                    session_id=self._session_id,
                    run_id=self._run_id,
                    turn=turn,
                    metadata=metadata,
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
        iterator: Any = None
        try:
            try:
                iterator = self._provider.generate(_with_signal(request, child))
                await self._stream(st, iterator.__anext__, child)
            finally:
                if iterator is not None:  # RUN-15: release the provider's response at once
                    aclose = getattr(iterator, "aclose", None)
                    if aclose is not None:
                        try:
                            await aclose()
                        except Exception as exc:  # must not mask the outcome
                            _log.warning(
                                "provider iterator close failed: %s", type(exc).__name__
                            )
        except asyncio.CancelledError:
            task = self._task
            if self._cancel_pending and task is not None:
                self._cancel_pending = False
                if task.uncancel() == 0:
                    return self._after_stop(st, child, secrets)
            st.record_usage_quietly()
            st.finished(ErrorInfo(name="CancelledError", message="run task cancelled"))
            raise
        except _AttemptFailed as failure:
            info = self._redact_info(failure.info, secrets)
            st.fail(info)
            raise _AttemptFailed(
                info, failure.observable, failure.cause, retry=failure.retry
            ) from None
        except (GuardrailError, RunLimitExceeded) as exc:
            st.fail(error_to_error_info(exc, self._redactor or ()))
            raise
        except Exception as exc:
            if child.aborted:
                return self._after_stop(st, child, secrets)
            info = self._redact_info(error_to_error_info(exc), secrets)
            st.fail(info)
            raise _AttemptFailed(info, st.started, exc) from None
        finally:
            self._child = None
            self._task = None
            self._waiting = False

        # Steps 6-9: usage, output guardrails, flush, provider_turn_finished.
        result = ProviderTurnResult(
            content=tuple(st.parts),
            calls=tuple(st.calls),
            message_id=st.message_id,
            started=st.started,
            usage=st.usage,
            stop_reason=st.stop_reason,
        )
        try:
            st.record_usage()
            guardrails = self._guardrails
            if guardrails is not None:
                context: GuardrailContext[Any] = GuardrailContext(
                    stage="output",
                    value=result,
                    session_id=self._session_id,
                    run_id=self._run_id,
                    metadata=self._metadata,
                    signal=self._signal,
                )
                outcome = await run_guardrails(
                    "output", guardrails, result, context, redactor=self._redactor, emit=self._emit
                )
                if outcome.terminal is not None:
                    raise GuardrailError(outcome.terminal)
        except (GuardrailError, RunLimitExceeded) as exc:
            st.fail(error_to_error_info(exc, self._redactor or ()))
            raise
        buffered = st.buffered
        if buffered:
            emit = self._emit
            for event in buffered:
                emit(event)
        if self._observed():
            st.finished(None)
        return result

    async def _stream(
        self, st: _Attempt, next_event: Callable[[], Awaitable[ProviderEvent]], child: AbortSignal
    ) -> None:
        """Read provider events until ``done``/exhaustion, folding them into ``st`` (RUN-15 4-5)."""
        charge = self._tracker.charge_response_bytes
        sid = self._session_id
        rid = self._run_id
        observed = self._observed
        event_kinds = _EVENT_KINDS
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
                event = _as_event(event, st.started)
                kind = type(event)
            if kind is ProviderToolCall:
                event = _checked_call(event)  # type: ignore[arg-type]
            charge(event_bytes(event))
            if kind is ProviderContentDelta:
                content: Any = event.content  # type: ignore[union-attr]
                if not st.started or not st.message_emitted:
                    st.start()
                if observed():
                    st.out(MessageDeltaEvent(session_id=sid, run_id=rid, content=content))
                ckind = type(content)
                if ckind is TextContent:
                    if st.open_kind != 1:
                        st.close_open()
                        st.open_kind = 1
                    st.buf.append(content.text)
                elif ckind is ThinkingContent:
                    st.thinking(content)
                else:
                    st.close_open()
                    st.parts.append(content)
            elif kind is ProviderToolCall:
                call = event.call  # type: ignore[union-attr]
                if not st.started or not st.message_emitted:
                    st.start()
                if observed():
                    st.out(MessageDeltaEvent(session_id=sid, run_id=rid, content=call))
                if st.open_kind:
                    st.close_open()
                st.parts.append(call)
                st.calls.append(call)
                st.call_events.append(event)
            elif kind is ProviderDone:
                usage = event.usage  # type: ignore[union-attr]
                if usage is not None:
                    st.usage = usage
                st.stop_reason = event.stop_reason  # type: ignore[union-attr]
                break
            elif kind is ProviderUsage:
                st.usage = event.usage  # type: ignore[union-attr]
            elif kind is ProviderToolCallDelta:
                if not st.started or not st.message_emitted:
                    st.start()
                if observed():
                    st.out(
                        MessageDeltaEvent(
                            session_id=sid,
                            run_id=rid,
                            content=ToolCallDeltaContent(
                                index=event.index,  # type: ignore[union-attr]
                                id=event.id,  # type: ignore[union-attr]
                                name=event.name,  # type: ignore[union-attr]
                                arguments_text=event.arguments_text,  # type: ignore[union-attr]
                                authority=event.authority,  # type: ignore[union-attr]
                            ),
                        )
                    )
                st.has_deltas = True
                st.call_events.append(event)
            elif kind is ProviderMessageStart:
                if not st.message_emitted:
                    st.message_id = event.message_id  # type: ignore[union-attr]
                st.start()
            elif kind is ProviderErrorEvent:
                raise _AttemptFailed(event.error, st.started, None)  # type: ignore[union-attr]
        if st.open_kind:
            st.close_open()
        if st.has_deltas:
            for call in reconstruct_tool_call_deltas(st.call_events):
                st.parts.append(call)
                st.calls.append(call)
                if observed():
                    st.out(MessageDeltaEvent(session_id=sid, run_id=rid, content=call))

    def _after_stop(
        self, st: _Attempt, child: AbortSignal, secrets: tuple[str, ...]
    ) -> ProviderTurnResult:
        """The child signal stopped the stream: a run abort fails the attempt with the abort
        error (RUN-25); a soft interrupt ends it cleanly with an empty result (STEER-6)."""
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


class _Attempt:
    """Mutable state of one provider attempt: the folded draft (CON-18) and bookkeeping."""

    __slots__ = (
        "attempt",
        "buf",
        "buffered",
        "call_events",
        "calls",
        "has_deltas",
        "message_emitted",
        "message_id",
        "open_kind",
        "parts",
        "runner",
        "started",
        "started_at",
        "stop_reason",
        "turn",
        "usage",
        "usage_recorded",
    )

    def __init__(self, runner: ProviderTurnRunner, turn: int, attempt: int) -> None:
        self.runner = runner
        self.turn = turn
        self.attempt = attempt
        self.started_at = 0.0
        self.buffered: list[AgentEvent] | None = [] if runner._buffer else None
        self.usage: Usage | None = None
        self.usage_recorded = False
        self.started = False
        self.message_emitted = False
        self.message_id: str | None = None
        self.stop_reason: ProviderStopReason | None = None
        self.parts: list[ContentBlock] = []
        self.calls: list[ToolCallContent] = []
        self.buf: list[str] = []
        self.open_kind = 0  # 0: none, 1: text, 2: thinking
        self.call_events: list[ProviderEvent] = []
        self.has_deltas = False

    def out(self, event: AgentEvent) -> None:
        """Emit a message event now, or hold it back while buffering (RUN-16)."""
        buffered = self.buffered
        if buffered is None:
            self.runner._emit(event)
        else:
            buffered.append(event)

    def start(self) -> None:
        """Mark the draft started; emit ``message_started`` once per attempt (EVT-10)."""
        self.started = True
        if not self.message_emitted:
            self.message_emitted = True
            runner = self.runner
            if runner._observed():
                self.out(
                    MessageStartedEvent(
                        session_id=runner._session_id,
                        run_id=runner._run_id,
                        message=(
                            _EMPTY_DRAFT
                            if self.message_id is None
                            else Message("assistant", (), id=self.message_id)
                        ),
                    )
                )

    def close_open(self) -> None:
        """Close the open coalesced text/thinking part (CON-18)."""
        kind = self.open_kind
        if kind:
            buf = self.buf
            if kind == 1:
                self.parts.append(TextContent("".join(buf)))
            else:
                self.parts.append(ThinkingContent("".join(buf)))
            buf.clear()
            self.open_kind = 0

    def thinking(self, content: ThinkingContent) -> None:
        """Fold one thinking delta (CON-18): coalesce until a signature closes the part; a
        ``redacted_data`` delta is a part of its own."""
        if content.redacted_data is not None:
            self.close_open()
            self.parts.append(content)
            return
        if self.open_kind != 2:
            self.close_open()
            self.open_kind = 2
        self.buf.append(content.text)
        if content.signature is not None:
            self.parts.append(ThinkingContent("".join(self.buf), signature=content.signature))
            self.buf.clear()
            self.open_kind = 0

    def record_usage(self) -> None:
        """USAGE-1: once per attempt — accumulate, ledger row, then charge the tracker."""
        if self.usage_recorded:
            return
        self.usage_recorded = True
        runner = self.runner
        usage = self.usage
        if usage is not None:
            runner._accumulator.add(usage)
            sink = runner._on_usage
            if sink is not None:
                sink(self.turn, self.attempt, usage)
        runner._tracker.charge_usage(usage)

    def record_usage_quietly(self) -> None:
        """Record usage during a cancellation; a breach must not hide the cancellation."""
        try:
            self.record_usage()
        except RunLimitExceeded:
            pass

    def finished(self, error: ErrorInfo | None) -> None:
        """Emit ``provider_turn_finished`` (RUN-15 step 9, EVT-10)."""
        runner = self.runner
        if not runner._observed():
            return
        latency = int((time.perf_counter() - self.started_at) * 1000) if self.started_at else 0
        runner._emit(
            ProviderTurnFinishedEvent(
                session_id=runner._session_id,
                run_id=runner._run_id,
                turn=self.turn,
                metadata=ProviderTurnMetadata(
                    provider_id=runner._provider_id,
                    model=runner._model,
                    attempt=self.attempt,
                    latency_ms=latency,
                    http_status=None if error is None else _http_status(error.code),
                ),
                usage=self.usage,
                error=error,
            )
        )

    def fail(self, info: ErrorInfo) -> None:
        """Record usage once and emit ``provider_turn_finished`` with ``info``; the event goes
        out even when recording usage breaches a limit."""
        try:
            self.record_usage()
        finally:
            self.finished(info)


async def generate_with_retry(
    runner: ProviderTurnRunner,
    request: ProviderRequest,
    *,
    request_bytes: int | None = None,
    turn: int = 1,
    secrets: tuple[str, ...] = (),
) -> ProviderTurnResult:
    """Run ``request`` through ``runner`` with retry (RETRY-1); see
    :meth:`ProviderTurnRunner.generate`.

    Args:
        runner: The leg's provider-turn runner.
        request: The redacted request.
        request_bytes: Its canonical UTF-8 size; ``None`` computes it here (O(request)).
        turn: Turn number for events.
        secrets: Provider-request policy secrets (RETRY-3).
    """
    if request_bytes is None:
        request_bytes = len(canonical_json(request.to_dict()).encode())
    return await runner.generate(request, request_bytes=request_bytes, turn=turn, secrets=secrets)

