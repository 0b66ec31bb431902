"""``prism resume`` through the real command: a resume refused before it changed anything says
the run is still suspended (exit 3, not a failed run's 1) and leaves it waiting, and
``--approve --arguments JSON`` runs the waiting call with the operator's arguments."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.runtime.durable import load_agent_run_state, save_agent_run_state
from prism.stores.sqlite import SqliteStore
from prism.types import ProviderEvent

CALC = [provider_tool_call("c1", "calculator", {"expression": "6*7"}), provider_done()]
ANSWER = [provider_text_delta("It is 6."), provider_done()]


def _script(tmp_path: Path, turns: Sequence[Sequence[ProviderEvent]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": [[e.to_dict() for e in t] for t in turns]}), "utf-8")
    return f"mock:{path}"


def _prism(*argv: str) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "prism", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr


def _run_id(err: str) -> str:
    line = next(x for x in reversed(err.splitlines()) if x.startswith("session "))
    return line.split()[4]


async def _stored(path: Path, run_id: str, change: Any = None) -> tuple[str, list[Any]]:
    store = await SqliteStore(path).open()
    try:
        loaded = await load_agent_run_state(store, run_id=run_id)
        if change is not None:
            state = json.loads(json.dumps(loaded.state))
            change(state)
            await save_agent_run_state(
                checkpoints=store, state=state, expected_version=loaded.record.version
            )
        results = []
        for entry in await store.list(str(loaded.state["session_id"])):
            message = entry.message
            if message is not None and message.role == "tool":
                results.extend(getattr(part, "result", None) for part in message.content)
        return str(loaded.state["status"]), results
    finally:
        await store.aclose()


def _rename(name: str) -> Any:
    def change(state: dict[str, Any]) -> None:
        state["pending_calls"][0]["call"]["name"] = name

    return change


def test_a_refused_resume_says_still_suspended_and_arguments_replace_the_stored_ones(
    tmp_path: Path, _private_store: Path
) -> None:
    model = _script(tmp_path, [CALC])
    code, _, err = _prism(
        "run", "6*7?", "--model", model, "--tool", "calculator", "--approve-tools"
    )
    assert code == 3, err
    run_id = _run_id(err)
    asyncio.run(_stored(_private_store, run_id, _rename("clock")))  # an edited entry
    _script(tmp_path, [ANSWER])
    code, _, err = _prism("resume", run_id, "--approve")
    assert code == 3, err
    assert "still suspended" in err and "failed" not in err
    assert asyncio.run(_stored(_private_store, run_id))[0] == "suspended"
    asyncio.run(_stored(_private_store, run_id, _rename("calculator")))
    code, _, err = _prism("resume", run_id, "--approve", "--arguments", '{"expression": "2*3"}')
    assert code == 0, err
    status, results = asyncio.run(_stored(_private_store, run_id))
    # ran once, with the operator's arguments
    assert status == "succeeded" and results == [{"expression": "2*3", "result": 6}]


def test_arguments_need_approve(tmp_path: Path) -> None:
    model = _script(tmp_path, [CALC])
    code, _, err = _prism(
        "run", "6*7?", "--model", model, "--tool", "calculator", "--approve-tools"
    )
    assert code == 3, err
    code, _, err = _prism("resume", _run_id(err), "--deny", "--arguments", "{}")
    assert code == 2 and "--arguments goes with --approve" in err
