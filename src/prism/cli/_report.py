"""How a ``prism run`` / ``prism resume`` ends: exit code, closing notices and ``run_result``.

The command drives the run; this module turns what came back (a run result, a failed run, a
failure before any result, a run left waiting for approvals) into the renderer's last lines, the
``--json`` ``run_result`` line, a best-effort note in the store, and the process exit code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any

from prism.cli._approval_prompt import call_text, pending_text, stored_calls
from prism.cli._exit_codes import (
    CONNECTION_ERROR_CODES,
    EXIT_BROKEN_PIPE,
    EXIT_DENIED,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SUSPENDED,
)
from prism.cli._interrupt import INTERRUPT_STOP_REASON, Interrupts
from prism.cli._render import Renderer
from prism.cli._store import display_url, save_run_note
from prism.errors import AgentRunError
from prism.stores import DatabaseStore
from prism.types import RunResult, Usage, message_text
from prism.usage import UsageAccumulator

if TYPE_CHECKING:
    from prism import AgentSession

__all__ = ["RunReport"]


@dataclass(slots=True)
class RunReport:
    """The end of one command run, reported through ``renderer``.

    Args:
        renderer: The command's renderer (its turn count goes into ``run_result``).
        store: The command's store (the run's note is saved there).
        usage: Usage summed over every leg the command ran.
        interrupts: The command's Ctrl-C handling (how many, and whether one aborted the run).
        redact: Removes secrets from messages.
        broken: Whether the output was closed by its reader (then nothing more is printed and
            the exit code is 141).
        endpoint: The endpoint the model spec points at, named after a connection failure.
    """

    renderer: Renderer
    _: KW_ONLY
    store: DatabaseStore
    usage: UsageAccumulator
    interrupts: Interrupts
    redact: Callable[[str], str]
    broken: Callable[[], bool]
    endpoint: str | None

    def error(
        self, session_id: str, run_id: str, message: str, code: str | int | None, exit: int
    ) -> int:
        """A failure that produced no run result (the run did not start, or lost its claim)."""
        if self.broken():
            return EXIT_BROKEN_PIPE
        self.renderer.failed(message, self.usage.value())
        self._footer(session_id, run_id)
        error = {"message": message, "code": str(code)}
        self.renderer.result(
            self._summary(
                status="failed", run_id=run_id, session_id=session_id, code=exit, error=error
            )
        )
        return exit

    def unreachable(self, session_id: str | None, message: str, code: str, exit: int) -> int:
        """The model's server could not be reached before the run started: nothing was stored
        (no session, no run)."""
        if self.broken():
            return EXIT_BROKEN_PIPE
        self.renderer.failed(message, self.usage.value())
        if session_id:
            self.renderer.notice(f"session {session_id} unchanged; nothing was stored")
        else:
            self.renderer.notice("nothing was stored (no session was created)")
        summary = self._summary(
            status="failed",
            run_id="",
            session_id=session_id or "",
            code=exit,
            error={"message": message, "code": code},
        )
        summary["run_id"] = None
        summary["session_id"] = session_id
        self.renderer.result(summary)
        return exit

    def _summary(
        self,
        *,
        status: str,
        run_id: str,
        session_id: str,
        code: int,
        result: RunResult | None = None,
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The ``run_result`` line of ``--json``."""
        usage: Usage | None = self.usage.value()
        summary: dict[str, Any] = {
            "type": "run_result",
            "status": status,
            "run_id": run_id,
            "session_id": session_id,
            "usage": None if usage is None else usage.to_dict(),
            "stop_reason": None if result is None else result.stop_reason,
            "provider_stop_reason": None if result is None else result.provider_stop_reason,
        }
        if result is not None and result.stop_detail is not None:
            summary["stop_detail"] = result.stop_detail
        if error is not None:
            summary["error"] = error
        summary["turns"] = self.renderer.stats.turns
        summary["exit_code"] = code
        return summary

    def _footer(self, session_id: str, run_id: str) -> None:
        self.renderer.notice(
            f"session {session_id} · run {run_id}" if run_id else f"session {session_id}"
        )

    def still_suspended(self, session_id: str, run_id: str, message: str, code: str | None) -> int:
        """A resume refused before it claimed the run: nothing was written and the run still
        waits for its approval (exit 3, as a run that waits)."""
        if self.broken():
            return EXIT_BROKEN_PIPE
        self.renderer.notice(f"still suspended: {message}")
        self._footer(session_id, run_id)
        error = {"message": message, "code": str(code)}
        self.renderer.result(
            self._summary(
                status="suspended",
                run_id=run_id,
                session_id=session_id,
                code=EXIT_SUSPENDED,
                error=error,
            )
        )
        return EXIT_SUSPENDED

    def still_waiting(self, session_id: str, run_id: str) -> int:
        code = EXIT_INTERRUPTED if self.interrupts.count else EXIT_SUSPENDED
        if self.broken():
            return EXIT_BROKEN_PIPE
        self.renderer.notice(_waiting(run_id))
        self._footer(session_id, run_id)
        self.renderer.result(
            self._summary(status="suspended", run_id=run_id, session_id=session_id, code=code)
        )
        return code

    async def _note(self, run_id: str, note: dict[str, Any]) -> None:
        """Best effort: the store may be what failed."""
        if not run_id:
            return
        try:
            await save_run_note(self.store, run_id, note)
        except Exception:  # a note must never hide the run's own outcome
            pass

    async def failed(self, session: AgentSession, exc: AgentRunError) -> int:
        result: RunResult | None = getattr(exc, "result", None)
        if result is not None:
            self.usage.add(result.usage)
        run_id = exc.run_id
        session_id = result.session_id if result is not None and result.session_id else session.id
        status = result.status if result is not None else "failed"
        message = self.redact(str(exc))
        info = result.error if result is not None else None
        endpoint = self.endpoint
        if info is not None and info.code in CONNECTION_ERROR_CODES and endpoint:
            message += f" ({display_url(endpoint)})"
        code_text = str(info.code) if info is not None and info.code is not None else exc.code
        error = {"message": message, "code": code_text}
        await self._note(run_id, {"status": status, "error": error})
        if self.broken():
            return EXIT_BROKEN_PIPE
        usage = self.usage.value()
        if status == "aborted" and self.interrupts.aborted:
            code = EXIT_INTERRUPTED
            self.renderer.failed("run aborted (Ctrl-C)", usage)
            self.renderer.notice(
                "an aborted run cannot be resumed; continue the conversation with: "
                f"prism run --session {session_id} PROMPT"
            )
        else:
            code = EXIT_FAILED
            self.renderer.failed(message, usage)
        self._footer(session_id, run_id)
        self.renderer.result(
            self._summary(
                status=status,
                run_id=run_id,
                session_id=session_id,
                code=code,
                result=result,
                error=error,
            )
        )
        return code

    async def outcome(self, session: AgentSession, result: RunResult) -> int:
        run_id = result.run_id
        session_id = result.session_id
        if result.status == "suspended":
            if self.broken():
                return EXIT_BROKEN_PIPE
            interruption = result.interruption
            if interruption is not None and interruption.pending_decisions:
                calls = await stored_calls(session)
                for item in interruption.pending_decisions:
                    call = calls.get(item.tool_call_id)
                    shown = (
                        call_text(call)
                        if call is not None and item.subagent is None
                        else pending_text(item, calls)
                    )
                    self.renderer.notice(f"⏸ {self.redact(shown)} needs approval")
            code = EXIT_INTERRUPTED if self.interrupts.count else EXIT_SUSPENDED
            self.renderer.notice(_waiting(run_id))
        elif result.status == "denied":
            # the runtime answered the denied calls with approval_rejected rows, so
            # prism run --session can continue the conversation
            if self.broken():
                return EXIT_BROKEN_PIPE
            code = EXIT_DENIED
            self.renderer.notice(f"run {run_id} denied; the tool call did not run")
        else:
            code = EXIT_OK
            if result.stop_reason == "host_policy":
                await self._note(run_id, {"stop_detail": result.stop_detail})
            if self.broken():
                return EXIT_BROKEN_PIPE
            self.renderer.succeeded(self.usage.value(), result.artifact)
            if result.stop_reason == "tool_round_limit" and _empty_answer(result):
                # the model kept calling tools until the round limit; say which knob ends that
                self.renderer.notice(
                    "the run stopped at the tool-round limit (stop reason tool_round_limit) "
                    "without a text answer; --tool-rounds N makes the model answer after N "
                    "tool rounds"
                )
            elif result.stop_reason != "host_policy" and _empty_answer(result):
                # exit 0 stays (the run did succeed), but say so: a small model or a too-low
                # max_tokens often ends a run with no text at all
                self.renderer.notice(
                    "the model's final answer was empty (provider stop reason: "
                    f"{result.provider_stop_reason or 'not reported'})"
                )
            if result.stop_reason == "host_policy":
                if result.stop_detail == INTERRUPT_STOP_REASON:
                    code = EXIT_INTERRUPTED
                    self.renderer.notice(
                        f"interrupted at a turn boundary; continue with: prism resume {run_id}"
                    )
                else:
                    self.renderer.notice(
                        f"stopped at --max-turns; continue with: prism resume {run_id}"
                    )
        self._footer(session_id, run_id)
        self.renderer.result(
            self._summary(
                status=result.status,
                run_id=run_id,
                session_id=session_id,
                code=code,
                result=result,
            )
        )
        return code


def _empty_answer(result: RunResult) -> bool:
    """Whether a succeeded run ended with no answer text and no artifact."""
    if result.artifact is not None:
        return False
    # an empty provider turn stores no assistant message at all
    last = result.messages[-1] if result.messages else None
    return last is None or last.role != "assistant" or not message_text(last).strip()


def _waiting(run_id: str) -> str:
    return f"waiting for approval; decide with: prism resume {run_id} --approve (or --deny)"
