"""Built-in demo tools of the ``prism`` command: ``calculator`` and ``clock``.

``calculator`` evaluates arithmetic by walking the parsed syntax tree (``ast``) and allowing only
numbers, arithmetic operators, parentheses and a few named functions and constants; ``eval`` is
never used, and sizes are bounded so that an expression such as ``9**9**9`` fails fast instead of
exhausting memory.
"""

from __future__ import annotations

import ast
import math
import operator
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from prism.types import ToolDefinition, ToolExecutionContext

__all__ = [
    "BUILTIN_TOOLS",
    "MAX_EXPRESSION_CHARS",
    "MAX_POWER_EXPONENT",
    "MAX_RESULT_BITS",
    "CalculatorError",
    "builtin_tool",
    "calculator_tool",
    "clock_tool",
    "evaluate_arithmetic",
]

MAX_EXPRESSION_CHARS = 1_000
"""Longest expression accepted, in characters."""

MAX_POWER_EXPONENT = 10_000
"""Largest exponent magnitude accepted by ``**`` / ``pow``."""

MAX_RESULT_BITS = 13_000
"""Largest integer magnitude produced, in bits (~3 900 decimal digits, below Python's 4 300-digit
int-to-text limit)."""


class CalculatorError(ValueError):
    """The expression is not allowed arithmetic, or cannot be evaluated (the message says why)."""


_Number = int | float

