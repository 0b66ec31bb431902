"""The DBOS workflow of one prism run, and the worker-side state it runs against.

One prism run is one DBOS workflow, ``prism.run``, whose workflow id is the run id. Its steps:

1. ``prism.leg`` — one leg of the run ([`run_leg()`][prism.engines.dbos._legs.run_leg]): a start, a
   continuation after a crash or a hand-over, or a decided approval, up to the next suspension
   or the end, with every-turn checkpoints. Its outcome is published as the workflow event
   ``prism.outcome``.
2. While the outcome waits (``suspended`` for an approval, ``ambiguous`` for an operator), the
   workflow waits for a message on ``prism.decision`` — a durable wait, in rounds of
   ``decision_wait_s`` seconds (DBOS's receive timeout), which a dead worker's successor
   continues — then runs the next leg with the decision.
3. A ``released`` outcome (this worker shut down at a turn boundary) is continued by the next
   leg on the worker that takes the workflow over.
4. A final outcome is the workflow's result.

A leg's step has three attempts; after a failed one, the next waits until the database answers
(a restart), up to ``_STORE_WAIT_S``. A step that runs out of attempts does not fail
the workflow alone: ``prism.give_up`` ([`fail_run()`][prism.engines.dbos._legs.fail_run]) writes the
stored run ``failed`` and the workflow returns that outcome, so prism's store and DBOS agree.

A workflow on a worker that shuts down — or that lost its run to another worker — *parks*:
it waits, without recording anything, until the process ends; DBOS then continues it elsewhere
from its recorded steps. The decorators register the workflow when this module is imported,
which every worker does before DBOS launches.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Final, NoReturn

from dbos import DBOS

from prism.types import JsonValue

from ._legs import LegContext, fail_run, run_leg, wait_for_store
from ._outcome import DECISION_TOPIC, FINAL_STATUSES, OUTCOME_EVENT, WORKFLOW_NAME

__all__ = ["GIVE_UP_STEP", "LEG_STEP", "WORKFLOW_NAME", "WorkerRuntime", "install", "run_workflow"]

LEG_STEP: Final = "prism.leg"
"""The DBOS step name of one leg."""
GIVE_UP_STEP: Final = "prism.give_up"
"""The DBOS step name that ends a run whose leg ran out of retries as ``failed``."""
_LOST_RETRIES: Final = 40
_STORE_WAIT_S: Final = 120.0
"""Most seconds a leg that lost the database waits for it before its step's next attempt."""


class WorkerRuntime:
    """What the workflows of this process run against: the leg context, the drain flag, and
    which runs are inside a leg (a drain waits for them to reach a turn boundary).

    Args:
        ctx: The leg context (its ``draining`` should read [`draining`][prism.engines.dbos._workflow.LegContext.draining]).
        decision_wait_s: Seconds of one receive round while a run waits for a decision.
        lease_ok: Renews the lease; ``False`` when this worker was declared dead.
    """

    def __init__(
        self,
        ctx: LegContext,
        *,
        decision_wait_s: float,
        lease_ok: Callable[[], Awaitable[bool]],
    ) -> None:
        self.ctx = ctx
        self.decision_wait_s = decision_wait_s
        self.lease_ok = lease_ok
        """Renew this worker's lease now; ``False`` when another worker declared it dead."""
        self.draining = threading.Event()
        """Set when the worker shuts down: legs stop at their next turn boundary, workflows
        park before their next step."""
        self.in_leg: set[str] = set()
        """Runs inside a ``prism.leg`` step now."""
        self.leg_ended = asyncio.Event()
        """Set whenever a leg step ends (a drain waits on it)."""
        self.tasks: dict[str, asyncio.Task[Any]] = {}
        """The workflow task of every run this process has started."""

    async def park(self) -> NoReturn:
        """Wait until the process ends (the task is cancelled); nothing is recorded."""
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


_runtime: WorkerRuntime | None = None


def install(runtime: WorkerRuntime | None) -> None:
    """Make ``runtime`` the one this process's workflows use (``None`` removes it)."""
    global _runtime
    _runtime = runtime


def _current() -> WorkerRuntime:
    if _runtime is None:
        raise RuntimeError("no prism worker runs in this process")
    return _runtime


