"""Engine, rows: PostgreSQL values -> JSON-safe values, and the output mask.

One rule per Python type, applied to every cell: timestamps and dates as ISO
8601 strings, decimals always as strings (exact, canonical, no exponent),
floats as numbers (None when not finite), bytes never (hex text), anything
else as its text. A column the contract calls secret is masked whatever the
walls above let through.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from decimal import Decimal
from typing import Any

MASK = "********"


def decimal_text(d: Decimal) -> str:
    if not d.is_finite():
        return str(d)
    text = format(d, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def json_cell(v: Any) -> Any:
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


_NONE = type(None)
_PLAIN = frozenset({str, int, bool, _NONE})  # already JSON: passed through
_BY_TYPE = {  # the common database types, converted without json_cell's isinstance chain
    Decimal: decimal_text,
    dt.datetime: dt.datetime.isoformat,
    dt.date: dt.date.isoformat,
    float: lambda v: v if math.isfinite(v) else None,
}


def _column(values: tuple, masked: bool) -> tuple | list:
    """One column's cells, converted. A database column holds one Python type (and
    None), so the types are looked at once per column, not per cell."""
    if masked:
        return [MASK] * len(values)
    types = set(map(type, values))
    if types <= _PLAIN:
        return values
    types.discard(_NONE)
    if len(types) == 1:
        f = _BY_TYPE.get(types.pop())
        if f is not None:
            return [None if v is None else f(v) for v in values]
    return [json_cell(v) for v in values]


def json_rows(rows: list[tuple], masked: set[int]) -> list[list[Any]]:
    """Convert every cell; replace the cells of `masked` column positions."""
    if not rows:
        return []
    columns = [_column(values, i in masked) for i, values in enumerate(zip(*rows))]
    return [list(row) for row in zip(*columns)]