_BINARY: Mapping[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNARY: Mapping[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_CONSTANTS: Mapping[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


def _pow(base: _Number, exponent: _Number) -> _Number:
    if abs(exponent) > MAX_POWER_EXPONENT:
        raise CalculatorError(f"exponent too large (limit {MAX_POWER_EXPONENT})")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0:
        if max(base.bit_length(), 1) * exponent > MAX_RESULT_BITS:
            raise CalculatorError("result too large")
    try:
        result: _Number = base**exponent
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    except OverflowError:
        raise CalculatorError("result too large") from None
    if isinstance(result, complex):
        raise CalculatorError("result is not a real number")
    return result


def _sqrt(value: _Number) -> float:
    if value < 0:
        raise CalculatorError("square root of a negative number")
    return math.sqrt(value)


def _round(value: _Number, digits: int = 0) -> _Number:
    return round(value, digits) if digits else round(value)


_FUNCTIONS: Mapping[str, Callable[..., _Number]] = {
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
    "sqrt": _sqrt,
    "pow": _pow,
}


def _check_size(value: _Number) -> _Number:
    if isinstance(value, bool):
        raise CalculatorError("booleans are not numbers here")
    if isinstance(value, int) and value.bit_length() > MAX_RESULT_BITS:
        raise CalculatorError("result too large")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError("result is not finite")
    return value


def _eval(node: ast.AST) -> _Number:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return _check_size(node.value)
        raise CalculatorError(f"not a number: {node.value!r}")
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            return _check_size(_pow(left, right))
        op = _BINARY.get(type(node.op))
        if op is None:
            raise CalculatorError(f"operator not allowed: {type(node.op).__name__}")
        if isinstance(node.op, ast.Mult) and isinstance(left, int) and isinstance(right, int):
            if left.bit_length() + right.bit_length() > MAX_RESULT_BITS:
                raise CalculatorError("result too large")
        try:
            return _check_size(op(left, right))
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except OverflowError:
            raise CalculatorError("result too large") from None
    if isinstance(node, ast.UnaryOp):
        unary = _UNARY.get(type(node.op))
        if unary is None:
            raise CalculatorError(f"operator not allowed: {type(node.op).__name__}")
        return _check_size(unary(_eval(node.operand)))
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise CalculatorError(f"unknown name: {node.id}")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            raise CalculatorError("only abs, round, min, max, sqrt and pow may be called")
        if node.keywords:
            raise CalculatorError("keyword arguments are not allowed")
        args = [_eval(arg) for arg in node.args]
        try:
            return _check_size(_FUNCTIONS[node.func.id](*args))
        except TypeError as exc:
            raise CalculatorError(f"bad arguments for {node.func.id}: {exc}") from None
        except OverflowError:
            raise CalculatorError("result too large") from None
    raise CalculatorError(f"not allowed in arithmetic: {type(node).__name__}")


def evaluate_arithmetic(expression: str) -> _Number:
    """Evaluate an arithmetic expression safely (no ``eval``).

    Allowed: int and float literals, ``+ - * / // % **``, unary ``+``/``-``, parentheses, the
    constants ``pi``, ``e``, ``tau`` and the functions ``abs``, ``round``, ``min``, ``max``,
    ``sqrt``, ``pow``. A ``^`` is read as a power, as people type it.

    Args:
        expression: At most 1 000 characters.

    Returns:
        The value (``int`` when every step stayed integral, else ``float``).

    Raises:
        CalculatorError: anything else (names, attributes, strings, lambdas, comprehensions),
            syntax errors, division by zero, non-finite results, exponents above 10 000 or
            integers above 13 000 bits.
    """
    if not isinstance(expression, str):
        raise CalculatorError("expression must be a string")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    text = expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/")
    if not text:
        raise CalculatorError("empty expression")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise CalculatorError(f"not an arithmetic expression: {exc}") from None
    try:
        return _eval(tree)
    except RecursionError:
        raise CalculatorError("expression nested too deeply") from None


def _calculator(arguments: Mapping[str, Any], context: ToolExecutionContext) -> dict[str, Any]:
    expression = arguments.get("expression")
    if not isinstance(expression, str):
        raise CalculatorError("argument 'expression' (a string) is required")
    return {"expression": expression, "result": evaluate_arithmetic(expression)}


def calculator_tool() -> ToolDefinition:
    """The ``calculator`` tool: ``{"expression": str}`` → ``{"expression", "result"}``."""
    return ToolDefinition(
        name="calculator",
        execute=_calculator,
        description=(
            "Evaluate an arithmetic expression exactly, e.g. '12*7' or '(3+4)**2 / 7'. "
            "Supports + - * / // % **, parentheses, sqrt, abs, round, min, max, pi, e."
        ),
        parameters={
            "type": "object",
            "properties": {
                "expression": {"type": "string", "description": "The arithmetic expression"},
            },
            "required": ["expression"],
            "additionalProperties": False,
        },
    )


def _clock(arguments: Mapping[str, Any], context: ToolExecutionContext) -> dict[str, Any]:
    name = arguments.get("timezone")
    now = time.time()
    utc = datetime.fromtimestamp(now, UTC)
    out: dict[str, Any] = {
        "utc": utc.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "unix_time": round(now, 3),
    }
    if isinstance(name, str) and name:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            zone = None
            out["note"] = f"unknown time zone {name!r}; showing the local time"
        if zone is not None:
            out["timezone"] = name
            out["local"] = utc.astimezone(zone).isoformat(timespec="seconds")
            return out
    local = utc.astimezone()
    out["timezone"] = local.tzname() or "local"
    out["local"] = local.isoformat(timespec="seconds")
    return out


def clock_tool() -> ToolDefinition:
    """The ``clock`` tool: ``{"timezone"?: IANA name}`` → current UTC and local time.

    An unknown time zone is not an error: the local time is returned with a ``note``.
    """
    return ToolDefinition(
        name="clock",
        execute=_clock,
        description="Get the current date and time (UTC and local, or in a given IANA time zone).",
        parameters={
            "type": "object",
            "properties": {
                "timezone": {
                    "type": "string",
                    "description": "IANA time zone such as 'Europe/Paris'; default: local time",
                },
            },
            "additionalProperties": False,
        },
    )


BUILTIN_TOOLS: Mapping[str, Callable[[], ToolDefinition]] = {
    "calculator": calculator_tool,
    "clock": clock_tool,
}
"""Factories of the tools ``--tool NAME`` enables, by name."""


def builtin_tool(name: str) -> ToolDefinition:
    """Return the built-in tool ``name``.

    Raises:
        KeyError: unknown name (the message lists the available tools).
    """
    factory = BUILTIN_TOOLS.get(name)
    if factory is None:
        raise KeyError(f"unknown tool {name!r} (available: {', '.join(sorted(BUILTIN_TOOLS))})")
    return factory()