@DBOS.step(name=LEG_STEP, retries_allowed=True, max_attempts=3, interval_seconds=1.0)
async def leg_step(
    run_id: str,
    request: dict[str, Any],
    decision: dict[str, Any] | None,
    answers_version: int | None,
) -> dict[str, JsonValue]:
    """One leg of the run (at-least-once: a re-execution continues from the stored state)."""
    runtime = _current()
    runtime.in_leg.add(run_id)
    try:
        for attempt in range(_LOST_RETRIES):
            try:
                outcome = await run_leg(runtime.ctx, run_id, request, decision, answers_version)
            except Exception:
                # When the database went away (a restart), the step's next attempt starts once
                # it answers again, rather than spending the attempts while it is down.
                await wait_for_store(runtime.ctx.store, _STORE_WAIT_S)
                raise
            if outcome["status"] != "lost":
                return outcome
            # Another process wrote the run's checkpoint: a worker declared dead that has not
            # stopped yet. If that is this one, stop here (nothing recorded); else let the
            # stale one stop (it does at its next lease renewal) and continue from what it left.
            if not await runtime.lease_ok():
                runtime.in_leg.discard(run_id)
                await runtime.park()
            await asyncio.sleep(min(0.25 * (attempt + 1), 2.0))
        raise RuntimeError(f"run {run_id}: its checkpoint keeps being claimed by another process")
    finally:
        runtime.in_leg.discard(run_id)
        runtime.leg_ended.set()


def _reason(exc: Exception) -> str:
    """What a leg's step that ran out of attempts raised last (at most 2,000 characters)."""
    errors = getattr(exc, "errors", None)  # DBOSMaxStepRetriesExceeded keeps every attempt's
    last = errors[-1] if isinstance(errors, list) and errors else exc
    text = f"{type(exc).__name__}: {exc}"
    if last is not exc:
        text += f"; the last attempt raised {type(last).__name__}: {last}"
    return text[:2000]


def _answers_version(outcome: dict[str, JsonValue]) -> int | None:
    """The envelope version of the suspension an outcome reports."""
    result = outcome.get("result")
    if not isinstance(result, dict):
        return None
    state = result.get("run_state")
    if not isinstance(state, dict):
        return None
    version = state.get("version")
    return version if isinstance(version, int) else None


@DBOS.step(
    name=GIVE_UP_STEP,
    retries_allowed=True,
    max_attempts=16,
    interval_seconds=1.0,
    backoff_rate=1.5,
)
async def give_up_step(run_id: str, reason: str) -> dict[str, JsonValue]:
    """Record in the store that the engine gave up on the run (see ``fail_run``); tried again
    at growing intervals (for about 15 minutes in all) while the store refuses the write."""
    return await fail_run(_current().ctx, run_id, reason)


@DBOS.workflow(name=WORKFLOW_NAME)
async def run_workflow(request: dict[str, Any]) -> dict[str, JsonValue]:
    """One prism run; the workflow id is the run id. See the module docstring."""
    runtime = _current()
    run_id = DBOS.workflow_id
    assert run_id is not None
    task = asyncio.current_task()
    if task is not None:
        runtime.tasks[run_id] = task
    try:
        leg = 0
        decision: dict[str, Any] | None = None
        answers: int | None = None
        while True:
            if runtime.draining.is_set():
                await runtime.park()
            try:
                outcome = await leg_step(run_id, request, decision, answers)
            except Exception as exc:
                # The leg's step ran out of retries: end the run as failed in the store too,
                # so that prism and the engine agree (unless this worker is going away: then
                # the run continues elsewhere).
                if runtime.draining.is_set():
                    await runtime.park()
                outcome = await give_up_step(run_id, _reason(exc))
            leg += 1
            outcome["leg"] = leg
            status = outcome["status"]
            await DBOS.set_event_async(OUTCOME_EVENT, outcome)
            if status in FINAL_STATUSES:
                return outcome
            if status == "released":  # continued by the next leg, wherever it runs
                decision, answers = None, None
                continue
            answers = _answers_version(outcome)
            message: Any = None
            while message is None:
                if runtime.draining.is_set():
                    await runtime.park()
                message = await DBOS.recv_async(
                    DECISION_TOPIC, timeout_seconds=runtime.decision_wait_s
                )
            decision = message if isinstance(message, dict) else {"decision": str(message)}
            await DBOS.set_event_async(OUTCOME_EVENT, {"status": "running", "leg": leg})
    finally:
        if runtime.tasks.get(run_id) is task:
            del runtime.tasks[run_id]
