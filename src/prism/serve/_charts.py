"""The inspector's pictures: inline SVG rendered on the server, no script and no inline style.

* :func:`waterfall_track` — one bar of a run's waterfall on its time axis (a row of the
  waterfall; the row's label is HTML beside it, so it stays readable on a phone);
* :func:`axis_track` — the waterfall's gridlines;
* :func:`usage_columns` — tokens (input and output stacked) or cost per day as columns;
* :func:`meter` — one horizontal bar of a per-model or per-agent breakdown.

Each picture stretches to its box (``preserveAspectRatio="none"``, gridlines with
``vector-effect="non-scaling-stroke"``), takes its colours from the stylesheet's classes (so
light and dark apply) and carries a ``<title>`` per bar and an ``aria-label`` for the whole.
Every text is escaped here: the labels come from stored runs (tool names, model names).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from prism.serve._views import WaterfallBar, format_cost, format_duration, format_tokens

__all__ = ["ColumnDatum", "axis_track", "meter", "usage_columns", "waterfall_track"]


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
    """The SVG of one waterfall row: gridlines and the bar (class ``bar-<kind>`` and
    ``st-<status>``), with a ``<title>`` naming it and its duration."""
    duration = format_duration(bar.duration_ms)
    text = f"{bar.label} ({bar.detail}): {duration}, {bar.status}"
    body = (
        _gridlines(20)
        + f'<rect class="bar bar-{escape(bar.kind)} st-{escape(bar.status)}" x="{bar.x}" y="3" '
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
    """One column of :func:`usage_columns`: its label (a day) and its stacked values."""

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
