"""Engine, execution on the real PostgreSQL with the demo lakehouse (no mocks)."""

from __future__ import annotations

import dataclasses
import json

import psycopg
import pytest

import ontoos_explore

from ontoos_explore import compile_exploration
from ontoos_explore.contract import parse_contract
from ontoos_explore.engine.demo_data import SECRET_MARKER
from ontoos_explore.engine.executor import BEGIN, BUDGET, END, CostCache, Executor
from ontoos_explore.engine.pool import open_pool
from ontoos_explore.engine.rows import MASK
from ontoos_explore.engine.settings import Settings
from ontoos_explore.policy.plans import masked_positions
from ontoos_explore.service import Explorer

from ..conftest import ROOT, executor_for

pytestmark = pytest.mark.anyio


@pytest.fixture
async def explorer(pg_dsn, demo):
    settings = Settings(dsn=pg_dsn, pool_max=4, pool_timeout_s=5)
    pool = await open_pool(pg_dsn, settings)
    try:
        yield Explorer(demo, Executor(pool, settings))
    finally:
        await pool.close()


def direct(dsn: str, sql: str, params=()) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchall()


async def test_rows_match_a_hand_written_query(explorer, pg_dsn):
    answer = await explorer.explore(
        "explore workloads fields namespace, count() as n where kind = 'Deployment' group by namespace "
        "order by namespace limit 100", "analyst")
    assert answer.ok, answer.envelope
    # a workload exists only with its project (exists_with): deleted projects' workloads are hidden too
    expected = direct(pg_dsn, "SELECT w.namespace, count(*) FROM lake.k8s_workloads w "
                              "JOIN lake.gitlab_projects p ON p.project_id = w.project_id "
                              "WHERE w.kind = 'Deployment' AND NOT w.is_deleted AND NOT p.is_deleted "
                              "GROUP BY w.namespace ORDER BY w.namespace")
    assert answer.envelope["data"]["rows"] == [[ns, n] for ns, n in expected]
    assert answer.envelope["data"]["columns"] == ["namespace", "n"]


async def test_always_filter_hides_rows(explorer, pg_dsn):
    answer = await explorer.explore("explore workloads fields count()", "analyst")
    (visible,) = direct(pg_dsn, "SELECT count(*) FROM lake.k8s_workloads w JOIN lake.gitlab_projects p "
                                "ON p.project_id = w.project_id WHERE NOT w.is_deleted AND NOT p.is_deleted")[0:1]
    (everything,) = direct(pg_dsn, "SELECT count(*) FROM lake.k8s_workloads")[0:1]
    assert answer.envelope["data"]["rows"] == [[visible[0]]]
    assert visible[0] < everything[0]


async def test_truncation_fetches_one_more(explorer, pg_dsn):
    answer = await explorer.explore("explore hosts fields hostname order by hostname limit 5", "analyst")
    meta = answer.envelope["meta"]
    assert (meta["rows"], meta["truncated"], meta["limit"]) == (5, True, 5)
    (total,) = direct(pg_dsn, "SELECT count(*) FROM lake.hosts")[0]
    whole = await explorer.explore(f"explore hosts fields hostname limit {total}", "analyst")
    assert (whole.envelope["meta"]["rows"], whole.envelope["meta"]["truncated"]) == (total, False)


async def test_values_are_json_safe_and_typed_consistently(explorer):
    answer = await explorer.explore(
        "explore hosts fields hostname, vcpus, memory_gb, launched_at, decommissioned "
        "order by host_id limit 3", "analyst")
    rows = answer.envelope["data"]["rows"]
    json.dumps(answer.envelope)
    for hostname, vcpus, memory_gb, launched_at, decommissioned in rows:
        assert isinstance(hostname, str) and isinstance(vcpus, int) and isinstance(decommissioned, bool)
        assert isinstance(memory_gb, str) and float(memory_gb) > 0  # numeric: always an exact string
        assert launched_at[:4].isdigit() and "T" in launched_at  # ISO 8601


async def test_success_envelope_shape(explorer):
    answer = await explorer.explore("explore projects fields name limit 2", "viewer")
    env = answer.envelope
    assert env["ok"] is True and set(env) == {"ok", "data", "meta", "_notice"}
    assert env["_notice"] == {"min_cli_version": ontoos_explore.__version__, "schema_drift": False,
                              "contract_hash": env["meta"]["contract_hash"]}
    assert set(env["meta"]) == {"exploration_id", "fingerprint", "rows", "truncated", "limit", "elapsed_ms",
                                "masked_columns", "notes", "contract_hash", "evidence"}
    assert env["meta"]["elapsed_ms"] > 0 and env["meta"]["masked_columns"] == []


