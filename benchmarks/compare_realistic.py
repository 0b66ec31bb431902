"""Scenario 7: per-turn cost with realistic payloads, side by side, with and without SQLite.

The scenario of ``bench_realistic.py`` (imported from there, not copied): a ~2 KB system prompt,
four typed tools with one pydantic-model parameter each, N-1 turns that each carry ~200 bytes of
assistant text and two parallel tool calls with ~200-byte JSON arguments, ~1 KB JSON tool results
built fresh on every call, then a final text turn. N = 20 and 200. Every framework gets the same
turns from its own fake model (no network) and the same tool bodies, wrapped its own way.

Configurations (each framework with and without its own SQLite persistence, where it has one):

* ``prism`` — ``bench_realistic``'s run on the default memory store;
  ``prism+sqlite`` — ``SqliteStore`` on a fresh file as session and checkpoint store, durable run
  with ``checkpoint_policy="every-turn"``; both with ``SingleShotLoopOptions(tool_concurrency=2)``;
* ``langgraph`` — ``langchain.agents.create_agent`` (a LangGraph graph) with a scripted
  ``BaseChatModel`` and ``@tool`` tools, no checkpointer; ``langgraph+sqlite`` — the same with
  ``AsyncSqliteSaver`` (``langgraph-checkpoint-sqlite``) on a fresh file and a ``thread_id``: a
  checkpoint after every graph step, with LangGraph's default durability;
* ``pydantic-ai`` — ``Agent(FunctionModel(...), instructions=...)`` with the tools as plain
  functions; it has no persistence of its own (message history is the caller's to keep), so its
  SQLite row is "n/a";
* ``openai-agents`` — ``Runner.run`` with a custom ``Model`` and ``function_tool`` tools, tracing
  off; ``openai-agents+sqlite`` — the same with ``SQLiteSession`` on a fresh file.

prism's fake provider streams each turn's text in 4 deltas; the others are driven through their
non-streaming entry points and get the text as one part. openai-agents receives tool arguments as
JSON strings (its wire format; serialised before the run), the others as dicts.

Each sample is one complete run of N turns on a newly built agent (and a fresh database file);
construction, opening and closing the database are not timed. Before each sample the same
configuration runs a 4-turn warm run, then ``gc.collect()``. Configurations and sizes are
interleaved round by round. Every run is checked: N model turns, 2(N-1) tool executions (both
calls of every turn really run), the scripted final text. Reported per cell: median process CPU
time ÷ N (all threads, so SQLite worker threads count) and median wall time ÷ N.

Usage::

    python benchmarks/compare_realistic.py [--sizes 20 200] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import bench_realistic as scenario
from _common import emit_json, machine, versions
from bench_realistic import (
    FINAL_TEXT,
    SYSTEM_PROMPT,
    CustomerLookup,
    InventoryCheck,
    OrderQuery,
    TicketUpdate,
    plain_script,
)

CONFIGS = (
    "prism",
    "prism+sqlite",
    "langgraph",
    "langgraph+sqlite",
    "pydantic-ai",
    "openai-agents",
    "openai-agents+sqlite",
)
PERSISTENCE = {
    "prism": "memory store",
    "prism+sqlite": "SqliteStore, every turn",
    "langgraph": "none",
    "langgraph+sqlite": "AsyncSqliteSaver",
    "pydantic-ai": "none",
    "pydantic-ai+sqlite": "n/a (none of its own)",
    "openai-agents": "none",
    "openai-agents+sqlite": "SQLiteSession",
}
_MODULES = {"langgraph": "langgraph", "pydantic-ai": "pydantic_ai", "openai-agents": "agents"}
# runs per cell by N: (prism, the others)
_REPS = {20: (21, 9), 200: (11, 5)}
_QUICK_REPS = {20: (7, 3), 200: (5, 3)}
WARM_N = 4
USER_PROMPT = "Where is my tent? Order from last month, customer CUST-100000."

# ----------------------------------------------------------------- the tools, unwrapped
# The bodies of bench_realistic's four @prism.tool tools (same names, docstrings, parameter
# models and ~1 KB results, counted in scenario.CALLS), for the other frameworks to wrap.


async def search_orders(query: OrderQuery) -> dict[str, Any]:
    """Find a customer's orders by status and date range.

    Args:
        query: Customer, status, date range and SKU prefix to match.
    """
    return scenario.tool_result("orders", query.customer_id, 5)


async def get_customer(request: CustomerLookup) -> dict[str, Any]:
    """Read a customer record: contact details, loyalty tier, open tickets.

    Args:
        request: Which customer and which fields.
    """
    return scenario.tool_result("customer", request.customer_id, 5)


async def update_ticket(update: TicketUpdate) -> dict[str, Any]:
    """Record an action or a status change on a support ticket.

    Args:
        update: Ticket id, new status, note and tags.
    """
    return scenario.tool_result("ticket", update.ticket_id, 5)


async def check_inventory(request: InventoryCheck) -> dict[str, Any]:
    """Check (and optionally reserve) stock of one SKU in some warehouses.

    Args:
        request: SKU, warehouses, quantity and whether to reserve.
    """
    return scenario.tool_result("inventory", request.sku, 5)


PLAIN_TOOLS = [search_orders, get_customer, update_ticket, check_inventory]
assert [t.__name__ for t in PLAIN_TOOLS] == scenario.TOOL_NAMES


class Built:
    """A built run: ``run()`` is timed; ``text(result)`` extracts the final text; ``close()``."""

    def __init__(
        self,
        run: Callable[[], Awaitable[Any]],
        text: Callable[[Any], str],
        turns: list[int],
        close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.run, self.text, self.turns, self.close = run, text, turns, close


# ----------------------------------------------------------------- LangGraph


async def build_langgraph(n: int, stack: contextlib.AsyncExitStack, sqlite: bool) -> Built:
    from langchain.agents import create_agent
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    script = plain_script(n)
    turns = [0]

    class ScriptedChatModel(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _next(self) -> ChatResult:
            index = turns[0]
            turns[0] += 1
            text, calls, input_tokens, output_tokens = script[index]
            usage = {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
            }
            message = AIMessage(
                content=text,
                tool_calls=[
                    {"name": name, "args": args, "id": call_id, "type": "tool_call"}
                    for call_id, name, args in calls
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

    checkpointer = None
    config: dict[str, Any] = {"recursion_limit": 2 * n + 10}
    if sqlite:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="lg-bench-"))
        checkpointer = await stack.enter_async_context(
            AsyncSqliteSaver.from_conn_string(os.path.join(tmp, "bench.db"))
        )
        await checkpointer.setup()
        config["configurable"] = {"thread_id": "bench-1"}
    graph = create_agent(
        ScriptedChatModel(),
        tools=[tool(f) for f in PLAIN_TOOLS],
        system_prompt=SYSTEM_PROMPT,
        checkpointer=checkpointer,
    )

    async def run() -> Any:
        return await graph.ainvoke({"messages": [{"role": "user", "content": USER_PROMPT}]},
                                   config=config)

    return Built(run, lambda r: r["messages"][-1].content, turns)


# ----------------------------------------------------------------- pydantic-ai


async def build_pydantic_ai(n: int, stack: contextlib.AsyncExitStack, sqlite: bool) -> Built:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage, UsageLimits

    if sqlite:
        raise ValueError("pydantic-ai has no persistence of its own")
    script = plain_script(n)
    turns = [0]

    async def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        index = turns[0]
        turns[0] += 1
        text, calls, input_tokens, output_tokens = script[index]
        parts: list[Any] = [TextPart(text)]
        parts.extend(ToolCallPart(name, args, tool_call_id=call_id) for call_id, name, args in calls)
        usage = RequestUsage(input_tokens=input_tokens, output_tokens=output_tokens)
        return ModelResponse(parts=parts, usage=usage)

    agent = Agent(FunctionModel(model), instructions=SYSTEM_PROMPT, tools=PLAIN_TOOLS)
    limits = UsageLimits(request_limit=None)

    async def run() -> Any:
        return await agent.run(USER_PROMPT, usage_limits=limits)

    return Built(run, lambda r: r.output, turns)


# ----------------------------------------------------------------- openai-agents


async def build_openai_agents(n: int, stack: contextlib.AsyncExitStack, sqlite: bool) -> Built:
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
    script = [
        (text, [(cid, name, json.dumps(args)) for cid, name, args in calls], i, o)
        for text, calls, i, o in plain_script(n)
    ]
    turns = [0]

    class ScriptedModel(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            index = turns[0]
            turns[0] += 1
            text, calls, input_tokens, output_tokens = script[index]
            out: list[Any] = [
                ResponseOutputMessage(
                    type="message",
                    id=f"msg_{index}",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
                )
            ]
            out.extend(
                ResponseFunctionToolCall(
                    type="function_call",
                    id=f"fc_{call_id}",
                    call_id=call_id,
                    name=name,
                    arguments=arguments,
                    status="completed",
                )
                for call_id, name, arguments in calls
            )
            usage = Usage(
                requests=1,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                total_tokens=input_tokens + output_tokens,
            )
            return ModelResponse(output=out, usage=usage, response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
            raise NotImplementedError

    agent = Agent(
        name="bench",
        instructions=SYSTEM_PROMPT,
        model=ScriptedModel(),
        tools=[function_tool(f) for f in PLAIN_TOOLS],
    )
    config = RunConfig(tracing_disabled=True)
    session = None
    if sqlite:
        from agents import SQLiteSession

        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="oa-bench-"))
        session = SQLiteSession("bench-1", os.path.join(tmp, "bench.db"))
        stack.callback(session.close)

    async def run() -> Any:
        return await Runner.run(agent, USER_PROMPT, max_turns=n + 1, run_config=config,
                                session=session)

    return Built(run, lambda r: r.final_output, turns)


BUILDERS: dict[str, Callable[[int, contextlib.AsyncExitStack, bool], Awaitable[Built]]] = {
    "langgraph": build_langgraph,
    "pydantic-ai": build_pydantic_ai,
    "openai-agents": build_openai_agents,
}


# ----------------------------------------------------------------- one run


async def run_once(config: str, n: int) -> tuple[float, float]:
    """One timed run of N turns in ``config``; returns (CPU seconds, wall seconds)."""
    if config.startswith("prism"):
        return await scenario.run_once(n, "sqlite" if config.endswith("+sqlite") else "memory")
    framework, _, store = config.partition("+")
    async with contextlib.AsyncExitStack() as stack:
        built = await BUILDERS[framework](n, stack, store == "sqlite")
        calls_before = scenario.CALLS[0]
        gc.collect()
        cpu0 = time.process_time()
        wall0 = time.perf_counter()
        result = await built.run()
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
        text = built.text(result)
        calls = scenario.CALLS[0] - calls_before
    if text != FINAL_TEXT:
        raise RuntimeError(f"{config}: final text {text!r}")
    if built.turns[0] != n:
        raise RuntimeError(f"{config}: expected {n} model turns, got {built.turns[0]}")
    if calls != 2 * (n - 1):
        raise RuntimeError(f"{config}: expected {2 * (n - 1)} tool runs, got {calls}")
    return cpu, wall


def _reps(quick: bool, config: str, n: int) -> int:
    prism, other = (_QUICK_REPS if quick else _REPS).get(n, (5, 3))
    return prism if config.startswith("prism") else other


async def measure(configs: list[str], sizes: list[int], quick: bool) -> dict[str, Any]:
    for config in configs:  # warm-up: imports, first-use caches, the database code
        await run_once(config, 20)
    samples: dict[str, dict[int, list[tuple[float, float]]]] = {
        c: {n: [] for n in sizes} for c in configs
    }
    rounds = max(_reps(quick, c, n) for c in configs for n in sizes)
    for r in range(rounds):
        for n in sizes:
            for config in configs:
                if r >= _reps(quick, config, n):
                    continue
                await run_once(config, WARM_N)
                samples[config][n].append(await run_once(config, n))
        print(f"  round {r + 1}/{rounds}", file=sys.stderr, end="\r", flush=True)
    print(file=sys.stderr)
    out: dict[str, Any] = {}
    for config, by_n in samples.items():
        out[config] = {}
        for n, cell in by_n.items():
            cpu = [c / n * 1e6 for c, _ in cell]
            wall = [w / n * 1e6 for _, w in cell]
            out[config][str(n)] = {
                "median_cpu_us_per_turn": statistics.median(cpu),
                "median_wall_us_per_turn": statistics.median(wall),
                "min_cpu_us_per_turn": min(cpu),
                "runs": len(cell),
            }
    return out


def summarise(results: dict[str, Any], sizes: list[int]) -> dict[str, Any]:
    """Ratios like for like: rows without persistence against ``prism``, SQLite rows against
    ``prism+sqlite``; flatness N_max/N_min of CPU per turn."""
    lo, hi = str(min(sizes)), str(max(sizes))
    ratio: dict[str, dict[str, float | None]] = {}
    flat: dict[str, float | None] = {}
    for config, by_n in results.items():
        base = results.get("prism+sqlite" if config.endswith("+sqlite") else "prism", {})
        ratio[config] = {
            str(n): (
                by_n[str(n)]["median_cpu_us_per_turn"] / base[str(n)]["median_cpu_us_per_turn"]
                if str(n) in base
                else None
            )
            for n in sizes
        }
        flat[config] = by_n[hi]["median_cpu_us_per_turn"] / by_n[lo]["median_cpu_us_per_turn"]
    return {"ratio_to_prism": ratio, "flatness_nmax_over_nmin": flat}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 200])
    parser.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    parser.add_argument("--quick", action="store_true", help="fewer runs per cell")
    parser.add_argument("--json", default=None, help="write the result JSON here (- = stdout)")
    args = parser.parse_args()
    if any(n < 2 for n in args.sizes):
        parser.error("--sizes: at least 2 turns (N-1 tool turns, then the final text)")
    import importlib.util

    configs = [
        c for c in args.configs
        if importlib.util.find_spec(_MODULES.get(c.partition("+")[0], "prism")) is not None
    ]
    missing = [c for c in args.configs if c not in configs]
    sizes = scenario.payload_sizes()
    print("payload sizes (bytes):", file=sys.stderr)
    for key, value in sizes.items():
        print(f"  {key}: {value}", file=sys.stderr)
    results = asyncio.run(measure(configs, args.sizes, args.quick))
    payload = {
        "section": "realistic",
        "scenario": (
            "N-1 turns of ~200 B text + 2 parallel typed tool calls (~200 B JSON args, ~1 KB "
            "results), then a final text; ~2 KB system prompt; instant fake model"
        ),
        "sizes": args.sizes,
        "payload_sizes": sizes,
        "persistence": {c: PERSISTENCE[c] for c in (*configs, "pydantic-ai+sqlite")},
        "missing_frameworks": missing,
        "machine": machine(),
        "versions": versions(
            "prism-runtime", "pydantic-ai-slim", "openai-agents", "langgraph", "langchain",
            "langchain-core", "langgraph-checkpoint-sqlite", "aiosqlite",
        ),
        "results": results,
        **summarise(results, args.sizes),
    }
    if args.json is None:
        for config, by_n in results.items():
            row = "  ".join(
                f"N={n}: cpu {v['median_cpu_us_per_turn']:9.1f} wall "
                f"{v['median_wall_us_per_turn']:9.1f} us/turn"
                for n, v in by_n.items()
            )
            print(f"{config:>22}  {row}")
    else:
        emit_json(payload, args.json)


if __name__ == "__main__":
    main()
