"""Running a dataset: every case ``repeat`` times, at most ``concurrency`` runs at once.

[`run_eval()`][prism.evals._runner.run_eval] runs each attempt as a new session of the agent over the eval's store (a memory
store unless ``store=`` is given), tagged ``metadata["prism.eval"] = {"eval_run_id", "case",
"repeat"}`` so the runs can be found and opened like any other. Each run's result goes to the
case's evaluators ([`case_evaluators()`][prism.evals._runner.case_evaluators]), after the run-status check; the attempts are reported
in dataset order whatever order they finished in, so the report does not depend on
``concurrency``. [`run_case()`][prism.evals._runner.run_case] runs one case (what a pytest case calls).

``provider_for(case, repeat)`` may hand a run another provider than the agent's (a scripted
one). ``replay=True`` runs every case against its recording instead (its ``cassette``, from
``prism.evals.capture_run``): the agent's replaying twin (``prism.evals.replay_agent``) serves
the recorded provider attempts and tool results, each run gets a ``"replay"`` score naming the
first mismatch, its usage is reported as ``"recorded"``, and the whole eval runs inside the
socket guard (``prism.evals.no_network``): a connect that is not ``AF_UNIX`` is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

from prism._util import maybe_await, new_id, now_iso
from prism.errors import AgentRunError, PrismConfigError
from prism.evals._cassette import Cassette
from prism.evals._evaluators import artifact_equals, exact
from prism.evals._model import Case, Dataset, EvalContext, EvalScore, Evaluator
from prism.evals._replay import ReplaySession, cassette_of, no_network, replay_agent
from prism.evals._report import AttemptOutcome, AttemptReport, CaseReport, EvalReport, sum_usage
from prism.evals._trajectory import tool_trajectory
from prism.providers.base import AIProvider
from prism.runtime import Agent, RunOptions
from prism.runtime.durable import resume_agent_run
from prism.store import MemorySessionStore, SessionStore
from prism.types import ModelConfig, RunResult

__all__ = [
    "EVAL_METADATA_KEY",
    "ProgressCallback",
    "ProviderFor",
    "case_evaluators",
    "fold_case",
    "run_case",
    "run_eval",
]

EVAL_METADATA_KEY: Final = "prism.eval"
"""The run-metadata key of an eval run's runs: ``{"eval_run_id", "case", "repeat"}``."""

ProviderFor: TypeAlias = Callable[[Case, int], "AIProvider | None"]
"""``provider_for(case, repeat) -> AIProvider | None``: the provider one run of a case uses
instead of the agent's (``None``: the agent's)."""

ProgressCallback: TypeAlias = Callable[[int, int, AttemptReport], object]
"""``on_progress(done, total, attempt)``, sync or async, after each attempt."""


def case_evaluators(dataset: Dataset | None, case: Case) -> tuple[Evaluator, ...]:
    """The evaluators a case's runs get: its own — or, when it has none, those its expectations
    imply (``exact()`` for ``expected_output``, ``artifact_equals()`` for
    ``expected_artifact``, ``tool_trajectory()`` for ``expected_tools``) — then the dataset's."""
    own: tuple[Evaluator, ...] = case.evaluators
    if not own:
        implied: list[Evaluator] = []
        if case.expected_output is not None:
            implied.append(exact())
        if case.expected_artifact is not None:
            implied.append(artifact_equals())
        if case.expected_tools is not None:
            implied.append(tool_trajectory())
        own = tuple(implied)
    return own + (dataset.evaluators if dataset is not None else ())


def fold_case(dataset: Dataset, case: Case) -> Case:
    """``case`` with [`case_evaluators()`][prism.evals._runner.case_evaluators] as its own evaluators, so it runs alone as it would
    in ``dataset``."""
    return dataclasses.replace(case, evaluators=case_evaluators(dataset, case))


def _status_score(case: Case, result: RunResult) -> EvalScore:
    if result.status == case.expected_status:
        return EvalScore.check("status", True, f"the run {result.status}")
    reason = f"expected the run to end {case.expected_status}, it ended {result.status}"
    if result.stop_reason is not None:
        reason += f" (stop reason {result.stop_reason})"
    if result.error is not None:
        reason += f": {result.error.message}"
    return EvalScore.check("status", False, reason)


