"""Tool trajectories: a run's tool calls compared with the expected ones, in three modes.

[`tool_trajectory()`][prism.evals._trajectory.tool_trajectory] is the evaluator; [`match_trajectory()`][prism.evals._trajectory.match_trajectory] the comparison (``"exact"``:
the same calls in order and nothing else; ``"in_order"``: the expected calls as a subsequence;
``"any_order"``: each expected call matched by a distinct call, a maximum bipartite matching so
that a loose expectation never takes the only call a stricter one could match).
[`expected_tools_from_json()`][prism.evals._trajectory.expected_tools_from_json] / [`expected_tools_to_json()`][prism.evals._trajectory.expected_tools_to_json] are the file form of an
expected trajectory, shared by a case's ``expected_tools`` and the evaluator's spec.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from prism._keys import reject_unknown_keys
from prism.errors import PrismConfigError
from prism.evals._model import (
    TRAJECTORY_MODES,
    ArgumentMatcher,
    EvalContext,
    EvalScore,
    ExpectedToolCall,
    ExpectedTools,
    TrajectoryMode,
)
from prism.types import JsonValue, ToolCallContent

__all__ = [
    "ToolTrajectory",
    "arguments_from_json",
    "arguments_to_json",
    "expected_tools_from_json",
    "expected_tools_to_json",
    "match_trajectory",
    "tool_trajectory",
]


def _shown(calls: Sequence[ToolCallContent]) -> str:
    return "[" + ", ".join(call.name for call in calls) + "]" if calls else "no tool calls"


def _any_order(
    expected: Sequence[ExpectedToolCall], actual: Sequence[ToolCallContent]
) -> list[int]:
    """Indexes of the expected calls left unmatched by a maximum matching (Kuhn's algorithm)."""
    owner: dict[int, int] = {}  # actual index -> expected index

    def assign(i: int, seen: set[int]) -> bool:
        for j, call in enumerate(actual):
            if j in seen or not expected[i].matches(call):
                continue
            seen.add(j)
            if j not in owner or assign(owner[j], seen):
                owner[j] = i
                return True
        return False

    return [i for i in range(len(expected)) if not assign(i, set())]


def match_trajectory(
    expected: ExpectedTools, actual: Sequence[ToolCallContent]
) -> tuple[bool, str]:
    """Compare the run's calls ``actual`` with ``expected`` in its mode.

    Returns:
        ``(matched, reason)`` — the reason names the first mismatch, or the unmatched calls.
    """
    calls = expected.calls
    if expected.mode == "exact":
        for index, (want, got) in enumerate(zip(calls, actual, strict=False)):
            if not want.matches(got):
                return False, (
                    f"call {index + 1}: expected {want}, got {got.name}"
                    f"({_arguments(got)}); calls: {_shown(actual)}"
                )
        if len(calls) != len(actual):
            return (
                False,
                f"expected {len(calls)} call(s), got {len(actual)}; calls: {_shown(actual)}",
            )
        return True, f"the {len(calls)} call(s) match exactly"
    if expected.mode == "in_order":
        position = 0
        for call in actual:
            if position < len(calls) and calls[position].matches(call):
                position += 1
        if position == len(calls):
            return True, f"the {len(calls)} expected call(s) came in order"
        return False, (
            f"expected {calls[position]} (call {position + 1} of {len(calls)}) after "
            f"the earlier ones, not found in order; calls: {_shown(actual)}"
        )
    missing = _any_order(calls, actual)
    if not missing:
        return True, f"the {len(calls)} expected call(s) were made"
    listed = ", ".join(str(calls[i]) for i in missing)
    return False, f"expected call(s) not made: {listed}; calls: {_shown(actual)}"


def _arguments(call: ToolCallContent) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in call.arguments.items())
    return text if len(text) <= 120 else text[:119] + "…"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolTrajectory:
    """The run's tool calls match an expected trajectory."""

    kind: ClassVar[str] = "tool_trajectory"
    expected: ExpectedTools | None = None
    mode: TrajectoryMode | None = None
    name: str = "tool_trajectory"

    async def evaluate(self, ctx: EvalContext, /) -> EvalScore:
        expected = self.expected if self.expected is not None else ctx.case.expected_tools
        if expected is None:
            return EvalScore.error(
                self.name,
                "no expected tool calls: give tool_trajectory(CALLS) or the case's expected_tools",
            )
        if self.mode is not None and self.mode != expected.mode:
            expected = ExpectedTools(calls=expected.calls, mode=self.mode)
        ok, reason = match_trajectory(expected, ctx.tool_calls)
        return EvalScore.check(self.name, ok, f"{expected.mode}: {reason}")

    def to_spec(self) -> dict[str, JsonValue]:
        value: JsonValue
        if self.expected is not None:
            value = expected_tools_to_json(self.expected)
        else:
            value = self.mode if self.mode is not None else True
        out: dict[str, JsonValue] = {self.kind: value}
        if self.name != _default_name(self.mode if self.expected is None else self.expected.mode):
            out["name"] = self.name
        return out

    @classmethod
    def from_spec(cls, value: object, name: str | None) -> ToolTrajectory:
        if value is None or value is True:
            return tool_trajectory(name=name)
        if isinstance(value, str):
            return tool_trajectory(mode=_mode(value), name=name)
        return tool_trajectory(
            expected_tools_from_json(value, "evaluator tool_trajectory"), name=name
        )


