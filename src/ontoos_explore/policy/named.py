"""Policy stage, named queries: a registry entry's SQL + Contract (+ role) -> verified reads, `Plan`, values.

A named query is hand-written SQL, so the binder never sees it; the same
rules still hold, through the same functions (`policy.plans`), and
`ontoos check-sql` applies them to any SQL (`verify_sql`):

- `verify_named`: the guard checks the SQL against the entry's read sets
  and row budget (a NUL anywhere refuses it there); then the contract's
  rules (`sql_rules.contract_violations`), every problem named:
  - a column callers may not read (`may_read`: hidden or secret) appears
    only in WHERE and in JOIN ... ON (a filter or a join, as the contract
    itself uses it), never in the SELECT list, ORDER BY, GROUP BY, HAVING
    or DISTINCT ON; and there it is tested only against constants, or
    equated with the column a declared relation joins it to, never against
    a caller's parameter (which would read it a guess at a time);
  - every relation read (each alias: a table read twice is filtered twice;
    a parent the read sets' datasets exist with, outside them, too)
    carries each of its dataset's `always_filters`, ANDed at the top level
    of WHERE (a conjunct of the top-level AND, or the whole WHERE) as
    `<column> <the contract's op> <the contract's value>`: literal
    constants, or `$n` bound in the entry's `bind` to a `Constant` of the
    column's type with exactly that value, never a caller's parameter (a
    test under OR or NOT, or behind a cast, does not hold for every row);
  - every relation read of a dataset that exists only with its parents
    (`exists_with`) is joined to a relation of each parent on the
    relation's columns, as equalities ANDed at the top level of WHERE or of
    an INNER JOIN's ON (a LEFT JOIN keeps children without a parent), so
    the parent's always-filters decide which of its rows exist, as they do
    in an exploration;
  check-sql verifies a `$n` always-filter against `--bind` (the entry's
  bind list), and without one reports it as one it cannot verify; and it
  says whether the SQL's ORDER BY makes the order total
  (`named_paging.py`: whether a truncated answer pages);
- `plan_named`: the plan a role runs it with (`plan_for`: the row, time and
  cost budgets, and masked output positions from the guard's per-item
  columns);
- `bind_named`: the caller's parameters, converted as the binder converts
  literals (`types.convert`) and held to the role's `max_literal_length`;
  a `Constant` converted by `constant_value`, the very value verified.

The entry is any object with the registry's `NamedQuery` fields; this module
does not import the registry (policy comes before governance).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from ..allowed import allowed_for_read_sets, parent_columns
from ..contract import Contract, Role
from ..errors import BudgetError, Codes, ExploreError, InputError
from ..guard import Verdict, check
from ..names import did_you_mean, fold
from ..plan import Plan
from ..types import LiteralTypeError, a, convert, python_kind
from .named_paging import order_is_total
from .plans import plan_for
from .sql_rules import Pinned, constant_value, contract_violations


class NamedQueryInvalid(ValueError):
    """A registry entry the policy refuses (reported, and the entry skipped, when the registry loads)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Verified:
    """What the policy found a verified entry reads, and whether its order is total."""

    datasets: tuple[str, ...]  # the datasets the SQL reads
    sources: tuple[tuple[tuple[str, str], ...], ...]  # per output position, the (dataset, column) pairs it reads
    touches: frozenset[tuple[str, str, str]]  # every (schema, table, column) it reads anywhere
    pageable: bool  # its ORDER BY makes the order total (`named_paging.order_is_total`)


def verify_named(entry: Any, contract: Contract) -> Verified:
    """What the entry's SQL reads (`Verified`), or NamedQueryInvalid naming why not: the first of the
    entry's own problems and the guard's violations, else every problem the contract's rules find
    (`contract_violations`), on one line."""
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
    problems = contract_violations(verdict, contract, entry.read_sets, _pinned_by(entry.bind))
    if problems:
        raise NamedQueryInvalid("; ".join(v.message for v in problems))
    by_table = {(d.schema_name, d.table_name): d for d in contract.datasets.values()}
    read = {by_table[t].name for t in verdict.relations}
    datasets = tuple(sorted(read - _only_parents(contract, read, verdict.columns)))
    sources = tuple(tuple(sorted((by_table[(s, t)].name, c) for s, t, c in item)) for item in verdict.targets)
    return Verified(datasets, sources, verdict.columns, order_is_total(entry.sql, verdict, contract))


