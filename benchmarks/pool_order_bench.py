"""Which pooled connection one caller's explorations get: the one returned last, or the one idle longest.

    .venv/bin/python -m benchmarks.pool_order_bench [--scale 25] [--calls 150] [--blocks 8]

Two pools of eight connections on one PostgreSQL of their own (the demo lake on loopback TCP, as in
`mcp_peers.py`): the engine's (`engine.pool.open_pool`, which hands out the connection returned last)
and the same with psycopg_pool's own order (the one idle longest first: a plain deque again). Every
connection of both is used once, then one caller runs `Executor.run` of the same exploration
`--calls` times a block, then 16 callers at once share as many calls (the order cannot matter when
every connection is busy: this says it costs nothing there), the pools' blocks alternating A B B A;
each figure the median over the blocks: the wall time a call (a block's wall over its calls), and
PostgreSQL's CPU a call (its processes', to the nanosecond). Writes
results/pool_order.json and .md. Nothing asserts a timing.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import sys
import time
from collections import deque
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "benchmarks"

from ontoos_explore.contract import load_contract  # noqa: E402
from ontoos_explore.engine.executor import Executor  # noqa: E402
from ontoos_explore.engine.pool import MostRecentFirst, open_pool  # noqa: E402
from ontoos_explore.pipeline import compile_exploration  # noqa: E402
from ontoos_explore.settings import Settings  # noqa: E402

from .common import CONTRACT_PATH, heading, log, stamped, write_results  # noqa: E402
from .mcp_peers import QUESTIONS, Lake  # noqa: E402

POOL = 8
CALLERS = 16  # more than the pool holds: every connection busy, callers waiting for one
ORDERS = ("returned_last", "idle_longest")


async def bench(lake: Lake, contract, calls: int, blocks: int) -> dict:
    settings = dataclasses.replace(Settings(), pool_min=POOL, pool_max=POOL)
    executors = {}
    for order in ORDERS:
        pool = await open_pool(lake.dsn, settings)
        assert isinstance(pool._pool, MostRecentFirst)  # the engine's order, which the other undoes
        if order == "idle_longest":
            pool._pool = deque(pool._pool)
        await pool.wait(timeout=60)
        executors[order] = Executor(pool, settings)
    out = {}
    try:
        for name in ("scan", "in_list_150"):
            q = compile_exploration(next(x for x in QUESTIONS if x.name == name).text, contract, "admin")
            for ex in executors.values():  # every connection prepared, then the caller's warm-up
                await asyncio.gather(*(ex.run(q) for _ in range(POOL)))
                for _ in range(20):
                    await ex.run(q)
            out[name] = {}
            for callers in (1, CALLERS):
                got: dict[str, tuple[list[float], list[float]]] = {o: ([], []) for o in ORDERS}
                for b in range(blocks):
                    for order in (ORDERS if b % 2 == 0 else ORDERS[::-1]):
                        wall, cpu = await _block(executors[order], q, lake, callers, calls)
                        got[order][0].append(wall)
                        got[order][1].append(cpu)
                key = "one_caller" if callers == 1 else f"{callers}_callers"
                out[name][key] = {o: {"wall_ms": round(statistics.median(w), 3),
                                      "postgres_cpu_ms": round(statistics.median(c), 3),
                                      "blocks": [[round(x, 3), round(y, 3)] for x, y in zip(w, c)]}
                                  for o, (w, c) in got.items()}
                for o in ORDERS:
                    r = out[name][key][o]
                    log(f"  {name:12s} {callers:2d} caller(s) {o:13s} {r['wall_ms']:.3f} ms a call (wall / calls), "
                        f"PostgreSQL {r['postgres_cpu_ms']:.3f} ms of CPU")
    finally:
        for ex in executors.values():
            await ex.pool.close()
    return out


async def _block(ex: Executor, q, lake: Lake, callers: int, calls: int) -> tuple[float, float]:
    """`calls` explorations by `callers` at once: (wall ms a call, PostgreSQL's CPU ms a call)."""
    async def caller(n: int) -> None:
        for _ in range(n):
            await ex.run(q)

    cpu0, t0 = sum(lake.cpu_s().values()), time.perf_counter()
    await asyncio.gather(*(caller(calls // callers) for _ in range(callers)))
    n = calls // callers * callers
    return (time.perf_counter() - t0) / n * 1000, (sum(lake.cpu_s().values()) - cpu0) / n * 1000


def markdown(result: dict) -> str:
    lines = [*heading("Which pooled connection one caller gets", result,
                      f"scale {result['scale']:g}, a pool of {POOL}, {result['blocks']} blocks of {result['calls']} calls per order"),
             "| question | callers | order | wall ms a call (the block's wall / its calls) | PostgreSQL CPU ms a call |",
             "|---|---|---|---|---|"]
    for name, by_callers in result["questions"].items():
        for callers, by_order in by_callers.items():
            for order, r in by_order.items():
                lines.append(f"| {name} | {callers.replace('_', ' ')} | {order} | {r['wall_ms']:.3f} | {r['postgres_cpu_ms']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.pool_order_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=25.0)
    p.add_argument("--calls", type=int, default=150)
    p.add_argument("--blocks", type=int, default=8)
    args = p.parse_args(argv)
    contract = load_contract(CONTRACT_PATH)
    log(f"pool_order_bench: the lake at scale {args.scale:g}")
    lake = Lake(contract, args.scale)
    try:
        res = stamped(scale=args.scale, calls=args.calls, blocks=args.blocks,
                      questions=asyncio.run(bench(lake, contract, args.calls, args.blocks)))
    finally:
        lake.close()
    write_results("pool_order", res, markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
