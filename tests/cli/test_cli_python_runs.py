"""Durable runs started from Python in the prism command's store: ``prism runs``, ``prism sessions
show`` and ``prism resume`` point to ``prism.resume_agent_run`` (the command has no settings to
rebuild their agent), and the child run of an agent tool is marked as the child of its parent run
with the hint to resume the parent.

The runs are made with the library over the SQLite store the conftest points ``PRISM_STORE`` at;
each command is a fresh ``main()`` call reading that file.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import prism
from prism.cli import main
from prism.providers.base import provider_done, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.stores.sqlite import SqliteStore

MODEL = prism.ModelConfig(provider="mock", model="demo")


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err, stdin=io.StringIO())
    return code, out.getvalue(), err.getvalue()


async def _suspended_child(path: Path) -> tuple[str, str, str]:
    """A lead run whose agent-tool child waits for an approval; ``(session, lead run, child
    run)``."""
    store = await SqliteStore(path).open()
    try:
        child = prism.create_agent(
            model=MODEL,
            name="refunder",
            provider=create_mock_provider(
                turns=[[provider_tool_call("r1", "refund", {"order": 42}), provider_done()]]
            ),
            tools=[prism.ToolDefinition(name="refund", execute=lambda args, ctx: "ok")],
            run_state=prism.RunStateOptions(store, "v1", interrupt_before_tool=True),
        )
        lead = prism.create_agent(
            model=MODEL,
            name="lead",
            store=store,
            provider=create_mock_provider(
                turns=[[provider_tool_call("c1", "refunder", {"input": "refund 42"}), provider_done()]]
            ),
            tools=[child.as_tool()],
            run_state=prism.RunStateOptions(store, "v1"),
        )
        session = lead.create_session()
        result = await session.run("Refund order 42")
        assert result.status == "suspended" and result.interruption is not None
        link = result.interruption.pending_decisions[0].subagent
        assert link is not None
        return session.id, result.run_id, str(link["run_id"])
    finally:
        await store.aclose()


def test_runs_started_from_python_point_to_resume_agent_run(_private_store: Path) -> None:
    session_id, lead, child = asyncio.run(_suspended_child(_private_store))
    python = (
        f'continue it from Python with prism.resume_agent_run(agent, "{lead}", decisions=[...]) '
        "and the same agent definition"
    )
    code, out, err = _cli("runs")
    assert code == 0, err
    assert "prism resume" not in out
    listing = out.splitlines()
    lines = {line.split()[0]: line for line in listing}
    assert lines[lead].endswith(f"suspended (waiting for approval) — started from Python; {python}")
    # the child is marked as its parent's child; resuming the parent continues it
    assert lines[child].endswith(
        f"— child run of run {lead} (tool call c1); that run was started from Python and "
        f"continues this one; {python}"
    )
    code, out, err = _cli("runs", "--json")
    items = {item["run_id"]: item for item in map(json.loads, out.splitlines())}
    assert items[lead]["started_by_prism"] is False and "parent_run" not in items[lead]
    assert items[child]["parent_run"] == {
        "session_id": session_id, "run_id": lead, "tool_call_id": "c1"
    }

    # the child's approval is listed once, under the run that answers it
    (approval,) = [line for line in listing if "waits for approval" in line]
    assert approval == (
        f'  waits for approval: refund {{"order": 42}} (call r1 in run {child} of agent '
        f"refunder, through agent-tool call c1 (refunder), approval {approval.split()[-1]}"
    )
    assert listing.index(approval) == listing.index(lines[lead]) + 1

    code, out, err = _cli("sessions", "show", session_id)
    assert code == 0, err
    assert out.splitlines()[-2:] == [
        f"run {lead}: suspended (waiting for approval) — started from Python; {python}",
        approval,
    ]

    code, out, err = _cli("resume", lead, "--approve")
    assert code == 2 and out == ""
    assert err == (
        f"prism: run {lead} was not started by the prism command (no stored settings for "
        f"session {session_id}); {python}\n"
    )
    code, out, err = _cli("resume", child, "--approve")
    assert code == 2
    assert err.startswith(f"prism: run {child} is a child run of run {lead} (tool call c1); ")
    assert err.endswith(f"{python}\n")


def test_a_child_of_a_prism_run_points_to_prism_resume_of_its_parent(
    _private_store: Path,
) -> None:
    """The parent's session has stored settings (as ``prism run`` stores them): the child's
    hint is ``prism resume PARENT --approve (or --deny)``."""
    session_id, lead, child = asyncio.run(_suspended_child(_private_store))

    async def mark_as_command_session() -> None:
        async with SqliteStore(_private_store) as store:
            await store.save_checkpoint(
                namespace="prism.cli.session", key=session_id, value={}, version=1,
                expected_version=0,
            )

    asyncio.run(mark_as_command_session())
    code, out, err = _cli("runs")
    assert code == 0, err
    lines = {line.split()[0]: line for line in out.splitlines()}
    assert lines[lead].endswith(f"— prism resume {lead} --approve (or --deny)")
    assert lines[child].endswith(
        f"— child run of run {lead} (tool call c1); resume that run, which continues this one: "
        f"prism resume {lead} --approve (or --deny)"
    )
    code, _, err = _cli("resume", child, "--deny")
    assert code == 2
    assert err.endswith(f"resume that run, which continues this one: prism resume {lead} --approve (or --deny)\n")
