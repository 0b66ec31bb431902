"""Scenario 3: validate-and-revise with k = 0..3 invalid drafts before a valid one, in one process.

The artifact is a pydantic model ``Person(name: str, age: int)``; an invalid draft is
``{"name": "Ada", "age": "old"}`` (``age`` is not an integer), the valid one
``{"name": "Ada", "age": 36}``. Each framework gets a revision budget of 3 and its fake model
returns k invalid drafts, then the valid one, instantly. Reported: median µs per run (process CPU
time by default, wall time too; agent construction excluded) for each k, the cost of one revision cycle (slope from k=0 to k=3), and
each framework's ratio to prism.

* ``prism``: ``GenerateValidateReviseLoopOptions(**pydantic_artifact(Person), max_revisions=3)``
  (drafts are text; parse JSON → ``model_validate`` → repair message → revise), scripted provider.
* ``pydantic-ai``: ``Agent(FunctionModel(...), output_type=Person, retries={"output": 3})``
  (pydantic-ai's default tool output: drafts are ``final_result`` tool calls).
* ``instructor``: ``instructor.from_openai(AsyncOpenAI(...))`` with ``chat.completions.create``
  replaced by a coroutine returning ``ChatCompletion`` objects (``Mode.TOOLS``, instructor's
  default; no network), ``max_retries=3``.
* ``bare``: a hand-made loop — ``model_validate_json``, on error append the error text, retry.

Usage::

    python benchmarks/compare_gvr.py [--repeat 41] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pydantic
from _common import Cell, Counter, emit_json, machine, timed, versions

INVALID = '{"name": "Ada", "age": "old"}'
VALID = '{"name": "Ada", "age": 36}'
BUDGET = 3
KS = (0, 1, 2, 3)


class Person(pydantic.BaseModel):
    name: str
    age: int


def drafts(k: int) -> list[str]:
    return [INVALID] * k + [VALID]


RunFn = Callable[[], Awaitable[Any]]


def build_bare(k: int, counter: Counter) -> RunFn:
    script = drafts(k)

    async def model(messages: list[dict[str, Any]]) -> str:
        return script[counter.tick()]

    async def run() -> Person:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Invent a person."}]
        for _ in range(BUDGET + 1):
            text = await model(messages)
            messages.append({"role": "assistant", "content": text})
            try:
                return Person.model_validate_json(text)
            except pydantic.ValidationError as exc:
                messages.append({"role": "user", "content": f"Fix these errors: {exc}"})
        raise RuntimeError("no valid draft")

    return run


def build_prism(k: int, counter: Counter) -> RunFn:
    import prism
    from prism.artifacts import pydantic_artifact
    from prism.testing import provider_done, provider_text_delta

    script = drafts(k)

    class ScriptedProvider:
        id = "scripted"

        def generate(self, request: Any) -> Any:
            return self._replay(script[counter.tick()])

        async def _replay(self, text: str) -> Any:
            yield provider_text_delta(text)
            yield provider_done(prism.Usage(input_tokens=1, output_tokens=1))

    agent = prism.create_agent(
        model={"provider": "scripted", "model": "bench"}, provider=ScriptedProvider()
    )
    session = agent.create_session()
    options = prism.GenerateValidateReviseLoopOptions(
        **pydantic_artifact(Person), max_revisions=BUDGET
    )

    async def run() -> Any:
        result = await session.run("Invent a person.", loop=options)
        assert isinstance(result.artifact, Person)
        return result

    return run


def build_pydantic_ai(k: int, counter: Counter) -> RunFn:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage

    script = drafts(k)

    async def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        index = counter.tick()
        name = info.output_tools[0].name
        return ModelResponse(
            parts=[ToolCallPart(name, script[index], tool_call_id=f"call_{index}")],
            usage=RequestUsage(input_tokens=1, output_tokens=1),
        )

    agent = Agent(FunctionModel(model), output_type=Person, retries={"output": BUDGET})

    async def run() -> Any:
        result = await agent.run("Invent a person.")
        assert isinstance(result.output, Person)
        return result

    return run


def build_instructor(k: int, counter: Counter) -> RunFn:
    import instructor
    import openai
    from openai.types.chat import ChatCompletion

    script = drafts(k)

    async def create(**kwargs: Any) -> ChatCompletion:
        index = counter.tick()
        return ChatCompletion.model_validate(
            {
                "id": f"chatcmpl_{index}",
                "object": "chat.completion",
                "created": 0,
                "model": "fake",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": f"call_{index}",
                                    "type": "function",
                                    "function": {"name": "Person", "arguments": script[index]},
                                }
                            ],
                        },
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    raw = openai.AsyncOpenAI(api_key="sk-benchmark", base_url="http://127.0.0.1:9/v1")
    raw.chat.completions.create = create  # type: ignore[method-assign]
    client = instructor.from_openai(raw)

    async def run() -> Any:
        person = await client.create(
            response_model=Person,
            messages=[{"role": "user", "content": "Invent a person."}],
            max_retries=BUDGET,
            model="fake",
        )
        assert isinstance(person, Person)
        return person

    return run


BUILDERS: dict[str, Callable[[int, Counter], RunFn]] = {
    "bare": build_bare,
    "prism": build_prism,
    "pydantic-ai": build_pydantic_ai,
    "instructor": build_instructor,
}
_MODULES = {"pydantic-ai": "pydantic_ai", "instructor": "instructor"}


async def measure(frameworks: list[str], repeat: int) -> dict[str, dict[int, Cell]]:
    cells = {fw: {k: Cell() for k in KS} for fw in frameworks}
    for fw in frameworks:
        for k in KS:  # warm-up, and check the scenario does what it says
            counter = Counter()
            await BUILDERS[fw](k, counter)()
            if counter.turns != k + 1:
                raise AssertionError(f"{fw}: k={k} made {counter.turns} model calls, not {k + 1}")
    for r in range(repeat):
        for k in KS:
            for fw in frameworks:

                def make(counter: Counter, fw: str = fw, k: int = k) -> RunFn:
                    return BUILDERS[fw](k, counter)

                cells[fw][k].samples.append(await timed(make))
        print(f"  round {r + 1}/{repeat}", file=sys.stderr, end="\r", flush=True)
    print(file=sys.stderr)
    return cells


def summarise(cells: dict[str, dict[int, Cell]], metric: str = "cpu") -> dict[str, Any]:
    """Per-k medians; ``median_us_per_run`` (and every ratio) uses ``metric``."""
    results: dict[str, Any] = {}
    for fw, by_k in cells.items():
        wall = {str(k): by_k[k].median_us() for k in KS}
        cpu = {str(k): by_k[k].median_cpu_us() for k in KS}
        us = cpu if metric == "cpu" else wall
        a, b = us[str(KS[0])], us[str(KS[-1])]
        results[fw] = {
            "median_us_per_run": us,
            "median_wall_us_per_run": wall,
            "median_cpu_us_per_run": cpu,
            "us_per_revision": (b - a) / (KS[-1] - KS[0]) if a and b else None,
            "runs": len(by_k[KS[0]].samples),
        }
    prism = results.get("prism")
    ratios = {
        fw: {
            k: (v / prism["median_us_per_run"][k]) if prism and v else None
            for k, v in r["median_us_per_run"].items()
        }
        for fw, r in results.items()
    }
    return {"results": results, "ratio_to_prism": ratios}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=41)
    parser.add_argument("--frameworks", nargs="+", default=list(BUILDERS))
    parser.add_argument("--json", default=None)
    parser.add_argument("--metric", choices=("cpu", "wall"), default="cpu")
    args = parser.parse_args()
    frameworks = [
        fw for fw in args.frameworks
        if fw not in _MODULES or importlib.util.find_spec(_MODULES[fw]) is not None
    ]
    cells = asyncio.run(measure(frameworks, args.repeat))
    payload = {
        "section": "gvr",
        "scenario": "k invalid drafts then a valid one; revision budget 3; instant fake model",
        "ks": list(KS),
        "metric": args.metric,
        "missing_frameworks": [fw for fw in args.frameworks if fw not in frameworks],
        "machine": machine(),
        "versions": versions("prism-runtime", "pydantic-ai-slim", "instructor", "pydantic"),
        **summarise(cells, args.metric),
    }
    if args.json is None:
        print(json.dumps(payload["results"], indent=2))
    else:
        emit_json(payload, args.json)


if __name__ == "__main__":
    main()
