"""Policy stage, named queries: a registry entry's SQL + Contract (+ role) -> verified reads, `Plan`, values.

A named query is hand-written SQL, so the binder never sees it; the same
rules still hold, through the same functions (`policy.plans`), and
`ontoos check-sql` applies them to any SQL (`verify_sql`):

- `verify_named`: the guard checks the SQL against the entry's read sets
  and row budget (a NUL anywhere refuses it there); then the contract's
  rules (`contract_violations`), every problem named:
  - a column callers may not read (`may_read`: hidden or secret) appears
    only in WHERE and in JOIN ... ON (a filter or a join, as the contract
    itself uses it), never in the SELECT list, ORDER BY, GROUP BY, HAVING
    or DISTINCT ON;
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
  check-sql has no bind list, so there a `$n` always-filter is reported as
  one it cannot verify;
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
import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any

from ..allowed import allowed_for_read_sets, parent_columns
from ..contract import Column, Contract, Dataset, FilterRule, Role
from ..errors import BudgetError, Codes, ExploreError, InputError
from ..guard import Conjunct, Verdict, Violation, check
from ..names import did_you_mean, fold
from ..plan import Plan
from ..types import LiteralTypeError, Value, a, convert, python_kind
from .plans import always_filters, may_read, plan_for

FILTER_OR_JOIN = ("whereClause", "fromClause")  # where a column callers may not read may appear
CLAUSES = {"targetList": "the SELECT list", "sortClause": "ORDER BY", "groupClause": "GROUP BY",
           "havingClause": "HAVING", "distinctClause": "DISTINCT ON"}
SQL_OPS = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "in": "IN", "not in": "NOT IN",
           "is null": "IS NULL", "is not null": "IS NOT NULL"}  # a contract filter op -> the guard's `Conjunct.op`

# What a `$n` is bound to: its constant (an object with `value` and `type`, the registry's `Constant`),
# or why it is not one (a caller's parameter, or no bind list at all).
Pinned = Callable[[int], Any]


class NamedQueryInvalid(ValueError):
    """A registry entry the policy refuses (reported, and the entry skipped, when the registry loads)."""


def verify_named(entry: Any, contract: Contract) -> tuple[tuple[str, ...], tuple[tuple[tuple[str, str], ...], ...]]:
    """(the datasets the SQL reads, per output position the (dataset, column) pairs it reads), or
    NamedQueryInvalid naming why: the first of the entry's own problems and the guard's violations,
    else every problem the contract's rules find (`contract_violations`), on one line."""
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
    return datasets, sources


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
               n_params: int | None = None) -> Verdict:
    """`ontoos check-sql`: the guard's verdict on `sql` under `read_sets`, with every problem the
    contract's rules find added to its violations. There is no bind list, so an always-filter written
    as `$n` cannot be verified, and is reported so."""
    read_sets = tuple(read_sets)
    verdict = check(sql, allowed_for_read_sets(contract, read_sets, max_rows), n_params)
    problems = contract_violations(verdict, contract, read_sets, _unpinned)
    return dataclasses.replace(verdict, violations=verdict.violations + tuple(problems)) if problems else verdict


def contract_violations(verdict: Verdict, contract: Contract, read_sets: Iterable[str],
                        pinned: Pinned) -> list[Violation]:
    """The contract's rules on guarded SQL, one `Violation` a problem: `HiddenColumn` for a column
    callers may not read outside WHERE and JOIN ... ON, `AlwaysFilter` for an always-filter that
    does not hold for every row. `pinned(n)`: what `$n` is bound to."""
    tables = _tables(contract, read_sets)
    with_parents = _with_parents(contract, tables)
    return [*_unreadable_placed(verdict, tables), *_unfiltered(verdict, with_parents, pinned),
            *_unjoined(verdict, contract, with_parents)]


def _with_parents(contract: Contract, tables: dict[tuple[str, str], tuple[Dataset, ...]]
                  ) -> dict[tuple[str, str], tuple[Dataset, ...]]:
    """`tables` and the parents their datasets exist with (exists_with, up each chain): the allowed set
    gives the guard a parent's join and always-filter columns even outside the read sets, so its
    always-filters must hold on every alias of it too (it stays out of `tables`: none of its columns is
    readable, so they may only filter or join)."""
    out = dict(tables)
    todo = [ds for datasets in tables.values() for ds in datasets]
    while todo:
        for rel in contract.parents_of(todo.pop().name):
            parent = contract.dataset(rel.to)
            key = (parent.schema_name, parent.table_name)
            if parent not in out.get(key, ()):
                out[key] = (*out.get(key, ()), parent)
                todo.append(parent)
    return out


