"""The inspector's pages through the ASGI app over a real SQLite store filled by real runs:
what each page shows, that every model- or tool-produced string is escaped, the security
headers, the live stream of a run, the inbox and the usage page; and that reading the pages
writes nothing to the store."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from pathlib import Path

import httpx
import pytest
from _seed import PROBE, SECRET, Seeded, desk_agent
from serve_support import client_for

from prism.providers.base import provider_done, provider_text_delta
from prism.serve import create_app
from prism.stores import SqliteStore

HTML = {"accept": "text/html"}


def _probe_escaped(body: str) -> None:
    assert PROBE not in body, "a <script> from a run reached the page unescaped"
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in body


async def test_the_sessions_list_has_totals_and_children_under_their_parent(
    client: httpx.AsyncClient, seeded: tuple[Path, Seeded]
) -> None:
    page = await client.get("/sessions", headers=HTML)
    assert page.status_code == 200
    body = page.text
    parent_session = seeded[1].parent.session_id
    child_session = f"{seeded[1].parent.run_id}.k1"
    assert body.index(parent_session) < body.index(child_session)  # the child under its parent
    assert "Sub-agent session: " in body
    assert "What is 17 + 23? Use the calculator." in body and "$0.0038" in body
    _probe_escaped(body)  # the probe session's first message
    # filters: text, agent, status
    found = await client.get("/sessions", params={"q": "capital of FRANCE"}, headers=HTML)
    assert parent_session in found.text and seeded[1].simple.session_id not in found.text
    found = await client.get("/sessions", params={"status": "failed"}, headers=HTML)
    assert seeded[1].failed_session_id in found.text and parent_session not in found.text
    found = await client.get("/sessions", params={"agent": "researcher"}, headers=HTML)
    assert seeded[1].parallel.session_id in found.text and parent_session not in found.text
    empty = await client.get("/sessions", params={"since": "2999-01-01"}, headers=HTML)
    assert "No session matches these filters" in empty.text


async def test_sessions_are_paged_with_a_cursor(store: SqliteStore) -> None:
    from prism.serve import _app

    old = _app._PAGE
    _app._PAGE = 3
    try:
        async with client_for(create_app(store)) as client:
            first = await client.get("/sessions", headers=HTML)
            match = re.search(r'href="(\?cursor=[^"]+)">Next page', first.text)
            assert match is not None
            second = await client.get("/sessions" + match.group(1).replace("&amp;", "&"), headers=HTML)
            assert second.status_code == 200 and "First page" in second.text
            bad = await client.get("/sessions", params={"cursor": "not-a-cursor"}, headers=HTML)
            assert bad.status_code == 400 and "Traceback" not in bad.text
    finally:
        _app._PAGE = old


async def test_a_run_page_shows_transcript_timeline_and_waterfall(
    client: httpx.AsyncClient, seeded: tuple[Path, Seeded]
) -> None:
    run = seeded[1].simple
    page = await client.get(f"/runs/{run.run_id}", headers=HTML)
    assert page.status_code == 200
    body = page.text
    for part in ('id="tr-h">Transcript', 'id="tl-h">Timeline', 'id="wf-h">Waterfall'):
        assert part in body
    assert 'class="wf-track"' in body and "Turn 1 · attempt 1" in body
    assert "17 + 23 = 40" in body and "mock · demo-large" in body
    assert "$0.0021" in body and "$0.0017" in body
    assert 'id="run-live"' in body and "hidden" in body.split('id="run-live"')[1][:80]
    # a child run links to its own page, and back to its parent
    parent = await client.get(f"/runs/{seeded[1].parent.run_id}", headers=HTML)
    assert f'href="/runs/{seeded[1].child_run_id}"' in parent.text
    child = await client.get(f"/runs/{seeded[1].child_run_id}", headers=HTML)
    assert f'href="/runs/{seeded[1].parent.run_id}"' in child.text
    assert "Child run of" in child.text


async def test_a_waiting_run_page_spans_the_wait_until_now(
    client: httpx.AsyncClient, seeded: tuple[Path, Seeded]
) -> None:
    page = (await client.get(f"/runs/{seeded[1].waiting.run_id}", headers=HTML)).text
    waterfall = page[page.index('id="wf-h"') : page.index('id="tr-h"')]
    assert re.search(r'class="wf-dur">waiting [\d.]+ m?s<', waterfall)
    bar = re.search(r'class="bar bar-wait st-waiting" x="([\d.]+)" y="\d+" width="([\d.]+)"', waterfall)
    assert bar is not None and float(bar.group(1)) + float(bar.group(2)) == 1000.0
    assert float(bar.group(2)) > 4.0  # more than a sliver: the axis runs to now
    assert re.search(r'class="fact-sub">waiting [\d.]+ m?s for approval', page)
    # the model box wraps at the separator, each name as a whole
    assert '<span class="whole">mock ·</span> <span class="whole">demo-large</span>' in page


async def test_markup_from_a_message_a_tool_argument_and_a_tool_result_is_escaped(
    client: httpx.AsyncClient, seeded: tuple[Path, Seeded]
) -> None:
    run = seeded[1].probe
    for path in (f"/runs/{run.run_id}", f"/sessions/{run.session_id}", f"/runs/{run.run_id}/panels"):
        body = (await client.get(path, headers=HTML)).text
        _probe_escaped(body)
        # message, argument and result all appear, each escaped
        assert body.count("&lt;script&gt;window.__xss=1&lt;/script&gt;") >= 4


async def test_errors_show_their_code_and_redacted_message(
    client: httpx.AsyncClient, seeded: tuple[Path, Seeded]
) -> None:
    body = (await client.get(f"/runs/{seeded[1].failed_run_id}", headers=HTML)).text
    assert "failed" in body and 'class="error-code">401' in body
    assert SECRET not in body and "[REDACTED]" in body
    fallback = (await client.get(f"/runs/{seeded[1].fallback.run_id}", headers=HTML)).text
    assert 'class="error-code">503' in fallback and "upstream overloaded" in fallback
    assert "fallback" in fallback and "Retried after" in fallback


async def test_a_run_without_a_ledger_shows_its_transcript_and_envelope(
    client: httpx.AsyncClient, seeded: tuple[Path, Seeded]
) -> None:
    body = (await client.get(f"/runs/{seeded[1].no_ledger.run_id}", headers=HTML)).text
    assert "no ledger" in body and "Run without a ledger" in body and "No ledger here." in body
    assert "Envelope status" in body and "every-turn" in body
    # no ledger: turns and tokens are unknown, not zero — on the run, its session and lists
    assert '<dd class="num" title="no ledger">—</dd>' in body
    assert "<dt>Turns</dt><dd class=\"num\">0</dd>" not in body
    session = (await client.get(f"/sessions/{seeded[1].no_ledger.session_id}", headers=HTML)).text
    assert session.count('<dd class="num" title="no ledger">—</dd>') == 2
    for listing in ("/runs", "/sessions"):
        page = (await client.get(listing, params={"agent": "quiet"}, headers=HTML)).text
        assert page.count('<span title="no ledger">—</span>') == 2, listing
    # a run with a ledger keeps its counts
    simple = (await client.get(f"/runs/{seeded[1].simple.run_id}", headers=HTML)).text
    assert 'title="no ledger"' not in simple


async def test_unknown_ids_are_a_404_page_without_a_traceback(client: httpx.AsyncClient) -> None:
    for path in ("/runs/run_missing", "/sessions/session_missing", "/nowhere"):
        page = await client.get(path, headers=HTML)
        assert page.status_code == 404 and "Traceback" not in page.text
        assert "<h1>" in page.text


async def test_every_response_carries_the_security_headers(client: httpx.AsyncClient) -> None:
    for path in ("/sessions", "/static/app.css", "/runs/run_missing"):
        response = await client.get(path, headers=HTML)
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert "'unsafe-inline'" not in csp
        assert response.headers["referrer-policy"] == "no-referrer"
        assert response.headers["x-content-type-options"] == "nosniff"
    page = (await client.get("/sessions", headers=HTML)).text
    assert "<script>" not in page and " on" + "click=" not in page  # no inline script or handler
    assert re.search(r"<script src=\"/static/app.js\" defer></script>", page)


async def test_static_assets_stay_small() -> None:
    static = Path(__import__("prism.serve", fromlist=["_"]).__file__).parent / "static"
    assert sum(p.stat().st_size for p in static.iterdir()) < 150 * 1024


async def test_the_inbox_lists_every_pending_decision_with_its_chain(
    client: httpx.AsyncClient, seeded: tuple[Path, Seeded]
) -> None:
    page = await client.get("/inbox", headers=HTML)
    assert page.status_code == 200
    body = page.text
    assert seeded[1].waiting.run_id in body and seeded[1].waiting_child.run_id in body
    # the arguments as the tool will get them: pretty JSON, the secret redacted, markup escaped
    assert SECRET not in body and "[REDACTED]" in body
    _probe_escaped(body)
    assert "&#34;currency&#34;: &#34;EUR&#34;" in body or "&quot;currency&quot;: &quot;EUR&quot;" in body
    assert "Sub-agent call, via" in body and "payer" in body
    for label in ("Allow once", "Allow for this run", "Reject once", "Reject for this run"):
        assert label in body
    assert 'name="csrf"' in body
    nav = re.search(r'id="inbox-count">(\d+)', body)
    assert nav is not None and nav.group(1) == "2"


def _csrf(page: str) -> str:
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
    assert found is not None
    return found.group(1)


JSON_POST = {"origin": "http://127.0.0.1:8765", "accept": "application/json"}


async def test_edited_arguments_are_checked_inline(
    client: httpx.AsyncClient, seeded: tuple[Path, Seeded]
) -> None:
    csrf = _csrf((await client.get("/inbox", headers=HTML)).text)
    waiting = seeded[1].waiting
    (pending,) = waiting.interruption.pending_decisions
    form = {"csrf": csrf, "run_id": waiting.run_id, "approval_id": pending.approval_id}
    bad = await client.post("/inbox/validate", data={**form, "arguments": "{oops"}, headers=JSON_POST)
    assert bad.status_code == 200 and not bad.json()["ok"]
    assert "Not valid JSON" in bad.json()["problems"][0] and "line 1" in bad.json()["problems"][0]
    arr = await client.post("/inbox/validate", data={**form, "arguments": "[1]"}, headers=JSON_POST)
    assert "must be a JSON object" in arr.json()["problems"][0]
    ok = await client.post(
        "/inbox/validate", data={**form, "arguments": '{"invoice": 8}'}, headers=JSON_POST
    )
    # this app does not have the run's agent: JSON is checked, the schema when applied
    assert ok.json()["ok"] and not ok.json()["schema"] and "does not have" in ok.json()["note"]
    gone = await client.post(
        "/inbox/validate", data={**form, "approval_id": "approval_x", "arguments": "{}"},
        headers=JSON_POST,
    )
    assert gone.json()["note"] == "This decision is no longer pending."
    no_csrf = await client.post(
        "/inbox/validate", data={**form, "csrf": "nope", "arguments": "{}"}, headers=JSON_POST
    )
    assert no_csrf.status_code == 403


async def test_with_the_agent_edited_arguments_are_checked_against_the_tools_schema(
    store: SqliteStore, seeded: tuple[Path, Seeded]
) -> None:
    agent = desk_agent(store, [])
    async with client_for(create_app(store, agents={"desk": agent})) as client:
        page = (await client.get("/inbox", headers=HTML)).text
        assert "Tool parameter schema" in page and "approving runs the tool inside" in page
        waiting = seeded[1].waiting
        (pending,) = waiting.interruption.pending_decisions
        form = {"csrf": _csrf(page), "run_id": waiting.run_id, "approval_id": pending.approval_id}
        bad = await client.post(
            "/inbox/validate", data={**form, "arguments": '{"invoice": "seven"}'},
            headers=JSON_POST,
        )
        assert bad.json()["schema"] and not bad.json()["ok"]
        assert bad.json()["problems"][0].startswith("/invoice: ")
        refused = await client.post(
            "/inbox/decide",
            data={**form, "outcome": "allow_once", "edit": "1", "arguments": '{"invoice": "7"}'},
            headers=JSON_POST,
        )
        assert refused.status_code == 422
        assert refused.json()["title"] == "The arguments do not match the tool's schema"
        assert "Nothing was recorded" in refused.json()["detail"]


async def test_a_recorded_decision_and_the_one_that_lost_the_race(
    fresh_seeded: tuple[Path, Seeded],
) -> None:
    """Without the run's agent the decision is recorded; a second decider is told the first
    decision's outcome, who took it and when — as a notice, not a traceback."""
    path, seeded = fresh_seeded
    store = await SqliteStore(str(path)).open()
    try:
        async with client_for(create_app(store, by="alice")) as alice, client_for(
            create_app(store, by="bob")
        ) as bob:
            waiting = seeded.waiting
            (pending,) = waiting.interruption.pending_decisions
            csrf_a = _csrf((await alice.get("/inbox", headers=HTML)).text)
            csrf_b = _csrf((await bob.get("/inbox", headers=HTML)).text)
            form = {"run_id": waiting.run_id, "approval_id": pending.approval_id}
            first = await alice.post(
                "/inbox/decide",
                data={**form, "csrf": csrf_a, "outcome": "reject_once", "reason": "not today"},
                headers=JSON_POST,
            )
            assert first.status_code == 200
            assert first.json()["kind"] == "recorded" and first.json()["ok"]
            second = await bob.post(
                "/inbox/decide",
                data={**form, "csrf": csrf_b, "outcome": "allow_once"},
                headers=JSON_POST,
            )
            assert second.status_code == 409 and second.json()["kind"] == "lost"
            detail = second.json()["detail"]
            assert "“Reject once” by alice at 20" in detail and "Yours was not applied" in detail
            # the page form (no script) gets the same notice on the page
            third = await bob.post(
                "/inbox/decide",
                data={**form, "csrf": csrf_b, "outcome": "allow_for_run"},
                headers={"origin": "http://127.0.0.1:8765", "accept": "text/html"},
            )
            assert third.status_code == 409 and "Someone decided first" in third.text
            assert "Traceback" not in third.text
            inbox = (await bob.get("/inbox", headers=HTML)).text
            assert "Decided, waiting to be applied:" in inbox and "by alice" in inbox
    finally:
        await store.aclose()


