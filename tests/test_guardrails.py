"""Guardrails: shapes, evaluation order, fail-closed records and errors (GRD-1..GRD-7)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from prism.abort import AbortController
from prism.errors import (
    ERR_PRISM_GUARDRAIL_BLOCKED,
    ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE,
    GuardrailError,
    PrismConfigError,
)
from prism.events import GuardrailDecisionEvent
from prism.guardrails import (
    Guardrail,
    GuardrailContext,
    GuardrailDecision,
    Guardrails,
    coerce_guardrails,
    guardrail_error,
    merge_guardrails,
    run_guardrails,
)
from prism.redaction import create_secret_redactor
from prism.types import GuardrailRecord, ToolCallContent, user_message


def make_context(signal: Any = None, **extra: Any) -> GuardrailContext[Any]:
    return GuardrailContext(
        stage="input",
        value=None,
        session_id="session_1",
        run_id="run_1",
        metadata={"tenant": "t"},
        signal=signal if signal is not None else AbortController().signal,
        **extra,
    )


def allow(name: str, log: list[str] | None = None, stage: str = "input") -> Guardrail:
    def evaluate(ctx: GuardrailContext[Any]) -> GuardrailDecision:
        if log is not None:
            log.append(f"eval {name}")
        return GuardrailDecision("allow")

    return Guardrail(name, stage, evaluate)  # type: ignore[arg-type]


def decide(name: str, action: str, reason: str | None = None, stage: str = "input") -> Guardrail:
    return Guardrail(name, stage, lambda ctx: {"action": action, "reason": reason})  # type: ignore[arg-type]


# --------------------------------------------------------------------------- GRD-1


def test_grd1_decision_guardrail_and_guardrails_shapes() -> None:
    """GRD-1: positional construction, mapping metadata, sequences become tuples."""
    d = GuardrailDecision("block", "nope", {"k": 1})
    assert (d.action, d.reason, d.metadata) == ("block", "nope", {"k": 1})
    g = Guardrail("pii", "input", lambda ctx: d)
    assert g.revision is None
    gs = Guardrails(input=[g], tool_input=[g])  # type: ignore[arg-type]
    assert gs.input == (g,) and gs.tool_input == (g,) and gs.output == ()
    assert gs.max_concurrency is None
    assert "evaluate" not in g.to_dict()


@pytest.mark.parametrize("bad", [0, 17, True, 1.5, -1])
def test_grd3_max_concurrency_bounds(bad: Any) -> None:
    """GRD-3: max_concurrency must be an int in 1..16."""
    with pytest.raises(PrismConfigError):
        Guardrails(max_concurrency=bad)
    assert Guardrails(max_concurrency=16).max_concurrency == 16


def test_guardrails_mapping_is_coerced_and_unknown_keys_rejected() -> None:
    """ARCH-9: a mapping of Guardrails fields is accepted; an unknown key raises."""
    g = allow("a")
    assert coerce_guardrails({"input": [g]}) == Guardrails(input=(g,))
    with pytest.raises(PrismConfigError, match="inputs"):
        coerce_guardrails({"inputs": [g]})
    with pytest.raises(PrismConfigError):
        Guardrails(input="not-a-sequence")  # type: ignore[arg-type]


def test_merge_guardrails_agent_first_then_run() -> None:
    """RUN-6: per stage agent guardrails first, then run guardrails."""
    a, b, c = allow("a"), allow("b"), allow("c", stage="tool_input")
    merged = merge_guardrails(Guardrails(input=(a,), max_concurrency=2), {"input": [b], "tool_input": [c]})
    assert merged is not None
    assert merged.input == (a, b) and merged.tool_input == (c,)
    assert merged.max_concurrency == 2
    assert merge_guardrails(None, None) is None
    only = Guardrails(input=(a,))
    assert merge_guardrails(only, None) is only


# --------------------------------------------------------------------------- GRD-2


async def test_grd2_context_carries_stage_value_and_tool_fields() -> None:
    """GRD-2: the guard sees the stage, the value and the tool call fields."""
    seen: list[GuardrailContext[Any]] = []

    def evaluate(ctx: GuardrailContext[Any]) -> GuardrailDecision:
        seen.append(ctx)
        return GuardrailDecision("allow")

    call = ToolCallContent(id="c1", name="search", arguments={"q": "x"})
    ctx = make_context(tool_call_id="c1", tool_name="search")
    await run_guardrails(
        "tool_input", Guardrails(tool_input=(Guardrail("g", "tool_input", evaluate),)), call, ctx
    )
    (got,) = seen
    assert got.stage == "tool_input" and got.value is call
    assert (got.session_id, got.run_id, got.tool_call_id, got.tool_name) == (
        "session_1",
        "run_1",
        "c1",
        "search",
    )
    assert got.metadata == {"tenant": "t"}
    assert got.signal is not None and not got.signal.aborted


# --------------------------------------------------------------------------- GRD-3


async def test_grd3_sequential_order_first_non_allow_stops_and_events_follow() -> None:
    """GRD-3: declaration order, stop at the first non-allow, events after evaluation, in order."""
    log: list[str] = []
    blocked = Guardrail(
        "b",
        "input",
        lambda ctx: (log.append("eval b"), GuardrailDecision("block", "bad"))[1],
    )
    guards = Guardrails(input=(allow("a", log), blocked, allow("c", log)))

    def emit(event: Any) -> None:
        assert isinstance(event, GuardrailDecisionEvent)
        log.append(f"event {event.record.guardrail}")

    result = await run_guardrails("input", guards, (user_message("hi"),), make_context(), emit=emit)
    assert log == ["eval a", "eval b", "event a", "event b"]
    assert [r.guardrail for r in result.records] == ["a", "b"]
    assert result.terminal == GuardrailRecord("b", "input", "block", "bad")


async def test_grd3_events_carry_ids_and_tool_fields() -> None:
    """GRD-3/EVT-2: guardrail_decision events carry the run ids and the call's id/name."""
    events: list[GuardrailDecisionEvent] = []
    await run_guardrails(
        "tool_input",
        Guardrails(tool_input=(allow("a", stage="tool_input"),)),
        None,
        make_context(tool_call_id="c9", tool_name="t"),
        emit=events.append,
    )
    (event,) = events
    assert (event.session_id, event.run_id, event.tool_call_id, event.tool_name) == (
        "session_1",
        "run_1",
        "c9",
        "t",
    )


