"""A released run: the envelope's optional ``release`` after a clean stop at a turn boundary,
its shape check, a resumed leg's own turn policy, and a claim that drops the release."""

from __future__ import annotations

from typing import Any

import pytest

from prism.errors import AgentRunStateError
from prism.runtime.agent import create_agent
from prism.runtime.checkpoints import MemoryCheckpointStore
from prism.runtime.durable import (
    RELEASE_KEY,
    RunStateOptions,
    load_agent_run_state,
    resume_agent_run,
    save_agent_run_state,
)
from prism.runtime.turn_policy import Continue, Stop, TurnPolicy
from prism.store import MemorySessionStore
from prism.testing import (
    create_mock_provider,
    provider_done,
    provider_text_delta,
    provider_tool_call,
)
from prism.types import ToolDefinition


class RecordingStore(MemoryCheckpointStore):
    """Keeps every saved value."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[Any] = []

    async def save_checkpoint(self, **kw: Any) -> Any:
        self.saved.append(kw["value"])
        return await super().save_checkpoint(**kw)


def _agent(store: RecordingStore, sessions: MemorySessionStore, turns: list[Any]) -> Any:
    return create_agent(
        id="desk",
        model={"provider": "mock", "model": "demo"},
        provider=create_mock_provider(turns=turns),
        tools=[ToolDefinition(name="noop", parameters={"type": "object"}, execute=lambda a, c: "ok")],
        store=sessions,
        run_state=RunStateOptions(store, "v1", checkpoint_policy="every-turn"),
    )


async def test_a_released_run_is_continued_and_its_claim_drops_the_release() -> None:
    store, sessions = RecordingStore(), MemorySessionStore()
    first = _agent(store, sessions, [[provider_tool_call("c1", "noop", {}), provider_done()]])
    session = first.create_session()
    stop_after_one = TurnPolicy(
        stop=lambda b: Stop("worker shutdown") if b.turns >= 1 else Continue()
    )
    stopped = await session.run("go", turn_policy=stop_after_one)
    assert stopped.status == "succeeded" and stopped.stop_reason == "host_policy"
    loaded = await load_agent_run_state(store, run_id=stopped.run_id)
    state = dict(loaded.state)
    state[RELEASE_KEY] = {"by": "worker-1", "reason": "worker shutdown", "at": "2024-06-01T00:00:00.000Z"}
    released = await save_agent_run_state(
        checkpoints=store, state=state, expected_version=loaded.record.version
    )
    assert released.state[RELEASE_KEY]["by"] == "worker-1"

    second = _agent(store, sessions, [[provider_text_delta("done"), provider_done()]])
    claims_before = len(store.saved)
    done = await resume_agent_run(second, released, decision="continue")
    assert done.status == "succeeded" and done.stop_reason is None
    claim = store.saved[claims_before]
    assert claim["status"] == "running" and RELEASE_KEY not in claim


async def test_a_resumed_leg_takes_a_turn_policy() -> None:
    store, sessions = RecordingStore(), MemorySessionStore()
    script = [
        [provider_tool_call("c1", "noop", {}), provider_done()],
        [provider_tool_call("c2", "noop", {}), provider_done()],
        [provider_text_delta("done"), provider_done()],
    ]
    agent = _agent(store, sessions, script)
    stop_at_one = TurnPolicy(stop=lambda b: Stop("pause") if b.turns >= 1 else Continue())
    first = await agent.create_session().run("go", turn_policy=stop_at_one)
    assert first.stop_reason == "host_policy"
    resumed = await resume_agent_run(agent, first.run_state, turn_policy=stop_at_one)
    assert resumed.status == "succeeded" and resumed.stop_reason == "host_policy"
    finished = await resume_agent_run(agent, resumed.run_state)
    assert finished.status == "succeeded" and finished.stop_reason is None


@pytest.mark.parametrize("release", ["worker-1", {"by": "w"}, {"by": 1, "reason": "r", "at": "t"}])
async def test_a_malformed_release_is_refused(release: object) -> None:
    store, sessions = RecordingStore(), MemorySessionStore()
    agent = _agent(store, sessions, [[provider_tool_call("c1", "noop", {}), provider_done()]])
    stopped = await agent.create_session().run(
        "go", turn_policy=TurnPolicy(stop=lambda b: Stop("pause") if b.turns else Continue())
    )
    loaded = await load_agent_run_state(store, run_id=stopped.run_id)
    state = {**loaded.state, RELEASE_KEY: release}
    with pytest.raises(AgentRunStateError, match="invalid release"):
        await save_agent_run_state(checkpoints=store, state=state, expected_version=loaded.record.version)
