"""Tests for ``generate_validate_revise_loop`` against a stub ``LoopContext`` (GVR-1..GVR-9).

The stub (CON-29) records assembled inputs, provider requests, emitted events, live history and
store appends; ``generate`` replays a script. Assertions are on exact event sequences, provider-call
counts and stored roles — never on timing.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, cast

import pytest

from prism.abort import AbortController, AbortSignal
from prism.errors import AbortError, AgentLoopStateError, PrismConfigError
from prism.loops.contracts import (
    AgentLoopStrategy,
    ArtifactContext,
    ArtifactError,
    ArtifactParseResult,
    ArtifactValidation,
    DurableLoopStrategy,
    LoopContext,
)
from prism.loops.gvr import GenerateValidateReviseLoop, generate_validate_revise_loop
from prism.types import (
    AgentInput,
    Message,
    ModelConfig,
    ProviderRequest,
    ProviderRequestOptions,
    ProviderTurnResult,
    StructuredOutputOptions,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolDefinition,
    ToolResult,
    ToolResultContent,
    Usage,
    is_json_value,
    to_messages,
    user_message,
)

MODEL = ModelConfig(provider="mock", model="demo")
SCHEMA = StructuredOutputOptions(name="doc", schema={"type": "object"})
LOOKUP = ToolDefinition(name="lookup", execute=lambda args, ctx: "ok")

Response = ProviderTurnResult | Callable[["StubContext"], ProviderTurnResult]


# ----------------------------------------------------------------------------- helpers


def text(value: str, *, usage: Usage | None = None, message_id: str | None = None) -> ProviderTurnResult:
    return ProviderTurnResult(
        content=(TextContent(value),), started=True, message_id=message_id, usage=usage
    )


def call(call_id: str, *, hosted: bool = False) -> ToolCallContent:
    return ToolCallContent(
        id=call_id,
        name="lookup",
        arguments={"q": call_id},
        authority="provider-hosted" if hosted else None,
    )


def calls(*items: ToolCallContent, prefix: str = "") -> ProviderTurnResult:
    content: tuple[Any, ...] = ((TextContent(prefix),) if prefix else ()) + items
    return ProviderTurnResult(content=content, calls=items, started=True)


@dataclass
class Assembled:
    turn: int | None
    history: tuple[Message, ...]
    next_input: tuple[Message, ...]
    snapshot: Any = None


@dataclass
class StubContext:
    """A duck-typed LoopContext without the optional CON-29 members."""

    responses: list[Response]
    input: AgentInput = "Produce the doc."
    max_tool_rounds: float = 0
    tool_concurrency: int = 1
    schema: StructuredOutputOptions | None = None
    tools: tuple[ToolDefinition, ...] | None = None
    session_id: str = "session_a"
    run_id: str = "run_a"
    loop: GenerateValidateReviseLoop | None = None
    metadata: MappingProxyType[str, Any] = field(
        default_factory=lambda: MappingProxyType({"tenant": "t1"})
    )
    signal: AbortSignal = field(default_factory=lambda: AbortController().signal)
    history: list[Message] = field(default_factory=list)
    restored_loop_state: Any = None
    finish_reason: str | None = None
    artifact: Any = None
    events: list[Any] = field(default_factory=list)
    stored: list[Message] = field(default_factory=list)
    requests: list[ProviderRequest] = field(default_factory=list)
    assembled: list[Assembled] = field(default_factory=list)
    dispatched: list[str] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    @property
    def input_messages(self) -> tuple[Message, ...]:
        return tuple(to_messages(self.input))

    async def assemble(
        self,
        next_input: AgentInput,
        tool_results: Sequence[ToolResult] | None = None,
        turn: int | None = None,
    ) -> ProviderRequest:
        extra = tuple(to_messages(next_input))
        snap = self.loop.snapshot() if self.loop is not None else None
        self.assembled.append(Assembled(turn, tuple(self.history), extra, snap))
        options = ProviderRequestOptions(structured_output=self.schema) if self.schema else None
        return ProviderRequest(
            model=MODEL, messages=(*self.history, *extra), tools=self.tools, options=options
        )

    async def generate(self, request: ProviderRequest) -> ProviderTurnResult:
        self.requests.append(request)
        if not self.responses:
            raise AssertionError("provider script exhausted")
        response = self.responses.pop(0)
        return response(self) if callable(response) else response

    async def dispatch_tool_call(self, call: ToolCallContent) -> ToolResult:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        self.in_flight -= 1
        self.dispatched.append(call.id)
        return ToolResult(tool_call_id=call.id, name=call.name, value={"found": call.id})

    async def append_message(self, message: Message) -> None:
        self.stored.append(message)

    def emit(self, event: Any) -> None:
        self.events.append(event)

    # convenience views ----------------------------------------------------------

    @property
    def as_ctx(self) -> LoopContext:
        return cast(LoopContext, self)

    def summary(self) -> list[str]:
        out = []
        for e in self.events:
            if e.type.startswith("artifact_"):
                out.append(f"{e.type}({e.turn},{e.attempt})")
            elif e.type in ("turn_started", "turn_finished"):
                out.append(f"{e.type}({e.turn})")
            else:
                out.append(e.type)
        return out

    def artifact_events(self) -> list[Any]:
        return [e for e in self.events if e.type.startswith("artifact_")]


@dataclass
class SteeringContext(StubContext):
    """A context with the optional members: steer hooks, round charging, exclusivity."""

    steer_script: list[bool] = field(default_factory=list)
    steer_calls: int = 0
    charged: list[tuple[str, ...]] = field(default_factory=list)
    exclusive: bool = False

    def has_pending_steers(self) -> bool:
        return bool(self.steer_script and self.steer_script[0])

    async def apply_pending_steers(self) -> bool:
        self.steer_calls += 1
        drained = self.steer_script.pop(0) if self.steer_script else False
        if drained:
            steer = user_message("also mention the date")
            self.history.append(steer)
            await self.append_message(steer)
        return drained

    async def charge_tool_round(self, calls: Sequence[ToolCallContent]) -> None:
        self.charged.append(tuple(c.id for c in calls))

    def is_tool_call_exclusive(self, call: ToolCallContent) -> bool:
        return self.exclusive


def always(ok: bool, message: str = "missing field", reason: str | None = None) -> Any:
    def validator(value: Any, ctx: ArtifactContext) -> ArtifactValidation:
        if ok:
            return ArtifactValidation(ok=True)
        return ArtifactValidation(
            ok=False,
            errors=(ArtifactError(message, path="/title"),),
            metadata={"reason": reason} if reason else None,
        )

    return validator


def accepts(good: str) -> Any:
    def validator(value: Any, ctx: ArtifactContext) -> ArtifactValidation:
        if value == good:
            return ArtifactValidation(ok=True)
        return ArtifactValidation(ok=False, errors=(ArtifactError(f"not {good}"),))

    return validator


def roles(messages: Sequence[Message]) -> list[str]:
    return [m.role for m in messages]


def texts(messages: Sequence[Message]) -> list[str]:
    return [m.text for m in messages]


# EVT-14: a leg's artifact events, one letter each
_LETTERS = {
    "artifact_validation_started": "S",
    "artifact_validation_finished": "V",
    "artifact_revision_started": "R",
    "artifact_finished": "F",
    "artifact_failed": "X",
}
_EVT14 = re.compile(r"(SVR)*(SV[FX]|X)")


def assert_evt14(ctx: StubContext) -> None:
    word = "".join(_LETTERS[e.type] for e in ctx.artifact_events())
    assert _EVT14.fullmatch(word), word


# ----------------------------------------------------------------------------- GVR-1, GVR-2


def test_gvr2_strategy_identity_and_protocols() -> None:
    loop = generate_validate_revise_loop(validator=always(True))
    assert loop.name == "generate-validate-revise"
    assert loop.revision == "1"
    assert isinstance(loop, AgentLoopStrategy)
    assert isinstance(loop, DurableLoopStrategy)
    assert loop.structured_output is None
    assert loop.max_revisions == 3 and loop.tool_calls == "disabled"


def test_gvr2_structured_output_attribute_follows_mode() -> None:
    native = generate_validate_revise_loop(validator=always(True), structured_output=SCHEMA)
    assert native.structured_output == SCHEMA
    mapped = generate_validate_revise_loop(
        validator=always(True), structured_output={"name": "doc", "schema": {"type": "object"}}
    )
    assert mapped.structured_output == SCHEMA
    loop_only = generate_validate_revise_loop(
        validator=always(True), structured_output=SCHEMA, structured_output_mode="artifact-loop"
    )
    assert loop_only.structured_output is None


def test_gvr2_final_turn_only_needs_bounded_tools() -> None:
    assert not generate_validate_revise_loop(
        validator=always(True), structured_output_timing="final-turn-only"
    ).final_turn_only
    assert generate_validate_revise_loop(
        validator=always(True), structured_output_timing="final-turn-only", tool_calls="bounded"
    ).final_turn_only


def test_gvr2_structured_output_attribute_is_read_only() -> None:
    loop = generate_validate_revise_loop(validator=always(True))
    with pytest.raises(AttributeError):
        loop.structured_output = SCHEMA  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"validator": 3},
        {"validator": always(True), "parser": "x"},
        {"validator": always(True), "repairer": 1},
        {"validator": always(True), "max_revisions": -1},
        {"validator": always(True), "max_revisions": False},
        {"validator": always(True), "tool_calls": "unbounded"},
        {"validator": always(True), "structured_output_mode": "strict"},
        {"validator": always(True), "structured_output_timing": "last"},
        {"validator": always(True), "structured_output": {"name": "doc", "bogus": 1}},
    ],
)
def test_gvr1_factory_validates_at_call_time(kwargs: dict[str, Any]) -> None:
    with pytest.raises(PrismConfigError):
        generate_validate_revise_loop(**kwargs)


def test_gvr1_structured_output_must_pass_so1() -> None:
    from prism.errors import StructuredOutputError

    with pytest.raises(StructuredOutputError):
        generate_validate_revise_loop(
            validator=always(True), structured_output=StructuredOutputOptions(name=" ", schema={})
        )


# ----------------------------------------------------------------------------- GVR-4 happy path


async def test_gvr4_accepts_first_candidate() -> None:
    """GVR-4 steps 1-19, EVT-9, EVT-14: one turn, one attempt, artifact set."""
    usage = Usage(input_tokens=3, output_tokens=4)
    ctx = StubContext([text("release note", usage=usage, message_id="m1")])
    loop = generate_validate_revise_loop(validator=always(True))

    returned = await loop.run(ctx.as_ctx)

    assert returned == usage
    assert ctx.summary() == [
        "turn_started(1)",
        "message_finished",
        "turn_finished(1)",
        "artifact_validation_started(1,1)",
        "artifact_validation_finished(1,1)",
        "artifact_finished(1,1)",
    ]
    assert len(ctx.requests) == 1
    assert ctx.artifact == "release note"
    assert roles(ctx.history) == ["user", "assistant"]
    assert roles(ctx.stored) == ["assistant"]
    draft = ctx.stored[0]
    assert draft.id == "m1" and draft.text == "release note"
    assert ctx.events[1].message is draft
    assert ctx.events[-1].result == ArtifactValidation(ok=True)
    assert ctx.finish_reason is None


async def test_gvr4_events_carry_run_ids() -> None:
    ctx = StubContext([text("x")])
    await generate_validate_revise_loop(validator=always(True)).run(ctx.as_ctx)
    assert {(e.session_id, e.run_id) for e in ctx.events} == {("session_a", "run_a")}


@dataclass
class WatchedContext(StubContext):
    """A context whose ``observed()`` says whether anything watches its events."""

    watching: list[bool] = field(default_factory=list)

    def observed(self) -> bool:
        return self.watching.pop(0) if self.watching else False


async def test_gvr4_unobserved_progress_events_are_left_out_but_the_verdict_is_not() -> None:
    ctx = WatchedContext([text("bad"), text("good")])
    await generate_validate_revise_loop(validator=accepts("good")).run(ctx.as_ctx)
    assert ctx.summary() == [
        "message_finished",
        "turn_finished(1)",
        "message_finished",
        "turn_finished(2)",
        "artifact_finished(2,2)",
    ]
    assert ctx.artifact == "good"
    assert texts(ctx.stored) == ["bad", "not good", "good"]


async def test_gvr4_progress_events_follow_observed_at_each_emission() -> None:
    # watched for the first turn's start and validation start, then for its revision
    watching = [True, True, False, True, False]
    ctx = WatchedContext([text("bad"), text("good")], watching=watching)
    await generate_validate_revise_loop(validator=accepts("good")).run(ctx.as_ctx)
    assert [f"{e.type}({e.turn},{e.attempt})" for e in ctx.artifact_events()] == [
        "artifact_validation_started(1,1)",
        "artifact_revision_started(1,1)",
        "artifact_finished(2,2)",
    ]
    assert ctx.artifact_events()[1].failure.errors == (ArtifactError("not good"),)
    assert [e.turn for e in ctx.events if e.type == "turn_started"] == [1]


async def test_gvr4_turn1_input_enters_history_once_after_generate() -> None:
    """GVR-4 step 7: the input is pushed to live history after the first generate, once."""
    ctx = StubContext([text("bad"), text("good")])
    await generate_validate_revise_loop(validator=accepts("good")).run(ctx.as_ctx)
    first, second = ctx.assembled
    assert first.history == () and texts(first.next_input) == ["Produce the doc."]
    assert texts(second.history) == ["Produce the doc.", "bad"]
    assert texts(ctx.history).count("Produce the doc.") == 1


# ----------------------------------------------------------------------------- revisions, GVR-6


async def test_gvr6_repair_is_sent_once_and_pushed_after_generate() -> None:
    ctx = StubContext([text("bad"), text("good")])
    await generate_validate_revise_loop(validator=accepts("good")).run(ctx.as_ctx)

    assert ctx.summary() == [
        "turn_started(1)",
        "message_finished",
        "turn_finished(1)",
        "artifact_validation_started(1,1)",
        "artifact_validation_finished(1,1)",
        "artifact_revision_started(1,1)",
        "turn_started(2)",
        "message_finished",
        "turn_finished(2)",
        "artifact_validation_started(2,2)",
        "artifact_validation_finished(2,2)",
        "artifact_finished(2,2)",
    ]
    assert len(ctx.requests) == 2
    # the store got the draft, the repair (at once) and the revised draft
    assert roles(ctx.stored) == ["assistant", "user", "assistant"]
    repair = ctx.stored[1]
    assert repair.text == "not good"
    assert re.fullmatch(r"msg_[0-9a-f]{32}", repair.id or "")
    # the revision request was assembled from history WITHOUT the repair, plus the repair as input
    second = ctx.assembled[1]
    assert repair not in second.history
    assert second.next_input == (repair,)
    # so the provider saw the original input once and the repair exactly once
    request_texts = texts(ctx.requests[1].messages)
    assert request_texts.count("Produce the doc.") == 1
    assert request_texts.count("not good") == 1
    assert request_texts == ["Produce the doc.", "bad", "not good"]
    # and live history has it once, after the draft it repairs
    assert texts(ctx.history) == ["Produce the doc.", "bad", "not good", "good"]
    assert ctx.artifact == "good"
    revision = ctx.events[5]
    assert revision.failure == ArtifactValidation(ok=False, errors=(ArtifactError("not good"),))


async def test_gvr6_repair_message_reaches_every_store_and_history_exactly_once() -> None:
    ctx = StubContext([text("a"), text("b"), text("c"), text("good")])
    await generate_validate_revise_loop(validator=accepts("good")).run(ctx.as_ctx)
    assert roles(ctx.stored) == ["assistant", "user"] * 3 + ["assistant"]
    for repair in ctx.stored[1::2]:
        assert ctx.history.count(repair) == 1
        sent = sum(m is repair for r in ctx.requests for m in r.messages)
        # sent as next_input of the next request, then part of history for the later ones
        later = len(ctx.requests) - 1 - [i for i, r in enumerate(ctx.requests) if repair in r.messages][0]
        assert sent == later + 1
    assert len({m.id for m in ctx.stored[1::2]}) == 3


async def test_gvr4_default_repairer_joins_error_messages() -> None:
    """GVR-5: one user message, one line per error, its field path first (issue 21, item 18)."""

    def validator(value: Any, ctx: ArtifactContext) -> Any:
        if value == "ok":
            return {"ok": True}
        return {"ok": False, "errors": [{"message": "first"}, {"message": "second", "path": "/a"}]}

    ctx = StubContext([text("no"), text("ok")])
    await generate_validate_revise_loop(validator=validator).run(ctx.as_ctx)
    assert ctx.stored[1].role == "user"
    assert ctx.stored[1].text == "first\na: second"


async def test_gvr5_default_repairer_without_errors_says_invalid_artifact() -> None:
    ctx = StubContext([text("no"), text("ok")])
    await generate_validate_revise_loop(
        validator=lambda v, c: {"ok": v == "ok"}
    ).run(ctx.as_ctx)
    assert ctx.stored[1].text == "invalid artifact"


async def test_gvr4_custom_repairer_messages_get_fresh_ids() -> None:
    seen: list[tuple[Any, ArtifactValidation, int]] = []

    async def repairer(value: Any, failure: ArtifactValidation, ctx: ArtifactContext) -> Any:
        seen.append((value, failure, ctx.turn))
        return [user_message("fix it", id="host-id"), user_message("please")]

    ctx = StubContext([text("bad"), text("good")])
    await generate_validate_revise_loop(validator=accepts("good"), repairer=repairer).run(
        ctx.as_ctx
    )
    assert seen == [("bad", ArtifactValidation(ok=False, errors=(ArtifactError("not good"),)), 1)]
    repairs = ctx.stored[1:3]
    assert texts(repairs) == ["fix it", "please"]
    assert all(re.fullmatch(r"msg_[0-9a-f]{32}", m.id or "") for m in repairs)
    assert repairs[0].id != repairs[1].id
    assert ctx.assembled[1].next_input == tuple(repairs)
    assert texts(ctx.history) == ["Produce the doc.", "bad", "fix it", "please", "good"]



async def test_gvr4_repairer_text_sync_or_async_is_one_user_message_with_a_fresh_id() -> None:
    """GVR-4 step 22: a repairer's ``str`` (returned or awaited) is one user message with a
    fresh ``msg_…`` id and no metadata, stored once and sent as the next input."""

    def sync_repairer(value: Any, failure: ArtifactValidation, ctx: ArtifactContext) -> str:
        return f"fix {value}"

    async def async_repairer(value: Any, failure: ArtifactValidation, ctx: ArtifactContext) -> str:
        return f"fix {value}"

    for repairer in (sync_repairer, async_repairer):
        ctx = StubContext([text("bad"), text("worse"), text("good")])
        await generate_validate_revise_loop(validator=accepts("good"), repairer=repairer).run(
            ctx.as_ctx
        )
        repairs = [ctx.stored[1], ctx.stored[3]]
        assert [(m.role, m.text, m.metadata) for m in repairs] == [
            ("user", "fix bad", None),
            ("user", "fix worse", None),
        ]
        assert all(re.fullmatch(r"msg_[0-9a-f]{32}", m.id or "") for m in repairs)
        assert repairs[0].id != repairs[1].id
        assert ctx.assembled[1].next_input == (repairs[0],)
        assert texts(ctx.history) == ["Produce the doc.", "bad", "fix bad", "worse", "fix worse", "good"]


# ----------------------------------------------------------------------------- budgets, GVR-7/8


async def test_gvr8_exhaustion_emits_artifact_failed_and_returns() -> None:
    ctx = StubContext([text("a", usage=Usage(output_tokens=1)), text("b")])
    loop = generate_validate_revise_loop(validator=always(False, reason="schema"), max_revisions=1)

    returned = await loop.run(ctx.as_ctx)  # no exception (GVR-8)

    assert returned == Usage(output_tokens=1)  # last non-None usage
    assert len(ctx.requests) == 2
    assert ctx.summary()[-3:] == [
        "artifact_validation_started(2,2)",
        "artifact_validation_finished(2,2)",
        "artifact_failed(2,2)",
    ]
    failed = ctx.events[-1]
    assert failed.result.metadata == {"reason": "schema"}
    assert ctx.artifact is None
    # EVT-17: no error event from the loop, ever
    assert all(e.type != "error" for e in ctx.events)
    # the final draft is stored but no repair follows it
    assert roles(ctx.stored) == ["assistant", "user", "assistant"]
    assert_evt14(ctx)


async def test_gvr7_zero_revisions_means_one_candidate() -> None:
    ctx = StubContext([text("a")])
    await generate_validate_revise_loop(validator=always(False), max_revisions=0).run(ctx.as_ctx)
    assert len(ctx.requests) == 1
    assert [e.type for e in ctx.artifact_events()] == [
        "artifact_validation_started",
        "artifact_validation_finished",
        "artifact_failed",
    ]


@pytest.mark.parametrize("max_revisions", [0, 1, 3, 5])
async def test_gvr7_at_most_one_plus_max_revisions_turns(max_revisions: int) -> None:
    ctx = StubContext([text(f"d{i}") for i in range(max_revisions + 5)])
    await generate_validate_revise_loop(validator=always(False), max_revisions=max_revisions).run(
        ctx.as_ctx
    )
    assert len(ctx.requests) == 1 + max_revisions
    attempts = [e.attempt for e in ctx.events if e.type == "artifact_validation_started"]
    assert attempts == list(range(1, max_revisions + 2))
    assert_evt14(ctx)


# ----------------------------------------------------------------------------- parsing, GVR-4 15-16


@pytest.mark.parametrize(
    "draft",
    [
        text(""),
        text("   \n\t"),
        ProviderTurnResult(content=(ThinkingContent("let me think"),), started=True),
        ProviderTurnResult(started=False),
    ],
    ids=["empty", "whitespace", "thinking-only", "not-started"],
)
async def test_gvr4_empty_text_is_a_parse_error_without_calling_the_parser(
    draft: ProviderTurnResult,
) -> None:
    parser_calls: list[str] = []
    repair_values: list[Any] = []

    def parser(text_: str, ctx: ArtifactContext) -> ArtifactParseResult[str]:
        parser_calls.append(text_)
        return ArtifactParseResult(ok=True, value=text_)

    def repairer(value: Any, failure: ArtifactValidation, ctx: ArtifactContext) -> str:
        repair_values.append(value)
        return "\n".join(e.message for e in failure.errors)

    validator_calls: list[Any] = []

    def validator(value: Any, ctx: ArtifactContext) -> ArtifactValidation:
        validator_calls.append(value)
        return ArtifactValidation(ok=True)

    ctx = StubContext([draft, text("fine")])
    await generate_validate_revise_loop(validator=validator, parser=parser, repairer=repairer).run(
        ctx.as_ctx
    )
    assert parser_calls == ["fine"]
    assert validator_calls == ["fine"]
    assert repair_values == [None]
    failure = ctx.events[[e.type for e in ctx.events].index("artifact_validation_finished")].result
    assert failure == ArtifactValidation(
        ok=False,
        errors=(ArtifactError("no artifact text in model output", path=None),),
        metadata={"reason": "parse_error"},
    )
    assert ctx.artifact == "fine"


async def test_gvr5_empty_draft_with_default_repairer_feeds_back_parse_error() -> None:
    ctx = StubContext([text(""), text("ok")])
    await generate_validate_revise_loop(validator=always(True)).run(ctx.as_ctx)
    repair = [m for m in ctx.stored if m.role == "user"]
    assert texts(repair) == ["no artifact text in model output"]


async def test_gvr4_thinking_only_exhaustion_fails_with_parse_error() -> None:
    thinking = ProviderTurnResult(content=(ThinkingContent("hmm"),), started=True)
    ctx = StubContext([thinking, thinking])
    await generate_validate_revise_loop(validator=always(True), max_revisions=1).run(ctx.as_ctx)
    last = ctx.events[-1]
    assert last.type == "artifact_failed"
    assert last.result.metadata == {"reason": "parse_error"}
    assert last.result.errors[0].message == "no artifact text in model output"


@pytest.mark.parametrize(
    ("parsed", "message"),
    [
        (ArtifactParseResult(ok=False, error="bad json at 1"), "bad json at 1"),
        (ArtifactParseResult(ok=False), "artifact parse failed"),
        ({"ok": True, "value": None}, "artifact parse failed"),
        ({"ok": False, "error": "nope"}, "nope"),
    ],
)
async def test_gvr4_parse_failure_consumes_budget(parsed: Any, message: str) -> None:
    validator_calls: list[Any] = []

    def validator(value: Any, ctx: ArtifactContext) -> ArtifactValidation:
        validator_calls.append(value)
        return ArtifactValidation(ok=True)

    ctx = StubContext([text("{not json")])
    await generate_validate_revise_loop(
        validator=validator, parser=lambda t, c: parsed, max_revisions=0
    ).run(ctx.as_ctx)
    assert validator_calls == []  # a parse failure never reaches the validator
    failed = ctx.events[-1]
    assert failed.type == "artifact_failed"
    assert failed.result == ArtifactValidation(
        ok=False, errors=(ArtifactError(message),), metadata={"reason": "parse_error"}
    )


async def test_gvr4_async_parser_validator_and_context() -> None:
    contexts: list[ArtifactContext] = []

    async def parser(text_: str, ctx: ArtifactContext) -> dict[str, Any]:
        contexts.append(ctx)
        return {"ok": True, "value": {"n": len(text_)}}

    async def validator(value: Any, ctx: ArtifactContext) -> dict[str, Any]:
        contexts.append(ctx)
        return {"ok": value == {"n": 2}, "errors": [] if value == {"n": 2} else [{"message": "len"}]}

    ctx = StubContext([text("abc"), text("ab")])
    await generate_validate_revise_loop(validator=validator, parser=parser).run(ctx.as_ctx)
    assert ctx.artifact == {"n": 2}
    assert [c.turn for c in contexts] == [1, 1, 2, 2]
    assert all(c.session_id == "session_a" and c.run_id == "run_a" for c in contexts)
    assert all(c.signal is ctx.signal and c.metadata["tenant"] == "t1" for c in contexts)


async def test_con25_host_value_passes_through_untouched() -> None:
    class Doc:  # a host type prism must never inspect or copy
        def __eq__(self, other: object) -> bool:
            raise AssertionError("prism compared the host value")

        __hash__ = None  # type: ignore[assignment]

    doc = Doc()
    ctx = StubContext([text("x")])
    await generate_validate_revise_loop(
        validator=lambda v, c: ArtifactValidation(ok=v is doc),
        parser=lambda t, c: ArtifactParseResult(ok=True, value=doc),
    ).run(ctx.as_ctx)
    assert ctx.artifact is doc


async def test_gvr4_validator_bad_return_type_raises() -> None:
    ctx = StubContext([text("x")])
    with pytest.raises(TypeError):
        await generate_validate_revise_loop(validator=cast(Any, lambda v, c: True)).run(ctx.as_ctx)


# ----------------------------------------------------------------------------- tools


async def test_gvr4_disabled_tools_answer_calls_and_still_judge_text() -> None:
    """GVR-4 step 11: host calls get not-dispatched rows; the text is still a candidate."""
    ctx = StubContext(
        [calls(call("c1"), call("h1", hosted=True), call("c2"), prefix="draft")],
        max_tool_rounds=5,
    )
    await generate_validate_revise_loop(validator=always(True)).run(ctx.as_ctx)
    assert ctx.dispatched == []
    assert roles(ctx.stored) == ["assistant", "tool", "tool"]
    rows = [m.content[0] for m in ctx.stored[1:]]
    assert all(isinstance(r, ToolResultContent) for r in rows)
    rows_ = cast(list[ToolResultContent], rows)
    assert [r.tool_call_id for r in rows_] == ["c1", "c2"]  # provider-hosted call unanswered
    assert {r.error.code for r in rows_ if r.error} == {"tool_call_not_dispatched"}
    assert {r.error.message for r in rows_ if r.error} == {
        "tool call not dispatched: tool calls are disabled for this loop"
    }
    assert ctx.artifact == "draft"
    assert not any(e.type.startswith("tool_execution") for e in ctx.events)


async def test_gvr4_disabled_tools_call_only_draft_is_a_parse_error() -> None:
    ctx = StubContext([calls(call("c1")), text("ok")])
    await generate_validate_revise_loop(validator=always(True)).run(ctx.as_ctx)
    assert roles(ctx.stored) == ["assistant", "tool", "user", "assistant"]
    assert ctx.stored[2].text == "no artifact text in model output"


async def test_gvr4_bounded_tools_dispatch_sequentially_then_validate() -> None:
    """GVR-4 step 10, EVT-4, EVT-14: tool turns emit no artifact events; attempt counts
    call-free candidates only; dispatch is sequential even with tool_concurrency 4."""
    ctx = SteeringContext(
        [calls(call("c1"), call("c2")), text("good")],
        max_tool_rounds=3,
        tool_concurrency=4,
    )
    await generate_validate_revise_loop(validator=always(True), tool_calls="bounded").run(
        ctx.as_ctx
    )
    assert ctx.dispatched == ["c1", "c2"]
    assert ctx.max_in_flight == 1
    assert ctx.charged == [("c1", "c2")]
    assert ctx.summary() == [
        "turn_started(1)",
        "message_finished",
        "turn_finished(1)",
        "turn_started(2)",
        "message_finished",
        "turn_finished(2)",
        "artifact_validation_started(2,1)",
        "artifact_validation_finished(2,1)",
        "artifact_finished(2,1)",
    ]
    assert roles(ctx.stored) == ["assistant", "tool", "tool", "assistant"]
    # the continuation turn assembles with empty input from the shared history
    assert ctx.assembled[1].next_input == ()
    assert roles(ctx.assembled[1].history) == ["user", "assistant", "tool", "tool"]


async def test_gvr4_bounded_tools_without_optional_ctx_members() -> None:
    """CON-29: a stub without charge/exclusive/steer hooks works in bounded mode."""
    ctx = StubContext([calls(call("c1")), text("good")], max_tool_rounds=1)
    assert not hasattr(ctx, "charge_tool_round")
    await generate_validate_revise_loop(validator=always(True), tool_calls="bounded").run(
        ctx.as_ctx
    )
    assert ctx.dispatched == ["c1"] and ctx.artifact == "good"


async def test_gvr4_tool_round_limit_fails_without_raising() -> None:
    ctx = StubContext(
        [calls(call("c1")), calls(call("c2"), call("c3")), text("never")], max_tool_rounds=1
    )
    returned = await generate_validate_revise_loop(
        validator=always(True), tool_calls="bounded"
    ).run(ctx.as_ctx)
    assert returned is None
    assert len(ctx.requests) == 2
    assert ctx.dispatched == ["c1"]
    assert ctx.finish_reason == "tool_round_limit"
    assert ctx.summary()[-2:] == ["turn_finished(2)", "artifact_failed(2,1)"]
    failed = ctx.events[-1]
    assert failed.result == ArtifactValidation(
        ok=False,
        errors=(ArtifactError("maximum tool rounds exceeded"),),
        metadata={"reason": "tool_round_limit"},
    )
    unanswered = [m.content[0] for m in ctx.stored[-2:]]
    assert [cast(ToolResultContent, r).tool_call_id for r in unanswered] == ["c2", "c3"]
    assert {
        cast(ToolResultContent, r).error.message  # type: ignore[union-attr]
        for r in unanswered
    } == {"tool call not dispatched: tool round limit reached"}
    assert_evt14(ctx)


async def test_gvr4_zero_tool_rounds_fails_on_first_call() -> None:
    ctx = StubContext([calls(call("c1"))], max_tool_rounds=0)
    await generate_validate_revise_loop(validator=always(True), tool_calls="bounded").run(
        ctx.as_ctx
    )
    assert ctx.dispatched == []
    assert [e.type for e in ctx.artifact_events()] == ["artifact_failed"]


async def test_gvr4_unlimited_tool_rounds() -> None:
    script: list[Response] = [calls(call(f"c{i}")) for i in range(6)]
    ctx = StubContext([*script, text("ok")], max_tool_rounds=float("inf"))
    await generate_validate_revise_loop(validator=always(True), tool_calls="bounded").run(
        ctx.as_ctx
    )
    assert len(ctx.dispatched) == 6 and ctx.artifact == "ok"


async def test_gvr4_provider_hosted_only_calls_continue_without_budget() -> None:
    ctx = StubContext([calls(call("h1", hosted=True)), text("ok")], max_tool_rounds=0)
    await generate_validate_revise_loop(validator=always(True), tool_calls="bounded").run(
        ctx.as_ctx
    )
    assert ctx.dispatched == []
    assert roles(ctx.stored) == ["assistant", "assistant"]
    assert [e.attempt for e in ctx.artifact_events()] == [1, 1, 1]
    assert ctx.artifact == "ok"


async def test_gvr7_bounded_turn_ceiling_is_one_plus_revisions_plus_rounds() -> None:
    script: list[Response] = [calls(call("c1")), text("bad1"), calls(call("c2")), text("bad2")]
    script += [text("bad3"), text("never")]
    ctx = StubContext(script, max_tool_rounds=2)
    await generate_validate_revise_loop(
        validator=always(False), tool_calls="bounded", max_revisions=2
    ).run(ctx.as_ctx)
    assert len(ctx.requests) == 1 + 2 + 2
    assert [e.attempt for e in ctx.events if e.type == "artifact_validation_started"] == [1, 2, 3]
    assert ctx.events[-1].type == "artifact_failed"
    assert_evt14(ctx)


# ----------------------------------------------------------------------------- steers


async def test_gvr4_steers_drained_at_turn_start_and_continue_the_run() -> None:
    """GVR-4 steps 1 and 12: a drained steer continues with empty input and no artifact events."""
    # turn 1 start: nothing; after turn 1: drained -> continue; turn 2 start: nothing; after: no
    ctx = SteeringContext([text("first"), text("second")], steer_script=[False, True, False, False])
    await generate_validate_revise_loop(validator=always(True)).run(ctx.as_ctx)
    assert len(ctx.requests) == 2
    assert ctx.steer_calls == 4
    assert ctx.summary() == [
        "turn_started(1)",
        "message_finished",
        "turn_finished(1)",
        "turn_started(2)",
        "message_finished",
        "turn_finished(2)",
        "artifact_validation_started(2,1)",
        "artifact_validation_finished(2,1)",
        "artifact_finished(2,1)",
    ]
    assert ctx.assembled[1].next_input == ()
    assert ctx.artifact == "second"


# ----------------------------------------------------------------------------- SO-7 timing


async def test_so7_final_turn_only_requests() -> None:
    """SO-7: with two tool rounds and responses (tool call, draft, bad, good), the requests are
    (no schema, tools), (no schema, tools), (schema, no tools), (schema, no tools)."""
    ctx = StubContext(
        [calls(call("c1")), text("draft"), text("bad"), text("good")],
        max_tool_rounds=2,
        schema=SCHEMA,
        tools=(LOOKUP,),
    )
    loop = generate_validate_revise_loop(
        validator=accepts("good"),
        tool_calls="bounded",
        structured_output_timing="final-turn-only",
    )
    assert loop.artifact_phase is False  # tools first, schema later
    await loop.run(ctx.as_ctx)

    def shape(r: ProviderRequest) -> tuple[bool, bool]:
        schema = r.options.structured_output if r.options else None
        return (schema is not None, bool(r.tools))

    assert [shape(r) for r in ctx.requests] == [
        (False, True),
        (False, True),
        (True, False),
        (True, False),
    ]
    assert all(
        r.options and r.options.structured_output == SCHEMA for r in ctx.requests[2:]
    )
    # the call-free "draft" only promoted the artifact phase: no artifact events for it
    assert [(e.type, e.turn, e.attempt) for e in ctx.artifact_events()][0] == (
        "artifact_validation_started",
        3,
        1,
    )
    assert ctx.artifact == "good"


async def test_so7_final_turn_only_switches_when_rounds_are_used_up() -> None:
    ctx = StubContext(
        [calls(call("c1")), text("good")], max_tool_rounds=1, schema=SCHEMA, tools=(LOOKUP,)
    )
    await generate_validate_revise_loop(
        validator=always(True), tool_calls="bounded", structured_output_timing="final-turn-only"
    ).run(ctx.as_ctx)
    schemas = [r.options.structured_output if r.options else None for r in ctx.requests]
    assert schemas == [None, SCHEMA]
    assert [bool(r.tools) for r in ctx.requests] == [True, False]
    assert ctx.artifact == "good"


async def test_so7_every_turn_sends_request_unchanged() -> None:
    ctx = StubContext(
        [calls(call("c1")), text("good")], max_tool_rounds=1, schema=SCHEMA, tools=(LOOKUP,)
    )
    loop = generate_validate_revise_loop(validator=always(True), tool_calls="bounded")
    await loop.run(ctx.as_ctx)
    assert all(r.options and r.options.structured_output == SCHEMA for r in ctx.requests)
    assert all(r.tools == (LOOKUP,) for r in ctx.requests)
    assert loop.saved_schema == SCHEMA  # GVR-4 step 3


# ----------------------------------------------------------------------------- abort


async def test_gvr4_aborted_before_start_raises_without_turn() -> None:
    controller = AbortController()
    controller.abort()
    ctx = StubContext([text("x")], signal=controller.signal)
    with pytest.raises(AbortError):
        await generate_validate_revise_loop(validator=always(True)).run(ctx.as_ctx)
    assert ctx.requests == [] and ctx.events == []


async def test_gvr4_abort_during_turn_stops_at_next_turn_start() -> None:
    controller = AbortController()

    def abort_then_bad(c: StubContext) -> ProviderTurnResult:
        controller.abort("stop")
        return text("bad")

    ctx = StubContext([abort_then_bad, text("good")], signal=controller.signal)
    with pytest.raises(AbortError):
        await generate_validate_revise_loop(validator=accepts("good")).run(ctx.as_ctx)
    assert len(ctx.requests) == 1
    assert ctx.summary()[-1] == "artifact_revision_started(1,1)"


# ----------------------------------------------------------------------------- GVR-3 scoping


async def test_gvr3_reused_strategy_resets_for_a_new_run() -> None:
    loop = generate_validate_revise_loop(validator=accepts("good"), max_revisions=1)
    first = StubContext([text("bad"), text("good")], run_id="run_1")
    await loop.run(first.as_ctx)
    assert loop.attempts == 2
    second = StubContext([text("bad"), text("good")], run_id="run_2")
    await loop.run(second.as_ctx)
    assert [e.attempt for e in second.artifact_events()] == [1, 1, 1, 2, 2, 2]
    assert second.artifact == "good"


async def test_gvr3_same_scope_without_restore_keeps_state() -> None:
    loop = generate_validate_revise_loop(validator=always(False), max_revisions=2)
    await loop.run(StubContext([text("a"), text("b"), text("c")]).as_ctx)
    again = StubContext([text("d")])
    await loop.run(again.as_ctx)  # attempts stay at 3 > max_revisions: nothing to do
    assert again.requests == [] and again.events == []


async def test_gvr3_restored_state_is_kept_for_one_run() -> None:
    loop = generate_validate_revise_loop(validator=always(False), max_revisions=1)
    loop.restore({"attempts": 1, "artifact_phase": True, "saved_schema": None, "pending_history": []})
    ctx = StubContext([text("bad")], run_id="run_resumed")
    await loop.run(ctx.as_ctx)
    assert len(ctx.requests) == 1
    assert [e.type for e in ctx.artifact_events()][-1] == "artifact_failed"
    assert ctx.events[-1].attempt == 2
    # the restored flag is consumed: a later different run resets
    fresh = StubContext([text("bad"), text("bad")], run_id="run_next")
    await loop.run(fresh.as_ctx)
    assert [e.attempt for e in fresh.artifact_events()] == [1, 1, 1, 2, 2, 2]


async def test_gvr4_restored_beyond_budget_returns_without_terminal_event() -> None:
    loop = generate_validate_revise_loop(validator=always(True), max_revisions=3)
    loop.restore({"attempts": 4, "artifact_phase": True, "saved_schema": None})
    ctx = StubContext([text("x")])
    assert await loop.run(ctx.as_ctx) is None
    assert ctx.requests == [] and ctx.events == []


# ----------------------------------------------------------------------------- GVR-9 snapshot


async def test_gvr9_snapshot_during_revision_carries_pending_repair() -> None:
    loop = generate_validate_revise_loop(validator=accepts("good"))
    ctx = StubContext([text("bad"), text("good")], schema=SCHEMA, loop=loop)
    await loop.run(ctx.as_ctx)
    first, second = (a.snapshot for a in ctx.assembled)
    assert first == {
        "attempts": 0,
        "artifact_phase": True,
        "saved_schema": None,
        "pending_history": [],
    }
    repair = ctx.stored[1]
    assert second == {
        "attempts": 1,
        "artifact_phase": True,
        "saved_schema": SCHEMA.to_dict(),
        "pending_history": [repair.to_dict()],
    }
    assert is_json_value(second)
    assert loop.snapshot()["pending_history"] == []  # type: ignore[index, call-overload]


def test_gvr9_restore_round_trip_and_clears_pending_history() -> None:
    loop = generate_validate_revise_loop(validator=always(True))
    loop.restore(
        {
            "attempts": 2,
            "artifact_phase": False,
            "saved_schema": SCHEMA.to_dict(),
            "pending_history": [user_message("fix").to_dict()],
        }
    )
    assert (loop.attempts, loop.artifact_phase, loop.saved_schema) == (2, False, SCHEMA)
    assert loop.pending_history == ()
    assert loop.snapshot() == {
        "attempts": 2,
        "artifact_phase": False,
        "saved_schema": SCHEMA.to_dict(),
        "pending_history": [],
    }


@pytest.mark.parametrize(
    "snapshot",
    [
        None,
        [],
        "x",
        {},
        {"attempts": True, "artifact_phase": True},
        {"attempts": -1, "artifact_phase": True},
        {"attempts": 1.0, "artifact_phase": True},
        {"attempts": 1, "artifact_phase": "yes"},
        {"attempts": 1},
        {"attempts": 1, "artifact_phase": True, "saved_schema": "doc"},
        {"attempts": 1, "artifact_phase": True, "saved_schema": {"name": "", "schema": {}}},
    ],
)
def test_gvr9_restore_rejects_drift(snapshot: Any) -> None:
    loop = generate_validate_revise_loop(validator=always(True))
    with pytest.raises(AgentLoopStateError) as info:
        loop.restore(snapshot)
    assert info.value.code == "ERR_PRISM_LOOP_SNAPSHOT"
    assert loop.attempts == 0  # state untouched
