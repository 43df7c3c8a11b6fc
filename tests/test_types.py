"""Column types: the literal conversion table of types.py, row by row."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from ontoos_explore.types import LiteralTypeError, convert, python_kind

ENUM = ("Deployment", "Job")


@pytest.mark.parametrize(
    "kind, value, column_type, expected",
    [
        ("string", "x", "text", "x"),
        ("string", "Job", "enum", "Job"),
        ("integer", 3, "integer", 3),
        ("string", " 42 ", "integer", 42),
        ("integer", 3, "numeric", Decimal(3)),
        ("decimal", Decimal("2.5"), "numeric", Decimal("2.5")),
        ("string", "-2.5", "numeric", Decimal("-2.5")),
        ("boolean", True, "boolean", True),
        ("string", "FALSE", "boolean", False),
        ("string", "2026-01-31", "date", dt.date(2026, 1, 31)),
        ("string", "2026-01-31", "timestamp", dt.datetime(2026, 1, 31)),
        ("string", "2026-01-31T12:00:00Z", "timestamp", dt.datetime(2026, 1, 31, 12, tzinfo=dt.timezone.utc)),
    ],
)
def test_accepted(kind, value, column_type, expected):
    got = convert(kind, value, column_type, ENUM if column_type == "enum" else None)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    "kind, value, column_type, hint_part, fix",
    [
        ("integer", 3, "text", "quote it: '3'", ("string", "3")),
        ("boolean", True, "text", "quote it: 'true'", ("string", "true")),
        ("decimal", Decimal("1.5"), "enum", "quote it", ("string", "1.5")),
        ("string", "job", "enum", "did you mean 'Job'", ("string", "Job")),
        ("string", "Pod", "enum", "'Deployment', 'Job'", None),
        ("string", "abc", "integer", "integer such as", None),
        ("decimal", Decimal("2.5"), "integer", "whole number", None),
        ("integer", 2**63, "integer", "64-bit", None),
        ("boolean", True, "numeric", "number such as", None),
        ("string", "maybe", "boolean", "true or false", None),
        ("integer", 1, "boolean", "true or false", None),
        ("string", "31/01/2026", "date", "2026-01-31", None),
        ("integer", 20260131, "date", "quoted date", None),
        ("string", "yesterday", "timestamp", "ISO 8601", None),
    ],
)
def test_refused_with_a_hint(kind, value, column_type, hint_part, fix):
    with pytest.raises(LiteralTypeError) as info:
        convert(kind, value, column_type, ENUM if column_type == "enum" else None)
    assert hint_part in info.value.hint
    assert info.value.fix == fix


@pytest.mark.parametrize(
    "value, expected",
    [(True, ("boolean", True)), (3, ("integer", 3)), (2.5, ("decimal", Decimal("2.5"))), ("x", ("string", "x")),
     (dt.date(2026, 1, 2), ("string", "2026-01-02"))],
)
def test_python_kind(value, expected):
    assert python_kind(value) == expected


@pytest.mark.parametrize("value", [None, [1], float("nan"), float("inf"), Decimal("NaN"), {"a": 1}])
def test_python_kind_refuses_non_literals(value):
    with pytest.raises(ValueError):
        python_kind(value)


# ---------------------------------------------------------------- numbers no column holds, refused unconverted

import time  # noqa: E402

from ontoos_explore.types import (  # noqa: E402
    MAX_INTEGER_DIGITS,
    NUMERIC_SCALE,
    NUMERIC_WHOLE_DIGITS,
    value_unfit,
)


@pytest.mark.parametrize(("kind", "value", "column_type", "says"), [
    ("decimal", Decimal("1e7000000"), "numeric", "7000001 digits before the point"),
    ("decimal", Decimal("1e-7000000"), "numeric", "7000000 digits after the point"),
    ("decimal", Decimal("1e7000000"), "text", "out of range for a text column"),
    ("integer", 10**5000, "numeric", f"more than {MAX_INTEGER_DIGITS} digits"),
    ("integer", 10**5000, "integer", "out of range for an integer column"),
    ("integer", -(10**5000), "text", "out of range"),  # not str() of it, which raises past 4300 digits
    ("string", "0." + "1" * (NUMERIC_SCALE + 1), "numeric", f"{NUMERIC_SCALE + 1} digits after the point"),
    ("string", "9" * 5000, "integer", "an integer of 5000 digits is out of range"),  # never int() of it
    ("string", "-" + "0" * 30 + "9" * 19, "integer", "out of range"),
], ids=lambda v: str(v)[:24] if not isinstance(v, int) else f"int-{v.bit_length()}")
def test_a_number_no_column_holds_is_out_of_range_without_converting_it(kind, value, column_type, says):
    start = time.thread_time()
    with pytest.raises(LiteralTypeError) as info:
        convert(kind, value, column_type)
    assert says in info.value.message and len(info.value.message) < 200
    assert time.thread_time() - start < 0.5  # converting or writing out 1e7000000 takes seconds


@pytest.mark.parametrize(("kind", "value", "column_type", "expected"), [
    ("decimal", Decimal("1e131071"), "numeric", Decimal("1e131071")),
    ("decimal", Decimal("1e-16383"), "numeric", Decimal("1e-16383")),
    ("integer", 10**MAX_INTEGER_DIGITS - 1, "numeric", Decimal(10**MAX_INTEGER_DIGITS - 1)),
    ("string", "-" + "0" * 30 + "42", "integer", -42),  # leading zeros are no digits of the value
    ("string", "9223372036854775807", "integer", 2**63 - 1),
], ids=lambda v: str(v)[:24] if not isinstance(v, int) else f"int-{v.bit_length()}")
def test_numbers_up_to_what_columns_hold_convert(kind, value, column_type, expected):
    got = convert(kind, value, column_type)
    assert got == expected and type(got) is type(expected)


def test_a_40_digit_integer_is_still_quoted_in_full():
    with pytest.raises(LiteralTypeError) as info:
        convert("integer", 1234567890123456789012345678901234567890, "integer")
    assert info.value.message == "1234567890123456789012345678901234567890 is out of range for an integer column"


def test_value_unfit_is_the_bound_of_every_column():
    assert value_unfit(Decimal(f"1e{NUMERIC_WHOLE_DIGITS - 1}")) is None
    assert value_unfit(Decimal(f"1e{NUMERIC_WHOLE_DIGITS}")) == f"{NUMERIC_WHOLE_DIGITS + 1} digits before the point"
    assert value_unfit(Decimal("0e7000000")) is None  # zero has one digit, whatever its exponent
    assert value_unfit(True) is None and value_unfit("1" * 10_000) is None and value_unfit(Decimal("Infinity")) is None
