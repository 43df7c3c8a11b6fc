"""Guard stage, the facts: what one SELECT says, read off its parse tree for policy while the walk checks it.

`Facts` is mixed into the walk's checker (`walk._Checker`), whose FROM items
(`ranges`) and allowed set it reads: the simple tests ANDed at the top of WHERE
(`Conjunct`s), the column equalities every row satisfies, and what each
column in WHERE or ON is compared with. Nothing here checks anything: the walk
visits every one of these nodes as it visits all the others.
"""

from __future__ import annotations

from typing import Any

from .allowlist import FLIPPED, SYSTEM_COLUMNS
from .nodes import NO_VALUE, _const_value, _ident, _node, _strings
from .verdict import AllowedSet, Conjunct


class Facts:
    ranges: dict[str, tuple[str, str]]  # alias (or table name) -> (schema, table): the walk's
    allowed: AllowedSet
    conjuncts: list[Conjunct]
    equalities: set[tuple[tuple[str, str], tuple[str, str]]]
    compared: set[tuple[tuple[str, str, str], tuple[str, Any]]]

    # ------------------------------------------------------------ the top-level conjuncts of WHERE and ON

    def _equality(self, kind: str, body: dict) -> None:
        """`a.x = b.y` between two columns the walk will accept, into `equalities`."""
        if kind != "A_Expr" or body.get("kind") != "AEXPR_OP" or _strings(body.get("name")) != ["="]:
            return
        left, right = self._simple_column(body.get("lexpr")), self._simple_column(body.get("rexpr"))
        if left is not None and right is not None:
            a, b = (left[0], left[3]), (right[0], right[3])
            self.equalities.add((a, b) if a <= b else (b, a))

    def _conjunct(self, kind: str, body: dict) -> Conjunct | None:
        location = body.get("location")
        if kind == "NullTest":
            col = None if body.get("argisrow") else self._simple_column(body.get("arg"))
            op = "IS NOT NULL" if body.get("nulltesttype") == "IS_NOT_NULL" else "IS NULL"
            return None if col is None else Conjunct(*col, op, "none", (), location)
        negated = False
        if kind == "BoolExpr" and body.get("boolop") == "NOT_EXPR" and len(body.get("args") or ()) == 1:
            inner = _node(body["args"][0])  # NOT (column IN (...)), as the compiler writes NOT IN
            if inner is None or inner[0] != "A_Expr" or inner[1].get("kind") != "AEXPR_IN":
                return None
            (kind, body), negated = inner, True
        if kind != "A_Expr":
            return None
        names = _strings(body.get("name"))
        op = names[0] if len(names) == 1 else None
        if body.get("kind") == "AEXPR_IN" and op in ("=", "<>"):
            col = self._simple_column(body.get("lexpr"))
            items = _node(body.get("rexpr"))
            values = self._values(items[1].get("items") or []) if items and items[0] == "List" else None
            if col is None or values is None:
                return None
            return Conjunct(*col, "IN" if (op == "=") != negated else "NOT IN", *values, location)
        if negated or body.get("kind") != "AEXPR_OP" or op not in FLIPPED:
            return None
        col, values = self._simple_column(body.get("lexpr")), self._values([body.get("rexpr")])
        if col is None:  # value op column
            col, values, op = self._simple_column(body.get("rexpr")), self._values([body.get("lexpr")]), FLIPPED[op]
        if col is None or values is None:
            return None
        return Conjunct(*col, op, *values, location)

    def _simple_column(self, value: Any) -> tuple[str, str, str, str] | None:
        """(alias, schema, table, column) of a column reference the walk will accept, else None."""
        node = _node(value)
        if node is None or node[0] != "ColumnRef":
            return None
        names = _strings(node[1].get("fields"))
        if not names or any(n is None for n in names):
            return None
        names = [_ident(n) for n in names]
        if len(names) == 2:
            alias, column = names
        elif len(names) == 1 and names[0] not in self.ranges:
            column = names[0]
            aliases = [a for a, t in self.ranges.items() if column in self.allowed.relations.get(t, ())]
            alias = aliases[0] if len(aliases) == 1 else ""
        else:
            return None
        table = self.ranges.get(alias)
        if table is None or column in SYSTEM_COLUMNS or column not in self.allowed.relations.get(table, ()):
            return None
        return alias, table[0], table[1], column

    @staticmethod
    def _values(items: list) -> tuple[str, tuple] | None:
        """("const", the constants) or ("param", the $n numbers) when every item is one of the same kind."""
        out: list[tuple[str, Any]] = []
        for item in items:
            node = _node(item)
            if node is not None and node[0] == "A_Const" and _const_value(node[1]) is not NO_VALUE:
                out.append(("const", _const_value(node[1])))
            elif node is not None and node[0] == "ParamRef":
                out.append(("param", node[1].get("number", 0)))
            else:
                return None
        kinds = {k for k, _ in out}
        return (kinds.pop(), tuple(v for _, v in out)) if len(kinds) == 1 else None

    # ------------------------------------------------------------ what each column is compared with

    def _note_compared(self, b: dict) -> None:
        """Each column operand of a test in WHERE or ON, with each other operand that is a column or a
        `$n`, into `compared` (for policy; the walk checks the operands as it checks everything)."""
        operands = []
        for side in (b.get("lexpr"), b.get("rexpr")):
            node = _node(side)
            items = node[1].get("items") or [] if node is not None and node[0] == "List" else [side]
            operands.extend(self._operand(item) for item in items)
        columns = [o for o in operands if o is not None and o[0] == "column"]
        for _, column in columns:
            self.compared.update((column, o) for o in operands if o is not None and o[1] != column)

    def _operand(self, value: Any) -> tuple[str, Any] | None:
        node = _node(value)
        if node is not None and node[0] == "TypeCast":
            node = _node(node[1].get("arg"))
        if node is not None and node[0] == "ParamRef":
            return "param", node[1].get("number", 0)
        col = self._simple_column(value)
        return None if col is None else ("column", col[1:])


def _top_level(condition: Any) -> list[tuple[str, dict]]:
    """The conjuncts of a condition's top-level AND (an AND nested in it is more of the same conjunction;
    a condition that is no AND is its one conjunct), in text order, as (kind, body)."""
    out, stack = [], [condition]
    while stack:
        node = _node(stack.pop())
        if node is None:
            continue
        kind, body = node
        if kind == "BoolExpr" and body.get("boolop") == "AND_EXPR":
            stack.extend(reversed(body.get("args") or []))
        else:
            out.append((kind, body))
    return out