async def test_with_the_agent_a_decision_runs_the_tool_here_and_the_run_goes_on(
    fresh_seeded: tuple[Path, Seeded],
) -> None:
    path, seeded = fresh_seeded
    store = await SqliteStore(str(path)).open()
    try:
        agent = desk_agent(store, [[provider_text_delta("Paid."), provider_done()]])
        async with client_for(create_app(store, agents={"desk": agent})) as client:
            waiting = seeded.waiting
            (pending,) = waiting.interruption.pending_decisions
            csrf = _csrf((await client.get("/inbox", headers=HTML)).text)
            decided = await client.post(
                "/inbox/decide",
                data={
                    "csrf": csrf, "run_id": waiting.run_id, "approval_id": pending.approval_id,
                    "outcome": "allow_once",
                },
                headers=JSON_POST,
            )
            assert decided.status_code == 200, decided.text
            assert decided.json()["kind"] == "applied"
            # one sentence, the outcome the card shows in place of its waiting badge
            said = decided.json()
            assert said["title"] == "Allowed once by prism serve — the run goes on"
            assert said["detail"] == "" and "Applied" not in said["title"]
            assert (said["outcome"], said["outcome_tone"]) == ("Allowed once", "ok")
            for _ in range(200):
                run = await store.get_run_summary(waiting.run_id)
                if run is not None and run.status == "succeeded":
                    break
                await asyncio.sleep(0.05)
            assert run is not None and run.status == "succeeded"
            page = (await client.get(f"/runs/{waiting.run_id}", headers=HTML)).text
            assert "approval: allowed" in page and "Decided: allow once by prism serve" in page
            assert "Paid." in page
            # the timeline in time order: the suspension and the resumption before the call
            # that ran after them; the resumption in words, its checkpoint version secondary
            assert page.index("Suspended: waiting for approval") < page.index("approval: allowed")
            assert page.index("Resumed after the decision") < page.index("approval: allowed")
            assert "Resumed from version" not in page and "checkpoint version" in page
            # the waterfall: the second leg's attempt labelled as such, the wait as waited
            waterfall = page[page.index('id="wf-h"') : page.index('id="tr-h"')]
            assert "Turn 1 · attempt 1" in waterfall and "Leg 2 · turn 1 · attempt 1" in waterfall
            assert re.search(r'class="wf-dur">waited [\d.]+ m?s<', waterfall)
            assert "· waiting" not in waterfall and "st-waiting" not in waterfall
            # the duration box says the run waited
            assert re.search(r'class="fact-sub">waited [\d.]+ m?s for approval', page)
    finally:
        await store.aclose()


