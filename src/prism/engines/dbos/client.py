"""Submit runs to DBOS workers and follow them, from any process on any machine.

[`RunClient`][prism.engines.dbos.client.RunClient] talks to the database only (DBOS's ``DBOSClient`` and the prism store); it
runs no workflow code, so a web server or a script can submit and wait without being a worker::

    client = await RunClient.connect("postgresql://app@db/app", agents=REGISTRY)
    handle = await client.submit("refunds", "Refund order 42", options={"metadata": {"t": 1}})
    outcome = await handle.wait()               # final, or waiting for an approval
    if outcome.status == "suspended":
        await handle.decide(decision="approve")  # the run goes on, on whichever worker is free
        outcome = await handle.wait()
    result = outcome.result                      # a prism RunResult
    await client.aclose()

**Events at a distance.** The workflow runs elsewhere, so a submitter reads what the run stored:

* [`RunClient.outcome()`][prism.engines.dbos.client.RunClient.outcome] / [`RunHandle.wait()`][prism.engines.dbos.client.RunHandle.wait] — the run's status and each leg's
  ``RunResult`` (status, stop reason, usage, the leg's messages, the interruption of a suspended
  run, the error of a failed one), and the calls an ambiguous run stopped on;
* [`RunClient.entries()`][prism.engines.dbos.client.RunClient.entries] — the session entries the run stored (its input, every assistant
  message and tool result, model changes), visible as soon as each is stored: at every turn;
* [`RunClient.events()`][prism.engines.dbos.client.RunClient.events] / [`RunClient.follow()`][prism.engines.dbos.client.RunClient.follow] — the run's ledger rows (every emitted
  event, streamed deltas included, in emission order) when the agent records its events in the
  PostgreSQL store (``run_ledger=store``); rows are written by the ledger writer shortly after
  emission; the unwritten tail of a leg whose worker died is lost. Without a ledger, only
  outcomes and entries are available at a distance.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from prism._util import new_id
from prism.errors import EngineNotReadyError, EngineVersionError, PrismConfigError
from prism.ledger_records import AgentEventRecord
from prism.runtime.durable import RunDecision
from prism.store import SessionEntry
from prism.types import JsonValue, Message, RunResult

from ._lease import LiveWorker, is_connection_lost, live_workers, version_mismatch
from ._outcome import (
    DECISION_TOPIC,
    FINAL_STATUSES,
    OUTCOME_EVENT,
    WAITING_STATUSES,
    WORKFLOW_NAME,
    EngineRunStatus,
    RunInfo,
    RunOutcome,
)
from ._registry import AgentFactory, application_version, build_agents, check_run_options

if TYPE_CHECKING:
    from dbos import DBOSClient

    from prism.stores.postgres import PostgresStore

__all__ = ["RunClient", "RunHandle"]

_DBOS_STATUS: dict[str, tuple[str, ...]] = {
    "queued": ("ENQUEUED",),
    "running": ("PENDING", "ENQUEUED"),
    "suspended": ("PENDING",),
    "ambiguous": ("PENDING",),
    "succeeded": ("SUCCESS",),
    "failed": ("SUCCESS", "ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"),
    "aborted": ("SUCCESS",),
    "denied": ("SUCCESS",),
    "cancelled": ("CANCELLED",),
}


class RunClient:
    """Submits runs to the workers of one database and reads them back. Build it with
    ``connect()``; close it with ``aclose()``."""

    def __init__(
        self,
        *,
        store: PostgresStore,
        dbos_client: DBOSClient,
        conninfo: str,
        queue: str,
        engine_schema: str,
        revisions: Mapping[str, str] | None,
        system_schema: str = "dbos",
    ) -> None:
        self.store = store
        """The prism store (sessions, checkpoints, ledger)."""
        self._dbos = dbos_client
        self._conninfo = conninfo
        self._queue = queue
        self._engine_schema = engine_schema
        self._system_schema = system_schema
        self._revisions = dict(revisions) if revisions is not None else None
        self._conn: Any = None
        self._conn_lock = threading.Lock()
        self._sessions: dict[str, str] = {}

    @classmethod
    async def connect(
        cls,
        store: str,
        *,
        agents: Mapping[str, AgentFactory] | None = None,
        queue: str = "prism.runs",
        app_name: str = "prism",
        store_schema: str = "prism",
        system_schema: str = "dbos",
        engine_schema: str = "prism_engine",
    ) -> RunClient:
        """Connect to the database the workers use.

        Args:
            store: Its PostgreSQL URL.
            agents: The workers' registry; with it every run is pinned to the application
                version these agents give (and refused when no live worker serves it); without
                it a run is pinned to the version of the live workers serving its agent.
            queue: The workers' queue.
            app_name: The workers' DBOS application name.
            store_schema: Schema of the prism store.
            system_schema: Schema of DBOS's tables.
            engine_schema: Schema of the lease table.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — an agent of ``agents`` cannot be served.
            ImportError: the ``dbos`` or ``postgres`` extra is missing.
        """
        from dbos import DBOSClient

        from prism.stores.postgres import PostgresStore

        opened = await PostgresStore.connect(store, schema=store_schema, max_size=4)
        try:
            revisions = None
            if agents is not None:
                served = build_agents(agents, opened)
                revisions = {name: s.definition_revision for name, s in served.items()}
            dbos_client = await asyncio.to_thread(
                DBOSClient,
                system_database_url=store,
                dbos_system_schema=system_schema,
                application_name=app_name,
            )
        except BaseException:
            await opened.aclose()
            raise
        return cls(
            store=opened,
            dbos_client=dbos_client,
            conninfo=store,
            queue=queue,
            engine_schema=engine_schema,
            revisions=revisions,
            system_schema=system_schema,
        )

    async def aclose(self) -> None:
        """Close the connections."""
        await asyncio.to_thread(self._dbos.destroy)
        if self._conn is not None:
            self._conn.close()
        await self.store.aclose()

    # ----------------------------------------------------------------- submitting

    async def submit(
        self,
        agent: str,
        input: str | Sequence[Message | Mapping[str, Any]],
        *,
        session_id: str | None = None,
        options: Mapping[str, Any] | None = None,
        run_id: str | None = None,
    ) -> RunHandle:
        """Queue a run of the registry agent ``agent``; a free worker of its version runs it.

        Args:
            agent: The registry name.
            input: Text, or messages (``Message`` or their ``to_dict()`` form).
            session_id: The conversation (default: a new ``session_…`` id).
            options: JSON run options (see
                [`SUBMITTED_OPTION_NAMES`][prism.engines.dbos._registry.SUBMITTED_OPTION_NAMES]).
            run_id: The run id (default: a new ``run_…`` id); submitting an id again returns
                the run already submitted under it.

        Returns:
            A [`RunHandle`][prism.engines.dbos.client.RunHandle].

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown agent (with ``agents``), bad
                input or options.
            EngineVersionError: ``ERR_PRISM_ENGINE_VERSION`` — the run's version is served by
                no live worker while live workers run another one; or, without ``agents``, no
                live worker serves ``agent``.
            EngineNotReadyError: ``ERR_PRISM_ENGINE_NOT_READY`` — DBOS's tables are not in
                the database: no worker has started on it yet, or a starting worker did not
                finish creating them within 60 s (a submit waits for it). Retryable.

        A connection the server ended (a database restart) is opened again: the submit's read
        of the live workers is made once more, and DBOS retries its own statements until the
        database answers. The run id is the workflow id, so the run is queued once.
        """
        checked = check_run_options(options)
        if isinstance(input, str):
            payload: JsonValue = input
        elif isinstance(input, Sequence):
            payload = [
                (m if isinstance(m, Message) else Message.from_dict(_mapping(m))).to_dict()
                for m in input
            ]
        else:
            raise PrismConfigError(f"input must be text or messages, got {type(input).__name__}")
        version = await asyncio.to_thread(self._pin, agent)
        run = run_id or new_id("run")
        session = session_id or new_id("session")
        request = {"agent": agent, "session_id": session, "input": payload, "options": checked}
        await self._enqueue(
            {
                "workflow_name": WORKFLOW_NAME,
                "queue_name": self._queue,
                "workflow_id": run,
                "app_version": version,
            },
            request,
        )
        self._sessions[run] = session
        return RunHandle(self, run)

    async def _enqueue(self, options: Any, request: dict[str, Any]) -> None:
        """Put the run on the queue. While a worker that is starting has not finished creating
        DBOS's tables (a live lease, the tables missing or half-migrated), wait for it, at most
        ``_SCHEMA_WAIT_S``. A failed insert wrote nothing, so trying again is safe; DBOS's own
        retries of a lost connection recognise a row they already committed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _SCHEMA_WAIT_S
        delay = 0.05
        while True:
            try:
                await self._dbos.enqueue_async(options, request)
                return
            except Exception as exc:
                if not _schema_missing(exc):
                    raise
                starting = bool(await asyncio.to_thread(self._live_workers))
                if not starting or loop.time() >= deadline:
                    what = (
                        f"a worker has not finished creating them within {_SCHEMA_WAIT_S:.0f} s"
                        if starting
                        else "no worker has started on this database yet"
                    )
                    raise EngineNotReadyError(
                        f"the engine's tables (schema {self._system_schema!r}) are not ready: "
                        f"{what}. Start a worker (it creates them) and submit again"
                    ) from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    def _pin(self, agent: str) -> str:
        """The application version a run of ``agent`` is submitted under (see [`submit()`][prism.engines.dbos.client.RunClient.submit])."""
        import prism

        live = self._live_workers()
        if self._revisions is not None:
            if agent not in self._revisions:
                raise PrismConfigError(
                    f"unknown agent {agent!r}; the registry has: {', '.join(sorted(self._revisions))}"
                )
            version = application_version(prism.__version__, self._revisions)
            if live and all(w.app_version != version for w in live):
                raise version_mismatch("this submitter", version, self._revisions, live)
            return version
        serving = {w.app_version for w in live if agent in w.agents}
        if len(serving) == 1:
            return serving.pop()
        if not serving:
            raise EngineVersionError(
                f"no live worker serves agent {agent!r}: start one, or connect with "
                "agents=REGISTRY so the run is pinned to the registry's version"
            )
        raise EngineVersionError(
            f"live workers serve agent {agent!r} under several versions ({', '.join(sorted(serving))}): "
            "connect with agents=REGISTRY to pick one"
        )

    def _live_workers(self) -> list[LiveWorker]:
        """The live workers, over this client's connection; a connection the server ended (a
        database restart) is opened again and the read made once more."""
        import psycopg

        with self._conn_lock:
            for attempt in (1, 2):
                if self._conn is None:
                    self._conn = psycopg.connect(self._conninfo, autocommit=True)
                try:
                    return live_workers(self._conn, self._engine_schema)
                except Exception as exc:
                    if attempt == 2 or not is_connection_lost(exc, self._conn):
                        raise
                    self._conn.close()
                    self._conn = None
        raise AssertionError("unreachable")

    def handle(self, run_id: str) -> RunHandle:
        """A handle on a run submitted earlier (by any process)."""
        return RunHandle(self, run_id)

    async def decide(
        self,
        run_id: str,
        *,
        decision: Literal["approve", "deny", "continue"] = "continue",
        decisions: Sequence[RunDecision | Mapping[str, Any]] | None = None,
    ) -> None:
        """Send a decision to a waiting run; the next free worker of its version applies it.

        ``decision="approve"``/``"deny"`` or ``decisions=[RunDecision, ...]`` answer an approval
        (as [`prism.resume_agent_run()`][prism.resume_agent_run] does); ``"continue"`` continues an ``ambiguous`` run
        whose stored state an operator repaired. A decision the run refuses (an unknown
        approval id, say) leaves it waiting, with the reason in ``RunOutcome.note``.

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown ``decision`` or malformed
                ``decisions``.
        """
        if decision not in ("approve", "deny", "continue"):
            raise PrismConfigError(f"unknown decision {decision!r}")
        message: dict[str, JsonValue] = {"decision": decision}
        if decisions is not None:
            batch: list[JsonValue] = []
            for item in decisions:
                if isinstance(item, RunDecision):
                    batch.append(item.to_dict())
                elif isinstance(item, Mapping):
                    batch.append(RunDecision.from_dict(dict(item)).to_dict())
                else:
                    raise PrismConfigError("decisions must be RunDecision objects or mappings")
            message["decisions"] = batch
        await self._dbos.send_async(run_id, message, DECISION_TOPIC)

    # ----------------------------------------------------------------- reading

    async def _status(self, run_id: str, *, load_input: bool = False) -> Any:
        rows = await self._dbos.list_workflows_async(
            workflow_ids=[run_id], load_input=load_input, load_output=True
        )
        if not rows:
            raise PrismConfigError(f"no run {run_id!r} was submitted")
        return rows[0]

    async def outcome(self, run_id: str) -> RunOutcome:
        """The run's latest outcome ([`RunOutcome`][prism.engines.dbos.client.RunOutcome]; ``result`` is ``None`` while it runs).

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — no such run.
        """
        row = await self._status(run_id)
        return await self._outcome_of(row)

    async def _outcome_of(self, row: Any) -> RunOutcome:
        run_id = row.workflow_id
        status = row.status
        if status == "SUCCESS" and isinstance(row.output, Mapping):
            return RunOutcome.from_json(run_id, row.output)
        if status == "CANCELLED":
            return RunOutcome(run_id=run_id, status="cancelled", leg=0)
        if status in ("ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
            return RunOutcome(run_id=run_id, status="failed", leg=0, note=str(row.error or status))
        latest = await self._dbos.get_event_async(run_id, OUTCOME_EVENT, timeout_seconds=0)
        if not isinstance(latest, Mapping):
            state: EngineRunStatus = "queued" if status == "ENQUEUED" else "running"
            return RunOutcome(run_id=run_id, status=state, leg=0)
        if latest.get("status") in WAITING_STATUSES:
            return RunOutcome.from_json(run_id, latest)
        return RunOutcome(run_id=run_id, status="running", leg=int(latest.get("leg") or 0))

    async def wait(
        self,
        run_id: str,
        *,
        after_leg: int = 0,
        timeout_s: float | None = None,
        poll_s: float = 0.2,
    ) -> RunOutcome:
        """Wait until the run is final, or waits (``suspended``/``ambiguous``) after a leg later
        than ``after_leg``; return that outcome.

        Raises:
            TimeoutError: ``timeout_s`` seconds passed first.
            PrismConfigError: ``ERR_PRISM_CONFIG`` — no such run.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while True:
            outcome = await self.outcome(run_id)
            if outcome.status in FINAL_STATUSES or (
                outcome.status in WAITING_STATUSES and outcome.leg > after_leg
            ):
                return outcome
            if deadline is not None and loop.time() >= deadline:
                raise TimeoutError(f"run {run_id} is still {outcome.status} after {timeout_s} s")
            await asyncio.sleep(poll_s)

    async def list_runs(
        self,
        *,
        status: EngineRunStatus | None = None,
        agent: str | None = None,
        limit: int = 100,
    ) -> list[RunInfo]:
        """The submitted runs, newest first (at most ``limit`` rows are read).

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown ``status``.
        """
        if status is not None and status not in _DBOS_STATUS:
            raise PrismConfigError(f"unknown run status {status!r}")
        rows = await self._dbos.list_workflows_async(
            name=WORKFLOW_NAME,
            status=list(_DBOS_STATUS[status]) if status is not None else None,
            limit=limit,
            sort_desc=True,
            load_input=True,
            load_output=True,
        )
        out: list[RunInfo] = []
        for row in rows:
            request = _request_of(row)
            if agent is not None and request.get("agent") != agent:
                continue
            outcome = await self._outcome_of(row)
            if status is not None and outcome.status != status:
                continue
            session = request.get("session_id")
            out.append(
                RunInfo(
                    run_id=row.workflow_id,
                    agent=request.get("agent"),
                    session_id=session if isinstance(session, str) else None,
                    status=outcome.status,
                    worker=None if row.status == "ENQUEUED" else row.executor_id,
                    app_version=row.app_version,
                    created_at=row.created_at,
                    updated_at=row.updated_at,
                )
            )
        return out

    async def _session_of(self, run_id: str) -> str:
        session = self._sessions.get(run_id)
        if session is None:
            request = _request_of(await self._status(run_id, load_input=True))
            session = str(request.get("session_id"))
            self._sessions[run_id] = session
        return session

    async def entries(self, run_id: str) -> list[SessionEntry]:
        """The session entries the run stored so far, in store order (every branch)."""
        session = await self._session_of(run_id)
        return [e for e in await self.store.list(session) if e.run_id == run_id]

    async def events(self, run_id: str, *, after: int = 0) -> list[AgentEventRecord]:
        """The run's ledger event rows from index ``after`` on (empty without a ledger)."""
        session = await self._session_of(run_id)
        rows: list[AgentEventRecord] = await self.store.list_events(session, run_id=run_id)
        return rows[after:]

    async def follow(self, run_id: str, *, poll_s: float = 0.2) -> AsyncIterator[AgentEventRecord]:
        """Yield the run's ledger event rows as they are written, until the run is final or
        waits for a decision and every row written by then was yielded."""
        seen = 0
        while True:
            outcome = await self.outcome(run_id)
            rows = await self.events(run_id, after=seen)
            for row in rows:
                yield row
            seen += len(rows)
            if outcome.status in FINAL_STATUSES or outcome.status in WAITING_STATUSES:
                rows = await self.events(run_id, after=seen)
                for row in rows:
                    yield row
                return
            await asyncio.sleep(poll_s)


_SCHEMA_WAIT_S: Final = 60.0
"""Most seconds a submit waits for a starting worker to create DBOS's tables."""
_SCHEMA_STATES: Final = frozenset(("42P01", "42703", "3F000", "42883"))
"""SQLSTATEs of a missing table, column, schema or function."""


def _schema_missing(exc: BaseException) -> bool:
    """Whether ``exc`` (SQLAlchemy's, wrapping ``psycopg``'s) says a table, column, schema or
    function does not exist: DBOS's tables are missing or half-migrated."""
    orig = getattr(exc, "orig", None)
    return getattr(orig, "sqlstate", None) in _SCHEMA_STATES


def _mapping(value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise PrismConfigError(
            f"input messages must be Message or mappings, got {type(value).__name__}"
        )
    return dict(value)


def _request_of(row: Any) -> Mapping[str, Any]:
    inputs = row.input
    args = inputs.get("args") if isinstance(inputs, Mapping) else None
    if args and isinstance(args[0], Mapping):
        request: Mapping[str, Any] = args[0]
        return request
    return {}


class RunHandle:
    """One submitted run, as a submitter follows it."""

    def __init__(self, client: RunClient, run_id: str) -> None:
        self.client = client
        self.run_id = run_id
        """The run (and DBOS workflow) id."""
        self.last_leg = 0
        """The leg of the latest outcome [`wait()`][prism.engines.dbos.client.RunClient.wait] returned."""

    async def outcome(self) -> RunOutcome:
        """The run's latest outcome (see [`RunClient.outcome()`][prism.engines.dbos.client.RunClient.outcome])."""
        return await self.client.outcome(self.run_id)

    async def wait(self, *, timeout_s: float | None = None, poll_s: float = 0.2) -> RunOutcome:
        """Wait for the run to end or to wait for a decision after a leg this handle has not
        returned yet (so after [`decide()`][prism.engines.dbos.client.RunClient.decide], the next outcome)."""
        outcome = await self.client.wait(
            self.run_id, after_leg=self.last_leg, timeout_s=timeout_s, poll_s=poll_s
        )
        self.last_leg = outcome.leg
        return outcome

    async def result(
        self, *, timeout_s: float | None = None, poll_s: float = 0.2
    ) -> RunResult | None:
        """The ``RunResult`` of the run's next outcome (final, or suspended for an approval;
        ``None`` for a run that failed outside prism, see ``RunOutcome.note``).

        Raises:
            RunAmbiguousError: ``ERR_PRISM_RUN_AMBIGUOUS`` — the run stopped on ambiguous tool
                calls (named in the message and ``.calls``).
            TimeoutError: ``timeout_s`` seconds passed first.
        """
        outcome = await self.wait(timeout_s=timeout_s, poll_s=poll_s)
        outcome.raise_for_ambiguous()
        return outcome.result

    async def decide(
        self,
        *,
        decision: Literal["approve", "deny", "continue"] = "continue",
        decisions: Sequence[RunDecision | Mapping[str, Any]] | None = None,
    ) -> None:
        """Send a decision (see [`RunClient.decide()`][prism.engines.dbos.client.RunClient.decide])."""
        await self.client.decide(self.run_id, decision=decision, decisions=decisions)
