"""``check_tool``: a tool definition's name and parameter schema, checked once.

``create_agent`` checks every tool it is given; the runtime checks the tools a tool source
yields when a run leg opens it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from prism.errors import PrismConfigError
from prism.tools._fast_schema import fast_schema_checker
from prism.types import ToolDefinition

__all__ = ["check_tool"]


_TOOL_NAME: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_CHECKED_TOOLS_MAX: Final = 1024
_CHECKED_TOOLS: dict[int, ToolDefinition] = {}
"""Tool definitions already checked by [`check_tool()`][prism.tools.checks.check_tool] (identity; bounded, oldest first out)."""


def check_tool(tool: ToolDefinition) -> None:
    """Check a tool's name and its ``parameters`` JSON Schema once per definition.

    The name must match ``^[a-zA-Z0-9_-]{1,64}$`` (what providers accept). A schema made only of
    the keywords the fast argument checker knows is valid without ``jsonschema``; any other is
    checked with ``jsonschema``'s ``check_schema`` (imported here, on first need).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — the name or the schema is invalid (names the tool).
    """
    if _CHECKED_TOOLS.get(id(tool)) is tool:
        return
    name = tool.name
    if not isinstance(name, str) or _TOOL_NAME.fullmatch(name) is None:
        raise PrismConfigError(
            f"invalid tool name {name!r}: tool names must match ^[a-zA-Z0-9_-]{{1,64}}$"
        )
    parameters: Any = tool.parameters
    if parameters is not None:
        if not isinstance(parameters, Mapping):
            raise PrismConfigError(
                f"invalid parameters schema for tool {name}: expected a JSON Schema object, "
                f"got {type(parameters).__name__}"
            )
        if fast_schema_checker(parameters) is None:
            import jsonschema.validators

            try:
                cls = jsonschema.validators.validator_for(parameters)
                cls.check_schema(dict(parameters))
            except Exception as exc:
                detail = getattr(exc, "message", None)
                raise PrismConfigError(
                    f"invalid parameters schema for tool {name}: "
                    f"{detail if isinstance(detail, str) else exc}"
                ) from exc
    if len(_CHECKED_TOOLS) >= _CHECKED_TOOLS_MAX:
        _CHECKED_TOOLS.pop(next(iter(_CHECKED_TOOLS)))
    _CHECKED_TOOLS[id(tool)] = tool
