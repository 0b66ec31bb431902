"""Profile prism's per-turn path: the ``turns`` scenario of the comparison suite under a profiler.

Builds the runs first (construction is not profiled), warms up, then profiles ``--runs`` runs of
``--turns`` turns with pyinstrument (default) or cProfile.

Usage::

    python benchmarks/profile_turns.py [--turns 1000] [--runs 3] [--cprofile] [--events]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
from typing import Any

from _common import Counter, tool_turns_script
from _frameworks import build_prism


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cprofile", action="store_true")
    parser.add_argument("--events", action="store_true", help="with a draining subscriber")
    parser.add_argument("--limit", type=int, default=40, help="cProfile rows")
    args = parser.parse_args()
    for _ in range(3):
        await build_prism(tool_turns_script(20), Counter(), observed=args.events)()
    runs = [
        build_prism(tool_turns_script(args.turns), Counter(), observed=args.events)
        for _ in range(args.runs)
    ]
    profiler: Any
    if args.cprofile:
        profiler = cProfile.Profile()
        profiler.enable()
        for run in runs:
            await run()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.limit)
        return
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0002, async_mode="disabled")
    profiler.start()
    for run in runs:
        await run()
    profiler.stop()
    print(profiler.output_text(unicode=True, color=False, show_all=False))


if __name__ == "__main__":
    asyncio.run(main())
