"""What an inspector's reads cost on a full SQLite store, and what keeping their summaries costs
a write.

Fills a SQLite store (a WAL file in a temporary directory) through the public store API with
``--sessions`` sessions (default 10,000; each: a user message and an answer, one run of one of
five agents on one of three models with its start and finish rows, three events and a
provider-turn usage row, a cost on every other one; every 50th session has a child session of an
agent tool) and one run of ``--turns`` turns (default 1,000; per turn: a tool call and its result
as entries, ten events of which five are message deltas, two tool-call rows, one usage row).
Then times, as the median of ``--repeat`` calls (µs), each read of
:class:`prism.inspection.InspectionReader`:

* ``list_session_summaries`` — the first page (50), a page deep in the listing (reached by
  cursor), pages filtered by agent, by status, by both (and the worst case: two filters that
  each match a fifth of the runs but no session together, which tests every session), by an
  agent no run has, by text, and a parent's child sessions;
* ``list_run_summaries`` — the first page, an agent's;
* ``read_ledger`` of the long run — all of it (reads of 1,000 rows until ``has_more`` is false)
  and one page of 1,000 from a cursor in the middle;
* ``read_entries`` of the long run's session — the first 1,000 and 1,000 after the middle;
* ``usage_report`` — by day, model and agent;
* for comparison, the store's older ``list_sessions(limit=50)``, which groups every entry.

Write costs (``--appends`` per measurement, interleaved over ``--rounds`` rounds, median µs per
statement on the store's own connection settings, no thread hop): a session append (the tip
compare-and-set statement) and the ledger inserts of a run row, an event, a ``turn_started``
event and a usage row, each on a database of schema 3 with its summary triggers and on the same
database with them dropped (what a write cost before schema 3).

Usage::

    python benchmarks/bench_inspection.py [--sessions 10000] [--turns 1000] [--repeat 21]
        [--appends 3000] [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from prism._util import new_id
from prism.events import (
    AgentFinishedEvent,
    MessageDeltaEvent,
    MessageFinishedEvent,
    ToolExecutionFinishedEvent,
    ToolExecutionMetadata,
    ToolExecutionStartedEvent,
    TurnFinishedEvent,
    TurnStartedEvent,
)
from prism.inspection import SessionFilter
from prism.ledger import (
    AgentEventRecord,
    ToolCallRecord,
    UsageRecord,
    finish_run_record,
    start_run_record,
)
from prism.store import new_session_entry
from prism.stores import SqliteStore
from prism.stores._sqlite_sessions import APPEND, append_params
from prism.types import (
    Message,
    ModelConfig,
    TextContent,
    ToolCallContent,
    ToolResult,
    Usage,
    tool_result_message,
)

AGENTS = ("support", "billing", "triage", "research", "ops")
MODELS = ("gpt-4o-mini", "claude-haiku", "smollm2")
STATUSES = ("succeeded", "succeeded", "succeeded", "failed", "suspended")
CHUNK = 256
"""Sessions written concurrently (their writes share the store's group commits)."""


def _ts(i: int) -> str:
    """A timestamp ``i`` seconds after a fixed start (so that every session has its own)."""
    day, rest = divmod(i, 86_400)
    hour, rest = divmod(rest, 3600)
    minute, second = divmod(rest, 60)
    return f"2025-01-{1 + day:02d}T{hour:02d}:{minute:02d}:{second:02d}.000Z"


def _event(sid: str, rid: str, ts: str, event: Any) -> AgentEventRecord:
    return AgentEventRecord(
        id=new_id("event"), session_id=sid, run_id=rid, type=event.type, timestamp=ts, event=event
    )


async def _session(store: SqliteStore, i: int, parent: tuple[str, str] | None = None) -> str:
    """One session with one finished run (``parent``: the calling run and its session)."""
    agent, model = AGENTS[i % len(AGENTS)], MODELS[i % len(MODELS)]
    status = STATUSES[i % len(STATUSES)]
    sid = f"{parent[0]}.call_{i}" if parent else new_id("session")
    rid = new_id("run")
    ts = _ts(2 * i)
    metadata = None
    if parent:
        metadata = {"parent_run": {"session_id": parent[1], "run_id": parent[0]}}
    text = f"Ticket {i}: customer {i % 97} asks about invoice {i * 7 % 1000} and a refund"
    first = new_session_entry(
        "message", session_id=sid, run_id=rid, timestamp=ts,
        message=Message(role="user", content=(TextContent(text=text),), metadata=metadata),
    )
    await store.append(first)
    answer = new_session_entry(
        "message", session_id=sid, run_id=rid, parent_id=first.id, timestamp=_ts(2 * i + 1),
        message=Message(role="assistant", content=(TextContent(text="Done. " * 20),)),
    )
    await store.append(answer, expected_parent_id=first.id)
    start = start_run_record(
        run_id=rid, session_id=sid, branch_id=None, started_at=ts, agent_id=agent,
        model=ModelConfig(provider="openai", model=model),
    )
    await store.append_run(start)
    await store.append_event(_event(sid, rid, ts, TurnStartedEvent(turn=1)))
    message = Message(role="assistant", content=(TextContent(text="Done."),))
    await store.append_event(_event(sid, rid, ts, MessageFinishedEvent(message=message)))
    cost = 0.0004 if i % 2 else None
    usage = Usage(input_tokens=900 + i % 300, output_tokens=60 + i % 40, cost=cost)
    await store.append_usage(UsageRecord(
        id=new_id("usage"), session_id=sid, run_id=rid, scope="provider_turn", usage=usage,
        timestamp=ts, turn=1, attempt=1, provider_id="openai", model=model,
    ))
    await store.append_event(_event(sid, rid, _ts(2 * i + 1), AgentFinishedEvent()))
    await store.append_run(finish_run_record(start, status=status,  # type: ignore[arg-type]
                                             finished_at=_ts(2 * i + 1)))
    if parent is None and i % 50 == 0:
        await _session(store, i + 1, (rid, sid))
    return sid


async def _long_run(store: SqliteStore, turns: int, at: int) -> tuple[str, str]:
    """One session with a run of ``turns`` tool turns; ``(session id, run id)``."""
    sid, rid = new_id("session"), new_id("run")
    start = start_run_record(
        run_id=rid, session_id=sid, branch_id=None, started_at=_ts(at), agent_id="research",
        model=ModelConfig(provider="openai", model="gpt-4o-mini"),
    )
    await store.append_run(start)
    first = new_session_entry(
        "message", session_id=sid, run_id=rid, timestamp=_ts(at),
        message=Message(role="user", content=(TextContent(text="Research this for me"),)),
    )
    await store.append(first)
    leaf = first.id
    for turn in range(1, turns + 1):
        ts = _ts(at + turn)
        call = ToolCallContent(id=f"call_{turn}", name="search", arguments={"q": f"query {turn}"})
        result = ToolResult(tool_call_id=call.id, name="search", value={"hits": ["x" * 200] * 4})
        events: list[Any] = [TurnStartedEvent(turn=turn)]
        events += [MessageDeltaEvent(content=TextContent(text="tok ")) for _ in range(5)]
        events.append(MessageFinishedEvent(message=Message(role="assistant", content=(call,))))
        events.append(ToolExecutionStartedEvent(call=call))
        meta = ToolExecutionMetadata(duration_ms=3, status="finished")
        events.append(ToolExecutionFinishedEvent(result=result, metadata=meta))
        events.append(TurnFinishedEvent(turn=turn))
        for event in events[:8]:
            await store.append_event(_event(sid, rid, ts, event))
        started = ToolCallRecord(
            id=new_id("toolcall"), session_id=sid, run_id=rid, tool_call_id=call.id,
            name="search", arguments=dict(call.arguments), status="started", started_at=ts,
        )
        await store.append_tool_call(started)
        for event in events[8:]:
            await store.append_event(_event(sid, rid, ts, event))
        await store.append_tool_call(ToolCallRecord(
            id=new_id("toolcall"), session_id=sid, run_id=rid, tool_call_id=call.id,
            name="search", arguments=dict(call.arguments), status="finished", started_at=ts,
            finished_at=ts, result=result,
        ))
        await store.append_usage(UsageRecord(
            id=new_id("usage"), session_id=sid, run_id=rid, scope="provider_turn",
            usage=Usage(input_tokens=2000 + 30 * turn, output_tokens=40), timestamp=ts,
            turn=turn, attempt=1, model="gpt-4o-mini",
        ))
        asked = new_session_entry(
            "message", session_id=sid, run_id=rid, parent_id=leaf, timestamp=ts,
            message=Message(role="assistant", content=(call,)),
        )
        await store.append(asked, expected_parent_id=leaf)
        answered = new_session_entry(
            "message", session_id=sid, run_id=rid, parent_id=asked.id, timestamp=ts,
            message=tool_result_message(result),
        )
        await store.append(answered, expected_parent_id=asked.id)
        leaf = answered.id
    await store.append_run(finish_run_record(start, status="succeeded",
                                             finished_at=_ts(at + turns)))
    return sid, rid


async def _median_us(repeat: int, call: Callable[[], Awaitable[Any]]) -> float:
    await call()  # warm
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)


