"""A run's outcome as an MCP tool result.

=========================  ============  ==================================================
outcome                    ``isError``   content
=========================  ============  ==================================================
succeeded                  false         the answer (the artifact as JSON text when there is
                                         one, also in ``structuredContent``), then a note with
                                         the ``session_id`` that continues the conversation
failed / aborted / denied  true          ``"<code>: <message>"`` (redacted), the note
waiting for approval       false (true   ``"Waiting for approval …"``: the tool and the
                           when the      arguments that will run, the ``run_id`` and how to
                           tool has an   collect the answer (``<name>_result``)
                           outputSchema)
still running              false         ``"Still running …"`` (``<name>_result`` only)
refused                    true          ``"<code>: <message>"`` (an unknown or another
                                         client's session or run, bad arguments, a busy session)
=========================  ============  ==================================================

Every result's ``_meta`` carries ``prism/status`` (``succeeded``, ``failed``, ``aborted``,
``denied``, ``waiting_for_approval``, ``running``, ``refused``) and, when known,
``prism/run_id``, ``prism/session_id``, ``prism/usage`` (the run's usage and cost),
``prism/error`` (``{"code", "message"}``) and ``prism/pending`` (the approvals a run waits for).
A waiting result of a tool with an ``outputSchema`` is an error result because it has no
structured content to give.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import mcp_types as types

from prism._json import JsonValue
from prism._serde import to_json_value
from prism.errors import AgentRunError
from prism.mcp.serving._tools import SESSION_ARGUMENT, ServedAgent
from prism.redaction import SecretRedactor
from prism.types import RunResult, Usage, message_text

__all__ = [
    "ERR_PRISM_MCP_ARGUMENTS",
    "ERR_PRISM_MCP_DENIED",
    "ERR_PRISM_MCP_REFUSED",
    "Outcome",
    "failure_outcome",
    "outcome_of",
    "pending_of",
    "refused",
    "running",
    "tool_result",
    "waiting",
]

ERR_PRISM_MCP_REFUSED: Final = "ERR_PRISM_MCP_REFUSED"
"""A call names a session or run this client cannot use: unknown, or another client's (the two
are not told apart)."""
ERR_PRISM_MCP_ARGUMENTS: Final = "ERR_PRISM_MCP_ARGUMENTS"
"""A call's arguments do not fit the tool's input schema."""
ERR_PRISM_MCP_DENIED: Final = "ERR_PRISM_MCP_DENIED"
"""The run ended denied: an operator denied its waiting tool calls (``decision="deny"``)."""

Outcome = dict[str, JsonValue]
"""A run's outcome as kept in its ``result:`` record: ``run_id``, ``session_id``, ``status``,
``text``, ``artifact`` (absent when none), ``usage``, ``error`` (``{"code", "message"}``)."""


def _redact(value: Any, redactor: SecretRedactor | None) -> Any:
    return value if redactor is None else redactor.redact(value)


def _answer_text(result: RunResult) -> str:
    for message in reversed(result.messages):
        if message.role == "assistant":
            return message_text(message)
    return ""


def _json_artifact(artifact: object) -> JsonValue:
    dump = getattr(artifact, "model_dump", None)
    value: JsonValue = dump(mode="json") if callable(dump) else to_json_value(artifact)
    return value


def outcome_of(
    result: RunResult,
    *,
    redactor: SecretRedactor | None,
    code: str | None = None,
    message: str | None = None,
) -> Outcome:
    """The outcome of a finished leg (``succeeded``, ``failed``, ``aborted`` or ``denied``);
    ``code``/``message``: the ``AgentRunError``'s, for a failed or aborted one."""
    out: Outcome = {
        "run_id": result.run_id,
        "session_id": result.session_id,
        "status": result.status,
        "text": _answer_text(result),
        "usage": (result.usage or Usage()).to_dict(),
    }
    if result.status == "succeeded" and result.artifact is not None:
        out["artifact"] = _json_artifact(result.artifact)
    if result.stop_reason is not None:
        out["stop_reason"] = result.stop_reason
    if result.status != "succeeded":
        error = result.error
        found = code or (error.code if error is not None else None)
        if result.status == "denied":
            found, text = ERR_PRISM_MCP_DENIED, "an operator denied the run's tool call"
        else:
            text = message or (error.message if error is not None else f"the run {result.status}")
        out["error"] = {"code": found or "ERR_PRISM_RUN_FAILED", "message": text}
    redacted: Outcome = _redact(out, redactor)
    return redacted


