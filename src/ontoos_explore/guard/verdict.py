"""Guard stage, its types: what may be read (`AllowedSet`) and what was found (`Violation`, `Verdict`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class AllowedSet:
    """What may be read: (schema, table) -> readable columns; and the row budget."""

    relations: Mapping[tuple[str, str], frozenset[str]]
    max_rows: int | None = None  # LIMIT must be a constant <= max_rows + 1; None: any constant


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str  # the offending node kind (or ParseError, Statement, ...)
    message: str
    location: int | None = None  # byte offset into the SQL

    def to_json(self, sql: str) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.location is not None and self.location >= 0:
            line, column = line_column(sql, self.location)
            out.update(line=line, column=column)
        return out


@dataclass(frozen=True, slots=True)
class Conjunct:
    """One conjunct of the top-level AND of WHERE (or the whole WHERE) that tests one column against
    constants: `column op value`, `value op column`, `column [NOT] IN (values)`, `NOT (column IN (values))`,
    `column IS [NOT] NULL`. What policy needs to see that a filter holds for every row read."""

    alias: str  # the FROM item the column belongs to (a table read twice is two aliases)
    schema: str
    table: str
    column: str
    op: str  # PostgreSQL's spelling, column on the left: = <> < <= > >=, IN, NOT IN, IS NULL, IS NOT NULL
    kind: str  # "const": literal constants; "param": $n parameters (no cast); "none": IS [NOT] NULL
    values: tuple[Any, ...]  # const: the constants (int, Decimal, str, bool); param: the $n numbers; none: ()
    location: int | None = None  # byte offset of the test in the SQL


@dataclass(frozen=True, slots=True)
class Verdict:
    violations: tuple[Violation, ...]
    relations: frozenset[tuple[str, str]] = frozenset()
    columns: frozenset[tuple[str, str, str]] = frozenset()  # (schema, table, column) read
    placed: frozenset[tuple[str, str, str, str]] = frozenset()  # (clause, schema, table, column): where each is read
    # One entry per item of the SELECT list, in order: the (schema, table, column) it reads
    # (empty for count(*) or a parameter). A named query masks an output position by it.
    targets: tuple[frozenset[tuple[str, str, str]], ...] = ()
    ranges: frozenset[tuple[str, str, str]] = frozenset()  # (alias, schema, table) of each relation in FROM
    # The top-level conjuncts of WHERE that are simple tests of one column against constants or
    # single $n parameters, in text order (a conjunct of any other shape is left out).
    conjuncts: tuple[Conjunct, ...] = ()
    # The column equalities every row read satisfies: `a.x = b.y` ANDed at the top level of WHERE or of
    # an INNER JOIN's ON (a row an outer join keeps without a match need not satisfy its ON; one an
    # outer join above an inner join null-extends has neither side). Each pair is ((alias, column),
    # (alias, column)), the two sorted: how policy sees that a child is joined to its parent.
    equalities: frozenset[tuple[tuple[str, str], tuple[str, str]]] = frozenset()
    # What each column read in WHERE or ON is compared with, anywhere there (an operand of the same
    # comparison, IN or BETWEEN list, or LIKE): ((schema, table, column), ("param", n)) for a `$n`
    # (cast or not), ((schema, table, column), ("column", (schema, table, column))) for another column
    # (both ways round). How policy sees that a hidden column is tested against a caller's value.
    compared: frozenset[tuple[tuple[str, str, str], tuple[str, Any]]] = frozenset()

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_json(self, sql: str) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "violations": [v.to_json(sql) for v in self.violations],
            "relations": sorted(f"{s}.{t}" for s, t in self.relations),
            "columns": sorted(f"{s}.{t}.{c}" for s, t, c in self.columns),
        }


def line_column(sql: str, byte_offset: int) -> tuple[int, int]:
    """The 1-based (line, column) of a byte offset into `sql`."""
    prefix = sql.encode("utf-8", errors="surrogatepass")[:byte_offset].decode("utf-8", errors="ignore")
    return prefix.count("\n") + 1, len(prefix) - (prefix.rfind("\n") + 1) + 1
