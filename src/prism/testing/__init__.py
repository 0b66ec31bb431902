"""Test doubles and conformance suites for hosts that build on prism.

Everything here is safe to import in production code, but is meant for tests: the scripted mock
provider and the provider-event constructors that script it, the in-memory session store,
checkpoint store and run ledger, and the conformance suites a custom ``SessionStore`` /
``CheckpointStore`` / ``RunLedger`` / ``InspectionReader`` implementation runs against itself
(loaded on first access).
"""

# Grouped by topic, not sorted as one block.
# ruff: noqa: I001

from typing import TYPE_CHECKING

# The scripted mock provider.
from ..providers.mock import MockProvider as MockProvider
from ..providers.mock import create_mock_provider as create_mock_provider

# Provider events that script it (also in prism.providers).
from ..providers.stream_fold import fold_provider_events as fold_provider_events
from ..providers.base import provider_content_delta as provider_content_delta
from ..providers.base import provider_done as provider_done
from ..providers.base import provider_error as provider_error
from ..providers.base import provider_message_start as provider_message_start
from ..providers.base import provider_text_delta as provider_text_delta
from ..providers.base import provider_thinking_delta as provider_thinking_delta
from ..providers.base import provider_tool_call as provider_tool_call
from ..providers.base import provider_tool_call_delta as provider_tool_call_delta
from ..providers.base import provider_usage as provider_usage
from ..providers.base import tool_call_content as tool_call_content

# In-memory stores: sessions, checkpoints and the run ledger.
from ..ledger import MemoryRunLedger as MemoryRunLedger
from ..checkpoints import MemoryCheckpointStore as MemoryCheckpointStore
from ..store import MemorySessionStore as MemorySessionStore

# Conformance suites for a store of your own: imported on first access (see __getattr__).
if TYPE_CHECKING:
    from ._conformance import run_checkpoint_store_conformance as run_checkpoint_store_conformance
    from ._conformance import run_inspection_conformance as run_inspection_conformance
    from ._conformance import run_ledger_conformance as run_ledger_conformance
    from ._conformance import run_run_ledger_conformance as run_run_ledger_conformance
    from ._conformance import run_session_store_conformance as run_session_store_conformance

__all__ = [
    # The scripted mock provider
    "MockProvider",
    "create_mock_provider",
    # Provider events
    "fold_provider_events",
    "provider_content_delta",
    "provider_done",
    "provider_error",
    "provider_message_start",
    "provider_text_delta",
    "provider_thinking_delta",
    "provider_tool_call",
    "provider_tool_call_delta",
    "provider_usage",
    "tool_call_content",
    # In-memory stores
    "MemoryCheckpointStore",
    "MemoryRunLedger",
    "MemorySessionStore",
    # Conformance suites
    "run_checkpoint_store_conformance",
    "run_inspection_conformance",
    "run_ledger_conformance",
    "run_run_ledger_conformance",
    "run_session_store_conformance",
]

_CONFORMANCE = frozenset(
    {
        "run_checkpoint_store_conformance",
        "run_inspection_conformance",
        "run_ledger_conformance",
        "run_run_ledger_conformance",
        "run_session_store_conformance",
    }
)


def __getattr__(name: str) -> object:
    """Bind a conformance suite on first access: only a store's own tests use them, so a program
    that imports this package for the mock provider does not load them (start-up cost)."""
    if name in _CONFORMANCE:
        from . import _conformance

        value = getattr(_conformance, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}", name=name)


def __dir__() -> list[str]:
    return sorted({*__all__, *(n for n in globals() if n[:2] == "__" == n[-2:])})