def _only_parents(contract: Contract, read: set[str], columns: frozenset[tuple[str, str, str]]) -> set[str]:
    """The datasets of `read` that the SQL reads only as the parents another one exists with: parents
    (exists_with) of another dataset read, of whose table it reads only the join and always-filter
    columns those chains need. They are not what the query reads, as the contract's own joins of an
    exploration are not (a role that may read the child runs it, as it explores the child)."""
    parents = {fold(r.to) for d in read for r in contract.parents_of(d)}
    needed = parent_columns(contract, frozenset(fold(d) for d in read))
    out = set()
    for name in read:
        ds = contract.dataset(name)
        cols = {c for s, t, c in columns if (s, t) == (ds.schema_name, ds.table_name)}
        if fold(name) in parents and cols <= needed.get(fold(name), frozenset()):
            out.add(name)
    return out


def verify_sql(sql: str, contract: Contract, read_sets: Iterable[str], max_rows: int | None,
               n_params: int | None = None, bind: tuple[Any, ...] | None = None) -> Verdict:
    """`ontoos check-sql`: the guard's verdict on `sql` under `read_sets`, with every problem the
    contract's rules find added to its violations. `bind`: what each `$n` is bound to, as a registry
    entry binds it (a caller's parameter name, or a `Constant`); without it an always-filter written
    as `$n` cannot be verified, and is reported so."""
    read_sets = tuple(read_sets)
    verdict = check(sql, allowed_for_read_sets(contract, read_sets, max_rows), n_params)
    pinned = _unpinned if bind is None else _pinned_by(bind)
    problems = contract_violations(verdict, contract, read_sets, pinned)
    return dataclasses.replace(verdict, violations=verdict.violations + tuple(problems)) if problems else verdict


def _pinned_by(bind: tuple[Any, ...]) -> Pinned:
    def pinned(n: int) -> Any:
        b = bind[n - 1] if 1 <= n <= len(bind) else None
        if b is None:
            return f"${n} is bound to nothing"
        return f"${n} is the caller's parameter '{b}', not the contract's constant" if isinstance(b, str) else b
    return pinned


def _unpinned(n: int) -> str:
    return (f"${n} is a parameter whose value check-sql cannot verify without --bind (a named query binds "
            f"it to a Constant)")


def plan_named(entry: Any, contract: Contract, role: Role) -> Plan:
    """The plan `role` runs a verified entry with: the smaller row and time budgets of the two."""
    datasets = [contract.dataset(d) for d in entry.datasets]
    sources = [[contract.dataset(d).column(c) for d, c in item] for item in entry.sources]
    timeout = min(role.timeout_ms, entry.timeout_ms or role.timeout_ms)
    return plan_for(contract, role, datasets, min(role.max_rows, entry.max_rows), timeout, sources)


def _signature(entry: Any) -> str:
    return ", ".join(f"{p.name}: {p.type}{'' if p.required else ' (optional)'}" for p in entry.parameters) or "none"


def _flat(params: dict[Any, Any], parents: set[str], prefix: str = "") -> dict[Any, Any]:
    """Nested parameters (`{"window": {"from": ...}}`) as the dotted names the entry declares
    (`window.from`); a dotted key given as it is (`-p window.from=...`) stays."""
    out: dict[Any, Any] = {}
    for k, v in params.items():
        name = f"{prefix}{k}" if isinstance(k, str) else k
        if isinstance(v, dict) and name in parents:
            out.update(_flat(v, parents, f"{name}."))
        else:
            out[name] = v
    return out


def bind_named(entry: Any, params: Any, role: Role) -> list[Any]:
    """The caller's parameters, checked and converted as the binder converts literals, in `$n` order;
    an absent one takes its default (then converted and checked as given); text values are held to the
    role's `max_literal_length`, like literals."""
    if not isinstance(params, dict):
        raise InputError(Codes.INVALID_REQUEST, "params must be an object",
                         hint=f'e.g. {{"name": value}}; parameters of {entry.id}: {_signature(entry)}')
    declared = {p.name: p for p in entry.parameters}
    params = _flat(params, {n.rsplit(".", k)[0] for n in declared for k in range(1, n.count(".") + 1)})
    unknown = [k for k in params if k not in declared]
    if unknown:
        hint, _ = did_you_mean(str(unknown[0]), declared, f"parameters of {entry.id}")
        raise InputError(Codes.INVALID_REQUEST, f"{entry.id} has no parameter '{str(unknown[0])[:40]}'", hint=hint)
    values = {}
    for p in entry.parameters:
        if p.name not in params and p.default is not None:
            params[p.name] = p.default
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
            out.append(constant_value(b))
    return out
