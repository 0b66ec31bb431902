"""The ``prism`` command's sessions: the store, ``sessions list/show``, ``run --session``,
``--max-turns`` stops, ``--approve-tools`` approvals and ``prism resume`` (DB-2, DUR-16..DUR-23,
APR-1..APR-9, TP-8).

Every invocation is a fresh ``main()`` call (a new store connection and a new agent), so a resume
rebuilds its agent from the stored settings exactly as a new process would; one test kills a real
``prism`` process mid-run and resumes it. The conftest points ``PRISM_STORE`` at the test's tmp
path.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from prism.cli import main
from prism.cli._store import default_store_path, display_url, store_url
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.types import ProviderEvent, Usage

# --------------------------------------------------------------------------- helpers


def _script(tmp_path: Path, turns: Sequence[Sequence[ProviderEvent]]) -> str:
    """Write the mock script (always the same file: the model name, and so the fingerprint,
    stays the same across invocations) and return its ``--model`` spec."""
    path = tmp_path / "script.json"
    data = {"turns": [[event.to_dict() for event in turn] for turn in turns]}
    path.write_text(json.dumps(data), encoding="utf-8")
    return f"mock:{path}"


class _Terminal(io.StringIO):
    """Scripted answers on a stdin that claims to be a terminal."""

    def isatty(self) -> bool:
        return True


def _run(argv: Sequence[str], **kwargs: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    kwargs.setdefault("stdin", io.StringIO())
    code = main(list(argv), out=out, err=err, **kwargs)
    return code, out.getvalue(), err.getvalue()


def _ids(err: str) -> tuple[str, str]:
    """``(session_id, run_id)`` from the command's closing ``session … · run …`` line."""
    line = next(x for x in reversed(err.splitlines()) if x.startswith("session "))
    parts = line.split()
    return parts[1], parts[4]


