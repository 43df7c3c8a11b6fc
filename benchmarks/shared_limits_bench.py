"""What limits shared across processes cost a call: `Admission` with and without its `SharedLimits`.

    .venv/bin/python -m benchmarks.shared_limits_bench [--reps 5000]

A tool call takes its rate limit (`Admission.admit`) and, when it queries,
an in-flight slot with it, held while it runs and given back after
(`Admission.running`). Both are timed here on this process's own limits and
on the shared ones (an upsert of a bucket row and an advisory lock in one
statement; the lock given back in a second, which the call's answer does not
wait for and the timing leaves out), on the bench database as the state
database, alternating A B B A; added = the median of the paired differences. Writes results/shared_limits.json and .md. Nothing
asserts a timing.
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

from ontoos_explore.contract import load_contract  # noqa: E402
from ontoos_explore.server.admission import Admission  # noqa: E402
from ontoos_explore.server.config import Principal, RateLimit  # noqa: E402
from ontoos_explore.server.shared_limits import SharedLimits  # noqa: E402

from .common import CONTRACT_PATH, heading, log, stamped, write_results  # noqa: E402
from .db import ensure_database  # noqa: E402

PRINCIPAL = Principal("bench", "analyst", rate=RateLimit(per_second=1e9, burst=1_000_000, unit="second"),
                      max_in_flight=4)


async def _take(admission: Admission) -> None:
    """A call that reads nothing: its rate limit."""
    ticket = await admission.admit(PRINCIPAL)
    assert ticket.wait_s == 0.0
    admission.done(ticket)


async def _query(admission: Admission) -> None:
    """A call that queries: its rate limit and a slot, held while it runs, then given back."""
    ticket = await admission.admit(PRINCIPAL, querying=True)
    async with admission.running(ticket):
        pass


async def _settle(admission: Admission) -> None:
    """Untimed: the slot given back reaches the database before the next call (as it does between calls)."""
    await admission.settled()


async def bench(reps: int) -> dict:
    dsn, _ = ensure_database(load_contract(CONTRACT_PATH), 1.0, log=log)
    shared = SharedLimits(dsn)
    local, across = Admission(), Admission(shared=shared)
    out = {}
    try:
        for case, step in (("rate_limit", _take), ("querying_call", _query)):
            for _ in range(300):
                await step(local)
                await step(across)
            a, b, paired = [], [], []
            gc.collect()
            gc.disable()
            try:
                for i in range(reps):
                    took = {}
                    for which in ((across, local) if i % 2 == 0 else (local, across)):
                        t0 = time.perf_counter()
                        await step(which)
                        took[which is across] = time.perf_counter() - t0
                        await _settle(which)
                    a.append(took[True])
                    b.append(took[False])
                    paired.append(took[True] - took[False])
            finally:
                gc.enable()
            q = statistics.quantiles(a, n=100)
            out[case] = {"shared_p50_ms": round(statistics.median(a) * 1000, 4), "shared_p99_ms": round(q[98] * 1000, 4),
                         "local_p50_ms": round(statistics.median(b) * 1000, 4),
                         "added_p50_ms": round(statistics.median(paired) * 1000, 4), "reps": reps}
            log(f"shared limits {case:<15} shared {out[case]['shared_p50_ms']:.4f} ms (p99 {out[case]['shared_p99_ms']:.4f})"
                f"  local {out[case]['local_p50_ms']:.4f} ms  added {out[case]['added_p50_ms']:+.4f} ms")
    finally:
        await shared.close()
    return out


def markdown(result: dict) -> str:
    lines = [
        *heading("What limits shared across processes cost a call", result,
                 f"{result['reps']} pairs per case; the state database is the bench database (a local socket)"),
        "`Admission` on its own process's limits and on `SharedLimits`, alternating A B B A; ms.",
        "",
        "| step | shared p50 | shared p99 | local p50 | added (paired median) |",
        "|---|---|---|---|---|",
    ]
    for case, r in result["cases"].items():
        lines.append(f"| {case} | {r['shared_p50_ms']:.4f} | {r['shared_p99_ms']:.4f} | {r['local_p50_ms']:.4f} | "
                     f"{r['added_p50_ms']:+.4f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5000)
    args = p.parse_args(argv)
    result = stamped(reps=args.reps)
    result["cases"] = asyncio.run(bench(args.reps))
    write_results("shared_limits", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
