"""The ``@tool`` decorator: a typed Python function becomes a ``ToolDefinition``.

The decorated name is bound to a [`FunctionTool`][prism.tools.function_tool.FunctionTool]: a
``ToolDefinition`` that can still be called as the original function (so tools can be unit-tested
by calling them). pydantic v2 describes the function's parameters as JSON Schema (the tool's ``parameters``) and
converts the model's arguments back into Python values when the tool runs. ``pydantic`` is
imported the first time a function is decorated, never by ``import prism`` — except for the
common signatures (``int``/``float``/``str``/``bool`` parameters, optionally ``| None``, with
scalar defaults): ``prism.tools._fast_signature`` writes their schema exactly as pydantic would
and converts exactly-typed arguments itself, and the pydantic model is built the first time a
call's arguments need it.
"""

from __future__ import annotations

import inspect
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar, overload

from prism.errors import PrismConfigError
from prism.tools._fast_signature import fast_signature
from prism.tools.function_tool import FunctionTool
from prism.tools.results import NotJsonError, to_json_value
from prism.types import ToolCallContent, ToolExecutionContext

__all__ = ["tool"]

_PYDANTIC_MISSING = (
    "the prism.tool decorator needs pydantic v2: pip install 'prism-runtime[pydantic]'"
)


_P = ParamSpec("_P")
_R = TypeVar("_R")


@overload
def tool(fn: Callable[_P, _R], /) -> FunctionTool[_P, _R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    exclusive: bool = False,
    metadata: Mapping[str, Any] | None = None,
    needs_approval: bool | Callable[[ToolCallContent], bool] = False,
) -> Callable[[Callable[_P, _R]], FunctionTool[_P, _R]]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    exclusive: bool = False,
    metadata: Mapping[str, Any] | None = None,
    needs_approval: bool | Callable[[ToolCallContent], bool] = False,
) -> FunctionTool[..., Any] | Callable[[Callable[..., Any]], FunctionTool[..., Any]]:
    """Turn a typed function into a [`ToolDefinition`][prism.types.ToolDefinition] that stays callable.

    Usable bare (``@tool``) or with options (``@tool(name="search")``); the decorated name is bound
    to a [`FunctionTool`][prism.tools.function_tool.FunctionTool], which is a ``ToolDefinition`` and
    also the function: ``add(2, 3)`` calls the original function (for an ``async def`` it
    returns the coroutine to await). ``parameters`` is the JSON Schema pydantic v2 generates for a model of the
    function's parameters (descriptions from a Google ``Args:`` section or reST ``:param x:``
    fields; ``required`` lists the parameters without a default; ``additionalProperties`` is
    ``false``). A parameter annotated ``ToolExecutionContext`` receives the call's context and is
    not in the schema. ``execute`` converts the arguments with the same adapter
    (``validate_python``), calls the function with keyword arguments and returns its result
    converted to JSON data where possible (pydantic models, dataclasses); it is sync for a ``def``
    and async for an ``async def``. For ``int``/``float``/``str``/``bool`` parameters (optionally
    ``| None``, with scalar defaults) the same schema and conversions come without importing
    pydantic until a call's arguments are not exactly of the annotated types.

    Args:
        fn: The function (bare use).
        name: Tool name; default the function's ``__name__``.
        description: Tool description; default the docstring up to its parameter section
            (``None`` when empty).
        exclusive: Forces sequential dispatch of rounds containing this tool.
        metadata: Host metadata.
        needs_approval: Ask an operator before each call runs: ``True``, or a callable deciding
            from the call (``ToolDefinition.needs_approval``; needs durable run state).

    Raises:
        PrismConfigError: ``*args``/``**kwargs``, a positional-only or unannotated parameter, or
            an annotation pydantic cannot describe (message names the function and parameter).
        ImportError: pydantic is not installed (names ``prism-runtime[pydantic]``), whether or
            not this function needs it.
    """
    # Annotations of functions defined inside another function (postponed with
    # ``from __future__ import annotations``) may name locals of the defining scope, so both
    # paths read the locals of the frame that applies the decorator.
    if fn is not None:
        return _build_tool(
            fn, name, description, exclusive, metadata, needs_approval, _caller_locals()
        )

    def decorate(func: Callable[..., Any]) -> FunctionTool[..., Any]:
        return _build_tool(
            func, name, description, exclusive, metadata, needs_approval, _caller_locals()
        )

    return decorate


def _caller_locals() -> dict[str, Any] | None:
    """Locals of the scope applying the decorator (two frames up: past ``tool`` or
    ``decorate``), for annotation lookup; ``None`` at module level."""
    frame = inspect.currentframe()
    try:
        target = frame.f_back.f_back if frame is not None and frame.f_back is not None else None
        if target is None or target.f_locals is target.f_globals:
            return None
        return dict(target.f_locals)
    finally:
        del frame