def _show(session_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    code, out, err = _run(["sessions", "show", session_id, "--json"])
    assert code == 0, err
    items = [json.loads(line) for line in out.splitlines()]
    return [i for i in items if i.get("type") != "run"], [i for i in items if i.get("type") == "run"]


CALC = [provider_tool_call("c1", "calculator", {"expression": "6*7"}), provider_done()]
ANSWER = [provider_text_delta("It is 42."), provider_done(Usage(input_tokens=3, output_tokens=2))]


# --------------------------------------------------------------------------- the store


def test_default_store_is_a_sqlite_file_in_the_data_dir(tmp_path: Path) -> None:
    """--store, else $PRISM_STORE, else $XDG_DATA_HOME/prism/sessions.db (DB-2)."""
    assert default_store_path({"XDG_DATA_HOME": "/data"}) == Path("/data/prism/sessions.db")
    assert default_store_path({"HOME": "/home/u"}) == Path(
        "/home/u/.local/share/prism/sessions.db"
    )
    assert default_store_path({"XDG_DATA_HOME": "relative", "HOME": "/h"}) == Path(
        "/h/.local/share/prism/sessions.db"
    )
    env = {"PRISM_STORE": "sqlite:///x.db", "XDG_DATA_HOME": "/data"}
    assert store_url("postgresql://h/db", env) == "postgresql://h/db"
    assert store_url(None, env) == "sqlite:///x.db"
    assert store_url(None, {"XDG_DATA_HOME": "/data"}) == "sqlite:////data/prism/sessions.db"
    assert display_url("postgresql://u:s3cret@h:5/db") == "postgresql://u:***@h:5/db"


def test_run_without_store_option_uses_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PRISM_STORE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    code, out, err = _run(["run", "hi", "--model", _script(tmp_path, [ANSWER])])
    assert code == 0, err
    assert (tmp_path / "xdg" / "prism" / "sessions.db").is_file()
    session_id, _ = _ids(err)
    code, out, _ = _run(["sessions", "list"])
    assert code == 0 and session_id in out


def test_store_option_and_errors(tmp_path: Path) -> None:
    store = tmp_path / "elsewhere" / "s.db"
    argv = ["run", "hi", "--model", _script(tmp_path, [ANSWER]), "--store", f"sqlite:///{store}"]
    # an explicit store whose folder does not exist is an error; nothing is created
    code, _, err = _run(argv)
    assert code == 2
    assert f"the folder {store.parent} does not exist" in err
    assert not store.parent.exists()
    store.parent.mkdir()
    code, _, err = _run(argv)
    assert code == 0, err
    assert store.is_file()
    code, out, _ = _run(["sessions", "list", "--store", f"sqlite:///{store}"])
    assert code == 0 and len(out.splitlines()) == 1
    code, out, _ = _run(["sessions", "list"])  # the default store ($PRISM_STORE) is empty
    assert code == 0 and out == ""
    code, _, err = _run(["sessions", "list", "--store", "mysql://u:pw@h/db"])
    assert code == 2 and "unsupported store URL" in err and "pw" not in err
    pytest.importorskip("psycopg")
    code, _, err = _run(["sessions", "list", "--store", "postgresql://u:s3cret@127.0.0.1:1/db"])
    assert code == 2 and "cannot open store postgresql://u:***@127.0.0.1:1/db" in err
    assert "s3cret" not in err


# --------------------------------------------------------------------------- sessions


def test_sessions_list_and_show(tmp_path: Path) -> None:
    model = _script(tmp_path, [CALC, ANSWER])
    code, out, err = _run(["run", "what is 6*7?", "--model", model, "--tool", "calculator"])
    assert code == 0, err
    session_id, run_id = _ids(err)
    code, out, _ = _run(["sessions", "list"])
    assert code == 0
    (line,) = out.splitlines()
    assert line.startswith(session_id) and line.endswith("4 entries  what is 6*7?")
    code, out, _ = _run(["sessions", "list", "--json"])
    (info,) = [json.loads(x) for x in out.splitlines()]
    assert info["session_id"] == session_id and info["entries"] == 4
    assert info["title"] == "what is 6*7?"
    code, out, _ = _run(["sessions", "show", session_id])
    assert code == 0
    assert out.splitlines() == [
        f"session {session_id} · 4 entries",
        "  user: what is 6*7?",
        '  ⚙ calculator({"expression": "6*7"})',
        '  → calculator: {"expression": "6*7", "result": 42}',
        "  assistant: It is 42.",
        f"run {run_id}: succeeded",
    ]
    entries, runs = _show(session_id)
    assert [e["message"]["role"] for e in entries] == ["user", "assistant", "tool", "assistant"]
    (run,) = runs
    assert isinstance(run.pop("version"), int)  # the envelope version (the runtime's count)
    assert run == {"type": "run", "run_id": run_id, "status": "succeeded"}
    code, _, err = _run(["sessions", "show", "session_nope"])
    assert code == 2 and "no session session_nope" in err
    assert _run(["sessions"])[0] == 2


def test_run_session_continues_the_conversation_with_its_settings(tmp_path: Path) -> None:
    """run --session ID: the history and the stored model/tools carry over (RUN-3)."""
    model = _script(tmp_path, [ANSWER])
    first = create_mock_provider(turns=[ANSWER])
    code, _, err = _run(
        ["run", "first question", "--model", model, "--tool", "calculator"],
        provider_override=lambda: first,
    )
    assert code == 0, err
    session_id, _ = _ids(err)
    second = create_mock_provider(turns=[[provider_text_delta("again"), provider_done()]])
    code, out, err = _run(
        ["run", "second question", "--session", session_id], provider_override=lambda: second
    )
    assert code == 0, err
    assert out == "again\n"
    (request,) = second.requests
    assert [m.text for m in request.messages if m.role != "system"] == [
        "first question", "It is 42.", "second question",
    ]
    assert [t.name for t in request.tools] == ["calculator"]  # the stored --tool
    assert _ids(err)[0] == session_id
    entries, runs = _show(session_id)
    assert len(entries) == 4 and len(runs) == 2
    code, _, err = _run(["run", "x", "--session", "session_unknown"])
    assert code == 2 and "no session session_unknown" in err


# --------------------------------------------------------------------------- --max-turns


def test_max_turns_stops_cleanly_and_resume_continues(tmp_path: Path) -> None:
    """--max-turns N: a host-policy stop (TP-8) that prism resume continues (DUR-23); the
    stopped turn's answer is not requested again."""
    model = _script(tmp_path, [CALC])
    code, out, err = _run(
        ["run", "what is 6*7?", "--model", model, "--tool", "calculator", "--max-turns", "1"]
    )
    assert code == 0, err
    assert "→ calculator" in err and out == ""
    session_id, run_id = _ids(err)
    assert f"stopped at --max-turns; continue with: prism resume {run_id}" in err
    code, out, _ = _run(["sessions", "show", session_id])
    assert f"run {run_id}: stopped (--max-turns 1) — prism resume {run_id}" in out
    _script(tmp_path, [ANSWER])  # the resumed process's model answers from here on
    resumed = create_mock_provider(turns=[ANSWER])
    code, out, err = _run(["resume", run_id], provider_override=lambda: resumed)
    assert code == 0, err
    assert out == "It is 42.\n" and resumed.call_count == 1
    assert [m.role for m in resumed.requests[0].messages if m.role != "system"] == [
        "user", "assistant", "tool",
    ]
    code, _, err = _run(["resume", run_id])
    assert code == 2 and f"run {run_id} already finished (succeeded); nothing to resume" in err
    assert f"prism run --session {session_id} PROMPT" in err
    assert _run(["run", "x", "--model", model, "--max-turns", "0"])[0] == 2


# --------------------------------------------------------------------------- approvals


def test_approve_tools_waits_then_resume_approve_runs_the_tool(tmp_path: Path) -> None:
    """--approve-tools without a terminal: exit 3, nothing runs; resume --approve runs the
    call once and finishes (APR-1, APR-9)."""
    model = _script(tmp_path, [CALC])
    code, out, err = _run(
        ["run", "what is 6*7?", "--model", model, "--tool", "calculator", "--approve-tools"]
    )
    assert code == 3, err
    assert "→ calculator" not in err
    assert '⏸ calculator({"expression": "6*7"}) needs approval' in err
    session_id, run_id = _ids(err)
    assert f"prism resume {run_id} --approve" in err
    code, out, _ = _run(["sessions", "show", session_id])
    assert f"run {run_id}: suspended (waiting for approval) — prism resume {run_id} --approve" in out
    # a new prompt must wait for the decision
    code, _, err = _run(["run", "next", "--session", session_id])
    assert code == 2 and f"prism resume {run_id} --approve" in err
    code, _, err = _run(["resume", run_id])  # no decision and no terminal
    assert code == 2 and "pass --approve or --deny" in err
    _script(tmp_path, [ANSWER])
    code, out, err = _run(["resume", run_id, "--approve"])
    assert code == 0, err
    assert '→ calculator: {"expression": "6*7", "result": 42}' in err
    assert out == "It is 42.\n"
    entries, runs = _show(session_id)
    assert [e["message"]["role"] for e in entries] == ["user", "assistant", "tool", "assistant"]
    assert runs[0]["status"] == "succeeded"


def test_resume_deny_ends_the_run_without_running_the_tool(tmp_path: Path) -> None:
    model = _script(tmp_path, [CALC])
    code, _, err = _run(["run", "q", "--model", model, "--tool", "calculator", "--approve-tools"])
    assert code == 3
    session_id, run_id = _ids(err)
    code, out, err = _run(["resume", run_id, "--deny"])
    assert code == 0, err
    assert f"run {run_id} denied" in err
    assert "→ calculator" not in err
    entries, runs = _show(session_id)
    assert runs[0]["status"] == "denied"
    code, _, err = _run(["resume", run_id, "--approve"])
    assert code == 2 and "denied and cannot be resumed" in err
    # the denied call is answered, so the conversation can go on (providers refuse tool calls
    # without results)
    row = entries[-1]["message"]["content"][0]
    assert (row["tool_call_id"], row["error"]["code"]) == ("c1", "approval_rejected")
    later = create_mock_provider(turns=[ANSWER])
    code, _, err = _run(["run", "next", "--session", session_id], provider_override=lambda: later)
    assert code == 0, err
    roles = [m.role for m in later.requests[0].messages if m.role != "system"]
    assert roles == ["user", "assistant", "tool", "user"]


def test_approvals_are_asked_on_a_terminal(tmp_path: Path) -> None:
    """On a terminal each call is asked: yes runs it, no answers it with approval_rejected, and
    an input that ends leaves the run waiting (APR-7, APR-9)."""
    two_calls = [
        provider_tool_call("c1", "calculator", {"expression": "1+1"}),
        provider_tool_call("c2", "calculator", {"expression": "2+2"}),
        provider_done(),
    ]
    model = _script(tmp_path, [two_calls, ANSWER])
    code, out, err = _run(
        ["run", "sums", "--model", model, "--tool", "calculator", "--approve-tools"],
        stdin=_Terminal("y\nn\n"),
    )
    assert code == 0, err
    assert 'allow calculator({"expression": "1+1"})? [y]es / [n]o / [a]lways: ' in err
    assert 'allow calculator({"expression": "2+2"})?' in err
    assert '→ calculator: {"expression": "1+1", "result": 2}' in err
    assert out == "It is 42.\n"
    session_id, _ = _ids(err)
    entries, _ = _show(session_id)
    rows = [e["message"]["content"][0] for e in entries if e["message"]["role"] == "tool"]
    assert rows[0]["result"] == {"expression": "1+1", "result": 2}
    assert rows[1]["error"]["code"] == "approval_rejected"

    _script(tmp_path, [CALC])
    code, _, err = _run(
        ["run", "q", "--model", model, "--tool", "calculator", "--approve-tools"],
        stdin=_Terminal(""),
    )
    assert code == 3 and "waiting for approval" in err
    _, run_id = _ids(err)
    _script(tmp_path, [ANSWER])
    code, out, err = _run(["resume", run_id], stdin=_Terminal("always\n"))
    assert code == 0, err
    assert out == "It is 42.\n"


# --------------------------------------------------------------------------- crash recovery


_KILLED_RUN = textwrap.dedent(
    """
    import os, signal, sys
    from prism.cli import main
    from prism.providers.base import provider_done, provider_tool_call

    class DiesOnSecondTurn:
        id = "mock"
        calls = 0

        async def generate(self, request):
            DiesOnSecondTurn.calls += 1
            if DiesOnSecondTurn.calls == 2:
                os.kill(os.getpid(), signal.SIGKILL)
            yield provider_tool_call("c1", "calculator", {"expression": "6*7"})
            yield provider_done()

    sys.exit(main(sys.argv[1:], provider_override=DiesOnSecondTurn))
    """
)


def test_resume_continues_a_run_whose_process_was_killed(tmp_path: Path) -> None:
    """A prism process killed mid-run leaves a running envelope; sessions show reports the run
    as interrupted and prism resume continues it (DUR-22): the tool result stored before the
    crash is kept, the killed turn is requested again."""
    model = _script(tmp_path, [])
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED_RUN, "run", "what is 6*7?", "--model", model,
         "--tool", "calculator"],
        env=dict(os.environ), capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == -9, proc.stderr
    code, out, _ = _run(["sessions", "list", "--json"])
    session_id = json.loads(out)["session_id"]
    entries, runs = _show(session_id)
    (run,) = runs
    assert run["status"] == "running"
    code, out, _ = _run(["sessions", "show", session_id])
    assert f"interrupted (running when its process ended) — prism resume {run['run_id']}" in out
    resumed = create_mock_provider(turns=[ANSWER])
    code, out, err = _run(["resume", run["run_id"]], provider_override=lambda: resumed)
    assert code == 0, err
    assert out == "It is 42.\n"
    assert "→ calculator" not in err  # the tool ran once, before the crash
    assert resumed.call_count == 1
    entries, runs = _show(session_id)
    assert [e["message"]["role"] for e in entries] == ["user", "assistant", "tool", "assistant"]
    assert runs[0]["status"] == "succeeded"
