"""Durable runs whose tools come from an MCP server: suspended for an approval in one process,
resumed in another (the server is started again there), and refused when the tool's schema
changed meanwhile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prism.mcp import MCPServerStdio
from prism.runtime.agent import create_agent
from prism.runtime.durable import agent_fingerprint

WORKER = str(Path(__file__).with_name("_durable_worker.py"))


def worker(url: str, *args: str, schema: str = "v1") -> dict[str, Any]:
    env = {**os.environ, "MCP_TEST_SCHEMA": schema}
    done = subprocess.run(
        [sys.executable, WORKER, url, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_a_run_suspended_on_an_mcp_tool_resumes_in_a_new_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    started = worker(url, "start")
    assert started["status"] == "suspended" and started["results"] == []
    resumed = worker(url, "resume", started["run_id"], str(started["version"]))
    assert resumed["status"] == "succeeded"
    assert resumed["results"] == [{"result": 42}]


def test_a_changed_tool_schema_fails_the_resume_naming_the_tool(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    started = worker(url, "start")
    refused = worker(url, "resume", started["run_id"], str(started["version"]), schema="v2")
    assert refused["code"] == "ERR_PRISM_AGENT_RUN_STATE"
    assert "tool calc_add changed its parameter schema" in refused["message"]
    # nothing was written: the unchanged server still resumes it
    resumed = worker(url, "resume", started["run_id"], str(started["version"]))
    assert resumed["status"] == "succeeded"


def test_the_fingerprint_covers_each_server_identity_prefix_and_filter(
    stdio_server: Callable[..., MCPServerStdio],
) -> None:
    def fingerprint(*servers: MCPServerStdio) -> str:
        agent = create_agent(id="a", model={"provider": "mock", "model": "m"}, tools=servers)
        return agent_fingerprint(agent, "1")

    base = fingerprint(stdio_server())
    assert fingerprint(stdio_server()) == base
    assert fingerprint(stdio_server(prefix="x")) != base
    assert fingerprint(stdio_server(allow=["add"])) != base
    assert fingerprint(stdio_server(deny=["add"])) != base
    assert fingerprint(stdio_server(env={"OTHER": "1"})) != base
    assert fingerprint(stdio_server(env={"MCP_TEST_MARKER": "elsewhere"})) == base  # values: no
    assert fingerprint(MCPServerStdio(sys.executable, ["other.py"])) != base
