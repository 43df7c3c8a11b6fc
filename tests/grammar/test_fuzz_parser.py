"""Fuzzing the parse stage's entry points with a fixed budget (derandomized: the same examples
in every run, so CI is deterministic).

Whatever goes in, each entry point either returns its result or raises an ExploreError
whose envelope is well formed (the error keys, a known type, a hint where the registry
promises one, JSON that encodes as UTF-8, no traceback text); nothing else ever escapes:
no RecursionError, UnicodeError, ValueError, TypeError, KeyError, lark or pydantic errors.

The compiler and the read set are fuzzed in tests/properties (over contracts and hostile
text); this is the layer in front of them: parse_text, parse (every start symbol),
from_json, from_flags, loads_strict and check_json, with arbitrary text (surrogates and
NUL included), grammar-shaped token soup, arbitrary JSON values and near-valid JSON forms.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ontoos_explore.errors import ExploreError, all_codes
from ontoos_explore.grammar.forms import JSON_KEYS, from_flags, from_json, loads_strict
from ontoos_explore.grammar.limits import check_json
from ontoos_explore.grammar.parser import STARTS, parse, parse_text
from ontoos_explore.grammar.render import to_json_form, to_text
from ontoos_explore.ir import Exploration

from ..properties.strategies import explorations

FUZZ = dict(derandomize=True, deadline=None, database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
CODES = {c.code: c for c in all_codes()}

# every character, surrogates and NUL included; and the ones that matter most, often
any_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=())
nasty_char = st.sampled_from(["\x00", "\ud800", "\udfff", "\u200b", "\u200f", "\u202e", "\ufeff", "\u0301",
                              "\uff57", "\u017f", "\u0131", "'", '"', "\\", "(", ")", ",", ".", "-", "%", "_",
                              "\n", "\t", " ", "\U0001f600", "\x7f", "\u2028"])
any_text = st.text(st.one_of(any_char, nasty_char), max_size=80)

WORDS = ["explore", "via", "fields", "where", "group", "by", "order", "limit", "as", "and", "or", "not", "in",
         "is", "null", "between", "like", "ilike", "distinct", "asc", "desc", "true", "false", "count", "sum",
         "avg", "min", "max", "workloads", "name", "namespace", "replicas", "containers", "hosts", "x", "a.b",
         "=", "!=", "<>", "<", "<=", ">", ">=", "(", ")", ",", ".", "'", "''", "'prod'", "'it''s'", "\\'",
         "0", "1", "-1", "1.5", "99999999999999999999999", "1e5", "*", ";", "--", "/*", "$1", "\x00", "\ud800"]
token_soup = st.lists(st.one_of(st.sampled_from(WORDS), any_text), max_size=30).map(" ".join)

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True), any_text, st.sampled_from(WORDS),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(any_text, inner, max_size=5)),
    max_leaves=25,
)
# near-valid JSON forms: the real keys, with values that are sometimes right and often not
filter_objects = st.fixed_dictionaries(
    {}, optional={"field": st.one_of(st.sampled_from(["name", "replicas", "a.b", ""]), any_text, json_values),
                  "op": st.one_of(st.sampled_from(["=", "in", "not in", "between", "is null", "like", "DROP"]), json_values),
                  "value": json_values, "extra": json_values})
json_forms = st.dictionaries(
    st.one_of(st.sampled_from(JSON_KEYS), any_text),
    st.one_of(json_values, token_soup, st.lists(token_soup, max_size=5), st.lists(filter_objects, max_size=4),
              filter_objects),
    max_size=8,
)


# valid explorations (tests/properties' IR strategy, rendered), then broken a little: the parser's
# deep paths are reached only by input that is almost right
valid_text = explorations().map(to_text)


@st.composite
def mutated_text(draw) -> str:
    text = draw(valid_text)
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 12)))
        how = draw(st.sampled_from(["insert", "delete", "replace", "repeat", "nest", "case"]))
        piece = draw(st.one_of(nasty_char, st.sampled_from(WORDS), any_text))
        if how == "insert":
            text = text[:i] + piece + text[i:]
        elif how == "delete":
            text = text[:i] + text[j:]
        elif how == "replace":
            text = text[:i] + piece + text[j:]
        elif how == "repeat":
            text = text[:i] + text[i:j] * draw(st.integers(2, 200)) + text[j:]
        elif how == "nest":  # wrap the where clause's start in not/parentheses, up to past the depth limit
            depth = draw(st.integers(1, 40))
            text = text.replace(" where ", " where " + draw(st.sampled_from(["not ", "( "])) * depth, 1)
        else:
            text = text[:i] + text[i:j].swapcase() + text[j:]
    return text


@st.composite
def mutated_json(draw, base=None, most: int = 3) -> dict:
    """The JSON form of a valid exploration (of `base`, or any), with up to `most` things broken."""
    body = to_json_form(draw(base if base is not None else explorations()))
    for _ in range(draw(st.integers(0, most))):
        key = draw(st.sampled_from(sorted(body) + ["query", "junk", "dry_run", "filter"]))
        how = draw(st.sampled_from(["value", "wrap", "drop", "object-filter", "text"]))
        if how == "value":
            body[key] = draw(json_values)
        elif how == "wrap" and key in body:
            body[key] = [body[key]] if draw(st.booleans()) else {"value": body[key]}
        elif how == "drop":
            body.pop(key, None)
        elif how == "object-filter":
            body["filter"] = draw(st.lists(filter_objects, min_size=1, max_size=3))
        else:
            body[key] = draw(st.one_of(token_soup, mutated_text()))
    return body


def well_formed(e: ExploreError) -> None:
    assert isinstance(e, ExploreError)
    env = e.to_envelope(exploration_id="x", contract_hash="h")
    text = json.dumps(env, ensure_ascii=False)
    text.encode("utf-8")  # no lone surrogate echoed back
    assert set(env) == {"ok", "error", "meta"} and env["ok"] is False
    err = env["error"]
    assert {"type", "subtype", "code", "message"} <= set(err)
    assert err["code"] in CODES and CODES[err["code"]].subtype == err["subtype"]
    assert err["type"] in ("validation", "policy") and isinstance(err["message"], str) and err["message"]
    assert err.get("hint"), f"no hint: {err}"
    assert "Traceback" not in text and "\x00" not in text
    if "position" in err:
        assert err["position"]["line"] >= 1 and err["position"]["column"] >= 1


def only_refusals(call, *args) -> object | None:
    try:
        return call(*args)
    except ExploreError as e:
        well_formed(e)
        return None


@settings(max_examples=300, **FUZZ)
@given(st.one_of(mutated_text(), mutated_text(), any_text, token_soup))
def test_fuzz_parse_text(text):
    result = only_refusals(parse_text, text)
    assert result is None or isinstance(result, Exploration)


@settings(max_examples=300, **FUZZ)
@given(st.sampled_from(STARTS), st.one_of(any_text, token_soup))
def test_fuzz_parse_every_start_symbol(start, text):
    only_refusals(parse, text, start, "fuzz")


@settings(max_examples=250, **FUZZ)
@given(st.one_of(mutated_json(), mutated_json(), json_forms, json_values))
def test_fuzz_from_json(body):
    result = only_refusals(from_json, body)
    assert result is None or isinstance(result, Exploration)


@settings(max_examples=200, **FUZZ)
@given(st.one_of(any_text, st.sampled_from(["workloads", "hosts"])),
       st.lists(st.one_of(token_soup, any_text), max_size=4),
       st.lists(st.one_of(token_soup, any_text, st.just("name=\x00"), st.just("name=\udcff")), max_size=3),
       st.lists(any_text, max_size=2), st.lists(token_soup, max_size=2), st.lists(token_soup, max_size=2),
       st.none() | st.integers())
def test_fuzz_from_flags(dataset, fields, filters, relations, group_by, order_by, limit):
    only_refusals(from_flags, dataset, fields, filters, relations, group_by, order_by, limit)


@settings(max_examples=300, **FUZZ)
@given(st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda v: json.dumps(v).encode()),
    json_forms.map(lambda v: json.dumps(v, default=str).encode("utf-8", "surrogatepass")),
    st.tuples(st.sampled_from([b"[", b"{\"a\":", b"{\"a\": [", b"\"", b"NaN", b"-Infinity", b"1e999999"]),
              st.integers(1, 4000)).map(lambda t: t[0] * t[1]),
))
def test_fuzz_loads_strict_and_check_json(raw):
    value = only_refusals(loads_strict, raw)
    if value is not None:
        only_refusals(check_json, value, "the request")
