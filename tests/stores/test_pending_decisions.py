"""``prism.list_pending_decisions``: the tool approvals suspended runs wait for, on the memory,
SQLite and PostgreSQL stores (issue 21, item 21) — the run, agent, tool, call id, the arguments
as the approval shows them (the ones the tool will run with: defaults filled, secrets redacted),
when the run started waiting, and for a child run's call the chain of agent-tool calls from the
run an operator answers down to the child (two levels deep); filters and typed errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

import prism
from prism.errors import PrismConfigError
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.durable import PendingDecisionRecord, SubagentLink, list_pending_decisions
from prism.types import ModelConfig

MODEL = ModelConfig(provider="mock", model="pending")
SECRET = "sk-live-pending-0123456789"


@prism.tool(needs_approval=True)
def pay(invoice: int, currency: str = "EUR", note: str = "") -> str:
    """Pay an invoice."""
    return f"paid {invoice} {currency}"


def _options(checkpoints: Any) -> prism.RunStateOptions:
    return prism.RunStateOptions(checkpoints, "v1")


def _agent(stores: tuple[Any, Any], name: str, turns: list[Any], tools: list[Any]) -> prism.Agent:
    sessions, checkpoints = stores
    return prism.create_agent(
        name=name, model=MODEL, store=sessions, tools=tools,
        provider=create_mock_provider(turns=turns),
        redactor=prism.create_secret_redactor([SECRET]),
        run_state=_options(checkpoints),
    )


def _call(call_id: str, tool: str, arguments: dict[str, Any]) -> list[Any]:
    return [provider_tool_call(call_id, tool, arguments), provider_done()]


async def test_a_suspended_runs_approval_is_listed_with_its_arguments_i21_a(
    durable_stores: tuple[Any, Any],
) -> None:
    _, checkpoints = durable_stores
    agent = _agent(durable_stores, "desk", [_call("c1", "pay", {"invoice": 7, "note": SECRET})],
                   [pay])
    session = agent.create_session()
    result = await session.run("pay invoice 7")
    assert result.status == "suspended" and result.interruption is not None
    (pending,) = result.interruption.pending_decisions

    (item,) = await prism.list_pending_decisions(checkpoints)
    assert isinstance(item, PendingDecisionRecord)
    assert (item.run_id, item.session_id, item.agent_id) == (result.run_id, session.id, "desk")
    assert (item.tool_name, item.tool_call_id, item.approval_id) == ("pay", "c1", pending.approval_id)
    # the arguments the tool will run with (the default filled in), the secret redacted
    assert json.loads(item.arguments or "") == {"invoice": 7, "currency": "EUR", "note": "[REDACTED]"}
    assert SECRET not in json.dumps(item.to_dict()) and not item.arguments_truncated
    assert item.chain == () and item.calling_agent == "desk" and item.calling_run_id == item.run_id
    stored = await checkpoints.load_checkpoint(namespace="prism.agent-run", key=result.run_id)
    assert item.waiting_since == stored.updated_at and item.version == stored.version
    assert PendingDecisionRecord.from_dict(item.to_dict()) == item

    # answered: nothing is pending any more
    done = await prism.resume_agent_run(
        _agent(durable_stores, "desk", [[provider_text_delta("paid"), provider_done()]], [pay]),
        item.run_id,
        decisions=[prism.RunDecision(item.approval_id, "allow_once")],
        expected_version=item.version,
    )
    assert done.status == "succeeded"
    assert await prism.list_pending_decisions(checkpoints) == []


async def test_a_grandchild_runs_approval_is_listed_once_on_the_run_to_answer_i21_a(
    durable_stores: tuple[Any, Any],
) -> None:
    """lead → clerk (agent tool) → payer (agent tool) → pay (gated): one record, on the lead's
    run, whose chain names the clerk's and the payer's runs; the suspended clerk and payer runs
    are not listed again."""
    _, checkpoints = durable_stores
    payer = _agent(durable_stores, "payer", [_call("p1", "pay", {"invoice": 9})], [pay])
    clerk = _agent(durable_stores, "clerk", [_call("k1", "payer", {"input": "pay 9"})],
                   [payer.as_tool()])
    lead = _agent(durable_stores, "lead", [_call("l1", "clerk", {"input": "have 9 paid"})],
                  [clerk.as_tool()])
    other = _agent(durable_stores, "desk", [_call("c1", "pay", {"invoice": 1})], [pay])
    other_session = other.create_session()
    first = await other_session.run("pay 1")
    session = lead.create_session()
    result = await session.run("have invoice 9 paid")
    assert result.status == "suspended" and first.status == "suspended"

    records = await list_pending_decisions(checkpoints)
    assert [r.run_id for r in records] == [result.run_id, first.run_id]  # newest first
    item = records[0]
    assert (item.agent_id, item.tool_name, item.tool_call_id) == ("lead", "pay", "p1")
    assert json.loads(item.arguments or "") == {"invoice": 9, "currency": "EUR", "note": ""}
    clerk_link, payer_link = item.chain
    assert isinstance(clerk_link, SubagentLink)
    assert (clerk_link.tool_call_id, clerk_link.agent) == ("l1", "clerk")
    assert clerk_link.session_id == f"{result.run_id}.l1"
    assert (payer_link.tool_call_id, payer_link.agent) == ("k1", "payer")
    assert payer_link.session_id == f"{clerk_link.run_id}.k1"
    assert item.calling_agent == "payer" and item.calling_run_id == payer_link.run_id
    payer_record = await checkpoints.load_checkpoint(
        namespace="prism.agent-run", key=payer_link.run_id
    )
    assert payer_record.value["status"] == "suspended"
    assert item.waiting_since == payer_record.updated_at  # when the payer began to wait

    # filters: a session, a run, a limit; a child run answers nothing itself
    assert await list_pending_decisions(checkpoints, session_id=session.id) == [item]
    assert await list_pending_decisions(checkpoints, run_id=result.run_id) == [item]
    assert await list_pending_decisions(checkpoints, run_id=payer_link.run_id) == []
    assert await list_pending_decisions(checkpoints, session_id=payer_link.session_id) == []
    assert await list_pending_decisions(checkpoints, limit=1) == [item]
    assert await list_pending_decisions(checkpoints, run_id="run_missing") == []

    # the decision given on the lead's run reaches the payer's call
    done = await prism.resume_agent_run(
        _agent(durable_stores, "lead", [[provider_text_delta("done"), provider_done()]],
               [_agent(durable_stores, "clerk",
                       [[provider_text_delta("clerk done"), provider_done()]],
                       [_agent(durable_stores, "payer",
                               [[provider_text_delta("payer done"), provider_done()]],
                               [pay]).as_tool()]).as_tool()]),
        item.run_id,
        decisions=[prism.RunDecision(item.approval_id, "allow_once")],
    )
    assert done.status == "succeeded"
    assert [r.run_id for r in await list_pending_decisions(checkpoints)] == [first.run_id]


async def test_bad_arguments_and_a_store_without_the_index_are_refused_i21_a() -> None:
    class NoIndex:
        async def save_checkpoint(self, **kw: Any) -> Any: ...
        async def load_checkpoint(self, **kw: Any) -> Any: ...

    with pytest.raises(PrismConfigError, match="cannot list runs"):
        await list_pending_decisions(NoIndex())  # type: ignore[arg-type]
    store = prism.testing.MemoryCheckpointStore()
    for bad in (0, -1, True, "5"):
        with pytest.raises(PrismConfigError, match="limit"):
            await list_pending_decisions(store, limit=bad)  # type: ignore[arg-type]
    with pytest.raises(PrismConfigError, match="session_id"):
        await list_pending_decisions(store, session_id=3)  # type: ignore[arg-type]
    assert await list_pending_decisions(store) == []
    assert prism.list_pending_decisions is list_pending_decisions
