"""A pydantic-free ``@tool`` for the common signatures (a speed measure of the decorator).

The ``@tool`` decorator builds a pydantic model of a function's parameters for its JSON Schema
and to convert the model's arguments; importing pydantic and building the model cost ~90 ms of
CPU, most of a program's first use of prism. For parameters annotated ``int``, ``float``,
``str`` or ``bool``, each optionally ``| None``, with no default or a JSON scalar default, this
module writes the schema pydantic would generate (same keys in the same order: pydantic sorts
keys, titles are ``name.title()`` with ``_`` as spaces) and converts arguments that are
certainly valid: a ``dict`` with only known keys, every required one present, each value of
exactly the annotated type (or ``None`` for an optional, or an ``int`` within ±2**53 for a
``float``, which pydantic turns into the same ``float``). Any other input gets ``None`` here,
and the decorator hands it to the pydantic model it builds then — so conversions and error
messages are pydantic's by construction. Any other signature takes the pydantic path at
decoration.

Measured worth: ``benchmarks/bench_startup.py --runs 7``, first use (one ``@prism.tool`` ``add(a:
int, b: int)``, one run on the mock provider), against the same tree with the fast path switched
off, 4 interleaved rounds on a busy 2-core machine: 247-260 → 156-167 ms of CPU (median of the
rounds 254 → 162), 394 → 271 modules loaded. Warm, per tool: decorating ``add`` 1195 → 69 µs;
``execute({"a": 1, "b": 2})`` 3.2 → 1.3 µs.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, Final

__all__ = ["FastSignature", "fast_signature"]

_SCALARS: Final[dict[Any, str]] = {int: "integer", float: "number", str: "string", bool: "boolean"}
_DEFAULT_TYPES: Final = frozenset({int, str, bool, type(None)})
_EXACT_FLOAT: Final = 2**53
_REQUIRED: Final = object()

Convert = Callable[[Any], "dict[str, Any] | None"]
"""``convert(arguments)``: the keyword arguments, or ``None`` when pydantic must decide."""


class FastSignature:
    """A signature inside the subset: ``schema``, the ``parameters`` pydantic would generate,
    and ``convert``, the keyword arguments of certainly valid arguments (else ``None``)."""

    __slots__ = ("convert", "schema")

    def __init__(self, schema: dict[str, Any], convert: Convert) -> None:
        self.schema = schema
        self.convert = convert


def fast_signature(
    model_name: str, params: Sequence[tuple[str, Any, Any, str | None]]
) -> FastSignature | None:
    """The schema and converter of ``params``, or ``None`` outside the subset.

    Args:
        model_name: The title pydantic would give the arguments model.
        params: ``(name, annotation, default, description)`` per schema parameter in order;
            ``default`` is ``...`` for a required parameter, ``description`` ``None`` when absent.
    """
    fields: list[tuple[str, type, bool, Any]] = []
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, annotation, default, description in params:
        scalar = _scalar_of(annotation)
        if scalar is None:
            return None
        kind, optional = scalar
        prop: dict[str, Any] = {}
        if optional:  # pydantic writes the null member last, however the union is spelt
            prop["anyOf"] = [{"type": _SCALARS[kind]}, {"type": "null"}]
        if default is ...:
            required.append(name)
        elif type(default) in _DEFAULT_TYPES or (type(default) is float and math.isfinite(default)):
            prop["default"] = default
        else:
            return None
        if description is not None:
            prop["description"] = description
        prop["title"] = name.title().replace("_", " ").strip()
        if not optional:
            prop["type"] = _SCALARS[kind]
        properties[name] = prop
        fields.append((name, kind, optional, _REQUIRED if default is ... else default))
    schema: dict[str, Any] = {"additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = required
    schema["title"] = model_name
    schema["type"] = "object"
    return FastSignature(schema, _converter(tuple(fields)))


def _scalar_of(annotation: Any) -> tuple[type, bool] | None:
    """``(scalar type, optional)`` of ``X`` or ``X | None`` with ``X`` a subset scalar."""
    if type(annotation) is type and annotation in _SCALARS:
        return annotation, False
    if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
        return None
    args = typing.get_args(annotation)
    if len(args) != 2 or type(None) not in args:
        return None
    kind = args[1] if args[0] is type(None) else args[0]
    return (kind, True) if type(kind) is type and kind in _SCALARS else None


def _converter(fields: tuple[tuple[str, type, bool, Any], ...]) -> Convert:
    names = frozenset(name for name, _, _, _ in fields)

    def convert(arguments: Any) -> dict[str, Any] | None:
        if type(arguments) is not dict or not arguments.keys() <= names:
            return None
        kwargs: dict[str, Any] = {}
        for name, kind, optional, default in fields:
            if name in arguments:
                value = arguments[name]
                if type(value) is kind or (optional and value is None):
                    kwargs[name] = value
                elif (
                    kind is float and type(value) is int and -_EXACT_FLOAT <= value <= _EXACT_FLOAT
                ):
                    kwargs[name] = float(value)
                else:
                    return None
            elif default is _REQUIRED:
                return None
            else:
                kwargs[name] = default
        return kwargs

    return convert
