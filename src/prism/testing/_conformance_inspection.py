"""Inspection conformance suite: what an inspector reads matches what was written.

[`run_inspection_conformance()`][prism.testing._conformance_inspection.run_inspection_conformance] fills a fresh store through its write protocols (session
appends, the run ledger, durable run envelopes as checkpoints) with a small, fully known world —
sessions of several agents and models, a failed and a succeeded run, a child session of an agent
tool, a durable run known only from its envelope, usage with and without cost on two days — and
checks every read of ``InspectionReader`` against it: summaries and
totals, paging across pages, every session filter, runs across sessions, a run's ledger merged
in append order and continued from a cursor, entries after a sequence number, usage grouped by
day, model and agent, and the typed errors of bad arguments.

The world's timestamps are fixed (in 2021) except a checkpoint's, which the store sets to now,
so a durable run's envelope is always the newest word on its run.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from prism._util import maybe_await, new_id
from prism.checkpoints import AGENT_RUN_NAMESPACE
from prism.errors import PrismConfigError
from prism.events import (
    AgentFinishedEvent,
    AgentStartedEvent,
    MessageDeltaEvent,
    MessageFinishedEvent,
    ToolExecutionFinishedEvent,
    ToolExecutionMetadata,
    TurnStartedEvent,
)
from prism.inspection import LedgerRow, RunSummary, SessionFilter, SessionSummary
from prism.ledger import (
    AgentEventRecord,
    RunRecord,
    ToolCallRecord,
    UsageRecord,
    finish_run_record,
    start_run_record,
)
from prism.session_entry import SessionEntry, new_session_entry
from prism.testing._conformance_checks import check, expect
from prism.types import ErrorInfo, Message, ModelConfig, TextContent, ToolResult, Usage

__all__ = ["run_inspection_conformance"]

_DAY1: Final = "2021-03-01"
_DAY2: Final = "2021-03-02"


def _at(day: str, minute: int, second: int = 0) -> str:
    return f"{day}T10:{minute:02d}:{second:02d}.000Z"


@dataclass
class _World:
    """What the suite wrote."""

    store: Any
    ids: dict[str, str] = field(default_factory=dict)
    """Named sessions and runs."""
    sessions: list[str] = field(default_factory=list)
    """Every session id written."""
    entries: dict[str, list[SessionEntry]] = field(default_factory=dict)
    """Each session's entries in append order."""
    ledger: list[tuple[str, Any]] = field(default_factory=list)
    """``(kind, record)`` of the ledger rows of run ``a1`` in the order they must be read."""


async def run_inspection_conformance(make_store: Callable[[], Awaitable[object]]) -> None:
    """Check that a store's inspection reads match what was written to it.

    Args:
        make_store: Returns a new, empty, open store implementing
            [`SessionStore`][prism.store.SessionStore], [`CheckpointStore`][prism.checkpoints.CheckpointStore],
            ``RunLedger`` and ``InspectionReader``.
            The suite calls it twice and closes each store it got (``aclose()``, when the store
            has one).

    Raises:
        AssertionError: the first deviation, with a message naming the requirement.
    """
    empty: Any = await make_store()
    try:
        await _check_empty(empty)
    finally:
        await _close(empty)
    store: Any = await make_store()
    try:
        world = await _populate(store)
        await _check_session_summaries(world)
        await _check_session_paging_and_filters(world)
        await _check_runs(world)
        await _check_ledger(world)
        await _check_entries(world)
        await _check_usage(world)
        await _check_errors(world)
        await _check_ledger_continuation(world)
    finally:
        await _close(store)


async def _close(store: Any) -> None:
    close = getattr(store, "aclose", None)
    if callable(close):
        await maybe_await(close())


# --------------------------------------------------------------------------- the world


def _user(text: str, metadata: dict[str, Any] | None = None) -> Message:
    return Message(role="user", content=(TextContent(text=text),), metadata=metadata)


def _assistant(text: str) -> Message:
    return Message(role="assistant", content=(TextContent(text=text),))


