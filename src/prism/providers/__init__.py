"""What a provider author needs: the provider protocol, the request, and the provider events.

A provider turns one [`ProviderRequest`][prism.providers.ProviderRequest] into an async stream of provider events: at most one
message start, then content deltas and tool calls, optional usage, and exactly one terminal
``done`` or ``error`` event. The ``provider_*`` constructors build those events (the scripted mock
provider in ``prism.testing`` uses them too); [`fold_provider_events()`][prism.providers.fold_provider_events] folds a stream into the
[`ProviderTurnResult`][prism.providers.ProviderTurnResult] the runtime appends.

The adapters are submodules, imported only when used, each needing its extra:
``prism.providers.openai`` (``openai``), ``prism.providers.anthropic`` (``anthropic``) and
``prism.providers.llama_cpp`` (``local``). This package imports none of them up front: after
``import prism``, the attribute ``prism.providers.llama_cpp`` (or ``.openai``, ``.anthropic``)
imports its submodule on first access.

A provider that knows its models says so with [`ProviderDefaults`][prism.providers.ProviderDefaults] (its ``defaults``
attribute, [`DescribedProvider`][prism.providers.DescribedProvider]): the model an agent uses when ``create_agent`` gets no
``model=``, and run defaults such as the tool-round policy of a small model.
[`fallback()`][prism.providers.fallback] (``prism.providers.chain``) chains providers for model fallback.
"""

# Grouped by topic, not sorted as one block.
# ruff: noqa: I001

import importlib
from typing import TYPE_CHECKING

# The provider protocol and one request.
from .base import AIProvider as AIProvider
from .defaults import DescribedProvider as DescribedProvider
from .defaults import ProviderDefaults as ProviderDefaults
from ..types import ProviderRequest as ProviderRequest
from ..types import ProviderRequestOptions as ProviderRequestOptions
from ..types import merge_provider_options as merge_provider_options

# Provider events: the union, its members and the stop reasons of a finished turn.
from ..types import ProviderEvent as ProviderEvent
from ..types import ProviderMessageStart as ProviderMessageStart
from ..types import ProviderContentDelta as ProviderContentDelta
from ..types import ProviderToolCall as ProviderToolCall
from ..types import ProviderToolCallDelta as ProviderToolCallDelta
from ..types import ProviderUsage as ProviderUsage
from ..types import ProviderDone as ProviderDone
from ..types import ProviderErrorEvent as ProviderErrorEvent
from ..types import ProviderStopReason as ProviderStopReason

# Constructors of provider events and tool-call content.
from .base import provider_message_start as provider_message_start
from .base import provider_content_delta as provider_content_delta
from .base import provider_text_delta as provider_text_delta
from .base import provider_thinking_delta as provider_thinking_delta
from .base import provider_tool_call as provider_tool_call
from .base import provider_tool_call_delta as provider_tool_call_delta
from .base import provider_usage as provider_usage
from .base import provider_done as provider_done
from .base import provider_error as provider_error
from .base import tool_call_content as tool_call_content
from .stream_fold import tool_call_from_arguments_text as tool_call_from_arguments_text

# Model fallback: a chain of providers, the next serving when one is unavailable.
from .chain import DEFAULT_FALLBACK_CODES as DEFAULT_FALLBACK_CODES
from .chain import FallbackModel as FallbackModel
from .chain import FallbackPolicy as FallbackPolicy
from .chain import FallbackProvider as FallbackProvider
from .chain import fallback as fallback

# Folding a stream into the turn result.
from ..types import ProviderTurnResult as ProviderTurnResult
from .stream_fold import fold_provider_events as fold_provider_events
from .stream_fold import reconstruct_tool_call_deltas as reconstruct_tool_call_deltas

__all__ = [
    # The provider protocol and one request
    "AIProvider",
    "ProviderRequest",
    "ProviderRequestOptions",
    "merge_provider_options",
    "DescribedProvider",
    "ProviderDefaults",
    # Provider events
    "ProviderEvent",
    "ProviderMessageStart",
    "ProviderContentDelta",
    "ProviderToolCall",
    "ProviderToolCallDelta",
    "ProviderUsage",
    "ProviderDone",
    "ProviderErrorEvent",
    "ProviderStopReason",
    # Constructors
    "provider_message_start",
    "provider_content_delta",
    "provider_text_delta",
    "provider_thinking_delta",
    "provider_tool_call",
    "provider_tool_call_delta",
    "provider_usage",
    "provider_done",
    "provider_error",
    "tool_call_content",
    "tool_call_from_arguments_text",
    # Model fallback
    "DEFAULT_FALLBACK_CODES",
    "FallbackModel",
    "FallbackPolicy",
    "FallbackProvider",
    "fallback",
    # Folding a stream
    "ProviderTurnResult",
    "fold_provider_events",
    "reconstruct_tool_call_deltas",
]

if TYPE_CHECKING:
    from . import anthropic as anthropic
    from . import llama_cpp as llama_cpp
    from . import openai as openai

_ADAPTERS = frozenset({"anthropic", "llama_cpp", "openai"})


def __getattr__(name: str) -> object:
    """Import an adapter submodule (``openai``, ``anthropic``, ``llama_cpp``) on first access."""
    if name in _ADAPTERS:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*__all__, *_ADAPTERS})
