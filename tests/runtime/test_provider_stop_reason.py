"""The final provider turn's stop reason is visible: ``RunResult.provider_stop_reason`` and
``agent_finished.provider_stop_reason``, beside the run-level ``stop_reason``."""

from __future__ import annotations

from runtime_support import echo_tool, make_session, run_collect

from prism.events import AgentFinishedEvent, event_from_dict
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.types import RunResult


async def test_a_reply_cut_by_the_token_cap_reports_max_tokens() -> None:
    session, _ = make_session([[provider_text_delta("half a sen"), provider_done(None, "max_tokens")]])
    result, events = await run_collect(session)
    assert isinstance(result, RunResult)
    assert (result.status, result.stop_reason, result.provider_stop_reason) == (
        "succeeded", None, "max_tokens"
    )
    finished = events[-1]
    assert isinstance(finished, AgentFinishedEvent)
    assert finished.provider_stop_reason == "max_tokens"
    assert event_from_dict(finished.to_dict()) == finished


async def test_the_last_turn_wins_over_earlier_turns() -> None:
    session, _ = make_session(
        [
            [provider_tool_call("c1", "lookup", {}), provider_done(None, "tool_use")],
            [provider_text_delta("done"), provider_done(None, "end_turn")],
        ],
        tools=[echo_tool()],
    )
    result = await session.run("x")
    assert result.provider_stop_reason == "end_turn"
    assert result.to_dict()["provider_stop_reason"] == "end_turn"


async def test_a_provider_that_reports_none_leaves_it_none() -> None:
    session, _ = make_session([[provider_text_delta("ok"), provider_done()]])
    result = await session.run("x")
    assert result.provider_stop_reason is None
