"""Problems a new user reported with the ``prism`` command, one section each.

1. a closed output (``| head -1``) aborts the run quietly with exit 141;
2. store credentials are masked in every form they can be written in;
3. the footer counts completed provider turns;
4. approval rounds on a terminal show run totals and keep numbering turns;
5. exit codes, and options checked before any store or session exists;
6. read-only commands create nothing;
7. wording: plurals, failed runs in ``sessions show``, run ids, the endpoint of a connection error;
8. Ctrl-C: the first stops at a turn boundary (resumable), a second aborts;
9. ``--json`` ends with a ``run_result`` line.

Runs use scripted providers; Ctrl-C is a real SIGINT sent to the test process (the command handles
it on its event loop) and closed pipes are real pipes in subprocesses. The conftest points
``PRISM_STORE`` and ``XDG_DATA_HOME`` at the test's tmp path.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from prism.cli import main
from prism.cli._render import PipeGuard, RunStats
from prism.cli._store import display_url, redact_store_text, url_secrets
from prism.events import (
    AgentResumedEvent,
    AgentStartedEvent,
    AgentSuspendedEvent,
    TurnFinishedEvent,
    TurnStartedEvent,
)
from prism.providers.base import (
    provider_done,
    provider_error,
    provider_text_delta,
    provider_tool_call,
)
from prism.providers.mock import create_mock_provider
from prism.types import ErrorInfo, ProviderEvent, Usage

# --------------------------------------------------------------------------- helpers


def _script(tmp_path: Path, turns: Sequence[Sequence[ProviderEvent]]) -> str:
    path = tmp_path / "script.json"
    data = {"turns": [[event.to_dict() for event in turn] for turn in turns]}
    path.write_text(json.dumps(data), encoding="utf-8")
    return f"mock:{path}"


def _run(argv: Sequence[str], **kwargs: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    kwargs.setdefault("stdin", io.StringIO())
    code = main(list(argv), out=out, err=err, **kwargs)
    return code, out.getvalue(), err.getvalue()


def _ids(err: str) -> tuple[str, str]:
    line = next(x for x in reversed(err.splitlines()) if x.startswith("session "))
    parts = line.split()
    return parts[1], parts[4]


def _runs(session_id: str) -> list[dict[str, Any]]:
    code, out, err = _run(["sessions", "show", session_id, "--json"])
    assert code == 0, err
    return [item for item in map(json.loads, out.splitlines()) if item.get("type") == "run"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Provider:
    """Scripted provider: turn ``n`` yields ``turns[n-1]``; ``before[n]`` runs first (e.g. sends
    SIGINT), then the provider yields to the event loop so that signal handlers run."""

    id = "mock"

    def __init__(
        self,
        turns: Sequence[Sequence[ProviderEvent]],
        before: dict[int, Callable[[], object]] | None = None,
    ) -> None:
        self.turns = list(turns)
        self.before = before or {}
        self.calls = 0
        self.requests: list[Any] = []

    async def generate(self, request: Any) -> Any:
        self.calls += 1
        self.requests.append(request)
        action = self.before.get(self.calls)
        if action is not None:
            action()
            for _ in range(5):
                await asyncio.sleep(0)
        for event in self.turns[self.calls - 1]:
            yield event


def _ctrl_c(times: int = 1) -> Callable[[], None]:
    def send() -> None:
        for _ in range(times):
            signal.raise_signal(signal.SIGINT)

    return send


CALC = [
    provider_tool_call("c1", "calculator", {"expression": "6*7"}),
    provider_done(Usage(input_tokens=500, output_tokens=30)),
]
ANSWER = [
    provider_text_delta("It is 42."),
    provider_done(Usage(input_tokens=90, output_tokens=10)),
]


# --------------------------------------------------------------------------- 1. closed output


class _ClosedPipe(io.StringIO):
    """A stdout whose reader went away: every write and flush raises ``BrokenPipeError``."""

    writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize(("flags", "provider_calls"), [(["--json"], 0), ([], 1)])
def test_closed_output_aborts_the_run_quietly_with_exit_141(
    tmp_path: Path, flags: list[str], provider_calls: int, caplog: pytest.LogCaptureFixture
) -> None:
    """``prism run … | head -1``: the first failed write aborts the run (RUN-9) — no further
    provider turn, no ``on_event callback failed`` log per event, nothing on stderr — and the
    run is stored as aborted, saying why."""
    provider = _Provider([[provider_text_delta(f"part {i} ") for i in range(50)] + CALC, ANSWER])
    out, err = _ClosedPipe(), io.StringIO()
    with caplog.at_level(logging.ERROR, logger="prism"):
        code = main(
            ["run", "q", "--model", _script(tmp_path, []), "--tool", "calculator", *flags],
            out=out, err=err, stdin=io.StringIO(), provider_override=lambda: provider,
        )
    assert code == 141
    assert err.getvalue() == ""
    assert out.writes == 1  # later writes are dropped, not retried
    assert "on_event callback failed" not in caplog.text
    # --json breaks on agent_started, plain output on the first text: no tool round, no turn 2
    assert provider.calls == provider_calls
    code, listing, _ = _run(["sessions", "list", "--json"])
    (run,) = _runs(json.loads(listing)["session_id"])
    assert run["status"] == "aborted"
    assert run["error"]["message"] == "output closed (broken pipe)"


class _ClosesAtToolCall(io.StringIO):
    """A reader that goes away when the first tool call is shown."""

    closed = False

    def write(self, text: str) -> int:
        self.closed = self.closed or "tool_execution_started" in text
        if self.closed:
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(text)


def test_history_stays_provider_valid_after_a_closed_output(tmp_path: Path) -> None:
    """Closed during a tool round: the aborted run leaves every stored tool call answered, so
    ``prism run --session`` sends a history providers accept (RUN-10, RUN-24)."""
    provider = create_mock_provider(turns=[CALC, ANSWER])
    code = main(
        ["run", "q", "--model", _script(tmp_path, []), "--tool", "calculator", "--json"],
        out=_ClosesAtToolCall(), err=io.StringIO(), stdin=io.StringIO(),
        provider_override=lambda: provider,
    )
    assert code == 141 and provider.call_count == 1
    code, listing, _ = _run(["sessions", "list", "--json"])
    session_id = json.loads(listing)["session_id"]
    later = create_mock_provider(turns=[ANSWER])
    code, _, err = _run(["run", "next", "--session", session_id], provider_override=lambda: later)
    assert code == 0, err
    messages = [m for m in later.requests[0].messages if m.role != "system"]
    calls = {p.id for m in messages for p in m.content if p.type == "tool_call"}
    results = {p.tool_call_id for m in messages for p in m.content if p.type == "tool_result"}
    assert calls == results and messages[-1].role == "user"


def _closed_pipe() -> int:
    """A pipe whose read end is already closed: every write to the returned fd fails (EPIPE)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    return write_end


