"""Secrets kept out of the log records of the libraries an MCP connection runs on.

The ``mcp`` SDK logs raw messages at DEBUG (``SSE message: …``, tool results included) and its
session id at INFO; ``httpx2``/``httpcore2`` log requests. None of them knows prism's secrets, so
while a connection is open, :class:`SecretLogFilter` sits on every logger of those libraries —
``mcp`` and ``mcp.*``, ``client`` (the SDK's session logger), and any logger whose name starts with
``httpx`` or ``httpcore`` — and rewrites each record before any handler sees it: the message is
formatted with its args, every registered secret is replaced by ``[REDACTED]``, and the result
becomes the record's ``msg`` (``args`` emptied); a traceback (``exc_info``) is rendered, redacted
into ``exc_text`` and dropped, as is redacted ``stack_info``. In the ``httpx*``/``httpcore*``
records every header value is replaced too (``httpcore`` logs the response headers as
``(b'name', b'value')`` pairs — the session id among them — before anyone could register it).

A filter on a logger applies only to records created on that very logger (records a child
logger propagates skip the parent's filters), so the filter is put on each matching logger that
exists, at every :func:`register` (the SDK modules a connection uses are imported by then, and
their loggers are module-level). :func:`register` adds a connection's secrets; :func:`unregister`
removes them, and the filter from every logger once no connection holds any.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable
from typing import Final

from prism.redaction import create_secret_redactor

__all__ = ["SecretLogFilter", "register", "unregister"]

_PREFIXES: Final = ("httpx", "httpcore")
_EXACT: Final = frozenset({"mcp", "client"})
_HEADER: Final = re.compile(r"""\((b?(['"]).*?\2), b?(['"]).*?\3\)""")
"""A ``(b'name', b'value')`` header pair as ``httpcore`` logs it."""


def _covered(name: str) -> bool:
    return name in _EXACT or name.startswith("mcp.") or name.startswith(_PREFIXES)


class SecretLogFilter(logging.Filter):
    """Redacts the registered secrets from each record it sees (never drops a record)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._secrets: dict[int, tuple[str, ...]] = {}
        self._redact: Callable[[str], str] | None = None

    def set_secrets(self, owner: int, secrets: Iterable[str] | None) -> None:
        """Set ``owner``'s secrets (``None``: forget the owner)."""
        with self._lock:
            if secrets is None:
                self._secrets.pop(owner, None)
            else:
                self._secrets[owner] = tuple(s for s in secrets if s)
            every = sorted({s for group in self._secrets.values() for s in group})
            self._redact = create_secret_redactor(every).redact if every else None

    @property
    def empty(self) -> bool:
        """No owner is registered."""
        return not self._secrets

    def filter(self, record: logging.LogRecord) -> bool:
        headers = record.name.startswith(_PREFIXES)
        if self._redact is None and not headers:
            return True
        redact = self._redact or _keep
        try:
            message = record.getMessage()
        except Exception:  # a broken format: keep the template, redacted
            message = str(record.msg)
        if headers:
            message = _HEADER.sub(r"(\1, b'[REDACTED]')", message)
        record.msg = redact(message)
        record.args = None
        if record.exc_info:
            text = record.exc_text or logging.Formatter().formatException(record.exc_info)
            record.exc_text = redact(text)
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def _keep(text: str) -> str:
    return text


_FILTER: Final = SecretLogFilter()
_GUARD: Final = threading.Lock()


def _loggers() -> list[logging.Logger]:
    for name in ("mcp", "client", "httpx2", "httpcore2"):
        logging.getLogger(name)
    manager = logging.Logger.manager
    return [
        logger
        for name, logger in list(manager.loggerDict.items())
        if isinstance(logger, logging.Logger) and _covered(name)
    ]


def register(owner: int, secrets: Iterable[str]) -> None:
    """Redact ``secrets`` (of connection ``owner``, e.g. its ``id``; replacing those it
    registered before) and header values from the covered loggers' records, and put the filter
    on every covered logger that exists now (idempotent)."""
    with _GUARD:
        _FILTER.set_secrets(owner, secrets)
        for logger in _loggers():
            logger.addFilter(_FILTER)  # no-op when already there


def unregister(owner: int) -> None:
    """Forget ``owner``'s secrets; with none left, take the filter off every logger."""
    with _GUARD:
        _FILTER.set_secrets(owner, None)
        if _FILTER.empty:
            for logger in _loggers():
                logger.removeFilter(_FILTER)
