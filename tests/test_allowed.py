"""allowed.py: contract + role (or read sets) -> the relations and columns the guard lets SQL read.

A dataset's allowed columns are its readable ones, plus the columns the contract itself needs
in SQL: the join columns of its relations to datasets in the same scope, and its always-filter
columns. Those may be hidden or secret (the caller can neither select nor filter by them); every
other secret or hidden column stays out, and so does the join column of a relation whose other
end is out of scope. The contract here is written for the test, so each expectation can be read
off it; the demo contract is checked against the guard.
"""

from __future__ import annotations

import pytest

from ontoos_explore import compile_exploration
from ontoos_explore.allowed import allowed_for_read_sets, allowed_for_role, dataset_columns
from ontoos_explore.contract import parse_contract
from ontoos_explore.guard import check

CONTRACT = """
version: 1
datasets:
  teams:
    relation: org.teams
    columns:
      team_id: {type: integer}
      title:   {type: text}
      budget:  {type: numeric, secret: true}
  people:
    relation: org.staff
    always_filter:
      - {column: is_gone, op: "=", value: false}
    columns:
      person_id: {type: integer}
      name:      {type: text}
      team_ref:  {type: integer, hidden: true}
      ssn:       {type: text, secret: true}
      is_gone:   {type: boolean, hidden: true}
      notes:     {type: text, hidden: true}
  vault:
    relation: sec.vault_entries
    columns:
      entry_no:  {type: integer}
      owner_ssn: {type: text, secret: true}
      pin:       {type: text, secret: true}
relations:
  team:
    from: people
    to: teams
    join: {team_ref: team_id}
    cardinality: many_to_one
  vault_entries:
    from: people
    to: vault
    join: {ssn: owner_ssn}
    cardinality: one_to_many
read_sets:
  basic: [people, teams]
  everything: [people, teams, vault]
roles:
  viewer: {read_sets: [basic], max_rows: 10}
  keeper: {read_sets: [everything], max_rows: 100}
"""


@pytest.fixture(scope="module")
def contract():
    return parse_contract(CONTRACT, "allowed.yaml")


def test_a_role_reads_its_datasets_with_join_and_always_filter_columns_but_no_other_secret(contract):
    allowed = allowed_for_role(contract, contract.role("viewer"))
    assert allowed.max_rows == 10
    assert dict(allowed.relations) == {
        # team_ref is hidden but joins to teams; is_gone is hidden but the always-filter; ssn joins only to
        # vault, which the viewer cannot read, and notes is just hidden: both stay out
        ("org", "staff"): frozenset({"person_id", "name", "team_ref", "is_gone"}),
        ("org", "teams"): frozenset({"team_id", "title"}),  # budget: secret, joins nothing
    }


def test_a_secret_join_column_is_allowed_once_the_other_end_is_in_scope(contract):
    allowed = allowed_for_role(contract, contract.role("keeper"))
    assert allowed.max_rows == 100
    assert dict(allowed.relations) == {
        ("org", "staff"): frozenset({"person_id", "name", "team_ref", "is_gone", "ssn"}),
        ("org", "teams"): frozenset({"team_id", "title"}),
        ("sec", "vault_entries"): frozenset({"entry_no", "owner_ssn"}),  # pin: secret, joins nothing
    }


def test_read_sets_give_the_same_as_a_role_with_them(contract):
    by_sets = allowed_for_read_sets(contract, ["basic"], 7)
    assert dict(by_sets.relations) == dict(allowed_for_role(contract, contract.role("viewer")).relations)
    assert by_sets.max_rows == 7
    assert dict(allowed_for_read_sets(contract, ["BASIC"], None).relations) == dict(by_sets.relations)  # folded
    assert allowed_for_read_sets(contract, ["everything"], None).max_rows is None
    assert dict(allowed_for_read_sets(contract, [], None).relations) == {}


def test_dataset_columns_depend_on_the_scope_given(contract):
    people = contract.dataset("people")
    assert dataset_columns(contract, people, frozenset({"people"})) == {"person_id", "name", "is_gone"}
    assert dataset_columns(contract, people, frozenset({"people", "teams"})) == {"person_id", "name", "is_gone",
                                                                                 "team_ref"}
    assert dataset_columns(contract, contract.dataset("vault"), frozenset({"vault", "people"})) == {"entry_no",
                                                                                                   "owner_ssn"}


def test_the_allowed_set_is_computed_once_per_role(contract):
    role = contract.role("viewer")
    assert allowed_for_role(contract, role) is allowed_for_role(contract, role)


def test_the_guard_lets_a_compiled_join_through_and_refuses_a_secret_column(demo):
    """On the demo contract: what the compiler writes for a role passes the guard with the role's set,
    always-filter and join columns included; the same SQL reading a secret column does not."""
    q = compile_exploration("explore workloads via containers fields name, containers.cpu_millis limit 5", demo, "analyst")
    allowed = allowed_for_role(demo, demo.role("analyst"))
    verdict = check(q.sql, allowed, len(q.params))
    assert verdict.ok, verdict.violations
    secret = next(c.name for c in demo.dataset("workloads").columns.values() if c.secret)
    assert secret not in allowed.relations[(demo.dataset("workloads").schema_name, demo.dataset("workloads").table_name)]
    tampered = q.sql.replace('"t0"."name"', f'"t0"."{secret}"', 1)
    assert tampered != q.sql
    refused = check(tampered, allowed, len(q.params))
    assert not refused.ok and any(secret in v.message for v in refused.violations), refused.violations


def test_every_demo_role_reads_only_what_the_contract_lets_it(demo):
    for role in demo.roles.values():
        allowed = allowed_for_role(demo, role)
        scope = demo.scope(role)
        for ds in demo.datasets.values():
            key = (ds.schema_name, ds.table_name)
            if ds.name.lower() not in scope:
                continue
            cols = allowed.relations[key]
            assert {c.name for c in ds.readable_columns()} <= cols, (role.name, ds.name)
            assert {ds.column(f.column).name for f in ds.always_filter} <= cols, (role.name, ds.name)
            needed = {c.name for c in ds.readable_columns()} | {ds.column(f.column).name for f in ds.always_filter}
            for rel in demo.relations.values():
                if rel.from_.lower() == ds.name.lower() and rel.to.lower() in scope:
                    needed |= set(rel.join)
                if rel.to.lower() == ds.name.lower() and rel.from_.lower() in scope:
                    needed |= set(rel.join.values())
            assert cols == needed, (role.name, ds.name, cols ^ needed)
