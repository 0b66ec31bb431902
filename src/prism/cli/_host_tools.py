"""``--tool MODULE:ATTR``: the host's own tools on the ``prism`` command line.

Besides the built-in demo tools (``calculator``, ``clock``), ``--tool`` accepts the import path of
a tool the user wrote, in the form ``MODULE:ATTR`` (``ATTR`` may be dotted, e.g.
``mytools:toolbox.search``):

* a [`ToolDefinition`][prism.types.ToolDefinition] (a ``@prism.tool`` function is one) is used as it is;
* a plain function is turned into a tool with ``prism.tool`` (its type hints give the schema, its
  docstring the description).

The module is imported with the current directory first on ``sys.path`` (what ``python -m``
does), so ``prism run --tool mytools:add`` finds ``./mytools.py``. The spec, not the object, is
what a session stores, so ``prism resume`` and ``prism run --session`` import it again (from the
directory they run in).
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from typing import Any, Final

from prism.errors import PrismError
from prism.tools.decorator import tool
from prism.types import ToolDefinition

__all__ = ["HostToolError", "is_host_tool_spec", "load_host_tool"]

_DOTTED: Final = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


class HostToolError(Exception):
    """A ``--tool MODULE:ATTR`` that cannot be loaded (the message says why)."""


def is_host_tool_spec(value: str) -> bool:
    """Whether ``value`` has the ``MODULE:ATTR`` form (it is not a built-in tool name)."""
    return ":" in value


def _split(spec: str) -> tuple[str, str]:
    module_name, _, attr_path = spec.partition(":")
    if not _DOTTED.match(module_name) or not _DOTTED.match(attr_path):
        raise HostToolError(
            f"--tool {spec}: expected MODULE:ATTR with Python names, e.g. mytools:add"
        )
    return module_name, attr_path


def load_host_tool(spec: str) -> ToolDefinition:
    """Import the tool ``spec`` (``MODULE:ATTR``) names.

    Returns:
        The object itself when it is a ``ToolDefinition``; a plain function wrapped with
        ``prism.tool``.

    Raises:
        HostToolError: a malformed spec, a module that cannot be imported (the error raised
            while importing it is named), a missing attribute, an object that is neither a tool
            definition nor a function, or a function ``prism.tool`` cannot describe.
    """
    module_name, attr_path = _split(spec)
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise HostToolError(
                f"--tool {spec}: no module named {exc.name!r} (looked in {cwd} and sys.path)"
            ) from None
        raise HostToolError(f"--tool {spec}: importing {module_name} failed: {exc}") from None
    except Exception as exc:
        raise HostToolError(
            f"--tool {spec}: importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from None
    target: Any = module
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise HostToolError(
                f"--tool {spec}: {module_name} has no attribute {attr_path!r}"
            ) from None
    if isinstance(target, ToolDefinition):
        return target
    if not (inspect.isfunction(target) or inspect.ismethod(target) or inspect.isbuiltin(target)):
        raise HostToolError(
            f"--tool {spec}: {type(target).__name__} is neither a tool definition (@prism.tool) "
            "nor a function"
        )
    try:
        return _as_tool(target)
    except (PrismError, ImportError) as exc:
        raise HostToolError(f"--tool {spec}: {exc}") from None


def _as_tool(_function: Any) -> ToolDefinition:
    """``prism.tool(_function)``. The decorator resolves postponed annotations with the locals of
    the scope that applies it as well; this scope has no other local that could shadow a name."""
    return tool(_function)
