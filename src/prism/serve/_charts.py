"""The inspector's pictures: the waterfall of a run and the usage charts, as inline SVG
rendered on the server — no script and no inline style.

* [`project_waterfall()`][prism.serve._charts.project_waterfall] — a projected timeline as bars on a time axis (attempts, tool calls
  side by side when they ran in parallel, child runs, waits for approval), positions in 0..1000;
* [`waterfall_track()`][prism.serve._charts.waterfall_track] — one bar of the waterfall (a row; the row's label is HTML beside it,
  so it stays readable on a phone); [`axis_track()`][prism.serve._charts.axis_track] — its gridlines;
* [`usage_columns()`][prism.serve._charts.usage_columns] — tokens (input and output stacked) or cost per day as columns;
* [`meter()`][prism.serve._charts.meter] — one horizontal bar of a per-model or per-agent breakdown.

Each picture stretches to its box (``preserveAspectRatio="none"``, gridlines with
``vector-effect="non-scaling-stroke"``), takes its colours from the stylesheet's classes (so
light and dark apply) and carries a ``<title>`` per bar and an ``aria-label`` for the whole.
Every text is escaped here: the labels come from stored runs (tool names, model names).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from markupsafe import Markup, escape

from prism.serve._timeline import TimelineView
from prism.serve._views import (
    format_cost,
    format_duration,
    format_tokens,
    ms_between,
    parse_time,
)

__all__ = [
    "ColumnDatum",
    "WaterfallBar",
    "WaterfallView",
    "axis_track",
    "bar_scale",
    "meter",
    "project_waterfall",
    "usage_columns",
    "waterfall_track",
]

# --------------------------------------------------------------------------- waterfall


@dataclass(frozen=True, slots=True, kw_only=True)
class WaterfallBar:
    """One bar: positions in 0..1000 of the run's time span."""

    label: str
    detail: str
    kind: Literal["provider", "tool", "child", "wait"]
    status: str
    x: float
    width: float
    depth: int
    """0 for attempts, 1 for tool calls and waits, 2 for child runs."""
    duration_ms: float | None
    href: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WaterfallView:
    """A run as bars on a time axis."""

    total_ms: float
    bars: tuple[WaterfallBar, ...]
    ticks: tuple[str, ...]
    """Labels of the 0 %, 25 %, 50 %, 75 % and 100 % marks."""
    waited_ms: float = 0.0
    """How long the run waited for approvals (the waits so far included)."""
    still_waiting: bool = False
    """Whether the last wait still lasts."""


_MIN_WIDTH: Final = 4.0


