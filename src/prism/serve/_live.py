"""Live pages: server-sent events fed by polling the store, so a run in another process (or on
a DBOS worker) shows up as it goes.

[`run_events()`][prism.serve._live.run_events] streams one run: every ``poll_interval`` seconds (0.25 by default) it reads
the run's ledger rows after its cursor, the session's entries after its sequence number and,
when something changed, the run's summary, and sends

* ``update`` — ``{"cursor", "seq", "status", "rows": [{"kind", "type"}…], "entries": n}`` when
  rows or entries of the run were appended, or its status changed (the page then fetches its
  panels again); ``type`` is an event row's event type, a run or tool-call row's status, a usage
  row's scope;
* ``end`` — ``{"status"}`` once the run's status is final and nothing more came; the stream
  closes.

The page hands over the cursor and sequence number it was rendered at (``after``, ``seq``), so
nothing appended between the render and the stream's start is missed; a reconnecting
``EventSource`` resumes from its ``Last-Event-ID``. [`inbox_events()`][prism.serve._live.inbox_events] streams the set of
pending decisions (``changed`` with their count and approval ids) the same way, every
``4 * poll_interval``. A poll is a few indexed reads; each open page polls on its own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Final

from sse_starlette.sse import EventSourceResponse

from prism.inspection import InspectionReader, LedgerRow
from prism.ledger_records import AgentEventRecord, RunRecord, ToolCallRecord
from prism.serve._views import FINAL_STATUSES

__all__ = ["decode_event_id", "inbox_events", "run_events"]

_SUMMARY_EVERY: Final = 8
"""Polls between two reads of the run's summary when no row came (2 s at the default 0.25 s)."""


def _row(row: LedgerRow) -> dict[str, str]:
    """What an update says of one row: its table and its event type or status."""
    record = row.record
    if isinstance(record, AgentEventRecord):
        return {"kind": row.kind, "type": record.type}
    if isinstance(record, (RunRecord, ToolCallRecord)):
        return {"kind": row.kind, "type": record.status}
    return {"kind": row.kind, "type": record.scope}


def decode_event_id(value: str | None) -> tuple[int, str | None] | None:
    """The ``(seq, cursor)`` of an event id ``"<seq> <cursor>"``, else ``None``."""
    if not value:
        return None
    head, _, cursor = value.partition(" ")
    try:
        seq = int(head)
    except ValueError:
        return None
    return seq, cursor or None


def run_events(
    reader: InspectionReader,
    *,
    run_id: str,
    session_id: str,
    after: str | None,
    seq: int,
    poll_interval: float,
) -> EventSourceResponse:
    """The event stream of one run (see the module docstring)."""

    async def stream() -> AsyncIterator[dict[str, Any]]:
        cursor, entry_seq = after, seq
        status: str | None = None
        polls = 0
        while True:
            sliced = await reader.read_ledger(run_id, after=cursor, limit=1000)
            entries = await reader.read_entries(session_id, after_seq=entry_seq, limit=1000)
            mine = [e for e in entries if e.entry.run_id == run_id]
            if entries:
                entry_seq = entries[-1].seq
            changed = bool(sliced.rows or mine)
            cursor = sliced.cursor
            polls += 1
            if changed or status is None or polls % _SUMMARY_EVERY == 0:
                # the status also changes without rows: a run without a ledger, a durable run
                # resumed or decided elsewhere
                summary = await reader.get_run_summary(run_id)
                found = summary.status if summary is not None else status
                changed = changed or (status is not None and found != status)
                status = found
            if changed:
                rows = [_row(row) for row in sliced.rows]
                payload = {
                    "cursor": cursor,
                    "seq": entry_seq,
                    "status": status,
                    "rows": rows,
                    "entries": len(mine),
                }
                yield {
                    "event": "update",
                    "id": f"{entry_seq} {cursor}",
                    "data": json.dumps(payload),
                }
            elif status in FINAL_STATUSES:
                yield {"event": "end", "data": json.dumps({"status": status})}
                return
            if not sliced.has_more and len(entries) < 1000:
                await asyncio.sleep(poll_interval)

    return EventSourceResponse(stream(), ping=15, headers={"Cache-Control": "no-store"})


def inbox_events(
    pending: Callable[[], Awaitable[Sequence[str]]], *, poll_interval: float
) -> EventSourceResponse:
    """The event stream of the inbox: ``changed`` with ``{"count", "ids"}`` whenever the set of
    pending approval ids differs from the last one sent (the first poll always sends)."""

    async def stream() -> AsyncIterator[dict[str, Any]]:
        last: tuple[str, ...] | None = None
        while True:
            ids = tuple(await pending())
            if ids != last:
                last = ids
                yield {"event": "changed", "data": json.dumps({"count": len(ids), "ids": ids})}
            await asyncio.sleep(poll_interval * 4)

    return EventSourceResponse(stream(), ping=15, headers={"Cache-Control": "no-store"})
