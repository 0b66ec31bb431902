"""Tool registry, filters, the dispatch pipeline and the tool decorator (TOOL-1..TOOL-14)."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from prism.abort import AbortController, AbortSignal
from prism.errors import (
    ERR_PRISM_GUARDRAIL_BLOCKED,
    ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE,
    AbortError,
    AgentRunSuspended,
    GuardrailError,
    PrismConfigError,
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
    ToolRegistry,
    create_tool_registry,
    dispatch_tool_call,
    filter_tools,
    json_schema_tool_validator,
    normalize_tool_filters,
    parallel_tool_round,
    resolve_tool_validator,
    tool,
)
from prism.types import (
    ErrorInfo,
    OwnershipScope,
    RunLimitBreach,
    ToolCallContent,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
)

# --------------------------------------------------------------------------- helpers


def echo_tool(name: str = "echo", parameters: dict[str, Any] | None = None, **kw: Any) -> ToolDefinition:
    return ToolDefinition(name=name, execute=lambda args, ctx: dict(args), parameters=parameters, **kw)


def make_call(name: str = "echo", arguments: Any = None, id: str = "c1", **kw: Any) -> ToolCallContent:
    return ToolCallContent(id=id, name=name, arguments={"x": 1} if arguments is None else arguments, **kw)


def make_context(signal: AbortSignal | None = None) -> ToolExecutionContext:
    return ToolExecutionContext(
        session_id="session_1",
        run_id="run_1",
        tool_call_id="c1",
        signal=signal if signal is not None else AbortController().signal,
        metadata={"tenant": "acme"},
    )


class Recorder:
    """Collects events and ledger rows in one ordered log."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.rows: list[Any] = []
        self.log: list[str] = []

    def emit(self, event: Any) -> None:
        self.events.append(event)
        self.log.append(f"event:{event.type}")

    def ledger(self, record: Any) -> None:
        self.rows.append(record)
        self.log.append(f"row:{record.status}")

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]


async def dispatch(
    call: ToolCallContent,
    tools: list[ToolDefinition] | ToolRegistry,
    rec: Recorder | None = None,
    context: ToolExecutionContext | None = None,
    **kw: Any,
) -> ToolResult:
    registry = tools if isinstance(tools, ToolRegistry) else create_tool_registry(tools)
    if rec is not None:
        kw.setdefault("emit", rec.emit)
        kw.setdefault("ledger", rec.ledger)
    return await dispatch_tool_call(
        call, registry=registry, context=context or make_context(), **kw
    )


# =========================================================================== TOOL-1


def test_tool1_registry_register_get_resolve_list() -> None:
    """TOOL-1: get/resolve/list in insertion order; resolve raises KeyError for unknown names."""
    a, b = echo_tool("a"), echo_tool("b")
    registry = create_tool_registry([a])
    registry.register(b)
    assert registry.get("a") is a and registry.get("zzz") is None
    assert registry.resolve("b") is b
    assert registry.list() == [a, b]
    with pytest.raises(KeyError, match="Unknown tool: zzz"):
        registry.resolve("zzz")
    assert "a" in registry and len(registry) == 2


def test_tool1_duplicate_error_and_replace_keeps_position() -> None:
    """TOOL-1: duplicate="error" raises PrismConfigError; "replace" keeps the first position."""
    a1, b, a2 = echo_tool("a"), echo_tool("b"), echo_tool("a", description="new")
    with pytest.raises(PrismConfigError, match="Duplicate tool: a"):
        create_tool_registry([a1, b, a2])
    registry = create_tool_registry([a1, b, a2], duplicate="replace")
    assert registry.list() == [a2, b]
    with pytest.raises(PrismConfigError):
        create_tool_registry(duplicate="ignore")  # type: ignore[arg-type]
    with pytest.raises(PrismConfigError):
        create_tool_registry(["not a tool"])  # type: ignore[list-item]
    copy = create_tool_registry(registry)
    assert copy.list() == registry.list() and copy is not registry


# =========================================================================== TOOL-2 / TOOL-13


