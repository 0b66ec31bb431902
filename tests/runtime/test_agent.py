"""``create_agent`` validation and the session factory (RUN-1..RUN-3)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from prism.assembly import Skill, SystemPromptContribution
from prism.errors import PrismConfigError
from prism.loops.contracts import SingleShotLoopOptions
from prism.providers.mock import create_mock_provider
from prism.retry import RetryOptions
from prism.runtime.agent import Agent, AgentConfig, create_agent
from prism.runtime.session import AgentSession
from prism.store import MemorySessionStore
from prism.tools import ToolFilter, ToolRegistry
from prism.types import ModelConfig, ProviderRequestOptions, ToolDefinition

MODEL = ModelConfig(provider="mock", model="m")


def tool(name: str) -> ToolDefinition:
    return ToolDefinition(name=name, execute=lambda a, c: None)


def test_create_agent_freezes_a_converted_config_run_1() -> None:
    agent = create_agent(
        model={"provider": "mock", "model": "m"},
        tools=[tool("a")],
        provider_options={"headers": {"x": "1"}},
        tool_filter=ToolFilter(deny=("b",)),
        metadata={"k": "v"},
        retry={"max_attempts": 2},
    )
    config = agent.config
    assert isinstance(agent, Agent) and isinstance(config, AgentConfig)
    assert config.model == MODEL
    assert isinstance(config.tools, ToolRegistry) and [t.name for t in config.tools] == ["a"]
    assert config.provider_options == ProviderRequestOptions(headers={"x": "1"})
    assert config.tool_filter == (ToolFilter(deny=("b",)),)
    assert config.retry == RetryOptions(max_attempts=2)
    with pytest.raises(TypeError):
        config.metadata["k"] = "w"  # type: ignore[index]
    with pytest.raises(AttributeError):
        config.name = "x"  # type: ignore[misc]


@pytest.mark.parametrize("model", [None, "mock/m", 42])
def test_model_is_required_run_1(model: Any) -> None:
    with pytest.raises(PrismConfigError):
        create_agent(model=model)


@pytest.mark.parametrize(
    "options",
    [
        {"limits": {"max_turns": 0}},
        {"limits": {"max_turns": True}},
        {"limits": {"bogus": 1}},
        {"retry": {"max_attempts": 0}},
        {"retry": {"jitter": 2}},
        {"loop": {"strategy": "nope"}},
        {"loop": {"strategy": "single-shot", "extra": 1}},
        {"loop": {"strategy": "generate-validate-revise", "validator": "not callable"}},
        {"tools": [tool("a"), tool("a")]},
        {"tool_filter": "deny-all"},
        {"tool_validator": "strict"},
        {"tool_abort_grace_ms": -1},
        {"tool_abort_grace_ms": math.inf},
        {"tool_abort_grace_ms": True},
        {"skills": [Skill(name="s"), Skill(name="s")]},
        {"system_prompt": ["not a contribution"]},
        {"compaction": {"threshold_entries": 0}},
    ],
)
def test_invalid_options_raise_at_call_time_run_1(options: dict[str, Any]) -> None:
    with pytest.raises(PrismConfigError):
        create_agent(model=MODEL, **options)


def test_valid_options_are_accepted_run_1_run_2() -> None:
    registry = ToolRegistry([tool("a")])
    agent = create_agent(
        model=MODEL,
        tools=registry,
        loop=SingleShotLoopOptions(tool_concurrency=2),
        tool_validator=False,
        tool_abort_grace_ms=0,
        skills=[Skill(name="s", instructions="x")],
        system_prompt=[SystemPromptContribution(id="p", text="t")],
        retry=False,
        compaction=False,
    )
    assert agent.config.tools is registry
    assert agent.config.tool_validator is False and agent.config.retry is False


def test_create_agent_performs_no_io_and_accepts_a_provider_run_1() -> None:
    provider = create_mock_provider()
    agent = create_agent(model=MODEL, provider=provider, id="a1", name="Agent")
    assert agent.config.provider is provider
    assert provider.call_count == 0
    assert agent.id == "a1" and agent.name == "Agent"


def test_sessions_get_generated_ids_and_their_store_run_3() -> None:
    shared = MemorySessionStore()
    agent = create_agent(model=MODEL, store=shared)
    one, two = agent.create_session(), agent.create_session()
    assert isinstance(one, AgentSession)
    assert one.id.startswith("session_") and len(one.id) == len("session_") + 32
    assert one.id != two.id
    assert one.store is shared
    own = MemorySessionStore()
    assert agent.create_session("s", store=own).store is own
    private = create_agent(model=MODEL).create_session()
    assert isinstance(private.store, MemorySessionStore)
    assert private.store is not create_agent(model=MODEL).create_session().store


def test_a_session_created_with_a_leaf_starts_from_it_run_3() -> None:
    session = create_agent(model=MODEL).create_session("s", leaf_id="entry_1")
    assert session.leaf_id == "entry_1"
    assert not session.is_running


@pytest.mark.parametrize(
    "schema", [{"type": "nonsense"}, {"type": "object", "required": "a"}, {"minLength": -1}]
)
def test_create_agent_rejects_an_invalid_tool_schema_run_1(schema: dict[str, Any]) -> None:
    """RUN-1: an invalid ``parameters`` JSON Schema fails create_agent, naming the tool."""
    tool = ToolDefinition(name="broken_tool", execute=lambda a, c: None, parameters=schema)
    with pytest.raises(PrismConfigError, match="broken_tool"):
        create_agent(model={"provider": "mock", "model": "m"}, tools=[tool])


@pytest.mark.parametrize("name", ["bad name!", "", "x" * 65, "dotted.name"])
def test_create_agent_rejects_an_invalid_tool_name_run_1(name: str) -> None:
    """RUN-1: tool names must match ^[a-zA-Z0-9_-]{1,64}$ (what providers accept)."""
    tool = ToolDefinition(name=name, execute=lambda a, c: None)
    with pytest.raises(PrismConfigError, match="tool name"):
        create_agent(model={"provider": "mock", "model": "m"}, tools=[tool])


def test_tool_checks_run_once_per_definition_run_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """RUN-1: repeated create_agent calls with the same ToolDefinition objects check them once."""
    import prism.tools.checks as checks_module
    tool = ToolDefinition(
        name="good-tool_1",
        execute=lambda a, c: None,
        parameters={"type": "object", "properties": {"a": {"type": "integer"}}},
    )
    calls: list[str] = []
    real = checks_module.fast_schema_checker

    def counting(schema: Any) -> Any:
        calls.append(tool.name)
        return real(schema)

    monkeypatch.setattr(checks_module, "fast_schema_checker", counting)
    for _ in range(3):
        create_agent(model={"provider": "mock", "model": "m"}, tools=[tool])
    assert calls == ["good-tool_1"]
