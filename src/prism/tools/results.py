"""Turning what a tool's ``execute`` returned into a ``ToolResult`` holding JSON data.

A tool may return a ``ToolResult``, any JSON value, a pydantic model (``model_dump(mode="json")``)
or a dataclass instance (``dataclasses.asdict``). Anything else cannot be stored or sent to the
model: :class:`NotJsonError` names its type, and the dispatcher answers the call with an
``invalid_tool_result`` error result.
"""

from __future__ import annotations

import dataclasses
from typing import cast

from prism.types import JsonValue, ToolCallContent, ToolResult, is_json_value

__all__ = ["NotJsonError", "normalise_result", "to_json_value"]


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


def normalise_result(raw: object, call: ToolCallContent) -> ToolResult:
    """Wrap what ``execute`` returned as the call's ``ToolResult``.

    A returned ``ToolResult`` keeps its fields, with ``tool_call_id`` and ``name`` replaced by the
    call's; any other value is converted by :func:`to_json_value`.

    Raises:
        NotJsonError: the value is not JSON-compatible.
    """
    if isinstance(raw, ToolResult):
        value = raw.value
        if not (value is None or type(value) in (str, int, bool) or is_json_value(value)):
            raise NotJsonError(type(value).__name__)
        result: ToolResult = raw
        if result.tool_call_id != call.id or result.name != call.name:
            result = dataclasses.replace(result, tool_call_id=call.id, name=call.name)
        return result
    return ToolResult(tool_call_id=call.id, name=call.name, value=to_json_value(raw))
