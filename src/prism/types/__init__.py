"""Core data contracts, by concept.

Every type here is a frozen, slotted dataclass with ``to_dict()``/``from_dict()``. Sequences inside
values are tuples (a list given to a constructor is converted); mappings are kept as given.

The package is a table of contents; each name lives in the module of its concept:

* JSON values and the failure records (``ErrorInfo``, ``ProviderFailure``, ``RunLimitBreach``,
  ``GuardrailRecord``) live below [`prism.errors`][prism.errors], in ``prism._json`` and
  ``prism._failure_records``, so that exceptions can carry them;
* ``_content`` (message parts), ``_messages``, ``_usage``, ``_models`` (model configuration and
  provider options), ``_tools``, ``_requests``, ``_provider_stream`` (stream events and the result
  of one attempt) and ``_runs`` (run references, ownership, ``RunResult``).
"""

from prism._failure_records import ErrorInfo as ErrorInfo
from prism._failure_records import GuardrailAction as GuardrailAction
from prism._failure_records import GuardrailRecord as GuardrailRecord
from prism._failure_records import GuardrailStage as GuardrailStage
from prism._failure_records import ProviderFailure as ProviderFailure
from prism._failure_records import RunLimitBreach as RunLimitBreach
from prism._json import JsonValue as JsonValue
from prism._json import canonical_json as canonical_json
from prism._json import is_json_value as is_json_value

from ._content import ContentBlock as ContentBlock
from ._content import ImageContent as ImageContent
from ._content import TextContent as TextContent
from ._content import ThinkingContent as ThinkingContent
from ._content import ToolAuthority as ToolAuthority
from ._content import ToolCallContent as ToolCallContent
from ._content import ToolCallDeltaContent as ToolCallDeltaContent
from ._content import ToolResultContent as ToolResultContent
from ._messages import AgentInput as AgentInput
from ._messages import Message as Message
from ._messages import MessageRole as MessageRole
from ._messages import assistant_message as assistant_message
from ._messages import message_text as message_text
from ._messages import system_message as system_message
from ._messages import to_messages as to_messages
from ._messages import tool_result_message as tool_result_message
from ._messages import user_message as user_message
from ._models import ModelCapabilities as ModelCapabilities
from ._models import ModelConfig as ModelConfig
from ._models import ModelLimits as ModelLimits
from ._models import ModelPricing as ModelPricing
from ._models import NamedToolChoice as NamedToolChoice
from ._models import ProviderRequestOptions as ProviderRequestOptions
from ._models import StructuredOutputOptions as StructuredOutputOptions
from ._models import ToolChoice as ToolChoice
from ._models import check_tool_choice as check_tool_choice
from ._models import merge_provider_options as merge_provider_options
from ._options import _Options as _Options
from ._provider_stream import ProviderContentDelta as ProviderContentDelta
from ._provider_stream import ProviderDone as ProviderDone
from ._provider_stream import ProviderErrorEvent as ProviderErrorEvent
from ._provider_stream import ProviderEvent as ProviderEvent
from ._provider_stream import ProviderMessageStart as ProviderMessageStart
from ._provider_stream import ProviderStopReason as ProviderStopReason
from ._provider_stream import ProviderToolCall as ProviderToolCall
from ._provider_stream import ProviderToolCallDelta as ProviderToolCallDelta
from ._provider_stream import ProviderTurnResult as ProviderTurnResult
from ._provider_stream import ProviderUsage as ProviderUsage
from ._provider_stream import provider_event_from_dict as provider_event_from_dict
from ._requests import ContextBlock as ContextBlock
from ._requests import ProviderRequest as ProviderRequest
from ._runs import AgentRunRef as AgentRunRef
from ._runs import OwnershipScope as OwnershipScope
from ._runs import RunResult as RunResult
from ._runs import RunStatus as RunStatus
from ._runs import RunStopReason as RunStopReason
from ._tools import DelegatingRun as DelegatingRun
from ._tools import ProgressCallback as ProgressCallback
from ._tools import ToolDefinition as ToolDefinition
from ._tools import ToolExecutionContext as ToolExecutionContext
from ._tools import ToolResult as ToolResult
from ._usage import Usage as Usage

__all__ = [
    "AgentInput",
    "AgentRunRef",
    "ContentBlock",
    "ContextBlock",
    "ErrorInfo",
    "GuardrailAction",
    "GuardrailRecord",
    "GuardrailStage",
    "ImageContent",
    "JsonValue",
    "Message",
    "MessageRole",
    "ModelCapabilities",
    "ModelConfig",
    "ModelLimits",
    "OwnershipScope",
    "ProgressCallback",
    "ProviderContentDelta",
    "ProviderDone",
    "ProviderErrorEvent",
    "ProviderEvent",
    "ProviderFailure",
    "ProviderMessageStart",
    "ProviderRequest",
    "ProviderRequestOptions",
    "ProviderStopReason",
    "ProviderToolCall",
    "ProviderToolCallDelta",
    "ProviderTurnResult",
    "ProviderUsage",
    "RunLimitBreach",
    "RunResult",
    "RunStatus",
    "RunStopReason",
    "ModelPricing",
    "NamedToolChoice",
    "StructuredOutputOptions",
    "ToolChoice",
    "check_tool_choice",
    "TextContent",
    "ThinkingContent",
    "ToolAuthority",
    "ToolCallContent",
    "ToolCallDeltaContent",
    "ToolDefinition",
    "ToolExecutionContext",
    "DelegatingRun",
    "ToolResult",
    "ToolResultContent",
    "Usage",
    "assistant_message",
    "canonical_json",
    "is_json_value",
    "merge_provider_options",
    "message_text",
    "provider_event_from_dict",
    "system_message",
    "to_messages",
    "tool_result_message",
    "user_message",
]
