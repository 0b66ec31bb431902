"""``--tool-rounds``: one meaning of ``0`` (issue 21, item 19).

``0`` asks for the answer at once (the first request already carries ``tool_choice="none"``), as
``answer_after_tool_rounds=0`` does in Python; ``unlimited`` (Python's ``False``) never forces
the answer. Through the real ``prism`` command in a subprocess, on the scripted ``mock:`` model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import prism
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.types import ModelConfig, ProviderEvent

TWO_ROUNDS_THEN_ANSWER = [
    [provider_tool_call("c1", "calculator", {"expression": "6*7"}), provider_done()],
    [provider_tool_call("c2", "calculator", {"expression": "6*8"}), provider_done()],
    [provider_text_delta("42 and 48."), provider_done()],
]


def _script(tmp_path: Path, turns: Sequence[Sequence[ProviderEvent]]) -> str:
    path = tmp_path / "script.json"
    data = {"turns": [[event.to_dict() for event in turn] for turn in turns]}
    path.write_text(json.dumps(data), encoding="utf-8")
    return f"mock:{path}"


def _prism(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """The real command, importing this tree's ``prism``."""
    source = str(Path(prism.__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": source if not path else f"{source}{os.pathsep}{path}"}
    return subprocess.run(
        [sys.executable, "-m", "prism", *argv],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )


def _summary_and_events(out: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in out.splitlines()]
    return lines[-1], lines[:-1]


def test_tool_rounds_zero_answers_at_once_in_the_cli_i21_19(tmp_path: Path) -> None:
    """``--tool-rounds 0``: no tool runs; the call the scripted model makes anyway is answered
    "not dispatched" and the run stops with ``tool_round_limit``."""
    model = _script(tmp_path, TWO_ROUNDS_THEN_ANSWER)
    proc = _prism(["run", "6*7?", "--model", model, "--tool", "calculator", "--tool-rounds", "0",
                   "--json"])
    assert proc.returncode == 0, proc.stderr
    summary, events = _summary_and_events(proc.stdout)
    assert not [e for e in events if e["type"] == "tool_execution_started"]
    assert summary["stop_reason"] == "tool_round_limit"


def test_tool_rounds_unlimited_never_forces_the_answer_in_the_cli_i21_19(tmp_path: Path) -> None:
    model = _script(tmp_path, TWO_ROUNDS_THEN_ANSWER)
    proc = _prism(["run", "6*7?", "--model", model, "--tool", "calculator", "--tool-rounds",
                   "unlimited", "--json"])
    assert proc.returncode == 0, proc.stderr
    summary, events = _summary_and_events(proc.stdout)
    assert len([e for e in events if e["type"] == "tool_execution_started"]) == 2
    assert summary["status"] == "succeeded" and summary["stop_reason"] is None


@pytest.mark.parametrize("value", ["-1", "many", "1.5"])
def test_tool_rounds_rejects_other_values_i21_19(tmp_path: Path, value: str) -> None:
    proc = _prism(["run", "hi", "--model", _script(tmp_path, []), "--tool-rounds", value])
    assert proc.returncode == 2
    assert "--tool-rounds must be 0 (answer at once) or more, or unlimited" in proc.stderr


def test_tool_rounds_help_says_what_zero_and_unlimited_mean_i21_19() -> None:
    proc = _prism(["run", "--help"])
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "--tool-rounds N|unlimited" in text
    assert "0 = answer at once" in text and "unlimited = never force the answer" in text


def test_a_session_stored_before_keeps_zero_as_unlimited_i21_19() -> None:
    """Settings stored by version 1, where ``0`` meant unlimited, still mean unlimited."""
    from prism.cli._settings import RunSettings

    assert RunSettings.from_json({"version": 1, "tool_rounds": 0}).tool_rounds is False
    assert RunSettings.from_json({"version": 1, "tool_rounds": 2}).tool_rounds == 2
    stored = RunSettings(tool_rounds=0).to_json()
    assert RunSettings.from_json(json.loads(json.dumps(stored))).tool_rounds == 0
    unlimited = RunSettings(tool_rounds=False).to_json()
    assert RunSettings.from_json(json.loads(json.dumps(unlimited))).tool_rounds is False


async def test_answer_after_zero_forces_the_first_request_in_python_i21_19() -> None:
    """Python's ``0`` is the same: the first request carries ``tool_choice="none"``;
    ``False`` never does."""
    from prism.types import ToolDefinition

    tool = ToolDefinition(name="calc", execute=lambda arguments, context: 1)
    for value, expected in ((0, ["none"]), (False, [None, None])):
        provider = create_mock_provider(
            turns=[
                [provider_tool_call("c1", "calc", {}), provider_done()],
                [provider_text_delta("done"), provider_done()],
            ]
        )
        agent = prism.create_agent(
            model=ModelConfig(provider="mock", model="m"),
            provider=provider,
            tools=[tool],
            answer_after_tool_rounds=value,
        )
        result = await agent.create_session().run("hi")
        assert [r.options.tool_choice if r.options else None for r in provider.requests] == expected
        assert result.stop_reason == (None if value is False else "tool_round_limit")
