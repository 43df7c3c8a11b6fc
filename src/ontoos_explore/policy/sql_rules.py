"""Policy stage, the contract's rules on hand-written SQL: a guard `Verdict` + Contract + read sets -> violations.

The binder's rules, as a named query (or `ontoos check-sql`) must keep them,
read from what the guard reports of the SQL (`placed`, `compared`,
`conjuncts`, `equalities`, `ranges`), one `Violation` a problem:

- `HiddenColumn`: a column callers may not read (`may_read`: hidden or
  secret) outside WHERE and JOIN ... ON, or there tested against a caller's
  parameter or equated with a column no declared relation joins it to;
- `AlwaysFilter`: an always-filter of a relation read that is not ANDed at
  the top level of WHERE with the contract's op and value;
- `ParentJoin`: a dataset with `exists_with` read without being joined to
  each parent on the relation's columns.

`pinned(n)` says what `$n` is bound to: a `Constant` (an object with `value`
and `type`), or why it is not one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any

from ..contract import Column, Contract, Dataset, FilterRule
from ..guard import Conjunct, Verdict, Violation
from ..names import fold
from ..types import LiteralTypeError, Value, a, convert, python_kind
from .plans import always_filters, may_read

FILTER_OR_JOIN = ("whereClause", "fromClause")  # where a column callers may not read may appear
CLAUSES = {"targetList": "the SELECT list", "sortClause": "ORDER BY", "groupClause": "GROUP BY",
           "havingClause": "HAVING", "distinctClause": "DISTINCT ON"}
SQL_OPS = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "in": "IN", "not in": "NOT IN",
           "is null": "IS NULL", "is not null": "IS NOT NULL"}  # a contract filter op -> the guard's `Conjunct.op`

# What a `$n` is bound to: its constant (an object with `value` and `type`, the registry's `Constant`),
# or why it is not one (a caller's parameter, or no bind list at all).
Pinned = Callable[[int], Any]


def contract_violations(verdict: Verdict, contract: Contract, read_sets: Iterable[str],
                        pinned: Pinned) -> list[Violation]:
    """The contract's rules on guarded SQL, one `Violation` a problem: `HiddenColumn` for a column
    callers may not read outside WHERE and JOIN ... ON (or there tested against a caller's value),
    `AlwaysFilter` for an always-filter that does not hold for every row, `ParentJoin` for a child read
    without its parents. `pinned(n)`: what `$n` is bound to."""
    tables = _tables(contract, read_sets)
    with_parents = _with_parents(contract, tables)
    return [*_unreadable_placed(verdict, tables), *_unreadable_compared(verdict, contract, tables, with_parents, pinned),
            *_unfiltered(verdict, with_parents, pinned), *_unjoined(verdict, contract, with_parents)]


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


def _unreadable_compared(verdict: Verdict, contract: Contract, tables: dict[tuple[str, str], tuple[Dataset, ...]],
                         with_parents: dict[tuple[str, str], tuple[Dataset, ...]], pinned: Pinned) -> list[Violation]:
    """A column callers may not read filters only as the contract filters with it: tested against its
    constants (a literal, or a `$n` bound to a `Constant`), or equated with the column a declared relation
    joins it to. Tested against a caller's value (or another column), it answers whether the hidden
    value is that one: a caller could read it a guess at a time."""
    joins = {pair for r in contract.relations.values() for pair in _join_pairs(contract, r)}
    # a `$n` an always-filter's own conjunct tests its column with: `_unfiltered` judges what it is bound to
    filtering = {((k.schema, k.table, k.column), n) for k in verdict.conjuncts if k.kind == "param" for n in k.values
                 if any(c.name == k.column for ds in with_parents.get((k.schema, k.table), ())
                        for c, _ in always_filters(ds))}
    out = []
    for (schema, table, column), (kind, other) in sorted(verdict.compared, key=repr):
        if _readable(tables.get((schema, table), ()), column):
            continue
        name = f"{schema}.{table}.{column}"
        if kind == "param":
            bound = pinned(other)
            if not isinstance(bound, str) or ((schema, table, column), other) in filtering:
                continue
            why = f"{name} is not readable: it may be tested only against the contract's constants, but {bound}"
        elif ((schema, table, column), other) in joins:
            continue
        else:
            why = (f"{name} is not readable: it may be compared with another column only on a relation the "
                   f"contract declares, not with {'.'.join(other)}")
        out.append(Violation("HiddenColumn", why))
    return out


def _join_pairs(contract: Contract, rel: Any) -> list[tuple[tuple[str, str, str], tuple[str, str, str]]]:
    """A relation's column pairs, as (schema, table, column) both ways round."""
    a, b = contract.dataset(rel.from_), contract.dataset(rel.to)
    out = []
    for fc, tc in rel.join.items():
        x, y = (a.schema_name, a.table_name, fc), (b.schema_name, b.table_name, tc)
        out += [(x, y), (y, x)]
    return out


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


def _equated(verdict: Verdict, x: tuple[str, str], y: tuple[str, str]) -> bool:
    return (x, y) in verdict.equalities or (y, x) in verdict.equalities


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
