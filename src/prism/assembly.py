"""Provider input assembly: system prompt, context providers, skills.

A request's messages are always, in this order:

a. one ``system`` message with the composed system prompt (agent ``instructions``, then each
   [`SystemPromptContribution`][prism.assembly.SystemPromptContribution]'s text, joined by ``"\\n\\n"``; omitted when empty);
b. one ``system`` message per resolved context block (``"<title>:\\n<text>"``, or
   ``"Context:\\n<text>"`` without a title);
c. one ``system`` message per active skill with instructions (``"Skill <name>:\\n<instructions>"``);
d. compaction summaries as ``system`` messages (``"Summary:\\n<summary>"``);
e. the live history;
f. tool-result messages built from loop-local tool results;
g. ``to_messages(next_input)``.

The stable prefix comes first so provider prompt caches can reuse it. [`RequestAssembler`][prism.assembly.RequestAssembler]
precomputes (a), (c) and (d) once per run, so assembling a turn only copies message references;
[`assemble_provider_input()`][prism.assembly.assemble_provider_input] is the one-shot form of the same primitive.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

from prism._serde import Serializable
from prism._util import maybe_await
from prism.abort import AbortSignal
from prism.errors import PrismConfigError
from prism.types import (
    AgentInput,
    ContextBlock,
    Message,
    ModelConfig,
    ProviderRequest,
    ProviderRequestOptions,
    TextContent,
    ToolDefinition,
    ToolResult,
    to_messages,
    tool_result_message,
)

__all__ = [
    "AssemblyLayout",
    "ContextProvider",
    "ContextProviderContext",
    "InputAssemblyHook",
    "RequestAssembler",
    "Skill",
    "SystemPromptContribution",
    "assemble_provider_input",
    "compose_system_prompt",
    "context_block_message",
    "select_skills",
]


@dataclass(frozen=True, slots=True)
class SystemPromptContribution(Serializable):
    """One named piece of the system prompt.

    Contributions are joined after the agent ``instructions`` with ``"\\n\\n"``; the
    composed text is the request's first ``system`` message.
    """

    id: str
    """Stable identifier (joins the durable fingerprint)."""

    text: str
    """The prompt text."""


@dataclass(frozen=True, slots=True)
class ContextProviderContext(Serializable):
    """What a [`ContextProvider`][prism.assembly.ContextProvider] receives on every assembly.

    ``signal`` is a host object and is left out of ``to_dict()``.
    """

    session_id: str
    """The session id."""

    run_id: str
    """The run id."""

    turn: int
    """1-based turn index of the request being assembled."""

    messages: tuple[Message, ...]
    """The non-system messages of the request being assembled: live history, tool-result
    messages, then the new input."""

    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Merged run metadata (read-only)."""

    signal: AbortSignal | None = field(default=None, metadata={"serialize": False})
    """The run's abort signal."""


@runtime_checkable
class ContextProvider(Protocol):
    """A source of context blocks, resolved on every assembly, in order.

    ``resolve`` may be sync or async and returns a sequence of
    [`ContextBlock`][prism.types.ContextBlock] (a plain ``str`` is accepted as an untitled block).
    """

    @property
    def name(self) -> str:
        """Provider name (diagnostics)."""
        ...

    def resolve(
        self, ctx: ContextProviderContext, /
    ) -> Sequence[ContextBlock | str] | Awaitable[Sequence[ContextBlock | str]]:
        """Return the context blocks for this request."""
        ...


@dataclass(frozen=True, slots=True)
class Skill(Serializable):
    """A named bundle of instructions and context providers.

    Active skills (all by default; ``run(active_skills=...)`` selects by name) add one
    ``system`` message ``"Skill <name>:\\n<instructions>"`` when they have instructions
    and their context providers after the agent's.
    """

    name: str
    """Unique skill name."""

    instructions: str | None = None
    """Instructions; ``None`` or empty adds no message."""

    description: str | None = None
    """Human description (not sent to the model)."""

    context: tuple[ContextProvider, ...] = field(default=(), metadata={"serialize": False})
    """Context providers contributed by the skill (resolved after the agent's)."""

    metadata: Mapping[str, Any] | None = None
    """Host metadata."""

    def __post_init__(self) -> None:
        if not isinstance(self.context, tuple):
            object.__setattr__(self, "context", tuple(self.context))


