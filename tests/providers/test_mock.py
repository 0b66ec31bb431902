"""The scripted mock provider (MOCK-1..3)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from prism.abort import AbortController
from prism.errors import AbortError, PrismConfigError
from prism.providers.base import (
    fold_provider_events,
    provider_done,
    provider_text_delta,
    provider_tool_call,
)
from prism.providers.mock import MockProvider, create_mock_provider
from prism.types import (
    ErrorInfo,
    ModelConfig,
    ProviderDone,
    ProviderErrorEvent,
    ProviderEvent,
    ProviderRequest,
    TextContent,
    ToolCallContent,
    Usage,
    user_message,
)


def _request(text: str = "hi", signal: object = None) -> ProviderRequest:
    return ProviderRequest(
        model=ModelConfig(provider="mock", model="demo"),
        messages=(user_message(text),),
        signal=signal,  # type: ignore[arg-type]
    )


async def _collect(stream: AsyncIterator[ProviderEvent]) -> list[ProviderEvent]:
    return [event async for event in stream]


async def test_events_are_replayed_by_every_call() -> None:
    """MOCK-1: `events` is replayed on every generate call."""
    script: list[ProviderEvent] = [provider_text_delta("ok"), provider_done()]
    provider = create_mock_provider(script)
    assert await _collect(provider.generate(_request())) == script
    assert await _collect(provider.generate(_request())) == script
    assert provider.call_count == 2
    assert provider.id == "mock"


async def test_turns_are_replayed_in_order_and_exhaustion_is_an_error_event() -> None:
    """MOCK-1, MOCK-3: call i replays turns[i]; past the end -> mock_script_exhausted."""
    provider = create_mock_provider(
        turns=[
            [provider_tool_call("c1", "lookup", {"q": "x"}), provider_done()],
            [provider_text_delta("done"), provider_done(Usage(input_tokens=5, output_tokens=1))],
        ]
    )
    first = fold_provider_events(await _collect(provider.generate(_request())))
    assert first.calls == (ToolCallContent(id="c1", name="lookup", arguments={"q": "x"}),)
    second = fold_provider_events(await _collect(provider.generate(_request())))
    assert second.content == (TextContent(text="done"),)
    assert second.usage == Usage(input_tokens=5, output_tokens=1)
    third = await _collect(provider.generate(_request()))
    assert third == [
        ProviderErrorEvent(
            error=ErrorInfo(
                message="mock provider has no scripted turn 3", code="mock_script_exhausted"
            )
        )
    ]


async def test_without_a_script_every_call_yields_done() -> None:
    """MOCK-1: neither events nor turns -> one done event per call."""
    provider = create_mock_provider()
    assert await _collect(provider.generate(_request())) == [ProviderDone()]


def test_events_and_turns_together_are_rejected() -> None:
    """MOCK-1: giving both raises PrismConfigError."""
    with pytest.raises(PrismConfigError):
        create_mock_provider([provider_done()], turns=[[provider_done()]])
    with pytest.raises(PrismConfigError):
        create_mock_provider(delay_s=-1)


async def test_exception_items_are_raised_when_reached() -> None:
    """MOCK-1: an exception instance in the script is raised at its position."""
    boom = ConnectionResetError("reset")
    provider = create_mock_provider([provider_text_delta("a"), boom, provider_done()])
    seen: list[ProviderEvent] = []
    with pytest.raises(ConnectionResetError):
        async for event in provider.generate(_request()):
            seen.append(event)
    assert seen == [provider_text_delta("a")]


async def test_requests_are_recorded_and_on_request_runs_at_call_time() -> None:
    """MOCK-2: the request is appended and on_request called before anything is yielded."""
    calls: list[str] = []

    def on_request(request: ProviderRequest) -> None:
        calls.append(request.messages[0].content[0].text)  # type: ignore[union-attr]

    provider = create_mock_provider(on_request=on_request, id="scripted")
    request = _request("first")
    stream = provider.generate(request)
    assert provider.requests == [request]
    assert calls == ["first"]
    assert provider.call_count == 1
    await _collect(stream)
    assert isinstance(provider, MockProvider)
    assert provider.id == "scripted"


async def test_an_aborted_signal_raises_its_abort_error_before_the_next_item() -> None:
    """MOCK-2: the signal is checked before each item."""
    controller = AbortController()
    provider = create_mock_provider([provider_text_delta("a"), provider_done()])
    stream = provider.generate(_request(signal=controller.signal))
    assert await anext(stream) == provider_text_delta("a")
    controller.abort()
    with pytest.raises(AbortError):
        await anext(stream)


async def test_delay_is_cut_short_by_an_abort() -> None:
    """MOCK-2: the per-item delay ends early when the signal aborts (no wall-clock assertion)."""
    controller = AbortController()
    provider = create_mock_provider([provider_done()], delay_s=3600)
    stream = provider.generate(_request(signal=controller.signal))
    pending = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)
    assert not pending.done()
    controller.abort(AbortError("stop now"))
    with pytest.raises(AbortError, match="stop now"):
        await asyncio.wait_for(pending, timeout=30)


async def test_delay_without_signal_waits_then_yields() -> None:
    """MOCK-2: a small delay is applied before each item."""
    provider = create_mock_provider([provider_text_delta("a"), provider_done()], delay_s=0.001)
    assert len(await _collect(provider.generate(_request()))) == 2
