"""What a provider author needs: the provider protocol, the request, and the provider events.

A provider turns one :class:`ProviderRequest` into an async stream of provider events: at most one
message start, then content deltas and tool calls, optional usage, and exactly one terminal
``done`` or ``error`` event. The ``provider_*`` constructors build those events (the scripted mock
provider in ``prism.testing`` uses them too); :func:`fold_provider_events` folds a stream into the
:class:`ProviderTurnResult` the runtime appends.

The adapters are submodules, imported only when used, each needing its extra:
``prism.providers.openai`` (``openai``), ``prism.providers.anthropic`` (``anthropic``) and
``prism.providers.llama_cpp`` (``local``). This package imports none of them.
"""

# Grouped by topic, not sorted as one block.
# ruff: noqa: I001

# The provider protocol and one request.
from .base import AIProvider as AIProvider
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

# Folding a stream into the turn result.
from ..types import ProviderTurnResult as ProviderTurnResult
from .stream_fold import fold_provider_events as fold_provider_events
from .stream_fold import reconstruct_tool_call_deltas as reconstruct_tool_call_deltas

__all__ = [
    # The provider protocol and one request
    "AIProvider", "ProviderRequest", "ProviderRequestOptions", "merge_provider_options",
    # Provider events
    "ProviderEvent", "ProviderMessageStart", "ProviderContentDelta", "ProviderToolCall",
    "ProviderToolCallDelta", "ProviderUsage", "ProviderDone", "ProviderErrorEvent",
    "ProviderStopReason",
    # Constructors
    "provider_message_start", "provider_content_delta", "provider_text_delta",
    "provider_thinking_delta", "provider_tool_call", "provider_tool_call_delta", "provider_usage",
    "provider_done", "provider_error", "tool_call_content", "tool_call_from_arguments_text",
    # Folding a stream
    "ProviderTurnResult", "fold_provider_events", "reconstruct_tool_call_deltas",
]
