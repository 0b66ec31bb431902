"""Approvals through MCP elicitation: a run that waits for a tool approval asks the client.

When the client declared the ``elicitation`` capability and the connection can carry a request
from the server (the handshake protocol revisions; not the sessionless 2026 revision), each
approval the run waits for becomes one ``elicitation/create`` form: the message names the agent,
the tool and the arguments the call will run with (as the approval shows them — redacted, at most
4096 bytes), and the form has one optional field, ``reason``. The client's answer decides:

* ``accept`` → ``allow_once`` (the form's ``reason`` kept with the decision);
* ``decline`` → ``reject_once`` (the model is told the call was refused);
* ``cancel``, no answer within the approval wait, or a failed request → no decision: the run stays
  suspended and the call returns "waiting for approval" with its run id.

On the sessionless 2026 revision, which has no requests from the server, a client that declared
``elicitation`` gets the same forms in an ``InputRequiredResult`` (keyed by approval id) instead
of the call's result; it answers by calling the tool again with the responses and the echoed
``request_state`` — the run, its conversation and the client, signed with a key of this process
(a state another process or client made is refused). The answers decide as above; an approval
without one leaves the run waiting.

A decision is recorded first (``prism.runtime.durable.record_decisions``): when an operator
decided the same approval first (the inspector, another server), theirs wins and the run goes on
with it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from prism.mcp.serving._tools import ServedAgent
from prism.runtime.durable import PendingDecision, RunDecision

__all__ = [
    "REASON_FIELD",
    "answered",
    "approval_message",
    "ask_approvals",
    "can_ask_in_result",
    "can_elicit",
    "input_required",
    "seal",
    "unseal",
]

_log = logging.getLogger("prism.mcp.serving")

REASON_FIELD: Final = "reason"
"""The elicitation form's one (optional) field."""
_FORM: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        REASON_FIELD: {
            "type": "string",
            "title": "Reason",
            "description": "Why you allow or refuse the call (optional; kept with the decision).",
        }
    },
}
_REASON_LIMIT: Final = 2048


def _cut(text: str) -> str:
    """``text`` cut to the 2048 UTF-8 bytes a decision's reason may hold."""
    return text.encode("utf-8")[:_REASON_LIMIT].decode("utf-8", "ignore")


def can_elicit(ctx: Any) -> bool:
    """Whether the client of the request ``ctx`` answers elicitation requests on it."""
    session = getattr(ctx, "session", None)
    if session is None or not getattr(session, "can_send_request", False):
        return False
    capabilities = getattr(session, "client_capabilities", None)
    return getattr(capabilities, "elicitation", None) is not None


def approval_message(served: ServedAgent, pending: PendingDecision) -> str:
    """The text of one approval's elicitation."""
    tool = pending.tool_name or pending.scope.tool_name or "a tool"
    arguments = pending.arguments if pending.arguments is not None else "(not shown)"
    cut = " (cut at 4096 bytes)" if pending.arguments_truncated else ""
    child = pending.subagent
    who = f" (through its sub-agent {child.get('agent')})" if child else ""
    return (
        f"The agent {served.name} wants to call the tool {tool}{who} with these arguments"
        f"{cut}:\n{arguments}\n\nAccept to allow this call once; decline to refuse it."
    )


def _decision(item: PendingDecision, answer: object, by: str) -> RunDecision | None:
    """The decision an elicitation answer makes (``None``: no decision)."""
    action = getattr(answer, "action", None)
    if action not in ("accept", "decline"):
        return None
    content = getattr(answer, "content", None) or {}
    reason = content.get(REASON_FIELD) if isinstance(content, dict) else None
    text = _cut(reason.strip()) if isinstance(reason, str) and reason.strip() else None
    if action == "accept":
        return RunDecision(item.approval_id, "allow_once", text, by=by)
    return RunDecision(item.approval_id, "reject_once", text or "refused by the MCP client", by=by)


async def ask_approvals(
    ctx: Any,
    served: ServedAgent,
    pending: Sequence[PendingDecision],
    *,
    wait_s: float,
    by: str,
    redact: Callable[[str], str] = str,
) -> tuple[list[RunDecision], bool]:
    """Ask the client about each approval in turn (each message passed through ``redact``, the
    server's secrets on top of the agent's).

    Returns:
        The decisions answered (accept or decline), and whether every approval was answered;
        the asking stops at the first one cancelled, unanswered within ``wait_s`` seconds or
        failed.
    """
    import anyio

    decisions: list[RunDecision] = []
    for item in pending:
        answer: Any = None
        try:
            with anyio.move_on_after(wait_s):
                answer = await ctx.session.elicit_form(
                    redact(approval_message(served, item)),
                    _FORM,
                    related_request_id=ctx.request_id,
                )
        except Exception as exc:  # the client refused the request, or the channel closed
            _log.info("elicitation for approval %s failed: %s", item.approval_id, exc)
        decision = _decision(item, answer, by)
        if decision is None:
            return decisions, False
        decisions.append(decision)
    return decisions, True


# --------------------------------------------------------------------------- the 2026 revision


def can_ask_in_result(ctx: Any) -> bool:
    """Whether the client speaks the 2026 revision and declared elicitation: it is asked with an
    ``InputRequiredResult`` and answers by calling the tool again."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    if getattr(ctx, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = getattr(getattr(ctx, "session", None), "client_capabilities", None)
    return getattr(capabilities, "elicitation", None) is not None


def seal(key: bytes, run_id: str, session_id: str, principal: str | None) -> str:
    """The ``request_state`` of an input-required result: the run, its conversation and the
    principal asked, signed with this process's key."""
    body = f"{run_id}|{session_id}|{principal or ''}"
    return body + "|" + hmac.new(key, body.encode("utf-8"), hashlib.sha256).hexdigest()


def unseal(key: bytes, state: str, principal: str | None) -> tuple[str, str] | None:
    """The run and conversation of a ``request_state`` this process sealed for ``principal``,
    else ``None``."""
    body, _, signature = state.rpartition("|")
    expected = hmac.new(key, body.encode("utf-8"), hashlib.sha256).hexdigest()
    parts = body.split("|")
    if not hmac.compare_digest(signature, expected) or len(parts) != 3:
        return None
    if parts[2] != (principal or ""):
        return None
    return parts[0], parts[1]


def input_required(
    served: ServedAgent,
    pending: Sequence[PendingDecision],
    *,
    state: str,
    redact: Callable[[str], str] = str,
) -> Any:
    """The ``InputRequiredResult`` that asks for ``pending`` (one form per approval, keyed by its
    approval id)."""
    import mcp_types as types

    requests: dict[str, Any] = {
        item.approval_id: types.ElicitRequest(
            params=types.ElicitRequestFormParams(
                message=redact(approval_message(served, item)), requested_schema=_FORM
            )
        )
        for item in pending
    }
    return types.InputRequiredResult(input_requests=requests, request_state=state)


def answered(
    pending: Sequence[PendingDecision], responses: Mapping[str, object], *, by: str
) -> tuple[list[RunDecision], bool]:
    """The decisions the input responses of a retried call make, and whether every pending
    approval got one."""
    decisions = [
        decision
        for item in pending
        if (decision := _decision(item, responses.get(item.approval_id), by)) is not None
    ]
    return decisions, len(decisions) == len(pending)
