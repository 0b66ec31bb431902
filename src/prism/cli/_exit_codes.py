"""Exit codes of ``prism run`` / ``prism resume`` and the abort reason of a closed output."""

from __future__ import annotations

from typing import Final

__all__ = [
    "CONNECTION_ERROR_CODES",
    "EXIT_BROKEN_PIPE",
    "EXIT_DENIED",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SUSPENDED",
    "EXIT_USAGE",
    "PIPE_ABORT_REASON",
]

EXIT_OK: Final = 0
"""The run succeeded (also: stopped by ``--max-turns``)."""
EXIT_DENIED: Final = 0
"""``prism resume RUN_ID --deny`` denied the waiting tool calls as asked (the ``run_result``
line says ``"status": "denied"``)."""
EXIT_FAILED: Final = 1
"""The run failed or was aborted."""
EXIT_USAGE: Final = 2
"""Invalid command line or configuration (bad ``--model``, missing key or extra, bad schema,
unusable store), or a run that cannot be resumed."""
EXIT_SUSPENDED: Final = 3
"""The run is waiting for an approval: ``prism resume RUN_ID --approve`` (or ``--deny``)."""
EXIT_INTERRUPTED: Final = 130
"""Ctrl-C (128 + SIGINT): the run stopped at a turn boundary, was aborted, or an approval
question was left unanswered."""
EXIT_BROKEN_PIPE: Final = 141
"""The output was closed by its reader (128 + SIGPIPE, what a shell reports for a writer killed by
a closed pipe): the run was aborted and nothing more was printed."""

PIPE_ABORT_REASON: Final = "output closed (broken pipe)"
"""Abort reason of a run whose output was closed."""

CONNECTION_ERROR_CODES: Final = frozenset(
    {"ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENOTFOUND", "EAI_AGAIN", "timeout"}
)
"""Provider error codes after which the failure names the endpoint the command tried."""
