"""``prism sessions list`` and ``prism sessions show ID``: what the command's store holds.

``list`` prints one line per conversation, most recently used first: id, last use, entry count and
the first user message. The child sessions of agent tools (``<run id>.<tool call id>``, whose
stored input carries a ``parent_run`` link) are not conversations of their own: they are left out
and counted on standard error; ``--all`` lists each one indented (``↳``) under its parent session
(with ``--json``: right after it, with its ``parent_run``). ``show`` prints the session's current branch (the conversation a
``prism run --session ID`` continues) and its runs with their state (a failed run with its
redacted error; a run whose process ended before its prompt was stored too), and how to continue
a run that can be resumed. ``--json`` prints JSON lines
instead (``SessionInfo`` objects for ``list``; the branch's ``SessionEntry`` objects followed by
one ``{"type": "run", "run_id", "status", "stop_reason"?, "stop_detail"?, "error"?, "version",
"pending"?}`` object per run for ``show``; ``pending``: the approvals a suspended run waits for, as
``prism runs --json`` gives them). Under a run waiting for approvals, ``show`` prints one line per
approval, as ``prism runs`` does.

``show`` nests the child runs of agent tools (``agent.as_tool``) under the tool call that started
them, when the store holds the child session (``<run id>.<tool call id>``): an indented block with
the child's agent, session and run ids, its state and its conversation, and the child's own
children below it. With ``--json`` each child is one ``{"type": "subagent", "tool_call_id",
"entry_id", "agent", "session_id", "run_id", "status", "error"?, "entries", "subagents"}`` line
right after the entry holding the call (``entries``: the child's branch as ``SessionEntry``
objects; ``subagents``: its own children, the same objects). The agent that answered a turn of a
handoff loop is named on its lines (``assistant (<agent>): …``, ``⚙ (<agent>) tool(…)``), and a
handoff shows as ``[handoff → <agent>]``, a model change as ``[model_change <previous> → <new>]``.
The lines of a multi-line message after its first keep the indent of the entry.

Both are read-only: a SQLite store file that does not exist means "no sessions" (nothing is
created); the store URL is shown with its credentials masked. A closed output (``| head``) ends
the listing quietly with exit code 141.
"""

from __future__ import annotations

import json
from typing import Any

from prism.cli._runs import StoreCommand, pending_approvals, pending_lines, resume_hint
from prism.cli._store import (
    StoreError,
    StoreMissingError,
    display_url,
    load_run,
    load_settings,
    open_cli_store,
    session_runs,
)
from prism.redaction import SecretRedactor, create_secret_redactor
from prism.store import SessionEntry
from prism.types import Message, TextContent, ToolCallContent, ToolResultContent

__all__ = ["SessionsCommand"]

_TITLE_CHARS = 60
_PREVIEW_CHARS = 200
_EXIT_BROKEN_PIPE = 141
_KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
_MAX_DEPTH = 8
"""Deepest child run shown (a child of a child of …)."""
_INDENT = "    "
_SCAN_SESSIONS = 10_000
"""Most sessions ``list`` reads to find ``--limit`` conversations among the child sessions."""


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text_of(message: Message) -> str:
    return "".join(p.text for p in message.content if isinstance(p, TextContent))


