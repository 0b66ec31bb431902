"""Tool registry, filters, the guarded dispatch pipeline and the ``tool`` decorator (TOOL-1..14).

:func:`dispatch_tool_call` is the one place a host tool runs: limits, middleware, guardrails,
lookup, filters, argument checks, permission, validation, the pre-execution hook, events, ledger
rows, abort grace and result normalisation all happen here, in the order TOOL-3 fixes. The
runtime's ``LoopContext.dispatch_tool_call`` wraps it (TOOL-9); loops never call ``execute``
directly (GRD-8).

``jsonschema`` is imported the first time a tool schema is compiled and ``pydantic`` the first time
a function is decorated with :func:`tool`; ``import prism`` imports neither (ARCH-5).
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import inspect
import re
import threading
import time
import types
import typing
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, overload

from prism._serde import Serializable
from prism._util import new_id, now_iso
from prism.errors import (
    ERR_PRISM_DELEGATION_SUSPENDED,
    AgentLoopStateError,
    AgentRunSuspended,
    GuardrailError,
    PrismConfigError,
    RunLimitExceeded,
)
from prism.events import (
    ToolExecutionBlockedEvent,
    ToolExecutionErrorEvent,
    ToolExecutionFinishedEvent,
    ToolExecutionMetadata,
    ToolExecutionProgressEvent,
    ToolExecutionStartedEvent,
)
from prism.guardrails import GuardrailContext, Guardrails, run_guardrails
from prism.ledger import ToolCallRecord
from prism.limits import RunLimitTracker
from prism.middleware import MiddlewareRegistry
from prism.redaction import SecretRedactor, error_to_error_info
from prism.types import (
    ErrorInfo,
    GuardrailRecord,
    JsonValue,
    OwnershipScope,
    ToolCallContent,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    is_json_value,
)

__all__ = [
    "BLOCKED_REASONS",
    "BeforeExecute",
    "BlockedReason",
    "PermissionPolicy",
    "PermissionRequest",
    "ToolCallLedger",
    "ToolFilter",
    "ToolRegistry",
    "ToolValidator",
    "create_tool_registry",
    "dispatch_tool_call",
    "filter_tools",
    "is_tool_allowed",
    "json_schema_tool_validator",
    "normalize_tool_filters",
    "parallel_tool_round",
    "resolve_tool_validator",
    "tool",
]

# =========================================================================== registry (TOOL-1)


class ToolRegistry:
    """Tools by name, in registration order (TOOL-1).

    Args:
        tools: Initial tools (``ToolDefinition`` objects, or another registry's tools).
        duplicate: ``"error"`` raises on a second tool with the same name; ``"replace"`` keeps the
            last registration in the first registration's position.

    Raises:
        PrismConfigError: ``duplicate`` is not ``"error"``/``"replace"``; a tool is not a
            ``ToolDefinition`` or has an empty name; a duplicate name under ``"error"``
            (message ``Duplicate tool: <name>``). Code ``ERR_PRISM_CONFIG``.
    """

    __slots__ = ("_cache", "_duplicate", "_tools")

    def __init__(
        self,
        tools: Iterable[ToolDefinition] = (),
        *,
        duplicate: Literal["error", "replace"] = "error",
    ) -> None:
        if duplicate not in ("error", "replace"):
            raise PrismConfigError(
                f"duplicate must be 'error' or 'replace', got {duplicate!r}"
            )
        self._duplicate = duplicate
        self._tools: dict[str, ToolDefinition] = {}
        self._cache: tuple[ToolDefinition, ...] | None = ()
        for t in tools.list() if isinstance(tools, ToolRegistry) else tools:
            self.register(t)

    def register(self, tool: ToolDefinition) -> None:
        """Add ``tool`` (see the class docstring for duplicates).

        Raises:
            PrismConfigError: not a ``ToolDefinition``, empty name, or a duplicate under
                ``duplicate="error"``.
        """
        if not isinstance(tool, ToolDefinition):
            raise PrismConfigError(
                f"tools must be ToolDefinition objects, got {type(tool).__name__}"
            )
        name = tool.name
        if not isinstance(name, str) or not name:
            raise PrismConfigError("tool name must be a non-empty string")
        if name in self._tools and self._duplicate == "error":
            raise PrismConfigError(f"Duplicate tool: {name}")
        self._tools[name] = tool  # a replaced key keeps its first position
        self._cache = None

    def get(self, name: str) -> ToolDefinition | None:
        """Return the tool named ``name``, or ``None``."""
        return self._tools.get(name)

    def resolve(self, name: str) -> ToolDefinition:
        """Return the tool named ``name``.

        Raises:
            KeyError: message ``Unknown tool: <name>``.
        """
        found = self._tools.get(name)
        if found is None:
            raise KeyError(f"Unknown tool: {name}")
        return found

    def list(self) -> builtins.list[ToolDefinition]:
        """Return the tools in registration order (a new list)."""
        return builtins.list(self.tools)

    @property
    def tools(self) -> tuple[ToolDefinition, ...]:
        """The tools in registration order, as a cached tuple (cheap to read per turn)."""
        cache = self._cache
        if cache is None:
            cache = self._cache = tuple(self._tools.values())
        return cache

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[ToolDefinition]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolRegistry({builtins.list(self._tools)!r})"


def create_tool_registry(
    tools: Iterable[ToolDefinition] | ToolRegistry = (),
    *,
    duplicate: Literal["error", "replace"] = "error",
) -> ToolRegistry:
    """Build a :class:`ToolRegistry` (TOOL-1).

    Args:
        tools: Tools to register, in order (a registry is copied).
        duplicate: ``"error"`` (default) or ``"replace"``.

    Raises:
        PrismConfigError: see :class:`ToolRegistry` (e.g. ``Duplicate tool: <name>``).
    """
    return ToolRegistry(tools, duplicate=duplicate)


# =========================================================================== filters (TOOL-2, TOOL-13)


def _names(value: Any, label: str) -> tuple[str, ...]:
    if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
        return value
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise PrismConfigError(f"ToolFilter.{label} must be a sequence of tool names")
    items = tuple(value)
    if not all(isinstance(v, str) for v in items):
        raise PrismConfigError(f"ToolFilter.{label} must contain only strings")
    return items


@dataclass(frozen=True, slots=True)
class ToolFilter(Serializable):
    """Narrow the tools of a run by name (TOOL-2).

    Raises:
        PrismConfigError: ``allow``/``deny`` is a bare string or holds non-strings.
    """

    allow: tuple[str, ...] = ()
    """When non-empty, only these names pass this filter."""
    deny: tuple[str, ...] = ()
    """Names that never pass."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "allow", _names(self.allow, "allow"))
        object.__setattr__(self, "deny", _names(self.deny, "deny"))

    def allows(self, name: str) -> bool:
        """Whether ``name`` passes this filter."""
        return name not in self.deny and (not self.allow or name in self.allow)


def normalize_tool_filters(
    filters: ToolFilter | Sequence[ToolFilter] | None,
) -> tuple[ToolFilter, ...]:
    """Return ``filters`` as a tuple (``None`` → ``()``) (TOOL-13, RUN-1).

    Raises:
        PrismConfigError: not a ``ToolFilter`` or a sequence of them.
    """
    if filters is None:
        return ()
    if isinstance(filters, ToolFilter):
        return (filters,)
    if isinstance(filters, (str, bytes, Mapping)) or not isinstance(filters, Sequence):
        raise PrismConfigError(
            f"tool_filter must be a ToolFilter or a sequence of them, got {type(filters).__name__}"
        )
    out = tuple(filters)
    for f in out:
        if not isinstance(f, ToolFilter):
            raise PrismConfigError(
                f"tool_filter must be a ToolFilter or a sequence of them, got {type(f).__name__}"
            )
    return out


def is_tool_allowed(name: str, filters: ToolFilter | Sequence[ToolFilter] | None) -> bool:
    """Whether ``name`` passes every filter (TOOL-2): no filter denies it and every filter with a
    non-empty ``allow`` lists it."""
    if filters is None:
        return True
    if isinstance(filters, ToolFilter):
        return filters.allows(name)
    for f in filters:
        if not f.allows(name):
            return False
    return True


def filter_tools(
    tools: Iterable[ToolDefinition] | ToolRegistry,
    filters: ToolFilter | Sequence[ToolFilter] | None,
) -> tuple[ToolDefinition, ...]:
    """Return the tools that pass every filter, in their original order (TOOL-2, TOOL-13).

    Args:
        tools: Tools or a registry.
        filters: One ``ToolFilter``, a sequence of them (all must pass), or ``None`` (keep all).
    """
    items = tools.tools if isinstance(tools, ToolRegistry) else tuple(tools)
    if not filters:
        return items
    normalized = normalize_tool_filters(filters)
    return tuple(t for t in items if is_tool_allowed(t.name, normalized))


# =========================================================================== permission (TOOL-7)


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionRequest(Serializable):
    """What a :data:`PermissionPolicy` is asked (TOOL-7)."""

    kind: Literal["tool"] = "tool"
    """Always ``"tool"``."""
    action: Literal["execute"] = "execute"
    """Always ``"execute"``."""
    target: str
    """The tool name."""
    metadata: Mapping[str, Any]
    """The run metadata."""
    tool_call_id: str
    """The call's id."""
    arguments: Mapping[str, Any]
    """The call's arguments after the ``tool_call`` middleware hook."""


PermissionPolicy: TypeAlias = Callable[[PermissionRequest], "bool | None | Awaitable[bool | None]"]
"""``True``/``None`` allow, ``False`` denies, an exception denies with its message (TOOL-7)."""

ToolValidator: TypeAlias = Callable[
    [ToolDefinition, dict[str, Any], ToolExecutionContext],
    "None | str | ErrorInfo | Awaitable[None | str | ErrorInfo]",
]
"""Argument validator (TOOL-6): ``None`` passes; a ``str``/``ErrorInfo`` blocks the call."""

BeforeExecute: TypeAlias = Callable[
    [ToolCallContent, ToolDefinition, ToolExecutionContext], "Any | Awaitable[Any]"
]
"""Pre-execution hook (TOOL-3 step 9; the runtime's durable hook, APR-4/APR-9)."""

ToolCallLedger: TypeAlias = Callable[[ToolCallRecord], "Any | Awaitable[Any]"]
"""Receives each ``ToolCallRecord`` row (TOOL-8); an object with ``append_tool_call`` works too."""

BlockedReason: TypeAlias = Literal[
    "guardrail_blocked",
    "unknown_tool",
    "tool_denied",
    "invalid_arguments",
    "permission_denied",
    "validation_failed",
    "execution_denied",
]
"""Why a call was blocked (TOOL-4)."""

BLOCKED_REASONS: frozenset[str] = frozenset(
    {
        "guardrail_blocked",
        "unknown_tool",
        "tool_denied",
        "invalid_arguments",
        "permission_denied",
        "validation_failed",
        "execution_denied",
    }
)
"""Every :data:`BlockedReason` (TOOL-4)."""


def _is_suspension_signal(exc: BaseException) -> bool:
    """Whether ``exc`` is a run suspension signal (POOL-6).

    True for ``AgentRunSuspended``, ``AgentLoopStateError`` and any exception whose ``code`` is
    ``"ERR_PRISM_DELEGATION_SUSPENDED"`` or starts with ``"ERR_PRISM_LOOP_"``.
    """
    if isinstance(exc, (AgentRunSuspended, AgentLoopStateError)):
        return True
    code = getattr(exc, "code", None)
    return isinstance(code, str) and (
        code == ERR_PRISM_DELEGATION_SUSPENDED or code.startswith("ERR_PRISM_LOOP_")
    )


# =========================================================================== JSON Schema (TOOL-6)

_jsonschema_validators: Any = None
_COMPILED_MAX = 1024
# id(schema) -> (schema, compiled validator or the schema error detail)
_COMPILED: dict[int, tuple[object, Any]] = {}


def _jsonschema() -> Any:
    global _jsonschema_validators
    if _jsonschema_validators is None:
        import jsonschema.validators

        _jsonschema_validators = jsonschema.validators
    return _jsonschema_validators


def _compile_schema(schema: Mapping[str, Any]) -> Any:
    """Return a checked jsonschema validator for ``schema`` or a ``str`` error detail (cached).

    The cache is keyed by the schema object (identity), so it is built once per tool and schema,
    not per call; a schema mutated in place after its first use keeps its first compilation.
    """
    key = id(schema)
    hit = _COMPILED.get(key)
    if hit is not None and hit[0] is schema:
        return hit[1]
    validators = _jsonschema()
    compiled: Any
    try:
        cls = validators.validator_for(schema)
        cls.check_schema(schema)
        compiled = cls(schema)
    except Exception as exc:
        compiled = _schema_error_detail(exc)
    if len(_COMPILED) >= _COMPILED_MAX:
        _COMPILED.pop(next(iter(_COMPILED)))
    _COMPILED[key] = (schema, compiled)
    return compiled


def _schema_error_detail(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    return str(message) if isinstance(message, str) else str(exc)


def _pointer(path: Iterable[Any]) -> str:
    """RFC 6901 pointer of a jsonschema ``absolute_path`` (``""`` at the root)."""
    out = ""
    for part in path:
        out += "/" + str(part).replace("~", "~0").replace("/", "~1")
    return out


def _schema_errors(compiled: Any, instance: Any) -> builtins.list[tuple[str, str]]:
    """Return ``(pointer, message)`` for every error of ``instance``, sorted (TOOL-6, SO-8).

    An instance that the schema's fast checker (:func:`_fast_checker`) proves valid returns
    ``[]`` without running jsonschema; everything else — every invalid instance included — is
    checked by jsonschema, so the errors are always jsonschema's.

    Args:
        compiled: A validator from :func:`_compile_schema`.
        instance: The value to check.

    Raises:
        Exception: whatever jsonschema raises while resolving the schema (e.g. an unresolvable
            ``$ref``); callers report it as an invalid schema.
    """
    fast = _fast_checker(compiled)
    if fast is not None and fast(instance):
        return []
    errors = [(_pointer(e.absolute_path), str(e.message)) for e in compiled.iter_errors(instance)]
    errors.sort()
    return errors


# --------------------------------------------------------------------------- fast valid path
#
# Tool arguments are validated on every call (TOOL-6), and jsonschema's general machinery costs
# tens of microseconds even for ``{"type": "object", "properties": {"i": {"type": "integer"}}}``.
# For schemas made only of the keywords below, a checker compiled once per schema answers
# "certainly valid" with plain type tests. It never answers "invalid": any instance it cannot
# prove valid (a float for "integer", a tuple for "array", ...) goes to jsonschema, so results and
# error messages are exactly jsonschema's. Schemas with any other keyword (``$ref``, ``enum``,
# ``pattern``, ``oneOf``, ...) get no fast checker.
#
# Two entry points: :func:`_fast_checker` for a compiled validator (jsonschema already checked
# the schema; drafts 6 and later), and :func:`_fast_schema_checker` for a raw schema without
# ``$schema``/``$id`` — it also checks every keyword value against the metaschema rules that
# apply to the subset (types, unique ``required``/``type`` items, non-negative lengths), so a
# schema it accepts is one jsonschema's ``check_schema`` accepts, and valid arguments need no
# jsonschema at all (nor its import, ARCH-5).

_FastCheck = Callable[[Any], bool]
_FAST_VALIDATORS = frozenset(
    {"Draft202012Validator", "Draft201909Validator", "Draft7Validator", "Draft6Validator"}
)
# keywords that never fail an instance (``format`` asserts nothing without a format checker,
# which the compiled validators do not have), with the metaschema type of their value
_FAST_ANNOTATIONS: dict[str, Callable[[Any], bool]] = {
    "title": lambda v: isinstance(v, str),
    "description": lambda v: isinstance(v, str),
    "$comment": lambda v: isinstance(v, str),
    "format": lambda v: isinstance(v, str),
    "default": lambda v: True,
    "examples": lambda v: type(v) is builtins.list,
    "deprecated": lambda v: type(v) is bool,
    "readOnly": lambda v: type(v) is bool,
    "writeOnly": lambda v: type(v) is bool,
}
_FAST_COMPILED_ONLY = frozenset({"$schema", "$id"})
_FAST_SCALARS: dict[str, _FastCheck] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) is int or type(v) is float,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
}
_SIMPLE_TYPES = frozenset({*_FAST_SCALARS, "object", "array"})
_FAST_BY_ID: dict[int, tuple[object, _FastCheck | None]] = {}
_FAST_SCHEMA_BY_ID: dict[int, tuple[object, _FastCheck | None]] = {}


