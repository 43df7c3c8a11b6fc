"""The benchmark suite, one command: `.venv/bin/python -m benchmarks.run [--quick]`.

Runs, in one process and in this order: the corpus check (the three forms of
every exploration agree on the demo lakehouse), the compile path against the
alternatives, compile throughput, the execution path, the server path, the
scaling runs, the what-ifs (suggested fixes, prototyped without touching src/)
and a profile. Writes results/latest.json (every figure) and results/latest.md
(the short tables); --quick writes results/quick.json and quick.md instead, so
a smoke run never overwrites the full figures.

Benchmarks are not tests: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/run.py`: make the package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "benchmarks"

from benchmarks import compile_bench, exec_bench, profile_bench, scaling, server_bench  # noqa: E402
from benchmarks.common import CONTRACT_PATH, RESULTS, ROOT, log, machine, versions  # noqa: E402
from benchmarks.corpus import CASES, verify as verify_corpus  # noqa: E402
from benchmarks.db import DATA, ensure_database  # noqa: E402
from benchmarks.report import markdown  # noqa: E402

SECTIONS = ("corpus", "compile", "throughput", "exec", "server", "scaling", "profile")

FULL = {
    "scale": 25.0,
    "compile_reps": 300, "compile_rounds": 5,
    "throughput_s": 15.0,
    "exec_reps": {"small": 300, "large": 150}, "exec_budget_s": 25.0,
    "server": {"warmup": 50, "single": 500, "per_client_16": 60},
    "contract_sizes": [10, 100, 1000, 3000, 10000], "cold_src_max": 10000, "contract_reps": 200,
    "predicates": [1, 2, 5, 10, 20, 50, 100, 200], "relations": [0, 1, 2, 4, 8, 16], "in_lists": [1, 10, 100, 1000],
    "growth_reps": 100,
    "profile_loops": 20, "exec_profile_loops": 200,
}
QUICK = {
    "scale": 1.0,
    "compile_reps": 20, "compile_rounds": 2,
    "throughput_s": 1.0,
    "exec_reps": {"small": 10, "large": 5}, "exec_budget_s": 3.0,
    "server": {"warmup": 10, "single": 20, "per_client_16": 3},
    "contract_sizes": [10, 100, 300], "cold_src_max": 300, "contract_reps": 20,
    "predicates": [1, 10, 50, 200], "relations": [0, 1, 4, 16], "in_lists": [1, 100, 1000],
    "growth_reps": 10,
    "profile_loops": 2, "exec_profile_loops": 20,
}


def _git() -> dict:
    def run(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    dirty = run("status", "--porcelain", "--", "src", "contracts", "pyproject.toml")
    return {"commit": run("rev-parse", "HEAD"), "src_modified_files": dirty.splitlines() if dirty else []}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sample counts, demo scale 1: a smoke check (~1-2 min)")
    ap.add_argument("--scale", type=float, help="demo lakehouse scale (default: 25, or 1 with --quick)")
    ap.add_argument("--only", help=f"comma-separated sections to run, of: {', '.join(SECTIONS)}")
    ap.add_argument("--out", help="result file stem under benchmarks/results (default: latest, or quick)")
    args = ap.parse_args(argv)

    cfg = dict(QUICK if args.quick else FULL)
    if args.scale is not None:
        cfg["scale"] = args.scale
    only = set(SECTIONS) if not args.only else {s.strip() for s in args.only.split(",")}
    unknown = only - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections: {', '.join(sorted(unknown))}")
    stem = args.out or ("quick" if args.quick else "latest")
    RESULTS.mkdir(parents=True, exist_ok=True)

    from ontoos_explore.contract import load_contract

    contract = load_contract(CONTRACT_PATH)
    started = time.perf_counter()
    res: dict = {
        "meta": {
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "mode": "quick" if args.quick else "full", "sections": sorted(only), "config": cfg,
            "machine": machine(), "versions": versions(), "git": _git(),
            "note": "figures from a shared 2-core machine with other test suites running; compare ratios "
                    "measured in the same run, not absolute times across runs",
        },
    }
    log(f"ontoos-explore benchmarks ({res['meta']['mode']}, scale {cfg['scale']:g}, {len(CASES)} corpus cases, "
        f"{res['meta']['machine']['cpu_count']} cpus, load {res['meta']['machine'].get('loadavg_start')})")

    def save() -> None:
        res["meta"]["elapsed_s"] = round(time.perf_counter() - started, 1)
        try:
            res["meta"]["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        except OSError:
            pass
        tmp = RESULTS / f"{stem}.json.tmp"
        tmp.write_text(json.dumps(res, indent=1, default=str) + "\n", encoding="utf-8")
        tmp.replace(RESULTS / f"{stem}.json")
        (RESULTS / f"{stem}.md").write_text(markdown(res), encoding="utf-8")

    dsn = None
    if only & {"corpus", "exec", "server", "profile"}:
        log(f"- database: the demo lakehouse at scale {cfg['scale']:g} under {DATA.relative_to(ROOT)}")
        dsn, res["database"] = ensure_database(contract, cfg["scale"], log=log)
        log(f"  {res['database']['total_rows']:,} rows, PostgreSQL {res['database']['server_version']}")

    if "corpus" in only:
        log("- corpus: the three forms agree (on the loaded lakehouse)")
        problems = verify_corpus(dsn)
        res["corpus"] = {"cases": len(CASES), "kinds": {k: sum(1 for c in CASES if c.kind == k)
                                                        for k in sorted({c.kind for c in CASES})},
                         "disagreements": problems}
        log(f"  {len(CASES)} cases: {'all agree' if not problems else problems}")

    if "compile" in only:
        log(f"- compile path: {len(CASES)} explorations x {cfg['compile_reps']} reps, interleaved")
        res["compile"] = compile_bench.run(contract, cfg["compile_reps"], cfg["compile_rounds"])
        log("\n".join(compile_bench.report_lines(res["compile"])))
        save()

    if "throughput" in only:
        log(f"- throughput: compile_exploration over the corpus for {cfg['throughput_s']:g} s on one thread")
        res["throughput"] = compile_bench.throughput(contract, cfg["throughput_s"])
        log(f"  {res['throughput']['per_s_wall']:.0f} explorations/s (wall), {res['throughput']['per_s_cpu']} /s (cpu)")

    if "exec" in only:
        log(f"- execution path at scale {cfg['scale']:g}: direct psycopg vs executor vs explore (+audit)")
        res["execution"] = exec_bench.run(contract, dsn, cfg["exec_reps"], budget_s=cfg["exec_budget_s"])
        for size, s in res["execution"]["summary"].items():
            log(f"  {size}: explore/direct median x{s['median_ratio_explore']:.2f} "
                f"(+{s['median_added_ms_explore']:.2f} ms); audit adds {s['median_audit_added_ms']:+.3f} ms")
        save()

    if "server" in only:
        log("- server path: ontoos serve --http (subprocess), REST and MCP, 1 and 16 clients")
        res["server"] = server_bench.run(dsn, DATA / "serve", cfg["server"])
        save()

    if "scaling" in only:
        log(f"- scaling: contracts of {cfg['contract_sizes']} datasets")
        res["scaling"] = {"contract": scaling.contract_growth(cfg["contract_sizes"], cfg["contract_reps"],
                                                              cfg["cold_src_max"])}
        log("- scaling: explorations growing (predicates, relations, in-list values)")
        res["scaling"]["exploration"] = scaling.exploration_growth(cfg["growth_reps"], cfg["predicates"],
                                                                   cfg["relations"], cfg["in_lists"])
        res["scaling"]["contract_yaml_loader"] = scaling.yaml_loaders(cfg["contract_sizes"][-2])
        save()

    if "profile" in only:
        log("- profile: cProfile (and pyinstrument) over the compile path and the execution path")
        tree = RESULTS / ("profile_compile.txt" if stem == "latest" else f"{stem}.profile_compile.txt")
        res["profile"] = {"compile": profile_bench.compile_profile(contract, cfg["profile_loops"], tree)}
        if dsn is not None:
            res["profile"]["execution"] = profile_bench.exec_profile(contract, dsn, cfg["exec_profile_loops"])

    save()
    log(f"wrote {(RESULTS / f'{stem}.json').relative_to(ROOT)} and {(RESULTS / f'{stem}.md').relative_to(ROOT)} "
        f"in {res['meta']['elapsed_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