InputAssemblyHook = Callable[[tuple[Message, ...]], Awaitable[tuple[Message, ...]]]
"""``await hook(messages) -> messages``: the ``input_assembly`` middleware hook."""


def compose_system_prompt(
    instructions: str | None, contributions: Sequence[SystemPromptContribution] = ()
) -> str:
    """Compose the system prompt text: ``instructions``, then each contribution, joined by
    blank lines.

    Args:
        instructions: The agent's base instructions (``None``/empty skipped).
        contributions: Agent contributions then run contributions, in order.

    Returns:
        The non-empty parts joined by ``"\\n\\n"``; ``""`` when there are none.
    """
    parts = [instructions] if instructions else []
    parts.extend(c.text for c in contributions if c.text)
    return "\n\n".join(parts)


def context_block_message(block: ContextBlock) -> Message:
    """Return the ``system`` message for one context block.

    The text is ``"<title>:\\n<text>"``, or ``"Context:\\n<text>"`` without a title.
    """
    title = block.title if block.title else "Context"
    return Message("system", (TextContent(f"{title}:\n{block.text}"),))


def select_skills(skills: Sequence[Skill], active: Sequence[str] | None) -> tuple[Skill, ...]:
    """Select active skills by name.

    Args:
        skills: The effective skill list (run ``skills`` replaces the agent list).
        active: Names to keep, in the list's order; ``None`` keeps every skill.

    Returns:
        The active skills in list order.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` naming an unknown skill, or a duplicate skill name.
    """
    names: set[str] = set()
    for skill in skills:
        if skill.name in names:
            raise PrismConfigError(f"Duplicate skill: {skill.name}")
        names.add(skill.name)
    if active is None:
        return tuple(skills)
    if isinstance(active, str):
        active = (active,)
    unknown = [n for n in active if n not in names]
    if unknown:
        raise PrismConfigError(f"Unknown skill: {', '.join(unknown)}")
    wanted = set(active)
    return tuple(s for s in skills if s.name in wanted)


def _coerce_block(value: object) -> ContextBlock:
    if isinstance(value, ContextBlock):
        return value
    if isinstance(value, str):
        return ContextBlock(content=value)
    raise TypeError(f"context provider returned {type(value).__name__}, not a ContextBlock")


_NO_MESSAGES: tuple[Message, ...] = ()


_Joined = tuple[Sequence[Message], tuple[Message, ...], int, int, tuple[Message, ...]]
"""``(history, prefix, history_version, history count, prefix + history)`` of the last request."""


class AssemblyLayout(NamedTuple):
    """Where the live history sits inside an assembled message tuple.

    ``messages[prefix_len : prefix_len + history_len]`` are the first ``history_len`` messages
    of the live history, by reference; everything before is the system/context/skill/summary
    prefix and everything after is the tool-result and new-input tail.
    """

    messages: tuple[Message, ...]
    """The assembled message tuple."""
    prefix_len: int
    """Messages before the history."""
    history_len: int
    """History messages included."""


