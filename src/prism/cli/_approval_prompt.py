"""Approval questions on the terminal: one ``allow …? [y]es / [n]o / [a]lways`` per waiting call.

A run waiting for approvals carries only the calls' ids and tool names; the
arguments shown in the question are read from the session's stored assistant messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Final

from prism.cli._interrupt import Interrupts
from prism.cli._render import Renderer
from prism.runtime.durable import AgentRunInterruption, DecisionOutcome, RunDecision
from prism.types import ToolCallContent

if TYPE_CHECKING:
    from prism import AgentSession

__all__ = ["ApprovalPrompt", "call_text", "stored_calls"]

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


class ApprovalPrompt:
    """Asks on the terminal for a decision on each call a run waits for.

    Args:
        stdin: Where answers are read from (``None``: nothing can be asked).
        err: Where questions are written.
        interrupts: The command's Ctrl-C handling (reads a line so that Ctrl-C interrupts it).
        redact: Removes secrets from the text shown.
        broken: Whether the output was closed by its reader (then nothing more is asked).
    """

    def __init__(
        self,
        *,
        stdin: IO[str] | None,
        err: IO[str],
        interrupts: Interrupts,
        redact: Callable[[str], str],
        broken: Callable[[], bool],
    ) -> None:
        self.stdin = stdin
        self.err = err
        self.interrupts = interrupts
        self.redact = redact
        self.broken = broken

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
                call = calls.get(item.tool_call_id)
                shown = call_text(call) if call is not None else str(item.scope.tool_name)
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
    text = json.dumps(call.arguments, ensure_ascii=False)
    text = " ".join(text.split())
    if len(text) > _PREVIEW_CHARS:
        text = text[: _PREVIEW_CHARS - 1] + "…"
    return f"{call.name}({text})"


async def stored_calls(session: AgentSession) -> dict[str, ToolCallContent]:
    """Tool calls on the session's branch by id (interruptions never carry arguments)."""
    calls: dict[str, ToolCallContent] = {}
    for entry in await session.entries():
        message = entry.message
        if message is None or message.role != "assistant":
            continue
        for part in message.content:
            if isinstance(part, ToolCallContent):
                calls[part.id] = part
    return calls