async def test_a_rejected_call_shows_rejected_not_waiting_once_the_run_went_on(
    fresh_seeded: tuple[Path, Seeded],
) -> None:
    """A rejected call never runs, so the ledger has no row of it: the timeline takes the
    rejection from the session's ``approval_rejected`` result, with its reason."""
    path, seeded = fresh_seeded
    store = await SqliteStore(str(path)).open()
    try:
        agent = desk_agent(store, [[provider_text_delta("Not paid."), provider_done()]])
        async with client_for(create_app(store, agents={"desk": agent})) as client:
            waiting = seeded.waiting
            (pending,) = waiting.interruption.pending_decisions
            csrf = _csrf((await client.get("/inbox", headers=HTML)).text)
            decided = await client.post(
                "/inbox/decide",
                data={
                    "csrf": csrf, "run_id": waiting.run_id, "approval_id": pending.approval_id,
                    "outcome": "reject_once", "reason": "Not this month",
                },
                headers=JSON_POST,
            )
            assert decided.json()["kind"] == "applied", decided.text
            for _ in range(200):
                run = await store.get_run_summary(waiting.run_id)
                if run is not None and run.status == "succeeded":
                    break
                await asyncio.sleep(0.05)
            assert run is not None and run.status == "succeeded"
            page = (await client.get(f"/runs/{waiting.run_id}", headers=HTML)).text
            assert 'class="tl-item call status-blocked"' in page
            assert "approval: rejected" in page and "approval: waiting" not in page
            assert '<div class="small">Not this month</div>' in page
            assert "Not paid." in page
    finally:
        await store.aclose()


