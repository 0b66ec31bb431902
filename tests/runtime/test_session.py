"""Sessions and ``run()``: multi-turn runs, results, store, ordering, precedence (RUN-3..RUN-24,
EVT-5..EVT-13, USAGE-1..2, REC-1..4, STORE-4..8)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from runtime_support import (
    MODEL,
    assert_provider_valid,
    echo_tool,
    make_session,
    result_rows,
    run_collect,
    stored_messages,
    types_of,
)

from prism.assembly import Skill, SystemPromptContribution
from prism.errors import (
    AgentRunError,
    AgentSessionBusyError,
    PrismConfigError,
)
from prism.events import AgentStartedEvent, ErrorEvent
from prism.ledger import MemoryRunLedger
from prism.loops.contracts import SingleShotLoopOptions
from prism.providers.base import (
    provider_done,
    provider_error,
    provider_message_start,
    provider_text_delta,
    provider_tool_call,
    provider_usage,
)
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.store import MemorySessionStore
from prism.types import (
    ErrorInfo,
    Message,
    ModelConfig,
    RunResult,
    TextContent,
    ToolCallContent,
    ToolDefinition,
    ToolResultContent,
    Usage,
)

TEXT = [provider_text_delta("done"), provider_done()]


async def test_multi_turn_run_with_several_tools_run_11_ssl_2() -> None:
    session, provider = make_session(
        [
            [provider_tool_call("c1", "lookup", {"q": "a"}), provider_tool_call("c2", "sum", {"n": 2}), provider_done()],
            [provider_tool_call("c3", "lookup", {"q": "b"}), provider_done()],
            [provider_text_delta("all "), provider_text_delta("done"), provider_done()],
        ],
        tools=[echo_tool("lookup"), echo_tool("sum")],
    )
    result = await session.run("go")
    assert isinstance(result, RunResult)
    assert result.status == "succeeded"
    assert result.text == "all done"
    assert provider.call_count == 3
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]
    rows = result_rows(result.messages)
    assert [(r.tool_call_id, r.result) for r in rows] == [
        ("c1", {"tool": "lookup", "args": {"q": "a"}}),
        ("c2", {"tool": "sum", "args": {"n": 2}}),
        ("c3", {"tool": "lookup", "args": {"q": "b"}}),
    ]
    assert_provider_valid(result.messages)
    # The third request carries the whole transcript so far, the input exactly once.
    third = provider.requests[2].messages
    assert [m.role for m in third] == ["user", "assistant", "tool", "tool", "assistant", "tool"]
    assert result.messages == tuple(await stored_messages(session))
    assert result.leaf_id == session.leaf_id


async def test_exact_event_order_of_a_tool_round_then_text_evt_6_to_evt_13() -> None:
    session, _ = make_session(
        [[provider_tool_call("c1", "lookup", {}), provider_done()], TEXT], tools=[echo_tool()]
    )
    result, events = await run_collect(session)
    assert isinstance(result, RunResult)
    assert types_of(events) == [
        "agent_started",
        "turn_started", "provider_turn_started", "message_started", "message_delta",
        "provider_turn_finished", "message_finished", "turn_finished",
        "tool_execution_started", "tool_execution_finished",
        "turn_started", "provider_turn_started", "message_started", "message_delta",
        "provider_turn_finished", "message_finished", "turn_finished",
        "agent_finished",
    ]
    assert [getattr(e, "turn", None) for e in events if e.type.startswith("turn_")] == [1, 1, 2, 2]
    assert {e.run_id for e in events} == {result.run_id}
    assert {e.session_id for e in events} == {session.id}
    finished = [e for e in events if e.type == "provider_turn_finished"]
    assert [f.metadata.attempt for f in finished] == [1, 1]
    assert all(f.metadata.latency_ms is not None and f.error is None for f in finished)


async def test_message_started_carries_the_provider_message_id_evt_10() -> None:
    session, _ = make_session([[provider_message_start("msg_1"), provider_text_delta("x"), provider_done()]])
    result, events = await run_collect(session)
    started = [e for e in events if e.type == "message_started"]
    assert len(started) == 1 and started[0].message.id == "msg_1" and started[0].message.content == ()
    assert isinstance(result, RunResult) and result.message is not None and result.message.id == "msg_1"


async def test_usage_of_every_turn_is_summed_once_usage_1_usage_2() -> None:
    ledger = MemoryRunLedger()
    session, _ = make_session(
        [
            [provider_tool_call("c1", "lookup", {}), provider_done(Usage(input_tokens=10, output_tokens=2))],
            [provider_usage(Usage(input_tokens=1)), provider_text_delta("x"), provider_done(Usage(input_tokens=20, output_tokens=3))],
        ],
        tools=[echo_tool()],
        run_ledger=ledger,
    )
    result, events = await run_collect(session)
    assert isinstance(result, RunResult)
    assert result.usage == Usage(input_tokens=30, output_tokens=5, total_tokens=35)
    finished = [e for e in events if e.type == "agent_finished"]
    assert finished[0].usage == result.usage
    rows = [(u.scope, u.turn, u.attempt, u.usage.input_tokens) for u in ledger.usage]
    assert rows == [("provider_turn", 1, 1, 10), ("provider_turn", 2, 1, 20), ("run_total", None, None, 30)]


async def test_ledger_gets_start_and_finish_records_and_every_event_rec_2_rec_3() -> None:
    ledger = MemoryRunLedger()
    session, _ = make_session([TEXT], run_ledger=ledger)
    result, events = await run_collect(session)
    assert isinstance(result, RunResult)
    assert [(r.status, r.finished_at is None) for r in ledger.runs] == [("running", True), ("succeeded", False)]
    assert ledger.runs[0].id == result.run_id and ledger.runs[0].provider == "mock"
    assert [r.type for r in ledger.events] == types_of(events)
    assert [r.event for r in ledger.events] == events
    assert all(not r.redacted for r in ledger.events)


async def test_second_run_continues_the_stored_conversation_run_11_run_12() -> None:
    session, provider = make_session([TEXT, TEXT])
    await session.run("one")
    second = await session.run("two")
    roles = [m.role for m in provider.requests[1].messages]
    assert roles == ["user", "assistant", "user"]
    assert [m.role for m in second.messages] == ["user", "assistant"]


async def test_a_new_session_over_a_stored_id_continues_from_its_last_entry_run_3() -> None:
    store = MemorySessionStore()
    session, _ = make_session([TEXT], store=store)
    await session.run("one")
    provider = create_mock_provider(turns=[TEXT])
    again = create_agent(model=MODEL, provider=provider, store=store).create_session(session.id)
    assert again.leaf_id is None  # no I/O before the first run
    await again.run("two")
    assert [m.role for m in provider.requests[0].messages] == ["user", "assistant", "user"]


async def test_checkout_continues_from_an_earlier_entry_on_a_sibling_branch_store_6() -> None:
    session, provider = make_session([TEXT, TEXT, TEXT])
    await session.run("one")
    first_leaf = session.leaf_id
    await session.run("two")
    assert first_leaf is not None
    await session.checkout(first_leaf)
    await session.run("three")
    texts = [m.content[0].text for m in provider.requests[2].messages if isinstance(m.content[0], TextContent)]
    assert texts == ["one", "done", "three"]
    branch = await stored_messages(session)
    assert [m.role for m in branch] == ["user", "assistant", "user", "assistant"]


async def test_a_model_override_appends_one_model_change_entry_run_11() -> None:
    other = ModelConfig(provider="mock", model="other")
    session, provider = make_session([TEXT, TEXT, TEXT])
    await session.run("a", model=other)
    await session.run("b", model=other)
    await session.run("c")
    kinds = [(e.kind, e.model.model if e.model else None) for e in await session.entries()]
    changes = [k for k in kinds if k[0] == "model_change"]
    assert changes == [("model_change", "other"), ("model_change", "demo")]
    assert provider.requests[0].model == other and provider.requests[2].model == MODEL


async def test_a_busy_session_rejects_a_second_run_with_one_error_event_run_8() -> None:
    gate = asyncio.Event()
    entered = asyncio.Event()

    async def slow(arguments: dict[str, Any], context: Any) -> str:
        entered.set()
        await gate.wait()
        return "ok"

    session, _ = make_session(
        [[provider_tool_call("c1", "slow", {}), provider_done()], TEXT],
        tools=[ToolDefinition(name="slow", execute=slow)],
    )
    sub = session.subscribe()
    first = asyncio.ensure_future(session.run("one"))
    await entered.wait()
    assert session.is_running
    with pytest.raises(AgentSessionBusyError):
        await session.run("two")
    with pytest.raises(AgentSessionBusyError):
        await session.compact()
    with pytest.raises(AgentSessionBusyError):
        await session.checkout("x")
    gate.set()
    result = await first
    events = [e async for e in sub]
    busy = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(busy) == 1 and busy[0].error.code == "ERR_PRISM_SESSION_BUSY"
    assert busy[0].run_id.startswith("run_") and busy[0].run_id != result.run_id
    assert result.status == "succeeded"


@pytest.mark.parametrize(
    "options",
    [
        {"options": {"maxTurns": 3}},
        {"limits": {"max_turns": 99}},
        {"limits": {"maxTurns": 1}},
        {"retry": {"max_attempts": 0}},
        {"options": {"limits": {"max_tool_rounds": 0}}},
    ],
)
async def test_preflight_failures_raise_before_any_side_effect_run_7(options: dict[str, Any]) -> None:
    session, provider = make_session([TEXT], limits={"max_turns": 5})
    sub = session.subscribe()
    with pytest.raises(PrismConfigError):
        await session.run("x", **options)
    assert provider.call_count == 0
    assert await session.entries() == []
    assert not session.is_running
    sub.close()
    assert [e async for e in sub] == []


async def test_camel_case_option_keys_are_reported_with_their_snake_case_name_run_7() -> None:
    session, _ = make_session([TEXT])
    with pytest.raises(PrismConfigError, match="use active_skills"):
        await session.run("x", options={"activeSkills": ["a"]})


async def test_unknown_provider_fails_without_agent_started_evt_5_run_11() -> None:
    agent = create_agent(model=ModelConfig(provider="nowhere", model="m"))
    session = agent.create_session()
    result, events = await run_collect(session)
    assert isinstance(result, AgentRunError)
    assert result.result.error is not None
    assert result.result.error.code == "ERR_PRISM_PROVIDER_UNKNOWN"
    assert result.result.error.message == "Unknown provider: nowhere"
    assert types_of(events) == ["error"]


async def test_run_provider_source_is_tried_before_the_agent_source_run_6() -> None:
    chosen = create_mock_provider(turns=[TEXT])
    fallback = create_mock_provider(turns=[TEXT])

    async def run_source(model: ModelConfig) -> Any:
        return chosen

    agent = create_agent(model=MODEL, provider_source=lambda m: fallback)
    result = await agent.create_session().run("x", provider_source=run_source)
    assert result.status == "succeeded"
    assert chosen.call_count == 1 and fallback.call_count == 0
    result = await agent.create_session().run("x", provider_source=lambda m: None)
    assert fallback.call_count == 1


async def test_an_already_aborted_signal_ends_the_run_aborted_before_start_run_11() -> None:
    from prism.abort import AbortController

    controller = AbortController()
    controller.abort()
    session, provider = make_session([TEXT])
    result, events = await run_collect(session, signal=controller.signal)
    assert isinstance(result, AgentRunError)
    assert result.result.status == "aborted" and result.code == "ERR_PRISM_RUN_ABORTED"
    assert types_of(events) == ["error"]
    assert provider.call_count == 0


async def test_provider_error_fails_the_run_with_its_error_info_run_20_retry_3() -> None:
    session, _ = make_session(
        [[provider_error(ErrorInfo(message="bad request", code=400))]], retry=False
    )
    result, events = await run_collect(session)
    assert isinstance(result, AgentRunError)
    assert result.code == "ERR_PRISM_RUN_FAILED"
    assert result.result.error == ErrorInfo(message="bad request", code=400)
    assert str(result) == "bad request"
    assert types_of(events)[-2:] == ["provider_turn_finished", "error"]
    assert events[-2].metadata.http_status == 400


async def test_metadata_merges_agent_then_session_then_run_run_6() -> None:
    seen: list[Any] = []
    provider = create_mock_provider(turns=[TEXT], on_request=lambda r: seen.append(r.metadata))
    agent = create_agent(model=MODEL, provider=provider, metadata={"a": 1, "b": 1, "c": 1})
    session = agent.create_session(metadata={"b": 2, "c": 2})
    await session.run("x", metadata={"c": 3})
    assert dict(seen[0]) == {"a": 1, "b": 2, "c": 3}


async def test_system_prompt_contributions_and_the_false_override_run_6_run_13() -> None:
    provider = create_mock_provider(turns=[TEXT, TEXT])
    agent = create_agent(
        model=MODEL,
        provider=provider,
        instructions="Base.",
        system_prompt=[SystemPromptContribution(id="a", text="Agent part.")],
    )
    session = agent.create_session()
    await session.run("x", system_prompt=[SystemPromptContribution(id="r", text="Run part.")])
    await session.run("y", system_prompt=False)
    first, second = (r.messages[0] for r in provider.requests)
    assert first.role == "system" and first.content[0] == TextContent("Base.\n\nAgent part.\n\nRun part.")
    assert second.content[0] == TextContent("Base.")


async def test_unknown_active_skill_fails_the_run_after_start_run_6() -> None:
    session, provider = make_session([TEXT], skills=[Skill(name="math", instructions="Add.")])
    result, events = await run_collect(session, active_skills=["poetry"])
    assert isinstance(result, AgentRunError)
    assert result.result.error is not None and result.result.error.code == "ERR_PRISM_CONFIG"
    assert types_of(events) == ["agent_started", "error"]
    assert provider.call_count == 0


async def test_active_skills_add_their_instructions_run_13() -> None:
    session, provider = make_session(
        [TEXT], skills=[Skill(name="math", instructions="Add."), Skill(name="poet", instructions="Rhyme.")]
    )
    await session.run("x", active_skills=["poet"])
    system = [m.content[0] for m in provider.requests[0].messages if m.role == "system"]
    assert system == [TextContent("Skill poet:\nRhyme.")]


async def test_unknown_loop_strategy_is_a_config_error_before_the_run_starts_loop_2() -> None:
    """A loop mapping with an unknown strategy is rejected by the run's preflight: nothing is
    stored and no provider is called (it used to fail the run after the input was stored)."""
    session, provider = make_session([TEXT])
    with pytest.raises(PrismConfigError, match="unknown agent loop strategy: nope"):
        await run_collect(session, loop={"strategy": "nope"})
    assert await stored_messages(session) == []
    assert provider.call_count == 0


async def test_default_loop_is_indistinguishable_from_single_shot_options_loop_5() -> None:
    a, pa = make_session([[provider_tool_call("c", "lookup", {}), provider_done()], TEXT], tools=[echo_tool()])
    b, pb = make_session([[provider_tool_call("c", "lookup", {}), provider_done()], TEXT], tools=[echo_tool()])
    ra, ea = await run_collect(a, "x")
    rb, eb = await run_collect(b, "x", loop=SingleShotLoopOptions())
    assert [r.to_dict() for r in pa.requests] == [r.to_dict() for r in pb.requests]
    assert types_of(ea) == types_of(eb)
    assert isinstance(ra, RunResult) and isinstance(rb, RunResult)
    assert [m.to_dict() for m in ra.messages] == [m.to_dict() for m in rb.messages]


async def test_tool_concurrency_four_runs_eight_slow_tools_four_at_a_time_pool_4() -> None:
    in_flight = 0
    peak = 0
    wave = asyncio.Event()

    async def slow(arguments: dict[str, Any], context: Any) -> Any:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == 4:
            wave.set()
        await wave.wait()
        for _ in range(8 - arguments["i"]):
            await asyncio.sleep(0)
        in_flight -= 1
        return arguments["i"]

    calls = [provider_tool_call(f"c{i}", "slow", {"i": i}) for i in range(8)]
    session, _ = make_session(
        [[*calls, provider_done()], TEXT],
        tools=[ToolDefinition(name="slow", execute=slow)],
        loop=SingleShotLoopOptions(tool_concurrency=4),
    )
    result = await asyncio.wait_for(session.run("go"), timeout=5)
    assert peak == 4
    assert [(r.tool_call_id, r.result) for r in result_rows(result.messages)] == [
        (f"c{i}", i) for i in range(8)
    ]


async def test_a_tool_raising_mid_parallel_batch_leaves_a_valid_history_tool_3_pool_5() -> None:
    async def flaky(arguments: dict[str, Any], context: Any) -> Any:
        await asyncio.sleep(0)
        if arguments["i"] == 2:
            raise ValueError("boom")
        return arguments["i"]

    calls = [provider_tool_call(f"c{i}", "flaky", {"i": i}) for i in range(5)]
    session, provider = make_session(
        [[*calls, provider_done()], TEXT],
        tools=[ToolDefinition(name="flaky", execute=flaky)],
        loop={"strategy": "single-shot", "tool_concurrency": 3},
    )
    result, events = await run_collect(session)
    assert isinstance(result, RunResult) and result.status == "succeeded"
    rows = result_rows(result.messages)
    assert [r.tool_call_id for r in rows] == [f"c{i}" for i in range(5)]
    assert rows[2].error is not None and rows[2].error.message == "boom"
    assert [r.result for r in rows if r.error is None] == [0, 1, 3, 4]
    assert_provider_valid(result.messages)
    assert types_of(events).count("tool_execution_error") == 1
    assert_provider_valid(provider.requests[1].messages)


async def test_a_run_level_failure_mid_batch_answers_every_call_pool_8_run_24() -> None:
    gate = asyncio.Event()

    async def slow(arguments: dict[str, Any], context: Any) -> Any:
        await gate.wait()
        return "real"

    calls = [provider_tool_call(f"c{i}", "slow", {"i": i}) for i in range(3)]
    session, _ = make_session(
        [[*calls, provider_done()], TEXT],
        tools=[ToolDefinition(name="slow", execute=slow)],
        loop=SingleShotLoopOptions(tool_concurrency=2),
        limits={"max_tool_calls": 1},
    )
    task = asyncio.ensure_future(session.run("go"))
    for _ in range(20):
        await asyncio.sleep(0)
    gate.set()
    with pytest.raises(AgentRunError) as info:
        await task
    assert info.value.code == "ERR_PRISM_RUN_LIMIT"
    stored = await stored_messages(session)
    rows = result_rows(stored)
    assert [(r.tool_call_id, r.error.code if r.error else r.result) for r in rows] == [
        ("c0", "real"),
        ("c1", "ERR_PRISM_RUN_LIMIT"),
        ("c2", "tool_call_not_dispatched"),
    ]
    assert_provider_valid(stored)


async def test_unanswered_calls_of_a_failed_run_get_interrupted_rows_run_24() -> None:
    class BreakingLoop:
        name = "breaking"

        async def run(self, ctx: Any) -> None:
            request = await ctx.assemble(ctx.input)
            result = await ctx.generate(request)
            ctx.history.extend(ctx.input_messages)
            await ctx.append_message(Message("assistant", result.content))
            raise RuntimeError("loop bug")

    session, _ = make_session(
        [[provider_tool_call("c1", "lookup", {}), provider_tool_call("c2", "lookup", {}), provider_done()]],
        tools=[echo_tool()],
    )
    result, _ = await run_collect(session, loop=BreakingLoop())
    assert isinstance(result, AgentRunError)
    assert result.result.error is not None and result.result.error.message == "loop bug"
    stored = await stored_messages(session)
    assert_provider_valid(stored)
    rows = result_rows(stored)
    assert [(r.tool_call_id, r.error.code if r.error else None) for r in rows] == [
        ("c1", "tool_call_interrupted"),
        ("c2", "tool_call_interrupted"),
    ]
    assert rows[0].error is not None
    assert rows[0].error.message == "tool call interrupted: the run ended before its result was recorded"
    assert result.result.messages == tuple(stored)


async def test_a_custom_loop_that_swallows_an_abort_still_fails_loop_8() -> None:
    class Swallowing:
        name = "swallowing"

        async def run(self, ctx: Any) -> None:
            ctx.signal  # noqa: B018
            for _ in range(3):
                try:
                    request = await ctx.assemble(ctx.input)
                    await ctx.generate(request)
                except Exception:
                    continue
            return None

    session, provider = make_session([TEXT, TEXT, TEXT], limits={"max_turns": 1})
    result, events = await run_collect(session, loop=Swallowing())
    assert isinstance(result, AgentRunError)
    assert result.code == "ERR_PRISM_RUN_LIMIT"
    assert provider.call_count == 1
    assert types_of(events).count("run_limit_exceeded") == 1


async def test_a_custom_loop_gets_usage_accounting_and_a_result_loop_6_usage_2() -> None:
    class TwoShot:
        name = "two-shot"

        async def run(self, ctx: Any) -> Usage:
            request = await ctx.assemble(ctx.input)
            result = await ctx.generate(request)
            ctx.history.extend(ctx.input_messages)
            message = Message("assistant", result.content)
            ctx.history.append(message)
            await ctx.append_message(message)
            await ctx.generate(await ctx.assemble([]))
            return Usage(input_tokens=999)

    session, provider = make_session(
        [[provider_text_delta("a"), provider_done(Usage(input_tokens=1))], [provider_done(Usage(input_tokens=2))]]
    )
    result = await session.run("x", loop=TwoShot())
    assert result.usage == Usage(input_tokens=3, total_tokens=3)
    assert provider.call_count == 2
    assert [m.role for m in provider.requests[1].messages] == ["user", "assistant"]


async def test_a_loop_returning_garbage_is_ignored_run_23() -> None:
    class Weird:
        name = "weird"

        async def run(self, ctx: Any) -> Any:
            return "not usage"

    session, _ = make_session([TEXT])
    result = await session.run("x", loop=Weird())
    assert result.status == "succeeded" and result.usage is None and result.message is None


async def test_auto_compaction_precedes_the_first_turn_and_sends_input_once_store_8() -> None:
    session, provider = make_session([TEXT, TEXT, TEXT], compaction={"threshold_entries": 3, "keep_recent_entries": 1})
    await session.run("one")
    await session.run("two")
    result, events = await run_collect(session, "three")
    assert isinstance(result, RunResult)
    kinds = types_of(events)
    assert kinds.index("compaction_started") < kinds.index("compaction_finished") < kinds.index("turn_started")
    request = provider.requests[2].messages
    texts = [m.content[0].text for m in request if isinstance(m.content[0], TextContent)]
    assert texts.count("three") == 1
    assert request[0].role == "system" and texts[0].startswith("Summary:\n")


async def test_manual_compaction_emits_events_without_run_id_rec_10() -> None:
    session, _ = make_session([TEXT, TEXT])
    await session.run("one")
    await session.run("two")
    sub = session.subscribe()
    entry = await session.compact(keep_recent_entries=1)
    assert entry.kind == "compaction" and entry.data is not None and entry.data["trigger"] == "manual"
    sub.close()
    events = [e async for e in sub]
    assert types_of(events) == ["compaction_started", "compaction_finished"]
    assert all(e.run_id is None for e in events)
    assert session.leaf_id == entry.id


async def test_run_sync_runs_outside_a_loop_and_refuses_inside_one_run_4a() -> None:
    session, provider = make_session([TEXT])
    with pytest.raises(PrismConfigError, match=r"await session\.run"):
        session.run_sync("x")
    assert provider.call_count == 0
    result = await asyncio.to_thread(session.run_sync, "x")
    assert result.status == "succeeded" and result.text == "done"


async def test_stream_yields_the_run_events_then_exposes_the_result_rec_6_rec_9() -> None:
    session, _ = make_session([TEXT])
    seen: list[str] = []
    async with session.stream("x") as events:
        async for event in events:
            seen.append(event.type)
    assert seen[0] == "agent_started" and seen[-1] == "agent_finished"
    assert events.result is not None and events.result.status == "succeeded"


async def test_stream_reraises_the_run_failure_after_the_last_event_rec_6() -> None:
    session, _ = make_session([[provider_error(ErrorInfo(message="nope", code=400))]], retry=False)
    seen: list[str] = []
    with pytest.raises(AgentRunError):
        async for event in session.stream("x"):
            seen.append(event.type)
    assert seen[-1] == "error"


async def test_leaving_a_stream_early_aborts_its_run_rec_6() -> None:
    gate = asyncio.Event()

    async def slow(arguments: dict[str, Any], context: Any) -> Any:
        await gate.wait()
        return "never"

    session, _ = make_session(
        [[provider_tool_call("c1", "slow", {}), provider_done()], TEXT],
        tools=[ToolDefinition(name="slow", execute=slow)],
        tool_abort_grace_ms=0,
    )
    stream = session.stream("x")
    async with stream as events:
        async for event in events:
            if event.type == "tool_execution_started":
                break
    assert stream.result is None
    assert not session.is_running
    stored = await stored_messages(session)
    assert_provider_valid(stored)


async def test_input_guardrail_block_fails_before_the_input_is_stored_evt_8_grd_5() -> None:
    from prism.guardrails import Guardrail, GuardrailDecision, Guardrails

    block = Guardrail(name="no", stage="input", evaluate=lambda ctx: GuardrailDecision(action="block", reason="nope"))
    session, provider = make_session([TEXT], guardrails=Guardrails(input=(block,)))
    result, events = await run_collect(session)
    assert isinstance(result, AgentRunError)
    assert result.result.error is not None and result.result.error.code == "ERR_PRISM_GUARDRAIL_BLOCKED"
    assert types_of(events) == ["agent_started", "guardrail_decision", "error"]
    assert await session.entries() == []
    assert provider.call_count == 0


async def test_agent_started_is_the_first_event_and_error_the_only_terminal_evt_7() -> None:
    session, _ = make_session([[provider_error(ErrorInfo(message="x", code="weird"))]], retry=False)
    result, events = await run_collect(session)
    assert isinstance(events[0], AgentStartedEvent)
    assert types_of(events).count("error") == 1 and "agent_finished" not in types_of(events)
    assert events[-1].type == "error"


async def test_tool_calls_with_provider_hosted_authority_are_not_answered_con_6() -> None:
    hosted = ToolCallContent(id="h1", name="web", arguments={}, authority="provider-hosted")
    session, _ = make_session([[provider_tool_call(hosted), provider_text_delta("x"), provider_done()]])
    result = await session.run("x")
    assert result_rows(result.messages) == []
    assert result.messages[-1].content[0] == hosted


async def test_result_message_properties_con_30() -> None:
    session, _ = make_session([TEXT])
    result = await session.run("x")
    assert result.message is not None and result.message.role == "assistant"
    assert result.text == "done"
    assert isinstance(result.messages[0].content[0], TextContent)
    assert all(isinstance(p, (TextContent, ToolCallContent, ToolResultContent)) for m in result.messages for p in m.content)


async def test_a_stream_finalised_after_a_break_suppresses_its_run_exception_rec_6_rec_9() -> None:
    """REC-6/REC-9: a stream left by ``break`` without ``async with`` and then finalised aborts
    its run, and the run's exception is suppressed — asyncio logs no "Task exception was never
    retrieved"."""
    import gc

    gate = asyncio.Event()

    async def slow(arguments: dict[str, Any], context: Any) -> Any:
        await gate.wait()
        return "never"

    session, _ = make_session(
        [[provider_tool_call("c1", "slow", {}), provider_done()], TEXT],
        tools=[ToolDefinition(name="slow", execute=slow)],
        tool_abort_grace_ms=0,
    )
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        stream = session.stream("x")
        async for event in stream:
            if event.type == "tool_execution_started":
                break
        del stream, event
        gc.collect()  # finalises the stream: aborts the run
        for _ in range(200):
            if not session.is_running:
                break
            await asyncio.sleep(0.005)
        assert not session.is_running
        for _ in range(3):
            await asyncio.sleep(0)
        gc.collect()  # the finished task is collected now
    finally:
        loop.set_exception_handler(previous)
    assert [c.get("message") for c in reported] == []


def test_abort_docstring_states_the_tool_grace_tool_10() -> None:
    """TOOL-10: ``session.abort()`` documents that an executing tool gets up to
    ``tool_abort_grace_ms`` (default 5000 ms) before it is cancelled."""
    from prism.runtime.session import AgentSession

    doc = AgentSession.abort.__doc__ or ""
    assert "tool_abort_grace_ms" in doc and "5000 ms" in doc and "cancelled" in doc
