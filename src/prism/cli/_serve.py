"""``prism serve``: the web inspector and approval inbox over the store, in a browser.

::

    prism serve                                  # the store prism run uses, 127.0.0.1:8765
    prism serve --store postgresql://app@db/app --port 9000
    PRISM_SERVE_TOKEN=… prism serve --host 0.0.0.0 --allow-host inspector.lan
    prism serve --agents myagents:REGISTRY       # decisions run the tool in this process

The store is the one ``prism run`` uses (``--store``, else ``$PRISM_STORE``, else the default
SQLite file). A SQLite file that does not exist is refused, never created: the file is opened
read-write but must exist (SQLite's ``mode=rw``). It binds 127.0.0.1 unless told otherwise; a
bind beyond loopback needs ``--token`` (or ``$PRISM_SERVE_TOKEN``), exits 2 without one, and
warns that the server speaks plain HTTP. The printed URL never holds the token; the browser
asks for it once at ``/login``. The app itself is [`prism.serve.create_app()`][prism.serve.create_app].
"""

from __future__ import annotations

import argparse
import gc
import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Final

from prism.cli._store import (
    STORE_ENV,
    StoreError,
    display_url,
    open_cli_store,
    redact_store_text,
    sqlite_file,
    store_url,
)
from prism.errors import PrismError

__all__ = ["TOKEN_ENV", "add_serve_parser", "run_serve", "tune_gc"]

TOKEN_ENV: Final = "PRISM_SERVE_TOKEN"
"""Environment variable holding the access token when ``--token`` is not given."""
EXIT_SERVE_CONFIG: Final = 2
"""Exit code of a server that cannot start (command line, store, token, agents)."""


def add_serve_parser(commands: Any) -> argparse.ArgumentParser:
    """Register ``prism serve`` on the ``commands`` subparsers and return its parser."""
    serve: argparse.ArgumentParser = commands.add_parser(
        "serve",
        help="inspect runs and decide approvals in a local web page",
        description="Serve a web inspector of the store's sessions and runs (transcripts, "
        "timelines, waterfalls, usage) and an inbox of the approvals suspended runs wait for. "
        "Binds 127.0.0.1; another address needs --token. Exit 2: the store, the token or the "
        "agents cannot be used.",
    )
    serve.add_argument(
        "--store",
        metavar="URL",
        help=f"the store (default: ${STORE_ENV}, else $XDG_DATA_HOME/prism/sessions.db); a "
        "SQLite file must exist",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks one)")
    serve.add_argument(
        "--token",
        metavar="TOKEN",
        help=f"access token, needed beyond loopback (better: ${TOKEN_ENV}, which ps does not "
        "show); the browser exchanges it once for a cookie",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also accept this name in the Host header (repeatable; loopback names always are)",
    )
    serve.add_argument(
        "--agents",
        metavar="MODULE:REGISTRY",
        help="the agent registry (as prism worker takes it): a decision on one of its runs runs "
        "the tool in this process and continues the run",
    )
    serve.add_argument(
        "--no-resume",
        dest="resume",
        action="store_false",
        help="with --agents: record decisions without continuing the runs here",
    )
    return serve


def _beyond_loopback(host: str) -> bool:
    from prism.serve._security import is_loopback_host

    return not is_loopback_host(host)


