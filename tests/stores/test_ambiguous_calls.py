"""An ambiguous parallel round tells the operator what is ambiguous and keeps what the resume
learned, and the operator's repair cannot reject a call that ran (memory, SQLite, PostgreSQL).

The crash: an ``every-turn`` run dispatches a round of two calls in parallel; both run, ``c1``'s
result row is stored, and the process dies before ``c2``'s row is. The stored
envelope lists both calls ``dispatched``. A resume matches ``c1``'s stored row to its call, saves
that (compare-and-set), and reports ``c2`` alone — in ``calls`` and in its message. The repair
(``resolve_ambiguous_call``) refuses to reject ``c1`` (its result is stored) and records ``c2`` as
succeeded or rejected; the next resume answers it without running it and finishes the run.
"""

from __future__ import annotations

from typing import Any

import pytest

from prism.errors import AgentRunError, AgentRunStateError, PrismConfigError
from prism.loops.contracts import SingleShotLoopOptions
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import Agent, create_agent
from prism.runtime.durable import (
    RunStateOptions,
    load_agent_run_state,
    resolve_ambiguous_call,
    resume_agent_run,
)
from prism.store import read_branch
from prism.types import ModelConfig, ToolCallContent, ToolDefinition, ToolResultContent

MODEL = ModelConfig(provider="mock", model="ambiguous")
AMBIGUOUS = "Ambiguous dispatched tool requires operator resolution"
ROUND = [
    provider_tool_call("c1", "record", {"key": "c1"}),
    provider_tool_call("c2", "record", {"key": "c2"}),
    provider_done(),
]
DONE = [provider_text_delta("all done"), provider_done()]


class Crash(Exception):
    """What a dead process's stores raise."""


class Dying:
    """Forwards to the real stores until ``dead``; then every write raises."""

    def __init__(self, inner: Any, power: list[bool]) -> None:
        self.inner = inner
        self.power = power

    @property
    def dead(self) -> bool:
        return bool(self.power)

    async def append(self, entry: Any, **kw: Any) -> None:
        if self.dead:
            raise Crash("gone")
        await self.inner.append(entry, **kw)
        m = entry.message
        if m is not None and m.role == "tool" and m.content[0].tool_call_id == "c1":
            self.power.append(True)  # the process dies right after c1's row

    async def list(self, session_id: str) -> Any:
        return await self.inner.list(session_id)

    async def read_branch(self, session_id: str, leaf_id: str) -> Any:
        return await self.inner.read_branch(session_id, leaf_id)

    async def save_checkpoint(self, **kw: Any) -> Any:
        if self.dead:
            raise Crash("gone")
        return await self.inner.save_checkpoint(**kw)

    async def load_checkpoint(self, **kw: Any) -> Any:
        return await self.inner.load_checkpoint(**kw)


def _agent(sessions: Any, checkpoints: Any, turns: list[Any], tool: Any) -> Agent:
    return create_agent(
        id="desk",
        model=MODEL,
        provider=create_mock_provider(turns=turns),
        tools=[ToolDefinition(name="record", execute=tool)],
        loop=SingleShotLoopOptions(tool_concurrency=2),
        store=sessions,
        run_state=RunStateOptions(checkpoints, "v1", checkpoint_policy="every-turn"),
    )


async def _crashed_round(stores: tuple[Any, Any]) -> tuple[str, str, list[str]]:
    """Run until the process dies between the round's two rows (both effects happened)."""
    sessions, checkpoints = stores
    power: list[bool] = []
    dying, dying_checkpoints = Dying(sessions, power), Dying(checkpoints, power)
    effects: list[str] = []

    async def record(arguments: dict[str, Any], context: Any) -> Any:
        effects.append(context.tool_call_id)
        return {"recorded": context.tool_call_id}

    session = _agent(dying, dying_checkpoints, [ROUND], record).create_session()
    with pytest.raises((AgentRunError, Crash)):
        await session.run("record both")
    entries = await sessions.list(session.id)
    run_id = next(e.run_id for e in entries if e.run_id)
    return session.id, run_id, effects


def _pending(state: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["call"]["id"], e["status"]) for e in state.get("pending_calls", [])]


def _shape(entries: Any) -> list[str]:
    out = []
    for entry in entries:
        m = entry.message
        if m is None:
            continue
        calls = [p.id for p in m.content if isinstance(p, ToolCallContent)]
        rows = [p.tool_call_id for p in m.content if isinstance(p, ToolResultContent)]
        text = "".join(getattr(p, "text", "") for p in m.content)
        out.append(f"{m.role}[{','.join(calls or rows) or text}]")
    return out


def _never(arguments: dict[str, Any], context: Any) -> Any:
    raise AssertionError(f"{context.tool_call_id} must not run again")


