"""Provider input assembly: order of messages, context providers, skills, hooks (RUN-2, RUN-13)."""

from __future__ import annotations

from typing import Any

import pytest

from prism.abort import AbortController
from prism.assembly import (
    ContextProviderContext,
    RequestAssembler,
    Skill,
    SystemPromptContribution,
    assemble_provider_input,
    compose_system_prompt,
    context_block_message,
    select_skills,
)
from prism.errors import PrismConfigError
from prism.types import (
    ContextBlock,
    Message,
    ModelConfig,
    ProviderRequestOptions,
    TextContent,
    ToolDefinition,
    ToolResult,
    ToolResultContent,
    assistant_message,
    user_message,
)

MODEL = ModelConfig(provider="mock", model="m")


def text(message: Message) -> str:
    part = message.content[0]
    assert isinstance(part, TextContent)
    return part.text


class Provider:
    def __init__(self, name: str, blocks: Any) -> None:
        self.name = name
        self.blocks = blocks
        self.seen: list[ContextProviderContext] = []

    def resolve(self, ctx: ContextProviderContext) -> Any:
        self.seen.append(ctx)
        return self.blocks


class AsyncProvider(Provider):
    async def resolve(self, ctx: ContextProviderContext) -> Any:  # type: ignore[override]
        self.seen.append(ctx)
        return self.blocks


def test_compose_system_prompt_joins_non_empty_parts_run_13() -> None:
    parts = [SystemPromptContribution(id="a", text="A"), SystemPromptContribution(id="b", text="")]
    assert compose_system_prompt("Base", parts) == "Base\n\nA"
    assert compose_system_prompt(None, []) == ""
    assert compose_system_prompt("", [SystemPromptContribution(id="a", text="A")]) == "A"


def test_context_block_messages_use_the_title_or_context_run_13() -> None:
    assert text(context_block_message(ContextBlock(content="x", title="Docs"))) == "Docs:\nx"
    assert text(context_block_message(ContextBlock(content="y"))) == "Context:\ny"
    parts = ContextBlock(content=(TextContent("a"), TextContent("b")))
    assert text(context_block_message(parts)) == "Context:\nab"


async def test_messages_follow_the_fixed_order_a_to_g_run_13() -> None:
    history = [user_message("h1"), assistant_message("h2")]
    docs = Provider("docs", [ContextBlock(content="doc text", title="Docs"), "plain"])
    request = await assemble_provider_input(
        model=MODEL,
        history=history,
        next_input="new input",
        tool_results=[ToolResult(tool_call_id="c1", name="t", value=1)],
        instructions="Base.",
        system_prompt=[SystemPromptContribution(id="x", text="Extra.")],
        context=[docs],
        skills=[Skill(name="math", instructions="Add."), Skill(name="quiet")],
        summaries=["earlier stuff"],
    )
    roles = [m.role for m in request.messages]
    assert roles == ["system", "system", "system", "system", "system", "user", "assistant", "tool", "user"]
    assert [text(m) for m in request.messages[:5]] == [
        "Base.\n\nExtra.",
        "Docs:\ndoc text",
        "Context:\nplain",
        "Skill math:\nAdd.",
        "Summary:\nearlier stuff",
    ]
    assert request.messages[5] is history[0] and request.messages[6] is history[1]
    result = request.messages[7].content[0]
    assert isinstance(result, ToolResultContent) and result.tool_call_id == "c1"
    assert text(request.messages[8]) == "new input"
    assert request.context == (ContextBlock(content="doc text", title="Docs"), ContextBlock(content="plain"))


async def test_empty_parts_are_omitted_run_13() -> None:
    request = await assemble_provider_input(model=MODEL, next_input="x")
    assert [m.role for m in request.messages] == ["user"]
    assert request.tools is None and request.context == ()


