"""``FunctionTool``: a tool definition that is also the function it was made from.

``@prism.tool`` returns one, so a decorated function stays callable with its own signature — a
unit test calls ``add(2, 3)`` and gets what the function returns (a coroutine to await for an
``async def``) — while agents, registries and ``isinstance(x, ToolDefinition)`` checks see a
``ToolDefinition`` whose ``execute`` validates the model's arguments first.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, TypeVar

from prism.types import ToolDefinition

__all__ = ["FunctionTool"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


class _FromFunction:
    """A read-only attribute of a ``FunctionTool`` instance taken from its function.

    Read on the class itself it does not exist (``AttributeError``), so the class keeps the
    behaviour of an ordinary class under ``inspect`` (its own signature, no unwrapping).
    """

    __slots__ = ("_read", "_name")

    def __init__(self, read: Callable[[Callable[..., Any]], Any]) -> None:
        self._read = read
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            raise AttributeError(self._name)
        return self._read(instance.function)


@dataclass(frozen=True, slots=True)
class FunctionTool(ToolDefinition, Generic[_P, _R]):
    """A [`ToolDefinition`][prism.types.ToolDefinition] made from a Python function by ``@prism.tool``.

    Calling it calls the function unchanged (same arguments, same return value; no argument
    validation, no result conversion); the runtime calls ``execute`` instead. ``inspect``
    sees the function: ``inspect.signature(tool)`` is the function's signature, ``tool.__wrapped__``
    the function and ``tool.__name__`` its name. ``to_dict()`` leaves the function out, like
    ``execute``.
    """

    function: Callable[_P, _R] = field(kw_only=True, repr=False, metadata={"serialize": False})
    """The decorated function, as written."""
    arguments_adapter: Any = field(
        default=None, kw_only=True, repr=False, compare=False, metadata={"serialize": False}
    )
    """The pydantic ``TypeAdapter`` of the argument model ``execute`` validates with (``None``:
    none); ``prepare_arguments()`` uses it to show the arguments as
    the function will receive them."""

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        """Call the function with these arguments and return what it returns."""
        return self.function(*args, **kwargs)

    __signature__ = _FromFunction(inspect.signature)
    __wrapped__ = _FromFunction(lambda function: function)
    __name__ = _FromFunction(lambda function: getattr(function, "__name__", ""))
