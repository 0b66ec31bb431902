"""Where ``prism run`` may create things: an explicit store's folder must exist, and a model server
that cannot be reached leaves no session behind."""

from __future__ import annotations

import asyncio
import io
import json
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from prism.cli import main
from prism.cli._run import check_endpoint
from prism.providers.base import provider_done, provider_text_delta
from prism.types import ProviderEvent, Usage

ANSWER = [provider_text_delta("hello"), provider_done(Usage(input_tokens=1, output_tokens=1))]


def _script(tmp_path: Path, turns: Sequence[Sequence[ProviderEvent]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps({"turns": [[event.to_dict() for event in turn] for turn in turns]}),
        encoding="utf-8",
    )
    return f"mock:{path}"


def _run(argv: Sequence[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err, stdin=io.StringIO())
    return code, out.getvalue(), err.getvalue()


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _sessions() -> list[dict[str, Any]]:
    code, out, err = _run(["sessions", "list", "--json"])
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


# --------------------------------------------------------------------------- the store folder


def test_prism_store_naming_a_missing_folder_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "typo" / "sessions.db"
    monkeypatch.setenv("PRISM_STORE", f"sqlite:///{target}")
    code, out, err = _run(["run", "hi", "--model", _script(tmp_path, [ANSWER])])
    assert code == 2 and out == ""
    assert f"cannot open store sqlite:///{target}: the folder {target.parent} does not exist" in err
    assert "$PRISM_STORE" in err
    assert not target.parent.exists()


def test_an_explicit_store_in_an_existing_folder_is_created(tmp_path: Path) -> None:
    target = tmp_path / "sessions-here.db"
    code, _, err = _run(
        ["run", "hi", "--model", _script(tmp_path, [ANSWER]), "--store", f"sqlite:///{target}"]
    )
    assert code == 0, err
    assert target.is_file()


def test_the_default_location_is_still_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PRISM_STORE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "fresh" / "data"))
    code, _, err = _run(["run", "hi", "--model", _script(tmp_path, [ANSWER])])
    assert code == 0, err
    assert (tmp_path / "fresh" / "data" / "prism" / "sessions.db").is_file()


# --------------------------------------------------------------------------- unreachable models


def test_an_unreachable_model_server_leaves_no_session(_private_store: Path) -> None:
    port = _closed_port()
    model = f"openai-compatible:m@http://127.0.0.1:{port}/v1"
    code, out, err = _run(["run", "hi", "--model", model])
    assert code == 1
    assert f"cannot reach the model at http://127.0.0.1:{port}/v1: connection refused" in err
    assert "(ECONNREFUSED)" in err
    assert "nothing was stored (no session was created)" in err
    assert out == ""
    assert _sessions() == []


def test_unreachable_with_json_ends_with_a_run_result_without_ids() -> None:
    port = _closed_port()
    code, out, _ = _run(
        ["run", "hi", "--json", "--model", f"openai-compatible:m@http://127.0.0.1:{port}/v1"]
    )
    assert code == 1
    summary = json.loads(out.splitlines()[-1])
    assert summary["type"] == "run_result" and summary["status"] == "failed"
    assert summary["run_id"] is None and summary["session_id"] is None
    assert summary["error"]["code"] == "ECONNREFUSED"
    assert summary["exit_code"] == 1
    assert _sessions() == []


def test_continuing_a_session_against_an_unreachable_server_changes_nothing(
    tmp_path: Path,
) -> None:
    code, out, err = _run(["run", "hi", "--json", "--model", _script(tmp_path, [ANSWER])])
    assert code == 0, err
    session_id = json.loads(out.splitlines()[-1])["session_id"]
    (before,) = _sessions()
    port = _closed_port()
    code, _, err = _run(
        [
            "run", "again", "--session", session_id,
            "--model", f"openai-compatible:m@http://127.0.0.1:{port}/v1",
        ]
    )
    assert code == 1
    assert f"session {session_id} unchanged; nothing was stored" in err
    (after,) = _sessions()
    assert after["entries"] == before["entries"] == 2


async def test_check_endpoint_accepts_a_listening_server_and_skips_what_it_cannot_check() -> None:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        assert await check_endpoint(f"http://127.0.0.1:{port}/v1", {}) is None
    finally:
        server.close()
        await server.wait_closed()
    closed = f"http://127.0.0.1:{_closed_port()}/v1"
    failure = await check_endpoint(closed, {})
    assert failure is not None and failure.code == "ECONNREFUSED"
    # through a proxy a direct connection proves nothing; no endpoint: nothing to check
    assert await check_endpoint(closed, {"HTTPS_PROXY": "http://proxy:3128"}) is None
    assert await check_endpoint(closed, {"all_proxy": "socks5://p:1080"}) is None
    assert await check_endpoint(None, {}) is None
    assert await check_endpoint("file:///x", {}) is None


async def test_check_endpoint_reports_an_unknown_host() -> None:
    failure = await check_endpoint("http://no-such-host.invalid/v1", {}, timeout_s=5)
    assert failure is not None
    assert failure.code in ("ENOTFOUND", "ETIMEDOUT")
