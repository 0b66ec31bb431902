"""Typed results on the embedded model: generate → validate → revise with ``pydantic_artifact``.

For a pydantic model with three fields (``str``, ``int``, ``list[str]``) and the loop's default
options (``max_revisions=3``, the provider's default ``max_tokens``), 10 runs with different
prompts and sampling seeds, per way of showing the model its schema:

* ``default``      — nothing extra: the runtime sends the factories' schema natively, which the
  embedded provider turns into a JSON-Schema grammar that constrains decoding;
* ``instructions`` — ``structured_output_mode="artifact-loop"``: the schema goes only into the
  system prompt (no grammar);
* ``hidden``       — the same parser and validator without their schema (what the loop did before
  it showed the schema): only the repair messages tell the model what is wrong.

Reported per mode: runs that ended with a validated artifact, drafts generated, drafts cut by the
token cap (provider stop reason ``max_tokens``), and the median wall time of a run. Not a timed
test; the machine is shared, so the times are indicative only.

Usage::

    python benchmarks/bench_gvr_local.py [--runs 10] [--modes default,instructions,hidden] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

import prism
from prism.artifacts import pydantic_artifact
from prism.providers import ProviderDefaults
from prism.providers.llama_cpp import LlamaCppProvider, create_local_provider
from prism.types import ProviderEvent, ProviderRequest

PROMPTS = (
    "Describe a fictional person who likes painting.",
    "Invent a character for a novel set in a small harbour town.",
    "Describe a retired teacher who collects stamps.",
    "Make up a person who works as a night-shift nurse.",
    "Describe a young chess player and what they enjoy.",
    "Invent a farmer who lives in the mountains.",
    "Describe a fictional astronaut preparing for a mission.",
    "Make up a musician who plays in a jazz band.",
    "Describe a student who loves mathematics and hiking.",
    "Invent a chef who runs a tiny restaurant.",
)


class Person(BaseModel):
    name: str
    age: int
    hobbies: list[str]


class CountingProvider:
    """The embedded provider, recording every turn's stop reason."""

    def __init__(self, inner: LlamaCppProvider) -> None:
        self.inner = inner
        self.id = inner.id
        self.stop_reasons: list[str | None] = []

    @property
    def defaults(self) -> ProviderDefaults:
        return self.inner.defaults

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        async for event in self.inner.generate(request):
            if event.type == "done":
                self.stop_reasons.append(event.stop_reason)
            yield event


@dataclass
class Tally:
    successes: int = 0
    drafts: int = 0
    cut: int = 0
    seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def _loop(mode: str) -> Any:
    callbacks = pydantic_artifact(Person)
    if mode == "default":
        return prism.generate_validate_revise_loop(**callbacks)
    if mode == "instructions":
        return prism.generate_validate_revise_loop(
            **callbacks, structured_output_mode="artifact-loop"
        )
    parser, validator = callbacks["parser"], callbacks["validator"]
    return prism.generate_validate_revise_loop(
        parser=lambda text, ctx: parser(text, ctx),
        validator=lambda value, ctx: validator(value, ctx),
    )


def run_mode(mode: str, runs: int) -> Tally:
    tally = Tally()
    for i in range(runs):
        provider = CountingProvider(create_local_provider(seed=1000 + i))
        agent = prism.create_agent(provider=provider, loop=_loop(mode))
        started = time.perf_counter()
        try:
            result = agent.create_session().run_sync(PROMPTS[i % len(PROMPTS)])
            if isinstance(result.artifact, Person):
                tally.successes += 1
        except prism.AgentRunError as exc:
            error = exc.result.error
            tally.failures.append(error.message[:80] if error is not None else "failed")
        tally.seconds.append(time.perf_counter() - started)
        tally.drafts += len(provider.stop_reasons)
        tally.cut += provider.stop_reasons.count("max_tokens")
        provider.inner.close()
        print(
            f"{mode} run {i + 1}: stop reasons {provider.stop_reasons}, "
            f"{tally.seconds[-1]:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--modes", default="default,instructions,hidden")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = {mode: run_mode(mode, args.runs) for mode in args.modes.split(",")}
    if args.json:
        print(json.dumps({
            mode: {
                "runs": args.runs, "successes": t.successes, "drafts": t.drafts,
                "drafts_cut_by_max_tokens": t.cut, "median_s": statistics.median(t.seconds),
                "failures": t.failures,
            }
            for mode, t in rows.items()
        }, indent=2))
        return
    print("| mode | validated artifacts | drafts | drafts cut by max_tokens | median s/run |")
    print("| --- | --- | --- | --- | --- |")
    for mode, t in rows.items():
        print(
            f"| {mode} | {t.successes}/{args.runs} | {t.drafts} | {t.cut} | "
            f"{statistics.median(t.seconds):.1f} |"
        )
    for mode, t in rows.items():
        for failure in t.failures:
            print(f"{mode}: {failure}")


if __name__ == "__main__":
    main()
