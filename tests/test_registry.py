"""Named-query registry: entries are verified by the guard and by the contract's column rules."""

from __future__ import annotations

import yaml

from ontoos_explore.governance.registry import Registry

from tests.named_queries import CONFIG_KEYS_FROM, KEPT

BASE = {"id": "q", "title": "t", "status": "approved", "read_sets": ["engineering"], "columns": ["key"], "max_rows": 10}


def load(tmp_path, demo, **entry):
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"queries": [{**BASE, **entry}]}))
    return Registry.load(path, demo)


def test_an_entry_with_its_always_filter_loads(tmp_path, demo):
    reg = load(tmp_path, demo, sql=f"SELECT c.key AS key {CONFIG_KEYS_FROM} WHERE {KEPT.format(n=1)} LIMIT 11",
               bind=[{"value": False, "type": "boolean"}])
    assert reg.problems == [] and [q.id for q in reg.visible("analyst")] == ["q"]
    assert reg.entries["q"].datasets == ("configs",)


def test_an_entry_without_the_always_filter_is_skipped(tmp_path, demo):
    reg = load(tmp_path, demo, sql="SELECT c.key AS key FROM lake.config_entries c LIMIT 11")
    assert reg.entries == {} and "always-filter on is_sensitive" in reg.problems[0][1]


def test_a_hidden_column_may_filter_but_not_be_selected(tmp_path, demo):
    reg = load(tmp_path, demo, columns=["key", "is_sensitive"],
               sql="SELECT c.key AS key, c.is_sensitive AS s FROM lake.config_entries c WHERE c.is_sensitive = $1 LIMIT 11",
               bind=[{"value": False, "type": "boolean"}])
    assert reg.entries == {} and "may only filter or join" in reg.problems[0][1]


def test_a_guard_refusal_is_reported_and_skipped_not_fatal(tmp_path, demo):
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"queries": [
        {**BASE, "id": "bad", "sql": "DELETE FROM lake.config_entries"},
        {**BASE, "id": "good", "sql": f"SELECT c.key AS key {CONFIG_KEYS_FROM} WHERE {KEPT.format(n=1)} LIMIT 11",
         "bind": [{"value": False, "type": "boolean"}]},
        "not even a mapping",
    ]}))
    reg = Registry.load(path, demo)
    assert list(reg.entries) == ["good"]
    assert [ident for ident, _ in reg.problems] == ["bad", "#2"]
    assert "DeleteStmt" in reg.problems[0][1]


def test_parameters_are_held_to_the_roles_literal_budget_and_explained(tmp_path, demo):
    import pytest

    from ontoos_explore.errors import ExploreError
    from ontoos_explore.policy.named import bind_named as bind_params

    reg = load(tmp_path, demo, sql=f"SELECT c.key AS key {CONFIG_KEYS_FROM} WHERE c.key = $1 AND {KEPT.format(n=2)} "
               "LIMIT 11", parameters=[{"name": "key", "type": "text"}],
               bind=["key", {"value": False, "type": "boolean"}])
    entry = reg.entries["q"]
    viewer = demo.role("viewer")
    assert viewer.max_literal_length == 200
    assert bind_params(entry, {"key": "x" * 200}, viewer)[0] == "x" * 200
    with pytest.raises(ExploreError) as too_long:
        bind_params(entry, {"key": "x" * 201}, viewer)
    assert too_long.value.code == "EX405" and "200" in too_long.value.hint
    with pytest.raises(ExploreError) as not_object:
        bind_params(entry, ["x"], viewer)
    assert "key: text" in not_object.value.hint and "{'" not in not_object.value.hint


