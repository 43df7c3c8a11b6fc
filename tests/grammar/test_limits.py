"""grammar/limits.py: what any input must satisfy before it is trusted, for every role.

`check_json` refuses a whole JSON request (the JSON form, any tool's arguments) before any of
it is read: deeper than MAX_JSON_DEPTH is EX102, more than MAX_JSON_VALUES values or
MAX_JSON_CHARS characters is EX408, a key or string holding a NUL or an unpaired surrogate is
EX101; the message names the place (filter[0].value[1], a key of ...) and never the bad text.
`check_text` holds the text form to MAX_TEXT characters and the same characters, with the
line and column of the bad one; `check_depth` holds predicates to MAX_DEPTH levels. A number no
column can hold is EX301 at its place, found without converting it; `check_lists` holds a text's
'in' lists to MAX_LIST entries before it is parsed (EX102, as the JSON form). Each limit is checked
on both sides of its boundary, and without recursion.
"""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from ontoos_explore.errors import ExploreError
from ontoos_explore.grammar.forms import from_json, loads_strict
from ontoos_explore.grammar.limits import (
    MAX_DEPTH,
    MAX_JSON_CHARS,
    MAX_JSON_DEPTH,
    MAX_JSON_VALUES,
    MAX_LIST,
    MAX_TEXT,
    Unholdable,
    check_depth,
    check_json,
    check_lists,
    check_shape,
    check_text,
    predicate_depth,
)
from ontoos_explore.grammar.parser import parse_text
from ontoos_explore.types import MAX_INTEGER_DIGITS, NUMERIC_SCALE, NUMERIC_WHOLE_DIGITS
from ontoos_explore.ir import Compare, Lit, Not, Ref


def refusal(fn, *args) -> ExploreError:
    with pytest.raises(ExploreError) as caught:
        fn(*args)
    return caught.value


def nested(levels: int, inner: object = 1) -> object:
    value = inner
    for _ in range(levels):
        value = [value]
    return value


# ================================================================ check_json: characters, and where they are


@pytest.mark.parametrize(("value", "message"), [
    ({"filter": [{"value": ["ok", "\x00"]}]}, "filter[0].value[1] contains a character that cannot be used (U+0000)"),
    ({"dataset": "work\x00loads"}, "dataset contains a character that cannot be used (U+0000)"),
    ({"filter": "name = '\ud800'"}, "filter contains a character that cannot be used (U+D800)"),
    ({"fields": ["name", "\udfff"]}, "fields[1] contains a character that cannot be used (U+DFFF)"),
    ({"a": {"\x00bad": 1}}, "a key of a contains a character that cannot be used (U+0000)"),
    ({"\udc80": 1}, "a key of the arguments contains a character that cannot be used (U+DC80)"),
    ({"weird key!": "\x00"}, "[?] contains a character that cannot be used (U+0000)"),  # the key is not echoed
    ({"a" * 41: {"b": "\x00"}}, "[?].b contains a character that cannot be used (U+0000)"),  # nor a long one
    ({1: [["ok", "\x00"]]}, "[?][0][1] contains a character that cannot be used (U+0000)"),  # a key that is no string
    ("\x00", "the arguments contains a character that cannot be used (U+0000)"),
])
def test_a_character_postgresql_cannot_hold_is_ex101_at_its_place(value, message):
    err = refusal(check_json, value, "the arguments")
    assert (err.code, err.subtype, err.message) == ("EX101", "SYNTAX_ERROR", message)
    assert "\x00" not in err.message and "bad" not in err.message and "weird" not in err.message
    assert "NUL" in err.hint and "surrogate" in err.hint


def test_the_first_bad_character_is_the_one_named():
    err = refusal(check_json, {"dataset": "ok\ud800\x00"})
    assert err.message == "dataset contains a character that cannot be used (U+0000)"  # NUL is looked for first
    err = refusal(check_json, {"dataset": "ok\udfff then \ud800"})
    assert err.message == "dataset contains a character that cannot be used (U+DFFF)"


