"""Record → replay: a run stored in SQLite or PostgreSQL becomes a case (``capture_run``), and
``run_eval(replay=True)`` reproduces it without a model — the same answer, tool calls and event
stream — or fails naming the first field that changed (system prompt, tool schema, arguments)."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import prism
from prism.evals import (
    Case,
    Cassette,
    Dataset,
    EvalReport,
    NetworkRefusedError,
    capture_run,
    event_stream_diff,
    no_network,
    run_eval,
)
from prism.ledger import MemoryRunLedger
from prism.middleware import MiddlewareRegistry
from prism.providers.mock import MockScriptItem
from prism.testing import (
    create_mock_provider,
    provider_done,
    provider_text_delta,
    provider_tool_call,
)
from prism.types import RunResult, ToolCallContent, Usage

MODEL = {"provider": "mock", "model": "scripted"}
PROMPT = "You are the order desk. Look orders up before you answer."


def usage(tokens: int) -> Usage:
    return Usage(input_tokens=tokens, output_tokens=5, total_tokens=tokens + 5)


@prism.tool
async def search(query: str) -> dict[str, Any]:
    """Search the orders."""
    await asyncio.sleep(0)
    return {"query": query, "orders": [f"{query}-1", f"{query}-2"]}


@prism.tool
async def search_limited(query: str, limit: int = 5) -> dict[str, Any]:
    """Search the orders."""
    return {"query": query, "orders": [f"{query}-1", f"{query}-2"][:limit]}


@prism.tool
async def status(order: str) -> str:
    """The status of one order."""
    await asyncio.sleep(0)
    return f"{order}: shipped"


SEARCH_LIMITED = dataclasses.replace(search_limited, name="search")


def sequential_turns() -> list[list[MockScriptItem]]:
    """Two sequential tool rounds, then the answer."""
    return [
        [
            provider_text_delta("Let me "),
            provider_text_delta("search."),
            provider_tool_call("c1", "search", {"query": "tent"}),
            provider_done(usage(100)),
        ],
        [provider_tool_call("c2", "status", {"order": "tent-1"}), provider_done(usage(150))],
        [provider_text_delta("Order tent-1 has shipped."), provider_done(usage(200))],
    ]


def parallel_turns() -> list[list[MockScriptItem]]:
    """One round of two parallel calls, then the answer."""
    return [
        [
            provider_tool_call("p1", "status", {"order": "A-1"}),
            provider_tool_call("p2", "status", {"order": "B-2"}),
            provider_done(usage(80)),
        ],
        [provider_text_delta("A-1 and B-2 have shipped."), provider_done(usage(120))],
    ]


def make_agent(
    turns: Sequence[Sequence[MockScriptItem]] = (),
    *,
    store: Any = None,
    instructions: str = PROMPT,
    tools: Sequence[Any] = (search, status),
    **options: Any,
) -> prism.Agent:
    return prism.create_agent(
        provider=create_mock_provider(turns=[list(t) for t in turns]),
        model=MODEL,
        name="orders",
        instructions=instructions,
        tools=list(tools),
        store=store,
        run_ledger=store,
        **options,
    )


async def record(agent: prism.Agent, text: str = "Where is my tent?") -> RunResult:
    result = await agent.create_session().run(text)
    assert result.status == "succeeded", result.error
    return result


async def replay(agent: prism.Agent, case: Case, ledger: MemoryRunLedger | None = None) -> EvalReport:
    options = {"run_ledger": ledger} if ledger is not None else None
    return await run_eval(agent, Dataset(name="replay", cases=[case]), replay=True, options=options)


def reasons(report: EvalReport) -> dict[str, str]:
    attempt = report.cases[0].attempts[0]
    return {score.evaluator: score.reason for score in attempt.scores}


async def recorded_events(store: Any, result: RunResult) -> list[dict[str, Any]]:
    return [r.event.to_dict() for r in await store.list_events(result.session_id, run_id=result.run_id)]


def replayed_events(ledger: MemoryRunLedger, report: EvalReport) -> list[dict[str, Any]]:
    run_id = report.cases[0].attempts[0].run_id
    return [r.event.to_dict() for r in ledger.events if r.run_id == run_id]


# --------------------------------------------------------------------------- reproduce


@pytest.mark.parametrize("scenario", ["sequential", "parallel"])
async def test_an_unchanged_agent_replays_its_stored_run_event_for_event(
    store: Any, scenario: str
) -> None:
    turns = sequential_turns() if scenario == "sequential" else parallel_turns()
    loop = {"strategy": "single-shot", "tool_concurrency": 2} if scenario == "parallel" else None
    result = await record(make_agent(turns, store=store, loop=loop))

    captured = await capture_run(store, result.run_id, name=scenario)
    assert captured.warnings == ()
    case = captured.case
    cassette = Cassette.from_json(case.cassette)
    assert cassette.matching == "requests" and len(cassette.attempts) == len(turns)
    assert all(a.request_hash and a.head_hash in cassette.heads for a in cassette.attempts)
    assert case.input == "Where is my tent?" and case.expected_output == result.text
    assert case.expected_tools is not None
    assert [c.name for c in case.expected_tools.calls] == [
        c.name for c in result.tool_calls
    ]

    ledger = MemoryRunLedger()
    report = await replay(make_agent(loop=loop), case, ledger)  # a provider with no script left
    assert report.passed, report.format_text()
    attempt = report.cases[0].attempts[0]
    assert attempt.usage_source == "recorded" and report.usage_recorded
    assert attempt.usage == result.usage
    assert "(recorded)" in report.summary_line()
    recorded = await recorded_events(store, result)
    replayed = replayed_events(ledger, report)
    assert event_stream_diff(recorded, replayed) is None
    assert len(recorded) == len(replayed)
    # the stored transcript and the replayed one agree message for message
    assert [m.to_dict() for m in attempt.messages] == [m.to_dict() for m in result.messages]


async def test_request_rows_hash_what_the_provider_was_sent(store: Any) -> None:
    from prism.request_hash import fingerprint_request

    agent = make_agent(sequential_turns(), store=store)
    provider = agent.config.provider
    result = await record(agent)
    rows = await store.list_requests(run_id=result.run_id)
    heads = await store.load_request_heads(r.head_hash for r in rows)
    assert [(r.turn, r.attempt) for r in rows] == [(1, 1), (2, 1), (3, 1)]
    for request, row in zip(provider.requests, rows, strict=True):  # type: ignore[union-attr]
        fingerprint = fingerprint_request(request)
        assert (row.request_hash, row.head_hash) == (fingerprint.request_hash, fingerprint.head_hash)
        assert heads[row.head_hash] == fingerprint.head
    assert len(heads) == 1  # one head for the run: stored once
    assert rows[-1].messages == 5  # input, call, result, call, result


# --------------------------------------------------------------------------- drift


async def test_a_changed_system_prompt_fails_naming_it(store: Any) -> None:
    result = await record(make_agent(sequential_turns(), store=store))
    case = (await capture_run(store, result.run_id)).case
    report = await replay(make_agent(instructions=PROMPT.replace("Look", "Always look")), case)
    assert not report.passed
    reason = reasons(report)["replay"]
    assert reason.startswith("turn 1: system prompt changed at line 1:")
    assert "'You are the order desk. Always look" in reason


async def test_a_changed_tool_schema_fails_naming_the_property(store: Any) -> None:
    result = await record(make_agent(sequential_turns(), store=store))
    case = (await capture_run(store, result.run_id)).case
    report = await replay(make_agent(tools=[SEARCH_LIMITED, status]), case)
    assert reasons(report)["replay"] == (
        "turn 1: tool `search` schema changed: property `limit` added"
    )


async def test_changed_tool_arguments_fail_naming_the_argument(store: Any) -> None:
    result = await record(make_agent(sequential_turns(), store=store))
    case = (await capture_run(store, result.run_id)).case
    middleware = MiddlewareRegistry()

    def louder(call: ToolCallContent) -> ToolCallContent | None:
        if call.name != "search":
            return None
        return dataclasses.replace(call, arguments={"query": "TENT"})

    middleware.use("tool_call", louder)
    report = await replay(make_agent(middleware=middleware), case)
    assert reasons(report)["replay"] == (
        "tool `search` (call c1): argument `query` changed: 'tent' → 'TENT'"
    )


async def test_a_removed_tool_and_a_changed_option_are_named(store: Any) -> None:
    result = await record(make_agent(sequential_turns(), store=store))
    case = (await capture_run(store, result.run_id)).case
    report = await replay(make_agent(tools=[search]), case)
    assert reasons(report)["replay"] == "turn 1: tool `status` removed"
    report = await replay(make_agent(max_tokens=64), case)
    assert reasons(report)["replay"] == "turn 1: option `max_tokens` added: 64"


async def test_a_run_that_stops_early_or_asks_once_more_fails(store: Any) -> None:
    result = await record(make_agent(sequential_turns(), store=store))
    case = (await capture_run(store, result.run_id)).case
    cassette = dict(case.cassette or {})
    attempts = list(cassette["attempts"])  # type: ignore[arg-type]
    short = dataclasses.replace(case, cassette={**cassette, "attempts": attempts[:2]})
    report = await replay(make_agent(), short)
    assert "the recording ends after 2 provider turns" in reasons(report)["replay"]
    report = await replay(make_agent(limits={"max_turns": 2}), case)
    assert reasons(report)["replay"] == (
        "the run ended after 2 of the 3 recorded provider attempts (3 turns)"
    )


# --------------------------------------------------------------------------- without request rows


class _OldLedger:
    """A ledger without ``append_request`` (written before request rows existed)."""

    def __init__(self) -> None:
        self.inner = MemoryRunLedger()
        self.runs, self.events = self.inner.runs, self.inner.events
        self.tool_calls, self.usage = self.inner.tool_calls, self.inner.usage

    async def append_run(self, record: Any) -> None:
        await self.inner.append_run(record)

    async def append_event(self, record: Any) -> None:
        await self.inner.append_event(record)

    async def append_tool_call(self, record: Any) -> None:
        await self.inner.append_tool_call(record)

    async def append_usage(self, record: Any) -> None:
        await self.inner.append_usage(record)


async def test_a_run_without_request_rows_replays_on_messages_and_says_what_it_cannot_see() -> None:
    from prism.store import MemorySessionStore

    sessions, ledger = MemorySessionStore(), _OldLedger()
    agent = prism.create_agent(
        provider=create_mock_provider(turns=sequential_turns()),
        model=MODEL,
        instructions=PROMPT,
        tools=[search, status],
        store=sessions,
        run_ledger=ledger,
    )
    result = await record(agent)
    captured = await capture_run(sessions, result.run_id, ledger=ledger)
    assert len(captured.warnings) == 1
    assert "matches messages only" in captured.warnings[0]
    assert "system prompt, the tool schemas or the options cannot be detected" in captured.warnings[0]
    case = captured.case
    assert Cassette.from_json(case.cassette).matching == "messages"
    assert (await replay(make_agent(), case)).passed
    # a prompt change goes unseen; a changed conversation does not
    assert (await replay(make_agent(instructions="Something else."), case)).passed
    changed = dataclasses.replace(case, input="Where is my stove?")
    report = await replay(make_agent(), changed)
    assert reasons(report)["replay"] == (
        "turn 1: message 1 (user): `content[0].text` changed: 'Where is my tent?' → "
        "'Where is my stove?'"
    )


async def test_a_run_without_a_ledger_is_captured_from_its_session() -> None:
    from prism.store import MemorySessionStore

    sessions = MemorySessionStore()
    agent = prism.create_agent(
        provider=create_mock_provider(turns=sequential_turns()),
        model=MODEL,
        instructions=PROMPT,
        tools=[search, status],
        store=sessions,
    )
    result = await record(agent)
    with pytest.raises(prism.PrismConfigError, match="give its session id"):
        await capture_run(sessions, result.run_id)
    captured = await capture_run(sessions, result.run_id, session_id=result.session_id)
    assert "matches messages only" in captured.warnings[0]
    report = await replay(make_agent(), captured.case)
    assert report.passed, report.format_text()
    assert report.cases[0].attempts[0].usage is None  # no ledger: no usage was recorded


# --------------------------------------------------------------------------- tools


_CLOCK = ["2024-06-01T10:00:00Z"]


@prism.tool
def inventory(sku: str) -> dict[str, Any]:
    """Stock of one SKU."""
    return {"sku": sku, "stock": 3, "checked_at": _CLOCK[0]}


async def test_real_tools_run_and_are_checked_outside_the_ignored_paths(store: Any) -> None:
    _CLOCK[0] = "2024-06-01T10:00:00Z"
    turns: list[list[MockScriptItem]] = [
        [provider_tool_call("i1", "inventory", {"sku": "TENT"}), provider_done(usage(40))],
        [provider_text_delta("3 in stock."), provider_done(usage(60))],
    ]
    result = await record(make_agent(turns, store=store, tools=[inventory]))
    _CLOCK[0] = "2024-06-02T11:00:00Z"  # the real tool now answers with another time
    strict = (await capture_run(store, result.run_id, tools="real")).case
    report = await replay(make_agent(tools=[inventory]), strict)
    assert reasons(report)["replay"] == (
        "tool `inventory` (call i1): result `checked_at` changed: '2024-06-01T10:00:00Z' → "
        "'2024-06-02T11:00:00Z'"
    )
    lenient = (
        await capture_run(
            store, result.run_id, tools="real", ignore_paths={"inventory": ["checked_at"]}
        )
    ).case
    report = await replay(make_agent(tools=[inventory]), lenient)
    assert report.passed, report.format_text()


async def test_capture_keeps_redacted_arguments_redacted_and_says_so(store: Any) -> None:
    secret = "sk-live-4417"
    turns: list[list[MockScriptItem]] = [
        [provider_tool_call("s1", "search", {"query": f"key {secret}"}), provider_done(usage(10))],
        [provider_text_delta("Found it."), provider_done(usage(20))],
    ]
    agent = make_agent(turns, store=store, redactor=prism.create_secret_redactor([secret]))
    result = await record(agent)
    captured = await capture_run(store, result.run_id)
    assert captured.warnings == (
        f"tool `search` (call s1) of run {result.run_id}: argument `query` holds a redacted "
        "value; the case keeps it redacted",
    )
    assert secret not in repr(captured.case.cassette)
    assert secret not in repr(captured.case)


# --------------------------------------------------------------------------- the socket guard


def test_the_socket_guard_refuses_network_connects_and_lets_unix_sockets_through(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "s.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    try:
        with no_network():
            with no_network():  # nests
                tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                with pytest.raises(NetworkRefusedError, match="a replay makes no network calls"):
                    tcp.connect(("127.0.0.1", 9))
                with pytest.raises(NetworkRefusedError):
                    tcp.connect_ex(("127.0.0.1", 9))
                tcp.close()
            unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            unix.connect(path)
            unix.close()
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", 9), timeout=1)
        assert "connect" not in vars(socket.socket)  # restored
    finally:
        server.close()


async def test_a_replay_runs_inside_the_guard_and_refuses_asyncio_connections(store: Any) -> None:
    attempts: list[str] = []

    def fetch_tool(*, live: bool) -> Any:
        @prism.tool
        async def fetch(url: str) -> str:
            """Fetch a page."""
            if not live:
                return "page"
            try:
                await asyncio.open_connection("127.0.0.1", 9)
            except NetworkRefusedError as exc:
                attempts.append(str(exc))
                return "refused"
            return "connected"

        return fetch

    turns: list[list[MockScriptItem]] = [
        [provider_tool_call("f1", "fetch", {"url": "http://example.com"}), provider_done()],
        [provider_text_delta("done"), provider_done()],
    ]
    result = await prism.create_agent(
        provider=create_mock_provider(turns=turns),
        model=MODEL,
        tools=[fetch_tool(live=False)],
        store=store,
        run_ledger=store,
    ).create_session().run("Fetch it.")
    case = (await capture_run(store, result.run_id, tools="real")).case
    report = await run_eval(
        prism.create_agent(
            provider=create_mock_provider(), model=MODEL, tools=[fetch_tool(live=True)]
        ),
        Dataset(cases=[case]),
        replay=True,
    )
    assert attempts and "127.0.0.1" in attempts[0], report.format_text()
    assert reasons(report)["replay"] == "tool `fetch` (call f1): result changed: 'page' → 'refused'"


# --------------------------------------------------------------------------- the file round trip


async def test_a_captured_case_survives_its_dataset_file(store: Any, tmp_path: Path) -> None:
    from prism.evals import load_dataset, save_dataset

    result = await record(make_agent(sequential_turns(), store=store))
    case = (await capture_run(store, result.run_id, name="tent")).case
    for suffix in ("jsonl", "yaml"):
        path = tmp_path / f"cases.{suffix}"
        save_dataset(Dataset(name="orders", cases=[case]), path)
        loaded = load_dataset(path)
        assert loaded.cases[0].cassette == case.cassette
        assert (await run_eval(make_agent(), loaded, replay=True)).passed


async def test_a_cassette_of_another_format_or_hash_version_is_refused(store: Any) -> None:
    result = await record(make_agent(sequential_turns(), store=store))
    case = (await capture_run(store, result.run_id, name="tent")).case
    cassette = dict(case.cassette or {})
    for change, message in (
        ({"version": 2}, "format version 2 is not 1 (capture it again)"),
        ({"hash_version": 9}, "request hashes of version 9; this prism hashes requests with"),
        ({"matching": "vibes"}, "matching must be 'requests' or 'messages'"),
    ):
        odd = dataclasses.replace(case, cassette={**cassette, **change})
        with pytest.raises(prism.PrismConfigError, match=re.escape(message)):
            await replay(make_agent(), odd)


async def test_a_run_in_the_memory_stores_is_captured_with_its_request_rows() -> None:
    from prism.store import MemorySessionStore

    sessions, ledger = MemorySessionStore(), MemoryRunLedger()
    agent = prism.create_agent(
        provider=create_mock_provider(turns=sequential_turns()),
        model=MODEL,
        name="orders",
        instructions=PROMPT,
        tools=[search, status],
        store=sessions,
        run_ledger=ledger,
    )
    result = await record(agent)
    captured = await capture_run(sessions, result.run_id, ledger=ledger)
    assert captured.warnings == ()
    assert Cassette.from_json(captured.case.cassette).matching == "requests"
    assert (await replay(make_agent(), captured.case)).passed
    report = await replay(make_agent(tools=[SEARCH_LIMITED, status]), captured.case)
    assert "property `limit` added" in reasons(report)["replay"]
