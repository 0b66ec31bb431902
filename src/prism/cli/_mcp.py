"""MCP on the ``prism`` command line: the servers an agent uses (``--mcp``, ``--mcp-url``), and
``prism mcp serve``, which serves a registry's agents to MCP clients.

``--mcp "COMMAND ARGS"`` and ``--mcp-url URL`` (with ``--mcp-header NAME=ENV_VAR``) add MCP
servers' tools to a run.

``--mcp`` (repeatable) starts a server as a subprocess over stdio: the value is split like a shell
command line (``shlex``). The server gets the ``mcp`` SDK's safe default environment (``HOME``,
``PATH``, …), not the command's whole environment. ``--mcp-url`` (repeatable) connects to a
streamable-HTTP server; each ``--mcp-header NAME=ENV_VAR`` after it adds the header ``NAME`` to
that server's requests with the value of the environment variable ``ENV_VAR`` (e.g.
``--mcp-header Authorization=MCP_TOKEN`` with ``MCP_TOKEN="Bearer …"``): header values never
appear on the command line, in the stored settings or in the output (they are redacted).

The servers' tools are offered under their own names; two servers offering the same name fail
the run with a message naming both. The specs (never the header values) are stored with the
session, so ``prism resume`` and ``prism run --session`` start or reach the servers again.

``prism mcp serve --agents MODULE:REGISTRY [--agent NAME …] [--http --host 127.0.0.1 --port N]
[--store URL]`` serves the registry's agents (``prism.mcp.serving``) over stdio — claiming the
standard descriptors first, so that nothing but JSON-RPC reaches standard output — or streamable
HTTP (``--token-env VAR`` names the variable holding the bearer token; beyond loopback one is
required). SIGTERM or SIGINT, or the client closing standard input, stops the runs at their next
turn boundary within ``--drain-timeout``; runs still going then are left for the next server to
resume, and the process exits at once.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
from collections.abc import Mapping, Sequence
from typing import IO, Any, Final

__all__ = [
    "EXIT_MCP_CONFIG",
    "TOKEN_ENV",
    "McpHeaderAction",
    "McpUrlAction",
    "add_mcp_parser",
    "check_mcp_command",
    "mcp_servers",
    "run_mcp_serve",
]


class _McpUrlListAction(argparse.Action):
    """An option that edits ``namespace.mcp_url``: one ``[URL, [[NAME, ENV_VAR], ...]]`` per
    ``--mcp-url``."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        urls = list(getattr(namespace, "mcp_url", None) or [])
        self.update(parser, urls, values)
        namespace.mcp_url = urls

    def update(self, parser: argparse.ArgumentParser, urls: list[Any], value: Any) -> None:
        """Change ``urls`` for the option's ``value`` (``parser.error`` when it is invalid)."""
        raise NotImplementedError


class McpUrlAction(_McpUrlListAction):
    """``--mcp-url URL``: appends ``[URL, []]`` to ``mcp_url`` (headers follow it)."""

    def update(self, parser: argparse.ArgumentParser, urls: list[Any], value: Any) -> None:
        urls.append([value, []])


class McpHeaderAction(_McpUrlListAction):
    """``--mcp-header NAME=ENV_VAR``: adds the header to the last ``--mcp-url``."""

    def update(self, parser: argparse.ArgumentParser, urls: list[Any], value: Any) -> None:
        if not urls:
            parser.error("--mcp-header must follow the --mcp-url it belongs to")
        name, sep, variable = str(value).partition("=")
        if not sep or not name.strip() or not variable.strip():
            parser.error(f"--mcp-header expects NAME=ENV_VAR, got {value!r}")
        urls[-1][1].append([name.strip(), variable.strip()])


def check_mcp_command(value: str) -> list[str]:
    """The argv of ``--mcp COMMAND``.

    Raises:
        ValueError: it is empty or not a valid shell-style command line.
    """
    argv = shlex.split(value)
    if not argv:
        raise ValueError("--mcp needs a command, e.g. --mcp 'python server.py'")
    return argv


def mcp_servers(
    commands: Sequence[str],
    urls: Sequence[Sequence[Any]],
    environ: Mapping[str, str],
) -> tuple[list[Any], list[str]]:
    """The MCP servers of the settings, and the header values to redact.

    Raises:
        ValueError: a malformed ``--mcp`` command, or a header variable that is not set.
        PrismError: a server option ``prism.mcp`` refuses (e.g. the ``mcp`` package missing).
    """
    from prism.mcp import MCPServerHTTP, MCPServerStdio

    servers: list[Any] = []
    secrets: list[str] = []
    for command in commands:
        argv = check_mcp_command(command)
        servers.append(MCPServerStdio(argv[0], argv[1:]))
    for url, headers in urls:
        values: dict[str, str] = {}
        for name, variable in headers:
            value = environ.get(variable)
            if not value:
                raise ValueError(
                    f"--mcp-header {name}={variable}: environment variable {variable} is not set"
                )
            values[name] = value
            secrets.extend(part for part in (value, value.partition(" ")[2]) if part)
        servers.append(MCPServerHTTP(url, headers=values or None))
    return servers, secrets


