"""Parse stage, JSON form and CLI flags: the same language, the same IR."""

from __future__ import annotations

import pytest

from ontoos_explore.errors import ExploreError
from ontoos_explore.grammar.forms import MAX_ITEMS, from_flags, from_json, loads_strict, split_top_level
from ontoos_explore.grammar.parser import parse_text
from ontoos_explore.ir import And, Compare, InList, IsNull


def refused(body) -> ExploreError:
    with pytest.raises(ExploreError) as info:
        from_json(body)
    return info.value


def test_json_and_text_build_the_same_ir():
    text = parse_text(
        "explore workloads via containers fields name, count() as n where namespace = 'prod' "
        "group by name order by n desc, name limit 20"
    )
    body = from_json(
        {"dataset": "workloads", "relations": ["containers"], "fields": ["name", "count() as n"],
         "filter": "namespace = 'prod'", "group_by": ["name"], "order_by": ["-n", "name asc"], "limit": 20}
    )
    assert body.model_dump() == text.model_dump()


def test_query_key_is_the_text_form():
    text = "explore w fields a where a = 1"
    assert from_json({"query": text}).model_dump() == parse_text(text).model_dump()


def test_filter_objects_are_anded_and_typed_from_json():
    e = from_json({"dataset": "w", "fields": ["a"], "filter": [
        {"field": "a", "op": "=", "value": "x"},
        {"field": "b", "op": "IN", "value": [1, 2.5, True]},
        {"field": "r.c", "op": "is  not null"},
    ]})
    assert isinstance(e.where, And) and len(e.where.items) == 3
    a, b, c = e.where.items
    assert isinstance(a, Compare) and a.value.kind == "string"
    assert isinstance(b, InList) and [v.kind for v in b.values] == ["integer", "decimal", "boolean"]
    assert isinstance(c, IsNull) and c.negated and c.ref.relation == "r"


def test_a_single_filter_object_is_accepted():
    e = from_json({"dataset": "w", "fields": ["a"], "filter": {"field": "a", "op": ">", "value": 1}})
    assert isinstance(e.where, Compare) and e.where.op == ">"


def test_unknown_key_offers_the_renamed_request():
    err = refused({"dataset": "w", "fields": ["a"], "filters": "a = 1"})
    assert err.subtype == "INVALID_REQUEST" and "'filter'" in err.hint
    assert err.retry_with == {"dataset": "w", "fields": ["a"], "filter": "a = 1"}


@pytest.mark.parametrize(
    "body, fragment",
    [
        ([], "must be a JSON object"),
        ({"fields": ["a"]}, "'dataset' is required"),
        ({"dataset": "w"}, "'fields' is required"),
        ({"dataset": "w", "fields": [1]}, "list of strings"),
        ({"dataset": "pg_catalog.pg_authid", "fields": ["a"]}, "must be a name"),
        ({"dataset": "w", "fields": ["a"], "limit": "10"}, "'limit' must be an integer"),
        ({"dataset": "w", "fields": ["a"], "limit": True}, "'limit' must be an integer"),
        ({"dataset": "w", "fields": ["a"], "filter": 3}, "'filter' must be"),
        ({"dataset": "w", "fields": ["a"], "filter": [{"field": "a", "op": "~", "value": 1}]}, "not an operator"),
        ({"dataset": "w", "fields": ["a"], "filter": [{"field": "a", "op": "between", "value": [1, 2, 3]}]}, "two values"),
        ({"dataset": "w", "fields": ["a"], "filter": [{"field": "a", "op": "in", "value": []}]}, "non-empty list"),
        ({"dataset": "w", "fields": ["a"], "filter": [{"field": "a", "op": "=", "value": [1]}]}, "single value"),
        ({"dataset": "w", "fields": ["a"], "filter": [{"field": "a", "op": "is null", "value": 1}]}, "takes no value"),
        ({"dataset": "w", "fields": ["a"], "filter": [{"field": "a", "value": {"x": 1}}]}, "single value"),
        ({"dataset": "w", "fields": ["a"], "filter": [{"field": "a", "op": "=", "value": 1, "x": 2}]}, "unknown key"),
        ({"dataset": "w", "fields": ["a"], "filter": ["a = 1"]}, "must be an object"),
        ({"dataset": "w", "fields": ["a"], "order_by": ["-a desc"]}, "both a leading '-'"),
        ({"query": "explore w fields a", "limit": 3}, "cannot be combined"),
        ({"dataset": "w", "fields": ["a"] * (MAX_ITEMS + 1)}, "at most"),
    ],
)
def test_malformed_requests(body, fragment):
    err = refused(body)
    assert err.type == "validation"
    assert err.hint
    assert fragment in err.message + " " + err.hint, err.message