def test_closed_pipe_in_a_real_process_exits_141_without_traceback(tmp_path: Path) -> None:
    """The real interpreter: no traceback, no ``Exception ignored`` at exit (stdout is pointed at
    the null device), exit 141 — for ``run --json`` and for ``sessions list``."""
    model = _script(tmp_path, [ANSWER])
    assert _run(["run", "first", "--model", model])[0] == 0
    assert _run(["run", "second", "--model", model])[0] == 0
    for argv in (["run", "hi", "--model", model, "--json"], ["sessions", "list"]):
        stdout = _closed_pipe()
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "prism", *argv],
                stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120, check=False,
            )
        finally:
            os.close(stdout)
        assert (proc.returncode, proc.stderr) == (141, ""), argv


def test_pipe_guard_reports_a_closed_pipe_once_and_drops_later_writes() -> None:
    calls: list[str] = []
    stream = PipeGuard(_ClosedPipe())
    stream.on_broken(lambda: calls.append("broken"))
    stream.write("a")
    stream.flush()
    stream.write("b")
    assert stream.broken and calls == ["broken"]
    healthy = PipeGuard(io.StringIO())
    healthy.write("ok")
    assert not healthy.broken and healthy.stream is not None
    assert healthy.stream.getvalue() == "ok"  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- 2. credentials


