"""results/*.json -> the short markdown tables (results/latest.md)."""

from __future__ import annotations


def _f(x, nd=1, unit=""):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.{nd}f}{unit}"
    return f"{x:,}{unit}" if isinstance(x, int) else f"{x}{unit}"


def _table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out + [""]


def markdown(res: dict) -> str:
    m = res["meta"]
    mc = m["machine"]
    v = m["versions"]
    lines = [
        f"# ontoos-explore benchmarks ({m['mode']})",
        "",
        f"{m['date']}, {mc.get('cpu_count')} CPUs ({mc.get('cpu_model', '?')}), Python {mc.get('python')}, "
        f"load average {mc.get('loadavg_start')} at start and {mc.get('loadavg_end')} at the end, "
        f"{m.get('elapsed_s', '?')} s. sqlglot {v.get('sqlglot')}, pglast {v.get('pglast')}, lark {v.get('lark')}, "
        f"psycopg {v.get('psycopg')}, prqlc {v.get('prqlc') or 'not installed'}, mcp {v.get('mcp')}. "
        f"Commit {m['git'].get('commit', '')[:10]}"
        + (f" with uncommitted changes in {', '.join(f.split()[-1] for f in m['git']['src_modified_files'])}"
           if m["git"].get("src_modified_files") else "")
        + ".",
        "",
        f"**{m['note']}.** Every figure is in latest.json; this is the summary.",
        "",
    ]
    if "database" in res:
        d = res["database"]
        lines += [f"Demo lakehouse at scale {d['scale']:g}: {d['total_rows']:,} rows, PostgreSQL {d['server_version']} "
                  f"(embedded, pgserver).", ""]
    if "corpus" in res:
        c = res["corpus"]
        lines += [f"Corpus: {c['cases']} explorations ({', '.join(f'{k} {n}' for k, n in c['kinds'].items())}); "
                  f"the exploration, the hand-written SQL and the PRQL "
                  f"{'return the same rows on every case' if not c['disagreements'] else 'DISAGREE: ' + '; '.join(c['disagreements'])}.",
                  ""]

    if "compile" in res:
        c = res["compile"]
        o = c["overall"]
        lines += ["## Compile path (per exploration, one thread)", "",
                  f"{c['cases']} explorations x {c['reps_per_case']} timings each, interleaved; "
                  "p50/p99 over all timings of the corpus.", ""]
        names = [("parse", "parse (Lark)"), ("bind", "bind (policy)"), ("generate", "generate (sqlglot + fingerprint)"),
                 ("guard", "guard (pglast + walk)"), ("whole", "**whole compile_exploration, cold shape**"),
                 ("seen", "**shape already seen (template cache hit, other values)**"),
                 ("again", "the same text asked again (exact-text table)"),
                 ("sqlglot", "sqlglot.parse_one(hand SQL) + walk"), ("prqlc", "prqlc.compile(PRQL)"),
                 ("pglast", "pglast parse_sql_json(final SQL)")]
        lines += _table(["stage", "p50 us", "p99 us"],
                        [[label, _f(o[n]["p50_us"]), _f(o[n]["p99_us"])] for n, label in names if n in o])
        rows = []
        for alt, r in c["whole_over"].items():
            rows.append([alt, f"{r['median_of_per_case_ratios']:.2f}x", f"{r['ratio_of_pooled_medians']:.2f}x",
                         f"{r['min']:.2f}-{r['max']:.2f}", f"{r['cases_at_most_1x']}/{r['cases']}"])
        for alt, r in c.get("seen_over", {}).items():
            rows.append([f"{alt}, shape already seen", f"{r['median_of_per_case_ratios']:.3f}x",
                         f"{r['ratio_of_pooled_medians']:.3f}x", f"{r['min']:.3f}-{r['max']:.3f}",
                         f"{r['cases_at_most_1x']}/{r['cases']} ({r['cases_at_most_0_5x']} <= 0.5x)"])
        lines += ["Our whole pipeline as a ratio to each alternative (per exploration, same question):", ""]
        lines += _table(["alternative", "median ratio", "ratio of pooled medians", "range", "cases <= 1.0x"], rows)
        floor = c.get("floor_over_sqlglot") or {}
        if floor:
            lines += [f"The floor under the cold-shape ratio (median over the corpus; each stage timed alone in "
                      f"a warm loop, no glue): Lark's parse plus sqlglot's generation, both required, "
                      f"**{floor['lark_parse_plus_sqlglot_generate']:.2f}x** sqlglot's parse + walk; the four "
                      f"stages summed **{floor['four_stages_alone']:.2f}x**.", ""]
        if not c["prqlc"]["available"]:
            lines += [f"prqlc could not be imported: {c['prqlc'].get('error')}", ""]
        kinds = c["by_kind"]
        hdr = ["shape", "cases", "parse", "bind", "generate", "guard", "whole", "seen", "sqlglot", "prqlc",
               "whole/sqlglot", "seen/sqlglot", "whole/prqlc"]
        lines += ["By shape (median over the shape's explorations of each p50, us):", ""]
        lines += _table(hdr, [[k, r["cases"], _f(r.get("parse_p50_us")), _f(r.get("bind_p50_us")),
                               _f(r.get("generate_p50_us")), _f(r.get("guard_p50_us")), _f(r.get("whole_p50_us")),
                               _f(r.get("seen_p50_us")), _f(r.get("sqlglot_p50_us")), _f(r.get("prqlc_p50_us")),
                               _f(r.get("whole_over_sqlglot"), 2, "x"), _f(r.get("seen_over_sqlglot"), 3, "x"),
                               _f(r.get("whole_over_prqlc"), 2, "x")]
                              for k, r in kinds.items()])
    if "throughput" in res:
        t = res["throughput"]
        lines += [f"Throughput, compile_exploration cycling the corpus on one thread (gc on): "
                  f"**{t['per_s_wall']:,.0f} explorations/s** ({t['mean_us_wall']:.0f} us each; "
                  f"{t['per_s_cpu']:,.0f}/s of CPU time). Garbage collector: "
                  + ", ".join(f"{k} {m['per_s_wall']:,.0f}/s ({m['gc_collections']} collections)"
                              for k, m in t.get("modes", {}).items()) + ".", ""]

    if "execution" in res:
        e = res["execution"]
        lines += ["## Execution path (embedded PostgreSQL, demo lakehouse)", "",
                  "direct: psycopg AsyncRawCursor, same SQL and params, autocommit, no transaction, in binary and "
                  "in text format (psycopg's own loaders); every ratio is to the faster of the two; EXPLAIN alone: "
                  "psycopg running the cost check's EXPLAIN by itself (the floor under new values); convert alone: "
                  "rows.json_rows over rows already fetched; executor: "
                  "Executor.run (READ ONLY transaction, budgets, SET LOCAL ROLE, the shape's cost estimate, JSON-safe "
                  "rows); explore: Explorer.explore (compile through the template cache + executor + envelope), "
                  "the same exploration again; new values: the same shape with values not seen before (template "
                  "hit, EXPLAIN again); cold: every cache off (whole compile and guard, EXPLAIN); +audit: "
                  "Tools.explore with a running AuditWriter. p50 in ms.", ""]
        rows = []
        for cid, r in e["cases"].items():
            s = r["stats"]
            od = r["overhead_vs_direct"]
            rows.append([cid, r["size"], r["rows"], _f(s["direct"]["p50_ms"], 3),
                         _f(s["direct_text"]["p50_ms"], 3) if "direct_text" in s else "",
                         _f(s["explain"]["p50_ms"], 3) if "explain" in s else "",
                         _f(s["convert"]["p50_ms"], 3) if "convert" in s else "", _f(s["executor_no_cost"]["p50_ms"], 3),
                         _f(s["executor"]["p50_ms"], 3), _f(s["explore"]["p50_ms"], 3),
                         _f(s["explore_new_values"]["p50_ms"], 3),
                         _f(s["explore_cold"]["p50_ms"], 3), _f(s["explore+audit"]["p50_ms"], 3),
                         f"{od['explore']['ratio']:.2f}x, {od['explore']['added_ms']:+.3f}",
                         f"{od['explore_new_values']['ratio']:.2f}x, {od['explore_new_values']['added_ms']:+.3f}",
                         f"{od['explore_cold']['ratio']:.2f}x, {od['explore_cold']['added_ms']:+.3f}",
                         f"{r['audit_added_ms']:+.3f}", r["reps"]])
        lines += _table(["case", "size", "rows", "direct binary", "direct text", "EXPLAIN alone", "convert alone",
                         "executor w/o cost check", "executor", "explore",
                         "new values", "cold", "explore+audit", "explore/direct, added ms",
                         "new values/direct, added ms", "cold/direct, added ms", "audit ms", "n"], rows)
        for size, s in e["summary"].items():
            lines.append(f"- {size}: explore/direct median **{s['median_ratio_explore']:.2f}x** "
                         f"({s['median_added_ms_explore']:+.3f} ms); new values {s['median_ratio_explore_new_values']:.2f}x "
                         f"({s['median_added_ms_explore_new_values']:+.3f} ms); cold {s['median_ratio_explore_cold']:.2f}x "
                         f"({s['median_added_ms_explore_cold']:+.3f} ms); executor alone {s['median_ratio_executor']:.2f}x, "
                         f"without the cost check {s['median_ratio_executor_no_cost']:.2f}x. Medians: compile "
                         f"{s['median_compile_ms']:.3f} ms seen, {s['median_compile_cold_ms']:.3f} ms cold (its own rotation); "
                         f"explore minus executor {s['median_explore_minus_executor_ms']:.3f} ms; cost check "
                         f"{s['median_cost_check_ms']:+.3f} ms; audit adds {s['median_audit_added_ms']:+.3f} ms"
                         + (f"; floors: EXPLAIN alone {s['median_explain_ms']:.3f} ms, JSON-safe rows alone "
                            f"{s['median_convert_ms']:.3f} ms." if "median_explain_ms" in s else "."))
        lines.append(f"- audit events written by the benchmark's AuditWriter: {e.get('audit_events_written')} "
                     f"(dropped {e.get('audit_events_dropped')}).")
        lines.append("")

    if "server" in res:
        s = res["server"]
        lines += ["## Server path (ontoos serve --http, loopback)", "",
                  f"`{s['command']}` against the same database (audit on), one analyst token; each client sends "
                  f"its requests one after another on its own keep-alive connection. Exploration: "
                  f"`{s['exploration']}`. MCP protocol {s.get('protocol_version')}.", ""]
        rows = []
        for key, label in (("rest_c1", "REST POST /api/v1/explore"), ("rest_c16", "REST POST /api/v1/explore"),
                           ("mcp_c1", "MCP tools/call ontoos_explore"), ("mcp_c16", "MCP tools/call ontoos_explore")):
            if key in s:
                r = s[key]
                rows.append([label, r["clients"], r["requests"], _f(r["p50_ms"], 2), _f(r["p99_ms"], 2),
                             _f(r["req_per_s"], 1), _f(r.get("server_cpu_ms_per_req"), 2)])
        lines += _table(["surface", "clients", "requests", "p50 ms", "p99 ms", "req/s", "server CPU ms/req"], rows)
        lines += [f"Memory of the server process (VmRSS): {_f((s.get('rss_kb_idle') or 0) / 1024, 1)} MiB idle, "
                  f"{_f((s.get('rss_kb_after_warmup') or 0) / 1024, 1)} MiB after warm-up, "
                  f"{_f((s.get('rss_kb_after_load') or 0) / 1024, 1)} MiB after the load. Ready in {s.get('ready_s')} s.",
                  ""]

    if "scaling" in res:
        sc = res["scaling"]
        c = sc["contract"]
        lines += ["## Scaling", "", "Contract size (steady compile interleaved across sizes; us):", ""]
        rows = []
        for r in c["rows"]:
            cold = r.get("first_compile_src_s")
            cold_txt = f"{cold:.3f} s" if cold is not None else (
                f"~{c['first_compile_src_quadratic_extrapolation_s'].get(str(r['datasets']))} s (extrapolated)"
                if c.get("first_compile_src_quadratic_extrapolation_s") else "-")
            rows.append([r["datasets"], _f(r["parse_contract_s"], 2), cold_txt, _f(r["allowed_indexed_ms"], 1),
                         _f(r["steady"]["whole"]), _f(r["steady"]["bind"]), _f(r["steady"]["guard"]),
                         f"{r['steady_whole_vs_smallest']:.3f}x"])
        lines += _table(["datasets", "load contract s", "first compile (src)", "allowed set indexed ms",
                         "steady whole", "bind", "guard", "whole vs smallest"], rows)
        lines += [f"Steady compile deviation across sizes: at most {c['max_deviation_steady_whole'] * 100:.1f}%.", ""]
        y = sc.get("contract_yaml_loader")
        if y:
            lines += [f"YAML compose of a {y['datasets']}-dataset contract: SafeLoader {y['safe_loader_compose_s']} s, "
                      f"CSafeLoader {y.get('csafe_loader_compose_s')} s.", ""]
        ex = sc["exploration"]
        for axis, label in (("predicates", "predicates"), ("relations", "relations followed"),
                            ("in_list", "values in one IN list")):
            rows = [[r["n"], r["sql_chars"], _f(r["parse"]["p50_us"]), _f(r["bind"]["p50_us"]),
                     _f(r["generate"]["p50_us"]), _f(r["guard"]["p50_us"]), _f(r["whole"]["p50_us"]),
                     _f(r["sqlglot_of_compiled"]["p50_us"]), _f(r["whole"]["p50_us"] / r["sqlglot_of_compiled"]["p50_us"], 2, "x")]
                    for r in ex[axis]]
            lines += [f"Exploration growth, {label} (p50 us):", ""]
            lines += _table([axis, "SQL chars", "parse", "bind", "generate", "guard", "whole",
                             "sqlglot parse of the SQL", "whole/sqlglot"], rows)

    if "profile" in res:
        p = res["profile"]["compile"]
        lines += ["## Where the compile time goes (cProfile self time by area)", ""]
        lines += _table(["area", "share"], [[a["area"], f"{a['share'] * 100:.1f}%"] for a in p["areas"][:12]])
        if p.get("pyinstrument"):
            lines += [f"Call tree: {p['pyinstrument']}.", ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m benchmarks.report [results/latest.json]: rewrite the markdown
    import json
    import sys
    from pathlib import Path

    path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "results" / "latest.json")
    path.with_suffix(".md").write_text(markdown(json.loads(path.read_text(encoding="utf-8"))), encoding="utf-8")
    print(f"wrote {path.with_suffix('.md')}")
