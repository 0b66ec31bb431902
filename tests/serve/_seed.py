"""Real runs on a real store, for the inspector's tests and screenshots.

Every run here goes through the runtime (scripted mock provider, real tools, real durable
runs, real ledger rows on the store): a tool round with cost, parallel tool calls, a retry
that falls back to a second provider, an XSS probe in a message, a tool argument and a tool
result, a handoff with thinking, an agent tool's child run, a run that waits for approval
(directly and through a sub-agent), a failed run and a run without a ledger.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import prism
from prism.errors import AgentRunError
from prism.loops.handoff import handoff_loop
from prism.providers import fallback
from prism.providers.base import (
    provider_done,
    provider_error,
    provider_text_delta,
    provider_thinking_delta,
    provider_tool_call,
)
from prism.providers.mock import create_mock_provider
from prism.retry import RetryOptions
from prism.types import ErrorInfo, ModelConfig, Usage

MODEL = ModelConfig(provider="mock", model="demo-large")
BACKUP = ModelConfig(provider="mock", model="demo-small")
PROBE = "<script>window.__xss=1</script>"
"""Markup a model or a tool might produce; the pages must show it as text."""
SECRET = "sk-live-serve-0123456789abcdef"
NO_WAIT = RetryOptions(max_attempts=2, base_delay_ms=1, jitter=0)


@dataclass
class Seeded:
    """The ids of the seeded runs."""

    simple: Any = None
    parallel: Any = None
    fallback: Any = None
    probe: Any = None
    handoff: Any = None
    parent: Any = None
    child_run_id: str | None = None
    waiting: Any = None
    waiting_child: Any = None
    failed_run_id: str | None = None
    failed_session_id: str | None = None
    no_ledger: Any = None
    sessions: list[str] = field(default_factory=list)


@prism.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@prism.tool
async def fetch_page(url: str) -> dict[str, Any]:
    """Fetch a web page (scripted: waits a little, returns a fixed body)."""
    await asyncio.sleep(0.06)
    return {"url": url, "status": 200, "title": f"Page at {url}"}


@prism.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return f"echo: {text} {PROBE}"


@prism.tool(needs_approval=True)
def pay(invoice: int, currency: str = "EUR", note: str = "") -> str:
    """Pay an invoice."""
    return f"paid {invoice} {currency}"


def _agent(store: Any, turns: list[Any], *, name: str = "assistant", **options: Any) -> Any:
    options.setdefault("run_ledger", store)
    return prism.create_agent(
        name=name,
        model=options.pop("model", MODEL),
        provider=options.pop("provider", None) or create_mock_provider(turns=turns),
        store=store,
        **options,
    )


def _durable(
    store: Any, turns: list[Any], *, name: str, tools: list[Any], policy: str = "on-suspend",
    **options: Any,
) -> Any:
    return _agent(
        store,
        turns,
        name=name,
        tools=tools,
        redactor=prism.create_secret_redactor([SECRET]),
        run_state=prism.RunStateOptions(store, "v1", checkpoint_policy=policy),
        **options,
    )


def _call(call_id: str, tool: str, arguments: dict[str, Any]) -> list[Any]:
    return [provider_tool_call(call_id, tool, arguments), provider_done()]


def usage(i: int, o: int, cost: float | None = None) -> Usage:
    return Usage(input_tokens=i, output_tokens=o, cost=cost, currency="USD" if cost else None)


async def seed(store: Any) -> Seeded:
    """Run every scenario on ``store`` and return their ids."""
    out = Seeded()

    # 1. a tool round, then the answer; cost reported
    agent = _agent(
        store,
        [
            [provider_tool_call("c1", "add", {"a": 17, "b": 23}), provider_done(usage(120, 14, 0.0021))],
            [provider_text_delta("17 + 23 = 40"), provider_done(usage(150, 9, 0.0017), "stop")],
        ],
        tools=[add],
    )
    session = agent.create_session()
    out.simple = await session.run("What is 17 + 23? Use the calculator.")

    # 2. two tool calls in parallel, then the answer (no cost reported)
    agent = _agent(
        store,
        [
            [
                provider_tool_call("p1", "fetch_page", {"url": "https://example.org/a"}),
                provider_tool_call("p2", "fetch_page", {"url": "https://example.org/b"}),
                provider_done(usage(300, 40)),
            ],
            [provider_text_delta("Both pages are up."), provider_done(usage(420, 12), "stop")],
        ],
        tools=[fetch_page],
        name="researcher",
        loop={"strategy": "single-shot", "tool_concurrency": 4},
    )
    out.parallel = await agent.create_session().run("Are example.org/a and /b up?")

    # 3. the primary fails (retried), the backup serves the turn
    primary = create_mock_provider(
        turns=[
            [provider_error(ErrorInfo(message="upstream overloaded", code=503))],
            [provider_error(ErrorInfo(message="upstream overloaded", code=503))],
        ]
    )
    backup = create_mock_provider(
        turns=[[provider_text_delta("answered by the backup"), provider_done(usage(80, 6, 0.0004))]]
    )
    agent = _agent(
        store, [], provider=fallback(primary, (backup, BACKUP)), retry=NO_WAIT, name="resilient"
    )
    out.fallback = await agent.create_session().run("Say hello")

    # 4. markup in a message, a tool argument and a tool result
    agent = _agent(
        store,
        [
            _call("x1", "echo", {"text": PROBE}),
            [provider_text_delta(f"The tool said {PROBE}"), provider_done(usage(60, 8))],
        ],
        tools=[echo],
        name="prober",
    )
    out.probe = await agent.create_session().run(f"Repeat this: {PROBE}")

    # 5. thinking, then a handoff to another agent
    billing = prism.create_agent(
        name="billing",
        model=ModelConfig(provider="mock", model="billing-model"),
        provider=create_mock_provider(
            turns=[[provider_text_delta("Your refund is on its way."), provider_done(usage(90, 11))]]
        ),
        instructions="You handle billing.",
    )
    agent = _agent(
        store,
        [
            [
                provider_thinking_delta("The user wants money back: billing handles that."),
                provider_tool_call("t1", "transfer_to_billing", {}),
                provider_done(usage(70, 20)),
            ]
        ],
        name="triage",
        loop=handoff_loop(billing),
    )
    out.handoff = await agent.create_session().run("I want a refund for order 42")

    # 6. an agent tool: the lead asks a helper, whose child run has its own page
    helper = _agent(
        store,
        [[provider_text_delta("The capital of France is Paris."), provider_done(usage(40, 9))]],
        name="geographer",
    )
    lead = _agent(
        store,
        [
            _call("k1", "geographer", {"input": "capital of France?"}),
            [provider_text_delta("Paris."), provider_done(usage(55, 3))],
        ],
        name="lead",
        tools=[helper.as_tool()],
    )
    lead_session = lead.create_session()
    out.parent = await lead_session.run("What is the capital of France?")
    children = await store.list_session_summaries(
        filter=prism_filter(parent_session_id=lead_session.id)
    )
    out.child_run_id = children.items[0].last_run_id if children.items else None

    # 7. a failed run (the provider keeps failing, no fallback)
    failing = create_mock_provider(
        events=[provider_error(ErrorInfo(message=f"bad key {SECRET}", code=401))]
    )
    agent = _agent(
        store,
        [],
        provider=failing,
        retry=False,
        name="broken",
        redactor=prism.create_secret_redactor([SECRET]),
    )
    failed_session = agent.create_session()
    try:
        await failed_session.run("This will fail")
    except AgentRunError as exc:
        out.failed_run_id = exc.run_id if hasattr(exc, "run_id") else None
    out.failed_session_id = failed_session.id

    # 8. a run without a ledger (durable, so its envelope is known)
    agent = _durable(
        store,
        [[provider_text_delta("No ledger here."), provider_done()]],
        name="quiet",
        tools=[add],
        policy="every-turn",
        run_ledger=None,
    )
    out.no_ledger = await agent.create_session().run("Run without a ledger")

    # 9. waiting for an approval, with a secret in the arguments
    agent = desk_agent(
        store, [_call("w1", "pay", {"invoice": 7, "note": f"card {SECRET} {PROBE}"})]
    )
    out.waiting = await agent.create_session().run("Pay invoice 7")

    # 10. a sub-agent waiting for an approval
    payer = _durable(store, [_call("q1", "pay", {"invoice": 9})], name="payer", tools=[pay])
    clerk = _durable(
        store,
        [_call("l1", "payer", {"input": "pay invoice 9"})],
        name="clerk",
        tools=[payer.as_tool()],
    )
    out.waiting_child = await clerk.create_session().run("Have invoice 9 paid")
    return out


def desk_agent(store: Any, turns: list[Any]) -> Any:
    """The agent of the run that waits for an approval of ``pay`` (the same definition resumes
    it)."""
    return _durable(store, turns, name="desk", tools=[pay])


def prism_filter(**fields: Any) -> Any:
    from prism.inspection import SessionFilter

    return SessionFilter(**fields)
