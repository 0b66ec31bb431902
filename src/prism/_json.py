"""JSON values: the ``JsonValue`` alias, the JSON-compatibility check and canonical text.

This module sits at the bottom of the package (it imports nothing from prism) so that the error
records below [`prism.errors`][prism.errors] can use ``JsonValue``. Import the names from
[`prism.types`][prism.types].
"""

from __future__ import annotations

import json
import json.encoder
import math
import re
from collections.abc import Callable
from typing import Any, Final, TypeAlias, TypeGuard, Union

__all__ = [
    "JsonValue",
    "canonical_json",
    "copy_json",
    "is_json_value",
    "without_lone_surrogates",
]

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
    [`_is_json_other()`][prism._json._is_json_other]."""
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


_esc: Callable[[str], str] = json.encoder.encode_basestring
"""The string escaper of ``canonical_json`` (``ensure_ascii=False``)."""

_ESCAPED_MARKED: Final = bytes(0x7F if b < 0x20 or b in b'"\\' else b for b in range(256))
"""A ``bytes.translate`` table that changes exactly the ASCII characters ``_esc`` escapes (the
control characters, ``"`` and ``\\``; to ``DEL``, which it does not escape): an ASCII text
whose encoding it leaves equal needs no escaping."""


def copy_json(value: object, max_depth: int = _JSON_MAX_DEPTH) -> tuple[Any, int] | None:
    """One walk over a decoded-JSON-shaped ``value``: check, copy and measure it.

    Handles the exact types a JSON decoder produces — ``dict`` (``str`` keys), ``list``, ``str``,
    ``int``, ``bool``, ``None`` and finite ``float`` — nested at most ``max_depth`` containers
    deep. For such a value it returns ``(copy, size)``: a copy whose dicts and lists are new
    (scalars are shared), and ``len(canonical_json(value).encode())``. Anything else (a tuple,
    a subclass, a non-finite float, a non-``str`` key, too deep) returns ``None``: the caller
    takes the general path ([`is_json_value()`][prism._json.is_json_value]), which decides whether it is JSON at all;
    so does a string holding a lone surrogate (it has no UTF-8 form, see
    [`without_lone_surrogates()`][prism._json.without_lone_surrogates]). Never raises (the depth bound keeps the recursion short).

    The walk counts the punctuation and the numbers and gathers the strings (keys and values);
    the strings are then escaped and UTF-8-measured together, in one call of the C escaper over
    their concatenation (escaping works character by character, so the escaped length of the
    concatenation is the sum of the escaped lengths). An ASCII concatenation is first checked
    with one ``bytes.translate`` (``_ESCAPED_MARKED``): when it holds nothing to escape, its
    length is its escaped length, at less than half the escaper's cost per character. The
    scalar cases are written out inside the dict and list loops rather than called per item;
    a container is copied whole (``dict.copy()``, ``list.copy()``) and only its nested
    containers replaced, its keys gathered with one ``extend``, its quotes counted once for all
    strings. Measured (``valgrind --tool=cachegrind`` instructions per call): on the realistic
    benchmark's ~1 KB tool result 187.7 k → 155.2 k against escaping each string on its own,
    on its ~200-byte arguments 31.4 k → 27.8 k; the inline scalars saved a quarter of a walk's
    time against one shared scalar helper; the translate check, the whole-container copies and
    the gathered keys and quotes 159.8 k → 132.8 k on the ~1 KB result, 29.6 k → 25.5 k on the
    arguments.
    """
    strings: list[str] = []
    walked = _copy_json(value, max_depth, strings)
    if walked is None:
        return None
    copy, size = walked
    if strings:
        joined = "".join(strings)
        size += 2 * len(strings)  # each string's quotes
        if joined.isascii() and (raw := joined.encode()).translate(_ESCAPED_MARKED) == raw:
            return copy, size + len(raw)  # nothing to escape
        text = _esc(joined)
        try:
            size += len(text.encode()) - 2  # without ``text``'s own quotes
        except UnicodeEncodeError:  # a lone surrogate
            return None
    return copy, size


_ONLY_STR: Final = frozenset({str})


def _copy_json(value: object, budget: int, strings: list[str]) -> tuple[Any, int] | None:
    """The walk of [`copy_json()`][prism._json.copy_json]: ``(copy, size without the strings' text and quotes)``,
    the strings (keys and values) appended to ``strings``.

    A container is copied whole first (``dict.copy()``, ``list.copy()``), and only its nested
    containers are replaced by their copies; the keys are gathered in one ``extend`` after the
    loop checked them, and a list of strings only is checked and gathered without a loop."""
    t = type(value)
    if t is dict:
        if budget <= 0:
            return None
        inner = budget - 1
        count = len(value)  # type: ignore[arg-type]
        if not count:
            return {}, 2
        out: dict[str, Any] = value.copy()  # type: ignore[attr-defined]
        keep = strings.append
        total = 1 + 2 * count  # braces, colons and commas
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                return None
            ti = type(item)
            if ti is str:
                keep(item)
            elif ti is int:
                total += len(repr(item))
            elif ti is bool:
                total += 4 if item else 5
            elif item is None:
                total += 4
            elif ti is float:
                if item - item != 0.0:  # inf - inf and nan - nan are NaN
                    return None
                total += len(repr(item))
            else:
                walked = _copy_json(item, inner, strings)
                if walked is None:
                    return None
                out[key], size = walked
                total += size
        strings += value  # type: ignore[arg-type]  # the keys, checked above
        return out, total
    if t is list:
        if budget <= 0:
            return None
        if not value:
            return [], 2
        total = 1 + len(value)  # type: ignore[arg-type]  # "[", commas, "]"
        if _ONLY_STR.issuperset(map(type, value)):  # type: ignore[call-overload]
            strings += value  # type: ignore[arg-type]
            return value.copy(), total  # type: ignore[attr-defined]
        inner = budget - 1
        items: list[Any] = []
        keep = strings.append
        add = items.append
        for item in value:  # type: ignore[attr-defined]
            ti = type(item)
            if ti is str:
                keep(item)
            elif ti is int:
                total += len(repr(item))
            elif ti is bool:
                total += 4 if item else 5
            elif item is None:
                total += 4
            elif ti is float:
                if item - item != 0.0:
                    return None
                total += len(repr(item))
            else:
                walked = _copy_json(item, inner, strings)
                if walked is None:
                    return None
                item, size = walked
                total += size
            add(item)
        return items, total
    if t is str:
        strings.append(value)  # type: ignore[arg-type]
        return value, 0
    if t is int:
        return value, len(repr(value))
    if t is bool:
        return value, 4 if value else 5
    if value is None:
        return None, 4
    if t is float and value - value == 0.0:  # type: ignore[operator]
        return value, len(repr(value))
    return None


def canonical_json(value: object) -> str:
    """Serialise ``value`` canonically, for fingerprints and argument hashes.

    Returns:
        ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
        allow_nan=False)``.

    Raises:
        TypeError: ``value`` holds a non-JSON type.
        ValueError: ``value`` holds ``NaN``/``inf`` or is circular.
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT_CHARACTER = "\ufffd"
"""What [`without_lone_surrogates()`][prism._json.without_lone_surrogates] puts in place of each lone surrogate."""


def without_lone_surrogates(value: Any, max_depth: int = _JSON_MAX_DEPTH) -> Any:
    """``value``, or a copy of it in which every lone surrogate (a code point in
    ``U+D800..U+DFFF``) of a string or a key is replaced by ``U+FFFD`` (the replacement
    character).

    [`is_json_value()`][prism._json.is_json_value] accepts such strings — they are Python ``str`` — but they have no UTF-8
    form: a store, a provider request or a size measure that encodes them fails. What a tool
    returns passes through here ([`prism.tools.results.normalise_result()`][prism.tools.results.normalise_result]), so the model
    reads a result with the bad characters replaced instead of the run failing. A value without
    lone surrogates is returned as it is (the same object); containers are copied only along the
    paths that change. ASCII strings cost one O(1) check each; O(size of the value) otherwise.
    Containers deeper than ``max_depth`` are left as they are ([`is_json_value()`][prism._json.is_json_value] refuses
    them anyway).
    """
    t = type(value)
    if t is str:
        if value.isascii() or _SURROGATE.search(value) is None:
            return value
        return _SURROGATE.sub(REPLACEMENT_CHARACTER, value)
    if max_depth <= 0:
        return value
    if t is dict or isinstance(value, dict):
        changed: dict[Any, Any] | None = None
        for index, (key, item) in enumerate(value.items()):
            new_key = without_lone_surrogates(key, 0) if type(key) is str else key
            new_item = without_lone_surrogates(item, max_depth - 1)
            if changed is None and (new_key is not key or new_item is not item):
                changed = dict(list(value.items())[:index])
            if changed is not None:
                changed[new_key] = new_item
        return value if changed is None else changed
    if t is list or t is tuple or isinstance(value, (list, tuple)):
        items = [without_lone_surrogates(item, max_depth - 1) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return items
    return value