def _tables(contract: Contract, read_sets: Iterable[str]) -> dict[tuple[str, str], tuple[Dataset, ...]]:
    """(schema, table) -> the datasets of the read sets on it (two datasets may share a table: the
    rules of both hold)."""
    sets = {fold(k): v for k, v in contract.read_sets.items()}
    scope = {fold(d) for s in read_sets for d in sets.get(fold(s), ())}
    out: dict[tuple[str, str], tuple[Dataset, ...]] = {}
    for ds in contract.datasets.values():
        if fold(ds.name) in scope:
            key = (ds.schema_name, ds.table_name)
            out[key] = (*out.get(key, ()), ds)
    return out


def _readable(datasets: tuple[Dataset, ...], column: str) -> bool:
    cols = [c for c in (ds.column(column) for ds in datasets) if c is not None]
    return bool(cols) and all(may_read(c) for c in cols)


def _unreadable_placed(verdict: Verdict, tables: dict[tuple[str, str], tuple[Dataset, ...]]) -> list[Violation]:
    """The hidden/secret-column rule on SQL: such a column may filter (WHERE) or join (ON), never be
    output, sorted, grouped or deduplicated on. The guard allows join and always-filter columns (the
    compiler needs them); hand-written SQL could select them."""
    return [Violation("HiddenColumn", f"{schema}.{table}.{column} is not readable: it may only filter or join, "
                                      f"not appear in {CLAUSES.get(clause, clause)}")
            for clause, schema, table, column in sorted(verdict.placed)
            if clause not in FILTER_OR_JOIN and not _readable(tables.get((schema, table), ()), column)]


def _unfiltered(verdict: Verdict, tables: dict[tuple[str, str], tuple[Dataset, ...]],
                pinned: Pinned) -> list[Violation]:
    """Every relation read (each alias) keeps each always-filter of its dataset as a top-level conjunct
    of WHERE with the contract's op and value, or the query reads the rows the contract hides."""
    in_where = {(s, t, c) for clause, s, t, c in verdict.placed if clause == "whereClause"}
    out = []
    for alias, schema, table in sorted(verdict.ranges):
        for ds in tables.get((schema, table), ()):
            for col, rule in always_filters(ds):
                want = f"{alias}.{col.name} {SQL_OPS[rule.op]}{_rendered(rule)}"
                tests = [k for k in verdict.conjuncts if (k.alias, k.column) == (alias, col.name)]
                why = [_why_not(k, col, rule, pinned) for k in tests]
                if tests and None in why:
                    continue
                if not tests:
                    tested = any((k.schema, k.table, k.column) == (schema, table, col.name) for k in verdict.conjuncts)
                    elsewhere = (f" (it is in WHERE, but not as a top-level conjunct {alias}.{col.name} "
                                 f"{SQL_OPS[rule.op]} <constant>: a test under OR or NOT, or on a cast "
                                 f"parameter, does not hold for every row)"
                                 if (schema, table, col.name) in in_where and not tested else "")
                    message = (f"it reads {ds.name} ({schema}.{table} AS {alias}) without the contract's "
                               f"always-filter on {rule.column}: {want} must be ANDed at the top level of "
                               f"WHERE{elsewhere}")
                else:
                    message = (f"the always-filter on {ds.name}.{rule.column} must be {want}, but "
                               + "; ".join(w for w in why if w))
                out.append(Violation("AlwaysFilter", message, tests[0].location if tests else None))
    return out


