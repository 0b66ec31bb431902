"""A durable agent created without ``store=`` keeps its sessions in its ``run_state`` checkpoint
store when that is a session store too: a run suspended by one process (one agent object, one
store object) resumes in another, on the same SQLite file. A resume over another session store
says which store it needs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from prism.errors import AgentRunStateError
from prism.providers.base import provider_done, provider_text_delta
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import Agent, create_agent
from prism.runtime.checkpoints import MemoryCheckpointStore
from prism.runtime.durable import RunStateOptions, resume_agent_run
from prism.store import MemorySessionStore
from prism.stores.sqlite import SqliteStore
from prism.types import ModelConfig, ToolDefinition, message_text

MODEL = ModelConfig(provider="mock", model="desk")

WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from prism.providers.base import provider_done, provider_tool_call
    from prism.providers.mock import create_mock_provider
    from prism.runtime.agent import create_agent
    from prism.runtime.durable import RunStateOptions
    from prism.stores.sqlite import SqliteStore
    from prism.types import ModelConfig, ToolDefinition

    async def main() -> None:
        async with SqliteStore(sys.argv[1]) as store:
            agent = create_agent(
                id="desk",
                model=ModelConfig(provider="mock", model="desk"),
                provider=create_mock_provider(
                    turns=[[provider_tool_call("c1", "pay", {"amount": 5}), provider_done()]]
                ),
                tools=[ToolDefinition(name="pay", execute=lambda arguments, context: "paid")],
                run_state=RunStateOptions(store, "v1", interrupt_before_tool=True),
            )
            result = await agent.create_session().run("pay 5")
            assert result.status == "suspended", result.status
            print(result.run_id)

    asyncio.run(main())
    """
)


def _agent(checkpoints: Any, paid: list[Any], **options: Any) -> Agent:
    def pay(arguments: dict[str, Any], context: Any) -> str:
        paid.append(arguments)
        return "paid"

    return create_agent(
        id="desk",
        model=MODEL,
        provider=create_mock_provider(turns=[[provider_text_delta("done"), provider_done()]]),
        tools=[ToolDefinition(name="pay", execute=pay)],
        run_state=RunStateOptions(checkpoints, "v1", interrupt_before_tool=True),
        **options,
    )


def _suspend_in_another_process(path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


async def test_a_run_suspended_in_one_process_resumes_in_another_without_store(
    tmp_path: Path,
) -> None:
    path = tmp_path / "desk.db"
    run_id = _suspend_in_another_process(path)
    paid: list[Any] = []
    async with SqliteStore(path) as store:
        agent = _agent(store, paid)
        assert agent.config.store is store  # the checkpoint store is the session store too
        result = await resume_agent_run(agent, run_id, decision="approve")
    assert result.status == "succeeded"
    assert paid == [{"amount": 5}]
    assert message_text(result.messages[-1]) == "done"


async def test_a_memory_checkpoint_store_leaves_the_default_store_alone() -> None:
    agent = _agent(MemoryCheckpointStore(), [])
    assert agent.config.store is None
    mapping = create_agent(
        id="desk", model=MODEL, provider=create_mock_provider(),
        run_state={"checkpoints": MemoryCheckpointStore(), "definition_revision": "v1"},
    )
    assert mapping.config.store is None


async def test_a_resume_over_another_session_store_says_to_pass_the_runs_store(
    tmp_path: Path,
) -> None:
    path = tmp_path / "desk.db"
    run_id = _suspend_in_another_process(path)
    async with SqliteStore(path) as store:
        agent = _agent(store, [], store=MemorySessionStore())
        with pytest.raises(AgentRunStateError, match="pass store=") as caught:
            await resume_agent_run(agent, run_id, decision="approve")
    assert caught.value.code == "ERR_PRISM_AGENT_RUN_STATE"
    assert "must be the one the run was started with" in str(caught.value)