async def bench_reads(path: Path, sessions: int, turns: int, repeat: int) -> dict[str, Any]:
    async with SqliteStore(path) as store:
        began = time.perf_counter()
        for start in range(0, sessions, CHUNK):
            count = min(CHUNK, sessions - start)
            await asyncio.gather(*(_session(store, 2 * (start + k)) for k in range(count)))
        long_session, long_run = await _long_run(store, turns, 4 * sessions + 10)
        fill_s = time.perf_counter() - began
        parent = (await store.list_session_summaries(
            filter=SessionFilter(text="Ticket 0:"), limit=1)).items[0].session_id
        cursor = None
        for _ in range(sessions // 100):  # half way down the listing
            cursor = (await store.list_session_summaries(cursor=cursor, limit=50)).next_cursor
        ledger_mid = None
        for _ in range(turns // 200):
            ledger_mid = (await store.read_ledger(long_run, after=ledger_mid, limit=1000)).cursor
        entries = await store.read_entries(long_session, limit=10_000)
        entry_mid = entries[len(entries) // 2].seq

        async def whole_ledger() -> int:
            rows, after = 0, None
            while True:
                part = await store.read_ledger(long_run, after=after, limit=1000)
                rows += len(part.rows)
                after = part.cursor
                if not part.has_more:
                    return rows

        ledger_rows = await whole_ledger()
        reads: dict[str, Callable[[], Awaitable[Any]]] = {
            "sessions: first page (50)": lambda: store.list_session_summaries(limit=50),
            f"sessions: page {sessions // 100 + 1} by cursor": lambda: (
                store.list_session_summaries(cursor=cursor, limit=50)),
            "sessions: agent filter": lambda: store.list_session_summaries(
                filter=SessionFilter(agent_id="billing"), limit=50),
            "sessions: status filter": lambda: store.list_session_summaries(
                filter=SessionFilter(status="failed"), limit=50),
            "sessions: agent + status filter": lambda: store.list_session_summaries(
                filter=SessionFilter(agent_id="billing", status="succeeded"), limit=50),
            "sessions: agent + status, none match (worst)": lambda: (
                store.list_session_summaries(
                    filter=SessionFilter(agent_id="billing", status="failed"), limit=50)),
            "sessions: an agent no run has": lambda: store.list_session_summaries(
                filter=SessionFilter(agent_id="nobody"), limit=50),
            "sessions: text filter": lambda: store.list_session_summaries(
                filter=SessionFilter(text="invoice 49"), limit=50),
            "sessions: top level only": lambda: store.list_session_summaries(
                filter=SessionFilter(top_level=True), limit=50),
            "sessions: a parent's children": lambda: store.list_session_summaries(
                filter=SessionFilter(parent_session_id=parent), limit=50),
            "get_session_summary": lambda: store.get_session_summary(long_session),
            "runs: first page (50)": lambda: store.list_run_summaries(limit=50),
            "runs: an agent's first page": lambda: store.list_run_summaries(
                agent_id="ops", limit=50),
            f"ledger: whole {turns}-turn run ({ledger_rows} rows)": whole_ledger,
            "ledger: 1000 rows from a mid cursor": lambda: store.read_ledger(
                long_run, after=ledger_mid, limit=1000),
            "ledger: with deltas, 1000 rows": lambda: store.read_ledger(
                long_run, limit=1000, include_deltas=True),
            "entries: first 1000": lambda: store.read_entries(long_session, limit=1000),
            "entries: 1000 after the middle": lambda: store.read_entries(
                long_session, after_seq=entry_mid, limit=1000),
            "usage_report by day": lambda: store.usage_report(group_by="day"),
            "usage_report by model": lambda: store.usage_report(group_by="model"),
            "usage_report by agent": lambda: store.usage_report(group_by="agent"),
            "list_sessions(limit=50) (older API)": lambda: store.list_sessions(limit=50),
        }
        timings = {name: round(await _median_us(repeat, call)) for name, call in reads.items()}
    return {"fill_s": round(fill_s, 1), "sessions": sessions, "turns": turns,
            "median_us": timings, "db_mb": _size_mb(path)}


def _size_mb(path: Path) -> float:
    return round(path.stat().st_size / 1e6, 1)


_TRIGGERS = (
    "prism_sessions_entry",
    "prism_run_summaries_run",
    "prism_run_summaries_usage",
    "prism_run_summaries_turn",
)


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, cached_statements=64)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def _write_rows(store_sql: Any, n: int) -> dict[str, list[tuple[str, tuple[Any, ...]]]]:
    """``n`` statements of each write kind, as ``(sql, params)``."""
    sid = new_id("session")
    rid = new_id("run")
    text = ("The quick brown fox jumps over the lazy dog. " * 5)[:200]
    out: dict[str, list[tuple[str, tuple[Any, ...]]]] = {
        "session append": [], "run row": [], "event": [], "turn_started event": [],
        "usage row": [],
    }
    parent = None
    for i in range(n):
        entry = new_session_entry(
            "message", session_id=sid, parent_id=parent, run_id=rid,
            message=Message(role="assistant" if i else "user", content=(TextContent(text=text),)),
        )
        out["session append"].append((APPEND, append_params(entry, parent, None, False)))
        parent = entry.id
        run = start_run_record(run_id=f"{rid}_{i % 50}", session_id=sid, branch_id=None,
                               agent_id="bench", model=ModelConfig(provider="p", model="m"))
        out["run row"].append((store_sql.insert_run, (run.id, sid, run.status,
                                                      json.dumps(run.to_dict()))))
        for kind, event in (("event", MessageDeltaEvent(content=TextContent(text="tok "))),
                            ("turn_started event", TurnStartedEvent(turn=i))):
            record = _event(sid, rid, _ts(i), event)
            out[kind].append((store_sql.insert_event, (record.id, sid, rid, record.type,
                                                        json.dumps(record.to_dict()))))
        usage = UsageRecord(id=new_id("usage"), session_id=sid, run_id=rid, scope="provider_turn",
                            usage=Usage(input_tokens=900, output_tokens=60, cost=0.001),
                            timestamp=_ts(i), turn=i, model="m")
        out["usage row"].append((store_sql.insert_usage, (
            usage.id, sid, rid, usage.scope, usage.timestamp, usage.model, 900, 60, 0.001,
            json.dumps(usage.to_dict()))))
    return out


async def bench_writes(folder: Path, n: int, rounds: int) -> dict[str, dict[str, float]]:
    """Median µs per write statement with and without the schema-3 summary triggers."""
    paths = {"with summaries": folder / "on.db", "without (before)": folder / "off.db"}
    for path in paths.values():
        async with SqliteStore(path):
            pass
    off = _connect(paths["without (before)"])
    for name in _TRIGGERS:
        off.execute(f"DROP TRIGGER {name}")
    off.close()
    samples: dict[str, dict[str, list[float]]] = {p: {} for p in paths}
    for _ in range(rounds):
        for label, path in paths.items():
            conn = _connect(path)
            for kind, statements in _write_rows(SqliteStore._ledger_sql, n).items():
                times = []
                for sql, params in statements:
                    start = time.perf_counter()
                    conn.execute(sql, params)
                    times.append((time.perf_counter() - start) * 1e6)
                samples[label].setdefault(kind, []).append(statistics.median(times))
            conn.close()
    return {label: {k: round(statistics.median(v), 1) for k, v in kinds.items()}
            for label, kinds in samples.items()}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=21, help="timed calls per read")
    parser.add_argument("--appends", type=int, default=3000, help="statements per write kind")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved write rounds")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        reads = await bench_reads(folder / "inspect.db", args.sessions, args.turns, args.repeat)
        writes = await bench_writes(folder, args.appends, args.rounds)
    if args.json:
        print(json.dumps({"reads": reads, "writes": writes}, indent=2))
        return
    print(f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}; "
          f"{reads['sessions']} sessions + a {reads['turns']}-turn run, filled through the store "
          f"API in {reads['fill_s']} s ({reads['db_mb']} MB)")
    print(f"\n{'read':48} {'median µs':>10}")
    for name, us in reads["median_us"].items():
        print(f"{name:48} {us:>10}")
    print(f"\n{'write statement (µs, median)':30} {'with summaries':>15} {'without':>9} {'+µs':>7}")
    on, off = writes["with summaries"], writes["without (before)"]
    for kind in on:
        print(f"{kind:30} {on[kind]:>15} {off[kind]:>9} {on[kind] - off[kind]:>7.1f}")


if __name__ == "__main__":
    asyncio.run(main())
