"""Compile stage: trees only, quoted identifiers, $n parameters in text order."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from ontoos_explore import compile_exploration
from ontoos_explore.contract import parse_contract

# Names that would be dangerous or change meaning unquoted: keywords, mixed case.
ODD = textwrap.dedent("""
    version: 1
    datasets:
      Orders:
        relation: Sales.Order_Lines
        always_filter:
          - {column: state, op: not in, value: [void, draft]}
          - {column: archived_at, op: is null}
        columns:
          select: {type: text}
          User:   {type: integer}
          state:  {type: text, hidden: true}
          archived_at: {type: timestamp, hidden: true}
          amount: {type: numeric}
    read_sets: {all: [Orders]}
    roles: {r: {read_sets: [all], max_rows: 10}}
""")


@pytest.fixture(scope="module")
def odd():
    return parse_contract(ODD, "odd.yaml")


def test_identifiers_are_always_quoted_with_contract_case(odd):
    q = compile_exploration("explore orders fields SELECT, user where select = 'x'", odd, "r")
    assert q.sql == (
        'SELECT "t0"."select" AS "select", "t0"."User" AS "User" FROM "Sales"."Order_Lines" AS "t0" '
        'WHERE "t0"."select" = $1 AND NOT ("t0"."state" IN ($2, $3)) AND "t0"."archived_at" IS NULL LIMIT 11'
    )
    assert q.params == ("x", "void", "draft")
    assert [s.caller for s in q.slots] == [True, False, False]


def test_values_never_reach_the_sql_text(odd):
    hostile = "x' OR 1=1; DROP TABLE t; --"
    q = compile_exploration({"dataset": "orders", "fields": ["select"],
                             "filter": [{"field": "select", "op": "=", "value": hostile},
                                        {"field": "amount", "op": ">", "value": 1e300}]}, odd, "r")
    assert hostile not in q.sql and "DROP" not in q.sql and "1e300" not in q.sql.lower()
    assert q.params[0] == hostile


def test_or_is_parenthesized_before_the_always_filter(odd):
    q = compile_exploration("explore orders fields amount where amount > 1 or amount < -1", odd, "r")
    assert 'WHERE ("t0"."amount" > $1 OR "t0"."amount" < $2) AND NOT' in q.sql


def test_long_output_labels_are_cut_at_63_bytes(odd):
    alias = "a" * 63
    q = compile_exploration(f"explore orders fields count(distinct select) as {alias}", odd, "r")
    assert f'AS "{alias}"' in q.sql
    q2 = compile_exploration("explore orders fields count(distinct select)", odd, "r")
    assert 'AS "count(distinct select)"' in q2.sql


def test_no_where_clause_without_predicates():
    data = yaml.safe_load(ODD)
    del data["datasets"]["Orders"]["always_filter"]
    contract = parse_contract(yaml.safe_dump(data), "plain.yaml")
    q = compile_exploration("explore orders fields amount", contract, "r")
    assert "WHERE" not in q.sql and q.params == ()
