"""Where the ``prism`` command keeps its sessions, run-state envelopes and settings.

Every ``prism run`` is a durable run (``checkpoint_policy="every-turn"``) over one store that holds
the sessions, the run-state envelopes and the command's own per-session settings:

* the store URL is ``--store URL``, else ``$PRISM_STORE``, else the SQLite file
  ``$XDG_DATA_HOME/prism/sessions.db`` (``~/.local/share/prism/sessions.db`` without
  ``XDG_DATA_HOME``);
* the settings a session's agent was built from (model spec, tools, loop, …; never API keys) are a
  checkpoint under ``namespace="prism.cli.session"``, ``key=session_id``, so ``prism resume`` and
  ``prism run --session`` rebuild the same agent (its fingerprint must match);
* a session's runs are the distinct ``run_id`` values of its entries plus the runs the store's run
  index lists for it (a run that ended before its prompt was stored names no entry), their state
  is their envelope (``namespace="prism.agent-run"``); what the envelope does not hold (a failed run's
  redacted error, why a run stopped) is a note under ``namespace="prism.cli.run"``,
  ``key=run_id``.

Store URLs are never shown with their credentials: [`display_url()`][prism.cli._store.display_url] masks the password of the
URL's userinfo, ``password=`` / ``sslpassword=`` query parameters and ``password=`` /
``sslpassword=`` pairs of a ``key=value`` connection string, and [`redact_store_text()`][prism.cli._store.redact_store_text]
removes the password values from any text (a driver's error message) before it is printed.

Read-only commands open a store with ``create=False``: a SQLite file that does not exist is
[`StoreMissingError`][prism.cli._store.StoreMissingError] (nothing is created). A SQLite file named explicitly (``--store`` or
``$PRISM_STORE``) is created when missing, but its folder must exist — a typo in a path must not
silently create folders; only the default location's folder is created.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote

from prism.checkpoints import AGENT_RUN_NAMESPACE
from prism.cli._interrupt import INTERRUPT_STOP_REASON
from prism.errors import AgentRunStateError, CheckpointConflictError
from prism.runtime.durable import load_agent_run_state
from prism.runtime.durable._run_envelope import unchecked_fields
from prism.stores import DatabaseStore, open_store

__all__ = [
    "AGENT_ID",
    "DEFINITION_REVISION",
    "PG_CONNECT_TIMEOUT_S",
    "RUN_NOTES_NAMESPACE",
    "SETTINGS_NAMESPACE",
    "STORE_ENV",
    "RunInfo",
    "StoreError",
    "StoreMissingError",
    "check_run",
    "default_store_path",
    "display_url",
    "is_default_store",
    "last_run",
    "load_run",
    "load_settings",
    "open_cli_store",
    "parent_link",
    "python_resume_text",
    "redact_store_text",
    "save_run_note",
    "save_settings",
    "session_runs",
    "sqlite_file",
    "store_url",
    "url_secrets",
]

STORE_ENV: Final = "PRISM_STORE"
"""Environment variable naming the store URL when ``--store`` is not given."""
SETTINGS_NAMESPACE: Final = "prism.cli.session"
"""Checkpoint namespace of the command's per-session settings (``key=session_id``)."""
RUN_NOTES_NAMESPACE: Final = "prism.cli.run"
"""Checkpoint namespace of the command's per-run notes (``key=run_id``): ``{"error": {"message",
"code"}}`` of a failed or aborted run (redacted), ``{"stop_detail": …}`` of a stopped one."""
AGENT_ID: Final = "prism-cli"
"""Agent id of every run the command starts (part of the fingerprint)."""
DEFINITION_REVISION: Final = "prism-cli-1"
"""``definition_revision`` of the command's durable runs."""
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


def is_default_store(option: str | None, environ: Mapping[str, str]) -> bool:
    """Whether [`store_url()`][prism.cli._store.store_url] falls back to the default SQLite file (no ``--store``, no
    ``$PRISM_STORE``)."""
    return not option and not environ.get(STORE_ENV, "").strip()