def project_waterfall(
    timeline: TimelineView,
    *,
    started_at: str | None,
    finished_at: str | None,
    now: datetime,
    waiting: bool = True,
) -> WaterfallView | None:
    """The waterfall of a projected timeline, or ``None`` when nothing has a time.

    The axis runs from the run's start (else its first timed item) to its finish (else the last
    timed item, or ``now`` while it runs). Attempts are depth 0 (labelled with their leg after
    the first: ``Leg 2 · turn 1 · attempt 1``), tool calls depth 1 (parallel calls overlap on
    the axis, each on its own row), child runs depth 2 under their call, and a wait for approval
    is a bar from the suspension to the next leg (status ``waited``) — or, while the run still
    waits (``waiting``, a suspended run), to ``now``, the axis spanning it (status ``waiting``).
    """
    spans: list[tuple[datetime, datetime | None, dict[str, Any]]] = []
    for turn in timeline.turns:
        for a in turn.attempts:
            start = parse_time(a.started_at) or parse_time(a.finished_at)
            if start is None:
                continue
            detail = f"{a.provider} · {a.model}" + (" · fallback" if a.fallback else "")
            spans.append(
                (
                    start,
                    parse_time(a.finished_at),
                    {
                        "label": (f"Leg {turn.leg} · turn " if turn.leg > 1 else "Turn ")
                        + f"{turn.number} · attempt {a.attempt}",
                        "detail": detail,
                        "kind": "provider",
                        "status": a.status,
                        "depth": 0,
                        "duration_ms": a.duration_ms,
                    },
                )
            )
        for c in turn.tool_calls:
            start = parse_time(c.started_at)
            if start is None:
                continue
            spans.append(
                (
                    start,
                    parse_time(c.finished_at),
                    {
                        "label": c.name,
                        "detail": c.call_id,
                        "kind": "tool",
                        "status": c.status,
                        "depth": 1,
                        "duration_ms": c.duration_ms,
                    },
                )
            )
            for child in c.children:
                child_start = parse_time(child.started_at)
                if child_start is None:
                    continue
                spans.append(
                    (
                        child_start,
                        parse_time(child.finished_at),
                        {
                            "label": f"child run · {child.agent or '?'}",
                            "detail": child.run_id or child.session_id,
                            "kind": "child",
                            "status": child.status or "running",
                            "depth": 2,
                            "duration_ms": ms_between(child.started_at, child.finished_at),
                            "href": f"/runs/{child.run_id}" if child.run_id else None,
                        },
                    )
                )
    # waits for approval: from a suspension to the next timed item after it
    waits: list[tuple[datetime, dict[str, Any]]] = []
    for turn in timeline.turns:
        for n in turn.notes:
            if n.title.startswith("Suspended"):
                when = parse_time(n.timestamp)
                if when is not None:
                    waits.append(
                        (
                            when,
                            {
                                "label": "wait for approval",
                                "detail": n.detail,
                                "kind": "wait",
                                "status": "waiting",
                                "depth": 1,
                            },
                        )
                    )
    if not spans and not waits:
        return None
    begin = parse_time(started_at)
    starts = [s for s, _, _ in spans] + [w for w, _ in waits]
    first = min(starts)
    if begin is None or begin > first:
        begin = first
    ends = [e for _, e, _ in spans if e is not None]
    end = parse_time(finished_at)
    latest = max([*ends, *starts])
    if end is None:
        end = max(latest, now) if any(e is None for _, e, _ in spans) else latest
    end = max(end, latest)
    waited_ms, still = 0.0, False
    for when, info in waits:
        # a wait lasts until the next timed item (the resumed leg's first); one that still lasts
        # runs to now and so does the axis: the picture shows how long the run has waited
        later = sorted(s for s in starts if s > when)
        if later:
            done = later[0]
            info["status"] = "waited"
        elif waiting:
            done = max(now, when)
            end = max(end, done)
            still = True
        else:
            done = max(end, when)
            info["status"] = "waited"
        info["duration_ms"] = (done - when).total_seconds() * 1000
        waited_ms += info["duration_ms"]
        spans.append((when, done, info))
    total = max((end - begin).total_seconds() * 1000, 1.0)
    bars = []
    for start, stop, info in sorted(spans, key=lambda s: (s[0], s[2]["depth"])):
        finish = stop if stop is not None else end
        x = (start - begin).total_seconds() * 1000 / total * 1000
        width = max((finish - start).total_seconds() * 1000 / total * 1000, _MIN_WIDTH)
        x = min(max(x, 0.0), 1000.0 - _MIN_WIDTH)
        width = min(width, 1000.0 - x)
        status = info["status"] if stop is not None else "running"
        bars.append(
            WaterfallBar(
                label=info["label"],
                detail=info["detail"],
                kind=info["kind"],
                status=status,
                x=round(x, 2),
                width=round(width, 2),
                depth=info["depth"],
                duration_ms=info.get("duration_ms"),
                href=info.get("href"),
            )
        )
    ticks = tuple(format_duration(total * i / 4) if i else "0" for i in range(5))
    return WaterfallView(
        total_ms=total, bars=tuple(bars), ticks=ticks, waited_ms=waited_ms, still_waiting=still
    )


def bar_scale(values: Sequence[float]) -> float:
    """The largest value, at least 1 (a chart's full-scale value)."""
    top = max((v for v in values if math.isfinite(v)), default=0.0)
    return top if top > 0 else 1.0


def _svg(view_box: str, label: str, body: str, css: str) -> Markup:
    return Markup(
        f'<svg class="{css}" viewBox="{view_box}" preserveAspectRatio="none" role="img" '
        f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg" focusable="false">'
        f"{body}</svg>"
    )


