"""Test doubles and conformance suites for hosts that build on prism (ARCH-6, MOCK-*, DB-9).

Everything here is safe to import in production code, but is meant for tests: the scripted mock
provider and its event constructors, the in-memory stores and ledger, and the conformance suites a
custom ``SessionStore`` / ``CheckpointStore`` / ``RunLedger`` implementation can run against itself.
"""

from __future__ import annotations

from ..ledger import MemoryRunLedger as MemoryRunLedger
from ..providers.base import (
    fold_provider_events as fold_provider_events,
)
from ..providers.base import (
    provider_content_delta as provider_content_delta,
)
from ..providers.base import (
    provider_done as provider_done,
)
from ..providers.base import (
    provider_error as provider_error,
)
from ..providers.base import (
    provider_message_start as provider_message_start,
)
from ..providers.base import (
    provider_text_delta as provider_text_delta,
)
from ..providers.base import (
    provider_thinking_delta as provider_thinking_delta,
)
from ..providers.base import (
    provider_tool_call as provider_tool_call,
)
from ..providers.base import (
    provider_tool_call_delta as provider_tool_call_delta,
)
from ..providers.base import (
    provider_usage as provider_usage,
)
from ..providers.base import (
    tool_call_content as tool_call_content,
)
from ..providers.mock import MockProvider as MockProvider
from ..providers.mock import create_mock_provider as create_mock_provider
from ..runtime.checkpoints import MemoryCheckpointStore as MemoryCheckpointStore
from ..store import MemorySessionStore as MemorySessionStore
from ._conformance import (
    run_checkpoint_store_conformance as run_checkpoint_store_conformance,
)
from ._conformance import (
    run_ledger_conformance as run_ledger_conformance,
)
from ._conformance import (
    run_run_ledger_conformance as run_run_ledger_conformance,
)
from ._conformance import (
    run_session_store_conformance as run_session_store_conformance,
)

__all__ = [
    "MemoryCheckpointStore",
    "MemoryRunLedger",
    "MemorySessionStore",
    "MockProvider",
    "create_mock_provider",
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
    "run_checkpoint_store_conformance",
    "run_ledger_conformance",
    "run_run_ledger_conformance",
    "run_session_store_conformance",
    "tool_call_content",
]
