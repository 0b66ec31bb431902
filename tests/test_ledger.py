"""Run ledger records and the per-run writer (REC-1..REC-4, REC-8, TOOL-8, CON-31)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from prism.errors import RedactedError, RunLedgerError
from prism.events import (
    AgentStartedEvent,
    ErrorEvent,
    TurnStartedEvent,
)
from prism.ledger import (
    AgentEventRecord,
    LedgerWriter,
    MemoryRunLedger,
    RunLedger,
    RunRecord,
    ToolCallRecord,
    UsageRecord,
    finish_run_record,
    start_run_record,
)
from prism.redaction import create_secret_redactor
from prism.types import (
    ErrorInfo,
    ModelConfig,
    OwnershipScope,
    ToolResult,
    Usage,
)

MODEL = ModelConfig("mock", "m1")
OWNER = OwnershipScope(tenant_id="t1", account_id="a1", user_id="u1")


def event_record(event: Any, run_id: str = "run_1", session_id: str = "s1") -> AgentEventRecord:
    return AgentEventRecord(
        id="event_x",
        session_id=session_id,
        run_id=run_id,
        type=event.type,
        timestamp="2024-01-01T00:00:00.000Z",
        event=event,
    )


# --------------------------------------------------------------------------- REC-1 / records


async def test_rec1_memory_ledger_keeps_four_lists() -> None:
    """REC-1: MemoryRunLedger stores runs, events, tool calls and usage rows."""
    ledger = MemoryRunLedger()
    assert isinstance(ledger, RunLedger)
    run = start_run_record(run_id="run_1", session_id="s1", branch_id=None, model=MODEL)
    ev = event_record(AgentStartedEvent())
    usage = UsageRecord(id="usage_1", session_id="s1", run_id="run_1", scope="run_total",
                        usage=Usage(input_tokens=1), timestamp="t")
    tool = ToolCallRecord(id="toolcall_1", session_id="s1", run_id="run_1", tool_call_id="c",
                          name="t", arguments={}, status="started", started_at="t")
    await ledger.append_run(run)
    await ledger.append_event(ev)
    await ledger.append_tool_call(tool)
    await ledger.append_usage(usage)
    assert (ledger.runs, ledger.events, ledger.tool_calls, ledger.usage) == (
        [run], [ev], [tool], [usage]
    )
    assert ledger.run_events("run_1") == [ev]
    assert ledger.run_records("run_1") == [run]
    assert ledger.run_events("other") == []


def test_con31_run_record_fields_and_round_trip() -> None:
    """CON-31: RunRecord fields, including ownership, round-trip through to_dict."""
    rec = RunRecord(
        id="run_1", session_id="s1", status="failed", started_at="a", branch_id="entry_1",
        model=MODEL, provider="mock", idempotency_key="k", finished_at="b", abort_reason="r",
        error=ErrorInfo("boom", code="x"), tenant_id="t", account_id="acc", user_id="u",
        metadata={"m": 1},
    )
    assert rec.run_id == "run_1"
    assert RunRecord.from_dict(rec.to_dict()) == rec


def test_rec2_start_and_finish_records() -> None:
    """REC-2: start row is `running`; the finish row repeats it and adds terminal fields."""
    start = start_run_record(
        run_id="run_1", session_id="s1", branch_id="entry_9", model=MODEL,
        idempotency_key="idem", metadata={"a": 1}, ownership=OWNER,
    )
    assert start.status == "running" and start.provider == "mock"
    assert (start.tenant_id, start.account_id, start.user_id) == ("t1", "a1", "u1")
    assert start.finished_at is None
    ok = finish_run_record(start, status="succeeded", stop_reason="host_policy",
                           stop_detail="enough")
    assert ok.status == "succeeded" and ok.finished_at is not None
    assert (ok.stop_reason, ok.stop_detail) == ("host_policy", "enough")
    assert (ok.branch_id, ok.model, ok.idempotency_key) == ("entry_9", MODEL, "idem")
    failed = finish_run_record(start, status="aborted", abort_reason="stop", error=ErrorInfo("x"),
                               stop_reason="host_policy", stop_detail="ignored")
    assert failed.stop_reason is None and failed.stop_detail is None
    assert failed.abort_reason == "stop" and failed.error == ErrorInfo("x")


def test_tool8_tool_call_record_round_trip() -> None:
    """TOOL-8: ToolCallRecord fields round-trip."""
    rec = ToolCallRecord(
        id="toolcall_1", session_id="s1", run_id="run_1", tool_call_id="c1", name="search",
        arguments={"q": "x"}, status="finished", started_at="a", finished_at="b",
        result=ToolResult("c1", "search", value={"n": 1}), reason=None, progress=None,
        redacted=True, tenant_id="t",
    )
    assert ToolCallRecord.from_dict(rec.to_dict()) == rec


def test_rec3_event_record_round_trip_rebuilds_the_event_class() -> None:
    """REC-3: AgentEventRecord(id, session_id, run_id, type, timestamp, event, redacted)."""
    ev = TurnStartedEvent(session_id="s1", run_id="run_1", turn=2)
    rec = event_record(ev)
    data = rec.to_dict()
    assert data["event"] == {"session_id": "s1", "run_id": "run_1", "turn": 2,
                             "type": "turn_started"}
    back = AgentEventRecord.from_dict(data)
    assert back == rec and isinstance(back.event, TurnStartedEvent)


# --------------------------------------------------------------------------- REC-4 writer


class SlowLedger:
    """Async ledger whose writes take several loop iterations, recording order."""

    def __init__(self) -> None:
        self.rows: list[Any] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def _write(self, record: Any) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        for _ in range(3):
            await asyncio.sleep(0)
        self.rows.append(record)
        self.in_flight -= 1

    async def append_run(self, record: RunRecord) -> None:
        await self._write(record)

    async def append_event(self, record: AgentEventRecord) -> None:
        await self._write(record)

    async def append_tool_call(self, record: ToolCallRecord) -> None:
        await self._write(record)

    async def append_usage(self, record: UsageRecord) -> None:
        await self._write(record)


async def test_rec4_records_written_in_emission_order_by_one_writer() -> None:
    """REC-4: one writer task, strictly in emission order."""
    ledger = SlowLedger()
    writer = LedgerWriter(ledger, session_id="s1", run_id="run_1")
    for turn in range(1, 21):
        writer.record_event(TurnStartedEvent(turn=turn))
        if turn % 5 == 0:
            await asyncio.sleep(0)  # let the writer start and stop in between
    writer.record_usage("run_total", Usage(input_tokens=1))
    await writer.drain()
    turns = [r.event.turn for r in ledger.rows if isinstance(r, AgentEventRecord)]
    assert turns == list(range(1, 21))
    assert isinstance(ledger.rows[-1], UsageRecord)
    assert ledger.max_in_flight == 1


class SyncLedger:
    def __init__(self) -> None:
        self.rows: list[Any] = []

    def append_run(self, record: RunRecord) -> None:
        self.rows.append(record)

    def append_event(self, record: AgentEventRecord) -> None:
        self.rows.append(record)

    def append_tool_call(self, record: ToolCallRecord) -> None:
        self.rows.append(record)

    def append_usage(self, record: UsageRecord) -> None:
        self.rows.append(record)


async def test_rec1_sync_ledger_methods_are_supported() -> None:
    """REC-1: ledger methods may be sync."""
    ledger = SyncLedger()
    writer = LedgerWriter(ledger, session_id="s1", run_id="run_1")
    writer.append_run(start_run_record(run_id="run_1", session_id="s1", branch_id=None,
                                       model=MODEL))
    writer.record_event(AgentStartedEvent())
    await writer.drain()
    assert [type(r).__name__ for r in ledger.rows] == ["RunRecord", "AgentEventRecord"]


class FailingLedger(SyncLedger):
    def __init__(self, fail_on: int, message: str = "disk full") -> None:
        super().__init__()
        self.calls = 0
        self.fail_on = fail_on
        self.message = message

    def append_event(self, record: AgentEventRecord) -> None:
        self.calls += 1
        if self.calls == self.fail_on:
            raise OSError(self.message)
        self.rows.append(record)


async def test_rec4_failure_remembered_later_records_skipped_raised_at_drain() -> None:
    """REC-4: a write failure is remembered, later records skipped, raised at the drain point."""
    ledger = FailingLedger(fail_on=2)
    writer = LedgerWriter(ledger, session_id="s1", run_id="run_1")
    for turn in range(1, 6):
        writer.record_event(TurnStartedEvent(turn=turn))
    with pytest.raises(RunLedgerError) as info:
        await writer.drain()
    assert info.value.code == "ERR_PRISM_LEDGER"
    assert "disk full" in str(info.value)
    assert isinstance(info.value.__cause__, OSError)
    assert [r.event.turn for r in ledger.rows] == [1]
    assert ledger.calls == 2  # records 3..5 were skipped, not attempted
    assert isinstance(writer.failure, OSError)
    writer.record_event(TurnStartedEvent(turn=6))  # still skipped after the drain
    await writer.drain()  # reported once
    assert ledger.calls == 2


async def test_rec4_failure_message_is_redacted() -> None:
    """EVT-26: the RunLedgerError text never holds a secret."""
    redactor = create_secret_redactor(["sk-secret"])
    ledger = FailingLedger(fail_on=1, message="cannot write sk-secret")
    writer = LedgerWriter(ledger, session_id="s1", run_id="run_1", redactor=redactor)
    writer.record_event(AgentStartedEvent())
    with pytest.raises(RunLedgerError) as info:
        await writer.drain()
    assert "sk-secret" not in str(info.value)
    assert "[REDACTED]" in str(info.value)
    assert isinstance(info.value.__cause__, RedactedError)


async def test_rec4_without_ledger_nothing_is_allocated() -> None:
    """REC-4: without a ledger the writer is free (no task, no queue)."""
    writer = LedgerWriter(None, session_id="s1", run_id="run_1")
    before = len(asyncio.all_tasks())
    for _ in range(10):
        writer.record_event(TurnStartedEvent(turn=1))
    writer.record_usage("run_total", Usage(input_tokens=1))
    writer.append_run(start_run_record(run_id="run_1", session_id="s1", branch_id=None,
                                       model=MODEL))
    assert len(asyncio.all_tasks()) == before
    assert not writer.enabled
    await writer.drain()


async def test_rec4_writer_task_ends_when_idle() -> None:
    """REC-4: the writer task does not outlive the queued work."""
    ledger = MemoryRunLedger()
    writer = LedgerWriter(ledger, session_id="s1", run_id="run_1")
    before = len(asyncio.all_tasks())
    writer.record_event(AgentStartedEvent())
    assert len(asyncio.all_tasks()) == before + 1
    await writer.drain()
    await asyncio.sleep(0)
    assert len(asyncio.all_tasks()) == before
    writer.record_event(TurnStartedEvent(turn=1))  # restarts
    await writer.drain()
    assert [r.type for r in ledger.events] == ["agent_started", "turn_started"]


async def test_rec4_cancelled_drain_does_not_cancel_the_writer() -> None:
    """REC-4: cancelling a drain leaves the writer running; a later drain completes it."""
    ledger = SlowLedger()
    writer = LedgerWriter(ledger, session_id="s1", run_id="run_1")
    for turn in range(3):
        writer.record_event(TurnStartedEvent(turn=turn))
    drain = asyncio.create_task(writer.drain())
    await asyncio.sleep(0)
    drain.cancel()
    with pytest.raises(asyncio.CancelledError):
        await drain
    await writer.drain()
    assert len(ledger.rows) == 3


# --------------------------------------------------------------------------- REC-3 / REC-8 / REC-1


async def test_rec3_event_records_built_from_events() -> None:
    """REC-3: one record per emitted event, ids filled, `redacted` reflects the redactor."""
    ledger = MemoryRunLedger()
    writer = LedgerWriter(ledger, session_id="s1", run_id="run_1")
    writer.record_event(AgentStartedEvent())
    writer.record_event(TurnStartedEvent(session_id="s9", run_id="run_9", turn=1))
    await writer.drain()
    first, second = ledger.events
    assert re.fullmatch(r"event_[0-9a-f]{32}", first.id)
    assert (first.session_id, first.run_id, first.type) == ("s1", "run_1", "agent_started")
    assert (second.session_id, second.run_id) == ("s9", "run_9")
    assert first.redacted is False
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first.timestamp)

    redacted = MemoryRunLedger()
    w2 = LedgerWriter(redacted, session_id="s1", run_id="run_1",
                      redactor=create_secret_redactor(["x"]))
    w2.record_event(AgentStartedEvent())
    await w2.drain()
    assert redacted.events[0].redacted is True


async def test_rec8_usage_records_and_ownership() -> None:
    """REC-8: usage rows get a usage_ id; turn/attempt only for provider_turn; ownership copied."""
    ledger = MemoryRunLedger()
    writer = LedgerWriter(ledger, session_id="s1", run_id="run_1", ownership=OWNER)
    writer.record_usage("provider_turn", Usage(input_tokens=3), turn=2, attempt=1)
    writer.record_usage("run_total", Usage(input_tokens=3), turn=2, attempt=1)
    writer.record_event(AgentStartedEvent())
    writer.append_run(start_run_record(run_id="run_1", session_id="s1", branch_id=None,
                                       model=MODEL))
    writer.append_tool_call(ToolCallRecord(
        id="toolcall_1", session_id="s1", run_id="run_1", tool_call_id="c", name="t",
        arguments={}, status="started", started_at="a"))
    await writer.drain()
    per_turn, total = ledger.usage
    assert re.fullmatch(r"usage_[0-9a-f]{32}", per_turn.id)
    assert (per_turn.scope, per_turn.turn, per_turn.attempt) == ("provider_turn", 2, 1)
    assert (total.scope, total.turn, total.attempt) == ("run_total", None, None)
    for rec in [*ledger.usage, *ledger.events, *ledger.runs, *ledger.tool_calls]:
        assert (rec.tenant_id, rec.account_id, rec.user_id) == ("t1", "a1", "u1")


async def test_rec8_ownership_defaults_to_none() -> None:
    """REC-8: without an ownership scope the fields are None."""
    ledger = MemoryRunLedger()
    writer = LedgerWriter(ledger, session_id="s1", run_id="run_1", ownership=OwnershipScope())
    writer.record_usage("run_total", Usage(input_tokens=1))
    await writer.drain()
    rec = ledger.usage[0]
    assert (rec.tenant_id, rec.account_id, rec.user_id) == (None, None, None)


async def test_rec1_records_are_redacted_before_they_are_handed_over() -> None:
    """REC-1: every record is redacted with the active redactor."""
    ledger = MemoryRunLedger()
    writer = LedgerWriter(ledger, session_id="s1", run_id="run_1",
                          redactor=create_secret_redactor(["sk-1"]))
    writer.append_run(start_run_record(run_id="run_1", session_id="s1", branch_id=None,
                                       model=MODEL, metadata={"key": "sk-1"}))
    writer.append_tool_call(ToolCallRecord(
        id="toolcall_1", session_id="s1", run_id="run_1", tool_call_id="c", name="t",
        arguments={"token": "sk-1"}, status="started", started_at="a"))
    writer.append_event(event_record(ErrorEvent(error=ErrorInfo("bad sk-1"))))
    await writer.drain()
    assert ledger.runs[0].metadata == {"key": "[REDACTED]"}
    assert ledger.tool_calls[0].arguments == {"token": "[REDACTED]"}
    assert ledger.tool_calls[0].redacted is True
    assert ledger.events[0].event.error.message == "bad [REDACTED]"  # type: ignore[union-attr]
    assert ledger.events[0].redacted is True


async def test_writer_is_a_run_ledger_for_the_tool_dispatcher() -> None:
    """REC-4/TOOL-8: the writer's append methods accept rows synchronously."""
    writer = LedgerWriter(MemoryRunLedger(), session_id="s1", run_id="run_1")
    assert isinstance(writer, RunLedger)
    assert writer.append_usage(UsageRecord(id="usage_1", session_id="s1", run_id="run_1",
                                           scope="run_total", usage=Usage(), timestamp="t")) is None
    await writer.drain()


def test_moved_names_stay_importable_from_prism_ledger() -> None:
    """Records and the timeline moved to their own modules; prism.ledger re-exports them."""
    import prism.ledger
    import prism.ledger_records
    import prism.timeline

    for module in (prism.ledger_records, prism.timeline):
        for name in module.__all__:
            assert getattr(prism.ledger, name) is getattr(module, name)
