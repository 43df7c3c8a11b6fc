"""The proof that no input escapes the read set, over random contracts and hostile text.

Properties, each over explorations drawn for the demo contract and for
randomly generated contracts (random names, types, secret and hidden
columns, relations, read sets and roles), and over hostile text:

- every input is refused with a well-formed envelope (never an exception, never
  an internal error) or compiles to SQL the guard accepts for the caller's
  allowed set;
- compiled SQL names no secret or hidden column outside the contract's join
  and always-filter columns, and no relation outside the read set but the
  parents its datasets exist with (exists_with), each joined on its relation's
  columns and always-filtered, read only in ON and WHERE, and only for their
  join and always-filter columns;
- LIMIT never exceeds the budget plus one;
- compilation is deterministic, and the three input forms agree.
"""

from __future__ import annotations

import json
import re

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ontoos_explore import ExploreError, compile_exploration
from ontoos_explore.allowed import allowed_for_role, parent_columns
from ontoos_explore.contract import parse_contract
from ontoos_explore.grammar.forms import from_flags
from ontoos_explore.grammar.render import predicate as render_predicate
from ontoos_explore.grammar.render import to_json_form, to_text
from ontoos_explore.guard import check
from ontoos_explore.names import fold

from ..conftest import ROOT
from .strategies import contract_documents, contract_explorations, hostile_text, near_misses

from ontoos_explore import load_contract

DEMO = load_contract(ROOT / "contracts" / "demo.yaml")
SETTINGS = dict(derandomize=True, deadline=None, suppress_health_check=list(HealthCheck), database=None)
# t: the caller's sources; p: their parents (after FROM or JOIN: an output column "t1" AS "t1" is no table)
TABLE_RE = re.compile(r'(?:FROM|JOIN) "(\w+)"\."(\w+)" AS "([tp]\d+)"')
COLUMN_RE = re.compile(r'"([tp]\d+)"\."(\w+)"')
EQUALS_RE = re.compile(r'"([tp]\d+)"\."(\w+)" = "([tp]\d+)"\."(\w+)"')


def well_formed_refusal(err: ExploreError) -> None:
    env = err.to_envelope(contract_hash="h")
    text = json.dumps(env)
    assert env["ok"] is False and set(env) == {"ok", "error", "meta"}
    assert err.type != "internal", f"internal error: {err!r} {getattr(err, 'violations', '')}"
    assert {"type", "subtype", "code", "message"} <= set(env["error"])
    assert "Traceback" not in text and "SELECT" not in text
    if err.reason != err.subtype:
        assert err.reason not in text


def holds(contract, role_name: str, source) -> None:
    """The walls hold for one input: refused cleanly, or compiled within the read set."""
    try:
        q = compile_exploration(source, contract, role_name)
    except ExploreError as err:
        well_formed_refusal(err)
        return
    role = contract.role(role_name)
    allowed = allowed_for_role(contract, role)
    verdict = check(q.sql, allowed, len(q.params))
    assert verdict.ok, verdict.to_json(q.sql)
    aliases = {alias: (schema, table) for schema, table, alias in TABLE_RE.findall(q.sql)}
    for alias, column in COLUMN_RE.findall(q.sql):
        assert column in allowed.relations[aliases[alias]]
    scope = contract.scope(role)
    in_scope = {(d.schema_name, d.table_name) for d in contract.datasets.values() if fold(d.name) in scope}
    assert {t for a, t in aliases.items() if a.startswith("t")} <= in_scope
    parents_hold(contract, scope, q, aliases)
    # a secret or hidden column is read only where the contract itself needs it
    by_table = {(d.schema_name, d.table_name): d for d in contract.datasets.values()}
    for alias, column in COLUMN_RE.findall(q.sql):
        table = aliases[alias]
        if not by_table[table].column(column).readable:
            assert column in allowed.relations[table], (table, column)
    assert int(q.sql.rsplit("LIMIT ", 1)[1]) <= role.max_rows + 1
    again = compile_exploration(source, contract, role_name)
    assert (again.sql, again.params, again.fingerprint) == (q.sql, q.params, q.fingerprint)


