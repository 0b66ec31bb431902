"""Logging of tool failures: the traceback of an exception raised by a tool, as redacted text.

When a tool's ``execute`` raises, the model gets an error result (``tool_execution_error``) that
carries only the exception's message. The host's developer needs the traceback too, so the
dispatcher also logs it on the logger ``prism.tools`` at level ``ERROR``:

* the traceback is formatted to text here (``traceback.format_exception``, chained causes
  included) and the log record carries only that text — no ``exc_info``, so no handler keeps the
  exception and its live frames (and the tool's local variables) alive;
* the text goes through the run's redaction (every secret replaced by ``[REDACTED]``) before the
  record is made;
* a traceback longer than [`MAX_LOGGED_TRACEBACK_CHARS`][prism.tools.failure_log.MAX_LOGGED_TRACEBACK_CHARS] keeps its end (where the exception
  was raised) and says how much was cut.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from typing import Final

__all__ = ["LOGGER", "MAX_LOGGED_TRACEBACK_CHARS", "format_tool_traceback", "log_tool_exception"]

LOGGER: Final = logging.getLogger("prism.tools")
"""The logger tool failures are written to."""

MAX_LOGGED_TRACEBACK_CHARS: Final = 16_000
"""Most characters of a traceback written to the log (the end is kept)."""


def format_tool_traceback(exc: BaseException, redact: Callable[[str], str]) -> str:
    """The traceback of ``exc`` as text, redacted, bounded.

    Args:
        exc: The exception a tool raised.
        redact: Removes secrets from text (the run's redaction).

    Returns:
        The formatted traceback (chained causes included), at most
        [`MAX_LOGGED_TRACEBACK_CHARS`][prism.tools.failure_log.MAX_LOGGED_TRACEBACK_CHARS] characters plus a one-line note when it was cut.
    """
    text = redact("".join(traceback.format_exception(exc)).rstrip("\n"))
    if len(text) > MAX_LOGGED_TRACEBACK_CHARS:
        cut = len(text) - MAX_LOGGED_TRACEBACK_CHARS
        text = f"[{cut} characters cut]\n" + text[cut:]
    return text


def log_tool_exception(
    exc: BaseException,
    *,
    tool_name: str,
    tool_call_id: str,
    run_id: str,
    redact: Callable[[str], str],
) -> None:
    """Log that tool ``tool_name`` raised ``exc`` (level ``ERROR`` on ``prism.tools``).

    The message names the tool, the call and the run, followed by the redacted traceback text
    ([`format_tool_traceback()`][prism.tools.failure_log.format_tool_traceback]); nothing is formatted when the logger would drop the record.

    Args:
        exc: The exception.
        tool_name: The tool's name.
        tool_call_id: The call's id.
        run_id: The run's id.
        redact: Removes secrets from the traceback text.
    """
    if not LOGGER.isEnabledFor(logging.ERROR):
        return
    LOGGER.error(
        "tool %s raised %s (call %s, run %s); the model receives an error result\n%s",
        tool_name,
        type(exc).__name__,
        tool_call_id,
        run_id,
        format_tool_traceback(exc, redact),
    )
