"""The rejections chart (server/chart.py): (day, subtype, n) rows -> a stacked bar chart's geometry.

- no rows, no chart;
- one bar per distinct day, in day order, BAR + GAP apart from LEFT;
- each bar's segments are stacked: their heights add up to the bar's total on the common scale
  (HEIGHT for the busiest day), each segment sits on the one below, the tallest bar reaches TOP;
- subtypes are ranked by their count in the window (then by name), which sets both the stacking
  order and the colours; past the palette, the last colour is reused;
- the text alternatives: `summary` names the total, the days, the busiest day and every subtype's
  count; `days` has per-day totals and counts aligned with the legend (0 where none);
- a missing subtype is shown as "(none)"; the same (day, subtype) given twice is added up.
"""

from __future__ import annotations

import pytest

from ontoos_explore.server.chart import BAR, GAP, HEIGHT, LEFT, PALETTE, TOP, build

# 2026-11-29: UNKNOWN_FIELD 3, SECRET_COLUMN_DENIED 1          -> 4
# 2026-11-30: UNKNOWN_FIELD 1, ROW_BUDGET 6                    -> 7 (the busiest)
# 2026-12-01: SECRET_COLUMN_DENIED 2                           -> 2
# in the window: ROW_BUDGET 6, UNKNOWN_FIELD 4, SECRET_COLUMN_DENIED 3; 13 in all
ROWS = [
    {"day": "2026-12-01", "subtype": "SECRET_COLUMN_DENIED", "n": 2},
    {"day": "2026-11-29", "subtype": "UNKNOWN_FIELD", "n": 3},
    {"day": "2026-11-30", "subtype": "ROW_BUDGET", "n": 6},
    {"day": "2026-11-29", "subtype": "SECRET_COLUMN_DENIED", "n": 1},
    {"day": "2026-11-30", "subtype": "UNKNOWN_FIELD", "n": 1},
]
RANKED = ["ROW_BUDGET", "UNKNOWN_FIELD", "SECRET_COLUMN_DENIED"]
ROUNDING = 0.011  # every coordinate is rounded to 2 decimals


def test_no_rows_is_no_chart():
    assert build([]) is None


def test_one_bar_per_day_in_day_order_spaced_from_the_left():
    chart = build(ROWS)
    assert [b.day for b in chart.bars] == ["2026-11-29", "2026-11-30", "2026-12-01"]
    assert [b.total for b in chart.bars] == [4, 7, 2]
    assert [b.x for b in chart.bars] == [LEFT, LEFT + BAR + GAP, LEFT + 2 * (BAR + GAP)]
    assert chart.width == LEFT + 3 * (BAR + GAP) + 10 and chart.height == TOP + HEIGHT + 30


def test_segments_are_stacked_on_one_scale():
    chart = build(ROWS)
    scale = HEIGHT / 7  # the busiest day fills HEIGHT
    for bar in chart.bars:
        heights = [s.height for s in bar.segments]
        assert sum(heights) == pytest.approx(bar.total * scale, abs=ROUNDING * len(heights))
        assert bar.segments[0].y + bar.segments[0].height == pytest.approx(TOP + HEIGHT, abs=2 * ROUNDING)
        for below, above in zip(bar.segments, bar.segments[1:]):
            assert above.y + above.height == pytest.approx(below.y, abs=2 * ROUNDING)
        assert bar.top == bar.segments[-1].y
    tallest = chart.bars[1]
    assert tallest.top == TOP
    assert [(s.subtype, s.n) for s in tallest.segments] == [("ROW_BUDGET", 6), ("UNKNOWN_FIELD", 1)]
    assert tallest.segments[0].height == pytest.approx(6 * HEIGHT / 7, abs=ROUNDING)
    assert chart.bars[2].top == pytest.approx(TOP + HEIGHT - 2 * HEIGHT / 7, abs=ROUNDING)


def test_the_axis_ticks_are_zero_half_and_the_peak():
    chart = build(ROWS)
    assert [v for _, v in chart.ticks] == [0, 3, 7]
    assert [y for y, _ in chart.ticks] == pytest.approx([TOP + HEIGHT, TOP + HEIGHT - 3 * HEIGHT / 7, TOP],
                                                        abs=ROUNDING)


