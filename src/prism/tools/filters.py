"""Tool filters: which of the registered tools a run may use, by name.

A run's effective filters are the agent's and the run's together; a tool passes only when every
filter lets it through. A call to a filtered-out tool is answered as blocked (``tool_denied``) by
the dispatcher, and filtered-out tools are not shown to the model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from prism._serde import Serializable
from prism.errors import PrismConfigError
from prism.tools.registry import ToolRegistry
from prism.types import ToolDefinition

__all__ = ["ToolFilter", "filter_tools", "is_tool_allowed", "normalize_tool_filters"]


def _names(value: object, label: str) -> tuple[str, ...]:
    """``value`` as a tuple of tool names, or ``PrismConfigError`` naming the field ``label``."""
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
    """Narrow the tools of a run by name.

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
    """Return ``filters`` as a tuple (``None`` → ``()``), checking each item.

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
    """Whether ``name`` passes every filter: no filter denies it and every filter with a
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
    """Return the tools that pass every filter, in their original order.

    Args:
        tools: Tools or a registry.
        filters: One ``ToolFilter``, a sequence of them (all must pass), or ``None`` (keep all).
    """
    items = tools.tools if isinstance(tools, ToolRegistry) else tuple(tools)
    if not filters:
        return items
    normalized = normalize_tool_filters(filters)
    return tuple(t for t in items if is_tool_allowed(t.name, normalized))
