"""Run references, ownership and the result of one run leg."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from prism._failure_records import ErrorInfo, RunLimitBreach
from prism._serde import Serializable
from prism.types._content import ToolCallContent, ToolResultContent, _text_of
from prism.types._messages import Message
from prism.types._options import _Options
from prism.types._provider_stream import ProviderStopReason
from prism.types._usage import Usage

__all__ = [
    "AgentRunRef",
    "OwnershipScope",
    "RunResult",
    "RunStatus",
    "RunStopReason",
]


@dataclass(frozen=True, slots=True)
class AgentRunRef(Serializable):
    """Reference to a run."""

    run_id: str
    """Run id."""
    session_id: str | None = None
    """Session id, when known."""


@dataclass(frozen=True, slots=True)
class OwnershipScope(_Options):
    """Tenant/account/user a run belongs to."""

    tenant_id: str | None = None
    """Tenant id."""
    account_id: str | None = None
    """Account id."""
    user_id: str | None = None
    """User id."""


RunStatus: TypeAlias = Literal["succeeded", "failed", "aborted", "suspended", "denied"]
"""Terminal status of a run leg."""
RunStopReason: TypeAlias = Literal[
    "turn_limit", "host_policy", "token_limit", "refusal", "tool_round_limit"
]
"""Why a succeeded run stopped early. ``"tool_round_limit"``: the tool rounds ran out
(``limits.max_tool_rounds`` or ``answer_after_tool_rounds``) before the model answered in text —
undispatched calls were answered with "not dispatched" rows, or the forced answer was empty."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult(Serializable):
    """Result of one run leg.

    ``to_dict()`` passes ``artifact`` through unchanged (the host's ``T``); ``run_state``
    and ``interruption`` are serialised through their ``to_dict()`` when they have one.
    """

    run_id: str
    """Run id."""
    session_id: str
    """Session id."""
    status: RunStatus
    """Terminal status of the leg."""
    stop_reason: RunStopReason | None = None
    """Why a succeeded run stopped (turn policy or ``ctx.finish_reason``)."""
    stop_detail: str | None = None
    """Detail of a turn-policy stop."""
    usage: Usage | None = None
    """Aggregated usage of the leg."""
    messages: tuple[Message, ...] = ()
    """Every message this leg appended to the store, in order, as stored (redacted)."""
    artifact: Any = None
    """The accepted artifact (``ctx.artifact``) on success, else ``None``."""
    run_state: Any = None
    """``AgentRunState`` of a durable run, else ``None``."""
    error: ErrorInfo | None = None
    """Redacted failure description."""
    leaf_id: str | None = None
    """Store leaf entry id after the leg."""
    limit: RunLimitBreach | None = None
    """The limit breach, when one ended the run."""
    abort_reason: str | None = None
    """``str(signal.reason)`` when aborted without a breach."""
    interruption: Any = None
    """``AgentRunInterruption`` of a suspended/denied run, else ``None``."""
    provider_stop_reason: ProviderStopReason | None = None
    """Why the leg's last provider turn stopped (``"end_turn"``, ``"tool_use"``,
    ``"max_tokens"`` …, as the provider reported it), beside the run-level ``stop_reason``:
    ``"max_tokens"`` means the final reply was cut by the token cap. ``None`` when no provider
    turn finished or the provider reported none."""

    if TYPE_CHECKING:

        def __init__(
            self,
            *,
            run_id: str,
            session_id: str,
            status: RunStatus,
            stop_reason: RunStopReason | None = None,
            stop_detail: str | None = None,
            usage: Usage | None = None,
            messages: Sequence[Message] = (),
            artifact: Any = None,
            run_state: Any = None,
            error: ErrorInfo | None = None,
            leaf_id: str | None = None,
            limit: RunLimitBreach | None = None,
            abort_reason: str | None = None,
            interruption: Any = None,
            provider_stop_reason: ProviderStopReason | None = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        if not isinstance(self.messages, tuple):
            object.__setattr__(self, "messages", tuple(self.messages))

    def to_dict(self) -> dict[str, Any]:
        """Return the dict form, with ``artifact`` passed through unchanged."""
        out = Serializable.to_dict(self)
        if self.artifact is not None:
            out["artifact"] = self.artifact
        return out

    @property
    def message(self) -> Message | None:
        """The last assistant message among ``messages``, or ``None``."""
        for msg in reversed(self.messages):
            if msg.role == "assistant":
                return msg
        return None

    @property
    def text(self) -> str:
        """Text of ``message``, or ``""``."""
        msg = self.message
        return "" if msg is None else _text_of(msg.content)

    @property
    def tool_calls(self) -> tuple[ToolCallContent, ...]:
        """Every tool call the model made in this leg, in order: the ``ToolCallContent`` parts
        of the assistant messages among ``messages`` (``.id``, ``.name``, ``.arguments``; as
        stored, so redacted)."""
        return tuple(
            part
            for msg in self.messages
            if msg.role == "assistant"
            for part in msg.content
            if isinstance(part, ToolCallContent)
        )

    @property
    def tool_results(self) -> tuple[ToolResultContent, ...]:
        """Every tool result of this leg, in order: the ``ToolResultContent`` parts of the tool
        messages among ``messages`` (``.tool_call_id`` pairs it with its call; ``.result`` or
        ``.error``)."""
        return tuple(
            part
            for msg in self.messages
            if msg.role == "tool"
            for part in msg.content
            if isinstance(part, ToolResultContent)
        )
