"""Policy, named queries: hand-written SQL under the binder's rules, one implementation each."""

from __future__ import annotations

from pathlib import Path

import pytest

from ontoos_explore.policy.plans import hint_columns
import yaml

from ontoos_explore.contract import load_contract
from ontoos_explore.governance.promote import build_entry
from ontoos_explore.governance.registry import NamedQuery
from ontoos_explore.policy.named import NamedQueryInvalid, plan_named, verify_named

from tests.named_queries import CONFIG_KEYS_FROM, KEPT, PARENTS_KEPT as PARENTS

CASES = Path(__file__).resolve().parents[1] / "cases"

# configs' always-filter, and its parents' (a config entry exists only with its workload and project), all $1
FILTERED = f"SELECT c.key AS key, c.source AS source {CONFIG_KEYS_FROM} WHERE {KEPT.format(n=1)} LIMIT 11"


def entry(**over) -> NamedQuery:
    base = {"id": "q", "title": "t", "status": "approved", "read_sets": ["engineering"], "columns": ["key", "source"],
            "max_rows": 10, "sql": FILTERED, "bind": [{"value": False, "type": "boolean"}]}
    return NamedQuery.model_validate({**base, **over})


def test_verified_reads_name_each_output_positions_contract_columns(demo):
    v = verify_named(entry(), demo)
    datasets, sources = v.datasets, v.sources
    assert datasets == ("configs",)
    assert sources == ((("configs", "key"),), (("configs", "source"),))


@pytest.mark.parametrize("over, says", [
    ({"sql": "SELECT c.key AS key, c.source AS source FROM lake.config_entries c LIMIT 11", "bind": []},
     "always-filter on is_sensitive"),
    ({"sql": "SELECT c.key AS key, c.is_sensitive AS s FROM lake.config_entries c WHERE c.is_sensitive = $1 LIMIT 11"},
     "may only filter or join"),
    ({"sql": "SELECT c.key AS key FROM lake.config_entries c WHERE c.is_sensitive = $1 LIMIT 11"},
     "declares 2 columns but its SELECT list has 1"),
    ({"read_sets": ["nope"]}, "read set 'nope'"),
    ({"bind": ["missing"]}, "unknown parameter 'missing'"),
    ({"sql": "DELETE FROM lake.config_entries"}, "the guard refused"),
])
def test_an_entry_breaking_a_rule_is_refused_naming_it(demo, over, says):
    with pytest.raises(NamedQueryInvalid) as e:
        verify_named(entry(**over), demo)
    assert says in str(e.value)


def test_the_plan_takes_the_smaller_budgets_and_masks_what_callers_may_not_see(demo):
    verified = entry(timeout_ms=999_999, max_rows=3, sql=FILTERED.replace("LIMIT 11", "LIMIT 4"))
    v = verify_named(verified, demo)
    datasets, sources = v.datasets, v.sources
    verified = verified.model_copy(update={"datasets": datasets, "sources": sources})
    viewer = demo.role("viewer")
    plan = plan_named(verified, demo, viewer)
    assert (plan.role, plan.max_rows, plan.timeout_ms, plan.max_cost) == ("viewer", 3, viewer.timeout_ms, viewer.max_cost)
    # the cost hints are drawn by the policy's one rule, for the role's scope
    expected = hint_columns(demo, demo.dataset("configs"), demo.scope(viewer))
    assert plan.masked == frozenset() and plan.hint_columns("configs") == expected
    # were a column to turn secret under an entry (a contract edited after it was verified), its output is masked
    tampered = verified.model_copy(update={"sources": ((("configs", "key"),), (("configs", "value"),))})
    assert demo.dataset("configs").column("value").secret
    assert plan_named(tampered, demo, viewer).masked == frozenset({1})


# ---------------------------------------------------------------- always-filters and hidden columns, as attacked

FALSE = {"value": False, "type": "boolean"}
CONFIGS = "SELECT c.key AS key, c.source AS source FROM lake.config_entries c"
PROJECTS = "SELECT p.name AS name FROM lake.gitlab_projects p"


def refusal(demo, **over) -> str:
    with pytest.raises(NamedQueryInvalid) as e:
        verify_named(entry(**over), demo)
    return str(e.value)


