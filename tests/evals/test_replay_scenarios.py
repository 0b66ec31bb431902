"""Record → replay of the runs that are more than tool rounds, on SQLite and PostgreSQL: an
approval-gated durable run over two legs, a handoff, an agent-tool child run (a cassette per
child, keyed by the calling call), a generate-validate-revise run with a revision, a run whose
primary provider failed over to its fallback, and a run whose first attempt was retried. Each
replay of the unchanged agent passes and reproduces the stored event stream (ids and times
aside)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import prism
from prism.evals import (
    Case,
    Cassette,
    Dataset,
    EvalReport,
    capture_run,
    event_stream_diff,
    run_eval,
)
from prism.ledger import MemoryRunLedger
from prism.loops.handoff import handoff_loop
from prism.providers.chain import fallback
from prism.providers.mock import MockScriptItem
from prism.retry import RetryOptions
from prism.testing import (
    MemoryCheckpointStore,
    create_mock_provider,
    provider_done,
    provider_error,
    provider_text_delta,
    provider_tool_call,
)
from prism.types import ErrorInfo, RunResult, Usage

MODEL = {"provider": "mock", "model": "scripted"}


def usage(tokens: int) -> Usage:
    return Usage(input_tokens=tokens, output_tokens=4, total_tokens=tokens + 4)


def scripted(turns: Sequence[Sequence[MockScriptItem]] = (), id: str = "mock") -> Any:
    return create_mock_provider(turns=[list(t) for t in turns], id=id)


async def capture(store: Any, result: RunResult) -> Case:
    captured = await capture_run(store, result.run_id)
    assert captured.warnings == (), captured.warnings
    return captured.case


async def replay_and_compare(
    store: Any, recorded: RunResult, agent: prism.Agent, case: Case
) -> EvalReport:
    """Replay ``case`` on ``agent``; assert it passed and that its events equal the recording's
    (ids and times aside)."""
    ledger = MemoryRunLedger()
    report = await run_eval(
        agent, Dataset(name="scenario", cases=[case]), replay=True, options={"run_ledger": ledger}
    )
    assert report.passed, report.format_text()
    run_id = report.cases[0].attempts[0].run_id
    before = [r.event.to_dict() for r in await store.list_events(recorded.session_id, run_id=recorded.run_id)]
    after = [r.event.to_dict() for r in ledger.events if r.run_id == run_id]
    assert event_stream_diff(before, after) is None
    return report


# --------------------------------------------------------------------------- durable, two legs


@prism.tool(needs_approval=True)
def refund(order: int) -> dict[str, int]:
    """Refund an order."""
    return {"refunded": order}


def refund_desk(turns: Sequence[Sequence[MockScriptItem]], store: Any, checkpoints: Any) -> prism.Agent:
    return prism.create_agent(
        id="refund-desk",
        model=MODEL,
        provider=scripted(turns),
        tools=[refund],
        store=store,
        run_ledger=store,
        run_state=prism.RunStateOptions(checkpoints, "v1"),
    )


async def test_an_approval_gated_durable_run_over_two_legs(store: Any) -> None:
    first = refund_desk(
        [[provider_tool_call("r1", "refund", {"order": 42}), provider_done(usage(30))]],
        store,
        store,
    )
    suspended = await first.create_session().run("Refund order 42.")
    assert suspended.status == "suspended" and suspended.interruption and suspended.run_state
    pending = suspended.interruption.pending_decisions[0]
    second = refund_desk(
        [[provider_text_delta("Order 42 is refunded."), provider_done(usage(50))]], store, store
    )
    done = await prism.resume_agent_run(
        second.create_session(suspended.session_id),
        suspended.run_state,
        decisions=[{"approval_id": pending.approval_id, "outcome": "allow_once"}],
    )
    assert done.status == "succeeded"

    case = await capture(store, done)
    cassette = Cassette.from_json(case.cassette)
    assert [dict(a) for a in cassette.approvals] == [{"tool_call_id": "r1", "outcome": "allow_once"}]
    assert case.expected_output == "Order 42 is refunded."
    replayed = refund_desk((), None, MemoryCheckpointStore())
    report = await replay_and_compare(store, done, replayed, case)
    assert report.cases[0].attempts[0].status == "succeeded"


async def test_a_rejected_approval_is_replayed_as_a_rejection(store: Any) -> None:
    first = refund_desk(
        [[provider_tool_call("r1", "refund", {"order": 7}), provider_done(usage(30))]], store, store
    )
    suspended = await first.create_session().run("Refund order 7.")
    assert suspended.interruption and suspended.run_state
    pending = suspended.interruption.pending_decisions[0]
    second = refund_desk(
        [[provider_text_delta("The refund was not approved."), provider_done(usage(50))]],
        store,
        store,
    )
    done = await prism.resume_agent_run(
        second.create_session(suspended.session_id),
        suspended.run_state,
        decisions=[
            {"approval_id": pending.approval_id, "outcome": "reject_once", "reason": "over limit"}
        ],
    )
    case = await capture(store, done)
    cassette = Cassette.from_json(case.cassette)
    assert cassette.approvals[0]["outcome"] == "reject_once"
    await replay_and_compare(store, done, refund_desk((), None, MemoryCheckpointStore()), case)


# --------------------------------------------------------------------------- handoff


def triage(store: Any, triage_turns: Sequence[Any] = (), billing_turns: Sequence[Any] = ()) -> prism.Agent:
    billing = prism.create_agent(
        name="billing",
        model=MODEL,
        provider=scripted(billing_turns, id="billing-mock"),
        instructions="You handle invoices.",
    )
    return prism.create_agent(
        name="triage",
        model=MODEL,
        provider=scripted(triage_turns),
        instructions="Route the customer.",
        loop=handoff_loop(billing),
        store=store,
        run_ledger=store,
    )


async def test_a_handoff(store: Any) -> None:
    agent = triage(
        store,
        [[provider_tool_call("h1", "transfer_to_billing", {}), provider_done(usage(20))]],
        [[provider_text_delta("Your invoice is paid."), provider_done(usage(40))]],
    )
    result = await agent.create_session().run("Is my invoice paid?")
    assert result.status == "succeeded" and result.text == "Your invoice is paid."
    case = await capture(store, result)
    cassette = Cassette.from_json(case.cassette)
    assert [a.provider_id for a in cassette.attempts] == ["mock", "billing-mock"]
    assert len(cassette.heads) == 2  # the billing agent's prompt and tools
    await replay_and_compare(store, result, triage(None), case)


# --------------------------------------------------------------------------- agent tools


def researcher(turns: Sequence[Any] = (), ledger: Any = None) -> prism.Agent:
    return prism.create_agent(
        name="researcher",
        model=MODEL,
        provider=scripted(turns, id="researcher-mock"),
        instructions="Answer from the catalogue.",
        run_ledger=ledger,  # a child run writes its request rows to its own agent's ledger
    )


def lead(store: Any, turns: Sequence[Any] = (), child_turns: Sequence[Any] = ()) -> prism.Agent:
    return prism.create_agent(
        name="lead",
        model=MODEL,
        provider=scripted(turns),
        tools=[researcher(child_turns, store).as_tool(description="Ask the researcher.")],
        store=store,
        run_ledger=store,
    )


async def test_an_agent_tool_child_run_has_a_cassette_keyed_by_the_call(store: Any) -> None:
    agent = lead(
        store,
        [
            [provider_tool_call("a1", "researcher", {"input": "Tent weight?"}), provider_done(usage(20))],
            [provider_text_delta("It weighs 1.2 kg."), provider_done(usage(60))],
        ],
        [[provider_text_delta("1.2 kg"), provider_done(usage(10))]],
    )
    result = await agent.create_session().run("How heavy is the tent?")
    assert result.status == "succeeded"
    case = await capture(store, result)
    cassette = Cassette.from_json(case.cassette)
    assert list(cassette.children) == ["a1"]
    child = cassette.children["a1"]
    assert child.session_id == f"{result.run_id}.a1"
    assert [a.provider_id for a in child.attempts] == ["researcher-mock"]
    await replay_and_compare(store, result, lead(None), case)

    # the child's own drift is named, through the parent's case
    changed = prism.create_agent(
        name="lead",
        model=MODEL,
        provider=scripted(),
        tools=[
            prism.create_agent(
                name="researcher",
                model=MODEL,
                provider=scripted(id="researcher-mock"),
                instructions="Answer from the new catalogue.",
            ).as_tool(description="Ask the researcher.")
        ],
    )
    report = await run_eval(changed, Dataset(cases=[case]), replay=True)
    replay_reason = {s.evaluator: s.reason for s in report.cases[0].attempts[0].scores}["replay"]
    assert replay_reason == (
        "child run of call a1: turn 1: system prompt changed at line 1: "
        "'Answer from the catalogue.' → 'Answer from the new catalogue.'"
    )


# --------------------------------------------------------------------------- generate → validate → revise

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def author(store: Any, turns: Sequence[Any] = ()) -> prism.Agent:
    from prism.artifacts import json_schema_artifact

    return prism.create_agent(
        name="author",
        model=MODEL,
        provider=scripted(turns),
        loop=prism.GenerateValidateReviseLoopOptions(
            **json_schema_artifact(SCHEMA), max_revisions=2
        ),
        store=store,
        run_ledger=store,
    )


async def test_a_generate_validate_revise_run_with_a_revision(store: Any) -> None:
    agent = author(
        store,
        [
            [provider_text_delta('{"name": "Ada", "age": "old"}'), provider_done(usage(30))],
            [provider_text_delta('{"name": "Ada", "age": 36}'), provider_done(usage(45))],
        ],
    )
    result = await agent.create_session().run("Invent a person.")
    assert result.status == "succeeded" and result.artifact == {"name": "Ada", "age": 36}
    case = await capture(store, result)
    assert case.expected_artifact == {"name": "Ada", "age": 36}
    assert len(Cassette.from_json(case.cassette).attempts) == 2
    await replay_and_compare(store, result, author(None), case)


# --------------------------------------------------------------------------- fallback and retry

BACKUP = {"provider": "mock", "model": "backup"}
NO_WAIT = RetryOptions(max_attempts=2, base_delay_ms=0, jitter=0)


def with_fallback(store: Any, primary: Sequence[Any] = (), backup: Sequence[Any] = ()) -> prism.Agent:
    return prism.create_agent(
        name="resilient",
        model=MODEL,
        provider=fallback(scripted(primary, id="primary"), (scripted(backup, id="backup"), BACKUP)),
        retry=NO_WAIT,
        store=store,
        run_ledger=store,
    )


async def test_a_run_that_fell_back_to_its_second_provider(store: Any) -> None:
    down = [provider_error(ErrorInfo(code=503, message="overloaded"))]
    agent = with_fallback(
        store, [down, down], [[provider_text_delta("From the backup."), provider_done(usage(9))]]
    )
    result = await agent.create_session().run("Hello?")
    assert result.status == "succeeded" and result.text == "From the backup."
    case = await capture(store, result)
    cassette = Cassette.from_json(case.cassette)
    assert [(a.provider_id, a.model, a.attempt) for a in cassette.attempts] == [
        ("primary", "scripted", 1),
        ("primary", "scripted", 2),
        ("backup", "backup", 1),
    ]
    await replay_and_compare(store, result, with_fallback(None), case)
    # an agent without the fallback cannot reproduce it: the backup's turn is refused
    plain = prism.create_agent(name="resilient", model=MODEL, provider=scripted(id="primary"), retry=NO_WAIT)
    report = await run_eval(plain, Dataset(cases=[case]), replay=True)
    assert not report.passed


async def test_a_run_whose_first_attempt_was_retried(store: Any) -> None:
    agent = prism.create_agent(
        name="patient",
        model=MODEL,
        provider=scripted(
            [
                [provider_error(ErrorInfo(code="rate_limit", message="slow down"))],
                [provider_text_delta("Here you go."), provider_done(usage(12))],
            ]
        ),
        retry=NO_WAIT,
        store=store,
        run_ledger=store,
    )
    result = await agent.create_session().run("Hello?")
    assert result.status == "succeeded"
    case = await capture(store, result)
    assert [(a.turn, a.attempt) for a in Cassette.from_json(case.cassette).attempts] == [(1, 1), (1, 2)]
    replayed = prism.create_agent(name="patient", model=MODEL, provider=scripted(), retry=NO_WAIT)
    await replay_and_compare(store, result, replayed, case)