def _gridlines(height: int) -> str:
    return "".join(
        f'<line class="grid" x1="{x}" x2="{x}" y1="0" y2="{height}" '
        'vector-effect="non-scaling-stroke"/>'
        for x in (250, 500, 750)
    )


def waterfall_track(bar: WaterfallBar) -> Markup:
    """The SVG of one waterfall row: the bar (class ``bar-<kind>`` and ``st-<status>``), with a
    ``<title>`` naming it and its duration. The row's gridlines are the stylesheet's (a
    background of ``.wf-bar``): a long run's waterfall has thousands of rows."""
    duration = format_duration(bar.duration_ms)
    text = f"{bar.label} ({bar.detail}): {duration}, {bar.status}"
    body = (
        f'<rect class="bar bar-{escape(bar.kind)} st-{escape(bar.status)}" x="{bar.x}" y="3" '
        f'width="{bar.width}" height="14" rx="2"><title>{escape(text)}</title></rect>'
    )
    return _svg("0 0 1000 20", text, body, "wf-track")


def axis_track() -> Markup:
    """The SVG of the waterfall's axis row: a baseline and the quarter gridlines."""
    body = _gridlines(10) + (
        '<line class="axis" x1="0" x2="1000" y1="9" y2="9" vector-effect="non-scaling-stroke"/>'
    )
    return _svg("0 0 1000 10", "time axis", body, "wf-axis")


@dataclass(frozen=True, slots=True)
class ColumnDatum:
    """One column of [`usage_columns()`][prism.serve._charts.usage_columns]: its label (a day) and its stacked values."""

    label: str
    values: tuple[float, ...]
    """Stacked bottom-up (input then output tokens; or one cost)."""


def usage_columns(
    data: Sequence[ColumnDatum],
    *,
    label: str,
    series: Sequence[str],
    scale: float,
    cost: bool = False,
) -> Markup:
    """Columns of stacked values, one per datum, scaled so ``scale`` fills the height.

    Args:
        data: The columns, left to right.
        label: What the chart shows (its ``aria-label``).
        series: A name per stacked value (the ``<title>`` of each column names them).
        scale: The value at full height (> 0).
        cost: The values are costs (formatted as such in the titles).
    """
    height = 200
    count = max(len(data), 1)
    slot = 1000 / count
    width = max(slot * 0.72, 1.0)
    parts = [
        f'<line class="grid" x1="0" x2="1000" y1="{y}" y2="{y}" '
        'vector-effect="non-scaling-stroke"/>'
        for y in (0, 50, 100, 150)
    ]
    for index, datum in enumerate(data):
        x = index * slot + (slot - width) / 2
        bottom = float(height)
        shown = ", ".join(
            f"{name} {format_cost(v) if cost else format_tokens(int(v))}"
            for name, v in zip(series, datum.values, strict=False)
        )
        title = f"<title>{escape(datum.label)}: {escape(shown)}</title>"
        for position, value in enumerate(datum.values):
            h = max(value, 0.0) / scale * height if scale > 0 else 0.0
            if h <= 0:
                continue
            bottom -= h
            parts.append(
                f'<rect class="col s{position}" x="{x:.2f}" y="{bottom:.2f}" width="{width:.2f}" '
                f'height="{h:.2f}">{title}</rect>'
            )
    parts.append(
        f'<line class="axis" x1="0" x2="1000" y1="{height}" y2="{height}" '
        'vector-effect="non-scaling-stroke"/>'
    )
    return _svg(f"0 0 1000 {height}", label, "".join(parts), "chart-cols")


def meter(value: float, scale: float, *, label: str, tone: str = "s0") -> Markup:
    """A horizontal bar of ``value`` out of ``scale`` (a per-model or per-agent row)."""
    fraction = 0.0 if scale <= 0 else min(max(value / scale, 0.0), 1.0)
    width = max(fraction * 1000, 2.0 if value > 0 else 0.0)
    body = (
        '<rect class="track" x="0" y="0" width="1000" height="10" rx="2"/>'
        f'<rect class="col {escape(tone)}" x="0" y="0" width="{width:.2f}" height="10" rx="2">'
        f"<title>{escape(label)}</title></rect>"
    )
    return _svg("0 0 1000 10", label, body, "meter")