async def _session(
    world: _World, name: str, session_id: str, messages: Sequence[tuple[Message, str]]
) -> None:
    """Append ``messages`` (each with its timestamp) as one branch of a new session."""
    world.ids[name] = session_id
    world.sessions.append(session_id)
    chain: list[SessionEntry] = []
    for message, ts in messages:
        entry = new_session_entry(
            "message",
            session_id=session_id,
            parent_id=chain[-1].id if chain else None,
            message=message,
            timestamp=ts,
        )
        await world.store.append(entry, expected_parent_id=entry.parent_id)
        chain.append(entry)
    world.entries[session_id] = chain


async def _run(
    world: _World,
    name: str,
    session: str,
    *,
    agent: str,
    model: str,
    started: str,
    finished: str,
    status: Any,
    error: ErrorInfo | None = None,
    stop_reason: str | None = None,
) -> RunRecord:
    """Write a run's start and finish rows; returns the start row."""
    run_id = world.ids[name] = new_id("run")
    start = start_run_record(
        run_id=run_id,
        session_id=world.ids[session],
        branch_id=None,
        model=ModelConfig(provider="mock", model=model),
        started_at=started,
        agent_id=agent,
    )
    await world.store.append_run(start)
    finish = finish_run_record(
        start, status=status, error=error, stop_reason=stop_reason, finished_at=finished
    )
    await world.store.append_run(finish)
    return start


async def _usage(
    world: _World,
    run: str,
    session: str,
    ts: str,
    tokens: tuple[int, int],
    cost: float | None,
    model: str | None,
    scope: Any = "provider_turn",
) -> UsageRecord:
    record = UsageRecord(
        id=new_id("usage"),
        session_id=world.ids[session],
        run_id=world.ids[run],
        scope=scope,
        usage=Usage(input_tokens=tokens[0], output_tokens=tokens[1], cost=cost),
        timestamp=ts,
        turn=1 if scope == "provider_turn" else None,
        model=model,
    )
    await world.store.append_usage(record)
    return record


async def _envelope(
    world: _World, run_id: str, session_id: str, status: str, agent: str, version: int
) -> None:
    """Save a durable run's envelope (the fields an inspector reads)."""
    await world.store.save_checkpoint(
        namespace=AGENT_RUN_NAMESPACE,
        key=run_id,
        value={
            "agent_id": agent,
            "run_id": run_id,
            "session_id": session_id,
            "model": {"provider": "mock", "model": "m-big"},
            "status": status,
            "counters": {"turns": version},
        },
        version=version,
        expected_version=version - 1,
    )


