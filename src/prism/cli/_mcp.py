"""``--mcp "COMMAND ARGS"`` and ``--mcp-url URL`` (with ``--mcp-header NAME=ENV_VAR``): MCP
servers on the ``prism`` command line.

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
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["McpUrlAction", "McpHeaderAction", "check_mcp_command", "mcp_servers"]


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
