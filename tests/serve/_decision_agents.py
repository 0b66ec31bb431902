"""The agent registry of the decision-service tests (``--agents _decision_agents:REGISTRY``).

The providers are stateless: a request whose latest user message has no tool result after it
asks for the agent's one tool call, any other request gets the answer ``done``. So an agent built
once (as ``prism serve`` builds its registry) starts and resumes any number of runs. The ``pay``
tool appends each call's arguments to :data:`PAID`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import prism
from prism.providers import ProviderEvent, provider_done, provider_text_delta, provider_tool_call
from prism.types import ProviderRequest

PAID: list[dict[str, Any]] = []
"""The arguments of every ``pay`` call that ran, in order (this process's)."""
MODEL = {"provider": "scripted", "model": "instant"}


class OneCall:
    """Asks for ``name(arguments)`` once per user message, then answers ``done``."""

    id = "scripted"

    def __init__(self, call_id: str, name: str, arguments: dict[str, Any]) -> None:
        self.call = (call_id, name, arguments)

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        roles = [m.role for m in request.messages]
        last_user = max(i for i, role in enumerate(roles) if role == "user")
        if "tool" not in roles[last_user:]:
            yield provider_tool_call(*self.call)
        else:
            yield provider_text_delta("done")
        yield provider_done()


async def _pay(arguments: dict[str, Any], context: prism.ToolExecutionContext) -> dict[str, Any]:
    PAID.append(dict(arguments))
    return {"paid": arguments["amount"]}


PAY = prism.ToolDefinition(
    name="pay",
    description="Pay an amount.",
    execute=_pay,
    needs_approval=True,
    parameters={
        "type": "object",
        "properties": {"amount": {"type": "integer", "minimum": 1}, "note": {"type": "string"}},
        "required": ["amount"],
        "additionalProperties": False,
    },
)


def desk(store: Any) -> prism.Agent:
    """One gated tool: ``pay({"amount": 5})``."""
    return prism.create_agent(
        id="desk",
        model=MODEL,
        provider=OneCall("call_pay", "pay", {"amount": 5}),
        tools=[PAY],
        store=store,
        run_state=prism.RunStateOptions(store, "desk-v1", checkpoint_policy="every-turn"),
    )


def lead(store: Any) -> prism.Agent:
    """lead → payer (an agent tool) → pay (gated): the payer's approval is the lead's to answer."""
    payer = prism.create_agent(
        name="payer",
        model=MODEL,
        provider=OneCall("call_pay", "pay", {"amount": 9}),
        tools=[PAY],
        run_state=prism.RunStateOptions(store, "payer-v1"),
    )
    return prism.create_agent(
        name="lead",
        model=MODEL,
        provider=OneCall("call_payer", "payer", {"input": "pay 9"}),
        tools=[payer.as_tool()],
        store=store,
        run_state=prism.RunStateOptions(store, "lead-v1"),
    )


REGISTRY = {"desk": desk, "lead": lead}
