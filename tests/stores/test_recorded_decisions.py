"""Who decided an approval, and decisions recorded for another process to apply.

* ``RunDecision.by`` is kept with every applied decision in the run's envelope (``decided``), to
  the end of the run; :func:`prism.runtime.durable.list_decided_approvals` lists them;
* a decision that arrives after another settled the approval — the run moved on, or the two
  raced to the claim — is refused with ``ERR_PRISM_DECISION_DECIDED`` naming the winner's
  outcome, ``by`` and time; the tool runs once;
* ``record_decisions`` stores a decision under ``prism.decision`` (the first recorder of an
  approval wins), and another process applies it with ``resume_agent_run(agent, run_id,
  decisions="recorded")`` — a real subprocess here, the tool run exactly once;
* a child run's approval (an agent tool's child) is recorded and applied on the calling run.

On a SQLite file, and on PostgreSQL with ``PRISM_TEST_POSTGRES_URL``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from _recorded_worker import LAST_TURN, PAY_TURN, build_agent, build_lead

from prism.checkpoints import DECISION_NAMESPACE
from prism.errors import AgentDecisionError
from prism.providers.base import provider_done, provider_tool_call
from prism.runtime.durable import (
    DecidedApproval,
    RunDecision,
    list_decided_approvals,
    list_pending_decisions,
    record_decisions,
    resume_agent_run,
)
from prism.stores import open_store

_WORKER = Path(__file__).with_name("_recorded_worker.py")
_IO_GUARD_S = 120.0  # a hang guard only; nothing asserts on time


@pytest.fixture(params=["sqlite", "postgres"])
async def store_at(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Any, str, str | None]]:
    """``(store, url, schema)``: a SQLite file, or a PostgreSQL schema of the test's own."""
    if request.param == "sqlite":
        url, schema = f"sqlite:///{tmp_path / 'store.db'}", None
    else:
        url = os.environ.get("PRISM_TEST_POSTGRES_URL") or ""
        if not url:
            pytest.skip("PostgreSQL store tests need PRISM_TEST_POSTGRES_URL")
        schema = f"prism_test_{uuid.uuid4().hex[:16]}"
    store = await open_store(url, **({} if schema is None else {"schema": schema, "max_size": 4}))
    try:
        yield store, url, schema
    finally:
        await store.aclose()
        if schema is not None:
            import psycopg

            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def _suspended(store: Any, effects: Path) -> tuple[str, str]:
    """A desk run waiting for its ``pay`` approval: ``(run id, approval id)``."""
    result = await build_agent(store, effects, [PAY_TURN]).create_session().run("pay 5")
    assert result.status == "suspended" and result.interruption is not None
    (pending,) = result.interruption.pending_decisions
    return result.run_id, pending.approval_id


def _effects(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def _apply_elsewhere(url: str, schema: str | None, effects: Path, run_id: str,
                           *extra: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(_WORKER), url, schema or "-", str(effects), run_id, *extra,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), _IO_GUARD_S)
    assert proc.returncode == 0, err.decode(errors="replace")
    outcome: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return outcome


async def test_an_applied_decision_names_who_took_it_and_a_late_one_gets_the_winner(
    store_at: tuple[Any, str, str | None], tmp_path: Path
) -> None:
    store, _, _ = store_at
    effects = tmp_path / "effects.log"
    run_id, approval = await _suspended(store, effects)

    done = await resume_agent_run(
        build_agent(store, effects, [LAST_TURN]), run_id,
        decisions=[RunDecision(approval, "allow_once", reason="fine", by="alice")],
    )
    assert done.status == "succeeded" and len(_effects(effects)) == 1

    (decided,) = await list_decided_approvals(store, run_id)
    assert isinstance(decided, DecidedApproval)
    assert (decided.run_id, decided.approval_id, decided.outcome) == (run_id, approval, "allow_once")
    assert (decided.by, decided.reason, decided.tool_name, decided.tool_call_id) == (
        "alice", "fine", "pay", "call_pay"
    )
    assert decided.applied_at is not None and decided.decided_at.endswith("Z")
    assert not decided.modified

    # a second decider, after the run finished: the winner, never a traceback of a final run
    with pytest.raises(AgentDecisionError) as late:
        await resume_agent_run(
            build_agent(store, effects, [LAST_TURN]), run_id,
            decisions=[RunDecision(approval, "reject_once", by="bob")],
        )
    assert late.value.code == "ERR_PRISM_DECISION_DECIDED"
    assert late.value.run_id == run_id
    assert late.value.decided == (decided,)
    assert "allow_once by alice at " in str(late.value)
    # recording it is refused the same way
    with pytest.raises(AgentDecisionError) as recorded:
        await record_decisions(store, run_id, [RunDecision(approval, "reject_once")], by="carol")
    assert recorded.value.code == "ERR_PRISM_DECISION_DECIDED"
    assert recorded.value.decided == (decided,)
    assert len(_effects(effects)) == 1


