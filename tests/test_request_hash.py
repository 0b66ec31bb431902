"""The canonical request hash (``prism.request_hash``) and the request rows a run writes: what
the hash covers and leaves out, the run path's incremental hashes equal to a request hashed
from scratch (with a redactor, after the history changed, with a system message in the input),
a head written once per hash, and ledgers without ``append_request`` left alone."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import pytest

import prism
from prism._json import canonical_json
from prism.ledger import LedgerWriter, MemoryRunLedger, RequestRecord
from prism.middleware import MiddlewareRegistry
from prism.request_hash import (
    fingerprint_request,
    message_digest,
    message_json,
    request_head,
)
from prism.testing import (
    create_mock_provider,
    provider_done,
    provider_text_delta,
    provider_tool_call,
)
from prism.types import (
    ErrorInfo,
    ImageContent,
    Message,
    ModelConfig,
    ProviderRequest,
    ProviderRequestOptions,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResultContent,
    system_message,
    user_message,
)

MODEL = ModelConfig(provider="mock", model="m", parameters={"temperature": 0})


@prism.tool
def lookup(order: str) -> dict[str, Any]:
    """Look up an order."""
    return {"order": order, "rows": [{"status": "shipped", "n": 1.5}]}


@pytest.mark.parametrize(
    "message",
    [
        user_message("héllo \u2028 \"quoted\""),
        Message("assistant", (TextContent("a"), ThinkingContent("t", signature="s"))),
        Message(
            "assistant",
            (
                ToolCallContent("c1", "lookup", {"b": [1, {"z": None, "a": True}], "a": "x"}),
                ToolCallContent("c2", "x", {}, authority="provider-hosted"),
                ToolCallContent(
                    "c3", "x", {}, arguments_error=ErrorInfo(message="bad", code="invalid")
                ),
            ),
        ),
        Message(
            "tool",
            (
                ToolResultContent("c1", "lookup", result={"k": (1, 2), "é": "ü"}),
                ToolResultContent("c2", "x", error=ErrorInfo(message="no", code="denied")),
                ToolResultContent("c3", "x"),
                ImageContent(url="https://example.com/a.png"),
            ),
            id="m1",
            metadata={"ignored": True},
        ),
    ],
)
def test_a_message_digest_is_the_sha256_of_its_canonical_role_and_content(message: Message) -> None:
    text = canonical_json(message_json(message))
    assert message_digest(message) == hashlib.sha256(text.encode()).digest()
    assert "metadata" not in text and '"id":"m1"' not in text


def test_what_the_hash_covers_and_what_it_leaves_out() -> None:
    tools = (lookup,)
    base = ProviderRequest(
        MODEL,
        (system_message("Be brief."), user_message("hi")),
        tools,
        options=ProviderRequestOptions(session_id="s1", headers={"x": "1"}),
        metadata={"run": 1},
    )
    same = [
        dataclasses.replace(base, metadata={"run": 2}),
        dataclasses.replace(base, options=ProviderRequestOptions(session_id="s2")),
        dataclasses.replace(base, model=dataclasses.replace(MODEL, display_name="M", pricing=None)),
        dataclasses.replace(
            base, messages=(system_message("Be brief."), user_message("hi", id="u1", metadata={"a": 1}))
        ),
    ]
    different = [
        dataclasses.replace(base, messages=(system_message("Be short."), user_message("hi"))),
        dataclasses.replace(base, messages=(system_message("Be brief."), user_message("ho"))),
        dataclasses.replace(base, tools=None),
        dataclasses.replace(base, options=ProviderRequestOptions(max_tokens=5)),
        dataclasses.replace(base, model=dataclasses.replace(MODEL, parameters={"temperature": 1})),
    ]
    reference = fingerprint_request(base)
    assert reference.messages == 1
    assert set(reference.head) == {"model", "system", "tools"}
    assert reference.head["system"] == [[{"text": "Be brief.", "type": "text"}]]
    for request in same:
        assert fingerprint_request(request).request_hash == reference.request_hash
    for request in different:
        assert fingerprint_request(request).request_hash != reference.request_hash
    # the head hash moves with the head only
    assert fingerprint_request(different[1]).head_hash == reference.head_hash
    assert fingerprint_request(different[0]).head_hash != reference.head_hash
    assert request_head(different[3])["options"] == {"max_tokens": 5}


def _turns() -> list[list[Any]]:
    return [
        [provider_text_delta("a"), provider_tool_call("c1", "lookup", {"order": "1"}), provider_done()],
        [
            provider_tool_call("c2", "lookup", {"order": "2"}),
            provider_tool_call("c3", "lookup", {"order": "3"}),
            provider_done(),
        ],
        [provider_text_delta("done"), provider_done()],
    ]


@pytest.mark.parametrize("variant", ["plain", "redactor", "input_assembly", "system_input"])
async def test_the_run_paths_incremental_hashes_equal_hashing_from_scratch(variant: str) -> None:
    ledger = MemoryRunLedger()
    provider = create_mock_provider(turns=_turns())
    options: dict[str, Any] = {}
    if variant == "redactor":
        options["redactor"] = prism.create_secret_redactor(["order 2"])
    if variant == "input_assembly":
        middleware = MiddlewareRegistry()
        middleware.use("input_assembly", lambda messages: (*messages[:-1], messages[-1]))
        options["middleware"] = middleware
    agent = prism.create_agent(
        provider=provider, model=MODEL, tools=[lookup], instructions="Be nice.", run_ledger=ledger, **options
    )
    run_input: Any = "hi"
    if variant == "system_input":
        run_input = [system_message("Extra rule."), user_message("hi")]
    result = await agent.create_session().run(run_input)
    assert result.status == "succeeded"
    assert len(ledger.requests) == 3
    for request, row in zip(provider.requests, ledger.requests, strict=True):
        fingerprint = fingerprint_request(request)
        assert (row.request_hash, row.head_hash, row.messages) == (
            fingerprint.request_hash,
            fingerprint.head_hash,
            fingerprint.messages,
        )
        assert ledger.request_heads[row.head_hash] == fingerprint.head
    assert [r.head for r in ledger.requests] == [None, None, None]  # heads kept apart
    assert len(ledger.request_heads) == 1


async def test_a_writer_sends_each_head_once_and_a_ledger_without_requests_gets_none() -> None:
    class Recording:
        def __init__(self) -> None:
            self.rows: list[RequestRecord] = []

        def append_run(self, record: Any) -> None: ...
        def append_event(self, record: Any) -> None: ...
        def append_tool_call(self, record: Any) -> None: ...
        def append_usage(self, record: Any) -> None: ...

        def append_request(self, record: RequestRecord) -> None:
            self.rows.append(record)

    ledger = Recording()
    writer = LedgerWriter(ledger, session_id="s", run_id="r")
    assert writer.records_requests
    for head_hash in ("a", "a", "b", "a"):
        writer.record_request(
            turn=1, attempt=1, provider_id="p", model="m", request_hash="x",
            head_hash=head_hash, messages=1, head={"h": head_hash},
        )
    await writer.drain()
    assert [(r.head_hash, r.head) for r in ledger.rows] == [
        ("a", {"h": "a"}), ("a", None), ("b", {"h": "b"}), ("a", None)
    ]
    assert all(r.id.startswith("request_") and r.run_id == "r" for r in ledger.rows)

    class Old:
        def append_run(self, record: Any) -> None: ...
        def append_event(self, record: Any) -> None: ...
        def append_tool_call(self, record: Any) -> None: ...
        def append_usage(self, record: Any) -> None: ...

    old = LedgerWriter(Old(), session_id="s", run_id="r")
    assert not old.records_requests
    old.record_request(
        turn=1, attempt=1, provider_id="p", model="m", request_hash="x", head_hash="a",
        messages=1, head={},
    )
    await old.drain()


async def test_the_memory_ledger_passes_the_ledger_conformance_suite_with_requests() -> None:
    from prism.testing import run_ledger_conformance

    ledger = MemoryRunLedger()
    await run_ledger_conformance(ledger)
    assert ledger.requests and len(ledger.request_heads) == 2