async def test_the_usage_page_charts_tokens_and_cost(
    client: httpx.AsyncClient,
) -> None:
    page = await client.get("/usage", headers=HTML)
    assert page.status_code == 200
    body = page.text
    assert 'class="chart-cols"' in body and 'aria-label="Tokens per day' in body
    assert "demo-small" in body and "billing-model" in body  # per model
    assert "researcher" in body and "geographer" in body  # per agent
    assert "$0.0042" in body  # the costs reported: 0.0021 + 0.0017 + 0.0004
    for preset in ("7d", "90d", "all"):
        assert (await client.get("/usage", params={"range": preset}, headers=HTML)).status_code == 200
    custom = await client.get(
        "/usage", params={"since": "2000-01-01", "until": "2000-01-31"}, headers=HTML
    )
    assert "No usage in this range." in custom.text


async def test_reading_every_page_writes_nothing(seeded: tuple[Path, Seeded]) -> None:
    path = seeded[0]
    store = await SqliteStore(str(path)).open()
    before = _digest(path)
    try:
        async with client_for(create_app(store)) as client:
            runs = await store.list_run_summaries(limit=100)
            paths = ["/sessions", "/runs", "/inbox", "/usage", "/inbox/list"]
            paths += [f"/runs/{r.run_id}" for r in runs.items]
            paths += [f"/sessions/{r.session_id}" for r in runs.items]
            for p in paths:
                assert (await client.get(p, headers=HTML)).status_code == 200, p
    finally:
        await store.aclose()
    assert _digest(path) == before


