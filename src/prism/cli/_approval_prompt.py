"""Approval questions on the terminal: one ``allow …? [y]es / [n]o / [a]lways`` per waiting call.

Each pending decision of a waiting run carries the call's id, tool name and arguments (redacted,
capped at 4 KB); for a run stored before decisions carried arguments they are read from the
session's stored assistant messages. [`waiting_lines()`][prism.cli._approval_prompt.waiting_lines] lists the waiting calls the same way
for ``prism resume RUN_ID`` without a decision.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Final

from prism.cli._interrupt import Interrupts
from prism.cli._render import Renderer
from prism.runtime.durable import (
    AgentRunInterruption,
    DecisionOutcome,
    PendingDecision,
    RunDecision,
)
from prism.store import SessionEntry
from prism.types import ToolCallContent

if TYPE_CHECKING:
    from prism import AgentSession

__all__ = [
    "ApprovalPrompt",
    "call_text",
    "calls_in",
    "pending_text",
    "stored_calls",
    "waiting_lines",
]

_PREVIEW_CHARS = 200

_ANSWERS: Final[dict[str, DecisionOutcome]] = {
    "y": "allow_once",
    "yes": "allow_once",
    "a": "allow_for_run",
    "always": "allow_for_run",
    "n": "reject_once",
    "no": "reject_once",
    "": "reject_once",
}
"""Terminal answers to an approval question, mapped to decision outcomes."""


@dataclass(slots=True, kw_only=True)
class ApprovalPrompt:
    """Asks on the terminal for a decision on each call a run waits for.

    Args:
        stdin: Where answers are read from (``None``: nothing can be asked).
        err: Where questions are written.
        interrupts: The command's Ctrl-C handling (reads a line so that Ctrl-C interrupts it).
        redact: Removes secrets from the text shown.
        broken: Whether the output was closed by its reader (then nothing more is asked).
    """

    stdin: IO[str] | None
    err: IO[str]
    interrupts: Interrupts
    redact: Callable[[str], str]
    broken: Callable[[], bool]

    async def ask(
        self, session: AgentSession, renderer: Renderer, interruption: object
    ) -> list[RunDecision] | None:
        """Ask for each pending tool call of ``interruption`` (the run state's dict form).

        Returns:
            One decision per pending call, or ``None`` when nothing can be asked, the input ends
            or Ctrl-C interrupts the question before all answers.
        """
        stdin = self.stdin
        if not isinstance(interruption, dict) or stdin is None:
            return None
        pending = AgentRunInterruption.from_dict(interruption).pending_decisions
        calls = await stored_calls(session)
        decisions: list[RunDecision] = []
        renderer.pause()
        try:
            for item in pending:
                shown = pending_text(item, calls)
                while True:
                    self.err.write(f"allow {self.redact(shown)}? [y]es / [n]o / [a]lways: ")
                    self.err.flush()
                    if self.broken():
                        return None
                    line = await self.interrupts.read_line(stdin)
                    if not line:  # end of input, or Ctrl-C (None)
                        self.err.write("\n")
                        return None
                    outcome = _ANSWERS.get(line.strip().lower())
                    if outcome is not None:
                        break
                decisions.append(RunDecision(item.approval_id, outcome))
        finally:
            renderer.unpause()
        return decisions


def call_text(call: ToolCallContent) -> str:
    """``name({...arguments})`` on one line, at most 200 characters of arguments."""
    return _shown(call.name, json.dumps(call.arguments, ensure_ascii=False))


def _shown(name: str, arguments: str) -> str:
    text = " ".join(arguments.split())
    if len(text) > _PREVIEW_CHARS:
        text = text[: _PREVIEW_CHARS - 1] + "…"
    return f"{name}({text})"


def pending_text(item: PendingDecision, calls: dict[str, ToolCallContent]) -> str:
    """``name({...arguments})`` of a pending decision: its own (redacted) arguments, else the
    stored call's, else the tool name alone; a child run's call is prefixed ``<agent> → ``."""
    name = item.tool_name or item.scope.tool_name or "tool"
    child = item.subagent  # a child run's call (an agent tool's child waiting for it)
    prefix = "" if child is None else f"{child.get('agent') or 'agent'} → "
    if item.arguments is not None:
        return prefix + _shown(name, item.arguments)
    call = calls.get(item.tool_call_id)
    return prefix + (call_text(call) if call is not None else name)


def waiting_lines(interruption: object, calls: dict[str, ToolCallContent]) -> list[str]:
    """One ``⏸ name({...arguments})  call <id>`` line per call a run waits for."""
    if not isinstance(interruption, dict):
        return []
    pending = AgentRunInterruption.from_dict(interruption).pending_decisions
    return [f"⏸ {pending_text(item, calls)}  call {item.tool_call_id}" for item in pending]


async def stored_calls(session: AgentSession) -> dict[str, ToolCallContent]:
    """Tool calls on the session's branch by id (for decisions stored without arguments)."""
    return calls_in(await session.entries())


def calls_in(entries: Iterable[SessionEntry]) -> dict[str, ToolCallContent]:
    """The tool calls of ``entries``' assistant messages, by id."""
    calls: dict[str, ToolCallContent] = {}
    for entry in entries:
        message = entry.message
        if message is None or message.role != "assistant":
            continue
        for part in message.content:
            if isinstance(part, ToolCallContent):
                calls[part.id] = part
    return calls