class SessionsCommand(StoreCommand):
    """One ``prism sessions list|show`` invocation.

    Args:
        args: Parsed arguments.
        out: Standard output (the listing).
        err: Standard error (problems).
        environ: Environment for ``PRISM_STORE`` and the data dir.
    """

    async def run(self) -> int:
        """Run the subcommand; returns 0, 2 for an unusable store or an unknown session, 141
        when the output was closed."""
        show = self.args.sessions_command == "show"
        if not show and self.args.limit < 1:
            self.report("--limit must be at least 1")
            return 2
        try:
            store = await open_cli_store(self.url, create=False)
        except StoreMissingError:
            where = display_url(self.url)
            if show:
                self.report(f"no session {self.args.session_id} in {where} (no such file)")
                return 2
            if not self.args.json:
                self.report(f"no sessions yet in {where} (no such file)")
            return 0
        except StoreError as exc:
            self.report(str(exc))
            return 2
        try:
            code = await (self._show(store) if show else self._list(store))
        finally:
            await store.aclose()
        self.out.flush()
        return _EXIT_BROKEN_PIPE if self.out.broken or self.err.broken else code

    async def _list(self, store: Any) -> int:
        # the child sessions of agent tools are not conversations of their own: they are
        # counted (or, with --all, listed under their parent session), never a top-level line
        limit = self.args.limit
        scanned = await store.list_sessions(limit=max(limit, _SCAN_SESSIONS))
        top: list[Any] = []
        children: dict[str, list[tuple[Any, str, dict[str, str]]]] = {}
        hidden = 0
        for info in scanned:
            if len(top) >= limit and "." not in info.session_id:
                continue
            title, link = await _title(store, info.session_id, info.last_entry_id)
            if link is None:
                if len(top) < limit:
                    top.append((info, title))
                continue
            hidden += 1
            children.setdefault(link["session_id"], []).append((info, title, link))
        for info, title in top:
            if self.out.broken:
                return _EXIT_BROKEN_PIPE
            self._list_line(info, title, None, "")
            if self.args.all:
                for depth, child, child_title, link in _nested(children, info.session_id, 1):
                    self._list_line(child, child_title, link, _INDENT * depth + "↳ ")
        if not top and not self.args.json:
            self.report(
                f"no sessions yet in {display_url(self.url)} "
                "(prism run stores one per conversation)"
            )
        if hidden and not self.args.all and not self.args.json:
            self.report(
                f"{hidden} child session{'' if hidden == 1 else 's'} of agent tools not listed "
                "(--all lists them under their parent session)"
            )
        return 0

    def _list_line(self, info: Any, title: str, link: dict[str, str] | None, prefix: str) -> None:
        if self.args.json:
            item = {**info.to_dict(), "title": title}
            if link is not None:
                item["parent_run"] = link
            self.out.write(json.dumps(item) + "\n")
        else:
            self.out.write(
                f"{prefix}{info.session_id}  {info.updated_at}  {_entries(info.entries)}  "
                f"{_one_line(title, _TITLE_CHARS)}\n"
            )

    async def _redactor(self, store: Any, session_id: str) -> SecretRedactor:
        """Redacts the API keys the environment holds for the session's model (belt and braces:
        stored entries and notes are redacted when written)."""
        names = list(_KEY_VARIABLES)
        settings = await load_settings(store, session_id)
        if settings is not None and isinstance(settings.get("api_key_env"), str):
            names.append(settings["api_key_env"])
        secrets = [self.environ[name] for name in names if self.environ.get(name)]
        return create_secret_redactor(secrets)

    async def _show(self, store: Any) -> int:
        session_id = self.args.session_id
        entries = await store.list(session_id)
        runs = await session_runs(store, session_id)
        if not entries and not runs:
            self.report(f"no session {session_id} in {display_url(self.url)}")
            return 2
        branch = await store.read_branch(session_id, entries[-1].id) if entries else []
        redact = (await self._redactor(store, session_id)).redact
        children = await _children(store, list(branch), 1)
        write = self.out.write
        if self.args.json:
            for entry in branch:
                write(redact(json.dumps(entry.to_dict(), ensure_ascii=False)) + "\n")
                for child in children:
                    if child["entry_id"] == entry.id:
                        write(redact(json.dumps(child, ensure_ascii=False)) + "\n")
            for run in runs:
                pending = await pending_approvals(store, run.run_id, run.status)
                item: dict[str, Any] = {
                    "type": "run",
                    "run_id": run.run_id,
                    "status": run.status,
                    "stop_reason": run.stop_reason,
                    "stop_detail": run.stop_detail,
                    "error": None if run.error is None else {"message": run.error},
                    "version": run.version,
                    "pending": [p.to_dict() for p in pending] or None,
                }
                item = {k: v for k, v in item.items() if v is not None}
                write(redact(json.dumps(item, ensure_ascii=False)) + "\n")
            return 0
        write(f"session {session_id} · {_entries(len(entries))}\n")
        for line in _branch_lines(branch, children):
            write(redact(f"  {line}\n"))
        for run in runs:
            write(redact(f"run {run.run_id}: {run.describe()}{resume_hint(run)}\n"))
            for line in pending_lines(await pending_approvals(store, run.run_id, run.status)):
                write(redact(f"  {line}\n"))
        return 0