FALSE = {"value": False, "type": "boolean"}
TRUE = {"value": True, "type": "boolean"}
CONFIGS = f"SELECT c.key AS key {CONFIG_KEYS_FROM}"
ATTACKS = [
    # (id, what the entry sets, what the problem it is skipped for says)
    ("ored", {"sql": f"{CONFIGS} WHERE (c.is_sensitive = $1 OR $2) AND w.is_deleted = $1 AND p.is_deleted = $1 LIMIT 11",
              "bind": [FALSE, "all"],
              "parameters": [{"name": "all", "type": "boolean"}]},
     "c.is_sensitive = false must be ANDed at the top level of WHERE"),
    ("caller_bound", {"sql": "SELECT p.name AS key FROM lake.gitlab_projects p WHERE p.is_deleted = $1 LIMIT 11",
                      "read_sets": ["published"], "bind": ["deleted"],
                      "parameters": [{"name": "deleted", "type": "boolean"}]},
     "$1 is the caller's parameter 'deleted', not the contract's constant"),
    ("wrong_value", {"sql": f"{CONFIGS} WHERE c.is_sensitive = $1 AND w.is_deleted = $2 AND p.is_deleted = $2 LIMIT 11",
                     "bind": [TRUE, FALSE]},
     "$1 is bound to true, not the contract's false"),
    ("in_order_by", {"sql": f"{CONFIGS} WHERE {KEPT.format(n=1)} ORDER BY c.is_sensitive LIMIT 11", "bind": [FALSE]},
     "may only filter or join, not appear in ORDER BY"),
    ("in_group_by", {"sql": f"{CONFIGS} WHERE {KEPT.format(n=1)} GROUP BY c.key, c.is_sensitive LIMIT 11",
                     "bind": [FALSE]},
     "may only filter or join, not appear in GROUP BY"),
    ("nul", {"sql": f"{CONFIGS} WHERE {KEPT.format(n=1)}\0 OR true LIMIT 11", "bind": [FALSE]}, "NulCharacter"),
    # a config entry of a deleted workload (or project) is hidden with it: the parents must be joined
    ("orphan", {"sql": "SELECT c.key AS key FROM lake.config_entries c WHERE c.is_sensitive = $1 LIMIT 11",
                "bind": [FALSE]},
     "without its parent workloads: its rows exist only with their workloads row (exists_with config_workload)"),
    ("left_joined_parent", {"sql": f"{CONFIGS.replace('INNER JOIN lake.k8s_workloads', 'LEFT JOIN lake.k8s_workloads')} "
                                   f"WHERE {KEPT.format(n=1)} LIMIT 11", "bind": [FALSE]},
     "without its parent workloads"),
]


def test_each_entry_breaking_the_contract_is_skipped_naming_why(tmp_path, demo):
    path = tmp_path / "queries.yaml"
    good = {**BASE, "id": "good", "sql": f"{CONFIGS} WHERE c.key = $1 AND {KEPT.format(n=2)} LIMIT 11",
            "bind": ["key", FALSE], "parameters": [{"name": "key", "type": "text"}]}
    path.write_text(yaml.safe_dump({"queries": [good, *({**BASE, "id": i, **over} for i, over, _ in ATTACKS)]}))
    reg = Registry.load(path, demo)
    assert list(reg.entries) == ["good"]
    assert [ident for ident, _ in reg.problems] == [i for i, _, _ in ATTACKS]
    for (ident, problem), (_, _, says) in zip(reg.problems, ATTACKS):
        assert says in problem, (ident, problem)


def test_an_entrys_plan_is_worked_out_once_for_each_role_and_each_gets_its_own(tmp_path, demo):
    """Calls of a named query reuse the plan its role runs it with (a registry never changes); another
    role's calls get that role's budgets, never the first caller's."""
    reg = load(tmp_path, demo, read_sets=["published"], columns=["name"], max_rows=1000,
               sql="SELECT w.name AS name FROM lake.k8s_workloads AS w INNER JOIN lake.gitlab_projects AS p "
                   "ON p.project_id = w.project_id WHERE w.kind = $1 AND w.is_deleted = $2 AND p.is_deleted = $2 "
                   "LIMIT 1001",
               parameters=[{"name": "kind", "type": "text"}], bind=["kind", {"value": False, "type": "boolean"}])
    assert reg.problems == []
    viewer = reg.compiled("viewer", "q", {"kind": "Deployment"})
    again = reg.compiled("viewer", "q", {"kind": "CronJob"})
    assert again.plan is viewer.plan and again.params == ("CronJob", False) and viewer.params == ("Deployment", False)
    admin = reg.compiled("admin", "q", {"kind": "Deployment"})
    assert (viewer.plan.role, viewer.plan.max_rows, viewer.plan.timeout_ms) == ("viewer", 100, 2000)
    assert (admin.plan.role, admin.plan.max_rows, admin.plan.timeout_ms) == ("admin", 1000, 15000)
    assert admin.limit == 1000 and viewer.limit == 100
