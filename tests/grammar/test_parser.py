"""Parse stage, text form: the grammar and the transformer into the IR."""

from __future__ import annotations

from decimal import Decimal

import pytest

from ontoos_explore.errors import ExploreError
from ontoos_explore.grammar.limits import MAX_DEPTH, MAX_TEXT
from ontoos_explore.grammar.parser import parse, parse_text
from ontoos_explore.ir import (
    AggregateField,
    And,
    Between,
    ColumnField,
    Compare,
    InList,
    IsNull,
    Like,
    Not,
    Or,
    Ref,
)


def refused(text: str) -> ExploreError:
    with pytest.raises(ExploreError) as info:
        parse_text(text)
    return info.value


def test_every_clause():
    e = parse_text(
        "explore w via r1, r2 fields a, r1.b as bee, count(), count(distinct r2.c) as n "
        "where a = 1 group by a, r1.b order by bee desc, a asc limit 7"
    )
    assert e.dataset.value == "w"
    assert [r.value for r in e.relations] == ["r1", "r2"]
    assert e.fields[0].model_dump() == ColumnField(ref=Ref(column="a")).model_dump()
    assert e.fields[1].alias == "bee" and e.fields[1].ref.relation == "r1"
    assert e.fields[2].model_dump() == AggregateField(func="count").model_dump()
    assert e.fields[3].distinct and e.fields[3].ref.relation == "r2" and e.fields[3].alias == "n"
    assert [(o.key.column, o.descending) for o in e.order_by] == [("bee", True), ("a", False)]
    assert e.limit == 7


def test_keywords_are_case_insensitive_and_whitespace_free():
    a = parse_text("explore w fields a where a = 1 and b is not null order by a desc limit 3")
    b = parse_text("EXPLORE w\n\tFIELDS a\r\n  WHERE a=1 AND b IS NOT NULL ORDER   BY a DESC LIMIT 3")
    assert a.model_dump() == b.model_dump()


def test_names_keep_their_case_for_binding_later():
    e = parse_text("explore Workloads fields NaMe")
    assert e.dataset.value == "Workloads" and e.fields[0].ref.column == "NaMe"


def test_a_column_may_be_named_like_an_aggregate():
    e = parse_text("explore w fields count, max, count()")
    assert [type(f).__name__ for f in e.fields] == ["ColumnField", "ColumnField", "AggregateField"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a = 'x'", Compare(ref=Ref(column="a"), op="=", value={"kind": "string", "value": "x"})),
        ("a <> 1", Compare(ref=Ref(column="a"), op="!=", value={"kind": "integer", "value": 1})),
        ("a >= -2.50", Compare(ref=Ref(column="a"), op=">=", value={"kind": "decimal", "value": Decimal("-2.50")})),
        ("a = TRUE", Compare(ref=Ref(column="a"), op="=", value={"kind": "boolean", "value": True})),
        ("a not in (1, 2)", InList(ref=Ref(column="a"), values=({"kind": "integer", "value": 1}, {"kind": "integer", "value": 2}), negated=True)),
        ("a between 1 and 2", Between(ref=Ref(column="a"), low={"kind": "integer", "value": 1}, high={"kind": "integer", "value": 2})),
        ("r.a is null", IsNull(ref=Ref(relation="r", column="a"))),
        ("a not ilike 'x%'", Like(ref=Ref(column="a"), pattern={"kind": "string", "value": "x%"}, negated=True, case_insensitive=True)),
    ],
)
def test_predicates(text, expected):
    assert parse(text, start="predicate").model_dump() == expected.model_dump()


def test_and_binds_tighter_than_or_and_chains_flatten():
    p = parse("a = 1 or b = 2 and c = 3 and d = 4", start="predicate")
    assert isinstance(p, Or) and len(p.items) == 2
    assert isinstance(p.items[1], And) and len(p.items[1].items) == 3
    q = parse("(a = 1 and b = 2) and (c = 3 and d = 4)", start="predicate")
    assert isinstance(q, And) and len(q.items) == 4


def test_not_applies_to_the_next_atom():
    p = parse("not a = 1 and b = 2", start="predicate")
    assert isinstance(p, And) and isinstance(p.items[0], Not)