@pytest.mark.parametrize("over, says", [
    # the attack: the always-filter ORed with a caller's boolean reads every sensitive row
    ({"sql": f"{CONFIGS} WHERE c.key = $1 AND (c.is_sensitive = $2 OR $3) LIMIT 11",
      "parameters": [{"name": "key", "type": "text"}, {"name": "all", "type": "boolean"}],
      "bind": ["key", FALSE, "all"]},
     ["always-filter on is_sensitive", "must be ANDed at the top level of WHERE", "not as a top-level conjunct"]),
    ({"sql": f"{CONFIGS} WHERE (c.is_sensitive = $1 OR $2) LIMIT 11",
      "parameters": [{"name": "all", "type": "boolean"}], "bind": [FALSE, "all"]},
     ["c.is_sensitive = false must be ANDed at the top level of WHERE"]),
    # as the compiler quotes names: the same
    ({"sql": 'SELECT "c"."key" AS "key", "c"."source" AS "source" FROM "lake"."config_entries" AS "c" '
             'WHERE "c"."key" = $1 AND ("c"."is_sensitive" = $2 OR $3) LIMIT 11',
      "parameters": [{"name": "key", "type": "text"}, {"name": "all", "type": "boolean"}],
      "bind": ["key", FALSE, "all"]},
     ["c.is_sensitive = false must be ANDed at the top level of WHERE"]),
    ({"sql": f"{CONFIGS} WHERE NOT (c.is_sensitive <> $1) LIMIT 11"}, ["must be ANDed at the top level"]),
    ({"sql": f"{CONFIGS} WHERE c.is_sensitive = $1::boolean LIMIT 11"}, ["must be ANDed at the top level"]),
    # a filter in a LEFT JOIN's ON keeps the row: it is no always-filter
    ({"sql": "SELECT w.name AS key, c.key AS source FROM lake.k8s_workloads w LEFT JOIN lake.config_entries c "
             "ON c.workload_id = w.workload_id AND c.is_sensitive = $1 WHERE w.is_deleted = $1 LIMIT 11",
      "read_sets": ["engineering", "published"]},
     ["it reads configs (lake.config_entries AS c) without the contract's always-filter on is_sensitive"]),
    # the attack: a caller's parameter bound to the always-filter column lists deleted projects
    ({"sql": f"{PROJECTS} WHERE p.is_deleted = $1 LIMIT 11", "read_sets": ["published"], "columns": ["name"],
      "parameters": [{"name": "deleted", "type": "boolean"}], "bind": ["deleted"]},
     ["always-filter on projects.is_deleted must be p.is_deleted = false",
      "$1 is the caller's parameter 'deleted', not the contract's constant"]),
    # a constant, but not the contract's
    ({"bind": [{"value": True, "type": "boolean"}]}, ["$1 is bound to true, not the contract's false"]),
    ({"bind": [{"value": "true", "type": "boolean"}]}, ["$1 is bound to true, not the contract's false"]),
    ({"bind": [{"value": 0, "type": "integer"}]}, ["$1 is bound to an integer constant, not a boolean one"]),
    ({"sql": f"{CONFIGS} WHERE c.is_sensitive <> $1 LIMIT 11", "bind": [{"value": True, "type": "boolean"}]},
     ["c.is_sensitive is tested with <>, not ="]),
    # a table read twice is filtered twice: each alias
    ({"sql": "SELECT p.name AS name FROM lake.gitlab_projects p INNER JOIN lake.gitlab_projects q "
             "ON q.project_id = p.project_id WHERE p.is_deleted = $1 LIMIT 11", "read_sets": ["published"],
      "columns": ["name"]},
     ["it reads projects (lake.gitlab_projects AS q) without the contract's always-filter on is_deleted"]),
    # a hidden column only filters or joins
    ({"sql": "SELECT c.key AS key, c.is_sensitive AS s FROM lake.config_entries c WHERE c.is_sensitive = $1 LIMIT 11"},
     ["lake.config_entries.is_sensitive is not readable: it may only filter or join, not appear in the SELECT list"]),
    ({"sql": f"{CONFIGS} WHERE c.is_sensitive = $1 ORDER BY c.is_sensitive LIMIT 11"},
     ["not appear in ORDER BY"]),
    ({"sql": f"{CONFIGS} WHERE c.is_sensitive = $1 GROUP BY c.key, c.source, c.is_sensitive LIMIT 11"},
     ["not appear in GROUP BY"]),
    ({"sql": "SELECT DISTINCT ON (c.is_sensitive) c.key AS key, c.source AS source FROM lake.config_entries c "
             "WHERE c.is_sensitive = $1 LIMIT 11"}, ["not appear in DISTINCT ON"]),
    ({"sql": "SELECT c.key AS key, count(*) AS source FROM lake.config_entries c WHERE c.is_sensitive = $1 "
             "GROUP BY c.key HAVING max(c.is_sensitive) = $1 LIMIT 11"}, ["not appear in HAVING"]),
    # the parser stops at NUL: what follows would go unchecked
    ({"sql": f"{CONFIGS} WHERE c.is_sensitive = $1\0 OR true LIMIT 11"}, ["NulCharacter", "NUL"]),
    ({"sql": f"\0{FILTERED}"}, ["NulCharacter"]),
    ({"sql": f"{FILTERED}\0"}, ["NulCharacter"]),
    # a column callers may not read, tested against their value, is read a guess at a time: here the
    # project of each entry (workloads are outside engineering's read sets: only joined and filtered)
    ({"sql": f"{FILTERED.replace(' LIMIT 11', '')} AND w.project_id = $2 LIMIT 11", "bind": [FALSE, "project"],
      "parameters": [{"name": "project", "type": "integer"}]},
     ["lake.k8s_workloads.project_id is not readable: it may be tested only against the contract's constants, "
      "but $2 is the caller's parameter 'project', not the contract's constant"]),
    ({"sql": f"{FILTERED.replace(' LIMIT 11', '')} AND (w.project_id IN ($2, $3) OR c.key = $3) LIMIT 11",
      "bind": [FALSE, "project", "key"], "parameters": [{"name": "project", "type": "integer"},
                                                      {"name": "key", "type": "text"}]},
     ["lake.k8s_workloads.project_id is not readable", "$2 is the caller's parameter 'project'",
      "$3 is the caller's parameter 'key'"]),
    # or compared with a column no declared relation joins it to
    ({"sql": f"{FILTERED.replace(' LIMIT 11', '')} AND c.config_id = w.project_id LIMIT 11"},
     ["lake.k8s_workloads.project_id is not readable: it may be compared with another column only on a relation "
      "the contract declares, not with lake.config_entries.config_id"]),
], ids=["or-a-caller-boolean", "or-as-the-whole-where", "or-quoted", "not", "cast-parameter", "left-join-on",
        "caller-parameter", "wrong-constant", "wrong-constant-as-text", "wrong-constant-type", "wrong-operator",
        "self-join", "hidden-in-select", "hidden-in-order-by", "hidden-in-group-by", "hidden-in-distinct-on",
        "hidden-in-having", "nul-before-or", "nul-first", "nul-last", "hidden-against-a-caller",
        "hidden-in-a-list-under-or", "hidden-against-another-column"])
