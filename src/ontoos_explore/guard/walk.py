"""Guard stage, the walk: one SELECT's parse tree + AllowedSet -> violations and what it reads.

Every slot of every node and every item of every list is visited, iteratively,
so nothing nested hides. The allow-list is exactly the node kinds with a
`visit_<Kind>` method (`ALLOWED_KINDS`); any other kind is a violation. What
the walk reads off the tree for policy (conjuncts, equalities, what is
compared with what) is in `facts.py`.
"""

from __future__ import annotations

from typing import Any

from .allowlist import AGGREGATES, CAST_TYPES, COMPARISONS, LIKE_OPS, SYSTEM_COLUMNS, WHY  # noqa: F401 (re-exported)
from .nodes import _const_int, _ident, _location, _node, _strings
from .facts import Facts, _top_level
from .verdict import AllowedSet, Conjunct, Violation

class _Checker(Facts):
    def __init__(self, sql: str, allowed: AllowedSet, n_params: int | None) -> None:
        self.sql = sql
        self.allowed = allowed
        self.n_params = n_params
        self.violations: list[Violation] = []
        self.ranges: dict[str, tuple[str, str]] = {}  # alias (or table name) -> (schema, table)
        self.columns: set[tuple[str, str, str]] = set()
        self.placed: set[tuple[str, str, str, str]] = set()  # (clause, schema, table, column)
        self.clause = ""
        self.params: set[int] = set()
        self.targets: list[set[tuple[str, str, str]]] = []  # per SELECT-list item, in order: the columns it reads
        self.target: set[tuple[str, str, str]] = set()  # the item being walked (the walk is depth-first)
        self.conjuncts: list[Conjunct] = []  # the simple tests ANDed at the top of WHERE, in text order
        self.equalities: set[tuple[tuple[str, str], tuple[str, str]]] = set()  # see Verdict.equalities
        self.compared: set[tuple[tuple[str, str, str], tuple[str, Any]]] = set()  # see Verdict.compared

    def fail(self, kind: str, message: str, body: dict | None = None) -> None:
        self.violations.append(Violation(kind, message, _location(body)))

    # ------------------------------------------------------------ the walk

    def walk(self, root: Any) -> None:
        # (value, slot in its parent, clause of the SELECT it sits in: targetList, whereClause, ...).
        # Only dicts and lists are pushed: scalars (locations, flags, strings) are never visited.
        stack: list[tuple[Any, str, str]] = [(root, "stmt", "")]
        pop, extend = stack.pop, stack.extend
        while stack:
            value, slot, clause = pop()
            if type(value) is list:
                extend([(v, slot, clause) for v in reversed(value) if type(v) is dict or type(v) is list])
                continue
            if not value:
                continue
            if len(value) == 1:
                kind, body = next(iter(value.items()))
                if type(body) is dict and kind[:1].isupper():  # a parse-tree node (see _node)
                    visit = _VISITORS.get(kind)
                    if visit is None:
                        self.fail(kind, WHY.get(kind) or f"{kind} is not allowed", body)
                        continue
                    self.clause = clause
                    if getattr(self, visit)(body, slot) is not False:
                        select = kind == "SelectStmt"
                        extend([(v, k, k if select else clause) for k, v in reversed(body.items())
                                if type(v) is dict or type(v) is list])
                    continue
            # a plain mapping of fields: visit each slot
            extend([(v, k, clause) for k, v in reversed(value.items()) if type(v) is dict or type(v) is list])

    # ------------------------------------------------------------ statements

    def visit_SelectStmt(self, b: dict, slot: str) -> bool:
        if slot != "stmt":
            self.fail("SelectStmt", "nested SELECT is not allowed", b)
            return False
        if b.get("op", "SETOP_NONE") != "SETOP_NONE":
            self.fail("SelectStmt", "UNION/INTERSECT/EXCEPT are not allowed", b)
            return False
        for key, why in (("intoClause", "SELECT INTO is not allowed"), ("lockingClause", "FOR UPDATE/SHARE is not allowed"),
                         ("withClause", "WITH (CTEs) is not allowed"), ("valuesLists", "VALUES is not allowed"),
                         ("windowClause", "WINDOW is not allowed")):
            if b.get(key):
                self.fail(key[0].upper() + key[1:], why, b)
        if not b.get("fromClause"):
            self.fail("SelectStmt", "a FROM clause naming an allowed relation is required", b)
        self._check_limit(b)
        inner_ons = self._collect_ranges(b.get("fromClause") or [])
        for kind, body in _top_level(b.get("whereClause")):
            found = self._conjunct(kind, body)
            if found is not None:
                self.conjuncts.append(found)
            self._equality(kind, body)
        for on in inner_ons:
            for kind, body in _top_level(on):
                self._equality(kind, body)
        return True

    def _check_limit(self, b: dict) -> None:
        if b.get("limitOption") not in (None, "LIMIT_OPTION_COUNT", "LIMIT_OPTION_DEFAULT"):
            self.fail("LimitOption", "FETCH ... WITH TIES is not allowed", b)
        count = _node(b.get("limitCount"))
        if self.allowed.max_rows is None and count is None:
            return
        ceiling = None if self.allowed.max_rows is None else self.allowed.max_rows + 1
        if count is None or count[0] != "A_Const" or _const_int(count[1]) is None:
            self.fail("Limit", f"a constant LIMIT{f' of at most {ceiling}' if ceiling else ''} is required", b)
            return
        n = _const_int(count[1])
        if ceiling is not None and n > ceiling:
            self.fail("Limit", f"LIMIT {n} is above the budget (at most {ceiling})", count[1])
        offset = _node(b.get("limitOffset"))
        if offset is not None and (offset[0] != "A_Const" or _const_int(offset[1]) is None):
            self.fail("Limit", "OFFSET must be a constant integer", offset[1])

    def _collect_ranges(self, from_clause: list) -> list[Any]:
        """Each FROM item's alias (or table name) -> its table, into `ranges`; returns the ON conditions
        of the INNER joins, read once every alias is known."""
        stack, inner_ons = list(from_clause), []
        while stack:
            node = _node(stack.pop())
            if node is None:
                continue
            kind, body = node
            if kind == "JoinExpr":
                stack.extend([body.get("larg"), body.get("rarg")])
                if body.get("jointype") == "JOIN_INNER":
                    inner_ons.append(body.get("quals"))
            elif kind == "RangeVar":
                table = (_ident(body.get("schemaname", "")), _ident(body.get("relname", "")))
                alias_node = body.get("alias") or {}
                name = _ident(alias_node.get("aliasname") or table[1])
                if name in self.ranges:
                    self.fail("RangeVar", f"'{name}' names two relations in FROM", body)
                self.ranges[name] = table
        return inner_ons

    # ------------------------------------------------------------ FROM

    def visit_RangeVar(self, b: dict, slot: str) -> bool:
        if slot not in ("fromClause", "larg", "rarg"):
            self.fail("RangeVar", "a relation may appear only in FROM", b)
            return False
        schema, table = b.get("schemaname"), b.get("relname", "")
        if b.get("catalogname"):
            self.fail("RangeVar", "a database-qualified name is not allowed", b)
        elif not schema:
            self.fail("RangeVar", f"'{table}' must be schema-qualified", b)
        elif (_ident(schema), _ident(table)) not in self.allowed.relations:
            self.fail("RangeVar", f"'{schema}.{table}' is not an allowed relation", b)
        if not b.get("inh"):  # the JSON output leaves out false: ONLY
            self.fail("RangeVar", "ONLY is not allowed", b)
        alias = b.get("alias")
        if alias and alias.get("colnames"):
            self.fail("Alias", "column aliases on a relation are not allowed", b)
        return False  # the alias is a name, nothing more to see

    def visit_JoinExpr(self, b: dict, slot: str) -> bool:
        if b.get("jointype") not in ("JOIN_INNER", "JOIN_LEFT"):
            self.fail("JoinExpr", f"{b.get('jointype', 'this join')} is not allowed; use INNER or LEFT JOIN", b)
        if b.get("isNatural") or b.get("usingClause") or b.get("alias") or b.get("join_using_alias"):
            self.fail("JoinExpr", "joins must be written JOIN ... ON, without NATURAL, USING or an alias", b)
        if not b.get("quals"):
            self.fail("JoinExpr", "a join needs an ON condition", b)
        return True

    # ------------------------------------------------------------ expressions

    def visit_ResTarget(self, b: dict, slot: str) -> bool:
        if slot == "targetList":  # an item of the one SELECT's list: what follows, up to the next, is inside it
            self.target = set()
            self.targets.append(self.target)
        if b.get("indirection"):
            self.fail("ResTarget", "indirection is not allowed", b)
        return True

    def visit_ColumnRef(self, b: dict, slot: str) -> bool:
        names = _strings(b.get("fields"))
        if any(n is None for n in names):
            self.fail("A_Star", "* is not allowed: name the columns", b)
            return False
        names = [_ident(n) for n in names]
        if len(names) == 2:
            alias, column = names
            table = self.ranges.get(alias)
            if table is None:
                self.fail("ColumnRef", f"'{alias}' is not a relation in FROM", b)
            else:
                self._column(table, column, b)
        elif len(names) == 1:
            (column,) = names
            if column in self.ranges:
                self.fail("ColumnRef", f"'{column}' is a whole-row reference: name the columns", b)
                return False
            owners = [t for t in self.ranges.values() if column in self.allowed.relations.get(t, ())]
            if len(owners) != 1:
                why = "names no readable column" if not owners else "is ambiguous: qualify it"
                self.fail("ColumnRef", f"'{column}' {why}", b)
            else:
                self._column(owners[0], column, b)
        else:
            self.fail("ColumnRef", "write columns as alias.column", b)
        return False

    def _column(self, table: tuple[str, str], column: str, b: dict) -> None:
        if column in SYSTEM_COLUMNS:
            self.fail("ColumnRef", f"system column '{column}' is not allowed", b)
        elif column not in self.allowed.relations.get(table, ()):
            self.fail("ColumnRef", f"'{column}' is not a readable column of {table[0]}.{table[1]}", b)
        else:
            self.columns.add((*table, column))
            self.placed.add((self.clause, *table, column))
            if self.clause == "targetList":
                self.target.add((*table, column))

    def visit_ParamRef(self, b: dict, slot: str) -> bool:
        n = b.get("number", 0)
        if self.n_params is not None and not 1 <= n <= self.n_params:
            self.fail("ParamRef", f"${n} is not one of the {self.n_params} given parameters", b)
        elif n < 1:
            self.fail("ParamRef", "positional parameters start at $1", b)
        self.params.add(n)
        return False

    def visit_A_Const(self, b: dict, slot: str) -> bool:
        if slot not in ("limitCount", "limitOffset"):
            self.fail("A_Const", "constants are only allowed in LIMIT/OFFSET: pass values as $n parameters", b)
        return False

    def visit_A_Expr(self, b: dict, slot: str) -> bool:
        kind = b.get("kind")
        names = _strings(b.get("name"))
        op = names[0] if len(names) == 1 else None
        if len(names) != 1:
            self.fail("A_Expr", "qualified operators (OPERATOR(schema.op)) are not allowed", b)
            return False
        ok = (
            (kind == "AEXPR_OP" and op in COMPARISONS)
            or (kind == "AEXPR_IN" and op in ("=", "<>"))
            or (kind in ("AEXPR_BETWEEN", "AEXPR_NOT_BETWEEN"))
            or (kind == "AEXPR_LIKE" and op in ("~~", "!~~"))
            or (kind == "AEXPR_ILIKE" and op in ("~~*", "!~~*"))
            or (kind == "AEXPR_OP" and op in LIKE_OPS)
        )
        if not ok:
            self.fail("A_Expr", f"operator {op!r} ({kind}) is not allowed", b)
            return False
        if kind == "AEXPR_OP" and (b.get("lexpr") is None or b.get("rexpr") is None):
            self.fail("A_Expr", "prefix operators are not allowed", b)
            return False
        if self.clause in ("whereClause", "fromClause"):
            self._note_compared(b)
        return True

    def visit_List(self, b: dict, slot: str) -> bool:
        if slot != "rexpr":
            self.fail("List", "lists are only allowed after IN or BETWEEN", b)
            return False
        return True

    def visit_BoolExpr(self, b: dict, slot: str) -> bool:
        return True

    def visit_NullTest(self, b: dict, slot: str) -> bool:
        if b.get("argisrow"):
            self.fail("NullTest", "row IS NULL is not allowed", b)
        return True

    def visit_SortBy(self, b: dict, slot: str) -> bool:
        if b.get("useOp"):
            self.fail("SortBy", "ORDER BY ... USING is not allowed", b)
        return True

    def visit_FuncCall(self, b: dict, slot: str) -> bool:
        names = _strings(b.get("funcname"))
        name = names[0] if len(names) == 1 else ".".join(n or "?" for n in names)
        if len(names) != 1 or name not in AGGREGATES:
            self.fail("FuncCall", f"function '{name}' is not allowed (allowed: {', '.join(sorted(AGGREGATES))})", b)
            return False
        for key, why in (("agg_filter", "FILTER"), ("over", "OVER"), ("agg_order", "ORDER BY inside an aggregate"),
                         ("agg_within_group", "WITHIN GROUP"), ("func_variadic", "VARIADIC")):
            if b.get(key):
                self.fail("FuncCall", f"{why} is not allowed", b)
                return False
        if b.get("agg_star") and name != "count":
            self.fail("FuncCall", f"{name}(*) is not allowed", b)
        args = b.get("args") or []
        if not b.get("agg_star") and len(args) != 1:
            self.fail("FuncCall", f"{name} takes exactly one column", b)
            return False
        return True

    def visit_TypeCast(self, b: dict, slot: str) -> bool:
        arg = _node(b.get("arg"))
        type_names = _strings((b.get("typeName") or {}).get("names"))
        type_name = type_names[-1] if type_names else None
        if arg is None or arg[0] != "ParamRef":
            self.fail("TypeCast", "casts are only allowed on $n parameters", b)
            return False
        if type_name not in CAST_TYPES or (b.get("typeName") or {}).get("arrayBounds"):
            self.fail("TypeCast", f"cast to {type_name!r} is not allowed", b)
            return False
        if len(type_names) == 2 and type_names[0] != "pg_catalog":
            self.fail("TypeCast", "casts to user-defined types are not allowed", b)
            return False
        self.visit_ParamRef(arg[1], "arg")
        return False

    def visit_String(self, b: dict, slot: str) -> bool:
        return False

    def finish(self) -> None:
        if self.n_params is None and self.params and self.params != set(range(1, max(self.params) + 1)):
            missing = sorted(set(range(1, max(self.params) + 1)) - self.params)
            self.fail("ParamRef", f"parameters must be numbered $1..$n without gaps; missing ${missing[0]}")
        if self.n_params is not None and len(self.params) != self.n_params:
            unused = sorted(set(range(1, self.n_params + 1)) - self.params)
            if unused:
                self.fail("ParamRef", f"${unused[0]} is given but not used")


# The allow-list is exactly the kinds with a visitor.
ALLOWED_KINDS = frozenset(name.removeprefix("visit_") for name in vars(_Checker) if name.startswith("visit_"))
_VISITORS = {kind: "visit_" + kind for kind in ALLOWED_KINDS}  # looked up by name: a subclass may override