_URL_HEAD = re.compile(
    r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<netloc>[^/?#]*)(?P<rest>.*)$", re.S
)
_QUERY_SECRET = re.compile(r"(?P<key>[?&](?:ssl)?password=)(?P<value>[^&#]*)", re.I)
_PAIR_SECRET = re.compile(
    r"(?<![\w?&.\-])(?P<key>(?:ssl)?password\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'?|[^\s']*)", re.I
)
_MASK = "***"


def display_url(url: str) -> str:
    """``url`` with every credential replaced by ``***`` (for messages and listings).

    Masked: the password of the userinfo (``postgresql://user:***@host/db``), the values of
    ``password=`` and ``sslpassword=`` query parameters (``…?sslpassword=***``) and of
    ``password=`` / ``sslpassword=`` pairs in a libpq ``key=value`` connection string
    (``host=h password=***``, quoted values included).
    """
    text = url
    head = _URL_HEAD.match(text)
    if head is not None:
        netloc = head["netloc"]
        user, at, host = netloc.rpartition("@")
        if at and ":" in user:
            netloc = f"{user.partition(':')[0]}:{_MASK}@{host}"
        rest = _QUERY_SECRET.sub(lambda m: m["key"] + _MASK, head["rest"])
        text = head["scheme"] + netloc + rest
    return _PAIR_SECRET.sub(lambda m: m["key"] + _MASK, text)


def url_secrets(url: str) -> tuple[str, ...]:
    """The password values in a store URL or connection string, as written and decoded, longest
    first (what [`redact_store_text()`][prism.cli._store.redact_store_text] removes)."""
    found: set[str] = set()
    head = _URL_HEAD.match(url)
    if head is not None:
        user, at, _ = head["netloc"].rpartition("@")
        if at and ":" in user:
            found.add(user.partition(":")[2])
        for match in _QUERY_SECRET.finditer(head["rest"]):
            found.add(match["value"])
    for match in _PAIR_SECRET.finditer(url):
        value = match["value"]
        found.add(value)
        if value.startswith("'"):
            found.add(re.sub(r"\\(.)", r"\1", value.strip("'")))
    found |= {unquote(value) for value in found}
    return tuple(sorted((v for v in found if v and v != _MASK), key=len, reverse=True))


def redact_store_text(text: str, url: str) -> str:
    """``text`` (e.g. a driver's error message) with ``url`` shown masked and every password value
    of ``url`` replaced by ``***``."""
    masked = display_url(url)
    if url:
        text = text.replace(url, masked)
    for secret in url_secrets(url):
        text = text.replace(secret, _MASK)
    return text


class StoreMissingError(StoreError):
    """A read-only command named a SQLite store file that does not exist (nothing was created)."""


def sqlite_file(url: str) -> Path | None:
    """The file a ``sqlite:///…`` URL names (``None`` for other URLs and ``sqlite://:memory:``)."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower() == "sqlite" and rest.startswith("/") and len(rest) > 1:
        return Path(rest[1:])
    return None


async def open_cli_store(
    url: str, *, create: bool = True, create_folder: bool = False
) -> DatabaseStore:
    """Open (and migrate) the store.

    Args:
        url: The store URL.
        create: Whether a missing SQLite file may be created; read-only commands pass ``False``.
        create_folder: Whether the folder of a SQLite file may be created too (the default
            location only, see [`is_default_store()`][prism.cli._store.is_default_store]); otherwise a missing folder is an error.

    Raises:
        StoreMissingError: ``create=False`` and the SQLite file does not exist.
        StoreError: ``create_folder=False`` and the SQLite file's folder does not exist (the
            message names the folder).
        StoreError: the URL is not supported, the database cannot be opened or its schema is
            refused (``ERR_PRISM_STORE_SCHEMA``); the message never shows a password.
    """
    shown = display_url(url)
    scheme, sep, _ = url.partition("://")
    if not sep and "=" in url:
        raise StoreError(
            f"cannot open store {shown}: a key=value connection string is not a store URL; "
            "use postgresql://USER@HOST:PORT/DB (or sqlite:///FILE.db)"
        )
    path = sqlite_file(url)
    if path is not None:
        if not create and not path.is_file():
            raise StoreMissingError(f"no store at {shown} (the file does not exist)")
        parent = path.parent
        if not create_folder and not parent.is_dir():
            raise StoreError(
                f"cannot open store {shown}: the folder {parent} does not exist (create it "
                f"first, or leave out --store and ${STORE_ENV} to use the default location)"
            )
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create {parent}: {exc.strerror or exc}") from None
    if sep and scheme.lower() in ("postgresql", "postgres"):
        await _check_reachable(url)
    try:
        return await open_store(url)
    except Exception as exc:  # PrismError, ImportError, sqlite3 / psycopg connection errors
        message = redact_store_text(str(exc), url).strip() or type(exc).__name__
        raise StoreError(f"cannot open store {shown}: {message}") from None


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
        reason = redact_store_text(lines[0], url) if lines else type(exc).__name__
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
    await _overwrite(store, SETTINGS_NAMESPACE, session_id, value, unless_equal=True)


async def _overwrite(
    store: DatabaseStore,
    namespace: str,
    key: str,
    value: dict[str, Any],
    *,
    unless_equal: bool = False,
) -> None:
    """Store ``value`` over the checkpoint ``namespace``/``key`` by compare-and-set, retried once
    when another writer got in between; ``unless_equal`` skips the write of an unchanged value."""
    for attempt in range(2):
        record = await store.load_checkpoint(namespace=namespace, key=key)
        current = 0 if record is None else record.version
        if unless_equal and record is not None and record.value == value:
            return
        try:
            await store.save_checkpoint(
                namespace=namespace,
                key=key,
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
    """One run of a session, as its envelope (and the command's note) describes it."""

    run_id: str
    """The run id."""
    status: str | None
    """The envelope's ``status`` (``None``: no envelope — the run never reached a checkpoint)."""
    stop_reason: str | None = None
    """``host_policy`` / ``turn_limit`` on a policy-stopped run."""
    version: int = 0
    """The envelope version (what a resume expects)."""
    error: str | None = None
    """The redacted error message of a failed or aborted run (from the command's note)."""
    stop_detail: str | None = None
    """Why a ``host_policy`` stop happened (``--max-turns N``, ``interrupted (Ctrl-C)``)."""
    by_command: bool = True
    """The prism command started it (it stored settings for the run's session); ``prism resume``
    continues only such runs, a run started from Python is continued with
    ``prism.resume_agent_run``."""
    parent_run: Mapping[str, str] | None = None
    """``{"session_id", "run_id", "tool_call_id"}`` of the run whose agent-tool call started this
    child run (``None`` for a top-level run); a child is continued by resuming that run."""
    parent_by_command: bool = True
    """The prism command started the parent run (see [`by_command`][prism.cli._store.RunInfo.by_command])."""

    @property
    def continuable(self) -> bool:
        """``prism resume`` can continue it (suspended, crashed or stopped at a turn boundary)."""
        return self.status in ("suspended", "running") or (
            self.status == "succeeded" and self.stop_reason == "host_policy"
        )

    @property
    def blocks_session(self) -> bool:
        """A new prompt must wait until this run is resumed (its history ends mid-turn)."""
        return self.status in ("suspended", "running")

    def describe(self) -> str:
        """``succeeded``, ``suspended (waiting for approval)``, ``stopped (--max-turns 2)``,
        ``failed: <error>``, …"""
        if self.status is None:
            return "not checkpointed"
        if self.status == "suspended":
            return "suspended (waiting for approval)"
        if self.status == "running":
            return "interrupted (running when its process ended)"
        if self.status == "succeeded" and self.stop_reason == "host_policy":
            if self.stop_detail == INTERRUPT_STOP_REASON:
                return "stopped (Ctrl-C)"
            return f"stopped ({self.stop_detail or '--max-turns'})"
        if self.error and self.status in ("failed", "aborted"):
            return f"{self.status}: {self.error}"
        return self.status

    def how_to_continue(self) -> str:
        """What continues this run, or ``""`` when nothing does: ``prism resume RUN_ID`` (with
        ``--approve (or --deny)`` for a waiting run) for a run the prism command started, the
        ``prism.resume_agent_run`` call for one started from Python, and for a child run of an
        agent tool the same for its parent run."""
        if not self.continuable:
            return ""
        waiting = self.status == "suspended"
        if self.parent_run is None:
            if self.by_command:
                return _command_text(self.run_id, waiting)
            return "started from Python; " + python_resume_text(self.run_id, waiting=waiting)
        parent = str(self.parent_run.get("run_id"))
        head = f"child run of run {parent} (tool call {self.parent_run.get('tool_call_id')}); "
        if self.parent_by_command:
            return (
                head
                + f"resume that run, which continues this one: {_command_text(parent, waiting)}"
            )
        return (
            head
            + "that run was started from Python and continues this one; "
            + (python_resume_text(parent, waiting=waiting))
        )


def _command_text(run_id: str, waiting: bool) -> str:
    return f"prism resume {run_id}" + (" --approve (or --deny)" if waiting else "")


def python_resume_text(run_id: str, *, waiting: bool) -> str:
    """How to continue a run started from Python (``prism resume`` refuses it): the
    ``prism.resume_agent_run`` call, with ``decisions=[...]`` when it waits for approvals."""
    decisions = ", decisions=[...]" if waiting else ""
    return (
        f'continue it from Python with prism.resume_agent_run(agent, "{run_id}"{decisions}) '
        "and the same agent definition"
    )


async def save_run_note(store: DatabaseStore, run_id: str, note: dict[str, Any]) -> None:
    """Store the command's note about ``run_id`` (see [`RUN_NOTES_NAMESPACE`][prism.cli._store.RUN_NOTES_NAMESPACE]); the caller
    redacts it. Overwrites an older note (compare-and-set, one retry)."""
    await _overwrite(store, RUN_NOTES_NAMESPACE, run_id, note)


async def load_run(store: DatabaseStore, run_id: str) -> RunInfo:
    """The state of one run from its envelope and note (a missing envelope gives
    ``status=None``)."""
    record = await store.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=run_id)
    note_record = await store.load_checkpoint(namespace=RUN_NOTES_NAMESPACE, key=run_id)
    note = note_record.value if note_record is not None else None
    if not isinstance(note, dict):
        note = {}
    error = note.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    detail = note.get("stop_detail")
    if record is None or not isinstance(record.value, dict):
        # ended before its first checkpoint: the note (if any) knows how
        status = note.get("status")
        return RunInfo(
            run_id,
            status if isinstance(status, str) else None,
            error=message if isinstance(message, str) else None,
        )
    status, stop, session_id = unchecked_fields(record.value)
    by_command = parent_by_command = True
    parent: Mapping[str, str] | None = None
    if isinstance(session_id, str):
        by_command = await load_settings(store, session_id) is not None
        parent = await parent_link(store, session_id, run_id)
        if parent is not None:
            parent_by_command = await load_settings(store, parent["session_id"]) is not None
    return RunInfo(
        run_id,
        status,
        stop,
        record.version,
        error=message if isinstance(message, str) else None,
        stop_detail=detail if isinstance(detail, str) else None,
        by_command=by_command,
        parent_run=parent,
        parent_by_command=parent_by_command,
    )