async def test_refusals_come_back_as_envelopes(explorer):
    answer = await explorer.explore("explore workloads fields env_dump", "analyst")
    assert not answer.ok and answer.envelope["error"]["subtype"] == "UNKNOWN_FIELD"
    assert answer.envelope["meta"]["exploration_id"]


async def test_dry_run_plans_without_reading(explorer):
    answer = await explorer.explore(
        "explore workloads via containers fields name, containers.name where namespace = 'prod' limit 5000",
        "analyst", dry_run=True)
    plan = answer.envelope["data"]["plan"]
    assert plan["datasets"] == ["workloads", "containers"] and plan["relations"] == ["containers"]
    assert plan["limit"] == 500 and plan["within_budget"] is True and "estimated_cost" not in plan
    assert "rows" not in answer.envelope["data"]
    assert any("lowered to 500" in n for n in answer.envelope["meta"]["notes"])


async def test_cost_budget_refuses_with_a_helpful_hint(pg_dsn, demo):
    async with executor_for(pg_dsn, demo, pool_max=2) as executor:
        q = compile_exploration("explore table_refs via table fields file_path, table.table_name "
                                "where confidence >= 0.1 limit 300", demo, "analyst")
        q = dataclasses.replace(q, plan=dataclasses.replace(q.plan, max_cost=1.0))
        with pytest.raises(Exception) as info:
            await executor.run(q)
        err = info.value
        assert (err.subtype, err.code) == ("QUERY_BUDGET_EXCEEDED", "EX411")
        assert "table_refs" in err.hint and "1" in err.message
        # the connection is healthy afterwards
        ok = compile_exploration("explore hosts fields hostname limit 1", demo, "analyst")
        assert len((await executor.run(ok)).rows) == 1


async def test_heavy_datasets_are_always_cost_checked(pg_dsn, demo):
    """A role without max_cost still has a ceiling on a heavy dataset: the contract's heavy_max_cost."""
    text = (ROOT / "contracts" / "demo.yaml").read_text(encoding="utf-8").replace("    max_cost: 100000\n", "")
    contract = parse_contract(text + "heavy_max_cost: 1\n")
    assert contract.role("analyst").max_cost is None and contract.dataset("configs").heavy
    q = compile_exploration("explore configs fields key where source = 'env'", contract, "analyst")
    light = compile_exploration("explore hosts fields hostname limit 1", contract, "analyst")
    assert (q.plan.max_cost, light.plan.max_cost) == (1.0, None)
    async with executor_for(pg_dsn, contract, pool_max=2) as executor:
        with pytest.raises(Exception) as info:
            await executor.run(q)
        assert info.value.code == "EX411" and "configs" in info.value.hint
        assert len((await executor.run(light)).rows) == 1


async def test_the_cost_estimate_is_the_values_own_and_kept_for_the_same_values(pg_dsn, demo):
    settings = Settings(dsn=pg_dsn, pool_max=2)
    pool = await open_pool(pg_dsn, settings)
    executor = Executor(pool, settings)
    try:
        texts = ["explore workloads fields name where namespace = 'payments' limit 50",
                 "explore workloads fields name where namespace = 'no-such-namespace' limit 50"]
        a, b = (compile_exploration(t, demo, "analyst") for t in texts)
        assert a.sql == b.sql and a.params != b.params and a.plan.max_cost is not None
        first, second = await executor.run(a), await executor.run(b)
        assert None not in (first.cost, second.cost) and first.cost != second.cost  # the planner saw each value
        assert executor.costs.get(CostCache.key(a)) == first.cost
        again = await executor.run(a)
        assert again.cost == first.cost and again.rows == first.rows
    finally:
        await pool.close()
    # known over a lower ceiling: refused before any connection is asked for (the pool is closed)
    over = dataclasses.replace(a, plan=dataclasses.replace(a.plan, max_cost=first.cost / 2))
    with pytest.raises(Exception) as info:
        await executor.run(over)
    assert info.value.code == "EX411"


