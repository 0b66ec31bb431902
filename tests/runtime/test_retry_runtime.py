"""Retry of provider attempts inside a run (RETRY-1..RETRY-4, EVT-11, USAGE-1, RUN-6)."""

from __future__ import annotations

import asyncio
from typing import Any

from runtime_support import echo_tool, make_session, run_collect, types_of

from prism.errors import AgentRunError
from prism.middleware import MiddlewareRegistry
from prism.providers.base import (
    provider_done,
    provider_error,
    provider_text_delta,
    provider_tool_call,
    provider_usage,
)
from prism.redaction import create_secret_redactor
from prism.retry import (
    RetryContext,
    RetryDecision,
    RetryOptions,
    RetryPayload,
    create_default_retry_policy,
)
from prism.types import ErrorInfo, RunResult, Usage

TEXT = [provider_text_delta("done"), provider_done()]
NO_WAIT = RetryOptions(base_delay_ms=0, jitter=0)


def fail(code: Any, message: str = "upstream trouble", **kw: Any) -> list[Any]:
    return [provider_error(ErrorInfo(message=message, code=code, **kw))]


async def test_a_retryable_error_is_retried_with_backoff_events_retry_1_evt_11() -> None:
    decisions: list[tuple[int, Any]] = []
    policy = create_default_retry_policy(RetryOptions(base_delay_ms=0, jitter=0), random=lambda: 0.5)

    class Recording:
        def decide(self, context: RetryContext) -> RetryDecision:
            decision = policy.decide(context)
            assert isinstance(decision, RetryDecision)
            decisions.append((context.attempt, context.error.code))
            return decision

    session, provider = make_session([fail(503), fail(429), TEXT], retry=RetryOptions(policy=Recording()))
    result, events = await run_collect(session)
    assert isinstance(result, RunResult) and result.text == "done"
    assert provider.call_count == 3
    assert decisions == [(1, 503), (2, 429)]
    kinds = types_of(events)
    assert kinds[:9] == [
        "agent_started", "turn_started",
        "provider_turn_started", "provider_turn_finished", "retry_scheduled",
        "provider_turn_started", "provider_turn_finished", "retry_scheduled",
        "provider_turn_started",
    ]
    started = [e for e in events if e.type == "provider_turn_started"]
    assert [(e.turn, e.metadata.attempt) for e in started] == [(1, 1), (1, 2), (1, 3)]
    scheduled = [e for e in events if e.type == "retry_scheduled"]
    assert [(e.attempt, e.delay_ms, e.error.code) for e in scheduled] == [(1, 0.0, 503), (2, 0.0, 429)]
    failed = [e for e in events if e.type == "provider_turn_finished" and e.error is not None]
    assert [e.metadata.http_status for e in failed] == [503, 429]
    # The provider saw the same request on every attempt (RETRY-2).
    assert provider.requests[0].messages == provider.requests[2].messages


async def test_a_non_retryable_error_is_not_retried_retry_1_retry_5() -> None:
    session, provider = make_session([fail(400, "bad request"), TEXT], retry=NO_WAIT)
    result, events = await run_collect(session)
    assert isinstance(result, AgentRunError)
    assert provider.call_count == 1
    assert "retry_scheduled" not in types_of(events)
    assert result.result.error == ErrorInfo(message="bad request", code=400)


async def test_retries_stop_at_max_attempts_and_report_the_last_error_retry_3_retry_4() -> None:
    session, provider = make_session([fail(500, "a"), fail(502, "b"), fail(503, "c"), TEXT], retry=NO_WAIT)
    result, _ = await run_collect(session)
    assert isinstance(result, AgentRunError)
    assert provider.call_count == 3  # default max_attempts=3
    assert result.result.error is not None and result.result.error.code == 503


async def test_retry_is_on_by_default_retry_1() -> None:
    session, provider = make_session(
        [fail(429, retry_after_ms=0), TEXT],
    )
    result = await session.run("x")
    assert result.status == "succeeded" and provider.call_count == 2


async def test_retry_false_turns_retry_off_run_6() -> None:
    session, provider = make_session([fail(503), TEXT])
    result, _ = await run_collect(session, retry=False)
    assert isinstance(result, AgentRunError) and provider.call_count == 1


