"""The built-in evaluators of answers, artifacts and limits, and Python callables as evaluators.

* answers: [`exact()`][prism.evals._evaluators.exact], [`contains()`][prism.evals._evaluators.contains], [`regex()`][prism.evals._evaluators.regex];
* artifacts: [`json_schema()`][prism.evals._evaluators.json_schema], [`pydantic_model()`][prism.evals._evaluators.pydantic_model], [`artifact_equals()`][prism.evals._evaluators.artifact_equals] — the run's
  ``artifact``, or its answer parsed as JSON when it has none;
* limits: [`max_cost()`][prism.evals._evaluators.max_cost], [`max_tokens()`][prism.evals._evaluators.max_tokens], [`max_turns()`][prism.evals._evaluators.max_turns], [`max_latency()`][prism.evals._evaluators.max_latency],
  [`no_denied_or_ambiguous_calls()`][prism.evals._evaluators.no_denied_or_ambiguous_calls] — a limit that cannot be measured (no cost or no token
  count reported) is an ``"error"`` score, never a pass;
* [`python_evaluator()`][prism.evals._evaluators.python_evaluator] — any function of an [`EvalContext`][prism.evals.EvalContext].

Each evaluator is a frozen dataclass with a ``name`` (its label in reports), ``async
evaluate(ctx)`` and ``to_spec()``, its one-key form in a dataset file (``{"contains": "refund"}``);
``from_spec`` reads that form back ([`prism.evals._files`][prism.evals._files] keeps the table of kinds).
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import ClassVar, Final, TypeAlias

from prism._keys import reject_unknown_keys
from prism.errors import PrismConfigError
from prism.evals._model import EvalContext, EvalScore, Evaluator
from prism.tools.schema import compile_schema, schema_errors
from prism.types import JsonValue, canonical_json, is_json_value

__all__ = [
    "DENIED_CALL_CODES",
    "ArtifactEquals",
    "Contains",
    "ExactMatch",
    "JsonSchemaCheck",
    "LimitCheck",
    "NoDeniedOrAmbiguousCalls",
    "PydanticCheck",
    "PythonCheck",
    "PythonCheckFunction",
    "RegexMatch",
    "artifact_equals",
    "contains",
    "exact",
    "import_object",
    "json_schema",
    "max_cost",
    "max_latency",
    "max_tokens",
    "max_turns",
    "no_denied_or_ambiguous_calls",
    "pydantic_model",
    "python_evaluator",
    "regex",
]

DENIED_CALL_CODES: Final = frozenset(
    ("tool_denied", "permission_denied", "execution_denied", "guardrail_blocked")
)
"""Tool-result error codes of a call that was denied (a tool filter, the permission policy,
the approval step or a guardrail blocked it)."""

PythonCheckFunction: TypeAlias = Callable[[EvalContext], object]
"""``check(ctx)``, sync or async, returning ``bool``, ``(bool, reason)``, a score from 0 to 1,
a mapping ``{"pass", "score"?, "reason"?}`` or an [`EvalScore`][prism.evals.EvalScore]; an
``AssertionError`` it raises is a fail with its message."""


def _spec(kind: str, value: JsonValue, name: str, default_name: str) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {kind: value}
    if name != default_name:
        out["name"] = name
    return out


def _short(value: object, limit: int = 200) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _options(kind: str, value: object, allowed: tuple[str, ...]) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise PrismConfigError(f"evaluator {kind}: expected a mapping of options, got {value!r}")
    reject_unknown_keys(f"evaluator {kind}", value, allowed)
    return value


# --------------------------------------------------------------------------- answers


@dataclass(frozen=True, slots=True, kw_only=True)
class ExactMatch:
    """The answer equals ``expected`` (else the case's ``expected_output``)."""

    kind: ClassVar[str] = "exact"
    expected: str | None = None
    strip: bool = True
    case_sensitive: bool = True
    name: str = "exact"

    async def evaluate(self, ctx: EvalContext, /) -> EvalScore:
        expected = self.expected if self.expected is not None else ctx.case.expected_output
        if expected is None:
            return EvalScore.error(
                self.name, "no expected answer: give exact(TEXT) or the case's expected_output"
            )
        actual = ctx.text
        a, e = (actual.strip(), expected.strip()) if self.strip else (actual, expected)
        if not self.case_sensitive:
            a, e = a.casefold(), e.casefold()
        if a == e:
            return EvalScore.check(self.name, True, "the answer is the expected one")
        return EvalScore.check(
            self.name, False, f"expected {_short(expected)!r}, got {_short(actual)!r}"
        )

    def to_spec(self) -> dict[str, JsonValue]:
        value: JsonValue = True if self.expected is None else self.expected
        if not self.strip or not self.case_sensitive:
            value = {
                "expected": self.expected,
                "strip": self.strip,
                "case_sensitive": self.case_sensitive,
            }
        return _spec(self.kind, value, self.name, "exact")

    @classmethod
    def from_spec(cls, value: object, name: str | None) -> ExactMatch:
        if value is None or value is True:
            return exact(name=name)
        if isinstance(value, str):
            return exact(value, name=name)
        opts = _options(cls.kind, value, ("expected", "strip", "case_sensitive"))
        expected = opts.get("expected")
        if expected is not None and not isinstance(expected, str):
            raise PrismConfigError("evaluator exact: expected must be a str")
        return exact(
            expected,
            strip=bool(opts.get("strip", True)),
            case_sensitive=bool(opts.get("case_sensitive", True)),
            name=name,
        )


def exact(
    expected: str | None = None,
    *,
    strip: bool = True,
    case_sensitive: bool = True,
    name: str | None = None,
) -> ExactMatch:
    """An evaluator: the run's answer (``result.text``) equals ``expected``.

    Args:
        expected: The expected answer; ``None`` compares with the case's ``expected_output``
            (an ``"error"`` score when the case has none).
        strip: Ignore surrounding whitespace on both sides.
        case_sensitive: ``False`` compares case-folded text.
        name: Label in reports (default ``"exact"``).
    """
    return ExactMatch(
        expected=expected, strip=strip, case_sensitive=case_sensitive, name=name or "exact"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Contains:
    """The answer contains ``text`` (else the case's ``expected_output``)."""

    kind: ClassVar[str] = "contains"
    text: str | None = None
    case_sensitive: bool = True
    name: str = "contains"

    async def evaluate(self, ctx: EvalContext, /) -> EvalScore:
        part = self.text if self.text is not None else ctx.case.expected_output
        if part is None:
            return EvalScore.error(
                self.name, "nothing to look for: give contains(TEXT) or the case's expected_output"
            )
        actual = ctx.text
        found = (part in actual) if self.case_sensitive else part.casefold() in actual.casefold()
        if found:
            return EvalScore.check(self.name, True, f"the answer contains {_short(part)!r}")
        return EvalScore.check(
            self.name, False, f"the answer does not contain {_short(part)!r}: {_short(actual)!r}"
        )

    def to_spec(self) -> dict[str, JsonValue]:
        value: JsonValue = True if self.text is None else self.text
        if not self.case_sensitive:
            value = {"text": self.text, "case_sensitive": False}
        return _spec(self.kind, value, self.name, _contains_name(self.text))

    @classmethod
    def from_spec(cls, value: object, name: str | None) -> Contains:
        if value is None or value is True:
            return contains(name=name)
        if isinstance(value, str):
            return contains(value, name=name)
        opts = _options(cls.kind, value, ("text", "case_sensitive"))
        text = opts.get("text")
        if text is not None and not isinstance(text, str):
            raise PrismConfigError("evaluator contains: text must be a str")
        return contains(text, case_sensitive=bool(opts.get("case_sensitive", True)), name=name)


def _contains_name(text: str | None) -> str:
    return "contains" if text is None else f"contains({_short(text, 40)!r})"


def contains(
    text: str | None = None, *, case_sensitive: bool = True, name: str | None = None
) -> Contains:
    """An evaluator: the run's answer contains ``text``.

    Args:
        text: The text to find; ``None`` looks for the case's ``expected_output``.
        case_sensitive: ``False`` compares case-folded text.
        name: Label in reports (default ``contains('TEXT')``).
    """
    return Contains(text=text, case_sensitive=case_sensitive, name=name or _contains_name(text))


@dataclass(frozen=True, slots=True, kw_only=True)
class RegexMatch:
    """``re.search(pattern, answer)`` finds a match."""

    kind: ClassVar[str] = "regex"
    pattern: str
    name: str = "regex"

    async def evaluate(self, ctx: EvalContext, /) -> EvalScore:
        found = re.search(self.pattern, ctx.text)
        if found is not None:
            return EvalScore.check(self.name, True, f"matched {_short(found.group(0), 80)!r}")
        return EvalScore.check(
            self.name, False, f"no match of /{self.pattern}/ in {_short(ctx.text)!r}"
        )

    def to_spec(self) -> dict[str, JsonValue]:
        return _spec(self.kind, self.pattern, self.name, _regex_name(self.pattern))

    @classmethod
    def from_spec(cls, value: object, name: str | None) -> RegexMatch:
        if not isinstance(value, str):
            raise PrismConfigError("evaluator regex: expected a pattern string")
        return regex(value, name=name)


def _regex_name(pattern: str) -> str:
    return f"regex(/{_short(pattern, 40)}/)"


def regex(pattern: str, *, name: str | None = None) -> RegexMatch:
    """An evaluator: ``re.search(pattern)`` finds a match in the run's answer (flags inline,
    e.g. ``"(?i)approved"``).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — not a str, or not a valid pattern.
    """
    if not isinstance(pattern, str):
        raise PrismConfigError("regex: the pattern must be a str")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise PrismConfigError(f"regex: invalid pattern {pattern!r}: {exc}") from None
    return RegexMatch(pattern=pattern, name=name or _regex_name(pattern))


# --------------------------------------------------------------------------- artifacts


class _NoArtifact(Exception):
    pass


def _artifact(ctx: EvalContext) -> tuple[object, str]:
    """The value an artifact evaluator checks: ``result.artifact``, else the answer parsed as
    JSON; with where it came from."""
    if ctx.result.artifact is not None:
        return ctx.result.artifact, "the artifact"
    text = ctx.text.strip()
    if not text:
        raise _NoArtifact("the run has no artifact and no answer")
    try:
        return json.loads(text), "the answer"
    except ValueError:
        raise _NoArtifact(
            f"the run has no artifact and its answer is not JSON: {_short(text)!r}"
        ) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class JsonSchemaCheck:
    """The artifact validates against a JSON Schema."""

    kind: ClassVar[str] = "json_schema"
    schema: Mapping[str, JsonValue]
    name: str = "json_schema"

    async def evaluate(self, ctx: EvalContext, /) -> EvalScore:
        try:
            value, where = _artifact(ctx)
        except _NoArtifact as exc:
            return EvalScore.check(self.name, False, str(exc))
        errors = schema_errors(compile_schema(self.schema), value)
        if not errors:
            return EvalScore.check(self.name, True, f"{where} matches the schema")
        listed = "; ".join(f"{pointer or '/'}: {message}" for pointer, message in errors[:5])
        return EvalScore.check(self.name, False, f"{where} does not match the schema: {listed}")

    def to_spec(self) -> dict[str, JsonValue]:
        return _spec(self.kind, dict(self.schema), self.name, "json_schema")

    @classmethod
    def from_spec(cls, value: object, name: str | None) -> JsonSchemaCheck:
        if not isinstance(value, Mapping):
            raise PrismConfigError("evaluator json_schema: expected a JSON Schema object")
        return json_schema(value, name=name)


def json_schema(schema: Mapping[str, JsonValue], *, name: str | None = None) -> JsonSchemaCheck:
    """An evaluator: the run's artifact (else its answer parsed as JSON) validates against
    ``schema``; a run with neither fails.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — ``schema`` is not a mapping or not a valid
            JSON Schema.
    """
    if not isinstance(schema, Mapping) or not is_json_value(dict(schema)):
        raise PrismConfigError("json_schema: the schema must be a JSON object")
    compiled = compile_schema(schema)
    if isinstance(compiled, str):
        raise PrismConfigError(f"json_schema: invalid JSON Schema: {compiled}")
    return JsonSchemaCheck(schema=schema, name=name or "json_schema")


@dataclass(frozen=True, slots=True, kw_only=True)
class PydanticCheck:
    """The artifact validates as a pydantic model."""

    kind: ClassVar[str] = "pydantic"
    model: type[object]
    path: str | None = None
    name: str = "pydantic"

    async def evaluate(self, ctx: EvalContext, /) -> EvalScore:
        label = self.model.__name__
        artifact = ctx.result.artifact
        if artifact is not None and isinstance(artifact, self.model):
            return EvalScore.check(self.name, True, f"the artifact is a {label}")
        try:
            value, where = _artifact(ctx)
        except _NoArtifact as exc:
            return EvalScore.check(self.name, False, str(exc))
        validate = getattr(self.model, "model_validate")  # noqa: B009 - a pydantic classmethod
        try:
            validate(value)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            return EvalScore.check(
                self.name, False, f"{where} is not a valid {label}: {_short(str(exc), 400)}"
            )
        return EvalScore.check(self.name, True, f"{where} is a valid {label}")

    def to_spec(self) -> dict[str, JsonValue]:
        if self.path is None:
            raise PrismConfigError(
                f"evaluator {self.name!r}: a pydantic model given as a class cannot be saved; "
                "give its import path (pydantic_model('module:Model'))"
            )
        return _spec(self.kind, self.path, self.name, f"pydantic({self.model.__name__})")

    @classmethod
    def from_spec(cls, value: object, name: str | None) -> PydanticCheck:
        if not isinstance(value, str):
            raise PrismConfigError("evaluator pydantic: expected an import path MODULE:MODEL")
        return pydantic_model(value, name=name)


def pydantic_model(model: type[object] | str, *, name: str | None = None) -> PydanticCheck:
    """An evaluator: the run's artifact (else its answer parsed as JSON) validates as the
    pydantic model ``model`` (``Model.model_validate``); an artifact that already is one passes.

    Args:
        model: The model class, or its import path ``"module:Model"`` (the form a dataset file
            can hold; imported with the current directory on ``sys.path``).
        name: Label in reports (default ``pydantic(Model)``).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — not a class with ``model_validate``, or an import
            path that cannot be imported.
    """
    path = model if isinstance(model, str) else None
    cls = import_object(model, "pydantic") if isinstance(model, str) else model
    if not isinstance(cls, type) or not callable(getattr(cls, "model_validate", None)):
        raise PrismConfigError(f"pydantic_model: {cls!r} is not a pydantic model class")
    return PydanticCheck(model=cls, path=path, name=name or f"pydantic({cls.__name__})")


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactEquals:
    """The artifact equals ``expected`` (else the case's ``expected_artifact``)."""

    kind: ClassVar[str] = "artifact_equals"
    expected: JsonValue = None
    name: str = "artifact_equals"

    async def evaluate(self, ctx: EvalContext, /) -> EvalScore:
        expected = self.expected if self.expected is not None else ctx.case.expected_artifact
        if expected is None:
            return EvalScore.error(
                self.name,
                "no expected artifact: give artifact_equals(VALUE) or the case's expected_artifact",
            )
        try:
            value, where = _artifact(ctx)
        except _NoArtifact as exc:
            return EvalScore.check(self.name, False, str(exc))
        dumped = getattr(value, "model_dump", None)
        if callable(dumped):  # a pydantic artifact compares by its JSON form
            value = dumped(mode="json")
        if is_json_value(value) and canonical_json(value) == canonical_json(expected):
            return EvalScore.check(self.name, True, f"{where} is the expected one")
        return EvalScore.check(
            self.name,
            False,
            f"{where} differs: expected {_short(canonical_json(expected))}, "
            f"got {_short(value if not is_json_value(value) else canonical_json(value))}",
        )

    def to_spec(self) -> dict[str, JsonValue]:
        value: JsonValue = True if self.expected is None else {"expected": self.expected}
        return _spec(self.kind, value, self.name, "artifact_equals")

    @classmethod
    def from_spec(cls, value: object, name: str | None) -> ArtifactEquals:
        if value is None or value is True:
            return artifact_equals(name=name)
        opts = _options(cls.kind, value, ("expected",))
        expected = opts.get("expected")
        if not is_json_value(expected):
            raise PrismConfigError("evaluator artifact_equals: expected must be JSON")
        return artifact_equals(expected, name=name)


def artifact_equals(expected: JsonValue = None, *, name: str | None = None) -> ArtifactEquals:
    """An evaluator: the run's artifact (else its answer parsed as JSON) equals ``expected`` as
    JSON (a pydantic artifact by its ``model_dump(mode="json")``); ``None`` compares with the
    case's ``expected_artifact``."""
    return ArtifactEquals(expected=expected, name=name or "artifact_equals")


# --------------------------------------------------------------------------- limits


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitCheck:
    """A measured quantity of the run is at most ``maximum``: ``"cost"`` (in ``currency``),
    ``"tokens"`` (total), ``"turns"`` (provider turns) or ``"latency_s"`` (seconds)."""

    measure: str
    maximum: float
    currency: str | None = None
    name: str = ""

    _KINDS: ClassVar[Mapping[str, str]] = {
        "cost": "max_cost",
        "tokens": "max_tokens",
        "turns": "max_turns",
        "latency_s": "max_latency_s",
    }

    @property
    def kind(self) -> str:
        """The file form's key: ``max_cost``, ``max_tokens``, ``max_turns``, ``max_latency_s``."""
        return self._KINDS[self.measure]

    def _measure(self, ctx: EvalContext) -> tuple[float | None, str]:
        usage = ctx.result.usage
        if self.measure == "turns":
            return float(ctx.turns), "turns"
        if self.measure == "latency_s":
            return ctx.latency_s, "s"
        if self.measure == "tokens":
            if usage is None:
                return None, "the run reported no usage: a token limit cannot be checked"
            total = usage.total_tokens
            if total is None and (
                usage.input_tokens is not None or usage.output_tokens is not None
            ):
                total = (usage.input_tokens or 0) + (usage.output_tokens or 0)
            if total is None:
                return None, "the run reported no token counts: a token limit cannot be checked"
            return float(total), "tokens"
        if usage is None or usage.cost is None:
            return None, "the run reported no cost: a cost limit cannot be checked"
        if self.currency is not None and usage.currency not in (None, self.currency):
            return None, (
                f"the run's cost is in {usage.currency}, the limit in "
                f"{self.currency}: they cannot be compared"
            )
        return usage.cost, usage.currency or self.currency or ""

    async def evaluate(self, ctx: EvalContext, /) -> EvalScore:
        value, unit = self._measure(ctx)
        if value is None:
            return EvalScore.error(self.name, unit)
        shown = f"{value:g} {unit}".strip()
        if value <= self.maximum:
            return EvalScore.check(self.name, True, f"{shown} ≤ {self.maximum:g}")
        return EvalScore.check(self.name, False, f"{shown} > {self.maximum:g}")

    def to_spec(self) -> dict[str, JsonValue]:
        maximum: JsonValue = (
            int(self.maximum) if self.measure in ("tokens", "turns") else (self.maximum)
        )
        value: JsonValue = maximum
        if self.currency is not None:
            value = {"amount": maximum, "currency": self.currency}
        return _spec(self.kind, value, self.name, _limit_name(self.kind, self.maximum))

    @classmethod
    def from_spec(cls, kind: str, value: object, name: str | None) -> LimitCheck:
        if kind == "max_cost" and isinstance(value, Mapping):
            opts = _options(kind, value, ("amount", "currency"))
            currency = opts.get("currency")
            if currency is not None and not isinstance(currency, str):
                raise PrismConfigError("evaluator max_cost: currency must be a str")
            return max_cost(_number(kind, opts.get("amount")), currency=currency, name=name)
        number = _number(kind, value)
        if kind == "max_cost":
            return max_cost(number, name=name)
        if kind == "max_latency_s":
            return max_latency(number, name=name)
        if not float(number).is_integer():
            raise PrismConfigError(f"evaluator {kind}: expected a whole number, got {value!r}")
        return (max_tokens if kind == "max_tokens" else max_turns)(int(number), name=name)


def _number(kind: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PrismConfigError(f"evaluator {kind}: expected a finite number >= 0, got {value!r}")
    if value < 0:
        raise PrismConfigError(f"evaluator {kind}: expected a finite number >= 0, got {value!r}")
    return value


def _limit_name(kind: str, maximum: float) -> str:
    return f"{kind}({maximum:g})"


def max_cost(amount: float, *, currency: str | None = None, name: str | None = None) -> LimitCheck:
    """An evaluator: the run's reported cost (``usage.cost``) is at most ``amount``.

    A run that reported no cost is an ``"error"`` score, not a pass; so is a cost in another
    currency than ``currency`` (when given).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — ``amount`` is not a finite number >= 0.
    """
    value = _number("max_cost", amount)
    return LimitCheck(
        measure="cost",
        maximum=value,
        currency=currency,
        name=name or _limit_name("max_cost", value),
    )


def max_tokens(tokens: int, *, name: str | None = None) -> LimitCheck:
    """An evaluator: the run's total tokens (``usage.total_tokens``, else input + output) are at
    most ``tokens``; a run that reported no token counts is an ``"error"`` score.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — not an int >= 0.
    """
    if type(tokens) is not int or tokens < 0:
        raise PrismConfigError(f"max_tokens: expected an int >= 0, got {tokens!r}")
    return LimitCheck(measure="tokens", maximum=tokens, name=name or f"max_tokens({tokens})")


def max_turns(turns: int, *, name: str | None = None) -> LimitCheck:
    """An evaluator: the run took at most ``turns`` provider turns (its assistant messages).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — not an int >= 0.
    """
    if type(turns) is not int or turns < 0:
        raise PrismConfigError(f"max_turns: expected an int >= 0, got {turns!r}")
    return LimitCheck(measure="turns", maximum=turns, name=name or f"max_turns({turns})")


def max_latency(seconds: float, *, name: str | None = None) -> LimitCheck:
    """An evaluator: the run took at most ``seconds`` of wall-clock time (its file form is
    ``max_latency_s``).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — not a finite number >= 0.
    """
    value = _number("max_latency_s", seconds)
    return LimitCheck(
        measure="latency_s", maximum=value, name=name or _limit_name("max_latency_s", value)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class NoDeniedOrAmbiguousCalls:
    """No tool call of the run was denied or left without a result."""

    kind: ClassVar[str] = "no_denied_or_ambiguous_calls"
    name: str = "no_denied_or_ambiguous_calls"

    async def evaluate(self, ctx: EvalContext, /) -> EvalScore:
        result = ctx.result
        problems: list[str] = []
        if result.status == "denied":
            problems.append("the run was denied")
        elif result.status == "suspended":
            problems.append("the run waits for a tool approval")
        if result.error is not None and result.error.code == "ERR_PRISM_RUN_AMBIGUOUS":
            problems.append(f"the run stopped on an ambiguous call: {result.error.message}")
        answered = {r.tool_call_id: r for r in result.tool_results}
        for call in ctx.tool_calls:
            answer = answered.get(call.id)
            if answer is None:
                if result.status != "suspended":
                    problems.append(f"call {call.id} ({call.name}) has no result (ambiguous)")
            elif answer.error is not None and answer.error.code in DENIED_CALL_CODES:
                problems.append(f"call {call.id} ({call.name}) was denied: {answer.error.code}")
        if problems:
            return EvalScore.check(self.name, False, "; ".join(problems))
        return EvalScore.check(
            self.name, True, f"{len(ctx.tool_calls)} call(s), none denied or ambiguous"
        )

    def to_spec(self) -> dict[str, JsonValue]:
        return _spec(self.kind, True, self.name, self.kind)

    @classmethod
    def from_spec(cls, value: object, name: str | None) -> NoDeniedOrAmbiguousCalls:
        if value not in (None, True):
            raise PrismConfigError(f"evaluator {cls.kind}: expected true, got {value!r}")
        return no_denied_or_ambiguous_calls(name=name)


def no_denied_or_ambiguous_calls(*, name: str | None = None) -> NoDeniedOrAmbiguousCalls:
    """An evaluator: no tool call was denied (its result's error code is one of
    [`DENIED_CALL_CODES`][prism.evals._evaluators.DENIED_CALL_CODES]; or the run ended ``denied``), none was left without a result
    (ambiguous), and the run does not wait for an approval (``suspended``)."""
    return NoDeniedOrAmbiguousCalls(name=name or NoDeniedOrAmbiguousCalls.kind)


# --------------------------------------------------------------------------- Python callables


def import_object(path: str, label: str) -> object:
    """Import ``"module:attr"`` (``attr`` may be dotted), with the current directory first on
    ``sys.path`` as ``python -m`` has it.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — a malformed path, a module that cannot be
            imported, or a missing attribute.
    """
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise PrismConfigError(f"{label}: expected an import path MODULE:NAME, got {path!r}")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        target: object = importlib.import_module(module_name)
    except Exception as exc:
        raise PrismConfigError(
            f"{label} {path}: importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from None
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise PrismConfigError(f"{label} {path}: {module_name} has no {attr!r}") from None
    return target


@dataclass(frozen=True, slots=True, kw_only=True)
class PythonCheck:
    """A Python function of the [`EvalContext`][prism.evals.EvalContext] as an evaluator."""

    kind: ClassVar[str] = "python"
    check: PythonCheckFunction
    threshold: float = 0.5
    path: str | None = None
    name: str = "python"

    async def evaluate(self, ctx: EvalContext, /) -> EvalScore:
        try:
            value = self.check(ctx)
            if isinstance(value, Awaitable):
                value = await value
        except AssertionError as exc:
            return EvalScore.check(self.name, False, str(exc) or "assertion failed")
        return self._score(value)

    def _score(self, value: object) -> EvalScore:
        if isinstance(value, EvalScore):
            return replace(value, evaluator=self.name)
        if isinstance(value, bool):
            return EvalScore.check(self.name, value, f"{self.name} returned {value}")
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], bool):
            return EvalScore.check(self.name, value[0], str(value[1]))
        if isinstance(value, (int, float)) and math.isfinite(value):
            ok = value >= self.threshold
            return EvalScore(
                evaluator=self.name,
                outcome="pass" if ok else "fail",
                score=float(value),
                reason=f"score {value:g} {'≥' if ok else '<'} {self.threshold:g}",
            )
        if isinstance(value, Mapping) and isinstance(value.get("pass"), bool):
            score = value.get("score")
            return EvalScore(
                evaluator=self.name,
                outcome="pass" if value["pass"] else "fail",
                score=float(score)
                if isinstance(score, (int, float)) and not isinstance(score, bool)
                else None,
                reason=str(value.get("reason", "")),
            )
        return EvalScore.error(
            self.name,
            f"{self.name} returned {_short(value, 80)}, not a bool, "
            "(bool, reason), a score, a mapping with 'pass' or an EvalScore",
        )

    def to_spec(self) -> dict[str, JsonValue]:
        if self.path is None:
            raise PrismConfigError(
                f"evaluator {self.name!r}: a Python function cannot be saved; give its import "
                "path (python_evaluator('module:function'))"
            )
        return _spec(self.kind, self.path, self.name, _python_name(self.path))

    @classmethod
    def from_spec(cls, value: object, name: str | None) -> Evaluator:
        if not isinstance(value, str):
            raise PrismConfigError("evaluator python: expected an import path MODULE:FUNCTION")
        return python_evaluator(value, name=name)


def _python_name(path: str) -> str:
    return path.rpartition(":")[2]


def python_evaluator(
    check: PythonCheckFunction | str, *, threshold: float = 0.5, name: str | None = None
) -> Evaluator:
    """An evaluator from a Python function ``check(ctx)`` (sync or async).

    The function returns ``bool``; ``(bool, reason)``; a score (a number; it passes at
    ``threshold`` or above); a mapping ``{"pass": bool, "score"?, "reason"?}``; or an
    [`EvalScore`][prism.evals.EvalScore]. An ``AssertionError`` it raises is a fail with the
    assertion's message; any other exception an ``"error"`` score.

    Args:
        check: The function, or its import path ``"module:function"`` (the form a dataset file
            holds). An import path naming an evaluator object returns that object.
        threshold: The passing score of a function that returns a number.
        name: Label in reports (default: the function's name).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — not callable, or an import path that cannot be
            imported.
    """
    path = check if isinstance(check, str) else None
    target = import_object(check, "python evaluator") if isinstance(check, str) else check
    if isinstance(target, Evaluator) and not callable(target):
        return target
    if not callable(target):
        raise PrismConfigError(f"python_evaluator: {target!r} is not callable")
    label = name or (_python_name(path) if path else str(getattr(target, "__name__", "python")))
    return PythonCheck(check=target, threshold=threshold, path=path, name=label)
