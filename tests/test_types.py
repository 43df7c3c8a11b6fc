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
