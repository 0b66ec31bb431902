"""``prism run --mcp COMMAND`` and ``--mcp-url URL --mcp-header NAME=ENV_VAR`` with a scripted
provider, against the SDK test server; ``prism resume`` starts the server again."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from prism.cli import main
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.types import ProviderEvent

from .conftest import SERVER, HttpServer


@pytest.fixture(autouse=True)
def _private_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "store" / "sessions.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("PRISM_STORE", f"sqlite:///{path}")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return path


def script(tmp_path: Path, turns: Sequence[Sequence[ProviderEvent]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps({"turns": [[event.to_dict() for event in turn] for turn in turns]}),
        encoding="utf-8",
    )
    return f"mock:{path}"


def run(argv: Sequence[str]) -> tuple[int, list[dict[str, Any]], str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err, stdin=io.StringIO())
    return code, [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def values(events: list[dict[str, Any]]) -> list[Any]:
    return [e["result"]["value"] for e in events if e["type"] == "tool_execution_finished"]


COMMAND = f"{sys.executable} {SERVER}"


def test_mcp_option_gives_the_cli_the_server_tools(tmp_path: Path) -> None:
    model = script(
        tmp_path,
        [
            [provider_tool_call("c1", "add", {"a": 2, "b": 3}), provider_done()],
            [provider_text_delta("5"), provider_done()],
        ],
    )
    code, events, err = run(["run", "2+3?", "--model", model, "--mcp", COMMAND, "--json"])
    assert code == 0, err
    assert values(events) == [{"result": 5}]
    assert events[-1]["status"] == "succeeded"


def test_an_approval_waiting_mcp_run_resumes_with_the_server_started_again(
    tmp_path: Path,
) -> None:
    model = script(
        tmp_path,
        [[provider_tool_call("c1", "add", {"a": 20, "b": 22}), provider_done()]],
    )
    argv = ["run", "add", "--model", model, "--mcp", COMMAND, "--approve-tools", "--json"]
    code, events, err = run(argv)
    assert code == 3, err
    run_id = events[-1]["run_id"]
    script(tmp_path, [[provider_text_delta("42"), provider_done()]])
    code, events, err = run(["resume", run_id, "--approve", "--json"])
    assert code == 0, err
    assert values(events) == [{"result": 42}]


def test_mcp_url_with_a_header_from_the_environment(
    tmp_path: Path, http_server: HttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TOKEN", "Bearer tok-http")
    model = script(
        tmp_path,
        [
            [provider_tool_call("c1", "whoami", {}), provider_done()],
            [provider_text_delta("ok"), provider_done()],
        ],
    )
    argv = [
        "run", "who?", "--model", model, "--json",
        "--mcp-url", http_server.url, "--mcp-header", "Authorization=MCP_TOKEN",
    ]
    code, events, err = run(argv)
    assert code == 0, err
    assert values(events) == [{"result": "token=[REDACTED]"}]
    assert "tok-http" not in json.dumps(events)


def test_mcp_option_errors_are_usage_errors(_private_store: Path) -> None:
    code, _, err = run(["run", "x", "--model", "mock:unused.json", "--mcp", "'unclosed"])
    assert code == 2 and "quotation" in err
    code, _, err = run(["run", "x", "--mcp-header", "A=B"])
    assert code == 2 and "--mcp-header must follow the --mcp-url" in err
    code, _, err = run(
        ["run", "x", "--model", "mock:unused.json", "--mcp-url", "http://127.0.0.1:9/mcp",
         "--mcp-header", "Authorization=PRISM_NO_SUCH_VAR"]
    )
    assert code == 2 and "PRISM_NO_SUCH_VAR is not set" in err
    assert not _private_store.exists()


def test_a_bare_python_command_is_the_running_interpreter_i21_also(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no virtual environment activated: no python (let alone one with the SDK) on PATH
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    model = script(
        tmp_path,
        [
            [provider_tool_call("c1", "add", {"a": 2, "b": 3}), provider_done()],
            [provider_text_delta("5"), provider_done()],
        ],
    )
    code, events, err = run(["run", "2+3?", "--model", model, "--mcp", f"python {SERVER}", "--json"])
    assert code == 0, err
    assert values(events) == [{"result": 5}]
