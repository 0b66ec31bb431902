"""The eval data model: cases and datasets, what a case expects, and what an evaluator returns.

* [`Case`][prism.evals._model.Case] — one input (text or messages) with what its run should produce: an answer
  (``expected_output``), an artifact (``expected_artifact``), a tool trajectory
  (``expected_tools``, a [`ExpectedTools`][prism.evals._model.ExpectedTools] of [`ExpectedToolCall`][prism.evals._model.ExpectedToolCall]), a run status, its
  metadata and its own evaluators;
* [`Dataset`][prism.evals._model.Dataset] — named cases plus the evaluators every case gets;
* [`ArgumentMatcher`][prism.evals._model.ArgumentMatcher] ([`arg_any()`][prism.evals._model.arg_any], [`arg_regex()`][prism.evals._model.arg_regex], [`arg_contains()`][prism.evals._model.arg_contains]) — a looser
  expectation for one argument of an expected tool call;
* [`Evaluator`][prism.evals._model.Evaluator] — the protocol of a check: ``name`` and ``async evaluate(ctx)``, given an
  [`EvalContext`][prism.evals._model.EvalContext] (the case, the run's ``RunResult``, its latency) and returning an
  [`EvalScore`][prism.evals._model.EvalScore] (``outcome``, ``score``, ``reason``).

Files (YAML, JSONL) are read and written by [`prism.evals._files`][prism.evals._files]; the built-in evaluators
live in [`prism.evals._evaluators`][prism.evals._evaluators], [`prism.evals._trajectory`][prism.evals._trajectory] and
[`prism.evals._judge`][prism.evals._judge].
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Literal, Protocol, TypeAlias, runtime_checkable

from prism.errors import PrismConfigError
from prism.providers.base import AIProvider
from prism.types import (
    JsonValue,
    Message,
    ModelConfig,
    RunResult,
    RunStatus,
    ToolCallContent,
    Usage,
)

__all__ = [
    "TRAJECTORY_MODES",
    "ArgumentMatcher",
    "Case",
    "Dataset",
    "EvalContext",
    "EvalScore",
    "Evaluator",
    "ExpectedToolCall",
    "ExpectedTools",
    "ScoreOutcome",
    "TrajectoryMode",
    "arg_any",
    "arg_contains",
    "arg_regex",
    "match_value",
]

_EMPTY: Final[Mapping[str, JsonValue]] = MappingProxyType({})

TrajectoryMode: TypeAlias = Literal["exact", "in_order", "any_order"]
"""How a run's tool calls are compared with the expected ones:

* ``"exact"`` — the same calls in the same order, nothing else;
* ``"in_order"`` — the expected calls appear in this order; other calls may come between;
* ``"any_order"`` — each expected call is matched by a distinct call, in any order; other calls
  may come too.
