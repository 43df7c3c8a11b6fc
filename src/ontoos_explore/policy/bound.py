"""Policy stage output: `BoundExploration`, every name resolved, every value typed.

The compiler reads only this plan: physical tables behind aliases, columns
with their types, joins on declared columns, the always-filters, the clamped
limit, and the notes. It never sees the contract, the role or user text.
Besides the caller's joins (`joins`, aliases `t0, t1, ...`) it holds the
contract's own (`implied`, aliases `p0, p1, ...`): each dataset's parents
along its `exists_with` chain, whose always-filters are in `always` too.
Nothing the caller wrote names them, and the exploration's text, shape and
fingerprint leave them out, like the always-filters.
Contract names (`dataset`, `relation`, `name`) are kept beside the physical
ones so the plan can be rendered back as a normalized exploration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from ..plan import Plan
from ..types import Value


@dataclass(frozen=True, slots=True)
class Source:
    alias: str  # t0, t1, ... in join order
    schema: str
    table: str
    dataset: str  # contract name
    relation: str | None  # the relation followed to reach it; None for the root


@dataclass(frozen=True, slots=True)
class Col:
    source: Source
    name: str  # contract name == physical column name
    type: str

    @property
    def ref(self) -> str:
        """How an exploration writes it: `column` or `relation.column`."""
        return f"{self.source.relation}.{self.name}" if self.source.relation else self.name


@dataclass(frozen=True, slots=True)
class Agg:
    func: str  # count | min | max | sum | avg
    col: Col | None  # None: count()
    distinct: bool = False

    @property
    def text(self) -> str:
        inner = ("distinct " if self.distinct else "") + (self.col.ref if self.col else "")
        return f"{self.func}({inner})"


Expr = Union[Col, Agg]


@dataclass(frozen=True, slots=True)
class Param:
    value: Value
    type: str  # the column type it was converted for


@dataclass(frozen=True, slots=True)
class BCompare:
    col: Col
    op: str
    value: Param


@dataclass(frozen=True, slots=True)
class BIn:
    col: Col
    values: tuple[Param, ...]
    negated: bool


@dataclass(frozen=True, slots=True)
class BBetween:
    col: Col
    low: Param
    high: Param


@dataclass(frozen=True, slots=True)
class BIsNull:
    col: Col
    negated: bool


@dataclass(frozen=True, slots=True)
class BLike:
    col: Col
    pattern: Param
    negated: bool
    case_insensitive: bool


@dataclass(frozen=True, slots=True)
class BAnd:
    items: tuple["BPredicate", ...]


@dataclass(frozen=True, slots=True)
class BOr:
    items: tuple["BPredicate", ...]


@dataclass(frozen=True, slots=True)
class BNot:
    item: "BPredicate"


BPredicate = Union[BCompare, BIn, BBetween, BIsNull, BLike, BAnd, BOr, BNot]


@dataclass(frozen=True, slots=True)
class OutputField:
    expr: Expr
    name: str  # the output column name: the alias, else the field as written (canonical)
    alias: str | None  # the alias as the caller wrote it, if any


@dataclass(frozen=True, slots=True)
class OrderKey:
    expr: Expr
    descending: bool
    alias: str | None = None  # set when the key named an output alias


@dataclass(frozen=True, slots=True)
class Join:
    source: Source  # the joined side
    relation: str  # contract relation name
    on: tuple[tuple[Col, Col], ...]  # (from column, to column) pairs

    @property
    def start(self) -> Source:
        """The source the relation was followed from."""
        return self.on[0][0].source


@dataclass(frozen=True, slots=True)
class BoundExploration:
    root: Source
    joins: tuple[Join, ...]
    fields: tuple[OutputField, ...]
    where: BPredicate | None  # the caller's predicate
    always: tuple[BPredicate, ...]  # the contract's always-filters (of every source, implied ones too), ANDed in
    group_by: tuple[Col, ...]
    order_by: tuple[OrderKey, ...]
    limit: int  # rows to return, after clamping (SQL fetches limit + 1)
    limit_written: bool  # the caller wrote a limit (part of the exploration's text)
    plan: Plan  # what running it needs: budgets, cost ceiling, masked positions
    notes: tuple[str, ...] = ()
    reads: frozenset[tuple[str, str]] = field(default_factory=frozenset)  # (dataset, column) the caller named
    # the contract's joins to parents (exists_with), after the caller's, each on a relation's declared columns
    implied: tuple[Join, ...] = ()
    # ORDER BY keys after the caller's that make the order total (paging.py), and whether it is total
    tiebreak: tuple[OrderKey, ...] = ()
    pageable: bool = False
    offset: int = 0  # rows skipped: a later page of a truncated answer (set by the pipeline, never by binding)

    @property
    def sources(self) -> tuple[Source, ...]:
        """What the caller reads: the root, then each source the caller's relations reach (not the implied)."""
        return (self.root, *(j.source for j in self.joins))

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)
