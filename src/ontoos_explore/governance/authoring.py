"""Governance, the authors' registry format: an entry as its authors write it <-> the fields `NamedQuery` holds.

Authors write the SQL with `:name` placeholders and the parameters as a list
of typed records; budgets, roles and the inventory are objects of their own:

    version: 1
    queries:
      - id: table_change_blast_radius
        title: Workloads that touch a table
        domain: fault
        params:
          - {name: table_name, type: string, required: true, description: Physical table name}
          - {name: lane, type: enum, values: [mybatis, jpa], default: mybatis}
          - {name: window.from, type: date}         # or {name: from, parent: window, ...}
        constants:
          - {name: kept, type: boolean, value: false}  # an always-filter value, never a caller's
        budget: {timeout_s: 60, max_rows: 500, heavy: false}
        read_sets: [published]
        auth: {roles: [viewer, analyst]}
        inventory: {origin: ..., owner: ..., status: migrated}
        sql: SELECT ... WHERE lower(t.table_name) = lower(:table_name) ...

`normalize(item)` turns such an entry into the record `NamedQuery` reads:
each `:name` becomes `$n` (numbered by first appearance; one name is one
`$n`, however often it is written) and `bind` lists what each `$n` stands
for, a parameter's name or a constant. The placeholders are found with
PostgreSQL's own lexer (`pglast.parser.scan`), so a `:x` inside a string, a
quoted identifier or a comment, and a `::type` cast, are left alone. The
text that comes out is what the guard verifies and what runs. The output
columns are read off the SELECT list when the entry does not list them.
`authored(entry)` is the inverse, for promotion: the registry this service
writes is in the shape its authors write.

An entry already in the service's own shape (`parameters`, `$n`, `bind`)
passes through unchanged: both load.
"""

from __future__ import annotations

import re
from typing import Any

import pglast
from pglast import ast

from ..policy.named import NamedQueryInvalid

# the authors' type names -> the contract's (the contract's own are accepted as they are)
TYPES = {"string": "text", "number": "numeric", "int": "integer", "bool": "boolean", "datetime": "timestamp"}
OUT_TYPES = {"text": "string", "numeric": "number"}
PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
AUTHORED_KEYS = ("params", "constants", "budget", "auth")  # any of these: the authors' shape


def is_authored(item: dict[str, Any]) -> bool:
    """Whether an entry is written in the authors' shape (else the service's own: `parameters`, `bind`)."""
    return "bind" not in item and ("parameters" not in item or any(k in item for k in AUTHORED_KEYS))


def normalize(item: dict[str, Any], default_status: str = "approved") -> dict[str, Any]:
    """The `NamedQuery` record of an entry in the authors' shape; one in the service's shape as it is
    (its status defaulting to `default_status` in both). Raises NamedQueryInvalid naming the problem."""
    if not is_authored(item):
        return {"status": default_status, **item}
    out = {k: v for k, v in item.items() if k not in (*AUTHORED_KEYS, "sql")}
    out.setdefault("status", default_status)
    params = [_param(p) for p in _records(item.get("params"), "params")]
    constants = {str(c.get("name")): c for c in _records(item.get("constants"), "constants")}
    out["parameters"] = params
    sql = item.get("sql")
    if not isinstance(sql, str):
        raise NamedQueryInvalid("sql must be a text")
    out["sql"], order = to_dollar(sql)
    declared = {p["name"] for p in params}
    bind: list[Any] = []
    for name in order:
        if name in declared:
            bind.append(name)
        elif name in constants:
            bind.append({"value": constants[name].get("value"), "type": _type(constants[name].get("type"))})
        else:
            raise NamedQueryInvalid(f"the SQL's :{name} is neither a parameter nor a constant of the entry")
    out["bind"] = bind
    budget = item.get("budget") or {}
    if not isinstance(budget, dict):
        raise NamedQueryInvalid("budget must be a mapping (timeout_s, max_rows, heavy)")
    unknown = sorted(set(budget) - {"timeout_s", "max_rows", "heavy"})
    if unknown:
        raise NamedQueryInvalid(f"budget has no field '{unknown[0]}' (timeout_s, max_rows, heavy)")
    if "max_rows" in budget:
        out["max_rows"] = budget["max_rows"]
    if budget.get("timeout_s") is not None:
        if not isinstance(budget["timeout_s"], (int, float)) or isinstance(budget["timeout_s"], bool):
            raise NamedQueryInvalid("budget.timeout_s must be a number of seconds")
        out["timeout_ms"] = max(1, round(budget["timeout_s"] * 1000))
    if "heavy" in budget:
        out["heavy"] = budget["heavy"]
    auth = item.get("auth")
    if auth is not None:
        if not isinstance(auth, dict) or set(auth) - {"roles"}:
            raise NamedQueryInvalid("auth must be a mapping with 'roles'")
        out["roles"] = auth.get("roles")
    if "columns" not in out:
        out["columns"] = output_names(out["sql"])
    return out


