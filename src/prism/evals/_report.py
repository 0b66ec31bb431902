"""What an eval run reports: per attempt, per case and per evaluator, with pass rates.

* [`AttemptReport`][prism.evals._report.AttemptReport] — one run of one case: its scores, outcome, usage, latency and
  transcript;
* [`CaseReport`][prism.evals._report.CaseReport] — a case's attempts (``repeat`` of them), its [`PassRate`][prism.evals._report.PassRate] and its
  outcome (``"pass"``, ``"fail"``, ``"flaky"`` or ``"error"``);
* [`EvalReport`][prism.evals._report.EvalReport] — every case, the pass rate of every evaluator, the agent's total usage and
  the judges' usage apart; as a dict (``to_dict``), JSON (``to_json``) or plain text
  (``format_text``). JUnit XML is [`prism.evals.junit_xml()`][prism.evals.junit_xml].

A pass rate counts the attempts that were scored: an attempt whose evaluators erred (a judge that
did not parse, a cost limit on a run without cost) is counted apart, as an error, and not as a
failure. [`wilson_interval()`][prism.evals._report.wilson_interval] gives its 95 % interval.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal, TypeAlias

from prism.evals._model import EvalScore
from prism.types import (
    JsonValue,
    Message,
    RunStatus,
    TextContent,
    ToolCallContent,
    ToolResultContent,
    Usage,
    canonical_json,
)
from prism.usage import UsageAccumulator

__all__ = [
    "AttemptOutcome",
    "AttemptReport",
    "CaseOutcome",
    "CaseReport",
    "EvalReport",
    "PassRate",
    "format_transcript",
    "sum_usage",
    "wilson_interval",
]

AttemptOutcome: TypeAlias = Literal["pass", "fail", "error"]
"""One attempt: every score passed; a score failed; no score failed but one erred (or the run
raised something else than a run failure)."""

CaseOutcome: TypeAlias = Literal["pass", "fail", "flaky", "error"]
"""A case over its attempts: every attempt passed; none passed and one failed; some passed and
some failed (``flaky``); no attempt failed but one erred."""

Z_95: Final = 1.96
"""The normal quantile of a two-sided 95 % interval."""

_EMPTY: Final[Mapping[str, JsonValue]] = MappingProxyType({})


def wilson_interval(passes: int, trials: int, *, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a pass rate (95 % with the default ``z``).

    Returns:
        ``(low, high)``, both from 0 to 1; ``(0.0, 1.0)`` for no trials.

    Raises:
        ValueError: ``passes`` outside ``0..trials``.
    """
    if trials == 0:
        return 0.0, 1.0
    if not 0 <= passes <= trials:
        raise ValueError(f"passes must be within 0..{trials}, got {passes}")
    p = passes / trials
    z2 = z * z
    denominator = 1 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def sum_usage(usages: Iterable[Usage | None]) -> Usage | None:
    """The sum of ``usages`` (``prism.usage.UsageAccumulator``'s rules); ``None`` for none."""
    total = UsageAccumulator()
    for usage in usages:
        total.add(usage)
    return total.value()