async def _populate(store: Any) -> _World:
    world = _World(store)
    # Session A: two runs of agent "alpha" on m-big; the latest failed. Cost on run a1 only.
    await _session(
        world,
        "A",
        new_id("session"),
        [
            (_user("Refund the ORDER 17 please"), _at(_DAY1, 0)),
            (_assistant("On it."), _at(_DAY1, 2)),
            (_user("And the other one?"), _at(_DAY1, 5)),
            (_assistant("Failed."), _at(_DAY1, 8)),
        ],
    )
    a1 = await _run(
        world,
        "a1",
        "A",
        agent="alpha",
        model="m-big",
        started=_at(_DAY1, 1, 0),
        finished=_at(_DAY1, 1, 10),
        status="succeeded",
        stop_reason="end_turn",
    )
    await _ledger_of_a1(world, a1)
    failure = ErrorInfo(message="provider said no", code="ERR_PRISM_PROVIDER")
    await _run(
        world,
        "a2",
        "A",
        agent="alpha",
        model="m-big",
        started=_at(_DAY1, 6),
        finished=_at(_DAY1, 7),
        status="failed",
        error=failure,
    )
    world.ids["a2_error"] = failure.message
    await _usage(world, "a2", "A", _at(_DAY2, 6), (7, 3), None, None)
    # Session B: one run of agent "beta" on m-small, no cost; its ledger says suspended, its
    # (newer) envelope says succeeded.
    await _session(
        world,
        "B",
        new_id("session"),
        [(_user("What is 17 * 23?"), _at(_DAY1, 20)), (_assistant("391"), _at(_DAY1, 22))],
    )
    await _run(
        world,
        "b1",
        "B",
        agent="beta",
        model="m-small",
        started=_at(_DAY1, 21),
        finished=_at(_DAY1, 21, 30),
        status="suspended",
    )
    await _usage(world, "b1", "B", _at(_DAY2, 21), (5, 5), None, "m-small")
    await _envelope(world, world.ids["b1"], world.ids["B"], "succeeded", "beta", 1)
    # The child session of run a1's agent-tool call "call_1": agent "helper".
    child = f"{world.ids['a1']}.call_1"
    link = {"session_id": world.ids["A"], "run_id": world.ids["a1"], "tool_call_id": "call_1"}
    await _session(
        world,
        "child",
        child,
        [
            (_user("Find that refund", {"parent_run": link}), _at(_DAY1, 1, 4)),
            (_assistant("found"), _at(_DAY1, 1, 6)),
        ],
    )
    await _run(
        world,
        "c1",
        "child",
        agent="helper",
        model="m-big",
        started=_at(_DAY1, 1, 4),
        finished=_at(_DAY1, 1, 7),
        status="succeeded",
        stop_reason="end_turn",
    )
    await _usage(world, "c1", "child", _at(_DAY1, 1, 5), (1, 1), 0.125, "m-big")
    # Session D: a durable run known only from its envelope (running, then suspended).
    await _session(world, "D", new_id("session"), [(_user("Approve me"), _at(_DAY1, 30))])
    world.ids["d1"] = durable = new_id("run")
    await _envelope(world, durable, world.ids["D"], "running", "gamma", 1)
    await _envelope(world, durable, world.ids["D"], "suspended", "gamma", 2)
    await _envelope(world, durable, world.ids["D"], "suspended", "gamma", 3)
    # Sessions with entries only, for paging.
    for i in range(7):
        await _session(
            world,
            f"F{i}",
            new_id("session"),
            [(_user(f"filler {i}"), _at(_DAY1, 40 + i)), (_assistant("ok"), _at(_DAY1, 50 + i))],
        )
    return world


async def _ledger_of_a1(world: _World, start: RunRecord) -> None:
    """Run a1's ledger rows, written table by table in an order that is not the read order,
    with record times that give the read order; the start row was written already."""
    sid, rid = start.session_id, start.id
    day = _DAY1
    ledger: list[tuple[int, str, Any]] = [(0, "run", start)]

    def event(second: int, ev: Any) -> None:
        record = AgentEventRecord(
            id=new_id("event"),
            session_id=sid,
            run_id=rid,
            type=ev.type,
            timestamp=_at(day, 1, second),
            event=ev,
        )
        ledger.append((second, "event", record))

    event(0, AgentStartedEvent(session_id=sid, run_id=rid))  # same time as the start row
    event(1, TurnStartedEvent(session_id=sid, run_id=rid, turn=1))
    event(2, MessageDeltaEvent(session_id=sid, run_id=rid, content=TextContent(text="Look")))
    event(3, MessageDeltaEvent(session_id=sid, run_id=rid, content=TextContent(text="ing")))
    message = Message(role="assistant", content=(TextContent(text="Looking"),))
    event(5, MessageFinishedEvent(session_id=sid, run_id=rid, message=message))
    result = ToolResult(tool_call_id="call_1", name="helper", value={"found": True})
    meta = ToolExecutionMetadata(duration_ms=1000, status="finished")
    event(8, ToolExecutionFinishedEvent(session_id=sid, run_id=rid, result=result, metadata=meta))
    event(9, AgentFinishedEvent(session_id=sid, run_id=rid))
    for record in [r for _, kind, r in ledger if kind == "event"]:
        await world.store.append_event(record)
    call = ToolCallRecord(
        id=new_id("toolcall"),
        session_id=sid,
        run_id=rid,
        tool_call_id="call_1",
        name="helper",
        arguments={"input": "Find that refund"},
        status="started",
        started_at=_at(day, 1, 6),
    )
    done = dataclasses.replace(
        call, id=new_id("toolcall"), status="finished", finished_at=_at(day, 1, 7), result=result
    )
    for second, record in ((6, call), (7, done)):
        await world.store.append_tool_call(record)
        ledger.append((second, "tool_call", record))
    for second, tokens, cost in ((4, (10, 5), 0.25), (8, (20, 10), 0.5)):
        usage = await _usage(world, "a1", "A", _at(day, 1, second), tokens, cost, "m-big")
        ledger.append((second, "usage", usage))
    total = await _usage(world, "a1", "A", _at(day, 1, 10), (30, 15), None, None, "run_total")
    ledger.append((10, "usage", total))
    # the finish row (same time as the run-total usage) was written by _run; it comes last
    finish = finish_run_record(
        start, status="succeeded", stop_reason="end_turn", finished_at=_at(day, 1, 10)
    )
    ledger.append((10, "run_finish", finish))
    rank = {"run": 0, "event": 1, "tool_call": 2, "usage": 3, "run_finish": 4}
    ledger.sort(key=lambda item: (item[0], rank[item[1]]))  # stable: append order within
    world.ledger = [("run" if k == "run_finish" else k, r) for _, k, r in ledger]