def _fast_checker(compiled: Any) -> _FastCheck | None:
    """The cached fast checker of a compiled validator, or ``None`` (see above)."""
    key = id(compiled)
    hit = _FAST_BY_ID.get(key)
    if hit is not None and hit[0] is compiled:
        return hit[1]
    checker: _FastCheck | None = None
    if type(compiled).__name__ in _FAST_VALIDATORS:
        checker = _fast_compile(compiled.schema, compiled=True)
    _fast_cache(_FAST_BY_ID, key, compiled, checker)
    return checker


def _fast_schema_checker(schema: Any) -> _FastCheck | None:
    """The cached fast checker of a raw schema known valid without jsonschema, or ``None``."""
    key = id(schema)
    hit = _FAST_SCHEMA_BY_ID.get(key)
    if hit is not None and hit[0] is schema:
        return hit[1]
    checker = _fast_compile(schema, compiled=False)
    _fast_cache(_FAST_SCHEMA_BY_ID, key, schema, checker)
    return checker


def _fast_cache(
    cache: dict[int, tuple[object, _FastCheck | None]],
    key: int,
    owner: object,
    checker: _FastCheck | None,
) -> None:
    if len(cache) >= _COMPILED_MAX:
        cache.pop(next(iter(cache)))
    cache[key] = (owner, checker)


