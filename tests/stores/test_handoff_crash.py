"""A handed-over durable run killed during the target's turn continues with the target (issue 16).

Turn 1 is agent ``triage``'s (it hands off), turns 2 and 3 are agent ``billing``'s (a refund,
then the answer); see ``_handoff_worker.py``. A ``start`` process SIGKILLs itself inside one of
billing's provider turns; a ``recover`` process, a new interpreter, resumes the run from the store
with a freshly built ``triage`` agent. The resumed leg must go on with billing — billing's
instructions, tools, model and provider — never ask triage again, never repeat a provider turn
the checkpoint holds or the refund, and the stored branch must name the agent of each turn
(triage, billing, billing). On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

WORKER = Path(__file__).with_name("_handoff_worker.py")
_IO_GUARD_S = 120.0  # a hang guard only; nothing asserts on time

KILL_POINTS = ("billing.request t2", "billing.stream t2", "billing.request t3", "billing.stream t3")


async def _phase(job: dict[str, Any]) -> int:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(WORKER), json.dumps(job),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    return await asyncio.wait_for(proc.wait(), _IO_GUARD_S)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def _crash_then_resume(directory: Path, url: str, schema: str | None, kill_at: str) -> None:
    base = {"url": url, "schema": schema, "session": "sess_handoff", "dir": str(directory)}
    code = await _phase({**base, "mode": "start", "phase": 0, "kill_at": kill_at})
    assert code == -signal.SIGKILL, (directory / "error-0.txt").read_text()
    code = await _phase({**base, "mode": "recover", "phase": 1, "kill_at": None})
    error = directory / "error-1.txt"
    assert code == 0, error.read_text() if error.exists() else code
    final = json.loads((directory / "final-1.json").read_text())
    assert final["status"] == "succeeded"

    # The stored branch: triage answered turn 1, billing turns 2 and 3; one switch, once.
    branch = final["branch"]
    assistants = [e for e in branch if e.get("role") == "assistant"]
    assert [e["agent"] for e in assistants] == ["triage", "billing", "billing"]
    assert assistants[-1]["text"] == "refund issued"
    switches = [e for e in branch if e["kind"] == "custom"]
    assert [s["data"] for s in switches] == [
        {"type": "handoff", "agent": "billing", "previous_agent": "triage", "tool_rounds": 0}
    ]
    models = [e["model"] for e in branch if e["kind"] == "model_change"]
    assert models == ["billing-model"]  # the resume stored no change back to triage's model
    assert [e.get("result_for") for e in branch if e.get("role") == "tool"] == ["t1", "r1"]

    # The resumed process asked billing only, with billing's tools, model and instructions.
    requests = [json.loads(line) for line in _lines(directory / "requests.log")]
    resumed = [r for r in requests if r["phase"] == 1]
    assert resumed and all(r["agent"] == "billing" for r in resumed)
    for request in resumed:
        assert request["tools"] == ["refund"]
        assert request["model"] == "billing-model"
        assert "You handle refunds." in request["system"]
        assert "You route requests." not in request["system"]
    # Triage's turn was never requested again; a billing turn the checkpoint holds neither.
    assert [r["turn"] for r in requests if r["agent"] == "triage"] == [1]
    killed_turn = int(kill_at[-1])
    assert [r["turn"] for r in resumed] == list(range(killed_turn, 4))
    # The refund ran exactly once, in whichever process reached it first.
    assert [line.split()[0] for line in _lines(directory / "effects.log")] == ["r1"]


@pytest.mark.parametrize("kill_at", KILL_POINTS)
async def test_issue16_sqlite_handoff_crash_in_targets_turn_resumes_with_target(
    tmp_path: Path, kill_at: str
) -> None:
    await _crash_then_resume(tmp_path, f"sqlite:///{tmp_path}/store.db", None, kill_at)


@pytest.mark.parametrize("kill_at", KILL_POINTS[::3])
async def test_issue16_postgres_handoff_crash_in_targets_turn_resumes_with_target(
    tmp_path: Path, pg_url: str, pg_schema: str, kill_at: str
) -> None:
    await _crash_then_resume(tmp_path, pg_url, pg_schema, kill_at)