async def test_the_report_names_the_ambiguous_call_and_the_learned_match_is_stored(
    durable_stores: tuple[Any, Any],
) -> None:
    sessions, checkpoints = durable_stores
    session_id, run_id, effects = await _crashed_round(durable_stores)
    assert effects == ["c1", "c2"]
    crashed = await load_agent_run_state(checkpoints, run_id=run_id)
    assert _pending(crashed.state) == [("c1", "dispatched"), ("c2", "dispatched")]

    agent = _agent(sessions, checkpoints, [DONE], _never)
    with pytest.raises(AgentRunStateError) as info:
        await resume_agent_run(agent, run_id)
    assert str(info.value).startswith(AMBIGUOUS)
    assert "c2 (record)" in str(info.value) and "c1 (record)" not in str(info.value)
    assert info.value.calls == (("c2", "record"),)
    learned = await load_agent_run_state(checkpoints, run_id=run_id)
    assert learned.record.version == crashed.record.version + 1  # one compare-and-set write
    assert learned.state["status"] == "running"
    assert _pending(learned.state) == [("c2", "dispatched")]
    branch = await read_branch(sessions, session_id, str(learned.state["leaf_id"]))
    assert _shape(branch)[-1] == "tool[c1]"

    # c1 is no longer pending: it cannot be resolved (and so not rejected)
    with pytest.raises(AgentRunStateError, match="not a pending call"):
        await resolve_ambiguous_call(
            checkpoints, run_id, "c1", outcome="rejected", sessions=sessions
        )
    # the operator checked the tool's records: c2 ran
    resolved = await resolve_ambiguous_call(
        checkpoints, run_id, "c2", outcome="succeeded", sessions=sessions,
        result={"recorded": "c2"},
    )
    assert resolved.record.version == learned.record.version + 1
    result = await resume_agent_run(_agent(sessions, checkpoints, [DONE], _never), run_id)
    assert result.status == "succeeded" and result.text == "all done"
    final = await read_branch(sessions, session_id, str(result.leaf_id))
    assert _shape(final) == [
        "user[record both]", "assistant[c1,c2]", "tool[c1]", "tool[c2]", "assistant[all done]"
    ]
    row = final[3].message
    assert row is not None and row.content[0].result == {"recorded": "c2"}  # type: ignore[union-attr]
    assert effects == ["c1", "c2"]  # nothing ran twice


async def test_a_call_whose_result_is_stored_cannot_be_rejected(
    durable_stores: tuple[Any, Any],
) -> None:
    """An envelope that still lists a call ``dispatched`` though its row is stored (an older
    resume's, or an edit): rejecting it is refused; resolving it as succeeded uses the stored
    row; rejecting the other call answers it with the operator's reason."""
    sessions, checkpoints = durable_stores
    session_id, run_id, _ = await _crashed_round(durable_stores)
    crashed = await load_agent_run_state(checkpoints, run_id=run_id)
    with pytest.raises(AgentRunStateError, match="has a stored result"):
        await resolve_ambiguous_call(
            checkpoints, run_id, "c1", outcome="rejected", sessions=sessions
        )
    same = await load_agent_run_state(checkpoints, run_id=run_id)
    assert same.record.version == crashed.record.version  # nothing written
    await resolve_ambiguous_call(checkpoints, run_id, "c1", outcome="succeeded", sessions=sessions)
    await resolve_ambiguous_call(
        checkpoints, run_id, "c2", outcome="rejected", sessions=sessions,
        reason="the ledger shows no booking",
    )
    with pytest.raises(AgentRunStateError, match="not ambiguous"):
        await resolve_ambiguous_call(checkpoints, run_id, "c2", outcome="succeeded",
                                     sessions=sessions)
    result = await resume_agent_run(_agent(sessions, checkpoints, [DONE], _never), run_id)
    final = await read_branch(sessions, session_id, str(result.leaf_id))
    shape = _shape(final)
    assert shape[1:] == ["assistant[c1,c2]", "tool[c1]", "tool[c2]", "assistant[all done]"]
    c1 = final[2].message.content[0]  # type: ignore[union-attr]
    c2 = final[3].message.content[0]  # type: ignore[union-attr]
    assert c1.result == {"recorded": "c1"} and c1.error is None  # type: ignore[union-attr]
    assert c2.error.code == "approval_rejected"  # type: ignore[union-attr]
    assert c2.error.message == "the ledger shows no booking"  # type: ignore[union-attr]


async def test_resolve_needs_the_session_store_and_a_known_outcome() -> None:
    from prism.runtime.checkpoints import MemoryCheckpointStore

    with pytest.raises(PrismConfigError, match="sessions="):
        await resolve_ambiguous_call(MemoryCheckpointStore(), "run_x", "c1", outcome="rejected")
    with pytest.raises(PrismConfigError, match="outcome"):
        await resolve_ambiguous_call(
            MemoryCheckpointStore(), "run_x", "c1", outcome="maybe"  # type: ignore[arg-type]
        )
