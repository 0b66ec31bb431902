"""Speed trick: constructors and single-field copies of frozen dataclasses, generated with ``exec``.

A frozen dataclass's generated ``__init__`` (and ``dataclasses.replace``) set every field through
``object.__setattr__`` with a generic lookup, and ``replace`` runs ``__init__``/``__post_init__``
again. The functions here generate, once per class, straight-line Python that does the same
assignments from local references: :func:`frozen_builder` builds an instance (about a third
cheaper on a 12-field class), :func:`field_replacer` copies one with a single field changed. The
runtime uses them on records it builds several times per turn: each stored session entry, and
the provider request of each attempt (a copy with the attempt's abort signal set).

The plain equivalents are ``cls(**kwargs)`` and ``dataclasses.replace(value, name=new)``; this
module exists so that the speed-up can be measured against them and dropped if it is not worth
its cost in reading.
"""

from __future__ import annotations

import dataclasses
import keyword
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["field_replacer", "frozen_builder"]

_T = TypeVar("_T")


def frozen_builder(cls: type[_T]) -> Callable[..., _T]:
    """A faster keyword-only constructor for a dataclass without ``__post_init__``.

    A frozen dataclass's generated ``__init__`` sets each field with ``object.__setattr__``
    through a generic lookup; this builder does the same assignments from local references,
    about a third cheaper on a 12-field class. It accepts exactly the ``init`` fields as keywords
    (with their defaults) and sets ``init=False`` fields to their defaults, so its result equals
    ``cls(**kwargs)``. Classes it cannot mirror exactly — a ``__post_init__``, a
    ``default_factory``, an ``init=False`` field without a default, or a field name that is not an
    identifier — get ``cls`` itself.
    """
    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__"):
        return cls
    namespace: dict[str, Any] = {"_new": object.__new__, "_set": object.__setattr__, "_cls": cls}
    params: list[str] = []
    body = ["    out = _new(_cls)"]
    for f in dataclasses.fields(cls):
        name = f.name
        if not name.isidentifier() or keyword.iskeyword(name):
            return cls
        if f.default_factory is not dataclasses.MISSING:
            return cls
        if f.default is not dataclasses.MISSING:
            namespace[f"_d_{name}"] = f.default
        if f.init:
            params.append(name if f.default is dataclasses.MISSING else f"{name}=_d_{name}")
            body.append(f"    _set(out, {name!r}, {name})")
        elif f.default is dataclasses.MISSING:
            return cls
        else:
            body.append(f"    _set(out, {name!r}, _d_{name})")
    source = "\n".join([f"def build(*, {', '.join(params)}):", *body, "    return out"])
    exec(source, namespace)  # generated from the class's own field names
    builder: Callable[..., _T] = namespace["build"]
    return builder


def field_replacer(cls: type[_T], name: str) -> Callable[[_T, Any], _T]:
    """``replace(value, new)``: a copy of a valid ``cls`` instance with field ``name`` set to
    ``new`` and every other field shared.

    Unlike ``dataclasses.replace`` it does not run ``__init__``/``__post_init__`` again: the
    other fields already passed them, so use it only for a field that ``__post_init__`` neither
    checks nor converts.
    """
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    if name not in names or not all(n.isidentifier() and not keyword.iskeyword(n) for n in names):
        raise ValueError(f"{cls.__name__} has no replaceable field {name!r}")
    namespace: dict[str, Any] = {"_new": object.__new__, "_set": object.__setattr__, "_cls": cls}
    body = ["def replace(value, new):", "    out = _new(_cls)"]
    for field_name in names:
        source = "new" if field_name == name else f"value.{field_name}"
        body.append(f"    _set(out, {field_name!r}, {source})")
    body.append("    return out")
    exec("\n".join(body), namespace)  # generated from the class's own field names
    replace: Callable[[_T, Any], _T] = namespace["replace"]
    return replace
