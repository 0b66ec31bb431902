"""The guarded dispatch pipeline: order, blocked outcomes, errors, permission, ledger rows,
events and the tool-stage guardrails (TOOL-3, TOOL-4, TOOL-5, TOOL-7, TOOL-8, GRD-5, GRD-6, EVT-12).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from tools_support import Recorder, dispatch, echo_tool, make_call, make_context

from prism.errors import (
    ERR_PRISM_GUARDRAIL_BLOCKED,
    ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE,
    AgentRunSuspended,
    GuardrailError,
    RunLimitExceeded,
)
from prism.events import (
    GuardrailDecisionEvent,
    ToolExecutionBlockedEvent,
    ToolExecutionErrorEvent,
    ToolExecutionFinishedEvent,
    ToolExecutionProgressEvent,
    ToolExecutionStartedEvent,
)
from prism.guardrails import Guardrail, GuardrailDecision, Guardrails
from prism.limits import RunLimits, RunLimitTracker, resolve_run_limits
from prism.middleware import MiddlewareRegistry
from prism.redaction import create_secret_redactor
from prism.tools import (
    PermissionRequest,
    ToolFilter,
)
from prism.types import (
    ErrorInfo,
    OwnershipScope,
    RunLimitBreach,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
)

# =========================================================================== TOOL-3 / TOOL-4


async def test_tool3_pipeline_order() -> None:
    """TOOL-3: the fifteen steps run in the specified order."""
    log: list[str] = []

    class Tracker:
        def charge_tool_call(self) -> None:
            log.append("limit")

    middleware = MiddlewareRegistry()
    middleware.use("tool_call", lambda call: (log.append("mw:call"), None)[1])
    middleware.use("tool_result", lambda result: (log.append("mw:result"), None)[1])

    def guard(stage: str) -> Guardrail:
        return Guardrail(stage, stage, lambda ctx: (log.append(f"grd:{stage}"), GuardrailDecision("allow"))[1])  # type: ignore[arg-type]

    class Redactor:
        secrets = ()

        def redact(self, value: Any) -> Any:
            if isinstance(value, ToolResult):
                log.append("redact")
            return value

    def execute(args: dict[str, Any], ctx: ToolExecutionContext) -> str:
        log.append("execute")
        return "ok"

    def emit(event: Any) -> None:
        log.append(f"event:{event.type}")

    result = await dispatch(
        make_call(),
        [ToolDefinition(name="echo", execute=execute)],
        context=make_context(),
        limit_tracker=Tracker(),  # type: ignore[arg-type]
        middleware=middleware,
        guardrails=Guardrails(tool_input=(guard("tool_input"),), tool_output=(guard("tool_output"),)),
        permission=lambda req: (log.append("permission"), True)[1],
        tool_validator=lambda t, a, c: log.append("validate"),
        before_execute=lambda call, t, c: log.append("before"),
        redactor=Redactor(),  # type: ignore[arg-type]
        emit=emit,
        ledger=lambda row: log.append(f"row:{row.status}"),
    )
    assert result.value == "ok" and result.error is None
    assert log == [
        "limit",
        "mw:call",
        "grd:tool_input",
        "event:guardrail_decision",
        "permission",
        "validate",
        "before",
        "event:tool_execution_started",
        "row:started",
        "execute",
        "mw:result",
        "grd:tool_output",
        "event:guardrail_decision",
        "redact",
        "event:tool_execution_finished",
        "row:finished",
    ]


async def test_tool3_middleware_replaced_call_is_used_downstream() -> None:
    """TOOL-3 step 2: later steps use the call returned by the tool_call hook."""
    seen: list[Any] = []
    middleware = MiddlewareRegistry()
    middleware.use("tool_call", lambda call: dataclasses.replace(call, arguments={"x": 2}))
    result = await dispatch(
        make_call(),
        [echo_tool()],
        middleware=middleware,
        permission=lambda req: seen.append(req.arguments),
    )
    assert result.value == {"x": 2}
    assert seen == [{"x": 2}]


async def test_tool3_step1_limit_breach_propagates_before_anything() -> None:
    """TOOL-3 step 1/LIM-4: a max_tool_calls breach raises RunLimitExceeded; nothing is emitted."""
    tracker = RunLimitTracker(resolve_run_limits(RunLimits(max_tool_calls=1)))
    rec = Recorder()
    calls = 0

    def execute(args: Any, ctx: Any) -> None:
        nonlocal calls
        calls += 1

    tools = [ToolDefinition(name="echo", execute=execute)]
    await dispatch(make_call(), tools, rec, limit_tracker=tracker)
    rec.events.clear()
    with pytest.raises(RunLimitExceeded):
        await dispatch(make_call(), tools, rec, limit_tracker=tracker)
    assert calls == 1 and rec.events == []


def _never(args: Any, ctx: Any) -> Any:
    raise AssertionError("execute must not run on a blocked path")


@pytest.mark.parametrize(
    ("case", "reason", "message", "code"),
    [
        ("unknown", "unknown_tool", "Unknown tool: nope", "unknown_tool"),
        ("denied", "tool_denied", "Tool denied: echo", "tool_denied"),
        ("args_error", "invalid_arguments", "bad json", "invalid_json_arguments"),
        ("args_error_nocode", "invalid_arguments", "bad json", "invalid_arguments"),
        ("args_not_dict", "invalid_arguments", "Tool arguments must be a JSON object", "invalid_arguments"),
        ("permission_false", "permission_denied", "Permission denied: echo", "permission_denied"),
        ("permission_raise", "permission_denied", "policy down", "permission_denied"),
        ("permission_raise_code", "permission_denied", "limit", "ERR_PRISM_RUN_LIMIT"),
        ("validator_str", "validation_failed", "x is wrong", "validation_failed"),
        ("validator_info", "validation_failed", "custom", "E_CUSTOM"),
        ("before_raise", "execution_denied", "not now", "execution_denied"),
        ("guardrail", "guardrail_blocked", "Tool call blocked by guardrail", "guardrail_blocked"),
    ],
)
async def test_tool4_blocked_outcomes(case: str, reason: str, message: str, code: str) -> None:
    """TOOL-4: blocked result, code (underlying wins), one blocked event and row; execute never runs."""
    tool_def = ToolDefinition(name="echo", execute=_never)
    call = make_call()
    kw: dict[str, Any] = {}
    if case == "unknown":
        call = make_call("nope")
    elif case == "denied":
        kw["filter"] = ToolFilter(allow=("other",))
    elif case == "args_error":
        call = make_call(arguments={}, arguments_error=ErrorInfo("bad json", code="invalid_json_arguments"))
    elif case == "args_error_nocode":
        call = make_call(arguments={}, arguments_error=ErrorInfo("bad json"))
    elif case == "args_not_dict":
        call = make_call(arguments=["x"])
    elif case == "permission_false":
        kw["permission"] = lambda req: False
    elif case == "permission_raise":
        kw["permission"] = lambda req: (_ for _ in ()).throw(RuntimeError("policy down"))
    elif case == "permission_raise_code":
        breach = RunLimitBreach("max_cost", 1, 2)

        def policy(req: PermissionRequest) -> bool:
            raise RunLimitExceeded(breach, "limit")

        kw["permission"] = policy
    elif case == "validator_str":
        kw["tool_validator"] = lambda t, a, c: "x is wrong"
    elif case == "validator_info":

        async def validator(t: Any, a: Any, c: Any) -> ErrorInfo:
            return ErrorInfo("custom", code="E_CUSTOM")

        kw["tool_validator"] = validator
    elif case == "before_raise":

        async def before(call: Any, t: Any, c: Any) -> None:
            raise RuntimeError("not now")

        kw["before_execute"] = before
    elif case == "guardrail":
        kw["guardrails"] = Guardrails(
            tool_input=(Guardrail("g", "tool_input", lambda ctx: GuardrailDecision("block")),)
        )
    rec = Recorder()
    result = await dispatch(call, [tool_def], rec, **kw)
    assert result.tool_call_id == call.id and result.name == call.name
    assert result.error is not None
    assert (result.error.message, result.error.code) == (message, code)
    blocked = [e for e in rec.events if isinstance(e, ToolExecutionBlockedEvent)]
    assert len(blocked) == 1
    event = blocked[0]
    assert (event.tool_call_id, event.name, event.reason, event.error) == (call.id, call.name, reason, result.error)
    assert event.metadata.status == "blocked" and isinstance(event.metadata.duration_ms, int)
    assert (event.session_id, event.run_id) == ("session_1", "run_1")
    assert not any(isinstance(e, ToolExecutionStartedEvent) for e in rec.events)
    assert [(r.status, r.reason) for r in rec.rows] == [("blocked", reason)]


async def test_tool3_step9_suspension_signal_propagates_unchanged() -> None:
    """TOOL-3 step 9/POOL-6: a suspension signal from before_execute propagates unchanged."""
    signal = AgentRunSuspended()
    rec = Recorder()

    def before(call: Any, t: Any, c: Any) -> None:
        raise signal

    with pytest.raises(AgentRunSuspended) as info:
        await dispatch(make_call(), [ToolDefinition(name="echo", execute=_never)], rec, before_execute=before)
    assert info.value is signal
    assert rec.events == [] and rec.rows == []


async def test_tool3_execute_exception_becomes_error_result_with_secrets_removed() -> None:
    """TOOL-3: an exception from execute → error_to_error_info(exc, secrets), error event and row."""

    class ToolFailure(Exception):
        code = "E_TOOL"

    def execute(args: Any, ctx: Any) -> None:
        raise ToolFailure("failed with sk-abc")

    rec = Recorder()
    call = make_call()
    result = await dispatch(call, [ToolDefinition(name="echo", execute=execute)], rec, secrets=("sk-abc",))
    assert result.error == ErrorInfo(message="failed with [REDACTED]", name="ToolFailure", code="E_TOOL")
    assert rec.types == ["tool_execution_started", "tool_execution_error"]
    error_event = rec.events[-1]
    assert isinstance(error_event, ToolExecutionErrorEvent)
    assert error_event.call == call and error_event.error == result.error
    assert error_event.metadata.status == "error"
    assert [r.status for r in rec.rows] == ["started", "error"]


async def test_tool3_tool_result_middleware_exception_becomes_error_result() -> None:
    """TOOL-3 step 12/RUN-2: an exception in the tool_result hook turns the call into an error result."""
    middleware = MiddlewareRegistry()

    def broken(result: ToolResult) -> ToolResult:
        raise ValueError("hook broke")

    middleware.use("tool_result", broken)
    rec = Recorder()
    result = await dispatch(make_call(), [echo_tool()], rec, middleware=middleware)
    assert result.error is not None and result.error.message == "hook broke"
    assert rec.types[-1] == "tool_execution_error"


@pytest.mark.parametrize(
    "exc",
    [
        GuardrailError.__new__(GuardrailError),
        RunLimitExceeded(RunLimitBreach("max_cost", 1, 2)),
        AgentRunSuspended(),
    ],
)
async def test_tool3_run_level_exceptions_from_execute_propagate(exc: BaseException) -> None:
    """TOOL-3: GuardrailError, RunLimitExceeded and suspension signals from execute propagate."""
    if isinstance(exc, GuardrailError):
        from prism.types import GuardrailRecord

        exc = GuardrailError(GuardrailRecord("g", "tool_input", "tripwire"))

    async def execute(args: Any, ctx: Any) -> None:
        raise exc

    rec = Recorder()
    with pytest.raises(type(exc)):
        await dispatch(make_call(), [ToolDefinition(name="echo", execute=execute)], rec)
    terminal = [t for t in rec.types if t != "tool_execution_started"]
    if isinstance(exc, AgentRunSuspended):
        assert terminal == []  # answered by the resume machinery (POOL-6)
    else:
        assert terminal == ["tool_execution_error"]  # EVT-12: one terminal event per started call


async def test_tool3_cancelled_error_raised_by_tool_itself_is_an_error_result() -> None:
    """TOOL-3: a CancelledError the tool raises on its own (task not cancelling) is ordinary."""

    async def execute(args: Any, ctx: Any) -> None:
        inner = asyncio.ensure_future(asyncio.sleep(10))
        inner.cancel()
        await inner

    result = await dispatch(make_call(), [ToolDefinition(name="echo", execute=execute)])
    assert result.error is not None and result.error.name == "CancelledError"


async def test_tool3_task_cancellation_propagates_at_once() -> None:
    """TOOL-3/TOOL-10/RUN-10: cancelling the running task cancels execute at once and propagates."""
    started = asyncio.Event()
    cleaned: list[bool] = []

    async def execute(args: Any, ctx: Any) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.append(True)

    rec = Recorder()
    task = asyncio.ensure_future(
        dispatch(make_call(), [ToolDefinition(name="echo", execute=execute)], rec, tool_abort_grace_ms=60_000)
    )
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == [True]
    assert rec.types == ["tool_execution_started", "tool_execution_error"]
    assert rec.events[-1].error.code == "tool_call_interrupted"


# =========================================================================== TOOL-5


async def test_tool5_metadata_duration_and_status() -> None:
    """TOOL-5: duration_ms is a whole number of ms; status matches the terminal event."""
    rec = Recorder()
    await dispatch(make_call(), [echo_tool()], rec)
    finished = rec.events[-1]
    assert isinstance(finished, ToolExecutionFinishedEvent)
    assert finished.metadata.status == "finished"
    assert isinstance(finished.metadata.duration_ms, int) and finished.metadata.duration_ms >= 0


# =========================================================================== TOOL-7


async def test_tool7_permission_request_and_allow_values() -> None:
    """TOOL-7: PermissionRequest fields; True/None allow; async policies are awaited."""
    requests: list[PermissionRequest] = []

    async def policy(req: PermissionRequest) -> bool | None:
        requests.append(req)
        return None

    result = await dispatch(make_call(arguments={"q": 1}, id="c7"), [echo_tool()], permission=policy)
    assert result.error is None
    (req,) = requests
    assert (req.kind, req.action, req.target, req.tool_call_id) == ("tool", "execute", "echo", "c7")
    assert req.metadata == {"tenant": "acme"} and req.arguments == {"q": 1}
    assert (await dispatch(make_call(), [echo_tool()], permission=lambda r: True)).error is None


# =========================================================================== TOOL-8


async def test_tool8_ledger_rows_progress_and_redaction() -> None:
    """TOOL-8: started/progress/finished rows, redacted before writing, with ownership fields."""

    async def execute(args: Any, ctx: ToolExecutionContext) -> str:
        await ctx.progress({"pct": 50, "note": "sk-s"}, {"step": "half"})
        return "done sk-s"

    rec = Recorder()
    result = await dispatch(
        make_call(arguments={"token": "sk-s"}),
        [ToolDefinition(name="echo", execute=execute)],
        rec,
        redactor=create_secret_redactor(["sk-s"]),
        ownership=OwnershipScope(tenant_id="t1", user_id="u1"),
    )
    assert result.value == "done [REDACTED]"
    assert rec.types == ["tool_execution_started", "tool_execution_progress", "tool_execution_finished"]
    progress = rec.events[1]
    assert isinstance(progress, ToolExecutionProgressEvent)
    assert (progress.tool_call_id, progress.name, progress.metadata) == ("c1", "echo", {"step": "half"})
    assert [r.status for r in rec.rows] == ["started", "started", "finished"]
    started, prog, finished = rec.rows
    assert started.progress is None and started.finished_at is None
    assert prog.progress == {"pct": 50, "note": "[REDACTED]"}
    assert prog.progress_metadata == {"step": "half"} and prog.progress_at is not None
    assert finished.finished_at is not None and finished.started_at == started.started_at
    for row in rec.rows:
        assert row.arguments == {"token": "[REDACTED]"}
        assert row.redacted is True
        assert (row.session_id, row.run_id, row.tool_call_id, row.name) == ("session_1", "run_1", "c1", "echo")
        assert (row.tenant_id, row.account_id, row.user_id) == ("t1", None, "u1")
        assert row.id.startswith("toolcall_")
    assert len({row.id for row in rec.rows}) == 3


async def test_tool8_ledger_object_with_append_tool_call() -> None:
    """TOOL-8: a RunLedger-like object (append_tool_call) is accepted as ledger."""
    rows: list[Any] = []

    class Ledger:
        async def append_tool_call(self, record: Any) -> None:
            rows.append(record)

    await dispatch(make_call(), [echo_tool()], ledger=Ledger())
    assert [r.status for r in rows] == ["started", "finished"]
    assert rows[0].redacted is False


# =========================================================================== GRD-5 / GRD-6 tool stages


def _guards(stage: str, action: str) -> Guardrails:
    g = Guardrail("g", stage, lambda ctx: GuardrailDecision(action))  # type: ignore[arg-type]
    return Guardrails(**{stage: (g,)})


@pytest.mark.parametrize(
    ("action", "code"),
    [("tripwire", ERR_PRISM_GUARDRAIL_BLOCKED), ("interrupt", ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE)],
)
async def test_grd5_tool_input_tripwire_and_interrupt_raise(action: str, code: str) -> None:
    """GRD-5: tool_input tripwire/interrupt fail the run with GuardrailError; execute never runs."""
    rec = Recorder()
    with pytest.raises(GuardrailError) as info:
        await dispatch(make_call(), [ToolDefinition(name="echo", execute=_never)], rec,
                       guardrails=_guards("tool_input", action))
    assert info.value.code == code
    assert rec.types == ["guardrail_decision"]


async def test_grd5_tool_output_block_discards_result() -> None:
    """GRD-5/TOOL-3 step 13: tool_output block discards the raw result; blocked after started."""
    rec = Recorder()
    result = await dispatch(make_call(), [echo_tool()], rec, guardrails=_guards("tool_output", "block"))
    assert result.value is None
    assert result.error == ErrorInfo(message="Tool result blocked by guardrail", code="guardrail_blocked")
    assert rec.types == ["tool_execution_started", "guardrail_decision", "tool_execution_blocked"]
    assert [r.status for r in rec.rows] == ["started", "blocked"]


async def test_grd5_tool_output_tripwire_raises_after_closing_the_call() -> None:
    """GRD-5: tool_output tripwire raises GuardrailError; the started call gets its error event."""
    rec = Recorder()
    with pytest.raises(GuardrailError):
        await dispatch(make_call(), [echo_tool()], rec, guardrails=_guards("tool_output", "tripwire"))
    assert rec.types == ["tool_execution_started", "guardrail_decision", "tool_execution_error"]


async def test_grd6_tool_output_guard_sees_result_before_redaction() -> None:
    """GRD-6: tool-output guardrails run after tool_result middleware and before redaction."""
    seen: list[Any] = []
    middleware = MiddlewareRegistry()
    middleware.use("tool_result", lambda r: dataclasses.replace(r, value=r.value + " +mw"))
    g = Guardrail("g", "tool_output", lambda ctx: (seen.append(ctx.value.value), GuardrailDecision("allow"))[1])
    result = await dispatch(
        make_call(),
        [ToolDefinition(name="echo", execute=lambda a, c: "key sk-1")],
        guardrails=Guardrails(tool_output=(g,)),
        middleware=middleware,
        redactor=create_secret_redactor(["sk-1"]),
    )
    assert seen == ["key sk-1 +mw"]
    assert result.value == "key [REDACTED] +mw"


async def test_grd6_tool_input_guard_runs_after_middleware_before_lookup() -> None:
    """GRD-6: tool_input guards see the middleware's call and run before lookup (unknown tools too)."""
    seen: list[str] = []
    middleware = MiddlewareRegistry()
    middleware.use("tool_call", lambda c: dataclasses.replace(c, name="renamed"))
    g = Guardrail("g", "tool_input", lambda ctx: (seen.append(ctx.value.name), GuardrailDecision("allow"))[1])
    result = await dispatch(make_call(), [echo_tool()], middleware=middleware, guardrails=Guardrails(tool_input=(g,)))
    assert seen == ["renamed"]
    assert result.error is not None and result.error.code == "unknown_tool"