def test_subtypes_are_ranked_by_count_and_coloured_in_that_order():
    chart = build(ROWS)
    assert chart.legend == [("ROW_BUDGET", PALETTE[0], 6), ("UNKNOWN_FIELD", PALETTE[1], 4),
                            ("SECRET_COLUMN_DENIED", PALETTE[2], 3)]
    for subtype, colour, total in chart.legend:
        assert total == sum(r["n"] for r in ROWS if r["subtype"] == subtype)
        segments = [s for b in chart.bars for s in b.segments if s.subtype == subtype]
        assert {s.colour for s in segments} == {colour}
    for bar in chart.bars:  # stacked in the legend's order, the biggest at the bottom
        order = [s.subtype for s in bar.segments]
        assert order == [s for s in RANKED if s in order]


def test_a_tie_in_count_is_ranked_by_name():
    rows = [{"day": "2026-11-30", "subtype": s, "n": n} for s, n in (("ZED", 2), ("ALPHA", 2), ("MID", 5))]
    assert [s for s, _, _ in build(rows).legend] == ["MID", "ALPHA", "ZED"]


def test_more_subtypes_than_colours_reuse_the_last_colour():
    count = len(PALETTE) + 3
    names = [f"SUBTYPE_{chr(ord('A') + i)}" for i in range(count)]
    rows = [{"day": "2026-11-30", "subtype": name, "n": 100 - i} for i, name in enumerate(names)]
    legend = build(rows).legend
    assert [s for s, _, _ in legend] == names
    assert [c for _, c, _ in legend] == list(PALETTE) + [PALETTE[-1]] * 3
    assert len(set(PALETTE)) == len(PALETTE)  # before the overflow, each subtype has its own


def test_the_summary_names_total_days_busiest_day_and_each_subtype():
    assert build(ROWS).summary == ("13 rejections over 3 days with any, most on 2026-11-30 (7); "
                                   "by subtype: ROW_BUDGET 6, UNKNOWN_FIELD 4, SECRET_COLUMN_DENIED 3.")


def test_the_days_table_is_aligned_with_the_legend():
    assert build(ROWS).days == [
        {"day": "2026-11-29", "total": 4, "counts": [0, 3, 1]},
        {"day": "2026-11-30", "total": 7, "counts": [6, 1, 0]},
        {"day": "2026-12-01", "total": 2, "counts": [0, 0, 2]},
    ]


def test_a_missing_subtype_is_shown_as_none():
    chart = build([{"day": "2026-11-30", "subtype": None, "n": 2},
                   {"day": "2026-11-30", "subtype": "UNKNOWN_FIELD", "n": 1}])
    assert chart.legend == [("(none)", PALETTE[0], 2), ("UNKNOWN_FIELD", PALETTE[1], 1)]
    assert [s.subtype for s in chart.bars[0].segments] == ["(none)", "UNKNOWN_FIELD"]
    assert chart.summary.endswith("by subtype: (none) 2, UNKNOWN_FIELD 1.")


def test_the_same_day_and_subtype_twice_are_added_up():
    chart = build([{"day": "2026-11-30", "subtype": "UNKNOWN_FIELD", "n": 2},
                   {"day": "2026-11-30", "subtype": "UNKNOWN_FIELD", "n": 3},
                   {"day": "2026-12-01", "subtype": "UNKNOWN_FIELD", "n": 1}])
    assert [(b.day, b.total, [(s.subtype, s.n) for s in b.segments]) for b in chart.bars] == [
        ("2026-11-30", 5, [("UNKNOWN_FIELD", 5)]), ("2026-12-01", 1, [("UNKNOWN_FIELD", 1)])]
    assert chart.legend == [("UNKNOWN_FIELD", PALETTE[0], 6)]
    assert chart.bars[0].segments[0].height == HEIGHT and chart.bars[0].top == TOP
    assert chart.days == [{"day": "2026-11-30", "total": 5, "counts": [5]},
                          {"day": "2026-12-01", "total": 1, "counts": [1]}]


def test_a_day_given_as_a_timestamp_is_its_date():
    chart = build([{"day": "2026-11-30T00:00:00+00:00", "subtype": "UNKNOWN_FIELD", "n": 1},
                   {"day": "2026-11-30", "subtype": "UNKNOWN_FIELD", "n": 1}])
    assert [(b.day, b.total) for b in chart.bars] == [("2026-11-30", 2)]
