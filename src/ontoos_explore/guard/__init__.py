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
benchmarks/ measures it), which reads a C string: SQL with a NUL anywhere is
refused before parsing (the parser would stop there and check only what
comes before), as is text with an unpaired surrogate. The types are in
`verdict.py`, the parse-tree readers in `nodes.py`.

Besides violations, the verdict says what policy needs about the SQL, from
the same walk: the relations and columns read, where each column is placed
(`placed`: its clause), what each SELECT-list item reads (`targets`), each
FROM item (`ranges`), the simple tests ANDed at the top of WHERE
(`conjuncts`), the column equalities ANDed there or in an INNER JOIN's ON
(`equalities`) and what each column in WHERE or ON is compared with
(`compared`), so the contract's named-query rules need no second parse.

    >>> allowed = AllowedSet({("lake", "t"): frozenset({"a"})}, max_rows=10)
    >>> check('SELECT "x"."a" FROM "lake"."t" AS "x" LIMIT 11', allowed).ok
    True
"""

from __future__ import annotations

import json

from pglast.parser import ParseError, parse_sql_json

from .nodes import MAX_NAME_BYTES, _node
from .verdict import AllowedSet, Conjunct, Verdict, Violation, line_column
from .walk import AGGREGATES, ALLOWED_KINDS, CAST_TYPES, COMPARISONS, LIKE_OPS, SYSTEM_COLUMNS, WHY, _Checker

__all__ = [
    "AGGREGATES", "ALLOWED_KINDS", "CAST_TYPES", "COMPARISONS", "LIKE_OPS", "MAX_NAME_BYTES", "STATEMENT_WORDS",
    "SYSTEM_COLUMNS", "WHY", "AllowedSet", "Conjunct", "Verdict", "Violation", "check", "line_column",
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
    unreadable = _unreadable_text(sql)
    if unreadable is not None:
        return Verdict((unreadable,))
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
        frozenset((alias, *table) for alias, table in checker.ranges.items()),
        tuple(checker.conjuncts),
        frozenset(checker.equalities),
        frozenset(checker.compared),
    )


def _unreadable_text(sql: str) -> Violation | None:
    """Text the parser would not read as it is: libpg_query reads a C string, so it stops at the first
    NUL and would verify only what comes before; an unpaired surrogate is no UTF-8 at all."""
    nul = sql.find("\0")
    if nul >= 0:
        offset = len(sql[:nul].encode("utf-8", errors="surrogatepass"))
        return Violation("NulCharacter", "the SQL contains a NUL character: the parser stops at NUL, so what "
                         "follows it would go unchecked; remove it", offset)
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as e:
        offset = len(sql[:e.start].encode("utf-8", errors="surrogatepass"))
        return Violation("Encoding", "the SQL contains an unpaired surrogate, which is not UTF-8 text", offset)
    return None
