"""``prism serve``: a local web inspector of runs and an approval inbox over your own store.

Extra ``prism-runtime[serve]`` (Starlette, uvicorn, sse-starlette, Jinja2). The command::

    prism serve                                  # the store prism run uses, on 127.0.0.1:8765
    prism serve --store postgresql://… --port 9000
    PRISM_SERVE_TOKEN=… prism serve --host 0.0.0.0 --allow-host inspector.lan

or, mounted in a host's own ASGI application::

    from prism.serve import create_app
    from prism.stores import SqliteStore

    store = await SqliteStore("prism.db").open()
    app = create_app(store)            # an ASGI (Starlette) application

What it shows: sessions (filtered, paged, with totals; child sessions under their parents), a
run's page (transcript beside the timeline of its ledger — every provider attempt and tool call
— and a waterfall of the run on a time axis), live updates of a running run over server-sent
events (the store is polled every ``poll_interval`` seconds, so a run in another process or on
a worker shows up as it goes), the approval inbox (every pending decision of the store, decided
from the page) and tokens and cost per day, model and agent. Nothing leaves the machine: the
pages load no resource from elsewhere.

Safety: every page is autoescaped (what a model or a tool produced is text, never markup); the
``Host`` header must be a loopback name or one of ``allowed_hosts`` (DNS rebinding); a client
beyond loopback is answered only when a ``token`` is set, exchanged once at ``/login`` for an
``HttpOnly``, ``SameSite=Strict`` cookie; ``POST`` requests check ``Origin`` and a CSRF token;
responses carry a Content-Security-Policy without inline script and ``frame-ancestors 'none'``
and ``Referrer-Policy: no-referrer``. The app writes to the store only to record decisions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from prism.checkpoints import CheckpointStore
from prism.inspection import InspectionReader

try:
    import jinja2 as _jinja2  # noqa: F401
    import sse_starlette as _sse  # noqa: F401
    import starlette as _starlette  # noqa: F401
except ImportError as _exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        f"prism.serve needs the serve extra: pip install 'prism-runtime[serve]' ({_exc})"
    ) from None

if TYPE_CHECKING:
    from collections.abc import Mapping

    from starlette.applications import Starlette

    from prism.runtime import Agent
    from prism.serve._decisions import DecisionResult as DecisionResult
    from prism.serve._decisions import DecisionService as DecisionService

__all__ = ["DecisionResult", "DecisionService", "InspectedStore", "create_app"]


@runtime_checkable
class InspectedStore(InspectionReader, CheckpointStore, Protocol):
    """A store the inspector serves: it reads pages through
    ``InspectionReader`` and records decisions through
    [`CheckpointStore`][prism.checkpoints.CheckpointStore] (``SqliteStore`` and ``PostgresStore`` are
    both)."""


def __getattr__(name: str) -> Any:
    """``DecisionService`` and ``DecisionResult``, imported on first access."""
    if name in ("DecisionService", "DecisionResult"):
        from prism.serve import _decisions

        return getattr(_decisions, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def create_app(
    store: InspectedStore,
    *,
    agents: Mapping[str, Agent] | None = None,
    resume: bool = True,
    token: str | None = None,
    allowed_hosts: list[str] | tuple[str, ...] | None = None,
    poll_interval: float = 0.25,
    by: str = "prism serve",
    decisions: DecisionService | None = None,
) -> Starlette:
    """Build the inspector over ``store`` as an ASGI application.

    Args:
        store: An open store that implements ``prism.inspection.InspectionReader`` (a
            ``SqliteStore`` or a ``PostgresStore``); the app never opens, migrates or closes it.
        agents: Registry agents by name (``prism.registry.build_registry_agents``; ``prism
            serve --agents MODULE:REGISTRY``): a decision on one of their runs is applied here —
            the tool runs inside this process and the run continues. Without it a decision is
            recorded for a process with the run's agent (or sent to the engine for a DBOS run).
        resume: With ``agents``: continue the run right after a decision (default); ``False``
            records the decision only.
        token: The access token (at least 16 characters). Required to answer clients beyond
            loopback or to allow other host names; exchanged at ``/login`` for a session
            cookie. ``None``: loopback clients only.
        allowed_hosts: Host names accepted in the ``Host`` header besides ``localhost``,
            ``127.0.0.1`` and ``::1`` (no wildcards).
        poll_interval: Seconds between two reads of the store by a live page, in (0, 1]
            (default 0.25: an appended row reaches the page within about half a second).
        by: Who decisions made here are recorded as (``RunDecision.by``).
        decisions: A [`DecisionService`][prism.serve.DecisionService] the host built itself (e.g. with
            ``command_agents`` or an engine client); then ``agents``, ``resume`` and ``by`` are
            its own, and the host closes it. By default the app builds one from ``agents``,
            ``resume`` and ``by`` and closes it when the app shuts down (runs resumed here stop
            at their next turn boundary, resumable).

    Returns:
        A Starlette application (ASGI). Its routes are listed in ``prism.serve._app``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — ``store`` is not an inspection reader, a
            ``poll_interval`` outside (0, 1], a ``token`` shorter than 16 characters, an
            ``allowed_hosts`` entry that is empty or a wildcard, a host beyond loopback without
            a ``token``, a ``by`` that is empty, ``agents`` the decision service refuses, or
            ``decisions`` together with ``agents``.
    """
    from prism.serve._app import create_app as build

    return build(
        store,
        agents=agents,
        resume=resume,
        token=token,
        allowed_hosts=allowed_hosts,
        poll_interval=poll_interval,
        by=by,
        decisions=decisions,
    )
