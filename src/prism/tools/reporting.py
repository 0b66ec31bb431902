"""What the dispatcher reports about one tool call: its events and its ledger rows.

Every dispatched call ends in exactly one terminal outcome, each with one event and one ledger
row: finished (``tool_execution_finished``), failed (``tool_execution_error``) or blocked before
``execute`` ran (``tool_execution_blocked``, with a [`BlockedReason`][prism.tools.reporting.BlockedReason]). A call that got as far
as running also has a ``tool_execution_started`` event and a ``started`` row, and each
``context.progress(...)`` of the tool adds a ``tool_execution_progress`` event and a ``started``
row carrying the progress value. [`CallReport`][prism.tools.reporting.CallReport] holds the per-call state this needs.
"""

from __future__ import annotations

import dataclasses
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol, TypeAlias, cast, get_args

from prism._util import new_id, now_iso
from prism.events import (
    AgentEvent,
    ToolExecutionBlockedEvent,
    ToolExecutionErrorEvent,
    ToolExecutionFinishedEvent,
    ToolExecutionMetadata,
    ToolExecutionProgressEvent,
    ToolExecutionStartedEvent,
)
from prism.ledger import ToolCallRecord
from prism.redaction import SecretRedactor, error_to_error_info
from prism.types import (
    ErrorInfo,
    JsonValue,
    OwnershipScope,
    ToolCallContent,
    ToolExecutionContext,
    ToolResult,
)

__all__ = ["BLOCKED_REASONS", "BlockedReason", "CallReport", "ToolCallLedger", "ledger_writer"]

ToolCallLedger: TypeAlias = Callable[[ToolCallRecord], "Any | Awaitable[Any]"]
"""Receives each ``ToolCallRecord`` row; an object with ``append_tool_call`` works too."""

BlockedReason: TypeAlias = Literal[
    "guardrail_blocked",
    "unknown_tool",
    "tool_denied",
    "invalid_arguments",
    "permission_denied",
    "validation_failed",
    "execution_denied",
]
"""Why a call was blocked before its tool ran."""

BLOCKED_REASONS: frozenset[str] = frozenset(get_args(BlockedReason))
"""Every [`BlockedReason`][prism.tools.reporting.BlockedReason]."""


def ledger_writer(ledger: object) -> Callable[[ToolCallRecord], object] | None:
    """The row writer of ``ledger``: its ``append_tool_call`` method, else ``ledger`` itself
    (a callable); ``None`` for no ledger."""
    if ledger is None:
        return None
    return cast("Callable[[ToolCallRecord], object]", getattr(ledger, "append_tool_call", ledger))


class ReportSinks(Protocol):
    """What the reports of every call share: the dispatcher's (see
    [`ToolDispatcher`][prism.tools.dispatch.ToolDispatcher])."""

    context: ToolExecutionContext
    emit: Callable[[AgentEvent], object] | None
    ledger: Callable[[ToolCallRecord], object] | None
    redactor: SecretRedactor | None
    secrets: tuple[str, ...]
    ownership: OwnershipScope | None


