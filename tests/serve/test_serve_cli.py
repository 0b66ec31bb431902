"""``prism serve``: the store ``prism run`` uses, opened only when it exists; a bind beyond
loopback refused without a token; and, as real subprocesses, ``prism run`` (the README's first
command, on a scripted model) then ``prism serve`` with no flag showing that run's transcript,
timeline and waterfall."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from prism.cli import main
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.types import Usage

SRC = str(Path(__import__("prism").__file__).resolve().parent.parent)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRISM_")}
    env.update(
        XDG_DATA_HOME=str(tmp_path / "data"),
        HOME=str(tmp_path / "home"),
        PYTHONPATH=SRC + os.pathsep + env.get("PYTHONPATH", ""),
        **extra,
    )
    return env


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_a_missing_sqlite_store_is_refused_and_not_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nothing-here.db"
    code, out, err = _run(["serve", "--store", f"sqlite:///{missing}"])
    assert code == 2 and "no store at" in err and "does not exist" in err
    assert not missing.exists() and not Path(str(missing) + "-wal").exists()
    # the default location too: no folder, no file
    monkeypatch.delenv("PRISM_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    code, _, err = _run(["serve"])
    assert code == 2 and "no store at" in err
    assert not (tmp_path / "data").exists()


def test_a_bind_beyond_loopback_needs_a_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PRISM_SERVE_TOKEN", raising=False)
    code, _, err = _run(["serve", "--host", "0.0.0.0", "--store", "sqlite:///x.db"])
    assert code == 2 and "--token" in err and "PRISM_SERVE_TOKEN" in err
    code, _, err = _run(["serve", "--host", "192.0.2.1", "--port", "1"])
    assert code == 2 and "--token" in err


def test_a_short_token_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    assert _run(["run", "hi", "--model", _script(tmp_path, [[provider_text_delta("hi"), provider_done()]]),
                 "--store", f"sqlite:///{store}"])[0] == 0
    code, _, err = _run(["serve", "--store", f"sqlite:///{store}", "--token", "short"])
    assert code == 2 and "at least 16" in err and "ERR_PRISM_CONFIG" in err


def _script(tmp_path: Path, turns: list[list[object]]) -> str:
    path = tmp_path / "script.json"
    data = {"turns": [[event.to_dict() for event in turn] for turn in turns]}  # type: ignore[attr-defined]
    path.write_text(json.dumps(data), encoding="utf-8")
    return f"mock:{path}"


def test_prism_serve_with_no_flag_shows_the_run_prism_run_stored(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        [
            [
                provider_tool_call("c1", "calculator", {"expression": "17 * 23"}),
                provider_done(Usage(input_tokens=30, output_tokens=8)),
            ],
            [provider_text_delta("17 * 23 = 391"), provider_done(Usage(input_tokens=40, output_tokens=6))],
        ],
    )
    env = _env(tmp_path)
    ran = subprocess.run(
        [sys.executable, "-m", "prism", "run", "--model", script, "--tool", "calculator",
         "What is 17 * 23? Use the calculator."],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr
    store = tmp_path / "data" / "prism" / "sessions.db"
    assert store.is_file()

    serve = subprocess.Popen(
        [sys.executable, "-m", "prism", "serve", "--port", "0"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        assert line.startswith("prism serve: http://127.0.0.1:"), line
        base = line.split()[2].rstrip("/")
        with httpx.Client(base_url=base, timeout=10) as client:
            sessions = client.get("/sessions", headers={"accept": "text/html"})
            assert sessions.status_code == 200
            assert "What is 17 * 23? Use the calculator." in sessions.text
            runs = client.get("/runs", headers={"accept": "text/html"}).text
            run_id = runs.split('href="/runs/')[1].split('"')[0]
            page = client.get(f"/runs/{run_id}", headers={"accept": "text/html"}).text
        assert "17 * 23 = 391" in page  # the transcript
        assert "calculator" in page and "Turn 2" in page  # the timeline, from the ledger
        assert 'class="wf-track"' in page  # the waterfall
        assert "no ledger" not in page
    finally:
        serve.send_signal(signal.SIGINT)
        try:
            _, err = serve.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            serve.kill()
            _, err = serve.communicate()
    assert serve.returncode == 0, err
    assert "Traceback" not in err
