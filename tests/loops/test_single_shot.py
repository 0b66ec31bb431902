"""``single_shot_loop`` against a scripted stub context (SSL-1..SSL-4, LOOP-4, EVT-9, EVT-15)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from prism.abort import AbortController, AbortSignal
from prism.errors import AbortError
from prism.loops import single_shot_loop
from prism.loops.single_shot import ROUND_LIMIT_MESSAGE
from prism.types import (
    AgentInput,
    Message,
    ModelConfig,
    ProviderRequest,
    ProviderTurnResult,
    TextContent,
    ToolCallContent,
    ToolResult,
    ToolResultContent,
    Usage,
    to_messages,
    user_message,
)

MODEL = ModelConfig(provider="mock", model="m")


def text_result(text: str, usage: Usage | None = None) -> ProviderTurnResult:
    return ProviderTurnResult(
        content=(TextContent(text),), calls=(), message_id="m", started=True, usage=usage
    )


def calls_result(*names: str, hosted: Sequence[str] = ()) -> ProviderTurnResult:
    calls = [ToolCallContent(id=f"id_{n}", name=n, arguments={}) for n in names]
    calls += [
        ToolCallContent(id=f"id_{n}", name=n, arguments={}, authority="provider-hosted")
        for n in hosted
    ]
    return ProviderTurnResult(content=tuple(calls), calls=tuple(calls), message_id=None, started=True, usage=None)


EMPTY = ProviderTurnResult(content=(), calls=(), message_id=None, started=False, usage=None)


@dataclass
class Stub:
    """Records every primitive call in ``log`` so the order of SSL-2 can be asserted."""

    results: list[ProviderTurnResult]
    input: AgentInput = "hi"
    max_tool_rounds: float = 8
    tool_concurrency: int = 1
    steers: list[list[Message]] = field(default_factory=list)
    steer_available_from: int = 0
    signal: AbortSignal = field(default_factory=lambda: AbortController().signal)
    history: list[Message] = field(default_factory=list)
    stored: list[Message] = field(default_factory=list)
    log: list[Any] = field(default_factory=list)
    requests_history_len: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    artifact: Any = None
    generated: int = 0

    @property
    def input_messages(self) -> tuple[Message, ...]:
        return tuple(to_messages(self.input))

    async def apply_pending_steers(self) -> bool:
        self.log.append(("steers",))
        if self.steers and self.generated >= self.steer_available_from:
            for message in self.steers.pop(0):
                self.history.append(message)
                self.stored.append(message)
            return True
        return False

    def emit(self, event: Any) -> None:
        self.log.append((event.type, getattr(event, "turn", None)))

    async def assemble(
        self, next_input: AgentInput, tool_results: Any = None, turn: int | None = None
    ) -> ProviderRequest:
        self.log.append(("assemble", turn, len(to_messages(next_input))))
        self.requests_history_len.append(len(self.history))
        messages = (*self.history, *to_messages(next_input))
        return ProviderRequest(model=MODEL, messages=messages)

    async def generate(self, request: ProviderRequest) -> ProviderTurnResult:
        self.log.append(("generate",))
        self.generated += 1
        return self.results.pop(0)

    async def append_message(self, message: Message) -> None:
        self.log.append(("append", message.role))
        self.stored.append(message)

    async def dispatch_tool_call(self, call: ToolCallContent) -> ToolResult:
        self.log.append(("dispatch", call.name))
        return ToolResult(tool_call_id=call.id, name=call.name, value="ok")


def test_single_shot_loop_identity_loop_4() -> None:
    assert single_shot_loop.name == "single-shot"
    assert single_shot_loop.revision == "1"
    assert not hasattr(single_shot_loop, "snapshot")
    assert not hasattr(single_shot_loop, "restore")


async def test_a_text_only_response_ends_after_one_turn_in_ssl_2_order() -> None:
    ctx = Stub([text_result("hello", Usage(input_tokens=1))])
    usage = await single_shot_loop.run(ctx)  # type: ignore[arg-type]
    assert usage == Usage(input_tokens=1)
    assert ctx.log == [
        ("steers",),
        ("turn_started", 1),
        ("assemble", 1, 1),
        ("generate",),
        ("append", "assistant"),
        ("message_finished", None),
        ("turn_finished", 1),
        ("steers",),
    ]
    assert [m.role for m in ctx.history] == ["user", "assistant"]  # input reaches history once
    assert ctx.requests_history_len == [0]


async def test_tool_rounds_continue_with_empty_input_and_increasing_turns_ssl_2_ssl_4() -> None:
    ctx = Stub([calls_result("a", "b"), calls_result("c"), text_result("done")])
    await single_shot_loop.run(ctx)  # type: ignore[arg-type]
    assembles = [entry for entry in ctx.log if entry[0] == "assemble"]
    assert assembles == [("assemble", 1, 1), ("assemble", 2, 0), ("assemble", 3, 0)]
    assert [m.role for m in ctx.history] == [
        "user", "assistant", "tool", "tool", "assistant", "tool", "assistant"
    ]
    assert [e for e in ctx.log if e[0] == "dispatch"] == [
        ("dispatch", "a"), ("dispatch", "b"), ("dispatch", "c")
    ]
    # Tool events come after turn_finished(n) and before turn_started(n+1) (EVT-13).
    idx = ctx.log.index(("turn_finished", 1))
    assert ctx.log[idx + 1][0] == "dispatch"
    assert ("turn_started", 2) in ctx.log[idx:]


async def test_provider_hosted_calls_are_never_dispatched_nor_answered_ssl_4() -> None:
    ctx = Stub([calls_result(hosted=["search"])])
    await single_shot_loop.run(ctx)  # type: ignore[arg-type]
    assert [e for e in ctx.log if e[0] == "dispatch"] == []
    assert [m.role for m in ctx.stored] == ["assistant"]


async def test_round_ceiling_answers_calls_and_sets_tool_round_limit_ssl_2_pool_9() -> None:
    ctx = Stub([calls_result("a"), calls_result("b", "c")], max_tool_rounds=1)
    await single_shot_loop.run(ctx)  # type: ignore[arg-type]
    assert ctx.finish_reason == "tool_round_limit"
    assert ctx.generated == 2  # at most max_tool_rounds + 1 provider calls
    rows = [m.content[0] for m in ctx.stored if m.role == "tool"]
    assert [r.tool_call_id for r in rows if isinstance(r, ToolResultContent)] == ["id_a", "id_b", "id_c"]
    last = rows[-1]
    assert isinstance(last, ToolResultContent) and last.error is not None
    assert last.error.code == "tool_call_not_dispatched"
    assert last.error.message == ROUND_LIMIT_MESSAGE


async def test_zero_round_budget_calls_the_provider_once_ssl_4() -> None:
    ctx = Stub([calls_result("a")], max_tool_rounds=0)
    await single_shot_loop.run(ctx)  # type: ignore[arg-type]
    assert ctx.generated == 1 and ctx.finish_reason == "tool_round_limit"


async def test_unlimited_rounds_never_hit_the_ceiling_lim_8() -> None:
    ctx = Stub([calls_result("a")] * 9 + [text_result("done")], max_tool_rounds=float("inf"))
    await single_shot_loop.run(ctx)  # type: ignore[arg-type]
    assert ctx.generated == 10 and ctx.finish_reason is None


async def test_steers_keep_the_run_going_after_a_final_turn_ssl_4() -> None:
    ctx = Stub(
        [text_result("first"), text_result("second")],
        steers=[[user_message("more please")]],
        steer_available_from=1,
    )
    await single_shot_loop.run(ctx)  # type: ignore[arg-type]
    assert ctx.generated == 2
    assert [e for e in ctx.log if e[0] == "assemble"] == [("assemble", 1, 1), ("assemble", 2, 0)]
    assert [m.role for m in ctx.history] == ["user", "assistant", "user", "assistant"]


async def test_a_non_started_result_appends_nothing_and_emits_no_message_finished_evt_9() -> None:
    ctx = Stub([EMPTY])
    await single_shot_loop.run(ctx)  # type: ignore[arg-type]
    assert ctx.stored == []
    assert not any(e[0] == "message_finished" for e in ctx.log)
    assert ("turn_finished", 1) in ctx.log


async def test_usage_fallback_is_the_last_non_none_turn_usage_ssl_3() -> None:
    ctx = Stub([
        ProviderTurnResult(
            content=(ToolCallContent(id="x", name="t", arguments={}),),
            calls=(ToolCallContent(id="x", name="t", arguments={}),),
            message_id=None, started=True, usage=Usage(output_tokens=3),
        ),
        text_result("done"),
    ])
    assert await single_shot_loop.run(ctx) == Usage(output_tokens=3)  # type: ignore[arg-type]


async def test_an_aborted_signal_stops_before_the_next_turn_ssl_2() -> None:
    controller = AbortController()
    ctx = Stub([calls_result("a"), text_result("never")], signal=controller.signal)

    async def dispatch(call: ToolCallContent) -> ToolResult:
        controller.abort()
        return ToolResult(tool_call_id=call.id, name=call.name)

    ctx.dispatch_tool_call = dispatch  # type: ignore[method-assign]
    with pytest.raises(AbortError):
        await single_shot_loop.run(ctx)  # type: ignore[arg-type]
    assert ctx.generated == 1


async def test_the_loop_emits_no_artifact_events_evt_15() -> None:
    ctx = Stub([calls_result("a"), text_result("done")])
    await single_shot_loop.run(ctx)  # type: ignore[arg-type]
    emitted = [e[0] for e in ctx.log if e[0] not in ("steers", "assemble", "generate", "append", "dispatch")]
    assert emitted == [
        "turn_started", "message_finished", "turn_finished",
        "turn_started", "message_finished", "turn_finished",
    ]
