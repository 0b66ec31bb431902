"""A durable handed-over run counts the target's tool rounds from the switch, on every store
(issue 21, item 15)."""

from __future__ import annotations

from typing import Any

from prism.loops.handoff import handoff_loop
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import create_agent
from prism.runtime.durable import RunStateOptions, resume_agent_run
from prism.types import ModelConfig, ToolDefinition

MODEL = ModelConfig(provider="mock", model="demo")


def _choices(provider: Any) -> list[Any]:
    return [r.options.tool_choice if r.options else None for r in provider.requests]


async def test_resumed_handoff_counts_the_target_s_rounds_from_the_switch_i21_15(
    durable_stores: tuple[Any, Any],
) -> None:
    """Triage spends a round, then hands over to billing (two rounds allowed), whose gated
    refund suspends the run. After the approval billing has used one round of its two: the
    resumed leg still offers it the tools (the switch stored the rounds it happened at)."""
    store, checkpoints = durable_stores
    effects: list[str] = []

    def desk(triage_turns: list[Any], billing_turns: list[Any]) -> tuple[Any, Any]:
        def refund(arguments: dict[str, Any], context: Any) -> Any:
            effects.append(context.tool_call_id)
            return {"refunded": True}

        b_provider = create_mock_provider(turns=billing_turns)
        billing = create_agent(
            model=ModelConfig(provider="mock", model="billing-model"),
            provider=b_provider,
            name="billing",
            tools=[ToolDefinition(name="refund", execute=refund, needs_approval=True)],
            answer_after_tool_rounds=2,
        )
        triage = create_agent(
            model=MODEL,
            provider=create_mock_provider(turns=triage_turns),
            name="triage",
            tools=[ToolDefinition(name="faq", execute=lambda arguments, context: "faq")],
            loop=handoff_loop(billing),
            answer_after_tool_rounds=False,
            store=store,
            run_state=RunStateOptions(checkpoints, "v1"),
        )
        return triage, b_provider

    triage, b_provider = desk(
        [
            [provider_tool_call("f1", "faq", {}), provider_done()],
            [provider_tool_call("t1", "transfer_to_billing", {}), provider_done()],
        ],
        [[provider_tool_call("r1", "refund", {}), provider_done()]],
    )
    suspended = await triage.create_session().run("Refund me")
    assert suspended.status == "suspended" and suspended.run_state is not None
    assert _choices(b_provider) == [None]
    again, b_provider = desk(
        [],
        [
            [provider_tool_call("r2", "refund", {}), provider_done()],
            [provider_text_delta("refunded twice"), provider_done()],
        ],
    )
    approved = await resume_agent_run(again, suspended.run_state, decision="approve")
    assert approved.status == "suspended" and approved.run_state is not None
    assert effects == ["r1"]
    # billing's second round was still allowed: tools offered, not forced
    assert _choices(b_provider) == [None]
    again, b_provider = desk([], [[provider_text_delta("refunded twice"), provider_done()]])
    result = await resume_agent_run(again, approved.run_state, decision="approve")
    assert result.status == "succeeded" and result.stop_reason is None
    assert effects == ["r1", "r2"]
    assert _choices(b_provider) == ["none"]
