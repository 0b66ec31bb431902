"""Turn policy: validation, evaluation, and clean stops through ``session.run`` (TP-1..TP-13)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from prism.errors import AgentRunError, PrismConfigError, TurnPolicyError
from prism.events import AgentFinishedEvent, ErrorEvent, TurnStartedEvent
from prism.ledger import MemoryRunLedger, project_execution_timeline
from prism.limits import UNLIMITED
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import MockProvider, MockScriptItem, create_mock_provider
from prism.redaction import create_secret_redactor
from prism.runtime.agent import create_agent
from prism.runtime.session import AgentSession
from prism.runtime.turn_policy import (
    Continue,
    Stop,
    TurnBoundaryContext,
    TurnPolicy,
    TurnPolicyStop,
    evaluate_turn_policy,
    resolve_turn_policy,
)
from prism.types import ModelConfig, ToolDefinition, Usage

MODEL = ModelConfig(provider="mock", model="demo")


def ctx(turns: int = 0, tool_calls: int = 0) -> TurnBoundaryContext:
    return TurnBoundaryContext(
        session_id="s",
        run_id="r",
        turn=turns + 1,
        turns=turns,
        tool_calls=tool_calls,
        usage=None,
        metadata={},
    )


# --------------------------------------------------------------------------- TP-1 / TP-2


def test_tp1_policy_and_decisions_accept_mappings() -> None:
    """TP-1: ``TurnPolicy`` or a mapping; ``Continue``/``Stop`` and their mapping forms."""
    stop = lambda c: Continue()  # noqa: E731
    policy = resolve_turn_policy({"max_turns": 2, "stop": stop})
    assert policy == TurnPolicy(max_turns=2, stop=stop)
    assert Continue().to_dict() == {"action": "continue"}
    assert Stop("why").to_dict() == {"reason": "why", "action": "stop"}
    assert resolve_turn_policy(None) is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("stop", "must be a TurnPolicy or a mapping"),
        ({"max_turns": 1, "maxTurns": 2}, "maxTurns (use max_turns)"),
        ({"stop": 3}, "stop must be callable"),
        (TurnPolicy(max_turns=0), "must be an int >= 1"),
        (TurnPolicy(max_turns=True), "must be an int >= 1"),
        (TurnPolicy(max_turns=1.5), "must be an int >= 1"),  # type: ignore[arg-type]
    ],
)
def test_tp2_invalid_policies_raise_config_errors(value: Any, message: str) -> None:
    """TP-2: malformed policies raise ``PrismConfigError``."""
    with pytest.raises(PrismConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_turn_policy(value, max_turns_limit=16)


def test_tp2_max_turns_may_not_widen_the_resolved_limit() -> None:
    """TP-2: wider than ``limits.max_turns`` raises; equal is allowed; UNLIMITED never widens."""
    with pytest.raises(PrismConfigError) as info:
        resolve_turn_policy(TurnPolicy(max_turns=5), max_turns_limit=4)
    assert str(info.value) == "turn_policy.max_turns (5) cannot widen limits.max_turns (4)"
    assert resolve_turn_policy(TurnPolicy(max_turns=4), max_turns_limit=4) is not None
    assert resolve_turn_policy(TurnPolicy(max_turns=10**6), max_turns_limit=UNLIMITED) is not None


# --------------------------------------------------------------------------- TP-6 / TP-11


def test_tp6_max_turns_stops_before_consulting_the_callback() -> None:
    """TP-6 step 1: ``turns >= max_turns`` stops with turn_limit/max_turns, callback unused."""
    calls: list[int] = []

    def stop(c: TurnBoundaryContext) -> Any:
        calls.append(c.turn)
        return Continue()

    policy = TurnPolicy(max_turns=2, stop=stop)
    assert evaluate_turn_policy(policy, ctx(turns=1)) is None
    signal = evaluate_turn_policy(policy, ctx(turns=2))
    assert isinstance(signal, TurnPolicyStop)
    assert (signal.stop_reason, signal.stop_detail, signal.turn) == ("turn_limit", "max_turns", 3)
    assert calls == [2]


@pytest.mark.parametrize("decision", [Stop("enough"), {"action": "stop", "reason": "enough"}])
def test_tp6_stop_decisions(decision: Any) -> None:
    """TP-6: ``Stop(reason)`` and its mapping stop with host_policy and the reason."""
    signal = evaluate_turn_policy(TurnPolicy(stop=lambda c: decision), ctx())
    assert signal is not None
    assert (signal.stop_reason, signal.stop_detail) == ("host_policy", "enough")


@pytest.mark.parametrize("decision", [Continue(), {"action": "continue"}])
def test_tp6_continue_decisions(decision: Any) -> None:
    """TP-6: ``Continue()`` and ``{"action": "continue"}`` continue."""
    assert evaluate_turn_policy(TurnPolicy(stop=lambda c: decision), ctx()) is None


def test_tp6_stop_reason_is_redacted() -> None:
    """TP-6/TP-13: the reason is redacted before it becomes ``stop_detail``."""
    redactor = create_secret_redactor(["sk-123"])
    signal = evaluate_turn_policy(
        TurnPolicy(stop=lambda c: Stop("key sk-123 used")), ctx(), redactor=redactor
    )
    assert signal is not None and signal.stop_detail == "key [REDACTED] used"


def test_tp6_256_bytes_after_redaction_is_the_cap() -> None:
    """TP-6: at most 256 UTF-8 bytes after redaction; multi-byte characters count as bytes."""
    ok = evaluate_turn_policy(TurnPolicy(stop=lambda c: Stop("x" * 256)), ctx())
    assert ok is not None and len(ok.stop_detail) == 256
    with pytest.raises(TurnPolicyError):
        evaluate_turn_policy(TurnPolicy(stop=lambda c: Stop("é" * 129)), ctx())
    # a long secret redacted to a short marker fits
    redactor = create_secret_redactor(["s" * 300])
    short = evaluate_turn_policy(
        TurnPolicy(stop=lambda c: Stop("s" * 300)), ctx(), redactor=redactor
    )
    assert short is not None and short.stop_detail == "[REDACTED]"


async def _async_stop(c: TurnBoundaryContext) -> Any:
    return Continue()


@pytest.mark.parametrize(
    "decision",
    [
        None,
        "stop",
        Stop(""),
        Stop("   "),
        Stop("x" * 257),
        {"action": "halt"},
        {"action": "continue", "reason": "x"},
        {"action": "stop"},
        {"action": "stop", "reason": 3},
        {"action": "stop", "reason": "x", "extra": 1},
        Stop(7),  # type: ignore[arg-type]
    ],
)
def test_tp11_malformed_decisions_raise_turn_policy_error(decision: Any) -> None:
    """TP-6/TP-11: malformed decisions and unusable reasons raise ``ERR_PRISM_TURN_POLICY``."""
    with pytest.raises(TurnPolicyError) as info:
        evaluate_turn_policy(TurnPolicy(stop=lambda c: decision), ctx())
    assert info.value.code == "ERR_PRISM_TURN_POLICY"


def test_tp11_async_callback_is_closed_and_rejected() -> None:
    """TP-6: an awaitable is rejected; a coroutine is closed without being awaited."""
    made: list[Any] = []

    def stop(c: TurnBoundaryContext) -> Any:
        coro = _async_stop(c)
        made.append(coro)
        return coro

    with pytest.raises(TurnPolicyError):
        evaluate_turn_policy(TurnPolicy(stop=stop), ctx())
    assert made[0].cr_frame is None  # closed: no "never awaited" warning


def test_tp11_callback_exception_is_the_cause() -> None:
    """TP-6: an exception from the callback becomes ``TurnPolicyError`` with it as cause."""
    boom = RuntimeError("boom")

    def stop(c: TurnBoundaryContext) -> Any:
        raise boom

    with pytest.raises(TurnPolicyError) as info:
        evaluate_turn_policy(TurnPolicy(stop=stop), ctx())
    assert info.value.__cause__ is boom


# --------------------------------------------------------------------------- session runs

TOOL = ToolDefinition(name="lookup", execute=lambda args, c: {"ok": True})


def tool_turn(call_id: str) -> list[MockScriptItem]:
    return [provider_tool_call(call_id, "lookup", {"q": call_id}), provider_done()]


def text_turn(text: str) -> list[MockScriptItem]:
    return [provider_text_delta(text), provider_done()]


def make_session(
    turns: list[list[MockScriptItem]], **agent_options: Any
) -> tuple[AgentSession, MockProvider]:
    provider = create_mock_provider(turns=turns)
    agent = create_agent(model=MODEL, provider=provider, tools=[TOOL], **agent_options)
    return agent.create_session(), provider


async def run_collect(
    session: AgentSession, text: str, **options: Any
) -> tuple[Any, list[Any]]:
    sub = session.subscribe(max_queued_events=4096)
    events: list[Any] = []

    async def consume() -> None:
        async for event in sub:
            events.append(event)

    task = asyncio.create_task(consume())
    outcome: Any
    try:
        outcome = await session.run(text, **options)
    except AgentRunError as exc:
        outcome = exc
    await asyncio.wait_for(task, timeout=5)
    return outcome, events


async def test_tp13_stop_after_first_tool_turn() -> None:
    """TP-13: stop when turns >= 1 → one provider request, two consultations, host_policy."""
    seen: list[TurnBoundaryContext] = []

    def stop(c: TurnBoundaryContext) -> Any:
        seen.append(c)
        return Stop("first plan") if c.turns >= 1 else Continue()

    session, provider = make_session([tool_turn("c1"), text_turn("never")])
    result, events = await run_collect(session, "go", turn_policy=TurnPolicy(stop=stop))
    assert provider.call_count == 1
    assert [(c.turn, c.turns, c.tool_calls) for c in seen] == [(1, 0, 0), (2, 1, 1)]
    assert (result.status, result.stop_reason, result.stop_detail) == (
        "succeeded",
        "host_policy",
        "first plan",
    )
    assert result.artifact is None
    # EVT-19 as revised by issue 21, item 20: turn 2 stops at its boundary, so it emits no
    # turn_started (every turn_started is closed) and no provider event
    assert [e.turn for e in events if isinstance(e, TurnStartedEvent)] == [1]
    assert [type(e).__name__ for e in events[-2:]] == ["ToolExecutionFinishedEvent", "AgentFinishedEvent"]
    finished = events[-1]
    assert isinstance(finished, AgentFinishedEvent)
    assert (finished.finish_reason, finished.stop_detail) == ("host_policy", "first plan")
    assert not any(isinstance(e, ErrorEvent) for e in events)
    stored = [m.role for m in result.messages]
    assert stored == ["user", "assistant", "tool"]


async def test_tp13_stop_at_first_boundary_makes_no_provider_request() -> None:
    """TP-13: a stop at the first boundary makes zero provider requests."""
    session, provider = make_session([text_turn("never")])
    result, events = await run_collect(
        session, "go", turn_policy={"stop": lambda c: {"action": "stop", "reason": "no"}}
    )
    assert provider.call_count == 0
    assert (result.status, result.stop_reason, result.stop_detail) == (
        "succeeded",
        "host_policy",
        "no",
    )
    assert [m.role for m in result.messages] == ["user"]
    # the turn never starts (issue 21, item 20)
    assert not any(isinstance(e, TurnStartedEvent) for e in events)


async def test_tp13_max_turns_is_a_clean_turn_limit() -> None:
    """TP-13/TP-12: ``max_turns=1`` ends a tool-calling run after one request, turn_limit."""
    session, provider = make_session([tool_turn("c1"), text_turn("never")])
    result, _ = await run_collect(session, "go", turn_policy=TurnPolicy(max_turns=1))
    assert provider.call_count == 1
    assert (result.status, result.stop_reason, result.stop_detail) == (
        "succeeded",
        "turn_limit",
        "max_turns",
    )


async def test_tp12_equal_limits_stop_cleanly_without_limit_error() -> None:
    """TP-12: policy max_turns equal to limits.max_turns stops with turn_limit, no breach."""
    session, provider = make_session(
        [tool_turn("c1"), tool_turn("c2"), text_turn("never")], limits={"max_turns": 2}
    )
    result, events = await run_collect(session, "go", turn_policy=TurnPolicy(max_turns=2))
    assert provider.call_count == 2
    assert result.stop_reason == "turn_limit" and result.limit is None
    assert not any(type(e).__name__ == "RunLimitExceededEvent" for e in events)


async def test_tp2_widening_raises_before_any_side_effect() -> None:
    """TP-2 / RUN-7 step 3: a widening policy raises before any event or provider call."""
    events: list[Any] = []
    provider = create_mock_provider(turns=[text_turn("x")])
    agent = create_agent(model=MODEL, provider=provider, limits={"max_turns": 2})
    session = agent.create_session(on_event=events.append)
    with pytest.raises(PrismConfigError, match="cannot widen limits.max_turns"):
        await session.run("go", turn_policy=TurnPolicy(max_turns=3))
    assert events == [] and provider.call_count == 0


async def test_tp2_preflight_error_is_raised_directly() -> None:
    """TP-2: ``PrismConfigError`` from ``run()`` itself; nothing is stored."""
    session, provider = make_session([text_turn("x")])
    with pytest.raises(PrismConfigError):
        await session.run("go", turn_policy={"stop": "nope"})
    assert provider.call_count == 0 and await session.entries() == []


@pytest.mark.parametrize(
    "stop",
    [
        lambda c: Stop(""),
        lambda c: Stop("x" * 257),
        lambda c: None,
        _async_stop,
    ],
)
async def test_tp11_bad_callback_fails_the_run_without_a_provider_call(stop: Any) -> None:
    """TP-11/TP-13: ``ERR_PRISM_TURN_POLICY`` fails the run; no provider call at that boundary."""
    session, provider = make_session([text_turn("never")])
    outcome, events = await run_collect(session, "go", turn_policy=TurnPolicy(stop=stop))
    assert isinstance(outcome, AgentRunError)
    assert outcome.result.status == "failed"
    assert outcome.result.error is not None
    assert outcome.result.error.code == "ERR_PRISM_TURN_POLICY"
    assert outcome.result.stop_reason is None
    assert provider.call_count == 0
    assert isinstance(events[-1], ErrorEvent)


async def test_tp13_secret_in_reason_is_redacted_everywhere() -> None:
    """TP-13/TP-7: the redacted reason rides the result, the event, the record and the timeline."""
    ledger = MemoryRunLedger()
    session, _ = make_session(
        [text_turn("x")], redactor=create_secret_redactor(["sk-9"]), run_ledger=ledger
    )
    result, events = await run_collect(
        session, "go", turn_policy=TurnPolicy(stop=lambda c: Stop("leaked sk-9"))
    )
    assert result.stop_detail == "leaked [REDACTED]"
    finished = events[-1]
    assert finished.finish_reason == "host_policy"
    assert finished.stop_detail == "leaked [REDACTED]"
    record = ledger.runs[-1]
    assert (record.status, record.stop_reason, record.stop_detail) == (
        "succeeded",
        "host_policy",
        "leaked [REDACTED]",
    )
    timeline = project_execution_timeline(ledger.events, ledger.runs)
    assert (timeline.stop_reason, timeline.stop_detail) == ("host_policy", "leaked [REDACTED]")


async def test_tp9_no_policy_and_always_continue_send_identical_requests() -> None:
    """TP-9: without a policy nothing is evaluated; an always-Continue policy changes nothing."""
    script = [tool_turn("c1"), text_turn("done")]
    plain, p1 = make_session(script)
    r1, e1 = await run_collect(plain, "go")
    policed, p2 = make_session(script)
    r2, e2 = await run_collect(policed, "go", turn_policy=TurnPolicy(stop=lambda c: Continue()))

    def strip(request: Any) -> Any:
        data = request.to_dict()
        data.pop("metadata", None)
        return [
            {k: v for k, v in m.items() if k != "id"} for m in data["messages"]
        ], data.get("tools")

    assert [strip(r) for r in p1.requests] == [strip(r) for r in p2.requests]
    assert [type(e).__name__ for e in e1] == [type(e).__name__ for e in e2]
    assert [m.role for m in r1.messages] == [m.role for m in r2.messages]
    assert r1.stop_reason is None and r2.stop_reason is None


async def test_tp3_context_carries_usage_and_metadata() -> None:
    """TP-3: ``usage`` is the run usage so far (``None`` before any), metadata is the run's."""
    seen: list[TurnBoundaryContext] = []

    def stop(c: TurnBoundaryContext) -> Any:
        seen.append(c)
        return Continue()

    from prism.providers.base import provider_usage

    script = [
        [provider_usage(Usage(input_tokens=3, output_tokens=2)), *tool_turn("c1")],
        text_turn("done"),
    ]
    session, _ = make_session(script)
    await session.run("go", metadata={"desk": "a"}, turn_policy=TurnPolicy(stop=stop))
    assert seen[0].usage is None and seen[0].metadata["desk"] == "a"
    assert seen[1].usage is not None and seen[1].usage.input_tokens == 3


