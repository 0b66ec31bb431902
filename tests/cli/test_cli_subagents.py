"""``prism sessions show`` with sub-agents (issue 16): child runs of agent tools nested under the
tool call that started them (text and ``--json``), a child of a child, a failed child, a child
whose call has no result yet, and the agents of a handoff.

The runs are made with the library over the SQLite store the conftest points ``PRISM_STORE`` at;
each ``sessions show`` is a fresh ``main()`` call reading that file.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import prism
from prism.cli import main
from prism.loops import handoff_loop
from prism.providers.base import (
    provider_done,
    provider_error,
    provider_text_delta,
    provider_tool_call,
)
from prism.providers.mock import create_mock_provider
from prism.store import new_session_entry
from prism.stores.sqlite import SqliteStore
from prism.types import ErrorInfo, Message, TextContent, ToolCallContent

MODEL = prism.ModelConfig(provider="mock", model="demo")


def _show(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["sessions", "show", *argv], out=out, err=err, stdin=io.StringIO())
    return code, out.getvalue(), err.getvalue()


def _agent(name: str, turns: Sequence[Sequence[Any]], **options: Any) -> Any:
    return prism.create_agent(
        model=MODEL, name=name, provider=create_mock_provider(turns=turns), **options
    )


async def _lead_with_children(path: Path) -> tuple[str, str]:
    """A lead run calling ``researcher`` twice in parallel (the first asks ``checker`` in
    turn) and ``auditor``, which fails; returns ``(session id, run id)``."""
    checker = _agent("checker", [[provider_text_delta("checked"), provider_done()]])
    researcher = _agent(
        "researcher",
        [
            [provider_tool_call("k1", "checker", {"input": "Is it 2.1M?"}), provider_done()],
            [provider_text_delta("Paris: 2.1M"), provider_done()],
            [provider_text_delta("Rome: 2.8M"), provider_done()],
        ],
        tools=[checker.as_tool()],
    )
    auditor = _agent("auditor", [[provider_error(ErrorInfo(code=400, message="bad request"))]])
    store = await SqliteStore(path).open()
    try:
        lead = _agent(
            "lead",
            [
                [
                    provider_tool_call("c1", "researcher", {"input": "Paris?"}),
                    provider_tool_call("c2", "researcher", {"input": "Rome?"}),
                    provider_tool_call("c3", "auditor", {"input": "Audit."}),
                    provider_done(),
                ],
                [provider_text_delta("Rome is bigger."), provider_done()],
            ],
            store=store,
            tools=[researcher.as_tool(), auditor.as_tool()],
        )
        session = lead.create_session()
        result = await session.run("Which city is bigger?")
        assert result.status == "succeeded"
        return session.id, result.run_id
    finally:
        await store.aclose()


def test_issue16_show_nests_child_runs_under_their_tool_calls(_private_store: Path) -> None:
    session_id, run_id = asyncio.run(_lead_with_children(_private_store))
    code, out, err = _show(session_id)
    assert code == 0, err
    lines = out.splitlines()
    start = lines.index('  ⚙ researcher({"input": "Paris?"})')
    block = lines[start : start + 20]
    c1 = f"{run_id}.c1"
    # the first call's child, its own child nested one level deeper, its answer
    assert block[1].startswith(f"      ↳ agent researcher · session {c1} · run run_")
    assert block[1].endswith(": succeeded")
    assert block[2:4] == ["          user: Paris?", '          ⚙ checker({"input": "Is it 2.1M?"})']
    assert block[4].startswith(f"              ↳ agent checker · session {block[1].split()[-2][:-1]}.k1")
    assert block[5:7] == ["                  user: Is it 2.1M?", "                  assistant: checked"]
    assert block[7:9] == ["          → checker: checked", "          assistant: Paris: 2.1M"]
    # the second call's child, then the failed one, then the rows and the answer
    assert block[9] == '  ⚙ researcher({"input": "Rome?"})'
    assert block[10].startswith(f"      ↳ agent researcher · session {run_id}.c2 · run run_")
    assert block[11:13] == ["          user: Rome?", "          assistant: Rome: 2.8M"]
    assert block[13] == '  ⚙ auditor({"input": "Audit."})'
    assert block[14].startswith(f"      ↳ agent auditor · session {run_id}.c3 · run run_")
    assert ": failed: agent auditor failed:" in block[14]
    assert block[15] == "          user: Audit."
    assert block[16:19] == [
        "  → researcher: Paris: 2.1M", "  → researcher: Rome: 2.8M", f"  ✗ auditor: {block[14].split(': failed: ')[1]}"
    ]
    assert block[19] == "  assistant: Rome is bigger."

    code, out, err = _show(session_id, "--json")
    assert code == 0, err
    items = [json.loads(line) for line in out.splitlines()]
    kinds = [i.get("type", i.get("kind")) for i in items]
    # the children follow the entry holding their calls, before its results
    assert kinds == [
        "message", "message", "subagent", "subagent", "subagent",
        "message", "message", "message", "message", "run",
    ]
    call_entry = items[1]
    children = items[2:5]
    assert [c["tool_call_id"] for c in children] == ["c1", "c2", "c3"]
    assert {c["entry_id"] for c in children} == {call_entry["id"]}
    assert [c["agent"] for c in children] == ["researcher", "researcher", "auditor"]
    assert [c["session_id"] for c in children] == [f"{run_id}.{c}" for c in ("c1", "c2", "c3")]
    assert [c["status"] for c in children] == ["succeeded", "succeeded", "failed"]
    assert "agent auditor failed" in children[2]["error"]["message"]
    first = children[0]
    assert [e["message"]["role"] for e in first["entries"]] == ["user", "assistant", "tool", "assistant"]
    assert first["entries"][0]["message"]["metadata"]["parent_run"] == {
        "session_id": session_id, "run_id": run_id, "tool_call_id": "c1"
    }
    (grandchild,) = first["subagents"]
    assert grandchild["agent"] == "checker"
    assert grandchild["session_id"] == f"{first['run_id']}.k1"
    assert grandchild["status"] == "succeeded" and grandchild["subagents"] == []
    assert children[1]["subagents"] == [] and children[2]["subagents"] == []


async def _parent_stopped_in_call(path: Path) -> None:
    store = await SqliteStore(path).open()
    try:
        parent: str | None = None
        for message in (
            Message("user", (TextContent("Research Paris."),)),
            Message("assistant", (ToolCallContent("c9", "researcher", {"input": "Paris?"}),)),
        ):
            entry = new_session_entry(
                "message", session_id="sess_p", parent_id=parent, run_id="run_p", message=message
            )
            await store.append(entry, expected_parent_id=parent)
            parent = entry.id
        child = new_session_entry(
            "message",
            session_id="run_p.c9",
            run_id="run_c",
            message=Message("user", (TextContent("Paris?"),)),
        )
        await store.append(child)
    finally:
        await store.aclose()


def test_issue16_show_finds_the_child_of_a_call_without_a_result(_private_store: Path) -> None:
    """A parent that stopped while its child ran: the call has no row; the child session is
    found by its id (``<run id>.<tool call id>``)."""
    asyncio.run(_parent_stopped_in_call(_private_store))
    code, out, err = _show("sess_p")
    assert code == 0, err
    assert out.splitlines()[2:5] == [
        '  ⚙ researcher({"input": "Paris?"})',
        "      ↳ agent researcher · session run_p.c9 · run run_c: no result yet",
        "          user: Paris?",
    ]
    code, out, err = _show("sess_p", "--json")
    (item,) = [json.loads(line) for line in out.splitlines() if '"subagent"' in line]
    assert item["status"] is None and item["run_id"] == "run_c"


async def _handed_over(path: Path) -> str:
    store = await SqliteStore(path).open()
    try:
        billing = _agent(
            "billing",
            [
                [provider_tool_call("r1", "refund", {}), provider_done()],
                [provider_text_delta("Refund issued."), provider_done()],
            ],
            tools=[prism.ToolDefinition(name="refund", execute=lambda args, ctx: "ok")],
        )
        triage = _agent(
            "triage",
            [[provider_text_delta("Passing you on."),
              provider_tool_call("t1", "transfer_to_billing", {}), provider_done()]],
            loop=handoff_loop(billing),
            store=store,
        )
        session = triage.create_session()
        assert (await session.run("Refund me.")).status == "succeeded"
        return str(session.id)
    finally:
        await store.aclose()


def test_issue16_show_names_the_agent_of_each_handoff_turn(_private_store: Path) -> None:
    code, out, err = _show(asyncio.run(_handed_over(_private_store)))
    assert code == 0, err
    assert out.splitlines()[1:9] == [
        "  user: Refund me.",
        "  assistant (triage): Passing you on.",
        "  ⚙ (triage) transfer_to_billing({})",
        '  → transfer_to_billing: {"transferred_to": "billing"}',
        "  [handoff → billing]",
        "  ⚙ (billing) refund({})",
        "  → refund: ok",
        "  assistant (billing): Refund issued.",
    ]


def _list(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["sessions", "list", *argv], out=out, err=err, stdin=io.StringIO())
    return code, out.getvalue(), err.getvalue()


def test_sessions_list_leaves_out_child_sessions_unless_all(_private_store: Path) -> None:
    """The lead's three agent-tool children and the grandchild are not conversations: left out
    and counted; ``--all`` lists each under its parent session, a grandchild one level deeper."""
    session_id, run_id = asyncio.run(_lead_with_children(_private_store))
    code, out, err = _list()
    assert code == 0, err
    (line,) = out.splitlines()
    assert line.startswith(f"{session_id}  ") and line.endswith("Which city is bigger?")
    assert err == (
        "prism: 4 child sessions of agent tools not listed (--all lists them under their parent "
        "session)\n"
    )
    code, out, err = _list("--json")
    assert [json.loads(x)["session_id"] for x in out.splitlines()] == [session_id]

    code, out, err = _list("--all")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith(f"{session_id}  ")
    children = [line for line in lines[1:] if line.startswith("    ↳ ")]
    assert sorted(line.split()[1] for line in children) == [
        f"{run_id}.{c}" for c in ("c1", "c2", "c3")
    ]
    (grandchild,) = [line for line in lines if line.startswith("        ↳ ")]
    assert grandchild.split()[1].endswith(".k1") and grandchild.endswith("Is it 2.1M?")
    c1 = lines.index(next(line for line in children if f"{run_id}.c1 " in line))
    assert lines[c1 + 1] == grandchild  # right under its parent, the c1 child
    code, out, err = _list("--all", "--json")
    items = [json.loads(x) for x in out.splitlines()]
    assert len(items) == 5 and "parent_run" not in items[0]
    assert {i["parent_run"]["run_id"] for i in items[1:] if i["session_id"].startswith(run_id)} == {
        run_id
    }


async def _multi_line(path: Path) -> None:
    store = await SqliteStore(path).open()
    try:
        parent: str | None = None
        for kind, fields in (
            ("message", {"message": Message("user", (TextContent("Two lines:\nfirst\nsecond"),))}),
            ("model_change", {"model": MODEL, "previous_model": prism.ModelConfig(
                provider="openai", model="gpt-4o-mini")}),
            ("message", {"message": Message("assistant", (
                TextContent("Asking.\nOne moment."),
                ToolCallContent("c9", "researcher", {"input": "Paris?"}),
            ))}),
        ):
            entry = new_session_entry(
                kind, session_id="sess_m", parent_id=parent, run_id="run_m", **fields
            )
            await store.append(entry, expected_parent_id=parent)
            parent = entry.id
        child = new_session_entry(
            "message",
            session_id="run_m.c9",
            run_id="run_c",
            message=Message("user", (TextContent("Paris?\nPopulation only."),)),
        )
        await store.append(child)
    finally:
        await store.aclose()


def test_show_indents_continuation_lines_and_names_both_models(_private_store: Path) -> None:
    asyncio.run(_multi_line(_private_store))
    code, out, err = _show("sess_m")
    assert code == 0, err
    assert out.splitlines()[1:11] == [
        "  user: Two lines:",
        "  first",
        "  second",
        "  [model_change openai:gpt-4o-mini → mock:demo]",
        "  assistant: Asking.",
        "  One moment.",
        '  ⚙ researcher({"input": "Paris?"})',
        "      ↳ agent researcher · session run_m.c9 · run run_c: no result yet",
        "          user: Paris?",
        "          Population only.",
    ]
