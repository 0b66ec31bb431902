"""The arguments a tool will run with: the model's (after the ``tool_call`` middleware hook),
parsed and with their defaults.

An approval shows — and binds to — exactly these arguments (see ``docs/guides/durable-runs.md``), and a
``needs_approval`` callable decides from them. For a tool made by ``@prism.tool`` they are what
the function receives, as JSON: the pydantic argument model validates the arguments (parsing
them, filling in the defaults) and dumps them back by parameter name. For any other tool they
are the arguments with the top-level ``default`` of each absent property of its ``parameters``
schema filled in.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from prism.types import ToolDefinition

__all__ = ["prepare_arguments"]


def prepare_arguments(tool: ToolDefinition, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` as ``tool`` will receive them (a new dict, or ``arguments`` itself when
    nothing changes).

    Raises:
        ValueError: the arguments do not parse (the message says why; pydantic's
            ``ValidationError`` is a ``ValueError``).
    """
    adapter = getattr(tool, "arguments_adapter", None)
    if adapter is not None:
        parsed = adapter.validate_python(arguments)
        dumped = adapter.dump_python(parsed, mode="json", by_alias=True)
        if not isinstance(dumped, dict):  # pragma: no cover - the model is an object
            raise ValueError(f"tool {tool.name}: arguments are not an object")
        return dumped if dumped != arguments else arguments
    parameters = tool.parameters
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    if not isinstance(properties, Mapping):
        return arguments
    out: dict[str, Any] | None = None
    for name, schema in properties.items():
        if name in arguments or not isinstance(schema, Mapping) or "default" not in schema:
            continue
        if out is None:
            out = dict(arguments)
        out[name] = copy.deepcopy(schema["default"])
    return arguments if out is None else out
