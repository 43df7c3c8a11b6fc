"""Policy, plans: the rules every query that runs shares (cost ceiling, masking, cost hints)."""

from __future__ import annotations

from ontoos_explore import compile_exploration
from ontoos_explore.contract import parse_contract
from ontoos_explore.policy.plans import cost_ceiling, hint_columns, masked_positions, may_read, plan_for

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _without_analyst_max_cost(extra: str = ""):
    text = (ROOT / "contracts" / "demo.yaml").read_text(encoding="utf-8").replace("    max_cost: 100000\n", "")
    return parse_contract(text + extra)


def test_the_roles_max_cost_is_the_ceiling_and_a_heavy_dataset_has_one_without_it(demo):
    assert cost_ceiling(demo, demo.role("viewer"), [demo.dataset("hosts")]) == 10000
    c = _without_analyst_max_cost("heavy_max_cost: 250\n")
    analyst = c.role("analyst")
    assert cost_ceiling(c, analyst, [c.dataset("hosts")]) is None
    assert cost_ceiling(c, analyst, [c.dataset("hosts"), c.dataset("configs")]) == 250.0
    assert _without_analyst_max_cost().heavy_max_cost == 1_000_000.0  # the default


def test_a_compiled_plan_carries_what_execution_needs(demo):
    q = compile_exploration("explore workloads via containers fields name, containers.name limit 5000", demo, "analyst")
    p = q.plan
    assert (p.role, p.max_rows, p.timeout_ms, p.max_cost) == ("analyst", 500, 5000, 100000)
    assert [d for d, _ in p.cost_hints] == ["workloads", "containers"]
    assert p.masked == frozenset()
    assert p.hint_columns("workloads") == hint_columns(demo, demo.dataset("workloads"), demo.scope(demo.role("analyst")))


def test_hint_columns_are_readable_enums_and_join_keys_of_relations_the_caller_may_follow(demo):
    for role in demo.roles.values():
        scope = demo.scope(role)
        for ds in demo.readable_datasets(role):
            cols = hint_columns(demo, ds, scope)
            assert len(cols) <= 4
            keys = {c for r in demo.relations_from(ds.name) if r.to.lower() in scope for c in r.join} | \
                   {c for r in demo.relations_to(ds.name) if r.from_.lower() in scope for c in r.join.values()}
            for name in cols:
                col = ds.column(name)
                assert may_read(col) and (col.type == "enum" or col.name in keys), (role.name, ds.name, name)


def test_a_cost_hint_never_names_a_key_of_a_relation_outside_the_read_sets(demo):
    """workloads.cluster is a join key only towards a dataset the viewer may not read: its hint leaves it out."""
    viewer = demo.role("viewer")
    q = compile_exploration("explore workloads fields name where namespace = 'x'", demo, "viewer")
    everything = hint_columns(demo, demo.dataset("workloads"), frozenset(demo.datasets))
    assert "cluster" in everything and "cluster" not in q.plan.hint_columns("workloads")
    assert q.plan.hint_columns("workloads") == hint_columns(demo, demo.dataset("workloads"), demo.scope(viewer))


def test_positions_reading_a_column_callers_may_not_see_are_masked(demo):
    w = demo.dataset("workloads")
    name, secret = w.column("name"), w.column("env_dump")
    hidden = next(c for c in w.columns.values() if c.hidden)
    assert masked_positions([(name,), (secret,), (), (name, hidden), (None,)]) == frozenset({1, 3, 4})
    plan = plan_for(demo, demo.role("analyst"), [w, w], 10, 100, [(name,), (secret,)])
    assert plan.masked == frozenset({1}) and len(plan.cost_hints) == 1 and (plan.max_rows, plan.timeout_ms) == (10, 100)


def test_the_heavy_ceiling_is_a_governed_contract_value():
    import pytest

    from ontoos_explore.errors import ContractError

    for bad in ("0", "-5", ".inf", "lots"):
        with pytest.raises(ContractError) as e:
            _without_analyst_max_cost(f"heavy_max_cost: {bad}\n")
        assert "heavy_max_cost" in e.value.message
