"""Where the ``prism`` command keeps its sessions (10-stores DB-2; 05-durable-runs).

Every ``prism run`` is a durable run (``checkpoint_policy="every-turn"``) over one store that holds
the sessions, the run-state envelopes and the command's own per-session settings:

* the store URL is ``--store URL``, else ``$PRISM_STORE``, else the SQLite file
  ``$XDG_DATA_HOME/prism/sessions.db`` (``~/.local/share/prism/sessions.db`` without
  ``XDG_DATA_HOME``);
* the settings a session's agent was built from (model spec, tools, loop, …; never API keys) are a
  checkpoint under ``namespace="prism.cli.session"``, ``key=session_id``, so ``prism resume`` and
  ``prism run --session`` rebuild the same agent (its fingerprint must match, DUR-5);
* a session's runs are the distinct ``run_id`` values of its entries, their state is their
  envelope (``namespace="prism.agent-run"``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from prism.errors import AgentRunStateError, CheckpointConflictError, PrismError
from prism.runtime.checkpoints import AGENT_RUN_NAMESPACE
from prism.runtime.durable import load_agent_run_state
from prism.stores import DatabaseStore, open_store

__all__ = [
    "AGENT_ID",
    "DEFINITION_REVISION",
    "PG_CONNECT_TIMEOUT_S",
    "SETTINGS_NAMESPACE",
    "STORE_ENV",
    "RunInfo",
    "StoreError",
    "check_run",
    "default_store_path",
    "display_url",
    "last_run",
    "load_run",
    "load_settings",
    "open_cli_store",
    "save_settings",
    "session_runs",
    "store_url",
]

STORE_ENV: Final = "PRISM_STORE"
"""Environment variable naming the store URL when ``--store`` is not given."""
SETTINGS_NAMESPACE: Final = "prism.cli.session"
"""Checkpoint namespace of the command's per-session settings (``key=session_id``)."""
AGENT_ID: Final = "prism-cli"
"""Agent id of every run the command starts (part of the fingerprint, DUR-5)."""
DEFINITION_REVISION: Final = "prism-cli-1"
"""``definition_revision`` of the command's durable runs (DUR-1)."""
PG_CONNECT_TIMEOUT_S: Final = 10
"""Seconds to wait for a PostgreSQL server before reporting it unreachable."""


class StoreError(Exception):
    """The store cannot be opened or used (bad URL, unreachable, refused schema)."""


def default_store_path(environ: Mapping[str, str]) -> Path:
    """``$XDG_DATA_HOME/prism/sessions.db``, else ``~/.local/share/prism/sessions.db``."""
    data_home = environ.get("XDG_DATA_HOME", "").strip()
    if data_home and os.path.isabs(data_home):
        base = Path(data_home)
    else:
        home = environ.get("HOME", "").strip() or str(Path.home())
        base = Path(home) / ".local" / "share"
    return base / "prism" / "sessions.db"


def store_url(option: str | None, environ: Mapping[str, str]) -> str:
    """The store URL: ``option``, else ``$PRISM_STORE``, else the default SQLite file."""
    if option:
        return option
    value = environ.get(STORE_ENV, "").strip()
    if value:
        return value
    return "sqlite:///" + str(default_store_path(environ).resolve())


def display_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


async def open_cli_store(url: str) -> DatabaseStore:
    """Open (and migrate) the store; the parent directory of a SQLite file is created.

    Raises:
        StoreError: the URL is not supported, the database cannot be opened or its schema is
            refused (``ERR_PRISM_STORE_SCHEMA``); the message never shows a password.
    """
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower() == "sqlite" and rest.startswith("/") and rest != "/:memory:":
        parent = Path(rest[1:]).parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create {parent}: {exc.strerror or exc}") from None
    if sep and scheme.lower() in ("postgresql", "postgres"):
        await _check_reachable(url)
    try:
        return await open_store(url)
    except PrismError as exc:
        raise StoreError(f"cannot open store {display_url(url)}: {exc}") from None
    except ImportError as exc:
        raise StoreError(f"cannot open store {display_url(url)}: {exc}") from None
    except Exception as exc:  # sqlite3 / psycopg connection errors
        message = str(exc).replace(url, display_url(url)).strip() or type(exc).__name__
        raise StoreError(f"cannot open store {display_url(url)}: {message}") from None