def _digest(path: Path) -> str:
    """The database's content (the file and its WAL), to compare before and after."""
    h = hashlib.sha256()
    for part in (path, path.with_name(path.name + "-wal")):
        try:
            h.update(part.read_bytes())
        except FileNotFoundError:  # no WAL, or the last connection's close just removed it
            pass
    return h.hexdigest()


async def test_the_live_stream_sends_new_rows_then_ends(
    store: SqliteStore, seeded: tuple[Path, Seeded]
) -> None:
    """A finished run's stream: an update for rows after the page's cursor, then ``end``."""
    run = seeded[1].simple
    sliced = await store.read_ledger(run.run_id, limit=3)
    app = create_app(store, poll_interval=0.05)
    async with client_for(app) as client:
        response = await asyncio.wait_for(
            client.get(
                f"/runs/{run.run_id}/stream",
                params={"after": sliced.cursor, "seq": 0},
                headers={"accept": "text/event-stream"},
            ),
            timeout=10,
        )
    assert response.headers["content-type"].startswith("text/event-stream")
    events = _events(response.text)
    assert [e["event"] for e in events] == ["update", "end"]
    update = json.loads(events[0]["data"])
    assert update["status"] == "succeeded" and update["rows"]
    assert update["rows"][0]["type"] != "agent_started"  # only rows after the cursor
    assert json.loads(events[1]["data"]) == {"status": "succeeded"}


