"""How a decision taken in ``prism serve``'s approval inbox takes effect: [`DecisionService`][prism.serve._decisions.DecisionService].

Every decision is first *recorded* (``prism.runtime.durable.record_decisions()``, the only write
the inbox makes to the store itself): of two deciders of one approval — two browser tabs, two
serve processes — the first recorded wins, and the other is told the winner's outcome, who decided
(``by``) and when. Then it takes effect by the run's *mode* ([`DecisionService.route()`][prism.serve._decisions.DecisionService.route]):

* ``engine`` — the run is a DBOS workflow (one with the run's id exists in the database's DBOS
  schema): the decision is sent through [`prism.engines.dbos.RunClient`][prism.engines.dbos.RunClient], and the next free
  worker of the run's version applies it. Such a run is never resumed here.
* ``in_process`` — the serve process has the run's agent (``--agents MODULE:REGISTRY``): it
  resumes the run itself with ``resume_agent_run(agent, run_id, decisions="recorded")`` in a
  background task it owns; the tool runs inside the serve process.
* ``cli`` — the ``prism`` command started the run: its agent is rebuilt from the session's stored
  settings as ``prism resume`` rebuilds it (``prism.cli._settings.command_agents``) and the run is
  resumed the same way.
* ``recorded`` — without the run's agent, or with ``--no-resume``: the decision stays recorded
  until a process with the agent applies it (``prism resume RUN_ID --recorded``, or
  ``resume_agent_run(agent, run_id, decisions="recorded")``).

A resumed run goes on in the background after its claim; the request that decided returns then.
On shutdown ([`DecisionService.aclose()`][prism.serve._decisions.DecisionService.aclose]) the background runs stop at their next turn boundary
(resumable, as a Ctrl-C of ``prism run`` leaves them), and are cancelled after a grace period.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

from prism.checkpoints import CheckpointStore
from prism.errors import AgentDecisionError, AgentRunError, PrismConfigError, PrismError
from prism.runtime import Agent
from prism.runtime.durable import (
    DecidedApproval,
    DecisionOutcome,
    PendingDecisionRecord,
    RunDecision,
    list_decided_approvals,
    list_pending_decisions,
    list_recorded_decisions,
    record_decisions,
    resume_agent_run,
)
from prism.runtime.durable._approvals import coerce_decisions
from prism.runtime.run.turn_policy import Continue, Stop, TurnBoundaryContext, TurnPolicy
from prism.tools.schema import compile_schema, schema_errors
from prism.types import JsonValue, RunResult

if TYPE_CHECKING:
    from prism.engines.dbos import RunClient

__all__ = [
    "SHUTDOWN_REASON",
    "ArgumentProblem",
    "ArgumentsCheck",
    "ArgumentsInvalidError",
    "CommandAgents",
    "DecisionMode",
    "DecisionResult",
    "DecisionRoute",
    "DecisionService",
    "DecisionStatus",
]

DecisionMode: TypeAlias = Literal["engine", "in_process", "cli", "recorded"]
"""How a decision on a run takes effect (see the module docstring)."""
DecisionStatus: TypeAlias = Literal["applied", "recorded", "sent", "lost", "refused"]
"""What became of one decision (see [`DecisionResult`][prism.serve._decisions.DecisionResult])."""
CommandAgents: TypeAlias = Callable[[str], Awaitable[Agent | None]]
"""Session id → the agent the ``prism`` command built that session's runs with (rebuilt from its
stored settings), ``None`` for a session the command did not start; ``PrismConfigError`` when
the settings cannot build an agent here. ``prism.cli._settings.command_agents`` makes one."""

SHUTDOWN_REASON: Final = "prism serve shut down"
"""The ``stop_detail`` of a background run stopped by [`DecisionService.aclose()`][prism.serve._decisions.DecisionService.aclose]."""

_OUTCOME_WORDS: Final[Mapping[str, str]] = {
    "allow_once": "allowed once",
    "allow_for_run": "allowed for the rest of the run",
    "reject_once": "rejected once",
    "reject_for_run": "rejected for the rest of the run",
}
_ALLOWING: Final = frozenset(("allow_once", "allow_for_run"))
_IDENTIFIER: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class DecisionRoute:
    """How a decision on one pending approval takes effect, and the sentence the page shows."""

    mode: DecisionMode
    """``engine``, ``in_process``, ``cli`` or ``recorded``."""
    sentence: str
    """What deciding does, for the operator (one or two sentences)."""


@dataclass(frozen=True, slots=True)
class ArgumentProblem:
    """One way modified arguments fail the tool's parameter schema."""

    path: str
    """RFC 6901 pointer of the failing value in the arguments (``""``: the arguments object
    itself, e.g. a missing required property; ``"/amount"``; ``"/items/0/sku"``)."""
    message: str
    """What is wrong (jsonschema's message)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ArgumentsCheck:
    """Modified arguments checked against the tool's parameter schema
    ([`DecisionService.check_arguments()`][prism.serve._decisions.DecisionService.check_arguments])."""

    tool_name: str
    """The tool the arguments are for."""
    schema: Mapping[str, Any] | None = None
    """The tool's parameter schema (JSON Schema), or ``None`` when this process does not know
    it (``note`` says why): the arguments are then checked only when the decision is applied."""
    problems: tuple[ArgumentProblem, ...] = ()
    """Every failure, sorted by path; empty when the arguments pass (or no schema is known)."""
    note: str | None = None
    """Why no schema is known, or why the arguments cannot be changed, else ``None``."""

    @property
    def ok(self) -> bool:
        """No problem found."""
        return not self.problems


class ArgumentsInvalidError(AgentDecisionError):
    """Modified arguments that do not match the tool's parameter schema; nothing was recorded.

    Code ``ERR_PRISM_DECISION_INVALID``; ``problems`` lists each failing value's path and
    message; ``run_id`` and ``approval_id`` name the approval."""

    problems: tuple[ArgumentProblem, ...] = ()
    approval_id: str | None = None

    def __init__(
        self,
        message: str,
        *,
        problems: tuple[ArgumentProblem, ...],
        run_id: str,
        approval_id: str,
    ) -> None:
        super().__init__(
            "ERR_PRISM_DECISION_INVALID",
            message,
            problems=problems,
            run_id=run_id,
            approval_id=approval_id,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionResult:
    """What became of one decision ([`DecisionService.decide()`][prism.serve._decisions.DecisionService.decide]).

    ``status``:

    * ``applied`` — a resume applied it to the run (this process's, in ``in_process`` / ``cli``
      mode; the run goes on in the background);
    * ``recorded`` — recorded, waiting for a process with the run's agent to apply it
      (``recorded`` mode; or a resume here could not apply it: ``code`` and ``message`` say why);
    * ``sent`` — recorded and sent to the engine (``engine`` mode);
    * ``lost`` — another decision settled the approval first: ``decided`` is the winner (its
      outcome, ``by``, ``decided_at``; ``applied_at`` is ``None`` while it waits to be applied);
    * ``refused`` — the approval is not waiting on the run and no decision of it is known
      (``code``: ``ERR_PRISM_DECISION_UNKNOWN``), or the engine cannot be reached.
    """

    status: DecisionStatus
    """See above."""
    mode: DecisionMode | None
    """The run's mode; ``None`` when the approval was not pending."""
    run_id: str
    """The run decided on."""
    approval_id: str
    """The approval decided."""
    message: str
    """One sentence for the page."""
    decided: DecidedApproval | None = None
    """This decision as recorded or applied; the winner's for ``lost``."""
    code: str | None = None
    """The error code of a refusal, or of a resume that could not apply a recorded decision."""