# --------------------------------------------------------------------------- checks


async def _all_sessions(store: Any, flt: SessionFilter | None = None) -> list[SessionSummary]:
    page = await store.list_session_summaries(filter=flt, limit=1000)
    check(page.next_cursor is None, "a page holding every session has no next cursor")
    return list(page.items)


async def _check_empty(store: Any) -> None:
    page = await store.list_session_summaries()
    check(page.items == () and page.next_cursor is None, "an empty store lists no session")
    runs = await store.list_run_summaries()
    check(runs.items == () and runs.next_cursor is None, "an empty store lists no run")
    check(await store.get_session_summary("nope") is None, "an unknown session has no summary")
    check(await store.get_run_summary("nope") is None, "an unknown run has no summary")
    ledger = await store.read_ledger("nope")
    check(ledger.rows == () and isinstance(ledger.cursor, str), "an unknown run has no rows")
    check(list(await store.read_entries("nope")) == [], "an unknown session has no entries")
    for group in ("day", "model", "agent"):
        check(list(await store.usage_report(group_by=group)) == [], "no usage, no buckets")


async def _check_session_summaries(world: _World) -> None:
    store, ids = world.store, world.ids
    listed = await _all_sessions(store)
    check(
        sorted(s.session_id for s in listed) == sorted(world.sessions),
        f"every session is listed once: {len(listed)} of {len(world.sessions)}",
    )
    keys = [(s.updated_at, s.session_id) for s in listed]
    check(keys == sorted(keys, reverse=True), "sessions come most recently active first")
    by_id = {s.session_id: s for s in listed}
    for sid in world.sessions:
        got = await store.get_session_summary(sid)
        check(got == by_id[sid], f"get_session_summary({sid}) equals its listing")
    a = by_id[ids["A"]]
    check(a.entries == 4, f"session A has 4 entries, got {a.entries}")
    check(a.created_at == _at(_DAY1, 0), f"created_at is the first entry's time: {a.created_at}")
    check(a.updated_at == _at(_DAY1, 8), f"updated_at is the latest activity: {a.updated_at}")
    check(a.first_input == "Refund the ORDER 17 please", f"first_input: {a.first_input!r}")
    check(a.parent_session_id is None, "a top-level session has no parent")
    check(
        (a.last_run_id, a.agent_id, a.model, a.status) == (ids["a2"], "alpha", "m-big", "failed"),
        f"agent, model and status are the latest run's: {a!r}",
    )
    check(
        (a.runs, a.turns, a.input_tokens, a.output_tokens) == (2, 1, 37, 18),
        f"session totals sum the turns and provider-turn usage of its runs: {a!r}",
    )
    check(a.cost == 0.75, f"cost sums the usage that reported one: {a.cost!r}")
    b = by_id[ids["B"]]
    check(b.cost is None, f"a session whose usage reported no cost has cost None: {b.cost!r}")
    check((b.turns, b.input_tokens, b.output_tokens) == (0, 5, 5), f"session B totals: {b!r}")
    check(b.status == "succeeded", f"the newer envelope's status wins over the ledger's: {b!r}")
    check(b.updated_at > _at(_DAY1, 22), "an envelope's status change is session activity")
    child = by_id[ids["child"]]
    check(child.parent_session_id == ids["A"], f"a child session names its parent: {child!r}")
    check((child.agent_id, child.cost) == ("helper", 0.125), f"child session: {child!r}")
    d = by_id[ids["D"]]
    check(
        (d.last_run_id, d.agent_id, d.model, d.status, d.runs)
        == (ids["d1"], "gamma", "m-big", "suspended", 1),
        f"a durable run known only from its envelope counts for its session: {d!r}",
    )
    check((d.turns, d.input_tokens, d.cost) == (0, 0, None), f"no ledger, no usage: {d!r}")
    f0 = by_id[ids["F0"]]
    check(
        (f0.runs, f0.last_run_id, f0.status, f0.agent_id, f0.cost) == (0, None, None, None, None),
        f"a session without runs: {f0!r}",
    )
    check(f0.first_input == "filler 0" and f0.entries == 2, f"session F0: {f0!r}")


