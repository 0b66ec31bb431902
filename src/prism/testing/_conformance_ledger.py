"""Run ledger conformance suite: every record kind stored faithfully and in order.

[`run_ledger_conformance()`][prism.testing._conformance_ledger.run_ledger_conformance] writes every record kind for two interleaved runs of one session
and reads them back, per session and per run, in append order. The ledger protocol is
write-only, so the suite reads back through ``list_runs``/``list_events``/``list_tool_calls``/
``list_usage`` (the database stores) or the ``runs``/``events``/``tool_calls``/``usage`` lists
([`MemoryRunLedger`][prism.ledger.MemoryRunLedger]). It creates its own session and run ids.

A ledger with ``append_request`` (``RequestLedger``) is checked for request
rows too: read back without their heads (``list_requests`` or ``run_requests``), in order, and
each head once per hash (``load_request_heads`` or ``request_heads``), a head sent again by
another run kept as first stored.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from prism._util import maybe_await, new_id, now_iso
from prism.events import (
    AgentFinishedEvent,
    AgentStartedEvent,
    MessageFinishedEvent,
    ToolExecutionFinishedEvent,
    ToolExecutionMetadata,
    TurnStartedEvent,
)
from prism.ledger import (
    AgentEventRecord,
    RequestRecord,
    RunLedger,
    ToolCallRecord,
    UsageRecord,
    finish_run_record,
    start_run_record,
)
from prism.testing._conformance_checks import check
from prism.types import (
    ErrorInfo,
    Message,
    ModelConfig,
    OwnershipScope,
    TextContent,
    ToolResult,
    Usage,
)

__all__ = ["run_ledger_conformance", "run_run_ledger_conformance"]


_PLURAL: Final = {"run": "runs", "event": "events", "tool_call": "tool_calls", "usage": "usage"}


async def _read_ledger(
    ledger: object, kind: str, session_id: str, run_id: str | None
) -> builtins.list[Any]:
    plural = _PLURAL[kind]
    reader = getattr(ledger, f"list_{plural}", None)
    if callable(reader):
        return builtins.list(await maybe_await(reader(session_id, run_id=run_id)))
    rows = getattr(ledger, plural, None)
    if not isinstance(rows, builtins.list):
        raise AssertionError(
            "the ledger conformance suite needs list_runs/list_events/list_tool_calls/"
            "list_usage or runs/events/tool_calls/usage lists to read records back"
        )

    def matches(r: Any) -> bool:
        rid = r.id if kind == "run" else r.run_id
        return bool(r.session_id == session_id and (run_id is None or rid == run_id))

    return [r for r in rows if matches(r)]


async def run_ledger_conformance(ledger: RunLedger) -> None:
    """Check that ``ledger`` stores every record kind faithfully and in order.

    Args:
        ledger: A ``RunLedger`` (sync or async methods) that can be read back
            (see the module docstring).

    Raises:
        AssertionError: the first deviation, with a message naming the requirement.
    """
    sid = new_id("session")
    owner = OwnershipScope(tenant_id="tenant-1", account_id="acct-1", user_id="user-1")
    model = ModelConfig(provider="mock", model="m-1")
    runs = [new_id("run"), new_id("run")]
    written: dict[str, builtins.list[Any]] = {"run": [], "event": [], "tool_call": [], "usage": []}

    async def put(kind: str, record: Any) -> None:
        method = getattr(ledger, f"append_{kind}")
        await maybe_await(method(record))
        written[kind].append(record)

    async def put_event(event: Any, **extra: Any) -> None:
        record = AgentEventRecord(
            id=new_id("event"),
            session_id=sid,
            run_id=event.run_id,
            type=event.type,
            timestamp=now_iso(),
            event=event,
            **extra,
        )
        await put("event", record)

    starts = [
        start_run_record(
            run_id=rid,
            session_id=sid,
            branch_id=None,
            model=model,
            ownership=owner,
            idempotency_key=f"idem-{i}",
            metadata={"i": i},
        )
        for i, rid in enumerate(runs)
    ]
    for start in starts:
        await put("run", start)
    for turn in range(1, 4):  # interleave the two runs' rows (each run keeps its own append order)
        for rid in runs:
            event: Any = TurnStartedEvent(session_id=sid, run_id=rid, turn=turn)
            if turn == 1:
                event = AgentStartedEvent(session_id=sid, run_id=rid)
            elif turn == 3:
                event = MessageFinishedEvent(
                    session_id=sid,
                    run_id=rid,
                    message=Message(role="assistant", content=(TextContent(text="done ✓ \x00"),)),
                )
            await put_event(
                event,
                redacted=turn == 2,
                tenant_id=owner.tenant_id,
                account_id=owner.account_id,
                user_id=owner.user_id,
            )
    result = ToolResult(tool_call_id="call_1", name="lookup", value={"rows": [1, 2]})
    for rid in runs:
        started = ToolCallRecord(
            id=new_id("toolcall"),
            session_id=sid,
            run_id=rid,
            tool_call_id="call_1",
            name="lookup",
            arguments={"q": "x", "n": [1, None]},
            status="started",
            started_at=now_iso(),
            tenant_id=owner.tenant_id,
        )
        await put("tool_call", started)
        finished = dataclasses.replace(  # the terminal row of the same call
            started,
            id=new_id("toolcall"),
            status="finished",
            finished_at=now_iso(),
            result=result,
            redacted=True,
            tenant_id=None,
        )
        await put("tool_call", finished)
        await put_event(AgentFinishedEvent(session_id=sid, run_id=rid))
        await put(
            "usage",
            UsageRecord(
                id=new_id("usage"),
                session_id=sid,
                run_id=rid,
                scope="provider_turn",
                usage=Usage(
                    input_tokens=10, output_tokens=5, total_tokens=15, cost=0.25, currency="USD"
                ),
                timestamp=now_iso(),
                turn=1,
                attempt=1,
                provider_id="openai",
                model="gpt-4o-mini",
                user_id=owner.user_id,
            ),
        )
        await put(
            "usage",
            UsageRecord(
                id=new_id("usage"),
                session_id=sid,
                run_id=rid,
                scope="run_total",
                usage=Usage(input_tokens=10, output_tokens=5, total_tokens=15),
                timestamp=now_iso(),
            ),
        )
    await put(
        "run",
        finish_run_record(
            starts[0], status="failed", error=ErrorInfo(message="boom", code="ERR_PRISM_PROVIDER")
        ),
    )
    await put("run", finish_run_record(starts[1], status="succeeded", stop_reason="host_policy"))
    # a tool-execution event with nested dataclasses
    await put_event(
        ToolExecutionFinishedEvent(
            session_id=sid,
            run_id=runs[1],
            result=result,
            metadata=ToolExecutionMetadata(duration_ms=12, status="finished"),
        )
    )

    for kind, rows in written.items():
        got = await _read_ledger(ledger, kind, sid, None)
        check(
            len(got) == len(rows),
            f"expected {len(rows)} {kind} rows for the session, got {len(got)}",
        )
        for i, (g, w) in enumerate(zip(got, rows, strict=True)):
            check(
                g == w,
                f"{kind} row {i} of the session did not round-trip in order: {g!r} != {w!r}",
            )
        for rid in runs:
            want = [r for r in rows if (r.id if kind == "run" else r.run_id) == rid]
            got_run = await _read_ledger(ledger, kind, sid, rid)
            check(
                got_run == want,
                f"{kind} rows of run {rid} must come back in append order",
            )
    other = await _read_ledger(ledger, "event", new_id("session"), None)
    check(other == [], "rows are scoped to their session")
    if callable(getattr(ledger, "append_request", None)):
        await _request_rows(ledger, sid, runs)


async def _request_rows(ledger: Any, sid: str, runs: builtins.list[str]) -> None:
    heads: dict[str, Mapping[str, Any]] = {
        "a" * 64: {"model": {"provider": "mock", "model": "m-1"}, "system": [], "tools": []},
        "b" * 64: {"model": {"provider": "mock", "model": "m-1"}, "system": [[{"text": "Hi ✓"}]]},
    }
    written: builtins.list[RequestRecord] = []
    sent: builtins.list[tuple[str, str, Mapping[str, Any] | None]] = [
        (runs[0], "a" * 64, heads["a" * 64]),
        (runs[1], "a" * 64, {"sent": "again"}),  # another run sends the stored head's hash
        (runs[0], "a" * 64, None),
        (runs[0], "b" * 64, heads["b" * 64]),
    ]
    for turn, (rid, head_hash, head) in enumerate(sent, 1):
        record = RequestRecord(
            id=new_id("request"),
            session_id=sid,
            run_id=rid,
            turn=turn,
            attempt=1,
            provider_id="mock",
            model="m-1",
            request_hash=f"{turn:064x}",
            head_hash=head_hash,
            messages=turn,
            timestamp=now_iso(),
            head=head,
        )
        await maybe_await(ledger.append_request(record))
        written.append(dataclasses.replace(record, head=None))
    for rid in runs:
        if callable(getattr(ledger, "list_requests", None)):
            got = builtins.list(await maybe_await(ledger.list_requests(sid, run_id=rid)))
        else:
            got = builtins.list(ledger.run_requests(rid))
        check(
            got == [r for r in written if r.run_id == rid],
            f"request rows of run {rid} must come back in append order, without their heads",
        )
    if callable(getattr(ledger, "load_request_heads", None)):
        stored = dict(await maybe_await(ledger.load_request_heads([*heads, "c" * 64])))
    else:
        stored = {k: v for k, v in ledger.request_heads.items() if k in heads}
    check(stored == heads, f"each request head is stored once, as first sent: {stored!r}")


run_run_ledger_conformance = run_ledger_conformance
"""Alias of [`run_ledger_conformance()`][prism.testing._conformance_ledger.run_ledger_conformance]."""
