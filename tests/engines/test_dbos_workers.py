"""prism runs on real DBOS worker processes over the real PostgreSQL database.

Each test has a database of its own and starts its workers with ``python -m prism worker``;
the agents (``dbos_agents.py``) log every provider request and every tool side effect with the
PID of the process that made it, so the tests count what happened where.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter, defaultdict
from typing import Any

import pytest
from engine_support import Fleet, read_log

pytestmark = [pytest.mark.postgres, pytest.mark.dbos]

N_RUNS = 50
CONCURRENCY = 3


async def _client(fleet: Fleet) -> Any:
    import dbos_agents

    from prism.engines.dbos import RunClient

    return await RunClient.connect(fleet.url, agents=dbos_agents.REGISTRY)


def _max_in_flight(effects: list[list[str]]) -> dict[str, int]:
    """Per PID, the most tool calls between their ``begin`` and ``end`` lines at once."""
    now: Counter[str] = Counter()
    most: Counter[str] = Counter()
    for kind, pid, _label, _turn in effects:
        now[pid] += 1 if kind == "begin" else -1
        most[pid] = max(most[pid], now[pid])
    return dict(most)


async def _wait_until(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def test_fifty_runs_on_three_workers_one_killed_mid_run(fleet: Fleet) -> None:
    """3 workers, 50 runs with two tool turns each; one worker is SIGKILLed while it runs a
    tool. Every run completes exactly once, except the runs killed inside a tool call, which
    are ambiguous with the call named; no side effect repeated, no completed provider turn
    requested again, at most CONCURRENCY runs per worker — the recovered ones included."""
    fleet.env["PRISM_TEST_TOOL_SLEEP"] = "0.1"
    workers = [fleet.start(name) for name in "abc"]
    victim = workers[0]
    client = await _client(fleet)
    try:
        handles = [await client.submit("tools", f"job-{i}") for i in range(N_RUNS)]
        labels = {h.run_id: f"job-{i}" for i, h in enumerate(handles)}

        def victim_mid_tool() -> bool:
            effects = read_log(fleet.effects_log)
            open_calls = Counter()
            for kind, pid, label, turn in effects:
                if pid == str(victim.pid):
                    open_calls[(label, turn)] += 1 if kind == "begin" else -1
            return len(effects) >= 30 and any(v > 0 for v in open_calls.values())

        await _wait_until(victim_mid_tool, 60, "the victim worker inside a tool call")
        victim.kill()
        killed_at = time.monotonic()
        outcomes = [await h.wait(timeout_s=90) for h in handles]
        recovered_in = time.monotonic() - killed_at
    finally:
        await client.aclose()

    effects = read_log(fleet.effects_log)
    begins = Counter((label, turn) for kind, _pid, label, turn in effects if kind == "begin")
    ends = {(pid, label, turn) for kind, pid, label, turn in effects if kind == "end"}
    cut = {
        (label, turn)
        for kind, pid, label, turn in effects
        if kind == "begin" and pid == str(victim.pid) and (pid, label, turn) not in ends
    }
    # No side effect ran twice.
    assert [k for k, n in begins.items() if n > 1] == []

    statuses = Counter(o.status for o in outcomes)
    ambiguous = [o for o in outcomes if o.status == "ambiguous"]
    assert statuses["succeeded"] + statuses["ambiguous"] == N_RUNS, statuses
    # A run cut inside its tool is ambiguous, naming that call; every ambiguous call started on
    # the killed worker (cut inside the tool; or finished there while its result row was still
    # held for the turn's one write with the envelope; or killed between its dispatch record and
    # the tool, so it never began).
    named = {(labels[o.run_id], c.tool_call_id, c.tool_name) for o in ambiguous for c in o.ambiguous_calls}
    on_victim = {
        (label, turn)
        for kind, pid, label, turn in effects
        if kind == "begin" and pid == str(victim.pid)
    }
    for label, turn in cut:
        assert (label, f"call_{label}_{turn}", "effect") in named
    for label, call_id, _ in named:
        turn = call_id.rsplit("_", 1)[1]
        assert (label, turn) in on_victim or (label, turn) not in begins
    assert len(ambiguous) >= len(cut) >= 1
    for outcome in ambiguous:
        with pytest.raises(Exception) as raised:
            outcome.raise_for_ambiguous()
        assert raised.value.code == "ERR_PRISM_RUN_AMBIGUOUS"  # type: ignore[attr-defined]
        assert "effect (call_" in str(raised.value)

    # Every succeeded run answered once, after both of its side effects (each once).
    for outcome in outcomes:
        if outcome.status != "succeeded":
            continue
        label = labels[outcome.run_id]
        assert outcome.result is not None and outcome.result.status == "succeeded"
        texts = [p.text for m in outcome.result.messages for p in m.content if hasattr(p, "text")]
        assert texts.count(f"done {label}") == 1
        assert begins[(label, "0")] == 1 and begins[(label, "1")] == 1

    # A provider turn is requested again only when the killed worker was inside it.
    requests = read_log(fleet.requests_log)
    by_turn: dict[tuple[str, str], list[str]] = defaultdict(list)
    for pid, label, turn in requests:
        by_turn[(label, turn)].append(pid)
    repeated = {k: pids for k, pids in by_turn.items() if len(pids) > 1}
    for pids in repeated.values():
        assert set(pids[:-1]) == {str(victim.pid)} and pids[-1] != str(victim.pid)
    assert all(len(pids) == 2 for pids in repeated.values())

    # The queue's per-worker limit held, for the runs the survivors recovered too.
    in_flight = _max_in_flight(effects)
    assert max(in_flight.values()) <= CONCURRENCY
    survivors = {str(w.pid) for w in workers[1:]}
    # The runs the killed worker had started went on (or stopped as ambiguous) elsewhere.
    pids_of: dict[str, set[str]] = defaultdict(set)
    for pid, label, _turn in requests:
        pids_of[label].add(pid)
    recovered = [
        o
        for o in outcomes
        if str(victim.pid) in pids_of[labels[o.run_id]] and o.worker != victim.worker_id
    ]
    assert len(recovered) >= len(ambiguous) >= 1
    assert all(o.worker != victim.worker_id for o in ambiguous)
    # A recovered run that succeeded went on from its checkpoint on a survivor; when the victim
    # had already finished its last provider turn, nothing was left to request there.
    continued = [o for o in recovered if o.status == "succeeded"]
    assert all(o.worker != victim.worker_id for o in continued)
    print(
        f"\n{N_RUNS} runs: {statuses['succeeded']} succeeded, {statuses['ambiguous']} ambiguous "
        f"({len(cut)} cut inside the tool); {len(continued)} continued on another worker; "
        f"{len(repeated)} turn(s) requested again; max tools in flight per worker "
        f"{ {p: in_flight.get(p, 0) for p in survivors} }; all done {recovered_in:.1f} s after the kill"
    )
    for worker in workers[1:]:
        worker.terminate()
    for worker in workers[1:]:
        assert worker.proc.wait(60) == 0, worker.text()


async def test_an_approval_waiting_run_survives_its_worker(fleet: Fleet) -> None:
    """A run waits for an approval on worker A; A is SIGKILLed; the approval sent later is
    applied on worker B, and the run finishes there. Its events and entries are readable from
    the submitting process."""
    fleet.env["PRISM_TEST_TOOL_TURNS"] = "1"
    first = fleet.start("a")
    client = await _client(fleet)
    try:
        handle = await client.submit("approval", "appr-1")
        waiting = await handle.wait(timeout_s=60)
        assert waiting.status == "suspended" and waiting.worker == first.worker_id
        assert waiting.result is not None and waiting.result.interruption is not None
        assert waiting.result.interruption.tool_name == "effect"
        second = fleet.start("b")
        first.kill()
        await asyncio.sleep(1.5)  # the run's wait outlives its worker; decisions wait for it
        await handle.decide(decision="approve")
        done = await handle.wait(timeout_s=60)
        assert done.status == "succeeded", done
        assert done.worker == second.worker_id
        assert done.result is not None and done.result.status == "succeeded"
        effects = read_log(fleet.effects_log)
        assert [(k, label) for k, _pid, label, _t in effects] == [("begin", "appr-1"), ("end", "appr-1")]
        assert effects[0][1] == str(second.pid)
        # At a distance: the ledger's events of both legs, and the stored entries.
        types = [row.type for row in await client.events(handle.run_id)]
        assert types.count("agent_suspended") == 1 and types[-1] == "agent_finished"
        assert "tool_execution_finished" in types and "message_delta" in types
        roles = [e.message.role for e in await client.entries(handle.run_id) if e.message]
        assert roles == ["user", "assistant", "tool", "assistant"]
        followed = [row.type async for row in client.follow(handle.run_id)]
        assert followed == types
        listed = {r.run_id: r for r in await client.list_runs(agent="approval")}
        assert listed[handle.run_id].status == "succeeded"
        assert listed[handle.run_id].session_id == done.result.session_id
    finally:
        await client.aclose()
    second.terminate()
    assert second.proc.wait(60) == 0, second.text()


async def test_sigterm_drains_a_worker(fleet: Fleet) -> None:
    """SIGTERM mid-run: the worker finishes its current turns, releases its runs (the
    envelope records the release) and exits 0; the other worker continues them at once from
    the next turn, without an ambiguous call or a repeated side effect."""
    fleet.env.update({"PRISM_TEST_TOOL_SLEEP": "0.3", "PRISM_TEST_TOOL_TURNS": "4"})
    first, second = fleet.start("a"), fleet.start("b")
    client = await _client(fleet)
    try:
        handles = [await client.submit("tools", f"drain-{i}") for i in range(6)]
        await _wait_until(
            lambda: sum(1 for e in read_log(fleet.effects_log) if e[1] == str(first.pid)) >= 2,
            60,
            "tool calls on the first worker",
        )
        first.terminate()
        assert first.proc.wait(60) == 0, first.text()
        assert "prism worker: drained" in first.text()
        outcomes = [await h.wait(timeout_s=60) for h in handles]
    finally:
        await client.aclose()
    assert [o.status for o in outcomes] == ["succeeded"] * 6
    requests = read_log(fleet.requests_log)
    on_first = {label for pid, label, _turn in requests if pid == str(first.pid)}
    started_on_first = [
        o for o, i in zip(outcomes, range(6), strict=True) if f"drain-{i}" in on_first
    ]
    # A run the first worker had started either finished there before the drain reached it, or
    # was released at a turn boundary and continued on the other worker: in a second leg, or in
    # a re-run of the released leg's step when the engine had not yet recorded the step's end
    # (steps are at-least-once); either way from the released checkpoint, as the counts below
    # show.
    handed_over = [o for o in started_on_first if o.worker == second.worker_id]
    assert handed_over
    effects = read_log(fleet.effects_log)
    begins = Counter((label, turn) for kind, _pid, label, turn in effects if kind == "begin")
    ends = Counter((label, turn) for kind, _pid, label, turn in effects if kind == "end")
    assert begins == ends and set(begins.values()) == {1} and len(begins) == 24
    turns = Counter((label, turn) for _pid, label, turn in requests)
    assert set(turns.values()) == {1} and len(turns) == 30
    second.terminate()
    assert second.proc.wait(60) == 0, second.text()


async def test_a_version_mismatch_is_refused(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker whose agents pin another definition revision than the live workers refuses to
    start, and so does a submit pinned to a version no live worker serves."""
    import dbos_agents

    from prism.engines.dbos import RunClient
    from prism.errors import EngineVersionError

    fleet.start("a")
    other = fleet.start("b", extra_env={"PRISM_TEST_REVISION": "r2"}, wait=False)
    assert other.proc.wait(60) == 2
    text = other.text()
    assert "ERR_PRISM_ENGINE_VERSION" in text
    assert "tools: r2 here, r1 on" in text and "approval: r2 here, r1 on" in text
    monkeypatch.setenv("PRISM_TEST_REVISION", "r2")
    client = await RunClient.connect(fleet.url, agents=dbos_agents.REGISTRY)
    try:
        with pytest.raises(EngineVersionError, match="this submitter pins application version"):
            await client.submit("tools", "job-x")
        assert await client.list_runs() == []
    finally:
        await client.aclose()
    assert os.environ["PRISM_TEST_REVISION"] == "r2"