def test_piece_errors_name_the_entry():
    err = refused({"dataset": "w", "fields": ["a", "b c"]})
    assert err.subtype == "SYNTAX_ERROR" and "fields[1]" in err.message


def test_loads_strict_refuses_what_json_should_not_carry():
    assert loads_strict('{"a": 1.5}') == {"a": __import__("decimal").Decimal("1.5")}
    for bad, fragment in [('{"a": NaN}', "NaN"), ('{"a": Infinity}', "Infinity"), ('{"a": 1, "a": 2}', "duplicate"),
                          ("{", "not valid JSON"), (b"\xff", "UTF-8"), ("[" * 100000, "")]:
        with pytest.raises(ExploreError) as info:
            loads_strict(bad)
        assert info.value.type in ("validation", "policy") and fragment in info.value.message


def test_flags_build_the_same_ir_as_text():
    flags = from_flags("workloads", ["name,count()"], ["namespace=prod-fp", "replicas > 2"], ["containers"],
                       ["name"], ["-name"], 20)
    text = parse_text("explore workloads via containers fields name, count() "
                      "where namespace = 'prod-fp' and replicas > 2 group by name order by name desc limit 20")
    assert flags.model_dump() == text.model_dump()


@pytest.mark.parametrize(
    "flag, op, value",
    [
        ("namespace=prod-fp", "=", "prod-fp"),
        ("created_at>=2026-01-01", ">=", "2026-01-01"),
        ("name != a b c", "!=", "a b c"),
        ("path=a/b=c", "=", "a/b=c"),
        ("tag<>v1.2", "!=", "v1.2"),
    ],
)
def test_flag_filter_takes_the_rest_as_the_literal(flag, op, value):
    e = from_flags("w", ["a"], [flag])
    assert isinstance(e.where, Compare) and e.where.op == op
    assert (e.where.value.kind, e.where.value.value) == ("string", value)


def test_flag_filter_that_is_a_predicate_is_read_as_one():
    e = from_flags("w", ["a"], ["replicas > 2 or kind in ('Job')"])
    assert type(e.where).__name__ == "Or"


def test_flag_filter_that_is_neither_reports_the_parse_error():
    with pytest.raises(ExploreError) as info:
        from_flags("w", ["a"], ["just words"])
    assert info.value.subtype == "SYNTAX_ERROR" and "--filter #1" in info.value.message


def test_split_top_level_keeps_parentheses_and_quotes():
    assert split_top_level("a, count(distinct b), sum(c) as s") == ["a", "count(distinct b)", "sum(c) as s"]
    assert split_top_level("'a,b', c") == ["'a,b'", "c"]


# ---------------------------------------------------------------- numbers, and the k=v reader

import re  # noqa: E402
from decimal import Decimal  # noqa: E402

from ontoos_explore.grammar.forms import _FLAG_HEAD  # noqa: E402
from ontoos_explore.grammar.limits import Unholdable  # noqa: E402
from ontoos_explore.ir import Lit  # noqa: E402


def test_json_numbers_are_literals_as_written_without_conversion():
    e = from_json({"dataset": "w", "fields": ["a"], "filter": [{"field": "a", "value": Decimal("1E+2")}]})
    assert e.where.value == Lit(kind="decimal", value=Decimal("1E+2"))
    assert type(e.where.value.value) is Decimal  # validating it would have tried it as an int first


@pytest.mark.parametrize(("text", "detail"), [
    ("1e7000000", "7000001 digits before the point"), ("-1e-7000000", "7000000 digits after the point"),
    ("1" * 4301, "an integer of 4301 digits"), ("1e12345678901", "12345678902 digits before the point"),
    ("1e99999999999999999999", "an exponent of 20 digits"),  # past what Decimal itself reads
])
def test_a_json_number_no_column_holds_is_ex301_naming_its_place(text, detail):
    body = loads_strict('{"dataset": "w", "fields": ["a"], "filter": [{"field": "a", "op": "in", "value": [1, %s]}]}'
                        % text)
    err = refused(body)
    assert err.code == "EX301" and err.message == f"filter[0].value[1] is a number no column can hold ({detail})"


def test_an_infinite_float_from_another_json_reader_is_ex102_at_its_place():
    """The MCP SDK reads JSON itself: 1e7000000 reaches a tool as float('inf')."""
    err = refused({"dataset": "w", "fields": ["a"], "filter": [{"field": "a", "value": float("inf")}]})
    assert err.code == "EX102" and err.message == "filter[0].value is not a finite number"
    assert isinstance(loads_strict("[1e400]")[0], Decimal) and not isinstance(loads_strict("[1]")[0], Unholdable)


