"""The reference for exists_with, written from the contract by hand (no policy, no compiler): which rows
of a dataset exist, as SQL conditions, and a copy of the lakehouse without the rows that do not.

A row of a dataset exists when each of its always-filters holds and, for each relation its
`exists_with` names, a row of the parent meets it on the relation's columns and exists itself.
`pruned(conn, contract)` deletes, from each dataset with parents, the rows whose parents do not
exist (the always-filtered rows of a dataset itself stay: both sides filter those). Exploring the
pruned copy under the contract without `exists_with` must answer exactly as exploring the real one
under the contract with it.
"""

from __future__ import annotations

import copy
from typing import Any

import psycopg
import yaml
from psycopg import sql

from ontoos_explore.contract import Contract, Dataset, FilterRule, parse_contract

OPS = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def table(ds: Dataset) -> sql.Composable:
    return sql.Identifier(ds.schema_name, ds.table_name)


def rule_holds(alias: str, rule: FilterRule) -> sql.Composable:
    col = sql.Identifier(alias, rule.column)
    if rule.op in ("is null", "is not null"):
        return sql.SQL("{} IS {}NULL").format(col, sql.SQL("NOT " if rule.op == "is not null" else ""))
    if rule.op in ("in", "not in"):
        values = sql.SQL(", ").join(sql.Literal(v) for v in rule.value)
        return sql.SQL("{} {} ({})").format(col, sql.SQL(rule.op.upper()), values)
    return sql.SQL("{} {} {}").format(col, sql.SQL(OPS[rule.op]), sql.Literal(rule.value))


def parents_exist(contract: Contract, ds: Dataset, alias: str, depth: int = 0) -> sql.Composable:
    """TRUE when every parent (exists_with) of the row `alias` of `ds` exists."""
    parts: list[sql.Composable] = []
    for i, rel in enumerate(contract.parents_of(ds.name)):
        parent, p = contract.dataset(rel.to), f"parent_{depth}_{i}"
        on = [sql.SQL("{} = {}").format(sql.Identifier(p, b), sql.Identifier(alias, a)) for a, b in rel.join.items()]
        parts.append(sql.SQL("EXISTS (SELECT 1 FROM {} AS {} WHERE {})").format(
            table(parent), sql.Identifier(p), sql.SQL(" AND ").join([*on, exists(contract, parent, p, depth + 1)])))
    return sql.SQL(" AND ").join(parts) if parts else sql.SQL("TRUE")


def exists(contract: Contract, ds: Dataset, alias: str, depth: int = 0) -> sql.Composable:
    """TRUE when the row `alias` of `ds` exists: its always-filters hold and its parents exist."""
    parts = [rule_holds(alias, r) for r in ds.always_filter] + [parents_exist(contract, ds, alias, depth)]
    return sql.SQL(" AND ").join(parts)


def count_existing(conn: psycopg.Connection, contract: Contract, ds: Dataset) -> int:
    return conn.execute(sql.SQL("SELECT count(*) FROM {} AS d WHERE {}").format(
        table(ds), exists(contract, ds, "d"))).fetchone()[0]


def generations(contract: Contract) -> dict[str, int]:
    """Dataset -> 0 for one without parents, else one more than its deepest parent."""
    out: dict[str, int] = {}

    def depth(name: str) -> int:
        if name not in out:
            out[name] = 1 + max((depth(contract.dataset(r.to).name) for r in contract.parents_of(name)), default=-1)
        return out[name]

    for name in contract.datasets:
        depth(name)
    return out


def prune(conn: psycopg.Connection, contract: Contract) -> dict[str, int]:
    """Delete the rows whose parents do not exist, descendants first (so a parent's rows are judged
    before any of its ancestors' change, and no foreign key points at a deleted row). Returns how many
    rows of each dataset went."""
    gone = {}
    order = sorted(generations(contract).items(), key=lambda kv: -kv[1])
    with conn.transaction():
        for name, generation in order:
            if generation == 0:
                continue
            ds = contract.dataset(name)
            cur = conn.execute(sql.SQL("DELETE FROM {} AS d WHERE NOT ({})").format(
                table(ds), parents_exist(contract, ds, "d")))
            gone[name] = cur.rowcount
    return gone


def without_exists_with(raw: dict[str, Any], source: str = "<flat>") -> Contract:
    """The contract with no dataset existing only with its parents (everything else the same)."""
    data = copy.deepcopy(raw)
    for ds in data["datasets"].values():
        ds.pop("exists_with", None)
    return parse_contract(yaml.safe_dump(data, sort_keys=False), source=source)
