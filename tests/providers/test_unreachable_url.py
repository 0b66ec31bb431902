"""A Python run whose model server cannot be reached names the server's URL, its credentials
masked, as the ``prism`` command does (issue 21, item 21): through the real SDKs and a real
refused TCP connection, for the OpenAI-compatible and the Anthropic providers."""

from __future__ import annotations

import socket

import pytest

import prism
from prism.errors import AgentRunError

pytest.importorskip("openai")
pytest.importorskip("anthropic")


def _closed_port() -> int:
    """A local port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _providers(base: str) -> list[tuple[str, object]]:
    from prism.providers.anthropic import create_anthropic_provider
    from prism.providers.openai import create_openai_compatible_provider

    return [
        ("openai-compatible", create_openai_compatible_provider(base_url=base, auth_style="none")),
        ("anthropic", create_anthropic_provider(base_url=base, api_key="sk-ant-secret-key")),
    ]


@pytest.mark.parametrize("index", [0, 1], ids=["openai-compatible", "anthropic"])
async def test_an_unreachable_server_is_named_with_its_url_i21_c(index: int) -> None:
    port = _closed_port()
    base = f"http://alice:hunter2@127.0.0.1:{port}/v1?token=t0ps3cret"
    name, provider = _providers(base)[index]
    agent = prism.create_agent(
        model={"provider": name, "model": "m"},
        provider=provider,  # type: ignore[arg-type]
        retry=False,
    )
    with pytest.raises(AgentRunError) as info:
        await agent.create_session().run("hi")
    message = str(info.value)
    assert f"cannot reach http://alice:***@127.0.0.1:{port}/v1?token=***" in message
    assert info.value.result is not None and info.value.result.error is not None
    error = info.value.result.error
    assert error.code == "ECONNREFUSED" and f"127.0.0.1:{port}" in error.message
    for secret in ("hunter2", "t0ps3cret", "sk-ant-secret-key"):
        assert secret not in message and secret not in repr(error)


def test_shown_url_masks_credentials_i21_c() -> None:
    from prism.providers._sdk import shown_url

    assert shown_url("https://api.example.com/v1") == "https://api.example.com/v1"
    assert shown_url("http://u:p@h:1/v1?a=1&b&c=2#frag") == "http://u:***@h:1/v1?a=***&b&c=***"
    assert shown_url("http://u@h/v1") == "http://u@h/v1"
    assert shown_url("not a url") == "not a url"
