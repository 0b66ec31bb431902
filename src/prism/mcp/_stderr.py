"""A stdio server's process as prism sees it: the bounded tail of its stderr, and its exit status.

The server's stderr is a pipe whose read end the event loop drains into a buffer that keeps only
the last [`TAIL_BYTES`][prism.mcp._stderr.TAIL_BYTES] bytes, so a chatty server costs bounded memory and a server that
exits can be reported with the last lines it wrote.

The ``mcp`` SDK spawns the server and keeps the process to itself, so its exit status is learnt
through a small launcher ([`launcher_command()`][prism.mcp._stderr.launcher_command], POSIX): the SDK runs ``python -c`` with the
launcher code, which runs the server (same stdin, stdout, stderr, environment and working
directory; signals it receives are passed on), waits for it, writes one status line
([`_STATUS`][prism.mcp._stderr._STATUS] and the code) to stderr and exits with the server's code.
[`StderrTail.exit_status`][prism.mcp._stderr.StderrTail.exit_status] reads that line; [`StderrTail.text()`][prism.mcp._stderr.StderrTail.text] leaves it out.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import IO, Any, Final

__all__ = ["TAIL_BYTES", "TAIL_LINES", "StderrTail", "describe_exit", "launcher_command"]

TAIL_BYTES: Final = 8192
"""Bytes of standard error kept."""
TAIL_LINES: Final = 20
"""Lines of standard error shown in an error message."""


_STATUS: Final = "prism.mcp launcher: the server's exit status is "
"""Starts the launcher's status line, which [`StderrTail.text()`][prism.mcp._stderr.StderrTail.text] leaves out."""

_LAUNCHER: Final = f"""
import signal, subprocess, sys
try:
    child = subprocess.Popen(sys.argv[1:])
except OSError as exc:
    sys.stderr.write(f"cannot start {{sys.argv[1]!r}}: {{exc}}\\n")
    code = 127
else:
    def forward(signum, frame):
        if child.poll() is None:
            child.send_signal(signum)
    for name in ("SIGTERM", "SIGINT", "SIGHUP"):
        signal.signal(getattr(signal, name), forward)
    code = child.wait()
sys.stderr.write("{_STATUS}%d\\n" % code)
sys.stderr.flush()
sys.exit(code if code >= 0 else 128 - code)
"""


def launcher_command(command: str, args: list[str]) -> tuple[str, list[str]]:
    """The command and arguments that run ``command args`` under the exit-status launcher
    (unchanged where there is no launcher: Windows, or no known interpreter)."""
    if sys.platform == "win32" or not sys.executable:
        return command, args
    return sys.executable, ["-I", "-S", "-c", _LAUNCHER, command, *args]


def describe_exit(code: int) -> str:
    """``exited with code N`` or ``was killed by signal SIGNAME`` for a process's return code."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = str(-code)
    return f"was killed by signal {name}"


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

    Use: ``await start()``; pass [`writer`][prism.mcp._stderr.StderrTail.writer] as the child's stderr; call
    [`close_writer()`][prism.mcp._stderr.StderrTail.close_writer] once the child is spawned; read [`text()`][prism.mcp._stderr.StderrTail.text]; [`close()`][prism.mcp._stderr.StderrTail.close] at the end.
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
        """The last [`TAIL_LINES`][prism.mcp._stderr.TAIL_LINES] non-empty lines the server wrote (``""`` when none)."""
        lines = self.buffer.decode("utf-8", "replace").splitlines()
        kept = [line.rstrip() for line in lines if line.strip() and not line.startswith(_STATUS)]
        return "\n".join(kept[-TAIL_LINES:])

    @property
    def exit_status(self) -> int | None:
        """The server's return code once the launcher reported it (negative: killed by that
        signal), else ``None``."""
        for line in reversed(self.buffer.decode("utf-8", "replace").splitlines()):
            if line.startswith(_STATUS):
                try:
                    return int(line[len(_STATUS) :])
                except ValueError:
                    return None
        return None

    def close(self) -> None:
        """Close both ends."""
        self.close_writer()
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._reader_file is not None:
            self._reader_file.close()
            self._reader_file = None