def _fast_compile(schema: Any, *, compiled: bool) -> _FastCheck | None:
    try:
        return _fast_node(schema, compiled)
    except Exception:  # an odd schema simply takes the full path
        return None


def _number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _count(value: Any) -> bool:
    """A metaschema ``nonNegativeInteger`` (as a plain ``int``)."""
    return type(value) is int and value >= 0


def _unique_strings(value: Any) -> bool:
    return (
        type(value) is builtins.list
        and all(isinstance(v, str) for v in value)
        and len(set(value)) == len(value)
    )


def _fast_node(schema: Any, compiled: bool) -> _FastCheck | None:
    """Compile one (sub)schema; ``None`` when it is outside the fast subset."""
    if schema is True:
        return lambda v: True
    if type(schema) is not dict:
        return None
    rest: dict[str, Any] = {}
    for key, value in schema.items():
        check_annotation = _FAST_ANNOTATIONS.get(key)
        if check_annotation is not None:
            if not check_annotation(value):
                return None
        elif compiled and key in _FAST_COMPILED_ONLY:
            continue
        else:
            rest[key] = value
    checks: builtins.list[_FastCheck] = []
    any_of = rest.pop("anyOf", None)
    if any_of is not None:
        if type(any_of) is not builtins.list or not any_of:
            return None
        branches = [_fast_node(b, compiled) for b in any_of]
        alternatives = tuple(b for b in branches if b is not None)
        if len(alternatives) != len(branches):
            return None
        checks.append(lambda v: any(b(v) for b in alternatives))
    if "type" in rest:
        typed = _fast_typed(rest, compiled)
        if typed is None:
            return None
        checks.append(typed)
    elif rest:
        return None  # keywords without a "type" apply to several kinds: not in the subset
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    first, second = checks
    return lambda v: first(v) and second(v)


def _fast_typed(rest: dict[str, Any], compiled: bool) -> _FastCheck | None:
    """``type`` (a name or a list of names) with the keywords of those types."""
    names = rest.pop("type")
    if isinstance(names, str):
        names = [names]
    if not _unique_strings(names) or not names or not set(names) <= _SIMPLE_TYPES:
        return None
    string_kw: dict[str, Any] = {k: rest.pop(k) for k in ("minLength", "maxLength") if k in rest}
    number_kw: dict[str, Any] = {
        k: rest.pop(k)
        for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
        if k in rest
    }
    object_kw: dict[str, Any] = {
        k: rest.pop(k) for k in ("properties", "required", "additionalProperties") if k in rest
    }
    array_kw: dict[str, Any] = {
        k: rest.pop(k) for k in ("items", "minItems", "maxItems") if k in rest
    }
    if rest:
        return None
    counts = [*string_kw.values(), *(v for k, v in array_kw.items() if k != "items")]
    if not all(_count(x) for x in counts) or not all(_number(x) for x in number_kw.values()):
        return None
    # keywords of types not listed still must be well-formed (checked above / below), and
    # apply to nothing
    obj = _fast_object(object_kw, compiled)
    arr = _fast_array(array_kw, compiled)
    if obj is None or arr is None:
        return None
    checks: builtins.list[_FastCheck] = []
    for name in names:
        if name == "string" and string_kw:
            checks.append(_fast_length(string_kw.get("minLength", 0), string_kw.get("maxLength")))
        elif name in ("integer", "number") and number_kw:
            checks.append(_fast_bounds(_FAST_SCALARS[name], number_kw))
        elif name == "object":
            checks.append(obj)
        elif name == "array":
            checks.append(arr)
        else:
            checks.append(_FAST_SCALARS[name])
    if len(checks) == 1:
        return checks[0]
    alternatives = tuple(checks)
    return lambda v: any(c(v) for c in alternatives)


def _fast_length(lo: int, hi: int | None) -> _FastCheck:
    def check(v: Any) -> bool:
        return isinstance(v, str) and lo <= len(v) and (hi is None or len(v) <= hi)

    return check


def _fast_bounds(kind: _FastCheck, kw: dict[str, Any]) -> _FastCheck:
    lo, hi = kw.get("minimum"), kw.get("maximum")
    xlo, xhi = kw.get("exclusiveMinimum"), kw.get("exclusiveMaximum")

    def check(v: Any) -> bool:
        return (
            kind(v)
            and (lo is None or v >= lo)
            and (hi is None or v <= hi)
            and (xlo is None or v > xlo)
            and (xhi is None or v < xhi)
        )

    return check


def _fast_object(kw: dict[str, Any], compiled: bool) -> _FastCheck | None:
    properties = kw.get("properties", {})
    required = kw.get("required", [])
    additional = kw.get("additionalProperties", True)
    if type(properties) is not dict or not _unique_strings(required) or type(additional) is not bool:
        return None
    subs: dict[str, _FastCheck] = {}
    for prop, sub in properties.items():
        check = _fast_node(sub, compiled) if isinstance(prop, str) else None
        if check is None:
            return None
        subs[prop] = check
    needed = tuple(required)
    closed = not additional

    def check_object(v: Any) -> bool:
        if type(v) is not dict:
            return False
        for prop in needed:
            if prop not in v:
                return False
        for prop, item in v.items():
            sub = subs.get(prop)
            if sub is None:
                if closed:
                    return False
            elif not sub(item):
                return False
        return True

    return check_object


def _fast_array(kw: dict[str, Any], compiled: bool) -> _FastCheck | None:
    item_check = _fast_node(kw.get("items", True), compiled)
    if item_check is None:
        return None
    lo = kw.get("minItems", 0)
    hi = kw.get("maxItems")

    def check_array(v: Any) -> bool:
        return (
            type(v) is builtins.list
            and lo <= len(v)
            and (hi is None or len(v) <= hi)
            and all(item_check(x) for x in v)
        )

    return check_array


