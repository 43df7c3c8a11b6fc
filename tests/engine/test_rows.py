"""JSON-safe rows: converting a column at a time gives what the per-cell rule gives."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from ontoos_explore.engine.rows import MASK, decimal_text, json_cell, json_rows

CELLS = {
    "text": st.text(max_size=8),
    "integer": st.integers(-(2**63), 2**63 - 1),
    "boolean": st.booleans(),
    "numeric": st.decimals(allow_nan=False, allow_infinity=False, places=4, min_value=-10**9, max_value=10**9),
    "float": st.floats(allow_nan=True, allow_infinity=True),
    "date": st.dates(),
    "timestamp": st.datetimes(timezones=st.just(dt.timezone.utc)),
    "bytes": st.binary(max_size=4),
    "mixed": st.one_of(st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=2), st.none()),
}


@st.composite
def tables(draw):
    kinds = draw(st.lists(st.sampled_from(sorted(CELLS)), min_size=1, max_size=5))
    n = draw(st.integers(0, 12))
    rows = [tuple(draw(st.none() | CELLS[k]) if draw(st.integers(0, 4)) else None for k in kinds) for _ in range(n)]
    masked = draw(st.sets(st.integers(0, len(kinds) - 1)))
    return rows, masked


def per_cell(rows, masked):
    """The rule, one cell at a time (the module's docstring)."""
    return [[MASK if i in masked else json_cell(v) for i, v in enumerate(row)] for row in rows]


@settings(max_examples=400, derandomize=True, deadline=None)
@given(tables())
def test_a_column_at_a_time_equals_the_per_cell_rule(table):
    rows, masked = table
    got = json_rows(rows, masked)
    want = per_cell(rows, masked)
    assert json.dumps(got, allow_nan=False) == json.dumps(want, allow_nan=False)  # JSON-safe, same text
    assert all(type(r) is list for r in got)


def test_each_type_as_the_envelope_writes_it():
    rows = [(1, "a", True, Decimal("12.500"), dt.datetime(2026, 1, 31, 12, tzinfo=dt.timezone.utc),
             dt.date(2026, 1, 31), math.inf, b"\x01", None)]
    assert json_rows(rows, set()) == [[1, "a", True, "12.5", "2026-01-31T12:00:00+00:00", "2026-01-31", None,
                                       "\\x01", None]]
    assert json_rows(rows, {1, 3})[0][1] == MASK and json_rows(rows, {1, 3})[0][3] == MASK
    assert json_rows([], {0}) == []
    assert decimal_text(Decimal("-0.000")) == "0"