def _records(value: Any, what: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise NamedQueryInvalid(f"{what} must be a list of mappings")
    return value


def _type(t: Any) -> Any:
    return TYPES.get(t, t) if isinstance(t, str) else t


def _param(p: dict[str, Any]) -> dict[str, Any]:
    """A parameter record in the service's shape: its type named as the contract does, `parent` folded
    into a dotted name, `required` false unless said (a default makes it optional)."""
    out = {k: v for k, v in p.items() if k != "parent"}
    name, parent = p.get("name"), p.get("parent")
    if parent is not None:
        name = f"{parent}.{name}"
    if not isinstance(name, str) or not PATH.fullmatch(name):
        raise NamedQueryInvalid(f"parameter name {str(name)[:40]!r} must be an identifier (a.b for a nested one)")
    out["name"] = name
    out["type"] = _type(p.get("type", "text"))
    out["required"] = bool(p.get("required", False)) and p.get("default") is None
    return out


def _word(token: Any) -> bool:
    return token.name == "IDENT" or token.kind != "NO_KEYWORD"


def _continues(before: Any, colon: Any) -> bool:
    """Whether a `:` is part of what comes before it (`x:y`, `a[1:n]`): written right after a word,
    a number, a string or a `]`, it is no placeholder."""
    return (before is not None and before.end + 1 == colon.start
            and (_word(before) or before.name in ("ICONST", "FCONST", "SCONST", "ASCII_93")))


def to_dollar(sql: str) -> tuple[str, list[str]]:
    """(the SQL with each `:name` placeholder as `$n`, the names in `$n` order). A placeholder is a
    `:` followed at once by a word (a dotted path for a nested parameter), as PostgreSQL's lexer reads
    the text; `$n` written by hand is refused (one entry, one style)."""
    tokens = pglast.parser.scan(sql)
    out, order, at, i = [], {}, 0, 0
    while i < len(tokens):
        t = tokens[i]
        if t.name == "PARAM":
            raise NamedQueryInvalid("write parameters as :name (a $n belongs to the service's own shape, with bind)")
        if (t.name == "ASCII_58" and i + 1 < len(tokens) and tokens[i + 1].start == t.end + 1 and _word(tokens[i + 1])
                and not _continues(tokens[i - 1] if i else None, t)):
            j = i + 1  # the path: word (. word)*, every token touching the one before
            while (j + 2 < len(tokens) and tokens[j + 1].name == "ASCII_46" and tokens[j + 1].start == tokens[j].end + 1
                   and tokens[j + 2].start == tokens[j + 1].end + 1 and _word(tokens[j + 2])):
                j += 2
            name = sql[t.end + 1: tokens[j].end + 1]
            n = order.setdefault(name, len(order) + 1)
            out.append(sql[at:t.start])
            out.append(f"${n}")
            at = tokens[j].end + 1
            i = j + 1
            continue
        i += 1
    out.append(sql[at:])
    return "".join(out), list(order)


def to_named(sql: str, bind: tuple[Any, ...], constants: dict[int, str]) -> str:
    """The inverse of `to_dollar`: each `$n` as `:name`, the name of what `bind` says it is (a
    parameter's name, or `constants[n]` for a constant)."""
    tokens = pglast.parser.scan(sql)
    out, at = [], 0
    for t in tokens:
        if t.name == "PARAM":
            n = int(sql[t.start + 1: t.end + 1])
            b = bind[n - 1]
            out.append(sql[at:t.start])
            out.append(":" + (b if isinstance(b, str) else constants[n]))
            at = t.end + 1
    out.append(sql[at:])
    return "".join(out)


def output_names(sql: str) -> list[str]:
    """The names of the SELECT list's columns (an alias, else the column's own name), for an entry that
    does not list them; NamedQueryInvalid when one has neither."""
    try:
        stmts = pglast.parse_sql(sql)
    except pglast.parser.ParseError as e:
        raise NamedQueryInvalid(f"its SQL does not parse: {e.args[0] if e.args else e}") from None
    if len(stmts) != 1 or not isinstance(stmts[0].stmt, ast.SelectStmt):
        raise NamedQueryInvalid("its SQL must be one SELECT")
    select = stmts[0].stmt
    while select.op is not None and select.larg is not None and not select.targetList:  # UNION: the first's
        select = select.larg
    names = []
    for i, target in enumerate(select.targetList or ()):
        if target.name:
            names.append(target.name)
        elif isinstance(target.val, ast.ColumnRef) and isinstance(target.val.fields[-1], ast.String):
            names.append(target.val.fields[-1].sval)
        else:
            raise NamedQueryInvalid(f"name the SELECT list's item {i + 1} (AS name), or list the entry's columns")
    return names


def authored(record: dict[str, Any]) -> dict[str, Any]:
    """A `NamedQuery` record (model_dump) in the authors' shape: what promotion writes."""
    bind = tuple(record.get("bind") or ())
    constants: dict[int, str] = {}  # $n -> the constant's name: one name for one (type, value)
    named: dict[tuple[str, str], str] = {}
    taken = {p["name"] for p in record.get("parameters") or ()}
    const_records = []
    for n, b in enumerate(bind, 1):
        if isinstance(b, str):
            continue
        key = (b["type"], repr(b["value"]))
        if key not in named:
            name = "kept" if not named else f"kept_{len(named) + 1}"
            while name in taken:
                name += "_"
            taken.add(name)
            named[key] = name
            const_records.append({"name": name, "type": OUT_TYPES.get(b["type"], b["type"]), "value": b["value"]})
        constants[n] = named[key]
    out: dict[str, Any] = {}
    for k, v in record.items():
        if k in ("parameters", "bind", "sql", "max_rows", "timeout_ms", "heavy", "roles") or v in ([], {}):
            continue
        out[k] = v
    out["params"] = [{**p, "type": OUT_TYPES.get(p["type"], p["type"])} for p in record.get("parameters") or ()]
    if const_records:
        out["constants"] = const_records
    budget: dict[str, Any] = {"max_rows": record.get("max_rows", 100)}
    if record.get("timeout_ms") is not None:
        budget["timeout_s"] = record["timeout_ms"] / 1000
    budget["heavy"] = bool(record.get("heavy", False))
    out["budget"] = budget
    if record.get("roles") is not None:
        out["auth"] = {"roles": list(record["roles"])}
    out["sql"] = to_named(record["sql"], bind, constants)
    return out