@pytest.mark.parametrize("value", [
    {"dataset": "workloads", "fields": ["name", "\U0001f600", "naïve", "日本"], "limit": 5},
    {"filter": [{"field": "x", "op": "in", "value": [1, 2.5, None, True, "a\u2028b"]}]},
    {"": "", "a b": ["\ufeff"]},
    [], {}, None, 0, "",
])
def test_what_is_well_formed_passes(value):
    assert check_json(value) is None


# ================================================================ check_json: size, on both sides of each bound


def test_depth_up_to_the_limit_passes_one_more_is_ex102():
    check_json(nested(MAX_JSON_DEPTH))
    err = refusal(check_json, nested(MAX_JSON_DEPTH + 1), "the body")
    assert (err.code, err.subtype) == ("EX102", "INVALID_REQUEST")
    assert err.message == f"the body nests more than {MAX_JSON_DEPTH} levels deep"
    check_json({"a": nested(MAX_JSON_DEPTH - 1)})  # an object is a level too
    assert refusal(check_json, {"a": nested(MAX_JSON_DEPTH)}).code == "EX102"


def test_depth_is_checked_without_recursion():
    err = refusal(check_json, nested(200_000))  # far past the interpreter's recursion limit
    assert err.code == "EX102" and "levels deep" in err.message


def test_values_up_to_the_limit_pass_one_more_is_ex408():
    check_json([0] * (MAX_JSON_VALUES - 1))  # with the list itself: MAX_JSON_VALUES values
    err = refusal(check_json, [0] * MAX_JSON_VALUES, "the request")
    assert (err.code, err.subtype) == ("EX408", "QUERY_BUDGET_EXCEEDED")
    assert err.message == f"the request holds more than {MAX_JSON_VALUES} values"
    assert refusal(check_json, {"a": [{}] * MAX_JSON_VALUES}).code == "EX408"  # objects count as values