async def run_serve(
    args: argparse.Namespace,
    out: IO[str],
    err: IO[str],
    environ: Mapping[str, str] | None = None,
) -> int:
    """The ``prism serve`` command; returns its exit code."""
    env = os.environ if environ is None else environ
    try:
        import uvicorn

        from prism.serve import create_app
    except ImportError as exc:
        err.write(f"prism serve: {exc}\n")
        return EXIT_SERVE_CONFIG
    token = args.token or env.get(TOKEN_ENV) or None
    host: str = args.host
    if _beyond_loopback(host) and token is None:
        err.write(
            f"prism serve: binding {host} opens the inspector to other machines: set --token "
            f"(or ${TOKEN_ENV}); or bind 127.0.0.1\n"
        )
        return EXIT_SERVE_CONFIG
    if not 0 <= args.port <= 65535:
        err.write(f"prism serve: --port must be 0..65535, got {args.port}\n")
        return EXIT_SERVE_CONFIG
    allowed = list(args.allow_host)
    if _beyond_loopback(host) and host not in ("0.0.0.0", "::"):
        allowed.append(host)
    url = store_url(args.store, env)
    try:
        store = await _open_existing(url)
    except StoreError as exc:
        err.write(f"prism serve: {exc}\n")
        return EXIT_SERVE_CONFIG
    try:
        agents = None
        if args.agents:
            try:
                from prism.registry import build_registry_agents, load_registry

                agents = build_registry_agents(load_registry(args.agents), store)
            except (ImportError, PrismError, ValueError) as exc:
                err.write(f"prism serve: --agents {args.agents}: {exc}\n")
                return EXIT_SERVE_CONFIG
        try:
            from prism.cli._settings import command_agents
            from prism.serve import DecisionService

            # runs the prism command started are resumed here as prism resume would, with the
            # agent rebuilt from the session's stored settings
            decisions = DecisionService(
                store,
                agents=agents,
                resume=args.resume,
                by=_decider(env),
                command_agents=command_agents(store, environ=env),
            )
            app = create_app(store, token=token, allowed_hosts=allowed, decisions=decisions)
        except PrismError as exc:
            err.write(f"prism serve: {exc} ({exc.code})\n")
            return EXIT_SERVE_CONFIG
        config = uvicorn.Config(
            app,
            host=host,
            port=args.port,
            log_level="warning",
            access_log=False,
            server_header=False,
            proxy_headers=False,
            lifespan="on",
        )
        if _beyond_loopback(host):
            err.write(
                "prism serve: warning: this is plain HTTP, not TLS — the token and every page "
                "cross the network unencrypted; put a TLS proxy in front beyond a trusted "
                "network\n"
            )
        shown = f"[{host}]" if ":" in host else host

        class Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: Any) -> None:
                super().handle_exit(sig, frame)
                # Ctrl-C or SIGTERM is how a server is stopped: exit 0 once it has shut down,
                # instead of uvicorn raising the signal again afterwards
                self._captured_signals.clear()

            async def startup(self, sockets: Any = None) -> None:
                await super().startup(sockets=sockets)
                if self.started:
                    bound = args.port
                    for listener in getattr(self, "servers", ()):
                        for sock in getattr(listener, "sockets", ()):
                            bound = sock.getsockname()[1]
                            break
                    out.write(
                        f"prism serve: http://{shown}:{bound}/ (store {display_url(url)}; "
                        "Ctrl-C stops)\n"
                    )
                    out.flush()

        tune_gc()
        try:
            await Server(config).serve()
        finally:
            await decisions.aclose()  # runs resumed here stop at their next turn boundary
    finally:
        await store.aclose()
    return 0


def tune_gc() -> None:
    """Tune this process's garbage collector for serving pages (``prism serve`` owns its
    process; [`prism.serve.create_app()`][prism.serve.create_app] leaves the host's collector alone).

    The page of a long run allocates hundreds of thousands of short-lived objects (its decoded
    ledger rows, their views, the HTML), almost all freed by reference counting; at the default
    threshold the collector runs after every 700 of them and repeatedly walks the young objects
    of the page being built. Collecting every 20,000 allocations, with what start-up made
    (modules, templates) frozen out of later full collections, takes the server time of a
    1,000-turn run's page down by about a sixth (``benchmarks/bench_serve.py``)."""
    gc.freeze()
    gc.set_threshold(20_000, 20, 10)


def _decider(env: Mapping[str, str]) -> str:
    """Who the decisions taken here are recorded as: ``prism serve (USER)``."""
    user = env.get("USER") or env.get("USERNAME") or ""
    return f"prism serve ({user})" if user else "prism serve"


async def _open_existing(url: str) -> Any:
    """Open the store; a SQLite file must exist and is never created (``mode=rw``)."""
    uri = _existing_sqlite_uri(url)
    if uri is None:
        return await open_cli_store(url, create=False)
    from prism.stores import SqliteStore

    store = SqliteStore(uri)
    try:
        return await store.open()
    except Exception as exc:
        await store.aclose()
        message = redact_store_text(str(exc), url).strip() or type(exc).__name__
        raise StoreError(f"cannot open store {display_url(url)}: {message}") from None


def _existing_sqlite_uri(url: str) -> str | None:
    """The ``file:…?mode=rw`` URI of a ``sqlite:///`` store URL (``None`` for other URLs).

    Raises:
        StoreError: the file does not exist.
    """
    path = sqlite_file(url)
    if path is None:
        return None
    if not path.is_file():
        raise StoreError(
            f"no store at {display_url(url)} (the file does not exist; prism run creates it)"
        )
    return Path(path).resolve().as_uri() + "?mode=rw"
