"""OpenTelemetry tracing of prism runs, following the GenAI semantic conventions v1.41.0.

Needs only ``opentelemetry-api`` (``pip install 'prism-runtime[otel]'``); the host sets up the
SDK and its exporters (or ``prism run --otel`` does it from the standard environment variables).
The GenAI conventions are still marked *Development*; this module follows the v1.41.0 documents
(schema URL ``https://opentelemetry.io/schemas/1.41.0``): the *invoke agent internal span*, the
*inference span* and the *execute tool span*. Turn it on per agent
(``create_agent(..., tracing=OpenTelemetryTracing())``) or for every agent with [`instrument()`][prism.otel.instrument].

Each run leg gives one span tree, under the span that is current where the host calls
``session.run``:

* ``invoke_agent {agent name}`` (kind ``INTERNAL``; ``invoke_agent`` when the agent has no
  name): ``gen_ai.operation.name="invoke_agent"``, ``gen_ai.provider.name``,
  ``gen_ai.agent.name``/``gen_ai.agent.id`` (when set), ``gen_ai.request.model``,
  ``gen_ai.conversation.id`` (the session id), ``gen_ai.usage.input_tokens``/``output_tokens``
  (the leg's sums), and prism's own ``prism.run_id``, ``prism.loop.name``, ``prism.run.status``
  (``succeeded``/``suspended``/``failed``), ``prism.stop_reason`` (the run's stop reason, or the
  error code of a failed run), ``prism.revision_count`` (artifact revisions),
  ``prism.resumed_from_version`` (a resumed leg). A resumed durable leg has a span *link* to the
  ``invoke_agent`` span of the leg that suspended (its trace context is stored with the
  checkpoint), so the legs of one run are linked traces.
* ``chat {model}`` (kind ``CLIENT``), one per provider turn (and one more for each fallback
  provider that took the turn over, ``prism.providers.fallback``), a child of ``invoke_agent``:
  ``gen_ai.operation.name="chat"``, ``gen_ai.provider.name`` (the provider that served the turn:
  a fallback's when one did), ``gen_ai.request.model``, ``gen_ai.response.model`` (the model the
  response names, e.g. the dated ``gpt-4o-mini-2024-07-18`` of a requested ``gpt-4o-mini``; the
  served model's configured name when the provider does not say),
  ``gen_ai.request.temperature``/``max_tokens``/``top_p`` (from the model's parameters),
  ``gen_ai.response.id``, ``gen_ai.response.finish_reasons`` (the conventions' values, mapped from
  the provider's stop reason: ``stop`` for ``end_turn`` and ``stop_sequence``, ``tool_call`` for
  ``tool_use``, ``length`` for ``max_tokens``, ``content_filter`` for ``content_filter`` and
  ``refusal``, ``error`` for a turn that failed; any other reason as prism names it),
  ``gen_ai.usage.input_tokens``/``output_tokens``, ``gen_ai.conversation.id``,
  ``prism.turn``, ``prism.attempts``. Each provider attempt is a span event
  ``prism.provider_attempt`` (attempt, latency, HTTP status, ``error.type``), each scheduled retry
  a ``prism.retry_scheduled`` event.
* ``execute_tool {tool name}`` (kind ``INTERNAL``), one per tool call, a child of
  ``invoke_agent``: ``gen_ai.operation.name="execute_tool"``, ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.type="function"``, ``gen_ai.conversation.id``,
  ``prism.tool.status`` (``finished``/``error``/``blocked``). The tool's code runs with this span
  current, so spans the tool starts itself (an instrumented HTTP client, say) nest under it. So
  does the run of an agent tool (``agent.as_tool``): the child's ``invoke_agent`` span is a child
  of the call's ``execute_tool`` span, in the same trace, and a child agent without a tracer of
  its own is traced by the calling run's (see ``prism.tracing``).

Errors: a failed attempt, tool call or run sets ``error.type`` (prism's error ``code``) and the
span status ``ERROR`` with the (redacted) message. Message content is not recorded unless
``capture_content=True``; then ``gen_ai.output.messages`` (chat), ``gen_ai.tool.call.arguments`` and
``gen_ai.tool.call.result`` (execute_tool) are recorded as JSON, from the events after the run's
redactor ran, and passed through this tracer's own ``redactor`` too when one is given. The
requests a provider receives are not part of prism's event stream, so ``gen_ai.input.messages``
is never recorded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from prism.events import (
    AgentEvent,
    AgentFinishedEvent,
    AgentSuspendedEvent,
    ArtifactFailedEvent,
    ArtifactRevisionStartedEvent,
    ErrorEvent,
    MessageFinishedEvent,
    MessageStartedEvent,
    ProviderTurnFinishedEvent,
    ProviderTurnStartedEvent,
    RetryScheduledEvent,
    RunLimitExceededEvent,
    ToolExecutionBlockedEvent,
    ToolExecutionErrorEvent,
    ToolExecutionFinishedEvent,
    ToolExecutionStartedEvent,
)
from prism.redaction import SecretRedactor
from prism.tracing import RunTrace, TracedRun, set_default_tracer
from prism.types import ErrorInfo, Message, TextContent, ThinkingContent, ToolCallContent

__all__ = ["SCHEMA_URL", "SEMCONV_VERSION", "OpenTelemetryTracing", "instrument", "uninstrument"]

SEMCONV_VERSION: Final = "1.41.0"
"""The version of the OpenTelemetry GenAI semantic conventions these spans follow."""
SCHEMA_URL: Final = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
"""The schema URL of the tracer (its instrumentation scope)."""

_PARAMETERS: Final = (
    ("temperature", "gen_ai.request.temperature"),
    ("max_tokens", "gen_ai.request.max_tokens"),
    ("top_p", "gen_ai.request.top_p"),
)
_FINISH: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_call",
    "max_tokens": "length",
    "content_filter": "content_filter",
    "refusal": "content_filter",
}
"""Provider stop reason -> the GenAI conventions' finish reason (``stop``, ``length``,
``content_filter``, ``tool_call``; ``error`` is a failed turn's); others pass unchanged."""