async def _pages(read: Callable[[str | None], Awaitable[Any]]) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(100):
        page = await read(cursor)
        items.extend(page.items)
        if page.next_cursor is None:
            return items
        check(page.items, "a page with a next cursor is not empty")
        cursor = page.next_cursor
    raise AssertionError("paging did not end")


async def _check_session_paging_and_filters(world: _World) -> None:
    store, ids = world.store, world.ids
    every = await _all_sessions(store)
    for limit in (1, 3, 4):
        paged = await _pages(
            lambda c, n=limit: store.list_session_summaries(cursor=c, limit=n)  # type: ignore[misc]
        )
        check(paged == every, f"pages of {limit} together list every session once, in order")

    async def names(flt: SessionFilter, limit: int = 2) -> set[str]:
        paged = await _pages(
            lambda c: store.list_session_summaries(filter=flt, cursor=c, limit=limit)
        )
        whole = await _all_sessions(store, flt)
        check(paged == whole, f"a filtered listing pages like the whole one ({flt!r})")
        found = {s.session_id for s in whole}
        return {name for name, sid in ids.items() if sid in found}

    cases: list[tuple[SessionFilter, set[str]]] = [
        (SessionFilter(agent_id="alpha"), {"A"}),
        (SessionFilter(agent_id="helper"), {"child"}),
        (SessionFilter(agent_id="gamma"), {"D"}),
        (SessionFilter(agent_id="nobody"), set()),
        (SessionFilter(status="failed"), {"A"}),
        (SessionFilter(status="succeeded"), {"B", "child"}),
        (SessionFilter(status="suspended"), {"D"}),
        (SessionFilter(model="m-small"), {"B"}),
        (SessionFilter(model="m-big"), {"A", "child", "D"}),
        (SessionFilter(text="order 17"), {"A"}),
        (SessionFilter(text="17"), {"A", "B"}),
        (SessionFilter(text="REFUND"), {"A", "child"}),
        (SessionFilter(parent_session_id=ids["A"]), {"child"}),
        (SessionFilter(model="m-big", top_level=True), {"A", "D"}),
        (SessionFilter(agent_id="alpha", status="succeeded"), set()),
    ]
    for flt, want in cases:
        got = await names(flt)
        check(got == want, f"filter {flt!r} keeps {sorted(want)}, got {sorted(got)}")
    top = await _all_sessions(store, SessionFilter(top_level=True))
    check(
        {s.session_id for s in top} == set(world.sessions) - {ids["child"]},
        "top_level keeps the sessions that are nobody's child",
    )
    times = sorted({s.updated_at for s in every})
    since, until = times[2], times[-3]
    window = await _all_sessions(store, SessionFilter(since=since, until=until))
    check(
        window == [s for s in every if since <= s.updated_at < until],
        "since/until keep the sessions whose latest activity is in [since, until)",
    )
    day = await _all_sessions(store, SessionFilter(since=_DAY1, until=_DAY2))
    check(
        day == [s for s in every if s.updated_at < _DAY2],
        "a date bound is its midnight (UTC)",
    )