def test_tool2_filter_semantics() -> None:
    """TOOL-2: kept when no filter denies it and every filter with a non-empty allow lists it."""
    tools = [echo_tool(n) for n in ("a", "b", "c")]
    names = lambda ts: [t.name for t in ts]  # noqa: E731
    assert names(filter_tools(tools, ToolFilter(allow=("a", "b")))) == ["a", "b"]
    assert names(filter_tools(tools, ToolFilter(deny=("b",)))) == ["a", "c"]
    assert names(filter_tools(tools, ToolFilter(allow=("a", "b"), deny=("a",)))) == ["b"]
    assert names(filter_tools(tools, [ToolFilter(allow=("a", "b")), ToolFilter(allow=("b", "c"))])) == ["b"]
    assert names(filter_tools(tools, [ToolFilter(), ToolFilter(deny=("c",))])) == ["a", "b"]
    assert names(filter_tools(tools, None)) == ["a", "b", "c"]
    assert names(filter_tools(create_tool_registry(tools), ToolFilter(allow=["c"]))) == ["c"]  # type: ignore[arg-type]


def test_tool13_filter_values_are_checked() -> None:
    """TOOL-13/RUN-1: a ToolFilter or a sequence of them; anything else raises PrismConfigError."""
    f = ToolFilter(allow=("a",))
    assert normalize_tool_filters(f) == (f,)
    assert normalize_tool_filters([f, f]) == (f, f)
    assert normalize_tool_filters(None) == ()
    for bad in ("a", {"allow": ["a"]}, [f, "x"], 3):
        with pytest.raises(PrismConfigError):
            normalize_tool_filters(bad)  # type: ignore[arg-type]
    with pytest.raises(PrismConfigError):
        ToolFilter(allow="abc")  # type: ignore[arg-type]


async def test_tool13_filtered_out_registered_tool_is_blocked_tool_denied() -> None:
    """TOOL-13/TOOL-3 step 5: a registered tool the filters exclude is blocked tool_denied."""
    rec = Recorder()
    result = await dispatch(make_call(), [echo_tool()], rec, filter=[ToolFilter(), ToolFilter(deny=("echo",))])
    assert result.error == ErrorInfo(message="Tool denied: echo", code="tool_denied")
    assert rec.types == ["tool_execution_blocked"]


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


# =========================================================================== TOOL-6


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "items": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}}}},
        "a/b~c": {"type": "integer"},
    },
    "required": ["name"],
    "additionalProperties": False,
}


async def test_tool6_builtin_validator_messages_sorted_with_pointers() -> None:
    """TOOL-6: '; '-joined '<pointer>: <message>' sorted by (pointer, message); root has no pointer."""
    validator = json_schema_tool_validator()
    t = echo_tool(parameters=SCHEMA)
    message = validator(t, {"items": [{"id": "x"}], "a/b~c": "s", "extra": 1}, make_context())
    assert message == (
        "'name' is a required property; "
        "Additional properties are not allowed ('extra' was unexpected); "
        "/a~1b~0c: 's' is not of type 'integer'; "
        "/items/0/id: 'x' is not of type 'integer'"
    )
    assert validator(t, {"name": "n"}, make_context()) is None


async def test_tool6_root_errors_sorted_by_message() -> None:
    """TOOL-6: errors at the same pointer are ordered by message."""
    validator = json_schema_tool_validator()
    schema = {"type": "object", "required": ["b", "a"]}
    message = validator(echo_tool(parameters=schema), {}, make_context())
    assert message == "'a' is a required property; 'b' is a required property"


