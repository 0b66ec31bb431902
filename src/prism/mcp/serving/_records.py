"""What a served agent keeps in the store beside its runs: who owns each conversation, the
outcome of each run, and which serving processes are alive.

Every record is a checkpoint in the namespace [`NAMESPACE`][prism.mcp.serving._records.NAMESPACE] of the served agents' checkpoint
store, so it lives as long as the runs it describes and is shared by every server on the store:

* ``session:<session id>`` — ``{"principal", "tool", "server"}``: the client that opened the
  conversation (a digest, never a token or a transport session id), the tool it was opened
  with, and the server that ran its latest call (whose liveness decides who resumes its runs);
* ``result:<run id>`` — the run's outcome as the client sees it (``status``, the redacted
  answer, the artifact, usage, the error code and message), kept for ``<name>_result``;
* ``server:<server id>`` — a serving process: host, pid, last heartbeat, stopped.

A principal is who the server scopes conversations and runs to: the bearer token's digest over
HTTP with a token, else the digest of the MCP session id (``Mcp-Session-Id``), ``"stdio"`` for
the one client of a stdio server (and of an in-process connection). A request without one (an
HTTP client of the sessionless 2026 protocol revision, without a token) can start calls but never
continue or collect them.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import Any, Final

from prism._json import JsonValue
from prism.checkpoints import CheckpointRecord, CheckpointStore
from prism.errors import CheckpointConflictError

__all__ = [
    "LOCAL_PRINCIPAL",
    "NAMESPACE",
    "PRINCIPAL_SCOPE_KEY",
    "Records",
    "principal_of",
    "token_principal",
]

NAMESPACE: Final = "prism.mcp-serve"
"""Checkpoint namespace of the serving records."""
LOCAL_PRINCIPAL: Final = "stdio"
"""The principal of a stdio (or in-process) connection: the one local client."""
PRINCIPAL_SCOPE_KEY: Final = "prism.mcp.principal"
"""ASGI scope key where the bearer-token check leaves the request's principal."""
_SESSION_HEADER: Final = "mcp-session-id"
_CAS_TRIES: Final = 8


def _digest(kind: str, value: str) -> str:
    return f"{kind}:" + hashlib.sha256(value.encode("utf-8")).hexdigest()[:32]


def token_principal(token: str) -> str:
    """The principal of a bearer token (a digest; the token is never stored)."""
    return _digest("token", token)


def principal_of(request: object) -> str | None:
    """The principal of a request: ``ctx.request`` of an MCP handler (a Starlette request over
    HTTP, ``None`` over stdio and in process). ``None``: an HTTP request with neither a token
    principal nor an MCP session id."""
    if request is None:
        return LOCAL_PRINCIPAL
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict):
        found = scope.get(PRINCIPAL_SCOPE_KEY)
        if isinstance(found, str) and found:
            return found
    headers = getattr(request, "headers", None)
    session = headers.get(_SESSION_HEADER) if headers is not None else None
    if isinstance(session, str) and session:
        return _digest("mcp-session", session)
    return None


class Records:
    """The serving records in one checkpoint store (see the module docstring)."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store

    async def load(self, key: str) -> CheckpointRecord | None:
        """The record ``key`` (``"session:…"``, ``"result:…"``, ``"server:…"``), if any."""
        return await self.store.load_checkpoint(namespace=NAMESPACE, key=key)

    async def value(self, key: str) -> dict[str, Any] | None:
        """The value of record ``key`` when it is an object, else ``None``."""
        record = await self.load(key)
        return record.value if record is not None and isinstance(record.value, dict) else None

    async def update(
        self, key: str, change: Callable[[dict[str, Any] | None], dict[str, JsonValue] | None]
    ) -> dict[str, JsonValue] | None:
        """Compare-and-set record ``key`` to ``change(current value)`` (retried on a conflict; a
        ``None`` from ``change`` writes nothing). Returns what was written, else ``None``.

        Raises:
            CheckpointConflictError: ``ERR_PRISM_CHECKPOINT_CONFLICT`` — still conflicting after
                a few tries.
        """
        for attempt in range(_CAS_TRIES):
            record = await self.load(key)
            current = (
                record.value if record is not None and isinstance(record.value, dict) else None
            )
            new = change(current)
            if new is None:
                return None
            version = record.version if record is not None else 0
            try:
                await self.store.save_checkpoint(
                    namespace=NAMESPACE,
                    key=key,
                    value=new,
                    version=version + 1,
                    expected_version=version,
                )
            except CheckpointConflictError:
                if attempt == _CAS_TRIES - 1:
                    raise
                continue
            return new
        return None  # pragma: no cover - the loop returns or raises

    async def claim(
        self, key: str, expected: CheckpointRecord, value: dict[str, JsonValue]
    ) -> bool:
        """Set record ``key`` to ``value`` if it is still at ``expected.version``; ``False`` when
        another writer moved it first."""
        try:
            await self.store.save_checkpoint(
                namespace=NAMESPACE,
                key=key,
                value=value,
                version=expected.version + 1,
                expected_version=expected.version,
            )
        except CheckpointConflictError:
            return False
        return True

    # ----------------------------------------------------------------- servers

    async def beat(self, server_id: str, *, stopped: bool = False) -> None:
        """Write this process's liveness record."""
        value: dict[str, JsonValue] = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "heartbeat_at": time.time(),
            "stopped": stopped,
        }
        await self.update(f"server:{server_id}", lambda _: value)

    async def alive(self, server_id: str, *, me: str, lease_s: float) -> bool:
        """Whether server ``server_id`` is alive: not this process's id, not stopped, not a dead
        process of this host, and its last heartbeat within ``lease_s`` seconds."""
        if server_id == me:
            return True
        found = await self.value(f"server:{server_id}")
        if found is None or found.get("stopped"):
            return False
        if found.get("host") == socket.gethostname():
            pid = found.get("pid")
            if not isinstance(pid, int) or pid == os.getpid() or not _pid_alive(pid):
                return False
        beat = found.get("heartbeat_at")
        return isinstance(beat, (int, float)) and time.time() - beat < lease_s


def _pid_alive(pid: int) -> bool:
    if sys.platform == "win32":  # os.kill would end the process there: the heartbeat decides
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it exists
        return True
    return True