async def _check_runs(world: _World) -> None:
    store, ids = world.store, world.ids
    page = await store.list_run_summaries(limit=1000)
    runs: list[RunSummary] = list(page.items)
    want = {ids[n] for n in ("a1", "a2", "b1", "c1", "d1")}
    check({r.run_id for r in runs} == want, f"runs across sessions: {[r.run_id for r in runs]}")
    keys = [(r.started_at or "", r.run_id) for r in runs]
    check(keys == sorted(keys, reverse=True), "runs come newest start first")
    for limit in (1, 2):
        paged = await _pages(
            lambda c, n=limit: store.list_run_summaries(cursor=c, limit=n)  # type: ignore[misc]
        )
        check(paged == runs, f"pages of {limit} runs together list every run once, in order")
    for kwargs, names in (
        ({"session_id": ids["A"]}, {"a1", "a2"}),
        ({"agent_id": "alpha"}, {"a1", "a2"}),
        ({"agent_id": "gamma"}, {"d1"}),
        ({"status": "succeeded"}, {"a1", "b1", "c1"}),
        ({"status": "suspended", "session_id": ids["D"]}, {"d1"}),
        ({"agent_id": "alpha", "status": "failed"}, {"a2"}),
    ):
        paged = await _pages(
            lambda c, kw=kwargs: store.list_run_summaries(  # type: ignore[misc]
                cursor=c, limit=1, **kw
            )
        )
        check(
            {r.run_id for r in paged} == {ids[n] for n in names},
            f"list_run_summaries({kwargs}) keeps {sorted(names)}",
        )
    by_id = {r.run_id: r for r in runs}
    for r in runs:
        check(await store.get_run_summary(r.run_id) == r, "get_run_summary equals its listing")
    a1, a2 = by_id[ids["a1"]], by_id[ids["a2"]]
    check(
        (a1.session_id, a1.agent_id, a1.model, a1.provider, a1.status, a1.stop_reason)
        == (ids["A"], "alpha", "m-big", "mock", "succeeded", "end_turn"),
        f"a finished run's summary: {a1!r}",
    )
    check(
        (a1.started_at, a1.finished_at) == (_at(_DAY1, 1, 0), _at(_DAY1, 1, 10)),
        f"start and finish times: {a1!r}",
    )
    check(
        (a1.turns, a1.input_tokens, a1.output_tokens, a1.cost, a1.has_ledger)
        == (1, 30, 15, 0.75, True),
        f"run totals: its turns, its provider-turn usage (not the run total): {a1!r}",
    )
    check(
        a2.status == "failed" and a2.error is not None and a2.error.message == ids["a2_error"],
        f"a failed run carries its error: {a2!r}",
    )
    check(a2.cost is None and a2.stop_reason is None, f"no cost reported, no cost: {a2!r}")
    d1 = by_id[ids["d1"]]
    check(
        (d1.has_ledger, d1.status, d1.agent_id, d1.model, d1.session_id, d1.turns)
        == (False, "suspended", "gamma", "m-big", ids["D"], 0),
        f"a durable run without a ledger is known from its envelope: {d1!r}",
    )
    b1 = by_id[ids["b1"]]
    check(
        (b1.status, b1.has_ledger, b1.agent_id) == ("succeeded", True, "beta"),
        f"of the ledger and the envelope, the newer status wins: {b1!r}",
    )


def _same(rows: Sequence[LedgerRow], want: Sequence[tuple[str, Any]], what: str) -> None:
    got = [(r.kind, r.record) for r in rows]
    check(
        got == list(want),
        f"{what}: expected {[k for k, _ in want]}, got {[k for k, _ in got]}",
    )


