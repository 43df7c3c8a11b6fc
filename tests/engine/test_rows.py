"""JSON-safe rows: PostgreSQL's text, reshaped a column at a time, gives what the per-cell
rule gives for the same values (as psycopg would load them into Python)."""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from decimal import Decimal

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ontoos_explore.engine.pool import CONNECT_OPTIONS
from ontoos_explore.engine.rows import MASK, decimal_text, iso_text, json_cell, json_rows, load_as_text, numeric_text

# kind -> (PostgreSQL type the value is cast to, values)
CELLS = {
    "text": ("text", st.text(st.characters(codec="utf-8", blacklist_characters="\x00"), max_size=8)),
    "integer": ("int8", st.integers(-(2**63), 2**63 - 1)),
    "boolean": ("bool", st.booleans()),
    "numeric": ("numeric", st.decimals(allow_nan=False, allow_infinity=False, places=4,
                                       min_value=-10**9, max_value=10**9)),
    "float": ("float8", st.floats(allow_nan=True, allow_infinity=True)),
    "date": ("date", st.dates(min_value=dt.date(1, 1, 1))),
    "timestamptz": ("timestamptz", st.datetimes(timezones=st.just(dt.timezone.utc))),
    "whole_seconds": ("timestamptz", st.datetimes(timezones=st.just(dt.timezone.utc)).map(
        lambda d: d.replace(microsecond=0))),
    "timestamp": ("timestamp", st.datetimes()),
    "time": ("time", st.times()),
    "bytes": ("bytea", st.binary(max_size=4)),
    "uuid": ("uuid", st.uuids()),
    "interval": ("interval", st.timedeltas(min_value=dt.timedelta(days=-999), max_value=dt.timedelta(days=999))),
}


@st.composite
def tables(draw):
    kinds = draw(st.lists(st.sampled_from(sorted(CELLS)), min_size=1, max_size=5))
    n = draw(st.integers(1, 12))
    rows = [tuple(draw(CELLS[k][1]) if draw(st.integers(0, 4)) else None for k in kinds) for _ in range(n)]
    masked = draw(st.sets(st.integers(0, len(kinds) - 1)))
    return kinds, rows, masked


def per_cell(rows, masked):
    """The rule, one cell at a time, on the Python values themselves."""
    return [[MASK if i in masked else json_cell(v) for i, v in enumerate(row)] for row in rows]


@pytest.fixture(scope="module")
def conn(pg_dsn):
    """A connection set up as the executor's pool sets up its own."""
    with psycopg.connect(pg_dsn, autocommit=True, options=CONNECT_OPTIONS) as c:
        load_as_text(c.adapters)
        yield c


def fetched(conn, kinds, rows):
    """The rows through PostgreSQL: sent as parameters, read back in text format."""
    width = len(kinds)
    tuples = ", ".join(
        "(" + ", ".join(f"${r * width + i + 1}::{CELLS[k][0]}" for i, k in enumerate(kinds)) + ")"
        for r in range(len(rows)))
    with psycopg.RawCursor(conn) as cur:
        cur.execute(f"SELECT * FROM (VALUES {tuples}) AS v", [v for row in rows for v in row])
        return cur.fetchall(), [c.type_code for c in cur.description]


@settings(max_examples=300, derandomize=True, deadline=None)
@given(table=tables())
def test_postgres_text_reshaped_equals_the_per_cell_rule(conn, table):
    kinds, rows, masked = table
    got_rows, oids = fetched(conn, kinds, rows)
    got = json_rows(got_rows, oids, masked)
    want = per_cell(rows, masked)
    assert json.dumps(got, allow_nan=False) == json.dumps(want, allow_nan=False)  # JSON-safe, same text
    assert all(type(r) is list for r in got)