class RequestAssembler:
    """Builds provider requests for one run from precomputed parts.

    Construct once per run leg; [`assemble()`][prism.assembly.RequestAssembler.assemble] then costs one tuple concatenation of message
    references (given a history version, the last request's messages extended by the history's
    new ones) plus whatever the host's context providers and ``input_assembly`` hook do.

    Args:
        model: The effective model.
        instructions: Agent base instructions.
        system_prompt: Effective contributions (agent then run).
        context: Effective context providers (agent then active-skill providers).
        skills: Active skills.
        tools: Advertised tools (after filters), or ``None``.
        options: Resolved provider options.
        metadata: Run metadata (read-only mapping).
        signal: The run signal, set on every request.
        session_id: Session id, for context providers.
        run_id: Run id, for context providers.
        input_assembly: ``input_assembly`` middleware hook, or ``None`` when no handler exists.
    """

    __slots__ = (
        "_context",
        "_head",
        "_input_assembly",
        "_joined",
        "_metadata",
        "_model",
        "_options",
        "_run_id",
        "_session_id",
        "_signal",
        "_skill_messages",
        "_summaries",
        "_summary_messages",
        "_system",
        "_tools",
        "last_layout",
    )

    def __init__(
        self,
        *,
        model: ModelConfig,
        instructions: str | None = None,
        system_prompt: Sequence[SystemPromptContribution] = (),
        context: Sequence[ContextProvider] = (),
        skills: Sequence[Skill] = (),
        tools: tuple[ToolDefinition, ...] | None = None,
        options: ProviderRequestOptions | None = None,
        metadata: Mapping[str, Any] | None = None,
        signal: AbortSignal | None = None,
        session_id: str = "",
        run_id: str = "",
        input_assembly: InputAssemblyHook | None = None,
    ) -> None:
        text = compose_system_prompt(instructions, system_prompt)
        self._system: tuple[Message, ...] = (
            (Message("system", (TextContent(text),)),) if text else ()
        )
        self._skill_messages = tuple(
            Message("system", (TextContent(f"Skill {s.name}:\n{s.instructions}"),))
            for s in skills
            if s.instructions
        )
        self._summaries: tuple[str, ...] = ()
        self._summary_messages: tuple[Message, ...] = ()
        self._head = self._system + self._skill_messages
        self._context = tuple(context)
        self._model = model
        self._tools = tools
        self._options = options
        self._metadata = metadata
        self._signal = signal
        self._session_id = session_id
        self._run_id = run_id
        self._input_assembly = input_assembly
        self._joined: _Joined | None = None
        self.last_layout: AssemblyLayout | None = None
        """Layout of the last assembled message tuple (``None`` after a hook replaced it)."""

    @property
    def options(self) -> ProviderRequestOptions | None:
        """The resolved provider options every request carries."""
        return self._options

    @property
    def tools(self) -> tuple[ToolDefinition, ...] | None:
        """The advertised tools, or ``None``."""
        return self._tools

    @property
    def summaries(self) -> tuple[str, ...]:
        """The compaction summaries of the last [`set_summaries()`][prism.assembly.RequestAssembler.set_summaries] (none before)."""
        return self._summaries

    def set_summaries(self, summaries: Sequence[str]) -> None:
        """Set the compaction summaries (``system`` messages after the skills); called after each
        history rebuild."""
        self._summaries = tuple(summaries)
        self._summary_messages = tuple(
            Message("system", (TextContent(f"Summary:\n{s}"),)) for s in summaries
        )
        self._head = self._system + self._skill_messages + self._summary_messages

    async def assemble(
        self,
        history: Sequence[Message],
        next_input: AgentInput = (),
        tool_results: Sequence[ToolResult] | None = None,
        *,
        turn: int = 1,
        history_version: int | None = None,
    ) -> ProviderRequest:
        """Build the request for one turn.

        Args:
            history: The live history (copied by reference into the request).
            next_input: New input after the history (``[]``/``()`` for continuation turns).
            tool_results: Loop-local tool results, appended as tool-result messages.
            turn: Turn index given to context providers.
            history_version: A number that changes whenever ``history`` changes other than by
                appending (the run's ``LiveHistory.mutations``), read just before this call. While
                it is the same as at the last call with this ``history``, and no context provider
                runs in between, the messages up to the history's end are that call's, extended
                by the messages appended since; ``None``: the history is always copied whole.

        Returns:
            The unredacted request (redaction happens in ``generate``).

        Raises:
            TypeError: ``next_input`` is not an ``AgentInput``, or a context provider returned
                something other than blocks.
            Exception: Whatever a context provider or the ``input_assembly`` hook raises.
        """
        tail: tuple[Message, ...] = _NO_MESSAGES
        if tool_results:
            tail = tuple(tool_result_message(r) for r in tool_results)
        if isinstance(next_input, str) or next_input:
            tail = tail + tuple(to_messages(next_input))
        blocks: tuple[ContextBlock, ...] = ()
        if self._context:
            blocks = await self._resolve_context(history, tail, turn)
        if blocks:
            prefix = (
                self._system
                + tuple(context_block_message(b) for b in blocks)
                + self._skill_messages
                + self._summary_messages
            )
        else:
            prefix = self._head
        count = len(history)
        head = self._join(prefix, history, count, None if self._context else history_version)
        messages = head + tail if tail else head
        hook = self._input_assembly
        if hook is not None:
            replaced = tuple(await hook(messages))
            if replaced != messages:
                messages = replaced
                self.last_layout = None
            else:
                self.last_layout = AssemblyLayout(messages, len(prefix), count)
        else:
            self.last_layout = AssemblyLayout(messages, len(prefix), count)
        # model, messages, tools, context, options, metadata, signal (positional: built each turn)
        return ProviderRequest(
            self._model,
            messages,
            self._tools,
            blocks,
            self._options,
            self._metadata,
            self._signal,
        )

    def _join(
        self,
        prefix: tuple[Message, ...],
        history: Sequence[Message],
        count: int,
        version: int | None,
    ) -> tuple[Message, ...]:
        """``prefix`` and the first ``count`` messages of ``history`` as one tuple. Copying the
        history's references is the only O(history) work of a turn; while the history only grew
        (``version`` as at the last call with this ``history``) the last tuple is extended by the
        messages appended since. ``version`` ``None``: copied whole, nothing kept."""
        joined = self._joined
        if (
            version is not None
            and joined is not None
            and joined[0] is history
            and joined[1] is prefix
            and joined[2] == version
            and joined[3] <= count
        ):
            head = joined[4] + tuple(history[joined[3] : count])
        else:
            head = (*prefix, *history)
        self._joined = None if version is None else (history, prefix, version, count, head)
        return head

    async def _resolve_context(
        self, history: Sequence[Message], tail: tuple[Message, ...], turn: int
    ) -> tuple[ContextBlock, ...]:
        pctx = ContextProviderContext(
            session_id=self._session_id,
            run_id=self._run_id,
            turn=turn,
            messages=tuple(history) + tail,
            metadata=self._metadata if self._metadata is not None else {},
            signal=self._signal,
        )
        blocks: list[ContextBlock] = []
        for provider in self._context:
            resolved = await maybe_await(provider.resolve(pctx))
            if resolved:
                blocks.extend(_coerce_block(b) for b in resolved)
        return tuple(blocks)