async def test_grd3_no_guards_for_stage_is_empty_result() -> None:
    """GRD-3: nothing to evaluate → no records, no terminal."""
    result = await run_guardrails("output", Guardrails(input=(allow("a"),)), None, make_context())
    assert result.records == () and result.terminal is None
    assert (await run_guardrails("input", None, None, make_context())).records == ()


async def test_grd3_guard_signal_is_aborted_after_stop() -> None:
    """GRD-3: the guards' signal is aborted once a non-allow record stopped the evaluation."""
    captured: list[Any] = []

    def first(ctx: GuardrailContext[Any]) -> GuardrailDecision:
        captured.append(ctx.signal)
        return GuardrailDecision("tripwire")

    run_signal = AbortController().signal
    await run_guardrails(
        "input", Guardrails(input=(Guardrail("a", "input", first),)), None, make_context(run_signal)
    )
    assert captured[0].aborted
    assert not run_signal.aborted  # the run's own signal is untouched


async def test_grd3_run_abort_reaches_guard_signal() -> None:
    """GRD-3: a run abort while a guard runs is visible on the guard's signal."""
    controller = AbortController()
    observed: list[bool] = []

    async def slow(ctx: GuardrailContext[Any]) -> GuardrailDecision:
        controller.abort("stop")
        observed.append(ctx.signal is not None and ctx.signal.aborted)
        return GuardrailDecision("allow")

    await run_guardrails(
        "input", Guardrails(input=(Guardrail("s", "input", slow),)), None, make_context(controller.signal)
    )
    assert observed == [True]


