"""Policy, named queries: hand-written SQL under the binder's rules, one implementation each."""

from __future__ import annotations

import pytest

from ontoos_explore.governance.registry import NamedQuery
from ontoos_explore.policy.named import NamedQueryInvalid, plan_named, verify_named

FILTERED = 'SELECT c.key AS key, c.source AS source FROM lake.config_entries c WHERE c.is_sensitive = $1 LIMIT 11'


def entry(**over) -> NamedQuery:
    base = {"id": "q", "title": "t", "status": "approved", "read_sets": ["engineering"], "columns": ["key", "source"],
            "max_rows": 10, "sql": FILTERED, "bind": [{"value": False, "type": "boolean"}]}
    return NamedQuery.model_validate({**base, **over})


def test_verified_reads_name_each_output_positions_contract_columns(demo):
    datasets, sources = verify_named(entry(), demo)
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
    datasets, sources = verify_named(verified, demo)
    verified = verified.model_copy(update={"datasets": datasets, "sources": sources})
    viewer = demo.role("viewer")
    plan = plan_named(verified, demo, viewer)
    assert (plan.role, plan.max_rows, plan.timeout_ms, plan.max_cost) == ("viewer", 3, viewer.timeout_ms, viewer.max_cost)
    assert plan.masked == frozenset() and plan.hint_columns("configs") == ("workload_id", "source")
    # were a column to turn secret under an entry (a contract edited after it was verified), its output is masked
    tampered = verified.model_copy(update={"sources": ((("configs", "key"),), (("configs", "value"),))})
    assert demo.dataset("configs").column("value").secret
    assert plan_named(tampered, demo, viewer).masked == frozenset({1})
