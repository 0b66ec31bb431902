"""The generate → validate → revise artifact loop.

Each call-free candidate is parsed (host ``parser``, or the text itself), validated (host
``validator``) and, while revision budget remains, answered with a repair message built by the host
``repairer``. Optional bounded tool rounds let the model consult host lookup tools before it
commits to a candidate. The loop never raises for a terminal artifact failure: it emits
``artifact_failed`` and returns, and the runtime fails the run.

Example::

    loop = generate_validate_revise_loop(validator=lambda v, ctx: {"ok": bool(v)})
    result = await session.run("Write a release note.", loop=loop)
    result.artifact  # the accepted value
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from inspect import isawaitable
from typing import Any, Final, Literal

from prism._util import new_id
from prism.errors import AgentLoopStateError
from prism.events import (
    ArtifactFailedEvent,
    ArtifactFinishedEvent,
    ArtifactRevisionStartedEvent,
    ArtifactValidationFinishedEvent,
    ArtifactValidationStartedEvent,
    TurnStartedEvent,
)
from prism.loop_needs import LoopNeeds
from prism.loops._turn import ROUND_LIMIT_MESSAGE, record_turn
from prism.loops.contracts import (
    ArtifactContext,
    ArtifactError,
    ArtifactParser,
    ArtifactParseResult,
    ArtifactRepairer,
    ArtifactValidation,
    ArtifactValidator,
    LoopContext,
    StructuredOutputMode,
    StructuredOutputTiming,
    ToolCallsMode,
    _validate_gvr_options,
    coerce_structured_output,
)
from prism.loops.dispatch import (
    append_unanswered_rows,
    dispatch_tool_calls_in_order,
    dispatchable_tool_calls,
)
from prism.structured_output import (
    artifact_request,
    shown_schema_of,
    without_structured_output,
)
from prism.types import (
    AgentInput,
    JsonValue,
    Message,
    StructuredOutputOptions,
    TextContent,
    Usage,
    to_messages,
)

__all__ = ["GenerateValidateReviseLoop", "field_path", "generate_validate_revise_loop"]

_NO_ARTIFACT_TEXT: Final = "no artifact text in model output"
"""Parse error for empty, whitespace-only or thinking-only drafts."""

_DISABLED_MESSAGE: Final = "tool call not dispatched: tool calls are disabled for this loop"


def _tool_round_limit_result() -> ArtifactValidation:
    """The terminal failure for a tool request beyond ``max_tool_rounds``."""
    return ArtifactValidation(
        ok=False,
        errors=(ArtifactError("maximum tool rounds exceeded"),),
        metadata={"reason": "tool_round_limit"},
    )


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def field_path(pointer: str | None) -> str | None:
    """An error location as a model reads it: the RFC 6901 pointer ``"/items/2/price"`` as
    ``"items[2].price"``.

    Array indexes (all digits) become ``[n]``, names ``.name`` (no dot first), other keys
    ``["key"]`` (JSON-quoted). ``None`` and ``""`` (the root) give ``None``; a ``path`` that
    is not a pointer (a custom validator's free text) is returned unchanged.
    """
    if not pointer:
        return None
    path = _FIELD_PATHS.get(pointer)
    if path is not None:
        return path
    if not pointer.startswith("/"):
        return pointer
    parts: list[str] = []
    for token in pointer[1:].split("/"):
        key = token.replace("~1", "/").replace("~0", "~")
        if key.isdigit() and key.isascii():
            parts.append(f"[{key}]")
        elif _NAME.fullmatch(key):
            parts.append(f".{key}" if parts else key)
        else:
            parts.append(f"[{json.dumps(key)}]")
    path = "".join(parts)
    if len(_FIELD_PATHS) < _FIELD_PATHS_KEPT:
        _FIELD_PATHS[pointer] = path
    return path


_FIELD_PATHS: dict[str, str] = {}
"""The field paths of the pointers seen so far (a revision usually reports the same ones)."""

_FIELD_PATHS_KEPT: Final = 1024


def _default_repairer(
    value: object, failure: ArtifactValidation, ctx: ArtifactContext
) -> AgentInput:
    """One user message with one line per error, ``<field path>: <message>`` (the message alone
    at the root; ``field_path()``), or ``invalid artifact`` without errors."""
    lines = []
    for error in failure.errors:
        where = field_path(error.path)
        lines.append(error.message if where is None else f"{where}: {error.message}")
    return "\n".join(lines) or "invalid artifact"


def _repair_messages(repair: AgentInput) -> list[Message]:
    """The repairer's input as the messages the loop stores: each with a fresh id (a ``str`` is
    one user message).

    Raises:
        TypeError: ``repair`` is not an ``AgentInput`` (as ``to_messages`` raises).
    """
    if isinstance(repair, str):
        return [Message("user", (TextContent(repair),), id=new_id("msg"))]
    return [
        Message(m.role, m.content, id=new_id("msg"), metadata=m.metadata)
        for m in to_messages(repair)
    ]


class GenerateValidateReviseLoop:
    """Strategy object returned by [`generate_validate_revise_loop()`][prism.loops.gvr.generate_validate_revise_loop].

    Satisfies ``DurableLoopStrategy``. Its loop state (``attempts``,
    ``artifact_phase``, ``saved_schema``, ``pending_history``) lives on the object and is scoped to
    ``(session_id, run_id)``: a new, non-restored run resets it, so one object can serve sequential
    runs. Concurrent runs of one object are not supported.
    """

    __slots__ = (
        "_artifact_phase",
        "_attempts",
        "_final_only",
        "_max_revisions",
        "_parser",
        "_pending_history",
        "_repairer",
        "_restored",
        "_saved_schema",
        "_scope",
        "_shown_native",
        "_shown_schema",
        "_structured_output",
        "_tool_calls",
        "_validator",
    )

    name: Final = "generate-validate-revise"
    """Strategy name; the runtime checks the artifact outcome of loops with this name."""

    revision: Final = "1"
    """Loop revision; joins the durable fingerprint and ``loop_state``."""

    def __init__(
        self,
        *,
        validator: ArtifactValidator[Any],
        parser: ArtifactParser[Any] | None,
        repairer: ArtifactRepairer[Any] | None,
        max_revisions: int,
        tool_calls: ToolCallsMode,
        structured_output: StructuredOutputOptions | None,
        structured_output_mode: StructuredOutputMode | None,
        structured_output_timing: StructuredOutputTiming,
    ) -> None:
        self._validator = validator
        self._parser = parser
        self._repairer: ArtifactRepairer[Any] = repairer or _default_repairer
        self._max_revisions = max_revisions
        self._tool_calls = tool_calls
        # The schema the model sees: the explicit one, else the artifact factories' (carried by
        # the callbacks). Explicit and "native" schemas are required natively; the factories'
        # schema goes natively only where the model supports it, else into the instructions;
        # "artifact-loop" mode shows either in the instructions only.
        shown = structured_output or shown_schema_of(validator, parser)
        if structured_output_mode == "artifact-loop":
            structured_output = None
        elif structured_output_mode == "native" and structured_output is None:
            structured_output = shown
        self._structured_output = structured_output
        self._shown_schema = shown
        self._shown_native = structured_output_mode is None
        self._final_only = structured_output_timing == "final-turn-only" and tool_calls == "bounded"
        self._attempts = 0
        self._artifact_phase = not self._final_only
        self._saved_schema: StructuredOutputOptions | None = None
        self._pending_history: list[Message] = []
        self._scope: tuple[str, str] | None = None
        self._restored = False

    # ------------------------------------------------------------------ read-only views

    @property
    def needs(self) -> LoopNeeds:
        """What this loop asks of the runtime: its native schema on the provider options, and a
        validated artifact for the run to succeed."""
        return LoopNeeds(
            structured_output=self._structured_output,
            artifact=True,
            shown_schema=self._shown_schema,
            shown_schema_native=self._shown_native,
            dispatches_tools=self._tool_calls == "bounded",
        )

    @property
    def shown_schema(self) -> StructuredOutputOptions | None:
        """The schema shown to the model: ``structured_output=``, else the one the artifact
        factories attach to the ``validator``/``parser`` (``artifact_schema``), else ``None``."""
        return self._shown_schema

    @property
    def structured_output(self) -> StructuredOutputOptions | None:
        """The native schema the runtime merges into provider options.

        ``None`` when none was given or ``structured_output_mode == "artifact-loop"``.
        """
        return self._structured_output

    @property
    def max_revisions(self) -> int:
        """Failed call-free candidates that may be revised."""
        return self._max_revisions

    @property
    def tool_calls(self) -> ToolCallsMode:
        """``"disabled"`` or ``"bounded"``."""
        return self._tool_calls

    @property
    def final_turn_only(self) -> bool:
        """True when the schema is attached only to the artifact turns."""
        return self._final_only

    @property
    def attempts(self) -> int:
        """Call-free candidates of the current run scope so far."""
        return self._attempts

    @property
    def artifact_phase(self) -> bool:
        """True once tools are withdrawn and the schema is attached (always True without
        final-turn-only timing)."""
        return self._artifact_phase

    @property
    def saved_schema(self) -> StructuredOutputOptions | None:
        """The first request schema seen in this scope, reused for artifact turns."""
        return self._saved_schema

    @property
    def pending_history(self) -> tuple[Message, ...]:
        """Repair messages stored but not yet pushed into live history."""
        return tuple(self._pending_history)

    # ------------------------------------------------------------------ durable state

    def snapshot(self) -> JsonValue:
        """Capture the loop state.

        Returns:
            ``{"attempts": int, "artifact_phase": bool, "saved_schema": dict | None,
            "pending_history": [Message.to_dict(), ...]}``.
        """
        return {
            "attempts": self._attempts,
            "artifact_phase": self._artifact_phase,
            "saved_schema": None if self._saved_schema is None else self._saved_schema.to_dict(),
            "pending_history": [m.to_dict() for m in self._pending_history],
        }

    def restore(self, snapshot: JsonValue, /) -> None:
        """Rehydrate from [`snapshot()`][prism.loops.gvr.GenerateValidateReviseLoop.snapshot]'s value; the next ``run`` keeps it.

        ``pending_history`` is cleared: those repair messages are already in the store and come
        back with the rebuilt history.

        Raises:
            AgentLoopStateError: ``ERR_PRISM_LOOP_SNAPSHOT`` when ``snapshot`` is not a dict with a
                non-negative ``int`` (not ``bool``) ``attempts`` and a ``bool`` ``artifact_phase``,
                or ``saved_schema`` is neither ``None`` nor valid structured-output options.
        """
        if not isinstance(snapshot, dict):
            raise AgentLoopStateError(
                "ERR_PRISM_LOOP_SNAPSHOT", "generate-validate-revise snapshot must be a dict"
            )
        attempts = snapshot.get("attempts")
        phase = snapshot.get("artifact_phase")
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0:
            raise AgentLoopStateError(
                "ERR_PRISM_LOOP_SNAPSHOT",
                "generate-validate-revise snapshot 'attempts' must be an int >= 0",
            )
        if not isinstance(phase, bool):
            raise AgentLoopStateError(
                "ERR_PRISM_LOOP_SNAPSHOT",
                "generate-validate-revise snapshot 'artifact_phase' must be a bool",
            )
        raw_schema = snapshot.get("saved_schema")
        schema: StructuredOutputOptions | None = None
        if raw_schema is not None:
            try:
                if not isinstance(raw_schema, Mapping):
                    raise TypeError("not a mapping")
                schema = coerce_structured_output(raw_schema)
            except Exception as exc:
                raise AgentLoopStateError(
                    "ERR_PRISM_LOOP_SNAPSHOT",
                    f"generate-validate-revise snapshot 'saved_schema' is invalid: {exc}",
                ) from exc
        self._attempts = attempts
        self._artifact_phase = phase
        self._saved_schema = schema
        self._pending_history = []
        self._restored = True

    def _enter_scope(self, ctx: LoopContext) -> None:
        """Keep restored state, else reset it for a new ``(session_id, run_id)``."""
        scope = (ctx.session_id, ctx.run_id)
        if self._restored:
            self._restored = False
        elif self._scope != scope:
            self._attempts = 0
            self._artifact_phase = not self._final_only
            self._saved_schema = None
            self._pending_history = []
        self._scope = scope

    # ------------------------------------------------------------------ the loop

    async def run(self, ctx: LoopContext, /) -> Usage | None:
        """Drive generate → parse → validate → revise turns.

        Args:
            ctx: The run's loop context. ``charge_tool_round``, ``is_tool_call_exclusive``,
                ``has_pending_steers`` and ``apply_pending_steers`` are optional; with an
                ``observed()`` member, the ``turn_started``, ``artifact_validation_started``,
                ``artifact_validation_finished`` and ``artifact_revision_started`` events are
                built only while it returns ``True``.

        Returns:
            The last non-``None`` per-turn usage (a fallback only).

        Raises:
            AbortError: the run signal was aborted at a turn start or before ``generate``.
            Exception: whatever ``ctx`` primitives or the host callbacks raise (run failures);
                a rejected artifact is never raised.
        """
        self._enter_scope(ctx)
        signal = ctx.signal
        history = ctx.history
        session_id = ctx.session_id
        run_id = ctx.run_id
        apply_steers = getattr(ctx, "apply_pending_steers", None)
        # optional: the progress events are built only when something observes them
        observed = getattr(ctx, "observed", None)
        bounded = self._tool_calls == "bounded"
        final_only = self._final_only
        max_revisions = self._max_revisions

        usage: Usage | None = None
        next_input: AgentInput = ctx.input
        tool_rounds = 0
        turn = 1
        # The runtime checks the artifact outcome explicitly reported here; a context
        # without the optional member only gets the events.
        report_artifact = getattr(ctx, "report_artifact", None) or ctx.emit

        while self._attempts <= max_revisions:
            # Abort check, steer drain, turn_started.
            signal.throw_if_aborted()
            if apply_steers is not None:
                await apply_steers()
            if observed is None or observed():
                ctx.emit(TurnStartedEvent(session_id=session_id, run_id=run_id, turn=turn))

            # Assemble, remember the schema, apply the final-turn-only timing.
            request = await ctx.assemble(next_input, None, turn)
            options = request.options
            if self._saved_schema is None and options is not None:
                self._saved_schema = options.structured_output
            if final_only:
                if not self._artifact_phase and tool_rounds < ctx.max_tool_rounds:
                    request = without_structured_output(request)
                else:
                    self._artifact_phase = True
                    request = artifact_request(request, self._saved_schema)

            # generate
            signal.throw_if_aborted()
            result = await ctx.generate(request)
            usage = result.usage or usage

            # history catches up only now: repair messages, then first-turn input and the draft
            if self._pending_history:
                history.extend(self._pending_history)
                self._pending_history = []
            await record_turn(ctx, result, turn, session_id, run_id)

            calls = result.calls
            if calls:
                host_calls = dispatchable_tool_calls(calls)
                # bounded tool branch
                if bounded:
                    if not host_calls:
                        next_input = []
                        turn += 1
                        continue
                    if tool_rounds >= ctx.max_tool_rounds:
                        ctx.finish_reason = "tool_round_limit"
                        await append_unanswered_rows(ctx, host_calls, ROUND_LIMIT_MESSAGE)
                        report_artifact(
                            ArtifactFailedEvent(
                                session_id=session_id,
                                run_id=run_id,
                                turn=turn,
                                attempt=self._attempts + 1,
                                result=_tool_round_limit_result(),
                            )
                        )
                        return usage
                    tool_rounds += 1
                    await dispatch_tool_calls_in_order(host_calls, ctx, concurrency=1)
                    next_input = []
                    turn += 1
                    continue
                # disabled tools: answer the inert calls, then judge the text
                if host_calls:
                    await append_unanswered_rows(ctx, host_calls, _DISABLED_MESSAGE)

            # steers keep the run going
            if apply_steers is not None and await apply_steers():
                next_input = []
                turn += 1
                continue

            # final-turn-only: promote to the artifact turn
            if final_only and not self._artifact_phase:
                self._artifact_phase = True
                next_input = []
                turn += 1
                continue

            # parse: the value, or why there is none
            actx = ArtifactContext(session_id, run_id, turn, signal, ctx.metadata)
            text = result.text  # text parts only
            value: Any = None
            parse_error: str | None = None
            if not text.strip():
                parse_error = _NO_ARTIFACT_TEXT
            elif self._parser is not None:
                parsed = self._parser(text, actx)
                if type(parsed) is not ArtifactParseResult:
                    if isawaitable(parsed):
                        parsed = await parsed
                    parsed = ArtifactParseResult.coerce(parsed)
                if parsed.ok and parsed.value is not None:
                    value = parsed.value
                else:
                    parse_error = parsed.error or "artifact parse failed"
            else:
                value = text
            parse_failure: ArtifactValidation | None = None
            if parse_error is not None:
                parse_failure = ArtifactValidation(
                    ok=False,
                    errors=(ArtifactError(parse_error),),
                    metadata={"reason": "parse_error"},
                )

            # validate
            self._attempts += 1
            attempt = self._attempts
            if observed is None or observed():
                ctx.emit(
                    ArtifactValidationStartedEvent(
                        session_id=session_id, run_id=run_id, turn=turn, attempt=attempt
                    )
                )
            if parse_failure is not None:
                validation = parse_failure
            else:
                raw_validation = self._validator(value, actx)
                if type(raw_validation) is not ArtifactValidation:
                    if isawaitable(raw_validation):
                        raw_validation = await raw_validation
                    raw_validation = ArtifactValidation.coerce(raw_validation)
                validation = raw_validation
            if observed is None or observed():
                ctx.emit(
                    ArtifactValidationFinishedEvent(
                        session_id=session_id,
                        run_id=run_id,
                        turn=turn,
                        attempt=attempt,
                        result=validation,
                    )
                )

            # the verdict: accepted, or rejected with the revision budget exhausted
            if validation.ok or attempt > max_revisions:
                if validation.ok:
                    ctx.artifact = value
                verdict = ArtifactFinishedEvent if validation.ok else ArtifactFailedEvent
                report_artifact(
                    verdict(
                        session_id=session_id,
                        run_id=run_id,
                        turn=turn,
                        attempt=attempt,
                        result=validation,
                    )
                )
                return usage

            # revise: store the repair now, push it to history after the next generate
            if observed is None or observed():
                ctx.emit(
                    ArtifactRevisionStartedEvent(
                        session_id=session_id,
                        run_id=run_id,
                        turn=turn,
                        attempt=attempt,
                        failure=validation,
                    )
                )
            repair = self._repairer(None if parse_failure is not None else value, validation, actx)
            if not isinstance(repair, str) and isawaitable(repair):
                repair = await repair
            repair_messages = _repair_messages(repair)
            for message in repair_messages:
                await ctx.append_message(message)
            self._pending_history = repair_messages
            next_input = list(repair_messages)
            turn += 1

        return usage


def generate_validate_revise_loop(
    *,
    validator: ArtifactValidator[Any],
    parser: ArtifactParser[Any] | None = None,
    repairer: ArtifactRepairer[Any] | None = None,
    max_revisions: int = 3,
    tool_calls: Literal["disabled", "bounded"] = "disabled",
    structured_output: StructuredOutputOptions | Mapping[str, Any] | None = None,
    structured_output_mode: Literal["native", "artifact-loop"] | None = None,
    structured_output_timing: Literal["every-turn", "final-turn-only"] = "every-turn",
) -> GenerateValidateReviseLoop:
    """Build a generate → validate → revise loop strategy.

    Args:
        validator: ``(value, ctx) -> ArtifactValidation`` (or mapping), sync or async.
        parser: ``(text, ctx) -> ArtifactParseResult`` (or mapping); ``None`` = the text itself.
        repairer: ``(value | None, failure, ctx) -> AgentInput``; ``None`` = one user message with
            one line per error, its field path first (``items[2].price: Input should be less
            than 100``; ``field_path()``).
        max_revisions: Revisions after the first failed candidate (``int`` ≥ 0; default 3); the run
            makes at most ``1 + max_revisions`` candidates.
        tool_calls: ``"disabled"`` (host calls answered with ``tool_call_not_dispatched`` rows; a
            run that offers tools logs a warning on the ``prism`` logger) or ``"bounded"``
            (dispatched one at a time for at most ``limits.max_tool_rounds`` rounds, so the model
            can look things up before it commits to a candidate).
        structured_output: Native schema for the provider; a mapping is converted. Without it,
            the schema the artifact factories attach to ``validator``/``parser``
            (``artifact_schema``) is shown to the model: natively where the model supports
            structured output, else in the instructions.
        structured_output_mode: ``"native"`` requires native structured output;
            ``"artifact-loop"`` shows the schema in the instructions only.
        structured_output_timing: ``"final-turn-only"`` sends tool-eligible turns without the
            schema (only with ``tool_calls="bounded"``).

    Returns:
        A fresh strategy with ``name="generate-validate-revise"``, ``revision="1"``,
        ``snapshot``/``restore`` and a read-only ``structured_output``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` when ``validator`` is not callable,
            ``parser``/``repairer`` are neither callable nor ``None``, ``max_revisions`` is not an
            ``int`` ≥ 0, or ``tool_calls`` or a structured-output mode/timing is unknown.
        StructuredOutputError: ``ERR_PRISM_STRUCTURED_OUTPUT`` when ``structured_output`` fails
            the structured-output check (a name of 1–128 characters, a JSON-compatible schema
            of at most 65 536 bytes).
    """
    _validate_gvr_options(
        validator=validator,
        parser=parser,
        repairer=repairer,
        max_revisions=max_revisions,
        tool_calls=tool_calls,
        structured_output_mode=structured_output_mode,
        structured_output_timing=structured_output_timing,
    )
    schema = None if structured_output is None else coerce_structured_output(structured_output)
    return GenerateValidateReviseLoop(
        validator=validator,
        parser=parser,
        repairer=repairer,
        max_revisions=max_revisions,
        tool_calls=tool_calls,
        structured_output=schema,
        structured_output_mode=structured_output_mode,
        structured_output_timing=structured_output_timing,
    )
