"""Scaling: compile time as the contract grows, and as the exploration grows.

Contract growth: synthetic contracts of 10 to 10,000 datasets (8 typed columns
each, one a secret; a chain of relations d_i -> d_{i+1}; one read set with
every dataset; a role reading it), written as YAML text and loaded with
contract.parse_contract. Per size: the YAML load, the first compile (cold:
it builds the role's allowed set, cached on the contract), and the steady
compile of four fixed explorations (near the start, the middle and the end of
the chain). Steady compile must stay flat.

The first compile builds the role's allowed set (`allowed.allowed_for_scope`).
Up to commit d3d172b that looped over every relation for every dataset in
scope (quadratic: 23.6 s at 3,000 datasets, minutes at 10,000); afc9191 indexes
relations by dataset. `allowed_indexed()` below is the prototype that showed
the fix, still checked equal to src's allowed set at every size; above
`cold_src_max` datasets the run prefills the contract's cache with it instead
of timing src's first compile (for trees where that is still quadratic).

Exploration growth, on a chain contract of 17 datasets whose role may follow
16 relations, use 1,000 predicates and 1,000-value lists: predicates 1 to 200
(a mix of =, !=, <, between, like, in, is null, not), relations 0 to 16, and
in-lists of 1 to 1,000 values. sqlglot parsing the compiled SQL (plus the walk)
is reported alongside as the reference.
"""

from __future__ import annotations

import dataclasses
import gc
import time

import pglast.parser

from ontoos_explore.allowed import allowed_for_role
from ontoos_explore.compiler import compile_plan
from ontoos_explore.contract import Contract, parse_contract
from ontoos_explore.grammar.parser import parse_text
from ontoos_explore.guard import AllowedSet, check
from ontoos_explore.names import fold
from ontoos_explore.pipeline import compile_exploration
from ontoos_explore.policy import bind

from .common import interleaved, log, rss_kb, summary_us
from .compile_bench import sqlglot_walk

COLUMNS = (
    "      id:         {type: integer}\n"
    "      parent_id:  {type: integer}\n"
    "      name:       {type: text}\n"
    "      kind:       {type: enum, values: [a, b, c]}\n"
    "      size:       {type: integer}\n"
    "      created_at: {type: timestamp}\n"
    "      flag:       {type: boolean}\n"
    "      token:      {type: text, secret: true}\n"
)


def contract_text(n: int, max_relations: int = 2, max_predicates: int = 50, max_in_list: int = 200) -> str:
    """A synthetic contract of n datasets chained by n-1 relations, as YAML text."""
    out = ["version: 1\ndatasets:\n"]
    for i in range(n):
        out.append(f"  d{i}:\n    relation: s{i // 1000}.t{i}\n    columns:\n{COLUMNS}")
    out.append("relations:\n")
    for i in range(n - 1):
        out.append(f"  r{i}: {{from: d{i}, to: d{i + 1}, join: {{id: parent_id}}, cardinality: one_to_many}}\n")
    out.append("read_sets:\n  everything:\n")
    out.extend(f"    - d{i}\n" for i in range(n))
    out.append(f"roles:\n  wide:\n    read_sets: [everything]\n    max_rows: 1000\n    max_relations: {max_relations}\n"
               f"    max_fields: 100\n    max_predicates: {max_predicates}\n    max_in_list: {max_in_list}\n"
               f"    max_literal_length: 1000\n")
    return "".join(out)


def allowed_indexed(contract: Contract, scope: frozenset[str], max_rows: int | None) -> AllowedSet:
    """The allowed set of allowed.allowed_for_scope, with the relations indexed by dataset once:
    O(datasets + relations) instead of O(datasets x relations). The suggested fix, as a prototype."""
    touching: dict[str, list[tuple]] = {}
    for rel in contract.relations.values():
        f, t = fold(rel.from_), fold(rel.to)
        if f in scope and t in scope:
            touching.setdefault(f, []).append((rel, "from"))
            touching.setdefault(t, []).append((rel, "to"))
    relations: dict[tuple[str, str], frozenset[str]] = {}
    for ds in contract.datasets.values():
        key_ds = fold(ds.name)
        if key_ds not in scope:
            continue
        cols = {c.name for c in ds.readable_columns()}
        cols |= {ds.column(f.column).name for f in ds.always_filter}
        for rel, side in touching.get(key_ds, ()):
            if side == "from":
                cols |= {ds.column(c).name for c in rel.join}
            else:
                cols |= {ds.column(c).name for c in rel.join.values()}
        key = (ds.schema_name, ds.table_name)
        relations[key] = relations.get(key, frozenset()) | frozenset(cols)
    return AllowedSet(relations, max_rows)


