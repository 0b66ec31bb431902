"""One provider attempt's state: the fold of its events, its message events, usage, and the
stream checks.

[`AttemptState`][prism.runtime.run._attempt.AttemptState] is created by [`ProviderAttempts`][prism.runtime.run.attempts.ProviderAttempts] for each
attempt. It holds the attempt's [`StreamFold`][prism.providers.stream_fold.StreamFold] (the one fold of
provider events, shared with ``fold_provider_events``), emits or buffers the message events
(with a redactor's secrets, deltas pass the held channels of
[`prism.runtime.run._stream_redaction`][prism.runtime.run._stream_redaction]), records usage exactly once and emits
``provider_turn_finished``. The helpers below check the
items a provider stream yields.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol, get_args

from prism.errors import RunLimitExceeded
from prism.events import (
    AgentEvent,
    MessageDeltaEvent,
    MessageStartedEvent,
    ProviderTurnFinishedEvent,
    ProviderTurnMetadata,
)
from prism.limits import RunLimitTracker
from prism.providers.stream_fold import StreamFold
from prism.runtime.run._stream_redaction import StreamRedaction, held_length
from prism.types import (
    ErrorInfo,
    Message,
    ModelConfig,
    ProviderContentDelta,
    ProviderEvent,
    ProviderToolCall,
    ProviderToolCallDelta,
    ProviderTurnResult,
    ToolCallContent,
    ToolCallDeltaContent,
    Usage,
    is_json_value,
)
from prism.usage import UsageAccumulator

__all__ = [
    "EMPTY_TURN_RESULT",
    "EVENT_KINDS",
    "MESSAGE_KINDS",
    "AttemptFailed",
    "AttemptSinks",
    "AttemptState",
    "SoftInterrupt",
    "as_event",
    "checked_call",
    "without_split_secret",
]

EMPTY_TURN_RESULT: Final = ProviderTurnResult(
    content=(), calls=(), message_id=None, started=False, usage=None
)
"""What ``generate`` returns for an attempt ended by a steer soft interrupt."""


class SoftInterrupt(Exception):
    """Abort reason of an attempt's child signal when a steer soft-interrupts it.

    Internal signal: never surfaced to callers.
    """

    def __init__(self) -> None:
        super().__init__("provider attempt interrupted by a steer")


class AttemptFailed(Exception):
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


EVENT_TYPES: Final[tuple[type[Any], ...]] = get_args(ProviderEvent)
EVENT_KINDS: Final = frozenset(EVENT_TYPES)
MESSAGE_KINDS: Final = frozenset((ProviderContentDelta, ProviderToolCall, ProviderToolCallDelta))
"""The provider events that add to the message (announced as message events). A message start
is not one: only the fold sees it, and ``message_started`` is held until the first of these
([`AttemptState.announce()`][prism.runtime.run._attempt.AttemptState.announce])."""


def as_event(event: object, observable: bool) -> Any:
    """A stream item that is not exactly a provider event class.

    An instance of a subclass is rebuilt as its provider event class (so the fold sees the exact
    type); anything else (a dict, a str, ``None``) fails the attempt with
    ``ErrorInfo(name="ProviderTurnError", code="invalid_stream_chunk")`` — a provider bug, never
    retried (``observable``: whether a delta had already arrived).
    """
    for base in EVENT_TYPES:
        if isinstance(event, base):
            return base(
                **{f.name: getattr(event, f.name) for f in dataclasses.fields(base) if f.init}
            )
    raise AttemptFailed(
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
        observable,
        None,
        retry=False,
    )


def checked_call(event: ProviderToolCall, secrets: tuple[str, ...] = ()) -> ProviderToolCall:
    """A provider's tool call whose ``arguments`` are not a JSON object of JSON values (NaN,
    Infinity, a set, a host object…) becomes a call with ``arguments={}`` and an
    ``invalid_json_arguments`` error showing the first 512 bytes of their ``repr``, like
    malformed argument text: dispatch blocks it with a tool error the model can see, and the run
    goes on. An ``arguments_error`` message loses a tail that starts one of ``secrets``
    ([`without_split_secret()`][prism.runtime.run._attempt.without_split_secret])."""
    call = event.call
    arguments: Any = call.arguments
    if type(arguments) is dict:
        if call.arguments_error is not None:
            checked = without_split_secret(call, secrets)
            return event if checked is call else ProviderToolCall(call=checked)
        if not arguments or is_json_value(arguments):
            return event
        detail = "arguments hold a value that is not JSON (e.g. NaN, Infinity or a host object)"
    elif isinstance(arguments, Mapping):
        return event  # sized and checked the full way
    else:
        detail = f"arguments are a {type(arguments).__name__}, not a JSON object"
    shown = repr(arguments).encode("utf-8")
    excerpt = shown[:512].decode("utf-8", "ignore")
    if len(shown) > 512:
        excerpt = f"(first 512 of {len(shown)} bytes) {excerpt}"
    checked = ToolCallContent(
        id=call.id,
        name=call.name,
        arguments={},
        arguments_error=ErrorInfo(
            name="ProviderTransportError",
            code="invalid_json_arguments",
            message=f"Invalid JSON arguments for tool {call.name}: {detail}; arguments: {excerpt}",
        ),
        authority=call.authority,
    )
    return ProviderToolCall(call=without_split_secret(checked, secrets))


def without_split_secret(call: ToolCallContent, secrets: tuple[str, ...]) -> ToolCallContent:
    """``call``, or a copy whose ``arguments_error`` message loses a tail that starts a secret.

    The message of invalid argument text ends with the first 512 bytes of that text; a cut
    inside a secret would leave a piece that redaction cannot recognise, so that piece goes.
    """
    error = call.arguments_error
    if error is None or not secrets:
        return call
    keep = held_length(error.message, secrets)
    if not keep:
        return call
    return ToolCallContent(
        id=call.id,
        name=call.name,
        arguments=call.arguments,
        arguments_error=dataclasses.replace(error, message=error.message[:-keep]),
        authority=call.authority,
    )


def _http_status(code: object) -> int | None:
    if isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599:
        return code
    return None


_EMPTY_DRAFT: Final = Message("assistant", ())
"""The ``message_started`` draft of an attempt without a provider message id (frozen, shared)."""


class AttemptSinks(Protocol):
    """Where an attempt's events, usage and charges go (the leg's provider attempts)."""

    buffer_output: bool
    session_id: str
    run_id: str
    provider_id: str
    model: ModelConfig
    accumulator: UsageAccumulator
    tracker: RunLimitTracker
    on_usage: Callable[[int, int, Usage], None] | None
    emit: Callable[[AgentEvent], None]
    observed: Callable[[], bool]
    held_secrets: tuple[str, ...]


class AttemptState:
    """Mutable state of one provider attempt: the fold of its events and bookkeeping."""

    __slots__ = (
        "attempt",
        "buffered",
        "fold",
        "held",
        "opened",
        "runner",
        "started_at",
        "turn",
        "usage_recorded",
    )

    def __init__(self, runner: AttemptSinks, turn: int, attempt: int) -> None:
        self.runner = runner
        self.turn = turn
        self.attempt = attempt
        self.started_at = 0.0
        self.buffered: list[AgentEvent] | None = [] if runner.buffer_output else None
        self.usage_recorded = False
        self.opened = False
        """Whether ``message_started`` went out (held until the first delta)."""
        self.fold = StreamFold()
        secrets = runner.held_secrets
        self.held = StreamRedaction(secrets) if secrets else None

    def out(self, event: AgentEvent) -> None:
        """Emit a message event now, or hold it back while buffering."""
        buffered = self.buffered
        if buffered is None:
            self.runner.emit(event)
        else:
            buffered.append(event)

    def delta(self, content: Any) -> None:
        """Emit the ``message_delta`` of streamed ``content`` — through the held channels when
        the redactor has secrets, so a secret split across chunks is never emitted in pieces."""
        runner = self.runner
        held = self.held
        for piece in (content,) if held is None else held.deltas(content):
            self.out(
                MessageDeltaEvent(session_id=runner.session_id, run_id=runner.run_id, content=piece)
            )

    def flush_held(self) -> None:
        """Emit the ``message_delta`` events of the text the channels still hold."""
        held = self.held
        runner = self.runner
        if held is not None and runner.observed():
            for piece in held.flush():
                self.out(
                    MessageDeltaEvent(
                        session_id=runner.session_id, run_id=runner.run_id, content=piece
                    )
                )

    def announce(self, event: ProviderEvent) -> None:
        """Emit the message events of a content delta or a tool call (final or fragment), before
        it is folded: ``message_started`` ahead of the attempt's first one, then the
        ``message_delta`` of the fragment itself (through [`delta()`][prism.runtime.run._attempt.AttemptState.delta]). Called only while
        the run's events are observed.

        A message start is never announced: ``message_started`` is held until the first content,
        thinking or tool-call delta (or the end of the message, [`open_message()`][prism.runtime.run._attempt.AttemptState.open_message]), so an
        attempt that fails before any of them — and is retried or handed to a fallback — leaves
        subscribers no start of a message that never comes. The fold keeps the start's id."""
        kind = type(event)
        if not self.opened:
            self.open_message()
        content: Any
        if kind is ProviderContentDelta:
            content = event.content  # type: ignore[union-attr]
        elif kind is ProviderToolCall:
            content = event.call  # type: ignore[union-attr]
        else:
            content = ToolCallDeltaContent(
                index=event.index,  # type: ignore[union-attr]
                id=event.id,  # type: ignore[union-attr]
                name=event.name,  # type: ignore[union-attr]
                arguments_text=event.arguments_text,  # type: ignore[union-attr]
                authority=event.authority,  # type: ignore[union-attr]
            )
        self.delta(content)

    def open_message(self) -> None:
        """Emit the attempt's ``message_started`` (once), its draft carrying the id of the
        message start the fold kept. Called at the first delta, and at the end of a message that
        had a start and no delta."""
        self.opened = True
        runner = self.runner
        message_id = self.fold.message_id
        self.out(
            MessageStartedEvent(
                session_id=runner.session_id,
                run_id=runner.run_id,
                message=(
                    _EMPTY_DRAFT if message_id is None else Message("assistant", (), id=message_id)
                ),
            )
        )

    def announce_call(self, call: ToolCallContent) -> None:
        """Emit the ``message_delta`` of a call rebuilt from fragments after the stream."""
        if self.runner.observed():
            self.delta(call)

    def price_usage(self) -> None:
        """Cost a usage reported without one at ``model.pricing`` (idempotent)."""
        fold = self.fold
        usage = fold.usage
        pricing = self.runner.model.pricing
        if usage is not None and usage.cost is None and pricing is not None:
            fold.usage = dataclasses.replace(
                usage, cost=pricing.cost(usage), currency=pricing.currency
            )

    def record_usage(self) -> None:
        """Record the attempt's usage once: price it, accumulate it, write its ledger row, charge
        the tracker."""
        if self.usage_recorded:
            return
        self.usage_recorded = True
        self.price_usage()
        runner = self.runner
        usage = self.fold.usage
        if usage is not None:
            runner.accumulator.add(usage)
            sink = runner.on_usage
            if sink is not None:
                sink(self.turn, self.attempt, usage)
        runner.tracker.charge_usage(usage)

    def record_usage_quietly(self) -> None:
        """Record usage during a cancellation; a breach must not hide the cancellation."""
        try:
            self.record_usage()
        except RunLimitExceeded:
            pass

    def finished(self, error: ErrorInfo | None) -> None:
        """Emit what the held channels still hold, then ``provider_turn_finished``."""
        self.flush_held()
        runner = self.runner
        if not runner.observed():
            return
        latency = int((time.perf_counter() - self.started_at) * 1000) if self.started_at else 0
        runner.emit(
            ProviderTurnFinishedEvent(
                session_id=runner.session_id,
                run_id=runner.run_id,
                turn=self.turn,
                metadata=ProviderTurnMetadata(
                    provider_id=runner.provider_id,
                    model=runner.model,
                    attempt=self.attempt,
                    latency_ms=latency,
                    http_status=None if error is None else _http_status(error.code),
                ),
                usage=self.fold.usage,
                error=error,
                stop_reason=self.fold.stop_reason if error is None else None,
                response_model=self.fold.model if error is None else None,
            )
        )

    def fail(self, info: ErrorInfo) -> None:
        """Record usage once and emit ``provider_turn_finished`` with ``info``; the event goes
        out even when recording usage breaches a limit."""
        try:
            self.record_usage()
        finally:
            self.finished(info)