async def _check_ledger(world: _World) -> None:
    store, run_id = world.store, world.ids["a1"]
    everything = world.ledger
    without = [(k, r) for k, r in everything if not (k == "event" and r.type == "message_delta")]
    whole = await store.read_ledger(run_id)
    _same(whole.rows, without, "read_ledger merges the four tables in append order")
    check(not whole.has_more, "a read that holds every row has no more")
    deltas = await store.read_ledger(run_id, include_deltas=True)
    _same(deltas.rows, everything, "include_deltas keeps the message_delta rows")
    for kind in ("run", "event", "tool_call", "usage"):
        seqs = [r.seq for r in deltas.rows if r.kind == kind]
        check(seqs == sorted(set(seqs)), f"{kind} rows keep increasing seq")
    types = {r.type for k, r in without if k == "event"}
    if types:
        kept = {sorted(types)[0]}
        wanted = [(k, r) for k, r in without if k != "event" or r.type in kept]
        only = await store.read_ledger(run_id, event_types=kept)
        _same(only.rows, wanted, "event_types keeps only those event rows, and every other row")
        for limit in (1, 2):
            rows_of: list[LedgerRow] = []
            at: str | None = None
            for _ in range(100):
                part = await store.read_ledger(run_id, after=at, limit=limit, event_types=kept)
                rows_of.extend(part.rows)
                at = part.cursor
                if not part.has_more:
                    break
            _same(rows_of, wanted, f"event_types reads of {limit} rows continue")
    try:
        await store.read_ledger(run_id, event_types="turn_started")
    except PrismConfigError:
        pass
    else:
        check(False, "event_types given as one string raises PrismConfigError")
    for limit in (1, 2, 3):
        rows: list[LedgerRow] = []
        cursor: str | None = None
        for _ in range(100):
            part = await store.read_ledger(run_id, after=cursor, limit=limit)
            check(len(part.rows) <= limit, "a read returns at most limit rows")
            rows.extend(part.rows)
            cursor = part.cursor
            if not part.has_more:
                break
        _same(rows, without, f"reads of {limit} rows continue where the last one stopped")
        again = await store.read_ledger(run_id, after=cursor)
        check(again.rows == () and again.cursor == cursor, "no new rows: the same cursor back")
    other = await store.read_ledger(world.ids["b1"])
    check(
        [r.kind for r in other.rows] == ["run", "run", "usage"]
        and all(
            (r.record.id if r.kind == "run" else r.record.run_id) == world.ids["b1"]
            for r in other.rows
        ),
        f"read_ledger reads one run's rows: {[r.kind for r in other.rows]}",
    )


async def _check_ledger_continuation(world: _World) -> None:
    store, ids = world.store, world.ids
    start = await store.read_ledger(ids["a1"])
    late = AgentEventRecord(
        id=new_id("event"),
        session_id=ids["A"],
        run_id=ids["a1"],
        type="turn_started",
        timestamp=_at(_DAY1, 1, 11),
        event=TurnStartedEvent(session_id=ids["A"], run_id=ids["a1"], turn=2),
    )
    await store.append_event(late)
    total = await _usage(world, "a1", "A", _at(_DAY1, 1, 12), (1, 1), None, None, "run_total")
    after = await store.read_ledger(ids["a1"], after=start.cursor)
    _same(after.rows, [("event", late), ("usage", total)], "a cursor reads only newer rows")


async def _check_entries(world: _World) -> None:
    store = world.store
    for sid in (world.ids["A"], world.ids["child"]):
        want = world.entries[sid]
        got = list(await store.read_entries(sid))
        check([s.entry for s in got] == want, "read_entries returns a session's entries in order")
        seqs = [s.seq for s in got]
        check(seqs == sorted(set(seqs)) and seqs[0] > 0, "entry seqs increase")
        paged: list[Any] = []
        after = 0
        while True:
            part = list(await store.read_entries(sid, after_seq=after, limit=1))
            if not part:
                break
            check(len(part) == 1, "read_entries returns at most limit entries")
            paged.extend(part)
            after = part[-1].seq
        check(paged == got, "read_entries after a seq continues where the last read stopped")
        tail = list(await store.read_entries(sid, after_seq=seqs[1]))
        check(tail == got[2:], "after_seq leaves out the entries up to that seq")