async def _score(evaluator: Evaluator, ctx: EvalContext) -> EvalScore:
    name = str(getattr(evaluator, "name", type(evaluator).__name__))
    try:
        score = await evaluator.evaluate(ctx)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return EvalScore.error(name, f"the evaluator raised {type(exc).__name__}: {exc}")
    if not isinstance(score, EvalScore):
        return EvalScore.error(
            name, f"the evaluator returned {type(score).__name__}, not an EvalScore"
        )
    return score


def _unique_names(scores: list[EvalScore]) -> tuple[EvalScore, ...]:
    seen: dict[str, int] = {}
    out = []
    for score in scores:
        count = seen.get(score.evaluator, 0) + 1
        seen[score.evaluator] = count
        out.append(
            score
            if count == 1
            else dataclasses.replace(score, evaluator=f"{score.evaluator} #{count}")
        )
    return tuple(out)


def _outcome(scores: tuple[EvalScore, ...]) -> AttemptOutcome:
    if any(score.outcome == "fail" for score in scores):
        return "fail"
    if any(score.outcome != "pass" for score in scores):
        return "error"
    return "pass"


async def _resume_as_recorded(
    session: Any, result: RunResult, replay: ReplaySession
) -> RunResult | None:
    """Resume a suspended replayed run with the decisions its recording was resumed with;
    ``None`` when it has none (the recorded run ended waiting too)."""
    interruption, state = result.interruption, result.run_state
    how = None if interruption is None else replay.resumption(interruption.pending_decisions)
    if how is None or state is None:
        return None
    resumed: RunResult = await resume_agent_run(session, state, **how)
    # the run is judged whole: every leg's messages and usage (a leg's result holds its own)
    return dataclasses.replace(
        resumed,
        messages=(*result.messages, *resumed.messages),
        usage=sum_usage((result.usage, resumed.usage)),
    )


class _EvalRun:
    """One eval run's shared settings; [`attempt()`][prism.evals._runner._EvalRun.attempt] runs one case once."""

    def __init__(
        self,
        agent: Agent,
        *,
        eval_run_id: str,
        store: SessionStore,
        options: RunOptions,
        provider_for: ProviderFor | None,
        judge_provider: AIProvider | None,
        judge_model: ModelConfig | None,
        cassettes: Mapping[str, Cassette] | None = None,
    ) -> None:
        self.agent = agent
        self.cassettes = cassettes
        """Each case's recording by case name, in replay mode; else ``None``."""
        self.eval_run_id = eval_run_id
        self.store = store
        self.options = options
        self.provider_for = provider_for
        self.judge_provider = judge_provider
        self.judge_model = judge_model
        ledger_free = agent.config.run_ledger is None and options.run_ledger is None
        self.ledger = (
            store if ledger_free and callable(getattr(store, "append_run", None)) else None
        )

    def _agent(self, case: Case, repeat: int) -> Agent:
        provider = self.provider_for(case, repeat) if self.provider_for is not None else None
        if provider is None:
            return self.agent
        return Agent(dataclasses.replace(self.agent.config, provider=provider))

    async def attempt(
        self, case: Case, repeat: int, evaluators: tuple[Evaluator, ...]
    ) -> AttemptReport:
        tag = {"eval_run_id": self.eval_run_id, "case": case.name, "repeat": repeat}
        metadata = {**(self.options.metadata or {}), EVAL_METADATA_KEY: tag}
        options = dataclasses.replace(self.options, metadata=metadata)
        if self.ledger is not None:
            options = dataclasses.replace(options, run_ledger=self.ledger)  # type: ignore[arg-type]
        run_input = case.input if isinstance(case.input, str) else list(case.input)
        replay: ReplaySession | None = None
        started = time.perf_counter()
        try:
            if self.cassettes is not None:
                replay = ReplaySession(self.cassettes[case.name])
                agent = replay_agent(self.agent, replay)
                if options.run_ledger is not None and agent.config.run_ledger is None:
                    # the legs a replay resumes write where its first leg writes
                    agent.config = dataclasses.replace(agent.config, run_ledger=options.run_ledger)
            else:
                agent = self._agent(case, repeat)
            session = agent.create_session(store=self.store)
            result = await session.run(run_input, options=options)
            while replay is not None and result.status == "suspended":
                resumed = await _resume_as_recorded(session, result, replay)
                if resumed is None:
                    break
                result = resumed
        except asyncio.CancelledError:
            raise
        except AgentRunError as exc:
            if not isinstance(exc.result, RunResult):
                raise
            result = exc.result
        except Exception as exc:
            return AttemptReport(
                case=case.name,
                repeat=repeat,
                outcome="error",
                latency_s=time.perf_counter() - started,
                error=f"{type(exc).__name__}: {exc}",
            )
        latency = time.perf_counter() - started
        ctx = EvalContext(
            case=case,
            result=result,
            latency_s=latency,
            repeat=repeat,
            eval_run_id=self.eval_run_id,
            judge_provider=self.judge_provider,
            judge_model=self.judge_model,
        )
        scores = [_status_score(case, result)]
        if replay is not None:
            scores.append(replay.verdict(result))
        for evaluator in evaluators:
            scores.append(await _score(evaluator, ctx))
        named = _unique_names(scores)
        return AttemptReport(
            case=case.name,
            repeat=repeat,
            outcome=_outcome(named),
            scores=named,
            run_id=result.run_id,
            session_id=result.session_id,
            status=result.status,
            usage=result.usage,
            usage_source="recorded" if replay is not None else "live",
            latency_s=latency,
            messages=result.messages,
        )