def test_between_and_does_not_split_the_conjunction():
    p = parse("a between 1 and 2 and b = 3", start="predicate")
    assert isinstance(p, And) and isinstance(p.items[0], Between) and isinstance(p.items[1], Compare)


@pytest.mark.parametrize(
    "literal, value",
    [
        ("'it''s'", "it's"),
        ("'it\\'s'", "it's"),
        ('"say ""hi"""', 'say "hi"'),
        ("'back\\\\slash'", "back\\slash"),
        ("'100\\%'", "100\\%"),  # other backslashes are kept (LIKE escapes survive)
        ("'multi\nline'", "multi\nline"),
        ("'unicodé ✓'", "unicodé ✓"),
    ],
)
def test_string_literals(literal, value):
    p = parse(f"a = {literal}", start="predicate")
    assert p.value.value == value


def test_positions_point_at_the_token():
    e = parse_text("explore w\n  fields a,\n    b")
    assert (e.fields[1].ref.pos.line, e.fields[1].ref.pos.column) == (3, 5)


@pytest.mark.parametrize(
    "text, line, column, expected_words",
    [
        ("explore", 1, 8, ["a name"]),
        ("explore w", 1, 10, ["'fields'", "'via'"]),
        ("explore w fields", 1, 17, ["a name"]),
        ("explore w fields a b", 1, 20, ["'where'", "'limit'", "','"]),
        ("explore w fields a where a =", 1, 29, ["a quoted string", "an integer"]),
        ("explore w fields a\nwhere a = = 1", 2, 11, ["a quoted string"]),
        ("explore w fields *", 1, 18, ["a name"]),
    ],
)
def test_syntax_errors_say_where_and_what_was_expected(text, line, column, expected_words):
    err = refused(text)
    assert (err.subtype, err.code) == ("SYNTAX_ERROR", "EX101")
    assert (err.position.line, err.position.column) == (line, column)
    for word in expected_words:
        assert word in err.hint


def test_unterminated_string():
    err = refused("explore w fields a where a = 'abc")
    assert "unterminated string" in err.message and "'" in err.hint
    assert (err.position.line, err.position.column) == (1, 30)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("explore w fields median(a)", "'median' is not an aggregate"),
        ("explore w fields sum()", "needs a column"),
        ("explore w fields count(distinct)", "needs a column"),
        ("explore w fields max(distinct a)", "only supported inside count"),
    ],
)
def test_aggregate_mistakes(text, fragment):
    err = refused(text)
    assert err.subtype == "SYNTAX_ERROR" and fragment in err.message
    assert "count(" in err.hint


def test_names_longer_than_postgres_allows_are_refused():
    err = refused("explore w fields " + "a" * 64)
    assert err.code == "EX103" and "63" in err.message


def test_input_limits():
    assert refused("explore w fields a" + " " * MAX_TEXT).code == "EX408"
    deep = "explore w fields a where " + "not " * (MAX_DEPTH + 1) + "a = 1"
    err = refused(deep)
    assert err.code == "EX409" and str(MAX_DEPTH) in err.hint
    # far deeper input is still a clean refusal, not a RecursionError
    assert refused("explore w fields a where " + "not " * 10000 + "a = 1").code == "EX409"
    nested = "a = 0"
    for i in range(1, MAX_DEPTH + 2):  # alternate or/and, which do not flatten into each other
        nested = f"(a = {i} {'or' if i % 2 else 'and'} {nested})"
    assert refused("explore w fields a where " + nested).code == "EX409"
    # parentheses alone add no depth
    e = parse_text("explore w fields a where " + "(" * 5000 + "a = 1" + ")" * 5000)
    assert isinstance(e.where, Compare)


def test_long_flat_conjunctions_are_not_deep():
    e = parse_text("explore w fields a where " + " and ".join(f"a = {i}" for i in range(500)))
    assert isinstance(e.where, And) and len(e.where.items) == 500


@pytest.mark.parametrize("bad", ["explore w fields a\x00", "explore w fields a where a = '\ud800'"])
def test_unusable_characters(bad):
    err = refused(bad)
    assert err.subtype == "SYNTAX_ERROR" and "NUL" in err.hint


