"""Shared helpers of the comparison suite (``benchmarks/compare.py``).

A *script* is what every framework's fake model replays, turn by turn: a turn is either a tuple of
``(tool_name, arguments)`` tool calls or the final text. Each adapter turns the same script into its
framework's own fake model, so every framework runs the identical scenario.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

ToolCallSpec = tuple[str, dict[str, Any]]
Turn = tuple[ToolCallSpec, ...] | str
Script = list[Turn]


def tool_turns_script(turns: int) -> Script:
    """``turns - 1`` turns of one ``noop`` call each, then a text answer (scenario 1)."""
    script: Script = [(("noop", {"i": i}),) for i in range(turns - 1)]
    script.append("done")
    return script


def parallel_script(calls: int, tool: str = "sleep50") -> Script:
    """One turn with ``calls`` calls of ``tool``, then a text answer (scenario 4)."""
    return [tuple((tool, {"i": i}) for i in range(calls)), "done"]


class Capped(Exception):
    """Raised by a fake model when its run exceeded the time cap."""


class Counter:
    """Counts the model turns a framework requested; enforces the per-run time cap.

    Every fake model calls :meth:`tick` once per turn. Past ``deadline`` (a ``perf_counter``
    value) it raises :class:`Capped`, which ends the run wherever the framework is; the run is
    then reported as capped with the turns it completed. (No task or ``wait_for`` wraps the run,
    so the cap costs every framework the same single clock read per turn.)
    """

    __slots__ = ("capped", "deadline", "turns")

    def __init__(self, deadline: float = float("inf")) -> None:
        self.turns = 0
        self.deadline = deadline
        self.capped = False

    def tick(self) -> int:
        """Count one model turn and return its 0-based index."""
        if time.perf_counter() > self.deadline:
            self.capped = True
            raise Capped("run exceeded the time cap")
        index = self.turns
        self.turns = index + 1
        return index


@dataclass
class Sample:
    """One timed run."""

    wall_s: float
    cpu_s: float
    turns_done: int
    capped: bool = False


@dataclass
class Cell:
    """All samples of one (framework, size) measurement."""

    samples: list[Sample] = field(default_factory=list)

    @property
    def capped(self) -> bool:
        return any(s.capped for s in self.samples)

    def median_us_per_turn(self) -> float | None:
        values = [s.wall_s / s.turns_done * 1e6 for s in self.samples if s.turns_done]
        return statistics.median(values) if values else None

    def min_us_per_turn(self) -> float | None:
        values = [s.wall_s / s.turns_done * 1e6 for s in self.samples if s.turns_done]
        return min(values) if values else None

    def median_cpu_us_per_turn(self) -> float | None:
        values = [s.cpu_s / s.turns_done * 1e6 for s in self.samples if s.turns_done]
        return statistics.median(values) if values else None

    def median_us(self) -> float | None:
        values = [s.wall_s * 1e6 for s in self.samples]
        return statistics.median(values) if values else None

    def median_cpu_us(self) -> float | None:
        values = [s.cpu_s * 1e6 for s in self.samples]
        return statistics.median(values) if values else None


async def timed(
    make: Callable[[Counter], Any],
    *,
    warm: Callable[[Counter], Any] | None = None,
    warmups: int = 3,
    timeout_s: float | None = None,
) -> Sample:
    """Time one awaited run built by ``make(counter)``, in a warm steady state.

    ``make`` (and ``warm``) return a zero-argument coroutine function (the run); construction is
    not timed. Order: build the timed run and ``warmups`` runs of ``warm`` (default ``make``),
    ``gc.collect()``, await the warm runs, then time the run. The warm runs matter: on a shared
    2-core machine a run that follows other work (another framework's run, a GC pass, a sleep)
    is measured 2-4x slower than in steady state, because its code and data left the CPU caches;
    warming each framework right before its sample puts every framework in the same steady state
    — the state of the later turns of any long run. With ``timeout_s``, a run still going after
    that many seconds is stopped by its fake model (see :class:`Counter`) and reported as capped,
    with the turns it completed.
    """
    counter = Counter()
    run = make(counter)
    warm_runs = [(warm or make)(Counter()) for _ in range(warmups)]
    gc.collect()
    for warm_run in warm_runs:
        await warm_run()
    del warm_runs
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    if timeout_s is not None:
        counter.deadline = t0 + timeout_s
    try:
        await run()
    except Exception:
        if not counter.capped:
            raise
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    return Sample(wall_s=wall, cpu_s=cpu, turns_done=counter.turns, capped=counter.capped)


def rss_bytes() -> int:
    """Current resident set size of this process (Linux ``/proc``; else peak RSS)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # pragma: no cover - non-Linux
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


def versions(*dists: str) -> dict[str, str | None]:
    """Installed versions of the given distributions (``None`` when missing)."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for name in dists:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def emit_json(payload: dict[str, Any], path: str | None) -> None:
    """Write ``payload`` to ``path`` (``-``: stdout)."""
    text = json.dumps(payload, indent=2, sort_keys=True)
    if path in (None, "-"):
        print(text)
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None
