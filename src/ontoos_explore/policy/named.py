"""Policy stage, named queries: a registry entry's SQL + Contract (+ role) -> verified reads, `Plan`, values.

A named query is hand-written SQL, so the binder never sees it; the same
rules still hold, through the same functions (`policy.plans`):

- `verify_named`: the guard checks the SQL against the entry's read sets
  and row budget; then a column callers may not read (`may_read`) appears
  only in WHERE and FROM (a filter or a join, as the contract itself uses
  it), and every dataset read carries each of its `always_filters`;
- `plan_named`: the plan a role runs it with (`plan_for`: the row, time and
  cost budgets, and masked output positions from the guard's per-item
  columns);
- `bind_named`: the caller's parameters, converted as the binder converts
  literals (`types.convert`) and held to the role's `max_literal_length`.

The entry is any object with the registry's `NamedQuery` fields; this module
does not import the registry (policy comes before governance).
"""

from __future__ import annotations

from typing import Any

from ..allowed import allowed_for_read_sets
from ..contract import Contract, Dataset, Role
from ..errors import BudgetError, Codes, ExploreError, InputError
from ..guard import Verdict, check
from ..names import did_you_mean, fold
from ..plan import Plan
from ..types import LiteralTypeError, a, convert, python_kind
from .plans import always_filters, may_read, plan_for

FILTER_OR_JOIN = ("whereClause", "fromClause")


class NamedQueryInvalid(ValueError):
    """A registry entry the policy refuses (reported, and the entry skipped, when the registry loads)."""


def verify_named(entry: Any, contract: Contract) -> tuple[tuple[str, ...], tuple[tuple[tuple[str, str], ...], ...]]:
    """(the datasets the SQL reads, per output position the (dataset, column) pairs it reads), or
    NamedQueryInvalid with the first problem."""
    known = {fold(k) for k in contract.read_sets}
    missing = [s for s in entry.read_sets if fold(s) not in known]
    if missing:
        raise NamedQueryInvalid(f"read set '{missing[0]}' is not in the contract")
    names = {p.name for p in entry.parameters}
    unknown = sorted(b for b in entry.bind if isinstance(b, str) and b not in names)
    if unknown:
        raise NamedQueryInvalid(f"bind names unknown parameter '{unknown[0]}'")
    verdict = check(entry.sql, allowed_for_read_sets(contract, entry.read_sets, entry.max_rows), len(entry.bind))
    if not verdict.ok:
        raise NamedQueryInvalid("the guard refused its SQL: "
                                + "; ".join(f"{v.kind}: {v.message}" for v in verdict.violations))
    if len(verdict.targets) != len(entry.columns):
        raise NamedQueryInvalid(f"it declares {len(entry.columns)} columns but its SELECT list has "
                                f"{len(verdict.targets)}")
    by_table = {(d.schema_name, d.table_name): d for d in contract.datasets.values()}
    _readable_where_read(verdict, by_table)
    _always_filtered(verdict, by_table)
    datasets = tuple(sorted(by_table[t].name for t in verdict.relations))
    sources = tuple(tuple(sorted((by_table[(s, t)].name, c) for s, t, c in item)) for item in verdict.targets)
    return datasets, sources


def _readable_where_read(verdict: Verdict, by_table: dict[tuple[str, str], Dataset]) -> None:
    """The hidden/secret-column rule on SQL: such a column may filter or join, never be output or sorted.

    The guard allows join and always-filter columns (the compiler needs them);
    a hand-written query could select them."""
    for clause, schema, table, column in sorted(verdict.placed):
        if not may_read(by_table[(schema, table)].column(column)) and clause not in FILTER_OR_JOIN:
            raise NamedQueryInvalid(f"{schema}.{table}.{column} is not readable: it may only filter or join, "
                                    f"not appear in {clause}")


def _always_filtered(verdict: Verdict, by_table: dict[tuple[str, str], Dataset]) -> None:
    """Every dataset read keeps its always-filters, or the query reads the rows the contract hides."""
    filtered = {(s, t, c) for clause, s, t, c in verdict.placed if clause == "whereClause"}
    for key in sorted(verdict.relations):
        ds = by_table[key]
        for col, rule in always_filters(ds):
            if (*key, col.name) not in filtered:
                raise NamedQueryInvalid(f"it reads {ds.name} without the contract's always-filter on {rule.column}")


def plan_named(entry: Any, contract: Contract, role: Role) -> Plan:
    """The plan `role` runs a verified entry with: the smaller row and time budgets of the two."""
    datasets = [contract.dataset(d) for d in entry.datasets]
    sources = [[contract.dataset(d).column(c) for d, c in item] for item in entry.sources]
    timeout = min(role.timeout_ms, entry.timeout_ms or role.timeout_ms)
    return plan_for(contract, role, datasets, min(role.max_rows, entry.max_rows), timeout, sources)


def _signature(entry: Any) -> str:
    return ", ".join(f"{p.name}: {p.type}{'' if p.required else ' (optional)'}" for p in entry.parameters) or "none"


def bind_named(entry: Any, params: Any, role: Role) -> list[Any]:
    """The caller's parameters, checked and converted as the binder converts literals, in `$n` order;
    text values are held to the role's `max_literal_length`, like literals."""
    if not isinstance(params, dict):
        raise InputError(Codes.INVALID_REQUEST, "params must be an object",
                         hint=f'e.g. {{"name": value}}; parameters of {entry.id}: {_signature(entry)}')
    declared = {p.name: p for p in entry.parameters}
    unknown = [k for k in params if k not in declared]
    if unknown:
        hint, _ = did_you_mean(str(unknown[0]), declared, f"parameters of {entry.id}")
        raise InputError(Codes.INVALID_REQUEST, f"{entry.id} has no parameter '{str(unknown[0])[:40]}'", hint=hint)
    values = {}
    for p in entry.parameters:
        if p.name not in params:
            if p.required:
                raise InputError(Codes.INVALID_REQUEST, f"parameter '{p.name}' is required",
                                 hint=f"{p.name}: {p.type}" + (f", e.g. {p.examples[0]!r}" if p.examples else ""))
            values[p.name] = None
            continue
        try:
            kind, v = python_kind(params[p.name])
            values[p.name] = convert(kind, v, p.type, p.values)
        except (ValueError, LiteralTypeError) as e:
            raise ExploreError(Codes.TYPE_MISMATCH, f"parameter '{p.name}': {getattr(e, 'message', e)}",
                               hint=getattr(e, "hint", f"{a(p.type)} value")) from None
        if kind == "string" and len(v) > role.max_literal_length:
            raise BudgetError(Codes.LITERAL_TOO_LONG, f"parameter '{p.name}' is {len(v)} characters long",
                              hint=f"values of at most {role.max_literal_length} characters are allowed for this role")
    out = []
    for b in entry.bind:
        if isinstance(b, str):
            out.append(values[b])
        else:  # a constant: a contract always-filter value kept by promotion
            kind, v = python_kind(b.value)
            out.append(convert(kind, v, b.type))
    return out