async def test_context_providers_receive_messages_e_to_g_and_the_turn_run_2_run_13() -> None:
    controller = AbortController()
    docs = AsyncProvider("docs", [])
    history = [user_message("h")]
    await assemble_provider_input(
        model=MODEL,
        history=history,
        next_input=[user_message("n")],
        tool_results=[ToolResult(tool_call_id="c", name="t")],
        context=[docs],
        session_id="s",
        run_id="r",
        turn=3,
        metadata={"k": 1},
        signal=controller.signal,
    )
    ctx = docs.seen[0]
    assert (ctx.session_id, ctx.run_id, ctx.turn) == ("s", "r", 3)
    assert [m.role for m in ctx.messages] == ["user", "tool", "user"]
    assert ctx.signal is controller.signal and dict(ctx.metadata) == {"k": 1}


async def test_a_provider_returning_garbage_fails_run_2() -> None:
    with pytest.raises(TypeError):
        await assemble_provider_input(model=MODEL, context=[Provider("bad", [42])])


async def test_the_input_assembly_hook_may_replace_the_messages_run_13() -> None:
    async def hook(messages: tuple[Message, ...]) -> tuple[Message, ...]:
        return messages[-1:]

    assembler = RequestAssembler(model=MODEL, instructions="Base.", input_assembly=hook)
    request = await assembler.assemble([user_message("a")], "b")
    assert [text(m) for m in request.messages] == ["b"]
    assert assembler.last_layout is None


async def test_the_assembler_reuses_its_prefix_and_reports_the_layout_arch_15() -> None:
    tools = (ToolDefinition(name="t", execute=lambda a, c: None),)
    options = ProviderRequestOptions(session_id="s")
    assembler = RequestAssembler(model=MODEL, instructions="Base.", skills=[Skill(name="s", instructions="i")], tools=tools, options=options)
    history = [user_message("a")]
    first = await assembler.assemble(history, [])
    history.append(assistant_message("b"))
    second = await assembler.assemble(history, "c", turn=2)
    assert first.messages[0] is second.messages[0] and first.messages[1] is second.messages[1]
    layout = assembler.last_layout
    assert layout is not None and layout.messages is second.messages
    assert (layout.prefix_len, layout.history_len) == (2, 2)
    assert second.tools is tools and second.options is options


def test_select_skills_keeps_list_order_and_rejects_unknown_names_run_6() -> None:
    skills = [Skill(name="a"), Skill(name="b"), Skill(name="c")]
    assert [s.name for s in select_skills(skills, None)] == ["a", "b", "c"]
    assert [s.name for s in select_skills(skills, ["c", "a"])] == ["a", "c"]
    with pytest.raises(PrismConfigError, match="Unknown skill: z"):
        select_skills(skills, ["z"])
    with pytest.raises(PrismConfigError, match="Duplicate skill"):
        select_skills([Skill(name="a"), Skill(name="a")], None)


def test_skill_and_contribution_round_trip_con_3() -> None:
    contribution = SystemPromptContribution(id="x", text="y")
    assert SystemPromptContribution.from_dict(contribution.to_dict()) == contribution
    skill = Skill(name="s", instructions="i", description="d", metadata={"k": 1})
    assert Skill.from_dict(skill.to_dict()) == skill
    assert "context" not in skill.to_dict()


async def test_a_growing_history_extends_the_last_requests_messages_arch_15() -> None:
    """With a history version the assembler extends its last tuple while the history only grew;
    every request holds exactly what copying the whole history gives."""
    from prism.runtime.run._request_codec import LiveHistory

    assembler = RequestAssembler(model=MODEL, instructions="Base.")
    history = LiveHistory([user_message("a")])
    system = (await assembler.assemble(history, [])).messages[0]

    async def check(next_input: Any = ()) -> None:
        request = await assembler.assemble(history, next_input, history_version=history.mutations)
        tail = [user_message(next_input)] if isinstance(next_input, str) else []
        assert request.messages == (system, *history, *tail)
        layout = assembler.last_layout
        assert layout is not None and (layout.prefix_len, layout.history_len) == (1, len(history))

    await check()
    history.append(assistant_message("b"))
    history.extend([user_message("c"), assistant_message("d")])
    await check("e")
    await check()
    history[1] = assistant_message("B")  # not an append: copied whole
    await check()
    del history[2:]
    history.append(user_message("f"))
    await check()
    other = LiveHistory(history)  # another history with the same version
    other.mutations = history.mutations
    history, previous = other, history
    previous.append(user_message("not sent"))
    await check()
