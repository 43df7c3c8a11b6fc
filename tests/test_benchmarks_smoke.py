"""The benchmark suite still runs (a tiny smoke run; benchmarks are not tests: no timing is asserted).

Each section checks its own answers while it runs (the three forms of the corpus agree, a
template-cache hit equals the uncached compile, the executor returns the rows psycopg does),
so a smoke run catches a suite that no longer measures what it says."""

from __future__ import annotations

import os

import pytest

from benchmarks import compile_bench, exec_bench
from benchmarks.corpus import CASES

pytestmark = pytest.mark.anyio


def test_the_compile_section_runs_and_verifies_its_cache_hits(demo):
    cases = [c for c in CASES if c.kind in ("small", "in_list")][:3]
    res = compile_bench.run(demo, reps=3, rounds=1, cases=cases)
    assert res["cases"] == 3
    for case in res["per_case"]:
        stats = case["stats"]
        assert {"parse", "bind", "generate", "guard", "whole", "seen", "sqlglot", "pglast"} <= stats.keys()
        assert all(s["p50_us"] > 0 for s in stats.values())
    assert set(res["seen_over"]) >= {"sqlglot", "pglast"}


def test_the_execution_section_runs_against_the_database(pg_dsn, demo):
    res = exec_bench.run(demo, pg_dsn, {"small": 3, "large": 3}, cases=exec_bench.CASES[:1], budget_s=0.5)
    (case,) = res["cases"].values()
    assert set(case["stats"]) == {*exec_bench.VARIANTS, "direct@cold", "direct_text@cold"}
    assert case["direct_ms"] == min(case["stats"][v]["p50_ms"] for v in exec_bench.DIRECT)
    assert case["rows"] == 50 and res["audit_events_dropped"] == 0
    assert case["evidence_added_ms"] == round(case["stats"]["executor"]["p50_ms"] - case["stats"]["executor_no_evidence"]["p50_ms"], 3)
    assert set(res["summary"]) == {"small"}


def test_the_peers_benchmark_asks_every_contender_the_same_question(demo, tmp_path):
    """Its JSON and text forms compile to the same SQL, and the named-query entries made of that SQL
    load and verify (the guard accepts them), so every contender runs the very same statement."""
    import json

    from benchmarks.mcp_peers import QUESTIONS, compile_all
    from ontoos_explore.governance.registry import Registry
    from ontoos_explore.pipeline import compile_exploration

    compiled = compile_all(demo)
    for q in QUESTIONS:
        as_text = compile_exploration(q.text, demo, "admin", cache=None)
        as_json = compile_exploration(q.form, demo, "admin", cache=None)
        assert as_json.sql == as_text.sql == compiled[q.name].sql and as_json.params == as_text.params, q.name
    path = tmp_path / "queries.yaml"
    path.write_text(json.dumps({"queries": [compiled[q.name].entry for q in QUESTIONS if q.named]}))
    registry = Registry.load(path, demo)
    assert registry.problems == [] and sorted(registry.entries) == sorted(f"bench_{q.name}" for q in QUESTIONS if q.named)


@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat"),
                    reason="this kernel keeps no schedstat (the benchmark then reads the ticks alone)")
def test_mcp_peers_reads_a_blocks_cpu_to_the_nanosecond_unless_a_thread_ended():
    from benchmarks.mcp_peers import cpu_delta, schedstat_seconds

    assert cpu_delta((1.000, 5.00), (1.4071, 5.41)) == pytest.approx(0.4071)  # the ticks agree to a tick
    assert cpu_delta((1.000, 5.00), (1.300, 5.45)) == pytest.approx(0.45)  # 150 ms gone with an ended thread
    spent = schedstat_seconds(os.getpid())
    sum(i * i for i in range(200_000))
    assert schedstat_seconds(os.getpid()) > spent


@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat"),
                    reason="this kernel keeps no schedstat")
def test_mcp_peers_reads_the_cpu_of_a_servers_child_processes_by_their_title():
    """PostgreSQL's CPU at one client is its postmaster's children's, split by the database a backend's
    title names: a child that works is counted under its title, this process's own work is not."""
    import subprocess
    import sys
    import time

    from benchmarks.mcp_peers import children_cpu_s

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\ntime.sleep(30)"
    worker = subprocess.Popen([sys.executable, "-c", burn, "lake"])  # its title holds " lake "
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    titles = {"lake": " lake ", "audit": " audit "}
    try:
        deadline = time.monotonic() + 20
        while children_cpu_s(os.getpid(), titles)["lake"] < 0.3 and time.monotonic() < deadline:
            time.sleep(0.05)
        spent = children_cpu_s(os.getpid(), titles)
        assert 0.3 <= spent["lake"] < 2.0  # the worker's burn (and its start-up)
        assert spent["audit"] == 0.0 and spent["other"] < 0.3  # the idle one's start-up only
        sum(i * i for i in range(2_000_000))  # this process's own work is not its children's
        after = children_cpu_s(os.getpid(), titles)
        assert after["lake"] - spent["lake"] < 0.05 and after["other"] - spent["other"] < 0.05
        assert children_cpu_s(worker.pid) == {"other": 0.0}  # it has no children
    finally:
        for child in (worker, idle):
            child.kill()
            child.wait()


async def test_the_pool_order_benchmark_runs_both_orders_on_the_database(pg_dsn, demo):
    from types import SimpleNamespace

    from benchmarks import pool_order_bench

    lake = SimpleNamespace(dsn=pg_dsn, cpu_s=lambda: {})  # the test database; its CPU is not read here
    res = await pool_order_bench.bench(lake, demo, calls=16, blocks=2)
    assert set(res) == {"scan", "in_list_150"}
    for by_callers in res.values():
        assert set(by_callers) == {"one_caller", "16_callers"}
        for by_order in by_callers.values():
            assert set(by_order) == set(pool_order_bench.ORDERS)
            assert all(r["wall_ms"] > 0 and len(r["blocks"]) == 2 for r in by_order.values())