async def _check_usage(world: _World) -> None:
    store = world.store

    async def report(group: str, **kw: Any) -> list[tuple[str, int, int, int, float | None]]:
        buckets = await store.usage_report(group_by=group, **kw)
        return [(b.key, b.turns, b.input_tokens, b.output_tokens, b.cost) for b in buckets]

    day = await report("day")
    want_day = [(_DAY1, 3, 31, 16, 0.875), (_DAY2, 2, 12, 8, None)]
    check(day == want_day, f"usage by day, days ascending: {day}")
    model = await report("model")
    want_model = [("m-big", 3, 31, 16, 0.875), ("m-small", 1, 5, 5, None), ("—", 1, 7, 3, None)]
    check(model == want_model, f"usage by model, most tokens first: {model}")
    agent = await report("agent")
    want_agent = [("alpha", 3, 37, 18, 0.75), ("beta", 1, 5, 5, None), ("helper", 1, 1, 1, 0.125)]
    check(agent == want_agent, f"usage by agent, most tokens first: {agent}")
    check(await report("day", since=_DAY2) == want_day[1:], "since is inclusive")
    check(await report("day", until=_DAY2) == want_day[:1], "until is exclusive")
    check(
        await report("agent", since=f"{_DAY2}T00:00:00+00:00")
        == [("alpha", 1, 7, 3, None), ("beta", 1, 5, 5, None)],
        "a time range narrows every grouping",
    )


async def _check_errors(world: _World) -> None:
    store = world.store
    sessions = await store.list_session_summaries(limit=1)
    runs = await store.list_run_summaries(limit=1)
    ledger = await store.read_ledger(world.ids["a1"], limit=1)
    bad: builtins.list[tuple[Callable[[], Awaitable[Any]], str]] = [
        (lambda: store.list_session_summaries(cursor="not a cursor"), "a malformed cursor"),
        (
            lambda: store.list_session_summaries(cursor=runs.next_cursor),
            "a cursor of another listing",
        ),
        (
            lambda: store.list_run_summaries(cursor=sessions.next_cursor),
            "a session cursor for runs",
        ),
        (lambda: store.list_run_summaries(cursor="e30"), "a cursor that is JSON but not a cursor"),
        (lambda: store.read_ledger(world.ids["a1"], after="!!"), "a malformed ledger cursor"),
        (
            lambda: store.read_ledger(world.ids["a1"], after=runs.next_cursor),
            "a runs cursor as ledger",
        ),
        (
            lambda: store.list_session_summaries(cursor=ledger.cursor),
            "a ledger cursor for sessions",
        ),
        (lambda: store.list_session_summaries(limit=0), "limit 0"),
        (lambda: store.list_session_summaries(limit=1001), "limit over 1000"),
        (lambda: store.list_run_summaries(limit=0), "limit 0 of runs"),
        (lambda: store.read_ledger(world.ids["a1"], limit=10001), "a ledger read over 10000"),
        (lambda: store.read_entries(world.ids["A"], limit=0), "an entry read of 0"),
        (lambda: store.read_entries(world.ids["A"], after_seq=-1), "a negative after_seq"),
        (lambda: store.usage_report(group_by="week"), "an unknown grouping"),
        (
            lambda: store.usage_report(group_by="day", since="yesterday"),
            "a since that is not a time",
        ),
        (
            lambda: store.list_session_summaries(filter=SessionFilter(until="soon")),
            "an until that is not a time",
        ),
    ]
    for call, what in bad:
        err = await expect(PrismConfigError, call(), f"{what} raises PrismConfigError")
        check(getattr(err, "code", None) == "ERR_PRISM_CONFIG", f"{what}: code ERR_PRISM_CONFIG")
