"""Fast canonical JSON sizes of prism values (ARCH-15, RUN-15, LIM-4).

:func:`canonical_size` returns ``len(canonical_json(value.to_dict()).encode())`` for a
serializable dataclass (or plain JSON data) without building the intermediate dicts: a
dataclass's JSON is the concatenation of its sorted members, so its size is the sum of the sizes
of its parts. Plain JSON leaves (argument objects, results, metadata) are measured with the C
encoder. Anything unusual — a class with its own ``to_dict``, a value the encoder rejects — takes
the full computation, so the result is always exactly the full computation's (or raises the same
way it would).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

from prism._serde import Serializable, to_json_value

__all__ = ["canonical_size"]

_encode: Callable[[Any], str] = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
_encode_str: Callable[[str], str] = json.encoder.encode_basestring
_PLANS: dict[type, tuple[tuple[str, int], ...] | None] = {}
_BASE_TO_DICT = Serializable.to_dict


def _plan(cls: type) -> tuple[tuple[str, int], ...] | None:
    """Sorted ``(field, len('"field":'))`` of a dataclass using the generic ``to_dict``; ``None``
    when the class serialises itself."""
    try:
        return _PLANS[cls]
    except KeyError:
        pass
    plan: tuple[tuple[str, int], ...] | None
    if getattr(cls, "to_dict", None) is not _BASE_TO_DICT:
        plan = None
    else:
        names = sorted(
            f.name for f in dataclasses.fields(cls) if f.metadata.get("serialize", True)
        )
        plan = tuple((name, len(_encode_str(name).encode()) + 1) for name in names)
    _PLANS[cls] = plan
    return plan


def _str_size(text: str) -> int:
    return len(_encode_str(text).encode())


def canonical_size(value: Any) -> int:
    """UTF-8 length of ``canonical_json(to_json_value(value))`` (CON-2, CON-3).

    Raises:
        TypeError / ValueError: exactly when the full computation would.
    """
    kind = type(value)
    if kind is str:
        return _str_size(value)
    if isinstance(value, Serializable):
        plan = _plan(kind)
        if plan is None:
            return len(_encode(value.to_dict()).encode())
        total = 1  # "{"
        members = 0
        for name, key_size in plan:
            item = getattr(value, name)
            if item is None:
                continue
            total += key_size + canonical_size(item)
            members += 1
        return total + members if members else 2  # commas between members, plus "}"
    if kind is tuple or kind is list:
        count = len(value)
        if not count:
            return 2
        return 1 + count + sum(canonical_size(item) for item in value)
    if value is None or kind is bool or kind is int or kind is float:
        return len(_encode(value))
    if isinstance(value, Mapping):
        try:
            return len(_encode(value).encode())
        except TypeError:
            return len(_encode(to_json_value(value)).encode())
    return len(_encode(to_json_value(value)).encode())
