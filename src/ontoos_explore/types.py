"""Column types, shared by the contract and policy: literal -> typed Python value.

A literal is typed by the column it meets. The table below is the whole
conversion rule; `convert()` raises `LiteralTypeError` carrying the obvious
corrected literal (`fix`) where there is one, so the caller can offer
`retry_with`.

| column type | accepts                                  | Python value        |
|-------------|------------------------------------------|---------------------|
| text        | string                                   | str                 |
| enum        | string equal to one of the values        | str                 |
| integer     | integer (64-bit)                         | int                 |
| numeric     | integer, decimal                         | Decimal             |
| boolean     | true, false                              | bool                |
| date        | string 'YYYY-MM-DD'                      | datetime.date       |
| timestamp   | string, ISO 8601 (date alone = midnight) | datetime.datetime   |

A quoted string also converts to a number or boolean when its text is one
(`replicas = '3'`, as the flag form `--filter replicas=3` writes it); a bare
number never silently becomes text (`name = 123` is a mismatch whose fix is
to quote it).

What a column holds bounds every number before anything converts or writes it
out (`value_unfit`): integer columns are 64-bit; numeric is PostgreSQL's
numeric, at most NUMERIC_WHOLE_DIGITS digits before the point and
NUMERIC_SCALE after it; an integer is read and written (`int(text)`,
`str(n)`) up to MAX_INTEGER_DIGITS digits, past which Python refuses both (its
conversion is quadratic). `Decimal('1e7000000')` costs nothing to hold, its
digits written out or as an int cost seconds: a number past these is out of
range for every column, and is refused as such.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from decimal import Decimal, InvalidOperation
from typing import Literal

from .names import fold

ColumnType = Literal["text", "integer", "numeric", "boolean", "date", "timestamp", "enum"]
COLUMN_TYPES: tuple[str, ...] = ("text", "integer", "numeric", "boolean", "date", "timestamp", "enum")
NUMERIC_TYPES = frozenset({"integer", "numeric"})
TEXT_TYPES = frozenset({"text", "enum"})
ORDERED_TYPES = frozenset({"text", "integer", "numeric", "date", "timestamp", "enum"})

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
NUMERIC_WHOLE_DIGITS = 131_072  # PostgreSQL numeric: digits before the point ...
NUMERIC_SCALE = 16_383  # ... and after it
MAX_INTEGER_DIGITS = min(4_300, sys.get_int_max_str_digits() or 4_300)  # int(text) and str(n) take at most these
INTEGER_BOUND = 10**MAX_INTEGER_DIGITS  # |n| < INTEGER_BOUND: at most MAX_INTEGER_DIGITS digits
_INT_RE = re.compile(r"-?[0-9]+")
_DEC_RE = re.compile(r"-?[0-9]+(\.[0-9]+)?")

Value = str | int | Decimal | bool | dt.date | dt.datetime


class LiteralTypeError(ValueError):
    """`message` says what did not fit; `fix` is the corrected literal, if obvious."""

    def __init__(self, message: str, hint: str, fix: tuple[str, object] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.fix = fix


def integer_unfit(digits: int) -> str | None:
    """Why an integer written with `digits` digits cannot be read, or None."""
    return f"an integer of {digits} digits" if digits > MAX_INTEGER_DIGITS else None


def decimal_unfit(d: Decimal) -> str | None:
    """Why a finite Decimal fits no numeric column (too many digits before or after the point), or None.
    O(1) for the exponent (`adjusted`), linear in the digits written (`as_tuple`)."""
    whole = d.adjusted() + 1 if d else 1
    if whole > NUMERIC_WHOLE_DIGITS:
        return f"{whole} digits before the point"
    scale = -d.as_tuple().exponent
    if scale > NUMERIC_SCALE:
        return f"{scale} digits after the point"
    return None


def value_unfit(v: object) -> str | None:
    """Why an int or a finite Decimal fits no column, or None (anything else: None). Never converts it."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        if -INTEGER_BOUND < v < INTEGER_BOUND:  # compares sizes first: O(1) for a long one
            return None
        return f"an integer of more than {MAX_INTEGER_DIGITS} digits"
    if isinstance(v, Decimal) and v.is_finite():
        return decimal_unfit(v)
    return None


def _shown(n: int | str) -> str:
    """An integer as a message quotes it: in full up to 40 digits, else by its length (never str() of a long int)."""
    if isinstance(n, int):
        if -10**40 < n < 10**40:
            return str(n)
        return "an integer of more than 40 digits"
    return n if len(n) <= 40 else f"an integer of {len(n.lstrip('+-'))} digits"


def _out_of_range(why: str, column_type: str) -> LiteralTypeError:
    return LiteralTypeError(f"the number ({why}) is out of range for {a(column_type)} column",
                            f"integer columns are 64-bit; numeric columns hold at most {NUMERIC_WHOLE_DIGITS} digits "
                            f"before the point and {NUMERIC_SCALE} after it")


