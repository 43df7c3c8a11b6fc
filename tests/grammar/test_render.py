"""grammar/render.py: an `Exploration` back to the text form and the JSON form.

Rendering then parsing gives the same IR (text -> IR -> text is stable, and the JSON form
parses to the same IR); literals are quoted and escaped so the text parses back to the same
value; grouping keeps the meaning (parentheses exactly where and/or/not need them); the shape
(literals as ?, no limit) is what the fingerprint hashes; the JSON form leaves out what has
nothing to say; `replace` swaps one node by identity. The property over random explorations
is tests/properties/test_roundtrip.py; these are the cases a reader can check by eye.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from ontoos_explore.grammar.forms import from_json
from ontoos_explore.grammar.parser import parse_text
from ontoos_explore.grammar.render import literal, predicate, replace, to_json_form, to_text
from ontoos_explore.ir import Lit

CANONICAL = [
    "explore workloads fields name limit 5",
    "explore workloads fields count()",
    "explore workloads fields name where namespace = 'it''s' limit 5",
    "explore workloads via containers fields name, count(distinct containers.image) as images "
    "where (a = 1 or b = 2) and not (c = 3 and d = 4) group by name order by name desc, images limit 20",
    "explore hosts fields hostname where vcpus between 2 and 8 and hostname not in ('a', 'b') "
    "and region is not null and hostname ilike 'ip-%' and x not like 'y'",
    "explore images fields repository where size_bytes > 1000.50 and flag = true and other = false",
    "explore workloads fields name where a = 1 or (b = 2 and c = 3)",
    "explore workloads fields name, sum(replicas) as total group by name order by total desc",
]


@pytest.mark.parametrize("text", CANONICAL)
def test_canonical_text_round_trips_to_itself(text):
    e = parse_text(text)
    assert to_text(e) == text
    assert parse_text(to_text(e)).model_dump() == e.model_dump()


@pytest.mark.parametrize("text", CANONICAL)
def test_the_json_form_parses_to_the_same_exploration(text):
    e = parse_text(text)
    assert from_json(to_json_form(e)).model_dump() == e.model_dump()


@pytest.mark.parametrize(("written", "canonical"), [
    ("EXPLORE workloads FIELDS name LIMIT 5", "explore workloads fields name limit 5"),
    ("explore workloads fields name where a = 1 or b = 2 and c = 3",
     "explore workloads fields name where a = 1 or (b = 2 and c = 3)"),  # and binds tighter: made explicit
    ("explore workloads fields name where ((a = 1))", "explore workloads fields name where a = 1"),
    ("explore workloads fields name where (a = 1 and b = 2) and c = 3",
     "explore workloads fields name where a = 1 and b = 2 and c = 3"),
])
def test_other_spellings_render_in_the_one_canonical_form(written, canonical):
    e = parse_text(written)
    assert to_text(e) == canonical
    assert parse_text(canonical).model_dump() == e.model_dump()


@pytest.mark.parametrize(("lit", "text"), [
    (Lit(kind="string", value="plain"), "'plain'"),
    (Lit(kind="string", value="it's"), "'it''s'"),
    (Lit(kind="string", value="back\\slash"), "'back\\\\slash'"),
    (Lit(kind="boolean", value=True), "true"),
    (Lit(kind="boolean", value=False), "false"),
    (Lit(kind="decimal", value=Decimal("1E+3")), "1000"),  # never an exponent: the grammar has none
    (Lit(kind="decimal", value=Decimal("0.000001")), "0.000001"),
    (Lit(kind="integer", value=42), "42"),
])
def test_literals_are_quoted_and_escaped(lit, text):
    assert literal(lit) == text


@pytest.mark.parametrize("value", ["it's", "back\\slash", "''", "\\'", "a ' b \\ c", "naïve ☃"])
def test_a_string_literal_parses_back_to_the_same_value(value):
    text = f"explore workloads fields name where name = {literal(Lit(kind='string', value=value))}"
    assert parse_text(text).where.value.value == value


def test_the_shape_has_no_literals_and_no_limit():
    e = parse_text("explore hosts fields hostname where vcpus between 2 and 8 and hostname in ('a', 'b') "
                   "and region = 'eu' order by hostname limit 7")
    shape = to_text(e, literal=lambda _: "?", with_limit=False)
    assert shape == ("explore hosts fields hostname where vcpus between ? and ? and hostname in (?, ?) "
                     "and region = ? order by hostname")
    other = parse_text("explore hosts fields hostname where vcpus between 1 and 64 and hostname in ('x', 'y') "
                       "and region = 'us' order by hostname limit 500")
    assert to_text(other, literal=lambda _: "?", with_limit=False) == shape
    assert predicate(e.where, lambda _: "$") == "vcpus between $ and $ and hostname in ($, $) and region = $"


def test_the_json_form_leaves_out_what_has_nothing_to_say():
    assert to_json_form(parse_text("explore workloads fields name")) == {"dataset": "workloads", "fields": ["name"]}
    full = to_json_form(parse_text("explore workloads via containers fields name, count() as n where replicas > 1 "
                                   "group by name order by n desc, name limit 3"))
    assert full == {"dataset": "workloads", "fields": ["name", "count() as n"], "filter": "replicas > 1",
                    "relations": ["containers"], "group_by": ["name"], "order_by": ["-n", "name"], "limit": 3}


def test_replace_swaps_one_node_by_identity_and_keeps_the_rest():
    e = parse_text("explore workloads fields name, namespace where replicas > 1 limit 5")
    target = e.fields[1]
    swapped = replace(e, target, parse_text("explore workloads fields cluster").fields[0])
    assert to_text(swapped) == "explore workloads fields name, cluster where replicas > 1 limit 5"
    assert to_text(e) == "explore workloads fields name, namespace where replicas > 1 limit 5"  # a copy
    assert swapped.where is e.where  # untouched parts are shared, not copied
    assert replace(e, object(), None) is e  # nothing to replace: the same object
