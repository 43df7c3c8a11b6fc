"""Compile path: parse, bind, generate, guard and the whole, side by side with the alternatives.

Per exploration of the corpus, in one process and interleaved round by round
(so a noisy machine slows every contender alike):

  ours      parse (grammar.parser.parse_text), bind (policy.bind), generate
            (compiler.compile_plan: sqlglot build + generate + fingerprint),
            guard (guard.check on the compiled SQL, allowed_for_role with the
            compiled limit, as pipeline.verify calls it), whole
            (pipeline.compile_exploration with cache=None: a cold shape), seen
            (compile_exploration through a primed templates.TemplateCache
            without its exact-text table, the text alternating with the same
            text with other literal values: a shape already seen), again (the
            very same text, through a default cache: its exact-text table)
  sqlglot   sqlglot.parse_one(hand-written SQL, dialect="postgres") plus a walk
            collecting exp.Column and exp.Table nodes ("restricted raw SQL")
  prqlc     prqlc.compile(PRQL) to PostgreSQL (no formatting, no signature)
  pglast    pglast.parser.parse_sql_json(our final SQL): the floor of the guard
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import statistics
import time
from decimal import Decimal

import pglast.parser
import sqlglot
from sqlglot import exp

from ontoos_explore.allowed import allowed_for_role
from ontoos_explore.compiler import compile_plan
from ontoos_explore.contract import Contract
from ontoos_explore.errors import ExploreError
from ontoos_explore.grammar.parser import parse_text
from ontoos_explore.guard import check
from ontoos_explore.pipeline import compile_exploration
from ontoos_explore.policy import bind
from ontoos_explore.templates import _LITERAL, TemplateCache

from .common import interleaved, log, prql_options, summary_us, us
from .corpus import CASES, KINDS, Case

STAGES = ("parse", "bind", "generate", "guard", "whole")
SEEN = "seen"
AGAIN = "again"  # the very same text again: the exact-text table
ALTERNATIVES = ("sqlglot", "prqlc", "pglast")


def sqlglot_walk(sql: str) -> int:
    tree = sqlglot.parse_one(sql, dialect="postgres")
    found = 0
    for node in tree.walk():
        if isinstance(node, (exp.Column, exp.Table)):
            found += 1
    return found


def mutate(text: str) -> str:
    """The same exploration with other literal values (ints +1, strings suffixed, decimals nudged)."""
    def sub(m):
        tok = m.group()
        if tok[0] in "'\"":
            return tok[:-1] + "z" + tok[-1]
        if tok[0] in "-0123456789":
            return str(Decimal(tok) + Decimal("0.01")) if "." in tok else str(int(tok) + 1)
        return tok  # booleans, limit N
    return _LITERAL.sub(sub, text)


def _variants(text: str, contract: Contract, role: str) -> tuple[itertools.cycle, TemplateCache]:
    """A primed cache, and the texts to ask it in turn: the text and, when it compiles,
    the text with other values (an enum value suffixed does not). Each is checked to
    hit the cache and to give exactly the uncached answer."""
    texts = [text]
    other = mutate(text)
    if other != text:
        try:
            compile_exploration(other, contract, role, cache=None)
            texts.append(other)
        except ExploreError:
            pass
    cache = TemplateCache(exact=False)  # template hits, not the table of texts asked again exactly
    compile_exploration(text, contract, role, cache=cache)
    for t in texts:
        assert compile_exploration(t, contract, role, cache=cache) == compile_exploration(t, contract, role, cache=None)
    assert cache.hits == len(texts), (text, cache.stats())
    return itertools.cycle(texts), cache


def contenders(case: Case, contract: Contract, prql_compile=None) -> dict:
    """The zero-argument functions timed for one case (inputs precomputed, outputs checked once)."""
    role = contract.role(case.role)
    e = parse_text(case.text)
    plan = bind(e, contract, role)
    q = compile_plan(plan)
    allowed = dataclasses.replace(allowed_for_role(contract, role), max_rows=q.limit)
    n_params = len(q.params)
    verdict = check(q.sql, allowed, n_params)
    assert verdict.ok, (case.id, verdict.violations)
    assert compile_exploration(case.text, contract, case.role, cache=None).sql == q.sql
    assert sqlglot_walk(case.sql) > 0
    text, sql, prql, final = case.text, case.sql, case.prql, q.sql
    seen, cache = _variants(text, contract, case.role)
    again = TemplateCache()
    compile_exploration(text, contract, case.role, cache=again)
    assert compile_exploration(text, contract, case.role, cache=again) is compile_exploration(
        text, contract, case.role, cache=again) and again.exact_hits == 2
    fns = {
        "parse": lambda: parse_text(text),
        "bind": lambda: bind(e, contract, role),
        "generate": lambda: compile_plan(plan),
        "guard": lambda: check(final, allowed, n_params),
        "whole": lambda: compile_exploration(text, contract, case.role, cache=None),
        SEEN: lambda: compile_exploration(next(seen), contract, case.role, cache=cache),
        AGAIN: lambda: compile_exploration(text, contract, case.role, cache=again),
        "sqlglot": lambda: sqlglot_walk(sql),
        "pglast": lambda: pglast.parser.parse_sql_json(final),
    }
    if prql_compile is not None:
        prql_compile(prql)
        fns["prqlc"] = lambda: prql_compile(prql)
    return fns


def _median(xs):
    return statistics.median(xs) if xs else float("nan")


def run(contract: Contract, reps: int, rounds: int = 5, cases: list[Case] | None = None) -> dict:
    cases = cases or CASES
    try:
        import prqlc

        opts = prql_options()
        prql_compile = lambda text: prqlc.compile(text, opts)  # noqa: E731
        prql_status = {"available": True, "version": getattr(prqlc, "__version__", None)}
    except ImportError as e:  # reported, not fatal
        prql_compile = None
        prql_status = {"available": False, "error": str(e)}

    per_case: list[dict] = []
    pooled: dict[str, list[int]] = {}
    t_start = time.perf_counter()
    for case in cases:
        fns = contenders(case, contract, prql_compile)
        samples = interleaved(fns, reps, warmup=max(5, reps // 10), rounds=rounds)
        stats = {name: summary_us(s) for name, s in samples.items()}
        for name, s in samples.items():
            pooled.setdefault(name, []).extend(s)
        whole, seen = stats["whole"]["p50_us"], stats[SEEN]["p50_us"]
        ratios = {alt: round(whole / stats[alt]["p50_us"], 3) for alt in ALTERNATIVES if alt in stats}
        seen_ratios = {alt: round(seen / stats[alt]["p50_us"], 3) for alt in ALTERNATIVES if alt in stats}
        per_case.append({
            "id": case.id, "kind": case.kind, "role": case.role, "text_chars": len(case.text),
            "sql_chars": len(case.sql), "stats": stats, "whole_over": ratios, "seen_over": seen_ratios,
            "stage_sum_p50_us": round(sum(stats[s]["p50_us"] for s in STAGES[:-1]), 1),
        })
    elapsed = time.perf_counter() - t_start

    overall = {name: summary_us(s) for name, s in pooled.items()}

    def ratio_summary_of(which: str, ours: str) -> dict:
        out = {}
        for alt in ALTERNATIVES:
            rs = [c[which][alt] for c in per_case if alt in c[which]]
            if rs:
                out[alt] = {
                    "median_of_per_case_ratios": round(_median(rs), 3),
                    "min": round(min(rs), 3), "max": round(max(rs), 3),
                    "ratio_of_pooled_medians": round(overall[ours]["p50_us"] / overall[alt]["p50_us"], 3),
                    "cases_at_most_0_5x": sum(1 for r in rs if r <= 0.5),
                    "cases_at_most_1x": sum(1 for r in rs if r <= 1.0), "cases": len(rs),
                }
        return out

    ratio_summary = ratio_summary_of("whole_over", "whole")
    seen_summary = ratio_summary_of("seen_over", SEEN)
    # The floor under the cold-shape ratio: the required stages, each timed alone in a warm loop
    # (the best case: no glue, caches hot), over sqlglot's parse + walk of the same question.
    floor = {
        name: round(_median([sum(c["stats"][s]["p50_us"] for s in stages) / c["stats"]["sqlglot"]["p50_us"]
                             for c in per_case]), 3)
        for name, stages in (("lark_parse_plus_sqlglot_generate", ("parse", "generate")),
                             ("four_stages_alone", STAGES[:-1]))
    } if per_case and "sqlglot" in per_case[0]["stats"] else {}
    by_kind = {}
    for kind in KINDS:
        group = [c for c in per_case if c["kind"] == kind]
        if not group:
            continue
        by_kind[kind] = {"cases": len(group)} | {
            f"{name}_p50_us": round(_median([c["stats"][name]["p50_us"] for c in group]), 1)
            for name in (*STAGES, SEEN, *ALTERNATIVES) if name in group[0]["stats"]
        } | {
            f"whole_over_{alt}": round(_median([c["whole_over"][alt] for c in group]), 3)
            for alt in ALTERNATIVES if alt in group[0]["whole_over"]
        } | {
            f"seen_over_{alt}": round(_median([c["seen_over"][alt] for c in group]), 3)
            for alt in ALTERNATIVES if alt in group[0]["seen_over"]
        }
    return {
        "reps_per_case": reps, "rounds": rounds, "cases": len(per_case), "elapsed_s": round(elapsed, 1),
        "prqlc": prql_status, "overall": overall, "whole_over": ratio_summary, "seen_over": seen_summary,
        "by_kind": by_kind, "floor_over_sqlglot": floor,
        "per_case": per_case,
    }


def throughput(contract: Contract, seconds: float, cases: list[Case] | None = None) -> dict:
    """Explorations compiled per second on one thread, cycling the corpus, with the garbage collector
    as the service runs it (on), after gc.freeze() (start-up objects out of the collector's way), and
    off; the three modes alternate in short chunks so that they share the machine's noise."""
    cases = cases or CASES
    work = [(c.text, c.role) for c in cases]
    for text, role in work:
        compile_exploration(text, contract, role, cache=None)
    modes = ("gc_on", "gc_freeze", "gc_off")
    done = dict.fromkeys(modes, 0)
    wall = dict.fromkeys(modes, 0.0)
    cpu = dict.fromkeys(modes, 0.0)
    collections = dict.fromkeys(modes, 0)
    chunk = max(0.25, seconds / 3 / 8)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for mode in modes:
            gc.collect()
            if mode == "gc_freeze":
                gc.freeze()
            elif mode == "gc_off":
                gc.disable()
            before = sum(s["collections"] for s in gc.get_stats())
            t0, c0 = time.perf_counter(), time.process_time()
            stop = t0 + chunk
            n = 0
            while time.perf_counter() < stop:
                for text, role in work:
                    compile_exploration(text, contract, role, cache=None)
                n += len(work)
            wall[mode] += time.perf_counter() - t0
            cpu[mode] += time.process_time() - c0
            collections[mode] += sum(s["collections"] for s in gc.get_stats()) - before
            done[mode] += n
            gc.enable()
            gc.unfreeze()
    out = {mode: {"explorations": done[mode], "wall_s": round(wall[mode], 2), "per_s_wall": round(done[mode] / wall[mode], 1),
                  "per_s_cpu": round(done[mode] / cpu[mode], 1) if cpu[mode] else None,
                  "mean_us_wall": us(wall[mode] / done[mode] * 1e9), "gc_collections": collections[mode]}
           for mode in modes}
    return out["gc_on"] | {"modes": out}


def report_lines(res: dict) -> list[str]:
    o = res["overall"]
    lines = [f"  compile path over {res['cases']} cases x {res['reps_per_case']} reps ({res['elapsed_s']} s):"]
    for name in (*STAGES, SEEN, *ALTERNATIVES):
        if name in o:
            lines.append(f"    {name:9s} p50 {o[name]['p50_us']:8.1f} us   p99 {o[name]['p99_us']:8.1f} us")
    for alt, r in res["whole_over"].items():
        lines.append(f"    whole / {alt:8s} median ratio {r['median_of_per_case_ratios']:.2f}x "
                     f"(pooled {r['ratio_of_pooled_medians']:.2f}x, range {r['min']:.2f}-{r['max']:.2f})")
    for alt, r in res["seen_over"].items():
        lines.append(f"    seen  / {alt:8s} median ratio {r['median_of_per_case_ratios']:.3f}x "
                     f"(pooled {r['ratio_of_pooled_medians']:.3f}x, range {r['min']:.3f}-{r['max']:.3f})")
    return lines


if __name__ == "__main__":  # a quick look without the rest of the suite
    from ontoos_explore.contract import load_contract

    from .common import CONTRACT_PATH

    res = run(load_contract(CONTRACT_PATH), reps=30)
    log("\n".join(report_lines(res)))