@dataclass(frozen=True, slots=True)
class _Signature:
    """A tool function's parameters, sorted into model fields and context parameters."""

    params: tuple[tuple[str, Any, Any, str | None], ...]
    """``(name, annotation, default, description)`` for each schema parameter, in order;
    ``default`` is ``...`` when required, ``description`` ``None`` when the docstring has none."""
    bindings: tuple[tuple[str, str], ...]
    """``(parameter name, model field name)`` for each schema parameter, in order."""
    context_params: tuple[str, ...]
    """Parameters that receive the ``ToolExecutionContext``."""

    def fields(self, pydantic: Any) -> dict[str, Any]:
        """Model field name → ``(annotation, pydantic.Field)``."""
        return {
            internal: (
                annotation,
                pydantic.Field(default, alias=pname, description=description),
            )
            for (pname, annotation, default, description), (_, internal) in zip(
                self.params, self.bindings, strict=True
            )
        }


def _build_tool(
    fn: Callable[..., Any],
    name: str | None,
    description: str | None,
    exclusive: bool,
    metadata: Mapping[str, Any] | None,
    needs_approval: bool | Callable[[ToolCallContent], bool],
    localns: Mapping[str, Any] | None,
) -> FunctionTool[..., Any]:
    _require_pydantic()
    if not callable(fn) or not hasattr(fn, "__name__"):
        raise PrismConfigError(f"@tool needs a function, got {type(fn).__name__}")
    label = getattr(fn, "__qualname__", fn.__name__)
    doc_description, doc_params = split_docstring(inspect.getdoc(fn))
    signature = _read_signature(fn, label, localns, doc_params)
    model_name = re.sub(r"\W", "_", fn.__name__) or "tool"
    fast = fast_signature(model_name, signature.params)
    adapter: Any
    if fast is None:
        adapter, schema = _argument_model(_import_pydantic(), model_name, label, signature)
    else:
        adapter, schema = _LazyAdapter(model_name, label, signature), fast.schema
    validate: Callable[[Any], Any] = adapter.validate_python
    return FunctionTool(
        name=name if name is not None else fn.__name__,
        execute=_make_execute(
            fn, label, validate, signature, None if fast is None else fast.convert
        ),
        description=description if description is not None else doc_description,
        parameters=schema,
        exclusive=exclusive,
        metadata=metadata,
        needs_approval=needs_approval,
        function=fn,
        arguments_adapter=adapter,
    )


def _require_pydantic() -> None:
    """Raise the ``ImportError`` naming the extra when pydantic is not installed, without
    importing it.

    Raises:
        ImportError: pydantic cannot be imported (names ``prism-runtime[pydantic]``).
    """
    if "pydantic" in sys.modules:
        found = sys.modules["pydantic"] is not None
    else:
        # what importlib.util.find_spec does for a top-level name, without importing it
        finders = (getattr(finder, "find_spec", None) for finder in sys.meta_path)
        found = any(find is not None and find("pydantic", None) for find in finders)
    if not found:
        raise ImportError(_PYDANTIC_MISSING)


def _import_pydantic() -> Any:
    try:
        import pydantic
    except ImportError as exc:  # pragma: no cover - pydantic is installed in development
        raise ImportError(_PYDANTIC_MISSING) from exc
    return pydantic


def _read_signature(
    fn: Callable[..., Any],
    label: str,
    localns: Mapping[str, Any] | None,
    doc_params: Mapping[str, str],
) -> _Signature:
    """Check ``fn``'s parameters and turn each into a model field or a context parameter.

    Raises:
        PrismConfigError: ``*args``/``**kwargs``, a positional-only or unannotated parameter, or
            an annotation that cannot be resolved.
    """
    signature = inspect.signature(fn)
    try:
        hints = inspect.get_annotations(fn, eval_str=True, locals=localns)
    except Exception:
        hints = _resolve_each(fn, signature, label, localns)
    params: list[tuple[str, Any, Any, str | None]] = []
    bindings: list[tuple[str, str]] = []
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
        # field names are positional so that any parameter name (even one pydantic reserves)
        # works; the alias is the name the model sees
        internal = f"p{index}"
        default = ... if param.default is inspect.Parameter.empty else param.default
        params.append((pname, annotation, default, doc_params.get(pname)))
        bindings.append((pname, internal))
    return _Signature(tuple(params), tuple(bindings), tuple(context_params))


