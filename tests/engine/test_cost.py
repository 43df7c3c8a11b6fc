"""Cost budget: the ceiling bounds the work a plan can do, and callers never see planner figures.

Two attacks this holds against: LIMIT pro-rates EXPLAIN's top-level cost (`limit 1` over a join looks
cheap while the join beneath it is not), and the estimate of a value that exists only in rows an
always-filter hides differs from the estimate of a value that does not exist at all (an oracle on
hidden rows, through the dry run's figure or the EX411 message).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import psycopg
import pytest
import yaml

from ontoos_explore import compile_exploration
from ontoos_explore.contract import parse_contract
from ontoos_explore.engine.executor import EXPLAIN, work
from ontoos_explore.errors import ExploreError
from ontoos_explore.service import Explorer, cost_class

from ..conftest import executor_for

pytestmark = pytest.mark.anyio

PRO_RATED = "explore workloads via containers fields name, containers.name limit 1"


def _explain(dsn: str, sql: str, params) -> dict:
    with psycopg.connect(dsn, cursor_factory=psycopg.RawCursor) as conn:
        return conn.execute(EXPLAIN + sql, list(params)).fetchone()[0][0]["Plan"]


def test_work_is_the_costliest_node_not_the_limits_pro_rated_total():
    plan = {"Node Type": "Limit", "Total Cost": 0.7, "Plans": [
        {"Node Type": "Hash Join", "Total Cost": 458.0, "Plans": [
            {"Node Type": "Seq Scan", "Total Cost": 200.0}, {"Node Type": "Hash", "Total Cost": 90.0}]}]}
    assert work(plan) == 458.0
    assert work({"Node Type": "Seq Scan", "Total Cost": 12.5}) == 12.5


async def test_a_limit_does_not_hide_the_join_beneath_it_from_the_ceiling(pg_dsn, demo):
    q = compile_exploration(PRO_RATED, demo, "analyst")
    plan = _explain(pg_dsn, q.sql, q.params)
    top, full = plan["Total Cost"], work(plan)
    assert full > 10 * top  # the planner pro-rated the Limit: the join beneath is what would run
    between = dataclasses.replace(q, plan=dataclasses.replace(q.plan, max_cost=(top + full) / 2))
    async with executor_for(pg_dsn, demo, cost_cache_s=0) as executor:
        with pytest.raises(ExploreError) as refused:
            await executor.run(between)
        assert refused.value.code == "EX411" and refused.value.detail["cost"] == full
        ok = dataclasses.replace(q, plan=dataclasses.replace(q.plan, max_cost=full * 2))
        assert (await executor.run(ok)).cost == full


async def test_a_roles_own_ceiling_refuses_limit_1_over_the_join_and_lets_a_cheap_limit_1_run(pg_dsn, demo):
    """The issue's attack, end to end: a role whose `max_cost` sits between the Limit's pro-rated
    total and the join beneath it is refused the join at `limit 1`, and still runs `limit 1` on one table."""
    q = compile_exploration(PRO_RATED, demo, "analyst")
    plan = _explain(pg_dsn, q.sql, q.params)
    data = yaml.safe_load((Path(__file__).resolve().parents[2] / "contracts" / "demo.yaml").read_text())
    data["roles"]["analyst"]["max_cost"] = (plan["Total Cost"] + work(plan)) / 2
    frugal = parse_contract(yaml.safe_dump(data, sort_keys=False), "frugal.yaml")
    async with executor_for(pg_dsn, frugal, cost_cache_s=0) as executor:
        explorer = Explorer(frugal, executor, cache=None)
        refused = await explorer.explore(PRO_RATED, "analyst")
        assert refused.error.code == "EX411" and refused.cost == work(plan)
        dry = await explorer.explore(PRO_RATED, "analyst", dry_run=True)
        assert dry.envelope["data"]["plan"]["within_budget"] is False and dry.envelope["data"]["plan"]["cost_class"] == "over"
        assert (await explorer.explore("explore workloads fields name limit 1", "analyst")).ok


def _hidden_only_and_absent(dsn: str) -> tuple[str, str]:
    with psycopg.connect(dsn) as conn:
        hidden = conn.execute("SELECT key FROM lake.config_entries GROUP BY key HAVING bool_and(is_sensitive) "
                              "ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
        absent = "NO_SUCH_KEY_" + "X" * (len(hidden) - 12) if len(hidden) > 12 else "NO_SUCH_KEY"
        assert conn.execute("SELECT count(*) FROM lake.config_entries WHERE key = %s", [absent]).fetchone()[0] == 0
    return hidden, absent


def _without_ids(env: dict) -> str:
    """The envelope without what differs between any two answers: its id, its time, and its evidence's age
    (the clock's when each was rendered: two answers a second apart are a second apart in it)."""
    def drop(value):
        if isinstance(value, dict):
            return {k: drop(v) for k, v in value.items() if k not in ("exploration_id", "elapsed_ms", "age_seconds")}
        return [drop(v) for v in value] if isinstance(value, list) else value

    return json.dumps(drop(json.loads(json.dumps(env))), sort_keys=True)


async def test_a_value_only_in_hidden_rows_and_an_absent_value_answer_alike(pg_dsn, demo):
    """The dry run and the cost refusal say the same for both; only the audit has the planner's figures."""
    hidden, absent = _hidden_only_and_absent(pg_dsn)
    texts = [f"explore configs fields key, source where key = '{v}'" for v in (hidden, absent)]
    async with executor_for(pg_dsn, demo, cost_cache_s=0) as executor:
        explorer = Explorer(demo, executor, cache=None)
        dry = [await explorer.explore(t, "analyst", dry_run=True) for t in texts]
        assert all(a.ok for a in dry) and _without_ids(dry[0].envelope) == _without_ids(dry[1].envelope)
        assert "estimated_cost" not in json.dumps(dry[0].envelope)
        assert None not in (dry[0].cost, dry[1].cost)  # the figures are kept for the audit, not shown
        assert dry[0].cost != dry[1].cost  # and they differ: shown, they would be the oracle
        # over a ceiling both exceed, the refusals are alike too, and say no figure of the planner's
        queries = [compile_exploration(t, demo, "analyst", cache=None) for t in texts]
        low = min(a.cost for a in dry) / 2
        refusals = []
        for q in queries:
            with pytest.raises(ExploreError) as e:
                await executor.run(dataclasses.replace(q, plan=dataclasses.replace(q.plan, max_cost=low)))
            refusals.append(e.value)
        assert [r.code for r in refusals] == ["EX411", "EX411"]
        assert refusals[0].to_envelope() == refusals[1].to_envelope()
        assert all(f"{r.detail['cost']:,.0f}" not in r.message + (r.hint or "") for r in refusals)


def test_the_cost_class_is_coarse():
    assert [cost_class(c, 100.0) for c in (1, 10, 11, 50, 51, 100, 101)] == \
        ["low", "low", "moderate", "moderate", "high", "high", "over"]
    assert cost_class(None, 100.0) == cost_class(5.0, None) == "unchecked"