class _ClaimBarrier:
    """Checkpoint store wrapper: the envelope saves wait until ``parties`` of them wait, so every
    resumer has loaded and checked the run before any claim is written."""

    def __init__(self, inner: Any, parties: int) -> None:
        self.inner = inner
        self.parties = parties
        self.waiting = 0
        self.open = asyncio.Event()

    async def save_checkpoint(self, **kwargs: Any) -> Any:
        if not self.open.is_set():
            self.waiting += 1
            if self.waiting >= self.parties:
                self.open.set()
            await asyncio.wait_for(self.open.wait(), _IO_GUARD_S)
        return await self.inner.save_checkpoint(**kwargs)

    async def load_checkpoint(self, **kwargs: Any) -> Any:
        return await self.inner.load_checkpoint(**kwargs)


async def test_of_two_deciders_racing_to_the_claim_the_loser_gets_the_winners_decision(
    store_at: tuple[Any, str, str | None], tmp_path: Path
) -> None:
    store, _, _ = store_at
    effects = tmp_path / "effects.log"
    run_id, approval = await _suspended(store, effects)
    barrier = _ClaimBarrier(store, 2)

    async def decide(outcome: str, by: str) -> Any:
        agent = build_agent(store, effects, [LAST_TURN], checkpoints=barrier)
        return await resume_agent_run(
            agent, run_id, decisions=[RunDecision(approval, outcome, by=by)]  # type: ignore[arg-type]
        )

    results = await asyncio.gather(
        decide("allow_once", "alice"), decide("reject_once", "bob"), return_exceptions=True
    )
    (winner,) = [r for r in results if not isinstance(r, BaseException)]
    (loser,) = [r for r in results if isinstance(r, BaseException)]
    assert isinstance(loser, AgentDecisionError), loser
    assert loser.code == "ERR_PRISM_DECISION_DECIDED"
    (won,) = loser.decided
    assert winner.status == "succeeded"
    assert won.by in ("alice", "bob") and won.outcome == (
        "allow_once" if won.by == "alice" else "reject_once"
    )
    assert won.decided_at and won.applied_at
    # the tool ran once if the winner allowed it, never if it rejected it
    assert len(_effects(effects)) == (1 if won.outcome == "allow_once" else 0)
    assert await list_decided_approvals(store, run_id) == [won]


async def test_the_same_decision_applied_twice_at_once_is_a_plain_conflict(
    store_at: tuple[Any, str, str | None], tmp_path: Path
) -> None:
    """An engine re-running a step applies the same decision message again: the second claim
    is a checkpoint conflict, as before, not a decision that lost."""
    store, _, _ = store_at
    effects = tmp_path / "effects.log"
    run_id, approval = await _suspended(store, effects)
    barrier = _ClaimBarrier(store, 2)
    same = [RunDecision(approval, "allow_once", by="ops")]
    results = await asyncio.gather(
        *(resume_agent_run(build_agent(store, effects, [LAST_TURN], checkpoints=barrier), run_id,
                           decisions=same) for _ in range(2)),
        return_exceptions=True,
    )
    assert sorted(type(r).__name__ for r in results) == ["CheckpointConflictError", "RunResult"]
    assert len(_effects(effects)) == 1


async def test_a_recorded_decision_is_applied_by_another_process_once(
    store_at: tuple[Any, str, str | None], tmp_path: Path
) -> None:
    store, url, schema = store_at
    effects = tmp_path / "effects.log"
    run_id, approval = await _suspended(store, effects)

    (recorded,) = await record_decisions(
        store, run_id, [RunDecision(approval, "allow_once", reason="ok")], by="prism serve"
    )
    assert (recorded.by, recorded.outcome, recorded.applied_at) == ("prism serve", "allow_once", None)
    assert await list_decided_approvals(store, run_id) == [recorded]
    # the run still waits: recording writes nothing else
    (pending,) = await list_pending_decisions(store, run_id=run_id)
    assert pending.approval_id == approval
    # the first recorder wins
    with pytest.raises(AgentDecisionError) as second:
        await record_decisions(store, run_id, [{"approval_id": approval, "outcome": "reject_once"}],
                               by="bob")
    assert second.value.code == "ERR_PRISM_DECISION_DECIDED"
    assert second.value.decided == (recorded,)
    assert "(recorded, waiting to be applied)" in str(second.value)
    assert _effects(effects) == []

    outcome = await _apply_elsewhere(url, schema, effects, run_id)
    assert outcome == {"ok": True, "status": "succeeded"}
    (line,) = _effects(effects)
    assert line.startswith("call_pay 5 ")
    (applied,) = await list_decided_approvals(store, run_id)
    assert (applied.by, applied.outcome, applied.reason) == ("prism serve", "allow_once", "ok")
    assert applied.decided_at == recorded.decided_at and applied.applied_at is not None

    # applying again finds nothing to apply; the tool ran once
    again = await _apply_elsewhere(url, schema, effects, run_id)
    assert (again["ok"], again["code"]) == (False, "ERR_PRISM_DECISION_UNKNOWN")
    assert len(_effects(effects)) == 1


