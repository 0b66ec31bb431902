"""The tools of an agent, by name, in registration order.

A [`ToolRegistry`][prism.tools.registry.ToolRegistry] is what an agent and a run hand to the dispatcher as "the tools that
exist"; filters (``prism.tools.filters``) narrow it per run without copying it.
"""

from __future__ import annotations

import builtins
import inspect
from collections.abc import Iterable, Iterator
from typing import Literal

from prism.errors import PrismConfigError
from prism.types import ToolDefinition

__all__ = ["ToolRegistry", "create_tool_registry"]


class ToolRegistry:
    """Tools by name, in registration order.

    Args:
        tools: Initial tools (``ToolDefinition`` objects, or another registry's tools).
        duplicate: ``"error"`` raises on a second tool with the same name; ``"replace"`` keeps the
            last registration in the first registration's position.

    Raises:
        PrismConfigError: ``duplicate`` is not ``"error"``/``"replace"``; a tool is not a
            ``ToolDefinition``, has an empty name or a ``needs_approval`` that is neither a bool
            nor callable; a duplicate name under ``"error"`` (message ``Duplicate tool:
            <name>``). Code ``ERR_PRISM_CONFIG``.
    """

    __slots__ = ("_cache", "_duplicate", "_tools")

    def __init__(
        self,
        tools: Iterable[ToolDefinition] = (),
        *,
        duplicate: Literal["error", "replace"] = "error",
    ) -> None:
        if duplicate not in ("error", "replace"):
            raise PrismConfigError(f"duplicate must be 'error' or 'replace', got {duplicate!r}")
        self._duplicate = duplicate
        self._tools: dict[str, ToolDefinition] = {}
        self._cache: tuple[ToolDefinition, ...] | None = ()
        for t in tools.list() if isinstance(tools, ToolRegistry) else tools:
            self.register(t)

    def register(self, tool: ToolDefinition) -> None:
        """Add ``tool`` (see the class docstring for duplicates).

        Raises:
            PrismConfigError: not a ``ToolDefinition`` (a plain function: the message says to
                decorate it with ``@prism.tool``), empty name, a ``needs_approval`` that
                is neither a bool nor callable, or a duplicate under ``duplicate="error"``.
        """
        if not isinstance(tool, ToolDefinition):
            if callable(tool) and not isinstance(tool, type):
                label = getattr(tool, "__name__", None) or "fn"
                raise PrismConfigError(
                    f"tools must be ToolDefinition objects, got {type(tool).__name__} {label}: "
                    f"decorate it with @prism.tool (or pass prism.tool({label}))"
                )
            raise PrismConfigError(
                f"tools must be ToolDefinition objects, got {type(tool).__name__}"
            )
        name = tool.name
        if not isinstance(name, str) or not name:
            raise PrismConfigError("tool name must be a non-empty string")
        needs_approval = tool.needs_approval
        if not isinstance(needs_approval, bool) and (
            not callable(needs_approval) or inspect.iscoroutinefunction(needs_approval)
        ):
            raise PrismConfigError(
                f"tool {name}: needs_approval must be a bool or a sync callable taking the "
                f"call and returning a bool, got {type(needs_approval).__name__}"
            )
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
    """Build a [`ToolRegistry`][prism.tools.registry.ToolRegistry].

    Args:
        tools: Tools to register, in order (a registry is copied).
        duplicate: ``"error"`` (default) or ``"replace"``.

    Raises:
        PrismConfigError: see [`ToolRegistry`][prism.tools.registry.ToolRegistry] (e.g. ``Duplicate tool: <name>``).
    """
    return ToolRegistry(tools, duplicate=duplicate)
