"""Logging of tool failures: the traceback of an exception raised by a tool, as redacted text.

When a tool's ``execute`` raises, the model gets an error result (``tool_execution_error``) that
carries only the exception's message. The host's developer needs the traceback too, so the
dispatcher also logs it on the logger ``prism.tools`` at level ``ERROR``:

* the traceback is formatted to text here (``traceback.format_exception``, chained causes
  included) and the log record carries only that text — no ``exc_info``, so no handler keeps the
  exception and its live frames (and the tool's local variables) alive;
* every secret of the run's redactor is replaced by ``[REDACTED]`` before the record is made;
* a traceback longer than :data:`MAX_LOGGED_TRACEBACK_CHARS` keeps its end (where the exception
  was raised) and says how much was cut.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterable
from typing import Final

from prism.redaction import redact_value

__all__ = ["LOGGER", "MAX_LOGGED_TRACEBACK_CHARS", "format_tool_traceback", "log_tool_exception"]

LOGGER: Final = logging.getLogger("prism.tools")
"""The logger tool failures are written to."""

MAX_LOGGED_TRACEBACK_CHARS: Final = 16_000
"""Most characters of a traceback written to the log (the end is kept)."""


def format_tool_traceback(exc: BaseException, secrets: Iterable[str]) -> str:
    """The traceback of ``exc`` as text, secrets replaced by ``[REDACTED]``, bounded.

    Args:
        exc: The exception a tool raised.
        secrets: Strings to remove (the run's redactor secrets); empty strings are ignored.

    Returns:
        The formatted traceback (chained causes included), at most
        :data:`MAX_LOGGED_TRACEBACK_CHARS` characters plus a one-line note when it was cut.
    """
    text = "".join(traceback.format_exception(exc)).rstrip("\n")
    text = redact_value(text, tuple(s for s in secrets if s))
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
    secrets: Iterable[str],
) -> None:
    """Log that tool ``tool_name`` raised ``exc`` (level ``ERROR`` on ``prism.tools``).

    The message names the tool, the call and the run, followed by the redacted traceback text
    (:func:`format_tool_traceback`); nothing is formatted when the logger would drop the record.

    Args:
        exc: The exception.
        tool_name: The tool's name.
        tool_call_id: The call's id.
        run_id: The run's id.
        secrets: Strings to redact from the traceback.
    """
    if not LOGGER.isEnabledFor(logging.ERROR):
        return
    LOGGER.error(
        "tool %s raised %s (call %s, run %s); the model receives an error result\n%s",
        tool_name,
        type(exc).__name__,
        tool_call_id,
        run_id,
        format_tool_traceback(exc, secrets),
    )
