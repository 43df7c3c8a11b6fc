"""grammar/limits.py: what any input must satisfy before it is trusted, for every role.

`check_json` refuses a whole JSON request (the JSON form, any tool's arguments) before any of
it is read: deeper than MAX_JSON_DEPTH is EX102, more than MAX_JSON_VALUES values or
MAX_JSON_CHARS characters is EX408, a key or string holding a NUL or an unpaired surrogate is
EX101; the message names the place (filter[0].value[1], a key of ...) and never the bad text.
`check_text` holds the text form to MAX_TEXT characters and the same characters, with the
line and column of the bad one; `check_depth` holds predicates to MAX_DEPTH levels. Each limit
is checked on both sides of its boundary, and without recursion.
"""

from __future__ import annotations

import pytest

from ontoos_explore.errors import ExploreError
from ontoos_explore.grammar.limits import (
    MAX_DEPTH,
    MAX_JSON_CHARS,
    MAX_JSON_DEPTH,
    MAX_JSON_VALUES,
    MAX_TEXT,
    check_depth,
    check_json,
    check_shape,
    check_text,
    predicate_depth,
)
from ontoos_explore.grammar.parser import parse_text
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
