"""Host tools: the registry, filters, permission, argument validation, dispatch and ``@tool``.

[`ToolDispatcher`][prism.tools.ToolDispatcher] is the one place a host tool runs (a run leg builds one and calls its
``dispatch`` per call); the runtime's ``LoopContext.dispatch_tool_call`` wraps it, and loops never
call ``execute`` directly. [`dispatch_tool_call()`][prism.tools.dispatch_tool_call] dispatches one call with a dispatcher built
for it.
``jsonschema`` is imported the first time a tool schema is compiled and ``pydantic`` the first
time [`tool()`][prism.tools.tool] needs it (a parameter not annotated ``int``/``float``/``str``/``bool``, or
arguments not exactly of those types); ``import prism`` imports neither.

Modules:
    registry: ``ToolRegistry``, the tools by name.
    filters: ``ToolFilter`` and narrowing a run's tools by name.
    permission: ``PermissionRequest``/``PermissionPolicy``, the host's yes/no per call.
    schema: JSON Schema validation with jsonschema (shared with structured output).
    validation: tool-argument validators and how a run picks one.
    checks: ``check_tool``, a definition's name and parameter schema checked once.
    dispatch: ``ToolDispatcher``, the guarded pipeline of a call.
    reporting: the events and ledger rows of one call, and why a call was blocked.
    execution: running ``execute`` inline or in a worker thread of prism's own pool
        (``parallel_tool_round``).
    abort_grace: how long a tool may run on after its run was aborted.
    results: converting what a tool returned into JSON data.
    decorator: ``@tool``, a typed function as a ``ToolDefinition``.
    function_tool: ``FunctionTool``, what ``@tool`` returns: a tool definition that is still the function.
    source: ``ToolSource``, tools an agent gets at run time (e.g. from an MCP server).
    _fast_schema, _fast_signature, _identity_cache: speed measures (see their docstrings).
"""

from typing import Any

from prism.tools import _fast_schema, execution, schema
from prism.tools.checks import check_tool as check_tool
from prism.tools.decorator import tool as tool
from prism.tools.dispatch import BeforeExecute as BeforeExecute
from prism.tools.dispatch import ToolDispatcher as ToolDispatcher
from prism.tools.execution import parallel_tool_round as parallel_tool_round
from prism.tools.filters import ToolFilter as ToolFilter
from prism.tools.filters import filter_tools as filter_tools
from prism.tools.filters import is_tool_allowed as is_tool_allowed
from prism.tools.filters import normalize_tool_filters as normalize_tool_filters
from prism.tools.function_tool import FunctionTool as FunctionTool
from prism.tools.permission import PermissionPolicy as PermissionPolicy
from prism.tools.permission import PermissionRequest as PermissionRequest
from prism.tools.registry import ToolRegistry as ToolRegistry
from prism.tools.registry import create_tool_registry as create_tool_registry
from prism.tools.reporting import BLOCKED_REASONS as BLOCKED_REASONS
from prism.tools.reporting import BlockedReason as BlockedReason
from prism.tools.reporting import ToolCallLedger as ToolCallLedger
from prism.tools.source import ToolSource as ToolSource
from prism.tools.source import is_tool_source as is_tool_source
from prism.tools.validation import ToolValidator as ToolValidator
from prism.tools.validation import json_schema_tool_validator as json_schema_tool_validator
from prism.tools.validation import resolve_tool_validator as resolve_tool_validator
from prism.types import ToolCallContent, ToolResult


async def dispatch_tool_call(call: ToolCallContent, /, **options: Any) -> ToolResult:
    """Dispatch one call with a dispatcher built for it: ``options`` are the keyword arguments
    of [`ToolDispatcher`][prism.tools.ToolDispatcher] (``registry`` and ``context`` are required). A run dispatches
    through one dispatcher per leg instead."""
    return await ToolDispatcher(**options).dispatch(call)


# Former private spellings, still imported by callers outside this package; new code uses the
# public names of ``prism.tools.schema``, ``prism.tools._fast_schema`` and
# ``prism.tools.execution`` instead.
_compile_schema = schema.compile_schema
_schema_errors = schema.schema_errors
_schema_error_detail = schema.schema_error_detail
_fast_checker = _fast_schema.fast_checker
_fast_schema_checker = _fast_schema.fast_schema_checker
_PARALLEL_ROUND = execution.PARALLEL_ROUND

__all__ = [
    "BLOCKED_REASONS",
    "BeforeExecute",
    "BlockedReason",
    "PermissionPolicy",
    "PermissionRequest",
    "ToolCallLedger",
    "ToolDispatcher",
    "ToolFilter",
    "ToolRegistry",
    "ToolSource",
    "ToolValidator",
    "check_tool",
    "create_tool_registry",
    "dispatch_tool_call",
    "filter_tools",
    "is_tool_allowed",
    "is_tool_source",
    "json_schema_tool_validator",
    "normalize_tool_filters",
    "parallel_tool_round",
    "resolve_tool_validator",
    "tool",
    "FunctionTool",
]
