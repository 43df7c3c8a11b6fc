"""What the executor's transaction costs this process per exploration, against the bare statements over psycopg.pq.

    .venv/bin/python -m benchmarks.pipeline_bench [--reps 3000]

A profile of `ontoos serve` on a filtered scan put about half of its CPU in the executor's pipelined
transaction (BEGIN, the budgets, the query, the publish-log read, ROLLBACK) while it went through
psycopg's async pipeline, a cursor each: 482 us a scan here (commit 66dae03). It now goes through
`engine.wire`. Measured on one pooled connection, as the executor configures it, alternating A B B A,
the client's CPU (`time.process_time`) per transaction:

  executor   `Executor._transaction`, the code that answers (`engine.wire.pipeline`, rows reshaped
             by `engine.rows.json_rows`)
  pq         the same five statements, prepared once by name, sent in one libpq pipeline through
             `psycopg.pq` and read with `psycopg.adapt.Transformer` (psycopg's own row loaders), not
             reshaped: the floor of any executor over libpq from Python

Both return the same rows (checked). Writes results/pipeline.json and .md. Nothing asserts a timing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "benchmarks"

from psycopg import pq  # noqa: E402
from psycopg.adapt import PyFormat, Transformer  # noqa: E402

from ontoos_explore.contract import load_contract  # noqa: E402
from ontoos_explore.engine.executor import BEGIN_SNAPSHOT, BUDGET, END, Executor  # noqa: E402
from ontoos_explore.engine.pool import open_pool  # noqa: E402
from ontoos_explore.engine.publish_log import current_batches_sql  # noqa: E402
from ontoos_explore.engine.settings import Settings  # noqa: E402
from ontoos_explore.pipeline import compile_exploration  # noqa: E402

from .common import CONTRACT_PATH, heading, log, stamped, write_results  # noqa: E402
from .db import ensure_database  # noqa: E402

CASES = (
    ("scan", "explore workloads fields name, namespace, kind where namespace = 'prod-fp' limit 50"),
    ("in_list_20", "explore workloads fields name, namespace where name in ("
                   + ", ".join(f"'svc-{i:03d}'" for i in range(20)) + ") limit 50"),
)


class Raw:
    """The transaction's statements over `psycopg.pq` on `conn` (prepared once, one pipeline per call)."""

    def __init__(self, conn, name: str, statements: list[str]) -> None:
        self.conn, self.pg, self.prefix = conn, conn.pgconn, b"bench_" + name.encode()
        self.tx = Transformer(conn)
        self.statements = statements

    async def _ready(self) -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        loop.add_reader(self.pg.socket, lambda: done.done() or done.set_result(None))
        try:
            await done
        finally:
            loop.remove_reader(self.pg.socket)

    async def _results(self, until: pq.ExecStatus | None) -> list[pq.PGresult]:
        out = []
        while self.pg.flush():
            await asyncio.sleep(0)
        while True:
            while self.pg.is_busy():
                await self._ready()
                self.pg.consume_input()
            r = self.pg.get_result()
            if r is None:
                if until is None:
                    return out
                continue
            if r.status == until:
                return out
            out.append(r)

    async def prepare(self) -> None:
        for i, sql in enumerate(self.statements):
            self.pg.send_prepare(self.prefix + b"_%d" % i, sql.encode())
            for r in await self._results(None):
                assert r.status == pq.ExecStatus.COMMAND_OK, r.error_message

    async def run(self, params: list[list]) -> list:
        pg, tx = self.pg, self.tx
        pg.enter_pipeline_mode()
        try:
            for i, values in enumerate(params):
                dumped = [None if v is None else bytes(v)  # psycopg's own dumpers, as text
                          for v in tx.dump_sequence(values, [PyFormat.TEXT] * len(values))]
                pg.send_query_prepared(self.prefix + b"_%d" % i, dumped)
            pg.pipeline_sync()
            results = await self._results(pq.ExecStatus.PIPELINE_SYNC)
        finally:
            pg.exit_pipeline_mode()
        rows = results[2]
        tx.set_pgresult(rows)
        return tx.load_rows(0, rows.ntuples, list)


async def bench(reps: int) -> dict:
    contract = load_contract(CONTRACT_PATH)
    dsn, _ = ensure_database(contract, 1.0, log=log)
    settings = Settings(dsn=dsn, pool_max=1, query_roles=False)
    pool = await open_pool(dsn, settings)
    executor = Executor(pool, settings)
    out: dict = {}
    try:
        async with pool.connection() as conn:
            for case, text in CASES:
                q = compile_exploration(text, contract, "analyst")
                spec = q.plan.evidence
                assert spec is not None and spec.sources, case
                t = q.plan.timeout_ms
                budget = [str(t), str(max(1, min(t // 2, 2000))), str(t * 2)]
                log_sql = current_batches_sql(spec.schema, spec.table, spec.sources)
                raw = Raw(conn, case, [BEGIN_SNAPSHOT, BUDGET, q.sql, log_sql, END])
                await raw.prepare()
                params = [[], budget, list(q.params), [], []]

                async def ours():
                    return (await executor._transaction(conn, q, False, time.perf_counter(), None, 0.0)).rows

                async def floor():
                    return await raw.run(params)

                a, b = await floor(), await ours()
                assert [list(map(str, r)) for r in a[: q.limit]] == [list(map(str, r)) for r in b], case
                for _ in range(300):
                    await ours()
                    await floor()
                cpu = {"executor": [], "pq": []}
                gc.collect()
                gc.disable()
                try:
                    for i in range(reps // 50):
                        for name, fn in (("executor", ours), ("pq", floor)) if i % 2 == 0 else (("pq", floor),
                                                                                              ("executor", ours)):
                            t0 = time.process_time()
                            for _ in range(50):
                                await fn()
                            cpu[name].append((time.process_time() - t0) / 50 * 1e6)
                finally:
                    gc.enable()
                out[case] = {k: round(statistics.median(v), 1) for k, v in cpu.items()}
                out[case]["reps"] = reps
                log(f"pipeline {case:<12} executor {out[case]['executor']:.0f} us  pq {out[case]['pq']:.0f} us "
                    "of client CPU per transaction")
    finally:
        await pool.close()
    return out


def markdown(result: dict) -> str:
    lines = [
        *heading("What the executor's transaction costs per exploration", result,
                 "the bench database at scale 1 (a local socket), one pooled connection"),
        "Client CPU (`time.process_time`) per transaction, median of blocks of 50, alternating; us.",
        "",
        "Before `engine.wire` (commit 66dae03), over psycopg's async pipeline: scan 482, in_list_20 439.",
        "",
        "| case | executor (engine.wire) | the bare statements over psycopg.pq | ratio |",
        "|---|---|---|---|",
    ]
    for case, r in result["cases"].items():
        lines.append(f"| {case} | {r['executor']:.0f} | {r['pq']:.0f} | {r['executor'] / r['pq']:.1f}x |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=3000)
    args = p.parse_args(argv)
    result = stamped(reps=args.reps)
    result["cases"] = asyncio.run(bench(args.reps))
    write_results("pipeline", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