def _events(text: str) -> list[dict[str, str]]:
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if line.startswith(":") or ":" not in line:
                continue
            key, _, value = line.partition(":")
            fields[key] = value.lstrip(" ")
        if "event" in fields:
            out.append(fields)
    return out


@pytest.mark.parametrize(
    "options, message",
    [
        ({"poll_interval": 0}, "poll_interval"),
        ({"poll_interval": 5}, "poll_interval"),
        ({"token": "short"}, "at least 16"),
        ({"allowed_hosts": ["inspector.lan"]}, "set token="),
        ({"allowed_hosts": ["*"]}, "no wildcard"),
        ({"allowed_hosts": "localhost"}, "not a str"),
        ({"by": ""}, "by must be"),
        ({"decisions": object()}, "DecisionService"),
    ],
)
async def test_bad_options_are_refused_when_the_app_is_built(
    store: SqliteStore, options: dict[str, object], message: str
) -> None:
    from prism.errors import PrismConfigError

    with pytest.raises(PrismConfigError, match=message):
        create_app(store, **options)  # type: ignore[arg-type]


def test_a_store_without_the_inspection_reads_is_refused() -> None:
    from prism.errors import PrismConfigError
    from prism.testing import MemorySessionStore

    with pytest.raises(PrismConfigError, match="InspectionReader"):
        create_app(MemorySessionStore())


