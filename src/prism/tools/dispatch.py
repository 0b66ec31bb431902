"""``ToolDispatcher``: the one place a host tool runs.

A run leg builds one dispatcher with everything a call needs — the registry, filters, permission,
validation, guardrails, middleware hooks, the ledger, the limit tracker, the redactor, ``emit`` and
the durable run's pre-execution hook — and calls [`ToolDispatcher.dispatch()`][prism.tools.dispatch.ToolDispatcher.dispatch] per call (as
pydantic-ai's ``ToolManager`` does). Limits, middleware, guardrails, lookup, filters, argument
checks, permission, validation, the pre-execution hook, events, ledger rows, the abort grace and
result normalisation all happen there, in a fixed order, one step (method) each. The runtime's
``LoopContext.dispatch_tool_call`` wraps it; loops never call a tool's ``execute`` directly, so no
tool runs around these checks. What a call reports (its events and rows) is
[`prism.tools.reporting`][prism.tools.reporting]'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

from prism.errors import (
    ERR_PRISM_DELEGATION_SUSPENDED,
    AgentLoopStateError,
    AgentRunSuspended,
    GuardrailError,
    PrismConfigError,
    RunLimitExceeded,
)
from prism.events import AgentEvent
from prism.guardrails import GuardrailContext, Guardrails, run_guardrails
from prism.ledger import RunLedger
from prism.limits import RunLimitTracker
from prism.middleware import MiddlewareRegistry
from prism.redaction import SecretRedactor, redact_value
from prism.tools._identity_cache import IdentityCache
from prism.tools.abort_grace import ToolInterrupted
from prism.tools.execution import PARALLEL_ROUND, run_execute
from prism.tools.failure_log import log_tool_exception
from prism.tools.filters import ToolFilter, is_tool_allowed
from prism.tools.permission import PermissionPolicy, PermissionRequest, ask_permission
from prism.tools.preparation import prepare_arguments
from prism.tools.registry import ToolRegistry
from prism.tools.reporting import BlockedReason, CallReport, ToolCallLedger, ledger_writer
from prism.tools.results import KeepMeasured, NotJsonError, normalise_result
from prism.tools.validation import (
    DEFAULT_VALIDATOR,
    ToolValidator,
    builtin_validator_proves_valid,
    run_tool_validator,
)
from prism.types import (
    ErrorInfo,
    GuardrailRecord,
    OwnershipScope,
    ToolCallContent,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
)

__all__ = ["BeforeExecute", "ToolDispatcher"]

BeforeExecute: TypeAlias = Callable[
    [ToolCallContent, ToolDefinition, ToolExecutionContext], "Any | Awaitable[Any]"
]
"""Pre-execution hook, called after validation (and the preparation of the arguments, see
``prepares``) and before the call is reported started (the runtime's durable hook asks for
approvals and records pending calls here). Returning a ``ToolResult`` holds the call: that
result is its answer, ``execute`` never runs, no event or row is written and the call's
``max_tool_calls`` charge is taken back (an approval pending, or a rejection); returning
anything else lets the call run."""

_INTERRUPTED_RUN_ENDED = "tool call interrupted: the run ended before its result was recorded"


def _never() -> bool:
    return False


def _always() -> bool:
    return True


class ToolDispatcher:
    """The guarded dispatch of host tool calls, built once with what every call needs.

    ``dispatch()`` runs one call: charge ``max_tool_calls``; the ``tool_call`` middleware hook;
    tool-input guardrails; lookup; filters; argument checks; permission; validation;
    ``before_execute``; ``tool_execution_started`` and a ``started`` row; ``execute`` and result
    normalisation; the ``tool_result`` middleware hook; tool-output guardrails; redaction of the
    result; ``tool_execution_finished`` and a ``finished`` row.

    Blocked outcomes (everything up to ``before_execute`` that refuses the call) return
    ``ToolResult(error=ErrorInfo(message, code=<underlying code, else the reason>))``, emit
    ``tool_execution_blocked`` and write a ``blocked`` row; ``execute`` never runs on them. An
    exception from ``execute``, normalisation or the ``tool_result`` hook becomes an error result
    with ``tool_execution_error`` and an ``error`` row (and its redacted traceback is logged on
    ``prism.tools``, see ``prism.tools.failure_log``), except a ``GuardrailError``, a suspension
    signal, a ``RunLimitExceeded`` or a cancellation of the running task, which propagate. When
    one of those propagates after ``tool_execution_started`` was emitted (other than a suspension
    signal, whose call the resume machinery answers), the call still gets its one terminal
    ``tool_execution_error`` event and ``error`` row before the exception is re-raised; a
    cancellation reports the ``tool_call_interrupted`` error the runtime stores for it.

    Args:
        registry: The run's tools (a registry, or a name → tool mapping).
        context: Execution context; its ``session_id``/``run_id``/``signal``/``metadata`` are
            used. When ``emit`` or ``ledger`` is given, ``execute`` receives a copy whose
            ``tool_call_id`` is the call's and whose ``progress`` emits ``tool_execution_progress``
            and writes a ``started`` progress row, so the caller need not build one.
        filter: Effective tool filters; excluded names are blocked ``tool_denied``.
        middleware: A ``MiddlewareRegistry`` (``tool_call`` and ``tool_result`` hooks).
        tool_validator: ``None`` → [`json_schema_tool_validator()`][prism.tools.json_schema_tool_validator] (the built-in), ``False`` →
            no validation, else a sync/async [`ToolValidator`][prism.tools.dispatch.ToolValidator].
        permission: Sync/async [`PermissionPolicy`][prism.tools.dispatch.PermissionPolicy]. ``None``: allow.
        guardrails: Merged guardrails; only ``tool_input``/``tool_output`` are used here.
        redactor: Redacts block messages, the result, error results and ledger rows.
        ledger: Receives ``ToolCallRecord`` rows (a callable or an object with
            ``append_tool_call``; sync or async). ``None``: no rows.
        emit: Receives the tool and guardrail events (sync; an awaitable result is awaited).
        observed: Whether anything observes ``emit`` right now; while it returns ``False`` the
            ``tool_execution_started`` and ``tool_execution_finished`` events are not built.
            ``None`` (default): always observed.
        limit_tracker: Charged once per dispatch via ``charge_tool_call()``.
        before_execute: Pre-execution hook; a suspension signal propagates, any other exception
            blocks the call ``execution_denied``.
        secrets: Extra strings removed from error messages (``error_to_error_info``).
        ownership: Copied into ledger rows.
        tool_abort_grace_ms: Milliseconds a running ``execute`` may continue after the run signal
            aborts before it is cancelled and answered ``tool_call_interrupted``. ``0``: cancel
            at once.
        sync_in_thread: Run a sync ``execute`` in a worker thread. ``None`` (default): only inside
            [`parallel_tool_round()`][prism.tools.parallel_tool_round].
        on_worker_thread: Receives the future of a worker thread still running when its call was
            answered (abort grace ended, or the task was cancelled); the caller must await it
            before the run returns. ``None``: the dispatch awaits the thread itself before
            returning or re-raising.
        execute_scope: Called with the call right before ``execute`` runs, in the task the tool
            runs in; what it returns is called right after ``execute`` and the ``tool_result``
            hook, whatever their outcome (a run's trace makes its tool span current here, so
            the tool's own spans nest under it). ``None``: nothing is called.
        prepares: Whether a call's arguments are prepared before ``before_execute``: parsed and
            completed with their defaults (``prepare_arguments()``),
            so that the hook, the events, the rows and ``execute`` all see the arguments the tool
            runs with; arguments that do not parse block the call ``validation_failed``.
            ``None``: never.
        measured: Receives ``(value, copy, size)`` for a ``dict`` value ``execute`` returned:
            the one walk that checks the value also copies it (new dicts and lists) and measures
            ``len(canonical_json(value).encode())``. Only used while nothing can change the
            result after ``execute`` (no redactor, no ``tool_result`` hook, no tool-output
            guardrail); ``None``: the value is only checked.
    """

    __slots__ = (
        "before_execute",
        "context",
        "emit",
        "execute_scope",
        "filter",
        "grace_ms",
        "guardrails",
        "ledger",
        "limit_tracker",
        "measured",
        "middleware",
        "on_worker_thread",
        "ownership",
        "permission",
        "prepares",
        "redactor",
        "registry",
        "secrets",
        "sync_in_thread",
        "tool_validator",
        "_async_execute",
        "_observed",
    )

    def __init__(
        self,
        *,
        registry: ToolRegistry | Mapping[str, ToolDefinition],
        context: ToolExecutionContext,
        filter: ToolFilter | Sequence[ToolFilter] | None = None,
        middleware: MiddlewareRegistry | None = None,
        tool_validator: ToolValidator | Literal[False] | None = None,
        permission: PermissionPolicy | None = None,
        guardrails: Guardrails | None = None,
        redactor: SecretRedactor | None = None,
        ledger: ToolCallLedger | RunLedger | None = None,
        emit: Callable[[AgentEvent], object] | None = None,
        observed: Callable[[], bool] | None = None,
        limit_tracker: RunLimitTracker | None = None,
        before_execute: BeforeExecute | None = None,
        secrets: Iterable[str] = (),
        ownership: OwnershipScope | None = None,
        tool_abort_grace_ms: float = 5000,
        sync_in_thread: bool | None = None,
        on_worker_thread: Callable[[asyncio.Future[object]], object] | None = None,
        execute_scope: Callable[[ToolCallContent], Callable[[], None]] | None = None,
        measured: KeepMeasured | None = None,
        prepares: Callable[[ToolCallContent], bool] | None = None,
    ) -> None:
        self.registry = registry
        self.context = context
        self.filter = filter
        self.middleware = middleware
        self.tool_validator: ToolValidator | None = (
            None
            if tool_validator is False
            else DEFAULT_VALIDATOR
            if tool_validator is None
            else tool_validator
        )
        """The argument validator (the built-in when none was given); ``None``: no validation."""
        self.permission = permission
        self.guardrails = guardrails
        self.redactor = redactor
        self.ledger = ledger_writer(ledger)
        """The row writer (see ``ledger_writer()``), else ``None``."""
        self.emit = emit
        self._observed = _never if emit is None else _always if observed is None else observed
        """Whether a call's ``tool_execution_started``/``finished`` events are built right now:
        never without ``emit``; else what ``observed`` says (always when not given)."""
        self.limit_tracker = limit_tracker
        self.before_execute = before_execute
        self.secrets: tuple[str, ...] = secrets if isinstance(secrets, tuple) else tuple(secrets)
        self.ownership = ownership
        self.grace_ms = tool_abort_grace_ms
        self.sync_in_thread = sync_in_thread
        self.on_worker_thread = on_worker_thread
        self.execute_scope = execute_scope
        self.measured = measured
        self.prepares = prepares
        self._async_execute: IdentityCache[Callable[..., Any], bool] = IdentityCache(1024)
        """Whether a tool's ``execute`` is an ``async def`` (which never runs in a worker
        thread), asked once per function for this dispatcher's calls rather than per call."""

    # ----------------------------------------------------------------- one call, top to bottom

    async def dispatch(self, call: ToolCallContent) -> ToolResult:
        """Run one tool call through the guarded pipeline and return its result.

        Returns:
            The call's ``ToolResult`` (value, error result or blocked result), never ``None``.

        Raises:
            RunLimitExceeded: the ``max_tool_calls`` breach, or one raised by ``execute``.
            GuardrailError: a tool-stage ``tripwire``/``interrupt``.
            AgentRunSuspended: a suspension signal from ``before_execute``/``execute``.
            asyncio.CancelledError: the dispatching task was cancelled.
            Exception: whatever the ``tool_call`` middleware hook, ``emit`` or ``ledger`` raise.
        """
        # charge the call, let the ``tool_call`` hook replace it
        start_ns = time.monotonic_ns()
        if self.limit_tracker is not None:
            self.limit_tracker.charge_tool_call()
        middleware = self.middleware
        if middleware is not None and middleware.has("tool_call"):
            replaced = await middleware.run("tool_call", call)
            if replaced is not None:
                call = replaced
        report = CallReport(self, call, start_ns)
        # admission: input guardrails, lookup, filters, argument shape, permission
        blocked: ToolResult | None
        guardrails = self.guardrails
        if guardrails is not None and guardrails.tool_input:
            blocked = await self._check_tool_input(guardrails, report)
            if blocked is not None:
                return blocked
        tool = self.registry.get(call.name)
        refusal = self._refusal(call, tool)
        if refusal is not None:
            return await report.blocked(*refusal)
        assert tool is not None
        if self.permission is not None:
            blocked = await self._check_permission(self.permission, report)
            if blocked is not None:
                return blocked
        # preparation: the call's execution context, validation, the pre-execution hook
        context = self._execution_context(report)
        arguments: dict[str, Any] = call.arguments  # a dict: checked by ``_refusal``
        validator = self.tool_validator
        if validator is not None and not builtin_validator_proves_valid(validator, tool, arguments):
            blocked = await self._validate(validator, tool, arguments, context, report)
            if blocked is not None:
                return blocked
        prepares = self.prepares
        if prepares is not None and prepares(call):
            try:
                prepared = prepare_arguments(tool, arguments)
            except Exception as exc:
                return await report.blocked(
                    "validation_failed", str(exc), report.error_info(exc, "validation_failed")
                )
            if prepared is not arguments:
                call = report.call = dataclasses.replace(call, arguments=prepared)
                arguments = prepared
        if self.before_execute is not None:
            blocked = await self._run_before_execute(self.before_execute, tool, context, report)
            if blocked is not None:
                return blocked
        # execution (the started/finished reports build nothing while no ledger and no
        # observer takes them)
        if (observed := self._observed()) or self.ledger is not None:
            await report.started(observed)
        result = await self._execute(tool, arguments, context, report)
        if report.done:  # answered with an error result
            return result
        # the result: output guardrails, redaction, the finished report
        if guardrails is not None and guardrails.tool_output:
            blocked = await self._check_tool_output(guardrails, result, report)
            if blocked is not None:
                return blocked
        if self.redactor is not None:
            result = self.redactor.redact(result)
        if (observed := self._observed()) or self.ledger is not None:
            await report.finished(result, observed)
        else:
            report.done = True
        return result

    # ----------------------------------------------------------------- before execute

    async def _check_tool_input(
        self, guardrails: Guardrails, report: CallReport
    ) -> ToolResult | None:
        """Tool-input guardrails: ``None`` when the call may go on, else the blocked result.

        Raises:
            GuardrailError: a ``tripwire``/``interrupt`` decision (nothing was started yet, so
                there is no terminal event to write).
        """
        terminal = await self._tool_stage_guardrails("tool_input", guardrails, report.call, report)
        if terminal is None:
            return None
        if terminal.action == "block":
            return await report.blocked("guardrail_blocked", "Tool call blocked by guardrail")
        raise GuardrailError(terminal)

    def _refusal(
        self, call: ToolCallContent, tool: ToolDefinition | None
    ) -> tuple[BlockedReason, str, ErrorInfo | None] | None:
        """Why the call is blocked without asking anyone — ``(reason, message, error)`` — or
        ``None``: an unknown tool, a name the filters exclude, arguments that failed to parse or
        are not a JSON object."""
        name = call.name
        if tool is None:
            return "unknown_tool", f"Unknown tool: {name}", None
        if self.filter is not None and not is_tool_allowed(name, self.filter):
            return "tool_denied", f"Tool denied: {name}", None
        error = call.arguments_error
        if error is not None:
            return "invalid_arguments", error.message, error
        if not isinstance(call.arguments, dict):
            return "invalid_arguments", "Tool arguments must be a JSON object", None
        return None

    async def _check_permission(
        self, permission: PermissionPolicy, report: CallReport
    ) -> ToolResult | None:
        """Ask the permission policy: ``None`` when allowed, else the ``permission_denied``
        result."""
        call = report.call
        request = PermissionRequest(
            target=call.name,
            metadata=self.context.metadata,
            tool_call_id=call.id,
            arguments=call.arguments,
        )
        try:
            allowed = await ask_permission(permission, request)
        except Exception as exc:
            return await report.blocked(
                "permission_denied", str(exc), report.error_info(exc, "permission_denied")
            )
        if allowed:
            return None
        return await report.blocked("permission_denied", f"Permission denied: {call.name}")

    def _execution_context(self, report: CallReport) -> ToolExecutionContext:
        """The context ``execute`` receives: the call's id, and ``progress`` bound to this call's
        events and rows when there are events or rows to write."""
        context = self.context
        call_id = report.call.id
        if self.emit is not None or self.ledger is not None:
            # positional, in field order (session_id, run_id, tool_call_id, signal, metadata,
            # progress, run): matching seven keywords would cost a third of the construction
            return ToolExecutionContext(
                context.session_id,
                context.run_id,
                call_id,
                context.signal,
                context.metadata,
                report.progress,
                context.run,
            )
        if context.tool_call_id != call_id:
            return dataclasses.replace(context, tool_call_id=call_id)
        return context

    async def _validate(
        self,
        validator: ToolValidator,
        tool: ToolDefinition,
        arguments: dict[str, Any],
        context: ToolExecutionContext,
        report: CallReport,
    ) -> ToolResult | None:
        """Run the argument validator: ``None`` when valid, else the ``validation_failed`` result.

        Raises:
            PrismConfigError: the validator is not callable.
        """
        if not callable(validator):
            raise PrismConfigError("tool_validator must be None, False or callable")
        try:
            outcome = await run_tool_validator(validator, tool, arguments, context)
        except Exception as exc:
            return await report.blocked(
                "validation_failed", str(exc), report.error_info(exc, "validation_failed")
            )
        if outcome is None:
            return None
        if isinstance(outcome, ErrorInfo):
            return await report.blocked("validation_failed", outcome.message, outcome)
        return await report.blocked("validation_failed", str(outcome))

    async def _run_before_execute(
        self,
        before_execute: BeforeExecute,
        tool: ToolDefinition,
        context: ToolExecutionContext,
        report: CallReport,
    ) -> ToolResult | None:
        """Call the pre-execution hook: ``None`` to go on, else the result the hook held the call
        with, or the ``execution_denied`` result of an exception.

        Raises:
            AgentRunSuspended: a suspension signal raised by the hook (it propagates as raised).
            PrismConfigError: a configuration error raised by the hook (the program's fault).
        """
        try:
            out = before_execute(report.call, tool, context)
            if inspect.isawaitable(out):
                out = await out
        except Exception as exc:
            code = getattr(exc, "code", None)
            if (
                _is_suspension_signal(exc)
                or isinstance(exc, PrismConfigError)
                or (isinstance(code, str) and code.startswith("ERR_PRISM_CONFIG"))
            ):
                raise
            return await report.blocked(
                "execution_denied", str(exc), report.error_info(exc, "execution_denied")
            )
        if isinstance(out, ToolResult):  # held: answered without running, not charged
            report.done = True
            if self.limit_tracker is not None:
                self.limit_tracker.refund_tool_call()
            return out
        return None

    # ----------------------------------------------------------------- execute and after

    async def _execute(
        self,
        tool: ToolDefinition,
        arguments: dict[str, Any],
        context: ToolExecutionContext,
        report: CallReport,
    ) -> ToolResult:
        """``execute``, the normalisation of what it returned and the ``tool_result`` hook, inside
        the ``execute_scope``. A failure is answered here (``report.done`` is then set): an
        interrupted call, a value that is not JSON, an exception that does not propagate.

        Raises:
            BaseException: an exception that propagates (see [`_propagates()`][prism.tools.dispatch._propagates]), after the
                call's terminal report.
        """
        call = report.call
        threaded = PARALLEL_ROUND.get() if self.sync_in_thread is None else self.sync_in_thread
        if threaded and self._async_execute.get_or_build(tool.execute, inspect.iscoroutinefunction):
            threaded = False  # runs inline anyway
        scope = self.execute_scope
        leave_scope = None if scope is None else scope(call)
        try:
            raw = await run_execute(
                tool,
                arguments,
                context,
                grace_ms=self.grace_ms,
                threaded=threaded,
                on_worker_thread=self.on_worker_thread,
            )
            middleware = self.middleware
            hooked = middleware is not None and middleware.has("tool_result")
            result = normalise_result(raw, call, None if hooked else self._keep())
            if hooked:
                assert middleware is not None
                replaced = await middleware.run("tool_result", result)
                if replaced is not None:  # checked and cleaned as a returned result is
                    result = normalise_result(replaced, call)
        except ToolInterrupted:
            return await report.failed(_interrupted_error(self.grace_ms))
        except NotJsonError as exc:
            return await report.failed(
                ErrorInfo(
                    code="invalid_tool_result",
                    message=(
                        f"Tool {call.name} returned a value that is not JSON-compatible: "
                        f"{exc.type_name}"
                    ),
                )
            )
        except (Exception, asyncio.CancelledError) as exc:
            if not _propagates(exc):
                return await self._tool_failed(exc, report)
            await _report_propagating(report, exc)
            raise
        finally:
            if leave_scope is not None:
                leave_scope()
        return result

    def _keep(self) -> KeepMeasured | None:
        """The receiver of a returned dict's one-walk copy and size (``measured``), while nothing
        can change the result after ``execute`` (the ``tool_result`` hook is checked by the
        caller)."""
        guardrails = self.guardrails
        if self.redactor is not None or (guardrails is not None and bool(guardrails.tool_output)):
            return None
        return self.measured

    async def _tool_failed(self, exc: BaseException, report: CallReport) -> ToolResult:
        """Answer a call whose tool raised: the model sees only the message; the developer gets
        the redacted traceback in the log."""
        call = report.call
        redactor = self.redactor
        hidden = self.secrets + (redactor.secrets if redactor is not None else ())
        log_tool_exception(
            exc,
            tool_name=call.name,
            tool_call_id=call.id,
            run_id=self.context.run_id,
            redact=lambda text: redact_value(text, hidden),
        )
        return await report.failed(report.error_info(exc))

    async def _check_tool_output(
        self, guardrails: Guardrails, result: ToolResult, report: CallReport
    ) -> ToolResult | None:
        """Tool-output guardrails (on the unredacted result): ``None`` to go on, else the blocked
        result.

        Raises:
            GuardrailError: a ``tripwire``/``interrupt`` decision, after the call's terminal
                ``tool_execution_error`` event and ``error`` row were written.
        """
        terminal = await self._tool_stage_guardrails("tool_output", guardrails, result, report)
        if terminal is None:
            return None
        if terminal.action == "block":
            return await report.blocked("guardrail_blocked", "Tool result blocked by guardrail")
        error = GuardrailError(terminal)
        await _report_propagating(report, error)
        raise error

    async def _tool_stage_guardrails(
        self,
        stage: Literal["tool_input", "tool_output"],
        guardrails: Guardrails,
        value: Any,
        report: CallReport,
    ) -> GuardrailRecord | None:
        """Run one tool stage's guardrails and return the terminal record, if any."""
        call = report.call
        context = self.context
        outcome = await run_guardrails(
            stage,
            guardrails,
            value,
            GuardrailContext(
                stage=stage,
                value=value,
                session_id=context.session_id,
                run_id=context.run_id,
                metadata=context.metadata,
                signal=context.signal,
                tool_call_id=call.id,
                tool_name=call.name,
            ),
            redactor=self.redactor,
            emit=self.emit,
        )
        return outcome.terminal