async def _check_reachable(url: str) -> None:
    """Fail fast (one connection, ``PG_CONNECT_TIMEOUT_S``) instead of waiting for the pool."""
    try:
        import psycopg
    except ImportError:
        raise StoreError(
            "a PostgreSQL store needs the postgres extra: pip install 'prism-runtime[postgres]'"
        ) from None
    try:
        conn = await psycopg.AsyncConnection.connect(url, connect_timeout=PG_CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        reason = lines[0] if lines else type(exc).__name__
        raise StoreError(f"cannot open store {display_url(url)}: {reason}") from None
    await conn.close()


# --------------------------------------------------------------------------- settings


async def load_settings(store: DatabaseStore, session_id: str) -> dict[str, Any] | None:
    """The settings stored for ``session_id`` (``None`` when the command never ran it)."""
    record = await store.load_checkpoint(namespace=SETTINGS_NAMESPACE, key=session_id)
    if record is None or not isinstance(record.value, dict):
        return None
    return dict(record.value)


async def save_settings(store: DatabaseStore, session_id: str, value: dict[str, Any]) -> None:
    """Store ``value`` as the settings of ``session_id`` (compare-and-set, one retry)."""
    for attempt in range(2):
        record = await store.load_checkpoint(namespace=SETTINGS_NAMESPACE, key=session_id)
        current = 0 if record is None else record.version
        if record is not None and record.value == value:
            return
        try:
            await store.save_checkpoint(
                namespace=SETTINGS_NAMESPACE,
                key=session_id,
                value=value,
                version=current + 1,
                expected_version=current,
            )
            return
        except CheckpointConflictError:
            if attempt:
                raise


# --------------------------------------------------------------------------- runs


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One run of a session, as its envelope describes it."""

    run_id: str
    """The run id."""
    status: str | None
    """The envelope's ``status`` (``None``: no envelope — the run never reached a checkpoint)."""
    stop_reason: str | None = None
    """``host_policy`` / ``turn_limit`` on a policy-stopped run."""
    version: int = 0
    """The envelope version (what a resume expects)."""

    @property
    def continuable(self) -> bool:
        """``prism resume`` can continue it (suspended, crashed or stopped by ``--max-turns``)."""
        return self.status in ("suspended", "running") or (
            self.status == "succeeded" and self.stop_reason == "host_policy"
        )

    @property
    def blocks_session(self) -> bool:
        """A new prompt must wait until this run is resumed (its history ends mid-turn)."""
        return self.status in ("suspended", "running")

    def describe(self) -> str:
        """``succeeded``, ``suspended (waiting for approval)``, ``stopped (--max-turns)``, …"""
        if self.status is None:
            return "not checkpointed"
        if self.status == "suspended":
            return "suspended (waiting for approval)"
        if self.status == "running":
            return "interrupted (running when its process ended)"
        if self.status == "succeeded" and self.stop_reason == "host_policy":
            return "stopped (--max-turns)"
        return self.status


async def load_run(store: DatabaseStore, run_id: str) -> RunInfo:
    """The state of one run from its envelope (a missing envelope gives ``status=None``)."""
    record = await store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=run_id)
    if record is None or not isinstance(record.value, dict):
        return RunInfo(run_id, None)
    value = record.value
    stop = value.get("stop_reason")
    return RunInfo(
        run_id,
        str(value.get("status")),
        stop if isinstance(stop, str) else None,
        record.version,
    )


async def session_runs(store: DatabaseStore, session_id: str) -> list[RunInfo]:
    """Every run of a session, oldest first. Cost O(entries of the session)."""
    seen: dict[str, None] = {}
    for entry in await store.list(session_id):
        if entry.run_id is not None:
            seen.setdefault(entry.run_id, None)
    return [await load_run(store, run_id) for run_id in seen]


async def last_run(store: DatabaseStore, session_id: str) -> RunInfo | None:
    """The most recent run of a session, or ``None``."""
    run_id: str | None = None
    for entry in await store.list(session_id):
        if entry.run_id is not None:
            run_id = entry.run_id
    return None if run_id is None else await load_run(store, run_id)


async def check_run(store: DatabaseStore, run_id: str) -> Any:
    """Load a run's envelope for ``prism resume`` (DUR-24 checks).

    Raises:
        StoreError: no such run in the store, or a malformed envelope.
    """
    try:
        return await load_agent_run_state(store, run_id=run_id)
    except AgentRunStateError as exc:
        raise StoreError(f"no resumable run {run_id} in this store ({exc})") from None