async def test_tool6_builtin_is_default_and_blocks_with_redacted_message() -> None:
    """TOOL-6/TOOL-3 step 8: tool_validator=None uses the built-in; the message is redacted."""
    rec = Recorder()
    t = echo_tool(parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
    result = await dispatch(
        make_call(arguments={"n": "sk-xyz"}), [t], rec, redactor=create_secret_redactor(["sk-xyz"])
    )
    assert result.error is not None
    assert result.error.code == "validation_failed"
    assert result.error.message == "/n: '[REDACTED]' is not of type 'integer'"
    assert rec.types == ["tool_execution_blocked"]


async def test_tool6_false_disables_validation() -> None:
    """TOOL-6: tool_validator=False disables validation."""
    t = echo_tool(parameters={"type": "object", "required": ["missing"]})
    result = await dispatch(make_call(), [t], tool_validator=False)
    assert result.error is None and result.value == {"x": 1}
    blocked = await dispatch(make_call(), [t])
    assert blocked.error is not None and blocked.error.code == "validation_failed"


async def test_tool6_invalid_schema_and_missing_schema() -> None:
    """TOOL-6: an invalid schema message; missing_schema="reject" blocks tools without parameters."""
    validator = json_schema_tool_validator()
    bad = echo_tool("bad", parameters={"type": 12})
    message = validator(bad, {}, make_context())
    assert message is not None and message.startswith("invalid parameters schema for tool bad: ")
    assert validator(echo_tool(), {"any": 1}, make_context()) is None
    strict = json_schema_tool_validator(missing_schema="reject")
    assert strict(echo_tool(), {}, make_context()) is not None
    with pytest.raises(PrismConfigError):
        json_schema_tool_validator(missing_schema="maybe")  # type: ignore[arg-type]


async def test_tool6_validator_built_once_per_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """TOOL-6: the checked validator is built once per tool and schema, not per call."""
    import jsonschema

    built = 0
    real = jsonschema.Draft202012Validator.check_schema

    def counting(schema: Any, *a: Any, **k: Any) -> Any:
        nonlocal built
        built += 1
        return real(schema, *a, **k)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", counting)
    # `enum` is outside the jsonschema-free fast path, so every call reaches jsonschema
    t = echo_tool(parameters={"type": "object", "properties": {"x": {"enum": [1, 2]}}})
    for _ in range(5):
        assert (await dispatch(make_call(), [t])).error is None
    assert built == 1


async def test_tool6_uses_validator_for_draft() -> None:
    """TOOL-6: the validator class comes from validator_for($schema)."""
    validator = json_schema_tool_validator()
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
              "properties": {"n": {"type": "number", "maximum": 5, "exclusiveMaximum": True}}}
    assert validator(echo_tool(parameters=draft4), {"n": 5}, make_context()) is not None
    assert validator(echo_tool(parameters=draft4), {"n": 4}, make_context()) is None


def test_tool6_effective_validator_run_then_agent_then_builtin() -> None:
    """TOOL-6/RUN-6: run value wins, else agent, else the built-in; False disables; bad values raise."""

    def mine(t: Any, a: Any, c: Any) -> None:
        return None

    builtin = resolve_tool_validator(None, None)
    assert callable(builtin) and builtin is resolve_tool_validator(None)
    assert resolve_tool_validator(mine, None) is mine
    assert resolve_tool_validator(False, mine) is mine
    assert resolve_tool_validator(mine, False) is False
    assert resolve_tool_validator(False, None) is False
    with pytest.raises(PrismConfigError):
        resolve_tool_validator(True, None)  # type: ignore[arg-type]
    with pytest.raises(PrismConfigError):
        resolve_tool_validator(None, "x")  # type: ignore[arg-type]


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


# =========================================================================== TOOL-10


async def test_tool10_call_finishing_within_grace_keeps_its_result() -> None:
    """TOOL-10: a call finishing within the grace after an abort keeps its real result."""
    controller = AbortController()

    async def execute(args: Any, ctx: ToolExecutionContext) -> str:
        controller.abort()
        await ctx.signal.wait()
        await asyncio.sleep(0)
        return "finished anyway"

    result = await dispatch(
        make_call(), [ToolDefinition(name="echo", execute=execute)], context=make_context(controller.signal)
    )
    assert result.value == "finished anyway"


async def test_tool10_abort_error_raised_within_grace_is_its_error_row() -> None:
    """TOOL-10: an AbortError the tool raises within the grace becomes its error result."""
    controller = AbortController()

    async def execute(args: Any, ctx: ToolExecutionContext) -> None:
        controller.abort()
        ctx.signal.throw_if_aborted()

    result = await dispatch(
        make_call(), [ToolDefinition(name="echo", execute=execute)], context=make_context(controller.signal)
    )
    assert result.error is not None and result.error.code == AbortError.code