def _explorations(n: int) -> list[str]:
    mid, last = n // 2, n - 2
    return [
        "explore d0 fields name, size where kind = 'a' and size > 10 limit 50",
        "explore d0 via r0 fields name, r0.name, r0.size where r0.flag = true order by name limit 20",
        f"explore d{mid} fields kind, count() as n, sum(size) as s where created_at >= '2025-01-01' "
        "group by kind order by n desc limit 10",
        f"explore d{last} via r{last} fields name, r{last}.kind where id in (1, 2, 3, 4, 5) limit 50",
    ]


def _stages(contract: Contract, text: str, role: str, reps: int, with_reference: bool = False) -> dict:
    role_ = contract.role(role)
    e = parse_text(text)
    plan = bind(e, contract, role_)
    q = compile_plan(plan)
    allowed = dataclasses.replace(allowed_for_role(contract, role_), max_rows=q.limit)
    assert check(q.sql, allowed, len(q.params)).ok
    fns = {
        "parse": lambda: parse_text(text),
        "bind": lambda: bind(e, contract, role_),
        "generate": lambda: compile_plan(plan),
        "guard": lambda: check(q.sql, allowed, len(q.params)),
        "whole": lambda: compile_exploration(text, contract, role, cache=None),
    }
    if with_reference:
        fns["sqlglot_of_compiled"] = lambda: sqlglot_walk(q.sql)
        fns["pglast"] = lambda: pglast.parser.parse_sql_json(q.sql)
    samples = interleaved(fns, reps, warmup=max(3, reps // 10), rounds=3)
    out = {name: summary_us(s) for name, s in samples.items()}
    out["sql_chars"] = len(q.sql)
    out["params"] = len(q.params)
    return out


# ---------------------------------------------------------------- contract growth


def contract_growth(sizes: list[int], reps: int, cold_src_max: int) -> dict:
    """Build every size first, then time the steady compile of all sizes interleaved round by round,
    so that the machine's noise cannot pass for a trend."""
    rows, contracts = [], {}
    for n in sizes:
        gc.collect()
        rss0 = rss_kb_self()
        t0 = time.perf_counter()
        text = contract_text(n)
        t1 = time.perf_counter()
        contract = parse_contract(text, source=f"<synthetic {n}>")
        t2 = time.perf_counter()
        rss1 = rss_kb_self()
        role = contract.role("wide")
        scope = contract.scope(role)
        t3 = time.perf_counter()
        fast = allowed_indexed(contract, scope, role.max_rows)
        indexed_s = time.perf_counter() - t3
        row = {"datasets": n, "relations": n - 1, "yaml_chars": len(text), "generate_s": round(t1 - t0, 3),
               "parse_contract_s": round(t2 - t1, 3), "contract_rss_kb": (rss1 - rss0) if rss0 and rss1 else None,
               "allowed_indexed_ms": round(indexed_s * 1000, 2)}
        texts = _explorations(n)
        if n <= cold_src_max:
            t4 = time.perf_counter()
            compile_exploration(texts[0], contract, "wide", cache=None)  # builds the allowed set (src)
            row["first_compile_src_s"] = round(time.perf_counter() - t4, 3)
            src = contract.derived[("allowed", "wide")]
            row["indexed_equals_src"] = dict(src.relations) == dict(fast.relations)
        else:
            contract.derived[("allowed", "wide")] = fast
            t4 = time.perf_counter()
            compile_exploration(texts[0], contract, "wide", cache=None)
            row["first_compile_prefilled_s"] = round(time.perf_counter() - t4, 4)
        for t in texts:  # every exploration compiles, and the guard accepts it
            _stages(contract, t, "wide", 1)
        contracts[n] = (contract, texts)
        rows.append(row)
        log(f"    contract {n:6d} datasets: load {row['parse_contract_s']:6.2f} s, first compile "
            f"{row.get('first_compile_src_s', row.get('first_compile_prefilled_s'))} s"
            f"{'' if n <= cold_src_max else ' (allowed set prefilled with the indexed prototype)'}")
        del text
    # steady state, all sizes interleaved: whole, and the two stages that read the contract
    fns = {}
    for n, (contract, texts) in contracts.items():
        role_ = contract.role("wide")
        for i, text in enumerate(texts):
            e = parse_text(text)
            q = compile_exploration(text, contract, "wide", cache=None)
            allowed = dataclasses.replace(allowed_for_role(contract, role_), max_rows=q.limit)
            fns[(n, i, "whole")] = (lambda t=text, c=contract: compile_exploration(t, c, "wide", cache=None))
            fns[(n, i, "bind")] = (lambda e=e, c=contract, r=role_: bind(e, c, r))
            fns[(n, i, "guard")] = (lambda s=q.sql, a=allowed, k=len(q.params): check(s, a, k))
    samples = interleaved(fns, reps, warmup=max(3, reps // 10), rounds=10)
    for row in rows:
        n = row["datasets"]
        k = len(contracts[n][1])
        row["steady"] = {stage: round(sum(summary_us(samples[(n, i, stage)])["p50_us"] for i in range(k)) / k, 1)
                         for stage in ("whole", "bind", "guard")}
        row["steady_whole_p99_us"] = round(sum(summary_us(samples[(n, i, "whole")])["p99_us"] for i in range(k)) / k, 1)
    base = rows[0]["steady"]["whole"]
    for row in rows:
        row["steady_whole_vs_smallest"] = round(row["steady"]["whole"] / base, 3)
        log(f"    contract {row['datasets']:6d} datasets: steady whole {row['steady']['whole']:7.1f} us "
            f"(x{row['steady_whole_vs_smallest']:.3f} of the smallest), bind {row['steady']['bind']:.1f} us, "
            f"guard {row['steady']['guard']:.1f} us")
    cold = [(r["datasets"], r["first_compile_src_s"]) for r in rows if "first_compile_src_s" in r]
    extrapolated = None
    if cold and cold[-1][0] >= 1000:
        (n1, s1) = cold[-1]
        extrapolated = {str(n): round(s1 * (n / n1) ** 2, 1) for n in sizes if n > n1}
    contracts.clear()
    gc.collect()
    return {"rows": rows, "max_deviation_steady_whole": round(max(abs(r["steady_whole_vs_smallest"] - 1) for r in rows), 3),
            "cold_src_max": cold_src_max, "first_compile_src_quadratic_extrapolation_s": extrapolated}


def rss_kb_self() -> int | None:
    import os

    return rss_kb(os.getpid())


# ---------------------------------------------------------------- exploration growth

PREDICATE_MIX = (
    lambda i: f"size > {i}",
    lambda i: f"name != 'n{i}'",
    lambda i: f"id between {i} and {i + 100}",
    lambda i: f"name like 'x{i}%'",
    lambda i: "kind in ('a', 'b')",
    lambda i: f"created_at >= '2024-01-{i % 28 + 1:02d}'",
    lambda i: "parent_id is not null",
    lambda i: "not (flag = true)",
)


def exploration_growth(reps: int, predicates: list[int], relations: list[int], in_lists: list[int]) -> dict:
    chain = max(relations)
    contract = parse_contract(contract_text(chain + 1, max_relations=chain, max_predicates=1000, max_in_list=1000),
                              source="<chain>")
    out: dict[str, list] = {"predicates": [], "relations": [], "in_list": []}
    for k in predicates:
        where = " and ".join(PREDICATE_MIX[i % len(PREDICATE_MIX)](i) for i in range(k))
        text = f"explore d0 fields name, size where {where} limit 50"
        out["predicates"].append({"n": k, "text_chars": len(text)} | _stages(contract, text, "wide", reps, True))
    for k in relations:
        via = f" via {', '.join(f'r{i}' for i in range(k))}" if k else ""
        last = f"r{k - 1}." if k else ""
        text = f"explore d0{via} fields name, {last}name as last_name where {last}size > 1 limit 50"
        out["relations"].append({"n": k, "text_chars": len(text)} | _stages(contract, text, "wide", reps, True))
    for k in in_lists:
        values = ", ".join(str(7 * i + 1) for i in range(k))
        text = f"explore d0 fields name, size where id in ({values}) limit 50"
        out["in_list"].append({"n": k, "text_chars": len(text)} | _stages(contract, text, "wide", reps, True))
    for axis, rows in out.items():
        log(f"    {axis:10s} " + "  ".join(
            f"{r['n']}: {r['whole']['p50_us']:.0f} us (sqlglot {r['sqlglot_of_compiled']['p50_us']:.0f})" for r in rows))
    return out


def yaml_loaders(n: int) -> dict:
    """contract._load_yaml composes with the pure-Python SafeLoader; CSafeLoader (libyaml) keeps the marks too."""
    import yaml

    text = contract_text(n)
    t0 = time.perf_counter()
    yaml.compose(text, Loader=yaml.SafeLoader)
    t1 = time.perf_counter()
    out = {"datasets": n, "safe_loader_compose_s": round(t1 - t0, 3)}
    if getattr(yaml, "__with_libyaml__", False):
        node = yaml.compose(text, Loader=yaml.CSafeLoader)
        t2 = time.perf_counter()
        yaml.compose(text, Loader=yaml.CSafeLoader)
        out["csafe_loader_compose_s"] = round(time.perf_counter() - t2, 3)
        out["csafe_marks"] = node.start_mark is not None
    log(f"    yaml compose of {n} datasets: SafeLoader {out['safe_loader_compose_s']} s, "
        f"CSafeLoader {out.get('csafe_loader_compose_s')} s")
    return out
