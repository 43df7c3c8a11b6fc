"""Server, the rejections chart: (day, subtype, n) rows -> the geometry of a stacked bar chart, drawn as SVG.

One bar per day of the window that had rejections, stacked by subtype (a
fixed colour per subtype, in a legend), its total above it. Everything is
computed here, so the template writes numbers into SVG attributes and text
only; no JavaScript. The same data goes in `summary` (one sentence) and in
`days` (a table the page shows beside the chart), the text alternatives a
screen reader and a reader without images use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Colours with a contrast of at least 3:1 against white, told apart by hue and lightness.
PALETTE = ("#3b5bdb", "#e8590c", "#2b8a3e", "#c2255c", "#5f3dc4", "#0b7285", "#a61e4d", "#5c940d", "#862e9c",
           "#495057")
BAR, GAP, HEIGHT, LEFT, TOP = 22, 8, 120, 34, 18


@dataclass(slots=True)
class Segment:
    subtype: str
    n: int
    y: float
    height: float
    colour: str


@dataclass(slots=True)
class Bar:
    day: str
    total: int
    x: int
    top: float
    segments: list[Segment] = field(default_factory=list)


@dataclass(slots=True)
class Chart:
    bars: list[Bar]
    legend: list[tuple[str, str, int]]  # (subtype, colour, rejections in the window)
    width: int
    height: int
    ticks: list[tuple[float, int]]  # (y, value) of the axis
    summary: str
    days: list[dict[str, Any]]  # one row per day: day, total, and n per subtype


def build(rows: list[dict[str, Any]]) -> Chart | None:
    """The chart of `rows` (by_day_and_subtype), or None when there were no rejections."""
    rows = [r for r in rows if int(r["n"]) > 0]
    if not rows:
        return None
    per_day: dict[str, dict[str, int]] = {}
    per_subtype: dict[str, int] = {}
    for r in rows:
        day, subtype, n = str(r["day"])[:10], r["subtype"] or "(none)", int(r["n"])
        per_day.setdefault(day, {})[subtype] = per_day.get(day, {}).get(subtype, 0) + n
        per_subtype[subtype] = per_subtype.get(subtype, 0) + n
    ranked = sorted(per_subtype, key=lambda s: (-per_subtype[s], s))
    colours = {s: PALETTE[min(i, len(PALETTE) - 1)] for i, s in enumerate(ranked)}
    peak = max(sum(d.values()) for d in per_day.values())
    scale = HEIGHT / peak
    bars = []
    for i, (day, counts) in enumerate(sorted(per_day.items())):
        x = LEFT + i * (BAR + GAP)
        base = TOP + HEIGHT
        bar = Bar(day, sum(counts.values()), x, 0)
        for subtype in ranked:
            if subtype in counts:
                h = counts[subtype] * scale
                base -= h
                bar.segments.append(Segment(subtype, counts[subtype], round(base, 2), round(h, 2), colours[subtype]))
        bar.top = round(base, 2)
        bars.append(bar)
    ticks = [(round(TOP + HEIGHT - v * scale, 2), v) for v in sorted({0, peak // 2, peak})]
    total = sum(per_subtype.values())
    busiest = max(per_day.items(), key=lambda kv: (sum(kv[1].values()), kv[0]))
    summary = (f"{_n(total, 'rejection')} over {_n(len(per_day), 'day')} with any, most on {busiest[0]} "
               f"({sum(busiest[1].values())}); by subtype: "
               + ", ".join(f"{s} {per_subtype[s]}" for s in ranked) + ".")
    days = [{"day": day, "total": sum(c.values()), "counts": [c.get(s, 0) for s in ranked]}
            for day, c in sorted(per_day.items())]
    return Chart(bars, [(s, colours[s], per_subtype[s]) for s in ranked], LEFT + len(bars) * (BAR + GAP) + 10,
                 TOP + HEIGHT + 30, ticks, summary, days)


def _n(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