async def test_evt12_tool_event_order() -> None:
    """EVT-12: input decisions → started → progress → output decisions → finished."""

    async def execute(args: Any, ctx: ToolExecutionContext) -> int:
        await ctx.progress(1)
        await ctx.progress(2)
        return 3

    allow = lambda stage: Guardrail("g", stage, lambda ctx: GuardrailDecision("allow"))  # noqa: E731
    rec = Recorder()
    await dispatch(
        make_call(),
        [ToolDefinition(name="echo", execute=execute)],
        rec,
        guardrails=Guardrails(tool_input=(allow("tool_input"),), tool_output=(allow("tool_output"),)),
    )
    assert rec.types == [
        "guardrail_decision",
        "tool_execution_started",
        "tool_execution_progress",
        "tool_execution_progress",
        "guardrail_decision",
        "tool_execution_finished",
    ]
    decisions = [e for e in rec.events if isinstance(e, GuardrailDecisionEvent)]
    assert [d.record.stage for d in decisions] == ["tool_input", "tool_output"]
    assert all(d.tool_call_id == "c1" and d.tool_name == "echo" for d in decisions)


async def test_unobserved_calls_build_no_started_or_finished_events() -> None:
    """While ``observed`` answers False the common events are not built; each is decided when
    it would be sent, so an observer that arrives during the call gets the ``finished`` event."""
    watching = [False]

    async def execute(args: Any, ctx: ToolExecutionContext) -> int:
        watching[0] = True
        return 1

    rec = Recorder()
    await dispatch(make_call(), [echo_tool()], rec, observed=lambda: False)
    assert rec.types == [] and [r.status for r in rec.rows] == ["started", "finished"]
    rec = Recorder()
    await dispatch(
        make_call(), [ToolDefinition(name="echo", execute=execute)], rec, observed=lambda: watching[0]
    )
    assert rec.types == ["tool_execution_finished"]