def _format_errors(errors: Iterable[tuple[str, str]]) -> str:
    return "; ".join(f"{p}: {m}" if p else m for p, m in errors)


def json_schema_tool_validator(
    *, missing_schema: Literal["allow", "reject"] = "allow"
) -> ToolValidator:
    """Return the built-in argument validator (TOOL-6).

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
        fast = _fast_schema_checker(parameters)
        if fast is not None and fast(arguments):
            return None  # provably valid, without jsonschema (ARCH-15)
        compiled = _compile_schema(parameters)
        if isinstance(compiled, str):
            return f"invalid parameters schema for tool {tool.name}: {compiled}"
        try:
            errors = _schema_errors(compiled, arguments)
        except Exception as exc:
            return f"invalid parameters schema for tool {tool.name}: {_schema_error_detail(exc)}"
        return _format_errors(errors) if errors else None

    validate.__name__ = "json_schema_tool_validator"
    validate.__qualname__ = "json_schema_tool_validator"
    return validate


_DEFAULT_VALIDATOR = json_schema_tool_validator()
_BUILTIN_VALIDATOR = _DEFAULT_VALIDATOR  # identity of the shared built-in (fast path in dispatch)


def resolve_tool_validator(
    agent: ToolValidator | Literal[False] | None,
    run: ToolValidator | Literal[False] | None = None,
) -> ToolValidator | Literal[False]:
    """Return the effective argument validator of a run (TOOL-6, RUN-6).

    The run's value wins when not ``None``, else the agent's; ``False`` (at the winning level)
    disables validation; when both are ``None`` the result is the built-in
    :func:`json_schema_tool_validator` (one shared instance, so its schema cache is shared).

    Raises:
        PrismConfigError: a value that is not ``None``, ``False`` or callable (RUN-1).
    """
    for label, value in (("agent", agent), ("run", run)):
        if value is not None and value is not False and not callable(value):
            raise PrismConfigError(
                f"{label} tool_validator must be None, False or callable, got {type(value).__name__}"
            )
    chosen = run if run is not None else agent
    return _DEFAULT_VALIDATOR if chosen is None else chosen

# =========================================================================== sync tools (TOOL-11)

_PARALLEL_ROUND: ContextVar[bool] = ContextVar("prism_parallel_tool_round", default=False)


@contextmanager
def parallel_tool_round() -> Iterator[None]:
    """Mark dispatches started in this context as part of a parallel round (TOOL-11).

    Inside it (and in tasks created inside it, which copy the context), :func:`dispatch_tool_call`
    runs a sync ``execute`` in a worker thread (prism's own pool, which always has a free thread;
    the context is copied as ``asyncio.to_thread`` does) instead of inline, unless its
    ``sync_in_thread`` argument says otherwise. The tool-round dispatcher enters it around the
    creation of its parallel workers (POOL-4).
    """
    token = _PARALLEL_ROUND.set(True)
    try:
        yield
    finally:
        _PARALLEL_ROUND.reset(token)


class _ToolThreads:
    """The worker threads of sync tools in parallel rounds (TOOL-11).

    ``asyncio.to_thread`` uses the loop's default executor, whose ``min(32, cpu + 4)`` workers make
    a round of more blocking tools than that wait for a free thread (6 on 2 cores: 8 × 50 ms take
    100 ms). This pool belongs to prism and is never full: when a submission would exceed its
    size, a pool twice as large (at least the number of threads in use) replaces it — the old one
    is shut down without waiting, so its running threads finish their call and exit. Threads are
    started on demand, so the size costs nothing until used. Like ``to_thread``, the call runs in
    a copy of the caller's context.
    """

    __slots__ = ("_busy", "_executor", "_lock", "_size")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._size = 0
        self._busy = 0

    def run(self, fn: Callable[..., Any], /, *args: Any) -> asyncio.Future[Any]:
        """Start ``fn(*args)`` in a worker thread at once; the future resolves on this loop."""
        loop = asyncio.get_running_loop()
        with self._lock:  # submitted under the lock: no other thread can retire the pool first
            executor = self._executor
            if executor is None or self._busy >= self._size:
                self._size = max(self._busy + 1, 2 * self._size, 8)
                executor = ThreadPoolExecutor(self._size, thread_name_prefix="prism-tool")
                if self._executor is not None:
                    self._executor.shutdown(wait=False)
                self._executor = executor
            future = loop.run_in_executor(executor, copy_context().run, fn, *args)
            self._busy += 1
        future.add_done_callback(self._release)
        return future

    def _release(self, _future: object) -> None:
        with self._lock:
            self._busy -= 1


_TOOL_THREADS = _ToolThreads()


# =========================================================================== results (TOOL-12)


class _NotJson(Exception):
    def __init__(self, type_name: str) -> None:
        super().__init__(type_name)
        self.type_name = type_name


_FLAT_JSON = frozenset({str, int, bool, type(None)})


def _to_json_value(value: Any) -> Any:
    """Convert a tool's return value to JSON data (TOOL-12) or raise :class:`_NotJson`."""
    if value is None or type(value) in (str, int, bool):
        return value
    if type(value) is dict:  # the common result: a flat object of JSON scalars (no float: NaN)
        flat = _FLAT_JSON
        for key, item in value.items():
            if type(key) is not str or type(item) not in flat:
                break
        else:
            return value
    if is_json_value(value):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        converted = dump(mode="json")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        converted = dataclasses.asdict(value)
    else:
        raise _NotJson(type(value).__name__)
    if not is_json_value(converted):
        raise _NotJson(type(value).__name__)
    return converted


def _normalise_result(raw: Any, call: ToolCallContent) -> ToolResult:
    """Wrap/normalise what ``execute`` returned (CON-21, TOOL-12)."""
    if isinstance(raw, ToolResult):
        value = raw.value
        if not (value is None or type(value) in (str, int, bool) or is_json_value(value)):
            raise _NotJson(type(value).__name__)
        result: ToolResult = raw
        if result.tool_call_id != call.id or result.name != call.name:
            result = dataclasses.replace(result, tool_call_id=call.id, name=call.name)
        return result
    return ToolResult(tool_call_id=call.id, name=call.name, value=_to_json_value(raw))


# =========================================================================== abort grace (TOOL-10)


class _Interrupted(Exception):
    """The abort grace ended while ``execute`` was still running."""


class _Grace:
    """Cancels the dispatching task ``grace_ms`` after the run signal aborts (TOOL-10).

    Nothing is armed on the normal path: the timer exists only once the abort happened.
    """

    __slots__ = ("fired", "grace_s", "handle", "loop", "settled", "task")

    def __init__(self, grace_ms: float) -> None:
        loop = asyncio.get_running_loop()
        self.loop = loop
        self.task = asyncio.current_task(loop)
        self.grace_s = max(0.0, float(grace_ms)) / 1000.0
        self.handle: asyncio.TimerHandle | None = None
        self.fired = False
        self.settled = False

    def on_abort(self, *_: Any) -> None:
        if self.settled:
            return
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # aborted from another thread
            running = None
        if running is self.loop:
            self._arm()
        else:
            self.loop.call_soon_threadsafe(self._arm)

    def _arm(self) -> None:
        if not self.settled and self.handle is None:
            self.handle = self.loop.call_later(self.grace_s, self._fire)

    def _fire(self) -> None:
        if not self.settled and self.task is not None:
            self.fired = True
            self.task.cancel()

    def settle(self) -> None:
        self.settled = True
        if self.handle is not None:
            self.handle.cancel()