@dataclass(frozen=True, slots=True)
class PassRate:
    """Passes, failures and errors over attempts, and the pass rate of the scored ones."""

    passes: int = 0
    """Attempts (or scores) that passed."""
    failures: int = 0
    """Attempts (or scores) that failed."""
    errors: int = 0
    """Attempts (or scores) that erred; not counted in the rate."""

    @classmethod
    def of(cls, outcomes: Iterable[str]) -> PassRate:
        """Count outcomes: ``"pass"``, ``"fail"``, and anything else as an error."""
        passes = failures = errors = 0
        for outcome in outcomes:
            if outcome == "pass":
                passes += 1
            elif outcome == "fail":
                failures += 1
            else:
                errors += 1
        return cls(passes, failures, errors)

    @property
    def scored(self) -> int:
        """``passes + failures``."""
        return self.passes + self.failures

    @property
    def rate(self) -> float | None:
        """``passes / scored``; ``None`` when nothing was scored."""
        return self.passes / self.scored if self.scored else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95 % Wilson interval of [`rate`][prism.evals._report.PassRate.rate]; ``None`` when nothing was scored."""
        return wilson_interval(self.passes, self.scored) if self.scored else None

    @property
    def flaky(self) -> bool:
        """Some scored attempts passed and some failed: ``0 < passes < scored``."""
        return 0 < self.passes < self.scored

    def format(self, *, interval: bool = False) -> str:
        """``"60% (3/5)"``, with ``" [23%–88%]"`` when ``interval``; ``"—"`` when nothing was
        scored; ``", 1 error"`` when attempts erred."""
        rate = self.rate
        text = "—" if rate is None else f"{rate:.0%} ({self.passes}/{self.scored})"
        if interval and self.interval is not None:
            low, high = self.interval
            text += f" [{low:.0%}–{high:.0%}]"
        if self.errors:
            text += f", {self.errors} error{'s' if self.errors > 1 else ''}"
        return text

    def to_dict(self) -> dict[str, JsonValue]:
        """``{"passes", "failures", "errors", "rate", "interval_95": [low, high], "flaky"}``."""
        interval = self.interval
        return {
            "passes": self.passes,
            "failures": self.failures,
            "errors": self.errors,
            "rate": self.rate,
            "interval_95": None if interval is None else [interval[0], interval[1]],
            "flaky": self.flaky,
        }


def _evaluator_rates(scores: Iterable[EvalScore]) -> Mapping[str, PassRate]:
    grouped: dict[str, list[str]] = {}
    for score in scores:
        grouped.setdefault(score.evaluator, []).append(score.outcome)
    return MappingProxyType({name: PassRate.of(outcomes) for name, outcomes in grouped.items()})


def _arguments(arguments: Mapping[str, JsonValue]) -> str:
    try:
        return canonical_json(dict(arguments))
    except (TypeError, ValueError):
        return repr(arguments)


def format_transcript(messages: Sequence[Message], *, max_chars: int = 2000) -> str:
    """A run's messages as readable lines: ``role: text``, ``→ tool(args)`` for each tool call and
    ``← tool: result`` for each result; each part cut at ``max_chars``."""

    def clip(text: str) -> str:
        return text if len(text) <= max_chars else text[: max_chars - 1] + "…"

    lines: list[str] = []
    for message in messages:
        for part in message.content:
            if isinstance(part, TextContent) and part.text:
                lines.append(f"{message.role}: {clip(part.text)}")
            elif isinstance(part, ToolCallContent):
                lines.append(f"{message.role}: → {part.name}({clip(_arguments(part.arguments))})")
            elif isinstance(part, ToolResultContent):
                if part.error is not None:
                    shown = f"error {part.error.code or ''}: {part.error.message}".replace(
                        "error : ", "error: "
                    )
                else:
                    try:
                        shown = canonical_json(part.result)
                    except (TypeError, ValueError):
                        shown = repr(part.result)
                lines.append(f"tool: ← {part.name}: {clip(shown)}")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptReport:
    """One run of one case and what the evaluators made of it."""

    case: str
    """The case's name."""
    repeat: int
    """Which repetition (1-based)."""
    outcome: AttemptOutcome
    """``"pass"``, ``"fail"`` or ``"error"`` ([`AttemptOutcome`][prism.evals._report.AttemptOutcome])."""
    scores: tuple[EvalScore, ...] = ()
    """Every evaluator's score, the run-status check (``"status"``) first."""
    run_id: str | None = None
    """The run's id (open it in the inspector), when the run started."""
    session_id: str | None = None
    """The run's session id."""
    status: RunStatus | None = None
    """The run's status."""
    usage: Usage | None = None
    """The agent's usage in this run (the judges' is apart: [`judge_usage`][prism.evals._report.AttemptReport.judge_usage])."""
    usage_source: Literal["live", "recorded"] = "live"
    """``"recorded"`` when the run was replayed: its usage is the recording's, served back."""
    latency_s: float = 0.0
    """Wall-clock seconds of the run."""
    messages: tuple[Message, ...] = ()
    """The run's transcript (``RunResult.messages``)."""
    error: str | None = None
    """What the run raised, when it raised something other than a run failure."""

    @property
    def judge_usage(self) -> Usage | None:
        """The summed usage the evaluators reported (LLM judges)."""
        return sum_usage(score.usage for score in self.scores)

    @property
    def problems(self) -> tuple[str, ...]:
        """``"evaluator: reason"`` for every score that did not pass (and the run's error)."""
        found = [
            f"{s.evaluator}: {s.reason}"
            if s.outcome != "judge_error"
            else f"{s.evaluator} (judge error): {s.reason}"
            for s in self.scores
            if not s.passed
        ]
        if self.error is not None:
            found.insert(0, f"run: {self.error}")
        return tuple(found)

    def transcript(self, *, max_chars: int = 2000) -> str:
        """``format_transcript()`` of [`messages`][prism.evals._report.AttemptReport.messages]."""
        return format_transcript(self.messages, max_chars=max_chars)

    def to_dict(self, *, transcript: bool | None = None) -> dict[str, JsonValue]:
        """The JSON form; ``transcript`` (default: when the attempt did not pass) adds the
        messages as ``"transcript"`` (their ``to_dict()``)."""
        out: dict[str, JsonValue] = {
            "case": self.case,
            "repeat": self.repeat,
            "outcome": self.outcome,
            "run_id": self.run_id,
            "session_id": self.session_id,
            "status": self.status,
            "latency_s": round(self.latency_s, 6),
            "usage": None if self.usage is None else self.usage.to_dict(),
            "usage_source": self.usage_source,
            "scores": [score.to_dict() for score in self.scores],
        }
        if self.error is not None:
            out["error"] = self.error
        judge = self.judge_usage
        if judge is not None:
            out["judge_usage"] = judge.to_dict()
        if transcript if transcript is not None else self.outcome != "pass":
            out["transcript"] = [message.to_dict() for message in self.messages]
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseReport:
    """A case over its attempts."""

    name: str
    """The case's name."""
    attempts: tuple[AttemptReport, ...]
    """Its attempts, by repetition."""
    metadata: Mapping[str, JsonValue] = field(default_factory=lambda: _EMPTY)
    """The case's metadata."""

    @property
    def pass_rate(self) -> PassRate:
        """Passes, failures and errors over the attempts."""
        return PassRate.of(attempt.outcome for attempt in self.attempts)

    @property
    def evaluators(self) -> Mapping[str, PassRate]:
        """Each evaluator's pass rate over the attempts."""
        return _evaluator_rates(s for attempt in self.attempts for s in attempt.scores)

    @property
    def outcome(self) -> CaseOutcome:
        """``"pass"``, ``"fail"``, ``"flaky"`` or ``"error"`` ([`CaseOutcome`][prism.evals._report.CaseOutcome])."""
        rate = self.pass_rate
        if rate.failures == 0 and rate.errors == 0:
            return "pass"
        if rate.failures:
            return "flaky" if rate.passes else "fail"
        return "error"

    @property
    def passed(self) -> bool:
        """Every attempt passed."""
        return self.outcome == "pass"

    @property
    def usage(self) -> Usage | None:
        """The agent's usage over the attempts."""
        return sum_usage(attempt.usage for attempt in self.attempts)

    @property
    def judge_usage(self) -> Usage | None:
        """The judges' usage over the attempts."""
        return sum_usage(attempt.judge_usage for attempt in self.attempts)

    @property
    def latency_s(self) -> float:
        """Seconds of all its runs, summed."""
        return sum(attempt.latency_s for attempt in self.attempts)

    def summary(self) -> str:
        """One paragraph: the outcome, the pass rate and every problem of every attempt."""
        rate = self.pass_rate
        head = f"case {self.name!r}: {self.outcome}, {rate.format(interval=len(self.attempts) > 1)}"
        lines = [head]
        for attempt in self.attempts:
            if attempt.outcome == "pass":
                continue
            where = f"repeat {attempt.repeat}" + (
                f", run {attempt.run_id}" if attempt.run_id else ""
            )
            for problem in attempt.problems:
                lines.append(f"  [{where}] {problem}")
        return "\n".join(lines)

    def assert_passed(self) -> None:
        """Raise ``AssertionError`` with [`summary()`][prism.evals._report.CaseReport.summary] and the first failing transcript unless
        every attempt passed (what a pytest case built by ``prism.evals.pytest_cases`` calls)."""
        if self.passed:
            return
        message = self.summary()
        failing = next((a for a in self.attempts if a.outcome != "pass"), None)
        if failing is not None and failing.messages:
            message += "\ntranscript:\n" + failing.transcript(max_chars=500)
        raise AssertionError(message)

    def to_dict(self) -> dict[str, JsonValue]:
        """The JSON form (attempts with the transcripts of those that did not pass)."""
        usage, judge = self.usage, self.judge_usage
        return {
            "name": self.name,
            "outcome": self.outcome,
            "pass_rate": self.pass_rate.to_dict(),
            "evaluators": {name: rate.to_dict() for name, rate in self.evaluators.items()},
            "usage": None if usage is None else usage.to_dict(),
            "judge_usage": None if judge is None else judge.to_dict(),
            "metadata": dict(self.metadata),
            "attempts": [attempt.to_dict() for attempt in self.attempts],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalReport:
    """The result of [`prism.evals.run_eval()`][prism.evals.run_eval]."""

    eval_run_id: str
    """The eval run's id (``metadata["prism.eval"]["eval_run_id"]`` of every run)."""
    dataset: str
    """The dataset's name."""
    agent: str
    """The agent's id or name."""
    cases: tuple[CaseReport, ...]
    """Every case, in dataset order."""
    repeat: int = 1
    """Attempts per case."""
    concurrency: int = 1
    """Most runs at once."""
    started_at: str = ""
    """When the eval run started (ISO 8601, UTC)."""
    duration_s: float = 0.0
    """Wall-clock seconds of the whole eval run."""

    @property
    def passed(self) -> bool:
        """Every case passed."""
        return all(case.passed for case in self.cases)

    @property
    def counts(self) -> dict[str, int]:
        """Cases per outcome: ``{"pass", "fail", "flaky", "error"}``."""
        counts = {"pass": 0, "fail": 0, "flaky": 0, "error": 0}
        for case in self.cases:
            counts[case.outcome] += 1
        return counts

    @property
    def evaluators(self) -> Mapping[str, PassRate]:
        """Each evaluator's pass rate over every attempt of every case."""
        return _evaluator_rates(
            s for case in self.cases for attempt in case.attempts for s in attempt.scores
        )

    @property
    def usage(self) -> Usage | None:
        """The agent's total usage (tokens and, where reported, cost)."""
        return sum_usage(case.usage for case in self.cases)

    @property
    def judge_usage(self) -> Usage | None:
        """The judges' total usage, apart from the agent's."""
        return sum_usage(case.judge_usage for case in self.cases)

    @property
    def usage_recorded(self) -> bool:
        """Every attempt was replayed: ``usage`` is the recordings', served back."""
        attempts = [a for case in self.cases for a in case.attempts]
        return bool(attempts) and all(a.usage_source == "recorded" for a in attempts)

    @property
    def failures(self) -> tuple[AttemptReport, ...]:
        """Every attempt that did not pass, in case order."""
        return tuple(a for case in self.cases for a in case.attempts if a.outcome != "pass")

    def to_dict(self) -> dict[str, JsonValue]:
        """The JSON form: the run, the counts, usage, evaluator rates and every case."""
        usage, judge = self.usage, self.judge_usage
        return {
            "eval_run_id": self.eval_run_id,
            "dataset": self.dataset,
            "agent": self.agent,
            "repeat": self.repeat,
            "concurrency": self.concurrency,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 6),
            "passed": self.passed,
            "counts": dict(self.counts),
            "usage": None if usage is None else usage.to_dict(),
            "usage_source": "recorded" if self.usage_recorded else "live",
            "judge_usage": None if judge is None else judge.to_dict(),
            "evaluators": {name: rate.to_dict() for name, rate in self.evaluators.items()},
            "cases": [case.to_dict() for case in self.cases],
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """``to_dict()`` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def summary_line(self) -> str:
        """``"5 cases: 4 pass, 1 fail, 0 flaky, 0 error; agent: 120 tokens, cost …; judge: …;
        3.2s"`` (``"1 case: …"`` for one; the agent's usage marked ``(recorded)`` in a
        replay)."""
        counts = self.counts
        text = (
            f"{len(self.cases)} case{'' if len(self.cases) == 1 else 's'}: "
            + ", ".join(f"{n} {k}" for k, n in counts.items())
            + f"; agent: {_usage_text(self.usage)}"
            + (" (recorded)" if self.usage_recorded else "")
        )
        judge = self.judge_usage
        if judge is not None:
            text += f"; judge: {_usage_text(judge)}"
        return text + f"; {self.duration_s:.1f}s"

    def format_text(self, *, transcripts: bool = True) -> str:
        """A plain-text report: a line per case, per evaluator, the totals, then the failures
        (with their transcripts when ``transcripts``)."""
        interval = self.repeat > 1
        width = max([len(case.name) for case in self.cases] + [4])
        lines = [
            f"eval {self.eval_run_id}: dataset {self.dataset!r}, agent {self.agent!r}, "
            f"repeat {self.repeat}"
        ]
        for case in self.cases:
            flag = " flaky" if case.outcome == "flaky" else ""
            lines.append(
                f"  {case.name:<{width}}  {case.outcome:<6} "
                f"{case.pass_rate.format(interval=interval)}{flag}"
            )
        lines.append("evaluators:")
        for name, rate in self.evaluators.items():
            lines.append(f"  {name}: {rate.format()}")
        lines.append(self.summary_line())
        for attempt in self.failures:
            lines.append(
                f"{attempt.outcome.upper()} {attempt.case} (repeat {attempt.repeat}"
                + (f", run {attempt.run_id})" if attempt.run_id else ")")
            )
            lines.extend(f"  {problem}" for problem in attempt.problems)
            if transcripts and attempt.messages:
                lines.extend(
                    "    " + line for line in attempt.transcript(max_chars=300).splitlines()
                )
        return "\n".join(lines)


def _usage_text(usage: Usage | None) -> str:
    if usage is None:
        return "no usage reported"
    parts = [f"{usage.total_tokens if usage.total_tokens is not None else '?'} tokens"]
    parts.append(
        "cost not reported"
        if usage.cost is None
        else f"cost {usage.cost:.6g}{' ' + usage.currency if usage.currency else ''}"
    )
    return ", ".join(parts)