def _default_name(mode: TrajectoryMode | None) -> str:
    return "tool_trajectory" if mode is None else f"tool_trajectory({mode})"


def _mode(value: object) -> TrajectoryMode:
    for mode in TRAJECTORY_MODES:
        if value == mode:
            return mode
    raise PrismConfigError(
        f"trajectory mode must be one of {', '.join(TRAJECTORY_MODES)}, got {value!r}"
    )


def tool_trajectory(
    calls: ExpectedTools | Sequence[ExpectedToolCall] | None = None,
    *,
    mode: TrajectoryMode | None = None,
    name: str | None = None,
) -> ToolTrajectory:
    """An evaluator: the run's host tool calls match an expected trajectory.

    Args:
        calls: The expected calls (an ``ExpectedTools`` keeps its mode; a sequence is compared
            in ``mode``, default ``"exact"``); ``None`` compares with the case's
            ``expected_tools`` (an ``"error"`` score when the case has none).
        mode: ``"exact"``, ``"in_order"`` or ``"any_order"`` ([`TrajectoryMode`][prism.evals.TrajectoryMode]);
            with ``calls=None`` it overrides the case's mode.
        name: Label in reports (default ``tool_trajectory(MODE)``).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown mode or a call that is not an
            ``ExpectedToolCall``.
    """
    if mode is not None:
        mode = _mode(mode)
    expected: ExpectedTools | None = None
    if isinstance(calls, ExpectedTools):
        expected = calls if mode is None else ExpectedTools(calls=calls.calls, mode=mode)
    elif calls is not None:
        expected = ExpectedTools(calls=calls, mode=mode or "exact")
    shown = expected.mode if expected is not None else mode
    return ToolTrajectory(
        expected=expected,
        mode=None if expected is not None else mode,
        name=name or _default_name(shown),
    )


# --------------------------------------------------------------------------- file form


def arguments_from_json(value: object) -> object:
    """An expected argument value from its file form: a one-key object ``{"$any": true}``,
    ``{"$regex": P}`` or ``{"$contains": X}`` becomes an [`ArgumentMatcher`][prism.evals.ArgumentMatcher];
    objects and lists are read recursively; anything else is a literal.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an unknown ``$`` key, or an invalid pattern.
    """
    if isinstance(value, Mapping):
        keys = list(value)
        if len(keys) == 1 and isinstance(keys[0], str) and keys[0].startswith("$"):
            kind, inner = keys[0][1:], value[keys[0]]
            if kind == "any":
                return ArgumentMatcher("any")
            if kind in ("regex", "contains"):
                return ArgumentMatcher(kind, inner)  # type: ignore[arg-type]
            raise PrismConfigError(
                f"unknown argument matcher {keys[0]!r} (expected $any, $regex or $contains)"
            )
        return {str(k): arguments_from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [arguments_from_json(v) for v in value]
    return value


def arguments_to_json(value: object, label: str) -> JsonValue:
    """The file form of an expected argument value (the inverse of [`arguments_from_json()`][prism.evals._trajectory.arguments_from_json]).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — a Python callable matcher or a value that is not
            JSON (neither can be saved).
    """
    if isinstance(value, ArgumentMatcher):
        return value.to_json()
    if isinstance(value, Mapping):
        return {str(k): arguments_to_json(v, label) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [arguments_to_json(v, label) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise PrismConfigError(
        f"{label}: the expected argument {value!r} cannot be saved (use a JSON value or an "
        "arg_any / arg_regex / arg_contains matcher)"
    )


def expected_tools_from_json(value: object, label: str) -> ExpectedTools:
    """An expected trajectory from its file form: a list of calls (compared ``"exact"``) or
    ``{"mode": MODE, "calls": [...]}``; a call is a tool name or ``{"name", "arguments"?}``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — any other shape (the message names ``label``).
    """
    mode: TrajectoryMode = "exact"
    calls = value
    if isinstance(value, Mapping):
        reject_unknown_keys(label, value, ("mode", "calls"))
        mode = _mode(value.get("mode", "exact"))
        calls = value.get("calls")
    if not isinstance(calls, list):
        raise PrismConfigError(f"{label}: expected a list of calls or {{mode, calls}}")
    out = []
    for item in calls:
        if isinstance(item, str):
            out.append(ExpectedToolCall(item))
            continue
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise PrismConfigError(f"{label}: a call is a tool name or {{name, arguments}}")
        reject_unknown_keys(f"{label} call", item, ("name", "arguments"))
        arguments = item.get("arguments")
        if arguments is not None and not isinstance(arguments, Mapping):
            raise PrismConfigError(f"{label}: the arguments of {item['name']!r} must be an object")
        parsed = arguments_from_json(arguments) if arguments is not None else None
        out.append(ExpectedToolCall(item["name"], parsed))  # type: ignore[arg-type]
    return ExpectedTools(calls=out, mode=mode)


def expected_tools_to_json(expected: ExpectedTools) -> dict[str, JsonValue]:
    """The file form of an expected trajectory: ``{"mode", "calls": [{"name", "arguments"?}]}``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an argument that cannot be saved.
    """
    calls: list[JsonValue] = []
    for call in expected.calls:
        item: dict[str, JsonValue] = {"name": call.name}
        if call.arguments is not None:
            item["arguments"] = arguments_to_json(call.arguments, f"expected call {call.name!r}")
        calls.append(item)
    return {"mode": expected.mode, "calls": calls}