async def assemble_provider_input(
    *,
    model: ModelConfig,
    history: Sequence[Message] = (),
    next_input: AgentInput = (),
    tool_results: Sequence[ToolResult] | None = None,
    instructions: str | None = None,
    system_prompt: Sequence[SystemPromptContribution] = (),
    context: Sequence[ContextProvider] = (),
    skills: Sequence[Skill] = (),
    summaries: Sequence[str] = (),
    tools: Sequence[ToolDefinition] | None = None,
    options: ProviderRequestOptions | None = None,
    metadata: Mapping[str, Any] | None = None,
    signal: AbortSignal | None = None,
    session_id: str = "",
    run_id: str = "",
    turn: int = 1,
    input_assembly: InputAssemblyHook | None = None,
) -> ProviderRequest:
    """Assemble one provider request; the primitive behind ``LoopContext.assemble``.

    Args:
        model: Model to call.
        history: Live history (e).
        next_input: New input (g).
        tool_results: Loop-local tool results (f).
        instructions: Base instructions (a).
        system_prompt: Contributions joined after the instructions (a).
        context: Context providers resolved in order (b).
        skills: Active skills (c); their context providers are NOT added here — pass them in
            ``context`` after the agent's providers.
        summaries: Compaction summaries (d).
        tools: Tools to advertise; ``None`` or empty means none.
        options: Provider options.
        metadata: Run metadata.
        signal: Abort signal set on the request.
        session_id: Session id for context providers.
        run_id: Run id for context providers.
        turn: Turn index for context providers.
        input_assembly: Optional hook that may replace the final message tuple.

    Returns:
        The assembled, unredacted ``ProviderRequest``.
    """
    assembler = RequestAssembler(
        model=model,
        instructions=instructions,
        system_prompt=system_prompt,
        context=context,
        skills=skills,
        tools=tuple(tools) if tools else None,
        options=options,
        metadata=metadata,
        signal=signal,
        session_id=session_id,
        run_id=run_id,
        input_assembly=input_assembly,
    )
    if summaries:
        assembler.set_summaries(summaries)
    return await assembler.assemble(history, next_input, tool_results, turn=turn)
