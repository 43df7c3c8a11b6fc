"""Policy, paging a named query: its SQL + the guard's verdict -> whether its order is total; SQL + n -> page SQL.

A named query's truncated answer may be continued only when its ORDER BY
makes the order of its rows total, as an exploration's tiebreak does
(`paging.py`). Hand-written SQL gets no tiebreak appended, so its ORDER BY
must say it, in one of two ways:

- with GROUP BY: every grouped expression is a column, and each is an
  ORDER BY key (a group is one row);
- without: every relation in FROM is *determined*: its dataset's `key`
  columns are all ORDER BY keys, or each of them is equated (`a.x = b.y`,
  ANDed at the top of WHERE or of an INNER JOIN's ON: the guard's
  `equalities`) with a column of a relation already determined (a table
  joined on its key to a row adds no second row for it).

A key counts only as a bare column (`alias.column`, a column of the only
relation, or an output name whose item is one): `x / 10` or `count(x)` does
not order rows apart. An aggregate without GROUP BY is one row. Anything
else (a relation without a key, DISTINCT ON, a LEFT JOIN's table) leaves the
order partial, and the answer carries no cursor: the author adds the key.

`with_offset(sql, n)` is the SQL of the page `n` rows on: the statement
parsed, its OFFSET set (added to one it has) and printed back by pglast.
The text is new, so the registry has the guard verify it again before it
runs (`governance/registry.py`).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from pglast import ast, parse_sql
from pglast.parser import parse_sql_json
from pglast.stream import RawStream

from ..contract import Contract
from ..guard import Verdict
from ..guard.nodes import _ident, _node, _strings


def order_is_total(sql: str, verdict: Verdict, contract: Contract) -> bool:
    """Whether the verified `sql` (its `verdict` ok) orders its rows totally (the module says when)."""
    stmt = _node(json.loads(parse_sql_json(sql))["stmts"][0]["stmt"])[1]
    ranges = {alias: (schema, table) for alias, schema, table in verdict.ranges}
    by_table = {(d.schema_name, d.table_name): d for d in contract.datasets.values()}
    outputs = {}
    for item in stmt.get("targetList") or ():
        target = _node(item)[1]
        if target.get("name"):
            outputs.setdefault(target["name"], []).append(target.get("val"))
    sorted_by = set()
    for item in stmt.get("sortClause") or ():
        key = _node(item)[1].get("node")
        names = _column_names(key)
        if names is not None and len(names) == 1 and names[0] in outputs:  # PostgreSQL: an output name first
            found = outputs[names[0]]
            key = found[0] if len(found) == 1 else None
        column = _column(key, ranges, by_table)
        if column is not None:
            sorted_by.add(column)
    if stmt.get("distinctClause"):
        return False
    group = stmt.get("groupClause")
    if group:
        return all((c := _column(g, ranges, by_table)) is not None and c in sorted_by for g in group)
    if _aggregated(stmt):
        return True  # one row
    determined = set()
    keys = {}
    for alias, table in ranges.items():
        ds = by_table.get(table)
        if ds is None or not ds.key:
            return False
        keys[alias] = tuple(ds.column(k).name for k in ds.key)
        if all((alias, k) in sorted_by for k in keys[alias]):
            determined.add(alias)
    equal = {}
    for left, right in verdict.equalities:
        equal.setdefault(left, set()).add(right)
        equal.setdefault(right, set()).add(left)
    grew = True
    while grew:
        grew = False
        for alias in ranges.keys() - determined:
            if all(any(other in determined for other, _ in equal.get((alias, k), ())) for k in keys[alias]):
                determined.add(alias)
                grew = True
    return determined == ranges.keys()


def _column_names(node: Any) -> list[str] | None:
    found = _node(node)
    if found is None or found[0] != "ColumnRef":
        return None
    names = _strings(found[1].get("fields"))
    return None if any(n is None for n in names) else [_ident(n) for n in names]


def _column(node: Any, ranges: dict[str, tuple[str, str]], by_table: dict[tuple[str, str], Any]) -> tuple[str, str] | None:
    """(alias, column) of a bare column reference, else None."""
    names = _column_names(node)
    if names is None:
        return None
    if len(names) == 2:
        return (names[0], names[1]) if names[0] in ranges else None
    if len(names) != 1:
        return None
    owners = [alias for alias, table in ranges.items()
              if table in by_table and by_table[table].column(names[0]) is not None]
    return (owners[0], names[0]) if len(owners) == 1 else None


def _aggregated(stmt: dict) -> bool:
    """Whether the SELECT list calls an aggregate (without GROUP BY: one row)."""
    for item in stmt.get("targetList") or ():
        found = _node(_node(item)[1].get("val"))
        if found is not None and found[0] == "FuncCall":
            return True
    return False


@lru_cache(maxsize=512)
def with_offset(sql: str, offset: int) -> str:
    """`sql` with its OFFSET moved `offset` rows on, printed back from its parse tree."""
    stmt = parse_sql(sql)[0].stmt
    before = stmt.limitOffset.val.ival if stmt.limitOffset is not None else 0  # the guard: a constant integer
    stmt.limitOffset = ast.A_Const(val=ast.Integer(ival=before + offset))
    return RawStream()(stmt)