"""

TRAJECTORY_MODES: Final = ("exact", "in_order", "any_order")
"""Every [`TrajectoryMode`][prism.evals._model.TrajectoryMode]."""

ScoreOutcome: TypeAlias = Literal["pass", "fail", "error", "judge_error"]
"""What one evaluator concluded: ``"pass"``; ``"fail"``; ``"error"`` — it could not evaluate
(e.g. a cost limit on a run that reported no cost, an evaluator that raised); ``"judge_error"`` —
an LLM judge whose answer did not parse or whose run failed. Errors are not failures of the case:
an attempt with an error and no failure is reported as an error."""

_STATUSES: Final = frozenset(("succeeded", "failed", "aborted", "suspended", "denied"))


# --------------------------------------------------------------------------- argument matchers


@dataclass(frozen=True, slots=True)
class ArgumentMatcher:
    """A looser expectation for one tool-call argument than equality.

    In a dataset file a matcher is a one-key object: ``{"$any": true}``, ``{"$regex": "^ord"}``
    (``re.search`` on the value as a string; a non-string value never matches) or
    ``{"$contains": "refund"}`` (a substring of a string value, or an item of a list value).
    """

    kind: Literal["any", "regex", "contains"]
    """Which check."""
    value: JsonValue = None
    """The pattern (``regex``) or the expected part (``contains``)."""

    def __post_init__(self) -> None:
        if self.kind == "regex":
            if not isinstance(self.value, str):
                raise PrismConfigError("arg_regex: the pattern must be a str")
            try:
                re.compile(self.value)
            except re.error as exc:
                raise PrismConfigError(
                    f"arg_regex: invalid pattern {self.value!r}: {exc}"
                ) from None
        elif self.kind not in ("any", "contains"):
            raise PrismConfigError(f"unknown argument matcher {self.kind!r}")

    def matches(self, actual: object) -> bool:
        """Whether ``actual`` (an argument value of a call) satisfies this matcher."""
        if self.kind == "any":
            return True
        if self.kind == "regex":
            return isinstance(actual, str) and re.search(str(self.value), actual) is not None
        if isinstance(actual, str):
            return isinstance(self.value, str) and self.value in actual
        if isinstance(actual, list):
            return any(match_value(self.value, item) for item in actual)
        return False

    def to_json(self) -> dict[str, JsonValue]:
        """The file form: ``{"$any": true}``, ``{"$regex": ...}`` or ``{"$contains": ...}``."""
        return {f"${self.kind}": True if self.kind == "any" else self.value}

    def __repr__(self) -> str:
        return f"arg_{self.kind}()" if self.kind == "any" else f"arg_{self.kind}({self.value!r})"


def arg_any() -> ArgumentMatcher:
    """Match any value of the argument (it must be present)."""
    return ArgumentMatcher("any")


def arg_regex(pattern: str) -> ArgumentMatcher:
    """Match a string argument that ``re.search(pattern)`` finds something in.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — not a str, or not a valid pattern.
    """
    return ArgumentMatcher("regex", pattern)


def arg_contains(part: JsonValue) -> ArgumentMatcher:
    """Match a string argument holding ``part`` as a substring, or a list argument with an item
    equal to (matching) ``part``."""
    return ArgumentMatcher("contains", part)


def match_value(expected: object, actual: object) -> bool:
    """Whether an actual argument value satisfies an expected one.

    ``expected`` may be an [`ArgumentMatcher`][prism.evals._model.ArgumentMatcher], a callable ``(value) -> bool``, a mapping
    (``actual`` must be a mapping holding each of its keys, matched recursively; other keys are
    allowed), a list or tuple (same length, matched item by item) or a JSON scalar (equal; a
    ``bool`` equals only a ``bool``).
    """
    if isinstance(expected, ArgumentMatcher):
        return expected.matches(actual)
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            key in actual and match_value(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(actual) == len(expected)
            and all(match_value(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if callable(expected):
        return bool(expected(actual))
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    return expected == actual


# --------------------------------------------------------------------------- expected tool calls


@dataclass(frozen=True, slots=True)
class ExpectedToolCall:
    """One expected tool call: its tool name and, optionally, its arguments.

    ``arguments`` lists the arguments that must be present with a matching value (see
    ``match_value()``: literal values, [`ArgumentMatcher`][prism.evals._model.ArgumentMatcher] values, or callables in Python);
    other arguments of the call are allowed. ``None`` does not look at the arguments.
    """

    name: str
    """Tool name."""
    arguments: Mapping[str, object] | None = None
    """Expected arguments (a subset of the call's), or ``None``."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise PrismConfigError("an expected tool call needs a non-empty tool name")
        if self.arguments is not None and not isinstance(self.arguments, Mapping):
            raise PrismConfigError(
                f"expected tool call {self.name!r}: arguments must be a mapping, "
                f"got {type(self.arguments).__name__}"
            )

    def matches(self, call: ToolCallContent) -> bool:
        """Whether ``call`` has this name and matching arguments."""
        if call.name != self.name:
            return False
        return self.arguments is None or match_value(self.arguments, call.arguments)

    def __str__(self) -> str:
        if self.arguments is None:
            return self.name
        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        return f"{self.name}({args})"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectedTools:
    """The expected tool trajectory of a case: calls and how they are compared (``mode``)."""

    calls: tuple[ExpectedToolCall, ...]
    """The expected calls, in order."""
    mode: TrajectoryMode = "exact"
    """How they are compared with the run's calls ([`TrajectoryMode`][prism.evals._model.TrajectoryMode])."""

    if TYPE_CHECKING:

        def __init__(
            self, *, calls: Sequence[ExpectedToolCall], mode: TrajectoryMode = "exact"
        ) -> None: ...

    def __post_init__(self) -> None:
        calls = self.calls
        if isinstance(calls, (str, Mapping)) or not isinstance(calls, Sequence):
            raise PrismConfigError("expected tools: calls must be a sequence of ExpectedToolCall")
        for call in calls:
            if not isinstance(call, ExpectedToolCall):
                raise PrismConfigError(
                    f"expected tools: calls must be ExpectedToolCall, got {type(call).__name__}"
                )
        object.__setattr__(self, "calls", tuple(calls))
        if self.mode not in TRAJECTORY_MODES:
            raise PrismConfigError(
                f"trajectory mode must be one of {', '.join(TRAJECTORY_MODES)}, got {self.mode!r}"
            )

    @classmethod
    def coerce(cls, value: ExpectedTools | Sequence[ExpectedToolCall]) -> ExpectedTools:
        """``value`` as ``ExpectedTools``; a sequence of calls is compared ``"exact"``."""
        if isinstance(value, ExpectedTools):
            return value
        return cls(calls=value)


# --------------------------------------------------------------------------- scores and evaluators


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalScore:
    """What one evaluator concluded about one run."""

    evaluator: str
    """The evaluator's name."""
    outcome: ScoreOutcome
    """``"pass"``, ``"fail"``, ``"error"`` or ``"judge_error"`` ([`ScoreOutcome`][prism.evals._model.ScoreOutcome])."""
    reason: str = ""
    """Why, in words (shown for failures and errors)."""
    score: float | None = None
    """A score from 0 to 1 when the evaluator gives one (1.0 / 0.0 for a pass / fail check)."""
    usage: Usage | None = None
    """The evaluator's own usage (an LLM judge's run), reported apart from the agent's."""

    def __post_init__(self) -> None:
        if self.outcome not in ("pass", "fail", "error", "judge_error"):
            raise PrismConfigError(f"invalid score outcome {self.outcome!r}")

    @property
    def passed(self) -> bool:
        """``outcome == "pass"``."""
        return self.outcome == "pass"

    @classmethod
    def check(cls, evaluator: str, ok: bool, reason: str) -> EvalScore:
        """A pass (score 1.0) when ``ok``, else a fail (score 0.0), with ``reason``."""
        return cls(
            evaluator=evaluator,
            outcome="pass" if ok else "fail",
            score=1.0 if ok else 0.0,
            reason=reason,
        )

    @classmethod
    def error(cls, evaluator: str, reason: str) -> EvalScore:
        """An ``"error"``: the evaluator could not evaluate (``reason`` says why)."""
        return cls(evaluator=evaluator, outcome="error", reason=reason)

    def to_dict(self) -> dict[str, JsonValue]:
        """``{"evaluator", "outcome", "reason", "score"?, "usage"?}``."""
        out: dict[str, JsonValue] = {
            "evaluator": self.evaluator,
            "outcome": self.outcome,
            "reason": self.reason,
        }
        if self.score is not None:
            out["score"] = self.score
        if self.usage is not None:
            out["usage"] = self.usage.to_dict()
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalContext:
    """What an evaluator is given: the case, the run's result and how the run went."""

    case: Case
    """The case."""
    result: RunResult
    """The run's result (a failed run's too: ``status``, ``error``, ``messages`` so far)."""
    latency_s: float
    """Wall-clock seconds from the start of ``run()`` to its return."""
    repeat: int = 1
    """Which repetition of the case this run is (1-based)."""
    eval_run_id: str = ""
    """The eval run this run belongs to."""
    judge_provider: AIProvider | None = None
    """The provider an LLM judge without its own uses (``run_eval(judge_provider=...)``)."""
    judge_model: ModelConfig | None = None
    """The model an LLM judge without its own uses (``run_eval(judge_model=...)``)."""

    @property
    def text(self) -> str:
        """The run's answer: ``result.text``."""
        return self.result.text

    @property
    def tool_calls(self) -> tuple[ToolCallContent, ...]:
        """The host tool calls of the run, in order (provider-hosted ones left out)."""
        return tuple(c for c in self.result.tool_calls if c.authority != "provider-hosted")

    @property
    def turns(self) -> int:
        """Provider turns of the run: its assistant messages."""
        return sum(1 for m in self.result.messages if m.role == "assistant")


@runtime_checkable
class Evaluator(Protocol):
    """A check of one run. ``name`` labels its scores in reports (unique within a case's list:
    a repeated name gets ``" #2"``, ``" #3"`` …); ``evaluate`` returns an [`EvalScore`][prism.evals._model.EvalScore] and
    should not raise (an exception is reported as an ``"error"`` score with its message).

    The built-in evaluators also have ``to_spec()``, their form in a dataset file; an evaluator
    without it can be used from Python but not saved.
    """

    @property
    def name(self) -> str:
        """The evaluator's name."""
        ...

    async def evaluate(self, ctx: EvalContext, /) -> EvalScore:
        """Evaluate one run."""
        ...


def _check_evaluators(value: object, label: str) -> tuple[Evaluator, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, Mapping)) or not isinstance(value, Sequence):
        raise PrismConfigError(f"{label}: evaluators must be a sequence of evaluators")
    out = tuple(value)
    for item in out:
        if not isinstance(item, Evaluator):
            raise PrismConfigError(
                f"{label}: {type(item).__name__} is not an evaluator "
                "(it needs a name and an async evaluate(ctx))"
            )
    return out


