"""The state one serving process keeps: its agents, their stores, the conversations and runs in
progress, and the restart of runs a dead server left behind.

**Shutdown.** When the client goes away (end of standard input, the HTTP server stopping), the
runs in progress are stopped at their next turn boundary (a clean stop, resumable:
``stop_detail`` [`SHUTDOWN_REASON`][prism.mcp.serving._service.SHUTDOWN_REASON]) and waited for ``stop_wait_s`` seconds; a run still
going after that is left as it is (the ``prism mcp serve`` command then exits at once), and the
next server on the store resumes it as after a crash. A cancellation from the client
(``notifications/cancelled``) is not a shutdown: it aborts the call's run.

**Restart.** Each server writes a heartbeat record; each conversation's record names the server
that ran its latest call. On start, and then every ``lease_s`` seconds, a server with
``resume=True`` lists its agents' resumable runs (``prism.runtime.durable.list_agent_runs``) and
resumes in the background the runs of its conversations whose server is gone — stopped, a dead
process of this host, or silent for ``lease_s`` seconds: a run cut off mid-run (``running``) or
stopped by a shutdown continues; a suspended run continues when decisions recorded for it wait
(``record_decisions``, the inspector's inbox). Of several servers restarting on one store, the
one whose claim of the conversation's record wins resumes it; the resume's own compare-and-set
(``CheckpointConflictError``) settles any remaining race, one winner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Final

from prism._util import new_id
from prism.checkpoints import CheckpointStore, MemoryCheckpointStore
from prism.errors import AgentRunError, CheckpointConflictError, PrismError
from prism.mcp.serving._records import Records
from prism.mcp.serving._results import Outcome, failure_outcome, outcome_of
from prism.mcp.serving._tools import ServedAgent
from prism.redaction import SecretRedactor, create_secret_redactor
from prism.runtime.durable import (
    AgentRunState,
    coerce_run_state_options,
    list_agent_runs,
    list_recorded_decisions,
    resume_agent_run,
)
from prism.runtime.run.turn_policy import Continue, Stop, TurnBoundaryContext, TurnPolicy
from prism.store import MemorySessionStore, SessionStore
from prism.types import RunResult

__all__ = ["SHUTDOWN_REASON", "Service"]

_log = logging.getLogger("prism.mcp.serving")

SHUTDOWN_REASON: Final = "prism mcp serve shut down"
"""The ``stop_detail`` of a run stopped at a turn boundary because its server shut down."""
_SCAN_LIMIT: Final = 1000


class Service:
    """One serving process's agents and state (see the module docstring).

    Args:
        served: The served agents (distinct tool names).
        store: Where the serving records of agents without durable run state are kept (default:
            a private memory store); a durable agent's records go to its run-state store.
        approval_wait_s: Seconds an approval waits for the client's elicitation answer.
        secrets: Strings removed from every result and notification besides each agent's own.
        resume: Resume abandoned runs (on start and every ``lease_s``).
        lease_s: Seconds of silence after which a server counts as gone.
        stop_wait_s: Seconds a shutdown waits for runs to reach a turn boundary.
    """

    def __init__(
        self,
        served: Sequence[ServedAgent],
        *,
        store: CheckpointStore | None,
        approval_wait_s: float,
        secrets: Sequence[str],
        resume: bool,
        lease_s: float,
        stop_wait_s: float,
    ) -> None:
        self.served = {s.name: s for s in served}
        self.results = {s.result_name: s for s in served}
        self.approval_wait_s = approval_wait_s
        self.resume = resume
        self.lease_s = lease_s
        self.stop_wait_s = stop_wait_s
        self.server_id = new_id("mcpserver")
        self.key = os.urandom(32)
        """Signs the ``request_state`` of input-required results (2026 revision)."""
        self.closing = False
        self.policy = TurnPolicy(stop=self._stop)
        self.active: dict[str, str | None] = {}
        """Session id → the run in progress in this process (``None`` before its id is known)."""
        self.tasks: set[asyncio.Task[Any]] = set()
        self._secrets = tuple(s for s in secrets if s)
        self._fallback = store or MemoryCheckpointStore()
        self._sessions: dict[str, SessionStore] = {}
        self._records: dict[int, Records] = {}
        self._users = 0
        self._loop_task: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        self.ended = True
        """Whether every run ended at the last shutdown (``False``: some were left going)."""

    # ----------------------------------------------------------------- per agent

    def checkpoints(self, served: ServedAgent) -> CheckpointStore:
        """The checkpoint store of ``served``'s runs and records."""
        options = coerce_run_state_options(served.agent.config.run_state)
        return options.checkpoints if options is not None else self._fallback

    def records(self, served: ServedAgent) -> Records:
        """The serving records next to ``served``'s runs."""
        store = self.checkpoints(served)
        found = self._records.get(id(store))
        if found is None:
            found = self._records[id(store)] = Records(store)
        return found

    def session_store(self, served: ServedAgent) -> SessionStore:
        """Where ``served``'s conversations are kept: the agent's store, else a memory store of
        this server."""
        store = served.agent.config.store
        if store is not None:
            return store
        return self._sessions.setdefault(served.name, MemorySessionStore())

    def redactor(self, served: ServedAgent) -> SecretRedactor | None:
        """The redactor of everything ``served`` sends: the agent's secrets and the server's."""
        own = served.agent.config.redactor
        if not self._secrets:
            return own
        secrets = (*(own.secrets if own is not None else ()), *self._secrets)
        return create_secret_redactor(secrets)

    def by_agent_id(self, agent_id: str, tool: object) -> ServedAgent | None:
        """The served agent that runs ``agent_id``'s runs (``tool``: the conversation's tool)."""
        named = self.served.get(tool) if isinstance(tool, str) else None
        if named is not None and named.agent_id == agent_id:
            return named
        return next((s for s in self.served.values() if s.agent_id == agent_id), None)

    # ----------------------------------------------------------------- tasks

    def spawn(self, work: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        """Run ``work`` as a task this service tracks until it ends."""
        task = asyncio.ensure_future(work)
        task.set_name(name)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def store_outcome(self, served: ServedAgent, outcome: Outcome) -> None:
        """Keep a finished run's outcome for ``<name>_result`` (a failure to write is logged)."""
        try:
            await self.records(served).update(f"result:{outcome['run_id']}", lambda _: outcome)
        except Exception as exc:
            _log.warning("keeping the outcome of run %s failed: %s", outcome.get("run_id"), exc)

    async def claim_session(self, served: ServedAgent, session_id: str) -> bool:
        """Name this server as the conversation's; ``False`` when it is not a served one."""

        def change(value: dict[str, Any] | None) -> dict[str, Any] | None:
            if value is None:
                return None
            return {**value, "server": self.server_id}

        return await self.records(served).update(f"session:{session_id}", change) is not None

    # ----------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Service:
        """Start (the first user): heartbeat, and the recovery loop when ``resume``."""
        self._users += 1
        if self._users == 1:
            self.closing = False
            self._stopped = asyncio.Event()
            await self._beat()
            self._loop_task = asyncio.create_task(self._loop(), name="prism mcp serve recovery")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """The last user out shuts down (see the module docstring)."""
        self._users = max(0, self._users - 1)
        if self._users == 0:
            await self.shutdown()

    def begin_shutdown(self) -> None:
        """Stop taking work: calls cancelled from now on leave their runs to the turn policy."""
        self.closing = True

    async def shutdown(self) -> bool:
        """Stop runs at their next turn boundary, wait ``stop_wait_s``; ``True`` when every run
        ended (``False``: some are left running, for the next server to resume)."""
        self.closing = True
        if self._stopped.is_set():
            return self.ended  # shut down already (the HTTP app's lifespan, then the server's)
        self._stopped.set()
        loop_task, self._loop_task = self._loop_task, None
        if loop_task is not None:
            loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop_task
        pending = [t for t in self.tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=self.stop_wait_s)
        ended = self.ended = all(t.done() for t in pending)
        with contextlib.suppress(Exception):
            for records in self._unique_records():
                await records.beat(self.server_id, stopped=ended)
        return ended

    def _stop(self, _: TurnBoundaryContext) -> Continue | Stop:
        return Stop(SHUTDOWN_REASON) if self.closing else Continue()

    def _unique_records(self) -> list[Records]:
        for served in self.served.values():
            self.records(served)
        return list(self._records.values())

    async def _beat(self) -> None:
        for records in self._unique_records():
            try:
                await records.beat(self.server_id)
            except Exception as exc:
                _log.warning("the heartbeat write failed: %s", exc)

    async def _loop(self) -> None:
        beat_every = max(self.lease_s / 3, 0.05)
        next_scan = 0.0
        loop = asyncio.get_running_loop()
        while not self._stopped.is_set():
            if self.resume and loop.time() >= next_scan:
                next_scan = loop.time() + self.lease_s
                try:
                    await self.scan()
                except Exception as exc:  # a store hiccup: the next scan tries again
                    _log.warning("looking for runs to resume failed: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), beat_every)
            if not self._stopped.is_set():
                await self._beat()

    # ----------------------------------------------------------------- recovery

    async def scan(self) -> list[str]:
        """Resume, in the background, the runs a gone server left (see the module docstring);
        returns their ids."""
        started: list[str] = []
        seen: set[int] = set()
        for served in self.served.values():
            store = self.checkpoints(served)
            if id(store) in seen:
                continue
            seen.add(id(store))
            try:
                states = await list_agent_runs(store, limit=_SCAN_LIMIT)
            except PrismError:  # a store without the run index: nothing to resume
                continue
            records = self.records(served)
            for state in states:
                if await self._adopt(store, records, state):
                    started.append(state.run_id)
        return started

    async def _adopt(self, store: CheckpointStore, records: Records, state: AgentRunState) -> bool:
        if self.closing or state.session_id in self.active:
            return False
        record = await records.load(f"session:{state.session_id}")
        value = record.value if record is not None else None
        if record is None or not isinstance(value, dict):
            return False  # not a conversation of a served agent
        served = self.by_agent_id(state.agent_id, value.get("tool"))
        if served is None:
            return False
        owner = value.get("server")
        if isinstance(owner, str) and await records.alive(
            owner, me=self.server_id, lease_s=self.lease_s
        ):
            return False
        if state.status == "suspended" and not await list_recorded_decisions(store, state.run_id):
            return False  # waits for a decision: nothing to do until one is recorded
        if not await records.claim(
            f"session:{state.session_id}", record, {**value, "server": self.server_id}
        ):
            return False  # another server claimed it first
        decisions = "recorded" if state.status == "suspended" else None
        self.resume_in_background(served, state, decisions=decisions)
        return True

    def resume_in_background(
        self,
        served: ServedAgent,
        state: AgentRunState,
        *,
        decisions: str | None,
    ) -> asyncio.Task[Outcome | None]:
        """Resume ``state``'s run in a task of this service; its outcome is kept when it ends."""
        self.active[state.session_id] = state.run_id
        session = served.agent.create_session(state.session_id, store=self.session_store(served))

        async def resume() -> Outcome | None:
            redactor = self.redactor(served)
            try:
                if decisions == "recorded":
                    result: RunResult = await resume_agent_run(
                        session, state.run_id, decisions="recorded", turn_policy=self.policy
                    )
                else:
                    result = await resume_agent_run(session, state.run_id, turn_policy=self.policy)
            except AgentRunError as exc:
                outcome = failure_outcome(exc, redactor=redactor, session_id=state.session_id)
            except CheckpointConflictError:
                return None  # another server resumed it first
            except PrismError as exc:
                _log.warning("resuming run %s failed: %s (%s)", state.run_id, exc, exc.code)
                return None
            else:
                if result.status == "suspended" or (
                    result.status == "succeeded" and result.stop_reason == "host_policy"
                ):
                    return None
                outcome = outcome_of(result, redactor=redactor)
            await self.store_outcome(served, outcome)
            return outcome

        async def tracked() -> Outcome | None:
            try:
                return await resume()
            finally:
                if self.active.get(state.session_id) == state.run_id:
                    del self.active[state.session_id]

        task: asyncio.Task[Outcome | None] = self.spawn(tracked(), f"prism mcp {state.run_id}")
        return task


def served_map(served: Sequence[ServedAgent]) -> Mapping[str, ServedAgent]:
    """``served`` by tool name, checked: distinct names, none another's ``<name>_result``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — no agent, or a name used twice.
    """
    from prism.errors import PrismConfigError

    if not served:
        raise PrismConfigError("an MCP server needs at least one agent to serve")
    names: dict[str, str] = {}
    for item in served:
        for name, what in ((item.name, "tool"), (item.result_name, "result tool")):
            if name in names:
                raise PrismConfigError(
                    f"two served tools are named {name!r} (a {names[name]} and a {what})"
                )
            names[name] = what
    return {s.name: s for s in served}
