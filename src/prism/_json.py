"""JSON values: the ``JsonValue`` alias, the JSON-compatibility check and canonical text.

This module sits at the bottom of the package (it imports nothing from prism) so that the error
records below :mod:`prism.errors` can use ``JsonValue``. Import the names from
:mod:`prism.types`.
"""

from __future__ import annotations

import json
import math
from typing import TypeAlias, TypeGuard, Union

__all__ = ["JsonValue", "canonical_json", "is_json_value"]

JsonValue: TypeAlias = Union[  # noqa: UP007 - recursive alias needs the Union form at runtime
    None, bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"]
]
"""``None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]``."""

_JSON_MAX_DEPTH = 32


def is_json_value(value: object, *, max_depth: int = _JSON_MAX_DEPTH) -> TypeGuard[JsonValue]:
    """Return whether ``value`` is JSON-compatible; never raises.

    JSON-compatible means: built only from ``None``, ``bool``, ``int``, finite ``float``, ``str``,
    ``list``/``tuple`` and ``dict`` with ``str`` keys, nested at most ``max_depth`` containers deep
    (a scalar at the top is depth 0; each container adds 1).
    """
    try:
        return _is_json(value, max_depth)
    except RecursionError:  # pragma: no cover - bounded by max_depth in practice
        return False


def _is_json(value: object, budget: int) -> bool:
    """One walk over ``value``. The exact types of a decoded JSON document (``str``, ``int``,
    ``bool``, ``None``, finite ``float`` leaves of a ``dict`` or ``list``) are checked inline,
    without a call per leaf; containers recurse, and anything else (subclasses, tuples) takes
    :func:`_is_json_other`."""
    t = type(value)
    if t is dict:
        if budget <= 0:
            return False
        inner = budget - 1
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str and not isinstance(key, str):
                return False
            ti = type(item)
            if ti is str or ti is int or ti is bool or item is None:
                continue
            if ti is float:
                if item - item != 0.0:  # inf - inf and nan - nan are NaN
                    return False
                continue
            if not _is_json(item, inner):
                return False
        return True
    if t is list:
        if budget <= 0:
            return False
        inner = budget - 1
        for item in value:  # type: ignore[attr-defined]
            ti = type(item)
            if ti is str or ti is int or ti is bool or item is None:
                continue
            if ti is float:
                if item - item != 0.0:
                    return False
                continue
            if not _is_json(item, inner):
                return False
        return True
    if t is str or t is int or t is bool or value is None:
        return True
    return _is_json_other(value, budget)


def _is_json_other(value: object, budget: int) -> bool:
    if isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        if budget <= 0:
            return False
        return all(_is_json(item, budget - 1) for item in value)
    if isinstance(value, dict):
        if budget <= 0:
            return False
        for key, item in value.items():
            if not isinstance(key, str) or not _is_json(item, budget - 1):
                return False
        return True
    return False


def canonical_json(value: object) -> str:
    """Serialise ``value`` canonically, for fingerprints and argument hashes.

    Returns:
        ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
        allow_nan=False)``.

    Raises:
        TypeError: ``value`` holds a non-JSON type.
        ValueError: ``value`` holds ``NaN``/``inf`` or is circular.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)
