"""Incremental request redaction and byte counting (ARCH-15, RUN-14 step 4, RUN-15 step 1)."""

from __future__ import annotations

from typing import Any, TypeVar

from runtime_support import MODEL, echo_tool

from prism.events import AgentEvent
from prism.middleware import MiddlewareRegistry
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.redaction import create_secret_redactor, redact_value
from prism.runtime.agent import create_agent
from prism.runtime.run._request_codec import LiveHistory, RequestCodec
from prism.types import (
    Message,
    ModelConfig,
    ProviderRequest,
    TextContent,
    ToolCallContent,
    ToolResult,
    canonical_json,
    system_message,
    tool_result_message,
    user_message,
)

T = TypeVar("T")
SECRETS = ("sk-abc", "hunter2")


class CountingRedactor:
    """The built-in walk, counting how often the runtime asks for a redaction."""

    def __init__(self) -> None:
        self.secrets = SECRETS
        self.calls = 0

    def redact(self, value: T) -> T:
        self.calls += 1
        return redact_value(value, self.secrets)


def size(request: ProviderRequest) -> int:
    return len(canonical_json(request.to_dict()).encode())


def test_codec_matches_the_full_computation_as_history_grows_arch_15() -> None:
    redactor = create_secret_redactor(SECRETS)
    history = LiveHistory()
    codec = RequestCodec(redactor, history)
    head = (system_message("You know sk-abc"),)
    for i in range(30):
        history.append(user_message(f"turn {i} hunter2 ü"))
        call = ToolCallContent(id=f"c{i}", name="t", arguments={"k": ["sk-abc", i, {"n": None}]})
        history.append(Message("assistant", (TextContent("x" * i), call)))
        history.append(tool_result_message(ToolResult(tool_call_id=f"c{i}", name="t", value={"v": "hunter2"})))
        tail = (user_message("tail sk-abc"),)
        request = ProviderRequest(
            model=MODEL, messages=head + tuple(history) + tail, metadata={"who": "hunter2"}
        )
        encoded, n = codec.encode(
            request, prefix_len=1, history_len=len(history), history_version=history.mutations
        )
        full = redactor.redact(request)
        assert encoded == full
        assert n == size(full)


def test_a_non_append_mutation_invalidates_the_cached_prefix_arch_15() -> None:
    redactor = create_secret_redactor(SECRETS)
    history = LiveHistory([user_message("a"), user_message("b sk-abc")])
    codec = RequestCodec(redactor, history)
    first = ProviderRequest(model=MODEL, messages=tuple(history))
    codec.encode(first, prefix_len=0, history_len=2, history_version=history.mutations)
    history[0] = user_message("replaced hunter2")
    assert history.mutations == 1
    second = ProviderRequest(model=MODEL, messages=tuple(history))
    encoded, n = codec.encode(second, prefix_len=0, history_len=2, history_version=history.mutations)
    assert encoded == redactor.redact(second) and n == size(redactor.redact(second))
    # A stale layout (recorded before the mutation) falls back to the per-message path.
    del history[1]
    third = ProviderRequest(model=MODEL, messages=tuple(history))
    encoded, n = codec.encode(third, prefix_len=0, history_len=1, history_version=0)
    assert encoded == redactor.redact(third) and n == size(redactor.redact(third))


def test_messages_deeper_than_the_walk_limit_redact_like_the_whole_request_arch_15() -> None:
    redactor = create_secret_redactor(SECRETS)
    deep: Any = "sk-abc"
    for _ in range(40):
        deep = {"d": deep}
    call = ToolCallContent(id="c", name="t", arguments={"deep": deep})
    history = LiveHistory([Message("assistant", (call,))])
    codec = RequestCodec(redactor, history)
    request = ProviderRequest(model=MODEL, messages=tuple(history))
    encoded, _ = codec.encode(request, prefix_len=0, history_len=1, history_version=0)
    assert encoded == redactor.redact(request)


def test_without_a_redactor_the_request_itself_is_returned_arch_15() -> None:
    history = LiveHistory([user_message("a")])
    codec = RequestCodec(None, history)
    request = ProviderRequest(model=MODEL, messages=tuple(history))
    encoded, n = codec.encode(request, prefix_len=0, history_len=1, history_version=0)
    assert encoded is request and n == size(request)


async def test_every_request_a_provider_sees_is_the_redacted_assembled_request_run_14() -> None:
    captured: list[ProviderRequest] = []
    middleware = MiddlewareRegistry()
    middleware.use("provider_request", lambda r: captured.append(r))
    turns = [[provider_tool_call(f"c{i}", "lookup", {"q": "sk-abc"}), provider_done()] for i in range(4)]
    provider = create_mock_provider(turns=[*turns, [provider_text_delta("hunter2 done"), provider_done()]])
    redactor = create_secret_redactor(SECRETS)
    agent = create_agent(
        model=MODEL, provider=provider, tools=[echo_tool()], redactor=redactor,
        middleware=middleware, instructions="Never say hunter2.",
    )
    await agent.create_session().run("please use sk-abc")
    assert len(captured) == len(provider.requests) == 5
    for raw, seen in zip(captured, provider.requests, strict=True):
        expected = redactor.redact(raw)
        assert seen.messages == expected.messages
        assert seen.to_dict() == expected.to_dict()
        assert "sk-abc" not in canonical_json(seen.to_dict())
        assert "hunter2" not in canonical_json(seen.to_dict())


