"""Guard stage: SQL text + allowed set -> Verdict, by PostgreSQL's own parser (pglast).

The second wall. It knows nothing of the exploration language: given any SQL
(compiled explorations, hand-written named queries), the bind parameters'
count and the physical relations and columns that may be read, it accepts
only one plain SELECT built from a positive allow-list of node kinds.

The walk (`walk.py`) is generic and iterative: every slot of every node and
every item of every list is visited, so nothing nested hides (the bypass of a
public guard was a function inside `RangeFunction.functions`, a list of lists).
A node kind without a `visit_<Kind>` check is a violation. It parses with
libpg_query's JSON output (about 40 us for a compiled exploration;
benchmarks/ measures it). The types are in `verdict.py`, the parse-tree
readers in `nodes.py`.

    >>> allowed = AllowedSet({("lake", "t"): frozenset({"a"})}, max_rows=10)
    >>> check('SELECT "x"."a" FROM "lake"."t" AS "x" LIMIT 11', allowed).ok
    True
"""

from __future__ import annotations

import json

from pglast.parser import ParseError, parse_sql_json

from .nodes import MAX_NAME_BYTES, _node
from .verdict import AllowedSet, Verdict, Violation, line_column
from .walk import AGGREGATES, ALLOWED_KINDS, CAST_TYPES, COMPARISONS, LIKE_OPS, SYSTEM_COLUMNS, WHY, _Checker

__all__ = [
    "AGGREGATES", "ALLOWED_KINDS", "CAST_TYPES", "COMPARISONS", "LIKE_OPS", "MAX_NAME_BYTES", "STATEMENT_WORDS",
    "SYSTEM_COLUMNS", "WHY", "AllowedSet", "Verdict", "Violation", "check", "line_column",
]

STATEMENT_WORDS = {
    "InsertStmt": "INSERT", "UpdateStmt": "UPDATE", "DeleteStmt": "DELETE", "MergeStmt": "MERGE",
    "CopyStmt": "COPY", "CreateStmt": "CREATE", "DropStmt": "DROP", "TruncateStmt": "TRUNCATE",
    "TransactionStmt": "a transaction statement", "VariableSetStmt": "SET", "DoStmt": "DO",
    "ExplainStmt": "EXPLAIN", "CallStmt": "CALL", "GrantStmt": "GRANT", "AlterTableStmt": "ALTER",
    "CreateTableAsStmt": "CREATE TABLE AS", "ListenStmt": "LISTEN", "NotifyStmt": "NOTIFY",
    "LockStmt": "LOCK", "VacuumStmt": "VACUUM", "PrepareStmt": "PREPARE", "ExecuteStmt": "EXECUTE",
}


def check(sql: str, allowed: AllowedSet, n_params: int | None = None) -> Verdict:
    """Verify `sql` against `allowed`. `n_params`: how many $n values will be bound
    (None: any, numbered $1..$n without gaps)."""
    try:
        tree = json.loads(parse_sql_json(sql))
    except ParseError as e:
        return Verdict((Violation("ParseError", f"not valid SQL: {e.args[0] if e.args else e}", getattr(e, "location", None)),))
    except RecursionError:
        return Verdict((Violation("ParseError", "the statement nests too deeply"),))
    stmts = tree.get("stmts", [])
    if len(stmts) != 1:
        return Verdict((Violation("Statement", f"exactly one statement is allowed; found {len(stmts)}"),))
    stmt = _node(stmts[0].get("stmt"))
    if stmt is None or stmt[0] != "SelectStmt":
        kind = stmt[0] if stmt else "Statement"
        word = STATEMENT_WORDS.get(kind, kind)
        return Verdict((Violation(kind, f"only a plain SELECT is allowed; found {word}", (stmt[1] if stmt else {}).get("location")),))
    checker = _Checker(sql, allowed, n_params)
    try:
        checker.walk(stmts[0]["stmt"])
    except RecursionError:  # pragma: no cover - the walk is iterative
        checker.fail("Statement", "the statement nests too deeply")
    checker.finish()
    return Verdict(
        tuple(checker.violations),
        frozenset(checker.ranges.values()),
        frozenset(checker.columns),
        frozenset(checker.placed),
        tuple(frozenset(t) for t in checker.targets),
    )