def a(word: str) -> str:
    """'a text column', 'an enum column', 'an integer column'."""
    return ("an " if word[:1] in "aeiou" else "a ") + word


def describe(kind: str, value: object) -> str:
    if kind == "string":
        return f"the string '{value}'"
    if kind == "boolean":
        return f"the boolean {str(value).lower()}"
    return f"the {kind} {value}"


def convert(kind: str, value: object, column_type: str, enum_values: tuple[str, ...] | None = None) -> Value:
    """Convert a literal (`kind`, `value`) for a column of `column_type`. A number no column holds
    (`value_unfit`) is out of range for every column, refused before it is converted or written out."""
    text = value if kind == "string" else None
    if kind in ("integer", "decimal"):
        why = value_unfit(value)
        if why is not None:
            raise _out_of_range(why, column_type)

    if column_type in TEXT_TYPES:
        if text is None:
            literal = str(value).lower() if kind == "boolean" else str(value)
            raise LiteralTypeError(
                f"{describe(kind, value)} does not fit {a(column_type)} column",
                f"quote it: '{literal}'",
                fix=("string", literal),
            )
        if column_type == "enum" and enum_values is not None and text not in enum_values:
            same = [v for v in enum_values if fold(v) == fold(text)]
            listing = ", ".join(f"'{v}'" for v in enum_values)
            if same:
                raise LiteralTypeError(
                    f"'{text}' is not one of the values of this enum column",
                    f"values are case-sensitive: did you mean '{same[0]}'? values: {listing}",
                    fix=("string", same[0]),
                )
            raise LiteralTypeError(f"'{text}' is not one of the values of this enum column", f"values: {listing}")
        return text

    if column_type == "integer":
        if kind == "integer":
            n = value if isinstance(value, int) else int(value)
            if not INT64_MIN <= n <= INT64_MAX:
                raise LiteralTypeError(f"{_shown(n)} is out of range for an integer column", "integers are 64-bit")
            return n
        if text is not None and _INT_RE.fullmatch(text.strip()):
            digits = text.strip()
            n = int(digits) if len(digits.lstrip("-").lstrip("0")) <= 19 else None  # never int() a long one
            if n is None or not INT64_MIN <= n <= INT64_MAX:
                raise LiteralTypeError(f"{_shown(digits)} is out of range for an integer column", "integers are 64-bit")
            return n
        if kind == "decimal":
            raise LiteralTypeError(f"{describe(kind, value)} does not fit an integer column", "use a whole number")
        raise LiteralTypeError(f"{describe(kind, value)} does not fit an integer column", "write an integer such as 3")

    if column_type == "numeric":
        if kind == "integer":
            return Decimal(int(value))
        if kind == "decimal":
            return Decimal(value)
        if text is not None and _DEC_RE.fullmatch(text.strip()):
            number = Decimal(text.strip())
            why = value_unfit(number)
            if why is not None:
                raise _out_of_range(why, column_type)
            return number
        raise LiteralTypeError(f"{describe(kind, value)} does not fit a numeric column", "write a number such as 2.5")

    if column_type == "boolean":
        if kind == "boolean":
            return bool(value)
        if text is not None and fold(text.strip()) in ("true", "false"):
            return fold(text.strip()) == "true"
        raise LiteralTypeError(f"{describe(kind, value)} does not fit a boolean column", "write true or false")

    if column_type == "date":
        if text is not None:
            try:
                return dt.date.fromisoformat(text.strip())
            except ValueError:
                pass
        raise LiteralTypeError(f"{describe(kind, value)} does not fit a date column", "write a quoted date such as '2026-01-31'")

    if column_type == "timestamp":
        if text is not None:
            try:
                return dt.datetime.fromisoformat(text.strip())
            except ValueError:
                pass
        raise LiteralTypeError(
            f"{describe(kind, value)} does not fit a timestamp column",
            "write a quoted ISO 8601 time such as '2026-01-31' or '2026-01-31T12:00:00Z'",
        )

    raise LiteralTypeError(f"unknown column type {column_type}", "check the contract")  # pragma: no cover


def python_kind(value: object) -> tuple[str, object]:
    """The literal kind of a plain Python/JSON value (contract values, JSON filters).

    Raises ValueError for values a literal cannot be (None, lists, floats that
    are not finite).
    """
    if isinstance(value, bool):
        return "boolean", value
    if isinstance(value, int):
        return "integer", value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("not a finite number")
        try:
            d = Decimal(repr(value))
        except InvalidOperation:  # pragma: no cover - repr of a finite float is a valid Decimal
            raise ValueError("not a number")
        return "decimal", d
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError("not a finite number")
        return "decimal", value
    if isinstance(value, str):
        return "string", value
    if isinstance(value, (dt.date, dt.datetime)):
        return "string", value.isoformat()
    raise ValueError(f"{type(value).__name__} is not a literal")