async def test_tool10_still_running_after_grace_is_cancelled_and_interrupted() -> None:
    """TOOL-10: a call still running when the grace ends is cancelled (cleanup awaited) and answered."""
    controller = AbortController()
    cleaned: list[str] = []

    async def execute(args: Any, ctx: ToolExecutionContext) -> None:
        controller.abort()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)
            cleaned.append("finally")

    rec = Recorder()
    result = await dispatch(
        make_call(),
        [ToolDefinition(name="echo", execute=execute)],
        rec,
        context=make_context(controller.signal),
        tool_abort_grace_ms=0,
    )
    assert cleaned == ["finally"]
    assert result.error == ErrorInfo(
        code="tool_call_interrupted",
        message="tool call interrupted: still running 0 ms after the run was aborted",
    )
    assert rec.types == ["tool_execution_started", "tool_execution_error"]
    assert [r.status for r in rec.rows] == ["started", "error"]
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0  # our own cancellation was undone


async def test_tool10_external_cancel_during_grace_still_propagates() -> None:
    """TOOL-10/RUN-10: a cancellation of the task itself is not swallowed by the grace logic."""
    controller = AbortController()
    entered = asyncio.Event()

    async def execute(args: Any, ctx: ToolExecutionContext) -> None:
        entered.set()
        await asyncio.Event().wait()

    task = asyncio.ensure_future(
        dispatch(
            make_call(),
            [ToolDefinition(name="echo", execute=execute)],
            context=make_context(controller.signal),
            tool_abort_grace_ms=60_000,
        )
    )
    await entered.wait()
    controller.abort()
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_tool10_worker_thread_answered_after_grace_and_handed_over() -> None:
    """TOOL-10/TOOL-11: a worker thread still running after the grace is answered; its future is
    handed over so the runtime can await it before run() returns."""
    controller = AbortController()
    release = threading.Event()
    entered = threading.Event()
    finished: list[str] = []

    def execute(args: Any, ctx: ToolExecutionContext) -> str:
        entered.set()
        release.wait(10)
        finished.append("thread")
        return "late"

    handed: list[asyncio.Future[Any]] = []
    task = asyncio.ensure_future(
        dispatch(
            make_call(),
            [ToolDefinition(name="echo", execute=execute)],
            context=make_context(controller.signal),
            tool_abort_grace_ms=0,
            sync_in_thread=True,
            on_worker_thread=handed.append,
        )
    )
    assert await asyncio.to_thread(entered.wait, 5)
    controller.abort()
    result = await task
    assert result.error is not None and result.error.code == "tool_call_interrupted"
    assert finished == [] and len(handed) == 1
    release.set()
    assert await handed[0] == "late"
    assert finished == ["thread"]


async def test_tool10_no_listener_for_sync_inline_and_removed_after_async() -> None:
    """TOOL-10/RUN-25: the grace costs nothing on the normal path (no listener left behind)."""

    class CountingSignal:
        aborted = False
        reason = None

        def __init__(self) -> None:
            self.added = 0
            self.removed = 0

        def add_listener(self, cb: Callable[..., Any]) -> Callable[[], None]:
            self.added += 1

            def remove() -> None:
                self.removed += 1

            return remove

    signal = CountingSignal()
    ctx = make_context(signal)  # type: ignore[arg-type]
    await dispatch(make_call(), [echo_tool()], context=ctx)
    assert signal.added == 0

    async def execute(args: Any, c: Any) -> int:
        return 1

    await dispatch(make_call(), [ToolDefinition(name="echo", execute=execute)], context=ctx)
    assert signal.added == signal.removed == 1


# =========================================================================== TOOL-11