def _positive_int(value: object, label: str) -> int:
    if type(value) is not int or value < 1:
        raise PrismConfigError(f"run_eval: {label} must be an int >= 1, got {value!r}")
    return value


async def run_eval(
    agent: Agent,
    dataset: Dataset,
    *,
    concurrency: int = 4,
    repeat: int = 1,
    store: SessionStore | None = None,
    options: RunOptions | Mapping[str, object] | None = None,
    judge_provider: AIProvider | None = None,
    judge_model: ModelConfig | Mapping[str, object] | None = None,
    provider_for: ProviderFor | None = None,
    replay: bool = False,
    on_progress: ProgressCallback | None = None,
    eval_run_id: str | None = None,
) -> EvalReport:
    """Run every case of ``dataset`` ``repeat`` times on ``agent`` and evaluate each run.

    Each run is a new session over ``store`` with run metadata ``"prism.eval": {"eval_run_id",
    "case", "repeat"}`` (``repeat`` 1-based); when ``store`` is a run ledger too (the SQLite and
    PostgreSQL stores) and the agent has none, the runs' ledger rows go there, so the inspector
    shows them. A run that fails is evaluated like any other (its status fails the
    ``"status"`` check unless the case expects it); a run that raises anything else is an
    ``"error"`` attempt. Attempts run at most ``concurrency`` at once and are reported in dataset
    order.

    Args:
        agent: The agent under test.
        dataset: The cases.
        concurrency: Most runs at once (int >= 1).
        repeat: Runs per case (int >= 1); with more than one, a case reports its pass rate, its
            95 % Wilson interval, and ``"flaky"`` when some runs passed and some failed.
        store: Where the runs' sessions go (default: a new ``MemorySessionStore``).
        options: Run options for every run (``RunOptions`` or a mapping), e.g. limits.
        judge_provider: The provider of LLM judges that have none of their own.
        judge_model: Their model (default: the provider's default model).
        provider_for: ``provider_for(case, repeat)`` → a provider for that run instead of the
            agent's, or ``None`` for the agent's.
        replay: Run every case against its recording (its ``cassette``) instead of the agent's
            model and tools, inside the socket guard; each run gets a ``"replay"`` score.
        on_progress: ``on_progress(done, total, attempt)`` after each attempt (sync or async).
        eval_run_id: The eval run's id (default: a new ``eval_…`` id).

    Returns:
        The [`EvalReport`][prism.evals.EvalReport].

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — ``agent`` is not an ``Agent``, ``dataset`` not a
            ``Dataset``, ``concurrency`` or ``repeat`` not an int >= 1, invalid ``options``; with
            ``replay=True``, a case without a valid cassette, or ``provider_for`` given too.
    """
    if not isinstance(agent, Agent):
        raise PrismConfigError(f"run_eval: agent must be an Agent, got {type(agent).__name__}")
    if not isinstance(dataset, Dataset):
        raise PrismConfigError(f"run_eval: dataset must be a Dataset, got {type(dataset).__name__}")
    concurrency = _positive_int(concurrency, "concurrency")
    repeat = _positive_int(repeat, "repeat")
    run_options = RunOptions.coerce(options)
    judge = ModelConfig.coerce(judge_model) if isinstance(judge_model, Mapping) else judge_model
    cassettes: dict[str, Cassette] | None = None
    if replay:
        if provider_for is not None:
            raise PrismConfigError("run_eval: give either replay=True or provider_for=, not both")
        cassettes = {c.name: cassette_of(c.cassette, f"case {c.name!r}") for c in dataset.cases}
    run_id = eval_run_id or new_id("eval")
    runner = _EvalRun(
        agent,
        eval_run_id=run_id,
        store=store if store is not None else MemorySessionStore(),
        options=run_options,
        provider_for=provider_for,
        judge_provider=judge_provider,
        judge_model=judge,
        cassettes=cassettes,
    )
    plan = [
        (case, r, case_evaluators(dataset, case))
        for case in dataset.cases
        for r in range(1, repeat + 1)
    ]
    results: list[AttemptReport | None] = [None] * len(plan)
    gate = asyncio.Semaphore(concurrency)
    done = 0
    started_at, started = now_iso(), time.perf_counter()

    async def one(index: int) -> None:
        nonlocal done
        case, r, evaluators = plan[index]
        async with gate:
            report = await runner.attempt(case, r, evaluators)
        results[index] = report
        done += 1
        if on_progress is not None:
            await maybe_await(on_progress(done, len(plan), report))

    with no_network() if replay else contextlib.nullcontext():
        async with asyncio.TaskGroup() as group:
            for index in range(len(plan)):
                group.create_task(one(index))
    attempts = [a for a in results if a is not None]
    cases = tuple(
        CaseReport(
            name=case.name,
            metadata=case.metadata,
            attempts=tuple(a for a in attempts if a.case == case.name),
        )
        for case in dataset.cases
    )
    return EvalReport(
        eval_run_id=run_id,
        dataset=dataset.name,
        agent=agent.id or agent.name or agent.config.model.model,
        cases=cases,
        repeat=repeat,
        concurrency=concurrency,
        started_at=started_at,
        duration_s=time.perf_counter() - started,
    )


