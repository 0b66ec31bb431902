"""The inspector's view projections over a real SQLite store filled by real runs: the
transcript (thinking, tool calls and results, handoffs labelled with the agent, markup kept as
text), the timeline (attempts with provider, model, tokens, cost, retries and their errors, a
fallback marked; tool calls with durations, approval and child runs) and the waterfall
(parallel calls side by side on the time axis)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from _seed import PROBE, SECRET, Seeded

from prism.inspection import LedgerRow, RunSummary, SessionFilter
from prism.serve import _charts, _views
from prism.serve import _timeline as timeline_module
from prism.serve._charts import ColumnDatum, meter, usage_columns, waterfall_track
from prism.stores import SqliteStore


async def _ledger(store: SqliteStore, run_id: str) -> list[LedgerRow]:
    return list((await store.read_ledger(run_id, limit=10000)).rows)


async def _timeline(store: SqliteStore, run_id: str) -> tuple[RunSummary, timeline_module.TimelineView]:
    run = await store.get_run_summary(run_id)
    assert run is not None
    children_sessions = await store.list_session_summaries(
        filter=SessionFilter(parent_session_id=run.session_id)
    )
    summaries = {}
    for child in children_sessions.items:
        if child.last_run_id:
            found = await store.get_run_summary(child.last_run_id)
            if found is not None:
                summaries[child.last_run_id] = found
    children = timeline_module.child_runs_by_call(run_id, children_sessions.items, summaries)
    return run, timeline_module.project_timeline(await _ledger(store, run_id), run=run, children=children)


async def test_the_transcript_shows_calls_results_and_markup_as_plain_text(
    store: SqliteStore, seeded: tuple[Path, Seeded]
) -> None:
    run = seeded[1].probe
    entries = await store.read_entries(run.session_id)
    items = _views.project_transcript(entries, run_id=run.run_id)
    assert [i.role for i in items] == ["user", "assistant", "tool", "assistant"]
    user, call, result, answer = items
    assert PROBE in user.blocks[0].text  # kept verbatim: escaping is the template's job
    (call_block,) = call.blocks
    assert (call_block.kind, call_block.name, call_block.call_id) == ("tool_call", "echo", "x1")
    assert PROBE in call_block.body  # the argument, as pretty JSON
    (result_block,) = result.blocks
    assert result_block.kind == "tool_result" and PROBE in result_block.body
    assert PROBE in answer.blocks[0].text


async def test_a_handoff_is_labelled_and_thinking_is_collapsed(
    store: SqliteStore, seeded: tuple[Path, Seeded]
) -> None:
    run = seeded[1].handoff
    entries = await store.read_entries(run.session_id)
    items = _views.project_transcript(entries, run_id=run.run_id)
    kinds = [i.kind for i in items]
    assert "handoff" in kinds and "model_change" in kinds
    handoff = items[kinds.index("handoff")]
    assert handoff.title == "Handed off to billing (from triage)"
    first_answer = items[1]
    thinking = [b for b in first_answer.blocks if b.kind == "thinking"]
    assert thinking and thinking[0].long and "billing handles that" in thinking[0].text
    last = items[-1]
    assert last.role == "assistant" and last.agent == "billing"
    assert last.blocks[0].text == "Your refund is on its way."


async def test_the_timeline_shows_each_attempt_with_cost_only_where_reported(
    store: SqliteStore, seeded: tuple[Path, Seeded]
) -> None:
    run, timeline = await _timeline(store, seeded[1].simple.run_id)
    assert timeline.has_ledger and [t.number for t in timeline.turns] == [1, 2]
    first, second = timeline.turns
    (attempt,) = first.attempts
    assert (attempt.provider, attempt.model, attempt.status) == ("mock", "demo-large", "finished")
    assert (attempt.input_tokens, attempt.output_tokens, attempt.cost) == (120, 14, 0.0021)
    assert _views.format_cost(attempt.cost, attempt.currency) == "$0.0021"
    assert not attempt.fallback and attempt.duration_ms is not None
    (call,) = first.tool_calls
    assert (call.name, call.call_id, call.status, call.approval) == ("add", "c1", "finished", None)
    assert call.result == "40" and call.duration_ms is not None and call.offset_ms is not None
    assert second.attempts[0].stop_reason == "stop"
    # no cost reported: '—'
    _, parallel = await _timeline(store, seeded[1].parallel.run_id)
    assert parallel.turns[0].attempts[0].cost is None
    assert _views.format_cost(parallel.turns[0].attempts[0].cost) == "—"


async def test_a_retry_and_a_fallback_are_visible_with_their_error(
    store: SqliteStore, seeded: tuple[Path, Seeded]
) -> None:
    _, timeline = await _timeline(store, seeded[1].fallback.run_id)
    (turn,) = timeline.turns
    attempts = turn.attempts
    assert [(a.provider, a.model, a.status) for a in attempts] == [
        ("mock", "demo-large", "error"),
        ("mock", "demo-large", "error"),
        ("mock", "demo-small", "finished"),
    ]
    assert attempts[0].error is not None and attempts[0].error.code == "503"
    assert attempts[0].error.message == "upstream overloaded"
    assert attempts[0].retry is not None  # retried after its failure
    assert [a.fallback for a in attempts] == [False, False, True]
    assert attempts[2].cost == 0.0004


async def test_a_failed_runs_error_is_redacted_with_its_code(
    store: SqliteStore, seeded: tuple[Path, Seeded]
) -> None:
    run_id = seeded[1].failed_run_id
    assert run_id is not None
    run, timeline = await _timeline(store, run_id)
    assert run.status == "failed" and run.error is not None
    notes = [n for t in timeline.turns for n in t.notes] + list(timeline.notes)
    errors = [n.error for n in notes if n.error is not None]
    errors += [a.error for t in timeline.turns for a in t.attempts if a.error is not None]
    assert errors and all(SECRET not in e.message for e in errors)
    assert any(e.code == "401" for e in errors)


async def test_parallel_tool_calls_overlap_on_the_waterfall(
    store: SqliteStore, seeded: tuple[Path, Seeded]
) -> None:
    run, timeline = await _timeline(store, seeded[1].parallel.run_id)
    calls = timeline.turns[0].tool_calls
    assert [c.call_id for c in calls] == ["p1", "p2"]
    waterfall = _charts.project_waterfall(
        timeline,
        started_at=timeline.started_at,
        finished_at=timeline.finished_at,
        now=datetime.now(UTC),
    )
    assert waterfall is not None and waterfall.total_ms > 0
    assert [b.kind for b in waterfall.bars] == ["provider", "tool", "tool", "provider"]
    tools = [b for b in waterfall.bars if b.kind == "tool"]
    for bar in waterfall.bars:
        assert 0 <= bar.x and bar.x + bar.width <= 1000.01
    a, b = tools
    # both ran at once: each starts before the other ends
    assert a.x < b.x + b.width and b.x < a.x + a.width
    assert waterfall.ticks[0] == "0" and len(waterfall.ticks) == 5


async def test_a_child_run_is_nested_under_the_call_that_started_it(
    store: SqliteStore, seeded: tuple[Path, Seeded]
) -> None:
    _, timeline = await _timeline(store, seeded[1].parent.run_id)
    (call,) = timeline.turns[0].tool_calls
    (child,) = call.children
    assert child.run_id == seeded[1].child_run_id
    assert (child.agent, child.status, child.input_tokens) == ("geographer", "succeeded", 40)
    waterfall = _charts.project_waterfall(
        timeline, started_at=timeline.started_at, finished_at=timeline.finished_at,
        now=datetime.now(UTC),
    )
    assert waterfall is not None
    (bar,) = [b for b in waterfall.bars if b.kind == "child"]
    assert bar.href == f"/runs/{child.run_id}" and bar.depth == 2


async def test_a_call_waiting_for_approval_is_on_the_timeline(
    store: SqliteStore, seeded: tuple[Path, Seeded]
) -> None:
    _, timeline = await _timeline(store, seeded[1].waiting.run_id)
    (call,) = [c for t in timeline.turns for c in t.tool_calls]
    assert (call.name, call.status, call.approval) == ("pay", "waiting", "waiting")
    assert SECRET not in call.arguments and "[REDACTED]" in call.arguments
    notes = [n.title for t in timeline.turns for n in t.notes]
    assert "Suspended: waiting for approval" in notes
    waterfall = _charts.project_waterfall(
        timeline, started_at=timeline.started_at, finished_at=timeline.finished_at,
        now=datetime.now(UTC) + timedelta(hours=3),
    )
    assert waterfall is not None
    (wait,) = [b for b in waterfall.bars if b.kind == "wait"]
    # still waiting: the axis runs to now and the wait bar spans it from the suspension
    assert wait.duration_ms is not None and wait.duration_ms >= 3 * 3600 * 1000
    assert waterfall.total_ms >= 3 * 3600 * 1000 and wait.status == "waiting"
    assert wait.x + wait.width == 1000 and wait.width > 990
    assert waterfall.still_waiting and waterfall.waited_ms == wait.duration_ms
    # a run that no longer waits (not suspended) does not stretch its axis to now
    ended = _charts.project_waterfall(
        timeline, started_at=timeline.started_at, finished_at=timeline.finished_at,
        now=datetime.now(UTC) + timedelta(hours=3), waiting=False,
    )
    assert ended is not None and ended.total_ms < 3600 * 1000 and not ended.still_waiting


async def test_a_run_without_a_ledger_has_a_transcript_and_no_timeline(
    store: SqliteStore, seeded: tuple[Path, Seeded]
) -> None:
    run = seeded[1].no_ledger
    summary = await store.get_run_summary(run.run_id)
    assert summary is not None and not summary.has_ledger
    timeline = timeline_module.project_timeline(await _ledger(store, run.run_id), run=summary)
    assert not timeline.has_ledger and timeline.turns == ()
    items = _views.project_transcript(await store.read_entries(run.session_id), run_id=run.run_id)
    assert [i.role for i in items] == ["user", "assistant"]


def test_formatting_of_numbers_durations_and_times() -> None:
    now = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)
    assert _views.format_tokens(1234567) == "1,234,567" and _views.format_tokens(None) == "—"
    assert _views.format_cost(None) == "—" and _views.format_cost(0.5) == "$0.50"
    assert _views.format_cost(0.00042) == "$0.00042" and _views.format_cost(3, "EUR") == "3.00 EUR"
    assert _views.format_duration(850) == "850 ms" and _views.format_duration(1240) == "1.24 s"
    assert _views.format_duration(125_000) == "2 min 05 s"
    assert _views.relative_time("2026-01-02T11:57:00.000Z", now) == "3 min ago"
    assert _views.relative_time("2026-01-02T11:59:50Z", now) == "just now"
    assert _views.relative_time(None, now) == "—"
    assert _views.status_tone("failed") == "bad" and _views.status_tone("suspended") == "wait"


def test_charts_escape_their_labels_and_carry_titles() -> None:
    bar = _charts.WaterfallBar(
        label="<b>tool</b>", detail='"x"', kind="tool", status="error", x=10, width=20, depth=1,
        duration_ms=12.0,
    )
    svg = str(waterfall_track(bar))
    assert "<b>" not in svg and "&lt;b&gt;tool&lt;/b&gt;" in svg
    assert 'class="bar bar-tool st-error"' in svg and "<title>" in svg
    columns = str(
        usage_columns(
            [ColumnDatum("2026-01-01", (10.0, 5.0)), ColumnDatum("<d>", (0.0, 0.0))],
            label="Tokens", series=("input", "output"), scale=15.0,
        )
    )
    assert columns.count("<rect") == 2 and "&lt;d&gt;" not in columns  # empty day: no bar
    assert 'aria-label="Tokens"' in columns
    m = str(meter(5, 10, label="<m>"))
    assert "&lt;m&gt;" in m and 'width="500.00"' in m


def test_session_branches_split_the_current_branch_from_forks_and_separate_starts() -> None:
    from prism.inspection import StoredEntry
    from prism.store import new_session_entry
    from prism.types import Message

    made: dict[str, StoredEntry] = {}
    order: list[StoredEntry] = []

    def add(name: str, parent: str | None) -> None:
        parent_id = made[parent].entry.id if parent is not None else None
        entry = new_session_entry(
            "message", session_id="s", parent_id=parent_id, message=Message("user", name)
        )
        made[name] = StoredEntry(seq=len(order) + 1, entry=entry)
        order.append(made[name])

    add("a", None)
    add("b", "a")
    add("c", "b")  # first branch: a b c
    add("d", "a")  # a fork after a: a d
    add("e", "d")
    add("f", "b")  # a fork after b: a b f (the current branch, ends at the last entry)
    add("x", None)  # a separate start (appended before the last entry below)
    add("g", "f")
    current, sides = _views.session_branches(order)
    assert [item.blocks[0].text for item in current] == ["a", "b", "f", "g"]
    # newest first: x (a separate start), then d e (from a), then c (from b)
    assert [[i.blocks[0].text for i in side.items] for side in sides] == [["x"], ["d", "e"], ["c"]]
    assert [side.fork_id for side in sides] == [
        None,
        made["a"].entry.id,
        made["b"].entry.id,
    ]
    assert [side.fork_text for side in sides] == ["", "a", "b"]
    assert _views.session_branches([]) == ([], [])
