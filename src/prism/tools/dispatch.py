"""``dispatch_tool_call``: the one place a host tool runs.

Limits, middleware, guardrails, lookup, filters, argument checks, permission, validation, the
pre-execution hook, events, ledger rows, the abort grace and result normalisation all happen here,
in a fixed order. The runtime's ``LoopContext.dispatch_tool_call`` wraps it; loops never call a
tool's ``execute`` directly, so no tool runs around these checks.
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
from prism.tools.abort_grace import ToolInterrupted
from prism.tools.execution import PARALLEL_ROUND, run_execute
from prism.tools.failure_log import log_tool_exception
from prism.tools.filters import ToolFilter, is_tool_allowed
from prism.tools.permission import PermissionPolicy, PermissionRequest, ask_permission
from prism.tools.registry import ToolRegistry
from prism.tools.reporting import CallReport, ToolCallLedger, ledger_writer
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

__all__ = ["BeforeExecute", "dispatch_tool_call"]

BeforeExecute: TypeAlias = Callable[
    [ToolCallContent, ToolDefinition, ToolExecutionContext], "Any | Awaitable[Any]"
]
"""Pre-execution hook, called after validation and before the call is reported started (the
runtime's durable hook records approvals and pending calls here)."""

_INTERRUPTED_RUN_ENDED = "tool call interrupted: the run ended before its result was recorded"


async def dispatch_tool_call(
    call: ToolCallContent,
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
    on_worker_thread: Callable[[asyncio.Future[Any]], object] | None = None,
    execute_scope: Callable[[ToolCallContent], Callable[[], None]] | None = None,
    measured: KeepMeasured | None = None,
) -> ToolResult:
    """Run one tool call through the guarded pipeline and return its result.

    In order: charge ``max_tool_calls``; the ``tool_call`` middleware hook; tool-input
    guardrails; lookup; filters; argument checks; permission; validation; ``before_execute``;
    ``tool_execution_started`` and a ``started`` row; ``execute`` and result normalisation; the
    ``tool_result`` middleware hook; tool-output guardrails; redaction of the result;
    ``tool_execution_finished`` and a ``finished`` row.

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
        call: The host tool call (as the provider produced it).
        registry: The run's tools (a registry, or a name → tool mapping).
        context: Execution context; its ``session_id``/``run_id``/``signal``/``metadata`` are
            used. When ``emit`` or ``ledger`` is given, ``execute`` receives a copy whose
            ``tool_call_id`` is the call's and whose ``progress`` emits ``tool_execution_progress``
            and writes a ``started`` progress row, so the caller need not build one.
        filter: Effective tool filters; excluded names are blocked ``tool_denied``.
        middleware: A ``MiddlewareRegistry`` (``tool_call`` and ``tool_result`` hooks).
        tool_validator: ``None`` → :func:`json_schema_tool_validator` (the built-in), ``False`` →
            no validation, else a sync/async :data:`ToolValidator`.
        permission: Sync/async :data:`PermissionPolicy`. ``None``: allow.
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
            :func:`parallel_tool_round`.
        on_worker_thread: Receives the future of a worker thread still running when its call was
            answered (abort grace ended, or the task was cancelled); the caller must await it
            before the run returns. ``None``: the dispatch awaits the thread itself before
            returning or re-raising.
        execute_scope: Called with the call right before ``execute`` runs, in the task the tool
            runs in; what it returns is called right after ``execute`` and the ``tool_result``
            hook, whatever their outcome (a run's trace makes its tool span current here, so
            the tool's own spans nest under it). ``None``: nothing is called.
        measured: Receives ``(value, copy, size)`` for a ``dict`` value ``execute`` returned:
            the one walk that checks the value also copies it (new dicts and lists) and measures
            ``len(canonical_json(value).encode())``. Only used while nothing can change the
            result after ``execute`` (no redactor, no ``tool_result`` hook, no tool-output
            guardrail); ``None``: the value is only checked.

    Returns:
        The call's ``ToolResult`` (value, error result or blocked result), never ``None``.

    Raises:
        RunLimitExceeded: the ``max_tool_calls`` breach, or one raised by ``execute``.
        GuardrailError: a tool-stage ``tripwire``/``interrupt``.
        AgentRunSuspended: a suspension signal from ``before_execute``/``execute``.
        asyncio.CancelledError: the dispatching task was cancelled.
        Exception: whatever the ``tool_call`` middleware hook, ``emit`` or ``ledger`` raise.
    """
    start_ns = time.monotonic_ns()
    if limit_tracker is not None:
        limit_tracker.charge_tool_call()
    if middleware is not None and middleware.has("tool_call"):
        replaced = await middleware.run("tool_call", call)
        if replaced is not None:
            call = replaced
    report = CallReport(
        call,
        context,
        emit=emit,
        observed=observed,
        ledger=None if ledger is None else ledger_writer(ledger),
        redactor=redactor,
        secrets=secrets if isinstance(secrets, tuple) else tuple(secrets),
        ownership=ownership,
        start_ns=start_ns,
    )
    blocked: ToolResult | None
    if guardrails is not None and guardrails.tool_input:
        blocked = await _check_tool_input(guardrails, call, context, report)
        if blocked is not None:
            return blocked

    name = call.name
    tool = registry.get(name)
    if tool is None:
        return await report.blocked("unknown_tool", f"Unknown tool: {name}")
    if filter is not None and not is_tool_allowed(name, filter):
        return await report.blocked("tool_denied", f"Tool denied: {name}")
    if call.arguments_error is not None:
        return await report.blocked(
            "invalid_arguments", call.arguments_error.message, call.arguments_error
        )
    arguments = call.arguments
    if not isinstance(arguments, dict):
        return await report.blocked("invalid_arguments", "Tool arguments must be a JSON object")
    if permission is not None:
        blocked = await _check_permission(permission, call, context, report)
        if blocked is not None:
            return blocked

    exec_context = _execution_context(context, call, report)
    if tool_validator is not False:
        validator = DEFAULT_VALIDATOR if tool_validator is None else tool_validator
        if not builtin_validator_proves_valid(validator, tool, arguments):
            blocked = await _validate(validator, tool, arguments, exec_context, report)
            if blocked is not None:
                return blocked
    if before_execute is not None:
        blocked = await _run_before_execute(before_execute, call, tool, exec_context, report)
        if blocked is not None:
            return blocked

    # the started/finished reports build nothing while no ledger and no observer takes them
    if report.ledger is not None or (emit is not None and (observed is None or observed())):
        await report.started()
    threaded = PARALLEL_ROUND.get() if sync_in_thread is None else sync_in_thread
    leave_scope = None if execute_scope is None else execute_scope(call)
    try:
        # ``execute``, the normalisation of what it returned, the ``tool_result`` hook
        raw = await run_execute(
            tool,
            arguments,
            exec_context,
            grace_ms=tool_abort_grace_ms,
            threaded=threaded,
            on_worker_thread=on_worker_thread,
        )
        keep = measured
        if keep is not None and (
            redactor is not None
            or (middleware is not None and middleware.has("tool_result"))
            or (guardrails is not None and bool(guardrails.tool_output))
        ):
            keep = None
        result = normalise_result(raw, call, keep)
        if middleware is not None and middleware.has("tool_result"):
            hooked = await middleware.run("tool_result", result)
            if hooked is not None:
                result = hooked
    except ToolInterrupted:
        return await report.failed(_interrupted_error(tool_abort_grace_ms))
    except NotJsonError as exc:
        return await report.failed(
            ErrorInfo(
                code="invalid_tool_result",
                message=(
                    f"Tool {name} returned a value that is not JSON-compatible: {exc.type_name}"
                ),
            )
        )
    except (Exception, asyncio.CancelledError) as exc:
        if not _propagates(exc):
            # the model sees only the message; the developer gets the traceback in the log
            hidden = report.secrets + (redactor.secrets if redactor is not None else ())
            log_tool_exception(
                exc,
                tool_name=name,
                tool_call_id=call.id,
                run_id=context.run_id,
                redact=lambda text: redact_value(text, hidden),
            )
            return await report.failed(report.error_info(exc))
        await _report_propagating(report, exc)
        raise
    finally:
        if leave_scope is not None:
            leave_scope()

    if guardrails is not None and guardrails.tool_output:
        blocked = await _check_tool_output(guardrails, result, context, report)
        if blocked is not None:
            return blocked
    if redactor is not None:
        result = redactor.redact(result)
    if report.ledger is not None or (emit is not None and (observed is None or observed())):
        await report.finished(result)
    else:
        report.done = True
    return result


# --------------------------------------------------------------------------- before execute


async def _check_tool_input(
    guardrails: Guardrails,
    call: ToolCallContent,
    context: ToolExecutionContext,
    report: CallReport,
) -> ToolResult | None:
    """Tool-input guardrails: ``None`` when the call may go on, else the blocked result.

    Raises:
        GuardrailError: a ``tripwire``/``interrupt`` decision (nothing was started yet, so there
            is no terminal event to write).
    """
    terminal = await _tool_stage_guardrails("tool_input", guardrails, call, context, report)
    if terminal is None:
        return None
    if terminal.action == "block":
        return await report.blocked("guardrail_blocked", "Tool call blocked by guardrail")
    raise GuardrailError(terminal)


async def _check_permission(
    permission: PermissionPolicy,
    call: ToolCallContent,
    context: ToolExecutionContext,
    report: CallReport,
) -> ToolResult | None:
    """Ask the permission policy: ``None`` when allowed, else the ``permission_denied`` result."""
    request = PermissionRequest(
        target=call.name,
        metadata=context.metadata,
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


def _execution_context(
    context: ToolExecutionContext, call: ToolCallContent, report: CallReport
) -> ToolExecutionContext:
    """The context ``execute`` receives: the call's id, and ``progress`` bound to this call's
    events and rows when there are events or rows to write."""
    if report.emit is not None or report.ledger is not None:
        return ToolExecutionContext(
            session_id=context.session_id,
            run_id=context.run_id,
            tool_call_id=call.id,
            signal=context.signal,
            metadata=context.metadata,
            progress=report.progress,
            run=context.run,
        )
    if context.tool_call_id != call.id:
        return dataclasses.replace(context, tool_call_id=call.id)
    return context


async def _validate(
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
    before_execute: BeforeExecute,
    call: ToolCallContent,
    tool: ToolDefinition,
    context: ToolExecutionContext,
    report: CallReport,
) -> ToolResult | None:
    """Call the pre-execution hook: ``None`` to go on, else the ``execution_denied`` result.

    Raises:
        AgentRunSuspended: a suspension signal raised by the hook (it propagates as raised).
    """
    try:
        out = before_execute(call, tool, context)
        if inspect.isawaitable(out):
            await out
    except Exception as exc:
        if _is_suspension_signal(exc):
            raise
        return await report.blocked(
            "execution_denied", str(exc), report.error_info(exc, "execution_denied")
        )
    return None


# --------------------------------------------------------------------------- execute and after


async def _check_tool_output(
    guardrails: Guardrails,
    result: ToolResult,
    context: ToolExecutionContext,
    report: CallReport,
) -> ToolResult | None:
    """Tool-output guardrails (on the unredacted result): ``None`` to go on, else the blocked
    result.

    Raises:
        GuardrailError: a ``tripwire``/``interrupt`` decision, after the call's terminal
            ``tool_execution_error`` event and ``error`` row were written.
    """
    terminal = await _tool_stage_guardrails("tool_output", guardrails, result, context, report)
    if terminal is None:
        return None
    if terminal.action == "block":
        return await report.blocked("guardrail_blocked", "Tool result blocked by guardrail")
    error = GuardrailError(terminal)
    await _report_propagating(report, error)
    raise error


async def _tool_stage_guardrails(
    stage: Literal["tool_input", "tool_output"],
    guardrails: Guardrails,
    value: Any,
    context: ToolExecutionContext,
    report: CallReport,
) -> GuardrailRecord | None:
    """Run one tool stage's guardrails and return the terminal record, if any."""
    call = report.call
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
        redactor=report.redactor,
        emit=report.emit,
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