async def test_tool11_sync_tool_inline_when_sequential_thread_when_parallel() -> None:
    """TOOL-11: a sync execute runs inline sequentially and in a worker thread (context copied) in
    a parallel round."""
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: list[tuple[int, str]] = []

    def execute(args: Any, ctx: Any) -> None:
        seen.append((threading.get_ident(), var.get()))

    tools = [ToolDefinition(name="echo", execute=execute)]
    var.set("copied")
    await dispatch(make_call(), tools)
    with parallel_tool_round():
        await asyncio.gather(dispatch(make_call(), tools), dispatch(make_call(id="c2"), tools))
    await dispatch(make_call(), tools, sync_in_thread=True)
    loop_thread = threading.get_ident()
    assert seen[0] == (loop_thread, "copied")
    assert all(ident != loop_thread and value == "copied" for ident, value in seen[1:])


async def test_tool11_parallel_threads_overlap_blocking_tools() -> None:
    """TOOL-11: in a parallel round blocking sync tools overlap (counted in flight)."""
    lock = threading.Lock()
    in_flight = 0
    peak = 0
    barrier = threading.Barrier(2, timeout=5)

    def execute(args: Any, ctx: Any) -> str:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        barrier.wait()  # only passes when both run at the same time
        with lock:
            in_flight -= 1
        return "ok"

    tools = [ToolDefinition(name="echo", execute=execute)]
    with parallel_tool_round():
        results = await asyncio.gather(dispatch(make_call(), tools), dispatch(make_call(id="c2"), tools))
    assert [r.value for r in results] == ["ok", "ok"] and peak == 2


@pytest.mark.parametrize("width", [8, min(32, (os.cpu_count() or 1) + 4) + 1])
async def test_tool11_a_parallel_round_never_waits_for_a_worker_thread(width: int) -> None:
    """TOOL-11: with ``tool_concurrency=width`` all ``width`` blocking sync tools of a round are in
    flight at once — more than the default executor's ``min(32, cpu + 4)`` workers (counted with a
    barrier that only opens when every call runs at the same time)."""
    from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
    from prism.providers.mock import create_mock_provider
    from prism.runtime.agent import create_agent

    barrier = threading.Barrier(width, timeout=10)
    lock = threading.Lock()
    in_flight = peak = 0

    def blocking(args: Any, ctx: Any) -> str:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        barrier.wait()  # BrokenBarrierError (an error result) unless all run at once
        with lock:
            in_flight -= 1
        return "ok"

    calls = [provider_tool_call(f"c{i}", "blocking", {}) for i in range(width)]
    provider = create_mock_provider(
        turns=[[*calls, provider_done()], [provider_text_delta("done"), provider_done()]]
    )
    agent = create_agent(
        model={"provider": "mock", "model": "m"},
        provider=provider,
        tools=[ToolDefinition(name="blocking", execute=blocking)],
        loop={"strategy": "single-shot", "tool_concurrency": width},
    )
    result = await agent.create_session().run("go")
    rows = [part for message in result.messages[2:-1] for part in message.content]
    assert [getattr(row, "result", None) for row in rows] == ["ok"] * width
    assert peak == width


async def test_tool11_awaitable_returned_by_sync_execute_is_awaited_on_the_loop() -> None:
    """TOOL-11: an awaitable returned by a sync execute (even in a thread) is awaited on the loop."""
    loop_thread = threading.get_ident()
    ran_on: list[int] = []

    async def later() -> str:
        ran_on.append(threading.get_ident())
        return "awaited"

    def execute(args: Any, ctx: Any) -> Any:
        return later()

    result = await dispatch(make_call(), [ToolDefinition(name="echo", execute=execute)], sync_in_thread=True)
    assert result.value == "awaited" and ran_on == [loop_thread]


# =========================================================================== TOOL-12


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Opaque:
    pass


