"""Tool-argument validators: the built-in JSON Schema validator and how a run picks its validator.

A [`ToolValidator`][prism.tools.validation.ToolValidator] looks at a call's arguments before the tool runs; ``None`` passes, a
``str`` or ``ErrorInfo`` blocks the call as ``validation_failed`` with that message. Unless a
host configures otherwise, every run uses one shared [`json_schema_tool_validator()`][prism.tools.validation.json_schema_tool_validator], which
checks the arguments against the tool's ``parameters`` schema.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeAlias

from prism.errors import PrismConfigError
from prism.tools._fast_schema import fast_schema_checker
from prism.tools.schema import compile_schema, format_errors, schema_error_detail, schema_errors
from prism.types import ErrorInfo, ToolDefinition, ToolExecutionContext

__all__ = [
    "DEFAULT_VALIDATOR",
    "ToolValidator",
    "builtin_validator_proves_valid",
    "json_schema_tool_validator",
    "resolve_tool_validator",
    "run_tool_validator",
]

ToolValidator: TypeAlias = Callable[
    [ToolDefinition, dict[str, Any], ToolExecutionContext],
    "None | str | ErrorInfo | Awaitable[None | str | ErrorInfo]",
]
"""Argument validator: ``None`` passes; a ``str``/``ErrorInfo`` blocks the call."""


def json_schema_tool_validator(
    *, missing_schema: Literal["allow", "reject"] = "allow"
) -> ToolValidator:
    """Return the built-in argument validator.

    The validator checks ``arguments`` against ``tool.parameters`` with the jsonschema class that
    ``jsonschema.validators.validator_for(parameters)`` picks, and returns ``None`` when valid,
    else ``"; "``-joined ``"<pointer>: <message>"`` items (just ``"<message>"`` at the root) sorted
    by (pointer, message). An invalid schema yields ``invalid parameters schema for tool <name>:
    <detail>``. The compiled validator is cached per schema object.

    Args:
        missing_schema: ``"allow"`` (default) skips tools without ``parameters``; ``"reject"``
            blocks them (message ``tool <name> has no parameters schema``).

    Raises:
        PrismConfigError: ``missing_schema`` is not ``"allow"``/``"reject"``.
    """
    if missing_schema not in ("allow", "reject"):
        raise PrismConfigError(
            f"missing_schema must be 'allow' or 'reject', got {missing_schema!r}"
        )
    reject = missing_schema == "reject"

    def validate(
        tool: ToolDefinition, arguments: dict[str, Any], context: ToolExecutionContext
    ) -> str | None:
        parameters = tool.parameters
        if parameters is None:
            return f"tool {tool.name} has no parameters schema" if reject else None
        fast = fast_schema_checker(parameters)
        if fast is not None and fast(arguments):
            return None  # provably valid, without jsonschema or its import
        compiled = compile_schema(parameters)
        if isinstance(compiled, str):
            return f"invalid parameters schema for tool {tool.name}: {compiled}"
        try:
            errors = schema_errors(compiled, arguments)
        except Exception as exc:
            return f"invalid parameters schema for tool {tool.name}: {schema_error_detail(exc)}"
        return format_errors(errors) if errors else None

    validate.__name__ = "json_schema_tool_validator"
    validate.__qualname__ = "json_schema_tool_validator"
    return validate


DEFAULT_VALIDATOR: ToolValidator = json_schema_tool_validator()
"""The one shared built-in validator (so its schema caches are shared by every run)."""


def resolve_tool_validator(
    agent: ToolValidator | Literal[False] | None,
    run: ToolValidator | Literal[False] | None = None,
) -> ToolValidator | Literal[False]:
    """Return the effective argument validator of a run.

    The run's value wins when not ``None``, else the agent's; ``False`` (at the winning level)
    disables validation; when both are ``None`` the result is the built-in
    [`json_schema_tool_validator()`][prism.tools.validation.json_schema_tool_validator] (one shared instance, so its schema cache is shared).

    Raises:
        PrismConfigError: a value that is not ``None``, ``False`` or callable.
    """
    for label, value in (("agent", agent), ("run", run)):
        if value is not None and value is not False and not callable(value):
            raise PrismConfigError(
                f"{label} tool_validator must be None, False or callable, got {type(value).__name__}"
            )
    chosen = run if run is not None else agent
    return DEFAULT_VALIDATOR if chosen is None else chosen


def builtin_validator_proves_valid(
    validator: object, tool: ToolDefinition, arguments: dict[str, Any]
) -> bool:
    """Whether ``validator`` is the shared built-in and the fast checker proves ``arguments``
    valid, so calling the validator can be skipped.

    This is a speed measure of dispatch: it answers, without a validator call and its await,
    exactly what the built-in validator would answer first.
    """
    if validator is not DEFAULT_VALIDATOR or tool.parameters is None:
        return False
    fast = fast_schema_checker(tool.parameters)
    return fast is not None and fast(arguments)


async def run_tool_validator(
    validator: ToolValidator,
    tool: ToolDefinition,
    arguments: dict[str, Any],
    context: ToolExecutionContext,
) -> None | str | ErrorInfo:
    """Call ``validator`` (awaiting an async answer) and return its answer.

    Raises:
        Exception: whatever the validator raises (the caller treats it as a failed validation).
    """
    outcome = validator(tool, arguments, context)
    if inspect.isawaitable(outcome):
        outcome = await outcome
    return outcome