def test_each_attack_on_the_contract_is_refused_naming_why(demo, over, says):
    message = refusal(demo, **over)
    for part in says:
        assert part in message, message


def test_every_problem_is_named_not_only_the_first(demo):
    message = refusal(demo, sql="SELECT c.key AS key, c.source AS source FROM lake.config_entries c "
                                "ORDER BY c.is_sensitive LIMIT 11", bind=[])
    assert "not appear in ORDER BY" in message and "without the contract's always-filter on is_sensitive" in message
    assert "\n" not in message  # the registry reports the first line


JOINED = f"SELECT c.key AS key, c.source AS source {CONFIG_KEYS_FROM}"


@pytest.mark.parametrize("sql, bind", [
    (f"{JOINED} WHERE c.is_sensitive = $1 AND {PARENTS.format(n=1)} LIMIT 11", [FALSE]),
    (f"{JOINED} WHERE {PARENTS.format(n=1)} AND c.is_sensitive = $1 LIMIT 11", [FALSE]),  # the last conjunct
    (f"{JOINED} WHERE $1 = c.is_sensitive AND {PARENTS.format(n=1)} LIMIT 11", [FALSE]),  # the constant on the left
    (f"{JOINED} WHERE is_sensitive = $1 AND {PARENTS.format(n=1)} LIMIT 11", [FALSE]),  # unqualified
    (f"{JOINED} WHERE {KEPT.format(n=1)} LIMIT 11", [{"value": "false", "type": "boolean"}]),  # runs as false
    (f"{JOINED} WHERE (c.key = $1 OR c.source = $2) AND c.is_sensitive = $3 AND {PARENTS.format(n=3)} LIMIT 11",
     ["key", "source", FALSE]),
    (f"{JOINED} WHERE c.key = $1 AND (c.source = $2 AND (c.is_sensitive = $3 AND {PARENTS.format(n=3)})) LIMIT 11",
     ["key", "source", FALSE]),
    # a hidden column may also join or narrow, so long as the always-filter holds at the top
    ("SELECT w.name AS key, c.key AS source FROM lake.k8s_workloads w INNER JOIN lake.config_entries c "
     "ON c.workload_id = w.workload_id AND c.is_sensitive = $1 INNER JOIN lake.gitlab_projects p "
     f"ON p.project_id = w.project_id WHERE {KEPT.format(n=1)} LIMIT 11", [FALSE]),
], ids=["first-conjunct", "last-conjunct", "reversed", "unqualified", "constant-as-text", "beside-an-or", "nested-and",
        "join-on-too"])