async def test_a_run_retry_mapping_overrides_only_the_keys_it_names_run_6() -> None:
    session, provider = make_session([fail(503), fail(503), TEXT], retry=RetryOptions(max_attempts=2, base_delay_ms=0, jitter=0))
    result, _ = await run_collect(session)
    assert isinstance(result, AgentRunError) and provider.call_count == 2
    session, provider = make_session([fail(503), fail(503), TEXT], retry=RetryOptions(max_attempts=2, base_delay_ms=0, jitter=0))
    result, _ = await run_collect(session, retry={"max_attempts": 3})
    assert isinstance(result, RunResult) and provider.call_count == 3


async def test_an_observable_failure_is_not_retried_retry_1() -> None:
    session, provider = make_session([[provider_text_delta("partial"), *fail(503)], TEXT], retry=NO_WAIT)
    result, events = await run_collect(session)
    assert isinstance(result, AgentRunError)
    assert provider.call_count == 1
    assert "message_delta" in types_of(events)


async def test_a_provider_exception_before_output_is_retried_prov_3() -> None:
    session, provider = make_session([[TimeoutError("read timeout")], TEXT], retry=NO_WAIT)
    result = await session.run("x")
    assert result.status == "succeeded" and provider.call_count == 2


async def test_usage_of_failed_attempts_is_summed_once_usage_1() -> None:
    session, _ = make_session(
        [
            [provider_usage(Usage(input_tokens=7)), *fail(503)],
            [provider_text_delta("x"), provider_done(Usage(input_tokens=5, output_tokens=1))],
        ],
        retry=NO_WAIT,
    )
    result = await session.run("x")
    assert result.usage == Usage(input_tokens=12, output_tokens=1, total_tokens=13)


async def test_the_retry_middleware_may_veto_a_retry_retry_2() -> None:
    middleware = MiddlewareRegistry()
    seen: list[RetryPayload] = []

    def veto(payload: RetryPayload) -> RetryPayload:
        seen.append(payload)
        return RetryPayload(context=payload.context, decision=RetryDecision(False))

    middleware.use("retry", veto)
    session, provider = make_session([fail(503), TEXT], retry=NO_WAIT, middleware=middleware)
    result, _ = await run_collect(session)
    assert isinstance(result, AgentRunError) and provider.call_count == 1
    assert seen[0].decision.retry is True


async def test_an_abort_during_the_retry_wait_ends_the_run_aborted_retry_2() -> None:
    class SlowPolicy:
        def decide(self, context: RetryContext) -> RetryDecision:
            return RetryDecision(True, delay_ms=60_000)

    session, provider = make_session([fail(503), TEXT], retry=RetryOptions(policy=SlowPolicy()))
    sub = session.subscribe()
    task = asyncio.ensure_future(session.run("x"))
    async for event in sub:
        if event.type == "retry_scheduled":
            session.abort()
    outcome = await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), timeout=5)
    error = outcome[0]
    assert isinstance(error, AgentRunError) and error.result.status == "aborted"
    assert provider.call_count == 1


async def test_retry_error_info_is_redacted_with_the_retry_secrets_retry_3() -> None:
    session, _ = make_session(
        [fail(400, "key sk-live-1 and tok-2 rejected")],
        redactor=create_secret_redactor(["sk-live-1"]),
        retry=RetryOptions(secrets=("tok-2",)),
    )
    result, events = await run_collect(session)
    assert isinstance(result, AgentRunError)
    assert result.result.error is not None
    assert result.result.error.message == "key [REDACTED] and [REDACTED] rejected"
    finished = [e for e in events if e.type == "provider_turn_finished"]
    assert finished[0].error.message == "key [REDACTED] and [REDACTED] rejected"
    assert "sk-live-1" not in str(result) and "tok-2" not in str(result)


async def test_a_tool_turn_then_a_retried_turn_keeps_turn_numbers_evt_11() -> None:
    session, _ = make_session(
        [[provider_tool_call("c", "lookup", {}), provider_done()], fail(503), TEXT],
        tools=[echo_tool()],
        retry=NO_WAIT,
    )
    result, events = await run_collect(session)
    assert isinstance(result, RunResult)
    started = [(e.turn, e.metadata.attempt) for e in events if e.type == "provider_turn_started"]
    assert started == [(1, 1), (2, 1), (2, 2)]
