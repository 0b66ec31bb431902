"""Ctrl-C during ``prism run`` and ``prism resume``.

While a run is shown, the command handles SIGINT itself (``loop.add_signal_handler``, so the
handler runs on the event loop, never in the middle of the runtime's code):

* the first Ctrl-C during a leg that carries the command's turn policy (a fresh ``prism run``)
  asks for a clean stop at the next turn boundary: the policy answers ``Stop("interrupted
  (Ctrl-C)")``, the run ends ``succeeded`` with ``stop_reason="host_policy"`` and, being durable with
  every-turn checkpoints, ``prism resume RUN_ID`` continues it;
* the first Ctrl-C at an approval question stops asking: the run stays suspended;
* a second Ctrl-C — or the first one during a leg without a turn policy (resumed legs never carry
  one) — aborts the run at once through the run's abort signal; an aborted run is
  final, the conversation continues with ``prism run --session ID``;
* after that abort the previous SIGINT handler is back, so a further Ctrl-C interrupts the process.

Where the loop cannot handle signals (not the main thread, no ``add_signal_handler``) nothing is
installed and Ctrl-C keeps Python's default behaviour.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from typing import IO, Any, Final

from prism.abort import AbortController

__all__ = [
    "INTERRUPT_ABORT_REASON",
    "INTERRUPT_STOP_REASON",
    "Interrupts",
]

INTERRUPT_STOP_REASON: Final = "interrupted (Ctrl-C)"
"""``stop_detail`` of a run stopped at a turn boundary by the first Ctrl-C."""
INTERRUPT_ABORT_REASON: Final = "aborted (Ctrl-C)"
"""Abort reason of a run aborted by Ctrl-C."""


class Interrupts:
    """SIGINT handling of one command invocation (see the module docstring).

    Args:
        controller: Aborts the run (its signal is passed to every leg).
        notify: Shows one line to the user (the renderer's ``notice``).
    """

    def __init__(self, controller: AbortController, notify: Callable[[str], object]) -> None:
        self.controller = controller
        self.notify = notify
        self.count = 0
        """Ctrl-C presses so far."""
        self.stop_requested = False
        """A clean stop at the next turn boundary was asked for."""
        self.aborted = False
        """The run was aborted by Ctrl-C."""
        self.prompt_interrupted = False
        """An approval question was interrupted."""
        self.policy_leg = False
        """The running leg carries the command's turn policy (a clean stop is possible)."""
        self._prompt: asyncio.Future[str | None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._saved: Any = None
        self._installed = False

    # ------------------------------------------------------------------ handler

    def __enter__(self) -> Interrupts:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def install(self) -> None:
        """Handle SIGINT on the running loop (a no-op where that is impossible)."""
        if threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        saved = signal.getsignal(signal.SIGINT)
        try:
            loop.add_signal_handler(signal.SIGINT, self._on_sigint)
        except (NotImplementedError, RuntimeError, ValueError):
            return
        self._loop, self._saved, self._installed = loop, saved, True

    def uninstall(self) -> None:
        """Give SIGINT back to the handler installed before [`install()`][prism.cli._interrupt.Interrupts.install]."""
        if not self._installed:
            return
        self._installed = False
        loop = self._loop
        if loop is not None:
            try:
                loop.remove_signal_handler(signal.SIGINT)
            except (RuntimeError, ValueError):
                pass
        if self._saved is not None:
            try:
                signal.signal(signal.SIGINT, self._saved)
            except (TypeError, ValueError):
                pass

    def _on_sigint(self) -> None:
        self.count += 1
        prompt = self._prompt
        if prompt is not None and not prompt.done():
            self.prompt_interrupted = True
            prompt.set_result(None)
            return
        if self.count == 1 and self.policy_leg:
            self.stop_requested = True
            self.notify("stopping after the current turn (press Ctrl-C again to abort now)")
            return
        self.abort()

    def abort(self) -> None:
        """Abort the run now and restore the previous SIGINT handler."""
        self.aborted = True
        self.controller.abort(INTERRUPT_ABORT_REASON)
        self.uninstall()

    # ------------------------------------------------------------------ turn policy

    def turn_policy(self, max_turns: int | None) -> Any:
        """The turn policy of a fresh run: a clean stop after a first Ctrl-C, or after
        ``max_turns`` completed provider turns (both ``host_policy``, resumable)."""
        from prism.runtime.run.turn_policy import Continue, Stop, TurnPolicy

        def stop(ctx: Any) -> Any:
            if self.stop_requested:
                return Stop(INTERRUPT_STOP_REASON)
            if max_turns is not None and ctx.turns >= max_turns:
                return Stop(f"--max-turns {max_turns}")
            return Continue()

        return TurnPolicy(stop=stop)

    # ------------------------------------------------------------------ questions

    async def read_line(self, stdin: IO[str]) -> str | None:
        """One line from ``stdin`` (``""`` at its end), or ``None`` when Ctrl-C interrupted the
        question.

        The line is read on a daemon thread, so an unanswered question never keeps the process
        alive.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str | None] = loop.create_future()

        def deliver(line: str) -> None:
            if not future.done():
                future.set_result(line)

        def read() -> None:
            try:
                line = stdin.readline()
            except (OSError, ValueError):
                line = ""
            try:
                loop.call_soon_threadsafe(deliver, line)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

        threading.Thread(target=read, name="prism-approval-input", daemon=True).start()
        self._prompt = future
        try:
            return await future
        finally:
            self._prompt = None