async def test_without_the_cost_cache_each_call_explains_again(pg_dsn, demo):
    async with executor_for(pg_dsn, demo, pool_max=2, cost_cache_s=0) as executor:
        q = compile_exploration("explore workloads fields name where namespace = 'payments' limit 50", demo, "analyst")
        assert (await executor.run(q)).cost is not None
        assert executor.costs.get(CostCache.key(q)) is None


async def test_the_database_is_the_third_wall(pg_dsn, demo):
    """Both walls above bypassed by hand: PostgreSQL's grants still refuse the secret column."""
    async with executor_for(pg_dsn, demo, pool_max=2) as executor:
        q = compile_exploration("explore workloads fields name limit 3", demo, "analyst")
        bad = dataclasses.replace(q, sql=q.sql.replace('"t0"."name" AS', '"t0"."env_dump" AS'))
        with pytest.raises(Exception) as info:
            await executor.run(bad)
        err = info.value
        assert (err.type, err.code, err.reason) == ("internal", "EX904", "DATABASE_DENIED")
        assert SECRET_MARKER not in json.dumps(err.to_envelope()) and "env_dump" not in json.dumps(err.to_envelope())


async def test_secret_columns_are_masked_in_output_as_defense_in_depth(pg_dsn, demo):
    """With query roles off (a misconfiguration) and the SQL tampered, the mask still holds."""
    async with executor_for(pg_dsn, demo, pool_max=2, query_roles=False) as executor:
        q = compile_exploration("explore workloads fields name, cluster limit 3", demo, "analyst")
        assert q.plan.masked == frozenset()  # policy never lets a secret column into a plan's output
        secret = demo.dataset("workloads").column("env_dump")
        bad = dataclasses.replace(q, sql=q.sql.replace('"t0"."cluster" AS', '"t0"."env_dump" AS'),
                                  plan=dataclasses.replace(q.plan, masked=masked_positions([(), (secret,)])))
        out = await executor.run(bad)
        assert out.masked_columns == ["cluster"] and all(row[1] == MASK for row in out.rows)
        assert SECRET_MARKER not in json.dumps(out.rows)


async def test_every_session_setting_is_pinned(pg_dsn, demo):
    settings = Settings(dsn=pg_dsn, pool_max=1)
    pool = await open_pool(pg_dsn, settings)
    try:
        async with pool.connection() as conn:
            cur = conn.cursor()
            await cur.execute("SELECT current_setting('search_path'), current_setting('standard_conforming_strings'), "
                              "current_setting('TimeZone'), current_setting('default_transaction_read_only')")
            assert await cur.fetchone() == ("pg_catalog,pg_temp", "on", "UTC", "on")
            # the budget statement sets the role and timeouts for one transaction only
            await cur.execute(BEGIN)
            await cur.execute(BUDGET + ", set_config('role', $4, true)", ["1234", "500", "2468", "ontoos_q_viewer"])
            await cur.execute("SELECT current_user, current_setting('statement_timeout')")
            assert await cur.fetchone() == ("ontoos_q_viewer", "1234ms")
            await cur.execute(END)
            await cur.execute("SELECT current_user <> 'ontoos_q_viewer'")
            assert (await cur.fetchone())[0]
    finally:
        await pool.close()


async def test_a_second_statement_cannot_ride_along(pg_dsn, demo):
    """Explorations use the extended protocol even without parameters: one statement only."""
    async with executor_for(pg_dsn, demo, pool_max=1, query_roles=False) as executor:
        q = compile_exploration("explore hosts fields hostname limit 1", demo, "analyst")  # no filter, no parent
        assert q.params == ()
        smuggled = dataclasses.replace(q, sql=q.sql + "; SELECT 1")
        with pytest.raises(Exception) as info:
            await executor.run(smuggled)
        assert info.value.type == "internal"


async def test_no_output_ever_carries_a_secret(explorer, demo):
    """Every golden and demo exploration, run for every role: no secret marker anywhere."""
    import yaml

    from ontoos_explore.demo import load_examples

    from ..conftest import CASES

    sources = [c["source"] for c in yaml.safe_load((CASES / "golden.yaml").read_text())]
    examples = load_examples()
    sources += [e["source"] for e in examples["examples"] + examples["refusals"]]
    answered = 0
    for role in demo.roles:
        for source in sources:
            answer = await explorer.explore(source, role)
            answered += answer.ok
            assert SECRET_MARKER not in json.dumps(answer.envelope)
    assert answered > len(sources)