def test_each_type_as_the_envelope_writes_it(conn):
    rows = [(1, "a", True, Decimal("12.500"), dt.datetime(2026, 1, 31, 12, tzinfo=dt.timezone.utc),
             dt.date(2026, 1, 31), math.inf, b"\x01", None, dt.datetime(2026, 1, 31, 12, 0, 0, 500000),
             uuid.UUID(int=1), dt.timedelta(minutes=90))]
    kinds = ["integer", "text", "boolean", "numeric", "timestamptz", "date", "float", "bytes", "text",
             "timestamp", "uuid", "interval"]
    got, oids = fetched(conn, kinds, rows)
    assert json_rows(got, oids, set()) == [[
        1, "a", True, "12.5", "2026-01-31T12:00:00+00:00", "2026-01-31", None, "\\x01", None,
        "2026-01-31T12:00:00.500000", "00000000-0000-0000-0000-000000000001", 5400.0]]
    masked = json_rows(got, oids, {1, 3})[0]
    assert masked[1] == MASK and masked[3] == MASK and masked[0] == 1
    assert json_rows([], oids, {0}) == []


def test_json_columns_are_their_text(conn):
    with conn.cursor() as cur:
        cur.execute("""SELECT '{"a": [1, 2]}'::jsonb, '[true]'::json""")
        got = json_rows(cur.fetchall(), [c.type_code for c in cur.description], set())
    assert got == [['{"a": [1, 2]}', "[true]"]]


def test_values_python_cannot_hold_keep_postgres_text(conn):
    """Before, psycopg could not load these at all (the exploration failed): now they are text."""
    with conn.cursor() as cur:
        cur.execute("SELECT 'infinity'::timestamptz, '-infinity'::date, '0044-03-15 10:00:00+00 BC'::timestamptz, "
                    "'10000-01-01'::date, 'NaN'::numeric, 'Infinity'::numeric")
        got = json_rows(cur.fetchall(), [c.type_code for c in cur.description], set())
    assert got == [["infinity", "-infinity", "0044-03-15 10:00:00+00 BC", "10000-01-01", "NaN", "Infinity"]]


@pytest.mark.parametrize("text, iso", [
    ("2026-01-31 12:00:00+00", "2026-01-31T12:00:00+00:00"),
    ("2026-01-31 12:00:00.5+05:30", "2026-01-31T12:00:00.500000+05:30"),
    ("2026-01-31 12:00:00.123456-03", "2026-01-31T12:00:00.123456-03:00"),
    ("2026-01-31 12:00:00", "2026-01-31T12:00:00"),
    ("12:00:00.25", "12:00:00.250000"),
    ("12:00:00+02", "12:00:00+02:00"),
    ("infinity", "infinity"),
    ("2026-01-31 12:00:00 BC", "2026-01-31 12:00:00 BC"),
])
def test_iso_text(text, iso):
    assert iso_text(text) == iso


@pytest.mark.parametrize("text", ["0", "-0.000", "12.500", "100", "0.010", "-5.0", "NaN", "Infinity", "-Infinity"])
def test_numeric_text_is_decimal_text(text):
    assert numeric_text(text) == decimal_text(Decimal(text))


def test_a_column_of_one_form_is_rewritten_whole_and_a_mixed_one_cell_by_cell(conn):
    """The fast path (same length, two replaces) and the careful one agree on a mixed column."""
    with conn.cursor() as cur:
        cur.execute("SELECT t FROM (VALUES ('2026-01-31 12:00:00+00'::timestamptz), ('2026-01-31 12:00:00.25+00'), "
                    "(NULL), ('infinity')) AS v(t)")
        mixed = json_rows(cur.fetchall(), [c.type_code for c in cur.description], set())
        cur.execute("SELECT t FROM (VALUES ('2026-01-31 12:00:00+00'::timestamptz), (NULL), "
                    "('2026-02-01 00:00:01+00')) AS v(t)")
        whole = json_rows(cur.fetchall(), [c.type_code for c in cur.description], set())
    assert mixed == [["2026-01-31T12:00:00+00:00"], ["2026-01-31T12:00:00.250000+00:00"], [None], ["infinity"]]
    assert whole == [["2026-01-31T12:00:00+00:00"], [None], ["2026-02-01T00:00:01+00:00"]]
