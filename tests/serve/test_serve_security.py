"""The inspector's security middleware, through the app over a real store: the Host allow-list
(DNS rebinding) even on loopback, the refusal of clients beyond loopback without a token, the
token exchanged once for an HttpOnly SameSite=Strict cookie (never in a URL, a page or a log),
Origin and CSRF checks on every POST, and the methods served."""

from __future__ import annotations

import logging
import re

import pytest
from serve_support import BASE, client_for

from prism.serve import create_app
from prism.serve._security import COOKIE_NAME, SecurityPolicy, is_loopback_host
from prism.stores import SqliteStore

HTML = {"accept": "text/html"}
TOKEN = "tok-0123456789abcdef-serve"
REMOTE = ("203.0.113.9", 40000)


async def test_a_foreign_host_header_is_refused_even_on_loopback(store: SqliteStore) -> None:
    async with client_for(create_app(store)) as client:
        for host in ("evil.example", "evil.example:8765", "127.0.0.1.evil.example"):
            response = await client.get("/sessions", headers={**HTML, "host": host})
            assert response.status_code == 400 and "Invalid Host" in response.text
        for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LOCALHOST"):
            response = await client.get("/sessions", headers={**HTML, "host": host})
            assert response.status_code == 200, host


async def test_a_client_beyond_loopback_is_refused_without_a_token(store: SqliteStore) -> None:
    async with client_for(create_app(store), client=REMOTE) as client:
        response = await client.get("/sessions", headers=HTML)
    assert response.status_code == 403 and "--token" in response.text
    assert response.headers["content-security-policy"]


async def test_a_token_is_exchanged_once_for_a_strict_httponly_cookie(
    store: SqliteStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    app = create_app(store, token=TOKEN, allowed_hosts=["inspector.lan"])
    async with client_for(app, client=REMOTE) as client:
        # without the cookie: the page sends to /login (keeping where it was going)
        first = await client.get("/runs?status=failed", headers=HTML)
        assert first.status_code == 303
        assert first.headers["location"] == "/login?next=%2Fruns%3Fstatus%3Dfailed"
        assert (await client.get("/runs/x/stream")).status_code == 401
        login = await client.get("/login?next=/runs", headers=HTML)
        assert login.status_code == 200 and 'type="password"' in login.text
        csrf = re.search(r'name="csrf" value="([^"]+)"', login.text)
        assert csrf is not None
        origin = {"origin": BASE}
        wrong = await client.post(
            "/login",
            data={"csrf": csrf.group(1), "token": "wrong-token-0123456789", "next": "/runs"},
            headers=origin,
        )
        assert wrong.status_code == 401 and COOKIE_NAME not in wrong.headers.get("set-cookie", "")
        right = await client.post(
            "/login", data={"csrf": csrf.group(1), "token": TOKEN, "next": "/runs"}, headers=origin
        )
        assert right.status_code == 303 and right.headers["location"] == "/runs"
        cookie = right.headers["set-cookie"]
        assert cookie.startswith(f"{COOKIE_NAME}=") and TOKEN not in cookie
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        # the cookie opens every page, the live stream included
        page = await client.get("/runs", headers=HTML)
        assert page.status_code == 200 and TOKEN not in page.text
        assert 'action="/logout"' in page.text
        # a foreign redirect target is ignored
        again = await client.post(
            "/login", data={"csrf": csrf.group(1), "token": TOKEN, "next": "//evil.example/"},
            headers=origin,
        )
        assert again.headers["location"] == "/sessions"
    assert TOKEN not in caplog.text


async def test_a_bearer_header_works_and_a_bad_cookie_does_not(store: SqliteStore) -> None:
    app = create_app(store, token=TOKEN)
    async with client_for(app, client=REMOTE) as client:
        ok = await client.get("/sessions", headers={**HTML, "authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200
        client.cookies.set(COOKIE_NAME, TOKEN)  # the token itself is not the session value
        bad = await client.get("/sessions")
        assert bad.status_code == 401


async def test_posts_check_origin_and_csrf(store: SqliteStore) -> None:
    async with client_for(create_app(store)) as client:
        page = (await client.get("/sessions", headers=HTML)).text
        csrf = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
        assert csrf is not None
        form = {"csrf": csrf.group(1), "run_id": "r", "approval_id": "a", "outcome": "allow_once"}
        json_accept = {"accept": "application/json"}
        no_origin = await client.post("/inbox/decide", data=form, headers=json_accept)
        assert no_origin.status_code == 403
        foreign = await client.post(
            "/inbox/decide", data=form, headers={**json_accept, "origin": "http://evil.example"}
        )
        assert foreign.status_code == 403
        null_cross_site = await client.post(
            "/inbox/decide", data=form,
            headers={**json_accept, "origin": "null", "sec-fetch-site": "cross-site"},
        )
        assert null_cross_site.status_code == 403
        same_site = await client.post(
            "/inbox/decide", data={**form, "csrf": "forged"},
            headers={**json_accept, "origin": "null", "sec-fetch-site": "same-origin"},
        )
        assert same_site.status_code == 403 and same_site.json()["title"] == "The form expired"
        for method in ("PUT", "DELETE", "PATCH"):
            response = await client.request(method, "/inbox/decide", headers={"origin": BASE})
            assert response.status_code == 405


def test_loopback_names() -> None:
    for host in ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost", "LocalHost"):
        assert is_loopback_host(host)
    for host in ("0.0.0.0", "::", "10.0.0.1", "example.org", "localhost.evil.example", ""):
        assert not is_loopback_host(host)


def test_the_policy_keeps_loopback_names_and_derives_the_cookie() -> None:
    policy = SecurityPolicy.build(token=TOKEN, allowed_hosts=["Inspector.LAN:8765"])
    assert {"127.0.0.1", "localhost", "::1", "inspector.lan"} == set(policy.allowed_hosts)
    assert policy.session_value and TOKEN not in policy.session_value
    assert policy.token_ok(TOKEN) and not policy.token_ok(TOKEN + "x")
    assert policy.csrf_ok(policy.csrf_token) and not policy.csrf_ok("") and not policy.csrf_ok(None)
    other = SecurityPolicy.build(token=None, allowed_hosts=None)
    assert other.csrf_token != policy.csrf_token  # random per application


async def test_no_websocket_is_served(store: SqliteStore) -> None:
    app = create_app(store)
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    await app({"type": "websocket", "path": "/", "headers": [], "client": ("127.0.0.1", 1)}, receive, send)  # type: ignore[arg-type]
    assert sent == [{"type": "websocket.close", "code": 1008}]
