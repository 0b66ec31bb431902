"""Loop resolution and tool concurrency (LOOP-1..LOOP-5)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from prism.errors import PrismConfigError
from prism.loops import resolve_loop, resolve_tool_concurrency, single_shot_loop
from prism.loops.contracts import (
    ArtifactValidation,
    GenerateValidateReviseLoopOptions,
    SingleShotLoopOptions,
)
from prism.types import Usage


def validator(value: Any, ctx: Any) -> ArtifactValidation:
    return ArtifactValidation(ok=True)


class Custom:
    name = "custom"

    async def run(self, ctx: Any) -> Usage | None:
        return None


def test_none_resolves_to_the_shared_single_shot_loop_loop_1() -> None:
    assert resolve_loop(None, None) is single_shot_loop


def test_single_shot_options_resolve_to_the_same_object_every_time_loop_1() -> None:
    assert resolve_loop(SingleShotLoopOptions(tool_concurrency=4), None) is single_shot_loop
    assert resolve_loop({"strategy": "single-shot"}, None) is single_shot_loop


def test_gvr_options_build_a_fresh_strategy_per_call_loop_1() -> None:
    options = GenerateValidateReviseLoopOptions(validator=validator, max_revisions=2)
    first = resolve_loop(options, None)
    second = resolve_loop(options, None)
    assert first.name == "generate-validate-revise"
    assert first is not second
    assert getattr(first, "revision", None) == "1"


def test_gvr_mapping_is_converted_loop_1() -> None:
    loop = resolve_loop({"strategy": "generate-validate-revise", "validator": validator}, None)
    assert loop.name == "generate-validate-revise"


def test_unknown_strategy_is_rejected_with_its_name_loop_1() -> None:
    with pytest.raises(PrismConfigError, match="unknown agent loop strategy: zig-zag"):
        resolve_loop({"strategy": "zig-zag"}, None)


def test_unknown_mapping_key_is_rejected_loop_1() -> None:
    with pytest.raises(PrismConfigError):
        resolve_loop({"strategy": "single-shot", "toolConcurrency": 2}, None)


def test_mapping_without_strategy_is_rejected_loop_1() -> None:
    with pytest.raises(PrismConfigError):
        resolve_loop({"tool_concurrency": 2}, None)


def test_custom_instances_pass_through_unchanged_loop_1_loop_6() -> None:
    custom = Custom()
    assert resolve_loop(custom, SingleShotLoopOptions(tool_concurrency=3)) is custom


def test_a_strategy_class_asks_for_an_instance_loop_1() -> None:
    with pytest.raises(PrismConfigError, match="instance"):
        resolve_loop(Custom, None)


@pytest.mark.parametrize("value", [42, "single-shot", object()])
def test_anything_else_is_rejected_loop_1(value: Any) -> None:
    with pytest.raises(PrismConfigError):
        resolve_loop(value, None)


def test_run_loop_wins_over_agent_loop_loop_1_loop_5() -> None:
    run = {"strategy": "generate-validate-revise", "validator": validator}
    agent = SingleShotLoopOptions(tool_concurrency=4)
    assert resolve_loop(run, agent).name == "generate-validate-revise"
    assert resolve_tool_concurrency(run, agent) == 1
    assert resolve_loop(None, agent) is single_shot_loop
    assert resolve_tool_concurrency(None, agent) == 4
    assert resolve_tool_concurrency(None, None) == 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (4, 4),
        (2.9, 2),
        (1, 1),
        (0, 1),
        (-3, 1),
        (math.inf, 1),
        (math.nan, 1),
        ("4", 1),
        (True, 1),
        (None, 1),
    ],
)
def test_tool_concurrency_is_floored_and_defaults_to_one_loop_3(value: Any, expected: int) -> None:
    assert resolve_tool_concurrency({"strategy": "single-shot", "tool_concurrency": value}, None) == expected


def test_strategy_instances_always_yield_one_loop_3() -> None:
    assert resolve_tool_concurrency(single_shot_loop, None) == 1
    assert resolve_tool_concurrency(Custom(), None) == 1
    assert resolve_tool_concurrency({"strategy": "single-shot"}, None) == 1
    assert resolve_tool_concurrency(SingleShotLoopOptions(tool_concurrency=3), None) == 3


class _SyncLoop:
    name = "sync-loop"

    def run(self, ctx: Any) -> None:
        return None


class _SyncReturningAwaitable:
    name = "returns-coroutine"

    def run(self, ctx: Any) -> Any:
        return Custom().run(ctx)


async def test_a_custom_loop_whose_run_is_not_async_fails_with_a_config_error_loop_1() -> None:
    """LOOP-1: a custom loop's ``run(ctx)`` must return an awaitable; a plain function returning
    ``None`` fails the run with ``PrismConfigError`` naming the loop and the returned type."""
    from prism.errors import AgentRunError
    from prism.providers.base import provider_done, provider_text_delta
    from prism.providers.mock import create_mock_provider
    from prism.runtime.agent import create_agent

    provider = create_mock_provider(events=[provider_text_delta("x"), provider_done()])
    agent = create_agent(model={"provider": "mock", "model": "m"}, provider=provider)
    with pytest.raises(AgentRunError) as info:
        await agent.create_session().run("hi", loop=_SyncLoop())
    assert isinstance(info.value.__cause__, PrismConfigError)
    error = info.value.result.error
    assert error is not None and error.code == "ERR_PRISM_CONFIG"
    assert error.message == "custom loop sync-loop: run(ctx) must be async (returned NoneType)"
    # a plain function returning an awaitable is fine
    result = await agent.create_session().run("hi", loop=_SyncReturningAwaitable())
    assert result.status == "succeeded"
