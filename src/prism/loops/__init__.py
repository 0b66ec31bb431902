"""Loop strategies: the default single-shot loop, resolution and the shared tool-round dispatcher.

``prism.loops`` exports the dispatcher helpers that custom loops reuse:
[`dispatch_tool_calls_in_order()`][prism.loops.dispatch_tool_calls_in_order], [`dispatchable_tool_calls()`][prism.loops.dispatchable_tool_calls] and
[`append_unanswered_rows()`][prism.loops.append_unanswered_rows], plus [`handoff_loop()`][prism.loops.handoff_loop] (the model hands the run over to
another agent), [`single_shot_loop`][prism.loops.single_shot_loop], [`resolve_loop()`][prism.loops.resolve_loop] and
[`resolve_tool_concurrency()`][prism.loops.resolve_tool_concurrency] (also re-exported from ``prism``).

The names are loaded on first access: ``prism.events`` imports ``prism.loops.contracts``, which
initialises this package, so importing the loops eagerly here would be circular.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prism.loops.dispatch import append_unanswered_rows as append_unanswered_rows
    from prism.loops.dispatch import dispatch_tool_calls_in_order as dispatch_tool_calls_in_order
    from prism.loops.dispatch import dispatchable_tool_calls as dispatchable_tool_calls
    from prism.loops.handoff import handoff_loop as handoff_loop
    from prism.loops.resolve import resolve_loop as resolve_loop
    from prism.loops.resolve import resolve_tool_concurrency as resolve_tool_concurrency
    from prism.loops.single_shot import single_shot_loop as single_shot_loop

__all__ = [
    "append_unanswered_rows",
    "dispatch_tool_calls_in_order",
    "dispatchable_tool_calls",
    "handoff_loop",
    "resolve_loop",
    "resolve_tool_concurrency",
    "single_shot_loop",
]

_SOURCES = {
    "append_unanswered_rows": "prism.loops.dispatch",
    "dispatch_tool_calls_in_order": "prism.loops.dispatch",
    "dispatchable_tool_calls": "prism.loops.dispatch",
    "handoff_loop": "prism.loops.handoff",
    "resolve_loop": "prism.loops.resolve",
    "resolve_tool_concurrency": "prism.loops.resolve",
    "single_shot_loop": "prism.loops.single_shot",
}


def __getattr__(name: str) -> object:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module 'prism.loops' has no attribute {name!r}")
    value = getattr(importlib.import_module(source), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
