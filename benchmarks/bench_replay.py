"""Replayed eval cases end to end: N captured cases of two tool calls each, run with
``run_eval(replay=True)``, in wall and CPU seconds.

The recorded run is the scripted agent of a support desk (a ~300-byte system prompt, two tools)
answering in three provider turns: a text delta and one tool call, a second tool call, then the
answer; each turn reports its usage. It is stored in a SQLite store with its ledger (so request
rows are recorded), captured once with ``prism.evals.capture_run``, and the case is written N times
(distinct names) to a JSONL dataset. Timed, end to end: reading the dataset file, then
``run_eval`` of every case against its recording (the socket guard on, the runs' sessions in the
default memory store), with ``--concurrency`` runs at once. Each case is checked: its replay
passed.

Usage::

    taskset -c 0 python benchmarks/bench_replay.py [--cases 1000] [--concurrency 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import prism
from prism.evals import Dataset, capture_run, load_dataset, run_eval, save_dataset
from prism.stores import SqliteStore
from prism.testing import (
    create_mock_provider,
    provider_done,
    provider_text_delta,
    provider_tool_call,
)
from prism.types import Usage

SYSTEM = (
    "You are the support desk of an outdoor shop. Look up the order before you answer, then "
    "check the stock of the item the customer asks about. Answer in two sentences at most, "
    "quote order numbers exactly and never promise a delivery date the carrier did not give."
)


@prism.tool
def find_order(customer: str) -> dict[str, Any]:
    """Find the latest order of a customer."""
    return {"order": "A-1042", "customer": customer, "status": "shipped", "items": ["tent"]}


@prism.tool
def check_stock(sku: str) -> dict[str, Any]:
    """Stock of one item."""
    return {"sku": sku, "in_stock": 4, "warehouse": "DE-HAM-1"}


def agent(turns: list[list[Any]] | None = None, store: Any = None) -> prism.Agent:
    return prism.create_agent(
        name="desk",
        model={"provider": "mock", "model": "bench-replay"},
        provider=create_mock_provider(turns=turns or []),
        instructions=SYSTEM,
        tools=[find_order, check_stock],
        store=store,
        run_ledger=store,
    )


async def recorded_case(folder: Path) -> Any:
    turns = [
        [
            provider_text_delta("Let me look that up."),
            provider_tool_call("c1", "find_order", {"customer": "C-77"}),
            provider_done(Usage(input_tokens=180, output_tokens=20)),
        ],
        [
            provider_tool_call("c2", "check_stock", {"sku": "tent"}),
            provider_done(Usage(input_tokens=260, output_tokens=15)),
        ],
        [
            provider_text_delta("Order A-1042 has shipped; 4 more tents are in stock."),
            provider_done(Usage(input_tokens=330, output_tokens=18)),
        ],
    ]
    async with SqliteStore(str(folder / "recorded.db")) as store:
        result = await agent(turns, store).create_session().run("Where is my tent order?")
        assert result.status == "succeeded", result.error
        captured = await capture_run(store, result.run_id, name="case")
    assert captured.warnings == (), captured.warnings
    return captured.case


def write_dataset(cases: list[Any], path: Path) -> int:
    """Write the cases as a JSONL dataset; its size in bytes."""
    save_dataset(Dataset(name="replay-bench", cases=cases), path)
    return path.stat().st_size


async def one_round(path: Path, cases: int, concurrency: int) -> tuple[float, float]:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    dataset = load_dataset(path)
    report = await run_eval(agent(), dataset, replay=True, concurrency=concurrency)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    if not report.passed or len(report.cases) != cases:
        raise RuntimeError(report.format_text(transcripts=False)[:2000])
    return wall, cpu


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="prism-bench-replay-") as tmp:
        folder = Path(tmp)
        case = await recorded_case(folder)
        path = folder / "cases.jsonl"
        copies = [dataclasses.replace(case, name=f"case-{i:05d}") for i in range(args.cases)]
        size = write_dataset(copies, path)
        await one_round(path, args.cases, args.concurrency)  # warm-up
        walls, cpus = [], []
        for _ in range(args.rounds):
            wall, cpu = await one_round(path, args.cases, args.concurrency)
            walls.append(wall)
            cpus.append(cpu)
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    print(
        f"{args.cases} replayed cases (2 tool calls, 3 provider turns each; dataset "
        f"{size / 1e6:.1f} MB; concurrency {args.concurrency}; CPUs {affinity}): "
        f"median {statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU "
        f"over {args.rounds} rounds (min {min(walls):.2f} s)"
    )


if __name__ == "__main__":
    asyncio.run(main())