def _finish_reason(reason: str) -> str:
    return _FINISH.get(reason, reason)


class OpenTelemetryTracing:
    """A prism tracer (``prism.tracing.RunTracer``) that writes OpenTelemetry spans.

    Args:
        tracer_provider: The ``TracerProvider`` to use; ``None``: the global one (also when it is
            set later).
        capture_content: Record message content, tool arguments and tool results (redacted).
            Off by default.
        redactor: Applied to captured content on top of the run's own redactor.
    """

    __slots__ = ("_capture", "_redactor", "_tracer")

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        capture_content: bool = False,
        redactor: SecretRedactor | None = None,
    ) -> None:
        self._tracer = trace.get_tracer(
            "prism", tracer_provider=tracer_provider, schema_url=SCHEMA_URL
        )
        self._capture = bool(capture_content)
        self._redactor = redactor

    def start_run(self, run: TracedRun, /) -> RunTrace:
        """Start the ``invoke_agent`` span of a leg; return the leg's trace."""
        return _RunSpans(self._tracer, run, self._capture, self._redactor)


def instrument(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    capture_content: bool = False,
    redactor: SecretRedactor | None = None,
) -> OpenTelemetryTracing:
    """Trace every agent created with ``tracing=None`` (the default); return the tracer.

    Same arguments as [`OpenTelemetryTracing`][prism.otel.OpenTelemetryTracing]. Runs started afterwards are traced.
    """
    tracing = OpenTelemetryTracing(
        tracer_provider=tracer_provider, capture_content=capture_content, redactor=redactor
    )
    set_default_tracer(tracing)
    return tracing


def uninstrument() -> None:
    """Stop default tracing (agents given their own tracer keep it)."""
    set_default_tracer(None)


def _traceparent(context: SpanContext) -> str:
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def _parse_traceparent(text: str) -> SpanContext | None:
    parts = text.split("-")
    if len(parts) != 4 or parts[0] != "00":
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    if not trace_id or not span_id:
        return None
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags & 0xFF))


def _error_type(error: ErrorInfo) -> str:
    code = error.code
    return str(code) if code is not None else (error.name or "_OTHER")