_OLD_FLAG_FILTER = re.compile(  # the reader before: the same answers, in quadratic time
    r"\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)\s*(!=|<>|<=|>=|=|<|>)\s*(.*?)\s*", re.DOTALL)


@pytest.mark.parametrize("flag", [
    "a=b", " a = b ", "a.b<=c d", "a<>\u00a0x\u00a0", "a>=\u2003", "a=\n\tmulti\nline\r\n", "a==b", "a=<b", "a!==",
    "a\u3000<\u3000b\u3000", "a=\x1c\x1dvalue\x1e\x1f", "a = 'quoted' ", "x.y.z=1", "1a=b", "=b", "a b=c",
])
def test_the_k_v_reader_reads_what_the_old_regex_read(flag):
    """The head matched, the rest stripped by str.strip: the old fullmatch's groups exactly (\\s is
    str.isspace: NBSP, ideographic space, the separators \\x1c-\\x1f)."""
    old, new = _OLD_FLAG_FILTER.fullmatch(flag), _FLAG_HEAD.match(flag)
    assert (old is None) == (new is None)
    if old is not None:
        assert (new.group(1), new.group(2), flag[new.end():].strip()) == old.groups()


def test_the_k_v_value_keeps_inner_whitespace():
    e = from_flags("w", ["a"], ["name=x" + " " * 15_500 + "y "])
    assert e.where.value.value == "x" + " " * 15_500 + "y"


# ---------------------------------------------------------------- near misses a scripted agent makes


@pytest.mark.parametrize("body, key, fixed", [
    ({"dataset": "workloads", "fields": "name,namespace"}, "fields", ["name", "namespace"]),
    ({"dataset": "workloads", "fields": ["namespace, count(distinct kind)"], "group_by": ["namespace"]}, "fields",
     ["namespace", "count(distinct kind)"]),
    ({"dataset": "workloads", "fields": ["namespace"], "group_by": "namespace, kind"}, "group_by",
     ["namespace", "kind"]),
    ({"dataset": "workloads", "fields": ["name"], "order_by": "-name,namespace"}, "order_by", ["-name", "namespace"]),
])
def test_a_comma_separated_string_where_a_list_was_meant_gets_the_list_as_its_retry(demo, body, key, fixed):
    from ontoos_explore.pipeline import compile_exploration

    with pytest.raises(ExploreError) as e:
        from_json(body)
    assert e.value.code == "EX102" and e.value.retry_with == {**body, key: fixed}
    assert f'"{key}": ' in e.value.hint
    compile_exploration(e.value.retry_with, demo, "analyst")  # the retry works


def test_a_comma_inside_quotes_or_parentheses_is_not_a_separator():
    e = from_json({"dataset": "workloads", "fields": ["name"], "order_by": ["name"],
                   "filter": "name in ('a,b', 'c')"})
    assert e.where is not None and len(e.fields) == 1


@pytest.mark.parametrize("body", [
    {"dataset": "workloads", "fields": ["name namespace"]},
    {"dataset": "workloads", "fields": ["name"], "filter": "name = "},
    {"dataset": "workloads", "fields": ["name"], "filter": "name == 'x'"},
    {"dataset": "workloads", "fields": ["sum("]},
    {"dataset": "workloads", "fields": ["name"], "order_by": ["name upward"]},
])
def test_no_syntax_error_has_a_blank_hint(body):
    with pytest.raises(ExploreError) as e:
        from_json(body)
    assert e.value.hint and e.value.hint.strip() not in ("expected", "expected ")


def test_commas_in_two_keys_are_one_retry_and_a_retry_that_would_not_read_is_not_offered():
    body = {"dataset": "workloads", "fields": "namespace,count()", "group_by": "namespace,kind"}
    with pytest.raises(ExploreError) as e:
        from_json(body)
    assert e.value.retry_with == {**body, "fields": ["namespace", "count()"], "group_by": ["namespace", "kind"]}
    with pytest.raises(ExploreError) as e:
        from_json({"dataset": "workloads", "fields": "name,namespace", "filter": "name in (1,"})
    assert e.value.retry_with is None and "commas" in e.value.message  # the filter would still not parse
    with pytest.raises(ExploreError) as e:
        from_json({"dataset": "workloads", "fields": ["x" * 50_000 + ",name"]})
    assert len(e.value.hint) < 200  # a hint never echoes a long input
