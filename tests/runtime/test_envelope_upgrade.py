"""Run-state envelopes of schema version 1 (written before steers, argument hashes, repairs and
shown arguments joined the envelope) and 2 (before child-run links joined it) are upgraded on load
and resume as before."""

from __future__ import annotations

from typing import Any

import pytest

from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.runtime.checkpoints import AGENT_RUN_NAMESPACE, MemoryCheckpointStore
from prism.runtime.durable import RunStateOptions, load_agent_run_state, resume_agent_run
from prism.runtime.durable._run_state import SCHEMA_VERSION
from prism.store import MemorySessionStore
from prism.types import ModelConfig, ToolDefinition

MODEL = ModelConfig(provider="mock", model="v1")


@pytest.mark.parametrize("old_version", [1, 2])
async def test_an_older_envelope_is_upgraded_and_resumes(old_version: int) -> None:
    checkpoints, store, ran = MemoryCheckpointStore(), MemorySessionStore(), []

    def agent(turns: list[Any]) -> Any:
        return create_agent(
            id="desk", model=MODEL, provider=create_mock_provider(turns=turns), store=store,
            tools=[ToolDefinition(name="pay", execute=lambda a, c: ran.append(a) or "ok")],
            run_state=RunStateOptions(checkpoints, "v1", interrupt_before_tool=True),
        )

    session = agent([[provider_tool_call("c1", "pay", {"n": 1}), provider_done()]]).create_session()
    first = await session.run("pay")
    record = await checkpoints.load_checkpoint(namespace=AGENT_RUN_NAMESPACE, key=first.run_id)
    assert record is not None and isinstance(record.value, dict)
    old = dict(record.value)  # what version 1 wrote: none of the version 2 keys
    old["schema_version"] = old_version
    old["pending_calls"] = [
        {k: v for k, v in e.items() if k != "arguments_hash"} for e in old["pending_calls"]
    ]
    interruption = dict(old["interruption"])
    interruption["pending_decisions"] = [
        {k: v for k, v in d.items() if k not in ("tool_name", "arguments", "arguments_truncated")}
        for d in interruption["pending_decisions"]
    ]
    old["interruption"] = interruption
    await checkpoints.save_checkpoint(
        namespace=AGENT_RUN_NAMESPACE, key=first.run_id, value=old,
        version=record.version + 1, expected_version=record.version,
    )
    loaded = await load_agent_run_state(checkpoints, run_id=first.run_id)
    assert SCHEMA_VERSION == 3 and loaded.state["schema_version"] == SCHEMA_VERSION
    done = await resume_agent_run(agent([[provider_text_delta("paid"), provider_done()]]),
                                  loaded, decision="approve")
    assert done.status == "succeeded" and ran == [{"n": 1}]
    assert done.run_state is not None and done.run_state.schema_version == SCHEMA_VERSION