@pytest.mark.postgres
async def test_every_page_reads_a_postgresql_store() -> None:
    import os
    import uuid

    url = os.environ.get("PRISM_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("PostgreSQL store tests need PRISM_TEST_POSTGRES_URL")
    import psycopg
    from _seed import seed

    from prism.stores.postgres import PostgresStore

    schema = f"prism_serve_{uuid.uuid4().hex[:12]}"
    store = await PostgresStore.connect(url, schema=schema, max_size=4)
    try:
        seeded = await seed(store)
        async with client_for(create_app(store)) as client:
            runs = await store.list_run_summaries(limit=100)
            paths = ["/sessions", "/runs", "/inbox", "/usage"]
            paths += [f"/runs/{r.run_id}" for r in runs.items]
            for path in paths:
                page = await client.get(path, headers=HTML)
                assert page.status_code == 200, path
                assert PROBE not in page.text
            page = await client.get(f"/runs/{seeded.parallel.run_id}", headers=HTML)
            assert page.text.count('class="wf-track"') == 4
    finally:
        await store.aclose()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def test_a_session_page_shows_the_current_branch_and_the_others_apart(
    tmp_path: Path,
) -> None:
    """A run made after ``checkout()`` starts a branch: the transcript is the branch a new
    session continues (ending at the last stored entry), and the earlier branch is listed
    apart, from the entry it forks from (STORE-5)."""
    from prism.providers.mock import create_mock_provider
    from prism.runtime.agent import create_agent

    store = await SqliteStore(str(tmp_path / "branches.db")).open()
    try:
        replies = ("Hi Ada.", "Paris.", "Lyon.", "Marseille.")
        agent = create_agent(
            model={"provider": "mock", "model": "demo"},
            provider=create_mock_provider(
                turns=[[provider_text_delta(text), provider_done()] for text in replies]
            ),
            store=store,
            run_ledger=store,
        )
        session = agent.create_session("branched")
        await session.run("I am Ada.")
        fork = session.leaf_id
        await session.run("Capital of France?")
        assert fork is not None
        await session.checkout(fork)
        await session.run("Second city of France?")
        await session.run("And the third?")
        async with client_for(create_app(store)) as client:
            page = (await client.get("/sessions/branched", headers=HTML)).text
    finally:
        await store.aclose()
    current = page[page.index('id="transcript-h"') : page.index('id="branches-h"')]
    others = page[page.index('id="branches-h"') :]
    assert "This session has 2 branches" in current
    order = ["I am Ada.", "Hi Ada.", "Second city of France?", "Lyon.", "And the third?"]
    positions = [current.index(text) for text in order]
    assert positions == sorted(positions)
    assert "Capital of France?" not in current and "Paris." not in current
    assert "Capital of France?" in others and "Paris." in others
    assert f'href="#e-{fork}"' in others
    # the run made on the other branch is marked so in the runs table, the others are not
    runs = page[page.index('id="runs-h"') : page.index('id="transcript-h"')]
    assert runs.count(">other branch</a>") == 1
    assert 'Branch after <span class="fork-text">“Hi Ada.”</span> · 2 entries' in others


async def test_a_session_page_lists_its_latest_runs_and_links_to_all_of_them(
    tmp_path: Path,
) -> None:
    """A long conversation's page keeps its transcript near the top: it lists the latest five
    runs, newest first, says how many there are, and links to the runs page filtered to the
    session, which lists every one of them and no other session's."""
    from prism.providers.mock import create_mock_provider
    from prism.runtime.agent import create_agent

    store = await SqliteStore(str(tmp_path / "chat.db")).open()
    try:
        agent = create_agent(
            model={"provider": "mock", "model": "demo"},
            provider=create_mock_provider(
                turns=[[provider_text_delta(f"Reply {i}."), provider_done()] for i in range(8)]
            ),
            store=store,
            run_ledger=store,
        )
        chat = agent.create_session("chat")
        run_ids = [(await chat.run(f"Message {i}?")).run_id for i in range(7)]
        other = (await agent.create_session("other").run("Elsewhere?")).run_id
        async with client_for(create_app(store)) as client:
            page = (await client.get("/sessions/chat", headers=HTML)).text
            runs = page[page.index('id="runs-h"') : page.index('id="transcript-h"')]
            assert "The latest 5 of 7 runs." in runs
            listed = re.findall(r'href="/runs/(run_[0-9a-f]+)"', runs)
            assert listed == run_ids[::-1][:5]
            assert 'class="id mono">chat<' not in runs  # the session's own id is not repeated
            assert "Message 0?" in page and "Reply 6." in page  # the whole transcript
            link = re.search(r'href="(/runs\?session=chat)">All runs of this session', runs)
            assert link is not None
            full = (await client.get(link.group(1), headers=HTML)).text
            assert re.findall(r'href="/runs/(run_[0-9a-f]+)"', full) == run_ids[::-1]
            assert other not in full and 'name="session" value="chat"' in full
            short = (await client.get("/sessions/other", headers=HTML)).text
            assert "All runs of this session" not in short and other in short
    finally:
        await store.aclose()