@pytest.mark.parametrize(
    ("url", "shown", "secrets"),
    [
        (
            "postgresql://postgres@127.0.0.1:9/test?password=secretq",
            "postgresql://postgres@127.0.0.1:9/test?password=***",
            ("secretq",),
        ),
        (
            "postgresql://u:secretu@h:5/db?sslmode=require&sslpassword=secrets&x=1",
            "postgresql://u:***@h:5/db?sslmode=require&sslpassword=***&x=1",
            ("secretu", "secrets"),
        ),
        ("postgresql://u:p%40ss@h/db", "postgresql://u:***@h/db", ("p%40ss", "p@ss")),
        (
            "host=127.0.0.1 port=9 password=secretkv",
            "host=127.0.0.1 port=9 password=***",
            ("secretkv",),
        ),
        (
            "host=h PASSWORD = 'se cret' sslpassword=zz dbname=x",
            "host=h PASSWORD = *** sslpassword=*** dbname=x",
            ("se cret", "zz"),
        ),
        ("sqlite:///x.db", "sqlite:///x.db", ()),
    ],
)
def test_display_url_masks_every_credential_form(
    url: str, shown: str, secrets: tuple[str, ...]
) -> None:
    """DB-2: userinfo password, ``password=``/``sslpassword=`` query parameters and key=value
    pairs are all masked; their values are what ``redact_store_text`` removes."""
    assert display_url(url) == shown
    assert set(secrets) <= set(url_secrets(url))
    text = redact_store_text(f"failed for {url}; password was {secrets[0] if secrets else ''}", url)
    for secret in secrets:
        assert secret not in text


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres@127.0.0.1:9/test?password=secretq",
        "postgresql://postgres:secretq@127.0.0.1:9/test?sslpassword=secretq2",
        "host=127.0.0.1 port=9 password=secretq",
        "host=127.0.0.1 port=9 sslpassword='secretq x'",
    ],
)
def test_store_passwords_never_appear_in_command_output(url: str) -> None:
    pytest.importorskip("psycopg")
    for argv in (
        ["sessions", "list", "--store", url],
        ["sessions", "list", "--json", "--store", url],
        ["sessions", "show", "s", "--store", url],
        ["run", "hi", "--json", "--store", url],
        ["resume", "run_x", "--store", url],
    ):
        code, out, err = _run(argv)
        assert code == 2, err
        assert "secretq" not in out + err
        assert "***" in err


# --------------------------------------------------------------------------- 3. turns


def test_max_turns_footer_counts_completed_turns(tmp_path: Path) -> None:
    """``--max-turns 1`` ends after one completed provider turn and says "1 turn"; the JSON
    stream has no ``turn_started{2}``: the turn stopped at its boundary never started, so every
    ``turn_started`` is closed (EVT-19 as revised by issue 21, item 20)."""
    model = _script(tmp_path, [CALC])
    code, out, err = _run(
        ["run", "q", "--model", model, "--tool", "calculator", "--max-turns", "1"]
    )
    assert code == 0, err
    assert "usage: 500 in + 30 out = 530 tokens · 1 turn · 1 tool call · " in err
    code, out, err = _run(
        ["run", "q", "--model", model, "--tool", "calculator", "--max-turns", "1", "--json"]
    )
    *events, summary = [json.loads(line) for line in out.splitlines()]
    assert [e.get("turn") for e in events if e["type"] == "turn_started"] == [1]
    assert events[-1]["type"] == "agent_finished"
    assert summary["turns"] == 1 and summary["stop_reason"] == "host_policy"


# --------------------------------------------------------------------------- 4. approval legs


def test_terminal_approval_shows_totals_of_every_leg(tmp_path: Path) -> None:
    """After ``y`` the footer sums the usage of both legs (APR-9 resumed leg) and counts both
    turns."""
    model = _script(tmp_path, [CALC, ANSWER])
    code, out, err = _run(
        ["run", "q", "--model", model, "--tool", "calculator", "--approve-tools"],
        stdin=_Terminal("y\n"),
    )
    assert code == 0, err
    assert out == "It is 42.\n"
    assert "usage: 590 in + 40 out = 630 tokens · 2 turns · 1 tool call · " in err