async def test_grd3_parallel_bounded_concurrency_and_declaration_order() -> None:
    """GRD-3: with max_concurrency=2 at most two guards run at once; records keep declaration order."""
    in_flight = 0
    peak = 0
    gates = [asyncio.Event() for _ in range(4)]

    def guard(i: int) -> Guardrail:
        async def evaluate(ctx: GuardrailContext[Any]) -> GuardrailDecision:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await gates[i].wait()
            in_flight -= 1
            return GuardrailDecision("allow")

        return Guardrail(f"g{i}", "input", evaluate)

    task = asyncio.ensure_future(
        run_guardrails(
            "input", Guardrails(input=tuple(guard(i) for i in range(4)), max_concurrency=2), None, make_context()
        )
    )
    # release in reverse start order to scramble completion order
    for i in (1, 0, 3, 2):
        for _ in range(5):
            await asyncio.sleep(0)
        gates[i].set()
    result = await task
    assert peak == 2
    assert [r.guardrail for r in result.records] == ["g0", "g1", "g2", "g3"]
    assert result.terminal is None


async def test_grd3_parallel_stop_discards_running_and_skips_unstarted() -> None:
    """GRD-3: in parallel mode the first non-allow cancels running guards, skips the rest."""
    cancelled: list[str] = []
    started: list[str] = []
    never = asyncio.Event()

    async def slow(ctx: GuardrailContext[Any]) -> GuardrailDecision:
        started.append("slow")
        try:
            await never.wait()
        finally:
            cancelled.append("slow" if ctx.signal is not None and ctx.signal.aborted else "?")
        return GuardrailDecision("allow")  # pragma: no cover

    async def blocker(ctx: GuardrailContext[Any]) -> GuardrailDecision:
        started.append("block")
        return GuardrailDecision("block", "no")

    def late(ctx: GuardrailContext[Any]) -> GuardrailDecision:  # pragma: no cover
        started.append("late")
        return GuardrailDecision("allow")

    guards = Guardrails(
        input=(
            Guardrail("slow", "input", slow),
            Guardrail("block", "input", blocker),
            Guardrail("late", "input", late),
        ),
        max_concurrency=2,
    )
    result = await run_guardrails("input", guards, None, make_context())
    assert started == ["slow", "block"]
    assert cancelled == ["slow"]
    assert [r.guardrail for r in result.records] == ["block"]
    assert result.terminal is not None and result.terminal.action == "block"


# --------------------------------------------------------------------------- GRD-4


@pytest.mark.parametrize(
    "guard",
    [
        Guardrail("", "input", lambda ctx: GuardrailDecision("allow")),
        Guardrail("x" * 129, "input", lambda ctx: GuardrailDecision("allow")),
        Guardrail("wrong-stage", "output", lambda ctx: GuardrailDecision("allow")),
        Guardrail("not-callable", "input", "nope"),  # type: ignore[arg-type]
        object(),
    ],
)
async def test_grd4_invalid_guard_is_tripwire_guardrail_invalid(guard: Any) -> None:
    """GRD-4: empty/over-long names, wrong stage, non-callable evaluate → guardrail_invalid."""
    result = await run_guardrails("input", Guardrails(input=(guard,)), None, make_context())
    assert result.terminal is not None
    assert (result.terminal.action, result.terminal.reason) == ("tripwire", "guardrail_invalid")
    assert len(result.terminal.guardrail) <= 128


@pytest.mark.parametrize(
    "decision",
    [None, "allow", {"action": "maybe"}, GuardrailDecision("perhaps"), {"action": "allow", "x": 1},
     {"action": "block", "reason": 5}],  # type: ignore[arg-type]
)
async def test_grd4_invalid_decision_is_tripwire(decision: Any) -> None:
    """GRD-4: a decision that is not a valid GuardrailDecision/mapping → guardrail_invalid_decision."""
    result = await run_guardrails(
        "input", Guardrails(input=(Guardrail("g", "input", lambda ctx: decision),)), None, make_context()
    )
    assert result.terminal is not None
    assert (result.terminal.action, result.terminal.reason) == (
        "tripwire",
        "guardrail_invalid_decision",
    )


