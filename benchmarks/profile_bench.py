"""Where the time goes: cProfile over the compile path (and the execution path), grouped by area.

cProfile's own overhead inflates small Python calls, so the shares are a map,
not a measurement; the timed figures are in compile_bench. With
pyinstrument installed (the `bench` extra), a statistical call tree of the
compile path is written next to the results as profile_compile.txt.
"""

from __future__ import annotations

import asyncio
import collections
import cProfile
import pstats

from ontoos_explore.contract import Contract
from ontoos_explore.pipeline import compile_exploration

from .common import RESULTS
from .corpus import CASES

AREAS = (  # (substring of the file path, area); first match wins
    ("lark/", "lark (parse: LALR + lexer)"),
    ("grammar/parser.py", "grammar/parser.py (IR transformer)"),
    ("grammar/", "grammar (forms, limits)"),
    ("sqlglot/", "sqlglot (build + generate)"),
    ("compiler/sqlgen.py", "compiler/sqlgen.py (tree building)"),
    ("compiler/fingerprint.py", "compiler/fingerprint.py (shape, normalized)"),
    ("compiler/", "compiler (other)"),
    ("guard/", "guard (walk + checks)"),
    ("json/", "json (guard: loads of the parse tree)"),
    ("pydantic", "pydantic (IR models, private attrs)"),
    ("policy/", "policy (bind rules, scope)"),
    ("contract/", "contract (lookups)"),
    ("names.py", "names.py (fold)"),
    ("types.py", "types.py (literal conversion)"),
    ("psycopg", "psycopg"),
    ("asyncio", "asyncio"),
    ("engine/rows.py", "engine/rows.py (JSON-safe rows)"),
    ("engine/", "engine (executor)"),
    ("ontoos_explore", "ontoos_explore (other)"),
)
BUILTIN_AREAS = (
    ("pglast", "pglast.parse_sql_json (libpg_query, C)"),
    ("parse_sql_json", "pglast.parse_sql_json (libpg_query, C)"),
    ("validate_python", "pydantic (IR models, private attrs)"),
)


def _area(filename: str, func: str) -> str:
    if filename == "~":
        for key, area in BUILTIN_AREAS:
            if key in func:
                return area
        return "builtins (isinstance, dict.get, list ops, ...)"
    for key, area in AREAS:
        if key in filename:
            return area
    return "other"


def by_area(stats: pstats.Stats) -> tuple[list[dict], list[dict]]:
    areas: collections.Counter = collections.Counter()
    funcs = []
    total = 0.0
    for (filename, line, func), (cc, nc, tt, ct, callers) in stats.stats.items():
        areas[_area(filename, func)] += tt
        total += tt
        funcs.append((tt, ct, nc, filename, line, func))
    area_rows = [{"area": a, "share": round(t / total, 3)} for a, t in areas.most_common()]
    funcs.sort(reverse=True)
    top = []
    for tt, ct, nc, filename, line, func in funcs[:25]:
        short = filename.split("site-packages/")[-1].split("src/")[-1]
        top.append({"function": f"{short}:{line}({func})", "self_share": round(tt / total, 3),
                    "cum_share": round(ct / total, 3), "calls": nc})
    return area_rows, top


def compile_profile(contract: Contract, loops: int, tree_path=None) -> dict:
    work = [(c.text, c.role) for c in CASES]
    for text, role in work:
        compile_exploration(text, contract, role, cache=None)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(loops):
        for text, role in work:
            compile_exploration(text, contract, role, cache=None)
    prof.disable()
    areas, top = by_area(pstats.Stats(prof))
    out = {"loops": loops, "explorations": loops * len(work), "areas": areas, "top_functions": top}
    try:
        from pyinstrument import Profiler

        p = Profiler(interval=0.0002)
        p.start()
        for _ in range(loops):
            for text, role in work:
                compile_exploration(text, contract, role, cache=None)
        p.stop()
        path = tree_path or RESULTS / "profile_compile.txt"
        path.write_text(p.output_text(unicode=False, color=False, show_all=False), encoding="utf-8")
        out["pyinstrument"] = str(path.relative_to(RESULTS.parent.parent))
    except ImportError:
        out["pyinstrument"] = None
    return out


def exec_profile(contract: Contract, dsn: str, loops: int) -> dict:
    """cProfile of Explorer.explore for a small and a large result (the client side only)."""
    from ontoos_explore.engine.executor import Executor
    from ontoos_explore.engine.pool import open_pool
    from ontoos_explore.engine.settings import Settings
    from ontoos_explore.service import Explorer

    from .exec_bench import CASES as EXEC_CASES

    chosen = [c for c in EXEC_CASES if c[0] in ("small_scan", "large_scan")]

    async def go() -> dict:
        settings = Settings(dsn=dsn, pool_max=2)
        pool = await open_pool(dsn, settings)
        await pool.wait(timeout=30)
        explorer = Explorer(contract, Executor(pool, settings))
        out = {}
        try:
            for case_id, _, role, text in chosen:
                for _ in range(10):
                    await explorer.explore(text, role)
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(loops):
                    await explorer.explore(text, role)
                prof.disable()
                areas, top = by_area(pstats.Stats(prof))
                out[case_id] = {"loops": loops, "areas": areas[:12], "top_functions": top[:12]}
        finally:
            await pool.close()
        return out

    return asyncio.run(go())