def failure_outcome(
    exc: AgentRunError, *, redactor: SecretRedactor | None, session_id: str
) -> Outcome:
    """The outcome of a run that raised ``exc`` (its result's, with the error's code)."""
    result = exc.result
    if isinstance(result, RunResult):
        return outcome_of(result, redactor=redactor, code=exc.code, message=str(exc))
    out: Outcome = {
        "run_id": str(getattr(result, "run_id", "")),
        "session_id": session_id,
        "status": str(getattr(result, "status", "failed")),
        "text": "",
        "error": {"code": exc.code, "message": str(exc)},
    }
    redacted: Outcome = _redact(out, redactor)
    return redacted


def _note(session_id: object, run_id: object) -> types.TextContent:
    return types.TextContent(
        text=f"[{SESSION_ARGUMENT}: {session_id} — pass it as {SESSION_ARGUMENT} to continue "
        f"this conversation; run_id: {run_id}]"
    )


def _meta(status: str, **fields: object) -> dict[str, Any]:
    meta: dict[str, Any] = {"prism/status": status}
    for key, value in fields.items():
        if value is not None:
            meta[f"prism/{key}"] = value
    return meta


def tool_result(outcome: Mapping[str, Any], served: ServedAgent) -> types.CallToolResult:
    """The MCP result of a finished run's outcome."""
    status = str(outcome.get("status"))
    run_id, session_id = outcome.get("run_id"), outcome.get("session_id")
    meta = _meta(
        status,
        run_id=run_id,
        session_id=session_id,
        usage=outcome.get("usage"),
        error=outcome.get("error"),
        stop_reason=outcome.get("stop_reason"),
    )
    error = outcome.get("error")
    if status != "succeeded" and isinstance(error, Mapping):
        text = f"{error.get('code')}: {error.get('message')}"
        return types.CallToolResult(
            content=[types.TextContent(text=text), _note(session_id, run_id)],
            is_error=True,
            _meta=meta,
        )
    structured: dict[str, JsonValue] | None = None
    text = str(outcome.get("text") or "")
    if "artifact" in outcome:
        artifact: JsonValue = outcome["artifact"]
        structured = served.structured(artifact)
        text = json.dumps(artifact, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(text=text), _note(session_id, run_id)],
        structured_content=structured,
        _meta=meta,
    )


def pending_of(interruption: object) -> list[dict[str, JsonValue]]:
    """The approvals a suspended run waits for: ``{"approval_id", "tool", "arguments"}`` (the
    arguments as the approval shows them: redacted, capped JSON text)."""
    out: list[dict[str, JsonValue]] = []
    for pending in getattr(interruption, "pending_decisions", ()) or ():
        out.append(
            {
                "approval_id": pending.approval_id,
                "tool": pending.tool_name or pending.scope.tool_name,
                "arguments": pending.arguments,
            }
        )
    return out


def waiting(
    served: ServedAgent,
    *,
    run_id: str,
    session_id: str,
    pending: Sequence[Mapping[str, Any]],
    usage: object = None,
) -> types.CallToolResult:
    """The result of a run that waits for approval."""
    calls = "; ".join(f"{p.get('tool')} with {p.get('arguments') or '{}'}" for p in pending)
    text = (
        f"Waiting for approval: the run {run_id} wants to call {calls or 'a tool'}. It continues "
        f"once the call is decided; call {served.result_name} with "
        f'{{"run_id": "{run_id}"}} to collect the answer.'
    )
    return types.CallToolResult(
        content=[types.TextContent(text=text), _note(session_id, run_id)],
        is_error=served.output_schema is not None,
        _meta=_meta(
            "waiting_for_approval",
            run_id=run_id,
            session_id=session_id,
            pending=[dict(p) for p in pending],
            usage=usage,
        ),
    )


def running(served: ServedAgent, *, run_id: str, session_id: str) -> types.CallToolResult:
    """The result of ``<name>_result`` for a run that is still going."""
    return types.CallToolResult(
        content=[
            types.TextContent(
                text=f"Still running: the run {run_id} has not finished yet; call "
                f"{served.result_name} again later."
            )
        ],
        _meta=_meta("running", run_id=run_id, session_id=session_id),
    )


def refused(code: str, message: str) -> types.CallToolResult:
    """An error result that ran nothing."""
    return types.CallToolResult(
        content=[types.TextContent(text=f"{code}: {message}")],
        is_error=True,
        _meta=_meta("refused", error={"code": code, "message": message}),
    )
