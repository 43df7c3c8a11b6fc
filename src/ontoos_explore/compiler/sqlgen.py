"""Compile stage, SQL: BoundExploration -> sqlglot tree -> PostgreSQL text + params.

Trees only: every identifier is a quoted `exp.Identifier` built from contract
names, every value a `$n` parameter numbered in the order it appears in the
text, and no string is ever parsed. The same plan always yields the same
bytes. The SELECT fetches `limit + 1` rows so the executor can tell that a
result was truncated. The contract's joins to parents (`implied`, from
`exists_with`) follow the caller's joins, as plain inner joins on declared
columns; their always-filters follow the caller's predicate in WHERE.
"""

from __future__ import annotations

import functools
import threading

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.generator import Generator

from ..policy.bound import (
    BAnd,
    BBetween,
    BCompare,
    BIn,
    BIsNull,
    BLike,
    BNot,
    BOr,
    BoundExploration,
    BPredicate,
    Col,
    Expr,
    Param,
    Source,
)

MAX_LABEL = 63  # PostgreSQL truncates identifiers (and so output labels) at 63 bytes

# DSL operator -> sqlglot node; one row per operator.
COMPARE_OPS: dict[str, type[exp.Expr]] = {
    "=": exp.EQ,
    "!=": exp.NEQ,
    "<": exp.LT,
    "<=": exp.LTE,
    ">": exp.GT,
    ">=": exp.GTE,
}
AGGREGATES: dict[str, type[exp.Expr]] = {
    "count": exp.Count,
    "min": exp.Min,
    "max": exp.Max,
    "sum": exp.Sum,
    "avg": exp.Avg,
}


@functools.cache
def _dialect() -> Dialect:
    return Dialect.get_or_raise("postgres")


def _ident(name: str) -> exp.Identifier:
    return exp.Identifier(this=name, quoted=True)


class Emitter:
    """Builds one SELECT; collects parameters in the order they are emitted."""

    def __init__(self) -> None:
        self.params: list[Param] = []
        # (column ref, type, written by the caller, dataset, column): see compiler.ParamSlot
        self.slots: list[tuple[str, str, bool, str, str]] = []
        self.touched: set[tuple[str, str, str]] = set()  # (schema, table, column) in the SQL
        self._caller = True

    def table(self, src: Source) -> exp.Table:
        return exp.Table(this=_ident(src.table), db=_ident(src.schema), alias=exp.TableAlias(this=_ident(src.alias)))

    def column(self, col: Col) -> exp.Column:
        self.touched.add((col.source.schema, col.source.table, col.name))
        return exp.Column(this=_ident(col.name), table=_ident(col.source.alias))

    def param(self, p: Param, col: Col) -> exp.Parameter:
        self.params.append(p)
        self.slots.append((col.ref, p.type, self._caller, col.source.dataset, col.name))
        return exp.Parameter(this=exp.Literal.number(len(self.params)))

    def expr(self, e: Expr) -> exp.Expr:
        if isinstance(e, Col):
            return self.column(e)
        arg: exp.Expr = exp.Star() if e.col is None else self.column(e.col)
        if e.distinct:
            arg = exp.Distinct(expressions=[arg])
        return AGGREGATES[e.func](this=arg)

    def predicate(self, p: BPredicate) -> exp.Expr:
        if isinstance(p, BAnd):
            return _chain(exp.And, [self._operand(x) for x in p.items])
        if isinstance(p, BOr):
            return _chain(exp.Or, [self._operand(x) for x in p.items])
        if isinstance(p, BNot):
            return exp.Not(this=exp.Paren(this=self.predicate(p.item)))
        col = self.column(p.col)
        if isinstance(p, BCompare):
            return COMPARE_OPS[p.op](this=col, expression=self.param(p.value, p.col))
        if isinstance(p, BIn):
            node = exp.In(this=col, expressions=[self.param(v, p.col) for v in p.values])
            return exp.Not(this=exp.Paren(this=node)) if p.negated else node
        if isinstance(p, BBetween):
            return exp.Between(this=col, low=self.param(p.low, p.col), high=self.param(p.high, p.col))
        if isinstance(p, BIsNull):
            return exp.Is(this=col, expression=exp.Not(this=exp.Null()) if p.negated else exp.Null())
        if isinstance(p, BLike):
            cls = exp.ILike if p.case_insensitive else exp.Like
            node = cls(this=col, expression=self.param(p.pattern, p.col))
            return exp.Not(this=exp.Paren(this=node)) if p.negated else node
        raise TypeError(f"not a bound predicate: {type(p).__name__}")  # pragma: no cover

    def _operand(self, p: BPredicate) -> exp.Expr:
        node = self.predicate(p)
        return exp.Paren(this=node) if isinstance(p, (BAnd, BOr)) else node

    def where(self, plan: BoundExploration) -> exp.Where | None:
        parts: list[exp.Expr] = []
        if plan.where is not None:
            parts.append(self._operand(plan.where) if plan.always else self.predicate(plan.where))
        self._caller = False
        parts.extend(self._operand(p) for p in plan.always)
        self._caller = True
        return exp.Where(this=_chain(exp.And, parts)) if parts else None

    def select(self, plan: BoundExploration) -> exp.Select:
        select = exp.Select(
            expressions=[exp.Alias(this=self.expr(f.expr), alias=_ident(f.name[:MAX_LABEL])) for f in plan.fields]
        )
        select.set("from_", exp.From(this=self.table(plan.root)))
        joins = (*plan.joins, *plan.implied)  # the caller's, then the contract's joins to parents
        if joins:
            select.set(
                "joins",
                [
                    exp.Join(
                        this=self.table(j.source),
                        kind="INNER",
                        on=_chain(exp.And, [exp.EQ(this=self.column(a), expression=self.column(b)) for a, b in j.on]),
                    )
                    for j in joins
                ],
            )
        where = self.where(plan)
        if where is not None:
            select.set("where", where)
        if plan.group_by:
            select.set("group", exp.Group(expressions=[self.column(c) for c in plan.group_by]))
        order = (*plan.order_by, *plan.tiebreak)  # the caller's keys, then those that make the order total
        if order:
            select.set(
                "order",
                exp.Order(
                    expressions=[
                        # nulls_first mirrors PostgreSQL's default, so no NULLS clause is emitted
                        exp.Ordered(this=self.expr(k.expr), desc=k.descending, nulls_first=k.descending)
                        for k in order
                    ]
                ),
            )
        select.set("limit", exp.Limit(expression=exp.Literal.number(plan.limit + 1)))
        if plan.offset:
            select.set("offset", exp.Offset(expression=exp.Literal.number(plan.offset)))
        return select


def _chain(cls: type[exp.Expr], items: list[exp.Expr]) -> exp.Expr:
    node = items[0]
    for item in items[1:]:
        node = cls(this=node, expression=item)
    return node


_local = threading.local()


def _generator() -> Generator:
    """One Generator per thread: Dialect.generate builds a new one per call (~4% of a compile)."""
    gen = getattr(_local, "generator", None)
    if gen is None:
        gen = _local.generator = _dialect().generator()
    return gen


def generate(plan: BoundExploration) -> tuple[str, Emitter]:
    """The SQL text of a plan, and the emitter holding its parameters."""
    em = Emitter()
    tree = em.select(plan)
    return _generator().generate(tree, copy=False), em
