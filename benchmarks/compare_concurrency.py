"""Scenario 8: many short runs of one agent at once — wall time, CPU time, peak RSS.

The scenario of ``bench_concurrency.py`` (prism's side is imported from there): one agent with two
``async def`` tools — ``lookup_order(order_id: str, include_items: bool = False)`` and
``lookup_customer(customer_id: str)``, small JSON results — and many sessions, each running once
for two turns: the first answers with both tool calls in parallel, the second (the request ends
with the tool results) with text. One fake model serves every session and answers from the
request, as one real client would. Every run is checked (succeeded, the final text, two tool
executions per run).

Modes, each (framework, mode) in a fresh interpreter so that peak RSS (``ru_maxrss``) is its own:

* ``concurrent`` — every session's run started at once with ``asyncio.gather``;
* ``sequential`` — the same runs awaited one by one.

prism runs ``--sessions`` sessions (default 10,000) with ``SingleShotLoopOptions(tool_concurrency=2)``
and the memory store. The other frameworks run ``--other-sessions`` (default 2,000; their runs
cost several times more) without persistence: pydantic-ai ``Agent.run``, LangGraph
``create_agent`` ``ainvoke`` (no checkpointer), openai-agents ``Runner.run``. Sessions (where the
framework has them) and the agent are built before the clock starts; 20 warm runs come first.

Usage::

    python benchmarks/compare_concurrency.py [--sessions 10000] [--other-sessions 2000]
        [--frameworks prism pydantic-ai langgraph openai-agents]
        [--mode concurrent sequential] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _common import emit_json, machine, versions

FRAMEWORKS = ("prism", "pydantic-ai", "langgraph", "openai-agents")
_MODULES = {"pydantic-ai": "pydantic_ai", "langgraph": "langgraph", "openai-agents": "agents"}
PROMPT = "Where is order A-1?"
FINAL_TEXT = "Your order has shipped."
CALLS = [0]


async def lookup_order(order_id: str, include_items: bool = False) -> dict[str, Any]:
    """Look up an order.

    Args:
        order_id: The order number.
        include_items: Whether to list the items.
    """
    CALLS[0] += 1
    return {"order_id": order_id, "status": "shipped", "items": 2 if include_items else None}


async def lookup_customer(customer_id: str) -> dict[str, Any]:
    """Look up a customer.

    Args:
        customer_id: The customer number.
    """
    CALLS[0] += 1
    return {"customer_id": customer_id, "tier": "gold"}


TOOLS = [lookup_order, lookup_customer]
CALL_A = ("call_a", "lookup_order", {"order_id": "A-1", "include_items": True})
CALL_B = ("call_b", "lookup_customer", {"customer_id": "C-7"})

# Each builder returns (start one run, final text of a result).
Builder = Callable[[], tuple[Callable[[], Awaitable[Any]], Callable[[Any], str]]]


def build_pydantic_ai() -> tuple[Callable[[], Awaitable[Any]], Callable[[Any], str]]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage

    async def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(
                parts=[TextPart(FINAL_TEXT)], usage=RequestUsage(input_tokens=120, output_tokens=8)
            )
        parts = [ToolCallPart(name, args, tool_call_id=cid) for cid, name, args in (CALL_A, CALL_B)]
        return ModelResponse(parts=parts, usage=RequestUsage(input_tokens=100, output_tokens=20))

    agent = Agent(FunctionModel(model), tools=TOOLS)
    return (lambda: agent.run(PROMPT)), (lambda r: r.output)


def build_langgraph() -> tuple[Callable[[], Awaitable[Any]], Callable[[Any], str]]:
    from langchain.agents import create_agent
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    class TwoTurnChatModel(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "two-turn"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _answer(self, messages: Any) -> ChatResult:
            if isinstance(messages[-1], ToolMessage):
                usage = {"input_tokens": 120, "output_tokens": 8, "total_tokens": 128}
                message = AIMessage(content=FINAL_TEXT, usage_metadata=usage)
            else:
                usage = {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}
                message = AIMessage(
                    content="",
                    tool_calls=[
                        {"name": name, "args": args, "id": cid, "type": "tool_call"}
                        for cid, name, args in (CALL_A, CALL_B)
                    ],
                    usage_metadata=usage,
                )
            return ChatResult(generations=[ChatGeneration(message=message)])

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            return self._answer(messages)

        async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                             **kwargs: Any) -> ChatResult:
            return self._answer(messages)

    graph = create_agent(TwoTurnChatModel(), tools=[tool(f) for f in TOOLS])
    return (
        lambda: graph.ainvoke({"messages": [{"role": "user", "content": PROMPT}]}),
        lambda r: r["messages"][-1].content,
    )


def build_openai_agents() -> tuple[Callable[[], Awaitable[Any]], Callable[[Any], str]]:
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
    calls = [(cid, name, json.dumps(args)) for cid, name, args in (CALL_A, CALL_B)]

    class TwoTurnModel(Model):
        async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                               **kwargs: Any) -> ModelResponse:
            last = input[-1] if isinstance(input, list) else {}
            if isinstance(last, dict) and last.get("type") == "function_call_output":
                out: list[Any] = [
                    ResponseOutputMessage(
                        type="message", id="msg_1", role="assistant", status="completed",
                        content=[
                            ResponseOutputText(type="output_text", text=FINAL_TEXT, annotations=[])
                        ],
                    )
                ]
                usage = Usage(requests=1, input_tokens=120, output_tokens=8, total_tokens=128)
            else:
                out = [
                    ResponseFunctionToolCall(
                        type="function_call", id=f"fc_{cid}", call_id=cid, name=name,
                        arguments=arguments, status="completed",
                    )
                    for cid, name, arguments in calls
                ]
                usage = Usage(requests=1, input_tokens=100, output_tokens=20, total_tokens=120)
            return ModelResponse(output=out, usage=usage, response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
            raise NotImplementedError

    agent = Agent(name="bench", model=TwoTurnModel(), tools=[function_tool(f) for f in TOOLS])
    config = RunConfig(tracing_disabled=True)
    return (lambda: Runner.run(agent, PROMPT, run_config=config)), (lambda r: r.final_output)


BUILDERS: dict[str, Builder] = {
    "pydantic-ai": build_pydantic_ai,
    "langgraph": build_langgraph,
    "openai-agents": build_openai_agents,
}


async def _measure_other(framework: str, mode: str, sessions: int) -> dict[str, Any]:
    start, text = BUILDERS[framework]()
    for _ in range(20):  # warm-up: first-use imports and caches
        await start()
    CALLS[0] = 0
    gc.collect()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if mode == "concurrent":
        results = await asyncio.gather(*(start() for _ in range(sessions)))
    else:
        results = [await start() for _ in range(sessions)]
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    bad = [r for r in results if text(r) != FINAL_TEXT]
    if bad or CALLS[0] != 2 * sessions:
        raise RuntimeError(f"{len(bad)} runs failed; {CALLS[0]} tool calls: {bad[:1]!r}")
    return {
        "mode": mode,
        "sessions": sessions,
        "wall_s": wall,
        "cpu_s": cpu,
        "cpu_us_per_run": cpu / sessions * 1e6,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


async def _child(framework: str, mode: str, sessions: int) -> dict[str, Any]:
    if framework == "prism":
        import bench_concurrency

        return await bench_concurrency.measure_mode(mode, sessions, "memory")
    return await _measure_other(framework, mode, sessions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=10_000, help="prism's session count")
    parser.add_argument("--other-sessions", type=int, default=2_000,
                        help="the other frameworks' session count")
    parser.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS, default=list(FRAMEWORKS))
    parser.add_argument("--mode", nargs="+", choices=("concurrent", "sequential"),
                        default=["concurrent", "sequential"])
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", default=None, help="write the result JSON here (- = stdout)")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_child(args.child, args.mode[0], args.sessions))))
        return
    frameworks = [
        fw for fw in args.frameworks
        if fw == "prism" or importlib.util.find_spec(_MODULES[fw]) is not None
    ]
    results: dict[str, Any] = {}
    for fw in frameworks:
        count = args.sessions if fw == "prism" else args.other_sessions
        results[fw] = {}
        for mode in args.mode:
            print(f"  {fw} {mode} × {count}", file=sys.stderr, flush=True)
            proc = subprocess.run(
                [sys.executable, __file__, "--child", fw, "--mode", mode, "--sessions", str(count)],
                capture_output=True, text=True, check=False, env=dict(os.environ),
            )
            if proc.returncode:
                raise SystemExit(f"{fw} {mode} failed:\n{proc.stderr}")
            results[fw][mode] = json.loads(proc.stdout.strip().splitlines()[-1])
        by_mode = results[fw]
        if "concurrent" in by_mode and "sequential" in by_mode:
            by_mode["concurrent_over_sequential_wall"] = (
                by_mode["concurrent"]["wall_s"] / by_mode["sequential"]["wall_s"]
            )
            by_mode["concurrent_over_sequential_cpu"] = (
                by_mode["concurrent"]["cpu_s"] / by_mode["sequential"]["cpu_s"]
            )
    payload = {
        "section": "concurrency",
        "scenario": (
            "two-turn runs of one agent (two parallel tool calls, then text), all started at "
            "once (concurrent) or one by one (sequential); instant fake model"
        ),
        "sessions": {fw: args.sessions if fw == "prism" else args.other_sessions
                     for fw in frameworks},
        "modes": args.mode,
        "machine": machine(),
        "versions": versions(
            "prism-runtime", "pydantic-ai-slim", "openai-agents", "langgraph", "langchain",
        ),
        "results": results,
    }
    if args.json is None:
        for fw, by_mode in results.items():
            for mode in args.mode:
                r = by_mode[mode]
                print(
                    f"{fw:>14} {mode:<11} {r['sessions']} runs: wall {r['wall_s']:.2f} s  "
                    f"cpu {r['cpu_s']:.2f} s ({r['cpu_us_per_run']:.0f} µs/run)  "
                    f"peak RSS {r['peak_rss_mb']:.0f} MB"
                )
    else:
        emit_json(payload, args.json)


if __name__ == "__main__":
    main()
