"""Capture: a stored run becomes an eval case that replays it (``prism eval capture``).

[`capture_run()`][prism.evals._capture.capture_run] reads one run through its store — the session's entries (``list``), the
run's ledger rows (``read_ledger`` of ``InspectionReader``, or the lists
of a [`MemoryRunLedger`][prism.ledger.MemoryRunLedger]) and its request rows (``list_requests`` and
``load_request_heads`` of the SQLite and PostgreSQL stores, ``run_requests`` of the memory
ledger) — and returns a [`CapturedRun`][prism.evals._capture.CapturedRun]: the [`Case`][prism.evals.Case] (the run's input;
its final answer, artifact and tool trajectory as expectations; its status; the
[`Cassette`][prism.evals.Cassette] of its provider attempts and tool calls) and the warnings a user
should read.

Where things come from:

* the provider attempts: the ledger's ``provider_turn_started`` … ``provider_turn_finished``
  events with the message deltas between them (streamed as they came), their request rows
  matched by turn and attempt; without ledger events, the run's assistant messages (one text
  delta per text part, one tool call per call, no usage);
* the input: the conversation before the run's first answer (earlier runs' messages of the
  session included, so that a replay in a fresh session sends the same conversation);
* tool calls: the ledger's terminal tool-call rows (the arguments the tool ran with and its
  result), else the transcript's calls and results;
* child runs of agent tools: the session ``<run id>.<tool call id>``, captured the same way.

Stored rows are what the run's redactor left: a captured case holds no secret the store does
not, and capture warns about every tool argument that holds a redacted value.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prism._serde import to_json_value
from prism.errors import PrismConfigError
from prism.evals._cassette import (
    Cassette,
    CassetteMatching,
    RecordedAttempt,
    RecordedCall,
    ReplayTools,
)
from prism.evals._model import Case, ExpectedToolCall, ExpectedTools
from prism.ledger_records import AgentEventRecord, RequestRecord, RunRecord, ToolCallRecord
from prism.redaction import REDACTED
from prism.request_hash import REQUEST_HASH_VERSION, message_json
from prism.session_entry import SessionEntry
from prism.store import SessionStore
from prism.types import (
    ContentBlock,
    JsonValue,
    Message,
    ProviderContentDelta,
    ProviderDone,
    ProviderErrorEvent,
    ProviderEvent,
    ProviderMessageStart,
    ProviderToolCall,
    ProviderToolCallDelta,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolCallDeltaContent,
    ToolResult,
    ToolResultContent,
)

__all__ = ["CapturedRun", "capture_run"]

_PAGE = 10000


@dataclass(frozen=True, slots=True)
class CapturedRun:
    """What [`capture_run()`][prism.evals._capture.capture_run] made of a run."""

    case: Case
    """The case: input, expectations and cassette."""
    session_id: str
    """The run's session."""
    warnings: tuple[str, ...] = ()
    """What the user should know: a capture without request rows (messages-only matching),
    redacted tool arguments, a run that did not finish."""


@dataclass(slots=True)
class _Rows:
    runs: list[RunRecord]
    events: list[AgentEventRecord]
    tool_calls: list[ToolCallRecord]
    requests: list[RequestRecord]
    heads: dict[str, Mapping[str, Any]]


async def _ledger_rows(source: Any, run_id: str) -> _Rows:
    rows = _Rows([], [], [], [], {})
    if source is None:
        return rows
    if callable(getattr(source, "read_ledger", None)):
        after: str | None = None
        found: list[Any] = []
        while True:
            page = await source.read_ledger(run_id, after=after, limit=_PAGE, include_deltas=True)
            found.extend(page.rows)
            after = page.cursor
            if not page.has_more:
                break
        for kind, target in (
            ("run", rows.runs),
            ("event", rows.events),
            ("tool_call", rows.tool_calls),
        ):
            target.extend(r.record for r in sorted(found, key=lambda r: r.seq) if r.kind == kind)
    elif isinstance(getattr(source, "events", None), list):  # a MemoryRunLedger
        rows.runs = [r for r in source.runs if r.id == run_id]
        rows.events = [r for r in source.events if r.run_id == run_id]
        rows.tool_calls = [r for r in source.tool_calls if r.run_id == run_id]
    if callable(getattr(source, "list_requests", None)):
        rows.requests = list(await source.list_requests(run_id=run_id))
        rows.heads = dict(await source.load_request_heads({r.head_hash for r in rows.requests}))
    elif callable(getattr(source, "run_requests", None)):
        rows.requests = list(source.run_requests(run_id))
        heads = getattr(source, "request_heads", {})
        rows.heads = {
            r.head_hash: heads[r.head_hash] for r in rows.requests if r.head_hash in heads
        }
    for request in rows.requests:
        if request.head is not None:
            rows.heads.setdefault(request.head_hash, request.head)
    return rows