async def test_redaction_work_per_turn_does_not_grow_with_history_arch_15() -> None:
    """Count redactor calls per turn: identical for turn 5 and turn 60 of the same run."""
    redactor = CountingRedactor()
    marks: list[int] = []

    def on_event(event: AgentEvent) -> None:
        if event.type == "turn_started":
            marks.append(redactor.calls)

    turns = [[provider_tool_call(f"c{i}", "lookup", {"i": i}), provider_done()] for i in range(70)]
    provider = create_mock_provider(turns=[*turns, [provider_text_delta("done"), provider_done()]])
    agent = create_agent(
        model=MODEL, provider=provider, tools=[echo_tool()], redactor=redactor,
        limits={"max_turns": 100, "max_tool_rounds": 100, "max_tool_calls": 100, "max_provider_attempts": 100},
    )
    await agent.create_session(on_event=on_event).run("go")
    per_turn = [b - a for a, b in zip(marks, marks[1:], strict=False)]
    assert len(set(per_turn[3:])) == 1, per_turn


async def test_provider_requests_copy_only_references_of_history_messages_arch_15() -> None:
    turns = [[provider_tool_call(f"c{i}", "lookup", {}), provider_done()] for i in range(3)]
    provider = create_mock_provider(turns=[*turns, [provider_text_delta("done"), provider_done()]])
    agent = create_agent(model=MODEL, provider=provider, tools=[echo_tool()])
    await agent.create_session().run("go")
    first, last = provider.requests[1].messages, provider.requests[3].messages
    # Without a redactor, the messages of earlier requests are the very same objects later on.
    assert all(a is b for a, b in zip(first, last, strict=False))


def test_models_with_custom_parameters_are_counted_exactly_arch_15() -> None:
    model = ModelConfig(provider="mock", model="m", parameters={"temperature": 0.2, "stop": ["\n"]})
    history = LiveHistory([user_message("é")])
    codec = RequestCodec(None, history)
    request = ProviderRequest(model=model, messages=tuple(history), context=(), metadata={"a": [1]})
    assert codec.encode(request)[1] == size(request)


def test_without_a_redactor_sizes_match_as_history_grows_and_mutates_arch_15() -> None:
    history = LiveHistory()
    codec = RequestCodec(None, history)
    head = (system_message("system ü"),)
    for i in range(20):
        call = ToolCallContent(id=f"c{i}", name="t", arguments={"k": i, "s": "é" * i})
        history.append(Message("assistant", (TextContent("x" * i), call)))
        history.append(tool_result_message(ToolResult(tool_call_id=f"c{i}", name="t", value={"v": i})))
        if i == 10:
            history[0] = user_message("replaced")  # a non-append mutation: the prefix is rebuilt
        tail = (user_message("tail"),)
        request = ProviderRequest(model=MODEL, messages=head + tuple(history) + tail)
        encoded, n = codec.encode(
            request, prefix_len=1, history_len=len(history), history_version=history.mutations
        )
        assert encoded is request
        assert n == size(request)
        unknown, m = codec.encode(request)  # no layout: every message through the cache
        assert unknown is request and m == n


def test_an_agents_runs_share_the_measured_request_head_arch_15(monkeypatch: Any) -> None:
    import prism.runtime.run._request_codec as codec_module
    from prism.runtime.run._request_codec import HeadMemo

    walks: list[object] = []
    real = codec_module.canonical_size

    def counting(value: Any) -> int:
        if isinstance(value, ProviderRequest):
            walks.append(value)
        return real(value)

    monkeypatch.setattr(codec_module, "canonical_size", counting)
    memo = HeadMemo()
    metadata = {"who": "me"}
    tools_request = ProviderRequest(model=MODEL, messages=(user_message("hi"),), metadata=metadata)
    sizes = [RequestCodec(None, LiveHistory(), memo).encode(tools_request)[1] for _ in range(3)]
    assert len(walks) == 1 and sizes == [size(tools_request)] * 3
    other = ProviderRequest(model=MODEL, messages=(user_message("hi"),), metadata={"who": "you"})
    assert RequestCodec(None, LiveHistory(), memo).encode(other)[1] == size(other)
    assert len(walks) == 2  # other metadata: measured again
    redactor = create_secret_redactor(SECRETS)
    red, n = RequestCodec(redactor, LiveHistory(), memo).encode(other)
    assert len(walks) == 3 and n == size(red)  # another redactor: measured again