def _unjoined(verdict: Verdict, contract: Contract,
              tables: dict[tuple[str, str], tuple[Dataset, ...]]) -> list[Violation]:
    """Every relation read (each alias) of a dataset that exists only with its parents (exists_with) is
    joined to a relation of each parent on the relation's columns, as equalities every row satisfies
    (ANDed at the top of WHERE or of an INNER JOIN's ON); that parent's always-filters and its own
    parents are then required of it as of any relation read."""
    out = []
    for alias, schema, table in sorted(verdict.ranges):
        for ds in tables.get((schema, table), ()):
            for rel in contract.parents_of(ds.name):
                parent = contract.dataset(rel.to)
                aliases = sorted(a for a, s, t in verdict.ranges if (s, t) == (parent.schema_name, parent.table_name))
                if any(all(_equated(verdict, (alias, fc), (p, tc)) for fc, tc in rel.join.items()) for p in aliases):
                    continue
                on = " AND ".join(f"{alias}.{fc} = <alias>.{tc}" for fc, tc in rel.join.items())
                out.append(Violation(
                    "ParentJoin", f"it reads {ds.name} ({schema}.{table} AS {alias}) without its parent "
                    f"{parent.name}: its rows exist only with their {parent.name} row (exists_with {rel.name}), "
                    f"so it must be joined INNER JOIN {parent.relation} AS <alias> ON {on} (or those "
                    f"equalities ANDed at the top level of WHERE), and the always-filters of {parent.name}"))
    return out


def _equated(verdict: Verdict, a: tuple[str, str], b: tuple[str, str]) -> bool:
    return (a, b) in verdict.equalities or (b, a) in verdict.equalities


def _why_not(test: Conjunct, col: Column, rule: FilterRule, pinned: Pinned) -> str | None:
    """None if `test` is the contract's filter exactly, else what differs."""
    if test.op != SQL_OPS[rule.op]:
        return f"{test.alias}.{test.column} is tested with {test.op}, not {SQL_OPS[rule.op]}"
    try:
        expected = rule_values(col, rule)
    except (ValueError, LiteralTypeError):  # pragma: no cover - the contract's checks convert them
        return f"the contract's value does not fit the {col.type} column"
    found = []
    for v in test.values:
        if test.kind == "param":
            bound = pinned(v)
            if isinstance(bound, str):
                return bound
            if bound.type != col.type:
                return f"${v} is bound to {a(bound.type)} constant, not {a(col.type)} one"
            try:
                found.append(constant_value(bound))
            except (ValueError, LiteralTypeError):
                return f"${v} is bound to {bound.value!r}, which is not {a(bound.type)} value"
        else:
            try:
                found.append(convert(*python_kind(v), col.type))
            except (ValueError, LiteralTypeError):
                return f"{_sql(v)} is not {a(col.type)} value"
    if _typed(found) != _typed(expected):
        shown = ", ".join(_sql(v) for v in found)
        what = (", ".join(f"${v}" for v in test.values) + " is bound to" if test.kind == "param"
                else f"{test.alias}.{test.column} is compared with")
        return f"{what} {shown}, not the contract's {_rendered(rule).strip()}"
    return None


def rule_values(col: Column, rule: FilterRule) -> tuple[Value, ...]:
    """The typed values an always-filter compares with, converted as the binder converts them (none for
    IS [NOT] NULL)."""
    if rule.op in ("is null", "is not null"):
        return ()
    raw = rule.value if rule.op in ("in", "not in") else (rule.value,)
    return tuple(convert(*python_kind(v), col.type) for v in raw)


def constant_value(b: Any) -> Value:
    """The value a `Constant` bind runs with (and so the one the always-filter rule verifies)."""
    kind, v = python_kind(b.value)
    return convert(kind, v, b.type)


def _typed(values: Iterable[Any]) -> frozenset[tuple[type, Any]]:
    return frozenset((type(v), v) for v in values)  # False is not 0, nor True 1


def _sql(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (str, dt.date)):
        text = v.isoformat() if isinstance(v, dt.date) else v
        return "'" + text.replace("'", "''") + "'"
    return str(v)


def _rendered(rule: FilterRule) -> str:
    if rule.op in ("is null", "is not null"):
        return ""
    if rule.op in ("in", "not in"):
        return " (" + ", ".join(_sql(v) for v in rule.value) + ")"
    return f" {_sql(rule.value)}"


def _pinned_by(bind: tuple[Any, ...]) -> Pinned:
    def pinned(n: int) -> Any:
        b = bind[n - 1] if 1 <= n <= len(bind) else None
        if b is None:
            return f"${n} is bound to nothing"
        return f"${n} is the caller's parameter '{b}', not the contract's constant" if isinstance(b, str) else b
    return pinned


def _unpinned(n: int) -> str:
    return (f"${n} is a parameter whose value check-sql cannot verify: it has no bind list (a named query "
            f"binds it to a Constant)")


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
            out.append(constant_value(b))
    return out
