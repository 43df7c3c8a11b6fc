"""The benchmark suite still runs (a tiny smoke run; benchmarks are not tests: no timing is asserted).

Each section checks its own answers while it runs (the three forms of the corpus agree, a
template-cache hit equals the uncached compile, the executor returns the rows psycopg does),
so a smoke run catches a suite that no longer measures what it says."""

from __future__ import annotations

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
