"""The ``prism`` command writes each run's ledger to its store: a run (and a resumed one) has a
timeline an inspector reads."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Sequence
from pathlib import Path

from prism.cli import main
from prism.cli._store import AGENT_ID
from prism.inspection import RunSummary
from prism.ledger import ExecutionTimeline, project_execution_timeline
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.stores.sqlite import SqliteStore
from prism.types import ProviderEvent

CALC = [provider_tool_call("c1", "calculator", {"expression": "17 * 23"}), provider_done()]
ANSWER = [provider_text_delta("17 * 23 = 391."), provider_done()]


def _script(tmp_path: Path, turns: Sequence[Sequence[ProviderEvent]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": [[e.to_dict() for e in t] for t in turns]}), "utf-8")
    return f"mock:{path}"


def _run(argv: Sequence[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err, stdin=io.StringIO())
    return code, out.getvalue(), err.getvalue()


def _ids(err: str) -> tuple[str, str]:
    line = next(x for x in reversed(err.splitlines()) if x.startswith("session "))
    parts = line.split()
    return parts[1], parts[4]


async def _read(path: Path, run_id: str) -> tuple[RunSummary, ExecutionTimeline, list[str]]:
    """The run's summary, the timeline of its ledger rows, and the kinds of those rows."""
    async with SqliteStore(path) as store:
        run = await store.get_run_summary(run_id)
        assert run is not None
        rows = (await store.read_ledger(run_id)).rows
        events = await store.list_events(run.session_id, run_id=run_id)
        runs = await store.list_runs(run_id=run_id)
    return run, project_execution_timeline(events, runs), [r.kind for r in rows]


def test_a_command_run_has_a_timeline_in_its_store(tmp_path: Path, _private_store: Path) -> None:
    model = _script(tmp_path, [CALC, ANSWER])
    code, out, err = _run(["run", "What is 17 * 23?", "--model", model, "--tool", "calculator"])
    assert code == 0, err
    session_id, run_id = _ids(err)
    run, timeline, kinds = asyncio.run(_read(_private_store, run_id))
    assert (run.session_id, run.agent_id, run.status, run.has_ledger) == (
        session_id, AGENT_ID, "succeeded", True)
    assert run.turns == 2
    assert timeline.status == "succeeded"
    calls = [c for t in timeline.turns for c in t.tool_calls]
    assert [c.name for c in calls] == ["calculator"]
    assert kinds[-1] == "run" and "tool_call" in kinds


def test_a_resumed_run_adds_its_leg_to_the_ledger(tmp_path: Path, _private_store: Path) -> None:
    model = _script(tmp_path, [CALC])
    code, _, err = _run(["run", "What is 17 * 23?", "--model", model, "--tool", "calculator",
                         "--approve-tools"])
    assert code == 3, err
    _, run_id = _ids(err)
    run, _, _ = asyncio.run(_read(_private_store, run_id))
    assert run.status == "suspended"
    _script(tmp_path, [ANSWER])
    code, _, err = _run(["resume", run_id, "--approve"])
    assert code == 0, err
    run, timeline, kinds = asyncio.run(_read(_private_store, run_id))
    assert run.status == "succeeded"
    assert kinds.count("run") == 4  # each leg's start and finish row
    assert timeline.legs == 2
