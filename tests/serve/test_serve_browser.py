"""The inspector in a real headless Chromium (Debian's, driven by Playwright), served by uvicorn
on 127.0.0.1 over a SQLite store filled by real runs: pages render with their timeline and
waterfall, markup from runs is shown as text, every control is reachable by keyboard and named
in the accessibility snapshot, no page scrolls sideways at 1280 or 390 px, light and dark both
apply, a running run updates without a reload, the token is exchanged for a cookie, and a whole
session opens no socket beyond loopback.

Skipped, naming the missing binary, when ``/usr/bin/chromium`` is absent — unless
``PRISM_REQUIRE_BROWSER=1``, which makes that a failure.

The fixtures use ``playwright.async_api`` directly: the ``pytest-playwright-asyncio`` fixtures
are session-scoped on a session event loop, and this suite runs every test on its own loop
(``asyncio_mode=auto`` with function-scoped loops), so a browser is launched per test.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from _seed import PROBE, Seeded
from browser_support import new_page, require_browser

import prism
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.stores import SqliteStore

TOKEN = "browser-token-0123456789abcdef"
SIZES = ((1280, 800), (390, 844))


# ---------------------------------------------------------------- sockets opened in-process

_CONNECTS: list[Any] = []
_WATCHING = threading.Event()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect" and _WATCHING.is_set():
        _CONNECTS.append(args[1])


sys.addaudithook(_audit)


def _loopback(address: Any) -> bool:
    if isinstance(address, tuple) and address:
        host = str(address[0])
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return host == "localhost"
    return isinstance(address, (str, bytes))  # a unix socket path stays on this machine


# ---------------------------------------------------------------- the server


class Served:
    """The app under uvicorn on a free loopback port, in a thread with its own event loop."""

    def __init__(self, path: Path, **options: Any) -> None:
        self.path = path
        self.options = options
        self.port = 0
        self._ready = threading.Event()
        self._server: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        import uvicorn

        from prism.serve import create_app

        async def main() -> None:
            store = await SqliteStore(str(self.path)).open()
            try:
                options = dict(self.options)
                factory = options.pop("agents_factory", None)
                if factory is not None:
                    options["agents"] = factory(store)
                app = create_app(store, **options)
                sock = socket.socket()
                sock.bind(("127.0.0.1", 0))
                self.port = sock.getsockname()[1]
                config = uvicorn.Config(app, log_level="warning", access_log=False)
                ready = self._ready

                class Server(uvicorn.Server):
                    async def startup(self, sockets: Any = None) -> None:
                        await super().startup(sockets=sockets)
                        ready.set()

                self._server = Server(config)
                await self._server.serve(sockets=[sock])
            finally:
                await store.aclose()

        try:
            asyncio.run(main())
        except BaseException as exc:  # reported by start()
            self._error = exc
            self._ready.set()

    def start(self) -> Served:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None or not self.port:
            raise RuntimeError(f"the server did not start: {self._error!r}")
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        self._thread.join(10)


@pytest.fixture(scope="module")
def served(seeded: tuple[Path, Seeded]) -> Iterator[Served]:
    require_browser()
    server = Served(seeded[0], poll_interval=0.1).start()
    try:
        yield server
    finally:
        server.stop()


async def _run_id(seeded: tuple[Path, Seeded], agent: str) -> str:
    store = await SqliteStore(str(seeded[0])).open()
    try:
        runs = await store.list_run_summaries(agent_id=agent, limit=5)
        return runs.items[0].run_id
    finally:
        await store.aclose()


# ---------------------------------------------------------------- the tests


async def test_a_run_page_shows_transcript_beside_its_timeline_and_a_waterfall(
    served: Served, chromium: Any, seeded: tuple[Path, Seeded]
) -> None:
    page = await new_page(chromium)
    await page.goto(served.base + "/sessions")
    assert await page.locator("h1").inner_text() == "Sessions"
    await page.get_by_role("link", name="Are example.org/a and /b up?").click()
    await page.wait_for_url("**/sessions/*")
    await page.locator("table a.mono").first.click()
    await page.wait_for_url("**/runs/*")
    bars = page.locator(".wf-row:not(.wf-axisrow)")
    assert await bars.count() == 4
    assert await page.locator(".wf-track rect").count() == 4
    transcript = await page.locator(".transcript-panel").bounding_box()
    timeline = await page.locator(".timeline-panel").bounding_box()
    assert transcript and timeline
    assert timeline["x"] > transcript["x"] + transcript["width"] - 1  # side by side
    assert abs(timeline["y"] - transcript["y"]) < 2
    assert await page.locator(".tl-item.call").count() == 2
    assert page.errors == []
    phone = await new_page(chromium, 390, 844)
    await phone.goto(page.url)
    transcript = await phone.locator(".transcript-panel").bounding_box()
    timeline = await phone.locator(".timeline-panel").bounding_box()
    assert transcript and timeline and timeline["y"] >= transcript["y"] + transcript["height"]


async def test_markup_from_runs_renders_as_text(
    served: Served, chromium: Any, seeded: tuple[Path, Seeded]
) -> None:
    page = await new_page(chromium)
    await page.goto(f"{served.base}/runs/{seeded[1].probe.run_id}")
    for details in await page.locator("details").all():
        await details.evaluate("d => { d.open = true; }")
    assert await page.evaluate("typeof window.__xss") == "undefined"
    shown = page.get_by_text(PROBE, exact=False)
    assert await shown.count() >= 4  # the message, the argument, the result, the answer
    assert await page.locator(".transcript script, .timeline-panel script").count() == 0
    assert page.errors == []


async def test_no_page_scrolls_sideways_at_1280_or_390_px(
    served: Served, chromium: Any, seeded: tuple[Path, Seeded]
) -> None:
    runs = [seeded[1].simple.run_id, seeded[1].parallel.run_id, seeded[1].probe.run_id]
    runs += [seeded[1].fallback.run_id, seeded[1].waiting.run_id, seeded[1].handoff.run_id]
    paths = ["/sessions", "/runs", "/inbox", "/usage", f"/sessions/{seeded[1].parent.session_id}"]
    paths += [f"/runs/{r}" for r in runs]
    for width, height in SIZES:
        page = await new_page(chromium, width, height)
        for path in paths:
            await page.goto(served.base + path)
            for details in await page.locator("details").all():
                await details.evaluate("d => { d.open = true; }")
            overflow = await page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 0, f"{path} scrolls sideways by {overflow}px at {width}px"
        assert page.errors == []


_FOCUSABLE = "a[href], button, input:not([type=hidden]), select, textarea, summary"


async def test_every_control_is_reachable_by_keyboard_and_named(
    served: Served, chromium: Any, seeded: tuple[Path, Seeded]
) -> None:
    paths = ["/sessions", f"/runs/{seeded[1].parent.run_id}", "/inbox", "/usage"]
    page = await new_page(chromium)
    for path in paths:
        await page.goto(served.base + path)
        count = await page.evaluate(
            """sel => {
                let n = 0;
                for (const el of document.querySelectorAll(sel)) {
                    if (el.disabled || !el.checkVisibility()) continue;
                    if (el.type === 'radio' && !el.checked) continue;  // a group is one stop
                    el.dataset.k = String(n++);
                }
                return n;
            }""",
            _FOCUSABLE,
        )
        assert count > 0
        reached: set[str] = set()
        for _ in range(count + 10):
            await page.keyboard.press("Tab")
            key = await page.evaluate("document.activeElement && document.activeElement.dataset.k")
            if key is not None:
                reached.add(key)
        missing = await page.evaluate(
            """keys => Array.from(document.querySelectorAll('[data-k]'))
                .filter(el => !keys.includes(el.dataset.k)).map(el => el.outerHTML.slice(0, 120))""",
            sorted(reached),
        )
        assert missing == [], f"{path}: not reachable by Tab: {missing}"
        snapshot = await page.locator("body").aria_snapshot()
        unnamed = [
            line.strip()
            for line in snapshot.splitlines()
            if any(
                line.strip().startswith(f"- {role}")
                and not line.strip().startswith(f'- {role} "')
                for role in ("link", "button", "textbox", "combobox", "checkbox", "radio", "searchbox")
            )
        ]
        assert unnamed == [], f"{path}: controls without an accessible name: {unnamed}"
    assert page.errors == []


async def test_light_and_dark_follow_the_color_scheme(served: Served, chromium: Any) -> None:
    colours = []
    for scheme in ("light", "dark"):
        page = await new_page(chromium, color_scheme=scheme)
        await page.goto(served.base + "/sessions")
        colours.append(await page.evaluate("getComputedStyle(document.body).backgroundColor"))
        badge = page.locator(".badge").first
        assert (await badge.inner_text()).strip() != ""  # the status is text, not colour alone
    assert colours[0] != colours[1]


async def test_a_running_run_updates_without_a_reload(
    served: Served, chromium: Any, seeded: tuple[Path, Seeded]
) -> None:
    """The run goes on in this test's event loop over its own connection to the store file —
    as another process would — while the page follows it over server-sent events."""
    release = asyncio.Event()

    @prism.tool
    async def slow_lookup(topic: str) -> str:
        """Look a topic up (waits until the test releases it)."""
        await release.wait()
        return f"notes about {topic}"

    store = await SqliteStore(str(seeded[0])).open()
    started: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def on_event(event: Any) -> None:
        if event.type == "tool_execution_started" and not started.done():
            started.set_result(event.run_id)

    agent = prism.create_agent(
        name="live-agent",
        model={"provider": "mock", "model": "demo-live"},
        provider=create_mock_provider(
            turns=[
                [provider_tool_call("s1", "slow_lookup", {"topic": "tides"}), provider_done()],
                [provider_text_delta("Tides follow the moon."), provider_done()],
            ]
        ),
        tools=[slow_lookup],
        store=store,
        run_ledger=store,
    )
    session = agent.create_session(on_event=on_event)
    task = asyncio.ensure_future(session.run("Tell me about tides"))
    try:
        run_id = await asyncio.wait_for(started, 10)
        page = await new_page(chromium)
        await page.goto(f"{served.base}/runs/{run_id}")
        assert "running" in await page.locator("#run-status").inner_text()
        await page.wait_for_selector("#run-live.connected", timeout=10000)
        release.set()
        result = await asyncio.wait_for(task, 10)
        assert result.status == "succeeded"
        await page.wait_for_selector("#run-status :text('succeeded')", timeout=10000)
        await page.get_by_text("Tides follow the moon.").wait_for(timeout=10000)
        assert await page.locator(".tl-item.call .badge").first.inner_text() == "finished"
        assert page.errors == []
    finally:
        release.set()
        if not task.done():
            task.cancel()
        await store.aclose()


async def test_the_token_is_exchanged_once_for_a_cookie(
    seeded: tuple[Path, Seeded], chromium: Any
) -> None:
    server = Served(seeded[0], token=TOKEN).start()
    try:
        page = await new_page(chromium)
        await page.goto(server.base + "/usage")
        assert "/login" in page.url and TOKEN not in page.url
        await page.get_by_label("Access token").fill("not-the-token-0123456789")
        await page.get_by_role("button", name="Sign in").click()
        assert await page.get_by_role("alert").inner_text() != ""
        await page.get_by_label("Access token").fill(TOKEN)
        await page.get_by_role("button", name="Sign in").click()
        await page.wait_for_url("**/usage")
        assert TOKEN not in page.url
        (cookie,) = await page.context.cookies()
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["value"] != TOKEN
        assert await page.evaluate("document.cookie") == ""  # not readable by script
        assert TOKEN not in await page.content()
        await page.get_by_role("button", name="Sign out").click()
        await page.wait_for_url("**/login")
        assert await page.context.cookies() == []
    finally:
        server.stop()


async def test_a_whole_session_opens_no_socket_beyond_loopback(
    served: Served, chromium: Any, seeded: tuple[Path, Seeded]
) -> None:
    requested: list[str] = []
    page = await new_page(chromium)

    async def watch(route: Any) -> None:
        host = urlsplit(route.request.url).hostname or ""
        requested.append(route.request.url)
        if host not in ("127.0.0.1", "localhost"):
            await route.abort()
        else:
            await route.continue_()

    await page.context.route("**/*", watch)
    _CONNECTS.clear()
    _WATCHING.set()
    try:
        await page.goto(served.base + "/sessions")
        for name in ("Runs", "Inbox", "Usage", "Sessions"):
            await page.get_by_role("navigation", name="Main").get_by_role("link", name=name).click()
            await page.wait_for_load_state("networkidle")
        await page.goto(f"{served.base}/runs/{seeded[1].parent.run_id}")
        await page.get_by_role("link", name=seeded[1].child_run_id).first.click()
        await page.wait_for_load_state("networkidle")
        await page.goto(f"{served.base}/runs/{seeded[1].waiting.run_id}")
        await page.wait_for_timeout(500)  # the live stream of a waiting run polls meanwhile
    finally:
        _WATCHING.clear()
    foreign = [u for u in requested if (urlsplit(u).hostname or "") not in ("127.0.0.1", "localhost")]
    assert requested and foreign == []
    assert [a for a in _CONNECTS if not _loopback(a)] == []


async def test_the_inbox_checks_edited_arguments_as_typed_and_decides_in_place(
    fresh_seeded: tuple[Path, Seeded], chromium: Any
) -> None:
    """With the run's agent the schema is known: a wrong type is flagged while typing; a
    decision sent from the page (fetch) is applied and the run goes on, the card says so."""
    from _seed import desk_agent

    path, seeded = fresh_seeded
    answer = [[provider_text_delta("Paid."), provider_done()]]
    server = Served(path, agents_factory=lambda store: {"desk": desk_agent(store, answer)}).start()
    try:
        page = await new_page(chromium)
        await page.goto(server.base + "/inbox")
        (pending,) = seeded.waiting.interruption.pending_decisions
        card = page.locator(f"#d-{pending.approval_id}")
        await card.get_by_text("Edit arguments").click()
        box = card.get_by_label("Arguments (a JSON object)")
        await box.fill('{"invoice": "seven"}')
        status = card.locator(".argcheck")
        await status.filter(has_text="/invoice").wait_for(timeout=10000)
        assert await box.get_attribute("aria-invalid") == "true"
        await box.fill('{"invoice": 8, "currency": "EUR", "note": "edited"}')
        await status.filter(has_text="Valid against the tool's schema").wait_for(timeout=10000)
        await card.get_by_label("Allow once").check()
        await card.get_by_role("button", name="Decide").click()
        result = card.locator(".result")
        await result.filter(has_text="the run goes on").wait_for(timeout=15000)
        said = await result.inner_text()
        assert said == "Allowed once by prism serve — the run goes on", said
        assert await card.get_by_role("button", name="Decide").is_disabled()
        # the card shows its outcome, no longer a waiting badge; the nav counts one fewer
        assert await card.locator(".badge.state").inner_text() == "Allowed once"
        assert await card.locator(".badge.tone-wait").count() == 0
        counter = page.locator("#inbox-count")
        assert (await counter.inner_text()).startswith("1")
        await page.goto(f"{server.base}/runs/{seeded.waiting.run_id}")
        await page.locator("#run-status").filter(has_text="succeeded").wait_for(timeout=15000)
        assert "paid 8 EUR" in await page.locator(".transcript").inner_text()
        assert page.errors == []
    finally:
        server.stop()


async def test_after_the_last_decision_the_inbox_says_so_without_a_prompt(
    tmp_path: Path, chromium: Any
) -> None:
    """The only waiting call is decided from the page: its card keeps its outcome instead of
    the waiting badge, the nav's count disappears and no "Show the new list" is offered for
    an inbox that is simply empty now."""
    from _seed import _call, desk_agent

    path = tmp_path / "one.db"
    store = await SqliteStore(str(path)).open()
    try:
        waiting = await desk_agent(store, [_call("w1", "pay", {"invoice": 3})]).create_session().run(
            "Pay invoice 3"
        )
    finally:
        await store.aclose()
    answer = [[provider_text_delta("Paid."), provider_done()]]
    server = Served(
        path, poll_interval=0.1, agents_factory=lambda s: {"desk": desk_agent(s, answer)}
    ).start()
    try:
        page = await new_page(chromium)
        await page.goto(server.base + "/inbox")
        counter = page.locator("#inbox-count")
        assert (await counter.inner_text()).startswith("1")
        (pending,) = waiting.interruption.pending_decisions
        card = page.locator(f"#d-{pending.approval_id}")
        await card.get_by_role("button", name="Decide").click()
        result = card.locator(".result")
        await result.filter(has_text="the run goes on").wait_for(timeout=15000)
        assert await result.inner_text() == "Allowed once by prism serve — the run goes on"
        await page.locator("#inbox-status").filter(has_text="No pending decisions.").wait_for(
            timeout=10000
        )
        assert await counter.is_hidden()
        assert await page.locator("#inbox-refresh").is_hidden()
        assert await card.locator(".badge.state").inner_text() == "Allowed once"
        assert "waiting" not in await card.locator(".card-head").inner_text()
        # a later visit: no count, the empty inbox names the command line's way to wait here
        await page.goto(server.base + "/inbox")
        assert await counter.is_hidden()
        assert "prism run --approve-tools" in await page.locator("#inbox-cards").inner_text()
        assert page.errors == []
    finally:
        server.stop()


async def test_a_branched_session_shows_its_current_branch_and_opens_the_others(
    tmp_path: Path, chromium: Any
) -> None:
    """A session with a fork made by ``checkout()``: the transcript is the current branch, the
    other branch opens in place from its summary, and nothing scrolls sideways (STORE-5)."""
    require_browser()
    path = tmp_path / "branches.db"
    store = await SqliteStore(str(path)).open()
    try:
        replies = ("Hi Ada.", "Paris.", "Lyon, " + "a long answer " * 20, "Marseille.")
        agent = prism.create_agent(
            model={"provider": "mock", "model": "demo"},
            provider=create_mock_provider(
                turns=[[provider_text_delta(text), provider_done()] for text in replies]
            ),
            store=store,
        )
        session = agent.create_session("branched")
        await session.run("I am Ada.")
        fork = session.leaf_id
        await session.run("Capital of France?")
        await session.run("Second city of France? " + "with a long question " * 10)
        assert fork is not None
        await session.checkout(fork)
        await session.run("And the third?")
    finally:
        await store.aclose()
    server = Served(path).start()
    try:
        for width, height in SIZES:
            page = await new_page(chromium, width, height)
            await page.goto(f"{server.base}/sessions/branched")
            transcript = page.locator('section[aria-labelledby="transcript-h"] .transcript')
            assert "Capital of France?" not in await transcript.inner_text()
            branch = page.locator("details.branch")
            assert await branch.count() == 1
            assert not await branch.locator("text=Capital of France?").is_visible()
            await branch.locator("summary").click()
            assert await branch.locator("text=Capital of France?").is_visible()
            await branch.get_by_role("link", name=fork).click()
            assert page.url.endswith(f"#e-{fork}")
            overflow = await page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 0, f"scrolls sideways by {overflow}px at {width}px"
            assert page.errors == []
    finally:
        server.stop()
