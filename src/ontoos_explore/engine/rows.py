"""Engine, rows: PostgreSQL's text output -> JSON-safe values, and the output mask.

Results are fetched in text format, and the pool's connections load dates,
times, timestamps, numerics, uuids, bytea and json as the text PostgreSQL
wrote (`TEXT_TYPES`, psycopg's C text loader: no Python call per cell). The
session pins the styles that text depends on (`DateStyle=ISO`, `TimeZone=UTC`,
`bytea_output=hex`; see the executor's connect options), so most of it is
JSON-ready as it arrives. The rule, per column type:

| PostgreSQL type   | JSON value                                              |
|-------------------|---------------------------------------------------------|
| timestamptz       | ISO 8601 string, `2026-01-31T12:00:00+00:00`            |
| timestamp         | ISO 8601 string, `2026-01-31T12:00:00`                  |
| date, time, uuid  | PostgreSQL's text (ISO style: what isoformat() writes)  |
| numeric           | string, exact, no trailing zeros (`12.500` -> `12.5`)   |
| float             | number; None when not finite                            |
| bytea             | hex text, `\\x0102`                                     |
| json, jsonb       | its JSON text, as a string                              |
| anything else     | itself if it is already JSON (int, bool, str), else `json_cell` |

Fractional seconds are written with six digits, as Python's isoformat does;
values Python cannot hold (`infinity`, years BC) keep PostgreSQL's text. A
column the contract calls secret is masked whatever the walls above let
through. Whole columns are converted at once where they can be: a column of
timestamps costs two `str.replace` calls, not one call per cell.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import uuid
from decimal import Decimal
from operator import itemgetter
from typing import Any

from psycopg.adapt import AdaptersMap
from psycopg.postgres import types as pg_types
from psycopg.types.string import TextLoader

MASK = "********"
SEP = "\x1f"  # never in PostgreSQL's text for the types it joins


def _oid(name: str) -> int:
    return pg_types.get(name).oid


TIMESTAMPTZ, TIMESTAMP, TIMETZ, TIME = _oid("timestamptz"), _oid("timestamp"), _oid("timetz"), _oid("time")
NUMERIC, FLOAT4, FLOAT8 = _oid("numeric"), _oid("float4"), _oid("float8")
TEXT_TYPES = ("date", "time", "timetz", "timestamp", "timestamptz", "numeric", "uuid", "bytea", "json", "jsonb")


def load_as_text(adapters: AdaptersMap) -> None:
    """Register psycopg's text loader for TEXT_TYPES (a connection's `adapters`)."""
    for name in TEXT_TYPES:
        adapters.register_loader(name, TextLoader)


# ---------------------------------------------------------------- one cell


def decimal_text(d: Decimal) -> str:
    if not d.is_finite():
        return str(d)
    text = format(d, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def numeric_text(text: str) -> str:
    """PostgreSQL's numeric text (never an exponent) -> decimal_text of the same value."""
    if "." not in text:
        return text
    text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


_DATETIME = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?([+-]\d\d(?::\d\d){0,2})?")
_TIME = re.compile(r"(\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?([+-]\d\d(?::\d\d){0,2})?")


def iso_text(text: str) -> str:
    """PostgreSQL's ISO-style timestamp or time -> what Python's isoformat() writes for it:
    `T` between date and time, six fractional digits, `+hh:mm` offsets. Anything else
    (infinity, years BC or past 9999) is returned as PostgreSQL wrote it."""
    m = _DATETIME.fullmatch(text)
    if m is not None:
        date, clock, frac, offset = m.groups()
        head = date + "T" + clock
    else:
        m = _TIME.fullmatch(text)
        if m is None:
            return text
        clock, frac, offset = m.groups()
        head = clock
    if frac:
        head += "." + frac.ljust(6, "0")
    if offset:
        head += offset + ":00" if len(offset) == 3 else offset
    return head


def json_cell(v: Any) -> Any:
    """A Python value (from a loader other than the text ones) -> its JSON-safe value."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, Decimal):
        return decimal_text(v)
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(v).hex()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, (list, tuple)):
        return [json_cell(x) for x in v]
    return str(v)


# ---------------------------------------------------------------- one column
# Each takes a column's non-null values (a list or tuple of what the loader gave) and
# returns the converted values, or None when they are JSON-ready as they are.


def _timestamps(values, whole: int, offset: str):
    """Every value of the common form (length `whole`: four-digit year, whole seconds,
    `offset` appended to each) is rewritten with two replaces over the joined column."""
    if set(map(len, values)) == {whole}:
        return (SEP.join(values).replace(" ", "T").replace(SEP, offset + SEP) + offset).split(SEP)
    return [iso_text(v) for v in values]


def _timestamptz(values):
    return _timestamps(values, len("2026-01-31 12:00:00+00"), ":00")


def _timestamp(values):
    return _timestamps(values, len("2026-01-31 12:00:00"), "")


def _times(values):
    joined = SEP.join(values)
    if "." not in joined and "+" not in joined and "-" not in joined:
        return None  # hh:mm:ss, as isoformat writes it
    return [iso_text(v) for v in values]


def _numeric(values):
    if "." not in SEP.join(values):
        return None  # integers: PostgreSQL's text is already the canonical form
    return [numeric_text(v) for v in values]


def _floats(values):
    if math.isfinite(sum(values)):  # one C loop; an overflow or a NaN takes the careful path
        return None
    return [v if math.isfinite(v) else None for v in values]


_PLAIN = frozenset({str, int, bool})


def _other(values):
    """A type the table does not name: left alone when already JSON, else cell by cell."""
    if set(map(type, values)) <= _PLAIN:
        return None
    return [json_cell(v) for v in values]


BY_OID = {TIMESTAMPTZ: _timestamptz, TIMESTAMP: _timestamp, TIME: _times, TIMETZ: _times,
          NUMERIC: _numeric, FLOAT4: _floats, FLOAT8: _floats}
JSON_READY = frozenset(_oid(t) for t in ("date", "uuid", "bytea", "json", "jsonb", "text", "varchar", "bpchar",
                                         "name", "int2", "int4", "int8", "bool", "oid"))


# ---------------------------------------------------------------- rows


def json_rows(rows: list[tuple], oids: list[int], masked: set[int]) -> list[list[Any]]:
    """Rows as fetched (`oids`: each column's type) -> lists of JSON-safe values;
    the cells of `masked` column positions replaced."""
    out = list(map(list, rows))
    if not out:
        return out
    for i, oid in enumerate(oids):
        if i in masked:
            for row in out:
                row[i] = MASK
            continue
        if oid in JSON_READY:
            continue
        column = list(map(itemgetter(i), rows))
        nulls = None in column
        values = [v for v in column if v is not None] if nulls else column
        if not values:
            continue
        converted = BY_OID.get(oid, _other)(values)
        if converted is None:
            continue
        if nulls:
            it = iter(converted)
            converted = [None if v is None else next(it) for v in column]
        for row, v in zip(out, converted):
            row[i] = v
    return out
