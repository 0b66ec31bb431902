"""``prism eval``: run a dataset against an agent of a registry and report per case; capture a
stored run as a case that replays it.

::

    prism eval run evals/refunds.yaml --agents myagents:REGISTRY --agent refunds \\
        --repeat 3 --concurrency 8 --junit eval-results.xml
    prism eval capture RUN_ID --into evals/refunds.yaml       # the run becomes a case
    prism eval run evals/refunds.yaml --agents myagents:REGISTRY --replay

``--agents MODULE:REGISTRY`` names a mapping of agent names to factory functions
``factory(store) -> Agent``, the registry ``prism worker`` serves; each factory is given the
eval's store (``--store URL``, default an in-memory SQLite store that ends with the command), and
every run of the eval goes there, tagged ``metadata["prism.eval"]``. With several agents in the
registry, ``--agent NAME`` picks one. LLM judges without a provider of their own run on
``--judge-model`` (default ``local``, the embedded model).

The report is a table on standard output (``--json``: the report as JSON instead); ``--junit
FILE`` writes JUnit XML, one test per case. A progress bar is drawn on standard error when it is
a terminal. Exit codes ([`EVAL_EXIT_CODES_HELP`][prism.cli._eval.EVAL_EXIT_CODES_HELP]): 0 every case passed, 1 a case failed, was
flaky or erred, 2 invalid command line, dataset, registry, agent or store.

``prism eval capture RUN_ID --into DATASET`` reads the run from ``--store`` (default: the store
``prism run`` uses) with [`prism.evals.capture_run()`][prism.evals.capture_run] and appends the case to the dataset file
(created when missing); its warnings go to standard error. A run that ``prism run`` made keeps
the command's settings in the case's metadata (``prism.cli``), so ``prism eval run DATASET
--replay`` replays it without ``--agents``, on the agent ``prism run`` built — the model is never
loaded nor called. ``--replay`` runs every case against its recording inside the socket guard
([`prism.evals.no_network()`][prism.evals.no_network]).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, Final

from prism.cli._exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from prism.cli._models import MODEL_SPEC_HELP, ModelSpecError, parse_model_spec
from prism.cli._settings import RunSettings, UsageError, build_agent
from prism.cli._store import (
    StoreError,
    StoreMissingError,
    display_url,
    load_settings,
    open_cli_store,
    store_url,
)
from prism.errors import PrismConfigError, PrismError
from prism.evals import (
    AttemptReport,
    Case,
    Dataset,
    EvalReport,
    LLMJudge,
    capture_run,
    case_evaluators,
    junit_xml,
    load_dataset,
    run_eval,
    save_dataset,
)
from prism.providers.base import AIProvider
from prism.registry import AgentFactory as AgentFactory
from prism.registry import build_registry_agents, load_registry
from prism.runtime import Agent
from prism.types import ModelConfig, Usage

__all__ = [
    "CLI_SETTINGS_KEY",
    "EVAL_EXIT_CODES_HELP",
    "AgentFactory",
    "add_eval_parser",
    "load_agent_registry",
    "run_eval_command",
]


EVAL_EXIT_CODES_HELP: Final = """\
exit codes:
  0    every case passed
  1    a case failed, was flaky (some repeats passed, some failed) or erred (an evaluator
       could not evaluate, e.g. a judge whose answer did not parse)
  2    invalid command line, dataset, registry, agent or store
"""
"""The exit codes of ``prism eval run``."""

MEMORY_STORE: Final = "sqlite://:memory:"
"""The default store of an eval: in memory, gone when the command ends."""

CLI_SETTINGS_KEY: Final = "prism.cli"
"""Case-metadata key of the ``prism run`` settings of a captured run (what ``--replay`` builds
the agent from when no ``--agents`` is given)."""

CAPTURE_EXIT_CODES_HELP: Final = """\
exit codes:
  0    the case was appended to the dataset
  2    invalid command line, store, run or dataset
