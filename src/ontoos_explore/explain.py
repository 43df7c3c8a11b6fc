"""Explain: an exploration or a named query -> the plan an agent can act on, without reading rows.

    await explain(explorer, {"dataset": "workloads", "relations": ["containers"], "fields": [...]}, "analyst")
    await explain(explorer, {"query": "workloads_in_namespace", "params": {"namespace": "prod"}}, "viewer",
                  registry=registry)

The answer names, by contract name only, the datasets read and the relations
followed (cardinality, whether a relation repeats rows, its note), the limit
as asked and as it will apply, the role's budgets, whether the planner's
estimate is within the cost budget (as a class, never the figure: it depends
on rows the caller may not see), and what to change when something is over.
Nothing hidden is shown: no always-filter, no parent the contract joins, no
hidden or secret column, no planner number. A `query` that names a named
query the role may run (an identifier, not the text form, which always
starts with `explore`) is explained as that query with its `params`.
"""

from __future__ import annotations

import re
from typing import Any

from .catalog import role_budget
from .errors import Codes, InputError
from .names import quote_list
from .offload import INLINE_SOURCE, off_loop, source_size
from .pipeline import compile_exploration, parse_source, resolve_role
from .service import cost_class


TEXT_FORM = re.compile(r"\s*explore\s", re.IGNORECASE)  # how every exploration in text form begins


def is_named(source: Any) -> bool:
    """Whether `source` asks to explain a named query: {"query": "<its id>", "params": {...}}. The text
    form always starts with `explore`; a named query's id (any string its registry gives it) does not."""
    if not (isinstance(source, dict) and isinstance(source.get("query"), str) and set(source) <= {"query", "params"}):
        return False
    return TEXT_FORM.match(source["query"]) is None


async def explain(explorer, source: Any, role: str, registry=None) -> dict[str, Any]:
    """The plan of `source` for `role`; raises the refusal running it would get before it reads rows."""
    contract = explorer.contract
    r = resolve_role(contract, role)
    named = is_named(source)
    if named:
        if registry is None:
            raise InputError(Codes.UNKNOWN_QUERY, "there are no named queries", hint="explain an exploration")
        q = registry.compiled(r.name, source["query"], source.get("params"))
        asked_limit = None
    else:
        def work():  # compiled as exploring it would be (the template cache), and its limit as written
            return compile_exploration(source, contract, r, explorer.cache), parse_source(source).limit

        q, asked_limit = await off_loop(work) if source_size(source) > INLINE_SOURCE else work()
    refused = explorer.lake.refusal(q)
    if refused is not None:
        raise refused
    out = await explorer.executor.run(q, dry_run=True)
    within = q.plan.max_cost is None or (out.cost or 0.0) <= q.plan.max_cost
    relations = []
    for name in q.relations:
        rel = contract.relation(name)
        relations.append({"name": rel.name, "from": rel.from_, "to": rel.to, "cardinality": rel.cardinality,
                          "repeats_rows": rel.fans_out, **({"note": rel.note} if rel.note else {})})
    clamped = asked_limit is not None and asked_limit > q.limit
    advice = _advice(q, contract, relations, within, clamped)
    return {
        "kind": "named_query" if named else "exploration",
        **({"query": source["query"]} if named else {}),
        "datasets": [{"name": d, "heavy": contract.dataset(d).heavy,
                      "filtered_by_contract": bool(contract.dataset(d).always_filter or contract.dataset(d).exists_with)}
                     for d in q.datasets],
        "relations": relations,
        "columns": list(q.columns),
        "limit": {"asked": asked_limit, "applied": q.limit, "clamped": clamped},
        "budgets": role_budget(r),
        "cost": {"class": cost_class(out.cost, q.plan.max_cost), "within_budget": within},
        "timeout_ms": q.plan.timeout_ms,
        "notes": list(q.notes),
        "advice": advice,
    }


def _advice(q, contract, relations: list[dict], within: bool, clamped: bool) -> list[str]:
    """What to change: each line an action the caller can take."""
    out = []
    if not within:
        useful = q.plan.hint_columns(q.datasets[0])
        out.append(f"over the cost budget: filter {q.datasets[0]}"
                   + (f" (e.g. on {quote_list(useful)})" if useful else "") + ", follow fewer relations, or lower the limit")
    for rel in relations:
        if rel["repeats_rows"]:
            out.append(f"{rel['name']} is {rel['cardinality']}: each {rel['from']} row repeats once per {rel['to']} "
                       "row; aggregate (count(), group by) to get one row per " + rel["from"])
    if clamped:
        out.append(f"the limit is lowered to {q.limit}, the row budget: filter or aggregate to see the rest")
    heavy = [d for d in q.datasets if contract.dataset(d).heavy]
    if heavy:
        out.append(f"{quote_list(heavy)} {'is' if len(heavy) == 1 else 'are'} heavy: keep a selective filter")
    return out or ["nothing to change: it runs within every budget"]