def _fail(span: Span, error: ErrorInfo) -> None:
    span.set_attribute("error.type", _error_type(error))
    span.set_status(Status(StatusCode.ERROR, error.message))


def _part(block: Any) -> dict[str, Any]:
    kind = type(block)
    if kind is TextContent:
        return {"type": "text", "content": block.text}
    if kind is ThinkingContent:
        return {"type": "reasoning", "content": block.text}
    if kind is ToolCallContent:
        return {
            "type": "tool_call",
            "id": block.id,
            "name": block.name,
            "arguments": block.arguments,
        }
    return {"type": str(getattr(block, "type", kind.__name__))}


class _RunSpans:
    """The spans of one run leg, driven by the leg's events."""

    __slots__ = (
        "_capture",
        "_chat",
        "_chat_done",
        "_chat_error",
        "_conversation",
        "_finish",
        "_input_tokens",
        "_invoke",
        "_output_tokens",
        "_parent",
        "_provider",
        "_redactor",
        "_revisions",
        "_run_id",
        "_stop_reason",
        "_tools",
        "_tracer",
    )

    def __init__(
        self,
        tracer: trace.Tracer,
        run: TracedRun,
        capture: bool,
        redactor: SecretRedactor | None,
    ) -> None:
        self._tracer = tracer
        self._capture = capture
        self._redactor = redactor
        self._conversation = run.session_id
        self._run_id = run.run_id
        self._provider = run.provider_id or run.model.provider
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": self._provider,
            "gen_ai.request.model": run.model.model,
            "gen_ai.conversation.id": run.session_id,
            "prism.run_id": run.run_id,
            "prism.loop.name": run.loop,
        }
        if run.agent_name:
            attributes["gen_ai.agent.name"] = run.agent_name
        if run.agent_id:
            attributes["gen_ai.agent.id"] = run.agent_id
        links: list[Link] = []
        if run.resumed_version is not None:
            attributes["prism.resumed_from_version"] = run.resumed_version
            suspended = None if run.resumed_link is None else _parse_traceparent(run.resumed_link)
            if suspended is not None:
                links.append(Link(suspended, {"prism.link": "resumed_from"}))
        name = f"invoke_agent {run.agent_name}" if run.agent_name else "invoke_agent"
        self._invoke = tracer.start_span(
            name, kind=SpanKind.INTERNAL, attributes=attributes, links=links
        )
        self._parent = trace.set_span_in_context(self._invoke)
        self._chat: Span | None = None
        self._chat_done = False
        self._chat_error: ErrorInfo | None = None
        self._tools: dict[str, Span] = {}
        self._revisions = 0
        self._input_tokens = 0
        self._output_tokens = 0
        self._stop_reason: str | None = None
        self._finish: str | None = None

    # ----------------------------------------------------------------- RunTrace

    def on_event(self, event: AgentEvent, /) -> None:
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)
        elif self._chat_done:
            self._end_chat()

    def tool_scope(self, call: ToolCallContent, /) -> Callable[[], None]:
        span = self._tools.get(call.id)
        if span is None:
            return _nothing
        token = otel_context.attach(trace.set_span_in_context(span))
        return lambda: otel_context.detach(token)

    def link(self) -> str | None:
        context = self._invoke.get_span_context()
        return _traceparent(context) if context.is_valid else None

    def close(self) -> None:
        self._end_chat()
        for span in self._tools.values():
            span.end()
        self._tools.clear()
        if self._invoke.is_recording():
            self._end_invoke("failed")

    # ----------------------------------------------------------------- helpers

    def _content(self, value: Any) -> str:
        redactor = self._redactor
        if redactor is not None:
            value = redactor.redact(value)
        return json.dumps(value, ensure_ascii=False, default=str)

    def _child(self, name: str, kind: SpanKind, attributes: dict[str, Any]) -> Span:
        attributes["gen_ai.conversation.id"] = self._conversation
        attributes["prism.run_id"] = self._run_id
        return self._tracer.start_span(name, context=self._parent, kind=kind, attributes=attributes)

    def _end_chat(self) -> None:
        chat = self._chat
        if chat is not None:
            self._chat = None
            self._chat_done = False
            error = self._chat_error
            if error is not None:
                self._chat_error = None
                chat.set_attribute("gen_ai.response.finish_reasons", ("error",))
                _fail(chat, error)
            chat.end()

    def _end_invoke(self, status: str) -> None:
        invoke = self._invoke
        attributes: dict[str, Any] = {
            "prism.run.status": status,
            "prism.revision_count": self._revisions,
            "gen_ai.usage.input_tokens": self._input_tokens,
            "gen_ai.usage.output_tokens": self._output_tokens,
        }
        if self._stop_reason is not None:
            attributes["prism.stop_reason"] = self._stop_reason
        invoke.set_attributes(attributes)
        invoke.end()

    # ----------------------------------------------------------------- provider turns

    def on_turn_started(self, event: ProviderTurnStartedEvent) -> None:
        metadata = event.metadata
        if metadata.attempt != 1 and self._chat is not None and not self._chat_done:
            return  # a retry: the turn's span stays open
        self._end_chat()
        model = metadata.model
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": metadata.provider_id or self._provider,
            "gen_ai.request.model": model.model,
            "prism.turn": event.turn,
        }
        parameters = model.parameters or {}
        for key, attribute in _PARAMETERS:
            value = parameters.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                attributes[attribute] = value
        self._chat = self._child(f"chat {model.model}", SpanKind.CLIENT, attributes)

    def on_turn_finished(self, event: ProviderTurnFinishedEvent) -> None:
        chat = self._chat
        if chat is None:
            return
        metadata = event.metadata
        attempt: dict[str, Any] = {"prism.attempt": metadata.attempt}
        if metadata.latency_ms is not None:
            attempt["prism.latency_ms"] = metadata.latency_ms
        if metadata.http_status is not None:
            attempt["http.response.status_code"] = metadata.http_status
        usage = event.usage
        if usage is not None:
            self._input_tokens += usage.input_tokens or 0
            self._output_tokens += usage.output_tokens or 0
        error = event.error
        if error is not None:
            attempt["error.type"] = _error_type(error)
            chat.add_event("prism.provider_attempt", attempt)
            self._chat_error = error  # the turn's status, unless a retry succeeds
            return
        self._chat_error = None
        chat.add_event("prism.provider_attempt", attempt)
        attributes: dict[str, Any] = {
            "prism.attempts": metadata.attempt,
            "gen_ai.provider.name": metadata.provider_id or self._provider,
            "gen_ai.response.model": event.response_model or metadata.model.model,
        }
        if usage is not None:
            if usage.input_tokens is not None:
                attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            if usage.output_tokens is not None:
                attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
        self._finish = event.stop_reason
        if event.stop_reason is not None:
            attributes["gen_ai.response.finish_reasons"] = (_finish_reason(event.stop_reason),)
        chat.set_attributes(attributes)
        if self._capture:
            self._chat_done = True  # ends with its message (content) or the next event
        else:
            self._end_chat()

    def on_retry(self, event: RetryScheduledEvent) -> None:
        chat = self._chat
        if chat is not None:
            chat.add_event(
                "prism.retry_scheduled",
                {
                    "prism.attempt": event.attempt,
                    "prism.delay_ms": event.delay_ms,
                    "error.type": _error_type(event.error),
                },
            )

    def on_message_started(self, event: MessageStartedEvent) -> None:
        chat = self._chat
        if chat is not None and event.message.id:
            chat.set_attribute("gen_ai.response.id", event.message.id)

    def on_message_finished(self, event: MessageFinishedEvent) -> None:
        chat = self._chat
        if chat is None or not self._chat_done:
            return
        message: Message = event.message
        if message.id:
            chat.set_attribute("gen_ai.response.id", message.id)
        reason = self._finish
        output = {
            "role": "assistant",
            "parts": [_part(block) for block in message.content],
            "finish_reason": "stop" if reason is None else _finish_reason(reason),
        }
        chat.set_attribute("gen_ai.output.messages", self._content([output]))
        self._end_chat()

    # ----------------------------------------------------------------- tools

    def on_tool_started(self, event: ToolExecutionStartedEvent) -> None:
        self._end_chat()
        call = event.call
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        if self._capture:
            attributes["gen_ai.tool.call.arguments"] = self._content(call.arguments)
        self._tools[call.id] = self._child(
            f"execute_tool {call.name}", SpanKind.INTERNAL, attributes
        )

    def on_tool_finished(self, event: ToolExecutionFinishedEvent) -> None:
        result = event.result
        span = self._tools.pop(result.tool_call_id, None)
        if span is None:
            return
        span.set_attribute("prism.tool.status", event.metadata.status)
        if self._capture:
            value: Any = result.value
            if value is None and result.content:
                value = [_part(block) for block in result.content]
            span.set_attribute("gen_ai.tool.call.result", self._content(value))
        if result.error is not None:
            _fail(span, result.error)
        span.end()

    def on_tool_error(self, event: ToolExecutionErrorEvent) -> None:
        span = self._tools.pop(event.call.id, None)
        if span is None:
            return
        span.set_attribute("prism.tool.status", "error")
        _fail(span, event.error)
        span.end()

    def on_tool_blocked(self, event: ToolExecutionBlockedEvent) -> None:
        self._end_chat()
        span = self._child(
            f"execute_tool {event.name}",
            SpanKind.INTERNAL,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": event.name,
                "gen_ai.tool.call.id": event.tool_call_id,
                "gen_ai.tool.type": "function",
                "prism.tool.status": "blocked",
                "prism.tool.blocked_reason": event.reason,
            },
        )
        _fail(span, event.error)
        span.end()

    # ----------------------------------------------------------------- the run

    def on_revision(self, event: ArtifactRevisionStartedEvent) -> None:
        self._end_chat()
        self._revisions += 1
        self._invoke.add_event(
            "prism.artifact_revision", {"prism.turn": event.turn, "prism.attempt": event.attempt}
        )

    def on_artifact_failed(self, event: ArtifactFailedEvent) -> None:
        self._end_chat()
        self._invoke.add_event("prism.artifact_failed", {"prism.attempt": event.attempt})

    def on_limit(self, event: RunLimitExceededEvent) -> None:
        self._invoke.add_event("prism.run_limit_exceeded", {"prism.limit": str(event.breach.limit)})

    def on_finished(self, event: AgentFinishedEvent) -> None:
        self._end_chat()
        self._stop_reason = str(event.finish_reason or "completed")
        self._end_invoke("succeeded")

    def on_suspended(self, event: AgentSuspendedEvent) -> None:
        self._end_chat()
        self._invoke.set_attribute("prism.run_state_version", event.version)
        self._stop_reason = "suspended"
        self._end_invoke("suspended")

    def on_error(self, event: ErrorEvent) -> None:
        error = event.error
        if self._chat is not None and not self._chat_done:
            self._chat_error = error
        self._end_chat()
        for span in self._tools.values():
            _fail(span, error)
            span.end()
        self._tools.clear()
        _fail(self._invoke, error)
        self._stop_reason = _error_type(error)
        self._end_invoke("failed")


def _nothing() -> None:
    return None


_HANDLERS: Final[dict[type, Callable[[_RunSpans, Any], None]]] = {
    ProviderTurnStartedEvent: _RunSpans.on_turn_started,
    ProviderTurnFinishedEvent: _RunSpans.on_turn_finished,
    RetryScheduledEvent: _RunSpans.on_retry,
    MessageStartedEvent: _RunSpans.on_message_started,
    MessageFinishedEvent: _RunSpans.on_message_finished,
    ToolExecutionStartedEvent: _RunSpans.on_tool_started,
    ToolExecutionFinishedEvent: _RunSpans.on_tool_finished,
    ToolExecutionErrorEvent: _RunSpans.on_tool_error,
    ToolExecutionBlockedEvent: _RunSpans.on_tool_blocked,
    ArtifactRevisionStartedEvent: _RunSpans.on_revision,
    ArtifactFailedEvent: _RunSpans.on_artifact_failed,
    RunLimitExceededEvent: _RunSpans.on_limit,
    AgentFinishedEvent: _RunSpans.on_finished,
    AgentSuspendedEvent: _RunSpans.on_suspended,
    ErrorEvent: _RunSpans.on_error,
}
