"""``prism mcp`` on the command line: what makes ``prism mcp serve`` refuse to start (exit 2, a
message on standard error, nothing on standard output), and its help."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import GUARD_S, Workspace


def _prism(workspace: Workspace, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prism", *argv],
        env={**os.environ, **workspace.env()},
        cwd=workspace.dir,
        capture_output=True,
        text=True,
        timeout=GUARD_S,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("mcp",), "mcp needs a subcommand: serve"),
        (("mcp", "serve", "--agents", "nowhere:REGISTRY"), "importing nowhere failed"),
        (
            ("mcp", "serve", "--agents", "serve_agents:REGISTRY", "--agent", "ghost"),
            "--agent ghost",
        ),
        (("mcp", "serve", "--agents", "serve_agents:REGISTRY", "--port", "9"), "need --http"),
        (
            ("mcp", "serve", "--agents", "serve_agents:REGISTRY", "--store", "mysql://x"),
            "cannot open store",
        ),
    ],
)
def test_prism_mcp_serve_refuses_to_start(
    workspace: Workspace, argv: tuple[str, ...], said: str
) -> None:
    done = _prism(workspace, *argv)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    assert done.stdout == ""


def test_prism_mcp_serve_help_names_its_options(workspace: Workspace) -> None:
    done = _prism(workspace, "mcp", "serve", "--help")
    assert done.returncode == 0
    for option in (
        "--agents",
        "--agent",
        "--http",
        "--host",
        "--port",
        "--store",
        "--approval-wait",
        "--token-env",
        "--allowed-host",
        "--no-resume",
    ):
        assert option in done.stdout