async def test_tp7_stop_overrides_finish_reason_and_skips_artifact_check() -> None:
    """TP-7/RUN-17: a policy stop of a generate-validate-revise run succeeds with no artifact."""
    from prism.loops.contracts import GenerateValidateReviseLoopOptions

    session, provider = make_session([text_turn("draft")])
    result = await session.run(
        "go",
        loop=GenerateValidateReviseLoopOptions(validator=lambda v, c: {"ok": True}),
        turn_policy=TurnPolicy(stop=lambda c: Stop("skip")),
    )
    assert provider.call_count == 0
    assert (result.status, result.stop_reason, result.artifact) == (
        "succeeded",
        "host_policy",
        None,
    )


async def test_tp7_stop_is_sticky_for_a_loop_that_swallows_it() -> None:
    """LOOP-8/TP-7: a custom loop swallowing the stop still ends with the stop."""

    class Swallow:
        name = "swallow"

        async def run(self, c: Any) -> None:
            for _ in range(3):
                try:
                    await c.generate(await c.assemble([]))
                except Exception:
                    pass
            return None

    session, provider = make_session([text_turn("a")])
    result = await session.run(
        "go", loop=Swallow(), turn_policy=TurnPolicy(stop=lambda c: Stop("halt"))
    )
    assert provider.call_count == 0
    assert (result.status, result.stop_reason, result.stop_detail) == (
        "succeeded",
        "host_policy",
        "halt",
    )


