"""What an answer's evidence costs: the same answer with and without it, strictly alternating.

    .venv/bin/python -m benchmarks.evidence_bench [--scale 1] [--reps 3000]

Per case, one compiled exploration is answered through `Explorer.run_compiled`
(the whole answer after compilation: the drift check, `Executor.run`, the
envelope with `meta.evidence` rendered) in two forms that differ only in the
plan's evidence: with it (REPEATABLE READ, the publish-log statement in the
query's pipeline, the batches parsed and rendered) and without it (READ ONLY,
no statement, the evidence rendered as unknown). The two alternate A B B A so
the database's caches and the machine's drift treat both alike; the figure is
the median of the paired differences (each A against the B beside it), next
to the medians of each. The cost check is off in both (it is the same in
both, and would only add noise). Writes results/evidence.json and evidence.md.
Nothing asserts a timing.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "benchmarks"

from ontoos_explore.contract import load_contract  # noqa: E402
from ontoos_explore.engine.executor import Executor  # noqa: E402
from ontoos_explore.engine.pool import open_pool  # noqa: E402
from ontoos_explore.engine.settings import Settings  # noqa: E402
from ontoos_explore.pipeline import compile_exploration  # noqa: E402
from ontoos_explore.service import Explorer  # noqa: E402

from .common import CONTRACT_PATH, heading, log, stamped, write_results  # noqa: E402
from .db import ensure_database  # noqa: E402

CASES = (
    ("small_scan", "analyst", "explore workloads fields name, namespace, kind where namespace = 'prod-fp' limit 50"),
    ("small_join", "analyst", "explore workloads via containers fields name, containers.name "
                              "where cluster = 'prod-us-1' and containers.restart_count > 2 limit 50"),
    ("three_sources", "viewer", "explore images fields repository, tag limit 50"),  # registry, archiver, gitlab
)


async def bench(scale: float, reps: int) -> dict:
    contract = load_contract(CONTRACT_PATH)
    dsn, _ = ensure_database(contract, scale, log=log)
    settings = Settings(dsn=dsn, pool_max=2)
    pool = await open_pool(dsn, settings)
    await pool.wait(timeout=30)
    explorer = Explorer(contract, Executor(pool, settings))
    out: dict = {}
    try:
        for case, role, text in CASES:
            q = compile_exploration(text, contract, role)
            q = dataclasses.replace(q, plan=dataclasses.replace(q.plan, max_cost=None))
            bare = dataclasses.replace(q, plan=dataclasses.replace(q.plan, evidence=None))
            assert q.plan.evidence is not None and q.plan.evidence.sources, case
            for _ in range(200):  # warm: prepared statements, the caches
                await explorer.run_compiled(q)
                await explorer.run_compiled(bare)
            with_, without, paired = [], [], []
            gc.collect()
            gc.disable()
            try:
                for i in range(reps):
                    order = (q, bare) if i % 2 == 0 else (bare, q)
                    took = {}
                    for which in order:
                        t0 = time.perf_counter()
                        answer = await explorer.run_compiled(which)
                        took[which is q] = time.perf_counter() - t0
                        assert answer.ok
                    with_.append(took[True])
                    without.append(took[False])
                    paired.append(took[True] - took[False])
            finally:
                gc.enable()
            ev = (await explorer.run_compiled(q)).envelope["meta"]["evidence"]
            out[case] = {
                "role": role, "sources": list(q.plan.evidence.sources), "reps": reps,
                "with_p50_ms": round(statistics.median(with_) * 1000, 4),
                "without_p50_ms": round(statistics.median(without) * 1000, 4),
                "added_p50_ms": round(statistics.median(paired) * 1000, 4),
                "added_mean_ms": round(statistics.mean(paired) * 1000, 4),
                "consistency": ev["consistency"], "freshness_class": ev["freshness"]["class"],
            }
            log(f"evidence {case:<14} with {out[case]['with_p50_ms']:.3f} ms  without "
                f"{out[case]['without_p50_ms']:.3f} ms  added (paired median) {out[case]['added_p50_ms']:+.4f} ms")
    finally:
        await pool.close()
    return out


def markdown(result: dict) -> str:
    lines = [
        *heading("What an answer's evidence costs", result,
                 f"demo scale {result['scale']}, {result['reps']} pairs per case"),
        "The same compiled answer through `Explorer.run_compiled`, with the plan's evidence and without it, "
        "alternating A B B A; added = the median of the paired differences. p50 in ms.",
        "",
        "| case | role | sources | with | without | added (paired median) | added (mean) | consistency |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case, r in result["cases"].items():
        lines.append(f"| {case} | {r['role']} | {', '.join(r['sources'])} | {r['with_p50_ms']:.3f} | "
                     f"{r['without_p50_ms']:.3f} | {r['added_p50_ms']:+.4f} | {r['added_mean_ms']:+.4f} | "
                     f"{r['consistency']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--reps", type=int, default=3000)
    args = p.parse_args(argv)
    result = stamped(scale=args.scale, reps=args.reps)
    result["cases"] = asyncio.run(bench(args.scale, args.reps))
    write_results("evidence", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