def _entries(count: int) -> str:
    return f"{count} entr{'y' if count == 1 else 'ies'}"


def _message_lines(message: Message) -> list[str]:
    """A message as display lines: ``user: …``, ``assistant: …`` (``assistant (<agent>): …``
    when the message names the agent that answered; a multi-line text gives one line per text
    line), tool calls (``⚙ (<agent>) name(…)`` with the agent named the same way) and results."""
    lines: list[str] = []
    text = _text_of(message)
    role: str = message.role
    agent = (message.metadata or {}).get("agent")
    named = f"({agent}) " if role == "assistant" and isinstance(agent, str) else ""
    if named:
        role = f"assistant {named.rstrip()}"
    if text and message.role != "tool":
        first, *rest = text.split("\n")
        lines.append(f"{role}: {first}")
        lines += rest
    for part in message.content:
        if isinstance(part, ToolCallContent):
            arguments = _one_line(json.dumps(part.arguments, ensure_ascii=False), _PREVIEW_CHARS)
            lines.append(f"⚙ {named}{part.name}({arguments})")
        elif isinstance(part, ToolResultContent):
            if part.error is not None:
                lines.append(f"✗ {part.name}: {_one_line(part.error.message, _PREVIEW_CHARS)}")
            else:
                value = part.result if part.result is not None else "(no output)"
                shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                lines.append(f"→ {part.name}: {_one_line(shown, _PREVIEW_CHARS)}")
    if not lines:
        lines.append(f"{role}: (empty)")
    return lines


# --------------------------------------------------------------------------- child runs


def _entry_label(entry: SessionEntry) -> str:
    """``[handoff → <agent>]`` for a stored handoff, ``[model_change <previous> → <new>]``
    (``provider:model``) for a model change, else ``[<kind>]``."""
    data = entry.data
    if entry.kind == "custom" and data is not None and data.get("type") == "handoff":
        return f"[handoff → {data.get('agent')}]"
    if entry.kind == "model_change" and entry.model is not None:
        before = entry.previous_model
        shown = "?" if before is None else f"{before.provider}:{before.model}"
        return f"[model_change {shown} → {entry.model.provider}:{entry.model.model}]"
    return f"[{entry.kind}]"


def _result_rows(branch: list[SessionEntry]) -> dict[str, Message]:
    """Tool call id → the result row answering it on ``branch``."""
    rows: dict[str, Message] = {}
    for entry in branch:
        message = entry.message
        if message is not None and message.role == "tool":
            for part in message.content:
                if isinstance(part, ToolResultContent):
                    rows[part.tool_call_id] = message
    return rows


async def _children(store: Any, branch: list[SessionEntry], depth: int) -> list[dict[str, Any]]:
    """The child runs of the agent-tool calls on ``branch`` that the store holds, in call order,
    as the ``{"type": "subagent", …}`` objects of ``show --json`` (their own children nested).
    A call answered by a row without ``subagent`` metadata is a plain tool call; a call without
    a row yet (a suspended or interrupted run) is looked up by its child session id."""
    if depth > _MAX_DEPTH:
        return []
    rows = _result_rows(branch)
    out: list[dict[str, Any]] = []
    for entry in branch:
        message = entry.message
        if message is None or message.role != "assistant":
            continue
        for call in (p for p in message.content if isinstance(p, ToolCallContent)):
            row = rows.get(call.id)
            link = (row.metadata or {}).get("subagent") if row is not None else None
            if row is not None and not isinstance(link, dict):
                continue
            item = await _child(store, entry, call, row, link if isinstance(link, dict) else {})
            if item is not None:
                item["subagents"] = await _children(
                    store, [SessionEntry.from_dict(e) for e in item["entries"]], depth + 1
                )
                out.append(item)
    return out