def test_status_line_numbers_turns_on_across_legs() -> None:
    """A resumed leg starts its own ``turn_started{1}`` (EVT-9); the status line shows turn 2."""
    stats = RunStats(clock=lambda: 0.0)
    for event in (
        AgentStartedEvent(),
        TurnStartedEvent(turn=1),
        TurnFinishedEvent(turn=1),
        TurnStartedEvent(turn=2),
        AgentSuspendedEvent(interruption=None, version=2),
        AgentStartedEvent(),
        AgentResumedEvent(version=3),
        TurnStartedEvent(turn=1),
    ):
        stats.observe(event)
    assert stats.status().startswith("turn 2 · ")
    stats.observe(TurnFinishedEvent(turn=1))
    assert stats.turns == 2


# --------------------------------------------------------------------------- 5. exit codes


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-tokens", "0"], "--max-tokens must be at least 1"),
        (["--temperature", "-1"], "--temperature must be a finite number >= 0"),
        (["--tool-rounds", "-1"], "--tool-rounds must be 0 (answer at once) or more, or unlimited"),
        (["--max-tool-rounds", "0"], "--max-tool-rounds must be at least 1"),
        (["--max-turns", "0"], "--max-turns must be at least 1"),
        (["--max-revisions", "2"], "--max-revisions needs --loop gvr"),
        (["--max-revisions", "-1"], "--max-revisions must be 0 or more"),
        (["--api-key-env", "MY_KEY"], "--api-key-env applies to openai-compatible"),
        (["--model", "local:README_0.py"], "README_0.py is not a GGUF model file"),
        (["--model", "local:missing.gguf"], "cannot read missing.gguf"),
        (["--model", "local:."], "is a directory"),
    ],
)
def test_bad_options_exit_2_before_any_store_or_session(
    argv: list[str], message: str, tmp_path: Path, _private_store: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rejected instead of ignored, and checked first: nothing is stored."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README_0.py").write_text("# not a model\n", encoding="utf-8")
    monkeypatch.setenv("MY_KEY", "k")
    code, out, err = _run(["run", "hi", *argv])
    assert code == 2
    assert message in err
    assert out == ""
    assert not _private_store.exists()


@pytest.mark.parametrize(("prompt", "stdin"), [("", ""), ("   ", ""), ("-", ""), ("-", " \n")])
def test_empty_prompt_is_rejected(prompt: str, stdin: str, _private_store: Path) -> None:
    code, _, err = _run(["run", prompt], stdin=io.StringIO(stdin))
    assert code == 2 and "the prompt is empty" in err
    assert not _private_store.exists()


def test_run_dash_reads_the_prompt_from_stdin(tmp_path: Path) -> None:
    provider = create_mock_provider(turns=[ANSWER])
    code, out, err = _run(
        ["run", "-", "--model", _script(tmp_path, [])],
        stdin=io.StringIO("line one\nline two\n"),
        provider_override=lambda: provider,
    )
    assert code == 0, err
    (request,) = provider.requests
    assert [m.text for m in request.messages if m.role == "user"] == ["line one\nline two"]


