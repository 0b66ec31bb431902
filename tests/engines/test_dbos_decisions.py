"""An approval inbox decision on a run of a DBOS worker fleet goes through the engine.

A real worker process (``python -m prism worker``) runs an agent whose tool calls wait for an
approval; the decision service of ``prism serve`` over the same database finds the run's DBOS
workflow and sends the decision through ``RunClient.decide`` — even though it has the agent
itself, it never resumes the run in its own process. The worker applies it: the tool runs once,
on the worker, and the run's envelope names who decided. A second decider is told the winner.
"""

from __future__ import annotations

import pytest
from engine_support import Fleet, read_log

pytestmark = [pytest.mark.postgres, pytest.mark.dbos]


async def test_a_dbos_run_is_decided_through_the_engine_never_in_process(fleet: Fleet) -> None:
    import dbos_agents

    from prism.engines.dbos import RunClient
    from prism.registry import build_registry_agents
    from prism.runtime.durable import list_decided_approvals, list_pending_decisions
    from prism.serve._decisions import DecisionService
    from prism.stores.postgres import PostgresStore

    fleet.env["PRISM_TEST_TOOL_TURNS"] = "1"
    worker = fleet.start("a")
    client = await RunClient.connect(fleet.url, agents=dbos_agents.REGISTRY)
    store = await PostgresStore.connect(fleet.url, max_size=2)
    service = DecisionService(store, agents=build_registry_agents(dbos_agents.REGISTRY, store),
                              by="ops")
    late = DecisionService(store, by="late")
    try:
        handle = await client.submit("approval", "appr-1")
        waiting = await handle.wait(timeout_s=60)
        assert waiting.status == "suspended"
        (pending,) = await list_pending_decisions(store)
        assert pending.run_id == handle.run_id and pending.tool_name == "effect"

        route = await service.route(pending)
        assert route.mode == "engine" and "DBOS workflow" in route.sentence
        assert await late.mode(pending) == "engine"
        check = await service.check_arguments(pending, {"label": 3, "turn": 0})
        assert [p.path for p in check.problems] == ["/label"]

        sent = await service.decide(pending.run_id, pending.approval_id, "allow_once",
                                    reason="fine")
        assert (sent.status, sent.mode) == ("sent", "engine"), sent.message
        done = await handle.wait(timeout_s=60)
        assert done.status == "succeeded", done
        effects = read_log(fleet.effects_log)
        assert [(kind, pid) for kind, pid, _label, _turn in effects] == [
            ("begin", str(worker.pid)), ("end", str(worker.pid))
        ]
        (decided,) = await list_decided_approvals(store, pending.run_id)
        assert (decided.by, decided.outcome, decided.reason) == ("ops", "allow_once", "fine")
        assert decided.applied_at is not None

        lost = await late.decide(pending.run_id, pending.approval_id, "reject_once")
        assert lost.status == "lost" and lost.decided == decided
    finally:
        await service.aclose()
        await late.aclose()
        await store.aclose()
        await client.aclose()
    worker.terminate()
    assert worker.proc.wait(60) == 0, worker.text()