def test_legitimate_shapes_are_accepted(demo, sql, bind):
    params = [{"name": b, "type": "text"} for b in bind if isinstance(b, str)]
    datasets = verify_named(entry(sql=sql, bind=bind, parameters=params, read_sets=["engineering", "published"]),
                            demo).datasets
    assert "configs" in datasets


def test_every_golden_exploration_promoted_passes_the_named_query_rules(demo):
    """The compiler writes always-filters as $n the promotion binds to contract constants: each loads."""
    for case in yaml.safe_load((CASES / "golden.yaml").read_text()):
        promoted = build_entry([(case["source"], case["role"])], demo, "g", "t")
        assert promoted.datasets, case["id"]


SHIPMENT_FILTERS = """      - {column: is_test_order, op: "=", value: false}
      - {column: status, op: "not in", value: [cancelled, open]}
      - {column: placed_at, op: "is not null"}
      - {column: total_eur, op: ">=", value: 0}
"""


@pytest.fixture
def filtered(tmp_path):
    """The inventory contract with an always-filter of each shape the compiler writes."""
    text = (CASES / "contracts" / "inventory.yaml").read_text()
    path = tmp_path / "inventory.yaml"
    path.write_text(text.replace('      - {column: is_test_order, op: "=", value: false}\n', SHIPMENT_FILTERS))
    return load_contract(path)


def test_in_not_in_and_null_always_filters_hold_as_the_compiler_writes_them(filtered):
    promoted = build_entry([("explore shipments fields order_no where site_no = 3", "clerk")], filtered, "s", "t")
    assert 'NOT ("t0"."status" IN (' in promoted.sql and '"t0"."placed_at" IS NOT NULL' in promoted.sql
    assert [b.value for b in promoted.bind if not isinstance(b, str)] == [False, "cancelled", "open", "0"]
    # the same SQL with the set changed, or the test dropped, is refused
    as_written = {"id": "s", "title": "t", "read_sets": ["logistics"], "columns": ["order_no"], "max_rows": 40,
                  "parameters": [{"name": "site_no", "type": "integer"}]}
    bind = [b if isinstance(b, str) else b.model_dump() for b in promoted.bind]
    swapped = [*bind[:2], {"value": "shipped", "type": "enum"}, *bind[3:]]
    with pytest.raises(NamedQueryInvalid,
                       match=r"is bound to 'shipped', 'open', not the contract's \('cancelled', 'open'\)"):
        verify_named(NamedQuery.model_validate({**as_written, "sql": promoted.sql, "bind": swapped}), filtered)
    dropped = promoted.sql.replace(' AND "t0"."placed_at" IS NOT NULL', "")
    with pytest.raises(NamedQueryInvalid, match="always-filter on placed_at"):
        verify_named(NamedQuery.model_validate({**as_written, "sql": dropped, "bind": bind}), filtered)
    assert verify_named(NamedQuery.model_validate({**as_written, "sql": promoted.sql, "bind": bind}), filtered)
