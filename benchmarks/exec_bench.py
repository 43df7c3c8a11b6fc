"""Execution path: our end-to-end exploration vs psycopg running the same SQL directly.

On the benchmark's embedded PostgreSQL with the demo lakehouse, per case and
interleaved iteration by iteration (so the database's caches and the machine's
noise treat every variant alike):

  direct     psycopg AsyncRawCursor on one autocommit connection (same connect
             options as the pool), execute(final SQL, params, binary=True),
             fetchall(): no transaction wrapper, no cost check, no conversion
  direct_text  the same in text format (psycopg's default) with psycopg's own
             loaders. The yardstick for every ratio is the faster of the two
             for that query: binary wins on timestamps, text on numerics
  executor   Executor.run(compiled): the READ ONLY transaction with budgets and
             SET LOCAL ROLE, the cost check (every demo role has max_cost: the
             planner's estimate for these values, asked once and kept for
             cost_cache_s), limit+1 fetch, JSON-safe rows; compile excluded
  explore    Explorer.explore(text, role): compile (the same text asked again:
             the template cache's table of exact texts) + executor + envelope
  explore_new_values  the same shape with values not seen before: a template
             hit (a cache without the exact-text table: the SQL does not depend
             on the values) and the cost estimate asked again (an Executor with
             cost_cache_s=0)
  explore_cold  every cache off: the whole compile and guard, and the
             EXPLAIN before every query
  explore+audit  Tools.call: the same, plus an audit Event recorded into a
             started AuditWriter (queue + background COPY batches)
  explain    (floor) psycopg running the EXPLAIN the executor sends for a value set
             it has not seen, alone: what `new values` cannot go below, since the
             cost is checked before the query runs
  convert    (floor) rows.json_rows over rows fetched once in text format: the
             JSON-safe reshaping alone
  executor_no_cost  (decomposition) Executor.run with the role's max_cost
             removed: the transaction wrapper without the EXPLAIN round trip
  executor_no_evidence  (decomposition) Executor.run without the plan's
             evidence: READ ONLY instead of REPEATABLE READ, no publish-log
             statement in the pipeline; `evidence_added_ms` is what reading
             the answer's evidence costs (executor minus this)
  compile    (decomposition) compile_exploration alone, timed in the same rotation
             (CPU caches as cold as they are between database round trips)
  compile_cold (decomposition) compile_exploration(cache=None) alone
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import statistics
import time

import psycopg

from ontoos_explore.contract import Contract
from ontoos_explore.engine.executor import EXPLAIN, Executor
from ontoos_explore.engine.pool import CONNECT_OPTIONS, open_pool
from ontoos_explore.engine.rows import json_rows, load_as_text
from ontoos_explore.engine.settings import Settings
from ontoos_explore.pipeline import compile_exploration
from ontoos_explore.server.config import Principal
from ontoos_explore.server.tools import Tools
from ontoos_explore.service import Explorer
from ontoos_explore.templates import TemplateCache

from .common import log, summary_ms

# (id, size, role, exploration). Small: LIMIT 50 from cheap to >= 5 ms of query; large: LIMIT 5000 (admin).
CASES = (
    ("small_scan", "small", "analyst",
     "explore workloads fields name, namespace, kind where namespace = 'prod-fp' limit 50"),
    ("small_join", "small", "analyst",
     "explore workloads via containers fields name, containers.name, containers.cpu_millis "
     "where cluster = 'prod-us-1' and containers.restart_count > 2 limit 50"),
    ("small_in_list", "small", "analyst",
     "explore workloads fields workload_id, name where workload_id in ("
     + ", ".join(str(i) for i in range(7, 7 + 97 * 150, 97)) + ") limit 50"),
    ("small_agg_join", "small", "analyst",
     "explore workloads via containers fields namespace, sum(containers.cpu_millis) as cpu, count() as n "
     "group by namespace order by cpu desc limit 50"),
    ("small_agg_heavy", "small", "analyst",
     "explore table_refs fields access, count() as n, avg(confidence) as conf where confidence > 0.5 "
     "group by access limit 50"),
    ("large_scan", "large", "admin",
     "explore containers fields container_id, name, cpu_millis, memory_mb, started_at limit 5000"),
    ("large_join", "large", "admin",
     "explore tables via database fields table_name, schema_name, row_estimate, size_bytes, database.name, "
     "database.engine where has_pii = false limit 5000"),
    ("large_sorted", "large", "admin",
     "explore archives fields archive_id, commit_sha, language, loc, archived_on order by loc desc limit 5000"),
)

COLD = ("compile_cold", "explore_cold")  # timed in a rotation of their own, with direct again
DIRECT = ("direct", "direct_text")  # every ratio is to the faster of the two
FLOORS = ("explain", "convert")  # parts timed alone: what a variant cannot go below
VARIANTS = ("direct", "direct_text", "explain", "convert", "executor", "executor_no_cost", "executor_no_evidence", "compile", "compile_cold",
            "explore", "explore_new_values", "explore_cold", "explore+audit")


async def _bench(contract: Contract, dsn: str, reps: dict[str, int], cases=CASES, budget_s: float = 25.0) -> dict:
    from ontoos_explore.governance.audit import AuditWriter

    settings = Settings(dsn=dsn, pool_max=4, pool_timeout_s=10)
    pool = await open_pool(dsn, settings)
    await pool.wait(timeout=30)
    executor = Executor(pool, settings)
    explorer = Explorer(contract, executor)
    explaining = Executor(pool, dataclasses.replace(settings, cost_cache_s=0))
    new_values = Explorer(contract, explaining, cache=TemplateCache(exact=False))  # a template hit, as for new values
    cold = Explorer(contract, explaining, cache=None)
    audit = AuditWriter(dsn)
    await audit.start()
    tools = Tools(contract, explorer, None, audit)
    direct = await psycopg.AsyncConnection.connect(dsn, autocommit=True, options=CONNECT_OPTIONS,
                                                   cursor_factory=psycopg.AsyncRawCursor)
    explainer = await psycopg.AsyncConnection.connect(dsn, autocommit=True, options=CONNECT_OPTIONS,
                                                      cursor_factory=psycopg.AsyncRawCursor)
    load_as_text(explainer.adapters)  # as the pool's connections
    out: dict[str, dict] = {}
    try:
        for case_id, size, role, text in cases:
            q = compile_exploration(text, contract, role)
            no_cost = dataclasses.replace(q, plan=dataclasses.replace(q.plan, max_cost=None))
            no_evidence = dataclasses.replace(q, plan=dataclasses.replace(q.plan, evidence=None))
            heavy = any(contract.dataset(d).heavy for d in q.datasets)
            params = list(q.params)
            principal = Principal("bench", role)

            async def v_direct():
                cur = direct.cursor()
                await cur.execute(q.sql, params, binary=True)
                return len(await cur.fetchall())

            async def v_direct_text():
                cur = direct.cursor()
                await cur.execute(q.sql, params)
                return len(await cur.fetchall())

            async def v_explain():
                cur = explainer.cursor()
                await cur.execute(EXPLAIN + q.sql, params)
                return len(await cur.fetchall())

            cur = explainer.cursor()
            await cur.execute(q.sql, params)
            fetched = (await cur.fetchall())[: q.limit]
            oids = [c.type_code for c in cur.description]

            async def v_convert():
                return len(json_rows(fetched, oids, set()))

            async def v_executor():
                return len((await executor.run(q)).rows)

            async def v_executor_no_cost():
                return len((await executor.run(no_cost)).rows)

            async def v_executor_no_evidence():
                return len((await executor.run(no_evidence)).rows)

            async def v_compile():
                return len(compile_exploration(text, contract, role).params)

            async def v_compile_cold():
                return len(compile_exploration(text, contract, role, cache=None).params)

            async def v_explore_new_values():
                a = await new_values.explore(text, role)
                assert a.ok, a.envelope
                return a.envelope["meta"]["rows"]

            async def v_explore_cold():
                a = await cold.explore(text, role)
                assert a.ok, a.envelope
                return a.envelope["meta"]["rows"]

            async def v_explore():
                a = await explorer.explore(text, role)
                assert a.ok, a.envelope
                return a.envelope["meta"]["rows"]

            async def v_explore_audit():
                a = await tools.call("ontoos_explore", {"query": text}, principal, "bench")
                assert a.ok, a.envelope
                return a.envelope["meta"]["rows"]

            fns = {"direct": v_direct, "direct_text": v_direct_text, "explain": v_explain, "convert": v_convert,
                   "executor": v_executor, "executor_no_cost": v_executor_no_cost,
                   "executor_no_evidence": v_executor_no_evidence,
                   "compile": v_compile, "compile_cold": v_compile_cold, "explore": v_explore,
                   "explore_new_values": v_explore_new_values, "explore_cold": v_explore_cold, "explore+audit": v_explore_audit}
            counts = {name: await fn() for name, fn in fns.items()}
            expected = min(q.limit + 1, counts["direct"])
            t_warm = time.perf_counter()
            warm = 8
            for _ in range(warm):  # warm-up: psycopg auto-prepares after 5 executions; caches
                for fn in fns.values():
                    await fn()
            per_iteration = (time.perf_counter() - t_warm) / warm
            n = min(reps[size], max(15, int(budget_s / per_iteration)))  # slow queries get fewer samples
            samples: dict[str, list[float]] = {name: [] for name in [*fns, "direct@cold", "direct_text@cold"]}
            gc.collect()
            gc.freeze()  # as `ontoos serve` does once started: start-up objects out of the collector's way
            clock = time.perf_counter
            # two rotations: the cold variants allocate ~20x more, and their garbage would be collected
            # during whichever variant runs next; each group is compared with direct in its own rotation
            warm_group = [(k, f) for k, f in fns.items() if k not in COLD]
            cold_group = [("direct@cold", v_direct), ("direct_text@cold", v_direct_text)] + [(k, f) for k, f in fns.items() if k in COLD]
            for order in (warm_group, cold_group):
                for i in range(n):
                    for name, fn in order[i % len(order):] + order[: i % len(order)]:  # rotate who goes first
                        t0 = clock()
                        await fn()
                        samples[name].append(clock() - t0)
            gc.unfreeze()
            stats = {name: summary_ms(s) for name, s in samples.items()}
            at = {name: "@cold" if name in COLD else "" for name in fns}
            d = min(stats[v]["p50_ms"] for v in DIRECT)

            def versus(name: str) -> dict:
                base = min(stats[v + at[name]]["p50_ms"] for v in DIRECT)  # psycopg's faster format
                return {"added_ms": round(stats[name]["p50_ms"] - base, 3), "ratio": round(stats[name]["p50_ms"] / base, 3)}

            overhead = {name: versus(name) for name in fns if name not in (*DIRECT, *FLOORS, "compile", "compile_cold")}
            out[case_id] = {
                "size": size, "role": role, "direct_ms": d, "exploration": text, "rows": counts["explore"],
                "direct_rows_fetched": counts["direct"], "limit": q.limit, "heavy": heavy,
                "cost_checked": q.plan.max_cost is not None, "reps": n, "stats": stats,
                "overhead_vs_direct": overhead,
                "audit_added_ms": round(stats["explore+audit"]["p50_ms"] - stats["explore"]["p50_ms"], 3),
                "evidence_added_ms": round(stats["executor"]["p50_ms"] - stats["executor_no_evidence"]["p50_ms"], 3),
            }
            assert counts["direct"] == expected or counts["direct"] <= q.limit + 1
            log(f"    {case_id:16s} direct p50 {d:7.3f} ms  explore {stats['explore']['p50_ms']:7.3f} ms "
                f"(x{overhead['explore']['ratio']:.2f}, +{overhead['explore']['added_ms']:.3f} ms)  "
                f"+audit {stats['explore+audit']['p50_ms']:7.3f} ms  evidence "
                f"{out[case_id]['evidence_added_ms']:+.3f} ms  rows {counts['explore']}")
    finally:
        await direct.close()
        await explainer.close()
        await audit.close()
        await pool.close()
    return {"cases": out, "audit_events_written": audit.written, "audit_events_dropped": audit.dropped}


def summarize(cases: dict) -> dict:
    out = {}
    for size in ("small", "large"):
        group = [c for c in cases.values() if c["size"] == size]
        if not group:
            continue
        out[size] = {
            "cases": len(group),
            "median_ratio_explore": round(statistics.median(c["overhead_vs_direct"]["explore"]["ratio"] for c in group), 3),
            "median_added_ms_explore": round(statistics.median(
                c["overhead_vs_direct"]["explore"]["added_ms"] for c in group), 3),
            "median_ratio_explore_audit": round(statistics.median(
                c["overhead_vs_direct"]["explore+audit"]["ratio"] for c in group), 3),
            "median_audit_added_ms": round(statistics.median(c["audit_added_ms"] for c in group), 3),
            "median_ratio_executor": round(statistics.median(
                c["overhead_vs_direct"]["executor"]["ratio"] for c in group), 3),
            "median_ratio_executor_no_cost": round(statistics.median(
                c["overhead_vs_direct"]["executor_no_cost"]["ratio"] for c in group), 3),
            "median_ratio_explore_new_values": round(statistics.median(
                c["overhead_vs_direct"]["explore_new_values"]["ratio"] for c in group), 3),
            "median_added_ms_explore_new_values": round(statistics.median(
                c["overhead_vs_direct"]["explore_new_values"]["added_ms"] for c in group), 3),
            "median_ratio_explore_cold": round(statistics.median(
                c["overhead_vs_direct"]["explore_cold"]["ratio"] for c in group), 3),
            "median_added_ms_explore_cold": round(statistics.median(
                c["overhead_vs_direct"]["explore_cold"]["added_ms"] for c in group), 3),
            "median_explain_ms": round(statistics.median(c["stats"]["explain"]["p50_ms"] for c in group), 3),
            "median_convert_ms": round(statistics.median(c["stats"]["convert"]["p50_ms"] for c in group), 3),
            "median_cost_check_ms": round(statistics.median(
                c["stats"]["executor"]["p50_ms"] - c["stats"]["executor_no_cost"]["p50_ms"] for c in group), 3),
            "median_compile_ms": round(statistics.median(c["stats"]["compile"]["p50_ms"] for c in group), 3),
            "median_compile_cold_ms": round(statistics.median(c["stats"]["compile_cold"]["p50_ms"] for c in group), 3),
            "median_explore_minus_executor_ms": round(statistics.median(
                c["stats"]["explore"]["p50_ms"] - c["stats"]["executor"]["p50_ms"] for c in group), 3),
        }
    return out


def run(contract: Contract, dsn: str, reps: dict[str, int], cases=CASES, budget_s: float = 25.0) -> dict:
    res = asyncio.run(_bench(contract, dsn, reps, cases, budget_s))
    res["summary"] = summarize(res["cases"])
    return res