async def test_recorded_modified_arguments_run_and_bad_ones_are_refused_when_applied(
    store_at: tuple[Any, str, str | None], tmp_path: Path
) -> None:
    store, url, schema = store_at
    effects = tmp_path / "effects.log"
    run_id, approval = await _suspended(store, effects)
    (recorded,) = await record_decisions(
        store, run_id,
        [RunDecision(approval, "allow_once", modified_arguments={"amount": 0})], by="ops",
    )
    assert recorded.modified
    refused = await _apply_elsewhere(url, schema, effects, run_id)
    assert (refused["ok"], refused["code"]) == (False, "ERR_PRISM_DECISION_INVALID")
    assert "/amount" in refused["message"] and _effects(effects) == []
    # nothing was written: the run waits, the recorded decision still holds the approval
    assert [p.approval_id for p in await list_pending_decisions(store, run_id=run_id)] == [approval]
    record = await store.load_checkpoint(namespace=DECISION_NAMESPACE, key=run_id)
    assert record is not None and record.version == 1


async def test_a_child_runs_approval_is_recorded_and_applied_on_the_calling_run(
    store_at: tuple[Any, str, str | None], tmp_path: Path
) -> None:
    store, url, schema = store_at
    effects = tmp_path / "effects.log"
    lead_turn = [provider_tool_call("l1", "payer", {"input": "pay 5"}), provider_done()]
    result = await build_lead(store, effects, [lead_turn], [PAY_TURN]).create_session().run("go")
    assert result.status == "suspended"
    (pending,) = await list_pending_decisions(store, run_id=result.run_id)
    (link,) = pending.chain
    assert (link.agent, pending.tool_name, pending.calling_agent) == ("payer", "pay", "payer")

    with pytest.raises(AgentDecisionError) as modified:
        await record_decisions(
            store, result.run_id,
            [RunDecision(pending.approval_id, "allow_once", modified_arguments={"amount": 2})],
        )
    assert modified.value.code == "ERR_PRISM_DECISION_INVALID"
    await record_decisions(
        store, result.run_id, [RunDecision(pending.approval_id, "allow_once")], by="ops"
    )
    outcome = await _apply_elsewhere(url, schema, effects, result.run_id, "lead")
    assert outcome == {"ok": True, "status": "succeeded"}
    assert len(_effects(effects)) == 1
    (decided,) = await list_decided_approvals(store, result.run_id)
    assert (decided.by, decided.tool_name, decided.tool_call_id) == ("ops", "pay", "call_pay")


async def test_a_denial_and_bad_deciders_are_recorded_or_refused(
    store_at: tuple[Any, str, str | None], tmp_path: Path
) -> None:
    store, _, _ = store_at
    effects = tmp_path / "effects.log"
    run_id, approval = await _suspended(store, effects)
    for by in ("", "x" * 257, 7):
        with pytest.raises(AgentDecisionError) as bad:
            await resume_agent_run(
                build_agent(store, effects, [LAST_TURN]), run_id,
                decisions=[RunDecision(approval, "allow_once", by=by)],  # type: ignore[arg-type]
            )
        assert bad.value.code == "ERR_PRISM_DECISION_INVALID"
        with pytest.raises(AgentDecisionError):
            await record_decisions(store, run_id, [RunDecision(approval, "allow_once")],
                                   by=by)  # type: ignore[arg-type]
    with pytest.raises(AgentDecisionError) as unknown:
        await record_decisions(store, run_id, [RunDecision("approval_nope", "allow_once")])
    assert unknown.value.code == "ERR_PRISM_DECISION_UNKNOWN"

    denied = await resume_agent_run(build_agent(store, effects, []), run_id, decision="deny")
    assert denied.status == "denied"
    (decided,) = await list_decided_approvals(store, run_id)
    assert (decided.approval_id, decided.outcome, decided.by) == (approval, "reject_once", None)
    with pytest.raises(AgentDecisionError) as late:
        await record_decisions(store, run_id, [RunDecision(approval, "allow_once")])
    assert late.value.code == "ERR_PRISM_DECISION_DECIDED" and _effects(effects) == []
