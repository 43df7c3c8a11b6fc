"""Guard stage, the allow-list's tables: the functions, operators and casts the walk accepts, and why others are refused."""

from __future__ import annotations

AGGREGATES = frozenset({"count", "min", "max", "sum", "avg"})
COMPARISONS = frozenset({"=", "<>", "!=", "<", "<=", ">", ">="})
LIKE_OPS = frozenset({"~~", "!~~", "~~*", "!~~*"})
FLIPPED = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}  # `value op column` as `column op' value`
CAST_TYPES = frozenset({"int2", "int4", "int8", "integer", "bigint", "smallint", "numeric", "text", "varchar",
                        "bool", "boolean", "date", "timestamp", "timestamptz", "float8"})
SYSTEM_COLUMNS = frozenset({"ctid", "xmin", "xmax", "cmin", "cmax", "tableoid", "oid"})
WHY = {
    "RangeFunction": "functions in FROM are not allowed",
    "RangeSubselect": "subqueries are not allowed",
    "SubLink": "subqueries are not allowed",
    "CommonTableExpr": "WITH (CTEs) is not allowed",
    "WithClause": "WITH (CTEs) is not allowed",
    "RangeTableSample": "TABLESAMPLE is not allowed",
    "RowExpr": "row constructors are not allowed",
    "A_Indirection": "subscripts and field selections are not allowed",
    "CollateClause": "COLLATE is not allowed",
    "IntoClause": "SELECT INTO is not allowed",
    "LockingClause": "FOR UPDATE/SHARE is not allowed",
    "WindowDef": "window functions are not allowed",
    "A_Star": "* is not allowed: name the columns",
    "CaseExpr": "CASE is not allowed",
    "CoalesceExpr": "COALESCE is not allowed",
    "MinMaxExpr": "GREATEST/LEAST are not allowed",
    "SQLValueFunction": "SQL value functions (CURRENT_USER, ...) are not allowed",
    "BooleanTest": "IS TRUE/FALSE tests are not allowed",
    "ParamRef": "parameters are only allowed as values",
}