def test_api_key_env_of_a_session_is_dropped_when_the_model_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An inherited setting that no longer applies is not an error; an explicit one is."""
    monkeypatch.setenv("MY_KEY", "k")
    provider = create_mock_provider(turns=[ANSWER])
    code, _, err = _run(
        ["run", "hi", "--model", "openai-compatible:m@http://127.0.0.1:9/v1", "--api-key-env",
         "MY_KEY"],
        provider_override=lambda: provider,
    )
    assert code == 0, err
    session_id, _ = _ids(err)
    later = create_mock_provider(turns=[ANSWER])
    code, _, err = _run(
        ["run", "again", "--session", session_id, "--model", _script(tmp_path, [])],
        provider_override=lambda: later,
    )
    assert code == 0, err


def test_help_documents_every_exit_code() -> None:
    code, out, _ = _run(["--help"])
    assert code == 0
    for fragment in (
        "exit codes:", "0    done", "--deny denied", "1    the run failed", "2    invalid",
        "3    the run waits for an approval", "130  Ctrl-C", "141  the output was closed",
        '"type": "run_result"',
    ):
        assert fragment in out
    assert "- reads it from standard input" in _run(["run", "--help"])[1]


def test_an_empty_final_answer_exits_0_with_a_notice(tmp_path: Path) -> None:
    """A run whose model answers nothing still succeeds, but the command says the answer was
    empty and gives the provider's stop reason."""
    code, out, err = _run(["run", "q", "--model", _script(tmp_path, [[provider_done()]])])
    assert code == 0
    assert out.strip() == ""
    assert "the model's final answer was empty" in err


# --------------------------------------------------------------------------- 6. read-only


def test_read_only_commands_create_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    url = "sqlite:///nonexistent_dir/x.db"
    code, out, err = _run(["sessions", "list", "--store", url])
    assert (code, out) == (0, "") and f"no sessions yet in {url}" in err
    assert _run(["sessions", "list", "--json", "--store", url])[:2] == (0, "")
    code, _, err = _run(["sessions", "show", "session_x", "--store", url])
    assert code == 2 and f"no session session_x in {url}" in err
    code, _, err = _run(["resume", "run_x", "--store", url])
    assert code == 2 and "does not exist" in err
    code, _, err = _run(["run", "hi", "--session", "session_x", "--store", url])
    assert code == 2 and "does not exist" in err
    assert not (tmp_path / "nonexistent_dir").exists()


# --------------------------------------------------------------------------- 7. wording


def test_sessions_show_one_entry_and_a_failed_run_with_its_redacted_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    failing = create_mock_provider(
        turns=[[provider_error(ErrorInfo(message=f"401 bad key {secret}", code=401))]]
    )
    code, _, err = _run(
        ["run", "hi", "--model", "openai:gpt-test"], provider_override=lambda: failing
    )
    assert code == 1
    session_id, run_id = _ids(err)  # the failed run's footer names the run
    code, out, _ = _run(["sessions", "show", session_id])
    assert out.splitlines()[0] == f"session {session_id} · 1 entry"
    assert f"run {run_id}: failed: 401 bad key [REDACTED]" in out
    assert secret not in out
    (run,) = _runs(session_id)
    assert run["error"] == {"message": "401 bad key [REDACTED]"}


def test_a_connection_error_names_the_masked_endpoint(tmp_path: Path) -> None:
    refused = ErrorInfo(message="Connection error.", code="ECONNREFUSED")
    provider = create_mock_provider(turns=[[provider_error(refused)]] * 8)
    code, _, err = _run(
        ["run", "hi", "--model", "openai-compatible:m@http://user:pw9@127.0.0.1:9/v1"],
        provider_override=lambda: provider,
    )
    assert code == 1
    assert "error: Connection error. (http://user:***@127.0.0.1:9/v1)" in err
    assert "pw9" not in err


# --------------------------------------------------------------------------- 8. Ctrl-C


def test_first_ctrl_c_stops_at_the_turn_boundary_and_resume_continues(tmp_path: Path) -> None:
    """TP-6/TP-8: a host-policy stop after the running turn (its tool round completes), exit
    130, and ``prism resume`` continues from the boundary (DUR-23)."""
    provider = _Provider([CALC], before={1: _ctrl_c()})
    code, out, err = _run(
        ["run", "q", "--model", _script(tmp_path, []), "--tool", "calculator"],
        provider_override=lambda: provider,
    )
    assert code == 130, err
    assert "stopping after the current turn (press Ctrl-C again to abort now)" in err
    assert "→ calculator: " in err and provider.calls == 1
    session_id, run_id = _ids(err)
    assert f"interrupted at a turn boundary; continue with: prism resume {run_id}" in err
    code, out, _ = _run(["sessions", "show", session_id])
    assert f"run {run_id}: stopped (Ctrl-C) — prism resume {run_id}" in out
    resumed = create_mock_provider(turns=[ANSWER])
    code, out, err = _run(["resume", run_id], provider_override=lambda: resumed)
    assert code == 0, err
    assert out == "It is 42.\n" and resumed.call_count == 1


