"""The bounded tail of a stdio server's standard error.

The server's stderr is a pipe whose read end the event loop drains into a buffer that keeps only
the last :data:`TAIL_BYTES` bytes, so a chatty server costs bounded memory and a server that
exits can be reported with the last lines it wrote.
"""

from __future__ import annotations

import asyncio
import os
from typing import IO, Any, Final

__all__ = ["TAIL_BYTES", "TAIL_LINES", "StderrTail"]

TAIL_BYTES: Final = 8192
"""Bytes of standard error kept."""
TAIL_LINES: Final = 20
"""Lines of standard error shown in an error message."""


class _Reader(asyncio.Protocol):
    def __init__(self, tail: StderrTail) -> None:
        self.tail = tail

    def data_received(self, data: bytes) -> None:
        buffer = self.tail.buffer
        buffer.extend(data)
        if len(buffer) > TAIL_BYTES:
            del buffer[: len(buffer) - TAIL_BYTES]

    def eof_received(self) -> bool:
        self.tail.eof.set()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.tail.eof.set()


class StderrTail:
    """A pipe for a child's stderr and the tail of what it wrote.

    Use: ``await start()``; pass :attr:`writer` as the child's stderr; call
    :meth:`close_writer` once the child is spawned; read :meth:`text`; :meth:`close` at the end.
    """

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.writer: IO[str] = os.fdopen(write_fd, "w")
        self._reader_file: IO[bytes] | None = os.fdopen(read_fd, "rb")
        self._transport: Any = None
        self.buffer = bytearray()
        self.eof = asyncio.Event()

    async def start(self) -> None:
        """Start draining the pipe on the running loop."""
        loop = asyncio.get_running_loop()
        reader = self._reader_file
        assert reader is not None
        self._reader_file = None
        self._transport, _ = await loop.connect_read_pipe(lambda: _Reader(self), reader)

    def close_writer(self) -> None:
        """Close this process's copy of the write end (the child keeps its own)."""
        if not self.writer.closed:
            self.writer.close()

    async def settle(self, timeout: float = 1.0) -> None:  # noqa: ASYNC109
        """Wait (at most ``timeout`` seconds) until the child's end is closed and all read."""
        try:
            await asyncio.wait_for(self.eof.wait(), timeout)
        except TimeoutError:
            pass

    def text(self) -> str:
        """The last :data:`TAIL_LINES` non-empty lines written (``""`` when none)."""
        lines = self.buffer.decode("utf-8", "replace").splitlines()
        kept = [line.rstrip() for line in lines if line.strip()]
        return "\n".join(kept[-TAIL_LINES:])

    def close(self) -> None:
        """Close both ends."""
        self.close_writer()
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._reader_file is not None:
            self._reader_file.close()
            self._reader_file = None
