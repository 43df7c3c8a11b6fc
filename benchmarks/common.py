"""Shared helpers: paths, the timing loop, statistics, and the PRQL options."""

from __future__ import annotations

import gc
import math
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONTRACT_PATH = ROOT / "contracts" / "demo.yaml"
RESULTS = Path(__file__).resolve().parent / "results"


def prql_options():
    import prqlc

    # no pretty-printing and no signature comment: the cheapest compile prqlc offers
    return prqlc.CompileOptions(format=False, target="sql.postgres", signature_comment=False)


def us(ns: float) -> float:
    return round(ns / 1000.0, 1)


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, math.ceil(p / 100.0 * len(sorted_values)) - 1))
    return sorted_values[k]


def summary_us(samples_ns: list[int]) -> dict[str, float]:
    """median, p99, mean and min of nanosecond samples, in microseconds."""
    s = sorted(samples_ns)
    return {
        "p50_us": us(statistics.median(s)),
        "p99_us": us(percentile(s, 99)),
        "mean_us": us(statistics.fmean(s)),
        "min_us": us(s[0]),
        "n": len(s),
    }


def summary_ms(samples_s: list[float]) -> dict[str, float]:
    s = sorted(samples_s)
    return {
        "p50_ms": round(statistics.median(s) * 1000, 3),
        "p99_ms": round(percentile(s, 99) * 1000, 3),
        "mean_ms": round(statistics.fmean(s) * 1000, 3),
        "min_ms": round(s[0] * 1000, 3),
        "n": len(s),
    }


def sample(fn: Callable[[], object], reps: int, warmup: int = 20, no_gc: bool = True) -> list[int]:
    """`reps` timings of fn() in ns (perf_counter_ns), after `warmup` untimed calls; gc off while timing."""
    for _ in range(warmup):
        fn()
    clock = time.perf_counter_ns
    out = [0] * reps
    enabled = gc.isenabled()
    if no_gc:
        gc.collect()
        gc.disable()
    try:
        for i in range(reps):
            t0 = clock()
            fn()
            out[i] = clock() - t0
    finally:
        if no_gc and enabled:
            gc.enable()
    return out


def interleaved(fns: dict[str, Callable[[], object]], reps: int, warmup: int = 20, rounds: int = 5,
                no_gc: bool = True) -> dict[str, list[int]]:
    """Sample several functions in alternating rounds, so that a noisy machine slows them alike.

    One gc.collect() before, gc disabled for the whole block (a collection per sample call
    would cost more than the work measured)."""
    out: dict[str, list[int]] = {k: [] for k in fns}
    per_round = max(1, reps // rounds)
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
    enabled = gc.isenabled()
    if no_gc:
        gc.collect()
        gc.disable()
    try:
        for _ in range(rounds):
            for name, fn in fns.items():
                out[name].extend(sample(fn, per_round, warmup=0, no_gc=False))
    finally:
        if no_gc and enabled:
            gc.enable()
    return out


def machine() -> dict:
    import platform

    info = {
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
    }
    try:
        info["loadavg_start"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["mem_total_kb"] = int(line.split()[1])
                break
    except OSError:
        pass
    return info


def versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {}
    for dist in ("ontoos-explore", "sqlglot", "sqlglotc", "pglast", "psycopg", "psycopg-binary", "psycopg-pool",
                 "lark", "pydantic", "pydantic-core", "mcp", "httpx2", "starlette", "uvicorn", "pgserver", "prqlc",
                 "pyinstrument", "PyYAML"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def stamped(**fields) -> dict:
    """A result's head: when, on what machine, with which versions, at which commit (and `fields`)."""
    import datetime as dt
    import subprocess

    commit = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
            "versions": versions(), **fields, "commit": commit}


def heading(title: str, result: dict, detail: str) -> list[str]:
    """A results page's first lines: its title, and when, where and at which commit (then `detail`)."""
    m = result["machine"]
    return [f"# {title}", "",
            f"{result['date']}, {m.get('cpu_count')} CPUs, Python {m.get('python')}, load average "
            f"{m.get('loadavg_start')} at start, {detail}, commit {result.get('commit', '')}.", ""]


def write_results(name: str, result: dict, markdown: str) -> None:
    """results/NAME.json and results/NAME.md."""
    import json

    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown)


def rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def log(msg: str) -> None:
    print(msg, flush=True)
