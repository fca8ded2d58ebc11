"""Pictures for the console, drawn server-side as SVG strings (no script, no chart library).

``segment_picture`` draws a partition's segments to scale (width by bytes), and the offset
marks (log start, cleaner point, LSO, HW, LEO) where those offsets fall; ``line_chart``
draws lag over time. Every drawn element carries ``data-*`` attributes with its numbers, so
a test (or a curious operator's devtools) reads what the picture shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from .state import SegmentView

WIDTH = 960
MIN_SEG_PX = 6.0
MARK_COLOURS = {
    "log start": "#6b7280",
    "cleaner point": "#a855f7",
    "LSO": "#f59e0b",
    "HW": "#16a34a",
    "LEO": "#dc2626",
}


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _segment_layout(segments: Sequence[SegmentView]) -> list[tuple[float, float]]:
    """(x, width) per segment: width proportional to bytes, at least MIN_SEG_PX so an empty
    active segment is still seen."""
    total = sum(s.size for s in segments) or 1
    spare = WIDTH - MIN_SEG_PX * len(segments)
    spare = max(spare, 0.0)
    out = []
    x = 0.0
    for s in segments:
        w = MIN_SEG_PX + spare * s.size / total
        out.append((x, w))
        x += w
    return out


def offset_x(segments: Sequence[SegmentView], layout: Sequence[tuple[float, float]],
             offset: int) -> float:  # fmt: skip
    """Where ``offset`` falls: inside its segment, in proportion to its offset range."""
    for s, (x, w) in zip(segments, layout, strict=True):
        if s.base_offset <= offset < s.next_offset or (s.active and offset >= s.base_offset):
            span = max(1, s.next_offset - s.base_offset)
            return x + w * min(1.0, (offset - s.base_offset) / span)
    if segments and offset < segments[0].base_offset:
        return 0.0
    return float(WIDTH)


def _segment(s: SegmentView, x: float, w: float, top: int, h_bar: int) -> str:
    cls = "segment active" if s.active else "segment"
    fill = "#93c5fd" if s.active else "#cbd5e1"
    density = s.index_entries / (s.size / 1048576) if s.size else 0.0
    tip = (f"base {s.base_offset}, next {s.next_offset}, {_human(s.size)}, "
           f"{s.index_entries} index entries ({density:.0f}/MiB), "
           f"{s.time_index_entries} time index entries"
           + (", active" if s.active else ""))  # fmt: skip
    parts = [
        f'<g class="{cls}" data-base-offset="{s.base_offset}" data-size="{s.size}" '
        f'data-index-entries="{s.index_entries}">'
        f'<rect class="{cls}" x="{x:.1f}" y="{top}" width="{max(w - 1, 1):.1f}" '
        f'height="{h_bar}" fill="{fill}" stroke="#475569"><title>{escape(tip)}</title></rect>'
    ]
    # index density: one tick per index entry, spread across the segment (capped)
    ticks = min(s.index_entries, int(w // 2))
    for i in range(ticks):
        tx = x + (i + 0.5) * (w - 1) / max(ticks, 1)
        parts.append(f'<line x1="{tx:.1f}" y1="{top + h_bar - 8}" x2="{tx:.1f}" '
                     f'y2="{top + h_bar}" stroke="#334155" stroke-width="0.6"/>')  # fmt: skip
    if w > 40:
        parts.append(f'<text x="{x + 3:.1f}" y="{top + 16}" font-size="11">'
                     f"{s.base_offset}</text>"
                     f'<text x="{x + 3:.1f}" y="{top + 30}" font-size="10" '
                     f'fill="#475569">{_human(s.size)}</text>')  # fmt: skip
    parts.append("</g>")
    return "".join(parts)


def segment_picture(segments: Sequence[SegmentView], marks: dict[str, int | None]) -> str:
    layout = _segment_layout(segments)
    h_bar, top = 70, 40
    parts = [
        f'<svg id="segments" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} 190" '
        f'width="100%" role="img" data-segment-count="{len(segments)}">',
        "<title>segments to scale</title>",
    ]
    parts += [_segment(s, x, w, top, h_bar) for s, (x, w) in zip(segments, layout, strict=True)]
    row = 0
    for label, offset in marks.items():
        if offset is None:
            continue
        mx = offset_x(segments, layout, offset)
        colour = MARK_COLOURS.get(label, "#000")
        y_text = top + h_bar + 22 + 16 * (row % 4)
        row += 1
        parts.append(
            f'<g class="mark" data-mark="{escape(label)}" data-offset="{offset}">'
            f'<line x1="{mx:.1f}" y1="{top - 10}" x2="{mx:.1f}" y2="{y_text - 10}" '
            f'stroke="{colour}" stroke-width="2"/>'
            f'<text x="{min(mx + 3, WIDTH - 120):.1f}" y="{y_text}" font-size="11" '
            f'fill="{colour}">{escape(label)} {offset}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def line_chart(
    series: dict[str, list[tuple[int, int]]],
    *,
    chart_id: str = "lag-chart",
    height: int = 220,
    window_ms: int | None = None,
    per_second: bool = False,
) -> str:
    """Lines of (time_ms, value) per series name; the "total" series is drawn bold.
    ``per_second``: values are bytes per second (axis in B/s, KiB/s, ..., and a legend)."""
    points = [p for pts in series.values() for p in pts]
    pad_l, pad_b, pad_t = 50, 24, 10
    w_plot, h_plot = WIDTH - pad_l - 10, height - pad_b - pad_t
    parts = [
        f'<svg id="{escape(chart_id)}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {WIDTH} {height}" width="100%" role="img">',
        f'<rect x="{pad_l}" y="{pad_t}" width="{w_plot}" height="{h_plot}" fill="#f8fafc" '
        'stroke="#cbd5e1"/>',
    ]
    if not points:
        parts.append(f'<text x="{pad_l + 10}" y="{pad_t + 20}" font-size="12">no samples yet'
                     "</text></svg>")  # fmt: skip
        return "".join(parts)
    t_max = max(t for t, _ in points)
    t_min = min(t for t, _ in points)  # the samples kept, at most ``window_ms`` of them
    if window_ms:
        t_min = max(t_min, t_max - window_ms)
    y_max = max(1, max(v for _, v in points))

    def xy(t: int, v: int) -> tuple[float, float]:
        x = pad_l + w_plot * ((t - t_min) / max(1, t_max - t_min))
        return x, pad_t + h_plot - h_plot * v / y_max

    top = f"{_human(y_max)}/s" if per_second else str(y_max)
    parts.append(_axis_labels(top, t_max - t_min, pad_l, pad_t, h_plot, height))
    # partitions first, the total last so it is drawn on top
    for i, (name, pts) in enumerate(sorted(series.items(), key=lambda kv: kv[0] == "total")):
        pts = [p for p in pts if p[0] >= t_min]
        if pts:
            parts.append(_series(name, [(t, v, *xy(t, v)) for t, v in pts], i))
        if per_second:
            parts.append(_legend_entry(name, i, pad_t))
    parts.append("</svg>")
    return "".join(parts)


def _axis_labels(top: str, span_ms: int, pad_l: int, pad_t: int, h_plot: int, height: int) -> str:
    """The y axis' top and 0, the x axis' "N s ago" and "now"."""
    return (f'<text x="4" y="{pad_t + 10}" font-size="11">{escape(top)}</text>'
            f'<text x="4" y="{pad_t + h_plot}" font-size="11">0</text>'
            f'<text x="{pad_l}" y="{height - 6}" font-size="11">'
            f"{span_ms / 1000:.0f} s ago</text>"
            f'<text x="{WIDTH - 40}" y="{height - 6}" font-size="11">now</text>')  # fmt: skip


def _legend_entry(name: str, i: int, pad_t: int) -> str:
    """A legend line, top right: the ``i``-th series' colour and name."""
    colour = "#111827" if name == "total" else PALETTE[i % len(PALETTE)]
    y = pad_t + 14 + 14 * i
    return (f'<rect x="{WIDTH - 150}" y="{y - 8}" width="10" height="3" '
            f'fill="{colour}"/><text class="legend" x="{WIDTH - 135}" y="{y}" '
            f'font-size="11">{escape(name)}</text>')  # fmt: skip


PALETTE = ("#2563eb", "#16a34a", "#f59e0b", "#a855f7", "#0891b2", "#be123c")


def _series(name: str, pts: list[tuple[int, int, float, float]], i: int) -> str:
    """One line with a point per sample; ``pts`` are (time, value, x, y)."""
    total = name == "total"
    colour = "#111827" if total else PALETTE[i % len(PALETTE)]
    cls = "series total" if total else "series"
    coords = " ".join(f"{x:.1f},{y:.1f}" for _, _, x, y in pts)
    parts = [f'<g class="{cls}" data-series="{escape(name)}">'
             f'<polyline fill="none" stroke="{colour}" '
             f'stroke-width="{2.5 if total else 1.2}" points="{coords}"/>']  # fmt: skip
    for t, v, x, y in pts:
        parts.append(f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="2" '
                     f'fill="{colour}" data-t="{t}" data-lag="{v}"/>')  # fmt: skip
    parts.append("</g>")
    return "".join(parts)