# --------------------------------------------------------------------------- errors


def _is_suspension_signal(exc: BaseException) -> bool:
    """Whether ``exc`` asks to suspend the run rather than fail the call.

    True for ``AgentRunSuspended``, ``AgentLoopStateError`` and any exception whose ``code`` is
    ``"ERR_PRISM_DELEGATION_SUSPENDED"`` or starts with ``"ERR_PRISM_LOOP_"``.
    """
    if isinstance(exc, (AgentRunSuspended, AgentLoopStateError)):
        return True
    code = getattr(exc, "code", None)
    return isinstance(code, str) and (
        code == ERR_PRISM_DELEGATION_SUSPENDED or code.startswith("ERR_PRISM_LOOP_")
    )


def _is_task_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is the cancellation of the dispatching task itself."""
    if not isinstance(exc, asyncio.CancelledError):
        return False
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _propagates(exc: BaseException) -> bool:
    """Whether an exception from running the tool is re-raised instead of becoming the call's
    error result: a guardrail tripwire, a limit breach, a suspension signal, the task's own
    cancellation, or a configuration error (``PrismConfigError``, any ``ERR_PRISM_CONFIG*``
    code, e.g. of a child run an agent tool started) — the program's fault, not the model's."""
    code = getattr(exc, "code", None)
    return (
        isinstance(exc, (GuardrailError, RunLimitExceeded, PrismConfigError))
        or (isinstance(code, str) and code.startswith("ERR_PRISM_CONFIG"))
        or _is_suspension_signal(exc)
        or _is_task_cancellation(exc)
    )


async def _report_propagating(report: CallReport, exc: BaseException) -> None:
    """Close a started call whose exception propagates, so it still has one terminal event.

    A suspension signal writes nothing (the resume machinery answers that call); a cancellation
    is reported as ``tool_call_interrupted``.
    """
    if _is_suspension_signal(exc):
        return
    if isinstance(exc, asyncio.CancelledError):
        info = ErrorInfo(code="tool_call_interrupted", message=_INTERRUPTED_RUN_ENDED)
    else:
        info = report.error_info(exc)
    await report.failed(info)


def _interrupted_error(grace_ms: float) -> ErrorInfo:
    """The error of a call that was still running when the abort grace ended."""
    return ErrorInfo(
        code="tool_call_interrupted",
        message=(
            f"tool call interrupted: still running {_fmt_ms(grace_ms)} ms after the run was aborted"
        ),
    )


def _fmt_ms(value: float) -> str:
    """``value`` without a trailing ``.0`` for whole floats."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