async def test_grd4_exception_is_tripwire_with_redacted_bounded_error() -> None:
    """GRD-4: an exception → guardrail_failed with a redacted message of at most 4 KiB."""

    def boom(ctx: GuardrailContext[Any]) -> GuardrailDecision:
        raise RuntimeError("leaked sk-secret " + "é" * 5000)

    result = await run_guardrails(
        "input",
        Guardrails(input=(Guardrail("g", "input", boom),)),
        None,
        make_context(),
        redactor=create_secret_redactor(["sk-secret"]),
    )
    record = result.terminal
    assert record is not None and (record.action, record.reason) == ("tripwire", "guardrail_failed")
    assert record.metadata is not None
    error = record.metadata["error"]
    assert isinstance(error, str)
    assert "sk-secret" not in error and "[REDACTED]" in error
    assert len(error.encode("utf-8")) <= 4096


async def test_grd4_reason_redacted_and_bounded_utf8() -> None:
    """GRD-4: reasons are redacted and cut to 4 KiB UTF-8 without splitting a character."""
    reason = "token sk-1 " + "€" * 3000
    result = await run_guardrails(
        "input",
        Guardrails(input=(decide("g", "block", reason),)),
        None,
        make_context(),
        redactor=create_secret_redactor(["sk-1"]),
    )
    record = result.terminal
    assert record is not None and record.reason is not None
    assert "sk-1" not in record.reason
    assert len(record.reason.encode("utf-8")) <= 4096
    assert record.reason.startswith("token [REDACTED] €")


async def test_grd4_metadata_normalised_truncated_or_invalid() -> None:
    """GRD-4: metadata JSON-normalised, {"truncated": True} above 16 KiB, {"invalid": True} if not JSON."""

    def with_meta(name: str, metadata: Any) -> Guardrail:
        return Guardrail(name, "input", lambda ctx: GuardrailDecision("allow", None, metadata))

    guards = Guardrails(
        input=(
            with_meta("norm", {"t": (1, 2), "secret": "sk-9"}),
            with_meta("big", {"blob": "x" * 17000}),
            with_meta("bad", {"s": {1, 2}}),
            with_meta("nan", {"f": float("nan")}),
            with_meta("keys", {1: "a"}),
            with_meta("notmap", [1, 2]),
        )
    )
    result = await run_guardrails(
        "input", guards, None, make_context(), redactor=create_secret_redactor(["sk-9"])
    )
    by_name = {r.guardrail: r.metadata for r in result.records}
    assert by_name["norm"] == {"t": [1, 2], "secret": "[REDACTED]"}
    assert by_name["big"] == {"truncated": True}
    assert by_name["bad"] == {"invalid": True}
    assert by_name["nan"] == {"invalid": True}
    assert by_name["keys"] == {"invalid": True}
    assert by_name["notmap"] == {"invalid": True}


async def test_grd4_cyclic_metadata_is_invalid_not_a_crash() -> None:
    """GRD-4: a cyclic metadata value yields {"invalid": True}."""
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    result = await run_guardrails(
        "input",
        Guardrails(input=(Guardrail("c", "input", lambda ctx: GuardrailDecision("allow", None, cyclic)),)),
        None,
        make_context(),
    )
    assert result.records[0].metadata == {"invalid": True}


async def test_arch10_async_evaluate_and_mapping_decision() -> None:
    """ARCH-10/GRD-1: async evaluate and a mapping decision are accepted."""

    async def evaluate(ctx: GuardrailContext[Any]) -> dict[str, Any]:
        return {"action": "interrupt", "reason": "ask", "metadata": {"a": 1}}

    result = await run_guardrails(
        "input", Guardrails(input=(Guardrail("g", "input", evaluate),)), None, make_context()
    )
    assert result.terminal == GuardrailRecord("g", "input", "interrupt", "ask", {"a": 1})


# --------------------------------------------------------------------------- GRD-7


def test_grd7_error_codes_by_action() -> None:
    """GRD-7: block/tripwire → ERR_PRISM_GUARDRAIL_BLOCKED; interrupt → INTERRUPT_UNAVAILABLE."""
    block = guardrail_error(GuardrailRecord("g", "output", "block"))
    trip = guardrail_error(GuardrailRecord("g", "output", "tripwire"))
    interrupt = guardrail_error(GuardrailRecord("g", "tool_input", "interrupt"))
    assert isinstance(block, GuardrailError)
    assert block.code == trip.code == ERR_PRISM_GUARDRAIL_BLOCKED
    assert interrupt.code == ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE
    assert "tool_input" in str(interrupt)
    assert interrupt.record.action == "interrupt"
