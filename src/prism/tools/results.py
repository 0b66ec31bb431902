"""Turning what a tool's ``execute`` returned into a ``ToolResult`` holding JSON data.

A tool may return a ``ToolResult``, any JSON value, a pydantic model (``model_dump(mode="json")``)
or a dataclass instance (``dataclasses.asdict``). Anything else cannot be stored or sent to the
model: [`NotJsonError`][prism.tools.results.NotJsonError] names its type, and the dispatcher answers the call with an
``invalid_tool_result`` error result.

A string (a value, a key, a text block's text) holding a lone surrogate (``"\\ud800"``, as a
decoded ``\\ud800`` JSON escape or a bad ``surrogateescape`` decoding produces) is JSON for
[`prism.types.is_json_value()`][prism.types.is_json_value] but has no UTF-8 form, so no store and no provider could take
it: each lone surrogate is replaced by ``U+FFFD`` here
([`prism._json.without_lone_surrogates()`][prism._json.without_lone_surrogates]), and the model reads the rest of the result.

Passes over a returned ``dict``: with a ``keep`` receiver (see [`normalise_result()`][prism.tools.results.normalise_result]) one —
[`prism._json.copy_json()`][prism._json.copy_json] checks the value, copies it and measures its canonical JSON size in
the same walk, and the receiver carries the copy and the size on (the runtime's store takes the
copy instead of copying again, and its request byte count takes the size instead of measuring
again). Without a receiver, or for a value outside the decoded-JSON types, one check
([`prism.types.is_json_value()`][prism.types.is_json_value]), and the copying and measuring happen where they are needed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeAlias, cast

from prism._json import copy_json, without_lone_surrogates
from prism.types import JsonValue, ToolCallContent, ToolResult, is_json_value

__all__ = ["KeepMeasured", "NotJsonError", "normalise_result", "to_json_value"]

KeepMeasured: TypeAlias = Callable[[Any, Any, int], object]
"""Receives ``(value, copy, size)`` for a result value checked by one walk: a private copy of it
(new dicts and lists) and ``len(canonical_json(value).encode())``."""


class NotJsonError(Exception):
    """A tool returned a value that is not JSON-compatible.

    Attributes:
        type_name: The offending value's type name.
    """

    def __init__(self, type_name: str) -> None:
        super().__init__(type_name)
        self.type_name = type_name


def to_json_value(value: object) -> JsonValue:
    """Convert a tool's return value to JSON data.

    Raises:
        NotJsonError: the value (or its converted form) is not JSON-compatible.
    """
    if value is None or type(value) in (str, int, bool):
        return cast("JsonValue", value)
    if is_json_value(value):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        converted = dump(mode="json")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        converted = dataclasses.asdict(value)
    else:
        raise NotJsonError(type(value).__name__)
    if not is_json_value(converted):
        raise NotJsonError(type(value).__name__)
    return converted


def normalise_result(
    raw: object, call: ToolCallContent, keep: KeepMeasured | None = None
) -> ToolResult:
    """Wrap what ``execute`` returned as the call's ``ToolResult``.

    A returned ``ToolResult`` keeps its fields, with ``tool_call_id`` and ``name`` replaced by the
    call's; any other value is converted by [`to_json_value()`][prism.tools.results.to_json_value]. Lone surrogates in strings,
    keys and text blocks are replaced by ``U+FFFD`` (see the module).

    Args:
        raw: What ``execute`` returned.
        call: The call it answers.
        keep: With a ``dict`` value: the one walk of [`prism._json.copy_json()`][prism._json.copy_json] checks it, and
            ``keep(value, copy, size)`` receives the copy and the size (``None``: only checked).

    Raises:
        NotJsonError: the value is not JSON-compatible.
    """
    if isinstance(raw, ToolResult):
        value = raw.value
        result: ToolResult = raw
        if type(value) is dict and keep is not None and (walked := copy_json(value)) is not None:
            keep(value, walked[0], walked[1])
        elif not (value is None or type(value) in (str, int, bool) or is_json_value(value)):
            raise NotJsonError(type(value).__name__)
        elif (clean := without_lone_surrogates(value)) is not value:
            result = dataclasses.replace(result, value=clean)
        if result.content:
            result = _clean_blocks(result)
        if result.tool_call_id != call.id or result.name != call.name:
            result = dataclasses.replace(result, tool_call_id=call.id, name=call.name)
        return result
    if type(raw) is dict and keep is not None and (walked := copy_json(raw)) is not None:
        keep(raw, walked[0], walked[1])
        return ToolResult(tool_call_id=call.id, name=call.name, value=raw)
    value = without_lone_surrogates(to_json_value(raw))
    return ToolResult(tool_call_id=call.id, name=call.name, value=value)


def _clean_blocks(result: ToolResult) -> ToolResult:
    """``result`` with the lone surrogates of its text blocks replaced (see the module)."""
    blocks = []
    changed = False
    for block in result.content:
        text = getattr(block, "text", None)
        if type(text) is str and (clean := without_lone_surrogates(text)) is not text:
            block = dataclasses.replace(block, text=clean)
            changed = True
        blocks.append(block)
    return dataclasses.replace(result, content=tuple(blocks)) if changed else result