def test_characters_up_to_the_limit_pass_one_more_is_ex408():
    check_json(["x" * (MAX_JSON_CHARS // 2), "y" * (MAX_JSON_CHARS // 2)])
    err = refusal(check_json, ["x" * (MAX_JSON_CHARS // 2), "y" * (MAX_JSON_CHARS // 2 + 1)])
    assert err.code == "EX408" and err.message == f"the request holds more than {MAX_JSON_CHARS} characters"
    keys = {"k" * 1000 + str(i): 1 for i in range(MAX_JSON_CHARS // 1000)}  # keys count as characters too
    assert refusal(check_json, keys).code == "EX408"


# ================================================================ check_text


def test_check_text_takes_a_string_of_at_most_max_text_characters():
    check_text("x" * MAX_TEXT, "the query")
    err = refusal(check_text, "x" * (MAX_TEXT + 1), "the query")
    assert (err.code, err.message) == ("EX408", f"the query is {MAX_TEXT + 1} characters long")
    assert str(MAX_TEXT) in err.hint
    err = refusal(check_text, 42, "the query")
    assert (err.code, err.message) == ("EX102", "the query must be a string")


@pytest.mark.parametrize(("text", "line", "column", "char"), [
    ("explore\x00 workloads", 1, 8, "U+0000"),
    ("explore workloads\nfields na\x00me", 2, 10, "U+0000"),
    ("explore workloads\nfields name\nwhere x = '\ud800'", 3, 12, "U+D800"),
])
def test_check_text_names_the_character_and_its_line_and_column(text, line, column, char):
    err = refusal(check_text, text, "the query")
    assert (err.code, err.message) == ("EX101", f"the query contains a character that cannot be used ({char})")
    assert err.to_error()["position"] == {"line": line, "column": column}


# ================================================================ predicate depth


def _nots(n: int):
    p = Compare(ref=Ref(column="replicas"), op=">", value=Lit(kind="integer", value=1))
    for _ in range(n):
        p = Not(item=p)
    return p


def test_predicate_depth_counts_and_or_not_levels():
    assert predicate_depth(None) == 0
    assert predicate_depth(parse_text("explore workloads fields name where a = 1").where) == 0
    assert predicate_depth(parse_text("explore workloads fields name where a = 1 and b = 2").where) == 1
    assert predicate_depth(parse_text("explore workloads fields name where a = 1 and (b = 2 or not c = 3)").where) == 3
    assert predicate_depth(_nots(10_000)) == 10_000  # iteratively: no RecursionError


def test_check_depth_takes_max_depth_levels_and_refuses_one_more_with_ex409():
    check_depth(_nots(MAX_DEPTH))
    err = refusal(check_depth, _nots(MAX_DEPTH + 1))
    assert (err.code, err.subtype) == ("EX409", "QUERY_BUDGET_EXCEEDED")
    assert err.message == f"the filter nests {MAX_DEPTH + 1} levels deep" and str(MAX_DEPTH) in err.hint
    assert refusal(check_depth, _nots(10_000)).message == "the filter nests 10000 levels deep"


def test_check_shape_is_the_depth_of_the_where_clause():
    check_shape(parse_text("explore workloads fields name"))  # no where clause at all
    text = "explore workloads fields name where " + "not " * (MAX_DEPTH + 1) + "replicas > 1"
    err = refusal(parse_text, text)  # parse_text checks the shape of what it parsed
    assert err.code == "EX409"


# ================================================================ numbers no column can hold


def _short(v: object) -> str:
    """A test id for a number (pytest's own would call str() on an int past Python's limit)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return f"int-{v.bit_length()}-bits"
    return str(v)[:30]


@pytest.mark.parametrize(("value", "detail"), [
    (Decimal("1e7000000"), "7000001 digits before the point"),
    (Decimal("-1e131072"), "131073 digits before the point"),
    (Decimal("1e-16384"), "16384 digits after the point"),
    (Decimal("0e-20000"), "20000 digits after the point"),
    (10**MAX_INTEGER_DIGITS, f"an integer of more than {MAX_INTEGER_DIGITS} digits"),
    (-(10**MAX_INTEGER_DIGITS), f"an integer of more than {MAX_INTEGER_DIGITS} digits"),
    (Unholdable("an exponent of 20 digits"), "an exponent of 20 digits"),
], ids=_short)
def test_a_number_no_column_holds_is_ex301_at_its_place(value, detail):
    err = refusal(check_json, {"filter": [{"field": "x", "value": value}]})
    assert (err.code, err.subtype, err.type) == ("EX301", "TYPE_MISMATCH", "validation")
    assert err.message == f"filter[0].value is a number no column can hold ({detail})"
    assert str(NUMERIC_WHOLE_DIGITS) in err.hint and str(NUMERIC_SCALE) in err.hint
    # in a list too, where scalars are checked in place
    assert refusal(check_json, {"filter": [{"value": [1, value]}]}).message.startswith("filter[0].value[1] is a number")


@pytest.mark.parametrize("value", [
    Decimal("1e131071"), Decimal("-" + "9" * 131072), Decimal("1e-16383"), Decimal("0e7000000"), 10**MAX_INTEGER_DIGITS - 1,
    -(10**MAX_INTEGER_DIGITS - 1), 2**63, 1.7976931348623157e308, float("inf"), True, Decimal("NaN"),
], ids=_short)
def test_a_number_a_column_may_hold_passes(value):
    """Up to numeric's digits, and an int up to MAX_INTEGER_DIGITS digits (the column's type decides
    later); a float always fits, and inf is left to the reader of each key (EX102 there)."""
    check_json({"value": value})
    check_json({"value": [value]})


def test_numbers_are_bounded_without_converting_them():
    """Holding Decimal('1e7000000') is free; its digits (as an int, or written out) take seconds: the
    check looks at the exponent and the digits written, so a million such values are checked at once."""
    start = time.thread_time()
    for _ in range(1000):
        refusal(check_json, {"v": Decimal("1e999999999")})
        refusal(check_json, [Decimal("-1e-999999999")])
    assert time.thread_time() - start < 2  # converting even one would take minutes


@pytest.mark.parametrize(("text", "kind"), [
    ("1e7000000", Decimal), ("1e-7000000", Decimal), ("1" * 5000, Unholdable), ("-" + "1" * 200_000, Unholdable),
    ("1e99999999999999999999", Unholdable), ("1E+0000000000000000000001", Decimal),
])
def test_loads_strict_reads_a_huge_number_cheaply_for_check_json_to_refuse(text, kind):
    body = loads_strict('{"filter": [{"field": "x", "value": %s}]}' % text)
    value = body["filter"][0]["value"]
    assert type(value) is kind
    if text == "1E+0000000000000000000001":
        assert value == 10 and check_json(body) is None  # leading zeros of an exponent are no digits
        return
    err = refusal(check_json, body)
    assert err.code == "EX301" and err.message.startswith("filter[0].value is a number no column can hold (")
    assert text[:30] not in err.message  # never the number itself


def test_loads_strict_reads_integers_up_to_max_integer_digits_as_int():
    assert loads_strict("[%s]" % ("9" * MAX_INTEGER_DIGITS)) == [10**MAX_INTEGER_DIGITS - 1]
    assert loads_strict("[-%s]" % ("9" * MAX_INTEGER_DIGITS)) == [-(10**MAX_INTEGER_DIGITS - 1)]
    value = loads_strict("[%s]" % ("9" * (MAX_INTEGER_DIGITS + 1)))[0]
    assert isinstance(value, Unholdable) and value.detail == f"an integer of {MAX_INTEGER_DIGITS + 1} digits"
    # a duplicate key is still a duplicate key when a number made the first reading fail
    with pytest.raises(ExploreError) as caught:
        loads_strict('{"a": %s, "a": 1}' % ("9" * 5000))
    assert "duplicate key" in caught.value.message


# ================================================================ lists in a text, before parsing


def _in_list(n: int, item: str = "1") -> str:
    return "explore w fields a where a in (" + ", ".join([item] * n) + ")"


def test_an_in_list_of_max_list_entries_passes_one_more_is_refused_as_the_json_form_is():
    check_lists(_in_list(MAX_LIST), "the exploration")
    err = refusal(check_lists, _in_list(MAX_LIST + 1), "the exploration")
    assert (err.code, err.subtype, err.type) == ("EX102", "INVALID_REQUEST", "validation")
    assert err.message == f"an 'in' list in the exploration has {MAX_LIST + 1} entries"
    assert err.hint == f"at most {MAX_LIST} are read"
    assert err.to_error()["position"] == {"line": 1, "column": 31}
    # the JSON form's refusal of the same list: the same code, type and hint
    json_err = refusal(from_json, {"dataset": "w", "fields": ["a"],
                                   "filter": [{"field": "a", "op": "in", "value": [1] * (MAX_LIST + 1)}]})
    assert (json_err.code, json_err.subtype, json_err.hint) == (err.code, err.subtype, err.hint)


@pytest.mark.parametrize("text", [
    "explore w fields " + ", ".join(["a"] * 5000),  # commas outside parentheses are no 'in' list
    _in_list(900) + " or " + _in_list(900)[25:],  # two lists, each within the limit
    "explore w fields a where a in ('" + "," * 5000 + "')",  # commas in a string
    "explore w fields a where a in ('it''s," + "," * 5000 + "', \"x\\\",\")",  # quotes escaped both ways
    "explore w fields a where a in (" + ", ".join(["(1)"] * 900) + ")",  # nested parentheses
])
def test_what_is_no_list_past_the_limit_passes(text):
    check_lists(text, "the exploration")


def test_lists_are_counted_nested_and_unterminated():
    inner = "(" + ",".join("1" * (MAX_LIST + 1)) + ")"
    assert refusal(check_lists, f"a in (1, b in {inner})", "filter").message == \
        f"an 'in' list in filter has {MAX_LIST + 1} entries"
    assert refusal(check_lists, "a in (" + ",".join("1" * (MAX_LIST + 5)), "filter").message == \
        f"an 'in' list in filter has {MAX_LIST + 5} entries"  # never closed: counted to the end
    check_lists("a in ('" + ",".join("1" * (MAX_LIST + 5)), "filter")  # all in an unterminated string


def test_the_text_form_is_refused_before_it_is_parsed():
    text = "explore workloads fields name where replicas in (" + ", ".join(["1"] * 20_000) + ")"
    start = time.thread_time()
    err = refusal(parse_text, text)
    assert err.code == "EX102" and "20000 entries" in err.message
    assert time.thread_time() - start < 0.5  # parsing it would take a second or more; the scan is linear