async def _await_with_grace(awaitable: Awaitable[Any], signal: Any, grace_ms: float) -> Any:
    """Await ``awaitable``; raise :class:`_Interrupted` if it outlives the abort grace."""
    if signal is None:
        return await awaitable
    grace = _Grace(grace_ms)
    remove = signal.add_listener(grace.on_abort)
    try:
        result = await awaitable
    except BaseException:
        grace.settle()
        remove()
        if grace.fired and grace.task is not None:
            if grace.task.uncancel() == 0:
                raise _Interrupted() from None
        raise
    grace.settle()
    remove()
    if grace.fired and grace.task is not None:
        # execute swallowed the cancellation but only returned after the grace ended
        grace.task.uncancel()
        raise _Interrupted()
    return result


_INTERRUPTED_RUN_ENDED = "tool call interrupted: the run ended before its result was recorded"


# =========================================================================== dispatch (TOOL-3)


class _Call:
    """Per-call state: identity, timing, events and ledger rows of one dispatch."""

    __slots__ = (
        "arguments",
        "call",
        "context",
        "done",
        "emit",
        "ledger",
        "ownership",
        "redactor",
        "secrets",
        "start_ns",
        "started_at",
    )

    def __init__(
        self,
        call: ToolCallContent,
        context: ToolExecutionContext,
        emit: Callable[[Any], Any] | None,
        ledger: Callable[[ToolCallRecord], Any] | None,
        redactor: SecretRedactor | None,
        secrets: tuple[str, ...],
        ownership: OwnershipScope | None,
        start_ns: int,
    ) -> None:
        self.call = call
        self.context = context
        self.emit = emit
        self.ledger = ledger
        self.redactor = redactor
        self.secrets = secrets
        self.ownership = ownership
        self.start_ns = start_ns
        self.started_at: str | None = None
        self.done = False
        self.arguments: Any = call.arguments

    # ------------------------------------------------------------------ helpers

    def metadata(self, status: Literal["finished", "error", "blocked"]) -> ToolExecutionMetadata:
        elapsed = time.monotonic_ns() - self.start_ns
        return ToolExecutionMetadata(duration_ms=(elapsed + 500_000) // 1_000_000, status=status)

    async def send(self, event: Any) -> None:
        if self.emit is not None:
            out = self.emit(event)
            if out is not None and inspect.isawaitable(out):
                await out

    async def row(
        self,
        status: Literal["started", "finished", "error", "blocked"],
        *,
        result: ToolResult | None = None,
        reason: str | None = None,
        progress: Any = None,
        progress_metadata: Mapping[str, Any] | None = None,
        progress_at: str | None = None,
    ) -> None:
        if self.ledger is None:
            return
        now = now_iso()
        if self.started_at is None:
            self.started_at = now
        ctx = self.context
        own = self.ownership
        record = ToolCallRecord(
            id=new_id("toolcall"),
            session_id=ctx.session_id,
            run_id=ctx.run_id,
            tool_call_id=self.call.id,
            name=self.call.name,
            arguments=self.arguments,
            status=status,
            started_at=self.started_at,
            finished_at=None if status == "started" else now,
            result=result,
            reason=reason,
            progress=progress,
            progress_metadata=progress_metadata,
            progress_at=progress_at,
            redacted=self.redactor is not None,
            tenant_id=own.tenant_id if own is not None else None,
            account_id=own.account_id if own is not None else None,
            user_id=own.user_id if own is not None else None,
        )
        if self.redactor is not None:
            record = self.redactor.redact(record)
        out = self.ledger(record)
        if inspect.isawaitable(out):
            await out

    def redact_error(self, info: ErrorInfo) -> ErrorInfo:
        return info if self.redactor is None else self.redactor.redact(info)

    async def progress(self, value: JsonValue, metadata: Mapping[str, Any] | None = None) -> None:
        """``context.progress``: one ``tool_execution_progress`` event and one ``started`` row."""
        if self.done:
            return
        ctx = self.context
        await self.send(
            ToolExecutionProgressEvent(
                session_id=ctx.session_id,
                run_id=ctx.run_id,
                tool_call_id=self.call.id,
                name=self.call.name,
                progress=value,
                metadata=metadata,
            )
        )
        await self.row("started", progress=value, progress_metadata=metadata, progress_at=now_iso())

    # ------------------------------------------------------------------ terminal outcomes

    async def blocked(
        self, reason: BlockedReason, message: str, error: ErrorInfo | None = None
    ) -> ToolResult:
        """Answer the call as blocked (TOOL-4): result, event and ``blocked`` row."""
        if error is None:
            error = ErrorInfo(message=message, code=reason)
        elif error.code is None:
            error = dataclasses.replace(error, code=reason)
        error = self.redact_error(error)
        call = self.call
        result = ToolResult(tool_call_id=call.id, name=call.name, error=error)
        self.done = True
        ctx = self.context
        await self.send(
            ToolExecutionBlockedEvent(
                session_id=ctx.session_id,
                run_id=ctx.run_id,
                tool_call_id=call.id,
                name=call.name,
                reason=reason,
                error=error,
                metadata=self.metadata("blocked"),
            )
        )
        await self.row("blocked", result=result, reason=reason)
        return result

    async def failed(self, error: ErrorInfo) -> ToolResult:
        """Answer the call with an error result: ``tool_execution_error`` and an ``error`` row."""
        error = self.redact_error(error)
        call = self.call
        result = ToolResult(tool_call_id=call.id, name=call.name, error=error)
        self.done = True
        ctx = self.context
        await self.send(
            ToolExecutionErrorEvent(
                session_id=ctx.session_id,
                run_id=ctx.run_id,
                call=call,
                error=error,
                metadata=self.metadata("error"),
            )
        )
        await self.row("error", result=result)
        return result

    def error_info(self, exc: BaseException, default_code: str | None = None) -> ErrorInfo:
        info = error_to_error_info(exc, self.secrets)
        if default_code is not None and info.code is None:
            info = dataclasses.replace(info, code=default_code)
        return info


def _is_task_cancellation(exc: BaseException) -> bool:
    if not isinstance(exc, asyncio.CancelledError):
        return False
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _propagates(exc: BaseException) -> bool:
    """Exceptions from steps 11–12 that are not turned into error results (TOOL-3)."""
    return (
        isinstance(exc, (GuardrailError, RunLimitExceeded))
        or _is_suspension_signal(exc)
        or _is_task_cancellation(exc)
    )


async def _run_execute(
    tool: ToolDefinition,
    arguments: dict[str, Any],
    context: ToolExecutionContext,
    grace_ms: float,
    threaded: bool,
    on_worker_thread: Callable[[asyncio.Future[Any]], Any] | None,
) -> Any:
    """Step 11: run ``execute`` inline or in a worker thread, under the abort grace (TOOL-10/11)."""
    execute = tool.execute
    if threaded and not inspect.iscoroutinefunction(execute):
        future = _TOOL_THREADS.run(execute, arguments, context)
        try:
            raw = await _await_with_grace(asyncio.shield(future), context.signal, grace_ms)
        except BaseException:
            if not future.done():
                if on_worker_thread is not None:
                    on_worker_thread(future)
                else:
                    # no one else will await the thread: keep no tool work running unseen
                    await asyncio.wait((future,))
            raise
    else:
        raw = execute(arguments, context)
    if inspect.isawaitable(raw):
        raw = await _await_with_grace(raw, context.signal, grace_ms)
    return raw


async def _tool_stage_guardrails(
    stage: Literal["tool_input", "tool_output"],
    guardrails: Guardrails,
    value: Any,
    context: ToolExecutionContext,
    tool_call_id: str,
    tool_name: str,
    redactor: SecretRedactor | None,
    emit: Callable[[Any], Any] | None,
) -> GuardrailRecord | None:
    """Run one tool stage's guardrails (GRD-5) and return the terminal record, if any."""
    outcome = await run_guardrails(
        stage,
        guardrails,
        value,
        GuardrailContext(
            stage=stage,
            value=value,
            session_id=context.session_id,
            run_id=context.run_id,
            metadata=context.metadata,
            signal=context.signal,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
        ),
        redactor=redactor,
        emit=emit,
    )
    return outcome.terminal


async def dispatch_tool_call(
    call: ToolCallContent,
    *,
    registry: ToolRegistry | Mapping[str, ToolDefinition],
    context: ToolExecutionContext,
    filter: ToolFilter | Sequence[ToolFilter] | None = None,
    middleware: MiddlewareRegistry | None = None,
    tool_validator: ToolValidator | Literal[False] | None = None,
    permission: PermissionPolicy | None = None,
    guardrails: Guardrails | None = None,
    redactor: SecretRedactor | None = None,
    ledger: ToolCallLedger | Any = None,
    emit: Callable[[Any], Any] | None = None,
    limit_tracker: RunLimitTracker | None = None,
    before_execute: BeforeExecute | None = None,
    secrets: Iterable[str] = (),
    ownership: OwnershipScope | None = None,
    tool_abort_grace_ms: float = 5000,
    sync_in_thread: bool | None = None,
    on_worker_thread: Callable[[asyncio.Future[Any]], Any] | None = None,
) -> ToolResult:
    """Run one tool call through the guarded pipeline and return its result (TOOL-3).

    Steps, in order: (1) charge ``max_tool_calls``; (2) ``tool_call`` middleware; (3) tool-input
    guardrails; (4) lookup; (5) filters; (6) argument checks; (7) permission; (8) validation;
    (9) ``before_execute``; (10) ``tool_execution_started`` + ``started`` row; (11) ``execute``
    and normalisation (TOOL-11, TOOL-12); (12) ``tool_result`` middleware; (13) tool-output
    guardrails; (14) redaction; (15) ``tool_execution_finished`` + ``finished`` row.

    Blocked outcomes (TOOL-4) return ``ToolResult(error=ErrorInfo(message, code=<underlying code,
    else the reason>))``, emit ``tool_execution_blocked`` and write a ``blocked`` row; ``execute``
    never runs on them. An exception from steps 11–12 becomes an error result with
    ``tool_execution_error`` and an ``error`` row, except a ``GuardrailError``, a suspension signal
    (POOL-6), a ``RunLimitExceeded`` or a cancellation of the running task, which propagate. When
    one of those propagates after ``tool_execution_started`` was emitted (other than a suspension
    signal, whose call the resume machinery answers), the call still gets its one terminal
    ``tool_execution_error`` event and ``error`` row (EVT-12) before the exception is re-raised; a
    cancellation reports the ``tool_call_interrupted`` error the runtime stores for it (RUN-24).

    Args:
        call: The host tool call (as the provider produced it).
        registry: The run's tools (a registry, or a name → tool mapping).
        context: Execution context; its ``session_id``/``run_id``/``signal``/``metadata`` are
            used. When ``emit`` or ``ledger`` is given, ``execute`` receives a copy whose
            ``tool_call_id`` is the call's and whose ``progress`` emits ``tool_execution_progress``
            and writes a ``started`` progress row (TOOL-8), so the caller need not build one.
        filter: Effective tool filters (TOOL-13); excluded names are blocked ``tool_denied``.
        middleware: A ``MiddlewareRegistry`` (``tool_call`` and ``tool_result`` hooks).
        tool_validator: ``None`` → :func:`json_schema_tool_validator` (the built-in), ``False`` →
            no validation, else a sync/async :data:`ToolValidator` (TOOL-6).
        permission: Sync/async :data:`PermissionPolicy` (TOOL-7). ``None``: allow.
        guardrails: Merged guardrails; only ``tool_input``/``tool_output`` are used here.
        redactor: Redacts block messages, the result (step 14), error results and ledger rows.
        ledger: Receives ``ToolCallRecord`` rows (a callable or an object with
            ``append_tool_call``; sync or async). ``None``: no rows.
        emit: Receives the tool and guardrail events (sync; an awaitable result is awaited).
        limit_tracker: Charged once per dispatch via ``charge_tool_call()`` (LIM-4).
        before_execute: Pre-execution hook; a suspension signal propagates, any other exception
            blocks the call ``execution_denied``.
        secrets: Extra strings removed from error messages (``error_to_error_info``).
        ownership: Copied into ledger rows (REC-8).
        tool_abort_grace_ms: Milliseconds a running ``execute`` may continue after the run signal
            aborts before it is cancelled and answered ``tool_call_interrupted`` (TOOL-10).
            ``0``: cancel at once.
        sync_in_thread: Run a sync ``execute`` in a worker thread. ``None`` (default): only inside
            :func:`parallel_tool_round` (TOOL-11).
        on_worker_thread: Receives the future of a worker thread still running when its call was
            answered (abort grace ended, or the task was cancelled); the caller must await it
            before the run returns (RUN-22). ``None``: the dispatch awaits the thread itself
            before returning or re-raising.

    Returns:
        The call's ``ToolResult`` (value, error result or blocked result), never ``None``.

    Raises:
        RunLimitExceeded: the ``max_tool_calls`` breach (step 1) or one raised by ``execute``.
        GuardrailError: a tool-stage ``tripwire``/``interrupt`` (GRD-5).
        AgentRunSuspended: a suspension signal from ``before_execute``/``execute`` (POOL-6).
        asyncio.CancelledError: the dispatching task was cancelled.
        Exception: whatever the ``tool_call`` middleware hook, ``emit`` or ``ledger`` raise.
    """
    start_ns = time.monotonic_ns()
    # -- 1. limits
    if limit_tracker is not None:
        limit_tracker.charge_tool_call()
    # -- 2. tool_call middleware
    if middleware is not None and middleware.has("tool_call"):
        replaced = await middleware.run("tool_call", call)
        if replaced is not None:
            call = replaced
    write = None
    if ledger is not None:
        write = getattr(ledger, "append_tool_call", ledger)
    state = _Call(
        call,
        context,
        emit,
        write,
        redactor,
        secrets if isinstance(secrets, tuple) else tuple(secrets),
        ownership,
        start_ns,
    )
    # -- 3. tool-input guardrails
    if guardrails is not None and guardrails.tool_input:
        terminal = await _tool_stage_guardrails(
            "tool_input", guardrails, call, context, call.id, call.name, redactor, emit
        )
        if terminal is not None:
            if terminal.action == "block":
                return await state.blocked("guardrail_blocked", "Tool call blocked by guardrail")
            raise GuardrailError(terminal)
    # -- 4. lookup
    name = call.name
    tool = registry.get(name)
    if tool is None:
        return await state.blocked("unknown_tool", f"Unknown tool: {name}")
    # -- 5. filter
    if filter is not None and not is_tool_allowed(name, filter):
        return await state.blocked("tool_denied", f"Tool denied: {name}")
    # -- 6. arguments
    if call.arguments_error is not None:
        return await state.blocked(
            "invalid_arguments", call.arguments_error.message, call.arguments_error
        )
    arguments = call.arguments
    if not isinstance(arguments, dict):
        return await state.blocked("invalid_arguments", "Tool arguments must be a JSON object")
    # -- 7. permission
    if permission is not None:
        denied = await _check_permission(permission, call, context, state)
        if denied is not None:
            return denied
    # execution context (progress bound to this call's events and rows, TOOL-8)
    exec_context = context
    if emit is not None or write is not None:
        exec_context = ToolExecutionContext(
            session_id=context.session_id,
            run_id=context.run_id,
            tool_call_id=call.id,
            signal=context.signal,
            metadata=context.metadata,
            progress=state.progress,
        )
    elif context.tool_call_id != call.id:
        exec_context = dataclasses.replace(context, tool_call_id=call.id)
    # -- 8. validation
    if tool_validator is not False:
        validator = _DEFAULT_VALIDATOR if tool_validator is None else tool_validator
        fast: _FastCheck | None = None
        if validator is _BUILTIN_VALIDATOR and tool.parameters is not None:
            fast = _fast_schema_checker(tool.parameters)  # what the built-in would do first
        if fast is None or not fast(arguments):
            problem = await _validate(validator, tool, arguments, exec_context, state)
            if problem is not None:
                return problem
    # -- 9. before_execute
    if before_execute is not None:
        try:
            out = before_execute(call, tool, exec_context)
            if inspect.isawaitable(out):
                await out
        except Exception as exc:
            if _is_suspension_signal(exc):
                raise
            return await state.blocked(
                "execution_denied", str(exc), state.error_info(exc, "execution_denied")
            )
    # -- 10. started
    if emit is not None:
        sent = emit(
            ToolExecutionStartedEvent(session_id=context.session_id, run_id=context.run_id, call=call)
        )
        if sent is not None and inspect.isawaitable(sent):
            await sent
    if write is not None:
        await state.row("started")
    # -- 11./12. execute, normalise, tool_result middleware
    threaded = _PARALLEL_ROUND.get() if sync_in_thread is None else sync_in_thread
    try:
        if threaded:
            raw = await _run_execute(
                tool, arguments, exec_context, tool_abort_grace_ms, threaded, on_worker_thread
            )
        else:  # inline (the _run_execute path without a thread, without its coroutine)
            raw = tool.execute(arguments, exec_context)
            if inspect.isawaitable(raw):
                raw = await _await_with_grace(raw, exec_context.signal, tool_abort_grace_ms)
        result = _normalise_result(raw, call)
        if middleware is not None and middleware.has("tool_result"):
            replaced_result = await middleware.run("tool_result", result)
            if replaced_result is not None:
                result = replaced_result
    except _Interrupted:
        return await state.failed(
            ErrorInfo(
                code="tool_call_interrupted",
                message=(
                    "tool call interrupted: still running "
                    f"{_fmt_ms(tool_abort_grace_ms)} ms after the run was aborted"
                ),
            )
        )
    except _NotJson as exc:
        return await state.failed(
            ErrorInfo(
                code="invalid_tool_result",
                message=(
                    f"Tool {name} returned a value that is not JSON-compatible: {exc.type_name}"
                ),
            )
        )
    except (Exception, asyncio.CancelledError) as exc:
        if not _propagates(exc):
            return await state.failed(state.error_info(exc))
        await _report_propagating(state, exc)
        raise
    # -- 13. tool-output guardrails (before redaction)
    if guardrails is not None and guardrails.tool_output:
        terminal = await _tool_stage_guardrails(
            "tool_output", guardrails, result, context, call.id, name, redactor, emit
        )
        if terminal is not None:
            if terminal.action == "block":
                return await state.blocked("guardrail_blocked", "Tool result blocked by guardrail")
            error = GuardrailError(terminal)
            await _report_propagating(state, error)
            raise error
    # -- 14. redact
    if redactor is not None:
        result = redactor.redact(result)
    # -- 15. finished
    state.done = True
    if emit is not None:
        sent = emit(
            ToolExecutionFinishedEvent(
                session_id=context.session_id,
                run_id=context.run_id,
                result=result,
                metadata=state.metadata("finished"),
            )
        )
        if sent is not None and inspect.isawaitable(sent):
            await sent
    if write is not None:
        await state.row("finished", result=result)
    return result


def _fmt_ms(value: float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


async def _report_propagating(state: _Call, exc: BaseException) -> None:
    """Close a started call whose exception propagates (EVT-12: one terminal tool event)."""
    if _is_suspension_signal(exc):
        return
    if isinstance(exc, asyncio.CancelledError):
        info = ErrorInfo(code="tool_call_interrupted", message=_INTERRUPTED_RUN_ENDED)
    else:
        info = state.error_info(exc)
    await state.failed(info)


async def _check_permission(
    permission: PermissionPolicy,
    call: ToolCallContent,
    context: ToolExecutionContext,
    state: _Call,
) -> ToolResult | None:
    """Step 7 (TOOL-7): ``None`` when allowed, else the blocked result."""
    request = PermissionRequest(
        target=call.name,
        metadata=context.metadata,
        tool_call_id=call.id,
        arguments=call.arguments,
    )
    try:
        verdict = permission(request)
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except Exception as exc:
        return await state.blocked(
            "permission_denied", str(exc), state.error_info(exc, "permission_denied")
        )
    if verdict is True or verdict is None:
        return None
    return await state.blocked("permission_denied", f"Permission denied: {call.name}")


async def _validate(
    validator: Any,
    tool: ToolDefinition,
    arguments: dict[str, Any],
    context: ToolExecutionContext,
    state: _Call,
) -> ToolResult | None:
    """Step 8 (TOOL-6): ``None`` when valid, else the blocked ``validation_failed`` result."""
    if not callable(validator):
        raise PrismConfigError("tool_validator must be None, False or callable")
    try:
        outcome = validator(tool, arguments, context)
        if inspect.isawaitable(outcome):
            outcome = await outcome
    except Exception as exc:
        return await state.blocked(
            "validation_failed", str(exc), state.error_info(exc, "validation_failed")
        )
    if outcome is None:
        return None
    if isinstance(outcome, ErrorInfo):
        return await state.blocked("validation_failed", outcome.message, outcome)
    return await state.blocked("validation_failed", str(outcome))


# =========================================================================== decorator (TOOL-14)

_PYDANTIC_MISSING = (
    "the prism.tool decorator needs pydantic v2: pip install 'prism-runtime[pydantic]'"
)

_GOOGLE_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|"
    r"Returns?|Yields?|Raises|Examples?|Notes?|Attributes|See Also|Warnings?|Todo|References)"
    r"\s*:\s*$"
)
_GOOGLE_ARGS = re.compile(r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments)\s*:\s*$")
_GOOGLE_ITEM = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:(.*)$")
_REST_FIELD = re.compile(r"^:(\w+)(?:\s+([^:]*?))?\s*:(.*)$")


def _split_docstring(doc: str | None) -> tuple[str | None, dict[str, str]]:
    """Return (description up to the parameter section, per-parameter descriptions) (TOOL-14)."""
    if not doc:
        return None, {}
    lines = inspect.cleandoc(doc).splitlines()
    cut = len(lines)
    for i, line in enumerate(lines):
        stripped = line.strip()
        if _GOOGLE_SECTION.match(stripped) or _REST_FIELD.match(stripped):
            cut = i
            break
    description = "\n".join(lines[:cut]).strip() or None
    params: dict[str, str] = {}
    _parse_google(lines, params)
    _parse_rest(lines, params)
    return description, params


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _parse_google(lines: Sequence[str], params: dict[str, str]) -> None:
    i = 0
    while i < len(lines):
        header = lines[i]
        if not _GOOGLE_ARGS.match(header.strip()):
            i += 1
            continue
        base = _indent(header)
        i += 1
        item_indent: int | None = None
        current: str | None = None
        while i < len(lines):
            line = lines[i]
            if not line.strip():
                i += 1
                continue
            ind = _indent(line)
            if ind <= base:
                break
            if item_indent is None:
                item_indent = ind
            text = line.strip()
            if ind <= item_indent:
                match = _GOOGLE_ITEM.match(text)
                if match:
                    current = match.group(1)
                    params[current] = match.group(2).strip()
                else:
                    current = None
            elif current is not None:
                params[current] = (params[current] + " " + text).strip()
            i += 1


def _parse_rest(lines: Sequence[str], params: dict[str, str]) -> None:
    current: str | None = None
    field_indent = 0
    for line in lines:
        text = line.strip()
        match = _REST_FIELD.match(text)
        if match:
            current = None
            kind, target, rest = match.group(1), match.group(2), match.group(3)
            if kind in ("param", "parameter", "arg", "argument", "key", "keyword") and target:
                current = target.split()[-1]
                params[current] = rest.strip()
                field_indent = _indent(line)
            continue
        if current is not None and text and _indent(line) > field_indent:
            params[current] = (params[current] + " " + text).strip()
        elif current is not None and (not text or _indent(line) <= field_indent):
            current = None


def _import_pydantic() -> Any:
    try:
        import pydantic
    except ImportError as exc:  # pragma: no cover - pydantic is installed in development
        raise ImportError(_PYDANTIC_MISSING) from exc
    return pydantic


def _build_tool(
    fn: Callable[..., Any],
    name: str | None,
    description: str | None,
    exclusive: bool,
    metadata: Mapping[str, Any] | None,
    localns: Mapping[str, Any] | None,
) -> ToolDefinition:
    pydantic = _import_pydantic()
    if not callable(fn) or not hasattr(fn, "__name__"):
        raise PrismConfigError(f"@tool needs a function, got {type(fn).__name__}")
    label = getattr(fn, "__qualname__", fn.__name__)
    signature = inspect.signature(fn)
    try:
        hints = inspect.get_annotations(fn, eval_str=True, locals=localns)
    except Exception:
        hints = _resolve_each(fn, signature, label, localns)
    doc_description, doc_params = _split_docstring(inspect.getdoc(fn))
    fields: dict[str, Any] = {}
    bindings: list[tuple[str, str]] = []  # (parameter name, model field name)
    context_params: list[str] = []
    for index, (pname, param) in enumerate(signature.parameters.items()):
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            raise PrismConfigError(f"@tool {label}: *{pname} is not supported")
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            raise PrismConfigError(f"@tool {label}: **{pname} is not supported")
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise PrismConfigError(f"@tool {label}: positional-only parameter {pname!r}")
        if pname not in hints:
            raise PrismConfigError(f"@tool {label}: parameter {pname!r} has no annotation")
        annotation = hints[pname]
        if _is_context_annotation(annotation):
            context_params.append(pname)
            continue
        internal = f"p{index}"
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[internal] = (
            annotation,
            pydantic.Field(default, alias=pname, description=doc_params.get(pname)),
        )
        bindings.append((pname, internal))
    model_name = re.sub(r"\W", "_", fn.__name__) or "tool"
    try:
        model = pydantic.create_model(
            model_name,
            # extra="forbid": the schema says additionalProperties: false, so a call with an
            # unknown key is blocked by argument validation with an error the model can correct
            # instead of running with the key dropped (TOOL-14, TOOL-6)
            __config__=pydantic.ConfigDict(
                protected_namespaces=(), arbitrary_types_allowed=False, extra="forbid"
            ),
            **fields,
        )
        adapter = pydantic.TypeAdapter(model)
        schema = adapter.json_schema()
    except Exception as exc:
        bad = _find_bad_parameter(pydantic, fields, bindings)
        where = f" parameter {bad!r}" if bad else ""
        raise PrismConfigError(
            f"@tool {label}:{where} annotation cannot be described as JSON Schema: {exc}"
        ) from exc

    validate = adapter.validate_python
    ctx_names = tuple(context_params)
    binds = tuple(bindings)

    def kwargs_for(arguments: Any, context: ToolExecutionContext) -> dict[str, Any]:
        model_value = validate(arguments)
        kwargs = {pname: getattr(model_value, internal) for pname, internal in binds}
        for cname in ctx_names:
            kwargs[cname] = context
        return kwargs

    execute: Callable[..., Any]
    if inspect.iscoroutinefunction(fn):

        async def execute_async(arguments: Any, context: ToolExecutionContext) -> Any:
            return _convert_result(await fn(**kwargs_for(arguments, context)))

        execute = execute_async
    else:

        def execute_sync(arguments: Any, context: ToolExecutionContext) -> Any:
            return _convert_result(fn(**kwargs_for(arguments, context)))

        execute = execute_sync
    execute.__name__ = fn.__name__
    execute.__qualname__ = label
    execute.__doc__ = fn.__doc__
    return ToolDefinition(
        name=name if name is not None else fn.__name__,
        execute=execute,
        description=description if description is not None else doc_description,
        parameters=schema,
        exclusive=exclusive,
        metadata=metadata,
    )


def _is_context_annotation(annotation: Any) -> bool:
    """``ToolExecutionContext`` or ``ToolExecutionContext | None``."""
    if annotation is ToolExecutionContext:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return members == [ToolExecutionContext]
    return False


def _convert_result(value: Any) -> Any:
    """TOOL-12 conversion for decorated tools; non-JSON values are left for the dispatcher."""
    try:
        return _to_json_value(value)
    except _NotJson:
        return value


def _resolve_each(
    fn: Callable[..., Any],
    signature: inspect.Signature,
    label: str,
    localns: Mapping[str, Any] | None,
) -> dict[str, Any]:
    raw = inspect.get_annotations(fn)
    namespace = dict(getattr(fn, "__globals__", {}))
    if localns:
        namespace.update(localns)
    hints: dict[str, Any] = {}
    for pname in signature.parameters:
        if pname not in raw:
            continue
        annotation = raw[pname]
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, namespace)
            except Exception as exc:
                raise PrismConfigError(
                    f"@tool {label}: parameter {pname!r} annotation {raw[pname]!r} cannot be "
                    f"resolved: {exc}"
                ) from exc
        hints[pname] = annotation
    return hints