def _check_metadata(value: object, label: str) -> Mapping[str, JsonValue]:
    if value is None:
        return _EMPTY
    if not isinstance(value, Mapping):
        raise PrismConfigError(f"{label}: metadata must be a mapping, got {type(value).__name__}")
    return MappingProxyType(dict(value))


# --------------------------------------------------------------------------- cases and datasets


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One eval case: the input of a run and what the run should produce.

    When a case has no evaluators of its own, its expectations become its evaluators:
    ``expected_output`` an exact match of the answer (surrounding whitespace ignored),
    ``expected_artifact`` an equality check of the artifact, ``expected_tools`` a tool trajectory
    check in its mode. With evaluators of its own, the expectations are what those evaluators
    compare with when they are given no value (``exact()``, ``contains()``,
    ``artifact_equals()``, ``tool_trajectory()``). The dataset's evaluators are added to every
    case either way, and every run is checked for ``expected_status``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an empty name or input, input that is neither a
            str nor a sequence of ``Message``, an expected status that is not a run status, or
            an evaluator without ``name`` and ``evaluate``.
    """

    name: str
    """The case's name (unique in its dataset; a test id in JUnit and pytest)."""
    input: str | tuple[Message, ...]
    """The run input: text (one user message) or messages."""
    expected_output: str | None = None
    """The expected answer text."""
    expected_artifact: JsonValue = None
    """The expected artifact (JSON)."""
    expected_tools: ExpectedTools | None = None
    """The expected tool trajectory."""
    expected_status: RunStatus = "succeeded"
    """The run status the case expects (a run that ends otherwise fails the case)."""
    metadata: Mapping[str, JsonValue] = field(default_factory=lambda: _EMPTY)
    """The case's own metadata (kept in reports; not sent to the agent)."""
    evaluators: tuple[Evaluator, ...] = ()
    """The case's own evaluators."""
    cassette: Mapping[str, JsonValue] | None = None
    """The recording the case replays (``run_eval(replay=True)``): the JSON form of a
    [`Cassette`][prism.evals.Cassette], written by ``prism.evals.capture_run``."""

    if TYPE_CHECKING:

        def __init__(
            self,
            *,
            name: str,
            input: str | Message | Sequence[Message],
            expected_output: str | None = None,
            expected_artifact: JsonValue = None,
            expected_tools: ExpectedTools | Sequence[ExpectedToolCall] | None = None,
            expected_status: RunStatus = "succeeded",
            metadata: Mapping[str, JsonValue] | None = None,
            evaluators: Sequence[Evaluator] = (),
            cassette: Mapping[str, JsonValue] | None = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise PrismConfigError("a case needs a non-empty name")
        label = f"case {self.name!r}"
        value: object = self.input
        if isinstance(value, Message):
            value = (value,)
        if isinstance(value, str):
            if not value:
                raise PrismConfigError(f"{label}: input is empty")
        elif isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
            messages = tuple(value)
            if not messages or not all(isinstance(m, Message) for m in messages):
                raise PrismConfigError(f"{label}: input must be a str or a sequence of Message")
            object.__setattr__(self, "input", messages)
        else:
            raise PrismConfigError(
                f"{label}: input must be a str or a sequence of Message, got {type(value).__name__}"
            )
        if self.expected_output is not None and not isinstance(self.expected_output, str):
            raise PrismConfigError(f"{label}: expected_output must be a str")
        if self.expected_tools is not None:
            object.__setattr__(self, "expected_tools", ExpectedTools.coerce(self.expected_tools))
        if self.expected_status not in _STATUSES:
            raise PrismConfigError(
                f"{label}: expected_status must be one of {', '.join(sorted(_STATUSES))}, "
                f"got {self.expected_status!r}"
            )
        object.__setattr__(self, "metadata", _check_metadata(self.metadata, label))
        object.__setattr__(self, "evaluators", _check_evaluators(self.evaluators, label))
        if self.cassette is not None and not isinstance(self.cassette, Mapping):
            raise PrismConfigError(f"{label}: cassette must be a mapping")

    @property
    def input_text(self) -> str:
        """The input as text: the string, or the text of the last user message."""
        if isinstance(self.input, str):
            return self.input
        for message in reversed(self.input):
            if message.role == "user":
                return message.text
        return self.input[-1].text


@dataclass(frozen=True, slots=True, kw_only=True)
class Dataset:
    """Named eval cases and the evaluators every case gets.

    Build one in Python, or read one with [`prism.evals.load_dataset()`][prism.evals.load_dataset] (YAML or JSONL).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — no cases, a value that is not a ``Case``, two
            cases with one name, or an evaluator without ``name`` and ``evaluate``.
    """

    name: str = "dataset"
    """The dataset's name (the JUnit test suite's)."""
    cases: tuple[Case, ...]
    """The cases, in order."""
    evaluators: tuple[Evaluator, ...] = ()
    """Evaluators added to every case."""
    description: str | None = None
    """What the dataset checks."""
    metadata: Mapping[str, JsonValue] = field(default_factory=lambda: _EMPTY)
    """The dataset's metadata."""

    if TYPE_CHECKING:

        def __init__(
            self,
            *,
            name: str = "dataset",
            cases: Sequence[Case],
            evaluators: Sequence[Evaluator] = (),
            description: str | None = None,
            metadata: Mapping[str, JsonValue] | None = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise PrismConfigError("a dataset needs a non-empty name")
        cases = self.cases
        if isinstance(cases, (str, Mapping)) or not isinstance(cases, Sequence) or not cases:
            raise PrismConfigError(f"dataset {self.name!r}: cases must be a non-empty sequence")
        seen: set[str] = set()
        for case in cases:
            if not isinstance(case, Case):
                raise PrismConfigError(
                    f"dataset {self.name!r}: cases must be Case objects, got {type(case).__name__}"
                )
            if case.name in seen:
                raise PrismConfigError(f"dataset {self.name!r}: two cases are named {case.name!r}")
            seen.add(case.name)
        object.__setattr__(self, "cases", tuple(cases))
        label = f"dataset {self.name!r}"
        object.__setattr__(self, "evaluators", _check_evaluators(self.evaluators, label))
        object.__setattr__(self, "metadata", _check_metadata(self.metadata, label))

    def case(self, name: str) -> Case:
        """The case named ``name``.

        Raises:
            KeyError: no such case.
        """
        for case in self.cases:
            if case.name == name:
                return case
        raise KeyError(name)

    def __len__(self) -> int:
        return len(self.cases)
