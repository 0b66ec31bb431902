"""One provider attempt's state: the folded draft, its events, usage, and the stream checks.

:class:`AttemptState` is created by :class:`~prism.runtime.attempts.ProviderAttempts` for each
attempt. It holds the draft being folded (text and thinking deltas coalesced, tool calls in
arrival order), emits or buffers the message events, records usage exactly once and
emits ``provider_turn_finished``. The helpers below check the items a provider stream yields.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol, get_args

from prism.errors import RunLimitExceeded
from prism.events import (
    AgentEvent,
    MessageStartedEvent,
    ProviderTurnFinishedEvent,
    ProviderTurnMetadata,
)
from prism.limits import RunLimitTracker
from prism.types import (
    ContentBlock,
    ErrorInfo,
    Message,
    ModelConfig,
    ProviderEvent,
    ProviderStopReason,
    ProviderToolCall,
    ProviderTurnResult,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    Usage,
    is_json_value,
)
from prism.usage import UsageAccumulator

__all__ = [
    "EMPTY_TURN_RESULT",
    "AttemptFailed",
    "AttemptSinks",
    "AttemptState",
    "SoftInterrupt",
    "as_event",
    "checked_call",
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


def as_event(event: object, started: bool) -> Any:
    """A stream item that is not exactly a provider event class.

    An instance of a subclass is rebuilt as its provider event class (so the fold sees the exact
    type); anything else (a dict, a str, ``None``) fails the attempt with
    ``ErrorInfo(name="ProviderTurnError", code="invalid_stream_chunk")`` — a provider bug, never
    retried.
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
        started,
        None,
        retry=False,
    )


def checked_call(event: ProviderToolCall) -> ProviderToolCall:
    """A provider's tool call whose ``arguments`` are not a JSON object of JSON values (NaN,
    Infinity, a set, a host object…) becomes a call with ``arguments={}`` and an
    ``invalid_json_arguments`` error, like malformed argument text: dispatch blocks it
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


class AttemptState:
    """Mutable state of one provider attempt: the folded draft and bookkeeping."""

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

    def __init__(self, runner: AttemptSinks, turn: int, attempt: int) -> None:
        self.runner = runner
        self.turn = turn
        self.attempt = attempt
        self.started_at = 0.0
        self.buffered: list[AgentEvent] | None = [] if runner.buffer_output else None
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
        """Emit a message event now, or hold it back while buffering."""
        buffered = self.buffered
        if buffered is None:
            self.runner.emit(event)
        else:
            buffered.append(event)

    def start(self) -> None:
        """Mark the draft started; emit ``message_started`` once per attempt."""
        self.started = True
        if not self.message_emitted:
            self.message_emitted = True
            runner = self.runner
            if runner.observed():
                self.out(
                    MessageStartedEvent(
                        session_id=runner.session_id,
                        run_id=runner.run_id,
                        message=(
                            _EMPTY_DRAFT
                            if self.message_id is None
                            else Message("assistant", (), id=self.message_id)
                        ),
                    )
                )

    def close_open(self) -> None:
        """Close the open coalesced text/thinking part."""
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
        """Fold one thinking delta: coalesce until a signature closes the part; a
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

    def price_usage(self) -> None:
        """Cost a usage reported without one at ``model.pricing`` (idempotent)."""
        usage = self.usage
        pricing = self.runner.model.pricing
        if usage is not None and usage.cost is None and pricing is not None:
            self.usage = dataclasses.replace(
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
        usage = self.usage
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
        """Emit ``provider_turn_finished``."""
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