async def test_tp5_soft_interrupted_turns_count() -> None:
    """TP-5: ``turns`` counts returned generate calls; UNLIMITED limits leave the cap alone."""
    seen: list[int] = []

    def stop(c: TurnBoundaryContext) -> Any:
        seen.append(c.turns)
        return Continue()

    session, _ = make_session(
        [tool_turn("c1"), tool_turn("c2"), text_turn("done")],
        limits={"max_turns": UNLIMITED},
    )
    result = await session.run("go", turn_policy=TurnPolicy(stop=stop, max_turns=50))
    assert seen == [0, 1, 2]
    assert result.stop_reason is None


async def test_tp5_a_soft_interrupted_turn_is_a_completed_turn() -> None:
    """TP-5: a generate call ended by a steer soft interrupt still counts in ``turns``."""
    seen: list[int] = []

    def stop(c: TurnBoundaryContext) -> Any:
        seen.append(c.turns)
        return Continue()

    provider = create_mock_provider(
        turns=[
            [provider_text_delta("long "), provider_text_delta("answer"), provider_done()],
            text_turn("short"),
        ]
    )
    agent = create_agent(model=MODEL, provider=provider)
    box: list[AgentSession] = []

    def on_event(event: Any) -> None:
        if event.type == "message_delta" and len(seen) == 1:
            box[0].steer("stop and summarise", soft_interrupt=True)

    session = agent.create_session(on_event=on_event)
    box.append(session)
    result = await session.run("go", turn_policy=TurnPolicy(stop=stop))
    assert result.status == "succeeded" and result.text == "short"
    # the interrupted draft was never stored: the steer follows the input directly
    assert [m.role for m in result.messages] == ["user", "user", "assistant"]
    assert seen == [0, 1] and provider.call_count == 2


