"""Find prism's public names wherever the source tree under test keeps them.

The benchmarks in this folder measure two source trees side by side (see ``ablate.py``): the
current one and a reorganised one, whose names may live in different public modules (test doubles
in ``prism.testing``, provider-author names in ``prism.providers``, everything else at the top of
``prism``). :func:`api` looks each name up in a list of candidate modules, the newer locations
first, and falls back to the top-level namespace, so one benchmark script runs unchanged against
either tree.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

# Candidate modules per name, tried in order; the top-level ``prism`` namespace is always tried
# last. Only public modules are listed, never a private one.
_WHERE: dict[str, tuple[str, ...]] = {
    "create_mock_provider": ("prism.testing", "prism.providers.mock"),
    "provider_done": ("prism.testing", "prism.providers", "prism.providers.base"),
    "provider_text_delta": ("prism.testing", "prism.providers", "prism.providers.base"),
    "provider_tool_call": ("prism.testing", "prism.providers", "prism.providers.base"),
    "MemoryCheckpointStore": ("prism.testing",),
    "MemorySessionStore": ("prism.testing",),
    "SqliteStore": ("prism.stores",),
    "MemoryRunLedger": ("prism.ledger",),
    "PostgresStore": ("prism.stores",),
    "UNLIMITED": ("prism.limits",),
    "RunLimits": ("prism.limits",),
}


def _find(name: str) -> Any:
    for module_name in (*_WHERE.get(name, ()), "prism"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        try:
            return getattr(module, name)
        except AttributeError:
            continue
    raise ImportError(f"prism name {name!r} not found in {(*_WHERE.get(name, ()), 'prism')}")


def api(*names: str) -> SimpleNamespace:
    """Return a namespace holding each of ``names``, found in the tree on ``sys.path``.

    Raises:
        ImportError: a name is in none of its candidate modules.
    """
    return SimpleNamespace(**{name: _find(name) for name in names})
