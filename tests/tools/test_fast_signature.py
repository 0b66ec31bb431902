"""The pydantic-free ``@tool`` path (``prism.tools._fast_signature``) against pydantic (TOOL-14).

Over a grid of signatures — each scalar type, plain or optional in each spelling, with and
without a default, with and without a docstring description — and of argument values valid and
invalid, the tool built by the fast path and the same tool built by pydantic (the decorator with
the fast path switched off) have the same ``parameters`` (keys in the same order) and their
``execute`` gives the same values of the same types, or raises the same exception with the same
message. A fresh interpreter decorating and calling the simple ``add`` tool does not import
pydantic.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any, Optional

import pytest

from prism.tools import decorator, tool
from prism.tools._fast_signature import fast_signature
from prism.types import ToolExecutionContext

pytest.importorskip("pydantic")

_TYPES = ("int", "float", "str", "bool")
_SPELLINGS = ("{t}", "{t} | None", "Optional[{t}]", "None | {t}")
_DEFAULTS = (None, "None", "1", "0", "2.5", "-0.0", "'x'", "''", "True", "False")
_DESCRIPTIONS = (None, "The value, in full.", "")
_NAMES = ("a", "my_long_name", "x2y", "p0", "title", "café")
_VALUES: tuple[Any, ...] = (
    1,
    0,
    -7,
    2**53,
    -(2**53),
    2**53 + 1,
    2**60,
    10**400,
    1.0,
    1.5,
    -0.0,
    math.nan,
    math.inf,
    "1",
    "1.5",
    "x",
    "",
    "true",
    "\ud800",
    True,
    False,
    None,
    b"x",
    [1],
    {"a": 1},
)


def _source(name: str, annotation: str, default: str | None, description: str | None) -> str:
    default_text = "" if default is None else f" = {default}"
    doc = "Echo the arguments."
    if description is not None:
        doc += f"\n\n    Args:\n        {name}: {description}\n    "
    return (
        f"def echo({name}: {annotation}{default_text}) -> Any:\n"
        f'    """{doc}"""\n'
        f"    return {{'{name}': [type({name}).__name__, repr({name})]}}\n"
    )


def _define(source: str, future: bool = False) -> Callable[..., Any]:
    namespace: dict[str, Any] = {
        "Any": Any,
        "Optional": Optional,
        "ToolExecutionContext": ToolExecutionContext,
    }
    head = "from __future__ import annotations\n" if future else ""
    exec(compile(head + textwrap.dedent(source), "<grid>", "exec"), namespace)
    fn: Callable[..., Any] = namespace["echo"]
    return fn


def _pydantic_tool(monkeypatch: pytest.MonkeyPatch, fn: Callable[..., Any]) -> Any:
    with monkeypatch.context() as patch:
        patch.setattr(decorator, "fast_signature", lambda *args: None)
        return tool(fn)


def _fast_tool(monkeypatch: pytest.MonkeyPatch, fn: Callable[..., Any]) -> Any:
    """``tool(fn)``, checking that it took the fast path."""
    answers: list[Any] = []

    def spy(*args: Any) -> Any:
        answers.append(fast_signature(*args))
        return answers[-1]

    with monkeypatch.context() as patch:
        patch.setattr(decorator, "fast_signature", spy)
        built = tool(fn)
    assert answers and answers[-1] is not None, "took the pydantic path"
    return built


def _outcome(execute: Callable[..., Any], arguments: Any) -> tuple[str, Any]:
    try:
        return "ok", execute(arguments, _CONTEXT)
    except Exception as exc:
        return type(exc).__name__, str(exc)


_CONTEXT: Any = object()


def _argument_sets(name: str) -> Iterator[Any]:
    for value in _VALUES:
        yield {name: value}
    yield {}
    yield {name: 1, "extra": 1}
    yield {"P0": 1}
    yield [1]
    yield None


@pytest.mark.parametrize("spelling", _SPELLINGS)
@pytest.mark.parametrize("type_name", _TYPES)
def test_fast_path_matches_pydantic_over_the_grid(
    monkeypatch: pytest.MonkeyPatch, type_name: str, spelling: str
) -> None:
    annotation = spelling.format(t=type_name)
    for index, (default, description) in enumerate(
        (d, s) for d in _DEFAULTS for s in _DESCRIPTIONS
    ):
        name = _NAMES[index % len(_NAMES)]
        source = _source(name, annotation, default, description)
        fn = _define(source, future=index % 2 == 1)
        fast, slow = _fast_tool(monkeypatch, fn), _pydantic_tool(monkeypatch, fn)
        assert json.dumps(fast.parameters) == json.dumps(slow.parameters), source
        assert fast.description == slow.description
        for arguments in _argument_sets(name):
            got, want = _outcome(fast.execute, arguments), _outcome(slow.execute, arguments)
            assert got == want, (source, arguments)


def test_several_parameters_and_context_match_pydantic(monkeypatch: pytest.MonkeyPatch) -> None:
    fn = _define(
        '''
        def lookup(
            query: str,
            ctx: ToolExecutionContext,
            limit: int = 5,
            ratio: float | None = None,
            exact: bool = False,
            note: Optional[str] = "n",
            when: ToolExecutionContext | None = None,
        ) -> Any:
            """Look something up.

            Args:
                query: What to look for,
                    across all fields.
                limit: Maximum hits.
            """
            return [query, ctx is when, limit, ratio, exact, note, type(ratio).__name__]
        echo = lookup
        '''
    )
    fast, slow = _fast_tool(monkeypatch, fn), _pydantic_tool(monkeypatch, fn)
    assert json.dumps(fast.parameters) == json.dumps(slow.parameters)
    cases: list[Any] = [
        {"query": "q"},
        {"query": "q", "limit": 3, "ratio": 2, "exact": True, "note": None},
        {"query": "q", "ratio": 0.5, "note": "m"},
        {"query": "q", "limit": "3"},
        {"query": "q", "limit": 3.0},
        {"query": "q", "exact": "yes"},
        {"limit": 3},
        {"query": "q", "ctx": 1},
        {"query": "q", "when": None},
    ]
    for arguments in cases:
        assert _outcome(fast.execute, arguments) == _outcome(slow.execute, arguments), arguments


def test_no_parameters_match_pydantic(monkeypatch: pytest.MonkeyPatch) -> None:
    fn = _define("def now() -> Any:\n    return 1\necho = now\n")
    fast, slow = _fast_tool(monkeypatch, fn), _pydantic_tool(monkeypatch, fn)
    assert json.dumps(fast.parameters) == json.dumps(slow.parameters)
    for arguments in ({}, {"a": 1}, None):
        assert _outcome(fast.execute, arguments) == _outcome(slow.execute, arguments)


async def test_async_tool_on_the_fast_path() -> None:
    @tool
    async def double(x: float) -> float:
        return x * 2

    assert await double.execute({"x": 2}, _CONTEXT) == 4.0
    assert await double.execute({"x": "2.5"}, _CONTEXT) == 5.0


@pytest.mark.parametrize(
    "annotation",
    ["list[int]", "int | str", "Optional[int | str]", "Any", "None", "int | float | None"],
)
def test_outside_the_subset(annotation: str) -> None:
    fn = _define(f"def echo(a: {annotation}) -> Any:\n    return a\n")
    assert fast_signature("echo", [("a", fn.__annotations__["a"], ..., None)]) is None


@pytest.mark.parametrize(
    "default", [float("inf"), float("nan"), [1], {"a": 1}, (1,), b"x", object()]
)
def test_defaults_outside_the_subset(default: Any) -> None:
    assert fast_signature("echo", [("a", int, default, None)]) is None


def test_a_simple_tool_does_not_import_pydantic() -> None:
    """Decorating and calling ``add`` in a fresh interpreter leaves pydantic unimported; an
    argument the fast path cannot prove valid imports it and gets pydantic's answer."""
    code = textwrap.dedent(
        '''
        import sys
        import prism

        @prism.tool
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        assert add.execute({"a": 1, "b": 2}, None) == 3
        assert "pydantic" not in sys.modules, "pydantic imported"
        assert add.execute({"a": "1", "b": 2}, None) == 3
        assert "pydantic" in sys.modules
        '''
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