# --------------------------------------------------------------------------- prism mcp serve

TOKEN_ENV: Final = "PRISM_MCP_TOKEN"
"""The default environment variable holding the bearer token(s) of ``prism mcp serve --http``."""
EXIT_MCP_CONFIG: Final = 2
"""Exit code of ``prism mcp serve`` when it cannot start (registry, agent, store, options)."""


def add_mcp_parser(commands: Any) -> argparse.ArgumentParser:
    """Register ``prism mcp`` (with ``serve``) on the ``commands`` subparsers; return its parser."""
    group: argparse.ArgumentParser = commands.add_parser(
        "mcp",
        help="serve agents to MCP clients (Claude Code, Cursor, other agents)",
        description="Serve a registry's agents as MCP tools.",
    )
    subcommands = group.add_subparsers(dest="mcp_command", metavar="SUBCOMMAND")
    serve = subcommands.add_parser(
        "serve",
        help="serve agents as MCP tools over stdio (default) or streamable HTTP",
        description="Serve the agents of a registry (MODULE:REGISTRY, a mapping of names to "
        "factory(store) functions, as prism worker and prism serve load it) as MCP tools: one "
        "tool per agent, plus NAME_result to collect a run. Over stdio only JSON-RPC is "
        "written to standard output; logs go to standard error. On start it resumes the runs "
        "a gone server left in the store. Exit 2: the registry, an agent, the store or an "
        "option cannot be served.",
    )
    serve.add_argument(
        "--agents",
        required=True,
        metavar="MODULE:REGISTRY",
        help="import path of the mapping of agent names to factory functions (factory(store) "
        "returns an Agent, or agent.as_tool(...) for its tool name, description and input)",
    )
    serve.add_argument(
        "--agent",
        action="append",
        metavar="NAME",
        help="serve only this registry agent (repeatable; default: all)",
    )
    serve.add_argument(
        "--store",
        metavar="URL",
        help="session store: sqlite:///FILE.db, sqlite:////ABS/FILE.db or postgresql://… "
        "(default: $PRISM_STORE, else $XDG_DATA_HOME/prism/sessions.db)",
    )
    serve.add_argument("--name", default="prism", help="the server's name (default prism)")
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    serve.add_argument(
        "--host",
        metavar="ADDRESS",
        help="with --http: the address to listen on (default 127.0.0.1; any other needs a "
        "bearer token)",
    )
    serve.add_argument("--port", type=int, metavar="N", help="with --http: the port (default 8765)")
    serve.add_argument("--path", metavar="PATH", help="with --http: the endpoint (default /mcp)")
    serve.add_argument(
        "--token-env",
        default=TOKEN_ENV,
        metavar="VAR",
        help=f"with --http: environment variable holding the bearer token (default {TOKEN_ENV}; "
        "several tokens separated by commas, each its own client). When it is set every "
        "request needs Authorization: Bearer TOKEN",
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="with --http: a Host header to accept besides the loopback names (repeatable; "
        "DNS rebinding protection)",
    )
    serve.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="with --http: an Origin header to accept (repeatable)",
    )
    serve.add_argument("--ssl-certfile", metavar="FILE", help="with --http: serve HTTPS")
    serve.add_argument("--ssl-keyfile", metavar="FILE", help="with --http: the key of the cert")

    def seconds(option: str, default: float, help: str) -> None:
        serve.add_argument(option, type=float, default=default, metavar="SECONDS", help=help)

    seconds(
        "--approval-wait",
        60.0,
        "how long an approval waits for the client's elicitation answer before the call "
        "returns 'waiting for approval' with its run id (default 60)",
    )
    seconds("--lease", 15.0, "a server silent this long is gone; its runs are resumed (default 15)")
    seconds(
        "--drain-timeout",
        1.5,
        "on shutdown, how long runs get to stop at a turn boundary; later ones are left for the "
        "next server to resume (default 1.5)",
    )
    serve.add_argument(
        "--no-resume",
        action="store_true",
        help="do not resume the runs a gone server left",
    )
    return group


def _tokens(args: argparse.Namespace, environ: Mapping[str, str]) -> list[str]:
    value = environ.get(args.token_env, "") if args.http else ""
    return [token.strip() for token in value.split(",") if token.strip()]