# --------------------------------------------------------------------------- provider attempts


def _delta_event(content: ContentBlock, fragments: set[str]) -> ProviderEvent | None:
    if isinstance(content, ToolCallDeltaContent):
        if content.id is not None:
            fragments.add(content.id)
        return ProviderToolCallDelta(
            index=content.index,
            id=content.id,
            name=content.name,
            arguments_text=content.arguments_text,
            authority=content.authority,
        )
    if isinstance(content, ToolCallContent):
        # a call rebuilt from fragments is announced again after the stream: not the provider's
        return None if content.id in fragments else ProviderToolCall(call=content)
    return ProviderContentDelta(content=content)  # type: ignore[arg-type]


def _attempts_from_events(
    events: Sequence[AgentEventRecord], run_id: str, warnings: list[str]
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    fragments: set[str] = set()
    for record in events:
        event: Any = record.event
        if record.run_id != run_id or getattr(event, "run_id", run_id) not in ("", run_id):
            continue
        kind = event.type
        if kind == "provider_turn_started":
            meta = event.metadata
            current = {
                "turn": event.turn,
                "attempt": meta.attempt,
                "provider_id": meta.provider_id,
                "model": meta.model.model,
                "events": [],
            }
            fragments = set()
        elif current is None:
            continue
        elif kind == "message_started":
            current["events"].append(ProviderMessageStart(message_id=event.message.id))
        elif kind == "message_delta":
            converted = _delta_event(event.content, fragments)
            if converted is not None:
                current["events"].append(converted)
        elif kind == "provider_turn_finished":
            if event.error is not None:
                current["events"].append(ProviderErrorEvent(error=event.error))
            else:
                current["events"].append(
                    ProviderDone(
                        usage=event.usage,
                        stop_reason=event.stop_reason,
                        model=event.response_model,
                    )
                )
            found.append(current)
            current = None
    if current is not None:
        warnings.append(
            f"provider turn {current['turn']} of run {run_id} never finished (the process "
            "stopped during it); it is left out"
        )
    return found


def _conversation_start(transcript: Sequence[Message]) -> int:
    return next((i for i, m in enumerate(transcript) if m.role != "system"), len(transcript))


def _count_messages(
    drafts: list[dict[str, Any]], transcript: Sequence[Message], first: int
) -> None:
    """Give attempts without request rows the conversation length their requests had: the
    n-th attempt that succeeded wrote the n-th assistant message of the run, so its request held
    the messages before it; a failed attempt asked what the next one asked."""
    skip = _conversation_start(transcript)
    answers = [i - skip for i in range(first, len(transcript)) if transcript[i].role == "assistant"]
    pending: list[dict[str, Any]] = []
    for draft in drafts:
        pending.append(draft)
        if draft["events"] and isinstance(draft["events"][-1], ProviderErrorEvent):
            continue
        count = answers.pop(0) if answers else None
        for waiting in pending:
            waiting["messages"] = count
        pending = []


def _attempts_from_messages(transcript: Sequence[Message], first: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    skip = _conversation_start(transcript)
    for index in range(first, len(transcript)):
        message = transcript[index]
        if message.role != "assistant":
            continue
        events: list[ProviderEvent] = []
        for part in message.content:
            if isinstance(part, ToolCallContent):
                events.append(ProviderToolCall(call=part))
            elif isinstance(part, (TextContent, ThinkingContent)):
                events.append(ProviderContentDelta(content=part))
        events.append(ProviderDone())
        found.append(
            {
                "turn": len(found) + 1,
                "attempt": 1,
                "provider_id": "",
                "model": "",
                "events": events,
                "messages": index - skip,
            }
        )
    return found


# --------------------------------------------------------------------------- entries


def _run_branch(entries: Sequence[SessionEntry], run_id: str) -> tuple[list[SessionEntry], int]:
    """The branch the run ended on (root first) and the index of its first entry in it."""
    by_id = {e.id: e for e in entries}
    own = [e for e in entries if e.run_id == run_id]
    if not own:
        return [], 0
    branch: list[SessionEntry] = []
    node: SessionEntry | None = own[-1]
    while node is not None:
        branch.append(node)
        node = by_id.get(node.parent_id) if node.parent_id is not None else None
    branch.reverse()
    first = next(i for i, e in enumerate(branch) if e.run_id == run_id)
    return branch, first


def _redacted_paths(value: object, path: str = "") -> list[str]:
    if isinstance(value, str):
        return [path or "(the value)"] if REDACTED in value else []
    if isinstance(value, Mapping):
        out: list[str] = []
        for key, item in value.items():
            out.extend(_redacted_paths(item, f"{path}.{key}" if path else str(key)))
        return out
    if isinstance(value, (list, tuple)):
        out = []
        for index, item in enumerate(value):
            out.extend(_redacted_paths(item, f"{path}[{index}]"))
        return out
    return []


def _calls(
    messages: Sequence[Message], records: Sequence[ToolCallRecord]
) -> dict[str, RecordedCall]:
    out: dict[str, RecordedCall] = {}
    for record in records:
        if record.status in ("finished", "error") and record.result is not None:
            arguments = record.arguments if isinstance(record.arguments, Mapping) else {}
            out[record.tool_call_id] = RecordedCall(
                call_id=record.tool_call_id,
                name=record.name,
                arguments=dict(arguments),
                result=record.result,
            )
    if records:
        return out
    calls = {
        part.id: part
        for message in messages
        for part in message.content
        if isinstance(part, ToolCallContent) and part.authority != "provider-hosted"
    }
    for message in messages:
        parts = message.content
        for index, part in enumerate(parts):
            if not isinstance(part, ToolResultContent) or part.tool_call_id not in calls:
                continue
            extra = []
            for follow in parts[index + 1 :]:
                if isinstance(follow, ToolResultContent):
                    break
                extra.append(follow)
            call = calls[part.tool_call_id]
            out[call.id] = RecordedCall(
                call_id=call.id,
                name=call.name,
                arguments=dict(call.arguments),
                result=ToolResult(
                    tool_call_id=call.id,
                    name=call.name,
                    value=part.result,
                    content=tuple(extra),
                    error=part.error,
                ),
            )
    return out


# --------------------------------------------------------------------------- the run


async def _capture(
    store: Any,
    ledger: Any,
    run_id: str,
    session_id: str | None,
    tools: ReplayTools,
    ignore_paths: Mapping[str, Sequence[str]],
    warnings: list[str],
) -> tuple[Cassette, list[Message], int, _Rows]:
    rows = await _ledger_rows(ledger, run_id)
    if session_id is None:
        session_id = next((r.session_id for r in rows.runs), None)
    if session_id is None and callable(getattr(store, "get_run_summary", None)):
        summary = await store.get_run_summary(run_id)
        session_id = summary.session_id if summary is not None else None
    if session_id is None:
        raise PrismConfigError(
            f"capture: run {run_id} is not in the store's ledger; give its session id"
        )
    entries = list(await store.list(session_id))
    branch, first = _run_branch(entries, run_id)
    if not branch:
        raise PrismConfigError(f"capture: session {session_id} holds no entry of run {run_id}")
    if any(e.kind == "compaction" for e in branch):
        warnings.append(
            f"run {run_id}: its session was compacted; the case's input holds the messages "
            "the store kept, so a replay differs from the recording from the summary on"
        )
    transcript = [e.message for e in branch if e.kind == "message" and e.message is not None]
    first_message = sum(1 for e in branch[:first] if e.kind == "message" and e.message is not None)
    own = transcript[first_message:]
    answered = next((i for i, m in enumerate(own) if m.role == "assistant"), len(own))
    input_end = first_message + answered
    drafts = _attempts_from_events(rows.events, run_id, warnings)
    if drafts:
        # one request row per attempt, written as it starts: paired in order (a resumed leg
        # numbers its turns from 1 again), each pair agreeing on its turn and attempt
        requests = rows.requests
        paired = len(requests) == len(drafts) and all(
            (r.turn, r.attempt) == (d["turn"], d["attempt"])
            for r, d in zip(requests, drafts, strict=True)
        )
        for index, draft in enumerate(drafts):
            request = requests[index] if paired else None
            draft["request_hash"] = None if request is None else request.request_hash
            draft["head_hash"] = None if request is None else request.head_hash
            draft["messages"] = None if request is None else request.messages
        if not paired:
            _count_messages(drafts, transcript, input_end)
    else:
        drafts = _attempts_from_messages(transcript, input_end)
    matching: CassetteMatching = (
        "requests"
        if drafts
        and all(d.get("request_hash") and d.get("head_hash") in rows.heads for d in drafts)
        else "messages"
    )
    if matching == "messages":
        warnings.append(
            f"run {run_id} has no request rows (its ledger does not store them, or it has no "
            "ledger): its replay matches messages only, so a change of the system prompt, the "
            "tool schemas or the options cannot be detected"
        )
    attempts = tuple(
        RecordedAttempt(
            turn=d["turn"],
            attempt=d["attempt"],
            provider_id=d["provider_id"],
            model=d["model"],
            request_hash=d.get("request_hash") if matching == "requests" else None,
            head_hash=d.get("head_hash") if matching == "requests" else None,
            messages=d.get("messages"),
            events=tuple(d["events"]),
        )
        for d in drafts
    )
    calls = _calls(own, rows.tool_calls)
    for call in calls.values():
        for path in _redacted_paths(call.arguments):
            warnings.append(
                f"tool `{call.name}` (call {call.call_id}) of run {run_id}: argument `{path}` "
                "holds a redacted value; the case keeps it redacted"
            )
    children: dict[str, Cassette] = {}
    for call_id in calls:
        child = await _child(store, ledger, run_id, call_id, tools, ignore_paths, warnings)
        if child is not None:
            children[call_id] = child
    cassette = Cassette(
        run_id=run_id,
        session_id=session_id,
        matching=matching,
        attempts=attempts,
        heads={h: dict(v) for h, v in rows.heads.items()},
        transcript=tuple(message_json(m) for m in transcript),
        calls=calls,
        children=children,
        tools=tools,
        ignore_paths={k: tuple(v) for k, v in ignore_paths.items()},
        approvals=_approvals(rows, run_id, transcript),
        hash_version=REQUEST_HASH_VERSION,
    )
    return cassette, transcript, input_end, rows


async def _child(
    store: Any,
    ledger: Any,
    run_id: str,
    call_id: str,
    tools: ReplayTools,
    ignore_paths: Mapping[str, Sequence[str]],
    warnings: list[str],
) -> Cassette | None:
    session_id = f"{run_id}.{call_id}"
    entries = list(await store.list(session_id))
    child_runs = [e.run_id for e in entries if e.run_id is not None]
    if not child_runs:
        return None
    cassette, _, _, _ = await _capture(
        store, ledger, child_runs[-1], session_id, tools, ignore_paths, warnings
    )
    return cassette


def _approvals(
    rows: _Rows, run_id: str, messages: Sequence[Message]
) -> tuple[Mapping[str, JsonValue], ...]:
    """The decisions each suspension of the run was resumed with, read from what followed:
    a pending call that ran was allowed (with other arguments: modified), one answered with an
    ``approval_rejected`` row was rejected (with its reason), a run that ended ``denied`` was
    denied; an approval of another kind (an input guardrail's) was approved."""
    calls = {r.tool_call_id: r for r in rows.tool_calls if r.status != "started"}
    rejected = {
        part.tool_call_id: part.error.message
        for message in messages
        for part in message.content
        if isinstance(part, ToolResultContent)
        and part.error is not None
        and part.error.code == "approval_rejected"
    }
    denied = any(r.status == "denied" for r in rows.runs)
    found: list[Mapping[str, JsonValue]] = []
    for record in rows.events:
        event: Any = record.event
        if record.run_id != run_id or event.type != "agent_suspended":
            continue
        interruption = to_json_value(event.interruption)
        pending = (
            interruption.get("pending_decisions") if isinstance(interruption, Mapping) else None
        )
        for item in pending or ():
            call_id = item.get("tool_call_id")
            decision: dict[str, JsonValue] = {"tool_call_id": call_id}
            ran = calls.get(call_id) if isinstance(call_id, str) else None
            error = ran.result.error if ran is not None and ran.result is not None else None
            if item.get("kind") != "tool_approval":
                decision["outcome"] = "approve"
            elif call_id in rejected:
                decision["outcome"] = "reject_once"
                if rejected[call_id]:
                    decision["reason"] = rejected[call_id]
            elif ran is None:
                decision["outcome"] = "deny" if denied else "pending"
            elif ran.status == "blocked" or (
                error is not None and error.code == "approval_rejected"
            ):
                decision["outcome"] = "reject_once"
                reason = error.message if error is not None else ran.reason
                if reason:
                    decision["reason"] = reason
            else:
                decision["outcome"] = "allow_once"
                try:
                    shown = json.loads(str(item.get("arguments") or "null"))
                except ValueError:
                    shown = None
                if isinstance(ran.arguments, Mapping) and shown != ran.arguments:
                    decision["modified_arguments"] = dict(ran.arguments)
            found.append(decision)
    return tuple(found)


def _status(rows: _Rows, transcript: Sequence[Message]) -> str:
    finished = [r for r in rows.runs if r.finished_at is not None]
    if finished:
        return finished[-1].status
    return "succeeded" if transcript and transcript[-1].role == "assistant" else "failed"


def _artifact(rows: _Rows, answer: str | None) -> JsonValue:
    """The accepted artifact of an artifact loop's run (an ``artifact_finished`` event): its
    final answer read as JSON (the event holds the validation, not the value)."""
    finished = any(getattr(r.event, "type", None) == "artifact_finished" for r in rows.events)
    if not finished or answer is None:
        return None
    try:
        value: JsonValue = json.loads(answer)
    except ValueError:
        return None
    return value


async def capture_run(
    store: SessionStore,
    run_id: str,
    *,
    ledger: object = None,
    session_id: str | None = None,
    name: str | None = None,
    tools: ReplayTools = "recorded",
    ignore_paths: Mapping[str, Sequence[str]] | None = None,
) -> CapturedRun:
    """Turn the stored run ``run_id`` into a case that replays it (see the module docstring).

    Args:
        store: The session store holding the run's session (``list``); a SQLite or PostgreSQL
            store is its ledger too.
        run_id: The run.
        ledger: Where the run's ledger rows are, when not in ``store`` (a ``MemoryRunLedger``);
            default ``store`` itself when it has ``read_ledger``.
        session_id: The run's session, when the ledger does not know the run.
        name: The case's name (default: the run id).
        tools: How a replay answers tool calls: ``"recorded"`` (default) or ``"real"``.
        ignore_paths: With ``tools="real"``, per tool name the result paths (``rows.*.updated_at``)
            that may differ from the recording.

    Returns:
        The [`CapturedRun`][prism.evals._capture.CapturedRun]: the case and the warnings.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — the run is not found (neither in the ledger nor,
            with ``session_id``, in the session), or ``tools`` is not ``"recorded"``/``"real"``.
        StoreError: a stored row does not decode.
    """
    if tools not in ("recorded", "real"):
        raise PrismConfigError(f"capture: tools must be 'recorded' or 'real', got {tools!r}")
    if ledger is None and callable(getattr(store, "read_ledger", None)):
        ledger = store
    warnings: list[str] = []
    cassette, transcript, input_end, rows = await _capture(
        store, ledger, run_id, session_id, tools, dict(ignore_paths or {}), warnings
    )
    inputs = transcript[:input_end]
    if not inputs:
        raise PrismConfigError(f"capture: run {run_id} has no input message")
    if len(inputs) == 1 and inputs[0].role == "user" and _plain(inputs[0]):
        run_input: str | tuple[Message, ...] = inputs[0].text
    else:
        run_input = tuple(dataclasses.replace(m, metadata=None) for m in inputs)
    own = transcript[input_end:]
    status = _status(rows, transcript)
    answer = own[-1].text if own and own[-1].role == "assistant" else None
    host_calls = [
        part
        for message in own
        for part in message.content
        if isinstance(part, ToolCallContent) and part.authority != "provider-hosted"
    ]
    if status not in ("succeeded", "failed", "aborted", "suspended", "denied"):
        warnings.append(f"run {run_id} ended {status}; the case expects it to fail")
        status = "failed"
    case = Case(
        name=name or run_id,
        input=run_input,
        expected_output=answer if status == "succeeded" else None,
        expected_artifact=_artifact(rows, answer if status == "succeeded" else None),
        expected_tools=ExpectedTools(
            calls=[ExpectedToolCall(c.name, dict(c.arguments)) for c in host_calls]
        )
        if host_calls
        else None,
        expected_status=status,  # type: ignore[arg-type]
        metadata={"captured_from": {"run_id": run_id, "session_id": cassette.session_id}},
        cassette=cassette.to_json(),
    )
    return CapturedRun(case=case, session_id=cassette.session_id, warnings=tuple(warnings))


def _plain(message: Message) -> bool:
    return (
        len(message.content) == 1
        and isinstance(message.content[0], TextContent)
        and message.id is None
    )