def test_not_a_string():
    with pytest.raises(ExploreError) as info:
        parse_text(42)  # type: ignore[arg-type]
    assert info.value.subtype == "INVALID_REQUEST"


# ---------------------------------------------------------------- the IR is built without validation

from hypothesis import given, settings  # noqa: E402

from ontoos_explore.grammar.render import to_text  # noqa: E402
from ontoos_explore.ir import Exploration  # noqa: E402

from ..properties.strategies import explorations  # noqa: E402


@settings(max_examples=300, derandomize=True, deadline=None)
@given(explorations())
def test_the_parsed_ir_is_exactly_what_strict_validation_builds(e):
    """ToIR builds nodes with ir.make (no validation): every value must already have
    the type pydantic would insist on (repr shows types: 1 vs True vs Decimal('1'))."""
    parsed = parse_text(to_text(e))
    validated = Exploration.model_validate(parsed.model_dump(), strict=True)
    assert repr(validated) == repr(parsed)
    assert validated == Exploration.model_validate(e.model_dump(), strict=True)


def test_an_unexpected_token_is_quoted_at_most_40_characters_long():
    with pytest.raises(ExploreError) as e:
        parse_text("explore workloads fields name where name = 'a' " + "x" * 50_000)
    assert len(e.value.message) < 150 and "(50000 characters)" in e.value.message


# ---------------------------------------------------------------- numbers past any column, lists past the limit

from ontoos_explore.grammar.limits import MAX_LIST  # noqa: E402
from ontoos_explore.types import MAX_INTEGER_DIGITS, NUMERIC_SCALE  # noqa: E402


def test_an_integer_literal_is_read_up_to_max_integer_digits():
    e = parse_text(f"explore w fields a where a = -{'9' * MAX_INTEGER_DIGITS}")
    assert e.where.value.value == -(10**MAX_INTEGER_DIGITS - 1)
    for digits in (MAX_INTEGER_DIGITS + 1, 60_000):
        err = refused(f"explore w fields a\nwhere a = {'1' * digits}")  # int() would raise ValueError: a 500
        assert (err.code, err.subtype, err.type) == ("EX301", "TYPE_MISMATCH", "validation")
        assert err.message == f"a literal is a number no column can hold (an integer of {digits} digits)"
        assert err.to_error()["position"] == {"line": 2, "column": 11}
        assert str(MAX_INTEGER_DIGITS) in err.hint


def test_a_limit_past_max_integer_digits_is_refused_too():
    err = refused(f"explore w fields a limit {'9' * (MAX_INTEGER_DIGITS + 1)}")
    assert err.code == "EX301" and err.message.startswith("the limit is a number no column can hold")


def test_a_decimal_literal_is_read_up_to_numerics_scale():
    e = parse_text(f"explore w fields a where a = 0.{'1' * NUMERIC_SCALE}")
    assert -e.where.value.value.as_tuple().exponent == NUMERIC_SCALE
    err = refused(f"explore w fields a where a = 0.{'1' * (NUMERIC_SCALE + 1)}")
    assert err.code == "EX301" and f"{NUMERIC_SCALE + 1} digits after the point" in err.message


def test_a_number_refusal_inside_a_json_filter_string_or_in_list_is_the_same():
    with pytest.raises(ExploreError) as info:
        parse("a in (1, " + "2" * 5000 + ")", start="predicate", what="filter")
    assert info.value.code == "EX301" and "an integer of 5000 digits" in info.value.message


def test_an_in_list_past_max_list_entries_is_refused_before_it_is_parsed():
    parse_text("explore w fields a where a in (" + ", ".join(["1"] * MAX_LIST) + ")")
    err = refused("explore w fields a where a in (" + ", ".join(["1"] * (MAX_LIST + 1)) + ")")
    assert (err.code, err.message) == ("EX102", f"an 'in' list in the exploration has {MAX_LIST + 1} entries")
    with pytest.raises(ExploreError) as info:
        parse("a not in (" + ",".join(["'x'"] * 5000) + ")", start="predicate", what="filter")
    assert info.value.message == "an 'in' list in filter has 5000 entries"