async def test_tp4_boundary_order_suspend_policy_charge_checkpoint() -> None:
    """TP-4: (1) an open approval round suspends before the policy is consulted; (2) a policy
    stop comes before the ``max_turns`` charge and (4) no every-turn write at that boundary."""
    from prism.runtime.checkpoints import MemoryCheckpointStore
    from prism.runtime.durable import RunStateOptions, load_agent_run_state

    consulted: list[int] = []

    def keep_going(c: TurnBoundaryContext) -> Any:
        consulted.append(c.turn)
        return Continue()

    store = MemoryCheckpointStore()
    gated = RunStateOptions(store, "v1", checkpoint_policy="every-turn", interrupt_before_tool=True)
    session, _ = make_session([tool_turn("c1"), text_turn("x")], id="a", run_state=gated)
    suspended = await session.run("go", turn_policy=TurnPolicy(stop=keep_going))
    assert suspended.status == "suspended" and consulted == [1]
    loaded = await load_agent_run_state(store, run_id=suspended.run_id)
    # the input (v1), boundary 1 (v2), the suspension (v3)
    assert loaded.record.version == 3 and loaded.state["counters"]["turns"] == 1

    store2 = MemoryCheckpointStore()
    plain = RunStateOptions(store2, "v1", checkpoint_policy="every-turn")
    session2, _ = make_session([tool_turn("c1"), text_turn("x")], id="a", run_state=plain)
    stopped = await session2.run(
        "go", turn_policy=TurnPolicy(stop=lambda c: Stop("pause") if c.turns else Continue())
    )
    assert stopped.stop_reason == "host_policy"
    loaded2 = await load_agent_run_state(store2, run_id=stopped.run_id)
    # the input (v1); boundary 1: running (v2); c1's dispatch (v3); boundary 2: the stop, no
    # charge, no running write → v4 terminal
    assert loaded2.record.version == 4
    assert loaded2.state["status"] == "succeeded"
    assert loaded2.state["counters"]["turns"] == 1