async def run_case(
    agent: Agent,
    case: Case,
    *,
    dataset: Dataset | None = None,
    repeat: int = 1,
    store: SessionStore | None = None,
    options: RunOptions | Mapping[str, object] | None = None,
    judge_provider: AIProvider | None = None,
    judge_model: ModelConfig | Mapping[str, object] | None = None,
    provider_for: ProviderFor | None = None,
    replay: bool = False,
) -> CaseReport:
    """Run one case (``repeat`` times) as [`run_eval()`][prism.evals._runner.run_eval] would, and return its report; call
    ``assert_passed()`` on it in a test.

    Args:
        agent: The agent under test.
        case: The case (from ``prism.evals.pytest_cases`` it already carries its dataset's
            evaluators).
        dataset: The dataset whose evaluators the case gets too, when it does not carry them.
        repeat: Runs of the case.
        store: As for [`run_eval()`][prism.evals._runner.run_eval].
        options: As for [`run_eval()`][prism.evals._runner.run_eval].
        judge_provider: As for [`run_eval()`][prism.evals._runner.run_eval].
        judge_model: As for [`run_eval()`][prism.evals._runner.run_eval].
        provider_for: As for [`run_eval()`][prism.evals._runner.run_eval].
        replay: As for [`run_eval()`][prism.evals._runner.run_eval].

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — as [`run_eval()`][prism.evals._runner.run_eval].
    """
    if not isinstance(case, Case):
        raise PrismConfigError(f"run_case: case must be a Case, got {type(case).__name__}")
    single = Dataset(
        name=dataset.name if dataset is not None else case.name,
        cases=[fold_case(dataset, case) if dataset is not None else case],
    )
    report = await run_eval(
        agent,
        single,
        concurrency=1,
        repeat=repeat,
        store=store,
        options=options,
        judge_provider=judge_provider,
        judge_model=judge_model,
        provider_for=provider_for,
        replay=replay,
    )
    return report.cases[0]
