"""``prism sessions list`` and ``prism sessions show ID``: what the command's store holds.

``list`` prints one line per session, most recently used first: id, last use, entry count and the
first user message. ``show`` prints the session's current branch (the conversation a
``prism run --session ID`` continues) and its runs with their state, and how to continue a run
that can be resumed. ``--json`` prints JSON lines instead (``SessionInfo`` objects for ``list``;
the branch's ``SessionEntry`` objects followed by one ``{"type": "run", ...}`` object per run for
``show``).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import IO, Any

from prism.cli._store import (
    StoreError,
    open_cli_store,
    session_runs,
    store_url,
)
from prism.types import Message, TextContent, ToolCallContent, ToolResultContent

__all__ = ["SessionsCommand"]

_TITLE_CHARS = 60
_PREVIEW_CHARS = 200


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text_of(message: Message) -> str:
    return "".join(p.text for p in message.content if isinstance(p, TextContent))


class SessionsCommand:
    """One ``prism sessions list|show`` invocation.

    Args:
        args: Parsed arguments.
        out: Standard output (the listing).
        err: Standard error (problems).
        environ: Environment for ``PRISM_STORE`` and the data dir.
    """

    def __init__(
        self,
        args: argparse.Namespace,
        *,
        out: IO[str],
        err: IO[str],
        environ: dict[str, str] | None = None,
    ) -> None:
        self.args = args
        self.out = out
        self.err = err
        self.environ = dict(os.environ if environ is None else environ)

    async def run(self) -> int:
        """Run the subcommand; returns 0, or 2 for an unusable store or an unknown session."""
        try:
            store = await open_cli_store(store_url(self.args.store, self.environ))
        except StoreError as exc:
            self.err.write(f"prism: {exc}\n")
            return 2
        try:
            if self.args.sessions_command == "show":
                return await self._show(store)
            return await self._list(store)
        finally:
            await store.aclose()

    async def _list(self, store: Any) -> int:
        limit = self.args.limit
        if limit < 1:
            self.err.write("prism: --limit must be at least 1\n")
            return 2
        sessions = await store.list_sessions(limit=limit)
        for info in sessions:
            title = await _title(store, info.session_id, info.last_entry_id)
            if self.args.json:
                self.out.write(json.dumps({**info.to_dict(), "title": title}) + "\n")
            else:
                entries = f"{info.entries} entr{'y' if info.entries == 1 else 'ies'}"
                self.out.write(
                    f"{info.session_id}  {info.updated_at}  {entries}  "
                    f"{_one_line(title, _TITLE_CHARS)}\n"
                )
        if not sessions and not self.args.json:
            self.err.write("prism: no sessions yet (prism run stores one per conversation)\n")
        return 0

    async def _show(self, store: Any) -> int:
        session_id = self.args.session_id
        entries = await store.list(session_id)
        if not entries:
            self.err.write(f"prism: no session {session_id} in this store\n")
            return 2
        branch = await store.read_branch(session_id, entries[-1].id)
        runs = await session_runs(store, session_id)
        if self.args.json:
            for entry in branch:
                self.out.write(json.dumps(entry.to_dict(), ensure_ascii=False) + "\n")
            for run in runs:
                item = {
                    "type": "run",
                    "run_id": run.run_id,
                    "status": run.status,
                    "stop_reason": run.stop_reason,
                    "version": run.version,
                }
                self.out.write(json.dumps({k: v for k, v in item.items() if v is not None}) + "\n")
            return 0
        write = self.out.write
        write(f"session {session_id} · {len(entries)} entries\n")
        for entry in branch:
            message = entry.message
            if message is None:
                write(f"  [{entry.kind}]\n")
                continue
            for line in _message_lines(message):
                write(f"  {line}\n")
        for run in runs:
            hint = ""
            if run.status == "suspended":
                hint = f" — prism resume {run.run_id} --approve (or --deny)"
            elif run.continuable:
                hint = f" — prism resume {run.run_id}"
            write(f"run {run.run_id}: {run.describe()}{hint}\n")
        return 0


def _message_lines(message: Message) -> list[str]:
    """A message as display lines: ``user: …``, ``assistant: …``, tool calls and results."""
    lines: list[str] = []
    text = _text_of(message)
    if text and message.role != "tool":
        lines.append(f"{message.role}: {text}")
    for part in message.content:
        if isinstance(part, ToolCallContent):
            arguments = _one_line(json.dumps(part.arguments, ensure_ascii=False), _PREVIEW_CHARS)
            lines.append(f"⚙ {part.name}({arguments})")
        elif isinstance(part, ToolResultContent):
            if part.error is not None:
                lines.append(f"✗ {part.name}: {part.error.message}")
            else:
                value = part.result if part.result is not None else "(no output)"
                shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                lines.append(f"→ {part.name}: {_one_line(shown, _PREVIEW_CHARS)}")
    if not lines:
        lines.append(f"{message.role}: (empty)")
    return lines


async def _title(store: Any, session_id: str, leaf_id: str) -> str:
    """The first user message of the session's latest branch (its title)."""
    for entry in await store.read_branch(session_id, leaf_id):
        message = entry.message
        if message is not None and message.role == "user":
            return _text_of(message)
    return ""