def _registry_agents(args: argparse.Namespace, store: Any) -> dict[str, Any]:
    """The chosen registry entries, built over ``store`` (an ``Agent`` or an agent tool each).

    Raises:
        PrismConfigError: the registry cannot be loaded, an unknown ``--agent``, a factory raised.
    """
    from prism.errors import PrismConfigError
    from prism.registry import load_registry

    registry = load_registry(args.agents)
    chosen = args.agent or list(registry)
    unknown = [name for name in chosen if name not in registry]
    if unknown:
        raise PrismConfigError(
            f"--agent {unknown[0]}: not in {args.agents} (it has {', '.join(registry)})"
        )
    built: dict[str, Any] = {}
    for name in dict.fromkeys(chosen):
        try:
            built[name] = registry[name](store)
        except PrismConfigError:
            raise
        except Exception as exc:
            raise PrismConfigError(
                f"agent {name!r}: its factory raised {type(exc).__name__}: {exc}"
            ) from exc
    return built


async def run_mcp_serve(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """The ``prism mcp serve`` command; returns its exit code."""
    import os
    import sys

    if not args.http and any(
        getattr(args, option) for option in ("host", "port", "path", "ssl_certfile")
    ):
        err.write("prism mcp serve: --host, --port, --path and --ssl-certfile need --http\n")
        return EXIT_MCP_CONFIG
    try:
        import prism.mcp.serving  # noqa: F401 - the mcp extra is installed
    except ImportError as exc:
        err.write(
            f"prism mcp serve needs the mcp extra (pip install 'prism-runtime[mcp]'): {exc}\n"
        )
        return EXIT_MCP_CONFIG
    with contextlib.ExitStack() as claimed:
        wire = None
        if not args.http:
            from prism.mcp.serving import claim_stdio

            wire = claimed.enter_context(claim_stdio())
        code = await _serve(args, err, wire)
        if code < 0:  # runs are left going: exit at once, the next server resumes them
            with contextlib.suppress(Exception):
                err.flush()
                sys.stderr.flush()
            os._exit(0)
        return code


async def _serve(args: argparse.Namespace, err: IO[str], wire: Any) -> int:
    import asyncio
    import logging
    import os
    import signal

    from prism.cli._store import (
        StoreError,
        display_url,
        is_default_store,
        open_cli_store,
        store_url,
        url_secrets,
    )
    from prism.errors import PrismError

    logging.basicConfig(stream=err, level=logging.WARNING, format="prism mcp serve: %(message)s")
    url = store_url(args.store, os.environ)
    try:
        store = await open_cli_store(url, create_folder=is_default_store(args.store, os.environ))
    except StoreError as exc:
        err.write(f"prism mcp serve: {exc}\n")
        return EXIT_MCP_CONFIG
    try:
        from prism.mcp.serving import create_mcp_server, serve_http, serve_stdio
        from prism.mcp.serving._server import service_of

        tokens = _tokens(args, os.environ)
        server = create_mcp_server(
            _registry_agents(args, store),
            name=args.name,
            store=store,
            approval_wait_s=args.approval_wait,
            secrets=[*tokens, *url_secrets(url)],
            resume=not args.no_resume,
            lease_s=args.lease,
            stop_wait_s=args.drain_timeout,
        )
        service = service_of(server)
        tools = ", ".join(service.served)
        if args.http:

            def ready(endpoint: str) -> None:
                err.write(f"prism mcp serve: {tools} at {endpoint} (store {display_url(url)})\n")
                err.flush()

            ended = await serve_http(
                server,
                host=args.host or "127.0.0.1",
                port=args.port if args.port is not None else 8765,
                path=args.path or "/mcp",
                tokens=tokens,
                allowed_hosts=args.allowed_host,
                allowed_origins=args.allowed_origin,
                ssl_certfile=args.ssl_certfile,
                ssl_keyfile=args.ssl_keyfile,
                ready=ready,
            )
        else:
            err.write(f"prism mcp serve: {tools} over stdio (store {display_url(url)})\n")
            err.flush()
            loop = asyncio.get_running_loop()
            done = asyncio.Event()
            stopping: list[asyncio.Future[None]] = []

            async def stop() -> None:
                await service.shutdown()
                with contextlib.suppress(Exception):
                    err.flush()
                os._exit(0)

            def on_signal() -> None:
                if done.is_set():
                    os._exit(0)
                done.set()
                service.begin_shutdown()
                stopping.append(asyncio.ensure_future(stop()))

            for signum in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(signum, on_signal)
            ended = await serve_stdio(server, wire=wire)
    except PrismError as exc:
        err.write(f"prism mcp serve: {exc} ({exc.code})\n")
        await store.aclose()
        return EXIT_MCP_CONFIG
    if not ended:
        return -1
    await store.aclose()
    return 0