async def test_tool12_result_values() -> None:
    """TOOL-12: JSON kept, model_dump(mode="json"), dataclasses.asdict, otherwise invalid_tool_result."""
    pydantic = pytest.importorskip("pydantic")

    class Model(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        n: int
        tags: set[str] = set()

    async def run(value: Any) -> ToolResult:
        return await dispatch(make_call(), [ToolDefinition(name="echo", execute=lambda a, c: value)])

    assert (await run(None)).value is None
    assert (await run({"a": [1, 2.5, "x", None, True]})).value == {"a": [1, 2.5, "x", None, True]}
    assert (await run(Model(n=1, tags={"a"}))).value == {"n": 1, "tags": ["a"]}
    assert (await run(Point(1, 2))).value == {"x": 1, "y": 2}
    bad = await run(Opaque())
    assert bad.error == ErrorInfo(
        code="invalid_tool_result",
        message="Tool echo returned a value that is not JSON-compatible: Opaque",
    )
    nan = await run(float("nan"))
    assert nan.error is not None and nan.error.code == "invalid_tool_result"
    wrapped_bad = await run(ToolResult(tool_call_id="x", name="y", value={1, 2}))  # type: ignore[arg-type]
    assert wrapped_bad.error is not None and wrapped_bad.error.message.endswith(": set")


async def test_tool12_invalid_result_emits_error_event() -> None:
    """TOOL-12: a non-JSON outcome ends with tool_execution_error."""
    rec = Recorder()
    await dispatch(make_call(), [ToolDefinition(name="echo", execute=lambda a, c: object())], rec)
    assert rec.types == ["tool_execution_started", "tool_execution_error"]


async def test_con21_returned_tool_result_gets_call_id_and_name() -> None:
    """CON-21: a returned ToolResult has its tool_call_id and name replaced by the call's."""
    returned = ToolResult(tool_call_id="other", name="other", value=1, metadata={"k": "v"})
    result = await dispatch(make_call(id="c42"), [ToolDefinition(name="echo", execute=lambda a, c: returned)])
    assert (result.tool_call_id, result.name, result.value, result.metadata) == ("c42", "echo", 1, {"k": "v"})


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


# =========================================================================== TOOL-14


def test_tool14_bare_decorator_builds_definition() -> None:
    """TOOL-14: name, description up to the Args section, per-parameter descriptions, required."""
    pytest.importorskip("pydantic")

    @tool
    def search(query: str, limit: int = 5, ctx: ToolExecutionContext | None = None) -> list[str]:
        """Search the index.

        Returns matching ids.

        Args:
            query: What to look for,
                across all fields.
            limit: Maximum hits.
            unknown: Not a parameter.
        """
        return [query] * limit

    assert isinstance(search, ToolDefinition)
    assert search.name == "search"
    assert search.description == "Search the index.\n\nReturns matching ids."
    params = search.parameters
    assert params is not None and params["type"] == "object"
    props = params["properties"]
    assert isinstance(props, dict)
    assert props["query"]["description"] == "What to look for, across all fields."  # type: ignore[index]
    assert props["limit"]["description"] == "Maximum hits."  # type: ignore[index]
    assert props["limit"]["default"] == 5  # type: ignore[index]
    assert params["required"] == ["query"]
    assert "unknown" not in props


def test_tool14_options_and_rest_docstring() -> None:
    """TOOL-14: @tool(...) options; reST :param: descriptions."""
    pytest.importorskip("pydantic")

    @tool(name="lookup", exclusive=True, metadata={"k": 1})
    def find(key: str) -> str:
        """Find a key.

        :param key: The key to find,
            exactly.
        :returns: the value
        """
        return key

    assert (find.name, find.exclusive, find.metadata) == ("lookup", True, {"k": 1})
    assert find.description == "Find a key."
    assert find.parameters is not None
    assert find.parameters["properties"]["key"]["description"] == "The key to find, exactly."  # type: ignore[index,call-overload]

    @tool(description="explicit")
    def nodoc(a: int) -> int:
        return a

    assert nodoc.description == "explicit"

    @tool
    def empty(a: int) -> int:
        return a

    assert empty.description is None


def test_tool14_context_parameter_excluded_and_passed() -> None:
    """TOOL-14: a ToolExecutionContext parameter is not in the schema and receives the context."""
    pytest.importorskip("pydantic")

    @tool
    def who(name: str, ctx: ToolExecutionContext) -> str:
        return f"{name}@{ctx.run_id}"

    assert who.parameters is not None
    assert set(who.parameters["properties"]) == {"name"}  # type: ignore[arg-type]
    assert who.execute({"name": "a"}, make_context()) == "a@run_1"
    assert not asyncio.iscoroutinefunction(who.execute)


async def test_tool14_async_function_gives_async_execute_and_models_are_instances() -> None:
    """TOOL-14: async def → async execute; pydantic-model/dataclass params receive instances."""
    pydantic = pytest.importorskip("pydantic")

    class Item(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        id: int

    received: list[Any] = []

    @tool
    async def store(item: Item, point: Point) -> Item:
        received.extend([item, point])
        return item

    assert asyncio.iscoroutinefunction(store.execute)
    value = await store.execute({"item": {"id": 3}, "point": {"x": 1, "y": 2}}, make_context())
    assert isinstance(received[0], Item) and received[1] == Point(1, 2)
    assert value == {"id": 3}  # TOOL-12 conversion


async def test_tool14_dispatch_validates_generated_schema_and_conversion_errors() -> None:
    """TOOL-14: the built-in validator checks generated parameters; conversion errors are error results."""
    pytest.importorskip("pydantic")

    @tool
    def add(a: int, b: int = 0) -> int:
        return a + b

    ok = await dispatch(make_call("add", {"a": 2, "b": 3}), [add])
    assert ok.value == 5
    blocked = await dispatch(make_call("add", {"b": 3}), [add])
    assert blocked.error is not None and blocked.error.code == "validation_failed"
    failed = await dispatch(make_call("add", {"a": "x"}), [add], tool_validator=False)
    assert failed.error is not None and failed.error.name == "ValidationError"


def _varargs(*items: int) -> None: ...


def _kwargs(**items: int) -> None: ...


def _posonly(a: int, /) -> None: ...


def _unannotated(a) -> None:  # type: ignore[no-untyped-def]
    ...


def _undescribable(a: Opaque) -> None: ...


@pytest.mark.parametrize(
    ("fn", "param"),
    [(_varargs, "items"), (_kwargs, "items"), (_posonly, "a"), (_unannotated, "a"), (_undescribable, "a")],
)
def test_tool14_unsupported_parameters_raise_config_error(fn: Callable[..., Any], param: str) -> None:
    """TOOL-14: *args, **kwargs, positional-only, unannotated or undescribable → PrismConfigError."""
    pytest.importorskip("pydantic")
    with pytest.raises(PrismConfigError) as info:
        tool(fn)
    assert fn.__name__ in str(info.value) and param in str(info.value)


def test_tool14_missing_pydantic_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """TOOL-14/ARCH-5: without pydantic, decoration raises ImportError naming the extra."""
    monkeypatch.setitem(sys.modules, "pydantic", None)
    with pytest.raises(ImportError, match=r"prism-runtime\[pydantic\]"):

        @tool
        def f(a: int) -> int:
            return a


def test_arch5_import_does_not_load_jsonschema_or_pydantic() -> None:
    """ARCH-5/TOOL-6/TOOL-14: importing these modules imports neither jsonschema nor pydantic."""
    code = (
        "import sys, prism.tools, prism.guardrails, prism.structured_output;"
        "bad=[m for m in ('jsonschema','pydantic') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


async def test_tool14_generated_schema_forbids_extra_keys() -> None:
    """TOOL-14/TOOL-6: the generated schema sets ``additionalProperties: false``, so a call with
    an unknown key is blocked with an error the model can correct instead of running with the key
    silently dropped."""
    pytest.importorskip("pydantic")
    seen: list[int] = []

    @tool
    def count(a: int) -> int:
        seen.append(a)
        return a

    assert count.parameters is not None
    assert count.parameters["additionalProperties"] is False
    blocked = await dispatch(make_call("count", {"a": 1, "extra": 2}), [count])
    assert blocked.error is not None and "extra" in blocked.error.message
    assert seen == []
    with pytest.raises(Exception, match="extra"):  # also without the validator (TOOL-6 off)
        count.execute({"a": 1, "extra": 2}, make_context())
    ok = await dispatch(make_call("count", {"a": 1}), [count])
    assert ok.error is None and seen == [1]