class CallReport:
    """Events and ledger rows of one dispatched call, and the per-call state they need.

    What every call shares (``emit``, the row writer, the redactor, the secrets, the ownership,
    the execution context) is read from the dispatcher that made the report.

    Args:
        dispatcher: The dispatcher running the call (its ``emit``, row writer, redactor,
            secrets, ownership and execution context).
        call: The call (after the ``tool_call`` middleware hook).
        start_ns: ``time.monotonic_ns()`` when the dispatch began (for ``duration_ms``).
    """

    __slots__ = (
        "arguments",
        "call",
        "context",
        "done",
        "emit",
        "ledger",
        "ownership",
        "redactor",
        "secrets",
        "start_ns",
        "started_at",
    )

    def __init__(self, dispatcher: ReportSinks, call: ToolCallContent, start_ns: int) -> None:
        self.call = call
        self.context = dispatcher.context
        self.emit = dispatcher.emit
        self.ledger = dispatcher.ledger
        self.redactor = dispatcher.redactor
        self.secrets = dispatcher.secrets
        self.ownership = dispatcher.ownership
        self.start_ns = start_ns
        self.started_at: str | None = None
        # set once a terminal outcome was reported; later progress reports are ignored
        self.done = False
        self.arguments: Any = call.arguments

    def metadata(self, status: Literal["finished", "error", "blocked"]) -> ToolExecutionMetadata:
        """The terminal event's metadata: ``status`` and the whole milliseconds since start."""
        elapsed = time.monotonic_ns() - self.start_ns
        return ToolExecutionMetadata(duration_ms=(elapsed + 500_000) // 1_000_000, status=status)

    async def send(self, event: AgentEvent) -> None:
        """Emit ``event`` (awaiting an awaitable answer); nothing without ``emit``."""
        if self.emit is None:
            return
        out = self.emit(event)
        if out is not None and inspect.isawaitable(out):
            await out

    async def row(
        self,
        status: Literal["started", "finished", "error", "blocked"],
        *,
        result: ToolResult | None = None,
        reason: str | None = None,
        progress: JsonValue = None,
        progress_metadata: Mapping[str, Any] | None = None,
        progress_at: str | None = None,
    ) -> None:
        """Write one ``ToolCallRecord`` row (redacted when a redactor is set); nothing without a
        ledger. Every row of the call shares the ``started_at`` of its first row."""
        if self.ledger is None:
            return
        now = now_iso()
        if self.started_at is None:
            self.started_at = now
        ctx = self.context
        own = self.ownership
        record = ToolCallRecord(
            id=new_id("toolcall"),
            session_id=ctx.session_id,
            run_id=ctx.run_id,
            tool_call_id=self.call.id,
            name=self.call.name,
            arguments=self.arguments,
            status=status,
            started_at=self.started_at,
            finished_at=None if status == "started" else now,
            result=result,
            reason=reason,
            progress=progress,
            progress_metadata=progress_metadata,
            progress_at=progress_at,
            redacted=self.redactor is not None,
            tenant_id=own.tenant_id if own is not None else None,
            account_id=own.account_id if own is not None else None,
            user_id=own.user_id if own is not None else None,
        )
        if self.redactor is not None:
            record = self.redactor.redact(record)
        out = self.ledger(record)
        if inspect.isawaitable(out):
            await out

    def redact_error(self, info: ErrorInfo) -> ErrorInfo:
        """``info`` with secrets redacted (unchanged without a redactor)."""
        return info if self.redactor is None else self.redactor.redact(info)

    def error_info(self, exc: BaseException, default_code: str | None = None) -> ErrorInfo:
        """``ErrorInfo`` of ``exc`` (secrets removed); ``default_code`` when it has no code."""
        info = error_to_error_info(exc, self.secrets)
        if default_code is not None and info.code is None:
            info = dataclasses.replace(info, code=default_code)
        return info

    async def progress(self, value: JsonValue, metadata: Mapping[str, Any] | None = None) -> None:
        """``context.progress``: one ``tool_execution_progress`` event and one ``started`` row.

        Ignored once the call has its terminal outcome.
        """
        if self.done:
            return
        ctx = self.context
        await self.send(
            ToolExecutionProgressEvent(
                session_id=ctx.session_id,
                run_id=ctx.run_id,
                tool_call_id=self.call.id,
                name=self.call.name,
                progress=value,
                metadata=metadata,
            )
        )
        await self.row("started", progress=value, progress_metadata=metadata, progress_at=now_iso())

    async def started(self, observed: bool) -> None:
        """Report that ``execute`` is about to run: ``tool_execution_started`` (when
        ``observed``) and a ``started`` row."""
        if observed:
            ctx = self.context
            await self.send(
                ToolExecutionStartedEvent(
                    session_id=ctx.session_id, run_id=ctx.run_id, call=self.call
                )
            )
        if self.ledger is not None:
            await self.row("started")

    async def finished(self, result: ToolResult, observed: bool) -> None:
        """Report the call's result: ``tool_execution_finished`` (when ``observed``) and a
        ``finished`` row."""
        self.done = True
        if observed:
            ctx = self.context
            await self.send(
                ToolExecutionFinishedEvent(
                    session_id=ctx.session_id,
                    run_id=ctx.run_id,
                    result=result,
                    metadata=self.metadata("finished"),
                )
            )
        if self.ledger is not None:
            await self.row("finished", result=result)

    async def blocked(
        self, reason: BlockedReason, message: str, error: ErrorInfo | None = None
    ) -> ToolResult:
        """Answer the call as blocked: the error result, its event and a ``blocked`` row.

        The result's error is ``error`` (its code defaulting to ``reason``), else
        ``ErrorInfo(message, code=reason)``; it is redacted.
        """
        if error is None:
            error = ErrorInfo(message=message, code=reason)
        elif error.code is None:
            error = dataclasses.replace(error, code=reason)
        return await self._answer(error, reason)

    async def failed(self, error: ErrorInfo) -> ToolResult:
        """Answer the call with an error result: ``tool_execution_error`` and an ``error`` row."""
        return await self._answer(error, None)

    async def _answer(self, error: ErrorInfo, blocked: BlockedReason | None) -> ToolResult:
        """The call's terminal outcome as an error result (``error`` redacted): a
        ``tool_execution_blocked`` event and ``blocked`` row for a ``blocked`` reason, else a
        ``tool_execution_error`` event and an ``error`` row."""
        error = self.redact_error(error)
        call = self.call
        result = ToolResult(tool_call_id=call.id, name=call.name, error=error)
        self.done = True
        ctx = self.context
        event: AgentEvent
        if blocked is not None:
            event = ToolExecutionBlockedEvent(
                session_id=ctx.session_id,
                run_id=ctx.run_id,
                tool_call_id=call.id,
                name=call.name,
                reason=blocked,
                error=error,
                metadata=self.metadata("blocked"),
            )
        else:
            event = ToolExecutionErrorEvent(
                session_id=ctx.session_id,
                run_id=ctx.run_id,
                call=call,
                error=error,
                metadata=self.metadata("error"),
            )
        await self.send(event)
        await self.row("error" if blocked is None else "blocked", result=result, reason=blocked)
        return result