def test_second_ctrl_c_aborts_at_once(tmp_path: Path) -> None:
    """RUN-9: the abort ends the run during its first turn; the conversation goes on with
    ``prism run --session`` (an aborted run is final)."""
    provider = _Provider([CALC, ANSWER], before={1: _ctrl_c(2)})
    code, _, err = _run(
        ["run", "q", "--model", _script(tmp_path, []), "--tool", "calculator"],
        provider_override=lambda: provider,
    )
    assert code == 130, err
    assert "error: run aborted (Ctrl-C)" in err
    session_id, run_id = _ids(err)
    assert f"continue the conversation with: prism run --session {session_id} PROMPT" in err
    assert provider.calls == 1
    (run,) = _runs(session_id)
    assert run["status"] == "aborted"
    later = create_mock_provider(turns=[ANSWER])
    code, _, err = _run(["run", "next", "--session", session_id], provider_override=lambda: later)
    assert code == 0, err


def test_ctrl_c_in_a_resumed_leg_aborts_at_once(tmp_path: Path) -> None:
    """TP-10: a resumed leg carries no turn policy, so there is no clean stop to wait for."""
    model = _script(tmp_path, [CALC])
    code, _, err = _run(["run", "q", "--model", model, "--tool", "calculator", "--max-turns", "1"])
    assert code == 0, err
    _, run_id = _ids(err)
    provider = _Provider([ANSWER], before={1: _ctrl_c()})
    code, _, err = _run(["resume", run_id], provider_override=lambda: provider)
    assert code == 130, err
    assert "error: run aborted (Ctrl-C)" in err


class _BlockedTerminal(io.StringIO):
    """A terminal whose user presses Ctrl-C instead of answering."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def isatty(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> str:
        os.kill(os.getpid(), signal.SIGINT)
        self.release.wait(timeout=60)
        return ""


def test_ctrl_c_at_an_approval_question_leaves_the_run_waiting(tmp_path: Path) -> None:
    model = _script(tmp_path, [CALC])
    terminal = _BlockedTerminal()
    try:
        code, _, err = _run(
            ["run", "q", "--model", model, "--tool", "calculator", "--approve-tools"],
            stdin=terminal,
        )
    finally:
        terminal.release.set()
    assert code == 130, err
    session_id, run_id = _ids(err)
    assert f"decide with: prism resume {run_id} --approve" in err
    assert _runs(session_id)[0]["status"] == "suspended"


# --------------------------------------------------------------------------- 9. run_result


def test_json_ends_with_a_run_result_line_for_every_outcome(tmp_path: Path) -> None:
    model = _script(tmp_path, [CALC])
    code, out, _ = _run(
        ["run", "q", "--model", model, "--tool", "calculator", "--approve-tools", "--json"]
    )
    suspended = json.loads(out.splitlines()[-1])
    assert code == 3
    assert {k: suspended[k] for k in ("type", "status", "stop_reason", "exit_code")} == {
        "type": "run_result", "status": "suspended", "stop_reason": None, "exit_code": 3,
    }
    assert suspended["usage"] == {"input_tokens": 500, "output_tokens": 30, "total_tokens": 530}
    code, out, _ = _run(["resume", suspended["run_id"], "--deny", "--json"])
    denied = json.loads(out.splitlines()[-1])
    assert code == 0
    assert (denied["status"], denied["run_id"], denied["session_id"]) == (
        "denied", suspended["run_id"], suspended["session_id"],
    )
    failing = _script(tmp_path, [[provider_error(ErrorInfo(message="boom", code="bad"))]])
    code, out, _ = _run(["run", "q", "--model", failing, "--json"])
    failed = json.loads(out.splitlines()[-1])
    assert code == 1
    assert failed["status"] == "failed" and failed["error"] == {"message": "boom", "code": "bad"}