def parents_hold(contract, scope, q, aliases) -> None:
    """exists_with in the SQL: each source whose dataset has parents is joined, on the relation's columns,
    to a source of the parent's table whose always-filters are in WHERE (and so on up the chain); a parent
    source (p0, p1, ...) is read for its join and always-filter columns only, never in the SELECT list,
    GROUP BY or ORDER BY."""
    by_table = {(d.schema_name, d.table_name): d for d in contract.datasets.values()}
    implied = parent_columns(contract, scope)
    parents = [a for a in aliases if a.startswith("p")]
    assert len(parents) == len(q.parents), (q.sql, q.parents)
    for alias, column in COLUMN_RE.findall(q.sql):
        if alias.startswith("p"):
            assert column in implied[fold(by_table[aliases[alias]].name)], (alias, column, q.sql)
    select_list = q.sql.split(" FROM ", 1)[0]
    after = re.split(r" GROUP BY | ORDER BY ", q.sql, maxsplit=1)[1:]
    assert not re.search(r'"p\d+"\.', select_list + "".join(after)), q.sql  # a parent alias qualifying a column
    # (a column may itself be named p0: `"t0"."p0" AS "p0"` reads the dataset's own column)
    where = q.sql.split(" WHERE ", 1)[1] if " WHERE " in q.sql else ""
    pairs = {(a, x, b, y) for a, x, b, y in EQUALS_RE.findall(q.sql.split(" WHERE ", 1)[0])}
    pairs |= {(b, y, a, x) for a, x, b, y in pairs}
    for alias, table in aliases.items():
        ds = by_table[table]
        for rel in contract.parents_of(ds.name):
            parent = contract.dataset(rel.to)
            met = [b for b, pt in aliases.items() if pt == (parent.schema_name, parent.table_name)
                   and all((alias, ds.column(x).name, b, parent.column(y).name) in pairs for x, y in rel.join.items())]
            assert met, (alias, rel.name, q.sql)
            for rule in parent.always_filter:
                assert any(f'"{b}"."{parent.column(rule.column).name}"' in where for b in met), (rel.name, q.sql)


def forms_agree(contract, role_name: str, exploration) -> None:
    """Text, JSON and flag forms of one exploration: the same answer, byte for byte."""
    answers = []
    body = to_json_form(exploration)
    flags = dict(dataset=body["dataset"], fields=body["fields"], relations=body.get("relations", []),
                 group_by=body.get("group_by", []), order_by=body.get("order_by", []), limit=body.get("limit"),
                 filters=[render_predicate(exploration.where)] if exploration.where is not None else [])
    for source in (to_text(exploration), body, "flags"):
        try:
            if source == "flags":
                source = from_flags(**flags)
            q = compile_exploration(source, contract, role_name)
            answers.append(("ok", q.sql, q.params, q.fingerprint))
        except ExploreError as err:
            answers.append(("refused", err.code, err.message))
    assert answers[0] == answers[1] == answers[2], answers


@settings(max_examples=1000, **SETTINGS)
@given(st.data())
def test_demo_contract_walls_hold(data):
    role = data.draw(st.sampled_from(sorted(DEMO.roles)))
    holds(DEMO, role, data.draw(contract_explorations(DEMO)))


@settings(max_examples=300, **SETTINGS)
@given(st.data())
def test_random_contract_walls_hold(data):
    contract = parse_contract(yaml.safe_dump(data.draw(contract_documents())), "random.yaml")
    role = data.draw(st.sampled_from(sorted(contract.roles)))
    for _ in range(3):
        holds(contract, role, data.draw(contract_explorations(contract)))


VOCABULARY = sorted(set(DEMO.datasets) | set(DEMO.relations)
                    | {c for d in DEMO.datasets.values() for c in d.columns})


@settings(max_examples=800, **SETTINGS)
@given(st.sampled_from(sorted(DEMO.roles)), hostile_text(VOCABULARY) | near_misses(DEMO))
def test_hostile_text_is_refused_cleanly_or_stays_inside(role, text):
    holds(DEMO, role, text)


@settings(max_examples=400, **SETTINGS)
@given(st.data())
def test_three_forms_agree(data):
    role = data.draw(st.sampled_from(sorted(DEMO.roles)))
    forms_agree(DEMO, role, data.draw(contract_explorations(DEMO)))