def _find_bad_parameter(
    pydantic: Any, fields: Mapping[str, Any], bindings: Sequence[tuple[str, str]]
) -> str | None:
    for pname, internal in bindings:
        try:
            pydantic.TypeAdapter(fields[internal][0]).json_schema()
        except Exception:
            return pname
    return None


def _caller_locals() -> dict[str, Any] | None:
    """Locals of the scope applying the decorator (two frames up), for annotation lookup."""
    frame = inspect.currentframe()
    try:
        target = frame.f_back.f_back if frame is not None and frame.f_back is not None else None
        if target is None or target.f_locals is target.f_globals:
            return None
        return dict(target.f_locals)
    finally:
        del frame


@overload
def tool(fn: Callable[..., Any], /) -> ToolDefinition: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    exclusive: bool = False,
    metadata: Mapping[str, Any] | None = None,
) -> Callable[[Callable[..., Any]], ToolDefinition]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    exclusive: bool = False,
    metadata: Mapping[str, Any] | None = None,
) -> ToolDefinition | Callable[[Callable[..., Any]], ToolDefinition]:
    """Turn a typed function into a :class:`~prism.types.ToolDefinition` (TOOL-14).

    Usable bare (``@tool``) or with options (``@tool(name="search")``); the decorated name is bound
    to the definition. ``parameters`` is the JSON Schema pydantic v2 generates for a model of the
    function's parameters (descriptions from a Google ``Args:`` section or reST ``:param x:``
    fields; ``required`` lists the parameters without a default). A parameter annotated
    ``ToolExecutionContext`` receives the call's context and is not in the schema. ``execute``
    converts the arguments with the same adapter (``validate_python``), calls the function with
    keyword arguments and returns its result (TOOL-12 conversion applied); it is sync for a
    ``def`` and async for an ``async def``.

    Args:
        fn: The function (bare use).
        name: Tool name; default the function's ``__name__``.
        description: Tool description; default the docstring up to its parameter section
            (``None`` when empty).
        exclusive: Forces sequential dispatch of rounds containing this tool (CON-19).
        metadata: Host metadata.

    Raises:
        PrismConfigError: ``*args``/``**kwargs``, a positional-only or unannotated parameter, or
            an annotation pydantic cannot describe (message names the function and parameter).
        ImportError: pydantic is not installed (names ``prism-runtime[pydantic]``).
    """
    # Annotations of functions defined inside another function (postponed with
    # ``from __future__ import annotations``) may name locals of the defining scope.
    if fn is not None:
        return _build_tool(fn, name, description, exclusive, metadata, _caller_locals())

    def decorate(func: Callable[..., Any]) -> ToolDefinition:
        return _build_tool(func, name, description, exclusive, metadata, _caller_locals())

    return decorate

