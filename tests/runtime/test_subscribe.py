"""Observers: bounded subscriptions, overflow policies, ``on_event`` (REC-5, REC-7, EVT-20, EVT-21)."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest
from runtime_support import MODEL, make_session, types_of

from prism.errors import PrismConfigError
from prism.events import AgentEvent, EventSubscriberOverflowEvent, TurnStartedEvent
from prism.providers.base import provider_done, provider_text_delta
from prism.providers.mock import create_mock_provider
from prism.redaction import create_secret_redactor
from prism.runtime.agent import create_agent
from prism.runtime.run._observers import (
    EventSubscription,
    SessionObservers,
    coerce_max_queued_events,
)

TEXT = [provider_text_delta("done"), provider_done()]


def event(n: int) -> TurnStartedEvent:
    return TurnStartedEvent(session_id="s", run_id="r", turn=n)


async def drain(sub: EventSubscription) -> list[Any]:
    return [e async for e in sub]


@pytest.mark.parametrize(("value", "expected"), [(5, 5), (2.7, 2), (0, 1), (-4, 1), (math.inf, 1024), (math.nan, 1024), ("8", 1024), (True, 1024)])
def test_max_queued_events_is_floored_to_at_least_one_rec_5(value: Any, expected: int) -> None:
    assert coerce_max_queued_events(value) == expected


def test_an_unknown_overflow_policy_is_rejected_rec_5() -> None:
    with pytest.raises(PrismConfigError):
        SessionObservers().subscribe(overflow="explode")  # type: ignore[arg-type]


async def test_drop_oldest_keeps_the_newest_events_rec_5() -> None:
    sub = SessionObservers().subscribe(max_queued_events=2, overflow="drop_oldest")
    for n in range(5):
        sub.push(event(n))
    sub.close()
    assert [e.turn for e in await drain(sub)] == [3, 4]
    assert sub.dropped_events == 3


async def test_drop_newest_keeps_the_oldest_events_rec_5() -> None:
    sub = SessionObservers().subscribe(max_queued_events=2, overflow="drop_newest")
    for n in range(5):
        sub.push(event(n))
    sub.close()
    assert [e.turn for e in await drain(sub)] == [0, 1]


async def test_close_overflow_replaces_the_queue_with_one_overflow_event_rec_5() -> None:
    observers = SessionObservers()
    sub = observers.subscribe(max_queued_events=3, overflow="close")
    for n in range(6):
        sub.push(event(n))
    events = await drain(sub)
    assert len(events) == 1
    overflow = events[0]
    assert isinstance(overflow, EventSubscriberOverflowEvent)
    assert (overflow.dropped_events, overflow.max_queued_events, overflow.overflow) == (4, 3, "close")
    assert sub.closed and not observers.active


async def test_aclose_unsubscribes_and_discards_the_queue_rec_5() -> None:
    observers = SessionObservers()
    sub = observers.subscribe()
    sub.push(event(1))
    await sub.aclose()
    assert await drain(sub) == []
    observers.deliver(event(2))
    assert not observers.active


async def test_a_subscriber_receives_one_run_and_is_closed_at_its_end_evt_20() -> None:
    session, _ = make_session([TEXT, TEXT])
    sub = session.subscribe()
    await session.run("one")
    events = await drain(sub)
    assert types_of(events)[0] == "agent_started" and types_of(events)[-1] == "agent_finished"
    later = session.subscribe()
    await session.run("two")
    assert len(await drain(later)) == len(events)


async def test_a_full_subscriber_never_blocks_the_run_rec_5() -> None:
    session, _ = make_session([TEXT])
    sub = session.subscribe(max_queued_events=1, overflow="drop_newest")
    result = await session.run("x")
    assert result.status == "succeeded"
    assert types_of(await drain(sub)) == ["agent_started"]


async def test_on_event_sync_callbacks_see_every_event_in_order_rec_7() -> None:
    seen: list[str] = []
    provider = create_mock_provider(turns=[TEXT])
    session = create_agent(model=MODEL, provider=provider).create_session(on_event=lambda e: seen.append(e.type))
    sub = session.subscribe()
    await session.run("x")
    assert seen == types_of(await drain(sub))


async def test_async_on_event_results_are_awaited_in_order_before_run_returns_rec_7() -> None:
    seen: list[str] = []

    async def on_event(e: AgentEvent) -> None:
        seen.append(e.type)

    provider = create_mock_provider(turns=[TEXT])
    session = create_agent(model=MODEL, provider=provider).create_session(on_event=on_event)
    await session.run("x")
    assert seen == [
        "agent_started", "turn_started", "provider_turn_started", "message_started",
        "message_delta", "provider_turn_finished", "message_finished", "turn_finished",
        "agent_finished",
    ]


async def test_on_event_exceptions_are_logged_redacted_and_ignored_rec_7_evt_26(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def on_event(e: AgentEvent) -> None:
        raise RuntimeError("leaked sk-9 in callback")

    provider = create_mock_provider(turns=[TEXT])
    agent = create_agent(model=MODEL, provider=provider, redactor=create_secret_redactor(["sk-9"]))
    session = agent.create_session(on_event=on_event)
    with caplog.at_level(logging.ERROR, logger="prism"):
        result = await session.run("x")
    assert result.status == "succeeded"
    assert caplog.records and all("sk-9" not in r.getMessage() for r in caplog.records)
    assert any("[REDACTED]" in r.getMessage() for r in caplog.records)


async def test_every_observer_gets_the_same_redacted_event_evt_21() -> None:
    seen: list[Any] = []
    provider = create_mock_provider(turns=[[provider_text_delta("my sk-1 key"), provider_done()]])
    agent = create_agent(model=MODEL, provider=provider, redactor=create_secret_redactor(["sk-1"]))
    session = agent.create_session(on_event=seen.append)
    sub = session.subscribe()
    await session.run("x")
    events = await drain(sub)
    assert [id(e) for e in events] == [id(e) for e in seen]
    deltas = [e for e in events if e.type == "message_delta"]
    assert deltas[0].content.text == "my [REDACTED] key"
    finished = [e for e in events if e.type == "message_finished"]
    assert finished[0].message.content[0].text == "my [REDACTED] key"
