"""The inspector used as its user uses it, every part real and in a process of its own: ``prism
serve`` (the command, a subprocess) over a SQLite file and over a PostgreSQL database, the
agents running in another process (``_other_process``, a subprocess over the same store), and
Debian's headless Chromium driven by Playwright.

On each store:

* the sessions list opens a run, which shows its transcript, timeline and waterfall; markup a
  model or a tool produced is shown as text;
* a run going on in the other process updates the open page without a reload;
* a pending tool call approved in the inbox — which says the decision is only recorded, since
  this server does not have the agent — lets the run finish in the other process, the tool run
  exactly once there; a rejected one finishes it without the tool;
* a sub-agent's call is decided through the calling run, its chain shown on the card;
* with ``--agents`` the inbox says the tool runs in the server, and it does, once;
* bound beyond loopback with a token, a request without it is refused.

The PostgreSQL cases skip without ``PRISM_TEST_POSTGRES_URL`` (each creates and drops a database
of its own); the browser cases skip naming the missing binary, or fail under
``PRISM_REQUIRE_BROWSER=1``. Nothing asserts on time: waits are guards against a hang.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _other_process import LIVE_TEXT, PAID_TEXT, REFUSED_TEXT
from _seed import PROBE, seed
from browser_support import new_page, require_browser

from prism.stores import open_store

PG_ENV = "PRISM_TEST_POSTGRES_URL"
HERE = Path(__file__).resolve().parent
SRC = str(Path(__import__("prism").__file__).resolve().parent.parent)
TOKEN = "process-token-0123456789abcdef"
GUARD_S = 60.0  # a hang guard only
WAIT_MS = 20_000  # the browser's waits, the same guard


# --------------------------------------------------------------------------- the store


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The store of one test, created (and migrated) before any process opens it: a SQLite
    file, or a PostgreSQL database made for the test and dropped after it."""
    require_browser()
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'prism.db'}"
        await (await open_store(url)).aclose()
        yield url
        return
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"the PostgreSQL browser tests need {PG_ENV} (a server where they may "
                    "create a database)")
    import psycopg

    name = f"prism_serve_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(base, autocommit=True) as conn:
        await conn.execute(f'CREATE DATABASE "{name}"')
    url = base.rsplit("/", 1)[0] + f"/{name}"
    try:
        await (await open_store(url)).aclose()
        yield url
    finally:
        async with await psycopg.AsyncConnection.connect(base, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRISM_")}
    env["PYTHONPATH"] = os.pathsep.join([SRC, str(HERE), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


# --------------------------------------------------------------------------- the processes


class Serve:
    """``prism serve --store URL --port 0 …`` as a subprocess; :meth:`stop` is its Ctrl-C."""

    def __init__(self, url: str, *argv: str, **env: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "prism", "serve", "--store", url, "--port", "0", *argv],
            env=_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.base = ""

    async def __aenter__(self) -> Serve:
        assert self.proc.stdout is not None
        try:
            line = await asyncio.wait_for(asyncio.to_thread(self.proc.stdout.readline), GUARD_S)
        except TimeoutError:
            self.proc.kill()
            line = ""
        if not line.startswith("prism serve: http://"):
            self.proc.kill()
            _, err = self.proc.communicate()
            raise AssertionError(f"prism serve did not start: {line!r} {err}")
        port = line.split()[2].rstrip("/").rsplit(":", 1)[1]
        self.base = f"http://127.0.0.1:{port}"  # also when it is bound to 0.0.0.0
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = await asyncio.to_thread(self.proc.communicate, timeout=GUARD_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        self.stderr = err
        if exc[0] is None:
            assert self.proc.returncode == 0, err
            assert "Traceback" not in err, err


class Other:
    """The other process: ``python -m _other_process URL SCENARIO TOOL_LOG …``."""

    def __init__(self, url: str, scenario: str, log: Path, *argv: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "_other_process", url, scenario, str(log), *argv],
            env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )

    async def said(self, event: str) -> dict[str, Any]:
        """The next line it prints, which must be ``event``."""
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(self.proc.stdout.readline), GUARD_S)
        if not line:
            _, err = self.proc.communicate(timeout=GUARD_S)
            raise AssertionError(f"the other process ended (exit {self.proc.returncode}): {err}")
        said = json.loads(line)
        assert said["event"] == event, said
        return dict(said)

    def release(self) -> None:
        """Let the ``live`` scenario's tool finish."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    async def ended(self) -> None:
        code = await asyncio.to_thread(self.proc.wait, GUARD_S)
        assert code == 0, self.proc.stderr.read() if self.proc.stderr else code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


def _tool_calls(log: Path) -> list[dict[str, Any]]:
    """The tool calls that ran (each appended a line)."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


async def _seeded(url: str) -> Any:
    store = await open_store(url)
    try:
        return await seed(store)
    finally:
        await store.aclose()


async def _run_page(chromium: Any, base: str, run_id: str) -> Any:
    """The run's page, marked so that a reload would show (the mark would be gone)."""
    page = await new_page(chromium)
    await page.goto(f"{base}/runs/{run_id}")
    await page.wait_for_selector("#run-live.connected", timeout=WAIT_MS)
    await page.evaluate("window.__notReloaded = true")
    return page


async def _status(page: Any, status: str) -> None:
    await page.locator("#run-status").filter(has_text=status).wait_for(timeout=WAIT_MS)


async def _not_reloaded(page: Any) -> bool:
    return bool(await page.evaluate("window.__notReloaded === true"))


# --------------------------------------------------------------------------- the tests


async def test_the_sessions_list_opens_a_run_with_its_timeline_and_waterfall(
    store_url: str, chromium: Any
) -> None:
    seeded = await _seeded(store_url)
    async with Serve(store_url) as serve:
        page = await new_page(chromium)
        await page.goto(serve.base + "/")
        assert await page.locator("h1").inner_text() == "Sessions"
        await page.get_by_role("link", name="Are example.org/a and /b up?").click()
        await page.wait_for_url("**/sessions/*")
        await page.locator("table a.mono").first.click()
        await page.wait_for_url(f"**/runs/{seeded.parallel.run_id}")
        assert await page.locator(".wf-row:not(.wf-axisrow)").count() == 4  # 2 attempts, 2 calls
        assert await page.locator(".wf-track rect").count() == 4
        assert await page.locator(".tl-item.call").count() == 2
        assert await page.locator(".tl-item.attempt").count() == 2
        assert "Both pages are up." in await page.locator(".transcript-panel").inner_text()

        # the XSS probe: in a message, a tool argument, a tool result and an answer, as text
        await page.goto(f"{serve.base}/runs/{seeded.probe.run_id}")
        for details in await page.locator("details").all():
            await details.evaluate("d => { d.open = true; }")
        assert await page.evaluate("typeof window.__xss") == "undefined"
        assert await page.get_by_text(PROBE, exact=False).count() >= 4
        assert await page.locator("main script").count() == 0
        assert page.errors == []


async def test_a_run_in_another_process_updates_the_open_page_live(
    store_url: str, chromium: Any, tmp_path: Path
) -> None:
    log = tmp_path / "tools.jsonl"
    async with Serve(store_url) as serve:
        other = Other(store_url, "live", log)
        try:
            run_id = (await other.said("started"))["run_id"]
            page = await _run_page(chromium, serve.base, run_id)
            await _status(page, "running")
            assert await page.locator(".tl-item.call .badge").first.inner_text() == "running"
            other.release()
            await _status(page, "succeeded")
            await page.get_by_text(LIVE_TEXT).first.wait_for(timeout=WAIT_MS)
            assert await page.locator(".tl-item.call .badge").first.inner_text() == "finished"
            assert await page.locator(".wf-track rect").count() == 3
            assert await _not_reloaded(page)
            assert (await other.said("finished"))["status"] == "succeeded"
            await other.ended()
            assert [c["tool"] for c in _tool_calls(log)] == ["lookup"]
            assert page.errors == []
        finally:
            other.kill()


async def _decide(page: Any, approval_id: str, outcome: str, reason: str = "") -> str:
    card = page.locator(f"#d-{approval_id}")
    await card.get_by_label(outcome).check()
    if reason:
        await card.get_by_label("Reason").fill(reason)
    await card.get_by_role("button", name="Decide").click()
    result = card.locator(".result")
    await result.filter(has_text=" ").wait_for(timeout=WAIT_MS)
    await page.wait_for_function(
        "el => !el.textContent.startsWith('Deciding')", arg=await result.element_handle(),
        timeout=WAIT_MS,
    )
    return str(await result.inner_text())


@pytest.mark.parametrize("outcome", ["Allow once", "Reject once"])
async def test_a_decision_in_the_inbox_finishes_the_run_in_the_other_process(
    store_url: str, chromium: Any, tmp_path: Path, outcome: str
) -> None:
    """This server does not have the agent: the inbox says the decision is only recorded; the
    other process, which waits for it, applies it and runs to the end — the tool once when
    allowed, never when rejected — while the run's page follows it."""
    log = tmp_path / "tools.jsonl"
    async with Serve(store_url) as serve:
        other = Other(store_url, "desk", log)
        try:
            waiting = await other.said("suspended")
            run_page = await _run_page(chromium, serve.base, waiting["run_id"])
            await _status(run_page, "suspended")
            assert "Waiting for 1 approval" in await run_page.locator(".banner").inner_text()

            inbox = await new_page(chromium)
            await inbox.goto(serve.base + "/inbox")
            card = inbox.locator(f"#d-{waiting['approval_id']}")
            assert "pay" in await card.locator("h2").inner_text()
            assert await card.locator(".mode-recorded").inner_text() == "Recorded"
            sentence = await card.locator(".mode-text").inner_text()
            assert "does not have the run's agent (desk" in sentence
            assert f"prism resume {waiting['run_id']} --recorded" in sentence
            assert '"amount": 5' in await card.locator("pre.json").inner_text()

            said = await _decide(inbox, waiting["approval_id"], outcome, reason="Not this month")
            assert said.startswith("Recorded"), said
            finished = await other.said("finished")
            await other.ended()
            assert finished["status"] == "succeeded"
            calls = _tool_calls(log)
            if outcome == "Allow once":
                assert finished["text"] == PAID_TEXT
                assert [(c["tool"], c["pid"]) for c in calls] == [("pay", other.proc.pid)]
            else:
                assert finished["text"] == REFUSED_TEXT and calls == []

            await _status(run_page, "succeeded")
            await run_page.get_by_text(finished["text"]).first.wait_for(timeout=WAIT_MS)
            approval = "allowed" if outcome == "Allow once" else "rejected"
            tags = run_page.locator(".tl-item.call .tag").filter(has_text=f"approval: {approval}")
            await tags.first.wait_for(timeout=WAIT_MS)
            assert await run_page.locator(".banner").count() == 0  # nothing waits any more
            assert await _not_reloaded(run_page)

            await inbox.reload()
            assert await inbox.locator(f"#d-{waiting['approval_id']}").count() == 0
            assert "Nothing waits for a decision" in await inbox.locator("#inbox-cards").inner_text()
            assert run_page.errors == [] and inbox.errors == []
        finally:
            other.kill()
    assert len(_tool_calls(log)) == (1 if outcome == "Allow once" else 0)


async def test_a_sub_agents_call_is_decided_through_the_calling_run(
    store_url: str, chromium: Any, tmp_path: Path
) -> None:
    log = tmp_path / "tools.jsonl"
    async with Serve(store_url) as serve:
        other = Other(store_url, "lead", log)
        try:
            waiting = await other.said("suspended")
            inbox = await new_page(chromium)
            await inbox.goto(serve.base + "/inbox")
            card = inbox.locator(f"#d-{waiting['approval_id']}")
            heading = " ".join((await card.locator("h2").inner_text()).split())
            assert heading == "pay called by payer"
            facts = await card.locator("dl.kv").inner_text()
            assert waiting["run_id"] in facts and "lead" in facts  # decided on the calling run
            chain = card.locator(".chain")
            assert "Sub-agent call, via" in await chain.inner_text()
            link = chain.get_by_role("link")
            assert " ".join((await link.inner_text()).split()) == "payer (call_payer)"
            child_run = str(await link.get_attribute("href")).rsplit("/", 1)[1]
            assert child_run != waiting["run_id"]
            assert await card.get_by_text("Edit arguments").count() == 0  # not from the parent
            assert "does not have the run's agent (lead" in await card.locator(".mode-text").inner_text()

            said = await _decide(inbox, waiting["approval_id"], "Allow once")
            assert said.startswith("Recorded"), said
            finished = await other.said("finished")
            await other.ended()
            assert (finished["status"], finished["text"]) == ("succeeded", "The payer is done.")
            assert [(c["tool"], c["pid"]) for c in _tool_calls(log)] == [("pay", other.proc.pid)]

            page = await new_page(chromium)
            await page.goto(f"{serve.base}/runs/{waiting['run_id']}")
            child = page.locator(".child-run").filter(has_text=child_run)
            assert "succeeded" in await child.inner_text()
            await child.get_by_role("link", name=child_run).click()
            await page.wait_for_url(f"**/runs/{child_run}")
            await _status(page, "succeeded")
            assert "approval: allowed" in await page.locator(".timeline-panel").inner_text()
            assert inbox.errors == [] and page.errors == []
        finally:
            other.kill()


async def test_with_the_agents_the_inbox_runs_the_tool_in_the_server(
    store_url: str, chromium: Any, tmp_path: Path
) -> None:
    log = tmp_path / "tools.jsonl"
    other = Other(store_url, "desk", log, "--leave-suspended")
    try:
        waiting = await other.said("suspended")
        await other.ended()
    finally:
        other.kill()
    async with Serve(store_url, "--agents", "_other_process:REGISTRY",
                     SERVE_TEST_TOOL_LOG=str(log)) as serve:
        inbox = await new_page(chromium)
        await inbox.goto(serve.base + "/inbox")
        card = inbox.locator(f"#d-{waiting['approval_id']}")
        assert await card.locator(".mode-in_process").inner_text() == "Runs here"
        sentence = await card.locator(".mode-text").inner_text()
        assert "This process has the run's agent (desk, from --agents)" in sentence
        said = await _decide(inbox, waiting["approval_id"], "Allow once")
        assert said.startswith("Allowed once by prism serve — the run goes on"), said
        page = await new_page(chromium)
        await page.goto(f"{serve.base}/runs/{waiting['run_id']}")
        await _status(page, "succeeded")
        await page.get_by_text(PAID_TEXT).first.wait_for(timeout=WAIT_MS)
        assert [(c["tool"], c["pid"]) for c in _tool_calls(log)] == [("pay", serve.proc.pid)]
        assert inbox.errors == [] and page.errors == []
    assert len(_tool_calls(log)) == 1


async def test_bound_beyond_loopback_a_request_without_the_token_is_refused(
    store_url: str, chromium: Any, tmp_path: Path
) -> None:
    other = Other(store_url, "desk", tmp_path / "tools.jsonl", "--leave-suspended")
    try:
        waiting = await other.said("suspended")
        await other.ended()
    finally:
        other.kill()
    async with Serve(store_url, "--host", "0.0.0.0", PRISM_SERVE_TOKEN=TOKEN) as serve:
        async with httpx.AsyncClient(base_url=serve.base, timeout=GUARD_S) as client:
            page = await client.get("/sessions", headers={"accept": "text/html"})
            assert page.status_code == 303 and page.headers["location"].startswith("/login")
            for path in ("/inbox/list", f"/runs/{waiting['run_id']}/stream", "/runs"):
                refused = await client.get(path, headers={"accept": "application/json"})
                assert refused.status_code == 401, path
                assert "Pay 5 EUR" not in refused.text
            decide = await client.post(
                "/inbox/decide",
                data={"run_id": waiting["run_id"], "approval_id": waiting["approval_id"],
                      "outcome": "allow_once"},
                headers={"origin": serve.base},
            )
            assert decide.status_code == 401
            bearer = await client.get("/sessions", headers={"authorization": f"Bearer {TOKEN}"})
            assert bearer.status_code == 200 and "Pay 5 EUR" in bearer.text

        browser = await new_page(chromium)
        await browser.goto(serve.base + "/inbox")
        assert "/login" in browser.url and TOKEN not in browser.url
        assert await browser.locator(f"#d-{waiting['approval_id']}").count() == 0
        await browser.get_by_label("Access token").fill(TOKEN)
        await browser.get_by_role("button", name="Sign in").click()
        await browser.wait_for_url("**/inbox")
        assert await browser.locator(f"#d-{waiting['approval_id']}").count() == 1
        assert browser.errors == []
    assert "plain HTTP" in serve.stderr