async def parent_link(
    store: DatabaseStore, session_id: str, run_id: str
) -> Mapping[str, str] | None:
    """The ``parent_run`` link (``{"session_id", "run_id", "tool_call_id"}``) that the stored
    input of a child run of an agent tool carries, or ``None`` for a top-level run. Only child
    session ids (``<run id>.<tool call id>``) are read."""
    if "." not in session_id:
        return None
    for entry in await store.list(session_id):
        message = entry.message
        if entry.run_id != run_id or message is None or message.role != "user":
            continue
        link = (message.metadata or {}).get("parent_run")
        if isinstance(link, Mapping) and all(
            isinstance(link.get(k), str) for k in ("session_id", "run_id", "tool_call_id")
        ):
            return {k: str(link[k]) for k in ("session_id", "run_id", "tool_call_id")}
    return None


async def session_runs(store: DatabaseStore, session_id: str) -> list[RunInfo]:
    """Every run of a session, oldest first: the runs its entries name, then those only its
    run index knows (a run whose process ended before its prompt was stored). Cost
    O(entries of the session + its runs)."""
    seen: dict[str, None] = {}
    for entry in await store.list(session_id):
        if entry.run_id is not None:
            seen.setdefault(entry.run_id, None)
    indexed = await store.list_run_checkpoints(session_id=session_id, limit=10_000)
    for record in reversed(indexed):
        seen.setdefault(record.key, None)
    return [await load_run(store, run_id) for run_id in seen]


async def last_run(store: DatabaseStore, session_id: str) -> RunInfo | None:
    """The most recent run of a session, or ``None``."""
    run_id: str | None = None
    for entry in await store.list(session_id):
        if entry.run_id is not None:
            run_id = entry.run_id
    return None if run_id is None else await load_run(store, run_id)


async def check_run(store: DatabaseStore, run_id: str) -> Any:
    """Load a run's envelope for ``prism resume`` (a missing record or a malformed
    envelope is refused).

    Raises:
        StoreError: no such run in the store, or a malformed envelope.
    """
    try:
        return await load_agent_run_state(store, run_id=run_id)
    except AgentRunStateError as exc:
        raise StoreError(str(exc)) from None
