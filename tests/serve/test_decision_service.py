"""How a decision taken in ``prism serve``'s inbox takes effect (``prism.serve._decisions``).

Over a real SQLite store, with the registry loaded as ``--agents _decision_agents:REGISTRY``:

* in process: the serve process has the run's agent, records the decision, resumes the run in a
  background task and the tool runs there, once; edited arguments are checked against the tool's
  schema first, each failure with its path;
* two deciders of one approval (two serve processes): the first recorded wins, the other gets
  the winner's outcome, ``by`` and time — and the tool runs once;
* recorded: with ``--no-resume`` (or without the agent) the decision is only recorded; a process
  with the agent applies it later;
* a child run's approval is decided on the calling run and reaches the child;
* a run the ``prism`` command started (a real ``prism run`` subprocess) is resumed as ``prism
  resume`` would, with the agent rebuilt from its stored settings; ``prism resume RUN_ID
  --recorded`` applies a decision recorded for it;
* shutting down stops a background run at its next turn boundary, resumable.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import _decision_agents
import pytest
from _decision_agents import PAID, REGISTRY

import prism
from prism.cli._settings import command_agents
from prism.errors import AgentDecisionError
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.registry import build_registry_agents, load_registry
from prism.runtime.durable import (
    PendingDecisionRecord,
    list_decided_approvals,
    list_pending_decisions,
    load_agent_run_state,
)
from prism.serve._decisions import SHUTDOWN_REASON, ArgumentsInvalidError, DecisionService
from prism.stores import open_store

_GUARD_S = 120.0  # a hang guard only; nothing asserts on time


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Any]:
    opened = await open_store(f"sqlite:///{tmp_path / 'store.db'}")
    PAID.clear()
    try:
        yield opened
    finally:
        await opened.aclose()


class Finished:
    """``on_finished``: what each background resume ended with."""

    def __init__(self) -> None:
        self.ended: dict[str, Any] = {}
        self.changed = asyncio.Event()

    def __call__(self, run_id: str, ended: Any) -> None:
        self.ended[run_id] = ended
        self.changed.set()

    async def wait(self, run_id: str) -> Any:
        while run_id not in self.ended:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), _GUARD_S)
        return self.ended[run_id]


def _registry(store: Any) -> dict[str, prism.Agent]:
    return build_registry_agents(load_registry("_decision_agents:REGISTRY"), store)


async def _waiting(store: Any, name: str) -> PendingDecisionRecord:
    result = await REGISTRY[name](store).create_session().run("go")
    assert result.status == "suspended"
    (pending,) = await list_pending_decisions(store, run_id=result.run_id)
    return pending


async def test_in_process_the_tool_runs_in_the_serve_process_once_with_checked_arguments(
    store: Any,
) -> None:
    pending = await _waiting(store, "desk")
    finished = Finished()
    service = DecisionService(store, agents=_registry(store), on_finished=finished)
    try:
        route = await service.route(pending)
        assert route.mode == "in_process" == await service.mode(pending)
        assert "runs the tool inside the serve process" in route.sentence

        check = await service.check_arguments(pending, {"amount": 0, "extra": 1})
        assert check.schema == _decision_agents.PAY.parameters and not check.ok
        assert [p.path for p in check.problems] == ["", "/amount"]
        assert "extra" in check.problems[0].message
        with pytest.raises(ArgumentsInvalidError) as invalid:
            await service.decide(pending.run_id, pending.approval_id, "allow_once",
                                 modified_arguments={"amount": 0})
        assert invalid.value.code == "ERR_PRISM_DECISION_INVALID"
        assert [p.path for p in invalid.value.problems] == ["/amount"]
        assert (invalid.value.run_id, invalid.value.approval_id) == (
            pending.run_id, pending.approval_id
        )
        assert await list_decided_approvals(store, pending.run_id) == []  # nothing recorded

        result = await service.decide(
            pending.run_id, pending.approval_id, "allow_once", reason="checked",
            modified_arguments={"amount": 3},
        )
        assert (result.status, result.mode) == ("applied", "in_process"), result.message
        assert result.decided is not None
        assert (result.decided.by, result.decided.reason, result.decided.modified) == (
            "prism serve", "checked", True
        )
        assert result.decided.applied_at is not None
        ended = await finished.wait(pending.run_id)
        assert ended.status == "succeeded"
        assert PAID == [{"amount": 3}]

        again = await service.decide(pending.run_id, pending.approval_id, "reject_once")
        assert again.status == "lost" and again.decided == result.decided
        assert again.message.startswith("Already decided: allowed once by prism serve at ")
        assert await list_pending_decisions(store) == [] and PAID == [{"amount": 3}]
    finally:
        await service.aclose()


async def test_of_two_serve_processes_deciding_one_approval_the_first_recorded_wins(
    store: Any,
) -> None:
    pending = await _waiting(store, "desk")
    alice_done, bob_done = Finished(), Finished()
    alice = DecisionService(store, agents=_registry(store), by="alice", on_finished=alice_done)
    bob = DecisionService(store, agents=_registry(store), by="bob", on_finished=bob_done)
    try:
        results = await asyncio.gather(
            alice.decide(pending.run_id, pending.approval_id, "allow_once"),
            bob.decide(pending.run_id, pending.approval_id, "reject_once", reason="no"),
        )
        (won,) = [r for r in results if r.status == "applied"]
        (lost,) = [r for r in results if r.status == "lost"]
        assert won.decided is not None and lost.decided is not None
        # the loser lost at the record: it is told the winner as recorded, before it applied
        keys = ("by", "outcome", "reason", "decided_at", "tool_name", "tool_call_id")
        assert [getattr(lost.decided, k) for k in keys] == [getattr(won.decided, k) for k in keys]
        assert won.decided.by in ("alice", "bob") and won.decided.tool_name == "pay"
        assert f"by {won.decided.by} at {won.decided.decided_at}" in lost.message
        winner = alice_done if won.decided.by == "alice" else bob_done
        assert (await winner.wait(pending.run_id)).status == "succeeded"
        assert PAID == ([{"amount": 5}] if won.decided.outcome == "allow_once" else [])
    finally:
        await alice.aclose()
        await bob.aclose()


async def test_recorded_only_then_applied_by_a_process_with_the_agent(store: Any) -> None:
    pending = await _waiting(store, "desk")
    no_resume = DecisionService(store, agents=_registry(store), resume=False, by="ops")
    no_agent = DecisionService(store)
    finished = Finished()
    applier = DecisionService(store, agents=_registry(store), on_finished=finished)
    try:
        route = await no_resume.route(pending)
        assert route.mode == "recorded" and "--no-resume" in route.sentence
        assert f"prism resume {pending.run_id} --recorded" in route.sentence
        other = await no_agent.route(pending)
        assert other.mode == "recorded" and "does not have the run's agent (desk" in other.sentence
        unknown = await no_agent.check_arguments(pending, {"amount": 0})
        assert unknown.schema is None and unknown.ok and "not known here" in (unknown.note or "")

        result = await no_resume.decide(pending.run_id, pending.approval_id, "allow_once")
        assert (result.status, result.mode) == ("recorded", "recorded")
        assert result.decided is not None and result.decided.applied_at is None
        assert result.decided.by == "ops"
        # the run still waits, and the inbox can say the decision is recorded
        assert [p.approval_id for p in await list_pending_decisions(store)] == [pending.approval_id]
        (waiting,) = await list_decided_approvals(store, pending.run_id)
        assert waiting == result.decided and PAID == []
        # a decider in a process with the agent is told the recorded one won
        late = await applier.decide(pending.run_id, pending.approval_id, "reject_once")
        assert late.status == "lost" and late.decided == result.decided
        assert "(recorded, waiting to be applied)" in late.message

        applied = await applier.apply_recorded(pending.run_id)
        assert applied is not None and applied.status == "applied", applied
        assert applied.decided is not None and applied.decided.by == "ops"
        assert (await finished.wait(pending.run_id)).status == "succeeded"
        assert PAID == [{"amount": 5}]
        assert await applier.apply_recorded(pending.run_id) is None
    finally:
        for service in (no_resume, no_agent, applier):
            await service.aclose()


async def test_a_child_runs_approval_is_decided_on_the_calling_run(store: Any) -> None:
    pending = await _waiting(store, "lead")
    assert pending.chain and pending.calling_agent == "payer" and pending.tool_name == "pay"
    finished = Finished()
    service = DecisionService(store, agents=_registry(store), on_finished=finished)
    try:
        assert await service.mode(pending) == "in_process"
        check = await service.check_arguments(pending, {"amount": 1})
        assert check.schema is None and "child run of agent payer" in (check.note or "")
        with pytest.raises(AgentDecisionError) as modified:
            await service.decide(pending.run_id, pending.approval_id, "allow_once",
                                 modified_arguments={"amount": 1})
        assert modified.value.code == "ERR_PRISM_DECISION_INVALID"
        result = await service.decide(pending.run_id, pending.approval_id, "allow_once")
        assert result.status == "applied", result.message
        assert result.decided is not None and result.decided.tool_name == "pay"
        assert (await finished.wait(pending.run_id)).status == "succeeded"
        assert PAID == [{"amount": 9}]
    finally:
        await service.aclose()


def _prism(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prism", *argv],
        capture_output=True, text=True, timeout=_GUARD_S, check=False,
    )


def _script(path: Path, *turns: list[Any]) -> None:
    path.write_text(json.dumps({"turns": [[e.to_dict() for e in turn] for turn in turns]}))


async def _command_run(tmp_path: Path, url: str) -> tuple[Path, str]:
    """A ``prism run`` waiting for its calculator call; the script then answers a resume."""
    script = tmp_path / "script.json"
    _script(script, [provider_tool_call("k1", "calculator", {"expression": "6*7"}),
                     provider_done()])
    proc = await asyncio.to_thread(
        _prism, "run", "6*7?", "--model", f"mock:{script}", "--tool", "calculator",
        "--approve-tools", "--store", url,
    )
    assert proc.returncode == 3, proc.stderr
    _script(script, [provider_text_delta("42"), provider_done()])
    return script, url


async def test_a_run_the_prism_command_started_is_resumed_as_prism_resume_would(
    store: Any, tmp_path: Path
) -> None:
    _, url = await _command_run(tmp_path, f"sqlite:///{tmp_path / 'store.db'}")
    (pending,) = await list_pending_decisions(store)
    finished = Finished()
    service = DecisionService(
        store, command_agents=command_agents(store, environ=os.environ), on_finished=finished
    )
    try:
        route = await service.route(pending)
        assert route.mode == "cli" and "as prism resume does" in route.sentence
        check = await service.check_arguments(pending, {"expression": 6})
        assert [p.path for p in check.problems] == ["/expression"]
        result = await service.decide(pending.run_id, pending.approval_id, "allow_once")
        assert (result.status, result.mode) == ("applied", "cli"), result.message
        ended = await finished.wait(pending.run_id)
        assert ended.status == "succeeded"
        rows = [e.message for e in await store.list(pending.session_id) if e.message is not None]
        assert [m.role for m in rows] == ["user", "assistant", "tool", "assistant"]
        assert "42" in json.dumps(rows[2].to_dict())
    finally:
        await service.aclose()


async def test_prism_resume_recorded_applies_a_decision_recorded_for_a_command_run(
    store: Any, tmp_path: Path
) -> None:
    _, url = await _command_run(tmp_path, f"sqlite:///{tmp_path / 'store.db'}")
    (pending,) = await list_pending_decisions(store)
    service = DecisionService(
        store, resume=False, command_agents=command_agents(store, environ=os.environ)
    )
    try:
        result = await service.decide(pending.run_id, pending.approval_id, "allow_once")
        assert result.status == "recorded"
    finally:
        await service.aclose()
    proc = await asyncio.to_thread(_prism, "resume", pending.run_id, "--recorded", "--store", url)
    assert proc.returncode == 0, proc.stderr
    (applied,) = await list_decided_approvals(store, pending.run_id)
    assert (applied.by, applied.applied_at is not None) == ("prism serve", True)
    again = await asyncio.to_thread(_prism, "resume", pending.run_id, "--recorded", "--store", url)
    assert again.returncode == 2 and "already finished" in again.stderr


async def test_shutting_down_stops_a_background_run_at_its_next_turn_boundary(
    store: Any,
) -> None:
    gate = asyncio.Event()
    entered = asyncio.Event()

    async def slow_pay(arguments: dict[str, Any], context: Any) -> Any:
        entered.set()
        await gate.wait()
        PAID.append(dict(arguments))
        return {"paid": arguments["amount"]}

    def slow(store: Any) -> prism.Agent:
        return prism.create_agent(
            id="slow", model=_decision_agents.MODEL,
            provider=_decision_agents.OneCall("call_pay", "pay", {"amount": 2}),
            tools=[prism.ToolDefinition(name="pay", execute=slow_pay, needs_approval=True,
                                        parameters=_decision_agents.PAY.parameters)],
            store=store,
            run_state=prism.RunStateOptions(store, "slow-v1", checkpoint_policy="every-turn"),
        )

    result = await slow(store).create_session().run("go")
    (pending,) = await list_pending_decisions(store, run_id=result.run_id)
    finished = Finished()
    service = DecisionService(store, agents={"slow": slow(store)}, on_finished=finished)
    decided = await service.decide(pending.run_id, pending.approval_id, "allow_once")
    assert decided.status == "applied" and service.running(pending.run_id)
    await asyncio.wait_for(entered.wait(), _GUARD_S)
    closing = asyncio.create_task(service.aclose())
    gate.set()
    await asyncio.wait_for(closing, _GUARD_S)
    ended = await finished.wait(pending.run_id)
    assert (ended.status, ended.stop_reason, ended.stop_detail) == (
        "succeeded", "host_policy", SHUTDOWN_REASON
    )
    assert PAID == [{"amount": 2}] and not service.running(pending.run_id)
    loaded = await load_agent_run_state(store, run_id=pending.run_id)
    assert loaded.state["stop_reason"] == "host_policy"  # resumable: prism resume continues it
