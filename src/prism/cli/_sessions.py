"""``prism sessions list`` and ``prism sessions show ID``: what the command's store holds.

``list`` prints one line per session, most recently used first: id, last use, entry count and the
first user message. ``show`` prints the session's current branch (the conversation a
``prism run --session ID`` continues) and its runs with their state (a failed run with its
redacted error; a run whose process ended before its prompt was stored too), and how to continue
a run that can be resumed. ``--json`` prints JSON lines
instead (``SessionInfo`` objects for ``list``; the branch's ``SessionEntry`` objects followed by
one ``{"type": "run", "run_id", "status", "stop_reason"?, "stop_detail"?, "error"?, "version"}``
object per run for ``show``).

Both are read-only: a SQLite store file that does not exist means "no sessions" (nothing is
created); the store URL is shown with its credentials masked. A closed output (``| head``) ends
the listing quietly with exit code 141.
"""

from __future__ import annotations

import json
from typing import Any

from prism.cli._runs import StoreCommand, resume_hint
from prism.cli._store import (
    StoreError,
    StoreMissingError,
    display_url,
    load_settings,
    open_cli_store,
    session_runs,
)
from prism.redaction import SecretRedactor, create_secret_redactor
from prism.types import Message, TextContent, ToolCallContent, ToolResultContent

__all__ = ["SessionsCommand"]

_TITLE_CHARS = 60
_PREVIEW_CHARS = 200
_EXIT_BROKEN_PIPE = 141
_KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


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
        sessions = await store.list_sessions(limit=self.args.limit)
        for info in sessions:
            if self.out.broken:
                return _EXIT_BROKEN_PIPE
            title = await _title(store, info.session_id, info.last_entry_id)
            if self.args.json:
                self.out.write(json.dumps({**info.to_dict(), "title": title}) + "\n")
            else:
                self.out.write(
                    f"{info.session_id}  {info.updated_at}  {_entries(info.entries)}  "
                    f"{_one_line(title, _TITLE_CHARS)}\n"
                )
        if not sessions and not self.args.json:
            self.report(
                f"no sessions yet in {display_url(self.url)} "
                "(prism run stores one per conversation)"
            )
        return 0

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
        write = self.out.write
        if self.args.json:
            for entry in branch:
                write(redact(json.dumps(entry.to_dict(), ensure_ascii=False)) + "\n")
            for run in runs:
                item: dict[str, Any] = {
                    "type": "run",
                    "run_id": run.run_id,
                    "status": run.status,
                    "stop_reason": run.stop_reason,
                    "stop_detail": run.stop_detail,
                    "error": None if run.error is None else {"message": run.error},
                    "version": run.version,
                }
                item = {k: v for k, v in item.items() if v is not None}
                write(redact(json.dumps(item, ensure_ascii=False)) + "\n")
            return 0
        write(f"session {session_id} · {_entries(len(entries))}\n")
        for entry in branch:
            message = entry.message
            if message is None:
                write(f"  [{entry.kind}]\n")
                continue
            for line in _message_lines(message):
                write(redact(f"  {line}\n"))
        for run in runs:
            write(redact(f"run {run.run_id}: {run.describe()}{resume_hint(run)}\n"))
        return 0


def _entries(count: int) -> str:
    return f"{count} entr{'y' if count == 1 else 'ies'}"


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
