"""One adapter per framework: the same script through each framework's own fake model.

Every adapter builds, outside the timed region, an agent with the async tools ``noop(i: int)``
(returns ``{"ok": True}``) and ``sleep50(i: int)`` (``await asyncio.sleep(0.05)``, then the same),
and the blocking ``sleep50_sync(i: int)`` (``time.sleep(0.05)``, a plain ``def``), whose arguments
each framework validates its own way, plus a fake model that answers turn *t* with
the script's turn *t* (tool calls with unique ids, or the final text) and a usage of 1 input and
1 output token. The fake model builds its response when asked, as a real client would, and
returns instantly. ``build`` returns the run as a zero-argument coroutine function; construction
is not timed.

* ``bare``: a hand-made asyncio loop — dict messages, an async-generator model, direct tool calls;
  no events, validation, redaction, limits or store. The floor.
* ``bare+records``: the bare loop plus the records prism keeps per turn (events, messages, two
  session entries appended to a ``MemorySessionStore``), built with prism's types — the cost of
  the data model alone.
* ``prism``: ``prism.create_agent`` with a scripted ``AIProvider``, ``@prism.tool`` tools (JSON
  Schema argument validation, pydantic conversion), the default memory store, retry policy and
  limits raised to unlimited; no subscriber. ``prism+events`` also consumes every event through
  ``session.subscribe()``.
* ``pydantic-ai``: ``Agent(FunctionModel(...))`` with ``tool_plain`` tools,
  ``UsageLimits(request_limit=None)``.
* ``openai-agents``: ``Agent(model=<custom Model>)`` with ``function_tool`` tools, tracing off,
  ``max_turns`` = script length.
* ``langgraph``: ``langchain.agents.create_agent`` (a LangGraph graph) with a fake
  ``BaseChatModel`` whose ``bind_tools`` returns itself and ``@tool`` tools,
  ``recursion_limit`` = 2 × script length + 10.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _common import Counter, Script

RunFn = Callable[[], Awaitable[Any]]

FRAMEWORKS = (
    "bare",
    "bare+records",
    "prism",
    "prism+events",
    "pydantic-ai",
    "openai-agents",
    "langgraph",
)
OTHERS = ("pydantic-ai", "openai-agents", "langgraph")

_MODULES = {
    "pydantic-ai": "pydantic_ai",
    "openai-agents": "agents",
    "langgraph": "langgraph",
}


def available(name: str) -> bool:
    module = _MODULES.get(name)
    return module is None or importlib.util.find_spec(module) is not None


async def _sleep50() -> None:
    await asyncio.sleep(0.05)


def _sleep50_sync() -> None:
    time.sleep(0.05)


# --------------------------------------------------------------------------- bare


def build_bare(script: Script, counter: Counter) -> RunFn:
    async def noop(i: int) -> dict[str, Any]:
        return {"ok": True}

    async def sleep50(i: int) -> dict[str, Any]:
        await _sleep50()
        return {"ok": True}

    async def sleep50_sync(i: int) -> dict[str, Any]:
        await asyncio.to_thread(_sleep50_sync)
        return {"ok": True}

    tools: dict[str, Callable[..., Awaitable[Any]]] = {
        "noop": noop,
        "sleep50": sleep50,
        "sleep50_sync": sleep50_sync,
    }

    async def model(messages: list[dict[str, Any]]) -> Any:
        index = counter.tick()
        turn = script[index]
        if isinstance(turn, str):
            yield ("text", turn)
        else:
            for k, (name, args) in enumerate(turn):
                yield ("tool_call", f"call_{index}_{k}", name, args)
        yield ("done", {"input_tokens": 1, "output_tokens": 1})

    async def run() -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        while True:
            text: list[str] = []
            calls: list[tuple[str, str, dict[str, Any]]] = []
            async for event in model(messages):
                kind = event[0]
                if kind == "text":
                    text.append(event[1])
                elif kind == "tool_call":
                    calls.append((event[1], event[2], event[3]))
            messages.append({"role": "assistant", "content": "".join(text), "tool_calls": calls})
            if not calls:
                return messages[-1]["content"]
            if len(calls) == 1:
                call_id, name, args = calls[0]
                outputs = [await tools[name](**args)]
            else:
                outputs = await asyncio.gather(*(tools[n](**a) for _, n, a in calls))
            for (call_id, _, _), output in zip(calls, outputs, strict=True):
                messages.append({"role": "tool", "tool_call_id": call_id, "content": output})

    return run


def build_bare_records(script: Script, counter: Counter) -> RunFn:
    """The bare loop plus the records prism keeps per turn, built with prism's own types.

    Per turn: the provider's ``ToolCallContent``/``Usage`` and the assistant ``Message``;
    ``TurnStarted``/``MessageFinished``/``TurnFinished`` and the two tool events; the
    ``ToolResult`` and its tool message; two session entries (``new_session_entry``: id and
    timestamp) appended to a ``MemorySessionStore`` (which copies them). No validation, limits,
    byte accounting, retry, abort signals, redaction or observers. It shows what the data model
    alone costs — the floor under any runtime that keeps these records.
    """
    from prism.events import (
        MessageFinishedEvent,
        ToolExecutionFinishedEvent,
        ToolExecutionMetadata,
        ToolExecutionStartedEvent,
        TurnFinishedEvent,
        TurnStartedEvent,
    )
    from prism.store import MemorySessionStore, new_session_entry
    from prism.types import (
        Message,
        TextContent,
        ToolCallContent,
        ToolResult,
        Usage,
        tool_result_message,
    )

    async def noop(i: int) -> dict[str, Any]:
        return {"ok": True}

    async def sleep50(i: int) -> dict[str, Any]:
        await _sleep50()
        return {"ok": True}

    tools: dict[str, Callable[..., Awaitable[Any]]] = {"noop": noop, "sleep50": sleep50}
    store = MemorySessionStore()
    sink: list[Any] = []

    async def model(messages: list[Message]) -> Any:
        index = counter.tick()
        turn = script[index]
        if isinstance(turn, str):
            yield ("text", turn)
        else:
            for k, (name, args) in enumerate(turn):
                yield ("call", ToolCallContent(id=f"call_{index}_{k}", name=name, arguments=args))
        yield ("done", Usage(input_tokens=1, output_tokens=1))

    async def run() -> str:
        history: list[Message] = [Message("user", (TextContent("go"),))]
        leaf = None
        turn = 0
        while True:
            turn += 1
            sink.append(TurnStartedEvent(turn=turn))
            parts: list[Any] = []
            calls: list[ToolCallContent] = []
            async for kind, value in model(history):
                if kind == "text":
                    parts.append(TextContent(value))
                elif kind == "call":
                    parts.append(value)
                    calls.append(value)
            message = Message("assistant", tuple(parts))
            history.append(message)
            entry = new_session_entry("message", session_id="s", parent_id=leaf, message=message)
            await store.append(entry, expected_parent_id=leaf)
            leaf = entry.id
            sink.append(MessageFinishedEvent(message=message))
            sink.append(TurnFinishedEvent(turn=turn))
            if not calls:
                sink.clear()
                return message.text
            for call in calls:
                sink.append(ToolExecutionStartedEvent(call=call))
                value = await tools[call.name](**call.arguments)
                result = ToolResult(tool_call_id=call.id, name=call.name, value=value)
                sink.append(
                    ToolExecutionFinishedEvent(
                        result=result,
                        metadata=ToolExecutionMetadata(duration_ms=0, status="finished"),
                    )
                )
                row = tool_result_message(result)
                history.append(row)
                entry = new_session_entry("message", session_id="s", parent_id=leaf, message=row)
                await store.append(entry, expected_parent_id=leaf)
                leaf = entry.id
            sink.clear()

    return run


# --------------------------------------------------------------------------- prism


def build_prism(
    script: Script, counter: Counter, *, observed: bool = False, tool_concurrency: int = 1
) -> RunFn:
    import prism
    from prism.testing import provider_done, provider_text_delta, provider_tool_call

    @prism.tool
    async def noop(i: int) -> dict[str, Any]:
        """Do nothing."""
        return {"ok": True}

    @prism.tool
    async def sleep50(i: int) -> dict[str, Any]:
        """Sleep 50 ms."""
        await _sleep50()
        return {"ok": True}

    @prism.tool
    def sleep50_sync(i: int) -> dict[str, Any]:
        """Block 50 ms."""
        _sleep50_sync()
        return {"ok": True}

    class ScriptedProvider:
        id = "scripted"

        def generate(self, request: Any) -> Any:
            index = counter.tick()
            return self._replay(index, script[index])

        async def _replay(self, index: int, turn: Any) -> Any:
            if isinstance(turn, str):
                yield provider_text_delta(turn)
            else:
                for k, (name, args) in enumerate(turn):
                    yield provider_tool_call(f"call_{index}_{k}", name, args)
            yield provider_done(prism.Usage(input_tokens=1, output_tokens=1))

    unlimited = prism.UNLIMITED
    agent = prism.create_agent(
        model={"provider": "scripted", "model": "bench"},
        provider=ScriptedProvider(),
        tools=[noop, sleep50, sleep50_sync],
        limits=prism.RunLimits(
            max_turns=unlimited,
            max_provider_attempts=unlimited,
            max_tool_rounds=unlimited,
            max_tool_calls=unlimited,
        ),
        loop=(
            None
            if tool_concurrency == 1
            else prism.SingleShotLoopOptions(tool_concurrency=tool_concurrency)
        ),
    )
    session = agent.create_session()

    async def run() -> Any:
        if not observed:
            return await session.run("go")
        events = session.subscribe(max_queued_events=1 << 22)
        seen = 0

        async def consume() -> None:
            nonlocal seen
            async for _ in events:
                seen += 1

        consumer = asyncio.ensure_future(consume())
        result = await session.run("go")
        await consumer
        return result

    return run


# --------------------------------------------------------------------------- pydantic-ai


def build_pydantic_ai(script: Script, counter: Counter) -> RunFn:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage, UsageLimits

    async def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        index = counter.tick()
        turn = script[index]
        usage = RequestUsage(input_tokens=1, output_tokens=1)
        if isinstance(turn, str):
            return ModelResponse(parts=[TextPart(turn)], usage=usage)
        parts = [
            ToolCallPart(name, args, tool_call_id=f"call_{index}_{k}")
            for k, (name, args) in enumerate(turn)
        ]
        return ModelResponse(parts=parts, usage=usage)

    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    async def noop(i: int) -> dict[str, Any]:
        """Do nothing."""
        return {"ok": True}

    @agent.tool_plain
    async def sleep50(i: int) -> dict[str, Any]:
        """Sleep 50 ms."""
        await _sleep50()
        return {"ok": True}

    @agent.tool_plain
    def sleep50_sync(i: int) -> dict[str, Any]:
        """Block 50 ms."""
        _sleep50_sync()
        return {"ok": True}

    limits = UsageLimits(request_limit=None)

    async def run() -> Any:
        return await agent.run("go", usage_limits=limits)

    return run


# --------------------------------------------------------------------------- openai-agents


def build_openai_agents(script: Script, counter: Counter) -> RunFn:
    from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    set_tracing_disabled(True)

    class ScriptedModel(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            index = counter.tick()
            turn = script[index]
            out: list[Any]
            if isinstance(turn, str):
                out = [
                    ResponseOutputMessage(
                        type="message",
                        id=f"msg_{index}",
                        role="assistant",
                        status="completed",
                        content=[ResponseOutputText(type="output_text", text=turn, annotations=[])],
                    )
                ]
            else:
                import json

                out = [
                    ResponseFunctionToolCall(
                        type="function_call",
                        id=f"fc_{index}_{k}",
                        call_id=f"call_{index}_{k}",
                        name=name,
                        arguments=json.dumps(args),
                        status="completed",
                    )
                    for k, (name, args) in enumerate(turn)
                ]
            usage = Usage(requests=1, input_tokens=1, output_tokens=1, total_tokens=2)
            return ModelResponse(output=out, usage=usage, response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
            raise NotImplementedError

    @function_tool
    async def noop(i: int) -> dict[str, Any]:
        """Do nothing."""
        return {"ok": True}

    @function_tool
    async def sleep50(i: int) -> dict[str, Any]:
        """Sleep 50 ms."""
        await _sleep50()
        return {"ok": True}

    @function_tool
    def sleep50_sync(i: int) -> dict[str, Any]:
        """Block 50 ms."""
        _sleep50_sync()
        return {"ok": True}

    agent = Agent(name="bench", model=ScriptedModel(), tools=[noop, sleep50, sleep50_sync])
    config = RunConfig(tracing_disabled=True)

    async def run() -> Any:
        return await Runner.run(agent, "go", max_turns=len(script) + 1, run_config=config)

    return run


# --------------------------------------------------------------------------- langgraph


def build_langgraph(script: Script, counter: Counter) -> RunFn:
    from langchain.agents import create_agent
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    class ScriptedChatModel(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _next(self) -> ChatResult:
            index = counter.tick()
            turn = script[index]
            usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
            if isinstance(turn, str):
                message = AIMessage(content=turn, usage_metadata=usage)
            else:
                message = AIMessage(
                    content="",
                    tool_calls=[
                        {"name": n, "args": a, "id": f"call_{index}_{k}", "type": "tool_call"}
                        for k, (n, a) in enumerate(turn)
                    ],
                    usage_metadata=usage,
                )
            return ChatResult(generations=[ChatGeneration(message=message)])

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            return self._next()

        async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                             **kwargs: Any) -> ChatResult:
            return self._next()

    @tool
    async def noop(i: int) -> dict[str, Any]:
        """Do nothing."""
        return {"ok": True}

    @tool
    async def sleep50(i: int) -> dict[str, Any]:
        """Sleep 50 ms."""
        await _sleep50()
        return {"ok": True}

    @tool
    def sleep50_sync(i: int) -> dict[str, Any]:
        """Block 50 ms."""
        _sleep50_sync()
        return {"ok": True}

    graph = create_agent(ScriptedChatModel(), tools=[noop, sleep50, sleep50_sync])
    config = {"recursion_limit": 2 * len(script) + 10}

    async def run() -> Any:
        return await graph.ainvoke({"messages": [{"role": "user", "content": "go"}]}, config=config)

    return run


BUILDERS: dict[str, Callable[[Script, Counter], RunFn]] = {
    "bare": build_bare,
    "bare+records": build_bare_records,
    "prism": build_prism,
    "prism(tool_concurrency=8)": lambda s, c: build_prism(s, c, tool_concurrency=8),
    "prism+events": lambda s, c: build_prism(s, c, observed=True),
    "pydantic-ai": build_pydantic_ai,
    "openai-agents": build_openai_agents,
    "langgraph": build_langgraph,
}
