"""No exploration escapes the role's read set (the policy wall, checked on the SQL text).

Explorations are drawn from the contract's own vocabulary (every dataset,
relation and column name, secret and hidden ones included, in random case)
plus strangers. Each one either compiles or is refused with an ExploreError;
what compiles reads only tables in the role's scope and, of those, only
readable columns, join columns and always-filter columns; and the parents
its datasets exist with (exists_with, up each chain, in scope or not), only
for the columns those joins and the parents' always-filters need.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ontoos_explore import ExploreError, compile_exploration
from ontoos_explore.grammar.render import to_text
from ontoos_explore.ir import Exploration, Name, OrderItem
from ontoos_explore.names import fold

from ..conftest import ROOT
from .strategies import contract_explorations, fields, names, predicates

from ontoos_explore import load_contract

CONTRACT = load_contract(ROOT / "contracts" / "demo.yaml")
TABLE_RE = re.compile(r'(?:FROM|JOIN) "(\w+)"\."(\w+)" AS "([tp]\d+)"')  # t: the caller's; p: parents
COLUMN_RE = re.compile(r'"([tp]\d+)"\."(\w+)"')


def vocabulary(contract):
    words = set(contract.datasets) | set(contract.relations)
    for ds in contract.datasets.values():
        words |= set(ds.columns)
    return sorted(words)


def cased(word_strategy):
    return st.builds(lambda w, up: w.upper() if up else w, word_strategy, st.booleans())


WORDS = cased(st.sampled_from(vocabulary(CONTRACT)) | names)
REFS = st.builds(lambda r, c: __import__("ontoos_explore.ir", fromlist=["Ref"]).Ref(relation=r, column=c),
                 st.none() | st.none() | WORDS, WORDS)
EXPLORATIONS = st.builds(
    Exploration,
    dataset=st.builds(Name, value=cased(st.sampled_from(sorted(CONTRACT.datasets)))),
    relations=st.lists(st.builds(Name, value=cased(st.sampled_from(sorted(CONTRACT.relations)))), max_size=3).map(tuple),
    fields=st.lists(fields(REFS), min_size=1, max_size=4).map(tuple),
    where=st.none() | predicates(REFS),
    group_by=st.lists(REFS, max_size=2).map(tuple),
    order_by=st.lists(st.builds(OrderItem, key=REFS, descending=st.booleans()), max_size=2).map(tuple),
    limit=st.none() | st.integers(-5, 10**6),
)


def allowed_columns(contract, role):
    """physical table -> columns the SQL may touch for this role."""
    scope = contract.scope(role)
    allowed: dict[str, set[str]] = {}
    for ds in contract.datasets.values():
        if fold(ds.name) not in scope:
            continue
        cols = {c.name for c in ds.readable_columns()} | {f.column for f in ds.always_filter}
        for rel in contract.relations.values():
            if fold(rel.from_) == fold(ds.name):
                cols |= set(rel.join)
            if fold(rel.to) == fold(ds.name):
                cols |= set(rel.join.values())
        allowed.setdefault(ds.relation, set()).update(cols)
        # up the exists_with chain: the join columns of both ends, each parent's always-filter columns
        child = ds
        todo = [child]
        while todo:
            child = todo.pop()
            for name in child.exists_with:
                rel = next(r for r in contract.relations.values() if fold(r.name) == fold(name))
                parent = next(d for d in contract.datasets.values() if fold(d.name) == fold(rel.to))
                allowed.setdefault(child.relation, set()).update(rel.join)
                allowed.setdefault(parent.relation, set()).update(
                    set(rel.join.values()) | {f.column for f in parent.always_filter})
                todo.append(parent)
    return allowed


SECRETS = {c.name for ds in CONTRACT.datasets.values() for c in ds.columns.values() if c.secret}


@pytest.mark.parametrize("role", sorted(CONTRACT.roles))
@settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(e=st.one_of(contract_explorations(CONTRACT), EXPLORATIONS))
def test_nothing_outside_the_read_set(role, e):
    r = CONTRACT.role(role)
    try:
        q = compile_exploration(e, CONTRACT, role)
    except ExploreError as err:
        envelope = str(err.to_envelope())
        assert "Traceback" not in envelope and "SELECT" not in envelope
        if err.reason in ("SECRET_COLUMN_DENIED", "HIDDEN_COLUMN_DENIED"):
            assert err.subtype == "UNKNOWN_FIELD"
        if err.reason == "OUT_OF_SCOPE":
            assert err.subtype in ("UNKNOWN_DATASET", "UNKNOWN_RELATION")
        return
    allowed = allowed_columns(CONTRACT, r)
    aliases = {alias: f"{schema}.{table}" for schema, table, alias in TABLE_RE.findall(q.sql)}
    assert aliases, q.sql
    for table in aliases.values():
        assert table in allowed, (table, to_text(e))
    for alias, column in COLUMN_RE.findall(q.sql):
        assert column in allowed[aliases[alias]], (aliases[alias], column, to_text(e))
    for secret in SECRETS:
        assert f'"{secret}"' not in q.sql
    for dataset, column in q.reads:
        assert CONTRACT.dataset(dataset).column(column).readable
    assert q.limit <= r.max_rows
    assert q.sql.endswith(f"LIMIT {q.limit + 1}")