"""


def add_eval_parser(commands: Any) -> argparse.ArgumentParser:
    """Register ``prism eval`` (and ``prism eval run``) on the ``commands`` subparsers; return
    the ``eval`` parser."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "eval",
        help="run evaluation datasets against an agent",
        description="Evaluate an agent: run the cases of a dataset file and check each run.",
    )
    sub = parser.add_subparsers(dest="eval_command", metavar="SUBCOMMAND")
    run = sub.add_parser(
        "run",
        help="run a dataset (YAML, JSONL or JSON) against an agent of a registry",
        description="Run every case of DATASET against an agent of the --agents registry, "
        "evaluate each run and report per case (pass rate, flakiness, failures with their "
        "transcript). Runs go to --store, tagged metadata['prism.eval'].",
        epilog=EVAL_EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("dataset", metavar="DATASET", help="the dataset file (.yaml, .jsonl, .json)")
    run.add_argument(
        "--agents",
        metavar="MODULE:REGISTRY",
        help="import path of the mapping of agent names to factory functions (factory(store)), "
        "imported with the current directory on the path (with --replay, cases captured from "
        "prism run need none)",
    )
    run.add_argument("--agent", metavar="NAME", help="the registry's agent to evaluate")
    run.add_argument(
        "--replay",
        action="store_true",
        help="replay each case's recording (its cassette) instead of calling the model and the "
        "tools; no network connection is allowed",
    )
    run.add_argument(
        "--store",
        metavar="URL",
        help="where the eval's runs go (sqlite:///FILE.db, postgresql://…); default: in memory",
    )
    run.add_argument(
        "--concurrency", type=int, default=4, metavar="N", help="most runs at once (default 4)"
    )
    run.add_argument("--repeat", type=int, default=1, metavar="K", help="runs per case (default 1)")
    run.add_argument(
        "--judge-model",
        metavar="SPEC",
        help=f"model of LLM judges without their own: {MODEL_SPEC_HELP} (default local)",
    )
    run.add_argument(
        "--json", action="store_true", help="print the report as JSON instead of the table"
    )
    run.add_argument("--junit", metavar="FILE", help="also write the report as JUnit XML")
    capture = sub.add_parser(
        "capture",
        help="turn a stored run into a case that replays it",
        description="Read RUN_ID from the store and append it to DATASET as a case: its input, "
        "its final answer, artifact and tool calls as expectations, and its recorded provider "
        "attempts and tool results as the case's cassette (prism eval run --replay replays it).",
        epilog=CAPTURE_EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    capture.add_argument("run_id", metavar="RUN_ID", help="the run to capture")
    capture.add_argument(
        "--into",
        required=True,
        metavar="DATASET",
        help="the dataset file to append the case to (.yaml, .jsonl, .json; created if missing)",
    )
    capture.add_argument(
        "--store", metavar="URL", help="the run's store (default: the store prism run uses)"
    )
    capture.add_argument("--name", metavar="CASE", help="the case's name (default: the run id)")
    capture.add_argument(
        "--tools",
        choices=("recorded", "real"),
        default="recorded",
        help="on replay, serve the recorded tool results (default), or run the real tools and "
        "check their results against the recorded ones",
    )
    capture.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="TOOL:PATH",
        help="with --tools real: a result path of TOOL that may differ (e.g. search:rows.*.at); "
        "repeatable",
    )
    parser.set_defaults(eval_command=None)
    return parser


def load_agent_registry(spec: str) -> Mapping[str, AgentFactory]:
    """Import the ``--agents MODULE:REGISTRY`` registry: a non-empty mapping of agent names to
    factory functions, loaded as ``prism worker`` loads it ([`prism.registry.load_registry()`][prism.registry.load_registry]:
    ``ATTR`` may be dotted; the module is imported with the current directory first on
    ``sys.path``).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — a malformed spec, a module that cannot be
            imported, a missing attribute, or not a non-empty mapping of names to callables.
    """
    return load_registry(spec)


def _pick(registry: Mapping[str, AgentFactory], name: str | None, spec: str) -> str:
    if name is not None:
        if name not in registry:
            raise PrismConfigError(
                f"--agent {name}: not in {spec} (its agents: {', '.join(sorted(registry))})"
            )
        return name
    if len(registry) == 1:
        return next(iter(registry))
    raise PrismConfigError(
        f"{spec} has several agents: choose one with --agent ({', '.join(sorted(registry))})"
    )


def _build(factory: AgentFactory, name: str, store: object) -> Agent:
    return build_registry_agents({name: factory}, store)[name]


def _needs_judge(dataset: Dataset) -> bool:
    return any(
        isinstance(evaluator, LLMJudge) and evaluator.provider is None
        for case in dataset.cases
        for evaluator in case_evaluators(dataset, case)
    )


def _judge(spec: str | None) -> tuple[AIProvider, ModelConfig]:
    choice = parse_model_spec(spec or "local")
    provider: AIProvider = choice.make_provider()
    return provider, choice.model


async def run_eval_command(
    args: argparse.Namespace,
    out: IO[str],
    err: IO[str],
    *,
    provider_override: Callable[[], AIProvider] | None = None,
) -> int:
    """The ``prism eval`` command; returns its exit code. ``provider_override`` is the test
    seam of ``prism run``: the provider the agent of a ``prism run`` case is built with (a
    replay uses its id and defaults only)."""
    if args.eval_command is None:
        err.write(
            "prism: eval needs a subcommand: run DATASET --agents MODULE:REGISTRY, or capture "
            "RUN_ID --into DATASET\n"
        )
        return EXIT_USAGE
    if args.eval_command == "capture":
        return await capture_command(args, out, err)
    if args.concurrency < 1 or args.repeat < 1:
        err.write("prism eval run: --concurrency and --repeat must be 1 or more\n")
        return EXIT_USAGE
    try:
        dataset = load_dataset(args.dataset)
        registry: Mapping[str, AgentFactory] | None = None
        name = ""
        if args.agents is not None:
            registry = load_agent_registry(args.agents)
            name = _pick(registry, args.agent, args.agents)
        elif not args.replay or not _cli_cases(dataset):
            raise PrismConfigError(
                "--agents MODULE:REGISTRY is required (a --replay of cases captured from "
                "prism run runs can do without)"
            )
        judge = _judge(args.judge_model) if _needs_judge(dataset) else None
    except (PrismConfigError, ModelSpecError, ImportError, OSError) as exc:
        err.write(f"prism eval run: {exc}\n")
        return EXIT_USAGE
    url = args.store or MEMORY_STORE
    try:
        store = await open_cli_store(url)
    except StoreError as exc:
        err.write(f"prism eval run: {exc}\n")
        return EXIT_USAGE
    try:
        try:
            groups = (
                [(_build(registry[name], name, store), dataset)]
                if registry is not None
                else _cli_groups(dataset, store, provider_override)
            )
        except (PrismConfigError, UsageError) as exc:
            err.write(f"prism eval run: {exc}\n")
            return EXIT_USAGE
        with _Progress(err, total=len(dataset.cases) * args.repeat) as progress:
            reports = []
            for agent, part in groups:
                try:
                    reports.append(
                        await run_eval(
                            agent,
                            part,
                            concurrency=args.concurrency,
                            repeat=args.repeat,
                            store=store,
                            judge_provider=judge[0] if judge else None,
                            judge_model=judge[1] if judge else None,
                            replay=args.replay,
                            on_progress=progress.advance,
                        )
                    )
                except PrismConfigError as exc:
                    err.write(f"prism eval run: {exc}\n")
                    return EXIT_USAGE
            report = _merged(reports, dataset)
    finally:
        await store.aclose()
    if args.junit:
        try:
            _write(args.junit, junit_xml(report))
        except OSError as exc:
            err.write(f"prism eval run: cannot write {args.junit}: {exc.strerror or exc}\n")
            return EXIT_USAGE
    if args.json:
        out.write(report.to_json() + "\n")
    else:
        render_report(report, out)
        if args.store:
            out.write(f"runs stored in {display_url(url)}, eval run {report.eval_run_id}\n")
    return EXIT_OK if report.passed else EXIT_FAILED


def _cli_cases(dataset: Dataset) -> bool:
    return all(isinstance(c.metadata.get(CLI_SETTINGS_KEY), Mapping) for c in dataset.cases)


def _cli_groups(
    dataset: Dataset, store: Any, provider_override: Callable[[], AIProvider] | None
) -> list[tuple[Agent, Dataset]]:
    """One agent per distinct ``prism run`` settings of the cases, with its cases.

    Raises:
        UsageError: the settings do not build an agent (a missing key variable: set it to
            anything, nothing is sent).
    """
    groups: dict[str, list[Case]] = {}
    settings: dict[str, Mapping[str, Any]] = {}
    for case in dataset.cases:
        value = case.metadata[CLI_SETTINGS_KEY]
        assert isinstance(value, Mapping)
        key = json.dumps(value, sort_keys=True)
        groups.setdefault(key, []).append(case)
        settings[key] = value
    out = []
    for key, cases in groups.items():
        built = build_agent(
            RunSettings.from_json(settings[key]),
            store,
            environ=os.environ,
            provider_override=provider_override,
        )
        out.append(
            (
                built.agent,
                Dataset(
                    name=dataset.name,
                    cases=cases,
                    evaluators=dataset.evaluators,
                    description=dataset.description,
                    metadata=dataset.metadata,
                ),
            )
        )
    return out


def _merged(reports: list[EvalReport], dataset: Dataset) -> EvalReport:
    if len(reports) == 1:
        return reports[0]
    by_name = {case.name: case for report in reports for case in report.cases}
    first = reports[0]
    return dataclasses.replace(
        first,
        cases=tuple(by_name[c.name] for c in dataset.cases),
        duration_s=sum(r.duration_s for r in reports),
    )


async def capture_command(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """``prism eval capture``: returns its exit code (0 appended, 2 a usage, store, run or
    dataset problem)."""
    ignore: dict[str, list[str]] = {}
    for spec in args.ignore:
        tool, sep, path = spec.partition(":")
        if not sep or not tool or not path:
            err.write(f"prism eval capture: --ignore {spec}: expected TOOL:PATH\n")
            return EXIT_USAGE
        ignore.setdefault(tool, []).append(path)
    target = Path(args.into)
    try:
        dataset = _existing_dataset(target)
    except (PrismConfigError, ImportError, OSError) as exc:
        err.write(f"prism eval capture: {exc}\n")
        return EXIT_USAGE
    url = store_url(args.store, os.environ)
    try:
        store = await open_cli_store(url, create=False)
    except StoreMissingError as exc:
        err.write(f"prism eval capture: {exc}\n")
        return EXIT_USAGE
    except StoreError as exc:
        err.write(f"prism eval capture: {exc}\n")
        return EXIT_USAGE
    try:
        captured = await capture_run(
            store, args.run_id, name=args.name, tools=args.tools, ignore_paths=ignore
        )
        cli = await load_settings(store, captured.session_id)
    except PrismError as exc:
        err.write(f"prism eval capture: {exc}\n")
        return EXIT_USAGE
    finally:
        await store.aclose()
    case = captured.case
    if cli is not None:
        case = dataclasses.replace(case, metadata={**case.metadata, CLI_SETTINGS_KEY: cli})
    if dataset is not None and any(c.name == case.name for c in dataset.cases):
        err.write(
            f"prism eval capture: {target} already has a case named {case.name!r}; "
            "give another with --name\n"
        )
        return EXIT_USAGE
    updated = (
        Dataset(name=target.stem, cases=[case])
        if dataset is None
        else dataclasses.replace(dataset, cases=(*dataset.cases, case))
    )
    try:
        save_dataset(updated, target)
    except (PrismConfigError, ImportError, OSError) as exc:
        err.write(f"prism eval capture: {exc}\n")
        return EXIT_USAGE
    for warning in captured.warnings:
        err.write(f"warning: {warning}\n")
    out.write(f"captured run {args.run_id} as case {case.name!r} in {target}\n")
    return EXIT_OK


def _existing_dataset(path: Path) -> Dataset | None:
    """The dataset at ``path``, or ``None`` when there is no file."""
    return load_dataset(path) if path.exists() else None


def _write(path: str, text: str) -> None:
    """Write ``text`` to ``path``, creating missing parent directories."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


class _Progress:
    """A ``rich`` progress bar on ``err`` when it is a terminal and ``rich`` is installed;
    otherwise nothing."""

    def __init__(self, err: IO[str], *, total: int) -> None:
        self._bar: Any = None
        self._task: Any = None
        isatty = getattr(err, "isatty", None)
        if not (isatty and isatty()):
            return
        try:
            import rich.console
            import rich.progress
        except ImportError:
            return
        self._bar = rich.progress.Progress(
            rich.progress.TextColumn("eval"),
            rich.progress.BarColumn(),
            rich.progress.MofNCompleteColumn(),
            rich.progress.TextColumn("{task.description}"),
            rich.progress.TimeElapsedColumn(),
            console=rich.console.Console(file=err),
            transient=True,
        )
        self._task = self._bar.add_task("", total=total)

    def __enter__(self) -> _Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def advance(self, done: int, total: int, attempt: AttemptReport) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done, description=f"{attempt.case}")


def _usage_cells(usage: Usage | None) -> tuple[str, str]:
    if usage is None:
        return "—", "—"
    tokens = "—" if usage.total_tokens is None else str(usage.total_tokens)
    cost = (
        "—"
        if usage.cost is None
        else f"{usage.cost:.6g}{' ' + usage.currency if usage.currency else ''}"
    )
    return tokens, cost


def render_report(report: EvalReport, out: IO[str]) -> None:
    """The report as tables on ``out``: cases, evaluators, totals, then the failures with their
    transcripts (``rich`` when installed, else plain text)."""
    try:
        import rich.console
        import rich.table
        import rich.text
    except ImportError:
        out.write(report.format_text() + "\n")
        return
    console = rich.console.Console(file=out, highlight=False, soft_wrap=False)
    interval = report.repeat > 1
    styles = {"pass": "green", "fail": "red", "flaky": "yellow", "error": "magenta"}
    cases = rich.table.Table(title=f"{report.dataset} — agent {report.agent}", title_justify="left")
    for column in ("case", "outcome", "pass rate", "not passing", "tokens", "cost"):
        cases.add_column(column, overflow="fold")
    for case in report.cases:
        failing = sorted({n for n, rate in case.evaluators.items() if rate.failures or rate.errors})
        tokens, cost = _usage_cells(case.usage)
        cases.add_row(
            case.name,
            rich.text.Text(case.outcome, style=styles[case.outcome]),
            case.pass_rate.format(interval=interval),
            ", ".join(failing),
            tokens,
            cost,
        )
    console.print(cases)
    evaluators = rich.table.Table(title="evaluators", title_justify="left")
    evaluators.add_column("evaluator", overflow="fold")
    evaluators.add_column("pass rate")
    for evaluator, rate in report.evaluators.items():
        evaluators.add_row(evaluator, rate.format(interval=interval))
    console.print(evaluators)
    console.print(rich.text.Text(report.summary_line()), soft_wrap=True)
    for attempt in report.failures:
        head = f"{attempt.outcome.upper()} {attempt.case} (repeat {attempt.repeat}" + (
            f", run {attempt.run_id})" if attempt.run_id else ")"
        )
        console.print(rich.text.Text(head, style=styles[attempt.outcome]), soft_wrap=True)
        for problem in attempt.problems:
            console.print(rich.text.Text(f"  {problem}"), soft_wrap=True)
        for line in attempt.transcript(max_chars=300).splitlines():
            console.print(rich.text.Text(f"    {line}", style="dim"), soft_wrap=True)