@dataclass(eq=False, slots=True)
class _Background:
    """One background resume: its task, and set once it claimed the run."""

    run_id: str
    task: asyncio.Task[RunResult | Exception]
    claimed: asyncio.Event


class DecisionService:
    """Applies the decisions an operator takes in the approval inbox (see the module docstring).

    Args:
        store: The store the inbox shows (sessions and checkpoints: a SQLite or PostgreSQL store).
        agents: Registry agents by registry name (``prism.registry.build_registry_agents``): a
            pending decision whose run's agent id (``config.id or config.name``) or registry name
            is one of them is resumed here. ``None``: none.
        resume: ``False`` (``--no-resume``): every decision is only recorded (engine runs are
            still sent to the engine).
        by: Who decides, kept with every decision (``RunDecision.by``; 1–256 characters).
        command_agents: How to rebuild the agent of a run the ``prism`` command started
            (``CommandAgents``); ``None``: such runs are decided by recording.
        engine: A connected ``RunClient`` for DBOS runs (not closed by ``aclose()``); by default
            one is connected over the store's PostgreSQL database when a DBOS run is decided.
        engine_schema: The schema of DBOS's tables (``workflow_status``) in the store's
            database, where a run's workflow is looked up.
        on_finished: Called with the run id and the ``RunResult`` (or the exception) when a
            background resume ends; may be a coroutine function.
        claim_wait_s: Most seconds ``decide()`` waits for an in-process resume to claim the run
            before it returns ``recorded`` (the resume goes on).
        stop_wait_s: Seconds ``aclose()`` gives background runs to reach a turn boundary.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — a bad ``by``, ``engine_schema``, ``agents`` or
            time.
    """

    def __init__(
        self,
        store: CheckpointStore,
        *,
        agents: Mapping[str, Agent] | None = None,
        resume: bool = True,
        by: str = "prism serve",
        command_agents: CommandAgents | None = None,
        engine: RunClient | None = None,
        engine_schema: str = "dbos",
        on_finished: Callable[[str, RunResult | Exception], object] | None = None,
        claim_wait_s: float = 30.0,
        stop_wait_s: float = 10.0,
    ) -> None:
        if not isinstance(by, str) or not 1 <= len(by) <= 256:
            raise PrismConfigError(f"by must be a string of 1-256 characters, got {by!r}")
        if not _IDENTIFIER.match(engine_schema):
            raise PrismConfigError(
                f"engine_schema must be a plain identifier, got {engine_schema!r}"
            )
        for name, value in (("claim_wait_s", claim_wait_s), ("stop_wait_s", stop_wait_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise PrismConfigError(f"{name} must be a number >= 0, got {value!r}")
        self.store = store
        """The store."""
        self.by = by
        """Who decides."""
        self.resume = resume
        """Whether runs are resumed here (``False``: recorded only)."""
        self._agents: dict[str, Agent] = {}
        for name, agent in (agents or {}).items():
            if not isinstance(agent, Agent):
                raise PrismConfigError(f"agents[{name!r}] is {type(agent).__name__}, not an Agent")
            config = agent.config
            self._agents.setdefault(str(config.id or config.name or name), agent)
            self._agents.setdefault(name, agent)
        self._command_agents = command_agents
        self._command_seen: dict[str, Agent | str | None] = {}
        self._engine = engine
        self._owns_engine = False
        self._engine_schema = engine_schema
        self._engine_runs: dict[str, bool] = {}
        self._on_finished = on_finished
        self._claim_wait_s = float(claim_wait_s)
        self._stop_wait_s = float(stop_wait_s)
        self._background: set[_Background] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._closing = False
        self._policy = TurnPolicy(stop=self._stop)

    # ----------------------------------------------------------------- routing

    async def route(self, pending: PendingDecisionRecord) -> DecisionRoute:
        """How a decision on ``pending`` takes effect, with the sentence the page shows. A child
        run's approval (``chain``) is decided on the calling run, with the calling run's agent.
        Reads the store (and, for a PostgreSQL store, DBOS's table); writes nothing."""
        run_id = pending.run_id
        if await self.is_engine_run(run_id):
            return DecisionRoute(
                "engine",
                "This run is a DBOS workflow: the decision is sent to the engine, and the next "
                "free worker of the run's version applies it (this process never resumes it).",
            )
        how = (
            f'prism resume {run_id} --recorded, or resume_agent_run(agent, "{run_id}", '
            'decisions="recorded")'
        )
        if not self.resume:
            return DecisionRoute(
                "recorded",
                "Decisions are only recorded here (--no-resume): the run waits until a process "
                f"with its agent applies them ({how}).",
            )
        if self._agents.get(pending.agent_id) is not None:
            return DecisionRoute(
                "in_process",
                f"This process has the run's agent ({pending.agent_id}, from --agents): "
                "approving runs the tool inside the serve process.",
            )
        found = await self._command_agent(pending.session_id, fresh=False)
        if isinstance(found, Agent):
            return DecisionRoute(
                "cli",
                "The prism command started this run: deciding resumes it here as prism resume "
                "does, so approving runs the tool inside the serve process.",
            )
        if isinstance(found, str):
            return DecisionRoute(
                "recorded",
                f"The prism command started this run, but this process cannot rebuild its agent "
                f"({found}): the decision is recorded, and prism resume {run_id} --recorded "
                "applies it where the agent can be built.",
            )
        return DecisionRoute(
            "recorded",
            f"This process does not have the run's agent ({pending.agent_id}; start prism serve "
            "with --agents MODULE:REGISTRY to resume it here): the decision is recorded, and the "
            f"run waits until a process with the agent applies it ({how}).",
        )

    async def mode(self, pending: PendingDecisionRecord) -> DecisionMode:
        """``route(pending).mode``."""
        return (await self.route(pending)).mode

    async def is_engine_run(self, run_id: str) -> bool:
        """Whether a DBOS workflow with id ``run_id`` exists in the store's database (a
        PostgreSQL store whose database has DBOS's tables); cached per run once found. Reads
        only."""
        known = self._engine_runs.get(run_id)
        if known is not None:
            return known
        pool = _postgres_pool(self.store)
        if pool is None:
            self._engine_runs[run_id] = False
            return False
        table = f'"{self._engine_schema}".workflow_status'
        async with pool.connection() as conn:
            cursor = await conn.execute("SELECT to_regclass(%s)", (table,))
            row = await cursor.fetchone()
            if row is None or row[0] is None:
                return False  # no worker has run on this database (yet): not cached
            cursor = await conn.execute(
                f"SELECT 1 FROM {table} WHERE workflow_uuid = %s", (run_id,)
            )
            found = await cursor.fetchone() is not None
        self._engine_runs[run_id] = found
        return found

    async def _command_agent(self, session_id: str, *, fresh: bool) -> Agent | str | None:
        """The command's agent of ``session_id``, a reason it cannot be built, or ``None`` (not
        a command session, or no ``command_agents``). ``fresh``: built again (a decision), else
        the first answer is reused (routing a page)."""
        if self._command_agents is None:
            return None
        if not fresh and session_id in self._command_seen:
            return self._command_seen[session_id]
        found: Agent | str | None
        try:
            found = await self._command_agents(session_id)
        except PrismError as exc:
            found = str(exc)
        self._command_seen[session_id] = found
        return found

    # ----------------------------------------------------------------- arguments

    async def check_arguments(
        self, pending: PendingDecisionRecord, arguments: object
    ) -> ArgumentsCheck:
        """Check modified arguments for ``pending``'s call against its tool's parameter schema:
        the schema of the run's agent's tool (a registry agent's, or the ``prism`` command's
        agent for a run it started). Writes nothing.

        Returns:
            The check: the schema and the problems found; no schema (``note`` says why) for a
            tool this process does not know — a tool source's, such as an MCP server's — or a
            run whose agent it does not have; a ``note`` and no schema for a child run's call
            (``chain``), whose arguments cannot be changed from the calling run.
        """
        name = pending.tool_name
        if pending.chain:
            return ArgumentsCheck(
                tool_name=name,
                note=f"{name} is a call of the child run of agent {pending.calling_agent}: its "
                "arguments cannot be changed from the calling run (decide without modified "
                "arguments)",
            )
        agent = self._agents.get(pending.agent_id)
        if agent is None:
            found = await self._command_agent(pending.session_id, fresh=False)
            agent = found if isinstance(found, Agent) else None
        if agent is None:
            return ArgumentsCheck(
                tool_name=name,
                note=f"this process does not have the run's agent ({pending.agent_id}), so the "
                f"schema of {name} is not known here: the arguments are checked when the "
                "decision is applied",
            )
        tool = next((t for t in agent.config.tools if t.name == name), None)
        if tool is None:
            return ArgumentsCheck(
                tool_name=name,
                note=f"{name} is not one of the agent's own tools (a tool source's, such as an "
                "MCP server's), so its schema is not known here: the arguments are checked when "
                "the decision is applied",
            )
        schema = tool.parameters
        if schema is None:
            return ArgumentsCheck(
                tool_name=name, note=f"{name} declares no parameter schema: any object is taken"
            )
        if not isinstance(arguments, dict):
            shape = ArgumentProblem("", "the arguments must be a JSON object")
            return ArgumentsCheck(tool_name=name, schema=schema, problems=(shape,))
        compiled = compile_schema(schema)
        if isinstance(compiled, str):
            return ArgumentsCheck(
                tool_name=name, note=f"the parameter schema of {name} is invalid: {compiled}"
            )
        try:
            found_errors = schema_errors(compiled, arguments)
        except Exception as exc:  # an unresolvable $ref: the schema, not the arguments
            return ArgumentsCheck(
                tool_name=name, note=f"the parameter schema of {name} cannot be used: {exc}"
            )
        problems = tuple(ArgumentProblem(path, message) for path, message in found_errors)
        return ArgumentsCheck(tool_name=name, schema=schema, problems=problems)

    # ----------------------------------------------------------------- deciding

    async def decide(
        self,
        run_id: str,
        approval_id: str,
        outcome: DecisionOutcome,
        *,
        reason: str | None = None,
        modified_arguments: dict[str, JsonValue] | None = None,
    ) -> DecisionResult:
        """Decide one pending approval (of ``run_id``, the run the inbox lists it on).

        The decision is recorded (the first recorded decision of an approval wins), then takes
        effect by the run's mode ([`route()`][prism.serve._decisions.DecisionService.route]). An in-process resume runs in the background:
        this returns once it has claimed the run (or after ``claim_wait_s``).

        Returns:
            A [`DecisionResult`][prism.serve._decisions.DecisionResult]; a lost race is ``status="lost"`` with the winner, never an
            exception.

        Raises:
            ArgumentsInvalidError: ``ERR_PRISM_DECISION_INVALID`` — ``modified_arguments`` fail
                the tool's schema (``problems`` lists them); nothing was recorded.
            AgentDecisionError: ``ERR_PRISM_DECISION_INVALID`` / ``_LIMIT`` — an unknown
                ``outcome``, a reason over 2048 bytes, arguments over 16 KiB or not an object,
                modified arguments for a child run's call; nothing was recorded.
            AgentRunStateError: ``ERR_PRISM_AGENT_RUN_STATE`` — a malformed stored run.
        """
        decision = RunDecision(approval_id, outcome, reason, modified_arguments, by=self.by)
        coerce_decisions([decision])  # the decision's own shape, before anything is read
        pending = await self._pending(run_id, approval_id)
        if pending is None:
            return await self._not_pending(run_id, approval_id, None)
        if modified_arguments is not None and outcome in _ALLOWING:
            await self._check(pending, modified_arguments)
        route = await self.route(pending)
        try:
            (recorded,) = await record_decisions(self.store, run_id, [decision])
        except AgentDecisionError as exc:
            if exc.code == "ERR_PRISM_DECISION_DECIDED":
                return _lost(route.mode, run_id, approval_id, exc.decided[0])
            if exc.code == "ERR_PRISM_DECISION_UNKNOWN":  # settled meanwhile
                return await self._not_pending(run_id, approval_id, route.mode)
            raise
        if route.mode == "recorded":
            return DecisionResult(
                status="recorded",
                mode="recorded",
                run_id=run_id,
                approval_id=approval_id,
                message=f"Recorded: {_words(recorded)}; the run waits until a process with its "
                "agent applies it.",
                decided=recorded,
            )
        if route.mode == "engine":
            return await self._send(run_id, approval_id, [decision], recorded)
        return await self._apply(pending, route.mode, recorded)

    async def apply_recorded(self, run_id: str) -> DecisionResult | None:
        """Apply the decisions recorded for ``run_id`` that wait for an open approval (recorded
        by a process that could not apply them: ``--no-resume``, no agent, an engine that was
        unreachable), by the run's mode; ``None`` when none waits. In ``recorded`` mode nothing
        can apply them here: the result says so."""
        waiting = [d for d in await list_decided_approvals(self.store, run_id) if not d.applied_at]
        if not waiting:
            return None
        first = waiting[0]
        pending = await self._pending(run_id, first.approval_id)
        if pending is None:
            return None
        route = await self.route(pending)
        if route.mode == "engine":
            decisions = await list_recorded_decisions(self.store, run_id)
            return await self._send(run_id, first.approval_id, decisions, first)
        if route.mode == "recorded":
            return DecisionResult(
                status="recorded",
                mode="recorded",
                run_id=run_id,
                approval_id=first.approval_id,
                message=route.sentence,
                decided=first,
            )
        return await self._apply(pending, route.mode, first)

    def running(self, run_id: str) -> bool:
        """Whether a background resume of ``run_id`` started here is still going."""
        return any(b.run_id == run_id and not b.task.done() for b in self._background)

    async def aclose(self) -> None:
        """Stop the background resumes at their next turn boundary (each run is left resumable,
        ``stop_detail`` ``SHUTDOWN_REASON``), waiting at most ``stop_wait_s``; cancel those
        still going; close the engine client this service connected."""
        self._closing = True
        tasks = [b.task for b in self._background if not b.task.done()]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=self._stop_wait_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        if self._owns_engine and self._engine is not None:
            engine, self._engine = self._engine, None
            await engine.aclose()

    # ----------------------------------------------------------------- the steps

    async def _pending(self, run_id: str, approval_id: str) -> PendingDecisionRecord | None:
        listed = await list_pending_decisions(self.store, run_id=run_id, limit=1_000)
        return next((p for p in listed if p.approval_id == approval_id), None)

    async def _not_pending(
        self, run_id: str, approval_id: str, mode: DecisionMode | None
    ) -> DecisionResult:
        """The approval waits no more: the decision that settled it, else a refusal."""
        winner = _latest(await list_decided_approvals(self.store, run_id), approval_id)
        if winner is not None:
            return _lost(mode, run_id, approval_id, winner)
        return DecisionResult(
            status="refused",
            mode=mode,
            run_id=run_id,
            approval_id=approval_id,
            message=f"Approval {approval_id} is not waiting on run {run_id}, and no decision of "
            "it is known.",
            code="ERR_PRISM_DECISION_UNKNOWN",
        )

    async def _check(self, pending: PendingDecisionRecord, arguments: object) -> None:
        if pending.chain:
            raise AgentDecisionError(
                "ERR_PRISM_DECISION_INVALID",
                f"approval {pending.approval_id} is a child run's call: modified arguments are "
                "not forwarded to a child run",
            )
        check = await self.check_arguments(pending, arguments)
        if check.problems:
            listed = "; ".join(
                f"{p.path or '(the arguments)'}: {p.message}" for p in check.problems
            )
            raise ArgumentsInvalidError(
                f"the arguments do not match the schema of {check.tool_name}: {listed}",
                problems=check.problems,
                run_id=pending.run_id,
                approval_id=pending.approval_id,
            )

    async def _send(
        self,
        run_id: str,
        approval_id: str,
        decisions: list[RunDecision],
        recorded: DecidedApproval,
    ) -> DecisionResult:
        """Send recorded decisions to the engine."""
        try:
            engine = await self._engine_client()
            await engine.decide(run_id, decisions=decisions)
        except (ImportError, OSError, PrismError) as exc:
            return DecisionResult(
                status="recorded",
                mode="engine",
                run_id=run_id,
                approval_id=approval_id,
                message=f"Recorded ({_words(recorded)}), but sending it to the engine failed: "
                f"{exc}",
                decided=recorded,
                code=getattr(exc, "code", type(exc).__name__),
            )
        return DecisionResult(
            status="sent",
            mode="engine",
            run_id=run_id,
            approval_id=approval_id,
            message=f"Sent to the engine: {_words(recorded)}; the next free worker of the run's "
            "version applies it.",
            decided=recorded,
        )

    async def _engine_client(self) -> RunClient:
        if self._engine is None:
            from prism.engines.dbos import RunClient

            pool = _postgres_pool(self.store)
            if pool is None:  # pragma: no cover - a DBOS run is found in PostgreSQL only
                raise PrismConfigError("a DBOS run needs the PostgreSQL store")
            self._engine = await RunClient.connect(
                str(pool.conninfo),
                store_schema=str(getattr(self.store, "schema", "prism")),
                system_schema=self._engine_schema,
            )
            self._owns_engine = True
        return self._engine

    async def _apply(
        self, pending: PendingDecisionRecord, mode: DecisionMode, recorded: DecidedApproval
    ) -> DecisionResult:
        """Resume the run here with what is recorded (ours included), in the background; wait
        for its claim (or its end)."""
        run_id = pending.run_id
        if self._closing:
            why = "prism serve is shutting down; the decision stays recorded"
            return self._unapplied(pending, mode, recorded, why, None)
        lock = self._locks.setdefault(run_id, asyncio.Lock())
        async with lock:
            agent = self._agents.get(pending.agent_id) if mode == "in_process" else None
            if agent is None:
                found = await self._command_agent(pending.session_id, fresh=True)
                if not isinstance(found, Agent):
                    why = found or "the session has no stored settings"
                    return self._unapplied(pending, mode, recorded, why, "ERR_PRISM_CONFIG")
                agent = found
            background = self._start(run_id, agent, pending.session_id)
            claimed = asyncio.ensure_future(background.claimed.wait())
            try:
                await asyncio.wait(
                    {background.task, claimed},
                    timeout=self._claim_wait_s,
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                claimed.cancel()
        mine = _latest(await list_decided_approvals(self.store, run_id), pending.approval_id)
        if mine is not None and mine.applied_at is not None:
            if (mine.decided_at, mine.by) != (recorded.decided_at, recorded.by):
                return _lost(mode, run_id, pending.approval_id, mine)
            after = ""
            if background.task.done():
                ended = background.task.result()
                if isinstance(ended, Exception):
                    after = f" The resumed run then failed: {ended}"
            return DecisionResult(
                status="applied",
                mode=mode,
                run_id=run_id,
                approval_id=pending.approval_id,
                message=f"{_sentence(_words(mine))}; the run goes on in this process.{after}",
                decided=mine,
            )
        if not background.task.done():
            return DecisionResult(
                status="recorded",
                mode=mode,
                run_id=run_id,
                approval_id=pending.approval_id,
                message=f"Recorded: {_words(recorded)}; this process is still resuming the run "
                "to apply it.",
                decided=recorded,
            )
        ended = background.task.result()
        why = str(ended) if isinstance(ended, Exception) else f"the run is {ended.status}"
        code = getattr(ended, "code", None) if isinstance(ended, Exception) else None
        return self._unapplied(pending, mode, recorded, why, code)

    def _unapplied(
        self,
        pending: PendingDecisionRecord,
        mode: DecisionMode,
        recorded: DecidedApproval,
        why: str,
        code: str | None,
    ) -> DecisionResult:
        return DecisionResult(
            status="recorded",
            mode=mode,
            run_id=pending.run_id,
            approval_id=pending.approval_id,
            message=f"Recorded ({_words(recorded)}), but this process could not apply it: {why}",
            decided=recorded,
            code=code,
        )

    def _start(self, run_id: str, agent: Agent, session_id: str) -> _Background:
        claimed = asyncio.Event()

        def on_event(event: Any) -> None:
            if getattr(event, "type", None) == "agent_resumed":
                claimed.set()

        session = agent.create_session(session_id, on_event=on_event)
        task = asyncio.create_task(self._resume(run_id, session), name=f"prism serve {run_id}")
        background = _Background(run_id, task, claimed)
        self._background.add(background)
        task.add_done_callback(lambda _: self._background.discard(background))
        return background

    async def _resume(self, run_id: str, session: Any) -> RunResult | Exception:
        """One background resume; returns its result or the exception it ended with (after the
        claim, a failed run's ``AgentRunError``)."""
        ended: RunResult | Exception
        try:
            ended = await resume_agent_run(
                session, run_id, decisions="recorded", turn_policy=self._policy
            )
        except AgentRunError as exc:
            ended = exc
        except Exception as exc:  # refused before the claim: reported by decide()
            ended = exc
        if self._on_finished is not None:
            try:
                reported = self._on_finished(run_id, ended)
                if inspect.isawaitable(reported):
                    await reported
            except Exception as exc:  # the host's callback: reported, the resume's outcome kept
                asyncio.get_running_loop().call_exception_handler(
                    {
                        "message": f"prism serve: on_finished failed for run {run_id}",
                        "exception": exc,
                    }
                )
        return ended

    def _stop(self, _: TurnBoundaryContext) -> Continue | Stop:
        return Stop(SHUTDOWN_REASON) if self._closing else Continue()


def _latest(decided: list[DecidedApproval], approval_id: str) -> DecidedApproval | None:
    return next((d for d in reversed(decided) if d.approval_id == approval_id), None)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _words(decided: DecidedApproval) -> str:
    text = _OUTCOME_WORDS.get(decided.outcome, decided.outcome)
    return text + (f" by {decided.by}" if decided.by else "")


def _lost(
    mode: DecisionMode | None, run_id: str, approval_id: str, winner: DecidedApproval
) -> DecisionResult:
    waiting = "" if winner.applied_at is not None else " (recorded, waiting to be applied)"
    return DecisionResult(
        status="lost",
        mode=mode,
        run_id=run_id,
        approval_id=approval_id,
        message=f"Already decided: {_words(winner)} at {winner.decided_at}{waiting}.",
        decided=winner,
    )


def _postgres_pool(store: object) -> Any:
    """The connection pool of a PostgreSQL store, else ``None``."""
    from prism.stores.postgres import PostgresStore

    return store.pool if isinstance(store, PostgresStore) else None