async def _child(
    store: Any,
    entry: SessionEntry,
    call: ToolCallContent,
    row: Message | None,
    link: dict[str, Any],
) -> dict[str, Any] | None:
    """One child run, or ``None`` when the store holds no child session for the call."""
    session_id = link.get("session_id")
    if not isinstance(session_id, str):
        session_id = f"{entry.run_id}.{call.id}"
    entries = await store.list(session_id)
    if not entries:
        return None
    child_branch = await store.read_branch(session_id, entries[-1].id)
    run_id = link.get("run_id")
    if not isinstance(run_id, str):
        run_id = next((e.run_id for e in entries if e.run_id is not None), None)
    status, error = await _child_state(store, run_id, row)
    agent = link.get("agent")
    item: dict[str, Any] = {
        "type": "subagent",
        "tool_call_id": call.id,
        "entry_id": entry.id,
        "agent": agent if isinstance(agent, str) else call.name,
        "session_id": session_id,
        "run_id": run_id,
        "status": status,
        "entries": [e.to_dict() for e in child_branch],
    }
    if error is not None:
        item["error"] = {"message": error}
    return item


async def _child_state(
    store: Any, run_id: str | None, row: Message | None
) -> tuple[str | None, str | None]:
    """``(status, error message)`` of a child run: its envelope's when it is durable, else
    what the call's result row says (``None`` while the call has no result)."""
    if run_id is not None:
        info = await load_run(store, run_id)
        if info.status is not None:
            return info.status, info.error
    if row is None:
        return None, None
    for part in row.content:
        if isinstance(part, ToolResultContent) and part.error is not None:
            return "failed", part.error.message
    return "succeeded", None


def _branch_lines(branch: list[SessionEntry], children: list[dict[str, Any]]) -> list[str]:
    """``branch`` as display lines, each agent-tool call followed by its child run's block
    (``children``: what [`_children()`][prism.cli._sessions._children] found on ``branch``), indented."""
    by_call = {(c["entry_id"], c["tool_call_id"]): c for c in children}
    lines: list[str] = []
    for entry in branch:
        message = entry.message
        if message is None:
            lines.append(_entry_label(entry))
            continue
        for part_lines, call_id in _message_parts(message):
            lines += part_lines
            child = by_call.get((entry.id, call_id))
            if child is not None:
                lines += [_INDENT + line for line in _child_lines(child)]
    return lines


def _message_parts(message: Message) -> list[tuple[list[str], str | None]]:
    """The display lines of ``message``, in groups: each tool call's line with its id."""
    lines = _message_lines(message)
    calls = [p.id for p in message.content if isinstance(p, ToolCallContent)]
    if not calls:
        return [(lines, None)]
    head = len(lines) - len(calls)
    groups: list[tuple[list[str], str | None]] = [(lines[:head], None)]
    groups += [([line], call_id) for line, call_id in zip(lines[head:], calls, strict=True)]
    return groups


def _child_lines(child: dict[str, Any]) -> list[str]:
    """The block of one child run: its header, then its conversation (indented)."""
    status = child["status"] or "no result yet"
    error = child.get("error")
    if error is not None:
        status = f"{status}: {error['message']}"
    head = (
        f"↳ agent {child['agent']} · session {child['session_id']} · "
        f"run {child['run_id']}: {status}"
    )
    branch = [SessionEntry.from_dict(e) for e in child["entries"]]
    return [head, *(_INDENT + line for line in _branch_lines(branch, child["subagents"]))]


def _nested(
    children: dict[str, list[tuple[Any, str, dict[str, str]]]], parent: str, depth: int
) -> list[tuple[int, Any, str, dict[str, str]]]:
    """The child sessions under session ``parent`` (their own children after each), with their
    depth, in listing order."""
    out: list[tuple[int, Any, str, dict[str, str]]] = []
    if depth > _MAX_DEPTH:
        return out
    for info, title, link in children.get(parent, []):
        out.append((depth, info, title, link))
        out += _nested(children, info.session_id, depth + 1)
    return out


async def _title(store: Any, session_id: str, leaf_id: str) -> tuple[str, dict[str, str] | None]:
    """The first user message of the session's latest branch (its title), and the
    ``parent_run`` link its metadata carries when the session is the child session of an agent
    tool (its id is ``<run id>.<tool call id>``; other sessions are not looked at for one)."""
    for entry in await store.read_branch(session_id, leaf_id):
        message = entry.message
        if message is not None and message.role == "user":
            link = (message.metadata or {}).get("parent_run") if "." in session_id else None
            if isinstance(link, dict) and isinstance(link.get("session_id"), str):
                return _text_of(message), {k: str(v) for k, v in link.items()}
            return _text_of(message), None
    return "", None