def _argument_model(
    pydantic: Any, model_name: str, label: str, signature: _Signature
) -> tuple[Any, dict[str, Any]]:
    """The pydantic ``TypeAdapter`` of the arguments model and its JSON Schema.

    Raises:
        PrismConfigError: an annotation pydantic cannot describe as JSON Schema (names the
            parameter when one alone is the cause).
    """
    try:
        model = pydantic.create_model(
            model_name,
            # extra="forbid": the schema says additionalProperties: false, so a call with an
            # unknown key is blocked by argument validation with an error the model can correct
            # instead of running with the key dropped
            __config__=pydantic.ConfigDict(
                protected_namespaces=(), arbitrary_types_allowed=False, extra="forbid"
            ),
            **signature.fields(pydantic),
        )
        adapter = pydantic.TypeAdapter(model)
        schema = adapter.json_schema()
    except Exception as exc:
        bad = _find_bad_parameter(pydantic, signature)
        where = f" parameter {bad!r}" if bad else ""
        raise PrismConfigError(
            f"@tool {label}:{where} annotation cannot be described as JSON Schema: {exc}"
        ) from exc
    return adapter, schema


class _LazyAdapter:
    """The pydantic ``TypeAdapter`` of a fast-path tool's argument model, built (and pydantic
    imported) the first time arguments leave the fast path or are prepared for an approval.

    Two threads using it first may both build the model; either result is the same."""

    __slots__ = ("_built", "_label", "_model_name", "_signature")

    def __init__(self, model_name: str, label: str, signature: _Signature) -> None:
        self._model_name = model_name
        self._label = label
        self._signature = signature
        self._built: Any = None

    def _adapter(self) -> Any:
        if self._built is None:
            self._built, _ = _argument_model(
                _import_pydantic(), self._model_name, self._label, self._signature
            )
        return self._built

    def validate_python(self, arguments: Any) -> Any:
        return self._adapter().validate_python(arguments)

    def dump_python(self, value: Any, **options: Any) -> Any:
        return self._adapter().dump_python(value, **options)


def _make_execute(
    fn: Callable[..., Any],
    label: str,
    validate: Callable[[Any], Any],
    signature: _Signature,
    convert: Callable[[Any], dict[str, Any] | None] | None = None,
) -> Callable[..., Any]:
    """The tool's ``execute``: validate the arguments, call ``fn`` with keywords, convert the
    result; async exactly when ``fn`` is. ``convert`` (the fast path) answers first when given;
    ``validate`` decides the arguments it leaves (``None``)."""
    ctx_names = signature.context_params
    binds = signature.bindings

    def kwargs_for(arguments: Any, context: ToolExecutionContext) -> dict[str, Any]:
        kwargs = None if convert is None else convert(arguments)
        if kwargs is None:
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
    return execute


def _is_context_annotation(annotation: Any) -> bool:
    """``ToolExecutionContext`` or ``ToolExecutionContext | None``."""
    if annotation is ToolExecutionContext:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return members == [ToolExecutionContext]
    return False


_PLAIN_RESULTS = frozenset({dict, list, str, int, float, bool, type(None)})


def _convert_result(value: Any) -> Any:
    """JSON conversion for decorated tools (pydantic models, dataclasses).

    A plain ``dict``/``list``/scalar is returned as it is, unchecked: the dispatcher checks every
    result once, and answers a value that is not JSON as ``invalid_tool_result``; so do other
    values that cannot be converted."""
    if type(value) in _PLAIN_RESULTS:
        return value
    try:
        return to_json_value(value)
    except NotJsonError:
        return value


def _resolve_each(
    fn: Callable[..., Any],
    signature: inspect.Signature,
    label: str,
    localns: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Resolve the annotations one by one, to name the parameter whose annotation fails."""
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


def _find_bad_parameter(pydantic: Any, signature: _Signature) -> str | None:
    """The first parameter whose annotation alone cannot be described as JSON Schema."""
    for pname, annotation, _, _ in signature.params:
        try:
            pydantic.TypeAdapter(annotation).json_schema()
        except Exception:
            return pname
    return None


# ---------------------------------------------------------------------------
# Reading a tool function's docstring: its description and one description per parameter.
#
# The ``@tool`` decorator shows the model the docstring up to its first section header or field
# (Google ``Args:``/``Returns:``/... or reST ``:param x:``), and puts each parameter's description
# into the generated JSON Schema. Both Google-style ``Args:`` sections and reST ``:param`` fields
# are understood; continuation lines are joined with single spaces.

_GOOGLE_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|"
    r"Returns?|Yields?|Raises|Examples?|Notes?|Attributes|See Also|Warnings?|Todo|References)"
    r"\s*:\s*$"
)
_GOOGLE_ARGS = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments)\s*:\s*$"
)
_GOOGLE_ITEM = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:(.*)$")
_REST_FIELD = re.compile(r"^:(\w+)(?:\s+([^:]*?))?\s*:(.*)$")


def split_docstring(doc: str | None) -> tuple[str | None, dict[str, str]]:
    """Return (description up to the parameter section, per-parameter descriptions).

    The description is ``None`` when empty; parameters without a description are absent.
    """
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
    """Add the items of every Google ``Args:``-style section to ``params``."""
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
    """Add every reST ``:param x:`` (or ``:arg``/``:key``/...) field to ``params``."""
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
